#!/usr/bin/env bash
# The device half of scripts/gpu-pack.sh, run in the repository root on the GPU machine:
# unpacks the build and its libraries, points the build's absolute paths at this checkout,
# registers NVIDIA's OpenCL ICD where it is not, then runs the OpenCL test suites on the
# device and bench/gpu.sh (forward against PyTorch CUDA, decoding, CTranslate2 on CUDA or
# its stand-in). Logs under $OUT (the device tool's folder) when set, else runs/gpu.
#   scripts/gpu-run.sh [device]     (default NVIDIA)
# Env: TESTS (ctest -R regex; default the suites that use OpenCL; none skips them),
#      BENCH (0 skips bench/gpu.sh), PYTHON (default python3: the machine's PyTorch).
set -uo pipefail # not -e: the suites' failure still lets the benchmark run
cd "$(dirname "$0")/.."
device=${1:-NVIDIA}
logs=${OUT:-runs/gpu}
mkdir -p "$logs"
[ -f .gpu-pack/build.tar.xz ] || { echo "gpu-run: no .gpu-pack (run scripts/gpu-pack.sh here first)" >&2; exit 2; }
libs=${TMPDIR:-/tmp}/clformer-gpu-libs
tar -xJf .gpu-pack/build.tar.xz && rm -rf "$libs" && mkdir -p "$libs" &&
  tar -xJf .gpu-pack/libs.tar.xz -C "$libs" || { echo "gpu-run: unpacking failed" >&2; exit 2; }
export LD_LIBRARY_PATH=$libs/lib:$(pwd)/build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
root=$(cat .gpu-pack/root)
if [ "$root" != "$(pwd)" ] && [ ! -e "$root" ]; then
  mkdir -p "$(dirname "$root")" && ln -s "$(pwd)" "$root"
fi
if [ ! -e /etc/OpenCL/vendors/nvidia.icd ] && ldconfig -p | grep -q libnvidia-opencl.so.1; then
  mkdir -p /etc/OpenCL/vendors && echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
fi
. scripts/env.sh
build/bin/clformer devices 2>&1 | tee "$logs/devices.txt"
status=0
TESTS=${TESTS:-'^(opencl_.*|model|decode|translate|plugin_ops.*|train_ops.*|quant|marian)$'}
if [ "$TESTS" != none ]; then
  CLF_TEST_DEVICE=$device CLF_OPENCL_DEVICE=$device CLF_TEST_REQUIRE_OPENCL=1 \
    ctest --test-dir build -j8 --timeout 220 -R "$TESTS" > "$logs/ctest.log" 2>&1 || status=1
  grep -E 'tests passed|\*\*\*|Failed|Timeout' "$logs/ctest.log"
fi
if [ "${BENCH:-1}" != 0 ]; then
  TESTS=none PYTHON=${PYTHON:-python3} bench/gpu.sh "$device" > "$logs/gpu.log" 2>&1 || status=1
  sed -n '/^## for bench\/RESULTS.md/,$p' "$logs/gpu.log" | tail -n 60
fi
exit $status
