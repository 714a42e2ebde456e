#!/usr/bin/env python3
"""Builds tests/fixtures/m2m100/: a small random M2M100ForConditionalGeneration in the Hugging
Face layout and what transformers computes with it, for the m2m100 suite
(tests/test_m2m100.c), which imports it with `clformer import` and must agree.

Run by hand (CI only reads the files), in a venv on top of Debian's python3-torch:

    /usr/bin/python3 -m venv --system-site-packages /work/venv-m2m
    /work/venv-m2m/bin/pip install transformers==4.40.2 sentencepiece safetensors 'numpy<2'
    /work/venv-m2m/bin/python tests/reference/make_m2m100_fixture.py

Writes (all deterministic from SEED):
  hf/config.json, hf/generation_config.json, hf/model.safetensors, hf/sentencepiece.bpe.model,
      hf/vocab.json, hf/tokenizer_config.json, hf/special_tokens_map.json (save_pretrained's
      files; the SentencePiece model is trained here on the marian fixture's text, vocab.json
      is fairseq's dictionary: <s> <pad> </s> <unk>, then the pieces; the 100 language codes
      and 8 made-up words follow it in the model's vocabulary, as in M2M-100)
  sentences.txt          the SENTENCES (English), one a line
  reference.safetensors  I32 src [N, S] (__en__ pieces </s>, <pad>-padded), src_len [N];
                         for each target language L of TARGETS: greedy_L / beam_L
                         [N, MAX_LENGTH] (generated ids after the decoder start: the forced
                         __L__ first, EOS included, -1-padded) and greedy_L_len / beam_L_len
                         [N]; beam_early_L, beam_early_L_len: beam search with the
                         model's own settings (config.json's early_stopping=True,
                         length_penalty EARLY_LENGTH_PENALTY); F32 logits [B, T, V] for the teacher-forced decoder inputs I32
                         logits_tgt [B, T] (</s> __de__ then pieces) on the sources
                         logits_src [B, S]; metadata: the generate() arguments and the ids
  greedy_L.txt, beam_L.txt, beam_early_L.txt  the tokenizer's decode(skip_special_tokens=True)
                         of those

It empties tests/fixtures/m2m100 first: run make_train_lang_reference.py after it (its train_*
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
from safetensors.numpy import save_file
from transformers import M2M100Config, M2M100ForConditionalGeneration, M2M100Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from marian_text import SENTENCES, TEXT_SRC, TEXT_TGT  # noqa: E402

SEED = int(os.environ.get("M2M_FIXTURE_SEED", "4"))
D_MODEL = 32
FFN = 64
HEADS = 4
LAYERS = 2
MAX_POS = 64
MAX_LENGTH = 20          # generate(max_length=...): decoder start + at most 19 tokens
NUM_BEAMS = 4
LENGTH_PENALTY = 1.0     # transformers' default
EARLY_STOPPING = True    # the hub's M2M-100 config.json has it; beam_L is made without
EARLY_LENGTH_PENALTY = 2.0  # the model's own (config.json), with which early stopping matters
INIT_STD = 0.35          # larger than M2M-100's 0.02, so that random scores are far apart
SOURCE = "en"
TARGETS = ("de", "fr")
MADEUP = 8               # M2M100Tokenizer's num_madeup_words


def train_spm(lines, path_prefix, vocab_size, bos_id=-1, eos_id=-1):
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=path_prefix, vocab_size=vocab_size,
        model_type="bpe", character_coverage=1.0, pad_id=-1, bos_id=bos_id, eos_id=eos_id,
        unk_id=0, minloglevel=2)


def perturb(model, eos, push=None):
    """LayerNorms and biases away from their ones/zeros, so that the import is checked; the
    decoder's last LayerNorm bias pushed toward </s>'s embedding, so that some hypotheses
    end before max_length (M2M-100 has no final_logits_bias)."""
    for name, p in model.named_parameters():
        if p.dim() == 1:
            p.normal_(0.0 if "bias" in name else 1.0, 0.2)
    # smaller token embeddings than layer weights: else, scaled by sqrt(d_model), the input
    # token dominates the stream and every output repeats it
    model.model.shared.weight.mul_(float(os.environ.get("M2M_FIXTURE_EMB", "0.25")))
    e = model.model.shared.weight[eos]
    if push is None:
        push = float(os.environ.get("M2M_FIXTURE_EOS", "0.6"))
    model.model.decoder.layer_norm.bias.add_(e * (push / float(e.dot(e))))


def make_model(V, pad, eos, push=None, **config_keys):
    """The small random model (config_keys: more of M2M100Config's), perturbed (push: the
    decoder's last norm toward </s>, see perturb), in eval mode."""
    config = M2M100Config(
        vocab_size=V, d_model=D_MODEL, encoder_layers=LAYERS, decoder_layers=LAYERS,
        encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=FFN,
        decoder_ffn_dim=FFN, max_position_embeddings=MAX_POS, activation_function="relu",
        scale_embedding=True, pad_token_id=pad, bos_token_id=0, eos_token_id=eos,
        decoder_start_token_id=eos, init_std=INIT_STD, dropout=0.1, max_length=MAX_LENGTH,
        num_beams=NUM_BEAMS, early_stopping=EARLY_STOPPING, length_penalty=EARLY_LENGTH_PENALTY,
        **config_keys)
    model = M2M100ForConditionalGeneration(config)
    with torch.no_grad():
        perturb(model, eos, push)
    model.eval()
    return model


def fresh(name, seed):
    """tests/fixtures/<name> emptied with its hf/ made, the generators seeded: (out, hf)."""
    out = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        "fixtures", name))
    hf = os.path.join(out, "hf")
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(hf)
    torch.manual_seed(seed)
    np.random.seed(seed)
    return out, hf


def main():
    out, hf = fresh("m2m100", SEED)

    tmp = tempfile.mkdtemp()
    train_spm(TEXT_SRC + TEXT_TGT, os.path.join(tmp, "spm"), 160)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(tmp, "spm.model"))
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for i in range(sp.get_piece_size()):
        p = sp.id_to_piece(i)
        if sp.is_control(i) or sp.is_unknown(i) or p in vocab:
            continue
        vocab[p] = len(vocab)
    shutil.copy(os.path.join(tmp, "spm.model"), os.path.join(hf, "sentencepiece.bpe.model"))
    with open(os.path.join(hf, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False, indent=2)
    shutil.rmtree(tmp)
    # the language tokens special, as the hub's special_tokens_map.json has them (a tokenizer
    # made from the files alone leaves them out in transformers 4.40)
    codes = M2M100Tokenizer.__init__.__globals__["FAIRSEQ_LANGUAGE_CODES"]["m2m100"]
    tok = M2M100Tokenizer(os.path.join(hf, "vocab.json"),
                          os.path.join(hf, "sentencepiece.bpe.model"), src_lang=SOURCE,
                          tgt_lang=TARGETS[0],
                          additional_special_tokens=["__%s__" % c for c in codes])
    n_langs = len(tok.lang_code_to_id)
    V = len(vocab) + n_langs + MADEUP
    pad, eos = vocab["<pad>"], vocab["</s>"]

    model = make_model(V, pad, eos)
    model.save_pretrained(hf, safe_serialization=True)
    tok.save_pretrained(hf)

    dump(out, model, tok, tok.get_lang_id, SOURCE, TARGETS, len(vocab), eos, pad)


def dump(out, model, tok, lang_id, source, targets, n_text, eos, pad, arrays=None, meta=None,
         forced_eos=False):
    """What transformers computes with model and tok (see the top) into out: the sources
    framed by tok, greedy, beam and beam_early generate() into each of targets (lang_id(code):
    its token's id, forced first), teacher-forced logits on decoder inputs </s> lang pieces
    (piece ids from 4 below n_text); arrays and meta (the family's own) added. forced_eos:
    generate() with forced_eos_token_id=eos (mBART's), recorded in the metadata."""
    enc = tok(SENTENCES, return_tensors="pt", padding=True)
    src, mask = enc["input_ids"], enc["attention_mask"]
    assert int(src[0, 0]) == lang_id(source)
    N = len(SENTENCES)
    V = model.config.vocab_size
    arrays = dict(arrays or {})
    arrays.update({"src": src.numpy().astype(np.int32),
                   "src_len": mask.sum(1).numpy().astype(np.int32)})
    margins = []
    with torch.no_grad():
        for lang in targets:
            forced = lang_id(lang)
            gen = dict(max_length=MAX_LENGTH, do_sample=False, forced_bos_token_id=forced,
                       decoder_start_token_id=eos, eos_token_id=eos, pad_token_id=pad)
            if forced_eos:
                gen["forced_eos_token_id"] = eos
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
        # </s> and the first target's token, then pieces (no <pad>: transformers does not
        # mask it in the decoder)
        B, T = 3, 6
        rows = [0, 3, 13]
        lsrc, lmask = src[rows], mask[rows]
        ltgt = torch.randint(4, n_text, (B, T))
        ltgt[:, 0] = eos
        ltgt[:, 1] = lang_id(targets[0])
        logits = model(input_ids=lsrc, attention_mask=lmask, decoder_input_ids=ltgt).logits
    print("vocab", V, "smallest greedy top-2 logit gap %.4g" % min(margins))
    if min(margins) < 1e-3:
        print("warning: a greedy step is close to a tie; change SEED", file=sys.stderr)
    arrays.update({"logits_src": lsrc.numpy().astype(np.int32),
                   "logits_tgt": ltgt.numpy().astype(np.int32),
                   "logits": logits.numpy().astype(np.float32)})
    meta_all = {"num_beams": str(NUM_BEAMS), "length_penalty": str(LENGTH_PENALTY),
                "early_length_penalty": str(EARLY_LENGTH_PENALTY),
                "max_length": str(MAX_LENGTH), "early_stopping": "False",
                "source_lang": source, "target_langs": ",".join(targets),
                "forced_bos_token_ids": ",".join(str(lang_id(t)) for t in targets),
                "decoder_start_token_id": str(eos),
                "transformers": __import__("transformers").__version__}
    if forced_eos:
        meta_all["forced_eos_token_id"] = str(eos)
    meta_all.update(meta or {})
    save_file(arrays, os.path.join(out, "reference.safetensors"), metadata=meta_all)
    with open(os.path.join(out, "sentences.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(SENTENCES) + "\n")


if __name__ == "__main__":
    main()
