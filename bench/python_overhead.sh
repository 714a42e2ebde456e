#!/usr/bin/env bash
# translate_batch from Python against `clformer translate` on the same sentences (issue 39):
#   bench/python_overhead.sh
# The 500 validation sentences of models/en-de-gettext, greedy and beam 4, batch 32, on
# THREADS threads of the CPU backend: the CLI's decoding time (--stats, loading excluded)
# and translate_batch's wall time in one Python process (the translator opened once,
# before the clock), each REPEAT times in turn, the median kept. Both must give the same
# lines (exit 1 if not). Env: BUILD (default build), THREADS (2), REPEAT (3).
# A benchmark, not a test: CI never runs it. Results: bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
build=$(cd "${BUILD:-build}" && pwd)
THREADS=${THREADS:-2} REPEAT=${REPEAT:-3}
model=models/en-de-gettext
out=runs/bench/python
mkdir -p "$out"
venv="$build/python/venv"
if ! "$venv/bin/python" -c 'import clformer' 2>/dev/null; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  CLFORMER_BUILD_DIR="$build" PIP_NO_INDEX=1 "$venv/bin/pip" install -q --no-build-isolation ./python
fi
cat > "$out/time.py" <<'PY'
import sys, time
import clformer
model, beam, threads, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
t = clformer.Translator(model, threads=threads)
lines = [l.rstrip("\n") for l in open(f"{model}/valid.en", encoding="utf-8")]
t0 = time.perf_counter()
res = t.translate_batch(lines, beam_size=beam, max_batch_size=32)
dt = time.perf_counter() - t0
open(path, "w", encoding="utf-8").write("".join(r.text[0] + "\n" for r in res))
print(f"{dt:.4f}")
PY
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for beam in 1 4; do
  cli_s=() py_s=()
  for ((r = 0; r < REPEAT; r++)); do
    "$build/bin/clformer" translate -m "$model" --beam $beam --threads "$THREADS" --stats \
      < "$model/valid.en" > "$out/cli.$beam.txt" 2> "$out/cli.$beam.err"
    # "... in 1.234 s ..." : the decoding time the CLI reports
    cli_s+=("$(grep -oE '[0-9.]+ s' "$out/cli.$beam.err" | head -1 | cut -d' ' -f1)")
    py_s+=("$("$venv/bin/python" "$out/time.py" "$model" "$beam" "$THREADS" "$out/py.$beam.txt")")
    cmp -s "$out/cli.$beam.txt" "$out/py.$beam.txt" || { echo "beam $beam: Python and CLI differ" >&2; exit 1; }
  done
  c=$(med "${cli_s[@]}") p=$(med "${py_s[@]}")
  awk -v b=$beam -v c="$c" -v p="$p" 'BEGIN {printf "beam %d: CLI %.3f s, Python %.3f s, overhead %+.1f%%\n", b, c, p, 100 * (p / c - 1)}'
done
