#!/usr/bin/env bash
# What hosting more models costs `clformer serve`: the same model served alone and with
# copies of it beside it (-m m1=DIR -m m2=DIR ...), N concurrent clients each sending single
# sentences back to back to the first (POST /v1/translate, "model": "m1"), loopback, CPU:
#   bench/serve_models.sh [MODEL_DIR] [SENTENCES] [MODELS] [CLIENTS...]
# Defaults: the shipped model, 256 lines of its valid.en, 2 models, 1 and 32 clients. Each
# round serves 1 model, then MODELS, in turn (REPEAT rounds, the median kept): sentences/s
# and p50/p99 latency, and MODELS' rate over one model's; every answer must equal the
# single model's (exit 1 if not). Env: CLF_CLI (default build/bin/clformer), THREADS (2),
# REPEAT (3), SERVE_ARGS (more `serve` options, e.g. "--weight-type int8").
# A benchmark, not a test: CI never runs it. Results: bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
unset OPENBLAS_CORETYPE # see bench/common.sh
. scripts/env.sh
cli=${CLF_CLI:-build/bin/clformer}
model=${1:-models/en-de-gettext}
count=${2:-256}
models=${3:-2}
shift $(($# > 3 ? 3 : $#))
clients=("$@")
[ ${#clients[@]} -gt 0 ] || clients=(1 32)
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "$(nproc) cores, clformer $(git rev-parse --short HEAD), model $model"
python3 - "$cli" "$model" "$count" "$models" "${THREADS:-2}" "${REPEAT:-3}" "${SERVE_ARGS:-}" \
  "${clients[@]}" <<'PY'
import http.client, json, re, shlex, statistics, subprocess, sys, tempfile, threading, time
cli, model, count, models, threads, repeat, extra = sys.argv[1:8]
clients = [int(c) for c in sys.argv[8:]]
lines = [l.strip() for l in open(f"{model}/valid.en", encoding="utf-8") if l.strip()][:int(count)]

def serve(n):
    err = tempfile.TemporaryFile()
    argv = [cli, "serve", "--port", "0", "--threads", threads, "--queue", "4096", *shlex.split(extra)]
    for i in range(n):
        argv += ["-m", f"m{i + 1}={model}"]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
    end = time.time() + 300
    while time.time() < end:
        err.seek(0)
        m = re.search(rb"serving on http://[^\s:]+:(\d+)", err.read())
        if m:
            return p, int(m.group(1))
        assert p.poll() is None, "serve exited"
        time.sleep(0.05)
    raise SystemExit("serve did not start")

def load(port, n):
    nxt, lock, lat, out = [0], threading.Lock(), [], [None] * len(lines)
    def client():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(lines):
                break
            t = time.perf_counter()
            c.request("POST", "/v1/translate", json.dumps({"model": "m1", "sentences": [lines[i]]}),
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            body = r.read()
            lat.append(time.perf_counter() - t)
            assert r.status == 200, body
            out[i] = json.loads(body)["translations"][0]["text"]
    ts = [threading.Thread(target=client) for _ in range(n)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    lat.sort()
    q = lambda f: 1000 * lat[min(len(lat) - 1, int(f * len(lat)))]
    return len(lines) / wall, q(0.5), q(0.99), out

rows, answers = {}, {}
for r in range(int(repeat)):
    for n in (1, int(models)):
        p, port = serve(n)
        for c in clients:
            rate, p50, p99, out = load(port, c)
            rows.setdefault((n, c), []).append((rate, p50, p99))
            answers.setdefault(n, out)
            assert out == answers[n]
            print(f"  round {r + 1}: {n} model(s), {c:3} clients: {rate:7.1f} sentences/s, "
                  f"p50 {p50:6.1f} ms, p99 {p99:7.1f} ms", flush=True)
        p.terminate()
        p.wait(60)
print(f"\n| models | clients | sentences/s | p50 ms | p99 ms | x one model |")
print("|---:|---:|---:|---:|---:|---:|")
for c in clients:
    one = statistics.median(x[0] for x in rows[(1, c)])
    for n in (1, int(models)):
        med = [statistics.median(x[k] for x in rows[(n, c)]) for k in range(3)]
        print(f"| {n} | {c} | {med[0]:.1f} | {med[1]:.1f} | {med[2]:.1f} | {med[0] / one:.2f} |")
same = answers[1] == answers[int(models)]
print(f"answers with {models} models equal to one model's: {same}")
sys.exit(0 if same else 1)
PY
