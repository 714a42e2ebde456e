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
#      CT2_VERSION (the ctranslate2 wheel pip installs there, default 4.8.5).
# A benchmark, not a test: CI never runs it. Results: bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
unset OPENBLAS_CORETYPE # see bench/common.sh
. scripts/env.sh
THREADS=${THREADS:-2} REPEAT=${REPEAT:-3} MAX_LEN=${MAX_LEN:-64}
ROWS=${ROWS:-greedy:1:50 greedy:32:256 beam4:32:128}
venv=${CLF_CT2_VENV:-/work/venv-ct2}
clf=${BUILD:-build}/bin/clformer
out=runs/bench/ct2
mkdir -p "$out"

if ! "$venv/bin/python" -c 'import ctranslate2' 2> /dev/null; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q "ctranslate2==${CT2_VERSION:-4.8.5}"
fi
py() { "$venv/bin/python" bench/ct2_compare.py "$@"; }
py make "$out"
py convert "$out" "$out/ct2"

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)
avx512=$(grep -qw avx512f /proc/cpuinfo && echo yes || echo no)
ct2=$("$venv/bin/python" -c 'import ctranslate2; print(ctranslate2.__version__)')
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n), $cpu, $(nproc) cores, AVX-512: $avx512"
echo "# clformer $(git rev-parse --short HEAD), CTranslate2 $ct2, $THREADS threads," \
  "up to $MAX_LEN output tokens, length penalty 0, median of $REPEAT"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# run ENGINE BEAM BATCH INPUT OUTPUT: translates, prints the tokens/s.
run() {
  local engine=$1 beam=$2 batch=$3 input=$4 output=$5 type=${1#*-}
  if [ "${engine%%-*}" = ct2 ]; then # each type on its faster GEMM here (see the header)
    CT2_USE_MKL=$([ "$type" = float32 ] && echo 1 || echo 0) \
      py translate "$out/ct2" "$type" "$beam" "$batch" "$MAX_LEN" "$THREADS" \
      < "$input" > "$output" 2> "$out/stats.txt"
  else
    "$clf" translate -c "$out/config.yaml" -w "$out/weights.safetensors" --src-vocab "$out/src.json" \
      --tgt-vocab "$out/tgt.json" --backend cpu --threads "$THREADS" --max-len "$MAX_LEN" \
      --length-penalty 0 --beam "$beam" --batch "$batch" --weight-type "$type" --stats \
      < "$input" > "$output" 2> "$out/stats.txt"
  fi
  awk '{for (i = 2; i <= NF; i++) if ($i ~ /^tokens\/s/) print $(i - 1)}' "$out/stats.txt"
}

# Same tokens first: CTranslate2 f32 against clformer f32, greedy and beam 4.
head -n 20 "$out/sentences.txt" > "$out/check.txt"
for beam in 1 4; do
  run ct2-float32 "$beam" 32 "$out/check.txt" "$out/check.ct2.$beam.txt" > /dev/null
  run clf-f32 "$beam" 32 "$out/check.txt" "$out/check.clf.$beam.txt" > /dev/null
  py check "$out/check.clf.$beam.txt" "$out/check.ct2.$beam.txt"
done

engines=${ENGINES:-ct2-float32 ct2-int8 clf-f32 clf-f16 clf-bf16 clf-int8}
: > "$out/rates.txt"
for row in $ROWS; do
  IFS=: read -r mode batch n <<< "$row"
  beam=1
  [ "$mode" != greedy ] && beam=${mode#beam}
  head -n "$n" "$out/sentences.txt" > "$out/input.txt"
  for ((r = 0; r < REPEAT; r++)); do
    for e in $engines; do
      echo "$row $e $(run "$e" "$beam" "$batch" "$out/input.txt" "$out/out.$e.txt")" | tee -a "$out/rates.txt"
    done
  done
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

# The table: medians, and the best clformer type against CTranslate2 int8 with the goal.
awk -v engines="$engines" '
  { v[$1, $2] = v[$1, $2] " " $3; if (!($1 in seen)) { seen[$1] = 1; rows[++nr] = $1 } }
  function median(s, a, n, i, j, t) {
    n = split(s, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    ne = split(engines, e, " ")
    printf "| workload |"; for (i = 1; i <= ne; i++) printf " %s |", e[i]; print " best clformer / ct2-int8 | goal |"
    printf "|---|"; for (i = 1; i <= ne; i++) printf "---:|"; print "---:|---:|"
    for (r = 1; r <= nr; r++) {
      split(rows[r], f, ":"); printf "| %s, batch %s, %s sentences |", f[1], f[2], f[3]
      best = 0; bt = ""
      for (i = 1; i <= ne; i++) {
        m = median(v[rows[r], e[i]]); printf " %.0f |", m
        if (e[i] ~ /^clf/ && m > best) { best = m; bt = e[i] }
      }
      goal = (f[2] == 1) ? 2.5 : 1.3
      printf " %.2f (%s) | %.1f %s |\n", best / median(v[rows[r], "ct2-int8"]), bt, goal,
        (best / median(v[rows[r], "ct2-int8"]) >= goal ? "met" : "not met")
    }
  }' "$out/rates.txt"
