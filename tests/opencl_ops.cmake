# The OpenCL suite test_opencl_ops.c: built and run as every OpenCL suite is, and again at
# the smallest and the largest work-group size (a suite of our kernels).
set(CLF_OPENCL_KERNEL_SUITE ON)
include(${CMAKE_CURRENT_LIST_DIR}/opencl.cmake)
