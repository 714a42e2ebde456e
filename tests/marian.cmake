# The marian suite also runs on the OpenCL backend when it is built (CLF_TEST_DEVICE picks
# the device), and runs the CLI (clformer import marian, translate -m); it shares the
# parity checks of hf_parity.c with the m2m_100 family's suites.
target_sources(test_marian PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/hf_parity.c)
if(TARGET clformer-opencl)
  target_compile_definitions(test_marian PRIVATE CLF_HAVE_OPENCL=1)
  add_dependencies(test_marian clformer-opencl)
endif()
