# The train_lang suite reads the NLLB and mBART-50 framing references (train_framing.json)
# with the JSON reader (clformer/json.h), whose trees are Jansson's.
target_link_libraries(test_train_lang PRIVATE PkgConfig::JANSSON)
