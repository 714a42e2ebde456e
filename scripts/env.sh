# Sourced by the scripts: writable caches for PoCL and clformer's OpenCL program cache.
export POCL_CACHE_DIR="${POCL_CACHE_DIR:-${TMPDIR:-/tmp}/clformer-pocl-cache}"
export XDG_CACHE_HOME="${XDG_CACHE_HOME:-${TMPDIR:-/tmp}/clformer-xdg-cache}"
mkdir -p "$POCL_CACHE_DIR" "$XDG_CACHE_HOME"
