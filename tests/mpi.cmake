# The mpi suite runs `mpirun` (CI runs as root: Open MPI refuses root without these two
# variables). Built without MPI, it checks the refusal and exits 77 (ctest "skipped").
set_tests_properties(mpi PROPERTIES SKIP_RETURN_CODE 77)
set_property(TEST mpi APPEND PROPERTY ENVIRONMENT
  "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
if(CLF_MPI)
  target_compile_definitions(test_mpi PRIVATE CLF_HAVE_MPI=1)
endif()
if(TARGET clformer-opencl)
  add_dependencies(test_mpi clformer-opencl)
endif()
