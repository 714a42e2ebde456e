#!/usr/bin/env bash
# Forward-pass benchmark: clformer's CPU backend vs PyTorch on the same model and weights.
#   bench/run.sh [threads] [config]      (defaults: all cores, configs/base-prenorm.yaml)
# Env: B S T ITERS (batch, lengths, timed iterations), BUILD (build dir, default build),
#      WEIGHT_TYPE (clformer's --weight-type, default f32; bf16 also runs PyTorch under
#      torch.autocast(bfloat16), the mixed precision its users pick), OPENCL (0: skip the
#      OpenCL row, default 1).
# Writes runs/bench/*.json; the figures go into bench/RESULTS.md by hand, with this command.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-32} S=${S:-64} T=${T:-64} ITERS=${ITERS:-5} WEIGHT_TYPE=${WEIGHT_TYPE:-f32}
autocast=off
[ "$WEIGHT_TYPE" = bf16 ] && autocast=bf16
. bench/common.sh "$@"
"$clf" bench -c "$config" -w "$out/weights.safetensors" --backend cpu \
  --threads "$threads" --batch "$B" --src-len "$S" --tgt-len "$T" --iters "$ITERS" --warmup 1 \
  --weight-type "$WEIGHT_TYPE" --json "$out/clformer-cpu.json"
if [ "${OPENCL:-1}" != 0 ] && "$clf" devices >/dev/null 2>&1; then
  "$clf" bench -c "$config" -w "$out/weights.safetensors" --backend opencl \
    --batch "$B" --src-len "$S" --tgt-len "$T" --iters "$ITERS" --warmup 1 \
    --json "$out/clformer-opencl.json" || echo "opencl bench failed" >&2
fi
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  /usr/bin/python3 bench/pytorch_forward.py --config "$config" --weights "$out/weights.safetensors" \
    --threads "$threads" --batch "$B" --src-len "$S" --tgt-len "$T" --iters "$ITERS" --warmup 1 \
    --autocast "$autocast" | tee "$out/pytorch.json"
else
  echo "no torch in /usr/bin/python3 (apt-get install python3-torch): PyTorch not measured" >&2
fi
