#!/usr/bin/env bash
# The clformer Python package's tests: installs python/ built against the CMake build tree
# BUILD_DIR (default build/) into a fresh venv under it, with Debian's python3 and
# --system-site-packages (numpy, pytest, setuptools from Debian) and
# --no-build-isolation (no network: pip's isolation would fetch setuptools from PyPI), then
# runs python/tests with pytest. ctest runs it (tests/CMakeLists.txt, `python`).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
py=/usr/bin/python3 # Debian's, whatever python3 is first on PATH
for m in venv numpy pytest setuptools; do
  if ! "$py" -c "import $m" 2>/dev/null; then
    echo "test-python.sh: $py lacks the module $m: run scripts/deps.sh" >&2
    exit 1
  fi
done
. "$root/scripts/env.sh"
venv="$build/python/venv"
rm -rf "$venv"
mkdir -p "$build/python"
"$py" -m venv --system-site-packages "$venv"
export CLFORMER_BUILD_DIR="$build" PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
export CLFORMER_SANITIZE="${CLF_PYTHON_SANITIZE:-0}"
"$venv/bin/pip" install -q --no-build-isolation "$root/python"
# from outside python/: the tests import the installed package, not the source tree's
cd "$build/python"
if [ "${CLF_PYTHON_SANITIZE:-0}" = 1 ]; then
  # A sanitized tree (CLF_SANITIZE=1 scripts/test.sh): the extension was built with the
  # same -fsanitize flags (setup.py, CLFORMER_SANITIZE) and the runtimes libclformer links
  # are preloaded into Python, which was not built with them. Leak detection is off:
  # CPython keeps its interned objects and arenas at exit, and LeakSanitizer would report
  # them all; test_leaks.py's RSS check stands in for it (skipped here: ASan's quarantine
  # grows RSS by design).
  preload=$(ldd "$build/lib/libclformer.so" | awk '/lib(asan|ubsan)\.so/ {print $3}' | paste -sd:)
  export LD_PRELOAD="$preload"
  export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:intercept_tls_get_addr=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
fi
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider "$root/python/tests"
