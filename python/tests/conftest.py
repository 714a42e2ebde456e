"""Shared paths of the clformer package's tests (run from anywhere; the package must be
installed: scripts/test-python.sh does both)."""
import json
import os

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(os.environ.get("CLFORMER_BUILD_DIR") or os.path.join(ROOT, "build"))
CLI = os.path.join(BUILD, "bin", "clformer")
MODEL_DIR = os.path.join(ROOT, "models", "en-de-gettext")
FIXTURES = os.path.join(ROOT, "tests", "fixtures")


def read_safetensors(path):
    """{name: array} of a safetensors file (F32 and I32 only: what the fixtures hold)."""
    with open(path, "rb") as f:
        blob = f.read()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        dtype = {"F32": "<f4", "I32": "<i4"}[t["dtype"]]
        start, end = t["data_offsets"]
        out[name] = np.frombuffer(blob[8 + n + start:8 + n + end], dtype=dtype).reshape(t["shape"])
    return out


@pytest.fixture(scope="session")
def translator():
    import clformer
    return clformer.Translator(MODEL_DIR)
