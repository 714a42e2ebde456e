#!/usr/bin/env bash
# Training benchmark: clformer's CPU backend vs PyTorch, optimizer steps on the same model,
# weights, batch shape and thread count.
#   bench/train.sh [threads] [config]      (defaults: all cores, configs/base-prenorm.yaml)
# Env: B S T (batch, source and target lengths), ITERS WARMUP (timed and warm-up steps),
#      BUILD (build dir, default build), PROFILE=1 (clformer: --iters more steps op by op),
#      SITES (PyTorch dropout sites: clformer (default) or tutorial; see pytorch_train.py),
#      PRECISION (clformer's, one or more of f32 bf16 f16: default f32; docs/PRECISION.md),
#      DEMO=1 (instead: the demo config, configs/demo-gettext-pre.yaml, trained 300 steps at
#      f32 and at bf16 on data/gettext (scripts/make_gettext_corpus.sh data/gettext), and
#      the two loss curves as means over windows of 50 steps).
# Writes runs/bench/train-*.json; the figures go into bench/RESULTS.md by hand, with this
# command.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-16} S=${S:-64} T=${T:-64} ITERS=${ITERS:-5} WARMUP=${WARMUP:-1}
. bench/common.sh "$@"
if [ "${DEMO:-0}" = 1 ]; then
  for p in f32 bf16; do
    sed -e "s|runs/gettext-pre|$out/demo-$p|g" -e 's/^  steps: .*/  steps: 300/' \
      -e 's/^  log_every: .*/  log_every: 1/' -e 's/^  validate_every: .*/  validate_every: 0/' \
      configs/demo-gettext-pre.yaml >"$out/demo-$p.yaml"
    printf '  precision: %s\n' "$p" >>"$out/demo-$p.yaml"
    rm -rf "$out/demo-$p"
    "$clf" train -c "$out/demo-$p.yaml" --backend cpu --threads "$threads"
  done
  paste -d, "$out/demo-f32/log.csv" "$out/demo-bf16/log.csv" | awk -F, 'NR > 1 {
    a += $3; b += $10; n++
    if (n == 50) { printf "steps %3d: mean loss f32 %.4f bf16 %.4f (%+.1f%%)\n", $1, a / 50, b / 50,
                   100 * (b - a) / a; a = b = n = 0 } }'
  exit 0
fi
profile=()
[ "${PROFILE:-0}" = 1 ] && profile=(--profile)
for p in ${PRECISION:-f32}; do
  suffix=$([ "$p" = f32 ] && echo "" || echo "-$p")
  "$clf" bench --train "${profile[@]}" -c "$config" -w "$out/weights.safetensors" --backend cpu \
    --threads "$threads" --batch "$B" --src-len "$S" --tgt-len "$T" --iters "$ITERS" \
    --warmup "$WARMUP" --precision "$p" --json "$out/train-clformer-cpu$suffix.json"
done
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  /usr/bin/python3 bench/pytorch_train.py --config "$config" --weights "$out/weights.safetensors" \
    --threads "$threads" --batch "$B" --src-len "$S" --tgt-len "$T" --iters "$ITERS" \
    --warmup "$WARMUP" --dropout-sites "${SITES:-clformer}" >"$out/train-pytorch.json.tmp"
  mv "$out/train-pytorch.json.tmp" "$out/train-pytorch.json"
  cat "$out/train-pytorch.json"
else
  echo "no torch in /usr/bin/python3 (apt-get install python3-torch): PyTorch not measured" >&2
fi
