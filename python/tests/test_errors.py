"""Bad input raises a Python exception with clformer's one-line message; never a crash."""
import os

import pytest

import clformer
from conftest import MODEL_DIR


@pytest.mark.parametrize("source", ["one string", b"bytes", 42, None, [1, 2], [["ok"], "mixed"],
                                    [[1, 2]], [None]])
def test_wrong_types(translator, source):
    with pytest.raises(TypeError):
        translator.translate_batch(source)


@pytest.mark.parametrize("kwargs", [{"beam_size": "4"}, {"max_batch_size": 1.5},
                                    {"length_penalty": "x"}, {"num_hypotheses": None}])
def test_wrong_option_types(translator, kwargs):
    with pytest.raises(TypeError):
        translator.translate_batch(["a"], **kwargs)


@pytest.mark.parametrize("kwargs", [{"beam_size": 0}, {"max_batch_size": 0},
                                    {"num_hypotheses": 3, "beam_size": 2},
                                    {"max_decoding_length": 0}, {"length_penalty": -1.0},
                                    {"length_penalty": float("nan")}])
def test_bad_options(translator, kwargs):
    with pytest.raises(ValueError):
        translator.translate_batch(["a"], **kwargs)


@pytest.mark.parametrize("sentence,why", [(b"caf\xc3", "UTF-8"), (b"\xff\xfe", "UTF-8"),
                                          ("a\x00b", "NUL"), (b"a\x00b", "NUL"),
                                          ("lone \ud800", "UTF-8"),
                                          ("word " * 400, "max_len")])
def test_refused_sentence_names_it(translator, sentence, why):
    with pytest.raises(ValueError, match=r"source\[1\].*" + why):
        translator.translate_batch(["fine", sentence])


def test_too_long_by_bytes(translator):
    with pytest.raises(ValueError, match=r"source\[0\]"):
        translator.translate_batch(["a" * (clformer._clformer.SENTENCE_MAX + 1)])


def test_unknown_token(translator):
    known = translator.tokenize("Save")[0]
    with pytest.raises(ValueError, match=r"source\[0\]\[1\].*not in the source vocabulary"):
        translator.translate_batch([[known, "no-such-token-xyz"]])
    with pytest.raises(TypeError):
        translator.translate_batch([[known, 3]])


def test_score_bad_input(translator):
    with pytest.raises(TypeError):
        translator.score_batch("a", "b")
    with pytest.raises(ValueError, match="NUL"):
        translator.score_batch(["a\x00"], ["b"])
    with pytest.raises(ValueError):
        translator.score_batch(["word " * 400], ["b"])


def test_open_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        clformer.Translator(str(tmp_path / "missing"))
    with pytest.raises((ValueError, OSError), match=str(tmp_path)):
        clformer.Translator(str(tmp_path))  # a directory without a model
    with pytest.raises(ValueError, match="cuda"):
        clformer.Translator(MODEL_DIR, device="cuda")
    with pytest.raises(TypeError):
        clformer.Translator(MODEL_DIR, device=0)
    with pytest.raises(ValueError, match="int4"):
        clformer.Translator(MODEL_DIR, weight_type="int4")
    with pytest.raises(ValueError, match="fp8"):
        clformer.Translator(MODEL_DIR, precision="fp8")
    with pytest.raises(ValueError):
        clformer.Translator(MODEL_DIR, device_index=-1)
    with pytest.raises(ValueError, match="7"):  # the cpu backend has one device
        clformer.Translator(MODEL_DIR, device_index=7)
    with pytest.raises(TypeError):
        clformer.Translator(42)
    with pytest.raises(TypeError):
        clformer.Translator(MODEL_DIR, threads="2")
