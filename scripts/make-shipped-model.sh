#!/usr/bin/env bash
# Reproduces models/en-de-gettext, the model scripts/setup.sh translates with: English ->
# German UI messages from the gettext catalogs Debian installs (scripts/make_gettext_corpus.sh),
# one joint SentencePiece vocabulary, configs/shipped-en-de.yaml, F16 weights.
#   scripts/make-shipped-model.sh [OUT_DIR]     (default runs/shipped; after scripts/setup.sh)
# Steps: corpus -> data/gettext, `clformer vocab --sentencepiece` -> spm.model, `clformer
# train` -> runs/shipped-train, `clformer quantize --type f16` -> OUT_DIR/weights.safetensors,
# the model: section of the run's config -> OUT_DIR/model.yaml, the vocabulary as
# OUT_DIR/src.model and tgt.model, and the validation pairs as OUT_DIR/valid.{en,de}.
# The catalogs differ between machines (which packages are installed), so another machine
# trains on another corpus; the shipped model's own corpus size is in the README.
# Needs msgunfmt/msgconv (apt-get install gettext). Environment: BUILD (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
unset OPENBLAS_CORETYPE
. scripts/env.sh
clf=${BUILD:-build}/bin/clformer
out=${1:-runs/shipped}
run=runs/shipped-train
[ -f data/gettext/train.tsv ] || scripts/make_gettext_corpus.sh data/gettext
mkdir -p "$run"
if [ ! -f "$run/spm.model" ]; then
  cut -f1 data/gettext/train.tsv >"$run/train.en"
  cut -f2 data/gettext/train.tsv >"$run/train.de"
  "$clf" vocab --sentencepiece --vocab-size 5000 --model-type unigram -o "$run/spm.model" \
    "$run/train.en" "$run/train.de"
fi
if [ -f "$run/last.safetensors" ]; then
  "$clf" train -c configs/shipped-en-de.yaml --resume
else
  "$clf" train -c configs/shipped-en-de.yaml
fi
tmp=$out.tmp.$$
rm -rf "$tmp"
mkdir -p "$tmp"
"$clf" quantize -w "$run/last.safetensors" -o "$tmp/weights.safetensors" --type f16 --embeddings
{
  echo "# English -> German UI messages, trained by clformer (scripts/make-shipped-model.sh;"
  echo "# README, \"The shipped model\"). The vocabulary is src.model = tgt.model (SentencePiece)."
  awk '/^[^ #]/ { on = ($0 == "model:") } on' "$run/config.yaml"
  echo "languages: {source: [en], target: [de]}"
} >"$tmp/model.yaml"
cp "$run/spm.model" "$tmp/src.model"
cp "$run/spm.model" "$tmp/tgt.model"
cut -f1 data/gettext/valid.tsv >"$tmp/valid.en"
cut -f2 data/gettext/valid.tsv >"$tmp/valid.de"
rm -rf "$out"
mv "$tmp" "$out"
echo "wrote $out: $(du -sh "$out/weights.safetensors" | cut -f1) of F16 weights"
