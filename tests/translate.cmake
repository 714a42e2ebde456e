# The translate suite also unit-tests the CLI's PNG writer (tools/png.c), decoding its
# files with libspng.
pkg_check_modules(SPNG REQUIRED IMPORTED_TARGET spng)
target_sources(test_translate PRIVATE ${CMAKE_SOURCE_DIR}/tools/png.c)
target_include_directories(test_translate PRIVATE ${CMAKE_SOURCE_DIR}/tools)
target_link_libraries(test_translate PRIVATE PkgConfig::SPNG)
# With the OpenCL backend built, the suite also checks it translates as the CPU does.
if(TARGET clformer-opencl)
  target_compile_definitions(test_translate PRIVATE CLF_HAVE_OPENCL=1)
  add_dependencies(test_translate clformer-opencl)
endif()
