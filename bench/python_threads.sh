#!/usr/bin/env bash
# translate_batch of single sentences from one Python thread against the same calls from a
# pool of 4 threads (ThreadPoolExecutor, the way a Python web server calls a model), one
# Translator shared by them:
#   bench/python_threads.sh
# The first 200 validation sentences of models/en-de-gettext, greedy, one per call, on
# THREADS threads of the CPU backend; each way REPEAT times in turn, the median kept
# (ms per sentence), and both must give the same lines (exit 1 if not). Env: BUILD
# (default build), THREADS (2), REPEAT (3).
# A benchmark, not a test: CI never runs it. Results: bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
unset OPENBLAS_CORETYPE # see bench/common.sh
build=$(cd "${BUILD:-build}" && pwd)
THREADS=${THREADS:-2} REPEAT=${REPEAT:-3}
venv="$build/python/venv"
if ! "$venv/bin/python" -c 'import clformer' 2>/dev/null; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  CLFORMER_BUILD_DIR="$build" PIP_NO_INDEX=1 "$venv/bin/pip" install -q --no-build-isolation ./python
fi
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "$(nproc) cores, clformer $(git rev-parse --short HEAD), $THREADS threads"
"$venv/bin/python" - "$THREADS" "$REPEAT" <<'PY'
import statistics, sys, time
from concurrent.futures import ThreadPoolExecutor
import clformer
threads, repeat = int(sys.argv[1]), int(sys.argv[2])
model = "models/en-de-gettext"
lines = [l.rstrip("\n") for l in open(f"{model}/valid.en", encoding="utf-8")][:200]
t = clformer.Translator(model, threads=threads)
one = lambda s: t.translate_batch([s])[0].text[0]
times, outs = {"one thread": [], "4 pool threads": []}, {}
for _ in range(repeat):
    for way in times:
        t0 = time.perf_counter()
        if way == "one thread":
            out = [one(s) for s in lines]
        else:
            with ThreadPoolExecutor(4) as ex:
                out = list(ex.map(one, lines))
        times[way].append((time.perf_counter() - t0) / len(lines) * 1000)
        outs[way] = out
for way, ts in times.items():
    print(f"{way:15} {statistics.median(ts):6.2f} ms a sentence (runs: "
          f"{', '.join(f'{x:.2f}' for x in ts)})")
a, b = times["one thread"], times["4 pool threads"]
print(f"pool / one thread: {statistics.median(b) / statistics.median(a):.2f}")
sys.exit(0 if outs["one thread"] == outs["4 pool threads"] else 1)
PY
