# (tests/plugin_hostile.cmake, included after every suite, gives test_plugin the hostile
# plugins' directory and its build dependencies.)
if(TARGET clformer-opencl)
  add_dependencies(test_plugin clformer-opencl)
endif()
