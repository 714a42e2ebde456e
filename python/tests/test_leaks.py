"""Reference counting: 10,000 calls (results, errors, tokens) leave RSS flat."""
import os

import pytest

import clformer
from conftest import MODEL_DIR


def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


@pytest.mark.skipif(os.environ.get("CLF_PYTHON_SANITIZE") == "1",
                    reason="ASan's quarantine grows RSS by design")
def test_rss_bounded_over_10000_calls():
    # one thread: OpenMP's threads would only wait for each other on these tiny calls
    translator = clformer.Translator(MODEL_DIR, threads=1)
    toks = translator.tokenize("Save")

    def calls(n):
        for i in range(n):
            # every call goes through clf_translator_translate and builds its results; an
            # empty sentence is not decoded, which keeps 10,000 calls fast
            translator.translate_batch(["", b" "], num_hypotheses=1)
            translator.translate_batch([[], []])
            translator.tokenize("Open file")
            try:
                translator.translate_batch([[toks[0], "no-such-token"]])
            except ValueError:
                pass
            if i % 50 == 0:  # decoded: hypotheses, tokens, texts and scores
                translator.translate_batch([toks], beam_size=2, return_scores=True,
                                           max_decoding_length=3)
                try:
                    translator.translate_batch(["ok", b"\xff"])
                except ValueError:
                    pass
                translator.score_batch(["Save"], ["Speichern"])

    calls(500)  # allocator and caches warm
    before = rss_kib()
    calls(10000)
    grown = rss_kib() - before
    # one leaked result list per call alone would be > 1 MiB
    assert grown < 1024, f"RSS grew by {grown} KiB over 10,000 calls"
