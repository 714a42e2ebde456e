"""The Python half of bench/ct2_compare.sh: a benchmark model for clformer and CTranslate2.

    python3 bench/ct2_compare.py make DIR [--seed 1]
        DIR/config.yaml, DIR/weights.safetensors (clformer), DIR/src.json, DIR/tgt.json
        (WordLevel vocabularies of 8000 words) and DIR/sentences.txt (256 lines of 20
        random source words). The weights are random but not an init: LayerNorm gains and
        biases, linear and projection biases are all non-trivial, so that the decoder's
        output depends on its input (a plain `clformer init` model repeats one token).
    python3 bench/ct2_compare.py convert DIR OUT
        Our own converter: clformer's config.yaml + weights.safetensors -> CTranslate2's
        TransformerSpec (pre-norm, standard LayerNorm, explicit position table), saved
        as a CTranslate2 model directory OUT (float32; int8 is chosen at load).
    python3 bench/ct2_compare.py convert-dir MODEL_DIR OUT
        The same for a trained model directory (model.yaml, weights.safetensors in F32 or
        F16, SentencePiece src.model / tgt.model: the shipped models/en-de-gettext), its
        vocabularies the SentencePiece pieces in id order. Refuses a model.yaml this
        mapping does not cover (post-norm, RMSNorm, GELU, learned positions, ...).
    python3 bench/ct2_compare.py translate OUT COMPUTE_TYPE BEAM BATCH MAX_LEN THREADS [DEVICE]
        stdin -> stdout as `clformer translate` does (tokens joined by spaces), and on
        stderr one line `ct2: N lines, T tokens, S s, R tokens/s` (loading excluded);
        DEVICE cpu (default) or cuda.
    python3 bench/ct2_compare.py check A B
        Fails unless the two translation files are equal line for line and varied (not
        one token repeated).

`make` needs numpy only; `convert` and `translate` need the ctranslate2 package,
`convert-dir` also sentencepiece and PyYAML.
"""

import json
import math
import os
import struct
import sys
import time
from collections import Counter

import numpy as np

D, LAYERS, HEADS, D_FF, VOCAB, MAX_LEN = 512, 6, 8, 2048, 8000, 256
SPECIALS = ["[UNK]", "[PAD]", "[SOS]", "[EOS]"]
WORDS = [f"w{i}" for i in range(VOCAB - len(SPECIALS))]

CONFIG = f"""# Written by bench/ct2_compare.py: base pre-norm, untied, biases on attention.
model:
  src_vocab: {VOCAB}
  tgt_vocab: {VOCAB}
  max_len: {MAX_LEN}
  d_model: {D}
  layers: {LAYERS}
  heads: {HEADS}
  d_ff: {D_FF}
  norm: pre
  final_norm: true
  layernorm: {{style: standard, eps: 1.0e-6}}
  attention_bias: true
  activation: relu
  output: logits
  dropout: 0.0
  pad_id: 1
  positional: sinusoidal
  tie_embeddings: none
  embed_scale: sqrt_d_model
  source_bos: true
  source_eos: true
"""


def weight_shapes():
    """clformer's weight names (docs/ARCHITECTURE.md section 6) and shapes for CONFIG."""
    w = {"src_embed.embedding.weight": [VOCAB, D], "tgt_embed.embedding.weight": [VOCAB, D]}

    def attention(p):
        for m in "qkvo":
            w[f"{p}.w_{m}.weight"] = [D, D]
            w[f"{p}.w_{m}.bias"] = [D]

    def block(p, norms):
        w[f"{p}.feed_forward_block.linear_1.weight"] = [D_FF, D]
        w[f"{p}.feed_forward_block.linear_1.bias"] = [D_FF]
        w[f"{p}.feed_forward_block.linear_2.weight"] = [D, D_FF]
        w[f"{p}.feed_forward_block.linear_2.bias"] = [D]
        for r in range(norms):
            w[f"{p}.residual_connections.{r}.norm.alpha"] = [D]
            w[f"{p}.residual_connections.{r}.norm.bias"] = [D]

    for i in range(LAYERS):
        attention(f"encoder.layers.{i}.self_attention_block")
        block(f"encoder.layers.{i}", 2)
    w["encoder.norm.alpha"], w["encoder.norm.bias"] = [D], [D]
    for i in range(LAYERS):
        attention(f"decoder.layers.{i}.self_attention_block")
        attention(f"decoder.layers.{i}.cross_attention_block")
        block(f"decoder.layers.{i}", 3)
    w["decoder.norm.alpha"], w["decoder.norm.bias"] = [D], [D]
    w["projection_layer.proj.weight"] = [VOCAB, D]
    w["projection_layer.proj.bias"] = [VOCAB]
    return w


def random_weights(seed):
    """Xavier-uniform matrices, but with embeddings 4x larger (the token and its position
    are a large part of the residual stream) and W_q, W_k 4x larger (peaked attention, not
    an average over the source): with init's scales every position sees nearly the same
    state and greedy decoding repeats one token."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in weight_shapes().items():
        if name.endswith(".alpha"):  # LayerNorm gain around 1
            t = 1.0 + 0.25 * rng.standard_normal(shape)
        elif name.endswith("embedding.weight"):  # x sqrt(d) at run time
            t = 4.0 * rng.standard_normal(shape) / math.sqrt(D)
        elif len(shape) == 2:  # Xavier-uniform
            a = math.sqrt(6.0 / (shape[0] + shape[1]))
            if ".w_q." in name or ".w_k." in name:
                a *= 4.0
            t = rng.uniform(-a, a, shape)
        else:  # LayerNorm and linear biases
            t = 0.1 * rng.standard_normal(shape)
        out[name] = t.astype(np.float32)
    # The specials other than [EOS] are never the best choice (as in a trained model).
    out["projection_layer.proj.bias"][:3] = -30.0
    return out


def write_safetensors(path, tensors):
    header, offset = {}, 0
    for name, t in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for t in tensors.values():
            f.write(np.ascontiguousarray(t, dtype="<f4").tobytes())


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        types = {"F32": "<f4", "F16": "<f2"}
        if h["dtype"] not in types:
            sys.exit(f"ct2_compare: {path}: {name} is {h['dtype']}, the converter takes F32, F16")
        a, b = h["data_offsets"]
        t = np.frombuffer(data[a:b], dtype=types[h["dtype"]]).reshape(h["shape"])
        out[name] = t.astype(np.float32)  # F16 -> F32 is exact
    return out


def word_level_json(path):
    vocab = {t: i for i, t in enumerate(SPECIALS + WORDS)}
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in enumerate(SPECIALS)]
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": None, "pre_tokenizer": {"type": "Whitespace"},
           "post_processor": None, "decoder": None,
           "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}}
    with open(path, "w") as f:
        json.dump(doc, f)


def make(out, seed):
    with open(f"{out}/config.yaml", "w") as f:
        f.write(CONFIG)
    write_safetensors(f"{out}/weights.safetensors", random_weights(seed))
    word_level_json(f"{out}/src.json")
    word_level_json(f"{out}/tgt.json")
    rng = np.random.default_rng(seed + 1)
    with open(f"{out}/sentences.txt", "w") as f:
        for _ in range(256):
            f.write(" ".join(WORDS[i] for i in rng.integers(0, len(WORDS), 20)) + "\n")


def position_table(max_len=MAX_LEN, d=D):
    """clformer's `positional: sinusoidal`: sin on even, cos on odd columns, in float as
    the tutorial computes it. CTranslate2's own table is [sin | cos] halves, so the
    converter passes this one."""
    pos = np.arange(max_len, dtype=np.float32)[:, None]
    div = np.exp(np.arange(0, d, 2, dtype=np.float32) * np.float32(-math.log(10000.0) / d))
    pe = np.zeros((max_len, d), dtype=np.float32)
    pe[:, 0::2] = np.sin(pos * div)
    pe[:, 1::2] = np.cos(pos * div)
    return pe


def build_spec(w, layers, heads, max_len, eps, src_vocab, tgt_vocab, specials):
    """CTranslate2's TransformerSpec of clformer weights w (names of docs/ARCHITECTURE.md
    section 6; pre-norm, standard LayerNorm, ReLU, sinusoidal positions, embeddings x
    sqrt(d)). Attention biases and src_embed are optional: without them the linear layers
    have no bias and the encoder reads tgt_embed (tie_embeddings: all). specials: unk, bos,
    eos tokens; the decoder starts with bos."""
    from ctranslate2.specs import common_spec, transformer_spec

    spec = transformer_spec.TransformerSpec.from_config(
        (layers, layers), heads, pre_norm=True, activation=common_spec.Activation.RELU)

    def linear(s, *names):  # several names: fused side by side on the output axis
        s.weight = np.concatenate([w[n + ".weight"] for n in names])
        if all(n + ".bias" in w for n in names):
            s.bias = np.concatenate([w[n + ".bias"] for n in names])

    def norm(s, name):
        s.gamma, s.beta = w[name + ".alpha"], w[name + ".bias"]

    def ffn(s, p, r):
        norm(s.layer_norm, f"{p}.residual_connections.{r}.norm")
        linear(s.linear_0, f"{p}.feed_forward_block.linear_1")
        linear(s.linear_1, f"{p}.feed_forward_block.linear_2")

    def self_attention(s, p):
        norm(s.layer_norm, f"{p}.residual_connections.0.norm")
        a = f"{p}.self_attention_block"
        linear(s.linear[0], f"{a}.w_q", f"{a}.w_k", f"{a}.w_v")
        linear(s.linear[1], f"{a}.w_o")

    tgt_embed = w["tgt_embed.embedding.weight"]
    pe = position_table(max_len, tgt_embed.shape[1])
    enc, dec = spec.encoder, spec.decoder
    enc.embeddings[0].weight = w.get("src_embed.embedding.weight", tgt_embed)
    enc.position_encodings.encodings = pe
    norm(enc.layer_norm, "encoder.norm")
    for i, layer in enumerate(enc.layer):
        self_attention(layer.self_attention, f"encoder.layers.{i}")
        ffn(layer.ffn, f"encoder.layers.{i}", 1)
    dec.embeddings.weight = tgt_embed
    dec.position_encodings.encodings = pe
    norm(dec.layer_norm, "decoder.norm")
    dec.projection.weight = w.get("projection_layer.proj.weight", tgt_embed)
    if "projection_layer.proj.bias" in w:
        dec.projection.bias = w["projection_layer.proj.bias"]
    for i, layer in enumerate(dec.layer):
        p = f"decoder.layers.{i}"
        self_attention(layer.self_attention, p)
        norm(layer.attention.layer_norm, f"{p}.residual_connections.1.norm")
        a = f"{p}.cross_attention_block"
        linear(layer.attention.linear[0], f"{a}.w_q")
        linear(layer.attention.linear[1], f"{a}.w_k", f"{a}.w_v")
        linear(layer.attention.linear[2], f"{a}.w_o")
        ffn(layer.ffn, p, 2)

    c = spec.config
    unk, bos, eos = specials
    c.unk_token, c.bos_token, c.eos_token, c.decoder_start_token = unk, bos, eos, bos
    c.add_source_bos = c.add_source_eos = True
    c.layer_norm_epsilon = eps
    spec.register_source_vocabulary(src_vocab)
    spec.register_target_vocabulary(tgt_vocab)
    spec.validate()
    spec.optimize(quantization="float32")
    return spec


def convert(src, out):
    import ctranslate2

    spec = build_spec(read_safetensors(f"{src}/weights.safetensors"), LAYERS, HEADS, MAX_LEN,
                      1e-6, SPECIALS + WORDS, SPECIALS + WORDS,
                      (SPECIALS[0], SPECIALS[2], SPECIALS[3]))
    os.makedirs(out, exist_ok=True)
    spec.save(out)
    print(f"ct2_compare: {out}: CTranslate2 {ctranslate2.__version__} TransformerSpec")


# model.yaml values the mapping of build_spec assumes (key: the values it takes).
DIR_MODEL = {"norm": ["pre"], "final_norm": [True, "auto"], "activation": ["relu"],
             "positional": ["sinusoidal"], "embed_scale": ["sqrt_d_model"],
             "tie_embeddings": ["all", "none"], "output": ["logits"],
             "source_bos": [True], "source_eos": [True], "banned_ids": [[], None]}


def convert_dir(src, out):
    import ctranslate2
    import sentencepiece
    import yaml

    with open(f"{src}/model.yaml") as f:
        m = yaml.safe_load(f)["model"]
    for key, ok in DIR_MODEL.items():
        if m.get(key) not in ok:
            sys.exit(f"ct2_compare: {src}/model.yaml: {key}: {m.get(key)!r} is not "
                     f"mapped to CTranslate2 (takes {ok})")
    if (m.get("layernorm") or {}).get("style", "standard") != "standard":
        sys.exit(f"ct2_compare: {src}/model.yaml: layernorm style is not standard")
    vocab = []
    for side in ("src", "tgt"):
        sp = sentencepiece.SentencePieceProcessor(model_file=f"{src}/{side}.model")
        vocab.append([sp.id_to_piece(i) for i in range(sp.get_piece_size())])
    specials = ("<unk>", "<s>", "</s>")  # clformer's SentencePiece specials, by name
    spec = build_spec(read_safetensors(f"{src}/weights.safetensors"), m["layers"], m["heads"],
                      m["max_len"], float(m["layernorm"]["eps"]), vocab[0], vocab[1], specials)
    os.makedirs(out, exist_ok=True)
    spec.save(out)
    print(f"ct2_compare: {out}: CTranslate2 {ctranslate2.__version__} TransformerSpec of {src}")


def translate(model, compute_type, beam, batch, max_len, threads, device="cpu"):
    import ctranslate2

    t = ctranslate2.Translator(model, device=device, compute_type=compute_type,
                               inter_threads=1, intra_threads=threads)
    lines = [line.split() for line in sys.stdin]
    if device == "cuda":  # the first batch pays for cuBLAS's and the kernels' setup
        t.translate_batch(lines[:batch], max_batch_size=batch, beam_size=beam,
                          max_decoding_length=4)
    start = time.perf_counter()
    res = t.translate_batch(lines, max_batch_size=batch, beam_size=beam, length_penalty=0.0,
                            max_decoding_length=max_len)
    seconds = time.perf_counter() - start
    tokens = sum(len(r.hypotheses[0]) for r in res)
    sys.stdout.write("".join(" ".join(r.hypotheses[0]) + "\n" for r in res))
    print(f"ct2: {len(lines)} lines, {tokens} tokens, {seconds:.3f} s, "
          f"{tokens / seconds:.1f} tokens/s", file=sys.stderr)


def check(a, b):
    with open(a) as f:
        x = f.read().splitlines()
    with open(b) as f:
        y = f.read().splitlines()
    diff = [i for i in range(max(len(x), len(y))) if i >= len(x) or i >= len(y) or x[i] != y[i]]
    tokens = " ".join(x).split()
    top, count = Counter(tokens).most_common(1)[0] if tokens else ("", 0)
    print(f"ct2_compare: {a} vs {b}: {len(x) - len(diff)}/{len(x)} lines equal, "
          f"{len(tokens)} tokens, {len(set(tokens))} distinct, most frequent {top!r} x{count}")
    if diff:
        i = diff[0]
        sys.exit(f"ct2_compare: line {i + 1} differs:\n  {x[i] if i < len(x) else '<none>'}\n"
                 f"  {y[i] if i < len(y) else '<none>'}")
    if not tokens or count > 0.1 * len(tokens) or len(set(tokens)) < 0.3 * len(tokens):
        sys.exit("ct2_compare: the outputs repeat a few tokens: not a fair benchmark model")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "make":
        make(args[0], int(args[2]) if args[1:2] == ["--seed"] else 1)
    elif cmd == "convert":
        convert(*args)
    elif cmd == "convert-dir":
        convert_dir(*args)
    elif cmd == "translate":
        translate(args[0], args[1], *map(int, args[2:6]), *args[6:7])
    elif cmd == "check":
        check(*args)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
