include(${CMAKE_CURRENT_SOURCE_DIR}/plugin_ops.cmake)
