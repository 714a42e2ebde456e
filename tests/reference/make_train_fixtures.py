#!/usr/bin/python3
"""Generate clformer's training fixtures (loss, gradients, optimizer trajectory) with PyTorch.

Run from the repository root (Debian's python3-torch 1.13, no other packages):

    /usr/bin/python3 tests/reference/make_train_fixtures.py            # (re)write tests/fixtures/train_*
    /usr/bin/python3 tests/reference/make_train_fixtures.py --check    # compare with the files there
    /usr/bin/python3 tests/reference/make_train_fixtures.py --out DIR  # write elsewhere

Uses the reference model of tests/reference/model.py (the same conventions as the forward
fixtures of make_fixtures.py: pre/post/branch norm, final_norm, -1e9 masking, PE, sqrt(d)).
For each case it writes tests/fixtures/train_<case>/
    model.yaml            clformer config: model: (dropout 0.0), backend: {name: cpu}, train:
    weights.safetensors   F32 starting weights under the tutorial state_dict names
    batch.safetensors     I32 "src" [B,S], "tgt" [B,T] (decoder input), "labels" [B,T]
    expected.safetensors  F32 "loss" [1], "grad.<name>" for every weight, and for the cases
                          with an optimizer part "step<k>.loss|lr|grad_norm" [1] (k = 1..K),
                          "final.<name>" for every weight, "final.loss" [1]
Every reference number is computed in float64 (model.double() on the F32 weights, exact PE
table) and only then rounded to F32.  tests/fixtures/README.md ("Training fixtures")
documents the format, the loss, the schedules, clipping, Adam/AdamW and accumulation.

Definitions (the C trainer implements exactly these; s = optimizer step, 1-based, the same
s as Adam's bias-correction step; w = train.schedule.warmup; lr = train.optimizer.lr):
    constant      lr_s = lr
    noam          lr_s = lr * d_model^-0.5 * min(s^-0.5, s * w^-1.5)     (lr is Noam's "factor")
    inverse_sqrt  lr_s = lr * min(s / w, sqrt(w / s))      (linear warm-up to lr at s = w)
    loss          CrossEntropyLoss(ignore_index=pad_id, label_smoothing=ls) on the logits:
                  per non-pad label token t with lp = log_softmax(logits):
                  l_t = -(1 - ls) lp[y_t] - (ls / V) sum_j lp[j]   (V = tgt_vocab, all classes)
                  loss = mean of l_t over the non-pad label tokens of the micro-batch
    accumulate A  the batch's rows are split into A consecutive micro-batches of B/A rows;
                  step gradient = (1/A) * sum_i grad(loss_i)  (PyTorch style: each micro-batch's
                  own token mean, backward of loss_i / A); logged loss = (1/A) sum_i loss_i
    clipping      total = sqrt(sum over all weights of sum g^2) of the step gradient;
                  g *= min(1, clip_norm / (total + 1e-6))  (torch.nn.utils.clip_grad_norm_)
    adam          (torch.optim.Adam; weight_decay, if any, as L2: g += wd * p)
    adamw         p *= 1 - lr_s * wd first (decoupled, every weight tensor), then as adam:
                  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
                  p -= (lr_s / (1 - b1^s)) * m / (sqrt(v) / sqrt(1 - b2^s) + eps)
The script fails unless: the loss is finite; every weight gets a non-zero gradient (except
the attention key biases, whose gradient is zero in exact arithmetic: softmax ignores a
shift shared by a row); the documented Adam/AdamW/clipping formulas, run by hand, agree
with torch.optim; accumulation over micro-batches equals the full-batch step; central
differences in float64 agree with autograd on sampled elements; float32 PyTorch is within
the stated tolerances of the float64 reference.
"""

import copy
import math
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import (ModelConfig, Transformer, init_weights, save_safetensors,  # noqa: E402
                   load_safetensors, model_from_yaml)
from make_fixtures import (count_differing, fixture_args,  # noqa: E402
                           variant_lines)  # (the same model: keys as the forward fixtures)

GEN = "tests/reference/make_train_fixtures.py"
PAD, SOS, EOS = 1, 2, 3
BETAS = (0.9, 0.98)
ADAM_EPS = 1e-9
LABEL_SMOOTHING = 0.1

# d_model 16 (not 32): one F32 copy of all weights is then ~52 KB instead of ~185 KB, and a
# case with an optimizer part holds three (weights, gradients, final weights).
BASE = dict(src_vocab=40, tgt_vocab=44, max_len=16, d_model=16, layers=2, heads=4,
            d_ff=32, norm="pre", final_norm="auto", ln_style="tutorial", ln_eps=1e-6,
            attention_bias=False, output="logits", dropout=0.0, pad_id=PAD)

# Batch of 3: real source lengths (with SOS and EOS), target sentence lengths len(y).
# Decoder input [SOS] y has len(y)+1 tokens, labels y [EOS] as many.  Row 0 has no padding.
B3 = dict(src_lens=[10, 7, 4], y_lens=[6, 2, 4])
# Batch of 4 for accumulate 2: both halves have 10 non-pad label tokens (7+3 and 5+5), so the
# mean of the two micro-batch means is also the token mean of the full batch.
B4 = dict(src_lens=[10, 5, 8, 3], y_lens=[6, 2, 4, 4])

CASES = [
    dict(name="pre_tutorial", seed=449, over=dict(), batch=B3,
         about="pre-norm, tutorial LayerNorm, final_norm auto(on); AdamW wd 0.01, noam, clip",
         optim=dict(name="adamw", lr=0.2, weight_decay=0.01, schedule="noam", warmup=2,
                    clip_norm=0.5, steps=3, accumulate=1)),
    dict(name="post_standard", seed=441,
         over=dict(norm="post", ln_style="standard", ln_eps=1e-5, attention_bias=True),
         batch=B3, about="post-norm, standard LayerNorm eps 1e-5, attention bias; gradients only",
         optim=None),
    dict(name="branch_tutorial", seed=422, over=dict(norm="branch"), batch=B3,
         about="branch norm, tutorial LayerNorm, final_norm auto(off); Adam, inverse_sqrt, clip",
         optim=dict(name="adam", lr=0.02, weight_decay=0.0, schedule="inverse_sqrt", warmup=2,
                    clip_norm=0.5, steps=3, accumulate=1)),
    dict(name="learned_pe", seed=460, over=dict(positional="learned"), batch=B3,
         about="positional: learned (src_pos/tgt_pos.embedding.weight), pre-norm, tutorial "
               "LayerNorm; gradients only",
         optim=None),
    dict(name="tied_all", seed=476,
         over=dict(tie_embeddings="all", tgt_vocab=40, norm="post", ln_style="standard",
                   ln_eps=1e-5),
         batch=B3,
         about="tie_embeddings: all (one matrix for src_embed, tgt_embed and the projection), "
               "post-norm, standard LayerNorm; gradients only",
         optim=None),
    dict(name="accum", seed=522, over=dict(ln_style="standard", ln_eps=1e-5), batch=B4,
         about="pre-norm, standard LayerNorm; accumulate 2 (two micro-batches of 2); "
               "Adam, constant lr, clip",
         optim=dict(name="adam", lr=0.01, weight_decay=0.0, schedule="constant", warmup=0,
                    clip_norm=0.5, steps=3, accumulate=2)),
    # Activation / norm variants (op plugins in clformer) and the tied + learned trajectory.
    dict(name="swiglu_rms", seed=537, over=dict(ln_style="rms", ln_eps=1e-6, activation="swiglu"),
         batch=B3,
         about="LLaMA-style block: activation swiglu (gate linear_3), layernorm rms eps 1e-6 "
               "(alpha only), pre-norm; AdamW wd 0.01, noam, clip",
         optim=dict(name="adamw", lr=0.2, weight_decay=0.01, schedule="noam", warmup=2,
                    clip_norm=0.5, steps=3, accumulate=1)),
    dict(name="post_gelu", seed=549,
         over=dict(norm="post", ln_style="standard", ln_eps=1e-5, activation="gelu"),
         batch=B3,
         about="activation gelu (exact), post-norm, standard LayerNorm eps 1e-5; Adam, "
               "inverse_sqrt, clip",
         optim=dict(name="adam", lr=0.02, weight_decay=0.0, schedule="inverse_sqrt", warmup=2,
                    clip_norm=0.5, steps=3, accumulate=1)),
    dict(name="tied_learned", seed=703,
         over=dict(positional="learned", tie_embeddings="all", tgt_vocab=40),
         batch=B3,
         about="positional: learned and tie_embeddings: all (src_vocab == tgt_vocab 40), "
               "pre-norm, tutorial LayerNorm; AdamW wd 0.01, constant lr, clip",
         optim=dict(name="adamw", lr=0.01, weight_decay=0.01, schedule="constant", warmup=0,
                    clip_norm=0.5, steps=3, accumulate=1)),
]

# float32 PyTorch vs the float64 reference must stay within these (relative per tensor:
# max |a - b| / max |b|); the C trainer should meet the same bounds.
TOL_LOSS = 1e-5
TOL_GRAD = 1e-4
TOL_FINAL = 1e-4
# Smallest |ReLU input| (at non-pad positions, every forward pass of the references): far
# above float32 rounding, so that float32 and float64 take the same side of every ReLU.
MIN_RELU_MARGIN = 4e-4
# The trajectory must be well conditioned: gradient noise of NOISE_RHO * max|g| per tensor
# (several times float32 rounding) may move the final weights by at most NOISE_TOL
# (per tensor, relative to max |weight|).
NOISE_RHO = 1e-6
NOISE_TOL = 2e-4


# --------------------------------------------------------------------------- definitions

def lr_at(opt, d_model, s):
    """Learning rate of optimizer step s (1-based)."""
    lr, w = opt["lr"], opt["warmup"]
    if opt["schedule"] == "constant":
        return lr
    if opt["schedule"] == "noam":
        return lr * d_model ** -0.5 * min(s ** -0.5, s * w ** -1.5)
    if opt["schedule"] == "inverse_sqrt":
        return lr * min(s / w, math.sqrt(w / s))
    raise ValueError(opt["schedule"])


def loss_fn(logits, labels, vocab):
    crit = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=LABEL_SMOOTHING)
    return crit(logits.reshape(-1, vocab), labels.reshape(-1))


def loss_by_hand(logits, labels, vocab):
    """The formula of the docstring, to check that it is what CrossEntropyLoss does."""
    lp = torch.log_softmax(logits.reshape(-1, vocab), dim=-1)
    y = labels.reshape(-1)
    keep = y != PAD
    lp, y = lp[keep], y[keep]
    per = (-(1 - LABEL_SMOOTHING) * lp.gather(1, y[:, None])[:, 0]
           - (LABEL_SMOOTHING / vocab) * lp.sum(dim=1))
    return per.mean()


def micro_batches(batch, accumulate):
    B = batch["src"].shape[0]
    assert B % accumulate == 0
    n = B // accumulate
    return [{k: v[i * n:(i + 1) * n] for k, v in batch.items()} for i in range(accumulate)]


def forward_backward(model, batch, accumulate):
    """Gradients (accumulated into .grad, which must be zero before) and the step's loss."""
    V = model.cfg.tgt_vocab
    total = 0.0
    for mb in micro_batches(batch, accumulate):
        logits, _ = model(mb["src"], mb["tgt"])
        loss = loss_fn(logits, mb["labels"], V)
        (loss / accumulate).backward()
        total += loss.item() / accumulate
    return total


def eval_loss(model, batch, accumulate=1):
    with torch.no_grad():
        V = model.cfg.tgt_vocab
        total = 0.0
        for mb in micro_batches(batch, accumulate):
            logits, _ = model(mb["src"], mb["tgt"])
            total += loss_fn(logits, mb["labels"], V).item() / accumulate
        return total


def make_optimizer(model, opt):
    kw = dict(lr=opt["lr"], betas=BETAS, eps=ADAM_EPS, weight_decay=opt["weight_decay"])
    if opt["name"] == "adamw":
        return torch.optim.AdamW(model.parameters(), **kw)
    return torch.optim.Adam(model.parameters(), **kw)


def run_trajectory(model, batch, opt, margins=None):
    """K optimizer steps with torch.optim; returns per-step records.  margins, a list,
    collects the ReLU margin of each step's forward pass."""
    params = list(model.parameters())
    optim = make_optimizer(model, opt)
    steps = []
    for s in range(1, opt["steps"] + 1):
        if margins is not None:
            margins.append(relu_margin(model, batch))
        optim.zero_grad(set_to_none=False)
        loss = forward_backward(model, batch, opt["accumulate"])
        total = torch.nn.utils.clip_grad_norm_(params, opt["clip_norm"]).item()
        lr = lr_at(opt, model.cfg.d_model, s)
        for g in optim.param_groups:
            g["lr"] = lr
        optim.step()
        steps.append(dict(loss=loss, lr=lr, grad_norm=total,
                          clip_coef=min(1.0, opt["clip_norm"] / (total + 1e-6))))
    return steps


def run_trajectory_by_hand(model, batch, opt):
    """The same steps with the documented formulas instead of torch.optim/clip_grad_norm_."""
    params = list(model.parameters())
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    b1, b2 = BETAS
    wd = opt["weight_decay"]
    for s in range(1, opt["steps"] + 1):
        for p in params:
            p.grad = torch.zeros_like(p)
        forward_backward(model, batch, opt["accumulate"])
        total = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in params))
        coef = min(1.0, opt["clip_norm"] / (total + 1e-6))
        lr = lr_at(opt, model.cfg.d_model, s)
        with torch.no_grad():
            for p, mi, vi in zip(params, m, v):
                g = p.grad * coef
                if opt["name"] == "adamw":
                    p.mul_(1 - lr * wd)
                elif wd:
                    g = g + wd * p
                mi.mul_(b1).add_((1 - b1) * g)
                vi.mul_(b2).add_((1 - b2) * g * g)
                p.sub_((lr / (1 - b1 ** s)) * mi / (vi.sqrt() / math.sqrt(1 - b2 ** s) + ADAM_EPS))


def noise_check(model64, batch, opt, final, rho=NOISE_RHO, seed=5):
    """Conditioning of the trajectory: rerun it in float64 with Gaussian noise of
    rho * max|g| (per tensor) added to every non-zero gradient element at every step (as
    float32 arithmetic would; exact zeros stay zero there too: unused embedding rows, PAD
    rows).  Returns the largest per-tensor change of the final weights, relative to the
    tensor's max |value|, and of the final loss, relative."""
    gen = torch.Generator().manual_seed(seed)

    def hook(g):
        return g + (g != 0) * rho * g.abs().max() * torch.randn(g.shape, generator=gen,
                                                                 dtype=g.dtype)
    handles = [p.register_hook(hook) for p in model64.parameters()]
    run_trajectory(model64, batch, opt)
    for h in handles:
        h.remove()
    worst = max(rel_err(p.detach(), final[n]) for n, p in model64.named_parameters()
                if not is_key_bias(n))
    return worst


# --------------------------------------------------------------------------- building

def make_cfg(over):
    kw = dict(BASE)
    kw.update(over)
    return ModelConfig(**kw)


def make_batch(cfg, spec, gen):
    src_lens, y_lens = spec["src_lens"], spec["y_lens"]
    B, S, T = len(src_lens), max(src_lens), max(y_lens) + 1
    src = torch.full((B, S), PAD, dtype=torch.int64)
    tgt = torch.full((B, T), PAD, dtype=torch.int64)
    labels = torch.full((B, T), PAD, dtype=torch.int64)
    for b in range(B):
        ls, ly = src_lens[b], y_lens[b]
        src[b, 0] = SOS
        src[b, 1:ls - 1] = torch.randint(4, cfg.src_vocab, (ls - 2,), generator=gen)
        src[b, ls - 1] = EOS
        y = torch.randint(4, cfg.tgt_vocab, (ly,), generator=gen)
        tgt[b, 0] = SOS
        tgt[b, 1:ly + 1] = y
        labels[b, :ly] = y
        labels[b, ly] = EOS
    return dict(src=src, tgt=tgt, labels=labels)


def is_key_bias(name):
    return name.endswith("w_k.bias")


def rel_err(a, ref):
    ref = ref.double()
    den = ref.abs().max().item()
    return (a.double() - ref).abs().max().item() / den if den > 0 else (a.double() - ref).abs().max().item()


def f64_copy(model):
    m = copy.deepcopy(model).double()
    m.use_exact_pe()
    m.eval()
    return m


def relu_margin(model, batch):
    """Smallest |pre-activation| of the FFN ReLUs at positions that reach the loss (the
    non-pad tokens): a tiny margin would let float32 and float64 take different ReLU sides.
    None for a smooth activation (gelu, silu, swiglu, ...): there is no side to take."""
    if model.cfg.activation != "relu":
        return None
    mins = []
    hooks = []
    masks = {}
    for name, mod in model.named_modules():
        if name.endswith("feed_forward_block.linear_1"):
            enc = name.startswith("encoder")

            def h(mod, inp, out, enc=enc):
                keep = masks["src"] if enc else masks["tgt"]
                mins.append(out.detach().abs()[keep].min().item())
            hooks.append(mod.register_forward_hook(h))
    with torch.no_grad():
        for mb in micro_batches(batch, 1):
            masks["src"] = mb["src"] != PAD
            masks["tgt"] = mb["tgt"] != PAD
            model(mb["src"], mb["tgt"])
    for hk in hooks:
        hk.remove()
    return min(mins)


def fd_check(model64, batch, accumulate, names, grads, gen, count=3, h=1e-5):
    """Central differences in float64 on `count` random elements of each named weight."""
    worst = 0.0
    params = dict(model64.named_parameters())
    gscale = max(g.abs().max().item() for g in grads.values())
    for name in names:
        p = params[name]
        flat = p.data.view(-1)
        g = grads[name].reshape(-1)
        # prefer elements with a clearly non-zero gradient
        order = torch.argsort(g.abs(), descending=True)
        picks = [order[torch.randint(0, max(1, g.numel() // 4), (1,), generator=gen).item()].item()
                 for _ in range(count)]
        for i in picks:
            old = flat[i].item()
            flat[i] = old + h
            lp = eval_loss(model64, batch, accumulate)
            flat[i] = old - h
            lm = eval_loss(model64, batch, accumulate)
            flat[i] = old
            fd = (lp - lm) / (2 * h)
            err = abs(fd - g[i].item()) / gscale
            worst = max(worst, err)
            if err > 1e-6:
                raise SystemExit("finite differences disagree for %s[%d]: fd %.9e autograd %.9e"
                                 % (name, i, fd, g[i].item()))
    return worst


def fmt_float(x):
    if x == 0:
        return "0.0"
    s = "%.6e" % x
    m, e = s.split("e")
    m = m.rstrip("0")
    if m.endswith("."):
        m += "0"
    return "%se%d" % (m, int(e))


def yaml_text(case, cfg, B):
    opt = case["optim"]
    lines = [
        "# clformer training fixture 'train_%s' - generated by %s" % (case["name"], GEN),
        "# %s" % case["about"],
        "model:",
        "  src_vocab: %d" % cfg.src_vocab,
        "  tgt_vocab: %d" % cfg.tgt_vocab,
        "  max_len: %d" % cfg.max_len,
        "  d_model: %d" % cfg.d_model,
        "  layers: %d" % cfg.encoder_layers,
        "  heads: %d" % cfg.heads,
        "  d_ff: %d" % cfg.d_ff,
        "  norm: %s" % cfg.norm,
        "  final_norm: auto",
        "  layernorm: {style: %s, eps: %s}" % (cfg.ln_style, fmt_float(cfg.ln_eps)),
        "  attention_bias: %s" % ("true" if cfg.attention_bias else "false"),
        "  activation: %s" % cfg.activation,
        "  output: %s" % cfg.output,
        "  dropout: 0.0                # the references are computed without dropout",
        "  pad_id: %d" % cfg.pad_id,
    ] + variant_lines(cfg) + [
        "backend:",
        "  name: cpu",
        "train:",
        "  data: {train: unused.tsv}   # dummy (required key): the batch is batch.safetensors",
        "  seed: 1",
        "  shuffle: false",
    ]
    if opt is None:
        lines += [
            "  # gradients only: no optimizer reference in expected.safetensors",
            "  batch_size: %d" % B,
            "  steps: 1",
            "  accumulate: 1",
            "  optimizer: {name: adam, lr: 1.0e-4, betas: [0.9, 0.98], eps: 1.0e-9, "
            "weight_decay: 0.0}",
            "  schedule: {name: constant, warmup: 0}",
            "  label_smoothing: %s" % LABEL_SMOOTHING,
            "  clip_norm: 0.0",
        ]
    else:
        lines += [
            "  batch_size: %d                # sentences per micro-batch" % (B // opt["accumulate"]),
            "  steps: %d" % opt["steps"],
            "  accumulate: %d" % opt["accumulate"],
            "  optimizer: {name: %s, lr: %s, betas: [0.9, 0.98], eps: 1.0e-9, weight_decay: %s}"
            % (opt["name"], fmt_float(opt["lr"]), fmt_float(opt["weight_decay"])),
            "  schedule: {name: %s, warmup: %d}" % (opt["schedule"], opt["warmup"]),
            "  label_smoothing: %s" % LABEL_SMOOTHING,
            "  clip_norm: %s" % opt["clip_norm"],
        ]
    lines += ["  log_every: 1", "  validate_every: 0", ""]
    return "\n".join(lines)


def build_case(case):
    name = "train_" + case["name"]
    cfg = make_cfg(case["over"])
    opt = case["optim"]
    accumulate = opt["accumulate"] if opt else 1

    torch.manual_seed(case["seed"])
    model = Transformer(cfg)
    init_weights(model, randomize_norms=True)
    model.eval()  # dropout is 0.0 anyway
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    names = sorted(sd)

    gen = torch.Generator().manual_seed(case["seed"] * 7919)
    batch = make_batch(cfg, case["batch"], gen)
    B = batch["src"].shape[0]
    ntok = int((batch["labels"] != PAD).sum())

    # ---- gradients in float64 ---------------------------------------------------------
    m64 = f64_copy(model)
    m64.zero_grad(set_to_none=False)
    loss64 = forward_backward(m64, batch, accumulate)
    grads = {n: p.grad.detach().clone() for n, p in m64.named_parameters()}
    assert set(grads) == set(names)
    if not math.isfinite(loss64):
        raise SystemExit("%s: loss is not finite" % name)

    # the documented loss formula is CrossEntropyLoss's
    with torch.no_grad():
        for mb in micro_batches(batch, accumulate):
            lg, _ = m64(mb["src"], mb["tgt"])
            a = loss_fn(lg, mb["labels"], cfg.tgt_vocab).item()
            b = loss_by_hand(lg, mb["labels"], cfg.tgt_vocab).item()
            assert abs(a - b) <= 1e-12 * abs(a), (a, b)

    gmax = {n: g.abs().max().item() for n, g in grads.items()}
    gscale = max(gmax.values())
    for n in names:
        if is_key_bias(n):
            if gmax[n] > 1e-12 * gscale:
                raise SystemExit("%s: %s should have a zero gradient, max %.3e" % (name, n, gmax[n]))
        elif not gmax[n] > 1e-6 * gscale:
            raise SystemExit("%s: %s gets no gradient (max %.3e)" % (name, n, gmax[n]))
    # embedding rows of ids absent from the batch, and of PAD, get exactly zero gradient
    for tab, key in (("src_embed.embedding.weight", "src"), ("tgt_embed.embedding.weight", "tgt")):
        if cfg.tie_embeddings != "none":
            break  # the projection gives every row of a tied table a gradient
        present = set(batch[key].reshape(-1).tolist()) - {PAD}
        rows = grads[tab].abs().amax(dim=1)
        for r in range(rows.numel()):
            assert (rows[r].item() != 0) == (r in present), (name, tab, r)

    # learned positions: rows below the longest sentence get a gradient, the others none
    for tab, key in (("src_pos.embedding.weight", "src"), ("tgt_pos.embedding.weight", "tgt")):
        if tab in grads:
            rows = grads[tab].abs().amax(dim=1)
            L = batch[key].shape[1]
            for r in range(rows.numel()):
                assert (rows[r].item() != 0) == (r < L), (name, tab, r)

    # accumulation: the mean of micro-batch means == the full-batch token mean (equal counts)
    if accumulate > 1:
        counts = [int((mb["labels"] != PAD).sum()) for mb in micro_batches(batch, accumulate)]
        assert len(set(counts)) == 1, counts
        full = f64_copy(model)
        full.zero_grad(set_to_none=False)
        lfull = forward_backward(full, batch, 1)
        assert abs(lfull - loss64) <= 1e-12 * abs(lfull), (lfull, loss64)
        for n, p in full.named_parameters():
            assert rel_err(p.grad, grads[n]) <= 1e-10 or gmax[n] <= 1e-12 * gscale, n

    fd_names = ["encoder.layers.0.self_attention_block.w_q.weight",
                "decoder.layers.1.cross_attention_block.w_v.weight",
                "decoder.layers.0.residual_connections.1.norm.alpha",
                "src_embed.embedding.weight" if cfg.tie_embeddings != "all"
                else "tgt_embed.embedding.weight"]
    if cfg.positional == "learned":
        fd_names.append("tgt_pos.embedding.weight")
    if cfg.activation != "relu":  # the activation's derivative, and the gate's
        fd_names.append("encoder.layers.1.feed_forward_block.linear_1.weight")
        fd_names.append("decoder.layers.0.feed_forward_block.linear_1.bias")
    if cfg.gated:
        fd_names.append("encoder.layers.0.feed_forward_block.linear_3.weight")
        fd_names.append("decoder.layers.1.feed_forward_block.linear_3.bias")
    if cfg.ln_style == "rms":
        fd_names.append("encoder.norm.alpha" if cfg.final_norm
                        else "encoder.layers.1.residual_connections.0.norm.alpha")
    fd_worst = fd_check(f64_copy(model), batch, accumulate, fd_names, grads,
                        torch.Generator().manual_seed(case["seed"]))
    margin = relu_margin(m64, batch)
    if margin is not None and margin < MIN_RELU_MARGIN:
        raise SystemExit("%s: a ReLU input is %.2e from 0: pick another seed" % (name, margin))

    # ---- the same in float32 PyTorch, for the tolerance report ------------------------
    m32 = copy.deepcopy(model)
    m32.zero_grad(set_to_none=False)
    loss32 = forward_backward(m32, batch, accumulate)
    e_loss = abs(loss32 - loss64) / abs(loss64)
    e_grad = max(rel_err(p.grad, grads[n]) for n, p in m32.named_parameters()
                 if not is_key_bias(n))
    if e_loss > TOL_LOSS or e_grad > TOL_GRAD:
        raise SystemExit("%s: float32 vs float64: loss %.2e grad %.2e" % (name, e_loss, e_grad))

    expected = {"loss": torch.tensor([loss64], dtype=torch.float64)}
    for n in names:
        expected["grad." + n] = grads[n]
    info = dict(loss=loss64, ntok=ntok, e_loss=e_loss, e_grad=e_grad, fd=fd_worst,
                margin=margin, gmax=gmax, gscale=gscale, B=B, steps=None, e_final=None)

    # ---- optimizer trajectory ---------------------------------------------------------
    if opt:
        t64 = f64_copy(model)
        margins = []
        steps = run_trajectory(t64, batch, opt, margins)
        for st in steps:
            if not st["clip_coef"] < 1.0:
                raise SystemExit("%s: clipping not active (norm %.3f)" % (name, st["grad_norm"]))
        final = {n: p.detach().clone() for n, p in t64.named_parameters()}
        final_loss = eval_loss(t64, batch, opt["accumulate"])
        margins.append(relu_margin(t64, batch))
        margin = None if margins[0] is None else min(margins)
        if margin is not None and margin < MIN_RELU_MARGIN:
            raise SystemExit("%s: a ReLU input is %.2e from 0 after training" % (name, margin))
        assert abs(steps[0]["loss"] - loss64) <= 1e-12 * loss64

        # the documented formulas, by hand, agree with torch.optim
        hand = f64_copy(model)
        run_trajectory_by_hand(hand, batch, opt)
        for n, p in hand.named_parameters():
            e = rel_err(p.detach(), final[n])
            assert e <= 1e-12, (name, n, e)

        # the full batch in one micro-batch gives the same step (accumulation case)
        if opt["accumulate"] > 1:
            one = f64_copy(model)
            o2 = dict(opt, accumulate=1)
            s2 = run_trajectory(one, batch, o2)
            for a, b in zip(steps, s2):
                assert abs(a["loss"] - b["loss"]) <= 1e-12 * a["loss"]
            for n, p in one.named_parameters():
                if not is_key_bias(n):
                    assert rel_err(p.detach(), final[n]) <= 1e-10, n

        e_noise = noise_check(f64_copy(model), batch, opt, final)
        if e_noise > NOISE_TOL:
            raise SystemExit("%s: trajectory ill-conditioned: noise %.0e moves final weights "
                             "by %.2e" % (name, NOISE_RHO, e_noise))

        # float32 PyTorch trajectory, for the tolerance report
        t32 = copy.deepcopy(model)
        s32 = run_trajectory(t32, batch, opt)
        e_final = max(rel_err(p.detach() - sd[n], final[n] - sd[n].double())
                      for n, p in t32.named_parameters()
                      if (final[n] - sd[n].double()).abs().max() > 0 and not is_key_bias(n))
        e_final_abs = max(rel_err(p.detach(), final[n]) for n, p in t32.named_parameters())
        e_sloss = max(abs(a["loss"] - b["loss"]) / b["loss"] for a, b in zip(s32, steps))
        if e_final_abs > TOL_FINAL or e_sloss > TOL_LOSS:
            raise SystemExit("%s: float32 trajectory: final %.2e loss %.2e"
                             % (name, e_final_abs, e_sloss))

        for k, st in enumerate(steps, 1):
            expected["step%d.loss" % k] = torch.tensor([st["loss"]], dtype=torch.float64)
            expected["step%d.lr" % k] = torch.tensor([st["lr"]], dtype=torch.float64)
            expected["step%d.grad_norm" % k] = torch.tensor([st["grad_norm"]], dtype=torch.float64)
        for n in names:
            expected["final." + n] = final[n]
        expected["final.loss"] = torch.tensor([final_loss], dtype=torch.float64)
        info.update(steps=steps, final_loss=final_loss, e_final=e_final, e_noise=e_noise,
                    e_final_abs=e_final_abs, e_sloss=e_sloss, margin=margin)

    expected = {k: v.detach().to(torch.float32) for k, v in expected.items()}
    for k, v in expected.items():
        assert torch.isfinite(v).all(), k

    meta_w = {"format": "pt", "generator": GEN, "case": name, "seed": str(case["seed"]),
              "torch": torch.__version__}
    meta_b = {"format": "pt", "generator": GEN, "case": name,
              "framing": "src=[SOS] x [EOS] [PAD]..; tgt=[SOS] y [PAD]..; labels=y [EOS] [PAD]..",
              "label_tokens": str(ntok), "accumulate": str(accumulate)}
    meta_e = {"format": "pt", "generator": GEN, "case": name,
              "reference": "float64, rounded to F32",
              "loss": "CrossEntropyLoss(ignore_index=%d, label_smoothing=%s), mean over non-pad "
                      "labels of each micro-batch, averaged over micro-batches"
                      % (PAD, LABEL_SMOOTHING),
              "accumulate": str(accumulate),
              "f32_torch_rel_err_loss": "%.3e" % e_loss,
              "f32_torch_rel_err_grad": "%.3e" % e_grad}
    if opt:
        meta_e.update({"optimizer": opt["name"], "lr": repr(opt["lr"]),
                       "weight_decay": repr(opt["weight_decay"]), "betas": "0.9,0.98",
                       "eps": "1e-9", "schedule": opt["schedule"], "warmup": str(opt["warmup"]),
                       "clip_norm": repr(opt["clip_norm"]), "steps": str(opt["steps"]),
                       "f32_torch_rel_err_final": "%.3e" % info["e_final_abs"],
                       "noise_1e-6_rel_err_final": "%.3e" % info["e_noise"],
                       "f32_torch_rel_err_final_delta": "%.3e" % info["e_final"]})
    batch_st = {k: v.to(torch.int32) for k, v in batch.items()}
    return dict(name=name, cfg=cfg, case=case, yaml=yaml_text(case, cfg, B),
                weights=sd, batch=batch_st, expected=expected,
                metas=(meta_w, meta_b, meta_e), info=info)


FILES = ("model.yaml", "weights.safetensors", "batch.safetensors", "expected.safetensors")


def write_case(c, root):
    d = os.path.join(root, c["name"])
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "model.yaml"), "w") as f:
        f.write(c["yaml"])
    mw, mb, me = c["metas"]
    save_safetensors(os.path.join(d, "weights.safetensors"), c["weights"], mw)
    save_safetensors(os.path.join(d, "batch.safetensors"), c["batch"], mb)
    save_safetensors(os.path.join(d, "expected.safetensors"), c["expected"], me)
    return d


def reload_check(c, d):
    """Re-read the files: round trip, YAML -> same model config, loss/gradients sane."""
    w, _ = load_safetensors(os.path.join(d, "weights.safetensors"))
    bt, _ = load_safetensors(os.path.join(d, "batch.safetensors"))
    ex, _ = load_safetensors(os.path.join(d, "expected.safetensors"))
    for k, t in w.items():
        assert t.dtype == torch.float32 and torch.equal(t, c["weights"][k]), k
    for k in ("src", "tgt", "labels"):
        assert bt[k].dtype == torch.int32, k
    assert set(ex) == set(c["expected"])
    model, cfg, doc = model_from_yaml(os.path.join(d, "model.yaml"))
    assert set(model.state_dict()) == set(w), "model.yaml does not describe weights.safetensors"
    assert doc["train"]["label_smoothing"] == LABEL_SMOOTHING
    assert float(doc["model"]["dropout"]) == 0.0
    assert torch.isfinite(ex["loss"]).all()
    for n in w:
        g = ex["grad." + n]
        assert g.shape == w[n].shape and g.dtype == torch.float32, n
        assert is_key_bias(n) or g.abs().max() > 0, n
    # the stored F32 numbers reproduce: F32 weights in a float64 model give the stored loss
    model.load_state_dict(w)
    m64 = f64_copy(model)
    acc = int(doc["train"].get("accumulate", 1))
    l = eval_loss(m64, {k: v.long() for k, v in bt.items()}, acc)
    assert abs(l - ex["loss"].item()) <= 1e-6 * l, (l, ex["loss"].item())


def main():
    check, root, only = fixture_args(__doc__, {"train_" + c["name"] for c in CASES})
    built = [build_case(c) for c in CASES if not only or "train_" + c["name"] in only]

    if check:
        bad = count_differing(built, write_case, FILES, root)
        print("check: %s" % ("all training fixtures identical" if not bad
                             else "%d files differ" % bad))
        return 1 if bad else 0

    total = 0
    for c in built:
        d = write_case(c, root)
        reload_check(c, d)
        size = sum(os.path.getsize(os.path.join(d, f)) for f in FILES)
        total += size
        i = c["info"]
        cfg = c["cfg"]
        print("%s: norm %s, ln %s, final_norm %s, bias %s, B %d, label tokens %d, %d params, "
              "%d bytes" % (c["name"], cfg.norm, cfg.ln_style, "on" if cfg.final_norm else "off",
                            "yes" if cfg.attention_bias else "no", i["B"], i["ntok"],
                            sum(v.numel() for v in c["weights"].values()), size))
        print("  loss %.9f; max |grad| %.4e (%s); min over weights of max |grad| %.3e (%s)"
              % (i["loss"], i["gscale"], max(i["gmax"], key=i["gmax"].get),
                 min(v for n, v in i["gmax"].items() if not is_key_bias(n)),
                 min((n for n in i["gmax"] if not is_key_bias(n)), key=i["gmax"].get)))
        print("  float32 torch vs float64: loss %.2e, grad %.2e (max per-tensor rel); "
              "finite diff. %.1e; ReLU margin %s"
              % (i["e_loss"], i["e_grad"], i["fd"],
                 "n/a (%s)" % cfg.activation if i["margin"] is None else "%.2e" % i["margin"]))
        if i["steps"]:
            for k, st in enumerate(i["steps"], 1):
                print("  step %d: loss %.9f lr %.9g grad_norm %.6f clip_coef %.6f"
                      % (k, st["loss"], st["lr"], st["grad_norm"], st["clip_coef"]))
            print("  final loss %.9f; float32 torch vs float64: final weights %.2e, "
                  "weight change %.2e, step losses %.2e; gradient noise %.0e: final weights %.2e"
                  % (i["final_loss"], i["e_final_abs"], i["e_final"], i["e_sloss"], NOISE_RHO,
                     i["e_noise"]))
    print("%d cases, %d bytes in %s" % (len(built), total, root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
