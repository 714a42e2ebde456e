/* The mBART family of clformer import (import.h): a transformers
 * MBartForConditionalGeneration with MBart50Tokenizer's files (model_type mbart:
 * facebook/mbart-large-50-many-to-many-mmt, -one-to-many-mmt, -many-to-one-mmt) as
 * config.json, model.safetensors and sentencepiece.bpe.model.
 *
 * What mBART is, in clformer's terms (transformers 4.40's modeling_mbart.py): pre-norm
 * layers (x + f(LN(x)), torch.nn.LayerNorm with eps 1e-5) with a final norm on each stack
 * (model.encoder.layer_norm, model.decoder.layer_norm), a LayerNorm on the sum of token
 * embedding and position (layernorm_embedding: embed_norm), learned positions whose tables
 * (model.{encoder,decoder}.embed_positions.weight, [max_position_embeddings + 2, d]) are read
 * from row 2 on (MBartLearnedPositionalEmbedding's offset: position_offset 2), embeddings
 * scaled by sqrt(d_model) when scale_embedding, biases on every attention projection and FFN
 * layer, the FFN's activation_function, one matrix for both embeddings and the output
 * projection, whose bias is final_logits_bias (zeros when the file leaves it out, as
 * transformers' buffer starts). MBartConfig has no switch for any of that: the keys older
 * BART configs carry (normalize_before, add_final_layer_norm, normalize_embedding,
 * static_position_embeddings, add_bias_logits, extra_pos_embeddings) are accepted with the
 * value that says this model and refused with any other (transformers ignores them: a
 * checkpoint that needs another value is not one it runs right either).
 *
 * The source is [src_lang_code] pieces </s> (source_language: before, source_eos), the
 * decoder starts from decoder_start_token_id (</s> in mBART-50's config.json) and the target
 * language's code is the forced first token (target_language: forced, forced_bos_token_id).
 *
 * The vocabulary (MBart50Tokenizer): fairseq's <s> <pad> </s> <unk> (0-3), then SentencePiece
 * piece i as id i + 1 (pieces 0-2, the model's <unk> <s> </s>, have fairseq's ids instead),
 * then the 52 language codes (ar_AR ... sl_SI) and <mask>. The hub's directory has no
 * vocab.json: the import writes one from the SentencePiece model (ids from the first code on
 * are specials_from: never text), and source.spm and target.spm are sentencepiece.bpe.model. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "import.h"
#include "clformer/tokenizer.h"

#define MBART_SPM "sentencepiece.bpe.model"

/* transformers' FAIRSEQ_LANGUAGE_CODES of tokenization_mbart50.py, in their order (the ids
 * follow it) */
static const char *const codes_mbart50[] = {
    "ar_AR", "cs_CZ", "de_DE", "en_XX", "es_XX", "et_EE", "fi_FI", "fr_XX", "gu_IN",
    "hi_IN", "it_IT", "ja_XX", "kk_KZ", "ko_KR", "lt_LT", "lv_LV", "my_MM", "ne_NP",
    "nl_XX", "ro_RO", "ru_RU", "si_LK", "tr_TR", "vi_VN", "zh_CN", "af_ZA", "az_AZ",
    "bn_IN", "fa_IR", "he_IL", "hr_HR", "id_ID", "ka_GE", "km_KH", "mk_MK", "ml_IN",
    "mn_MN", "mr_IN", "pl_PL", "ps_AF", "pt_XX", "sv_SE", "sw_KE", "ta_IN", "te_IN",
    "th_TH", "tl_XX", "uk_UA", "ur_PK", "xh_ZA", "gl_ES", "sl_SI",
};
#define N_CODES ((int)(sizeof codes_mbart50 / sizeof codes_mbart50[0]))

/* fairseq's dictionary before the pieces, at ids 0..3 */
static const char *const fairseq_specials[] = {"<s>", "<pad>", "</s>", "<unk>"};

/* Keys of older BART configs (and PretrainedConfig) that would change the arithmetic, with
 * the one value MBartForConditionalGeneration has; absent is that value. */
static clf_status check_fixed(const importer *im)
{
    static const struct {
        const char *key;
        int want;
    } fixed[] = {{"normalize_before", 1},    {"add_final_layer_norm", 1},
                 {"normalize_embedding", 1}, {"static_position_embeddings", 0},
                 {"add_bias_logits", 0},     {"is_decoder", 0},
                 {"add_cross_attention", 0}, {"tie_word_embeddings", 1}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        const json_t *v = json_object_get(im->cfg, fixed[i].key);
        if (v && !json_is_null(v) && (!json_is_boolean(v) || json_is_true(v) != fixed[i].want))
            return import_bad_key(im, fixed[i].key,
                                  fixed[i].want ? "clformer's mBART import supports only true "
                                                  "(MBartForConditionalGeneration's layout)"
                                                : "clformer's mBART import supports only false "
                                                  "(MBartForConditionalGeneration's layout)");
    }
    const json_t *extra = json_object_get(im->cfg, "extra_pos_embeddings");
    if (extra && !json_is_null(extra) &&
        !(json_is_integer(extra) && json_integer_value(extra) == 2))
        return import_bad_key(im, "extra_pos_embeddings",
                              "mBART's learned positions start at row 2 (expected 2)");
    static const char *const tok_keys[] = {"tokenizer_class"};
    for (size_t i = 0; i < sizeof tok_keys / sizeof tok_keys[0]; i++) {
        const json_t *v = json_object_get(im->cfg, tok_keys[i]);
        if (v && !json_is_null(v) &&
            !(json_is_string(v) && (!strcmp(json_string_value(v), "MBart50Tokenizer") ||
                                    !strcmp(json_string_value(v), "MBart50TokenizerFast"))))
            return import_bad_key(im, tok_keys[i],
                                  "clformer imports mBART-50 (MBart50Tokenizer); mBART-cc25's "
                                  "MBartTokenizer frames the source otherwise");
    }
    return CLF_OK;
}

/* The SentencePiece model checked and the model directory's vocab.json made from it:
 * fairseq's four, piece i as i + 1 (i >= 3), the language codes, <mask>, then made-up words up
 * to V (never produced by the tokenizer). *n_ids: the ids before the codes. */
static clf_status make_vocab(importer *im, long long V, long long pad, long long eos, long long bos,
                             int *n_ids)
{
    clf_tokenizer *tok = NULL;
    json_t *root = NULL;
    snprintf(im->spm_path, sizeof im->spm_path, "%s", import_in_dir(im, im->hf, MBART_SPM));
    const char *spm = im->spm_path;
    clf_status st = clf_tokenizer_load(spm, &tok);
    if (st != CLF_OK)
        return st;
    if (clf_tokenizer_get_kind(tok) != CLF_TOKENIZER_SENTENCEPIECE) {
        clf_tokenizer_free(tok);
        return clf_error(CLF_ERR_INPUT, "%s: not a SentencePiece model", spm);
    }
    const int n = clf_tokenizer_size(tok);
    /* MBart50Tokenizer gives spm id 0 the unk id and pieces 1 and 2 the ids of <s> and </s>:
     * the model's first three pieces must be those */
    static const char *const first[3] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; i < 3 && st == CLF_OK; i++) {
        const char *w = i < n ? clf_tokenizer_word(tok, i) : NULL;
        if (!w || strcmp(w, first[i]))
            st = clf_error(CLF_ERR_INPUT,
                           "%s: piece %d is '%s', not %s (MBart50Tokenizer's fairseq ids need "
                           "<unk> <s> </s> as pieces 0 to 2)",
                           spm, i, w ? w : "(none)", first[i]);
    }
    const long long need = (long long)n + 1 + N_CODES + 1;
    if (st == CLF_OK && (pad != 1 || eos != 2 || bos != 0))
        st = clf_error(CLF_ERR_INPUT,
                       "%s/config.json: pad_token_id %lld, eos_token_id %lld, bos_token_id "
                       "%lld: MBart50Tokenizer's are 1, 2 and 0",
                       im->hf, pad, eos, bos);
    if (st == CLF_OK && need > V)
        st = clf_error(CLF_ERR_INPUT,
                       "%s: %d pieces, fairseq's offset, %d language codes and <mask> are %lld "
                       "ids, more than config.json's vocab_size %lld",
                       spm, n, N_CODES, need, V);
    if (st == CLF_OK && !(root = json_object()))
        st = clf_error(CLF_ERR_NOMEM, "import: out of host memory");
    for (long long id = 0; id < V && st == CLF_OK; id++) {
        char word[64];
        const char *w = word;
        if (id < 4)
            w = fairseq_specials[id];
        else if (id <= n)
            w = clf_tokenizer_word(tok, (int32_t)(id - 1));
        else if (id <= n + N_CODES)
            w = codes_mbart50[id - n - 1];
        else if (id == need - 1)
            w = "<mask>";
        else
            snprintf(word, sizeof word, "madeupword%04lld", id - need);
        if (json_object_get(root, w))
            st = clf_error(CLF_ERR_INPUT,
                           "%s: '%s' is already a piece, and is MBart50Tokenizer's id %lld", spm, w,
                           id);
        else if (json_object_set_new(root, w, json_integer(id)) != 0)
            st = clf_error(CLF_ERR_INPUT, "%s: piece %lld is not valid UTF-8", spm, id - 1);
    }
    clf_tokenizer_free(tok);
    if (st == CLF_OK && !(im->vocab_text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER)))
        st = clf_error(CLF_ERR_NOMEM, "import: out of host memory");
    json_decref(root);
    im->spm_from = im->spm_path;
    *n_ids = n + 1;
    return st;
}

static clf_status read_config(importer *im)
{
    clf_status st = check_fixed(im);
    if (st != CLF_OK)
        return st;
    /* MBartConfig's defaults where config.json leaves a key out; decoder_start_token_id has
     * none, so generate() starts from bos_token_id */
    static const import_defaults def = {.maxpos = 1024,
                                        .pad = 1,
                                        .eos = 2,
                                        .has_bos = 1,
                                        .start_from_bos = 1,
                                        .scale = 0,
                                        .adrop = 0.0,
                                        .activation = "gelu"};
    import_common c;
    if ((st = import_read_common(im, &def, &c)) != CLF_OK)
        return st;
    int n_ids = 0;
    if ((st = make_vocab(im, c.V, c.pad, c.eos, c.bos, &n_ids)) != CLF_OK)
        return st;
    if ((st = import_yaml_model(im, "import", "MBartForConditionalGeneration, mBART-50", &c, 1)) !=
            CLF_OK ||
        (st = import_yaml(
             im,
             "  positional: learned\n  position_offset: 2\n  embed_norm: true\n"
             "  tie_embeddings: all\n  embed_scale: %s\n  bos_id: %lld\n  eos_id: %lld\n"
             "  decoder_start_id: %lld\n  source_bos: false\n  source_eos: true\n"
             "  source_language: before\n  target_language: forced\n  specials_from: %d\n",
             c.scale ? "sqrt_d_model" : "1.0", c.bos, c.eos, c.start, n_ids)) != CLF_OK)
        return st;
    /* MBartConfig's forced_eos_token_id is 2 when config.json leaves it out */
    if (!json_object_get(im->cfg, "forced_eos_token_id") &&
        json_object_set_new(im->cfg, "forced_eos_token_id", json_integer(2)) != 0)
        return clf_error(CLF_ERR_NOMEM, "import: out of host memory");
    if ((st = import_read_clean_up(im, im->yaml, sizeof im->yaml)) != CLF_OK ||
        (st = import_read_generate(im, c.eos, c.maxpos, im->yaml, sizeof im->yaml)) != CLF_OK)
        return st;
    import_languages *l = calloc(1, sizeof *l);
    if (!l)
        return clf_error(CLF_ERR_NOMEM, "import: out of host memory");
    for (int i = 0; i < N_CODES; i++)
        snprintf(l->codes[i], sizeof l->codes[i], "%s", codes_mbart50[i]);
    l->n_codes = N_CODES;
    st = import_yaml_languages(im, l, 0);
    free(l);
    return st == CLF_OK ? import_yaml_parse(im) : st;
}

const import_family clf_import_mbart = {.model_type = "mbart",
                                        .what = "an MBartForConditionalGeneration (mBART-50)",
                                        .read_config = read_config,
                                        .zero_proj_bias = 0,
                                        .final_norms = 1};
