# Real broken shared objects for the loader tests, each in tests/broken-so/ under the name
# the loader looks for (clformer-<name>.so).
foreach(broken no_entry wrong_abi incomplete)
  string(REPLACE "_" "" soname ${broken})
  add_library(broken-${broken} MODULE ${CMAKE_CURRENT_SOURCE_DIR}/broken/${broken}.c)
  target_include_directories(broken-${broken} PRIVATE ${CMAKE_SOURCE_DIR}/core/include)
  set_target_properties(broken-${broken} PROPERTIES PREFIX "" OUTPUT_NAME clformer-${soname}
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/broken-so)
  add_dependencies(test_loader broken-${broken})
endforeach()
target_compile_definitions(test_loader PRIVATE CLF_BROKEN_SO_DIR="${CMAKE_CURRENT_BINARY_DIR}/broken-so")
