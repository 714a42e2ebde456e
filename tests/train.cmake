# The train suite also checks the OpenCL backend's loss curve against the CPU's when built.
if(TARGET clformer-opencl)
  target_compile_definitions(test_train PRIVATE CLF_HAVE_OPENCL=1)
  add_dependencies(test_train clformer-opencl)
endif()
# Under the sanitizers the OpenCL half of this suite is left to the opencl and train_ops
# suites (same host code, sanitized there): processes that run this many PoCL kernels
# often end with LeakSanitizer's own tracer crashing at exit (google/sanitizers#1353).
if(CLF_SANITIZE)
  target_compile_definitions(test_train PRIVATE CLF_SANITIZE_BUILD=1)
endif()
