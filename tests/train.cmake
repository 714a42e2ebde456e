# The train suite also checks the OpenCL backend's loss curve against the CPU's when built.
if(TARGET clformer-opencl)
  target_compile_definitions(test_train PRIVATE CLF_HAVE_OPENCL=1)
  add_dependencies(test_train clformer-opencl)
endif()
