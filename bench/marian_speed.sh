#!/bin/sh
# The full-size Marian speed figure (issue 17, item 7): a randomly initialised MarianMTModel
# shaped as OPUS-MT's (d_model 512, 6+6 layers, 8 heads, FFN 2048, vocabulary 58,101; as
# bench/marian_fullsize.sh builds it) decoded by clformer and by transformers' generate()
# on the same 50 sentences, greedy and beam 4, at batch 1 and BATCH, with THREADS threads
# each, interleaved, the median of REPEAT rounds (bench/marian_speed.py; its docstring says
# how the outputs are held equal). Result: bench/RESULTS.md.
#
#   bench/marian_speed.sh [VENV] [OUTDIR] [WEIGHT_TYPE...]
#
# VENV: transformers==4.40.2 and sentencepiece on Debian's python3-torch (default
# /work/venv-marian); OUTDIR: the model (~700 MB, default /tmp/clf-marian-speed; reused
# when there); WEIGHT_TYPEs: clformer's --weight-type values (default: f32 f16 int8).
# Environment: THREADS (2), REPEAT (3), MAX_LENGTH (32), BATCH (16), SENTENCES (50), PYTHON
# (default VENV's), DEVICE (cpu; gpu: transformers on CUDA in FP16 against clformer OpenCL
# on OCL_DEVICE, default NVIDIA, weight types f32 f16: issue 36's stand-in for CTranslate2
# on CUDA). Needs a Release build in build/.
set -eu
VENV=${1:-/work/venv-marian}
OUT=${2:-/tmp/clf-marian-speed}
[ $# -ge 2 ] && shift 2 || shift $#
if [ $# -eq 0 ]; then
    if [ "${DEVICE:-cpu}" = gpu ]; then set -- f32 f16; else set -- f32 f16 int8; fi
fi
PYTHON=${PYTHON:-$VENV/bin/python}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
unset OPENBLAS_CORETYPE
if [ ! -f "$OUT/hf/model.safetensors" ]; then
    rm -rf "$OUT"
    "$PYTHON" "$ROOT/tests/reference/make_marian_fixture.py" --full-size "$OUT" \
        --model-only
fi
rm -rf "$OUT/clf"
"$ROOT/build/bin/clformer" import marian "$OUT/hf" -o "$OUT/clf"
uptime
"$PYTHON" "$ROOT/bench/marian_speed.py" "$OUT/hf" "$OUT/clf" \
    "$ROOT/build/bin/clformer" "$@"
uptime
