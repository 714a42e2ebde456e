"""The peer server of bench/serve_load.sh (issue 37, item 6 (b)): CTranslate2 behind a
minimal Python HTTP server with its own batching, speaking LibreTranslate's API.

    python bench/serve_peer_ct2.py serve MODEL_DIR CT2_DIR [--host H] [--port P]
        [--threads N] [--compute-type T] [--max-batch B] [--wait-ms W] [--max-len M]
        POST /translate (JSON or form: q a string or a list of strings, source, target;
        source "auto" is the model's source language) answers {"translatedText": ...} as
        LibreTranslate does; GET /languages the model's pair; GET /health {"status": "ok"}.
        Prints "serving on http://HOST:PORT" on stderr once it listens (--port 0: any
        free port); SIGTERM or SIGINT stops it.
    python bench/serve_peer_ct2.py offline MODEL_DIR CT2_DIR [same options]
        stdin -> stdout, one translation a line, through the same tokenize / translate_batch
        / detokenize path without HTTP: the reference the served answers are checked against.

MODEL_DIR is a clformer model directory with SentencePiece src.model / tgt.model and
model.yaml (its `languages:`), CT2_DIR its CTranslate2 conversion (`bench/ct2_compare.py
convert-dir MODEL_DIR CT2_DIR`). Text is cut into pieces with src.model as clformer does
(the library's Encode, no sampling); CTranslate2 adds <s> and </s> around the source (the
converted config) and decodes greedily up to --max-len tokens, length penalty 0; the pieces
are joined with tgt.model.

The batching: HTTP handler threads (ThreadingHTTPServer, one per connection) tokenize and
queue their sentences, then wait. One batcher thread takes up to --max-batch queued
sentences (if fewer are waiting, it waits up to --wait-ms for more), makes one
translate_batch call (CTranslate2 releases the GIL while it runs; inter_threads 1,
intra_threads --threads) and hands each sentence its result. Sentences that arrive during
a call wait for the next one: batches are formed between calls, not during them.
Needs ctranslate2, sentencepiece and PyYAML (the venv of bench/ct2_compare.sh).
"""

import argparse
import json
import signal
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import ctranslate2
import sentencepiece
import yaml

LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "es": "Spanish",
                  "it": "Italian", "nl": "Dutch", "pt": "Portuguese", "ru": "Russian"}
MAX_BODY = 1 << 20


class Engine:
    """The model, its SentencePiece models and the batching queue."""

    def __init__(self, args):
        self.src = sentencepiece.SentencePieceProcessor(model_file=f"{args.model}/src.model")
        self.tgt = sentencepiece.SentencePieceProcessor(model_file=f"{args.model}/tgt.model")
        with open(f"{args.model}/model.yaml") as f:
            langs = yaml.safe_load(f).get("languages") or {}
        self.sources = langs.get("source") or ["en"]
        self.targets = langs.get("target") or ["de"]
        self.translator = ctranslate2.Translator(args.ct2, device="cpu",
                                                 compute_type=args.compute_type,
                                                 inter_threads=1, intra_threads=args.threads)
        self.max_batch, self.wait = args.max_batch, args.wait_ms / 1000.0
        self.max_len = args.max_len
        self.queue = []  # [pieces, result slot (a one-element list), done event]
        self.cond = threading.Condition()
        self.stopping = False
        self.calls = self.sentences = 0

    def translate_pieces(self, batch):
        res = self.translator.translate_batch(
            batch, max_batch_size=self.max_batch, beam_size=1, length_penalty=0.0,
            max_decoding_length=self.max_len)
        return [self.tgt.decode_pieces(r.hypotheses[0]) for r in res]

    def translate(self, texts):
        """Queues texts, waits for the batcher, returns their translations in order."""
        items = [[self.src.encode(t, out_type=str), None, threading.Event()] for t in texts]
        with self.cond:
            self.queue.extend(items)
            self.cond.notify()
        for it in items:
            it[2].wait()
        return [it[1] for it in items]

    def run(self):
        while True:
            with self.cond:
                while not self.queue and not self.stopping:
                    self.cond.wait()
                if not self.queue:
                    return
                end = time.monotonic() + self.wait
                while len(self.queue) < self.max_batch and not self.stopping:
                    left = end - time.monotonic()
                    if left <= 0:
                        break
                    self.cond.wait(left)
                batch, self.queue = self.queue[:self.max_batch], self.queue[self.max_batch:]
            try:
                out = self.translate_pieces([it[0] for it in batch])
            except Exception as e:  # noqa: BLE001  every waiting request is answered
                out = [e] * len(batch)
            self.calls += 1
            self.sentences += len(batch)
            for it, text in zip(batch, out):
                it[1] = text
                it[2].set()

    def stop(self):
        with self.cond:
            self.stopping = True
            self.cond.notify_all()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the load clients expect
    # the headers and the body are two writes: without TCP_NODELAY the body waits for the
    # client's delayed ACK (40 ms on Linux)
    disable_nagle_algorithm = True
    engine = None

    def log_message(self, *args):
        pass

    def answer(self, status, obj):
        data = json.dumps(obj, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            raise ValueError(f"body of {n} bytes, more than {MAX_BODY}")
        raw = self.rfile.read(n) if n else b""
        if (self.headers.get("Content-Type") or "").startswith("application/json"):
            obj = json.loads(raw or b"{}")
            if not isinstance(obj, dict):
                raise ValueError("expected a JSON object")
            return obj
        return {k: v[0] for k, v in urllib.parse.parse_qs(raw.decode()).items()}

    def do_GET(self):
        e = self.engine
        if self.path == "/languages":
            self.answer(200, [{"code": s, "name": LANGUAGE_NAMES.get(s, s), "targets": e.targets}
                              for s in e.sources])
        elif self.path == "/health":
            self.answer(200, {"status": "ok", "calls": e.calls, "sentences": e.sentences})
        else:
            self.answer(404, {"error": f"no route {self.path}"})

    def do_POST(self):
        e = self.engine
        if self.path == "/languages":
            return self.do_GET()
        if self.path != "/translate":
            return self.answer(404, {"error": f"no route {self.path}"})
        try:
            req = self.body()
        except ValueError as ex:
            return self.answer(400, {"error": str(ex)})
        q, source, target = req.get("q"), req.get("source"), req.get("target")
        if isinstance(q, str):
            texts = [q]
        elif isinstance(q, list) and all(isinstance(t, str) for t in q):
            texts = q
        else:
            return self.answer(400, {"error": "'q' must be a string or a list of strings"})
        if source not in e.sources + ["auto"] or target not in e.targets:
            return self.answer(400, {"error": f"no model for {source} -> {target}"})
        out = e.translate(texts)
        bad = next((t for t in out if isinstance(t, Exception)), None)
        if bad is not None:
            return self.answer(500, {"error": f"translate_batch: {bad}"})
        body = {"translatedText": out[0] if isinstance(q, str) else out}
        if source == "auto":
            body["detectedLanguage"] = {"confidence": 100.0, "language": e.sources[0]}
        self.answer(200, body)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the listen backlog (socketserver's 5 resets a burst of clients)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cmd", choices=["serve", "offline"])
    ap.add_argument("model")
    ap.add_argument("ct2")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=5001)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--compute-type", default="float32")
    ap.add_argument("--max-batch", type=int, default=32)
    ap.add_argument("--wait-ms", type=float, default=5.0)
    ap.add_argument("--max-len", type=int, default=128)
    args = ap.parse_args()
    engine = Engine(args)
    if args.cmd == "offline":
        lines = [line.rstrip("\n") for line in sys.stdin]
        pieces = [engine.src.encode(t, out_type=str) for t in lines]
        out = []
        for i in range(0, len(pieces), args.max_batch):
            out += engine.translate_pieces(pieces[i:i + args.max_batch])
        sys.stdout.write("".join(t + "\n" for t in out))
        return
    Handler.engine = engine
    httpd = Server((args.host, args.port), Handler)
    batcher = threading.Thread(target=engine.run)
    batcher.start()

    def stop(*_):
        threading.Thread(target=httpd.shutdown).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    host, port = httpd.server_address[:2]
    print(f"serve_peer_ct2: serving on http://{host}:{port}", file=sys.stderr, flush=True)
    httpd.serve_forever()
    engine.stop()
    batcher.join()
    httpd.server_close()


if __name__ == "__main__":
    main()
