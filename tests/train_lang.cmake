# The train_lang suite reads the NLLB and mBART-50 framing references (train_framing.json)
# with the JSON reader (clformer/json.h), whose trees are Jansson's, and the M2M-100 training
# reference with hf_parity.c's reader.
target_sources(test_train_lang PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/hf_parity.c)
target_link_libraries(test_train_lang PRIVATE PkgConfig::JANSSON)
