#!/usr/bin/env python3
"""Times clformer against transformers' generate() on a full-size OPUS-MT-shaped model (issue
17, item 7); bench/marian_speed.sh runs it. Both decode the same sentences with the same
settings and the same number of threads, cases interleaved, the median of REPEAT rounds.

    marian_speed.py HF_DIR CLF_MODEL_DIR CLFORMER [WEIGHT_TYPE...]

HF_DIR: the MarianMTModel (make_marian_fixture.py --full-size OUT --model-only writes
OUT/hf); CLF_MODEL_DIR: its `clformer import marian`; CLFORMER: the binary; WEIGHT_TYPEs:
clformer's --weight-type values to time (default f32). Environment: THREADS (2), REPEAT
(3), MAX_LENGTH (generate()'s max_length, 32), BATCH (the large batch, 16), SENTENCES
(how many, at most 50; default 50), DEVICE (cpu; gpu: transformers on CUDA in FP16 and
clformer on the OpenCL device OCL_DEVICE, default NVIDIA: issue 36's stand-in for
CTranslate2 on CUDA where its wheel cannot run).

The random model never chooses EOS before max_length (it repeats one token), so every
output is max_length - 1 tokens, the last the forced EOS, in both: equal work. The script
checks that: clformer's text must equal the tokenizer's batch_decode of generate()'s ids,
line for line, or the case is marked.
"""
import os
import re
import statistics
import subprocess
import sys
import time

import torch
from transformers import MarianMTModel, MarianTokenizer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "reference"))
from marian_text import TEXT_SRC  # noqa: E402 (the fixture's lines, after the path)

THREADS = int(os.environ.get("THREADS", "2"))
REPEAT = int(os.environ.get("REPEAT", "3"))
MAX_LENGTH = int(os.environ.get("MAX_LENGTH", "32"))
BATCH = int(os.environ.get("BATCH", "16"))
DEVICE = os.environ.get("DEVICE", "cpu")
OCL_DEVICE = os.environ.get("OCL_DEVICE", "NVIDIA")

BASE = TEXT_SRC + [
    "the dog sits in the park",
    "I would like the book",
    "where is my cat?",
    "the price is 20 € today",
    "we play at nine",
]
# the fixture's sentences, then the same words backwards: SENTENCES of them (default 50)
SENTENCES = (BASE + [" ".join(reversed(s.split())) for s in BASE])[
    :int(os.environ.get("SENTENCES", "50"))]


def timed_generate(model, tok, sentences, batch, args, eos, pad):
    """model.generate(**args) over sentences in batches of batch: (seconds in generate, each
    sentence's ids after the decoder start: up to its first eos, or without one its ids
    that are not pad)."""
    secs, seqs = 0.0, []
    for i in range(0, len(sentences), batch):
        enc = tok(sentences[i:i + batch], return_tensors="pt", padding=True).to(model.device)
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(**enc, **args)
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        secs += time.perf_counter() - t0
        for row in out.tolist():
            seq = row[1:]  # after the decoder start
            seqs.append(seq[:seq.index(eos) + 1] if eos in seq else [t for t in seq if t != pad])
    return secs, seqs


def hf_run(model, tok, pad, beams, batch):
    """generate() over SENTENCES in batches: (seconds in generate, texts, tokens out)."""
    args = dict(max_length=MAX_LENGTH, num_beams=beams, do_sample=False, bad_words_ids=[[pad]],
                forced_eos_token_id=0, decoder_start_token_id=pad, eos_token_id=0,
                pad_token_id=pad)
    if beams > 1:
        args.update(length_penalty=1.0, early_stopping=False)
    secs, seqs = timed_generate(model, tok, SENTENCES, batch, args, 0, pad)
    return (secs, [tok.decode(s, skip_special_tokens=True) for s in seqs],
            sum(len(s) for s in seqs))


def clf_run(clformer, model_dir, wtype, beams, batch):
    """clformer translate over SENTENCES: (seconds in clf_decode from --stats, texts, wall
    seconds of the process, tokens it counted (without EOS))."""
    cmd = [clformer, "translate", "-m", model_dir, "--threads", str(THREADS), "--stats",
           "--batch", str(batch), "--max-len", str(MAX_LENGTH - 1), "--forced-eos",
           "--weight-type", wtype, "--beam", str(beams), "--beam-style", "hf",
           "--length-penalty", "1"]
    if DEVICE == "gpu":
        cmd += ["--backend", "opencl", "--device", OCL_DEVICE]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, input="\n".join(SENTENCES) + "\n", capture_output=True, text=True,
                       check=True)
    wall = time.perf_counter() - t0
    m = re.search(r"(\d+) output tokens in ([0-9.]+) s", p.stderr)
    if not m:
        sys.exit("no --stats line in: " + p.stderr)
    return float(m.group(2)), p.stdout.rstrip("\n").split("\n"), wall, int(m.group(1))


def main():
    hf_dir, model_dir, clformer = sys.argv[1:4]
    wtypes = sys.argv[4:] or ["f32"]
    torch.set_num_threads(THREADS)
    tok = MarianTokenizer.from_pretrained(hf_dir)
    model = MarianMTModel.from_pretrained(hf_dir).eval()
    if DEVICE == "gpu":
        model = model.to("cuda", dtype=torch.float16)
        with torch.no_grad():  # CUDA's and cuBLAS's set-up outside the timing
            model.generate(**tok(SENTENCES[:1], return_tensors="pt").to("cuda"), max_length=4)
    pad = model.config.pad_token_id
    cases = [("greedy", 1, 1), ("greedy", 1, BATCH), ("beam 4", 4, 1), ("beam 4", 4, BATCH)]
    engines = ["transformers"] + ["clformer " + w for w in wtypes]
    times = {(c, e): [] for c in cases for e in engines}
    walls = {(c, e): [] for c in cases for e in engines}
    tokens, same = {}, {}
    for r in range(REPEAT):
        for c in cases:
            _, beams, batch = c
            secs, ref, n = hf_run(model, tok, pad, beams, batch)
            times[(c, "transformers")].append(secs)
            tokens[c] = n
            for w in wtypes:
                secs, texts, wall, n_clf = clf_run(clformer, model_dir, w, beams, batch)
                times[(c, "clformer " + w)].append(secs)
                walls[(c, "clformer " + w)].append(wall)
                eq = sum(a == b for a, b in zip(texts, ref))
                same[(c, w)] = min(same.get((c, w), eq), eq)
                # clformer counts tokens without the EOS; every line ends with one here
                if n_clf + len(SENTENCES) != n:
                    print("warning: %s %s: clformer %d tokens + %d EOS, transformers %d" %
                          (c, w, n_clf, len(SENTENCES), n), file=sys.stderr)
            print("round %d: %s, batch %d: %s" % (r + 1, c[0], c[2], ", ".join(
                "%s %.2f s" % (e, times[(c, e)][-1]) for e in engines)), file=sys.stderr,
                flush=True)
    print("%s; %d sentences, max_length %d, %d threads, median of %d; tokens out per case: %s" %
          ("transformers on CUDA in FP16, clformer OpenCL on " + OCL_DEVICE if DEVICE == "gpu"
           else "CPU", len(SENTENCES), MAX_LENGTH, THREADS, REPEAT,
           ", ".join("%s b%d %d" % (c[0], c[2], tokens[c]) for c in cases)))
    head = "| case | transformers tok/s |"
    rule = "|---|---:|"
    for w in wtypes:
        head += " clformer %s tok/s | ratio | same text |" % w
        rule += "---:|---:|---:|"
    print(head)
    print(rule)
    for c in cases:
        hf = tokens[c] / statistics.median(times[(c, "transformers")])
        line = "| %s, batch %d | %.1f |" % (c[0], c[2], hf)
        for w in wtypes:
            v = tokens[c] / statistics.median(times[(c, "clformer " + w)])
            line += " %.1f | %.2f× | %d/%d |" % (v, v / hf, same[(c, w)], len(SENTENCES))
        print(line)
    print()
    print("clformer's process wall time (loading the model included), median, seconds:")
    for c in cases:
        print("  %s, batch %d: " % (c[0], c[2]) + ", ".join(
            "%s %.2f" % (w, statistics.median(walls[(c, "clformer " + w)])) for w in wtypes) +
            " (transformers' generate: %.2f)" % statistics.median(times[(c, "transformers")]))
    print("all times, seconds in generate / clf_decode:")
    for k, v in times.items():
        print("  %s, batch %d, %s: %s" % (k[0][0], k[0][2], k[1], " ".join("%.2f" % x for x in v)))


if __name__ == "__main__":
    main()
