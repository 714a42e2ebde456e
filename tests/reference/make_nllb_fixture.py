#!/usr/bin/env python3
"""Builds tests/fixtures/nllb/: a small random NLLB-200 (an M2M100ForConditionalGeneration
with NllbTokenizer's files, NLLB's config.json keys, scaled down) in the Hugging Face layout
and what transformers computes with it, for the nllb suite (tests/test_nllb.c), which
imports it with `clformer import` and must agree.

Run by hand (CI only reads the files), in the venv of make_m2m100_fixture.py (transformers
4.40.2, sentencepiece, safetensors, torch; tokenizers and protobuf for tokenizer.json):

    /work/venv-m2m/bin/python tests/reference/make_nllb_fixture.py

Writes (all deterministic from SEED):
  hf/config.json, hf/generation_config.json, hf/model.safetensors,
      hf/sentencepiece.bpe.model, hf/tokenizer_config.json, hf/special_tokens_map.json,
      hf/tokenizer.json (save_pretrained's files of the model, NllbTokenizer and
      NllbTokenizerFast; the SentencePiece model is trained here on the marian fixture's text
      with NLLB's layout, <unk> <s> </s> first; no vocab.json: ids are fairseq's, <s> <pad>
      </s> <unk> then piece i as i + 1, then the 202 language codes, then <mask>, then
      UNUSED rows up to vocab_size, as NLLB-200's 256206 has 2)
  sentences.txt, greedy_L.txt, beam_L.txt, beam_early_L.txt, and reference.safetensors
      as make_m2m100_fixture.py writes them (sources framed eng_Latn pieces </s>; L of
      TARGETS), plus I32 src_legacy [N, S'] / src_legacy_len [N]: the sources as
      NllbTokenizer(legacy_behaviour=True) frames them (pieces </s> eng_Latn)

It empties tests/fixtures/nllb first: run make_train_lang_reference.py after it (its train_*
files live there too).
"""
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import sentencepiece as spm
import torch
from transformers import NllbTokenizer, NllbTokenizerFast

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_m2m100_fixture as m2m  # noqa: E402
from marian_text import SENTENCES, TEXT_SRC, TEXT_TGT  # noqa: E402

SEED = int(os.environ.get("NLLB_FIXTURE_SEED", "10"))
# the decoder's push toward </s> (make_m2m100_fixture.perturb): with 366 ids instead of
# M2M-100's 268, 0.6 ends no sentence; 1.5 ends them at mixed lengths
EOS_PUSH = float(os.environ.get("NLLB_FIXTURE_EOS", "1.5"))
SOURCE = "eng_Latn"
TARGETS = ("deu_Latn", "fra_Latn")
UNUSED = 2               # rows past <mask>, as NLLB-200's vocab_size has


def fairseq_ids(hf, n_sp):
    """tokenizer_config.json's added_tokens_decoder made NLLB-200's: a fresh NllbTokenizer of
    transformers 4.40 numbers its added tokens in the order of SPECIAL_TOKENS_ATTRIBUTES,
    <mask> first (len(sp) + 1) and the codes after it, while the model (fairseq's
    dictionary, NllbTokenizer's own lang_code_to_id, the hub's tokenizer_config.json) has
    the codes from len(sp) + 1 on and <mask> after them; from_pretrained takes the ids from
    added_tokens_decoder."""
    path = os.path.join(hf, "tokenizer_config.json")
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    by_name = {v["content"]: v for v in cfg["added_tokens_decoder"].values()}
    order = ["<s>", "<pad>", "</s>", "<unk>"] + [None] * (n_sp - 3)
    order += cfg["additional_special_tokens"] + ["<mask>"]
    cfg["added_tokens_decoder"] = {str(i): by_name[t] for i, t in enumerate(order) if t}
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(cfg, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    os.remove(os.path.join(hf, "added_tokens.json"))


def main():
    out, hf = m2m.fresh("nllb", SEED)

    tmp = tempfile.mkdtemp()
    m2m.train_spm(TEXT_SRC + TEXT_TGT, os.path.join(tmp, "spm"), 160, bos_id=1, eos_id=2)
    shutil.copy(os.path.join(tmp, "spm.model"), os.path.join(hf, "sentencepiece.bpe.model"))
    shutil.rmtree(tmp)
    n_sp = spm.SentencePieceProcessor(
        model_file=os.path.join(hf, "sentencepiece.bpe.model")).get_piece_size()
    # saved and read back as from_pretrained reads a hub directory: the ids are those of
    # the saved added_tokens_decoder
    NllbTokenizer(os.path.join(hf, "sentencepiece.bpe.model"), src_lang=SOURCE,
                  tgt_lang=TARGETS[0]).save_pretrained(hf)
    fairseq_ids(hf, n_sp)
    tok = NllbTokenizer.from_pretrained(hf, src_lang=SOURCE, tgt_lang=TARGETS[0])
    codes = tok.additional_special_tokens
    ids = tok.convert_tokens_to_ids(codes + ["<mask>"])
    want = list(range(n_sp + 1, n_sp + len(codes) + 2))
    if ids != want:
        sys.exit("NllbTokenizer's ids are not fairseq's: codes and <mask> %s..., want %s..."
                 % (ids[:3], want[:3]))
    NllbTokenizerFast.from_pretrained(hf, src_lang=SOURCE, tgt_lang=TARGETS[0]).save_pretrained(hf)
    if os.path.exists(os.path.join(hf, "added_tokens.json")):  # the hub's NLLB has none
        os.remove(os.path.join(hf, "added_tokens.json"))
    tok = NllbTokenizer.from_pretrained(hf, src_lang=SOURCE, tgt_lang=TARGETS[0])
    if tok.convert_tokens_to_ids(codes + ["<mask>"]) != want:
        sys.exit("NllbTokenizer read from the fast tokenizer's files has other ids")
    fast = NllbTokenizerFast.from_pretrained(hf, src_lang=SOURCE)
    if fast(SENTENCES)["input_ids"] != tok(SENTENCES)["input_ids"]:
        sys.exit("NllbTokenizerFast frames the sentences otherwise than NllbTokenizer")
    V = n_sp + 1 + len(codes) + 1 + UNUSED
    pad, eos = tok.pad_token_id, tok.eos_token_id
    assert (pad, eos, tok.bos_token_id, tok.unk_token_id) == (1, 2, 0, 3)

    model = m2m.make_model(V, pad, eos, EOS_PUSH, tokenizer_class="NllbTokenizer")
    model.save_pretrained(hf, safe_serialization=True)

    legacy = NllbTokenizer.from_pretrained(hf, src_lang=SOURCE, legacy_behaviour=True)
    enc = legacy(SENTENCES, return_tensors="np", padding=True)
    arrays = {"src_legacy": enc["input_ids"].astype(np.int32),
              "src_legacy_len": enc["attention_mask"].sum(1).astype(np.int32)}
    m2m.dump(out, model, tok, tok.convert_tokens_to_ids, SOURCE, TARGETS, n_sp + 1, eos, pad,
             arrays=arrays, meta={"tokenizer": "NllbTokenizer"})


if __name__ == "__main__":
    main()
