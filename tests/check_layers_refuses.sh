#!/usr/bin/env bash
# The layer check must fail on a wrong call: a copy of the build's core objects in which
# base/rng.c also calls a config/ function (base/ may call nothing) is checked, and
# scripts/check-layers.sh has to refuse it, naming the file, the symbol and the rule.
#   tests/check_layers_refuses.sh BUILD_DIR C_COMPILER
set -uo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="$1"
cc="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/core/CMakeFiles" "$tmp/lib"
cp -r "$build/core/CMakeFiles/clformer-core.dir" "$tmp/core/CMakeFiles/"
cp -r "$build/lib/clformer" "$tmp/lib/"
cat "$src/core/src/base/rng.c" - >"$tmp/rng_wrong.c" <<'C'
int clf_model_ffn_gated(const void *m);
int clf_rng_wrong_layer(void);
int clf_rng_wrong_layer(void) { return clf_model_ffn_gated(0); }
C
"$cc" -c -fPIC -I"$src/core/include" -I"$src/core/src" -D_GNU_SOURCE \
    -o "$tmp/core/CMakeFiles/clformer-core.dir/src/base/rng.c.o" "$tmp/rng_wrong.c" || exit 1
bash "$src/scripts/check-layers.sh" "$build" >/dev/null || { echo "the build itself fails the check"; exit 1; }
out="$(bash "$src/scripts/check-layers.sh" "$tmp")"
rc=$?
echo "$out"
want="check-layers: core/src/base/rng.c calls clf_model_ffn_gated of core/src/config/config.c: base/ may not call config/"
if [ $rc = 0 ] || ! grep -qF "$want" <<<"$out"; then
    echo "FAIL: a call from base/ to config/ was not refused"
    exit 1
fi
echo "ok: the wrong call is refused"
