/* clformer import: what cmd_import.c (the command, the family table and the steps every
 * family shares) and the one file per family (import_<family>.c) share. A family reads
 * HF_DIR/config.json into model.yaml's text and says how its weights and tokenizer files
 * become clformer's; cmd_import.c converts the weights and writes the model directory. */
#ifndef CLF_IMPORT_H
#define CLF_IMPORT_H

#include <jansson.h>
#include <stddef.h>

#include "clformer/config.h"
#include "clformer/tensor.h"

/* config.json is about 1 KB; a larger one is not a config, refused before it is read
 * (README, "Limits"). Read by clformer's JSON reader (clformer/json.h), with the nesting and
 * string limits and the error messages of every JSON file clformer reads. */
#define IMPORT_CONFIG_JSON_MAX ((size_t)1 << 20)
/* model.yaml: the model: and generate: sections and up to two lists of language codes */
#define IMPORT_YAML_MAX 16384

typedef struct importer importer;

/* One family of transformers models (config.json's model_type). */
typedef struct import_family {
    const char *model_type; /* "marian", "m2m_100" */
    const char *what;       /* "a MarianMTModel (OPUS-MT)", for usage and messages */
    /* config.json (im->cfg) -> im->yaml and im->config, and the tokenizer files checked */
    clf_status (*read_config)(importer *im);
    /* 1: the HF file has no projection bias (zeros); 0: final_logits_bias */
    int zero_proj_bias;
    /* 1: model.encoder.layer_norm / model.decoder.layer_norm are the final norms */
    int final_norms;
} import_family;

struct importer {
    const char *hf, *out;
    const import_family *family;
    char path[CLF_PATH_MAX]; /* scratch for file names */
    json_t *cfg;
    const char *cfg_name; /* the file cfg came from, for messages: config.json unless set */
    char yaml[IMPORT_YAML_MAX];
    clf_config config;
    clf_safetensors *st;
    clf_tensor *tensors;
    int n_tensors;
    /* the tokenizer files the model directory gets: source.spm and target.spm copied from
     * spm_from (NULL: HF_DIR's own source.spm and target.spm), vocab.json written from
     * vocab_text (NULL: HF_DIR's vocab.json copied) */
    const char *spm_from;
    char *vocab_text;
    char spm_path[CLF_PATH_MAX];
};

extern const import_family clf_import_marian, clf_import_m2m100;
extern const import_family clf_import_mbart;

/* What every family reads from config.json: the two stacks' shape, the special ids and the
 * dropout rates (transformers' names: vocab_size, d_model, encoder_layers, ...). */
typedef struct import_common {
    long long V, d, enc_layers, dec_layers, heads, ffn, maxpos, pad, eos, bos, start;
    int scale;                   /* scale_embedding */
    double drop, adrop, actdrop; /* dropout, attention_dropout, activation_dropout */
    const char *activation;      /* model.activation of activation_function */
} import_common;

/* A family's defaults for the keys config.json may leave out (-1: required). */
typedef struct import_defaults {
    long long maxpos, pad, eos;
    int has_bos; /* 1: bos_token_id is read (default 0) and checked */
    /* decoder_start_token_id's default: eos_token_id, else bos_token_id (mBART), else pad */
    int start_from_eos, start_from_bos;
    int scale;
    double adrop;
    const char *activation; /* activation_function when absent or null; NULL: required */
} import_defaults;

/* The language tokens of a family whose model places them (model.source_language,
 * target_language): the codes in id order, their tokens' spelling, the source token's
 * place, and the first id that is never text (model.specials_from). */
typedef struct import_languages {
    char codes[CLF_LANGUAGES_MAX][CLF_LANGUAGE_CODE_MAX];
    int n_codes;
    const char *prefix, *suffix; /* "__" "__" for M2M-100, "" "" for NLLB */
    const char *place;           /* "before" or "after" */
    int specials_from;
} import_languages;

/* NllbTokenizer's vocabulary (import_nllb.c), for the m2m_100 family: im->vocab_text and
 * im->spm_from made from sentencepiece.bpe.model and tokenizer_config.json (tc, NULL when
 * absent), the languages filled. */
clf_status import_nllb_vocab(importer *im, const import_common *c, json_t *tc,
                             import_languages *langs);

/* dir/name in im->path */
const char *import_in_dir(importer *im, const char *dir, const char *name);
/* "HF_DIR/config.json: key = value: why" (generation_config.json while that is read) */
clf_status import_bad_key(const importer *im, const char *key, const char *why);
/* An integer key >= lo; def when absent (def < lo: required). */
clf_status import_get_int(const importer *im, const char *key, long long def, long long lo,
                          long long *out);
clf_status import_get_bool(const importer *im, const char *key, int def, int *out);
clf_status import_get_float(const importer *im, const char *key, double def, double *out);
/* model.yaml's text (im->yaml), written in order: import_yaml_model starts it with a comment
 * naming command (`clformer <command>`), the source and what (the transformers class) and
 * the model: keys config.json gives every family (c's sizes, activation and rates, pad_id;
 * pre_norm: norm pre with a final norm, else post without); import_yaml appends printf's
 * text (the family's own keys); import_yaml_languages the languages: section of l's codes
 * (affixes: with its token_prefix and token_suffix); import_yaml_parse reads the whole into
 * im->config. Text that does not fit is CLF_ERR_INPUT, "HF_DIR/config.json: the path is
 * too long"; a parse error is put in config.json's context. */
clf_status import_yaml_model(importer *im, const char *command, const char *what,
                             const import_common *c, int pre_norm);
clf_status import_yaml(importer *im, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
clf_status import_yaml_languages(importer *im, const import_languages *l, int affixes);
clf_status import_yaml_parse(importer *im);
/* HF_DIR/name as a JSON object (at most IMPORT_CONFIG_JSON_MAX bytes) into *out; with
 * optional, *out is NULL when the file is absent. */
clf_status import_read_json(importer *im, const char *name, int optional, json_t **out);
/* config.json's shared keys (import_common) with the family's defaults, checked: the ids
 * within vocab_size, one heads and d_ff for both stacks, an activation clformer has, rates
 * in [0, 1). */
clf_status import_read_common(importer *im, const import_defaults *def, import_common *c);
/* Appends model.clean_up_spaces to yaml[size] (inside its model: section) from
 * tokenizer_config.json's clean_up_tokenization_spaces, as transformers 4.40 reads it: true
 * when the file or the key is absent, false for null. */
clf_status import_read_clean_up(importer *im, char *yaml, size_t size);
/* Appends the generate: section to yaml[size] from generation_config.json, else config.json
 * (transformers' generate() defaults: num_beams, max_length / max_new_tokens,
 * length_penalty, forced_eos_token_id, early_stopping true or false). */
clf_status import_read_generate(importer *im, long long eos, long long maxpos, char *yaml,
                                size_t size);

#endif
