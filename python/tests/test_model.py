"""clformer.Model against the PyTorch fixtures of tests/fixtures (tests/fixtures/README.md):
the same logits to 1e-5, as the C suites check them."""
import os

import numpy as np
import pytest

import clformer
from conftest import FIXTURES, read_safetensors

TOL = 1e-5
# plain, log_softmax output, a plugin activation and norm (found in the package's lib/)
VARIANTS = ["pre_tutorial", "post_tutorial_logsoftmax", "pre_swiglu_rms", "pre_tied_all"]


def load(variant):
    d = os.path.join(FIXTURES, variant)
    return (clformer.Model(os.path.join(d, "model.yaml"), os.path.join(d, "weights.safetensors")),
            read_safetensors(os.path.join(d, "io.safetensors")))


@pytest.mark.parametrize("variant", VARIANTS)
def test_forward_matches_pytorch(variant):
    m, io = load(variant)
    logits = m.forward(io["src"], io["tgt"])
    assert logits.dtype == np.float32 and logits.shape == io["logits"].shape
    np.testing.assert_allclose(logits, io["logits"], atol=TOL, rtol=0)


def test_forward_into_callers_array_and_int64_ids():
    m, io = load("pre_tutorial")
    out = np.full(io["logits"].shape, np.nan, dtype=np.float32)
    got = m.forward(io["src"].astype(np.int64), io["tgt"].tolist(), out=out)
    assert got is out
    np.testing.assert_allclose(out, io["logits"], atol=TOL, rtol=0)
    # one row alone gives that row's logits
    row = m.forward(io["src"][1:2], io["tgt"][1:2])
    np.testing.assert_allclose(row[0], io["logits"][1], atol=TOL, rtol=0)


def test_seeded_init_is_reproducible():
    cfg = os.path.join(FIXTURES, "pre_tutorial", "model.yaml")
    src = np.array([[2, 5, 6, 3]], dtype=np.int32)
    tgt = np.array([[2, 7]], dtype=np.int32)
    a = clformer.Model(cfg, seed=7).forward(src, tgt)
    b = clformer.Model(cfg, seed=7).forward(src, tgt)
    c = clformer.Model(cfg, seed=8).forward(src, tgt)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_bad_inputs():
    m, io = load("pre_tutorial")
    src, tgt = io["src"], io["tgt"]
    with pytest.raises(TypeError):
        m.forward(src.astype(np.float32), tgt)
    with pytest.raises(ValueError):
        m.forward(src[0], tgt)  # 1-D
    with pytest.raises(ValueError):
        m.forward(src, tgt[:2])  # batch sizes differ
    bad = src.copy()
    bad[0, 1] = 50  # src_vocab is 50
    with pytest.raises(ValueError, match="50"):
        m.forward(bad, tgt)
    with pytest.raises(ValueError):
        m.forward(src, tgt, out=np.empty((3, 7, 52), dtype=np.float32))
    with pytest.raises((TypeError, ValueError)):
        m.forward(src, tgt, out=np.empty((3, 7, 53), dtype=np.float64))
    with pytest.raises((TypeError, ValueError)):  # not C-contiguous
        m.forward(src, tgt, out=np.empty((3, 53, 7), dtype=np.float32).transpose(0, 2, 1))
    with pytest.raises(FileNotFoundError):
        clformer.Model(os.path.join(FIXTURES, "nope.yaml"))
    with pytest.raises(ValueError):
        clformer.Model(os.path.join(FIXTURES, "pre_tutorial", "model.yaml"), device="cuda")
    with pytest.raises(ValueError, match="weights"):  # a weights file of another model
        clformer.Model(os.path.join(FIXTURES, "pre_tutorial", "model.yaml"),
                       os.path.join(FIXTURES, "pre_gelu", "weights.safetensors"))
    m.close()
    with pytest.raises(RuntimeError, match="closed"):
        m.forward(src, tgt)
