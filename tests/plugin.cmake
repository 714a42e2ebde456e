# (tests/plugin_hostile.cmake, included after every suite, gives test_plugin the hostile
# plugins' directory and its build dependencies.)
if(TARGET clformer-opencl)
  add_dependencies(test_plugin clformer-opencl)
endif()
# the README check and the out-of-tree build of the example read the sources
target_compile_definitions(test_plugin PRIVATE CLF_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
