# The OpenCL suite test_opencl_capture.c: built and run as every OpenCL suite is.
include(${CMAKE_CURRENT_LIST_DIR}/opencl.cmake)
