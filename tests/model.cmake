# The model suite also runs the fixtures on the OpenCL backend when it is built.
if(TARGET clformer-opencl)
  target_compile_definitions(test_model PRIVATE CLF_HAVE_OPENCL=1)
  add_dependencies(test_model clformer-opencl)
endif()
