#!/usr/bin/env bash
# Load test of `clformer serve` against offline `clformer translate --batch 32` and a peer
# server (issue 37, item 6), loopback, CPU:
#   bench/serve_load.sh [MODEL_DIR] [SENTENCES] [CLIENTS...]
# Defaults: the shipped model, 256 sentences of its valid.en, 1 8 32 clients. The peer is
# CTranslate2 behind a minimal Python HTTP server with its own batching
# (bench/serve_peer_ct2.py: LibreTranslate's POST /translate, up to 32 sentences a
# translate_batch call), on the model converted by `bench/ct2_compare.py convert-dir`.
# Each client sends single sentences back to back (POST /translate, the same JSON to both
# servers) until all are sent; per engine and client count: sentences/s, output tokens/s,
# p50/p95/p99 latency, and the rate over offline's and over the peer's. Every round runs
# the engines in turn; the median of REPEAT rounds is kept (bench/serve_load.py). Then the
# answers are checked: the peer's equal CTranslate2's offline output, clformer's equal
# `clformer translate`'s (mismatch counts), and clformer's against the peer's (how many
# sentences equal, token agreement: two engines).
# Env: CLF_CLI (default build/bin/clformer), THREADS (2: both servers and offline),
#      REPEAT (3), ENGINES (default "clformer peer offline"),
#      SERVE_ARGS (more `serve` options, e.g. "--backend opencl"), TRANSLATE_ARGS (the
#      same for the offline run), PEER_ARGS (more serve_peer_ct2.py options, e.g.
#      "--wait-ms 2"), PEER_COMPUTE_TYPE (int8, CTranslate2's faster type here; float32),
#      CLF_CT2_VENV (default /work/venv-ct2: made with --system-site-packages when it lacks
#      ctranslate2), CT2_VERSION (the ctranslate2 wheel pip installs there, default 4.8.5);
#      without the peer in ENGINES neither is used, and PYTHON (default python3) runs the
#      clients.
# Work files (the conversion, the last round's answers): runs/bench/serve_load.
# A benchmark, not a test: CI never runs it. Results: bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
unset OPENBLAS_CORETYPE # see bench/common.sh
. scripts/env.sh
cli=${CLF_CLI:-build/bin/clformer}
model=${1:-models/en-de-gettext}
count=${2:-256}
shift $(($# > 2 ? 2 : $#))
clients=("$@")
[ ${#clients[@]} -gt 0 ] || clients=(1 8 32)
venv=${CLF_CT2_VENV:-/work/venv-ct2}
out=runs/bench/serve_load
mkdir -p "$out"
# one sentence a line: `serve` splits a LibreTranslate q at sentence ends (README,
# "Serving") and the peer does not, so lines with a sentence end inside are left out, and
# both engines' answers compare with their offline runs line for line
grep -v '^[[:space:]]*$' "$model/valid.en" | grep -Ev '([.!?]|。|！|？)[]"'"'"')]*[[:space:]]+[^[:space:]]' |
  head -n "$count" > "$out/in.txt"

# the peer's venv and conversion only where the peer runs: without it (ENGINES="clformer
# offline", a machine without the network such as the GPU machine) any python3 runs the
# clients (tokens/s where it has sentencepiece)
py=${PYTHON:-python3}
ct2=none
if [[ " ${ENGINES:-clformer peer offline} " == *" peer "* ]]; then
  if ! "$venv/bin/python" -c 'import ctranslate2, sentencepiece, yaml' 2> /dev/null; then
    /usr/bin/python3 -m venv --system-site-packages "$venv"
    "$venv/bin/pip" install -q "ctranslate2==${CT2_VERSION:-4.8.5}" sentencepiece pyyaml
  fi
  # the conversion, redone when the weights are newer
  if [ ! -f "$out/ct2/model.bin" ] || [ "$model/weights.safetensors" -nt "$out/ct2/model.bin" ]; then
    "$venv/bin/python" bench/ct2_compare.py convert-dir "$model" "$out/ct2"
  fi
  py=$venv/bin/python
  ct2=$("$py" -c 'import ctranslate2; print(ctranslate2.__version__)')
fi

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n), $cpu, $(nproc) cores"
echo "# clformer $(git rev-parse --short HEAD), CTranslate2 $ct2, model $model"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
PEER_PYTHON="$py" "$py" bench/serve_load.py "$cli" "$model" \
  "$out/ct2" "$out/in.txt" "$out" "${clients[@]}"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
