# The mbart suite: the family parity suite on tests/fixtures/mbart (as m2m100.cmake).
include(${CMAKE_CURRENT_SOURCE_DIR}/m2m100.cmake)
