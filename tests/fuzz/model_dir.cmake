# fuzz_model_dir runs `clformer import` itself: tools/cmd_import.c and the CLI helpers it
# calls are compiled into the target (and its replay), with the Marian fixture's path.
function(clf_fuzz_model_dir_sources target)
  if(NOT target MATCHES "^fuzz_model_dir")
    return()
  endif()
  set(tools ${PROJECT_SOURCE_DIR}/tools)
  target_sources(${target} PRIVATE ${tools}/cmd_import.c ${tools}/cli_common.c
    ${tools}/model_dir.c)
  target_include_directories(${target} PRIVATE ${tools})
  target_link_libraries(${target} PRIVATE PkgConfig::JANSSON m)
  target_compile_definitions(${target} PRIVATE
    CLF_FUZZ_MARIAN_DIR="${PROJECT_SOURCE_DIR}/tests/fixtures/marian/hf")
endfunction()
