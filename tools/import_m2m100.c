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
 * and target.spm are both sentencepiece.bpe.model.
 *
 * NLLB-200 is the same model with NllbTokenizer's vocabulary (import_nllb.c): which
 * tokenizer a directory has is tokenizer_config.json's tokenizer_class (else config.json's;
 * else M2M-100 when there is a vocab.json, NLLB when not). */
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

/* tokenizer_config.json's language_codes (m2m100 when absent; tc NULL: no such file) ->
 * the code list */
static clf_status language_codes(importer *im, const json_t *tc, const char *const **codes, int *n)
{
    *codes = codes_m2m100;
    *n = (int)(sizeof codes_m2m100 / sizeof codes_m2m100[0]);
    const json_t *lc = tc ? json_object_get(tc, "language_codes") : NULL;
    if (json_is_string(lc) && !strcmp(json_string_value(lc), "wmt21")) {
        *codes = codes_wmt21;
        *n = (int)(sizeof codes_wmt21 / sizeof codes_wmt21[0]);
    } else if (lc && !(json_is_string(lc) && !strcmp(json_string_value(lc), "m2m100"))) {
        return clf_error(CLF_ERR_INPUT,
                         "%s/tokenizer_config.json: language_codes: expected \"m2m100\" or "
                         "\"wmt21\" (M2M100Tokenizer's)",
                         im->hf);
    }
    return CLF_OK;
}

/* M2M100Tokenizer's vocabulary: the SentencePiece model and vocab.json checked (</s> eos,
 * <pad> pad), and the model directory's vocab.json made: HF's, then the language tokens
 * __xx__, then made-up words up to vocab_size. */
static clf_status m2m100_vocab(importer *im, const import_common *c, const json_t *tc,
                               import_languages *langs)
{
    char vocab[CLF_PATH_MAX];
    clf_tokenizer *tok = NULL;
    json_t *root = NULL;
    const char *const *codes;
    int n_codes;
    clf_status st = language_codes(im, tc, &codes, &n_codes);
    if (st != CLF_OK)
        return st;
    snprintf(im->spm_path, sizeof im->spm_path, "%s", import_in_dir(im, im->hf, M2M_SPM));
    snprintf(vocab, sizeof vocab, "%s", import_in_dir(im, im->hf, MODEL_DIR_VOCAB));
    if ((st = clf_tokenizer_load_mapped(im->spm_path, vocab, &tok)) != CLF_OK)
        return st;
    const int size = clf_tokenizer_size(tok);
    clf_tokenizer_specials sp = clf_tokenizer_special_ids(tok);
    clf_tokenizer_free(tok);
    if (sp.eos != c->eos || sp.pad != c->pad)
        return clf_error(CLF_ERR_INPUT,
                         "%s: </s> is %d and <pad> %d, but config.json says eos_token_id %lld "
                         "and pad_token_id %lld",
                         vocab, sp.eos, sp.pad, c->eos, c->pad);
    if ((long long)size + n_codes > c->V)
        return clf_error(CLF_ERR_INPUT,
                         "%s: %d pieces and %d language codes, more than config.json's "
                         "vocab_size %lld",
                         vocab, size, n_codes, c->V);
    if ((st = clf_json_parse_file(vocab, CLF_TOKENIZER_JSON_MAX, &root)) != CLF_OK)
        return st;
    for (long long id = size; id < c->V && st == CLF_OK; id++) {
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
    for (int i = 0; i < n_codes; i++)
        snprintf(langs->codes[i], sizeof langs->codes[i], "%s", codes[i]);
    langs->n_codes = n_codes;
    langs->prefix = langs->suffix = "__";
    langs->place = "before";
    langs->specials_from = size;
    return st;
}

/* Whether the m2m_100 model has NllbTokenizer's vocabulary (see the top). */
static clf_status is_nllb(importer *im, const json_t *tc, int *nllb)
{
    const json_t *cls = tc ? json_object_get(tc, "tokenizer_class") : NULL;
    const char *file = "tokenizer_config.json";
    if (!cls || json_is_null(cls)) {
        cls = json_object_get(im->cfg, "tokenizer_class");
        file = "config.json";
    }
    if (!cls || json_is_null(cls)) {
        int vocab = 0;
        clf_status st = cli_optional_file(import_in_dir(im, im->hf, MODEL_DIR_VOCAB), &vocab);
        *nllb = !vocab;
        return st;
    }
    const char *name = json_string_value(cls);
    *nllb = name && (!strcmp(name, "NllbTokenizer") || !strcmp(name, "NllbTokenizerFast"));
    if (*nllb || (name && (!strcmp(name, "M2M100Tokenizer"))))
        return CLF_OK;
    char *v = json_dumps(cls, JSON_ENCODE_ANY | JSON_COMPACT);
    clf_status st = clf_error(CLF_ERR_INPUT,
                              "%s/%s: tokenizer_class = %s: clformer imports model_type m2m_100 "
                              "with \"NllbTokenizer\" or \"M2M100Tokenizer\"",
                              im->hf, file, v ? v : "?");
    free(v);
    return st;
}

static clf_status read_config(importer *im)
{
    static const import_defaults def = {.maxpos = 1024,
                                        .pad = 1,
                                        .eos = 2,
                                        .has_bos = 1,
                                        .start_from_eos = 1,
                                        .scale = 1,
                                        .adrop = 0.1};
    import_common c;
    import_languages *langs = calloc(1, sizeof *langs);
    json_t *tc = NULL;
    int nllb = 0;
    clf_status st;
    if (!langs)
        return clf_error(CLF_ERR_NOMEM, "import: out of host memory");
    if ((st = check_fixed(im)) != CLF_OK || (st = import_read_common(im, &def, &c)) != CLF_OK ||
        (st = import_read_json(im, "tokenizer_config.json", 1, &tc)) != CLF_OK ||
        (st = is_nllb(im, tc, &nllb)) != CLF_OK ||
        (st = nllb ? import_nllb_vocab(im, &c, tc, langs) : m2m100_vocab(im, &c, tc, langs)) !=
            CLF_OK)
        goto done;
    if ((st = import_yaml_model(im, "import",
                                nllb ? "M2M100ForConditionalGeneration, NllbTokenizer"
                                     : "M2M100ForConditionalGeneration, M2M100Tokenizer",
                                &c, 1)) != CLF_OK ||
        (st = import_yaml(
             im,
             "  positional: sinusoidal_fairseq\n  position_offset: %lld\n"
             "  tie_embeddings: all\n  embed_scale: %s\n  bos_id: %lld\n  eos_id: %lld\n"
             "  decoder_start_id: %lld\n  source_bos: false\n  source_eos: true\n"
             "  source_language: %s\n  target_language: forced\n  specials_from: %d\n",
             c.pad + 1, c.scale ? "sqrt_d_model" : "1.0", c.bos, c.eos, c.start, langs->place,
             langs->specials_from)) != CLF_OK ||
        (st = import_read_clean_up(im, im->yaml, sizeof im->yaml)) != CLF_OK ||
        (st = import_read_generate(im, c.eos, c.maxpos, im->yaml, sizeof im->yaml)) != CLF_OK ||
        /* M2M-100's __xx__ in token_prefix and token_suffix; NLLB's codes are their own tokens */
        (st = import_yaml_languages(im, langs, *langs->prefix != '\0')) != CLF_OK)
        goto done;
    st = import_yaml_parse(im);
done:
    json_decref(tc);
    free(langs);
    return st;
}

const import_family clf_import_m2m100 = {
    .model_type = "m2m_100",
    .what = "an M2M100ForConditionalGeneration (M2M-100, NLLB-200)",
    .read_config = read_config,
    .zero_proj_bias = 1,
    .final_norms = 1};
