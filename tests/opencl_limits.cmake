# The OpenCL suite test_opencl_limits.c: built and run as every OpenCL suite is.
include(${CMAKE_CURRENT_LIST_DIR}/opencl.cmake)
# test_local_size_knob asks the kernels for their own work-group limit
# (clGetKernelWorkGroupInfo), so this suite alone links the ICD loader.
if(TARGET clformer-opencl)
  get_target_property(clf_ocl_libs clformer-opencl CLF_OPENCL_LIBRARIES)
  target_link_libraries(${suite} PRIVATE ${clf_ocl_libs})
endif()
