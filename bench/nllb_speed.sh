#!/bin/sh
# NLLB-200-distilled-600M-shaped decoding speed (issue 38, item 5): clformer against
# CTranslate2 int8 and transformers' generate() on one random model of that shape, the same
# sentences and threads, interleaved, median of REPEAT (bench/nllb_speed.py says how), and
# the output layer's share of clformer's decoding (a twin of the model with an 8,206-token
# vocabulary, decoded alike). Result: bench/RESULTS.md.
#
#   bench/nllb_speed.sh [VENV] [OUTDIR] [WEIGHT_TYPE...]
#
# VENV: transformers==4.40.2, sentencepiece, protobuf and ctranslate2 on Debian's
# python3-torch (default /work/venv-ct2, as bench/ct2_compare.sh makes it); OUTDIR: the
# models (~7 GB, default /tmp/clf-nllb-speed; reused when there); WEIGHT_TYPEs: clformer's
# --weight-type values (default: f32 int8). Environment: THREADS (2), REPEAT (3),
# MAX_LENGTH (32), BATCH (32), SENTENCES (32), CASES ("greedy:1 beam4:4"). Needs a Release
# build in build/.
set -eu
VENV=${1:-/work/venv-ct2}
OUT=${2:-/tmp/clf-nllb-speed}
[ $# -ge 2 ] && shift 2 || shift $#
[ $# -gt 0 ] || set -- f32 int8
ROOT=$(cd "$(dirname "$0")/.." && pwd)
unset OPENBLAS_CORETYPE
py() { "$VENV/bin/python" "$ROOT/bench/nllb_speed.py" "$@"; }
clf=$ROOT/build/bin/clformer
if [ ! -f "$OUT/ct2/model.bin" ]; then
    rm -rf "$OUT"
    mkdir -p "$OUT/small"
    py make "$OUT"
    py convert "$OUT"
    "$clf" import "$OUT/hf" -o "$OUT/clf"
    NLLB_SPEED_PIECES=8000 py make "$OUT/small"
    "$clf" import "$OUT/small/hf" -o "$OUT/small/clf"
    rm -rf "$OUT/small/hf"
fi
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
    "$(nproc) cores, clformer $(git -C "$ROOT" rev-parse --short HEAD)," \
    "CTranslate2 $("$VENV/bin/python" -c 'import ctranslate2; print(ctranslate2.__version__)')"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
py run "$OUT" "$clf" "$@"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
