#!/usr/bin/env bash
# One command from a fresh Debian machine: install the packages, build, and run the paper's
# base model (random weights) on the CPU backend.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
mkdir -p runs/demo
./build/bin/clformer init -c configs/base.yaml --seed 1 -o runs/demo/base.safetensors
./build/bin/clformer forward -c configs/base.yaml -w runs/demo/base.safetensors \
  -i examples/input.safetensors -o runs/demo/out.safetensors
echo "wrote runs/demo/out.safetensors (logits [2,12,8000], encoder_out [2,12,512])"
./build/bin/clformer bench -c configs/base.yaml --batch 8 --src-len 32 --tgt-len 32 --iters 3 --warmup 1
