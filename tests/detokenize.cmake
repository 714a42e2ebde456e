# test_detokenize.c reads its cases (tests/fixtures/clean_up_spaces.json) with Jansson.
target_link_libraries(test_detokenize PRIVATE PkgConfig::JANSSON)
