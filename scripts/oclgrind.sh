#!/usr/bin/env bash
# Runs the OpenCL suites on Oclgrind, a simulated OpenCL 1.2 GPU that reports data races
# (--data-races), out-of-bounds and uninitialised accesses and divergent barriers: what
# PoCL forgives and GPU drivers do not (backends/opencl/README.md, "Portable kernels").
#
# Fails on any Oclgrind report (its log), on a failing check, and on a process that does
# not exit cleanly (a crash at exit included). Under `oclgrind` the simulator is the only
# OpenCL platform; the suites pick it by name (CLF_TEST_DEVICE) and run small shapes and a subset of the
# fixtures (CLF_TEST_SMALL=1). The simulator interprets every work-item, so the pass runs
# the OpenCL test cases only, two suites at a time.
#
#   scripts/oclgrind.sh              the default pass (below)
#   scripts/oclgrind.sh opencl ...   only these suites (names as in ctest), decode and
#                                    train included
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh

if ! command -v oclgrind >/dev/null; then
  echo "oclgrind.sh: oclgrind is not installed (scripts/deps.sh installs it)" >&2
  exit 1
fi
dir=${CLF_OCLGRIND_BUILD:-build}
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$dir" -j"$(nproc)"
if [ ! -e "$dir/lib/clformer/clformer-opencl.so" ]; then
  echo "oclgrind.sh: $dir/lib/clformer/clformer-opencl.so was not built (OpenCL or CLBlast missing)" >&2
  exit 1
fi

# suite:test case (Check's CK_RUN_CASE; empty: every case of the suite). The default pass
# (about 5 minutes on 2 idle cores) runs every op and its backward (the opencl_* suites of
# the op families, the plugin ops, the training ops with their finite-difference checks on
# small shapes) and the forward pass of three fixtures (model). decode and train run only
# when named, being too slow for it: decode re-runs the full forward pass for every token it
# checks (about a hundred passes per fixture for greedy, three hundred for beams, each tens
# of seconds on the simulator); train takes optimizer steps.
# Longest first, so that the two at a time end together.
default=(train_ops_attention:opencl plugin_ops_norm:opencl model:fixtures opencl_attention:
  opencl_gemm: opencl_train: train_ops_layernorm:opencl train_ops_optim:opencl opencl_norm:
  opencl_ops: opencl_capture: opencl_errors: opencl_lifecycle: opencl_device: opencl_limits:
  train_ops:opencl
  plugin_ops:opencl plugin_ops_activation:opencl)
all=("${default[@]}" decode:opencl train:opencl)
if [ $# -gt 0 ]; then
  sel=()
  for name in "$@"; do
    found=""
    for s in "${all[@]}"; do
      if [ "${s%%:*}" = "$name" ]; then sel+=("$s"); found=1; fi
    done
    [ -n "$found" ] || { echo "oclgrind.sh: no suite '$name' in this pass" >&2; exit 2; }
  done
else
  sel=("${default[@]}")
fi

out="$dir/oclgrind"
rm -rf "$out"
mkdir -p "$out"
export CLF_TEST_DEVICE=Oclgrind CLF_TEST_SMALL=1
# Programs built by the simulator are cached for the pass only; CLBlast compiles its own
# in each process.
export CLF_CACHE_DIR="$out/cache" XDG_CACHE_HOME="$out"
export CK_DEFAULT_TIMEOUT=600 CK_TIMEOUT_MULTIPLIER=2

# run_one SUITE:CASE -> $out/SUITE.out (stdout), .err (stderr), .log (Oclgrind's reports),
# .rc (exit status). Oclgrind opens its log afresh in every process that starts OpenCL
# (each forked Check test), truncating a file: the log is a pipe (/dev/fd/3) instead, which
# collects the reports of all of them.
run_one() {
  local suite=${1%%:*} case=${1#*:} bin
  bin="$dir/bin/test_$suite"
  if [ -n "$case" ]; then export CK_RUN_CASE="$case"; else unset CK_RUN_CASE; fi
  local t0=$SECONDS
  { timeout 900 oclgrind --data-races --log /dev/fd/3 "$bin" 3>&1 \
      >"$out/$suite.out" 2>"$out/$suite.err"
    echo $? >"$out/$suite.rc"; } | cat >"$out/$suite.log"
  echo $((SECONDS - t0)) >"$out/$suite.s"
}
export -f run_one
export dir out

start=$SECONDS
printf '%s\n' "${sel[@]}" | xargs -P "$(nproc)" -I{} bash -c 'run_one "$1"' _ {}

failed=0
for s in "${sel[@]}"; do
  suite=${s%%:*}
  rc=$(cat "$out/$suite.rc")
  reports=$(grep -c . "$out/$suite.log" || true)
  # a pass that ran no check (a wrong case name, the OpenCL part skipped) proves nothing
  if grep -q "Checks: 0," "$out/$suite.out" || ! grep -q "Checks: " "$out/$suite.out"; then
    failed=1
    echo "---- $suite: FAILED (ran no check)"
    tail -n 30 "$out/$suite.out"
  elif [ "$rc" != 0 ] || [ "$reports" != 0 ]; then
    failed=1
    echo "---- $suite: FAILED (exit status $rc, $reports lines of Oclgrind reports)"
    tail -n 30 "$out/$suite.out"
    tail -n 20 "$out/$suite.err"
    head -n 80 "$out/$suite.log"
  else
    echo "---- $suite: passed, no Oclgrind report ($(tail -n 1 "$out/$suite.out"); $(cat "$out/$suite.s") s)"
  fi
done
echo "oclgrind.sh: $((SECONDS - start)) s; logs in $out/"
exit $failed
