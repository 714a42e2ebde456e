# The training-op suites (test_train_ops*.c, one op family each; their .cmake files include
# this one) share tests/train_ops_util.c, and run every check on the OpenCL backend too
# when it is built (that part is skipped, saying why, when the backend finds no OpenCL
# device).
target_sources(${suite} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/train_ops_util.c)
if(TARGET clformer-opencl)
  target_compile_definitions(${suite} PRIVATE CLF_HAVE_OPENCL=1)
  add_dependencies(${suite} clformer-opencl)
endif()
