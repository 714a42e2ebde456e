#!/usr/bin/env bash
# Decoding benchmark: `clformer translate` tokens/s, greedy and beam 4, batch 1 and 32,
# with and without the KV cache, on random weights and a synthetic vocabulary.
#   bench/translate.sh [threads] [config]      (defaults: all cores, configs/base-prenorm.yaml)
# Env: BUILD (build dir, default build), N (sentences with the cache, default 32),
#      NC (sentences without the cache, default 8: every step re-runs the whole prefix),
#      WORDS (words per sentence, default 20), MAX_LEN (output tokens, default 64),
#      REPEAT (runs per case, default 1: the median tokens/s is printed),
#      WEIGHT_TYPE (f32, f16, bf16 or int8: translate --weight-type, in every case; default
#      f32; several, space-separated, e.g. "f32 int8": each case runs every type in turn,
#      REPEAT rounds interleaved, and prints each type's median and its ratio to the first),
#      CASES (default "greedy:1 greedy:32 beam4:1 beam4:32": mode:batch, with the cache),
#      NOCACHE (1, the default: also the no-cache cases),
#      BACKEND (cpu, the default, or opencl: the device CLF_OPENCL_DEVICE names).
# Prints one line per case. Random weights may emit [EOS] before MAX_LEN, so the rate is
# output tokens / time spent decoding, as `clformer translate --stats` reports it (the
# best hypotheses' tokens; loading the model is not counted).
set -euo pipefail
cd "$(dirname "$0")/.."
unset OPENBLAS_CORETYPE # see bench/common.sh
. scripts/env.sh
threads=${1:-$(nproc)}
config=${2:-configs/base-prenorm.yaml}
N=${N:-32} NC=${NC:-8} WORDS=${WORDS:-20} MAX_LEN=${MAX_LEN:-64} REPEAT=${REPEAT:-1}
WEIGHT_TYPE=${WEIGHT_TYPE:-f32}
CASES=${CASES:-greedy:1 greedy:32 beam4:1 beam4:32} NOCACHE=${NOCACHE:-1}
clf=${BUILD:-build}/bin/clformer
out=runs/bench/translate
mkdir -p "$out"

# The vocabulary sizes of the config, from the resolved dump.
src_vocab=$("$clf" config -c "$config" --dump | awk '$1 == "src_vocab:" {print $2}')
tgt_vocab=$("$clf" config -c "$config" --dump | awk '$1 == "tgt_vocab:" {print $2}')

# A tokenizers-library WordLevel file: the four specials, then w0 .. w(size-5).
make_vocab() { # size path
  awk -v n="$1" 'BEGIN {
    split("[UNK] [PAD] [SOS] [EOS]", sp, " ")
    printf "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":["
    for (i = 1; i <= 4; i++)
      printf "%s{\"id\":%d,\"content\":\"%s\",\"single_word\":false,\"lstrip\":false," \
             "\"rstrip\":false,\"normalized\":false,\"special\":true}", (i > 1 ? "," : ""), i - 1, sp[i]
    printf "],\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Whitespace\"}," \
           "\"post_processor\":null,\"decoder\":null,\"model\":{\"type\":\"WordLevel\",\"vocab\":{"
    for (i = 1; i <= 4; i++)
      printf "%s\"%s\":%d", (i > 1 ? "," : ""), sp[i], i - 1
    for (i = 4; i < n; i++)
      printf ",\"w%d\":%d", i - 4, i
    printf "},\"unk_token\":\"[UNK]\"}}\n"
  }' > "$2"
}
make_vocab "$src_vocab" "$out/src.json"
make_vocab "$tgt_vocab" "$out/tgt.json"

# Synthetic sentences of WORDS random source words (fixed seed: the same input each run).
awk -v n="$N" -v w="$WORDS" -v v="$src_vocab" 'BEGIN {
  srand(1)
  for (s = 0; s < n; s++) {
    line = ""
    for (i = 0; i < w; i++)
      line = line (i ? " " : "") "w" int(rand() * (v - 4))
    print line
  }
}' > "$out/sentences.txt"
head -n "$NC" "$out/sentences.txt" > "$out/sentences-nocache.txt"

"$clf" init -c "$config" --seed 1 -o "$out/weights.safetensors"
echo "# $config, $threads threads, $WORDS-word sentences, --max-len $MAX_LEN," \
  "--weight-type $WEIGHT_TYPE"

run_case() { # name input extra-options...
  local name=$1 input=$2 r t stats first="" base=""
  local -A rates=()
  shift 2
  # --stats times clf_decode alone (loading the model is left out) and counts the output
  # tokens of the best hypotheses; the median of REPEAT runs is kept. The weight types take
  # turns within each round, so that a busy neighbour slows them alike.
  for ((r = 0; r < REPEAT; r++)); do
    for t in $WEIGHT_TYPE; do
      "$clf" translate -c "$config" -w "$out/weights.safetensors" --src-vocab "$out/src.json" \
        --tgt-vocab "$out/tgt.json" --backend "${BACKEND:-cpu}" --threads "$threads" --max-len "$MAX_LEN" \
        --weight-type "$t" --stats "$@" < "$input" > "$out/out.$t.txt" 2> "$out/stats.txt"
      stats=$(grep 'clformer: translate:' "$out/stats.txt")
      rates[$t]="${rates[$t]:-} $(echo "$stats" | awk '{for (i = 1; i < NF; i++) if ($(i + 1) == "tokens/s") print $i}')"
    done
  done
  for t in $WEIGHT_TYPE; do
    local med
    med=$(echo "${rates[$t]}" | tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
    [ -z "$first" ] && first=$t base=$med
    echo "$med" | awk -v name="$name" -v t="$t" -v s="$(wc -l < "$input")" \
      -v tok="$(wc -w < "$out/out.$t.txt")" -v runs="${rates[$t]}" -v base="$base" -v first="$first" '
      { printf "%-28s %-5s sentences=%-3d tokens=%-6d tokens/s=%.1f (x%.2f of %s; median of:%s)\n",
               name, t, s, tok, $1, $1 / base, first, runs }'
  done
}

for c in $CASES; do
  mode=${c%%:*} batch=${c##*:}
  beam=1
  [ "$mode" != greedy ] && beam=${mode#beam}
  run_case "$mode batch=$batch cache" "$out/sentences.txt" --beam "$beam" --batch "$batch"
  if [ "$NOCACHE" = 1 ]; then
    run_case "$mode batch=$batch no-cache" "$out/sentences-nocache.txt" --beam "$beam" \
      --batch "$batch" --no-cache
  fi
done
