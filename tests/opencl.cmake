# The OpenCL suite loads clformer-opencl from the build tree. Without the backend (OpenCL
# or CLBlast missing at configure time) it only prints why and exits 77: ctest "skipped".
# It also exits 77 when the backend is built but the machine has no OpenCL device.
set_tests_properties(opencl PROPERTIES SKIP_RETURN_CODE 77)
if(TARGET clformer-opencl)
  add_dependencies(test_opencl clformer-opencl)
  # ocl_errors.c is compiled in too, to test the error-name tables directly; it needs the
  # OpenCL headers only (no OpenCL call, so no libOpenCL link).
  get_target_property(clf_ocl_inc clformer-opencl CLF_OPENCL_INCLUDE_DIRS)
  target_sources(test_opencl PRIVATE ${CMAKE_SOURCE_DIR}/backends/opencl/ocl_errors.c)
  target_include_directories(test_opencl PRIVATE ${CMAKE_SOURCE_DIR}/backends/opencl ${clf_ocl_inc})
  target_compile_definitions(test_opencl PRIVATE CLF_HAVE_OPENCL=1 CLF_OCL_ERRORS_LINKED=1
                                                 CL_TARGET_OPENCL_VERSION=120)
endif()
# (LeakSanitizer suppressions for the OpenCL runtime: tests/CMakeLists.txt, all suites.)
