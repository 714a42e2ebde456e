#!/usr/bin/env bash
# Installs the Debian packages clformer builds and tests with (Debian 12). clang and
# libclang-rt-14-dev (libFuzzer's runtime; clang only recommends it) are for scripts/fuzz.sh.
# The python3-* packages build and test the Python package (python/, scripts/test-python.sh).
# iso-codes names the languages of `clformer serve`'s GET /languages; curl is the ctest
# `serve`'s client for form bodies.
# Then a venv for the tests that need a PyPI package Debian lacks (libretranslatepy, the
# LibreTranslate client the ctest `serve_libre` drives `clformer serve` with): made with
# --system-site-packages at $CLF_TEST_VENV (default ~/.local/share/clformer/venv-test, read
# by CMake at configure time), pinned versions, so run this script as the user who runs the
# tests (it calls sudo itself for apt). It needs PyPI once; the other tests do not.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
PKGS="build-essential cmake pkg-config libyaml-dev check libopenblas-dev libopenblas0-openmp ocl-icd-opencl-dev
opencl-c-headers pocl-opencl-icd clinfo libclblast-dev libutf8proc-dev libspng-dev libjansson-dev
libsentencepiece-dev libmicrohttpd-dev iso-codes curl libdnnl-dev clang libclang-rt-14-dev oclgrind openmpi-bin
libopenmpi-dev python3-dev python3-venv python3-setuptools python3-wheel python3-numpy python3-pytest"
missing=""
for p in $PKGS; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq --no-install-recommends $missing
fi

venv="${CLF_TEST_VENV:-$HOME/.local/share/clformer/venv-test}"
if ! "$venv/bin/python" -c 'import libretranslatepy' >/dev/null 2>&1; then
  # Without PyPI the other packages and tests still work: say so, and go on (serve_libre
  # then fails, naming this script).
  if ! { python3 -m venv --system-site-packages "$venv" &&
    "$venv/bin/pip" install -q --disable-pip-version-check libretranslatepy==2.1.4; }; then
    echo "deps.sh: could not install libretranslatepy==2.1.4 into $venv (PyPI):" \
      "the ctest serve_libre fails until it is" >&2
  fi
fi
