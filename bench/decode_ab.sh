#!/usr/bin/env bash
# Two clformer builds against each other on bench/ct2_compare.sh's model: decoding tokens/s,
# interleaved (A then B in each of REPEAT rounds), median of REPEAT.
#   bench/decode_ab.sh BEFORE_CLFORMER AFTER_CLFORMER
# Env: ROWS (default "greedy:1:12 greedy:32:64 beam4:32:32": mode:batch:sentences),
#      TYPES (weight types, default "int8"), THREADS (2), REPEAT (3), MAX_LEN (64).
# Run bench/ct2_compare.sh once first (it makes runs/bench/ct2). A benchmark, not a test.
set -euo pipefail
cd "$(dirname "$0")/.."
unset OPENBLAS_CORETYPE # see bench/common.sh
a=$1 b=$2
THREADS=${THREADS:-2} REPEAT=${REPEAT:-3} MAX_LEN=${MAX_LEN:-64}
ROWS=${ROWS:-greedy:1:12 greedy:32:64 beam4:32:32} TYPES=${TYPES:-int8}
d=runs/bench/ct2
[ -f "$d/weights.safetensors" ] || {
  echo "decode_ab: $d/weights.safetensors missing: run bench/ct2_compare.sh first" >&2
  exit 1
}
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $THREADS threads, median of $REPEAT"
echo "# A = $a, B = $b; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# rate BIN TYPE BEAM BATCH: tokens/s of one translate run of $d/input.txt.
rate() {
  "$1" translate -c "$d/config.yaml" -w "$d/weights.safetensors" --src-vocab "$d/src.json" \
    --tgt-vocab "$d/tgt.json" --backend cpu --threads "$THREADS" --max-len "$MAX_LEN" \
    --length-penalty 0 --beam "$3" --batch "$4" --weight-type "$2" --stats \
    < "$d/input.txt" 2>&1 > "$d/ab.out.txt" |
    awk '{for (i = 2; i <= NF; i++) if ($i ~ /^tokens\/s/) print $(i - 1)}'
}
median() { tr ' ' '\n' | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

echo "| workload | type | A tokens/s | B tokens/s | B / A | runs A | runs B |"
echo "|---|---|---:|---:|---:|---|---|"
for row in $ROWS; do
  IFS=: read -r mode batch n <<< "$row"
  beam=1
  [ "$mode" != greedy ] && beam=${mode#beam}
  head -n "$n" "$d/sentences.txt" > "$d/input.txt"
  for t in $TYPES; do
    ra="" rb=""
    for ((r = 0; r < REPEAT; r++)); do
      ra="$ra $(rate "$a" "$t" "$beam" "$batch")"
      rb="$rb $(rate "$b" "$t" "$beam" "$batch")"
    done
    ma=$(echo $ra | median) mb=$(echo $rb | median)
    echo "| $mode, batch $batch, $n sentences | $t | $ma | $mb |" \
      "$(awk -v x="$ma" -v y="$mb" 'BEGIN {printf "%.2f", y / x}') |$ra |$rb |"
  done
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
