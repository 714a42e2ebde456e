# clformer serve over loopback (README, "Serving"): tests/serve/test_serve.py starts the CLI's
# server on ephemeral ports with the shipped model and checks every answer against the
# offline `clformer translate` of the same sentences. Python's standard library only.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_test(NAME serve COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/serve/test_serve.py
  $<TARGET_FILE:clformer-cli> ${CMAKE_SOURCE_DIR}/models/en-de-gettext)
set_tests_properties(serve PROPERTIES TIMEOUT 600
  ENVIRONMENT "POCL_CACHE_DIR=${CLF_TEST_CACHE_DIR}/pocl;XDG_CACHE_HOME=${CLF_TEST_CACHE_DIR};CLF_CACHE_DIR=${CLF_TEST_CACHE_DIR}/clformer;CLF_BACKEND=cpu;LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/lsan.supp${CLF_TEST_WAIT_POLICY}")
