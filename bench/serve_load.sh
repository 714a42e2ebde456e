#!/usr/bin/env bash
# Load test of `clformer serve` against offline `clformer translate --batch 32`, loopback.
#   bench/serve_load.sh [MODEL_DIR] [SENTENCES] [CLIENTS...]
# Defaults: the shipped model, 256 sentences of its valid.en, 1 8 32 clients. Each client
# sends single sentences back to back (POST /v1/translate) until all are sent; reported per
# client count: sentences/s, output tokens/s (from /metrics), p50/p95/p99 latency, the mean
# batch occupancy (decoder rows per step); then the offline run on the same sentences with the server's output
# limit (--max-len M, GET /health). Environment: CLF_CLI (default build/bin/clformer),
# SERVE_ARGS (more `serve` options, e.g. "--backend opencl"), TRANSLATE_ARGS (the same for
# the offline run).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
cli=${CLF_CLI:-build/bin/clformer}
model=${1:-models/en-de-gettext}
count=${2:-256}
shift $(($# > 2 ? 2 : $#))
clients=("$@")
[ ${#clients[@]} -gt 0 ] || clients=(1 8 32)
work=$(mktemp -d "${TMPDIR:-/tmp}/serve-load.XXXXXX")
trap 'rm -rf "$work"' EXIT
grep -v '^[[:space:]]*$' "$model/valid.en" | head -n "$count" >"$work/in.txt"

python3 - "$cli" "$model" "$work/in.txt" "${SERVE_ARGS:-}" "${clients[@]}" <<'EOF'
import http.client, json, os, shlex, signal, subprocess, sys, tempfile, threading, time

cli, model, path, extra, *clients = sys.argv[1:]
sentences = [l.rstrip("\n") for l in open(path, encoding="utf-8")]

def metric(port, name):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    return float(next(l.split()[1] for l in text.splitlines() if l.startswith(name + " ")))

err = tempfile.TemporaryFile()
p = subprocess.Popen([cli, "serve", "-m", model, "--port", "0", "--queue", "4096",
                      *shlex.split(extra)], stderr=err)
port = None
while port is None:
    assert p.poll() is None, "serve exited"
    err.seek(0)
    for line in err.read().decode().splitlines():
        if "serving on http://" in line:
            port = int(line.rsplit(":", 1)[1])
    time.sleep(0.05)
c = http.client.HTTPConnection("127.0.0.1", port)
c.request("GET", "/health")
max_len = json.loads(c.getresponse().read())["models"][0]["max_len"]
c.close()

print(f"{len(sentences)} sentences, output limit {max_len}")
print(f"{'clients':>7} {'sent/s':>8} {'tok/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'batch':>6}")
for n in map(int, clients):
    lat, lock, nxt = [], threading.Lock(), [0]
    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(sentences):
                break
            t = time.perf_counter()
            conn.request("POST", "/v1/translate", json.dumps({"sentences": [sentences[i]]}),
                         {"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            assert r.status == 200, r.status
            with lock:
                lat.append(time.perf_counter() - t)
        conn.close()
    tok0 = metric(port, "clformer_tokens_out_total")
    steps0 = metric(port, "clformer_batch_rows_count")
    rows0 = metric(port, "clformer_batch_rows_sum")
    sent0 = metric(port, "clformer_sentences_total")
    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(n)]
    for t in threads: t.start()
    for t in threads: t.join()
    wall = time.perf_counter() - t0
    tok = metric(port, "clformer_tokens_out_total") - tok0
    steps = metric(port, "clformer_batch_rows_count") - steps0
    rows = metric(port, "clformer_batch_rows_sum") - rows0
    sent = metric(port, "clformer_sentences_total") - sent0
    lat.sort()
    q = lambda f: 1000 * lat[min(len(lat) - 1, int(f * len(lat)))]
    print(f"{n:>7} {len(lat) / wall:>8.1f} {tok / wall:>8.0f} {q(.5):>8.1f} {q(.95):>8.1f} "
          f"{q(.99):>8.1f} {rows / max(steps, 1):>6.1f}", flush=True)
p.send_signal(signal.SIGTERM)
assert p.wait(120) == 0

t0 = time.perf_counter()
subprocess.run([cli, "translate", "-m", model, "--batch", "32", "--max-len", str(max_len),
                *shlex.split(os.environ.get("TRANSLATE_ARGS", ""))],
               stdin=open(path), stdout=subprocess.DEVNULL, check=True)
wall = time.perf_counter() - t0
print(f"offline translate --batch 32: {len(sentences) / wall:.1f} sentences/s (model load included)")
EOF
