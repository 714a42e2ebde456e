# The translator suite reads the shipped model (models/) and imports the Marian fixture with
# the CLI.
target_compile_definitions(test_translator PRIVATE CLF_MODELS_DIR="${CMAKE_SOURCE_DIR}/models")
