#!/usr/bin/env python3
"""Builds tests/fixtures/mbart/: a small random MBartForConditionalGeneration shaped as
mBART-50 many-to-many (pre-norm with final norms, layernorm_embedding, learned positions
with offset 2, scaled embeddings, gelu, tied embeddings, a non-zero final_logits_bias) with
MBart50Tokenizer's files, and what transformers computes with it, for the mbart suite
(tests/test_mbart.c), which imports it with `clformer import` and must agree.

Run by hand (CI only reads the files), in the venv of make_m2m100_fixture.py (transformers
4.40.2, sentencepiece, safetensors, torch):

    /work/venv-m2m/bin/python tests/reference/make_mbart_fixture.py

Writes (all deterministic from SEED):
  hf/config.json, hf/generation_config.json, hf/model.safetensors,
      hf/sentencepiece.bpe.model, hf/tokenizer_config.json, hf/special_tokens_map.json
      (save_pretrained's files; the SentencePiece model is trained here on the marian
      fixture's text with SentencePiece's own <unk> <s> </s> as pieces 0-2, as mBART's;
      MBart50Tokenizer gives piece i the id i + 1 after fairseq's <s> <pad> </s> <unk>, then
      the 52 language codes and <mask>: the model's vocab_size). config.json also carries the
      keys of older BART configs that the hub's mBART-50 config.json has (normalize_before,
      add_final_layer_norm, ...), with their values, which transformers ignores.
  sentences.txt, greedy_L.txt, beam_L.txt, beam_early_L.txt, and reference.safetensors
      as make_m2m100_fixture.py writes them (sources framed en_XX pieces </s>; L of
      TARGETS; decoder inputs </s> de_DE then pieces), generate() also with
      forced_eos_token_id (recorded in the metadata)

It empties tests/fixtures/mbart first: run make_train_lang_reference.py after it (its train_*
files live there too).
"""
import os
import shutil
import sys
import tempfile

import sentencepiece as spm
import torch
from transformers import MBart50Tokenizer, MBartConfig, MBartForConditionalGeneration

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# the model's shape and generate()'s arguments are M2M-100's fixture's, and so is the dump
import make_m2m100_fixture as m2m  # noqa: E402
from make_m2m100_fixture import (D_MODEL, EARLY_LENGTH_PENALTY, EARLY_STOPPING,  # noqa: E402
                                 FFN, HEADS, LAYERS, MAX_LENGTH, MAX_POS, NUM_BEAMS)
from marian_text import TEXT_SRC, TEXT_TGT  # noqa: E402

SEED = int(os.environ.get("MBART_FIXTURE_SEED", "5"))
# larger than mBART's 0.02, so that random scores are far apart; at 0.35 (M2M-100's fixture)
# int8 weights, with the CPU backend's 7-bit activations, give 6.5-9% logit error here
INIT_STD = float(os.environ.get("MBART_FIXTURE_STD", "0.25"))
SOURCE = "en_XX"
TARGETS = ("de_DE", "fr_XX")
# the hub's mBART-50 config.json keys that MBartConfig does not read, with their values there
LEGACY_KEYS = dict(normalize_before=True, add_final_layer_norm=True, normalize_embedding=True,
                   static_position_embeddings=False, add_bias_logits=False,
                   tokenizer_class="MBart50Tokenizer")


def train_spm(lines, path_prefix, vocab_size):
    """SentencePiece's defaults for the specials (<unk> 0, <s> 1, </s> 2, no <pad>), as
    mBART's sentencepiece.bpe.model has them."""
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=path_prefix, vocab_size=vocab_size,
        model_type="bpe", character_coverage=1.0, minloglevel=2)


def perturb(model, eos):
    """LayerNorms and biases away from their ones/zeros and final_logits_bias non-zero, so
    that the import of each is checked; the decoder's last LayerNorm bias pushed toward
    </s>'s embedding, so that some hypotheses end before max_length."""
    for name, p in model.named_parameters():
        if p.dim() == 1:
            p.normal_(0.0 if "bias" in name else 1.0, 0.2)
    model.final_logits_bias.normal_(0.0, float(os.environ.get("MBART_FIXTURE_BIAS", "0.2")))
    # </s>'s own bias: how soon hypotheses end (beam search favours short ones)
    model.final_logits_bias[0, eos] = float(os.environ.get("MBART_FIXTURE_EOS_BIAS", "0.0"))
    # the token embeddings' scale against the learned positions (layernorm_embedding follows)
    model.model.shared.weight.mul_(float(os.environ.get("MBART_FIXTURE_EMB", "1.0")))
    e = model.model.shared.weight[eos]
    push = float(os.environ.get("MBART_FIXTURE_EOS", "0.3"))
    model.model.decoder.layer_norm.bias.add_(e * (push / float(e.dot(e))))


def main():
    out, hf = m2m.fresh("mbart", SEED)

    tmp = tempfile.mkdtemp()
    train_spm(TEXT_SRC + TEXT_TGT, os.path.join(tmp, "spm"), 160)
    tok = MBart50Tokenizer(os.path.join(tmp, "spm.model"), src_lang=SOURCE,
                           tgt_lang=TARGETS[0])
    tok.save_pretrained(hf)
    shutil.rmtree(tmp)
    V = tok.vocab_size  # pieces + fairseq's offset + 52 codes + <mask>
    # fairseq's ids (the tokenizer's bos_token_id is None in 4.40: <s> is not in its vocab)
    pad, eos, bos = (tok.fairseq_tokens_to_ids[t] for t in ("<pad>", "</s>", "<s>"))
    assert (pad, eos, bos) == (1, 2, 0) and (tok.pad_token_id, tok.eos_token_id) == (1, 2)

    config = MBartConfig(
        vocab_size=V, d_model=D_MODEL, encoder_layers=LAYERS, decoder_layers=LAYERS,
        encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=FFN,
        decoder_ffn_dim=FFN, max_position_embeddings=MAX_POS, activation_function="gelu",
        scale_embedding=True, pad_token_id=pad, bos_token_id=bos, eos_token_id=eos,
        decoder_start_token_id=eos, forced_eos_token_id=eos, init_std=INIT_STD, dropout=0.1,
        max_length=MAX_LENGTH, num_beams=NUM_BEAMS, early_stopping=EARLY_STOPPING,
        length_penalty=EARLY_LENGTH_PENALTY, **LEGACY_KEYS)
    model = MBartForConditionalGeneration(config)
    with torch.no_grad():
        perturb(model, eos)
    model.eval()
    model.save_pretrained(hf, safe_serialization=True)

    # decoder inputs' pieces: ids 4 to len(sp) (fairseq's offset of 1)
    m2m.dump(out, model, tok, tok.lang_code_to_id.__getitem__, SOURCE, TARGETS,
             len(tok.sp_model) + 1, eos, pad, forced_eos=True)


if __name__ == "__main__":
    main()
