#!/usr/bin/env bash
# Memory of `clformer translate` per weight type, three figures:
#   - resident after decoding: VmRSS when decoding ends (`--stats`), the model, the caches
#     and the arenas at their largest;
#   - peak: the kernel's VmHWM (`--stats`); it counts the weights file's mapped pages,
#     which are page cache that the kernel can drop;
#   - peak anonymous: the largest RssAnon (the memory the process itself needs), sampled
#     every 0.1 s.
#   bench/memory.sh [CLFORMER...]
# and the load time `--stats` prints. Each CLFORMER (default build/bin/clformer; a wrapper
# script for another build) runs every type in turn on the bench/ct2_compare.sh model (225
# MB of F32), greedy, batch 32, its 256 sentences, 2 threads; REPEAT rounds, the binaries
# interleaved. A build from before `--stats` printed memory gets "-" for the first two.
# Env: TYPES (default "f32 f16 bf16 int8"), REPEAT (1), MODEL_DIR (a model directory to
# run instead, `translate -m`, on LINES (default its own sentences.txt) with the extra
# TRANSLATE_ARGS). A benchmark, not a test: CI never runs it. Results: bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
out=runs/bench/ct2
if [ -n "${MODEL_DIR:-}" ]; then
  model=(-m "$MODEL_DIR")
  wfile=$MODEL_DIR/weights.safetensors
  lines=${LINES:-$MODEL_DIR/sentences.txt}
  log=$(mktemp)
else
  model=(-c "$out/config.yaml" -w "$out/weights.safetensors" --src-vocab "$out/src.json"
    --tgt-vocab "$out/tgt.json")
  wfile=$out/weights.safetensors
  lines=$out/sentences.txt
  log=$out/memory.txt
fi
# shellcheck disable=SC2206
extra=(${TRANSLATE_ARGS:-})
if [ ! -f "$wfile" ]; then
  echo "memory.sh: $out/weights.safetensors is missing: run bench/ct2_compare.sh once" >&2
  exit 1
fi
[ $# -gt 0 ] || set -- build/bin/clformer
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), clformer $(git rev-parse --short HEAD)," \
  "weights file $(($(stat -c %s "$wfile") / 1000000)) MB"
echo "| binary | type | resident after decoding MiB | peak MiB | peak anonymous MiB | loading s |"
echo "|---|---|---:|---:|---:|---:|"
for _ in $(seq "${REPEAT:-1}"); do
for bin in "$@"; do
  for type in ${TYPES:-f32 f16 bf16 int8}; do
    "$bin" translate "${model[@]}" --backend cpu --threads 2 \
      --max-len 64 --beam 1 --batch 32 --weight-type "$type" --stats "${extra[@]}" \
      < "$lines" > /dev/null 2> "$log" &
    pid=$!
    anon=0
    while kill -0 "$pid" 2> /dev/null; do
      a=$(awk '/^RssAnon/ {print $2}' "/proc/$pid/status" 2> /dev/null || true)
      if [ -n "$a" ] && [ "$a" -gt "$anon" ]; then anon=$a; fi
      sleep 0.1
    done
    wait "$pid"
    now=$(sed -n 's/.*; resident \([0-9]*\) MiB.*/\1/p' "$log")
    peak=$(sed -n 's/.*at most \([0-9]*\) MiB.*/\1/p' "$log")
    load=$(sed -n 's/.*loading the model took \([0-9.]*\) s.*/\1/p' "$log")
    echo "| $bin | $type | ${now:--} | ${peak:--} | $((anon / 1024)) | ${load:--} |"
  done
done
done
