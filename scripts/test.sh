#!/usr/bin/env bash
# Builds (if needed) and runs every Check suite through ctest. With CLF_SANITIZE=1 it uses a
# separate AddressSanitizer + UBSan build in build-asan/.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
# An OpenCL check that cannot run (no driver, no device, backend not built) fails instead of
# being skipped (tests/testutil.h). CLF_TEST_REQUIRE_OPENCL=0 scripts/test.sh skips them,
# saying why, on a machine without OpenCL.
export CLF_TEST_REQUIRE_OPENCL="${CLF_TEST_REQUIRE_OPENCL:-1}"
dir=build
flags=(-DCMAKE_BUILD_TYPE=Release)
if [ "${CLF_SANITIZE:-0}" = 1 ]; then
  dir=build-asan
  flags=(-DCMAKE_BUILD_TYPE=Debug -DCLF_SANITIZE=ON)
  # intercept_tls_get_addr=0: up to GCC 13 the runtime's __tls_get_addr interceptor takes a
  # dynamic TLS block that happens to start 16 bytes past a page boundary for a pre-2.25
  # glibc header and reads garbage as its bounds; LeakSanitizer's exit-time tracer then
  # crashes ("Tracer caught signal 11", google/sanitizers#1353). PoCL's threads and the
  # dlopen'd backends make such blocks common. Turning the interceptor off can only add
  # leak reports (dynamic TLS is no longer scanned for pointers), never hide one.
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
fi
cmake -S . -B "$dir" "${flags[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)"
repeat=()
if [ "${CLF_SANITIZE:-0}" = 1 ]; then
  # Should LeakSanitizer's tracer still crash by itself (see ASAN_OPTIONS above), a suite
  # that fails is run once more. The suites are deterministic: a real failure fails twice.
  repeat=(--repeat until-pass:2)
fi
ctest --test-dir "$dir" --output-on-failure -j"$(nproc)" "${repeat[@]}"
