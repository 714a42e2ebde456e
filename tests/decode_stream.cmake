# The continuous-decoding suite also runs on the OpenCL backend when it is built.
if(TARGET clformer-opencl)
  target_compile_definitions(test_decode_stream PRIVATE CLF_HAVE_OPENCL=1)
  add_dependencies(test_decode_stream clformer-opencl)
endif()
