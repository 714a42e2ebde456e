#!/usr/bin/env python3
"""Builds tests/fixtures/marian/: a small random MarianMTModel in the Hugging Face layout and
what transformers computes with it, for the marian suite (tests/test_marian.c), which imports
it with `clformer import marian` and must agree.

Run by hand (CI only reads the files), in a venv on top of Debian's python3-torch:

    /usr/bin/python3 -m venv --system-site-packages /work/venv-marian
    /work/venv-marian/bin/pip install transformers==4.40.2 sentencepiece safetensors
    /work/venv-marian/bin/python tests/reference/make_marian_fixture.py

Writes (all deterministic from SEED):
  hf/config.json, hf/model.safetensors, hf/source.spm, hf/target.spm, hf/vocab.json,
      hf/tokenizer_config.json, hf/special_tokens_map.json, hf/generation_config.json
      (save_pretrained's files; the two SentencePiece models are trained here on TEXT)
  sentences.txt          the SENTENCES, one a line
  reference.safetensors  I32 src [N, S] (the tokenizer's ids, </s> appended, <pad>-padded),
                         I32 src_len [N]; greedy / beam [N, MAX_LENGTH] (generated ids
                         after the decoder start, EOS included, -1-padded) and greedy_len /
                         beam_len [N]; F32 logits [B, T, V] for the teacher-forced decoder
                         inputs I32 logits_tgt [B, T] on the sources logits_src [B, S];
                         metadata: the generate() arguments
  greedy.txt, beam.txt   the tokenizer's batch_decode(skip_special_tokens=True) of those

With --full-size OUTDIR it writes the same files for an OPUS-MT-shaped model instead (issue
17's full-size check; bench/marian_fullsize.sh runs it and the comparison): d_model 512,
6+6 layers, 8 heads, FFN 2048, vocab.json filled up to 58,101 ids (the pieces of the two
small SentencePiece models, then made-up pieces), max_position_embeddings 512, and
transformers' own random initialisation (init_std 0.02, final_logits_bias 0), max_length
FULL_MAX_LENGTH. `--full-size OUTDIR --model-only` writes only OUTDIR/hf (the model and
tokenizer; bench/marian_speed.sh times it).
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
from transformers import MarianConfig, MarianMTModel, MarianTokenizer

from marian_text import SENTENCES, TEXT_SRC, TEXT_TGT

SEED = int(os.environ.get("MARIAN_FIXTURE_SEED", "1"))
D_MODEL = 16
FFN = 32
HEADS = 2
LAYERS = 2
MAX_POS = 64
MAX_LENGTH = 24          # generate(max_length=...): decoder start + at most 23 tokens
NUM_BEAMS = 4
LENGTH_PENALTY = 1.0     # transformers' default
EARLY_STOPPING = False   # transformers' default
INIT_STD = 0.35          # larger than Marian's 0.02, so that random scores are far apart
FULL = len(sys.argv) in (3, 4) and sys.argv[1] == "--full-size"
MODEL_ONLY = FULL and sys.argv[3:] == ["--model-only"]
FULL_VOCAB = 58101       # opus-mt-en-de's
FULL_MAX_LENGTH = 32
if FULL:
    D_MODEL, FFN, HEADS, LAYERS, MAX_POS, MAX_LENGTH = 512, 2048, 8, 6, 512, FULL_MAX_LENGTH


def train_spm(lines, path_prefix, vocab_size):
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=path_prefix, vocab_size=vocab_size,
        model_type="unigram", character_coverage=1.0, pad_id=-1, bos_id=-1, eos_id=1,
        unk_id=0, minloglevel=2)


def perturb(model, V):
    """LayerNorms and biases away from their ones/zeros, so that the import is checked; a
    random final_logits_bias with EOS likelier, so that some hypotheses end before
    max_length."""
    for name, p in model.named_parameters():
        if "embed_positions" in name:
            continue
        if p.dim() == 1:
            p.normal_(0.0 if "bias" in name else 1.0, 0.2)
    fb = torch.randn(1, V) * 0.5
    fb[0, 0] += float(os.environ.get("MARIAN_FIXTURE_EOS", "3.0"))
    model.final_logits_bias.copy_(fb)


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "marian")
    out = os.path.normpath(sys.argv[2] if FULL else out)
    hf = os.path.join(out, "hf")
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(hf)
    torch.manual_seed(SEED)
    np.random.seed(SEED)

    tmp = tempfile.mkdtemp()
    train_spm(TEXT_SRC, os.path.join(tmp, "src"), 90)
    train_spm(TEXT_TGT, os.path.join(tmp, "tgt"), 90)
    # vocab.json as Marian's: </s> 0, <unk> 1, the pieces of both models, <pad> last
    vocab = {"</s>": 0, "<unk>": 1}
    for name in ("src", "tgt"):
        sp = spm.SentencePieceProcessor(model_file=os.path.join(tmp, name + ".model"))
        for i in range(sp.get_piece_size()):
            p = sp.id_to_piece(i)
            if sp.is_control(i) or sp.is_unknown(i) or p in vocab:
                continue
            vocab[p] = len(vocab)
    while FULL and len(vocab) < FULL_VOCAB - 1:
        vocab["\u2581w%05d" % len(vocab)] = len(vocab)
    vocab["<pad>"] = len(vocab)
    V = len(vocab)
    pad = vocab["<pad>"]
    shutil.copy(os.path.join(tmp, "src.model"), os.path.join(hf, "source.spm"))
    shutil.copy(os.path.join(tmp, "tgt.model"), os.path.join(hf, "target.spm"))
    with open(os.path.join(hf, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False, indent=2)
    shutil.rmtree(tmp)

    config = MarianConfig(
        vocab_size=V, decoder_vocab_size=V, d_model=D_MODEL, encoder_layers=LAYERS,
        decoder_layers=LAYERS, encoder_attention_heads=HEADS, decoder_attention_heads=HEADS,
        encoder_ffn_dim=FFN, decoder_ffn_dim=FFN, max_position_embeddings=MAX_POS,
        activation_function="swish", scale_embedding=True, pad_token_id=pad, eos_token_id=0,
        decoder_start_token_id=pad, forced_eos_token_id=0, bad_words_ids=[[pad]],
        share_encoder_decoder_embeddings=True, init_std=0.02 if FULL else INIT_STD, dropout=0.1,
        max_length=MAX_LENGTH, num_beams=NUM_BEAMS)
    model = MarianMTModel(config)
    if not FULL:
        with torch.no_grad():
            perturb(model, V)
    model.eval()
    model.save_pretrained(hf, safe_serialization=True)
    tok = MarianTokenizer(os.path.join(hf, "source.spm"), os.path.join(hf, "target.spm"),
                          os.path.join(hf, "vocab.json"), source_lang="en", target_lang="de")
    tok.save_pretrained(hf)
    if MODEL_ONLY:
        return

    enc = tok(SENTENCES, return_tensors="pt", padding=True)
    src = enc["input_ids"]
    mask = enc["attention_mask"]
    N = len(SENTENCES)
    gen = dict(max_length=MAX_LENGTH, num_beams=1, do_sample=False, bad_words_ids=[[pad]],
               forced_eos_token_id=0, decoder_start_token_id=pad, eos_token_id=0,
               pad_token_id=pad)
    greedy = np.full((N, MAX_LENGTH), -1, np.int32)
    beam = np.full((N, MAX_LENGTH), -1, np.int32)
    glen = np.zeros(N, np.int32)
    blen = np.zeros(N, np.int32)
    g_text, b_text = [], []
    margins = []
    with torch.no_grad():
        for i in range(N):
            n = int(mask[i].sum())
            ids = src[i:i + 1, :n]
            for kind, arr, lens, texts, beams in (("greedy", greedy, glen, g_text, 1),
                                                  ("beam", beam, blen, b_text, NUM_BEAMS)):
                args = dict(gen, num_beams=beams)
                if beams > 1:
                    args.update(length_penalty=LENGTH_PENALTY, early_stopping=EARLY_STOPPING)
                seq = model.generate(ids, attention_mask=torch.ones_like(ids), **args)[0]
                seq = seq[1:].tolist()  # after the decoder start
                if 0 in seq:
                    seq = seq[:seq.index(0) + 1]
                else:
                    seq = [t for t in seq if t != pad]
                arr[i, :len(seq)] = seq
                lens[i] = len(seq)
                texts.append(tok.decode(seq, skip_special_tokens=True))
            # greedy's closeness to a tie: the smallest gap between the best two logits
            dec = torch.tensor([[pad] + greedy[i, :glen[i]].tolist()])
            lg = model(input_ids=ids, decoder_input_ids=dec[:, :-1] if glen[i] else dec).logits
            lg[..., pad] = -1e9
            top = lg[0].topk(2, dim=-1).values
            margins.append(float((top[:, 0] - top[:, 1]).min()))
        # logits, teacher-forced: 3 sentences (padded sources), decoder inputs of 6 tokens
        B, T = 3, 6
        lsrc = src[[0, 3, 13]]
        lmask = mask[[0, 3, 13]]
        ltgt = torch.randint(2, pad, (B, T))
        ltgt[:, 0] = pad
        logits = model(input_ids=lsrc, attention_mask=lmask, decoder_input_ids=ltgt).logits
    print("vocab", V, "greedy lengths", glen.tolist(), "beam lengths", blen.tolist())
    print("smallest greedy top-2 logit gap %.4g" % min(margins))
    if min(margins) < 1e-3:
        print("warning: a greedy step is close to a tie; change SEED", file=sys.stderr)
    meta = {"num_beams": str(NUM_BEAMS), "length_penalty": str(LENGTH_PENALTY),
            "max_length": str(MAX_LENGTH), "early_stopping": str(EARLY_STOPPING),
            "forced_eos_token_id": "0", "bad_words_ids": "[[%d]]" % pad,
            "decoder_start_token_id": str(pad), "transformers": __import__("transformers").__version__}
    save_file({"src": src.numpy().astype(np.int32),
               "src_len": mask.sum(1).numpy().astype(np.int32),
               "greedy": greedy, "greedy_len": glen, "beam": beam, "beam_len": blen,
               "logits_src": lsrc.numpy().astype(np.int32),
               "logits_tgt": ltgt.numpy().astype(np.int32),
               "logits": logits.numpy().astype(np.float32)},
              os.path.join(out, "reference.safetensors"), metadata=meta)
    for name, lines in (("sentences.txt", SENTENCES), ("greedy.txt", g_text),
                        ("beam.txt", b_text)):
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
