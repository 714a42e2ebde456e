# The fault-injection suite (tests/test_fault.c): CLF_FAULT on the CLI, with the OpenCL
# backend where it is built (its tests then need a device, or are skipped saying why; a
# failure under CLF_TEST_REQUIRE_OPENCL=1). `ctest -R fault` runs it alone, on the device
# CLF_TEST_DEVICE names.
target_sources(test_fault PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/crash_util.c)
if(TARGET clformer-opencl)
  target_compile_definitions(test_fault PRIVATE CLF_HAVE_OPENCL=1)
  add_dependencies(test_fault clformer-opencl)
endif()
