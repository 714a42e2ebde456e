# The precision suite translates with the shipped model (models/) too.
target_compile_definitions(test_precision PRIVATE CLF_MODELS_DIR="${CMAKE_SOURCE_DIR}/models")
# It runs on the OpenCL backend too when it is built (CLF_TEST_DEVICE picks the device).
if(TARGET clformer-opencl)
  target_compile_definitions(test_precision PRIVATE CLF_HAVE_OPENCL=1)
  add_dependencies(test_precision clformer-opencl)
endif()
