# The ops suite checks that the CPU backend runs on OpenBLAS's OpenMP build where CMake found
# it (backends/cpu/CMakeLists.txt).
if(CLF_OPENBLAS_OPENMP)
  target_compile_definitions(test_ops PRIVATE CLF_OPENBLAS_OPENMP=1)
endif()
