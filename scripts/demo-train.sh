#!/usr/bin/env bash
# The README's training demo: English -> German UI messages from the gettext catalogs Debian
# installs, a small Transformer trained twice, pre-norm and post-norm, same everything else.
#   scripts/demo-train.sh            (after scripts/setup.sh; ~15 minutes per model on 2 cores)
# Writes data/gettext/{train,valid}.tsv and runs/gettext-{pre,post}/ (log.csv, checkpoints),
# then prints each run's validation curve. Needs msgunfmt/msgconv (apt-get install gettext).
set -euo pipefail
cd "$(dirname "$0")/.."
unset OPENBLAS_CORETYPE
. scripts/env.sh
clf=${BUILD:-build}/bin/clformer
[ -f data/gettext/train.tsv ] || scripts/make_gettext_corpus.sh data/gettext
for v in pre post; do
  if [ -f "runs/gettext-$v/last.safetensors" ]; then
    "$clf" train -c "configs/demo-gettext-$v.yaml" --resume
  else
    "$clf" train -c "configs/demo-gettext-$v.yaml"
  fi
done
for v in pre post; do
  echo "== $v-norm: step, valid_loss, valid_bleu"
  awk -F, 'NR > 1 && $6 != "" { print $1, $6, $7 }' "runs/gettext-$v/log.csv"
done
echo "translate with: $clf translate -c runs/gettext-pre/config.yaml -w runs/gettext-pre/last.safetensors --src-vocab runs/gettext-pre/src.json --tgt-vocab runs/gettext-pre/tgt.json"
