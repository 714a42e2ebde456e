# clformer serve over loopback (README, "Serving"): tests/serve/test_serve.py starts the CLI's
# server on ephemeral ports with the shipped model and checks every answer against the
# offline `clformer translate` of the same sentences, and the M2M-100 fixture imported and
# served (languages per request). Python's standard library only, and curl for form bodies.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_test(NAME serve COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/serve/test_serve.py
  $<TARGET_FILE:clformer-cli> ${CMAKE_SOURCE_DIR}/models/en-de-gettext
  ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/m2m100/hf)
set_tests_properties(serve PROPERTIES TIMEOUT 600
  ENVIRONMENT "POCL_CACHE_DIR=${CLF_TEST_CACHE_DIR}/pocl;XDG_CACHE_HOME=${CLF_TEST_CACHE_DIR};CLF_CACHE_DIR=${CLF_TEST_CACHE_DIR}/clformer;CLF_BACKEND=cpu;LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/lsan.supp${CLF_TEST_WAIT_POLICY}")

# The same server driven by LibreTranslate's Python client, libretranslatepy (PyPI; not in
# Debian): tests/serve/test_libre_client.py runs in the venv scripts/deps.sh makes. The
# venv needs PyPI, which a machine may not reach: the suite is registered when the venv has
# the package at configure time, and configuring says so when it does not.
if(DEFINED ENV{CLF_TEST_VENV})
  set(CLF_TEST_VENV_DEFAULT "$ENV{CLF_TEST_VENV}")
else()
  set(CLF_TEST_VENV_DEFAULT "$ENV{HOME}/.local/share/clformer/venv-test")
endif()
set(CLF_TEST_VENV "${CLF_TEST_VENV_DEFAULT}" CACHE PATH
  "venv with the tests' PyPI packages (scripts/deps.sh makes it)")
set(CLF_HAVE_LIBRE_CLIENT 0)
if(EXISTS "${CLF_TEST_VENV}/bin/python")
  execute_process(COMMAND "${CLF_TEST_VENV}/bin/python" -c "import libretranslatepy"
    RESULT_VARIABLE libre_rc OUTPUT_QUIET ERROR_QUIET)
  if(libre_rc EQUAL 0)
    set(CLF_HAVE_LIBRE_CLIENT 1)
  endif()
endif()
if(NOT CLF_HAVE_LIBRE_CLIENT)
  message(STATUS "serve_libre: not registered: no libretranslatepy in ${CLF_TEST_VENV} "
    "(scripts/deps.sh installs it where PyPI is reachable)")
else()
add_test(NAME serve_libre COMMAND ${Python3_EXECUTABLE}
  ${CMAKE_CURRENT_SOURCE_DIR}/serve/test_libre_client.py $<TARGET_FILE:clformer-cli>
  ${CMAKE_SOURCE_DIR}/models/en-de-gettext ${CLF_TEST_VENV})
set_tests_properties(serve_libre PROPERTIES TIMEOUT 300
  ENVIRONMENT "POCL_CACHE_DIR=${CLF_TEST_CACHE_DIR}/pocl;XDG_CACHE_HOME=${CLF_TEST_CACHE_DIR};CLF_CACHE_DIR=${CLF_TEST_CACHE_DIR}/clformer;CLF_BACKEND=cpu;LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/lsan.supp${CLF_TEST_WAIT_POLICY}")
endif()
