# The plugin suite loads the shipped plugins from the build tree and the hostile ones that
# tests/plugin_hostile.cmake builds (outside the search path).
target_compile_definitions(test_plugin PRIVATE
  CLF_HOSTILE_PLUGIN_DIR="${CMAKE_CURRENT_BINARY_DIR}/hostile-plugins")
add_dependencies(test_plugin hostile-plugins)
if(TARGET clformer-opencl)
  add_dependencies(test_plugin clformer-opencl)
endif()
