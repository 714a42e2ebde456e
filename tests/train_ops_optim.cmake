include(${CMAKE_CURRENT_SOURCE_DIR}/train_ops.cmake)
