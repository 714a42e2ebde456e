"""The Python half of bench/serve_load.sh: load on `clformer serve`, the CTranslate2 peer
server (bench/serve_peer_ct2.py) and offline `clformer translate --batch 32`.

    python bench/serve_load.py CLI MODEL_DIR CT2_DIR SENTENCES_FILE OUT_DIR CLIENTS...

Environment (set by serve_load.sh): REPEAT, THREADS, ENGINES (of "clformer peer offline"),
SERVE_ARGS, TRANSLATE_ARGS, PEER_ARGS, PEER_COMPUTE_TYPE, PEER_PYTHON.
Each round runs every engine in turn (interleaved), the median of REPEAT rounds is kept.
A server is started per round and engine, outside the clock; each client count is one
timed pass: N client threads, each on its own keep-alive connection, send the sentences
one per request (LibreTranslate's POST /translate, JSON, the same body to both servers)
back to back until all are sent. Tokens are the output's pieces by the model's tgt.model,
counted the same way for every engine. The offline rate is `translate --stats`' decoding
time (the model's loading excluded, as the servers' start is).
Then the answers: the peer's against its own offline path (serve_peer_ct2.py offline:
must be equal), clformer's served answers against `clformer translate` (must be equal),
and clformer's against the peer's (two engines: how many equal, token agreement).
"""

import http.client
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

try:
    import sentencepiece
except ImportError:  # a machine without it (the GPU machine): no token counts
    sentencepiece = None

CLI, MODEL, CT2, PATH, OUT, *CLIENTS = sys.argv[1:]
CLIENTS = [int(n) for n in CLIENTS]
SENTENCES = [l.rstrip("\n") for l in open(PATH, encoding="utf-8")]
REPEAT = int(os.environ.get("REPEAT", "3"))
THREADS = os.environ.get("THREADS", "2")
ENGINES = os.environ.get("ENGINES", "clformer peer offline").split()
TGT = sentencepiece and sentencepiece.SentencePieceProcessor(model_file=f"{MODEL}/tgt.model")
HERE = os.path.dirname(os.path.abspath(__file__))


def ntokens(texts):
    """Output pieces of texts; NaN (printed "nan" tokens/s) without sentencepiece."""
    return sum(len(TGT.encode(t)) for t in texts) if TGT else float("nan")


class Server:
    def __init__(self, argv, env=None):
        self.err = tempfile.TemporaryFile()
        self.p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self.err,
                                  env={**os.environ, **(env or {})})
        self.port, end = None, time.time() + 300
        while self.port is None:
            self.err.seek(0)
            text = self.err.read().decode("utf-8", "replace")
            assert self.p.poll() is None and time.time() < end, f"{argv[:3]}: {text}"
            m = re.search(r"serving on http://[^\s:]+:(\d+)", text)
            if m:
                self.port = int(m.group(1))
            time.sleep(0.05)

    def get(self, path):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        c.request("GET", path)
        r = c.getresponse()
        data = r.read()
        c.close()
        return json.loads(data)

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        rc = self.p.wait(120)
        assert rc == 0, f"server exited {rc}"


def load(port, n, source, target):
    """n clients over SENTENCES: (wall seconds, latencies, answers in sentence order)."""
    lat, answers, lock, nxt, errors = [], [None] * len(SENTENCES), threading.Lock(), [0], []

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        try:
            while True:
                with lock:
                    i = nxt[0]
                    nxt[0] += 1
                if i >= len(SENTENCES):
                    break
                body = json.dumps({"q": SENTENCES[i], "source": source, "target": target})
                t = time.perf_counter()
                conn.request("POST", "/translate", body, {"Content-Type": "application/json"})
                r = conn.getresponse()
                data = r.read()
                dt = time.perf_counter() - t
                assert r.status == 200, (r.status, data)
                answers[i] = json.loads(data)["translatedText"]
                with lock:
                    lat.append(dt)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
        finally:
            conn.close()

    threads = [threading.Thread(target=client) for _ in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    assert not errors, errors[:3]
    return wall, sorted(lat), answers


def quantile(lat, f):
    return 1000 * lat[min(len(lat) - 1, int(f * len(lat)))]


def serve_round(name, server, rows, answers):
    langs = server.get("/languages")
    source, target = langs[0]["code"], langs[0]["targets"][0]
    for n in CLIENTS:
        wall, lat, out = load(server.port, n, source, target)
        rows.setdefault((name, n), []).append(
            (len(lat) / wall, ntokens(out) / wall, quantile(lat, .5), quantile(lat, .95),
             quantile(lat, .99)))
        answers.setdefault(name, {})[n] = out
        print(f"  {name:9} {n:>4} clients: {len(lat) / wall:7.1f} sentences/s, p50 "
              f"{quantile(lat, .5):7.1f} ms, p99 {quantile(lat, .99):7.1f} ms", flush=True)


def offline_round(max_len, rows):
    argv = [CLI, "translate", "-m", MODEL, "--batch", "32", "--max-len", str(max_len),
            "--threads", THREADS, "--stats", *shlex.split(os.environ.get("TRANSLATE_ARGS", ""))]
    r = subprocess.run(argv, input="".join(s + "\n" for s in SENTENCES).encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
    out = r.stdout.decode().split("\n")[:-1]
    seconds = float(re.search(r"output tokens in ([0-9.]+) s", r.stderr.decode()).group(1))
    rows.setdefault(("offline", 0), []).append(
        (len(out) / seconds, ntokens(out) / seconds, 0, 0, 0))
    print(f"  offline   batch 32: {len(out) / seconds:7.1f} sentences/s", flush=True)
    return out


def main():
    peer_py = os.environ.get("PEER_PYTHON", sys.executable)
    compute = os.environ.get("PEER_COMPUTE_TYPE", "int8")
    # each CTranslate2 type on its faster GEMM library on this AMD CPU (bench/ct2_compare.sh)
    peer_env = {"CT2_USE_MKL": "1" if compute == "float32" else "0"}
    peer_argv = [peer_py, f"{HERE}/serve_peer_ct2.py", "serve", MODEL, CT2, "--port", "0",
                 "--threads", THREADS, "--compute-type", compute,
                 *shlex.split(os.environ.get("PEER_ARGS", ""))]
    clf_argv = [CLI, "serve", "-m", MODEL, "--port", "0", "--queue", "4096", "--threads",
                THREADS, *shlex.split(os.environ.get("SERVE_ARGS", ""))]
    probe = Server(clf_argv)
    max_len = probe.get("/health")["models"][0]["max_len"]
    probe.stop()
    peer_argv += ["--max-len", str(max_len)]
    peer = f"peer CTranslate2 {compute}" if "peer" in ENGINES else "no peer"
    print(f"{len(SENTENCES)} sentences, output limit {max_len}, {THREADS} threads, "
          f"{peer}, median of {REPEAT}; engines in turn each round", flush=True)
    rows, answers, offline = {}, {}, None
    for r in range(REPEAT):
        print(f"round {r + 1} (load average {open('/proc/loadavg').read().split()[0]})", flush=True)
        for e in ENGINES:
            if e == "offline":
                offline = offline_round(max_len, rows)
                continue
            srv = Server(clf_argv) if e == "clformer" else Server(peer_argv, peer_env)
            try:
                serve_round(e, srv, rows, answers)
            finally:
                srv.stop()

    med = {k: [statistics.median(c) for c in zip(*v)] for k, v in rows.items()}
    off = med.get(("offline", 0))
    print()
    print("| engine | clients | sentences/s | tokens/s | p50 ms | p95 ms | p99 ms | "
          "x offline | x peer |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in CLIENTS:
        for e in [e for e in ENGINES if e != "offline"]:
            m = med[(e, n)]
            peer = med.get(("peer", n))
            x_off = f"{m[0] / off[0]:.2f}" if off else "-"
            x_peer = f"{m[0] / peer[0]:.2f}" if peer and e != "peer" else "-"
            print(f"| {e} | {n} | {m[0]:.1f} | {m[1]:.0f} | {m[2]:.1f} | {m[3]:.1f} | "
                  f"{m[4]:.1f} | {x_off} | {x_peer} |")
    if off:
        print(f"| offline translate --batch 32 | - | {off[0]:.1f} | {off[1]:.0f} | | | | 1.00 | |")
    for e in [e for e in ENGINES if e != "offline"]:
        if (e, 1) in med and (e, 32) in med:
            print(f"{e}: p99 at 32 clients / p50 at 1 client = "
                  f"{med[(e, 32)][4] / med[(e, 1)][2]:.2f}")

    # the answers (of the last round)
    os.makedirs(OUT, exist_ok=True)
    if "peer" in answers:
        r = subprocess.run([peer_py, f"{HERE}/serve_peer_ct2.py", "offline", MODEL, CT2,
                            "--threads", THREADS, "--compute-type", compute, "--max-len",
                            str(max_len)], input="".join(s + "\n" for s in SENTENCES).encode(),
                           stdout=subprocess.PIPE, check=True, env={**os.environ, **peer_env})
        ref = r.stdout.decode().split("\n")[:-1]
        for n, out in answers["peer"].items():
            bad = sum(a != b for a, b in zip(out, ref))
            print(f"check: peer at {n} clients against CTranslate2 offline: {bad} mismatches "
                  f"of {len(ref)}")
    if "clformer" in answers and offline is not None:
        for n, out in answers["clformer"].items():
            bad = sum(a != b for a, b in zip(out, offline))
            print(f"check: clformer serve at {n} clients against clformer translate: "
                  f"{bad} mismatches of {len(offline)}")
    if "clformer" in answers and "peer" in answers and TGT:
        n = max(CLIENTS)
        a, b = answers["clformer"][n], answers["peer"][n]
        same = agree = total = 0
        for x, y in zip(a, b):
            tx, ty = TGT.encode(x), TGT.encode(y)
            same += x == y
            agree += sum(p == q for p, q in zip(tx, ty))
            total += max(len(tx), len(ty))
        print(f"clformer against the peer ({n} clients): {same}/{len(a)} sentences equal, "
              f"token agreement {agree / max(total, 1):.3f} (same position, same piece)")
        with open(f"{OUT}/clformer.txt", "w") as f:
            f.write("".join(t + "\n" for t in a))
        with open(f"{OUT}/peer.txt", "w") as f:
            f.write("".join(t + "\n" for t in b))


if __name__ == "__main__":
    main()
