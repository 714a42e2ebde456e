# The shipped model's suite reads models/ and runs the CLI on both backends.
target_compile_definitions(test_shipped_model PRIVATE CLF_MODELS_DIR="${CMAKE_SOURCE_DIR}/models")
if(TARGET clformer-opencl)
  target_compile_definitions(test_shipped_model PRIVATE CLF_HAVE_OPENCL=1)
  add_dependencies(test_shipped_model clformer-opencl)
endif()
