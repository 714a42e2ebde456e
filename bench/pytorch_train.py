#!/usr/bin/python3
"""Time PyTorch training steps on CPU in float32 for the model a clformer YAML describes:
the baseline for `clformer bench --train`.

    /usr/bin/python3 bench/pytorch_train.py --config configs/base-prenorm.yaml \
        [--weights w.safetensors] [--batch 32] [--src-len 64] [--tgt-len 64] \
        [--iters 5] [--warmup 1] [--threads N] [--seed 1] [--dropout-sites clformer|tutorial]

Needs only Debian's python3-torch (1.13). The model is tests/reference/model.py (the
tutorial Transformer under the tutorial weight names); without --weights it is
Xavier-uniform from --seed.

One step is what `clformer bench --train` times: `accumulate` micro-batches (train:
section, default 1) of forward, CrossEntropyLoss(ignore_index=pad_id,
label_smoothing=train.label_smoothing) over the logits, backward, then clipping when
train.clip_norm > 0 and one torch.optim.Adam / AdamW step (train.optimizer: lr, betas,
eps, weight_decay; defaults as docs/CONFIG.md), gradients cleared with
zero_grad(set_to_none=True). Batches are synthetic and unpadded, framed as clformer's
trainer frames them: src = [SOS] x [EOS], tgt = [SOS] y, labels = y [EOS], x and y random
non-special ids; a fresh batch per step, drawn outside the timed region.

Dropout (model.dropout) sites: clformer drops the embeddings and each sublayer's output
before it joins the residual stream (the paper's sites). The tutorial module also drops
the attention probabilities and the FFN's hidden layer. --dropout-sites clformer (the
default) turns those two off so that both sides do the same work; tutorial keeps them.

Prints one JSON object on stdout, with the keys of `clformer bench --train --json` that
apply: seconds_per_step (median), seconds_min, tgt_tokens_per_s = accumulate*B*T/step,
tokens_per_s = accumulate*B*(S+T)/step, gflop_per_step = 3 x the forward FLOPs of
bench/pytorch_forward.py (the usual convention that the backward pass costs twice the
forward), gflops, loss_first, loss_last, peak_rss_bytes.
"""

import argparse
import contextlib
import json
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
from model import FeedForwardBlock, MultiHeadAttentionBlock  # noqa: E402
from pytorch_forward import add_run_args, forward_flops, load_model  # noqa: E402

SOS, EOS, FIRST_WORD = 2, 3, 4  # the specials of clformer/tokenizer.h

TRAIN_DEFAULTS = {"accumulate": 1, "label_smoothing": 0.1, "clip_norm": 0.0}
OPTIM_DEFAULTS = {"name": "adam", "lr": 1.0e-4, "betas": [0.9, 0.98], "eps": 1.0e-9,
                  "weight_decay": 0.0}


def train_settings(doc):
    """The train: section's settings that shape a step, with docs/CONFIG.md's defaults."""
    t = dict(TRAIN_DEFAULTS)
    o = dict(OPTIM_DEFAULTS)
    sec = doc.get("train") or {}
    for k in t:
        if sec.get(k) is not None:
            t[k] = sec[k]
    o.update({k: v for k, v in (sec.get("optimizer") or {}).items() if v is not None})
    return t, o


def synthetic_batch(g, cfg, B, S, T):
    """src [B,S] = SOS x EOS, tgt [B,T] = SOS y, labels [B,T] = y EOS; no padding."""
    src = torch.randint(FIRST_WORD, cfg.src_vocab, (B, S), generator=g)
    src[:, 0] = SOS
    if S > 1:
        src[:, -1] = EOS
    y = torch.randint(FIRST_WORD, cfg.tgt_vocab, (B, T - 1), generator=g)
    sos = torch.full((B, 1), SOS, dtype=y.dtype)
    eos = torch.full((B, 1), EOS, dtype=y.dtype)
    return src, torch.cat([sos, y], 1), torch.cat([y, eos], 1)


def main():
    ap = argparse.ArgumentParser(description="Time PyTorch training steps of a clformer model.")
    add_run_args(ap, iters=5, warmup=1)
    ap.add_argument("--dropout-sites", choices=("clformer", "tutorial"), default="clformer")
    ap.add_argument("--autocast", choices=("off", "bf16"), default="off",
                    help="bf16: forward and loss under torch.autocast(bfloat16), as PyTorch's "
                         "mixed-precision training runs (F32 master weights and optimizer)")
    a = ap.parse_args()

    if a.batch <= 0 or a.src_len <= 0 or a.tgt_len < 2 or a.iters <= 0 or a.warmup < 0:
        ap.error("batch, src-len and iters must be > 0, tgt-len >= 2, warmup >= 0")
    threads = a.threads if a.threads > 0 else len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    torch.manual_seed(a.seed)

    model, cfg, doc = load_model(ap, a)
    ts, opt = train_settings(doc)
    if a.dropout_sites == "clformer":
        for m in model.modules():
            if isinstance(m, (MultiHeadAttentionBlock, FeedForwardBlock)):
                m.dropout = nn.Identity()
    model.float().train()

    params = [p for p in model.parameters() if p.requires_grad]
    kind = str(opt["name"]).lower()
    optim_cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}.get(kind)
    if optim_cls is None:
        ap.error("train.optimizer.name %r: only adam and adamw" % (opt["name"],))
    optimizer = optim_cls(params, lr=float(opt["lr"]),
                          betas=(float(opt["betas"][0]), float(opt["betas"][1])),
                          eps=float(opt["eps"]), weight_decay=float(opt["weight_decay"]))
    criterion = nn.CrossEntropyLoss(ignore_index=cfg.pad_id,
                                    label_smoothing=float(ts["label_smoothing"]))
    A, clip = int(ts["accumulate"]), float(ts["clip_norm"])
    B, S, T = a.batch, a.src_len, a.tgt_len
    g = torch.Generator().manual_seed(a.seed)

    def autocast():
        return (torch.autocast(device_type="cpu", dtype=torch.bfloat16)
                if a.autocast == "bf16" else contextlib.nullcontext())

    def step(batches):
        """One optimizer step over the micro-batches; returns the mean of their losses."""
        total = 0.0
        for src, tgt, labels in batches:
            with autocast():
                logits, _ = model(src, tgt)
                loss = criterion(logits.reshape(-1, cfg.tgt_vocab), labels.reshape(-1))
            (loss / A).backward()
            total += loss.item()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(params, clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return total / A

    def batches():
        return [synthetic_batch(g, cfg, B, S, T) for _ in range(A)]

    mb = batches()
    t0 = time.perf_counter()
    loss_first = step(mb)
    first_step = time.perf_counter() - t0
    for _ in range(a.warmup):
        step(batches())
    times, loss_last = [], loss_first
    for _ in range(a.iters):
        mb = batches()
        t0 = time.perf_counter()
        loss_last = step(mb)
        times.append(time.perf_counter() - t0)

    sec = statistics.median(times)
    flops = 3 * A * forward_flops(cfg, B, S, T)
    out = {
        "mode": "train",
        "framework": "pytorch",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "config": a.config,
        "weights": a.weights,
        "batch": B,
        "src_len": S,
        "tgt_len": T,
        "accumulate": A,
        "padding": "none",
        "iters": a.iters,
        "warmup": a.warmup,
        "dropout": cfg.dropout,
        "dropout_sites": a.dropout_sites,
        "autocast": a.autocast,
        "optimizer": kind,
        "lr": float(opt["lr"]),
        "label_smoothing": float(ts["label_smoothing"]),
        "seconds_per_step": sec,
        "seconds_min": min(times),
        "tgt_tokens_per_s": A * B * T / sec,
        "tokens_per_s": A * B * (S + T) / sec,
        "gflop_per_step": flops / 1e9,
        "gflops": flops / 1e9 / sec,
        "flops_convention": "3 x forward (GEMMs + attention products)",
        "first_step_s": first_step,
        "loss_first": loss_first,
        "loss_last": loss_last,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "model": {"d_model": cfg.d_model, "heads": cfg.heads, "d_ff": cfg.d_ff,
                  "encoder_layers": cfg.encoder_layers, "decoder_layers": cfg.decoder_layers,
                  "src_vocab": cfg.src_vocab, "tgt_vocab": cfg.tgt_vocab, "norm": cfg.norm,
                  "output": cfg.output},
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
