# The config suite also reads the shipped model's model.yaml (its languages: section).
target_compile_definitions(test_config PRIVATE CLF_MODELS_DIR="${CMAKE_SOURCE_DIR}/models")
