#!/usr/bin/env bash
# Builds the libFuzzer targets (build-fuzz/: clang, ASan + UBSan, -DCLF_FUZZ=ON) if needed
# and runs one target, or each (CLF_FUZZ_JOBS at a time, default nproc), for SECONDS (default 60) on top of its committed
# corpus tests/fuzz/corpus/<target>/. New corpus entries and findings go to a scratch
# directory (printed), never into the tree: a finding is minimized by hand
# (fuzz_<target> -minimize_crash=1 FILE), fixed, and its input committed to the corpus.
#   scripts/fuzz.sh TARGET|all [SECONDS]     TARGET: checkpoint config dataset model_dir
#                                            provenance safetensors serve_request spm
#                                            tokenizer translate (all: every tests/fuzz/fuzz_<target>.c)
# Environment: CLF_FUZZ_BUILD (build dir, default build-fuzz), CLF_FUZZ_WORK (scratch dir,
# default a new one under ${TMPDIR:-/tmp}), CLF_FUZZ_ARGS (more libFuzzer flags).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
target=${1:?usage: scripts/fuzz.sh TARGET|all [SECONDS]}
seconds=${2:-60}
build=${CLF_FUZZ_BUILD:-build-fuzz}
targets=()
for src in tests/fuzz/fuzz_*.c; do
  name=$(basename "$src" .c)
  [ "$name" = fuzz_util ] || targets+=("${name#fuzz_}")
done
if [ "$target" != all ]; then
  case " ${targets[*]} " in
    *" $target "*) targets=("$target") ;;
    *) echo "fuzz.sh: no target '$target' (have: ${targets[*]})" >&2; exit 2 ;;
  esac
fi

# -O2 -g without NDEBUG: asserts stay on; no OpenCL (nothing there reads files)
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCLF_FUZZ=ON -DCLF_TESTS=OFF \
  -DCLF_BACKEND_OPENCL=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g" >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${targets[@]/#/fuzz_}"

work=${CLF_FUZZ_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/clformer-fuzz.XXXXXX")}
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:intercept_tls_get_addr=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp}"
# One target per core at a time (CLF_FUZZ_JOBS, default nproc): each fuzzer is one process
# and one thread, so on CI's 2 cores the pass takes half as long as one after the other.
jobs=${CLF_FUZZ_JOBS:-$(nproc)}
fuzz_one() {
  local t=$1
  mkdir -p "$work/$t/corpus"
  local args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
    -artifact_prefix="$work/$t/")
  [ -f "tests/fuzz/$t.dict" ] && args+=(-dict="tests/fuzz/$t.dict")
  # shellcheck disable=SC2086
  if ! "$build/bin/fuzz_$t" "${args[@]}" ${CLF_FUZZ_ARGS:-} "$work/$t/corpus" \
    "tests/fuzz/corpus/$t" >"$work/$t/log" 2>&1; then
    touch "$work/$t/FAILED"
  fi
}
running=0
for t in "${targets[@]}"; do
  echo "== fuzz_$t for ${seconds}s (scratch: $work/$t)"
  fuzz_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true
failed=()
for t in "${targets[@]}"; do
  if [ -e "$work/$t/FAILED" ]; then
    failed+=("$t")
    echo "== fuzz_$t: finding" >&2
    tail -n 60 "$work/$t/log" >&2
  else
    echo "== fuzz_$t"
    grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added)' "$work/$t/log" || true
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz.sh: findings in: ${failed[*]} (inputs and logs under $work)" >&2
  exit 1
fi
echo "fuzz.sh: no findings (scratch: $work)"
