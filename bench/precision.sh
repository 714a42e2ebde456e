#!/usr/bin/env bash
# Precision (issue 35, item 5), one run on the CPU: clformer's forward pass and training step
# at --precision f32 and bf16 against PyTorch FP32 and torch.autocast(bfloat16), the same
# model, weights, sizes and threads; every engine in turn in each of REPEAT rounds, the
# median kept (machines here are shared). Forward: base pre-norm, batch B x S/T tokens;
# training: batch TB (one optimizer step each).
#   bench/precision.sh [threads] [config]      (defaults: all cores, configs/base-prenorm.yaml)
# Env: B (32) TB (16) S (64) T (64) ITERS (3) REPEAT (3) BUILD (build dir).
# GFLOP/s and the fraction of the CPU's peak are in the JSON files (runs/bench/precision/).
# A benchmark, not a test: CI never runs it. Results: bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-32} TB=${TB:-16} S=${S:-64} T=${T:-64} ITERS=${ITERS:-3} REPEAT=${REPEAT:-3}
. bench/common.sh "$@"
dir=$out/precision
mkdir -p "$dir"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "$(nproc) cores, $threads threads, clformer $(git rev-parse --short HEAD)," \
  "torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)')"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
common=(-c "$config" -w "$out/weights.safetensors" --backend cpu --threads "$threads"
  --src-len "$S" --tgt-len "$T" --iters "$ITERS" --warmup 1)
pyargs=(--config "$config" --weights "$out/weights.safetensors" --threads "$threads"
  --src-len "$S" --tgt-len "$T" --iters "$ITERS" --warmup 1)
# run KIND ENGINE: one measurement into $dir/KIND.ENGINE.json; prints the seconds
run() {
  local kind=$1 engine=$2 f=$dir/$1.$2.json
  case $kind.$engine in
  forward.clf-*) "$clf" bench "${common[@]}" --batch "$B" --precision "${engine#clf-}" \
    --json "$f" > /dev/null ;;
  train.clf-*) "$clf" bench --train "${common[@]}" --batch "$TB" --precision "${engine#clf-}" \
    --json "$f" > /dev/null ;;
  forward.torch-*) /usr/bin/python3 bench/pytorch_forward.py "${pyargs[@]}" --batch "$B" \
    --autocast "${engine#torch-}" > "$f" ;;
  train.torch-*) /usr/bin/python3 bench/pytorch_train.py "${pyargs[@]}" --batch "$TB" \
    --autocast "${engine#torch-}" > "$f" ;;
  esac
  /usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
print(d.get("seconds_per_forward", d.get("seconds_per_step")))' "$f"
}
engines="clf-f32 clf-bf16 torch-off torch-bf16"
: > "$dir/times.txt"
for ((r = 0; r < REPEAT; r++)); do
  for kind in forward train; do
    for e in $engines; do
      echo "$kind $e $(run "$kind" "$e")" | tee -a "$dir/times.txt"
    done
  done
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v engines="$engines" '
  { v[$1, $2] = v[$1, $2] " " $3 }
  function median(s, a, n, i, j, t) {
    n = split(s, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    split("clformer f32|clformer bf16|PyTorch FP32|PyTorch autocast(bfloat16)", name, "|")
    ne = split(engines, e, " ")
    print "| | forward s | train step s |"
    print "|---|---:|---:|"
    for (i = 1; i <= ne; i++)
      printf "| %s | %.3f | %.3f |\n", name[i], median(v["forward", e[i]]), median(v["train", e[i]])
    f32f = median(v["forward", "clf-f32"]); bff = median(v["forward", "clf-bf16"])
    f32t = median(v["train", "clf-f32"]); bft = median(v["train", "clf-bf16"])
    printf "\nclformer bf16 / clformer f32: forward %.2fx (goal 1.7), training step %.2fx (goal 1.5)\n", f32f / bff, f32t / bft
    printf "clformer bf16 / PyTorch autocast(bfloat16): forward %.2fx (goal 1.2), training step %.2fx\n",
      median(v["forward", "torch-bf16"]) / bff, median(v["train", "torch-bf16"]) / bft
    printf "clformer f32 / PyTorch FP32: forward %.2fx, training step %.2fx\n",
      median(v["forward", "torch-off"]) / f32f, median(v["train", "torch-off"]) / f32t
  }' "$dir/times.txt"
