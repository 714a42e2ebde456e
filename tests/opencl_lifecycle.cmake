# The OpenCL lifecycle suite loads clformer-opencl from the build tree; without the backend
# or an OpenCL device it says why and exits 77: ctest "skipped".
set_tests_properties(opencl_lifecycle PROPERTIES SKIP_RETURN_CODE 77)
if(TARGET clformer-opencl)
  add_dependencies(test_opencl_lifecycle clformer-opencl)
  # The suite defines clCreateContext, clReleaseContext and clReleaseProgram to watch the
  # release order: exported from the executable, they come before the ICD loader's for the
  # dlopen'd backend and CLBlast. The OpenCL headers only; the loader is found at run time.
  get_target_property(clf_ocl_inc clformer-opencl CLF_OPENCL_INCLUDE_DIRS)
  target_include_directories(test_opencl_lifecycle PRIVATE ${clf_ocl_inc})
  target_compile_definitions(test_opencl_lifecycle PRIVATE CLF_HAVE_OPENCL=1
    CL_TARGET_OPENCL_VERSION=120)
  set_target_properties(test_opencl_lifecycle PROPERTIES ENABLE_EXPORTS ON)
  target_link_libraries(test_opencl_lifecycle PRIVATE ${CMAKE_DL_LIBS})
endif()
