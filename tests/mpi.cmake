# The mpi suite runs `mpirun` (CI runs as root: Open MPI refuses root without the first two
# variables). Under LeakSanitizer, Open MPI's own leaks are suppressed by library name
# (tests/lsan.supp), which needs full stacks: its libraries have no frame pointers and its
# components are unloaded before the leak check. Built without MPI, the suite checks the
# refusal and exits 77 (ctest "skipped").
set_tests_properties(mpi PROPERTIES SKIP_RETURN_CODE 77)
set_property(TEST mpi APPEND PROPERTY ENVIRONMENT
  "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
  "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/lsan.supp:fast_unwind_on_malloc=0")
if(CLF_MPI)
  target_compile_definitions(test_mpi PRIVATE CLF_HAVE_MPI=1)
endif()
if(TARGET clformer-opencl)
  add_dependencies(test_mpi clformer-opencl)
endif()
