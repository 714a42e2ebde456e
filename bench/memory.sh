#!/usr/bin/env bash
# Memory of `clformer translate` per weight type, three figures:
#   - resident after decoding: VmRSS when decoding ends (`--stats`), the model, the caches
#     and the arenas at their largest;
#   - peak: the kernel's VmHWM (`--stats`); it counts the weights file's mapped pages,
#     which are page cache that the kernel can drop;
#   - peak anonymous: the largest RssAnon (the memory the process itself needs), sampled
#     every 0.1 s.
#   bench/memory.sh [CLFORMER...]
# Each CLFORMER (default build/bin/clformer; a wrapper script for another build) runs
# every type in turn on the bench/ct2_compare.sh model (225 MB of F32), greedy, batch 32,
# its 256 sentences, 2 threads. A build from before `--stats` printed memory gets "-" for
# the first two. Env: TYPES (default "f32 f16 bf16 int8"). A benchmark, not a test: CI
# never runs it. Results: bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
out=runs/bench/ct2
if [ ! -f "$out/weights.safetensors" ]; then
  echo "memory.sh: $out/weights.safetensors is missing: run bench/ct2_compare.sh once" >&2
  exit 1
fi
[ $# -gt 0 ] || set -- build/bin/clformer
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), clformer $(git rev-parse --short HEAD)," \
  "weights file $(($(stat -c %s "$out/weights.safetensors") / 1000000)) MB"
echo "| binary | type | resident after decoding MiB | peak MiB | peak anonymous MiB |"
echo "|---|---|---:|---:|---:|"
for bin in "$@"; do
  for type in ${TYPES:-f32 f16 bf16 int8}; do
    "$bin" translate -c "$out/config.yaml" -w "$out/weights.safetensors" \
      --src-vocab "$out/src.json" --tgt-vocab "$out/tgt.json" --backend cpu --threads 2 \
      --max-len 64 --beam 1 --batch 32 --weight-type "$type" --stats \
      < "$out/sentences.txt" > /dev/null 2> "$out/memory.txt" &
    pid=$!
    anon=0
    while kill -0 "$pid" 2> /dev/null; do
      a=$(awk '/^RssAnon/ {print $2}' "/proc/$pid/status" 2> /dev/null || true)
      if [ -n "$a" ] && [ "$a" -gt "$anon" ]; then anon=$a; fi
      sleep 0.1
    done
    wait "$pid"
    now=$(sed -n 's/.*; resident \([0-9]*\) MiB.*/\1/p' "$out/memory.txt")
    peak=$(sed -n 's/.*at most \([0-9]*\) MiB.*/\1/p' "$out/memory.txt")
    echo "| $bin | $type | ${now:--} | ${peak:--} | $((anon / 1024)) |"
  done
done
