#!/usr/bin/env bash
# One command from a fresh Debian machine: install the packages, build, and translate a few
# English sentences into German with the model shipped in models/en-de-gettext (trained by
# clformer on the gettext catalogs; README, "The shipped model"), on the CPU backend.
# The paper's base model with random weights (forward, bench) is the README's next step.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
sentences=(
  "Could not open file."
  "The file has been saved."
  "Do you want to delete this folder?"
  "No network connection is available."
  "Show hidden files"
)
echo "English -> German with models/en-de-gettext (beam 4, CPU backend):"
printf '%s\n' "${sentences[@]}" | ./build/bin/clformer translate -m models/en-de-gettext --beam 4 |
  paste <(printf '%s\n' "${sentences[@]}") - | sed 's/\t/  ->  /'
