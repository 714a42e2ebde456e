#!/usr/bin/python3
"""Generate the fixtures of tied models saved by safetensors' save_model.

A model whose matrices are tied the usual PyTorch way (one nn.Parameter assigned to
several modules) lists the shared matrix under every name in state_dict();
safetensors.torch.save_model keeps one name per shared tensor, the first in sorted order:
projection_layer.proj.weight. clformer must load such a file (issue 38, item 7).

Run from the repository root with Debian's python3-torch (1.13) and the `safetensors`
package, which Debian does not ship (a venv that sees the system's torch):

    python3 -m venv --system-site-packages /tmp/st && /tmp/st/bin/pip install safetensors
    /tmp/st/bin/python tests/reference/make_tied_fixtures.py           # (re)write
    /tmp/st/bin/python tests/reference/make_tied_fixtures.py --check   # compare bytes

For each tie mode the format allows (decoder: projection = tgt_embed; all: src_embed
too) it writes tests/fixtures/save_model_tied_<mode>/ with the files make_fixtures.py
writes (model.yaml, weights.safetensors, io.safetensors; tests/fixtures/README.md), the
weights by save_model. save_model writes the header's __metadata__ (to which it adds
"<dropped name>": "<kept name>") in no fixed order, so --check compares the weights'
headers as JSON and the rest byte for byte; the other files are deterministic.
The float32 outputs must be within 1e-5 relative of the same model in float64, else the
script fails; the saved file must hold the shared matrix under projection_layer.proj.weight
only, and load back (safetensors.torch.load_model) into a model that gives the stored
outputs exactly. The C tests (test_model, test_weights) read the committed files only.
"""

import json
import os
import struct
import sys

import torch
from safetensors.torch import load_model, save_model

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import (count_differing, expected_names, fixture_args,  # noqa: E402
                           make_cfg, make_inputs, reference_io, variant_dir, yaml_text)
from model import Transformer, init_weights, save_safetensors  # noqa: E402

GENERATOR = "tests/reference/make_tied_fixtures.py"

# Small, to keep each fixture near 50 KB: vocab 40 on both sides (tie all needs one).
SIZES = dict(src_vocab=40, tgt_vocab=40, d_model=16, heads=4, d_ff=24)

# name, seed, tie mode, overrides, what it covers
VARIANTS = [
    ("save_model_tied_all", 131, "all", dict(),
     "tie_embeddings: all, saved by safetensors' save_model: the shared matrix only as "
     "projection_layer.proj.weight; pre-norm, tutorial LayerNorm"),
    ("save_model_tied_decoder", 132, "decoder",
     dict(norm="post", ln_style="standard", ln_eps=1e-5, attention_bias=True),
     "tie_embeddings: decoder, saved by safetensors' save_model: tgt_embed's matrix only as "
     "projection_layer.proj.weight; post-norm, standard LayerNorm, attention bias"),
]

KEPT = "projection_layer.proj.weight"   # the first of the tied names in sorted order
DROPPED = {"decoder": {"tgt_embed.embedding.weight"},
           "all": {"tgt_embed.embedding.weight", "src_embed.embedding.weight"}}


def tied_model(cfg_untied, tie):
    """The tutorial model with separate modules, tied by assigning tgt_embed's parameter."""
    m = Transformer(cfg_untied)
    shared = m.tgt_embed.embedding.weight
    m.projection_layer.proj.weight = shared
    if tie == "all":
        m.src_embed.embedding.weight = shared
    return m


def check_tied(m, tie):
    shared = m.tgt_embed.embedding.weight
    assert m.projection_layer.proj.weight is shared
    assert (m.src_embed.embedding.weight is shared) == (tie == "all")


def build_variant(name, seed, tie, over, about):
    kw = dict(SIZES, **over)
    cfg = make_cfg(dict(kw, tie_embeddings="none"))   # the modules: every name its own
    yaml_cfg = make_cfg(dict(kw, tie_embeddings=tie))  # what the file is: tied
    yaml_cfg.final_norm_yaml = "auto"

    torch.manual_seed(seed)
    model = tied_model(cfg, tie)
    init_weights(model, randomize_norms=True)
    model.eval()
    check_tied(model, tie)
    # state_dict() lists the shared matrix under every name
    assert set(model.state_dict()) == expected_names(cfg)

    gen = torch.Generator().manual_seed(seed * 7919)
    src, tgt = make_inputs(yaml_cfg, gen)
    io, io_meta, _, _ = reference_io(name, model, src, tgt, cfg.output, GENERATOR,
                                     check_double=lambda m64: check_tied(m64, tie))
    meta = {"format": "pt", "generator": GENERATOR, "variant": name, "seed": str(seed),
            "torch": torch.__version__}
    return dict(name=name, seed=seed, tie=tie, cfg=cfg, model=model, about=about,
                yaml=yaml_text(name, yaml_cfg, about).replace("make_fixtures.py",
                                                              "make_tied_fixtures.py", 1),
                meta=meta, io=io, io_meta=io_meta)


def write_variant(v, root):
    d = variant_dir(v, root)
    wpath = os.path.join(d, "weights.safetensors")
    save_model(v["model"], wpath, metadata=v["meta"])
    save_safetensors(os.path.join(d, "io.safetensors"), v["io"], v["io_meta"])

    # the file holds the shared matrix once, as projection_layer.proj.weight
    from safetensors import safe_open
    with safe_open(wpath, framework="pt") as f:
        names = set(f.keys())
    want = expected_names(v["cfg"]) - DROPPED[v["tie"]]
    assert KEPT in names and names == want, (v["name"], sorted(names ^ want))
    # and loads back into the tied model, which reproduces the stored outputs exactly
    back = tied_model(v["cfg"], v["tie"])
    load_model(back, wpath)
    back.eval()
    check_tied(back, v["tie"])
    with torch.no_grad():
        out, enc = back(v["io"]["src"].long(), v["io"]["tgt"].long())
    assert torch.equal(out, v["io"]["logits"]) and torch.equal(enc, v["io"]["encoder_out"]), \
        "%s: the saved weights do not reproduce io" % v["name"]
    return d


def same_file(a, b, fn):
    """Whether files a and b are the same: safetensors files with the same header (as JSON)
    and data, other files byte for byte."""
    if not os.path.exists(b):
        return False
    da, db = open(a, "rb").read(), open(b, "rb").read()
    if not fn.endswith(".safetensors") or da == db:
        return da == db
    na, nb = struct.unpack("<Q", da[:8])[0], struct.unpack("<Q", db[:8])[0]
    return (json.loads(da[8:8 + na]) == json.loads(db[8:8 + nb])
            and da[8 + na:] == db[8 + nb:])


def main():
    check, root, only = fixture_args(__doc__, {spec[0] for spec in VARIANTS})
    built = [build_variant(*spec) for spec in VARIANTS if not only or spec[0] in only]
    if check:
        bad = count_differing(built, write_variant,
                              ("model.yaml", "weights.safetensors", "io.safetensors"), root,
                              same=same_file)
        print("check: %s" % ("all fixtures identical" if not bad else "%d files differ" % bad))
        return 1 if bad else 0
    for v in built:
        d = write_variant(v, root)
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        print("%-26s tie %-8s %7d bytes" % (v["name"], v["tie"], size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
