#!/usr/bin/env bash
# clformer.Translator against ctranslate2.Translator from Python, on the same model (issue 39):
#   bench/python_ct2.sh
# The model and sentences of bench/ct2_compare.sh (bench/ct2_compare.py make, seed 1, and
# our converter to CTranslate2); one Python venv holding both packages. Checks first that
# both give the same greedy and beam-4 tokens on 20 sentences at F32 (exit 1 if not), then
# times one translate_batch call per process (the translator opened before the clock) for
# greedy batch 32 (256 sentences) and beam 4 batch 32 (128): every engine in turn in each
# of REPEAT rounds, the median kept; length penalty 0, up to MAX_LEN output tokens,
# THREADS threads (CTranslate2: intra_threads, inter_threads=1). Both take the sentences
# as lists of tokens. Rates are output tokens / translate_batch's wall time.
# As in ct2_compare.sh, ct2-float32 runs with CT2_USE_MKL=1 and ct2-int8 with
# CT2_USE_MKL=0 (each CTranslate2 type on its faster GEMM library on an AMD CPU).
# Env: BUILD (default build), THREADS (2), REPEAT (3), MAX_LEN (64),
#      ROWS (default "greedy:32:256 beam4:32:128": mode:batch:sentences),
#      ENGINES (default "ct2-float32 ct2-int8 clf-f32 clf-int8"; clf-f16, clf-bf16 too),
#      CLF_CT2_VENV (default /work/venv-ct2: made with --system-site-packages when it
#      lacks ctranslate2; the clformer package is (re)installed there from BUILD each run),
#      CT2_VERSION (default 4.8.5).
# A benchmark, not a test: CI never runs it. Results: bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/ct2_common.sh
build=$(cd "${BUILD:-build}" && pwd)
ROWS=${ROWS:-greedy:32:256 beam4:32:128}
engines=${ENGINES:-ct2-float32 ct2-int8 clf-f32 clf-int8}
src=runs/bench/ct2 # the model files, as ct2_compare.sh makes them
out=runs/bench/python_ct2
mkdir -p "$src" "$out/model"

ct2_venv
CLFORMER_BUILD_DIR="$build" PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
  "$venv/bin/pip" install -q --no-build-isolation --force-reinstall --no-deps ./python
"$venv/bin/python" bench/ct2_compare.py make "$src"
"$venv/bin/python" bench/ct2_compare.py convert "$src" "$src/ct2"
# clformer's model directory: the names an imported model's directory has
for f in config.yaml:model.yaml weights.safetensors:weights.safetensors src.json:src.json \
  tgt.json:tgt.json; do
  ln -sfn "$PWD/$src/${f%%:*}" "$out/model/${f#*:}"
done

vers=$("$venv/bin/python" -c 'import clformer, ctranslate2; print(clformer.__version__, ctranslate2.__version__)')
ct2_header "${vers% *} ($(git rev-parse --short HEAD))" "${vers#* }"

# run ENGINE BEAM BATCH INPUT OUTPUT: prints TOKENS SECONDS TOKENS/S.
run() {
  local engine=$1 type=${1#*-} model=$out/model mkl=0
  if [ "${engine%%-*}" = ct2 ]; then
    model=$src/ct2
    [ "$type" = float32 ] && mkl=1
  fi
  CT2_USE_MKL=$mkl "$venv/bin/python" bench/python_ct2.py "${engine%%-*}" "$model" "$type" \
    "$2" "$3" "$MAX_LEN" "$THREADS" "$4" "$5"
}

ct2_check "$src/sentences.txt"
ct2_time "$src/sentences.txt"

# The table: median tokens/s per engine, and clformer over CTranslate2 per weight type.
ct2_table 5 " clf-f32 / ct2-float32 | clf-int8 / ct2-int8 |" '
  function cells() {
    if (m["ct2-float32"] > 0 && m["clf-f32"] > 0) printf " %.2f |", m["clf-f32"] / m["ct2-float32"]; else printf " - |"
    if (m["ct2-int8"] > 0 && m["clf-int8"] > 0) printf " %.2f |\n", m["clf-int8"] / m["ct2-int8"]; else print " - |"
  }'
