# The plugin-op suite runs every check on the OpenCL backend too when it is built (that
# part is skipped, saying why, when the backend finds no OpenCL device).
if(TARGET clformer-opencl)
  target_compile_definitions(test_plugin_ops PRIVATE CLF_HAVE_OPENCL=1)
  add_dependencies(test_plugin_ops clformer-opencl)
endif()
