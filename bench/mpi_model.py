#!/usr/bin/env python3
"""On-paper model of data-parallel training with clformer over MPI on 2-64 nodes.

    /usr/bin/python3 bench/mpi_model.py      (prints the markdown tables of bench/RESULTS.md)

What one step costs on p nodes (clformer's scheme, tools/dist_mpi.c):
  compute  T_c   = tokens per node per step / the node's training rate (target tokens/s)
  copies   T_h   = 2 x S / H   (gradients device -> host -> device; H = host copy rate)
  reduce   T_r   = 2 (p-1)/p x S / B  +  2 (p-1) x alpha x ceil(S / bucket)
                   (ring all-reduce: reduce-scatter + all-gather, each bucket paying the
                   per-message latency alpha at each of its 2 (p-1) hops)
  no overlap     T = T_c + T_h + T_r   (CLF_DIST_OVERLAP=0: the all-reduce after the backward)
  as built       T = T_c + T_h + max(T_r - T_b, T_r x E / S)
                 (the default: each bucket's all-reduce starts when the backward pass of the
                 node's last micro-batch has completed it, so it hides behind the rest of
                 that backward, T_b = 2/3 of the micro-batch's compute (2 of its 3 GEMM
                 passes; one micro-batch per node per step), except the buckets completed
                 last: the tied embedding's E bytes, written by the source embedding's
                 backward, the last node; the host copies stay serial)
  full overlap   T = max(T_c, T_h + T_r)   (an upper bound: everything hidden)
  efficiency     = T_c / T         (1 = linear speed-up in tokens/s)
"""
import math

BUCKET = 4 << 20  # bytes, CLI_DIST_BUCKET_BYTES
ALPHA = 20e-6  # s per message hop, TCP over Ethernet
HOST_COPY = 5e9  # bytes/s, one direction of the gradient copy (memcpy-class; PCIe 4 x16 is ~25e9)
LINKS = {"10 Gb/s": 10e9 / 8, "25 Gb/s": 25e9 / 8, "100 Gb/s": 100e9 / 8}
NODES = [2, 4, 8, 16, 32, 64]


def params(d, dff, layers, vocab):
    """Parameters of the paper's model (no attention bias, tied embeddings)."""
    enc = 4 * d * d + 2 * d * dff + dff + d + 2 * 2 * d
    dec = 8 * d * d + 2 * d * dff + dff + d + 3 * 2 * d
    return layers * (enc + dec) + vocab * d + vocab


BASE = params(512, 2048, 6, 8000)  # configs/base-prenorm.yaml as measured (vocabulary 8000)
BIG = params(1024, 4096, 6, 8000)

# Node rates (target tokens/s of training, base model):
#  cpu2: measured, bench/RESULTS.md "Training, CPU backend": 413 tokens/s on this 2-core node
#  gpu:  the paper's base model: 100k steps of ~25k target tokens in 12 h on 8 P100
#        = 0.43 s per step, ~7200 tokens/s per GPU (not measured here)
# Per-node tokens per step: cpu2 one micro-batch of 1024 (the measured batch), gpu 3125
# (the paper's 25k over 8 GPUs). Big: the base time scaled by the parameter ratio.
NODE_KINDS = {
    "2-core CPU node (measured)": (413.0, 1024),
    "P100-class GPU node (paper)": (25000 / 8 / (12 * 3600 / 100000), 3125),
}


BWD_SHARE = 2 / 3  # the backward pass's share of a micro-batch's compute


def step(p, s_bytes, t_c, bw, last_bytes):
    t_h = 2 * s_bytes / HOST_COPY
    t_r = 2 * (p - 1) / p * s_bytes / bw + 2 * (p - 1) * ALPHA * math.ceil(s_bytes / BUCKET)
    exposed = max(t_r - BWD_SHARE * t_c, t_r * last_bytes / s_bytes)
    return (t_h, t_r, t_c / (t_c + t_h + t_r), t_c / (t_c + t_h + exposed),
            t_c / max(t_c, t_h + t_r))


def main():
    print(f"Gradient bytes per step (F32): base {BASE / 1e6:.1f} M parameters = "
          f"{4 * BASE / 1e6:.0f} MB, big {BIG / 1e6:.1f} M = {4 * BIG / 1e6:.0f} MB "
          f"(vocabulary 8000, tied); {math.ceil(4 * BASE / BUCKET)} and "
          f"{math.ceil(4 * BIG / BUCKET)} buckets of 4 MiB.\n")
    for kind, (rate, tokens) in NODE_KINDS.items():
        for name, n, d in (("base", BASE, 512), ("big", BIG, 1024)):
            s_bytes = 4 * n
            t_c = tokens / rate * n / BASE
            print(f"**{name}, {kind}**: compute {t_c:.3f} s per step ({tokens} target tokens "
                  f"per node), host copies {2 * s_bytes / HOST_COPY:.3f} s\n")
            print("| link | " + " | ".join(f"p={p}" for p in NODES) + " |")
            print("|---|" + "---:|" * len(NODES))
            for link, bw in LINKS.items():
                cells = []
                for p in NODES:
                    _, t_r, eff, eff_built, eff_ov = step(p, s_bytes, t_c, bw, 4 * 8000 * d)
                    cells.append(f"{t_r:.2f} s, {eff:.0%} / {eff_built:.0%} ({eff_ov:.0%})")
                print(f"| {link} | " + " | ".join(cells) + " |")
            print()


if __name__ == "__main__":
    main()
