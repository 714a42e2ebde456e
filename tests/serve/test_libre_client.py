#!/usr/bin/env python3
"""clformer serve driven by LibreTranslate's own Python client (ctest `serve_libre`):

    python3 test_libre_client.py CLI MODEL_DIR VENV

libretranslatepy (PyPI, pinned 2.1.4) is not in Debian: scripts/deps.sh installs it into the
venv VENV (default ~/.local/share/clformer/venv-test). This script, started by any Python,
re-runs itself with VENV's python; without that venv it fails with one line saying to run
scripts/deps.sh. The client sends form-encoded bodies (POST /translate) and GET /languages
with an empty form body, as it does against a LibreTranslate server.

The reference for every translation is the offline CLI, `clformer translate -m MODEL_DIR
--max-len M` on the same sentences (M: the server's output limit, GET /health); the
languages are model.yaml's `languages:` line. Checked: languages() (names from iso-codes),
detect() (the model's one source language), translate() of the
model's validation sentences and of sentences with the characters form encoding escapes
(& = + % ; quotes, non-ASCII), 8 client threads at once, a refused pair (HTTP 400 with a
JSON error) and api_key through the client (--api-keys: 403 without it).
"""
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error

from serve_util import run_clients, run_tests

CLI, MODEL, VENV = sys.argv[1:4]
if os.environ.get("CLF_LIBRE_VENV_RUN") != "1":
    py = os.path.join(VENV, "bin", "python")
    ok = os.path.exists(py) and subprocess.run(
        [py, "-c", "import libretranslatepy"], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL).returncode == 0
    if not ok:
        print(f"test_libre_client: no venv with libretranslatepy at {VENV}: run scripts/deps.sh")
        sys.exit(1)
    os.environ["CLF_LIBRE_VENV_RUN"] = "1"
    sys.stdout.flush()
    os.execv(py, [py, os.path.abspath(__file__), *sys.argv[1:]])

from libretranslatepy import LibreTranslateAPI  # noqa: E402  (in VENV only)

START_TIMEOUT = 120  # the sanitized build loads slowly
with open(os.path.join(MODEL, "valid.en"), encoding="utf-8") as f:
    SENTENCES = [l.rstrip("\n") for l in f if l.strip()][:24]
# what form encoding escapes or changes: & = + % ; quotes, spaces, non-ASCII
SENTENCES += ["Save & quit", "a = b + c", "100% done; 0% left", 'Open "%s" for writing?',
              "Größe ändern …", "file name: %s  (read-only)"]


def model_languages():
    """model.yaml's `languages: {source: [..], target: [..]}` line."""
    with open(os.path.join(MODEL, "model.yaml"), encoding="utf-8") as f:
        m = re.search(r"^languages:\s*\{source:\s*\[([^\]]*)\],\s*target:\s*\[([^\]]*)\]\}",
                      f.read(), re.M)
    assert m, "model.yaml has no languages line"
    return [s.strip() for s in m.group(1).split(",")], [t.strip() for t in m.group(2).split(",")]


class Server:
    def __init__(self, *args):
        self.err = tempfile.TemporaryFile()
        self.p = subprocess.Popen([CLI, "serve", "-m", MODEL, "--port", "0", *args],
                                  stdout=subprocess.DEVNULL, stderr=self.err)
        end, self.port = time.time() + START_TIMEOUT, None
        while self.port is None:
            assert self.p.poll() is None, "serve exited: " + self.stderr()
            assert time.time() < end, "serve did not start: " + self.stderr()
            m = re.search(r"serving on http://[^\s:]+:(\d+)", self.stderr())
            self.port = int(m.group(1)) if m else None
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.port}"

    def stderr(self):
        self.err.seek(0)
        return self.err.read().decode("utf-8", "replace")

    def max_len(self):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        c.request("GET", "/health")
        health = json.loads(c.getresponse().read())
        c.close()
        return health["models"][0]["max_len"]

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
        return self.p.wait(60)

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def reference(sentences, max_len):
    out = subprocess.run([CLI, "translate", "-m", MODEL, "--max-len", str(max_len)],
                         input="".join(s + "\n" for s in sentences).encode(),
                         stdout=subprocess.PIPE, check=True, timeout=300).stdout
    lines = out.decode("utf-8").split("\n")[:-1]
    assert len(lines) == len(sentences), (len(lines), len(sentences))
    return lines


def http_error(fn, *args):
    """The HTTPError fn(*args) raises (AssertionError if none)."""
    try:
        fn(*args)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
    raise AssertionError(f"{fn.__name__}{args}: no HTTP error")


def test_languages(srv, ref, langs):
    sources, targets = langs
    got = LibreTranslateAPI(srv.url).languages()
    assert isinstance(got, list) and [l["code"] for l in got] == sources, got
    for l in got:
        assert l["targets"] == targets and isinstance(l["name"], str) and l["name"], l
    # names as LibreTranslate gives them, from iso-codes (the shipped model's source: en)
    assert got[0]["code"] != "en" or got[0]["name"] == "English", got


def test_detect(srv, ref, langs):
    """No detector: the model's one source language, as LibreTranslate's answer."""
    got = LibreTranslateAPI(srv.url).detect(SENTENCES[0])
    assert got == [{"confidence": 100.0, "language": langs[0][0]}], got


def test_translate(srv, ref, langs):
    lt = LibreTranslateAPI(srv.url)
    src, tgt = langs[0][0], langs[1][0]
    got = [lt.translate(s, src, tgt) for s in SENTENCES]
    bad = [(s, g, r) for s, g, r in zip(SENTENCES, got, ref) if g != r]
    assert not bad, f"{len(bad)} differ from clformer translate, first {bad[0]}"
    # source "auto": the one model of the target
    assert lt.translate(SENTENCES[0], "auto", tgt) == ref[0]


def test_concurrent(srv, ref, langs):
    src, tgt = langs[0][0], langs[1][0]

    def client(k):
        lt = LibreTranslateAPI(srv.url)  # a client of its own, as separate users have
        for i in range(k, len(SENTENCES), 8):
            got = lt.translate(SENTENCES[i], src, tgt)
            assert got == ref[i], (i, got, ref[i])

    run_clients(8, client)


def test_refused(srv, ref, langs):
    lt = LibreTranslateAPI(srv.url)
    code, body = http_error(lt.translate, SENTENCES[0], langs[0][0], "xx")
    assert code == 400 and "no model" in body["error"], (code, body)


def test_api_key(ref, langs):
    with tempfile.NamedTemporaryFile("w", suffix=".keys", delete=False) as f:
        f.write("k-1\n")
    srv = Server("--api-keys", f.name)
    try:
        src, tgt = langs[0][0], langs[1][0]
        assert LibreTranslateAPI(srv.url, api_key="k-1").translate(SENTENCES[0], src, tgt) == ref[0]
        assert LibreTranslateAPI(srv.url, api_key="k-1").languages()[0]["code"] == src
        code, body = http_error(LibreTranslateAPI(srv.url).translate, SENTENCES[0], src, tgt)
        assert code == 403 and "api_key" in body["error"], (code, body)
        code, body = http_error(LibreTranslateAPI(srv.url, api_key="nope").translate,
                                SENTENCES[0], src, tgt)
        assert code == 403, (code, body)
        assert srv.stop() == 0
    finally:
        os.unlink(f.name)
        srv.kill()


def main():
    t0 = time.time()
    langs = model_languages()
    srv = Server()
    failures = []
    try:
        ref = reference(SENTENCES, srv.max_len())
        tests = [(test_languages, (srv, ref, langs)), (test_detect, (srv, ref, langs)),
                 (test_translate, (srv, ref, langs)),
                 (test_concurrent, (srv, ref, langs)), (test_refused, (srv, ref, langs)),
                 (test_api_key, (ref, langs))]
        failures += run_tests(tests)
        rc = srv.stop()
        if rc != 0:
            failures.append("exit status")
            print(f"FAIL serve exited {rc} on SIGTERM:\n{srv.stderr()}")
    finally:
        srv.kill()
    print(f"{len(failures)} failed ({time.time() - t0:.1f} s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
