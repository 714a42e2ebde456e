#!/usr/bin/env bash
# Decoding benchmark: `clformer translate` tokens/s, greedy and beam 4, batch 1 and 32,
# with and without the KV cache, on random weights and a synthetic vocabulary.
#   bench/translate.sh [threads] [config]      (defaults: all cores, configs/base-prenorm.yaml)
# Env: BUILD (build dir, default build), N (sentences with the cache, default 32),
#      NC (sentences without the cache, default 8: every step re-runs the whole prefix),
#      WORDS (words per sentence, default 20), MAX_LEN (output tokens, default 64),
#      REPEAT (runs per case, default 1: the median tokens/s is printed),
#      WEIGHT_TYPE (f32 or f16: translate --weight-type, in every case; default f32).
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
  local name=$1 input=$2 r stats rates=""
  shift 2
  # --stats times clf_decode alone (loading the model is left out) and counts the output
  # tokens of the best hypotheses; the median of REPEAT runs is kept.
  for ((r = 0; r < REPEAT; r++)); do
    "$clf" translate -c "$config" -w "$out/weights.safetensors" --src-vocab "$out/src.json" \
      --tgt-vocab "$out/tgt.json" --backend cpu --threads "$threads" --max-len "$MAX_LEN" \
      --weight-type "$WEIGHT_TYPE" --stats "$@" < "$input" > "$out/out.txt" 2> "$out/stats.txt"
    stats=$(grep 'clformer: translate:' "$out/stats.txt")
    rates="$rates $(echo "$stats" | awk '{for (i = 1; i < NF; i++) if ($(i + 1) == "tokens/s") print $i}')"
  done
  echo "$rates" | tr ' ' '\n' | grep . | sort -g | awk -v name="$name" -v s="$(wc -l < "$input")" \
    -v tok="$(wc -w < "$out/out.txt")" -v runs="$rates" '
    { v[NR] = $1 }
    END {
      printf "%-28s sentences=%-3d tokens=%-6d tokens/s=%.1f (median of:%s)\n",
             name, s, tok, v[int((NR + 1) / 2)], runs
    }'
}

for beam in 1 4; do
  for batch in 1 32; do
    mode=$([ "$beam" = 1 ] && echo greedy || echo "beam$beam")
    run_case "$mode batch=$batch cache" "$out/sentences.txt" --beam "$beam" --batch "$batch"
    run_case "$mode batch=$batch no-cache" "$out/sentences-nocache.txt" --beam "$beam" \
      --batch "$batch" --no-cache
  done
done
