#!/usr/bin/env bash
# clformer against CTranslate2 on the same model (issue 18): decoding tokens/s, interleaved.
#   bench/ct2_compare.sh
# Makes a base pre-norm model with random but non-trivial weights (bench/ct2_compare.py),
# converts it to CTranslate2 with our own converter, checks that both give the same greedy
# and beam-4 tokens on 20 sentences (exit 1 if not), then times greedy batch 1 (50
# sentences), greedy batch 32 (256) and beam 4 batch 32 (128) for CTranslate2 f32 and int8
# and clformer --weight-type f32, f16, bf16 and int8: every engine in turn in each of REPEAT
# rounds, the median kept; length penalty 0, up to MAX_LEN output tokens, THREADS threads.
# Rates are output tokens / decoding time, loading excluded on both sides.
# CTranslate2 picks its GEMM library by CPU vendor; on an AMD CPU it skips MKL for oneDNN,
# whose F32 greedy batch 1 was ~10x slower than MKL's here, while MKL's int8 was ~10x
# slower than oneDNN's on this AMD CPU. So ct2-float32 runs with CT2_USE_MKL=1 and ct2-int8 with
# CT2_USE_MKL=0: each CTranslate2 type at its best on this machine.
# Env: BUILD (default build), THREADS (2), REPEAT (3), MAX_LEN (64),
#      ROWS (default "greedy:1:50 greedy:32:256 beam4:32:128": mode:batch:sentences),
#      ENGINES (default all six; keep ct2-int8, which the ratio is taken against),
#      CLF_CT2_VENV (default /work/venv-ct2: made with --system-site-packages when missing),
#      CT2_PYTHON (a Python that imports ctranslate2, used instead of the venv's),
#      CT2_VERSION (the ctranslate2 wheel pip installs there, default 4.8.5).
#      DEVICE (cpu, the default; gpu: CTranslate2 on CUDA in float16 and int8_float16 against
#        clformer OpenCL f32 and f16 on OCL_DEVICE (default NVIDIA), the ratio against
#        ct2-cuda-float16 with issue 36's goals (1.5x at batch 1, 1.0x at 32); pocl: clformer
#        OpenCL on PoCL (OCL_DEVICE default "portable") and on the CPU backend against
#        CTranslate2 on the CPU at greedy batch 1, where a step's launches and host work show).
#        An engine is ct2-[cuda-]TYPE or clf-[ocl-]TYPE: cuda and ocl name the device.
# A benchmark, not a test: CI never runs it. Results: bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/ct2_common.sh
DEVICE=${DEVICE:-cpu}
case $DEVICE in
  cpu) engines=${ENGINES:-ct2-float32 ct2-int8 clf-f32 clf-f16 clf-bf16 clf-int8} ref=ct2-int8 ;;
  gpu)
    engines=${ENGINES:-ct2-cuda-float16 ct2-cuda-int8_float16 clf-ocl-f32 clf-ocl-f16}
    ref=ct2-cuda-float16 OCL_DEVICE=${OCL_DEVICE:-NVIDIA}
    ;;
  pocl)
    engines=${ENGINES:-ct2-float32 ct2-int8 clf-ocl-f32 clf-f32} ref=ct2-int8
    OCL_DEVICE=${OCL_DEVICE:-portable} ROWS=${ROWS:-greedy:1:50}
    ;;
  *) echo "ct2_compare.sh: DEVICE is cpu, gpu or pocl, not '$DEVICE'" >&2; exit 2 ;;
esac
ROWS=${ROWS:-greedy:1:50 greedy:32:256 beam4:32:128}
clf=${BUILD:-build}/bin/clformer
out=runs/bench/ct2
mkdir -p "$out"

ct2_venv
py() { "$ct2py" bench/ct2_compare.py "$@"; }
py make "$out"
py convert "$out" "$out/ct2"

ct2_header "$(git rev-parse --short HEAD)" \
  "$("$ct2py" -c 'import ctranslate2; print(ctranslate2.__version__)')"

# run ENGINE BEAM BATCH INPUT OUTPUT: translates, prints the tokens/s.
run() {
  local engine=$1 beam=$2 batch=$3 input=$4 output=$5 type=${1##*-} where=(--backend cpu)
  if [ "${engine%%-*}" = ct2 ]; then # each type on its faster GEMM here (see the header)
    CT2_USE_MKL=$([ "$type" = float32 ] && echo 1 || echo 0) \
      py translate "$out/ct2" "$type" "$beam" "$batch" "$MAX_LEN" "$THREADS" \
      "$([[ $engine == *-cuda-* ]] && echo cuda || echo cpu)" \
      < "$input" > "$output" 2> "$out/stats.txt"
  else
    [[ $engine == *-ocl-* ]] && where=(--backend opencl --device "$OCL_DEVICE")
    "$clf" translate -c "$out/config.yaml" -w "$out/weights.safetensors" --src-vocab "$out/src.json" \
      --tgt-vocab "$out/tgt.json" "${where[@]}" --threads "$THREADS" --max-len "$MAX_LEN" \
      --length-penalty 0 --beam "$beam" --batch "$batch" --weight-type "$type" --stats \
      < "$input" > "$output" 2> "$out/stats.txt"
  fi
  awk '{for (i = 2; i <= NF; i++) if ($i ~ /^tokens\/s/) print $(i - 1)}' "$out/stats.txt"
}

ct2_check "$out/sentences.txt"
ct2_time "$out/sentences.txt"

# The table: medians, and the best clformer type against the reference with the goal
# (issue 18's on the CPU, issue 36's on the GPU, none for PoCL).
ct2_table 3 " best clformer / $ref | goal |" '
  function cells(i, best, bt, goal) {
    best = 0; bt = ""
    for (i = 1; i <= ne; i++) if (e[i] ~ /^clf/ && m[e[i]] > best) { best = m[e[i]]; bt = e[i] }
    goal = dev == "pocl" ? 0 : dev == "gpu" ? (f[2] == 1 ? 1.5 : 1.0) : (f[2] == 1 ? 2.5 : 1.3)
    printf " %.2f (%s) |", best / m[ref], bt
    if (goal) printf " %.1f %s |\n", goal, (best / m[ref] >= goal ? "met" : "not met")
    else print " - |"
  }'
