#!/usr/bin/env python3
"""What transformers' training computes for the many-language fixtures (tests/fixtures/m2m100,
nllb, mbart, made by make_m2m100_fixture.py, make_nllb_fixture.py, make_mbart_fixture.py), for
the train_lang suite (tests/test_train_lang.c): the ids of sentence pairs framed as the
family's tokenizer frames them for training, tok(src, text_target=tgt), with the decoder
inputs the model's forward makes from the labels (shift_tokens_right: M2M-100's with
decoder_start_token_id, mBART's wrapping the last label), and for M2M-100 the loss of a
training step on them. Reads the fixtures' hf/ folders; changes nothing there.

Run by hand (CI only reads the files), in the venv of the fixtures' generators:

    /work/venv-m2m/bin/python tests/reference/make_train_lang_reference.py

Writes:
  tests/fixtures/m2m100/train_pairs.tsv  the PAIRS (English <TAB> German), one a line
  tests/fixtures/m2m100/train_reference.safetensors
      I32 input_ids [N, S] (__en__ pieces </s>, <pad>-padded), src_len [N];
      labels [N, T] (__de__ pieces </s>, <pad>-padded, as the loss ignores it: transformers'
      DataCollatorForSeq2Seq pads with -100), tgt_len [N], decoder_input_ids [N, T]
      (shift_tokens_right: </s> __de__ pieces); F32 loss [2]: the step's loss as
      model(input_ids, attention_mask, labels) computes it (cross-entropy, mean over the
      label tokens) and with transformers' LabelSmoother(LABEL_SMOOTHING) (Seq2SeqTrainer's
      label_smoothing_factor); loss_after [2]: the same two after one torch.optim.Adam step
      (LR, BETAS, EPS, no weight decay) on the smoothed loss, as Seq2SeqTrainer takes it;
      loss_after_bias [2]: the same with a trainable output bias of zeros added to lm_head
      (clformer's output projection always has a bias, which its trainer trains; M2M-100
      has none, and Marian's and mBART's final_logits_bias is a buffer transformers keeps
      fixed); the model in eval mode (no dropout) throughout
  tests/fixtures/nllb/train_framing.json, tests/fixtures/mbart/train_framing.json
      {"source", "target", "pairs": [[src, tgt], ...], "input_ids", "labels",
       "decoder_input_ids": [[...], ...] (each unpadded)}; nllb's also "input_ids_legacy":
      the sources as NllbTokenizer(legacy_behaviour=True) frames them (pieces </s> eng_Latn;
      its labels, pieces </s> deu_Latn, are not what generate() produces, and clformer
      frames the target as for the current NLLB: docs/CONFIG.md)
"""
import json
import os
import sys

import numpy as np
import torch
from safetensors.numpy import save_file
from transformers import (M2M100ForConditionalGeneration, M2M100Tokenizer,
                          MBart50Tokenizer, NllbTokenizer)
from transformers.models.m2m_100.modeling_m2m_100 import shift_tokens_right as m2m_shift
from transformers.models.mbart.modeling_mbart import shift_tokens_right as mbart_shift
from transformers.trainer_pt_utils import LabelSmoother
from transformers.modeling_outputs import Seq2SeqLMOutput

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from marian_text import TEXT_SRC, TEXT_TGT  # noqa: E402

N_PAIRS = 6
PAIRS = list(zip(TEXT_SRC[:N_PAIRS], TEXT_TGT[:N_PAIRS]))
LABEL_SMOOTHING = 0.1
LR, BETAS, EPS = 1e-3, (0.9, 0.98), 1e-9
FIXTURES = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                         "fixtures"))


def framed(tok, shift):
    """tok's training framing of PAIRS: unpadded input_ids, labels, decoder_input_ids."""
    src = [p[0] for p in PAIRS]
    tgt = [p[1] for p in PAIRS]
    enc = tok(src, text_target=tgt)
    ids, labels = enc["input_ids"], enc["labels"]
    dec = []
    for lab in labels:
        dec.append(shift(torch.tensor([lab])).tolist()[0])
    return ids, labels, dec


def padded(rows, pad):
    n = max(len(r) for r in rows)
    return np.array([r + [pad] * (n - len(r)) for r in rows], np.int32)


def step_losses(hf, src, mask, lab, output_bias):
    """The step's losses (plain, smoothed) and the same after one Adam step on the smoothed
    loss; output_bias: the output projection gets a trainable bias, zeros (clformer's
    projection always has one; M2M-100's lm_head has none)."""
    model = M2M100ForConditionalGeneration.from_pretrained(hf)
    model.eval()
    if output_bias:
        V, d = model.model.shared.weight.shape
        head = torch.nn.Linear(d, V, bias=True)
        head.weight = model.model.shared.weight
        with torch.no_grad():
            head.bias.zero_()
        model.lm_head = head
    smoother = LabelSmoother(epsilon=LABEL_SMOOTHING)

    def losses():
        out = model(input_ids=src, attention_mask=mask, labels=lab)
        return out.loss, smoother(Seq2SeqLMOutput(logits=out.logits), lab)

    loss, smoothed = losses()
    opt = torch.optim.Adam(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=0.0)
    opt.zero_grad()
    smoothed.backward()
    opt.step()
    with torch.no_grad():
        after, after_smoothed = losses()
    return [loss.item(), smoothed.item()], [after.item(), after_smoothed.item()]


def m2m100():
    hf = os.path.join(FIXTURES, "m2m100", "hf")
    tok = M2M100Tokenizer.from_pretrained(hf, src_lang="en", tgt_lang="de")
    cfg = json.load(open(os.path.join(hf, "config.json")))
    pad = cfg["pad_token_id"]
    ids, labels, dec = framed(tok, lambda x: m2m_shift(x, pad, cfg["decoder_start_token_id"]))
    src = torch.tensor(padded(ids, pad), dtype=torch.long)
    mask = (src != pad).long()
    lab = torch.tensor(padded(labels, -100), dtype=torch.long)  # the collator's padding
    loss, after = step_losses(hf, src, mask, lab, False)
    loss_b, after_b = step_losses(hf, src, mask, lab, True)
    assert max(abs(a - b) for a, b in zip(loss, loss_b)) < 1e-6  # a zero bias changes nothing
    print("m2m100 loss %.6f smoothed %.6f; after a step %.6f %.6f, with an output bias "
          "%.6f %.6f" % tuple(loss + after + after_b))
    out = os.path.join(FIXTURES, "m2m100")
    with open(os.path.join(out, "train_pairs.tsv"), "w", encoding="utf-8") as f:
        f.write("".join("%s\t%s\n" % p for p in PAIRS))
    arrays = {"input_ids": padded(ids, pad),
              "src_len": np.array([len(r) for r in ids], np.int32),
              "labels": padded(labels, pad),
              "tgt_len": np.array([len(r) for r in labels], np.int32),
              "decoder_input_ids": padded(dec, pad),
              "loss": np.array(loss, np.float32),
              "loss_after": np.array(after, np.float32),
              "loss_after_bias": np.array(after_b, np.float32)}
    meta = {"label_smoothing": str(LABEL_SMOOTHING), "lr": str(LR),
            "betas": "%s,%s" % BETAS, "eps": str(EPS), "source_lang": "en",
            "target_lang": "de", "transformers": __import__("transformers").__version__}
    save_file(arrays, os.path.join(out, "train_reference.safetensors"), metadata=meta)


def ids_only(name, tok, shift, source, target, more=None):
    ids, labels, dec = framed(tok, shift)
    out = {"source": source, "target": target, "pairs": PAIRS, "input_ids": ids,
           "labels": labels, "decoder_input_ids": dec,
           "transformers": __import__("transformers").__version__}
    out.update(more or {})
    with open(os.path.join(FIXTURES, name, "train_framing.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(name, "labels[0]", labels[0], "decoder_input_ids[0]", dec[0])


def main():
    torch.manual_seed(0)
    m2m100()
    hf = os.path.join(FIXTURES, "nllb", "hf")
    nllb = NllbTokenizer.from_pretrained(hf, src_lang="eng_Latn", tgt_lang="deu_Latn")
    cfg = json.load(open(os.path.join(hf, "config.json")))
    legacy = NllbTokenizer.from_pretrained(hf, src_lang="eng_Latn", tgt_lang="deu_Latn",
                                           legacy_behaviour=True)
    ids_only("nllb", nllb,
             lambda x: m2m_shift(x, cfg["pad_token_id"], cfg["decoder_start_token_id"]),
             "eng_Latn", "deu_Latn",
             {"input_ids_legacy": legacy([p[0] for p in PAIRS])["input_ids"]})
    hf = os.path.join(FIXTURES, "mbart", "hf")
    mbart = MBart50Tokenizer.from_pretrained(hf, src_lang="en_XX", tgt_lang="de_DE")
    cfg = json.load(open(os.path.join(hf, "config.json")))
    ids_only("mbart", mbart, lambda x: mbart_shift(x, cfg["pad_token_id"]), "en_XX", "de_DE")


if __name__ == "__main__":
    main()
