#!/usr/bin/env bash
# Validation BLEU of the shipped model (models/en-de-gettext) as the README reports it:
# sacreBLEU (13a tokenization of the detokenized output, the standard MT figure) of its 500
# held-out pairs, greedy and beam 4, with the file's F16 weights and with int8, CPU backend.
#   bench/shipped_bleu.sh [MODEL_DIR]            (default models/en-de-gettext)
# Needs sacrebleu (pip): a venv on top of Debian's python3 (CLF_BLEU_VENV, default
# /work/venv-bleu), created and filled on first use. A benchmark, not a test: CI never runs it
# (the shipped_model suite checks a white-space BLEU floor without Python).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
clf=${BUILD:-build}/bin/clformer
dir=${1:-models/en-de-gettext}
venv=${CLF_BLEU_VENV:-/work/venv-bleu}
if ! "$venv/bin/python" -c 'import sacrebleu' 2>/dev/null; then
  python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q sacrebleu
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "model $dir, $(wc -l <"$dir/valid.en") validation pairs, sacrebleu $("$venv/bin/python" -c 'import sacrebleu; print(sacrebleu.__version__)')"
for type in f16 int8; do
  for beam in 1 4; do
    "$clf" translate -m "$dir" --weight-type "$type" --beam "$beam" --batch 32 \
      <"$dir/valid.en" >"$tmp/hyp.txt"
    score=$("$venv/bin/sacrebleu" -b -w 2 "$dir/valid.de" <"$tmp/hyp.txt")
    printf '%-5s beam %d  BLEU %s\n' "$type" "$beam" "$score"
  done
done
