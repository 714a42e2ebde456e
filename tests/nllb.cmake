# The nllb suite: the m2m_100 family's parity suite on tests/fixtures/nllb (as m2m100.cmake).
include(${CMAKE_CURRENT_SOURCE_DIR}/m2m100.cmake)
