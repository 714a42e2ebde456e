#!/usr/bin/env python3
"""Builds tests/fixtures/mbart/: a small random MBartForConditionalGeneration shaped as
mBART-50 many-to-many (pre-norm with final norms, layernorm_embedding, learned positions
with offset 2, scaled embeddings, gelu, tied embeddings, a non-zero final_logits_bias) with
MBart50Tokenizer's files, and what transformers computes with it, for the mbart suite
(tests/test_mbart.c), which imports it with `clformer import` and must agree.

Run by hand (CI only reads the files), in a venv on top of Debian's python3-torch:

    /usr/bin/python3 -m venv --system-site-packages /work/venv-m2m
    /work/venv-m2m/bin/pip install transformers==4.40.2 sentencepiece safetensors 'numpy<2'
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
  sentences.txt          the SENTENCES (English), one a line
  reference.safetensors  I32 src [N, S] (en_XX pieces </s>, <pad>-padded), src_len [N];
                         for each target language L of TARGETS: greedy_L / beam_L
                         [N, MAX_LENGTH] (generated ids after the decoder start: the forced
                         L code first, EOS included, -1-padded) and greedy_L_len / beam_L_len
                         [N]; beam_early_L, beam_early_L_len: beam search with the model's
                         own settings (early_stopping=True, length_penalty
                         EARLY_LENGTH_PENALTY); F32 logits [B, T, V] for the teacher-forced
                         decoder inputs I32 logits_tgt [B, T] (</s> de_DE then pieces) on the
                         sources logits_src [B, S]; metadata: the generate() arguments and ids
  greedy_L.txt, beam_L.txt, beam_early_L.txt  the tokenizer's decode(skip_special_tokens=True)
                         of those

It empties tests/fixtures/mbart first: run make_train_lang_reference.py after it (its train_*
files live there too).
"""
import os
import shutil
import sys
import tempfile

import numpy as np
import sentencepiece as spm
import torch
from safetensors.numpy import save_file
from transformers import MBart50Tokenizer, MBartConfig, MBartForConditionalGeneration

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from marian_text import SENTENCES, TEXT_SRC, TEXT_TGT  # noqa: E402

SEED = int(os.environ.get("MBART_FIXTURE_SEED", "5"))
D_MODEL = 32
FFN = 64
HEADS = 4
LAYERS = 2
MAX_POS = 64
MAX_LENGTH = 20          # generate(max_length=...): decoder start + at most 19 tokens
NUM_BEAMS = 4
LENGTH_PENALTY = 1.0     # transformers' default
EARLY_STOPPING = True    # the hub's mBART-50 config.json has it; beam_L is made without
EARLY_LENGTH_PENALTY = 2.0  # the model's own (config.json), with which early stopping matters
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
    out = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        "fixtures", "mbart"))
    hf = os.path.join(out, "hf")
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(hf)
    torch.manual_seed(SEED)
    np.random.seed(SEED)

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

    enc = tok(SENTENCES, return_tensors="pt", padding=True)
    src, mask = enc["input_ids"], enc["attention_mask"]
    assert int(src[0, 0]) == tok.lang_code_to_id[SOURCE]
    N = len(SENTENCES)
    arrays = {"src": src.numpy().astype(np.int32),
              "src_len": mask.sum(1).numpy().astype(np.int32)}
    margins = []
    with torch.no_grad():
        for lang in TARGETS:
            forced = tok.lang_code_to_id[lang]
            gen = dict(max_length=MAX_LENGTH, do_sample=False, forced_bos_token_id=forced,
                       forced_eos_token_id=eos, decoder_start_token_id=eos, eos_token_id=eos,
                       pad_token_id=pad)
            for kind, beams, early, lp in (
                    ("greedy", 1, False, LENGTH_PENALTY),
                    ("beam", NUM_BEAMS, False, LENGTH_PENALTY),
                    ("beam_early", NUM_BEAMS, EARLY_STOPPING, EARLY_LENGTH_PENALTY)):
                arr = np.full((N, MAX_LENGTH), -1, np.int32)
                lens = np.zeros(N, np.int32)
                texts = []
                for i in range(N):
                    n = int(mask[i].sum())
                    ids = src[i:i + 1, :n]
                    args = dict(gen, num_beams=beams)
                    if beams > 1:
                        args.update(length_penalty=lp, early_stopping=early)
                    seq = model.generate(ids, attention_mask=torch.ones_like(ids), **args)[0]
                    seq = seq[1:].tolist()  # after the decoder start
                    if eos in seq:
                        seq = seq[:seq.index(eos) + 1]
                    else:
                        seq = [t for t in seq if t != pad]
                    arr[i, :len(seq)] = seq
                    lens[i] = len(seq)
                    texts.append(tok.decode(seq, skip_special_tokens=True))
                    if beams == 1:  # greedy's closeness to a tie: the best two logits' gap
                        dec = torch.tensor([[eos] + seq])
                        lg = model(input_ids=ids, decoder_input_ids=dec[:, :-1]).logits
                        top = lg[0, 1:].topk(2, dim=-1).values
                        if top.shape[0]:
                            margins.append(float((top[:, 0] - top[:, 1]).min()))
                arrays["%s_%s" % (kind, lang)] = arr
                arrays["%s_%s_len" % (kind, lang)] = lens
                with open(os.path.join(out, "%s_%s.txt" % (kind, lang)), "w",
                          encoding="utf-8") as f:
                    f.write("\n".join(texts) + "\n")
                print(lang, kind, "lengths", lens.tolist())
        # logits, teacher-forced: 3 sentences (padded sources), decoder inputs of 6 tokens:
        # </s> de_DE then pieces (no <pad>: transformers does not mask it in the decoder)
        B, T = 3, 6
        rows = [0, 3, 13]
        lsrc, lmask = src[rows], mask[rows]
        ltgt = torch.randint(4, len(tok.sp_model) + 1, (B, T))
        ltgt[:, 0] = eos
        ltgt[:, 1] = tok.lang_code_to_id[TARGETS[0]]
        logits = model(input_ids=lsrc, attention_mask=lmask, decoder_input_ids=ltgt).logits
    print("vocab", V, "smallest greedy top-2 logit gap %.4g" % min(margins))
    if min(margins) < 1e-3:
        print("warning: a greedy step is close to a tie; change SEED", file=sys.stderr)
    arrays.update({"logits_src": lsrc.numpy().astype(np.int32),
                   "logits_tgt": ltgt.numpy().astype(np.int32),
                   "logits": logits.numpy().astype(np.float32)})
    meta = {"num_beams": str(NUM_BEAMS), "length_penalty": str(LENGTH_PENALTY),
            "early_length_penalty": str(EARLY_LENGTH_PENALTY),
            "max_length": str(MAX_LENGTH), "early_stopping": "False",
            "forced_eos_token_id": str(eos),
            "source_lang": SOURCE, "target_langs": ",".join(TARGETS),
            "forced_bos_token_ids": ",".join(str(tok.lang_code_to_id[t]) for t in TARGETS),
            "decoder_start_token_id": str(eos),
            "transformers": __import__("transformers").__version__}
    save_file(arrays, os.path.join(out, "reference.safetensors"), metadata=meta)
    with open(os.path.join(out, "sentences.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(SENTENCES) + "\n")


if __name__ == "__main__":
    main()
