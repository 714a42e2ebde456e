#!/usr/bin/env bash
# clformer.Translator against ctranslate2.Translator from Python, on the same model (issue 39):
#   bench/python_ct2.sh
# The model and sentences of bench/ct2_compare.sh (bench/ct2_compare.py make, seed 1, and
# our converter to CTranslate2); one Python venv holding both packages. Checks first that
# both give the same greedy and beam-4 tokens on 20 sentences at F32 (exit 1 if not), then
# times one translate_batch call per process (the translator opened before the clock) for
# greedy batch 32 (256 sentences) and beam 4 batch 32 (128): every engine in turn in each
# of REPEAT rounds, the median kept; length penalty 0, up to MAX_LEN output tokens,
# THREADS threads (CTranslate2: intra_threads, inter_threads=1). Both take the sentences
# as lists of tokens. Rates are output tokens / translate_batch's wall time.
# As in ct2_compare.sh, ct2-float32 runs with CT2_USE_MKL=1 and ct2-int8 with
# CT2_USE_MKL=0 (each CTranslate2 type on its faster GEMM library on an AMD CPU).
# Env: BUILD (default build), THREADS (2), REPEAT (3), MAX_LEN (64),
#      ROWS (default "greedy:32:256 beam4:32:128": mode:batch:sentences),
#      ENGINES (default "ct2-float32 ct2-int8 clf-f32 clf-int8"; clf-f16, clf-bf16 too),
#      CLF_CT2_VENV (default /work/venv-ct2: made with --system-site-packages when it
#      lacks ctranslate2; the clformer package is (re)installed there from BUILD each run),
#      CT2_VERSION (default 4.8.5).
# A benchmark, not a test: CI never runs it. Results: bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
unset OPENBLAS_CORETYPE # see bench/common.sh
. scripts/env.sh
build=$(cd "${BUILD:-build}" && pwd)
THREADS=${THREADS:-2} REPEAT=${REPEAT:-3} MAX_LEN=${MAX_LEN:-64}
ROWS=${ROWS:-greedy:32:256 beam4:32:128}
engines=${ENGINES:-ct2-float32 ct2-int8 clf-f32 clf-int8}
venv=${CLF_CT2_VENV:-/work/venv-ct2}
src=runs/bench/ct2 # the model files, as ct2_compare.sh makes them
out=runs/bench/python_ct2
mkdir -p "$src" "$out/model"

if ! "$venv/bin/python" -c 'import ctranslate2' 2> /dev/null; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q "ctranslate2==${CT2_VERSION:-4.8.5}"
fi
CLFORMER_BUILD_DIR="$build" PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
  "$venv/bin/pip" install -q --no-build-isolation --force-reinstall --no-deps ./python
"$venv/bin/python" bench/ct2_compare.py make "$src"
"$venv/bin/python" bench/ct2_compare.py convert "$src" "$src/ct2"
# clformer's model directory: the names an imported model's directory has
for f in config.yaml:model.yaml weights.safetensors:weights.safetensors src.json:src.json \
  tgt.json:tgt.json; do
  ln -sfn "$PWD/$src/${f%%:*}" "$out/model/${f#*:}"
done

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)
avx512=$(grep -qw avx512f /proc/cpuinfo && echo yes || echo no)
vers=$("$venv/bin/python" -c 'import clformer, ctranslate2; print(clformer.__version__, ctranslate2.__version__)')
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n), $cpu, $(nproc) cores, AVX-512: $avx512"
echo "# clformer ${vers% *} ($(git rev-parse --short HEAD)), CTranslate2 ${vers#* }, $THREADS threads," \
  "up to $MAX_LEN output tokens, length penalty 0, median of $REPEAT"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# run ENGINE BEAM BATCH INPUT OUTPUT: prints TOKENS SECONDS TOKENS/S.
run() {
  local engine=$1 type=${1#*-} model=$out/model mkl=0
  if [ "${engine%%-*}" = ct2 ]; then
    model=$src/ct2
    [ "$type" = float32 ] && mkl=1
  fi
  CT2_USE_MKL=$mkl "$venv/bin/python" bench/python_ct2.py "${engine%%-*}" "$model" "$type" \
    "$2" "$3" "$MAX_LEN" "$THREADS" "$4" "$5"
}

# Same tokens first: CTranslate2 float32 against clformer f32, greedy and beam 4.
head -n 20 "$src/sentences.txt" > "$out/check.txt"
for beam in 1 4; do
  run ct2-float32 "$beam" 32 "$out/check.txt" "$out/check.ct2.$beam.txt" > /dev/null
  run clf-f32 "$beam" 32 "$out/check.txt" "$out/check.clf.$beam.txt" > /dev/null
  "$venv/bin/python" bench/ct2_compare.py check "$out/check.clf.$beam.txt" "$out/check.ct2.$beam.txt"
done

: > "$out/rates.txt"
for row in $ROWS; do
  IFS=: read -r mode batch n <<< "$row"
  beam=1
  [ "$mode" != greedy ] && beam=${mode#beam}
  head -n "$n" "$src/sentences.txt" > "$out/input.txt"
  for ((r = 0; r < REPEAT; r++)); do
    for e in $engines; do
      echo "$row $e $(run "$e" "$beam" "$batch" "$out/input.txt" "$out/out.$row.$e.txt")" |
        tee -a "$out/rates.txt"
    done
  done
  # the timed F32 outputs, for information (the check above is the gate)
  a=$out/out.$row.clf-f32.txt b=$out/out.$row.ct2-float32.txt
  if [ -f "$a" ] && [ -f "$b" ]; then
    echo "# $row: clf-f32 and ct2-float32 equal on $(paste -d'\n' "$a" "$b" | paste - - |
      awk -F'\t' '$1 == $2 {n++} END {print n + 0 "/" NR}') lines"
  fi
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

# The table: median tokens/s per engine, and clformer over CTranslate2 per weight type.
awk -v engines="$engines" '
  { v[$1, $2] = v[$1, $2] " " $5; if (!($1 in seen)) { seen[$1] = 1; rows[++nr] = $1 } }
  function median(s, a, n, i, j, t) {
    n = split(s, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    ne = split(engines, e, " ")
    printf "| workload |"; for (i = 1; i <= ne; i++) printf " %s |", e[i]
    print " clf-f32 / ct2-float32 | clf-int8 / ct2-int8 |"
    printf "|---|"; for (i = 1; i <= ne; i++) printf "---:|"; print "---:|---:|"
    for (r = 1; r <= nr; r++) {
      split(rows[r], f, ":"); printf "| %s, batch %s, %s sentences |", f[1], f[2], f[3]
      for (i = 1; i <= ne; i++) { m[e[i]] = median(v[rows[r], e[i]]); printf " %.0f |", m[e[i]] }
      if (m["ct2-float32"] > 0 && m["clf-f32"] > 0) printf " %.2f |", m["clf-f32"] / m["ct2-float32"]; else printf " - |"
      if (m["ct2-int8"] > 0 && m["clf-int8"] > 0) printf " %.2f |\n", m["clf-int8"] / m["ct2-int8"]; else print " - |"
      delete m
    }
  }' "$out/rates.txt"
