/* The M2M-100 family of clformer import (import.h): a transformers
 * M2M100ForConditionalGeneration (model_type m2m_100: facebook/m2m100_418M, _1.2B) as
 * config.json, model.safetensors, sentencepiece.bpe.model and vocab.json.
 *
 * What M2M-100 is, in clformer's terms (transformers 4.40's modeling_m2m_100.py): pre-norm
 * layers (x + f(LN(x)), torch.nn.LayerNorm with eps 1e-5) with a final norm on each stack
 * (model.encoder.layer_norm, model.decoder.layer_norm), biases on every attention
 * projection and FFN layer, the FFN's activation_function, embeddings scaled by
 * sqrt(d_model) when scale_embedding, fairseq's sinusoidal table ([sin | cos] halves with
 * frequencies 10000^(-i/(d/2 - 1)), not stored) read from row padding_idx + 1 on
 * (positional: sinusoidal_fairseq, position_offset: pad + 1), one matrix for both
 * embeddings and the output projection, which has no bias (zeros here). The source is
 * __src__ pieces </s> (source_language: before, source_eos), the decoder starts from
 * decoder_start_token_id (</s>) and the target language's token __tgt__ is the forced first
 * token (target_language: forced, transformers' forced_bos_token_id).
 *
 * The vocabulary (M2M100Tokenizer): vocab.json maps the SentencePiece model's pieces to ids
 * (fairseq's dictionary: <s> <pad> </s> <unk>, then the pieces); the language tokens __xx__
 * of tokenizer_config.json's language_codes (m2m100: 100 codes, wmt21: 8) follow it, then
 * made-up words up to vocab_size. The model directory's vocab.json is HF's with those
 * appended (ids from len(vocab.json) on are specials_from: never text), and its source.spm
 * and target.spm are both sentencepiece.bpe.model. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "import.h"
#include "model_dir.h"
#include "clformer/json.h"
#include "clformer/tokenizer.h"

#define M2M_SPM "sentencepiece.bpe.model"

/* transformers' FAIRSEQ_LANGUAGE_CODES, in their order (the ids follow it) */
static const char *const codes_m2m100[] = {
    "af", "am", "ar", "ast", "az", "ba", "be", "bg", "bn", "br",  "bs", "ca", "ceb", "cs", "cy",
    "da", "de", "el", "en",  "es", "et", "fa", "ff", "fi", "fr",  "fy", "ga", "gd",  "gl", "gu",
    "ha", "he", "hi", "hr",  "ht", "hu", "hy", "id", "ig", "ilo", "is", "it", "ja",  "jv", "ka",
    "kk", "km", "kn", "ko",  "lb", "lg", "ln", "lo", "lt", "lv",  "mg", "mk", "ml",  "mn", "mr",
    "ms", "my", "ne", "nl",  "no", "ns", "oc", "or", "pa", "pl",  "ps", "pt", "ro",  "ru", "sd",
    "si", "sk", "sl", "so",  "sq", "sr", "ss", "su", "sv", "sw",  "ta", "th", "tl",  "tn", "tr",
    "uk", "ur", "uz", "vi",  "wo", "xh", "yi", "yo", "zh", "zu",
};
static const char *const codes_wmt21[] = {"en", "ha", "is", "ja", "cs", "ru", "zh", "de"};

/* Keys of M2M100Config that change the arithmetic in a way model.yaml cannot say. */
static clf_status check_fixed(const importer *im)
{
    static const char *const false_keys[] = {"is_decoder", "add_cross_attention"};
    for (size_t i = 0; i < sizeof false_keys / sizeof false_keys[0]; i++)
        if (json_is_true(json_object_get(im->cfg, false_keys[i])))
            return import_bad_key(im, false_keys[i],
                                  "clformer's M2M-100 import supports only false");
    return CLF_OK;
}

/* tokenizer_config.json's language_codes (m2m100 when absent) -> the code list */
static clf_status language_codes(importer *im, const char *const **codes, int *n)
{
    const char *path = import_in_dir(im, im->hf, "tokenizer_config.json");
    int present = 0;
    json_t *tc = NULL;
    clf_status st = cli_optional_file(path, &present);
    if (st != CLF_OK)
        return st;
    *codes = codes_m2m100;
    *n = (int)(sizeof codes_m2m100 / sizeof codes_m2m100[0]);
    if (!present)
        return CLF_OK;
    if ((st = clf_json_parse_file(path, IMPORT_CONFIG_JSON_MAX, &tc)) != CLF_OK)
        return st;
    const json_t *lc = json_is_object(tc) ? json_object_get(tc, "language_codes") : NULL;
    if (json_is_string(lc) && !strcmp(json_string_value(lc), "wmt21")) {
        *codes = codes_wmt21;
        *n = (int)(sizeof codes_wmt21 / sizeof codes_wmt21[0]);
    } else if (lc && !(json_is_string(lc) && !strcmp(json_string_value(lc), "m2m100"))) {
        st = clf_error(CLF_ERR_INPUT,
                       "%s: language_codes: expected \"m2m100\" or \"wmt21\" (M2M100Tokenizer's)",
                       path);
    }
    json_decref(tc);
    return st;
}

/* The SentencePiece model and vocab.json checked (M2M100Tokenizer's ids: </s> eos, <pad>
 * pad), and the model directory's vocab.json made: HF's, then the language tokens, then
 * made-up words up to V. *n_pieces: HF's entries. */
static clf_status make_vocab(importer *im, long long V, long long pad, long long eos,
                             const char *const *codes, int n_codes, int *n_pieces)
{
    char vocab[CLF_PATH_MAX];
    clf_tokenizer *tok = NULL;
    json_t *root = NULL;
    snprintf(im->spm_path, sizeof im->spm_path, "%s", import_in_dir(im, im->hf, M2M_SPM));
    snprintf(vocab, sizeof vocab, "%s", import_in_dir(im, im->hf, MODEL_DIR_VOCAB));
    clf_status st = clf_tokenizer_load_mapped(im->spm_path, vocab, &tok);
    if (st != CLF_OK)
        return st;
    const int size = clf_tokenizer_size(tok);
    clf_tokenizer_specials sp = clf_tokenizer_special_ids(tok);
    clf_tokenizer_free(tok);
    if (sp.eos != eos || sp.pad != pad)
        return clf_error(CLF_ERR_INPUT,
                         "%s: </s> is %d and <pad> %d, but config.json says eos_token_id %lld "
                         "and pad_token_id %lld",
                         vocab, sp.eos, sp.pad, eos, pad);
    if ((long long)size + n_codes > V)
        return clf_error(CLF_ERR_INPUT,
                         "%s: %d pieces and %d language codes, more than config.json's "
                         "vocab_size %lld",
                         vocab, size, n_codes, V);
    if ((st = clf_json_parse_file(vocab, CLF_TOKENIZER_JSON_MAX, &root)) != CLF_OK)
        return st;
    for (long long id = size; id < V && st == CLF_OK; id++) {
        char word[64];
        if (id < size + n_codes)
            snprintf(word, sizeof word, "__%s__", codes[id - size]);
        else
            snprintf(word, sizeof word, "madeupword%04lld", id - size - n_codes);
        if (json_object_get(root, word))
            st = clf_error(CLF_ERR_INPUT,
                           "%s: '%s' is already a piece, and is M2M-100's added "
                           "token %lld",
                           vocab, word, id);
        else if (json_object_set_new(root, word, json_integer(id)) != 0)
            st = clf_error(CLF_ERR_NOMEM, "import: out of host memory");
    }
    if (st == CLF_OK && !(im->vocab_text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER)))
        st = clf_error(CLF_ERR_NOMEM, "import: out of host memory");
    json_decref(root);
    im->spm_from = im->spm_path;
    *n_pieces = size;
    return st;
}

/* appends "[c0, c1, ...]" to yaml */
static int put_codes(char *yaml, size_t size, const char *const *codes, int n)
{
    size_t used = strlen(yaml);
    for (int i = 0; i < n; i++) {
        int k = snprintf(yaml + used, size - used, "%s%s", i ? ", " : "[", codes[i]);
        if (k < 0 || (size_t)k >= size - used)
            return -1;
        used += (size_t)k;
    }
    int k = snprintf(yaml + used, size - used, "]\n");
    return k < 0 || (size_t)k >= size - used ? -1 : 0;
}

static clf_status read_config(importer *im)
{
    clf_status st = check_fixed(im);
    if (st != CLF_OK)
        return st;
    long long V, d, el, dl, eh, dh, ef, df, maxpos, pad, eos, bos, start;
    int scale;
    double drop, adrop, actdrop;
    if ((st = import_get_int(im, "vocab_size", -1, 1, &V)) != CLF_OK ||
        (st = import_get_int(im, "d_model", -1, 1, &d)) != CLF_OK ||
        (st = import_get_int(im, "encoder_layers", -1, 1, &el)) != CLF_OK ||
        (st = import_get_int(im, "decoder_layers", -1, 1, &dl)) != CLF_OK ||
        (st = import_get_int(im, "encoder_attention_heads", -1, 1, &eh)) != CLF_OK ||
        (st = import_get_int(im, "decoder_attention_heads", -1, 1, &dh)) != CLF_OK ||
        (st = import_get_int(im, "encoder_ffn_dim", -1, 1, &ef)) != CLF_OK ||
        (st = import_get_int(im, "decoder_ffn_dim", -1, 1, &df)) != CLF_OK ||
        (st = import_get_int(im, "max_position_embeddings", 1024, 2, &maxpos)) != CLF_OK ||
        (st = import_get_int(im, "pad_token_id", 1, 0, &pad)) != CLF_OK ||
        (st = import_get_int(im, "eos_token_id", 2, 0, &eos)) != CLF_OK ||
        (st = import_get_int(im, "bos_token_id", 0, 0, &bos)) != CLF_OK ||
        (st = import_get_int(im, "decoder_start_token_id", eos, 0, &start)) != CLF_OK ||
        (st = import_get_bool(im, "scale_embedding", 1, &scale)) != CLF_OK ||
        (st = import_get_float(im, "dropout", 0.1, &drop)) != CLF_OK ||
        (st = import_get_float(im, "attention_dropout", 0.1, &adrop)) != CLF_OK ||
        (st = import_get_float(im, "activation_dropout", 0.0, &actdrop)) != CLF_OK)
        return st;
    const char *const id_keys[4] = {"pad_token_id", "eos_token_id", "bos_token_id",
                                    "decoder_start_token_id"};
    const long long ids[4] = {pad, eos, bos, start};
    for (int i = 0; i < 4; i++)
        if (ids[i] >= V) {
            char why[96];
            snprintf(why, sizeof why,
                     "expected an id of the vocabulary, 0 to %lld (vocab_size %lld)", V - 1, V);
            return import_bad_key(im, id_keys[i], why);
        }
    if (dh != eh)
        return import_bad_key(im, "decoder_attention_heads",
                              "differs from encoder_attention_heads (clformer has one "
                              "model.heads)");
    if (df != ef)
        return import_bad_key(im, "decoder_ffn_dim",
                              "differs from encoder_ffn_dim (clformer has one model.d_ff)");
    const json_t *act = json_object_get(im->cfg, "activation_function");
    const char *activation =
        json_is_string(act) ? import_activation_of(json_string_value(act)) : NULL;
    if (!activation)
        return import_bad_key(im, "activation_function",
                              "not one clformer has (relu, swish, silu, gelu, gelu_new)");
    const char *const rate_keys[3] = {"dropout", "attention_dropout", "activation_dropout"};
    const double rates[3] = {drop, adrop, actdrop};
    for (int i = 0; i < 3; i++)
        if (!(rates[i] >= 0 && rates[i] < 1))
            return import_bad_key(im, rate_keys[i], "dropout rates must be in [0, 1)");
    const char *const *codes;
    int n_codes, n_pieces;
    if ((st = language_codes(im, &codes, &n_codes)) != CLF_OK ||
        (st = make_vocab(im, V, pad, eos, codes, n_codes, &n_pieces)) != CLF_OK)
        return st;
    int n =
        snprintf(im->yaml, sizeof im->yaml,
                 "# Imported by `clformer import` from %s (a transformers "
                 "M2M100ForConditionalGeneration).\n"
                 "model:\n"
                 "  src_vocab: %lld\n  tgt_vocab: %lld\n  max_len: %lld\n  d_model: %lld\n"
                 "  encoder_layers: %lld\n  decoder_layers: %lld\n  heads: %lld\n"
                 "  d_ff: %lld\n  norm: pre\n  final_norm: true\n"
                 "  layernorm: {style: standard, eps: 1.0e-5}\n  attention_bias: true\n"
                 "  activation: %s\n  output: logits\n"
                 "  dropout: {residual: %.9g, embedding: %.9g, attention: %.9g, ffn: %.9g}\n"
                 "  pad_id: %lld\n  positional: sinusoidal_fairseq\n  position_offset: %lld\n"
                 "  tie_embeddings: all\n  embed_scale: %s\n  bos_id: %lld\n  eos_id: %lld\n"
                 "  decoder_start_id: %lld\n  source_bos: false\n  source_eos: true\n"
                 "  source_language: before\n  target_language: forced\n  specials_from: %d\n",
                 im->hf, V, V, maxpos, d, el, dl, eh, ef, activation, drop, drop, adrop, actdrop,
                 pad, pad + 1, scale ? "sqrt_d_model" : "1.0", bos, eos, start, n_pieces);
    if (n < 0 || (size_t)n >= sizeof im->yaml)
        return clf_error(CLF_ERR_INPUT, "%s/config.json: the path is too long", im->hf);
    if ((st = import_read_generate(im, eos, maxpos, im->yaml, sizeof im->yaml)) != CLF_OK)
        return st;
    size_t used = strlen(im->yaml);
    snprintf(im->yaml + used, sizeof im->yaml - used,
             "languages:\n  token_prefix: \"__\"\n  token_suffix: \"__\"\n  source: ");
    if (put_codes(im->yaml, sizeof im->yaml, codes, n_codes) != 0 ||
        snprintf(im->yaml + strlen(im->yaml), sizeof im->yaml - strlen(im->yaml), "  target: ") <
            0 ||
        put_codes(im->yaml, sizeof im->yaml, codes, n_codes) != 0)
        return clf_error(CLF_ERR_INPUT, "%s/config.json: the path is too long", im->hf);
    st = clf_config_parse_string(im->yaml, "model.yaml (from config.json)", &im->config);
    if (st != CLF_OK)
        return clf_error_context(st, "%s/config.json", im->hf);
    return CLF_OK;
}

const import_family clf_import_m2m100 = {.model_type = "m2m_100",
                                         .what = "an M2M100ForConditionalGeneration (M2M-100)",
                                         .read_config = read_config,
                                         .zero_proj_bias = 1,
                                         .final_norms = 1};
