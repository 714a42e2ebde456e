#!/usr/bin/env bash
# Builds (if needed) and runs every Check suite through ctest. With CLF_SANITIZE=1 it uses a
# separate AddressSanitizer + UBSan build in build-asan/.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
dir=build
flags=(-DCMAKE_BUILD_TYPE=Release)
if [ "${CLF_SANITIZE:-0}" = 1 ]; then
  dir=build-asan
  flags=(-DCMAKE_BUILD_TYPE=Debug -DCLF_SANITIZE=ON)
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
fi
cmake -S . -B "$dir" "${flags[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)"
repeat=()
if [ "${CLF_SANITIZE:-0}" = 1 ]; then
  # LeakSanitizer's exit-time stop-the-world tracer now and then crashes by itself ("Tracer
  # caught signal 11 ... LeakSanitizer has encountered a fatal error", google/sanitizers
  # #1353) in processes whose PoCL worker threads are winding down: a suite that fails is
  # run once more. The suites are deterministic, so a real failure or leak fails twice.
  repeat=(--repeat until-pass:2)
fi
ctest --test-dir "$dir" --output-on-failure -j"$(nproc)" "${repeat[@]}"
