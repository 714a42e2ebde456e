#!/usr/bin/env bash
# Decoding benchmark: `clformer translate` tokens/s, greedy and beam 4, batch 1 and 32,
# with and without the KV cache, on random weights and a synthetic vocabulary.
#   bench/translate.sh [threads] [config]      (defaults: all cores, configs/base-prenorm.yaml)
# Env: BUILD (build dir, default build), N (sentences with the cache, default 32),
#      NC (sentences without the cache, default 8: every step re-runs the whole prefix),
#      WORDS (words per sentence, default 20), MAX_LEN (output tokens, default 64).
# Prints one line per case. Random weights may emit [EOS] before MAX_LEN, so the rate is
# tokens produced / wall time (model load included once per case: a few 100 ms), the
# tokens counted as output words (wc -w; specials are not printed, so not counted).
set -euo pipefail
cd "$(dirname "$0")/.."
unset OPENBLAS_CORETYPE # see bench/run.sh
. scripts/env.sh
threads=${1:-$(nproc)}
config=${2:-configs/base-prenorm.yaml}
N=${N:-32} NC=${NC:-8} WORDS=${WORDS:-20} MAX_LEN=${MAX_LEN:-64}
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
echo "# $config, $threads threads, $WORDS-word sentences, --max-len $MAX_LEN"

run_case() { # name input extra-options...
  local name=$1 input=$2
  shift 2
  local t0 t1 tokens lines
  t0=$(date +%s.%N)
  "$clf" translate -c "$config" -w "$out/weights.safetensors" --src-vocab "$out/src.json" \
    --tgt-vocab "$out/tgt.json" --backend cpu --threads "$threads" --max-len "$MAX_LEN" "$@" \
    < "$input" > "$out/out.txt"
  t1=$(date +%s.%N)
  tokens=$(wc -w < "$out/out.txt")
  lines=$(wc -l < "$input")
  awk -v name="$name" -v s="$lines" -v tok="$tokens" -v t0="$t0" -v t1="$t1" 'BEGIN {
    printf "%-28s sentences=%-3d tokens=%-6d seconds=%-8.2f tokens/s=%.1f\n",
           name, s, tok, t1 - t0, tok / (t1 - t0)
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
