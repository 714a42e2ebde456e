/* What a tensor name of the tutorial's state_dict() says about the tensor: one table of
 * name patterns (weight_names.c) and one lookup. The weight list (weights.c), the packing
 * of the attention projections and the F16 copies (graph/model.c) and the messages about
 * a weights file ask it instead of testing prefixes and suffixes of their own. Not
 * installed. */
#ifndef CLF_WEIGHT_NAMES_H
#define CLF_WEIGHT_NAMES_H

#include <stddef.h>

/* The tensors outside the layers, under their state_dict() names. */
#define CLF_WN_SRC_EMBED   "src_embed.embedding.weight"
#define CLF_WN_TGT_EMBED   "tgt_embed.embedding.weight"
#define CLF_WN_SRC_POS     "src_pos.embedding.weight"
#define CLF_WN_TGT_POS     "tgt_pos.embedding.weight"
#define CLF_WN_PROJ_WEIGHT "projection_layer.proj.weight"
#define CLF_WN_PROJ_BIAS   "projection_layer.proj.bias"

/* What a name is; a name may be several (a learned position table is
 * CLF_WK_EMBEDDING_TABLE | CLF_WK_POSITIONAL). */
typedef enum clf_weight_kind {
    CLF_WK_EMBEDDING_TABLE = 1u << 0, /* *.embedding.weight: looked up, not multiplied */
    CLF_WK_POSITIONAL = 1u << 1,      /* {src,tgt}_pos.embedding.*: positional: learned */
    CLF_WK_SRC_EMBED = 1u << 2,       /* src_embed.*: shaped by src_vocab */
    CLF_WK_TGT_VOCAB = 1u << 3,       /* tgt_embed.*, projection_layer.*: by tgt_vocab */
    CLF_WK_FINAL_NORM = 1u << 4,      /* {encoder,decoder}.norm.*: final_norm */
    CLF_WK_ATTENTION_BIAS = 1u << 5,  /* *attention_block.w_*.bias: attention_bias */
    CLF_WK_ATTENTION_Q = 1u << 6,     /* *.w_q.{weight,bias}: heads a packed [Wq;Wk;Wv] */
    CLF_WK_ATTENTION_KV = 1u << 7,    /* *.w_{k,v}.{weight,bias}: packed after their w_q */
    CLF_WK_FEED_FORWARD = 1u << 8,    /* *feed_forward_block.*: shaped by d_ff */
    CLF_WK_FFN_GATE = 1u << 9,        /* *feed_forward_block.linear_3.*: gated activations */
    CLF_WK_NORM_BIAS = 1u << 10,      /* *.norm.bias*: norms that have a bias */
    CLF_WK_DATA_PARALLEL = 1u << 11,  /* module.*: saved from nn.DataParallel */
    CLF_WK_NOT_PARAMETER = 1u << 12   /* optim.* (optimizer state in checkpoints) and the
                                         PE buffers src_pos.pe, tgt_pos.pe */
} clf_weight_kind;

/* The clf_weight_kind bits of every pattern that name matches (0: none). */
unsigned clf_weight_name_kinds(const char *name);

/* For a name of kind CLF_WK_ATTENTION_Q or CLF_WK_ATTENTION_KV, the same tensor of
 * projection p ('q', 'k' or 'v') of that block into out ("...w_k.bias" for 'k' of
 * "...w_q.bias"): 1. Other names, or out too small: 0. */
int clf_weight_name_qkv(const char *name, char p, char *out, size_t size);

/* The layer index i of a "<stack>.layers.<i>." name, or -1. */
int clf_weight_name_layer(const char *name, const char *stack);

#endif
