#!/bin/sh
# The full-size Marian check (issue 17, "Done when" 3): a randomly initialised MarianMTModel
# shaped as OPUS-MT's (d_model 512, 6+6 layers, 8 heads, FFN 2048, vocabulary 58,101) is
# built and run by transformers 4.40.2 (tests/reference/make_marian_fixture.py
# --full-size), then the marian suite compares clformer with it: `clformer import marian`,
# logits to 1e-4, greedy and beam-4 generate() token for token and the decoded text, for 20
# sentences, on the CPU backend and (when it opens) OpenCL.
#
#   bench/marian_fullsize.sh [VENV] [OUTDIR]
#
# VENV: a venv with transformers==4.40.2, sentencepiece and safetensors on top of Debian's
# python3-torch (default /work/venv-marian); OUTDIR: where the ~600 MB of files go (default
# /tmp/clf-marian-full). Needs a Release build in build/. Result: README, "Running an
# OPUS-MT model". The speed of the same model against transformers: bench/marian_speed.sh.
set -eu
VENV=${1:-/work/venv-marian}
OUT=${2:-/tmp/clf-marian-full}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$OUT"
"$VENV/bin/python" "$ROOT/tests/reference/make_marian_fixture.py" --full-size "$OUT"
# the suite's timeouts are for the small fixture
CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-6} CLF_MARIAN_FIXTURE="$OUT" "$ROOT/build/bin/test_marian"
