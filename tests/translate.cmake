# The translate suite also unit-tests the CLI's PNG writer (tools/png.c).
target_sources(test_translate PRIVATE ${CMAKE_SOURCE_DIR}/tools/png.c)
target_include_directories(test_translate PRIVATE ${CMAKE_SOURCE_DIR}/tools)
