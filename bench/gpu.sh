#!/usr/bin/env bash
# The OpenCL backend on a GPU (issue 3), in one command: the device list, the OpenCL test
# suites (op-by-op comparison with the CPU backend, fixtures) on that device, the forward
# bench with CLBlast's own SGEMM rate at the model's GEMM shapes measured in the same run,
# and PyTorch CUDA in strict FP32 (no TF32) on the same weights and sizes when the Python
# has a CUDA torch; clformer's --precision against PyTorch CUDA TF32 and autocast(bfloat16)
# (issue 35); then decoding with the shipped model, greedy and beam 4, the host reading
# the tokens every step, every 4 (the default) and every 8, and CTranslate2 on CUDA against
# clformer OpenCL where CT2_PYTHON imports a CUDA ctranslate2 (issue 36); `clformer serve`
# on the device under 1, 8 and 32 clients against offline translate (issue 37). Ends with
# markdown tables for bench/RESULTS.md.
#   bench/gpu.sh [device] [config]      (defaults: NVIDIA, configs/base-prenorm.yaml)
# device: an index or a case-insensitive piece of "platform / name" as `clformer devices`
# prints them (what --device and CLF_OPENCL_DEVICE take); e.g. 0, NVIDIA, pthread.
# Env: B S T ITERS WARMUP (batch, lengths, timed and untimed iterations: 32 64 64 20 2),
#      BUILD (build dir, default build), PYTHON (default /usr/bin/python3),
#      SERVE_REPEAT (rounds of the serve load test, default 1),
#      TESTS (ctest -R regex of the suites run on the device, default all that use
#      OpenCL; TESTS=none skips them: ~3 minutes on PoCL with 2 cores, less on a GPU).
# Writes runs/bench/gpu/{ctest.log,weights.safetensors,clformer-opencl.json,pytorch-cuda.json}.
# Exits 1 (after the table) when a test suite failed.
set -euo pipefail
cd "$(dirname "$0")/.."
unset OPENBLAS_CORETYPE # see bench/common.sh
. scripts/env.sh
device=${1:-NVIDIA}
config=${2:-configs/base-prenorm.yaml}
B=${B:-32} S=${S:-64} T=${T:-64} ITERS=${ITERS:-20} WARMUP=${WARMUP:-2}
TESTS=${TESTS:-'^(opencl_.*|model|decode|translate|plugin_ops|train_ops|train)$'}
PYTHON=${PYTHON:-/usr/bin/python3}
build=${BUILD:-build}
clf=$build/bin/clformer
out=runs/bench/gpu
mkdir -p "$out"
rm -f "$out/clformer-opencl.json" "$out/pytorch-cuda.json" # no stale figures in the table

echo "## clformer devices"
"$clf" devices | tee "$out/devices.txt"
# The device the selector names, matched as the backend matches it (ocl_device.c): an
# index, or the first device whose "platform / name" contains it, ignoring case.
if [[ $device =~ ^[0-9]+$ ]]; then
  chosen=$(grep -E "^$device: " "$out/devices.txt" || true)
else
  chosen=$(grep -E '^[0-9]+: ' "$out/devices.txt" | grep -iF -- "$device" | head -n 1 || true)
fi
if [ -z "$chosen" ]; then
  echo "bench/gpu.sh: no OpenCL device matches '$device' (see the list above; on an NVIDIA" \
    "GPU the driver's ICD must be in /etc/OpenCL/vendors)" >&2
  exit 2
fi
echo "device: $chosen"
# Every OpenCL open below goes to that device: the suites read CLF_TEST_DEVICE, and
# CLF_OPENCL_DEVICE overrides the choice of those (train, translate) that take the default.
export CLF_TEST_DEVICE=$device CLF_OPENCL_DEVICE=$device

tests_failed=0
if [ "$TESTS" != none ]; then
  echo "## OpenCL test suites on '$device' (ctest -R '$TESTS')"
  if ! (cd "$build" && ctest -R "$TESTS" --output-on-failure) 2>&1 | tee "$out/ctest.log"; then
    tests_failed=1
    echo "bench/gpu.sh: a test suite failed on '$device' (see $out/ctest.log)" >&2
  fi
fi

echo "## clformer bench --backend opencl, batch $B, src $S, tgt $T"
"$clf" init -c "$config" --seed 1 -o "$out/weights.safetensors"
"$clf" bench -c "$config" -w "$out/weights.safetensors" --backend opencl --device "$device" \
  --batch "$B" --src-len "$S" --tgt-len "$T" --iters "$ITERS" --warmup "$WARMUP" \
  --json "$out/clformer-opencl.json"

echo "## PyTorch CUDA (FP32, no TF32), same weights and sizes"
if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
  echo "no torch in $PYTHON (set PYTHON to a Python with a CUDA build of torch):" \
    "PyTorch CUDA not measured" >&2
elif "$PYTHON" bench/pytorch_forward.py --device cuda --config "$config" \
  --weights "$out/weights.safetensors" --batch "$B" --src-len "$S" --tgt-len "$T" \
  --iters "$ITERS" --warmup "$WARMUP" > "$out/pytorch-cuda.json.tmp"; then
  mv "$out/pytorch-cuda.json.tmp" "$out/pytorch-cuda.json"
  cat "$out/pytorch-cuda.json"
else
  rm -f "$out/pytorch-cuda.json.tmp"
  echo "PyTorch CUDA not measured (see the line above)" >&2
fi

# Precision (issue 35): clformer's --precision on the device (F32 with a note until the
# matrix-unit GEMMs exist; f16 with F16 weights is CLBlast's HGEMM where cl_khr_fp16 is)
# against PyTorch CUDA with TF32 and under autocast(bfloat16), the same weights and sizes.
echo "## precision: clformer --precision against PyTorch CUDA TF32 and autocast(bfloat16)"
: > "$out/precision.txt"
for p in "bf16 f32" "f16 f16"; do
  read -r prec wt <<< "$p"
  if "$clf" bench -c "$config" -w "$out/weights.safetensors" --backend opencl --device "$device" \
    --batch "$B" --src-len "$S" --tgt-len "$T" --iters "$ITERS" --warmup "$WARMUP" \
    --precision "$prec" --weight-type "$wt" --json "$out/clformer-opencl-$prec.json"; then
    echo "| clformer opencl --precision $prec --weight-type $wt | $("$PYTHON" -c 'import json, sys
print("%.2f" % (json.load(open(sys.argv[1]))["seconds_per_forward"] * 1e3))' "$out/clformer-opencl-$prec.json") |" >> "$out/precision.txt"
  fi
done
for mode in "--tf32" "--autocast bf16"; do
  # shellcheck disable=SC2086 # the mode is two words for autocast
  if "$PYTHON" bench/pytorch_forward.py --device cuda $mode --config "$config" \
    --weights "$out/weights.safetensors" --batch "$B" --src-len "$S" --tgt-len "$T" \
    --iters "$ITERS" --warmup "$WARMUP" > "$out/pytorch-cuda-mode.json" 2> /dev/null; then
    echo "| PyTorch CUDA $mode | $("$PYTHON" -c 'import json, sys
print("%.2f" % (json.load(open(sys.argv[1]))["seconds_per_forward"] * 1e3))' "$out/pytorch-cuda-mode.json") |" >> "$out/precision.txt"
  fi
done
cat "$out/precision.txt"

# Decoding on the device (issue 36): the shipped model's valid.en, greedy at batch 1 and 32
# and beam 4 at batch 1 and 32, the host reading the tokens (greedy) or choices (beam, made
# on the device by beam_choose) every step (--sync-steps 1), every 4 (the default on
# OpenCL) and every 8; the rates are translate --stats' (decoding only), with its backend
# calls and host time per step. The default replays recorded steps (CLF_OPENCL_CAPTURE=auto:
# a command buffer where the driver has one, else the launch list); "off" runs them op by
# op, at --sync-steps 4, for the comparison. Greedy must translate alike in every mode; beam
# search may differ where two candidates tie within float rounding (docs/ARCHITECTURE.md §9),
# so a difference there is counted and shown, not failed.
echo "## translate on '$device': the shipped model, --sync-steps 1, 4 and 8; steps replayed or op by op"
model=models/en-de-gettext
: > "$out/decode.txt"
for c in "greedy 1 1 64" "greedy 1 32 500" "beam4 4 1 64" "beam4 4 32 500"; do
  read -r name beam batch lines <<< "$c"
  for sync in 1 4 8 off; do
    capture=auto steps=$sync
    if [ "$sync" = off ]; then capture=off steps=4; fi
    head -n "$lines" "$model/valid.en" | CLF_OPENCL_CAPTURE=$capture "$clf" translate -m "$model" \
      --backend opencl --device "$device" --beam "$beam" --batch "$batch" --max-len 64 \
      --sync-steps "$steps" --stats > "$out/decode.$name.$batch.$sync.txt" 2> "$out/decode.err"
    rate=$(grep -o '[0-9.]* tokens/s' "$out/decode.err" | cut -d' ' -f1)
    step=$(grep 'decoder steps' "$out/decode.err" | sed 's/.*steps: //')
    echo "| $name, batch $batch, $lines lines | --sync-steps $steps, capture $capture | $rate | $step |" | tee -a "$out/decode.txt"
  done
  for sync in 4 8 off; do
    ref="$out/decode.$name.$batch.1.txt" got="$out/decode.$name.$batch.$sync.txt"
    cmp -s "$ref" "$got" && continue
    echo "bench/gpu.sh: $name batch $batch: --sync-steps $sync translated" \
      "$(diff "$ref" "$got" | grep -c '^>') lines otherwise than 1" >&2
    [ "$name" = greedy ] && tests_failed=1
  done
done

# CTranslate2 on CUDA against clformer OpenCL on the same converted model (issue 36, item 5):
# bench/ct2_compare.sh's GPU mode, where CT2_PYTHON (default $PYTHON) imports a ctranslate2
# that sees a CUDA device (on a machine without the network, its wheel carried and put on
# PYTHONPATH; the wheel needs the cuBLAS of the CUDA major it was built for). Where none
# can, transformers' generate() on CUDA in FP16 stands in, as the issue allows.
echo "## CTranslate2 on CUDA against clformer OpenCL on '$device' (bench/ct2_compare.sh, DEVICE=gpu)"
ct2py=${CT2_PYTHON:-$PYTHON}
if "$ct2py" -c 'import ctranslate2, sys; sys.exit(ctranslate2.get_cuda_device_count() < 1)' \
  2> /dev/null; then
  if ! CT2_PYTHON=$ct2py DEVICE=gpu OCL_DEVICE=$device BUILD=$build bench/ct2_compare.sh |
    tee "$out/ct2-gpu.txt"; then
    echo "bench/gpu.sh: bench/ct2_compare.sh failed (see above)" >&2
    tests_failed=1
  fi
elif "$PYTHON" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2> /dev/null; then
  # the issue's stand-in: transformers' generate() on CUDA in FP16 on a full-size
  # OPUS-MT-shaped Marian model, against clformer OpenCL f32 and f16 on the same model
  echo "$ct2py has no ctranslate2 that sees a CUDA device: transformers' generate() on CUDA" \
    "in FP16 stands in (bench/marian_speed.sh, DEVICE=gpu)" | tee "$out/ct2-gpu.txt"
  if ! DEVICE=gpu OCL_DEVICE=$device BATCH=32 PYTHON=$PYTHON bench/marian_speed.sh |
    tee -a "$out/ct2-gpu.txt"; then
    echo "bench/gpu.sh: bench/marian_speed.sh failed (see above)" >&2
    tests_failed=1
  fi
else
  echo "skipped: neither a CUDA ctranslate2 ($ct2py) nor a CUDA torch ($PYTHON)" |
    tee "$out/ct2-gpu.txt"
fi

# `clformer serve` on the device against offline translate on it (issue 37): 1, 8 and 32
# clients, no peer (bench/serve_load.sh; without sentencepiece its tokens/s read nan)
echo "## clformer serve on '$device' against offline translate (bench/serve_load.sh)"
if ! ENGINES="clformer offline" PYTHON=$PYTHON CLF_CLI=$clf REPEAT=${SERVE_REPEAT:-1} \
  SERVE_ARGS="--backend opencl --device $device" \
  TRANSLATE_ARGS="--backend opencl --device $device" \
  bench/serve_load.sh models/en-de-gettext 492 1 8 32 | tee "$out/serve.txt"; then
  echo "bench/gpu.sh: bench/serve_load.sh failed (see above)" >&2
  tests_failed=1
fi

echo "## for bench/RESULTS.md"
python3 - "$out" "$config" "$device" "$build" "$B" "$S" "$T" "$ITERS" "$WARMUP" <<'EOF'
import json, os, sys

out, config, device, build, B, S, T, iters, warmup = sys.argv[1:]
c = json.load(open(os.path.join(out, "clformer-opencl.json")))
p_path = os.path.join(out, "pytorch-cuda.json")
p = json.load(open(p_path)) if os.path.exists(p_path) else None
sgemm = c["sgemm_gflops_same_shapes"]
dev = c["device"][len("OpenCL: "):] if c["device"].startswith("OpenCL: ") else c["device"]

print("```sh\nBUILD=%s B=%s S=%s T=%s ITERS=%s WARMUP=%s bench/gpu.sh '%s' %s\n```\n"
      % (build, B, S, T, iters, warmup, device, config))
print("| | ms / forward | tokens/s | GFLOP/s | vs CLBlast SGEMM rate |")
print("|---|---:|---:|---:|---:|")
print("| CLBlast SGEMM at the graph's shapes (same run) | | | %.1f | 1.00 |" % sgemm)
print("| **clformer opencl (%s)** | **%.2f** | **%.0f** | **%.1f** | **%.2f** |"
      % (dev, c["seconds_per_forward"] * 1e3, c["tokens_per_s"], c["gflops"],
         c["ratio_to_sgemm"]))
if p:
    print("| PyTorch %s CUDA %s FP32 (no TF32), %s, same weights | %.2f | %.0f | %.1f | %.2f |"
          % (p["torch"], p.get("cuda"), p.get("device_name"), p["seconds_per_forward"] * 1e3,
             p["tokens_per_s"], p["gflops"], p["gflops"] / sgemm))
else:
    print("| PyTorch CUDA | not measured | | | |")
print()
gflop = c["gflops"] * c["seconds_per_forward"]
print("%.1f GFLOP per forward pass (batch %d, src %d, tgt %d); clformer: median of %d "
      "timed forwards, PyTorch: mean. Device memory: weights %.1f MiB, activations %.1f MiB."
      % (gflop, c["batch"], c["src_len"], c["tgt_len"], c["iters"],
         c["weight_bytes"] / 1048576, c["activation_bytes"] / 1048576))
if p:
    print("clformer opencl runs at %.2fx the speed of PyTorch CUDA on this device."
          % (p["seconds_per_forward"] / c["seconds_per_forward"]))
EOF
echo
echo "| precision (forward, batch $B, $S/$T) | ms / forward |"
echo "|---|---:|"
cat "$out/precision.txt"
echo
echo "| decoding (translate --stats, OpenCL) | host reads tokens | tokens/s | per step |"
echo "|---|---|---:|---|"
cat "$out/decode.txt"
exit "$tests_failed"
