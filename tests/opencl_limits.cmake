# The OpenCL suite test_opencl_limits.c: built and run as every OpenCL suite is.
include(${CMAKE_CURRENT_LIST_DIR}/opencl.cmake)
