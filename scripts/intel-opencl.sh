#!/usr/bin/env bash
# Runs the OpenCL suites on Intel's CPU runtime for OpenCL, a device with cl_khr_fp16: the
# one at hand where the OpenCL backend's F16 products of 8+ rows run in CLBlast's HGEMM
# (NVIDIA's driver, PoCL 3.1 and Oclgrind have no cl_khr_fp16). It also runs on AMD CPUs.
#
# Not in CI: the runtime is no Debian package. It comes from PyPI (`intel-opencl-rt`,
# with its compiler libraries and TBB, about 250 MB) into a virtual environment, used only
# as the runtime's download; no Python runs. The runtime is registered for these suites
# alone, through OCL_ICD_VENDORS (a directory of its own), so that it is the only platform.
#
#   scripts/intel-opencl.sh              every suite (about 7 minutes with 2 cores; the
#                                        runtime compiles slowly)
#   scripts/intel-opencl.sh opencl_gemm quant ...   only these suites (names as in ctest)
# Env: CLF_INTEL_VENV (default ~/.cache/clformer/intel-opencl-venv), BUILD (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh

venv=${CLF_INTEL_VENV:-$HOME/.cache/clformer/intel-opencl-venv}
lib=$venv/lib/libintelocl.so
if [ ! -e "$lib" ]; then
  echo "intel-opencl.sh: installing intel-opencl-rt into $venv" >&2
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q intel-opencl-rt intel-cmplr-lib-rt
fi
vendors=$venv/vendors
mkdir -p "$vendors"
echo "$lib" >"$vendors/intel-cpu.icd"
export OCL_ICD_VENDORS=$vendors CLF_TEST_DEVICE=Intel CLF_OPENCL_DEVICE=Intel
export CLF_TEST_REQUIRE_OPENCL=1
# HGEMM on this CPU device too: by default the backend takes it on GPUs only
export CLF_OPENCL_HGEMM=on

dir=${BUILD:-build}
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$dir" -j"$(nproc)"
"$dir/bin/clformer" devices
if ! "$dir/bin/clformer" devices | grep -q "fp16 yes"; then
  echo "intel-opencl.sh: Intel's runtime does not report cl_khr_fp16 here" >&2
  exit 1
fi

if [ $# -gt 0 ]; then
  regex="^($(IFS='|'; echo "$*"))\$"
  exec ctest --test-dir "$dir" -j"$(nproc)" --timeout 1200 --output-on-failure -R "$regex"
fi
# Every suite but those without OpenCL cases or with a launcher of their own
exec ctest --test-dir "$dir" -j"$(nproc)" --timeout 1200 --output-on-failure \
  -E '^(symbols|mpi|fuzz_replay_.*)$'
