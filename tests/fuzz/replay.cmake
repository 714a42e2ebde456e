# Included from tests/CMakeLists.txt: each fuzz target's committed corpus replayed once
# through replay_main.c (no libFuzzer; any compiler), as ctest fuzz_replay_<name>.
include(${CMAKE_CURRENT_SOURCE_DIR}/fuzz/model_dir.cmake)
include(${CMAKE_CURRENT_SOURCE_DIR}/fuzz/serve_request.cmake)
file(GLOB CLF_FUZZ_REPLAY_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_*.c)
list(REMOVE_ITEM CLF_FUZZ_REPLAY_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_util.c)
foreach(src ${CLF_FUZZ_REPLAY_SOURCES})
  get_filename_component(target ${src} NAME_WE)
  string(REGEX REPLACE "^fuzz_" "" name ${target})
  add_executable(${target}_replay ${src} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_util.c
    ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/replay_main.c)
  target_link_libraries(${target}_replay PRIVATE clformer)
  # loaded from the build tree: the CPU backend (fuzz_translate decodes on it) and the
  # op plugins (configs may name their ops)
  add_dependencies(${target}_replay clformer-cpu clformer-plugin-activations clformer-plugin-rmsnorm
    clformer-plugin-example)
  clf_fuzz_model_dir_sources(${target}_replay)
  clf_fuzz_serve_request_sources(${target}_replay)
  add_test(NAME fuzz_replay_${name}
    COMMAND ${target}_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${name})
  set_tests_properties(fuzz_replay_${name} PROPERTIES
    ENVIRONMENT "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/lsan.supp")
endforeach()
