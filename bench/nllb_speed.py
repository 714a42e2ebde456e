#!/usr/bin/env python3
"""NLLB-200-distilled-600M-shaped decoding speed (issue 38, item 5): clformer against
CTranslate2 int8 and transformers' generate() on the same random model and sentences, the
same number of threads, cases interleaved, the median of REPEAT rounds.
bench/nllb_speed.sh runs it.

    nllb_speed.py make OUT                          # OUT/hf: the model and its tokenizer
    nllb_speed.py convert OUT                       # OUT/ct2: CTranslate2 int8 of OUT/hf
    nllb_speed.py run OUT CLFORMER [WEIGHT_TYPE...]  # OUT/clf: its `clformer import`

The model: M2M100ForConditionalGeneration with NLLB-200-distilled-600M's shape (d_model
1024, 12+12 layers, 16 heads, FFN 4096, vocabulary 256,206, tied embeddings), random,
perturbed as the nllb fixture is (tests/reference/make_m2m100_fixture.perturb: norms and
biases off their ones/zeros, token embeddings scaled down) but with no push toward </s>, so
that every sentence runs to max_length and all engines do the same work. Its tokenizer is
the nllb fixture's small SentencePiece model padded with made-up pieces to NLLB's 256,000,
so that every id of the vocabulary has a piece (the outputs are such pieces).

Rates are output tokens (the forced language code and what follows it, EOS not counted)
per second of decoding (transformers: generate(); CTranslate2:
translate_batch; clformer: clf_decode from --stats), loading excluded. Environment: THREADS
(2), REPEAT (3), MAX_LENGTH (generate()'s max_length, counting the decoder start; 32),
BATCH (32), SENTENCES (32), CASES (default "greedy:1 beam4:4").
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
import make_m2m100_fixture as m2m  # noqa: E402
import make_nllb_fixture as nllb  # noqa: E402
from marian_text import TEXT_SRC, TEXT_TGT  # noqa: E402

sys.path.insert(0, HERE)
from marian_speed import BASE, timed_generate  # noqa: E402 (the fixture's lines and a few more)

THREADS = int(os.environ.get("THREADS", "2"))
REPEAT = int(os.environ.get("REPEAT", "3"))
MAX_LENGTH = int(os.environ.get("MAX_LENGTH", "32"))
BATCH = int(os.environ.get("BATCH", "32"))
CASES = [(c.split(":")[0], int(c.split(":")[1]))
         for c in os.environ.get("CASES", "greedy:1 beam4:4").split()]
SOURCE, TARGET = "eng_Latn", "deu_Latn"
# NLLB-200's SentencePiece pieces (+ <s>'s offset 1, 202 codes, <mask>, 2 unused ids);
# fewer for the small-vocabulary twin that tells the output layer's share
N_SP = int(os.environ.get("NLLB_SPEED_PIECES", "256000"))
SEED = 38
INIT_STD = float(os.environ.get("NLLB_SPEED_STD", "0.1"))

# marian_speed.py's sentences, then the same words backwards
SENTENCES = (BASE + [" ".join(reversed(s.split())) for s in BASE])[
    :int(os.environ.get("SENTENCES", "32"))]


def pad_spm(src, dst, n):
    """src's SentencePiece model with made-up word pieces appended up to n pieces, scored
    below every real one (so that no text the bench encodes uses them)."""
    from transformers.convert_slow_tokenizer import import_protobuf

    pb = import_protobuf()  # transformers' copy: its fast-tokenizer converter loads it too

    m = pb.ModelProto()
    with open(src, "rb") as f:
        m.ParseFromString(f.read())
    low = min(p.score for p in m.pieces) - 1.0
    for i in range(n - len(m.pieces)):
        p = m.pieces.add()
        p.piece = "\u2581q%d" % i
        p.score = low - i * 1e-3
        p.type = pb.ModelProto.SentencePiece.NORMAL
    with open(dst, "wb") as f:
        f.write(m.SerializeToString())


def make(out):
    from transformers import (M2M100Config, M2M100ForConditionalGeneration, NllbTokenizer,
                              NllbTokenizerFast)

    hf = os.path.join(out, "hf")
    os.makedirs(hf, exist_ok=True)
    torch.manual_seed(SEED)
    np.random.seed(SEED)
    tmp = tempfile.mkdtemp()
    m2m.train_spm(TEXT_SRC + TEXT_TGT, os.path.join(tmp, "spm"), 160, bos_id=1, eos_id=2)
    spm_path = os.path.join(hf, "sentencepiece.bpe.model")
    pad_spm(os.path.join(tmp, "spm.model"), spm_path, N_SP)
    NllbTokenizer(spm_path, src_lang=SOURCE, tgt_lang=TARGET).save_pretrained(hf)
    nllb.fairseq_ids(hf, N_SP)
    NllbTokenizerFast.from_pretrained(hf, src_lang=SOURCE, tgt_lang=TARGET).save_pretrained(hf)
    if os.path.exists(os.path.join(hf, "added_tokens.json")):
        os.remove(os.path.join(hf, "added_tokens.json"))
    tok = NllbTokenizer.from_pretrained(hf, src_lang=SOURCE, tgt_lang=TARGET)
    codes = tok.additional_special_tokens
    V = N_SP + 1 + len(codes) + 1 + nllb.UNUSED
    assert tok.convert_tokens_to_ids(TARGET) == N_SP + 1 + codes.index(TARGET)
    config = M2M100Config(
        vocab_size=V, d_model=1024, encoder_layers=12, decoder_layers=12,
        encoder_attention_heads=16, decoder_attention_heads=16, encoder_ffn_dim=4096,
        decoder_ffn_dim=4096, max_position_embeddings=1024, activation_function="relu",
        scale_embedding=True, pad_token_id=1, bos_token_id=0, eos_token_id=2,
        decoder_start_token_id=2, init_std=INIT_STD, dropout=0.1, max_length=200,
        tokenizer_class="NllbTokenizer")
    model = M2M100ForConditionalGeneration(config)
    with torch.no_grad():
        m2m.perturb(model, 2, push=0.0)
    model.save_pretrained(hf, safe_serialization=True)
    print("nllb_speed: %s: %.0fM parameters, vocabulary %d" %
          (hf, sum(p.numel() for p in model.parameters()) / 1e6, V))


def convert(out):
    """CTranslate2's own converter, int8; its from_pretrained(dtype=...) is transformers 4.56's
    name of 4.40's torch_dtype."""
    from ctranslate2.converters import TransformersConverter

    class Converter(TransformersConverter):
        def load_model(self, model_class, path, **kwargs):
            kwargs["torch_dtype"] = kwargs.pop("dtype", None)
            return model_class.from_pretrained(path, **kwargs)

    Converter(os.path.join(out, "hf")).convert(os.path.join(out, "ct2"), quantization="int8",
                                               force=True)


def hf_run(model, tok, beams):
    """generate() over SENTENCES in batches: (seconds in generate, id lists, tokens out)."""
    forced = tok.convert_tokens_to_ids(TARGET)
    args = dict(max_length=MAX_LENGTH, num_beams=beams, do_sample=False,
                forced_bos_token_id=forced, decoder_start_token_id=2, eos_token_id=2,
                pad_token_id=1)
    if beams > 1:
        args.update(length_penalty=1.0, early_stopping=False)
    secs, outs = timed_generate(model, tok, SENTENCES, BATCH, args, 2, 1)
    return secs, outs, sum(len(s) - (s[-1] == 2) for s in outs)


def ct2_run(translator, tok, beams):
    """CTranslate2's translate_batch: (seconds, id lists (forced code first, as generate's),
    tokens out)."""
    src = [tok.convert_ids_to_tokens(tok(s)["input_ids"]) for s in SENTENCES]
    t0 = time.perf_counter()
    res = translator.translate_batch(src, target_prefix=[[TARGET]] * len(src),
                                     max_batch_size=BATCH, beam_size=beams, length_penalty=1.0,
                                     max_decoding_length=MAX_LENGTH - 1,
                                     return_end_token=True)
    secs = time.perf_counter() - t0
    outs = [tok.convert_tokens_to_ids(r.hypotheses[0]) for r in res]
    return secs, outs, sum(len(o) - (o[-1] == 2) for o in outs)


def clf_run(clformer, model_dir, wtype, beams):
    """clformer translate over SENTENCES: (seconds in clf_decode from --stats, texts, tokens
    it counted: the forced code and the rest, without an EOS, as counted above)."""
    cmd = [clformer, "translate", "-m", model_dir, "--threads", str(THREADS), "--stats",
           "--batch", str(BATCH), "--max-len", str(MAX_LENGTH - 1), "--weight-type", wtype,
           "--beam", str(beams), "--length-penalty", "1", "--source-lang", SOURCE,
           "--target-lang", TARGET]
    p = subprocess.run(cmd, input="\n".join(SENTENCES) + "\n", capture_output=True, text=True,
                       check=True)
    m = re.search(r"(\d+) output tokens in ([0-9.]+) s", p.stderr)
    if not m:
        sys.exit("no --stats line in: " + p.stderr)
    return float(m.group(2)), p.stdout.rstrip("\n").split("\n"), int(m.group(1))


def vocab_size(model_dir):
    with open(os.path.join(model_dir, "model.yaml"), encoding="utf-8") as f:
        m = re.search(r"^\s*tgt_vocab:\s*(\d+)", f.read(), re.M)
    return m.group(1) if m else "?"


def run(out, clformer, wtypes):
    import ctranslate2
    from transformers import M2M100ForConditionalGeneration, NllbTokenizer

    torch.set_num_threads(THREADS)
    hf = os.path.join(out, "hf")
    tok = NllbTokenizer.from_pretrained(hf, src_lang=SOURCE, tgt_lang=TARGET)
    model = M2M100ForConditionalGeneration.from_pretrained(hf).eval()
    ct2 = ctranslate2.Translator(os.path.join(out, "ct2"), device="cpu", compute_type="int8",
                                 inter_threads=1, intra_threads=THREADS)
    with torch.no_grad():  # the first generate() of a process is slower
        model.generate(**tok(SENTENCES[:1], return_tensors="pt"), max_length=4)
    engines = ["transformers", "ct2-int8"] + ["clformer " + w for w in wtypes]
    small = os.path.join(out, "small", "clf")  # the twin with a small vocabulary, if made
    twins = ["clformer %s, V %s" % (w, vocab_size(small)) for w in wtypes] \
        if os.path.isdir(small) else []
    times = {(c, e): [] for c in CASES for e in engines + twins}
    tokens, same, distinct = {}, {}, {}
    for r in range(REPEAT):
        for c in CASES:
            beams = c[1]
            secs, ref_ids, n = hf_run(model, tok, beams)
            times[(c, "transformers")].append(secs)
            tokens[(c, "transformers")] = n
            ref = [tok.decode(s, skip_special_tokens=True) for s in ref_ids]
            distinct[c] = sum(len(set(s)) for s in ref_ids) / len(ref_ids)
            secs, ids, n = ct2_run(ct2, tok, beams)
            times[(c, "ct2-int8")].append(secs)
            tokens[(c, "ct2-int8")] = n
            texts = [tok.decode(s, skip_special_tokens=True) for s in ids]
            same[(c, "ct2-int8")] = sum(a == b for a, b in zip(texts, ref))
            for i, w in enumerate(wtypes):
                secs, texts, n = clf_run(clformer, os.path.join(out, "clf"), w, beams)
                e = "clformer " + w
                times[(c, e)].append(secs)
                tokens[(c, e)] = n
                same[(c, e)] = sum(a == b for a, b in zip(texts, ref))
                if twins:
                    secs, texts, n = clf_run(clformer, small, w, beams)
                    times[(c, twins[i])].append(secs)
                    tokens[(c, twins[i])] = n
            print("round %d: %s: %s" % (r + 1, c[0], ", ".join(
                "%s %.2f s" % (e, times[(c, e)][-1]) for e in engines + twins)),
                file=sys.stderr, flush=True)
    print("%d sentences, batch %d, max_length %d, %d threads, median of %d" %
          (len(SENTENCES), BATCH, MAX_LENGTH, THREADS, REPEAT))
    print("| case | " + " | ".join("%s tok/s" % e for e in engines) +
          " | best clformer / ct2-int8 | best clformer / transformers |")
    print("|---|" + "---:|" * (len(engines) + 2))
    for c in CASES:
        rate = {e: tokens[(c, e)] / statistics.median(times[(c, e)]) for e in engines}
        best = max(rate[e] for e in engines if e.startswith("clformer"))
        print("| %s | %s | %.2fx | %.2fx |" % (
            c[0], " | ".join("%.1f" % rate[e] for e in engines), best / rate["ct2-int8"],
            best / rate["transformers"]))
    for c in CASES:  # the output layer: what the twin's smaller vocabulary saves per token
        for w, twin in zip(wtypes, twins):
            full = statistics.median(times[(c, "clformer " + w)]) / tokens[(c, "clformer " + w)]
            part = statistics.median(times[(c, twin)]) / tokens[(c, twin)]
            print("%s, clformer %s: the output layer (projection, log-softmax, top-k) takes "
                  "%.0f%% of decoding (%.2f ms a token; with the small vocabulary %.2f)" %
                  (c[0], w, 100.0 * (full - part) / full, 1e3 * full, 1e3 * part))
    print()
    print("lines equal to transformers' text: " + "; ".join(
        "%s %s %d/%d" % (c[0], e, same[(c, e)], len(SENTENCES))
        for c in CASES for e in engines[1:]))
    print("distinct ids per output of transformers: " +
          ", ".join("%s %.1f" % (c[0], distinct[c]) for c in CASES))
    print("tokens out: " + "; ".join("%s %s %d" % (c[0], e, tokens[(c, e)])
                                     for c in CASES for e in engines + twins))
    print("all times, seconds:")
    for k, v in times.items():
        print("  %s, %s: %s" % (k[0][0], k[1], " ".join("%.2f" % x for x in v)))


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "make":
        make(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "convert":
        convert(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3], sys.argv[4:] or ["f32", "int8"])
    else:
        sys.exit(__doc__)
