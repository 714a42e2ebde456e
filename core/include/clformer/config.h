/* clformer/config.h - YAML -> validated model/backend/train configuration (libyaml).
 *
 * Every error names the file, line and column (1-based) and the key:
 *   "configs/x.yaml:7:10: model.heads: d_model 512 is not divisible by heads 7"
 * Unknown keys, wrong types and out-of-range values are errors (CLF_ERR_INPUT), never a
 * silent default. Absent keys take the defaults listed in docs/CONFIG.md. */
#ifndef CLFORMER_CONFIG_H
#define CLFORMER_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "clformer/backend.h"
#include "clformer/export.h"
#include "clformer/framing.h"
#include "clformer/plugin.h"
#include "clformer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CLF_PATH_MAX 4096
#define CLF_NAME_MAX 64

typedef enum clf_norm_place {
    CLF_NORM_PRE = 0,   /* x + drop(f(LN(x)))  (the tutorials' code) */
    CLF_NORM_POST = 1,  /* LN(x + drop(f(x)))  (the paper) */
    CLF_NORM_BRANCH = 2 /* x + LN(drop(f(x)))  (a tutorial's "highway" variant) */
} clf_norm_place;

typedef enum clf_activation {
    CLF_ACT_RELU = 0,  /* built in: fused into the first FFN GEMM */
    CLF_ACT_PLUGIN = 1 /* model.activation_op, an op plugin's activation or gated activation */
} clf_activation;

typedef enum clf_output { CLF_OUTPUT_LOGITS = 0, CLF_OUTPUT_LOG_SOFTMAX = 1 } clf_output;

typedef enum clf_positional {
    CLF_POS_SINUSOIDAL = 0, /* the paper's fixed sin/cos table (computed, not a weight) */
    CLF_POS_LEARNED = 1,    /* weights src_pos.embedding.weight, tgt_pos.embedding.weight */
    /* the same frequencies as CLF_POS_SINUSOIDAL, laid out as [sin | cos] halves (Marian's
     * and fairseq's MarianSinusoidalPositionalEmbedding), computed in double */
    CLF_POS_SINUSOIDAL_SPLIT = 2,
    /* fairseq's table (M2M-100, NLLB: SinusoidalPositionalEmbedding): [sin | cos] halves with
     * frequencies 10000^(-i / (d/2 - 1)), i < d/2, computed in float32; an odd d's last
     * column 0 */
    CLF_POS_SINUSOIDAL_FAIRSEQ = 3
} clf_positional;

/* model.target_language: how the target language is given to the decoder. */
typedef enum clf_target_language {
    CLF_TGT_LANG_NONE = 0,  /* not at all (a model of one pair) */
    CLF_TGT_LANG_FORCED = 1 /* its token is decoding's first output token, with log-prob 0
                               (transformers' forced_bos_token_id: M2M-100, NLLB, mBART-50) */
} clf_target_language;

/* model.banned_ids: at most this many ids that decoding never generates. */
#define CLF_BANNED_IDS_MAX 16

/* Which matrices share tgt_embed.embedding.weight (the only name the weights file has). */
typedef enum clf_tie {
    CLF_TIE_NONE = 0,    /* three matrices */
    CLF_TIE_DECODER = 1, /* projection_layer.proj.weight = tgt_embed (paper 3.4, fairseq) */
    CLF_TIE_ALL = 2      /* and src_embed too; needs src_vocab == tgt_vocab */
} clf_tie;

typedef struct clf_model_config {
    int src_vocab, tgt_vocab; /* required, > 0 */
    int max_len;              /* PE table length; default 256 */
    int d_model;              /* default 512 */
    int encoder_layers;       /* `layers` sets both; default 6 */
    int decoder_layers;
    int heads;                 /* default 8; d_model % heads == 0 */
    int d_ff;                  /* default 2048 */
    clf_norm_place norm;       /* default pre */
    int final_norm;            /* resolved: 1/0 (auto = on for pre, off for post and branch) */
    int final_norm_auto;       /* 1 when the YAML said auto (or nothing), for --dump */
    clf_ln_style ln_style;     /* default tutorial; unused when norm_op is set */
    float ln_eps;              /* default 1e-6 */
    int attention_bias;        /* default 0 */
    clf_activation activation; /* default relu */
    clf_output output;         /* default logits */
    /* Dropout rates per site (training only), each in [0, 1). `dropout: p` sets the paper's
     * two (sublayer outputs and embeddings); `dropout: {residual, embedding, attention,
     * ffn}` sets each (absent keys keep their defaults). */
    float dropout;             /* a sublayer's output before it joins the stream; default 0.1 */
    float dropout_embedding;   /* the sum of token embedding and position; default 0.1 */
    float dropout_attention;   /* the attention probabilities (the tutorial's); default 0 */
    float dropout_ffn;         /* the FFN's hidden layer (the tutorial's); default 0 */
    int pad_id;                /* default 1 */
    clf_positional positional; /* default sinusoidal */
    /* Position t reads row t + position_offset of the positional table, which has max_len +
     * position_offset rows (fairseq's positions start at padding_idx + 1, mBART's learned
     * ones at 2). Default 0. */
    int position_offset;
    /* 1: a LayerNorm (layernorm: style and eps) on the sum of token embedding and position,
     * before its dropout, weights encoder.embed.norm.* / decoder.embed.norm.* (mBART's
     * layernorm_embedding). Default 0. */
    int embed_norm;
    clf_tie tie_embeddings; /* default none */
    /* The factor of the token embeddings: 0 = sqrt(d_model) (the default, the paper's),
     * else this number (Marian's scale_embedding: false is 1). */
    float embed_scale;
    /* Special ids; -1 (the default) = the vocabulary's own ([SOS]/<s>, [EOS]</s>, [UNK]).
     * decoder_start_id: the first decoder input (-1: bos_id, else the vocabulary's sos);
     * Marian starts from its pad id. */
    int bos_id, eos_id, unk_id, decoder_start_id;
    int source_bos, source_eos; /* frame the source with bos / eos; default 1 and 1 */
    /* Where the source language's token goes (clf_lang_place, clformer/framing.h): none (the
     * default), before the pieces (M2M-100, NLLB, mBART-50) or after the source's eos
     * (legacy NLLB, mBART-cc25). Its token: languages.token_prefix + code + token_suffix. */
    clf_lang_place source_language;
    clf_target_language target_language; /* default none */
    /* Ids from this one on are added special tokens (fairseq's language codes and made-up
     * words, appended after the pieces): decoding may produce them, the text leaves them out.
     * -1 (the default): none. */
    int specials_from;
    /* The decoded text cleaned as transformers' decode() cleans it when the tokenizer's
     * clean_up_tokenization_spaces is true (clf_text_clean_up_spaces): " ." -> "." and the
     * like. Default 0; `clformer import` sets it from tokenizer_config.json. */
    int clean_up_spaces;
    /* 1: the output projection's bias (projection_layer.proj.bias) is a constant of the model
     * that training leaves as loaded: transformers' final_logits_bias, a buffer (Marian,
     * mBART), or zeros where the model has none (M2M-100, NLLB). Default 0: trained.
     * `clformer import` sets it. */
    int fixed_output_bias;
    /* Ids decoding never generates (Marian bans pad): their score is -inf after the
     * log-softmax, as transformers' bad_words_ids does. */
    int banned_ids[CLF_BANNED_IDS_MAX];
    int n_banned_ids; /* default 0 */
    /* Op plugins (clformer/plugin.h) the YAML names; they stay loaded for the process.
     * Parsing records their names; clf_config_resolve_plugins sets the pointers. */
    const clf_plugin_op *activation_op; /* resolved: set exactly when activation == PLUGIN */
    const clf_plugin_op *norm_op;       /* layernorm.style: <plugin norm>; NULL = ln_style */
    /* model.activation / model.layernorm.style when not built in, as written ("" when
     * built in); activation is CLF_ACT_PLUGIN from parsing on when activation_op_name is. */
    char activation_op_name[CLF_PLUGIN_NAME_MAX];
    char norm_op_name[CLF_PLUGIN_NAME_MAX];
} clf_model_config;

/* The YAML spellings of model.activation and model.layernorm.style, plugin ops included. */
CLF_API const char *clf_model_activation_name(const clf_model_config *m);
CLF_API const char *clf_model_norm_style_name(const clf_model_config *m);
/* 1 when the FFN has linear_3 (a gated activation). */
CLF_API int clf_model_ffn_gated(const clf_model_config *m);
/* 1 when every norm has a .bias vector (built-in styles; plugin norms that say so). */
CLF_API int clf_model_norm_has_bias(const clf_model_config *m);

/* clf_framing (how a sentence pair is framed): clformer/framing.h. */

/* The one rule that turns the model's special-token keys into a framing; each key that is
 * -1 falls back on the vocabularies' own ids, given in *vocab as the framing they alone
 * would give (clf_tokenizer_framing: [SOS] x [EOS], [SOS] y, y [EOS], [PAD]; -1 where a
 * vocabulary lacks the token):
 *   src_bos   = source_bos ? bos_id, else the source's [SOS] : -1
 *   src_eos   = source_eos ? eos_id, else the source's [EOS] : -1
 *   tgt_start = decoder_start_id, else bos_id, else the target's [SOS]
 *   tgt_eos   = eos_id, else the target's [EOS]
 *   src_pad   = tgt_pad = pad_id
 * vocab NULL: no vocabulary at hand; the ids of the vocabularies clformer builds stand in
 * ([SOS] 2, [EOS] 3). CLF_ERR_INPUT when an id is needed but neither the config nor the
 * vocabulary gives one, naming the key to set ("the target vocabulary has no [SOS] token
 * (set model.decoder_start_id or model.bos_id)"), or when a vocabulary's [PAD] is not
 * pad_id; *out is then the partial result. */
CLF_API clf_status clf_model_framing(const clf_model_config *mc, const clf_framing *vocab,
                                     clf_framing *out);

typedef struct clf_backend_config {
    char name[CLF_NAME_MAX];       /* cpu | opencl | auto; default cpu */
    char device[CLF_NAME_MAX * 2]; /* "" = default; an index or a name substring */
    int threads;                   /* 0 = all cores */
} clf_backend_config;

typedef enum clf_optimizer_kind { CLF_OPT_ADAM = 0, CLF_OPT_ADAMW = 1 } clf_optimizer_kind;
typedef enum clf_schedule_kind {
    CLF_SCHED_CONSTANT = 0,
    CLF_SCHED_NOAM = 1,
    CLF_SCHED_INVERSE_SQRT = 2
} clf_schedule_kind;

#define CLF_LANGUAGE_CODE_MAX 16 /* bytes of a language code with its NUL: "en", "zh_Hant" */

/* What products take as inputs (`precision:` of train:, --precision of forward, bench and
 * translate; README "Precision"): F32, or BF16 / F16 inputs with F32 sums. Layernorm,
 * softmax, residual sums, the loss and the optimizer stay F32. */
typedef enum clf_precision {
    CLF_PRECISION_F32 = 0,
    CLF_PRECISION_BF16 = 1,
    CLF_PRECISION_F16 = 2
} clf_precision;

typedef struct clf_train_config {
    int present; /* 1 when the YAML has a train: section */
    /* Paths are stored as written: a relative path is relative to the working directory
     * of the process (not to the YAML's directory). */
    char data_train[CLF_PATH_MAX]; /* required; a TSV, or the source side (data_train_tgt) */
    char data_valid[CLF_PATH_MAX]; /* "" = no validation; a TSV or the source side */
    char vocab_src[CLF_PATH_MAX];  /* default "<checkpoint_dir>/src.json" (resolved) */
    char vocab_tgt[CLF_PATH_MAX];  /* default "<checkpoint_dir>/tgt.json" (resolved) */
    int min_frequency;             /* default 2 */
    char init[CLF_PATH_MAX];       /* "" = Xavier from seed */
    long long seed;                /* default 1 */
    int shuffle;                   /* default 1 */
    int batch_size;                /* default 32 */
    int batch_tokens;              /* default 0 */
    int max_len;                   /* default min(128, model.max_len); <= model.max_len */
    long long steps;               /* default 0; steps or epochs must be > 0 */
    int epochs;                    /* default 10 */
    int accumulate;                /* default 1 */
    clf_optimizer_kind optimizer;  /* default adam */
    float lr, beta1, beta2, adam_eps, weight_decay; /* 1e-4, 0.9, 0.98, 1e-9, 0 */
    clf_schedule_kind schedule;                     /* default constant */
    int warmup;                                     /* default 0; > 0 for noam and inverse_sqrt */
    float label_smoothing;                          /* default 0.1 */
    float clip_norm;                                /* default 0 (off) */
    clf_precision precision;                        /* default f32 */
    /* precision f16's dynamic loss scaling: the start scale (default 65536 = 2^16) and the
     * good steps after which it doubles (default 2000) */
    float loss_scale_init;
    int loss_scale_window;
    int log_every;                     /* default 50 */
    int validate_every;                /* default 500 */
    char checkpoint_dir[CLF_PATH_MAX]; /* default "runs/default" */
    int checkpoint_every;              /* default 500; 0 = only at the end */
    int checkpoint_keep;               /* default 3, >= 1 */

    /* data.train / data.valid given as [source, target] two line-aligned files: the target
     * files ("" when data_train / data_valid is a TSV of source<TAB>target lines) */
    char data_train_tgt[CLF_PATH_MAX];
    char data_valid_tgt[CLF_PATH_MAX];

    /* A many-language model's languages (model.source_language / target_language place
     * their tokens): codes of its languages: section ("en" for M2M-100, "eng_Latn" for
     * NLLB, "en_XX" for mBART-50), "" = none; `clformer train --source-lang/--target-lang`
     * override them. Every pair of the data is in these two languages. */
    char source_lang[CLF_LANGUAGE_CODE_MAX];
    char target_lang[CLF_LANGUAGE_CODE_MAX];
} clf_train_config;

/* The generate: section: how `clformer translate` decodes when its command line does not
 * say (each flag overrides its key). Absent, translate keeps its own defaults, which are
 * these. `clformer import marian` writes one from the model's config.json. */
typedef struct clf_generate_config {
    int present;          /* 1 when the YAML has a generate: section */
    int beam;             /* --beam; default 1 (greedy) */
    int beam_style;       /* --beam-style: clf_beam_style's values, 0 gnmt (default), 1 hf */
    float length_penalty; /* --length-penalty; -1 = auto (0.6 with a beam, else 0) */
    int max_len;          /* --max-len; 0 (default) = 2 x the longest source + 10 */
    int forced_eos;       /* --forced-eos; default 0 */
    int early_stopping;   /* --early-stopping: hf beams end a sentence once beam hypotheses
                             have finished (transformers' early_stopping=True); default 0 */
} clf_generate_config;

/* The languages: section: the language codes a model translates from and to (the
 * server's GET /languages, the Python package's source_languages). Informative unless
 * model.source_language or model.target_language places a language token: the codes are then
 * those translate accepts, and code's token is token_prefix code token_suffix
 * ("__de__" for M2M-100, "deu_Latn" for NLLB). */
#define CLF_LANGUAGES_MAX 256 /* codes per side (NLLB-200 has 202) */
/* a code: CLF_LANGUAGE_CODE_MAX bytes with its NUL ("en", "pt-BR", "zh_Hant"), above */
typedef struct clf_languages_config {
    int present; /* 1 when the YAML has a languages: section */
    char source[CLF_LANGUAGES_MAX][CLF_LANGUAGE_CODE_MAX];
    int n_source;
    char target[CLF_LANGUAGES_MAX][CLF_LANGUAGE_CODE_MAX];
    int n_target;
    char token_prefix[CLF_LANGUAGE_CODE_MAX], token_suffix[CLF_LANGUAGE_CODE_MAX]; /* "" */
} clf_languages_config;

#define CLF_CONFIG_PLUGINS_MAX 8

/* The most memory a model's config may imply at load, in bytes of F32: its positional
 * table (max_len x d_model, computed at load even when not a weight), its embeddings and
 * output projection (vocab x d_model each), and all its weights together. A config over
 * it is refused naming the keys and the product, before anything is allocated. */
#define CLF_CONFIG_MODEL_BYTES_MAX (16ll << 30)

/* Where a value was in the file: 1-based line and column (0 when not from a file). */
typedef struct clf_config_pos {
    int line, column;
} clf_config_pos;

typedef struct clf_config {
    char path[CLF_PATH_MAX]; /* the file it came from ("<string>" for parse_string) */
    /* The top-level `plugins:` list: as written after parsing, the absolute paths of the
     * loaded files after clf_config_resolve_plugins. */
    char plugins[CLF_CONFIG_PLUGINS_MAX][CLF_PATH_MAX];
    int n_plugins;
    /* Where each plugins: entry, model.activation and model.layernorm.style were, for the
     * messages of clf_config_resolve_plugins. */
    clf_config_pos plugin_pos[CLF_CONFIG_PLUGINS_MAX];
    clf_config_pos activation_pos, norm_pos;
    clf_model_config model;
    clf_backend_config backend;
    clf_train_config train;
    clf_generate_config generate;
    clf_languages_config languages;
} clf_config;

/* Fills every field with the design's defaults (src_vocab/tgt_vocab = 0: required). */
CLF_API void clf_config_defaults(clf_config *cfg);

/* Reads and validates a YAML file. On error: CLF_ERR_IO ("<path>: cannot open: <why>") or
 * CLF_ERR_INPUT with "<path>:<line>:<col>: <key>: <why>" (YAML syntax errors and an empty
 * file omit the key); *cfg then holds defaults and part of the file, to be discarded. */
CLF_API clf_status clf_config_load(const char *path, clf_config *cfg);

/* The same, searching plugin_dir first (then $CLF_PLUGIN_PATH, the build tree, the install
 * libdir) for the op plugins the YAML names; NULL: the default search path. Entries of
 * `plugins:` are loaded in order; a relative path is relative to the YAML's directory,
 * and a bare name (no '/') is clformer-plugin-<name>.so on the search path. A name that
 * no listed plugin provides is looked for in every clformer-plugin-*.so on the search
 * path. Errors name the key's file:line:col and the plugin's reason. */
CLF_API clf_status clf_config_load_with_plugins(const char *path, const char *plugin_dir,
                                                clf_config *cfg);

/* The same from a string; name stands for the path in messages. */
CLF_API clf_status clf_config_parse_string(const char *text, const char *name, clf_config *cfg);

/* The two steps of the three functions above, for a caller that wants to parse without
 * loading anything. clf_config_read and clf_config_read_string parse and check a
 * configuration but load no plugin: the `plugins:` entries stay as written, and an
 * activation or norm style that is not built in is only named (model.activation_op_name,
 * model.norm_op_name; its op pointer NULL), with its position. Weights and models refuse
 * such a config until clf_config_resolve_plugins has loaded the listed plugins (in order,
 * searching plugin_dir first as clf_config_load_with_plugins does) and found the named
 * ops; its errors name the key's file:line:col as the parser's do. */
CLF_API clf_status clf_config_read(const char *path, clf_config *cfg);
CLF_API clf_status clf_config_read_string(const char *text, const char *name, clf_config *cfg);
CLF_API clf_status clf_config_resolve_plugins(clf_config *cfg, const char *plugin_dir);

/* Opens the backend a config runs on, the one rule of every caller: the name is backend
 * if given, else $CLF_BACKEND if set, else cfg's backend.name (clf_backend_open_named, which
 * searches plugin_dir first); the device is device if given, else backend.device; threads
 * >= 0 replaces backend.threads. */
CLF_API clf_status clf_config_open_backend(const clf_config *cfg, const char *backend,
                                           const char *device, int threads, const char *plugin_dir,
                                           const clf_backend_api **api, clf_backend **be);

/* The check of CLF_CONFIG_MODEL_BYTES_MAX that reading a config makes, again: for a config
 * whose sizes were filled in after it was read (clformer train sets src_vocab / tgt_vocab
 * left at 0 from the vocabularies it loads or builds). CLF_ERR_INPUT, one line naming the
 * config's path, the keys and the product: "run.yaml: model: the weights and tables come to
 * 16.00 GiB (positional ...: max_len 16773120 x d_model; embeddings ...: src_vocab 12,
 * tgt_vocab 12 x d_model; ...), more than the limit of 16 GiB". */
CLF_API clf_status clf_config_check_model_bytes(const clf_config *cfg);

/* Writes the fully resolved config as YAML that clf_config_load reads back unchanged. */
CLF_API clf_status clf_config_dump(const clf_config *cfg, FILE *out);

/* The YAML spelling of each enum ("pre", "tutorial", "log_softmax", ...); "unknown" for
 * a value out of range. */
CLF_API const char *clf_norm_place_name(clf_norm_place n);
CLF_API const char *clf_ln_style_name(clf_ln_style s);
CLF_API const char *clf_activation_name(clf_activation a);
CLF_API const char *clf_output_name(clf_output o);
CLF_API const char *clf_positional_name(clf_positional p);
CLF_API const char *clf_lang_place_name(clf_lang_place p);
CLF_API const char *clf_target_language_name(clf_target_language t);
CLF_API const char *clf_tie_name(clf_tie t);
CLF_API const char *clf_optimizer_name(clf_optimizer_kind o);
CLF_API const char *clf_schedule_name(clf_schedule_kind s);
CLF_API const char *clf_precision_name(clf_precision p); /* "f32", "bf16", "f16" */
/* The precision spelled s; CLF_ERR_INPUT "precision 's' is not one of f32, bf16, f16". */
CLF_API clf_status clf_precision_parse(const char *s, clf_precision *out);
/* generate.beam_style: "gnmt" or "hf" */
CLF_API const char *clf_beam_style_name(int style);

#ifdef __cplusplus
}
#endif
#endif
