#!/usr/bin/env bash
# Data-parallel scaling on one machine: `clformer train` as one process and as 2 MPI ranks,
# optimizer steps/s and target tokens/s, the same global batch (2 micro-batches) in each:
#   1x1  one process, 1 thread,  accumulate: 2
#   1x2  one process, 2 threads, accumulate: 2   (the same total threads as 2x1)
#   2x1  mpirun -np 2, 1 thread each, accumulate: 1 (the all-reduce overlaps the backward)
#   2x1-off  the same with CLF_DIST_OVERLAP=0 (the all-reduce after the backward)
#   bench/mpi_scaling.sh          Env: BUILD (default build), STEPS (default 12), REPS (3),
#                                 CASES (default "1x1 1x2 2x1"; the first is the "vs" base)
#   CASES="2x1 2x1-off" bench/mpi_scaling.sh     overlap on against off
# Each case runs STEPS steps and 2 steps; (wall time difference) / (STEPS - 2) is the time
# of a step without start-up, vocabulary loading and the final checkpoint. The cases are
# interleaved, REPS rounds; the median is printed. Synthetic data: 2000 pairs of 24 words
# (vocabulary of 2000), so every micro-batch of 32 pairs has 32 x 25 = 800 target tokens.
# Model: d_model 128, 2+2 layers, 4 heads, d_ff 512 (1.7 M parameters, 6.9 MB of gradient).
# The figures go into bench/RESULTS.md by hand, with this command.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build} STEPS=${STEPS:-12} REPS=${REPS:-3} CASES=${CASES:-1x1 1x2 2x1}
clf=$PWD/$BUILD/bin/clformer
unset OPENBLAS_CORETYPE
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$PWD/runs/bench/mpi
rm -rf "$out"
mkdir -p "$out"
awk 'BEGIN { srand(7); for (i = 0; i < 2000; i++) { s = ""; t = "";
  for (j = 0; j < 24; j++) { w = "w" int(rand() * 2000); s = s (j ? " " : "") w; t = w (j ? " " : "") t }
  print s "\t" t } }' >"$out/train.tsv"
TOKENS_PER_MICRO=800

yaml() { # name accumulate threads steps
  cat >"$out/$1.yaml" <<EOF
model: {max_len: 32, d_model: 128, layers: 2, heads: 4, d_ff: 512, dropout: 0.1}
backend: {name: cpu, threads: $3}
train:
  data: {train: $out/train.tsv}
  vocab: {src: $out/src.json, tgt: $out/tgt.json}
  batch_size: 32
  accumulate: $2
  steps: $4
  log_every: 1000
  checkpoint: {dir: $out/run-$1, every: 0}
EOF
}

run_case() { # case steps -> seconds
  local c=$1 steps=$2 np acc threads overlap=1
  case $c in
  1x1) np=0 acc=2 threads=1 ;;
  1x2) np=0 acc=2 threads=2 ;;
  2x1) np=2 acc=1 threads=1 ;;
  2x1-off) np=2 acc=1 threads=1 overlap=0 ;;
  *) echo "unknown case $c" >&2 && exit 2 ;;
  esac
  yaml "$c-$steps" "$acc" "$threads" "$steps"
  rm -rf "$out/run-$c-$steps"
  local t0 t1
  t0=$(date +%s.%N)
  if [ "$np" = 0 ]; then
    "$clf" train -q -c "$out/$c-$steps.yaml" 2>/dev/null
  else
    CLF_DIST_OVERLAP=$overlap mpirun --oversubscribe --bind-to none -np "$np" "$clf" train -q \
      -c "$out/$c-$steps.yaml" 2>/dev/null
  fi
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}

"$clf" vocab --src-out "$out/src.json" --tgt-out "$out/tgt.json" "$out/train.tsv" >/dev/null
declare -A per_step
for rep in $(seq "$REPS"); do
  for c in $CASES; do
    long=$(run_case "$c" "$STEPS")
    short=$(run_case "$c" 2)
    s=$(echo "($long - $short) / ($STEPS - 2)" | bc -l)
    per_step[$c]="${per_step[$c]:-} $s"
    printf 'round %d %s: %.3f s/step\n' "$rep" "$c" "$s" >&2
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
first=${CASES%% *}
printf '| case | s / step (median of %d) | steps/s | target tokens/s | vs %s |\n|---|---:|---:|---:|---:|\n' "$REPS" "$first"
base=$(echo "${per_step[$first]}" | median)
for c in $CASES; do
  m=$(echo "${per_step[$c]}" | median)
  awk -v c="$c" -v m="$m" -v b="$base" -v tok=$((2 * TOKENS_PER_MICRO)) \
    'BEGIN { printf "| %s | %.3f | %.2f | %.0f | %.2f |\n", c, m, 1 / m, tok / m, b / m }'
done
