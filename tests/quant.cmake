# The quant suite also runs its model checks on the OpenCL backend when it is built.
if(TARGET clformer-opencl)
  target_compile_definitions(test_quant PRIVATE CLF_HAVE_OPENCL=1)
  add_dependencies(test_quant clformer-opencl)
endif()
