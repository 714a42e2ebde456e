# The mbart suite also runs on the OpenCL backend when it is built (CLF_TEST_DEVICE picks
# the device), and runs the CLI (clformer import, translate -m --source-lang --target-lang).
# Its parity checks are hf_family.c's, shared with the other families' suites.
target_sources(test_mbart PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/hf_family.c)
if(TARGET clformer-opencl)
  target_compile_definitions(test_mbart PRIVATE CLF_HAVE_OPENCL=1)
  add_dependencies(test_mbart clformer-opencl)
endif()
