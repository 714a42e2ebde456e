#!/usr/bin/env bash
# Training benchmark: clformer's CPU backend vs PyTorch, optimizer steps on the same model,
# weights, batch shape and thread count.
#   bench/train.sh [threads] [config]      (defaults: all cores, configs/base-prenorm.yaml)
# Env: B S T (batch, source and target lengths), ITERS WARMUP (timed and warm-up steps),
#      BUILD (build dir, default build), PROFILE=1 (clformer: --iters more steps op by op),
#      SITES (PyTorch dropout sites: clformer (default) or tutorial; see pytorch_train.py).
# Writes runs/bench/train-*.json; the figures go into bench/RESULTS.md by hand, with this
# command.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-16} S=${S:-64} T=${T:-64} ITERS=${ITERS:-5} WARMUP=${WARMUP:-1}
. bench/common.sh "$@"
profile=()
[ "${PROFILE:-0}" = 1 ] && profile=(--profile)
"$clf" bench --train "${profile[@]}" -c "$config" -w "$out/weights.safetensors" --backend cpu \
  --threads "$threads" --batch "$B" --src-len "$S" --tgt-len "$T" --iters "$ITERS" \
  --warmup "$WARMUP" --json "$out/train-clformer-cpu.json"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  /usr/bin/python3 bench/pytorch_train.py --config "$config" --weights "$out/weights.safetensors" \
    --threads "$threads" --batch "$B" --src-len "$S" --tgt-len "$T" --iters "$ITERS" \
    --warmup "$WARMUP" --dropout-sites "${SITES:-clformer}" >"$out/train-pytorch.json.tmp"
  mv "$out/train-pytorch.json.tmp" "$out/train-pytorch.json"
  cat "$out/train-pytorch.json"
else
  echo "no torch in /usr/bin/python3 (apt-get install python3-torch): PyTorch not measured" >&2
fi
