# The m2m100 suite is the m2m_100 family's parity suite (family_suite.c) on its fixture; it
# also runs on the OpenCL backend when it is built (CLF_TEST_DEVICE picks the device), and
# runs the CLI (clformer import, translate -m --source-lang --target-lang).
target_sources(test_${module} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/family_suite.c
  ${CMAKE_CURRENT_SOURCE_DIR}/hf_parity.c)
if(TARGET clformer-opencl)
  target_compile_definitions(test_${module} PRIVATE CLF_HAVE_OPENCL=1)
  add_dependencies(test_${module} clformer-opencl)
endif()
