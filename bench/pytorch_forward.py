#!/usr/bin/python3
"""Time one full PyTorch forward (encoder + decoder + projection, teacher-forced) on CPU
or on a CUDA GPU in float32, for the model a clformer YAML describes: the baseline for
`clformer bench`.

    /usr/bin/python3 bench/pytorch_forward.py --config configs/base-prenorm.yaml \
        [--weights w.safetensors] [--batch 32] [--src-len 64] [--tgt-len 64] \
        [--iters 10] [--warmup 2] [--threads N] [--seed 1] [--device cpu|cuda]

--device cuda (for bench/gpu.sh) runs on torch.cuda's current GPU in strict FP32: TF32 is
turned off for matmuls and cuDNN, and every timed forward is bracketed by
torch.cuda.synchronize(); --threads is ignored there. It exits 2 with one line on stderr
when this torch has no usable CUDA device.

Needs only Debian's python3-torch (1.13). The model is tests/reference/model.py (the
tutorial Transformer under the tutorial weight names). Without --weights the weights are
Xavier-uniform from --seed. Inputs are random token ids (no padding), so every row is full
length. Prints one JSON object on stdout:
  framework, torch, device (cpu or cuda), threads, batch, src_len, tgt_len, iters, seconds_per_forward (mean),
  seconds_min, tokens_per_s = batch*(src_len+tgt_len)/seconds_per_forward,
  gflop_per_forward, gflops (= GFLOP/s = gflop_per_forward/seconds_per_forward), and the
  resolved model sizes; with --device cuda also device_name (torch.cuda.get_device_name()),
  cuda (torch.version.cuda) and tf32 (false).

FLOP count (the same formula is used by `clformer bench`): 2 x the multiply-adds of every
GEMM plus the two attention products (QK^T and PV), counted in full (no causal saving);
softmax, layernorm, embedding, bias, relu and residual adds are not counted.
  d = d_model, f = d_ff, V = tgt_vocab, B = batch, S = src_len, T = tgt_len,
  Le/Ld = encoder/decoder layers
  MACs = Le * B*S*(4*d*d + 2*d*f)            encoder: W_q,W_k,W_v,W_o + FFN
       + Le * B*2*S*S*d                      encoder self-attention QK^T + PV
       + Ld * B*T*(4*d*d + 2*d*f)            decoder self-attention projections + FFN
       + Ld * B*2*T*T*d                      decoder self-attention QK^T + PV
       + Ld * (B*T*2*d*d + B*S*2*d*d)        cross-attention W_q,W_o (on T) and W_k,W_v (on S)
       + Ld * B*2*T*S*d                      cross-attention QK^T + PV
       + B*T*d*V                             output projection
  FLOPs = 2 * MACs
"""

import argparse
import contextlib
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
from model import init_weights, load_safetensors, model_from_yaml  # noqa: E402


def forward_flops(cfg, B, S, T):
    """2 * multiply-adds of the GEMMs and attention products; see the module docstring."""
    d, f, V = cfg.d_model, cfg.d_ff, cfg.tgt_vocab
    Le, Ld = cfg.encoder_layers, cfg.decoder_layers
    macs = (Le * B * S * (4 * d * d + 2 * d * f)
            + Le * B * 2 * S * S * d
            + Ld * B * T * (4 * d * d + 2 * d * f)
            + Ld * B * 2 * T * T * d
            + Ld * (B * T * 2 * d * d + B * S * 2 * d * d)
            + Ld * B * 2 * T * S * d
            + B * T * d * V)
    return 2 * macs


def add_run_args(ap, iters, warmup):
    """The options the forward and the training bench share (run.sh and train.sh pass them)."""
    ap.add_argument("--config", default="configs/base-prenorm.yaml")
    ap.add_argument("--weights", default=None, help="safetensors under the tutorial names")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--src-len", type=int, default=64)
    ap.add_argument("--tgt-len", type=int, default=64)
    ap.add_argument("--iters", type=int, default=iters)
    ap.add_argument("--warmup", type=int, default=warmup)
    ap.add_argument("--threads", type=int, default=0, help="0 = all available cores")
    ap.add_argument("--seed", type=int, default=1)


def load_model(ap, a):
    """The model of --config with the weights of --weights (Xavier-uniform without), after
    checking the lengths against model.max_len: (model, cfg, the YAML document)."""
    model, cfg, doc = model_from_yaml(a.config)
    if max(a.src_len, a.tgt_len) > cfg.max_len:
        ap.error("src/tgt length %d exceeds model.max_len %d"
                 % (max(a.src_len, a.tgt_len), cfg.max_len))
    if a.weights:
        w, _ = load_safetensors(a.weights)
        w = {k: v.float() for k, v in w.items() if not k.startswith("optim.")}
        model.load_state_dict(w, strict=True)
    else:
        init_weights(model, randomize_norms=False)
    return model, cfg, doc


def main():
    ap = argparse.ArgumentParser(description="Time a PyTorch forward of a clformer model.")
    add_run_args(ap, iters=10, warmup=2)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="cuda: the current GPU, strict FP32 (no TF32); --threads ignored")
    ap.add_argument("--autocast", choices=("off", "bf16"), default="off",
                    help="bf16: the forward under torch.autocast(bfloat16), the mixed "
                         "precision PyTorch users run (products in BF16, F32 elsewhere)")
    ap.add_argument("--tf32", action="store_true",
                    help="cuda: let FP32 products use TF32 tensor cores (PyTorch's "
                         "allow_tf32); default strict FP32")
    a = ap.parse_args()

    if a.batch <= 0 or a.src_len <= 0 or a.tgt_len <= 0 or a.iters <= 0 or a.warmup < 0:
        ap.error("batch, src-len, tgt-len and iters must be > 0, warmup >= 0")
    cuda = a.device == "cuda"
    if cuda:
        if not torch.cuda.is_available():
            why = ("this torch %s is built without CUDA" % torch.__version__
                   if torch.version.cuda is None else
                   "torch %s (CUDA %s) finds no usable CUDA device"
                   % (torch.__version__, torch.version.cuda))
            print("pytorch_forward.py: --device cuda: %s" % why, file=sys.stderr)
            return 2
        # FP32 as clformer computes it: no TF32 tensor-core shortcut for matmuls or cuDNN
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
        torch.backends.cudnn.allow_tf32 = a.tf32
    else:
        threads = a.threads if a.threads > 0 else len(os.sched_getaffinity(0))
        torch.set_num_threads(threads)
    device = torch.device(a.device)
    torch.manual_seed(a.seed)

    model, cfg, _ = load_model(ap, a)
    model.float().eval()
    model.to(device)

    g = torch.Generator().manual_seed(a.seed)
    lo = 4 if min(cfg.src_vocab, cfg.tgt_vocab) > 4 else 0
    src = torch.randint(lo, cfg.src_vocab, (a.batch, a.src_len), generator=g)
    tgt = torch.randint(lo, cfg.tgt_vocab, (a.batch, a.tgt_len), generator=g)
    if lo:
        src[src == cfg.pad_id] = lo
        tgt[tgt == cfg.pad_id] = lo
    src, tgt = src.to(device), tgt.to(device)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    times = []
    autocast = (torch.autocast(device_type=a.device, dtype=torch.bfloat16)
                if a.autocast == "bf16" else contextlib.nullcontext())
    with torch.inference_mode(), autocast:
        for _ in range(a.warmup):
            model(src, tgt)
        for _ in range(a.iters):
            sync()
            t0 = time.perf_counter()
            model(src, tgt)
            sync()
            times.append(time.perf_counter() - t0)

    sec = sum(times) / len(times)
    flops = forward_flops(cfg, a.batch, a.src_len, a.tgt_len)
    out = {
        "framework": "pytorch",
        "torch": torch.__version__,
        "device": a.device,
        "threads": torch.get_num_threads(),
        "batch": a.batch,
        "src_len": a.src_len,
        "tgt_len": a.tgt_len,
        "iters": a.iters,
        "warmup": a.warmup,
        "seconds_per_forward": sec,
        "seconds_min": min(times),
        "tokens_per_s": a.batch * (a.src_len + a.tgt_len) / sec,
        "gflop_per_forward": flops / 1e9,
        "gflops": flops / 1e9 / sec,
        "config": a.config,
        "weights": a.weights,
        "model": {"d_model": cfg.d_model, "heads": cfg.heads, "d_ff": cfg.d_ff,
                  "encoder_layers": cfg.encoder_layers, "decoder_layers": cfg.decoder_layers,
                  "src_vocab": cfg.src_vocab, "tgt_vocab": cfg.tgt_vocab, "norm": cfg.norm,
                  "output": cfg.output},
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
        "autocast": a.autocast,
    }
    if cuda:
        out["device_name"] = torch.cuda.get_device_name()
        out["cuda"] = torch.version.cuda
        out["tf32"] = (torch.backends.cuda.matmul.allow_tf32
                       or torch.backends.cudnn.allow_tf32)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
