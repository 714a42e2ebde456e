#!/usr/bin/python3
"""Generate clformer's golden fixtures from the PyTorch reference model.

Run from the repository root (Debian's python3-torch 1.13, no other packages):

    /usr/bin/python3 tests/reference/make_fixtures.py            # (re)write tests/fixtures/
    /usr/bin/python3 tests/reference/make_fixtures.py --check    # compare with the files there
    /usr/bin/python3 tests/reference/make_fixtures.py --out DIR  # write elsewhere

For each variant it writes tests/fixtures/<variant>/
    model.yaml            clformer config (model: ..., backend: {name: cpu})
    weights.safetensors   F32 weights under the tutorial state_dict names
    io.safetensors        I32 "src" [B,S], I32 "tgt" [B,T],
                          F32 "logits" [B,T,tgt_vocab] (log-probabilities when
                          output: log_softmax), F32 "encoder_out" [B,S,d]
The script is deterministic: one thread, fixed seeds, sorted safetensors headers, so a
re-run writes identical bytes (with the same torch build). Every variant is also run in
float64 (with an exactly computed PE table) and the float32 outputs must be within 1e-5
relative (max abs err / max abs value) of it, else the script fails.
"""

import argparse
import copy
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import math  # noqa: E402

from model import (ModelConfig, Transformer, init_weights, save_safetensors,  # noqa: E402
                   load_safetensors, activation_fn, LayerNormalization, model_from_yaml)

PAD, SOS, EOS = 1, 2, 3
B, S, T = 3, 9, 7
# Real (non-pad) lengths per batch row; row 0 has no padding at all.
SRC_LENS = [9, 6, 4]
TGT_LENS = [7, 3, 5]
TOL = 1e-5

# The activation/norm variants (seeds 112-118) are narrower than the common sizes, to keep
# the fixture set small (~40 KB per variant instead of ~210 KB): d_model 12 (heads 4, d_k 3)
# and d_ff 20, neither a multiple of 8, so row tails of the plugin ops are exercised too.
# Every other size is the common one.
VARIANT_SIZES = dict(d_model=12, d_ff=20)

BASE = dict(src_vocab=50, tgt_vocab=53, max_len=64, d_model=32, layers=2, heads=4,
            d_ff=64, norm="pre", final_norm="auto", ln_style="tutorial", ln_eps=1e-6,
            attention_bias=False, output="logits", dropout=0.1, pad_id=PAD)

# name, seed, overrides, what it covers (for the table and README)
VARIANTS = [
    ("pre_tutorial", 101, dict(),
     "pre-norm, tutorial LayerNorm, final_norm auto(on), no attention bias, logits"),
    ("post_standard", 102, dict(norm="post", ln_style="standard", ln_eps=1e-5),
     "post-norm (paper), standard LayerNorm eps 1e-5, final_norm auto(off)"),
    ("branch_tutorial", 103, dict(norm="branch"),
     "branch norm x+LN(f(x)), tutorial LayerNorm, final_norm auto(off)"),
    ("pre_standard_bias", 104, dict(ln_style="standard", ln_eps=1e-5, attention_bias=True),
     "pre-norm, standard LayerNorm, bias on w_q/w_k/w_v/w_o"),
    ("post_tutorial_logsoftmax", 105, dict(norm="post", output="log_softmax"),
     "post-norm, tutorial LayerNorm, output log_softmax"),
    ("pre_final_off", 106, dict(final_norm=False),
     "pre-norm with final_norm forced false (no encoder.norm/decoder.norm)"),
    ("enc3_dec1", 107, dict(layers=None, encoder_layers=3, decoder_layers=1, d_model=48,
                            heads=3, d_ff=72, attention_bias=True, norm="post",
                            ln_style="standard", ln_eps=1e-5, final_norm=True),
     "encoder_layers 3 / decoder_layers 1, d_model 48, heads 3 (d_k 16), d_ff 72, bias, "
     "post-norm with final_norm forced true"),
    ("branch_odd", 108, dict(d_model=36, heads=4, d_ff=50, norm="branch",
                             ln_style="standard", ln_eps=1e-5, final_norm=True,
                             attention_bias=True, output="log_softmax"),
     "awkward sizes: d_model 36, heads 4 (d_k 9), d_ff 50; branch norm with final_norm "
     "forced true, standard LayerNorm, bias, log_softmax"),
    ("post_tied_decoder", 110, dict(tie_embeddings="decoder", norm="post", ln_style="standard",
                                    ln_eps=1e-5, attention_bias=True),
     "tie_embeddings: decoder (projection = tgt_embed.embedding.weight), post-norm, standard "
     "LayerNorm, attention bias (fairseq's IWSLT setup)"),
    ("pre_tied_all", 111, dict(tie_embeddings="all", tgt_vocab=50),
     "tie_embeddings: all (src_embed, tgt_embed and projection share one matrix; vocab 50 "
     "both sides), pre-norm, tutorial LayerNorm"),
    ("pre_learned_pe", 109, dict(positional="learned", ln_style="standard", ln_eps=1e-5),
     "positional: learned (src_pos/tgt_pos.embedding.weight [max_len, d]), pre-norm, "
     "standard LayerNorm"),
    ("pre_learned_offset_embed_norm", 125,
     dict(positional="learned", position_offset=2, embed_norm=True, ln_style="standard",
          ln_eps=1e-5),
     "mBART's embeddings: positional learned with position_offset 2 (tables [max_len + 2, d], "
     "position t reads row t + 2), embed_norm (encoder/decoder.embed.norm on the embedding "
     "sum), pre-norm, standard LayerNorm"),
    ("post_offset_embed_norm", 126, dict(norm="post", position_offset=3, embed_norm=True),
     "sinusoidal table read from row 3 (position_offset 3), embed_norm with the tutorial "
     "LayerNorm, post-norm"),
] + [(n, seed, dict(VARIANT_SIZES, **over), about) for n, seed, over, about in [
    # Activation and norm variants (op plugins in clformer). Own seeds, after the others.
    ("pre_gelu", 112, dict(ln_style="standard", ln_eps=1e-5, activation="gelu"),
     "activation: gelu (exact, erf), pre-norm, standard LayerNorm"),
    ("post_gelu_tanh", 113, dict(norm="post", ln_style="standard", ln_eps=1e-5,
                                 activation="gelu_tanh"),
     "activation: gelu_tanh (tanh approximation), post-norm, standard LayerNorm"),
    ("pre_silu_bias", 114, dict(activation="silu", attention_bias=True),
     "activation: silu, pre-norm, tutorial LayerNorm, attention bias"),
    ("pre_swiglu_rms", 115, dict(ln_style="rms", ln_eps=1e-6, activation="swiglu"),
     "LLaMA-style block: activation: swiglu (gate linear_3), layernorm rms eps 1e-6 "
     "(alpha only), pre-norm"),
    ("post_geglu", 116, dict(norm="post", ln_style="standard", ln_eps=1e-5, activation="geglu"),
     "activation: geglu (exact gelu, gate linear_3), post-norm, standard LayerNorm"),
    ("branch_rms", 117, dict(norm="branch", ln_style="rms", ln_eps=1e-5, final_norm=True),
     "layernorm rms eps 1e-5 (alpha only), branch norm with final_norm forced true, relu"),
    ("pre_squared_relu", 118, dict(activation="squared_relu"),
     "activation: squared_relu (relu(x)^2, clformer's example plugin), pre-norm, tutorial "
     "LayerNorm"),
]]


def make_cfg(over):
    kw = dict(BASE)
    kw.update(over)
    if kw.get("layers") is None:
        kw.pop("layers")
    return ModelConfig(**kw)


def expected_names(cfg):
    """The weight names of docs/ARCHITECTURE.md section 6, built apart from the model code."""
    n = ["src_embed.embedding.weight", "tgt_embed.embedding.weight",
         "projection_layer.proj.weight", "projection_layer.proj.bias"]
    wb = ["weight"] + (["bias"] if cfg.attention_bias else [])

    def attn(prefix):
        return ["%s.w_%s.%s" % (prefix, m, s) for m in "qkvo" for s in wb]

    lins = (1, 2, 3) if cfg.activation in ("swiglu", "geglu") else (1, 2)
    ab = ("alpha",) if cfg.ln_style == "rms" else ("alpha", "bias")

    def ffn(prefix):
        return ["%s.linear_%d.%s" % (prefix, i, s) for i in lins for s in ("weight", "bias")]

    def norms(prefix, k):
        return ["%s.residual_connections.%d.norm.%s" % (prefix, i, s)
                for i in range(k) for s in ab]

    for i in range(cfg.encoder_layers):
        p = "encoder.layers.%d" % i
        n += attn(p + ".self_attention_block") + ffn(p + ".feed_forward_block") + norms(p, 2)
    for i in range(cfg.decoder_layers):
        p = "decoder.layers.%d" % i
        n += (attn(p + ".self_attention_block") + attn(p + ".cross_attention_block")
              + ffn(p + ".feed_forward_block") + norms(p, 3))
    if cfg.final_norm:
        n += ["%s.norm.%s" % (p, s) for p in ("encoder", "decoder") for s in ab]
    if cfg.positional == "learned":
        n += ["src_pos.embedding.weight", "tgt_pos.embedding.weight"]
    if cfg.embed_norm:
        n += ["%s.embed.norm.%s" % (p, s) for p in ("encoder", "decoder") for s in ab]
    if cfg.tie_embeddings != "none":
        n.remove("projection_layer.proj.weight")
    if cfg.tie_embeddings == "all":
        n.remove("src_embed.embedding.weight")
    return set(n)


def make_inputs(cfg, gen):
    src = torch.full((B, S), PAD, dtype=torch.int64)
    tgt = torch.full((B, T), PAD, dtype=torch.int64)
    for b in range(B):
        ls, lt = SRC_LENS[b], TGT_LENS[b]
        src[b, :ls] = torch.randint(4, cfg.src_vocab, (ls,), generator=gen)
        src[b, 0], src[b, ls - 1] = SOS, EOS
        tgt[b, :lt] = torch.randint(4, cfg.tgt_vocab, (lt,), generator=gen)
        tgt[b, 0], tgt[b, lt - 1] = SOS, EOS
    return src, tgt


def fmt_float(x):
    s = "%.1e" % x           # e.g. 1.0e-06 -> keep a dot so YAML 1.1 reads a float
    m, e = s.split("e")
    return "%se%d" % (m, int(e))


def yaml_text(name, cfg, about):
    lines = [
        "# clformer golden fixture '%s' - generated by tests/reference/make_fixtures.py" % name,
        "# %s" % about,
        "model:",
        "  src_vocab: %d" % cfg.src_vocab,
        "  tgt_vocab: %d" % cfg.tgt_vocab,
        "  max_len: %d" % cfg.max_len,
        "  d_model: %d" % cfg.d_model,
    ]
    if cfg.encoder_layers == cfg.decoder_layers:
        lines.append("  layers: %d" % cfg.encoder_layers)
    else:
        lines.append("  encoder_layers: %d" % cfg.encoder_layers)
        lines.append("  decoder_layers: %d" % cfg.decoder_layers)
    return "\n".join(lines + [
        "  heads: %d" % cfg.heads,
        "  d_ff: %d" % cfg.d_ff,
        "  norm: %s" % cfg.norm,
        "  final_norm: %s" % cfg.final_norm_yaml,
        "  layernorm: {style: %s, eps: %s}" % (cfg.ln_style, fmt_float(cfg.ln_eps)),
        "  attention_bias: %s" % ("true" if cfg.attention_bias else "false"),
        "  activation: %s" % cfg.activation,
        "  output: %s" % cfg.output,
        "  dropout: %s" % cfg.dropout,
        "  pad_id: %d" % cfg.pad_id,
    ] + variant_lines(cfg) + [
        "backend:",
        "  name: cpu",
        "",
    ])


def variant_lines(cfg):
    """The issue-6 keys, written only when not the default (older fixtures stay as they
    were, byte for byte)."""
    lines = []
    if cfg.positional != "sinusoidal":
        lines.append("  positional: %s" % cfg.positional)
    if cfg.tie_embeddings != "none":
        lines.append("  tie_embeddings: %s" % cfg.tie_embeddings)
    if cfg.position_offset:
        lines.append("  position_offset: %d" % cfg.position_offset)
    if cfg.embed_norm:
        lines.append("  embed_norm: true")
    return lines


def check_op_definitions():
    """The reference's activations and RMS norm against their closed forms (float64), so
    that the README's definitions are what the fixtures contain."""
    x = torch.linspace(-6, 6, 1201, dtype=torch.float64)
    erf_gelu = 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
    tanh_gelu = 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    silu = x / (1 + torch.exp(-x))
    sq = torch.where(x > 0, x * x, torch.zeros_like(x))
    for name, want in (("relu", x.clamp(min=0)), ("gelu", erf_gelu), ("gelu_tanh", tanh_gelu),
                       ("silu", silu), ("squared_relu", sq), ("swiglu", silu),
                       ("geglu", erf_gelu)):
        err = (activation_fn(name)(x) - want).abs().max().item()
        assert err <= 1e-14, (name, err)
    ln = LayerNormalization(7, 1e-5, "rms").double()
    assert [n for n, _ in ln.named_parameters()] == ["alpha"]
    with torch.no_grad():
        ln.alpha.copy_(torch.linspace(0.5, 1.5, 7))
        r = torch.randn(5, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
        want = ln.alpha * r / torch.sqrt((r * r).sum(-1, keepdim=True) / 7 + 1e-5)
        assert (ln(r) - want).abs().max().item() <= 1e-14


def rel_err(a, ref):
    return ((a.double() - ref).abs().max() / ref.abs().max()).item()


def reference_io(name, model, src, tgt, output, generator, check_double=None):
    """io.safetensors' tensors and metadata for variant name: model's float32 outputs on src
    and tgt, which must be within TOL of a float64 copy's (check_double(copy): more checks of
    that copy), and their errors: (io, io_meta, e_out, e_enc)."""
    with torch.no_grad():
        out32, enc32 = model(src, tgt)
        m64 = copy.deepcopy(model).double()
        if check_double:
            check_double(m64)
        m64.use_exact_pe()
        out64, enc64 = m64(src, tgt)

    e_out, e_enc = rel_err(out32, out64), rel_err(enc32, enc64)
    if not (e_out <= TOL and e_enc <= TOL):
        raise SystemExit("%s: float32 vs float64 rel. error %.2e / %.2e exceeds %.0e"
                         % (name, e_out, e_enc, TOL))
    for t in (out32, enc32):
        assert torch.isfinite(t).all()
    io = {"src": src.to(torch.int32), "tgt": tgt.to(torch.int32),
          "logits": out32.float(), "encoder_out": enc32.float()}
    io_meta = {"format": "pt", "generator": generator,
               "variant": name, "output": output, "tolerance": "1e-5 relative",
               "f64_rel_err_logits": "%.3e" % e_out, "f64_rel_err_encoder_out": "%.3e" % e_enc}
    return io, io_meta, e_out, e_enc


def build_variant(name, seed, over, about):
    cfg = make_cfg(over)
    fn = over.get("final_norm", "auto")
    cfg.final_norm_yaml = fn if isinstance(fn, str) else ("true" if fn else "false")

    torch.manual_seed(seed)
    model = Transformer(cfg)
    init_weights(model, randomize_norms=True)
    model.eval()

    sd = model.state_dict()
    names = set(sd)
    want = expected_names(cfg)
    if names != want:
        raise SystemExit("%s: state_dict names differ from docs/ARCHITECTURE.md: extra %s, "
                         "missing %s"
                         % (name, sorted(names - want), sorted(want - names)))
    for k, v in sd.items():
        assert v.dtype == torch.float32, k
        if ".linear_3." in k:
            assert list(v.shape) == ([cfg.d_ff, cfg.d_model] if k.endswith("weight")
                                     else [cfg.d_ff]), k
    if cfg.gated:
        # linear_3 is drawn after everything else: every other weight is the same-seed
        # ungated model's (relu), bit for bit
        plain = make_cfg(dict(over, activation="relu"))
        torch.manual_seed(seed)
        ref = Transformer(plain)
        init_weights(ref, randomize_norms=True)
        rsd = ref.state_dict()
        assert set(rsd) == {k for k in sd if ".linear_3." not in k}
        for k, t in rsd.items():
            assert torch.equal(t, sd[k]), (name, k)

    gen = torch.Generator().manual_seed(seed * 7919)
    src, tgt = make_inputs(cfg, gen)

    io, io_meta, e_out, e_enc = reference_io(name, model, src, tgt, cfg.output,
                                             "tests/reference/make_fixtures.py")
    meta = {"format": "pt", "generator": "tests/reference/make_fixtures.py",
            "variant": name, "seed": str(seed), "torch": torch.__version__}
    weights = {k: v.detach().clone() for k, v in sd.items()}
    nparams = sum(v.numel() for v in sd.values())
    return dict(name=name, cfg=cfg, about=about, yaml=yaml_text(name, cfg, about),
                weights=weights, weights_meta=meta, io=io, io_meta=io_meta,
                e_out=e_out, e_enc=e_enc, nparams=nparams)


def variant_dir(v, root):
    """root/<v's name>, made, with v's model.yaml written in it."""
    d = os.path.join(root, v["name"])
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "model.yaml"), "w") as f:
        f.write(v["yaml"])
    return d


def write_variant(v, root):
    d = variant_dir(v, root)
    save_safetensors(os.path.join(d, "weights.safetensors"), v["weights"], v["weights_meta"])
    save_safetensors(os.path.join(d, "io.safetensors"), v["io"], v["io_meta"])
    # Round trip through our own reader.
    back, _ = load_safetensors(os.path.join(d, "weights.safetensors"))
    assert set(back) == set(v["weights"])
    for k, t in back.items():
        assert torch.equal(t, v["weights"][k]), k
    # model.yaml describes the weights, and that model gives the stored outputs exactly
    model, _, _ = model_from_yaml(os.path.join(d, "model.yaml"))
    model.load_state_dict(back)
    model.eval()
    with torch.no_grad():
        out, enc = model(v["io"]["src"].long(), v["io"]["tgt"].long())
    assert torch.equal(out, v["io"]["logits"]) and torch.equal(enc, v["io"]["encoder_out"]), \
        "%s: model.yaml + weights do not reproduce io" % v["name"]
    return d


def fixture_args(doc, known):
    """The command line of the fixture scripts (this one and make_train_fixtures.py): --out,
    --check, --only (names from known). Makes torch single-threaded and deterministic.
    Returns (check, root, only): only is None for every fixture."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--out", default=None, help="output folder (default tests/fixtures)")
    ap.add_argument("--check", action="store_true",
                    help="regenerate into a temp folder and compare bytes with --out")
    ap.add_argument("--only", default=None, metavar="NAME,...",
                    help="build, write or check only these (folder names, comma-separated)")
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    here = os.path.dirname(os.path.abspath(__file__))
    root = args.out or os.path.normpath(os.path.join(here, "..", "fixtures"))

    only = set(args.only.split(",")) if args.only else None
    if only and not only <= known:
        ap.error("--only: unknown %s" % ", ".join(sorted(only - known)))
    return args.check, root, only


def same_bytes(a, b, fn):
    """Whether file b exists and holds the bytes of file a (fn: their name)."""
    return os.path.exists(b) and open(a, "rb").read() == open(b, "rb").read()


def count_differing(built, write, files, root, same=same_bytes):
    """--check: writes each built fixture (write(fixture, folder) returns the fixture's own
    folder in it) into a temporary folder and returns how many of its files are not those
    under root (same(new, old, name) False: by default not byte-for-byte), printing each."""
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for v in built:
            name = os.path.basename(write(v, tmp))
            for fn in files:
                a = os.path.join(tmp, name, fn)
                b = os.path.join(root, name, fn)
                if not same(a, b, fn):
                    print("DIFFERS: %s" % b)
                    bad += 1
    return bad


def main():
    check, root, only = fixture_args(__doc__, {spec[0] for spec in VARIANTS})
    check_op_definitions()
    built = [build_variant(*spec) for spec in VARIANTS if not only or spec[0] in only]

    if check:
        bad = count_differing(built, write_variant,
                              ("model.yaml", "weights.safetensors", "io.safetensors"), root)
        print("check: %s" % ("all fixtures identical" if not bad else "%d files differ" % bad))
        return 1 if bad else 0

    hdr = ("%-26s %-6s %-8s %-12s %-5s %-4s %-11s %-5s %3s %2s %4s %7s %9s %9s %9s"
           % ("variant", "norm", "ln", "activation", "final", "bias", "output", "enc/d", "d",
              "h", "d_ff",
              "params", "bytes", "err_out", "err_enc"))
    print(hdr)
    print("-" * len(hdr))
    total = 0
    for v in built:
        d = write_variant(v, root)
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        total += size
        c = v["cfg"]
        print("%-26s %-6s %-8s %-12s %-5s %-4s %-11s %-5s %3d %2d %4d %7d %9d %9.2e %9.2e"
              % (v["name"], c.norm, c.ln_style, c.activation, "on" if c.final_norm else "off",
                 "yes" if c.attention_bias else "no", c.output,
                 "%d/%d" % (c.encoder_layers, c.decoder_layers), c.d_model, c.heads, c.d_ff,
                 v["nparams"], size, v["e_out"], v["e_enc"]))
    print("-" * len(hdr))
    print("%d variants, %d bytes in %s; float32 vs float64 all within %.0e relative"
          % (len(built), total, root, TOL))
    return 0


if __name__ == "__main__":
    sys.exit(main())
