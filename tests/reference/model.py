"""Reference PyTorch model for clformer: the tutorial encoder-decoder Transformer.

Written after the structure of the Annotated Transformer and hkproj's
pytorch-transformer, so that state_dict() names are exactly the "tutorial names" of
docs/ARCHITECTURE.md, section 6 (src_embed.embedding.weight, encoder.layers.{i}.
self_attention_block.w_q.weight, ..., projection_layer.proj.weight), with the options
clformer's YAML exposes:

  norm          pre    : x + dropout(sublayer(norm(x)))
                post   : norm(x + dropout(sublayer(x)))
                branch : x + norm(dropout(sublayer(x)))
  final_norm    encoder.norm / decoder.norm after the stack (auto = on for pre only)
  layernorm     tutorial: alpha*(x-mean)/(std_unbiased+eps)+bias
                standard: alpha*(x-mean)/sqrt(var_biased+eps)+bias
                rms     : alpha*x/sqrt(mean(x^2)+eps)    (RMSNorm: alpha only, no .bias)
  activation    the FFN's f: relu | gelu (exact, erf) | gelu_tanh | silu | squared_relu
                (relu(x)^2): linear_2(dropout(f(linear_1(x))));
                gated swiglu (f = silu) | geglu (f = exact gelu): the FFN gains
                feed_forward_block.linear_3 (nn.Linear(d_model, d_ff), weight [d_ff, d],
                bias [d_ff]): linear_2(dropout(f(linear_1(x)) * linear_3(x)))
  attention_bias  bias on w_q, w_k, w_v, w_o
  output        logits | log_softmax
  positional    sinusoidal : the fixed table (a non-persistent buffer, not a weight)
                learned    : src_pos.embedding.weight / tgt_pos.embedding.weight [max_len, d],
                             an nn.Embedding of the position index, added like the table
  tie_embeddings none    : three matrices
                decoder : the projection uses tgt_embed.embedding.weight (its bias stays
                          projection_layer.proj.bias); no projection_layer.proj.weight
                all     : src_embed uses it too (src_vocab == tgt_vocab); no
                          src_embed.embedding.weight
                A tied matrix has one name, so state_dict() and named_parameters() list it
                once, as clformer's weight files do.

Also holds a minimal safetensors reader/writer (no `safetensors` package needed) and a
small YAML loader for clformer configs. Only torch (Debian's 1.13) is required.
"""

import json
import math
import struct
import sys

import torch
import torch.nn as nn


# --------------------------------------------------------------------------- config

LN_STYLES = ("tutorial", "standard", "rms")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu", "squared_relu")
GATED_ACTIVATIONS = ("swiglu", "geglu")


class ModelConfig:
    """The `model:` section of a clformer YAML, with defaults as in docs/CONFIG.md."""

    def __init__(self, src_vocab, tgt_vocab, max_len=256, d_model=512, layers=6,
                 encoder_layers=None, decoder_layers=None, heads=8, d_ff=2048,
                 norm="pre", final_norm="auto", ln_style="tutorial", ln_eps=1e-6,
                 attention_bias=False, activation="relu", output="logits",
                 dropout=0.1, pad_id=1, positional="sinusoidal", tie_embeddings="none",
                 position_offset=0, embed_norm=False):
        self.src_vocab = int(src_vocab)
        self.tgt_vocab = int(tgt_vocab)
        self.max_len = int(max_len)
        self.d_model = int(d_model)
        self.encoder_layers = int(encoder_layers if encoder_layers is not None else layers)
        self.decoder_layers = int(decoder_layers if decoder_layers is not None else layers)
        self.heads = int(heads)
        self.d_ff = int(d_ff)
        if norm not in ("pre", "post", "branch"):
            raise ValueError("norm must be pre, post or branch, not %r" % (norm,))
        self.norm = norm
        if final_norm in ("auto", None):
            final_norm = (norm == "pre")
        if not isinstance(final_norm, bool):
            raise ValueError("final_norm must be auto, true or false, not %r" % (final_norm,))
        self.final_norm = final_norm
        if ln_style not in LN_STYLES:
            raise ValueError("layernorm.style must be tutorial, standard or rms, not %r"
                             % (ln_style,))
        self.ln_style = ln_style
        self.ln_eps = float(ln_eps)
        self.attention_bias = bool(attention_bias)
        if activation not in ACTIVATIONS + GATED_ACTIVATIONS:
            raise ValueError("activation must be one of %s, not %r"
                             % (", ".join(ACTIVATIONS + GATED_ACTIVATIONS), activation))
        self.activation = activation
        if output not in ("logits", "log_softmax"):
            raise ValueError("output must be logits or log_softmax, not %r" % (output,))
        self.output = output
        self.dropout = float(dropout)
        self.pad_id = int(pad_id)
        if positional not in ("sinusoidal", "learned"):
            raise ValueError("positional must be sinusoidal or learned, not %r" % (positional,))
        self.positional = positional
        if tie_embeddings not in ("none", "decoder", "all"):
            raise ValueError("tie_embeddings must be none, decoder or all, not %r"
                             % (tie_embeddings,))
        if tie_embeddings == "all" and self.src_vocab != self.tgt_vocab:
            raise ValueError("tie_embeddings: all needs src_vocab == tgt_vocab")
        self.tie_embeddings = tie_embeddings
        self.position_offset = int(position_offset)
        self.embed_norm = bool(embed_norm)
        if self.d_model % self.heads != 0:
            raise ValueError("d_model %d is not a multiple of heads %d" % (self.d_model, self.heads))

    @staticmethod
    def from_yaml_model(m):
        """From the parsed `model:` mapping of a clformer YAML."""
        ln = m.get("layernorm", {}) or {}
        kw = dict(src_vocab=m["src_vocab"], tgt_vocab=m["tgt_vocab"])
        for k in ("max_len", "d_model", "layers", "encoder_layers", "decoder_layers",
                  "heads", "d_ff", "norm", "final_norm", "attention_bias", "activation",
                  "output", "dropout", "pad_id", "positional", "tie_embeddings",
                  "position_offset", "embed_norm"):
            if k in m:
                kw[k] = m[k]
        if "final_norm" in kw and isinstance(kw["final_norm"], str):
            v = kw["final_norm"].lower()
            kw["final_norm"] = {"auto": "auto", "true": True, "false": False}[v]
        if "style" in ln:
            kw["ln_style"] = ln["style"]
        if "eps" in ln:
            kw["ln_eps"] = float(ln["eps"])
        return ModelConfig(**kw)

    @property
    def gated(self):
        """True when the FFN has a third Linear (feed_forward_block.linear_3)."""
        return self.activation in GATED_ACTIVATIONS


# --------------------------------------------------------------------------- modules

class LayerNormalization(nn.Module):
    """Parameters `alpha` and `bias` in the tutorial and standard styles, so state_dict
    names do not change; `alpha` only for rms (no `bias` parameter at all)."""

    def __init__(self, features, eps=1e-6, style="tutorial"):
        super().__init__()
        self.eps = eps
        self.style = style
        self.alpha = nn.Parameter(torch.ones(features))
        if style != "rms":
            self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        if self.style == "rms":
            return self.alpha * x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        mean = x.mean(dim=-1, keepdim=True)
        if self.style == "tutorial":
            std = x.std(dim=-1, keepdim=True)  # unbiased (N-1), as in the tutorials
            return self.alpha * (x - mean) / (std + self.eps) + self.bias
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        return self.alpha * (x - mean) / torch.sqrt(var + self.eps) + self.bias


def activation_fn(name):
    """The FFN's f (for a gated activation: the f applied to linear_1's output)."""
    F = nn.functional
    return {"relu": torch.relu,
            "gelu": F.gelu,                                     # exact (erf)
            "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
            "silu": F.silu,
            "squared_relu": lambda x: torch.square(torch.relu(x)),
            "swiglu": F.silu,
            "geglu": F.gelu}[name]


class FeedForwardBlock(nn.Module):
    """linear_2(dropout(f(linear_1(x)))), or with a gate (swiglu, geglu)
    linear_2(dropout(f(linear_1(x)) * linear_3(x))). linear_3 is not made here: the
    Transformer adds it after every other module (add_gate), so that its default init
    draws come after all the others and a gated model's other weights are those of the
    same-seed model without a gate. It is made without touching the global RNG (its
    construction-time values are placeholders); init_weights draws it, last of all."""

    def __init__(self, d_model, d_ff, dropout, activation="relu"):
        super().__init__()
        self.d_model = d_model
        self.d_ff = d_ff
        self.activation = activation
        self.f = activation_fn(activation)
        self.linear_1 = nn.Linear(d_model, d_ff)
        self.dropout = nn.Dropout(dropout)
        self.linear_2 = nn.Linear(d_ff, d_model)
        self.gated = False  # add_gate: swiglu / geglu

    def add_gate(self):
        with torch.random.fork_rng(devices=[]):  # the global stream stays where it was
            self.linear_3 = nn.Linear(self.d_model, self.d_ff)
        self.gated = True

    def init_gate(self):
        """Xavier-uniform weight, then nn.Linear's default bias U(-1/sqrt(d), 1/sqrt(d))."""
        with torch.no_grad():
            nn.init.xavier_uniform_(self.linear_3.weight)
            bound = 1.0 / math.sqrt(self.d_model)
            self.linear_3.bias.uniform_(-bound, bound)

    def forward(self, x):
        u = self.f(self.linear_1(x))
        if self.gated:
            u = u * self.linear_3(x)
        return self.linear_2(self.dropout(u))


class InputEmbeddings(nn.Module):
    """shared: another InputEmbeddings whose matrix this one uses (tie_embeddings: all),
    held in a plain list so that it is not a submodule: the matrix keeps one name."""

    def __init__(self, d_model, vocab_size, shared=None):
        super().__init__()
        self.d_model = d_model
        self.shared = [shared] if shared is not None else None
        if shared is None:
            self.embedding = nn.Embedding(vocab_size, d_model)

    def weight(self):
        return self.shared[0].embedding.weight if self.shared else self.embedding.weight

    def forward(self, x):
        if self.shared:
            return nn.functional.embedding(x, self.weight()) * math.sqrt(self.d_model)
        return self.embedding(x) * math.sqrt(self.d_model)


def sinusoidal_table(max_len, d_model, dtype=torch.float32):
    """The tutorial's PE table. dtype float32 reproduces the tutorial bit for bit;
    float64 gives the exact table used by the float64 self-check."""
    pe = torch.zeros(max_len, d_model, dtype=dtype)
    position = torch.arange(0, max_len, dtype=dtype).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2).to(dtype) * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe.unsqueeze(0)  # [1, max_len, d]


class PositionalEncoding(nn.Module):
    """offset (model.position_offset): position t reads row t + offset of a table of
    max_len + offset rows. norm (model.embed_norm): a LayerNormalization applied to the sum,
    before the dropout."""

    def __init__(self, d_model, max_len, dropout, offset=0):
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.offset = offset
        self.dropout = nn.Dropout(dropout)
        # Not persistent: the table is not part of the weights file.
        self.register_buffer("pe", sinusoidal_table(max_len + offset, d_model), persistent=False)

    def use_exact_table(self):
        """Replace the table by one computed in float64 (for the float64 self-check)."""
        self.pe = sinusoidal_table(self.max_len + self.offset, self.d_model, torch.float64)

    def forward(self, x, norm=None):
        if x.shape[1] > self.max_len:
            raise ValueError("sequence length %d > max_len %d" % (x.shape[1], self.max_len))
        x = x + self.pe[:, self.offset:self.offset + x.shape[1], :].to(x.dtype)
        return self.dropout(norm(x) if norm is not None else x)


class LearnedPositionalEmbedding(nn.Module):
    """positional: learned. x + embedding.weight[:L], then dropout, exactly where the
    sinusoidal table goes; the weight is src_pos.embedding.weight / tgt_pos.embedding.weight."""

    def __init__(self, d_model, max_len, dropout, offset=0):
        super().__init__()
        self.max_len = max_len
        self.offset = offset
        self.dropout = nn.Dropout(dropout)
        self.embedding = nn.Embedding(max_len + offset, d_model)

    def use_exact_table(self):
        pass  # a weight: model.double() already made it float64

    def forward(self, x, norm=None):
        if x.shape[1] > self.max_len:
            raise ValueError("sequence length %d > max_len %d" % (x.shape[1], self.max_len))
        x = x + self.embedding.weight[self.offset:self.offset + x.shape[1]].unsqueeze(0)
        return self.dropout(norm(x) if norm is not None else x)


class ResidualConnection(nn.Module):
    def __init__(self, features, dropout, norm, ln_style, ln_eps):
        super().__init__()
        self.placement = norm
        self.dropout = nn.Dropout(dropout)
        self.norm = LayerNormalization(features, ln_eps, ln_style)

    def forward(self, x, sublayer):
        if self.placement == "pre":
            return x + self.dropout(sublayer(self.norm(x)))
        if self.placement == "post":
            return self.norm(x + self.dropout(sublayer(x)))
        return x + self.norm(self.dropout(sublayer(x)))  # branch


class MultiHeadAttentionBlock(nn.Module):
    def __init__(self, d_model, h, dropout, bias):
        super().__init__()
        self.d_model = d_model
        self.h = h
        self.d_k = d_model // h
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    @staticmethod
    def attention(query, key, value, mask, dropout):
        d_k = query.shape[-1]
        scores = (query @ key.transpose(-2, -1)) / math.sqrt(d_k)
        if mask is not None:
            scores.masked_fill_(mask == 0, -1e9)
        scores = scores.softmax(dim=-1)
        if dropout is not None:
            scores = dropout(scores)
        return scores @ value, scores

    def forward(self, q, k, v, mask):
        query = self.w_q(q)
        key = self.w_k(k)
        value = self.w_v(v)
        B = query.shape[0]
        query = query.view(B, query.shape[1], self.h, self.d_k).transpose(1, 2)
        key = key.view(B, key.shape[1], self.h, self.d_k).transpose(1, 2)
        value = value.view(B, value.shape[1], self.h, self.d_k).transpose(1, 2)
        x, self.attention_scores = MultiHeadAttentionBlock.attention(
            query, key, value, mask, self.dropout)
        x = x.transpose(1, 2).contiguous().view(B, -1, self.h * self.d_k)
        return self.w_o(x)


def attention_block(cfg):
    return MultiHeadAttentionBlock(cfg.d_model, cfg.heads, cfg.dropout, cfg.attention_bias)


def residual_connections(cfg, n):
    return nn.ModuleList(
        [ResidualConnection(cfg.d_model, cfg.dropout, cfg.norm, cfg.ln_style, cfg.ln_eps) for _ in range(n)])


class EncoderBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.self_attention_block = attention_block(cfg)
        self.feed_forward_block = FeedForwardBlock(cfg.d_model, cfg.d_ff, cfg.dropout, cfg.activation)
        self.residual_connections = residual_connections(cfg, 2)

    def forward(self, x, src_mask):
        x = self.residual_connections[0](x, lambda x: self.self_attention_block(x, x, x, src_mask))
        x = self.residual_connections[1](x, self.feed_forward_block)
        return x


class DecoderBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.self_attention_block = attention_block(cfg)
        self.cross_attention_block = attention_block(cfg)
        self.feed_forward_block = FeedForwardBlock(cfg.d_model, cfg.d_ff, cfg.dropout, cfg.activation)
        self.residual_connections = residual_connections(cfg, 3)

    def forward(self, x, encoder_output, src_mask, tgt_mask):
        x = self.residual_connections[0](x, lambda x: self.self_attention_block(x, x, x, tgt_mask))
        x = self.residual_connections[1](
            x, lambda x: self.cross_attention_block(x, encoder_output, encoder_output, src_mask))
        x = self.residual_connections[2](x, self.feed_forward_block)
        return x


class Stack(nn.Module):
    """The encoder's or decoder's n layers of block, then its final norm (no module at all
    when final_norm is off: <stack>.norm.* is then not a weight) and its EmbedNorm."""

    def __init__(self, cfg, block, n):
        super().__init__()
        self.layers = nn.ModuleList([block(cfg) for _ in range(n)])
        self.norm = LayerNormalization(cfg.d_model, cfg.ln_eps, cfg.ln_style) if cfg.final_norm else None
        self.embed = EmbedNorm(cfg) if cfg.embed_norm else None

    def forward(self, x, *masks):
        """Encoder: (x, mask); decoder: (x, encoder_output, src_mask, tgt_mask)."""
        for layer in self.layers:
            x = layer(x, *masks)
        return self.norm(x) if self.norm is not None else x


class Encoder(Stack):
    def __init__(self, cfg):
        super().__init__(cfg, EncoderBlock, cfg.encoder_layers)


class EmbedNorm(nn.Module):
    """model.embed_norm: encoder.embed.norm / decoder.embed.norm, the LayerNorm on the
    embedding sum (mBART's layernorm_embedding); applied by the positional module."""

    def __init__(self, cfg):
        super().__init__()
        self.norm = LayerNormalization(cfg.d_model, cfg.ln_eps, cfg.ln_style)


class Decoder(Stack):
    def __init__(self, cfg):
        super().__init__(cfg, DecoderBlock, cfg.decoder_layers)


class TiedBias(nn.Module):
    """The bias of a projection whose weight is an embedding's (named proj.bias, with
    nn.Linear's default init)."""

    def __init__(self, d_model, vocab_size):
        super().__init__()
        bound = 1.0 / math.sqrt(d_model)
        self.bias = nn.Parameter(torch.empty(vocab_size).uniform_(-bound, bound))


class ProjectionLayer(nn.Module):
    """shared: the InputEmbeddings whose matrix is the projection's weight (tie_embeddings
    decoder or all), not a submodule (see InputEmbeddings)."""

    def __init__(self, d_model, vocab_size, output, shared=None):
        super().__init__()
        self.output = output
        self.shared = [shared] if shared is not None else None
        self.proj = TiedBias(d_model, vocab_size) if shared is not None else nn.Linear(d_model, vocab_size)

    def forward(self, x):
        if self.shared:
            y = nn.functional.linear(x, self.shared[0].weight(), self.proj.bias)
        else:
            y = self.proj(x)
        return torch.log_softmax(y, dim=-1) if self.output == "log_softmax" else y


class Transformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        # Registration order = parameter creation order = state_dict order.
        self.encoder = Encoder(cfg)
        self.decoder = Decoder(cfg)
        if cfg.tie_embeddings == "all":  # the shared matrix first: it is tgt_embed's
            self.tgt_embed = InputEmbeddings(cfg.d_model, cfg.tgt_vocab)
            self.src_embed = InputEmbeddings(cfg.d_model, cfg.src_vocab, shared=self.tgt_embed)
        else:
            self.src_embed = InputEmbeddings(cfg.d_model, cfg.src_vocab)
            self.tgt_embed = InputEmbeddings(cfg.d_model, cfg.tgt_vocab)
        pos = LearnedPositionalEmbedding if cfg.positional == "learned" else PositionalEncoding
        self.src_pos = pos(cfg.d_model, cfg.max_len, cfg.dropout, cfg.position_offset)
        self.tgt_pos = pos(cfg.d_model, cfg.max_len, cfg.dropout, cfg.position_offset)
        self.projection_layer = ProjectionLayer(
            cfg.d_model, cfg.tgt_vocab, cfg.output,
            shared=self.tgt_embed if cfg.tie_embeddings != "none" else None)
        # Gated FFNs: linear_3 last of all (encoder layers, then decoder layers), made
        # without using the global RNG; init_weights draws it (see FeedForwardBlock).
        if cfg.gated:
            for layer in list(self.encoder.layers) + list(self.decoder.layers):
                layer.feed_forward_block.add_gate()

    # masks -----------------------------------------------------------------
    def src_mask(self, src):
        """[B,1,1,S]: key mask, 1 where src != pad."""
        return (src != self.cfg.pad_id).unsqueeze(1).unsqueeze(1).int()

    def tgt_mask(self, tgt):
        """[B,1,T,T]: causal AND (tgt != pad) on keys."""
        T = tgt.shape[1]
        causal = torch.tril(torch.ones(1, 1, T, T, dtype=torch.int, device=tgt.device))
        return (tgt != self.cfg.pad_id).unsqueeze(1).unsqueeze(1).int() & causal

    # forward ---------------------------------------------------------------
    def encode(self, src, src_mask):
        norm = self.encoder.embed.norm if self.encoder.embed is not None else None
        return self.encoder(self.src_pos(self.src_embed(src), norm), src_mask)

    def decode(self, encoder_output, src_mask, tgt, tgt_mask):
        norm = self.decoder.embed.norm if self.decoder.embed is not None else None
        return self.decoder(self.tgt_pos(self.tgt_embed(tgt), norm), encoder_output, src_mask,
                            tgt_mask)

    def project(self, x):
        return self.projection_layer(x)

    def forward(self, src, tgt):
        """Returns (output [B,T,tgt_vocab], encoder_out [B,S,d])."""
        sm = self.src_mask(src)
        tm = self.tgt_mask(tgt)
        enc = self.encode(src, sm)
        dec = self.decode(enc, sm, tgt, tm)
        return self.project(dec), enc

    def use_exact_pe(self):
        self.src_pos.use_exact_table()
        self.tgt_pos.use_exact_table()


def is_gate_param(name):
    return ".feed_forward_block.linear_3." in name


def init_weights(model, randomize_norms=True):
    """Xavier-uniform for every matrix (as the tutorial does); Linear biases keep
    PyTorch's default init; norms get alpha = 1 + 0.1*randn and bias = 0.1*randn when
    randomize_norms (so that fixtures test the norm parameters), else ones/zeros (an rms
    norm has alpha only: no bias draw).

    The gates (feed_forward_block.linear_3, swiglu / geglu) are drawn last, after the
    norms: per layer (encoder layers 0.., then decoder layers 0..) the Xavier-uniform
    weight, then the bias U(-1/sqrt(d_model), 1/sqrt(d_model)) (nn.Linear's default). The
    model was built without drawing them, so the global RNG stream up to that point is
    exactly that of the same model without a gate: every other weight equals the same-seed
    ungated model's."""
    for name, p in model.named_parameters():
        if p.dim() > 1 and not is_gate_param(name):
            nn.init.xavier_uniform_(p)
    for m in model.modules():
        if isinstance(m, LayerNormalization) and randomize_norms:
            with torch.no_grad():
                m.alpha.copy_(1.0 + 0.1 * torch.randn(m.alpha.shape))
                if m.style != "rms":
                    m.bias.copy_(0.1 * torch.randn(m.bias.shape))
    for layer in list(model.encoder.layers) + list(model.decoder.layers):
        if layer.feed_forward_block.gated:
            layer.feed_forward_block.init_gate()


# --------------------------------------------------------------------------- safetensors

_DT_TO_ST = {torch.float32: "F32", torch.float16: "F16", torch.float64: "F64",
             torch.int32: "I32", torch.int64: "I64", torch.bfloat16: "BF16",
             torch.uint8: "U8", torch.int8: "I8", torch.int16: "I16"}
_ST_TO_DT = {v: k for k, v in _DT_TO_ST.items()}


def save_safetensors(path, tensors, metadata=None):
    """Write a safetensors file. Tensors are stored in sorted name order, the header is
    compact JSON with sorted keys padded with spaces to a multiple of 8: the same input
    always gives the same bytes."""
    names = sorted(tensors)
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    off = 0
    for n in names:
        t = tensors[n].detach().contiguous().cpu()
        if t.dtype not in _DT_TO_ST:
            raise ValueError("%s: dtype %s not supported" % (n, t.dtype))
        raw = _tensor_bytes(t)
        header[n] = {"dtype": _DT_TO_ST[t.dtype], "shape": list(t.shape),
                     "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hj = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


def _tensor_bytes(t):
    """Raw little-endian bytes of a contiguous CPU tensor, without numpy."""
    if sys.byteorder != "little":
        raise RuntimeError("big-endian hosts are not supported")
    if t.numel() == 0:
        return b""
    return bytes(t.reshape(-1).view(torch.uint8).tolist())


def load_safetensors(path):
    """Read a safetensors file: returns (dict name -> tensor, metadata dict)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError("%s: too short for a safetensors file" % path)
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    base = 8 + n
    out = {}
    for name, info in header.items():
        dt = _ST_TO_DT.get(info["dtype"])
        if dt is None:
            raise ValueError("%s: %s: dtype %s not supported" % (path, name, info["dtype"]))
        b, e = info["data_offsets"]
        buf = bytearray(data[base + b:base + e])
        if len(buf) == 0:
            t = torch.empty(info["shape"], dtype=dt)
        else:
            t = torch.frombuffer(buf, dtype=dt).reshape(info["shape"]).clone()
        out[name] = t
    return out, meta


# --------------------------------------------------------------------------- yaml

def load_yaml(path):
    """Parse a clformer YAML. Uses PyYAML when present; else a small parser that reads
    nested `key: value` blocks, `{k: v, ...}` flow maps and `[a, b]` lists."""
    with open(path) as f:
        text = f.read()
    try:
        import yaml  # python3-yaml
        return yaml.safe_load(text) or {}
    except ImportError:
        return _mini_yaml(text)


def _scalar(s):
    s = s.strip()
    if s.startswith(("'", '"')) and s.endswith(s[0]) and len(s) >= 2:
        return s[1:-1]
    if s.startswith("{") and s.endswith("}"):
        d = {}
        for part in _split_flow(s[1:-1]):
            if part.strip():
                k, v = part.split(":", 1)
                d[k.strip()] = _scalar(v)
        return d
    if s.startswith("[") and s.endswith("]"):
        return [_scalar(p) for p in _split_flow(s[1:-1]) if p.strip()]
    low = s.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    if low in ("null", "~", ""):
        return None
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return s


def _split_flow(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def _mini_yaml(text):
    root = {}
    stack = [(-1, root)]
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        key, _, val = line.strip().partition(":")
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if val.strip() == "":
            parent[key.strip()] = {}
            stack.append((indent, parent[key.strip()]))
        else:
            parent[key.strip()] = _scalar(val)
    return root


def model_from_yaml(path):
    doc = load_yaml(path)
    if "model" not in doc:
        raise ValueError("%s: no model: section" % path)
    cfg = ModelConfig.from_yaml_model(doc["model"])
    return Transformer(cfg), cfg, doc
