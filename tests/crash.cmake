# The crash-safety suite (tests/test_crash.c) runs `clformer train` and kills it: it shares
# its helpers (tests/crash_util.c) with the fault-injection suite.
target_sources(test_crash PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/crash_util.c)
