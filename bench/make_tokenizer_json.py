#!/usr/bin/env python3
"""Writes a WordLevel tokenizer.json with N vocabulary entries (default 60000) for
bench/tokenizer_load.c: the four specials as added tokens, then words of 2-12 letters, a
few with non-ASCII letters and with characters that JSON escapes ("\\"", "\\\\"), in the
layout the tokenizers library's Tokenizer.save writes (json.dumps, indent 2).

    python3 bench/make_tokenizer_json.py /tmp/tok60k.json [N]
"""
import json
import random
import sys

path = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 60000
rng = random.Random(1234)
letters = "abcdefghijklmnopqrstuvwxyz\u00e9\u00fc\u00df\u4e2d\u00e7"
specials = ["[UNK]", "[PAD]", "[SOS]", "[EOS]"]
words = list(specials)
seen = set(words)
while len(words) < n:
    w = "".join(rng.choice(letters) for _ in range(rng.randint(2, 12)))
    if rng.random() < 0.01:
        w += rng.choice(['"', "\\", "/"])
    if w not in seen:
        seen.add(w)
        words.append(w)
doc = {
    "version": "1.0",
    "truncation": None,
    "padding": None,
    "added_tokens": [
        {"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for i, s in enumerate(specials)
    ],
    "normalizer": None,
    "pre_tokenizer": {"type": "Whitespace"},
    "post_processor": None,
    "decoder": None,
    "model": {"type": "WordLevel", "vocab": {w: i for i, w in enumerate(words)},
              "unk_token": "[UNK]"},
}
with open(path, "w", encoding="utf-8") as f:
    json.dump(doc, f, ensure_ascii=False, indent=2)
