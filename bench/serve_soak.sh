#!/usr/bin/env bash
# Soak of `clformer serve` (issue 37: memory flat over 10 minutes at 32 clients, peak RSS
# growth under 5%), loopback, CPU:
#   bench/serve_soak.sh [MODEL_DIR]
# Starts serve on the model (default the shipped one), then CLIENTS client threads send
# single sentences of its valid.en (POST /translate, in turn, round and round) back to back
# for DURATION seconds. The server's VmRSS (/proc/PID/status) is sampled every INTERVAL
# seconds; printed: the RSS at the end of the warm-up (the first WARMUP seconds) and the
# warm-up's peak, the peak after the warm-up and its growth over each in %, one sample a
# minute, requests answered. The RSS of a serving process moves with the batches in flight,
# so the goal (growth < 5%) is judged peak against peak: the warm-up's against the rest's.
# Every answer must be 200 and serve must exit 0 on SIGTERM (exit 1 otherwise); a growth of
# 5% or more exits 2.
# Env: CLF_CLI (default build/bin/clformer), DURATION (600), CLIENTS (32), WARMUP (60),
#      INTERVAL (2), THREADS (2), SERVE_ARGS (more `serve` options).
# A benchmark, not a test: CI never runs it. Results: bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
cli=${CLF_CLI:-build/bin/clformer}
model=${1:-models/en-de-gettext}
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n), $(nproc) cores, clformer $(git rev-parse --short HEAD)"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$cli" "$model" <<'PY'
import http.client, json, os, re, shlex, signal, subprocess, sys, tempfile, threading, time

cli, model = sys.argv[1:]
duration = float(os.environ.get("DURATION", "600"))
clients = int(os.environ.get("CLIENTS", "32"))
warmup = float(os.environ.get("WARMUP", "60"))
interval = float(os.environ.get("INTERVAL", "2"))
with open(os.path.join(model, "valid.en"), encoding="utf-8") as f:
    sentences = [l.rstrip("\n") for l in f if l.strip()]

err = tempfile.TemporaryFile()
p = subprocess.Popen([cli, "serve", "-m", model, "--port", "0", "--queue", "4096",
                      "--threads", os.environ.get("THREADS", "2"),
                      *shlex.split(os.environ.get("SERVE_ARGS", ""))],
                     stdout=subprocess.DEVNULL, stderr=err)
port = None
while port is None:
    err.seek(0)
    text = err.read().decode("utf-8", "replace")
    assert p.poll() is None, "serve exited: " + text
    m = re.search(r"serving on http://[^\s:]+:(\d+)", text)
    port = int(m.group(1)) if m else None
    time.sleep(0.05)
c = http.client.HTTPConnection("127.0.0.1", port)
c.request("GET", "/languages")
langs = json.loads(c.getresponse().read())
c.close()
src, tgt = langs[0]["code"], langs[0]["targets"][0]

def rss_kib():
    with open(f"/proc/{p.pid}/status") as f:
        return int(next(l.split()[1] for l in f if l.startswith("VmRSS:")))

stop, lock = threading.Event(), threading.Lock()
done, errors, nxt = [0], [], [0]

def client():
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    while not stop.is_set():
        with lock:
            i = nxt[0] % len(sentences)
            nxt[0] += 1
        try:
            conn.request("POST", "/translate", json.dumps({"q": sentences[i], "source": src,
                                                           "target": tgt}),
                         {"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            if r.status != 200:
                raise RuntimeError(f"status {r.status}")
        except Exception as e:  # noqa: BLE001
            with lock:
                errors.append(repr(e))
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            continue
        with lock:
            done[0] += 1
    conn.close()

print(f"serve pid {p.pid}, RSS at start {rss_kib() / 1024:.1f} MiB; {clients} clients for "
      f"{duration:.0f} s, warm-up {warmup:.0f} s", flush=True)
threads = [threading.Thread(target=client) for _ in range(clients)]
t0 = time.time()
for t in threads:
    t.start()
samples, next_print = [], 0.0
while True:
    el = time.time() - t0
    if el >= duration:
        break
    samples.append((el, rss_kib()))
    if el >= next_print:
        print(f"  {el:6.0f} s  RSS {samples[-1][1] / 1024:7.1f} MiB  {done[0]:7d} answered",
              flush=True)
        next_print += 60
    time.sleep(interval)
stop.set()
for t in threads:
    t.join()
wall = time.time() - t0
p.send_signal(signal.SIGTERM)
rc = p.wait(120)
warm = [s for s in samples if s[0] < warmup]
after = [s for s in samples if s[0] >= warmup]
end_warm, warm_peak = after[0][1], max(s[1] for s in warm)
peak = max(s[1] for s in after)
growth = 100.0 * (peak - warm_peak) / warm_peak
print(f"answered {done[0]} requests ({done[0] / wall:.1f}/s), {len(errors)} errors; "
      f"serve exit {rc}")
print(f"RSS at the end of the warm-up ({after[0][0]:.0f} s): {end_warm / 1024:.1f} MiB, the "
      f"warm-up's peak {warm_peak / 1024:.1f} MiB; peak after: {peak / 1024:.1f} MiB, "
      f"{100.0 * (peak - end_warm) / end_warm:+.2f}% over the end of the warm-up, "
      f"{growth:+.2f}% over its peak (goal < 5%: {'met' if growth < 5 else 'not met'})")
if errors:
    print("first errors:", errors[:3])
sys.exit(1 if errors or rc != 0 else 2 if growth >= 5 else 0)
PY
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
