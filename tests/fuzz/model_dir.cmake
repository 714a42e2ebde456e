# fuzz_model_dir runs `clformer import` itself: tools/cmd_import.c and the CLI helpers it
# calls are compiled into the target (and its replay), with the fixtures' folder.
# fuzz_provenance runs train's vocabulary check: tools/run_vocab.c and the CLI helpers.
function(clf_fuzz_model_dir_sources target)
  set(tools ${PROJECT_SOURCE_DIR}/tools)
  if(target MATCHES "^fuzz_provenance")
    target_sources(${target} PRIVATE ${tools}/run_vocab.c ${tools}/cli_common.c
      ${tools}/model_dir.c)
    target_include_directories(${target} PRIVATE ${tools})
    target_link_libraries(${target} PRIVATE PkgConfig::JANSSON m)
    return()
  endif()
  if(NOT target MATCHES "^fuzz_model_dir")
    return()
  endif()
  target_sources(${target} PRIVATE ${tools}/cmd_import.c ${tools}/import_marian.c
    ${tools}/import_m2m100.c ${tools}/import_nllb.c ${tools}/import_mbart.c ${tools}/cli_common.c
    ${tools}/model_dir.c)
  target_include_directories(${target} PRIVATE ${tools})
  target_link_libraries(${target} PRIVATE PkgConfig::JANSSON m)
  target_compile_definitions(${target} PRIVATE
    CLF_FUZZ_FIXTURES_DIR="${PROJECT_SOURCE_DIR}/tests/fixtures")
endfunction()
