# The OpenCL lifecycle suite loads clformer-opencl from the build tree; without the backend
# or an OpenCL device it says why and exits 77: ctest "skipped".
set_tests_properties(opencl_lifecycle PROPERTIES SKIP_RETURN_CODE 77)
if(TARGET clformer-opencl)
  add_dependencies(test_opencl_lifecycle clformer-opencl)
endif()
