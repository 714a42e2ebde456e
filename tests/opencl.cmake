# Included by tests/opencl_<family>.cmake for each OpenCL suite (tests/test_opencl_<family>.c,
# ctest test opencl_<family>; ${module} and ${suite} come from tests/CMakeLists.txt's loop).
# Each suite links the shared helpers (opencl_testutil.c) and loads clformer-opencl from the
# build tree. Without the backend (OpenCL or CLBlast missing at configure time) a suite only
# prints why and exits 77: ctest "skipped". It also exits 77 when the backend is built but the
# machine has no OpenCL device.
set_tests_properties(${module} PROPERTIES SKIP_RETURN_CODE 77)
target_sources(${suite} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/opencl_testutil.c)
if(TARGET clformer-opencl)
  add_dependencies(${suite} clformer-opencl)
  # ocl_errors.c is compiled in too, to test the error-name tables directly; it needs the
  # OpenCL headers only (no OpenCL call, so no libOpenCL link).
  get_target_property(clf_ocl_inc clformer-opencl CLF_OPENCL_INCLUDE_DIRS)
  target_sources(${suite} PRIVATE ${CMAKE_SOURCE_DIR}/backends/opencl/ocl_errors.c)
  target_include_directories(${suite} PRIVATE ${CMAKE_SOURCE_DIR}/backends/opencl ${clf_ocl_inc})
  target_compile_definitions(${suite} PRIVATE CLF_HAVE_OPENCL=1 CL_TARGET_OPENCL_VERSION=120)
endif()
# The suites of kernels (their .cmake sets CLF_OPENCL_KERNEL_SUITE) run twice more, as
# opencl_<family>_wg_min and _wg_max: with CLF_OPENCL_LOCAL_SIZE=min (work-groups of 1) and
# =max (the largest the device and the kernel allow: 4096 on PoCL, 64 to 1024 on GPUs),
# since PoCL's default sizes are not what GPUs run. Not in the sanitized build: a work-group
# size changes only device code, which the sanitizers do not see (the suite runs once there).
if(CLF_OPENCL_KERNEL_SUITE AND NOT CLF_SANITIZE)
  get_test_property(${module} ENVIRONMENT clf_ocl_env)
  foreach(size min max)
    add_test(NAME ${module}_wg_${size} COMMAND ${suite})
    set_tests_properties(${module}_wg_${size} PROPERTIES SKIP_RETURN_CODE 77
      ENVIRONMENT "${clf_ocl_env};CLF_OPENCL_LOCAL_SIZE=${size}")
  endforeach()
endif()
unset(CLF_OPENCL_KERNEL_SUITE)
# (LeakSanitizer suppressions for the OpenCL runtime: tests/CMakeLists.txt, all suites.)
