# test_safetensors.c calls the JSON reader (core/src/io/json_jansson.h) and reads its trees.
target_link_libraries(test_safetensors PRIVATE PkgConfig::JANSSON)
