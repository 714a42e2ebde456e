/* The Marian family of clformer import (import.h): a transformers MarianMTModel, an OPUS-MT
 * model, as config.json, model.safetensors, source.spm, target.spm and vocab.json.
 *
 * What Marian is, in clformer's terms (transformers 4.40's modeling_marian.py): post-norm
 * layers (LN(x + f(x)), torch.nn.LayerNorm with eps 1e-5) and no final norm, biases on
 * every projection, the FFN's activation_function (swish = silu), embeddings scaled by
 * sqrt(d_model) when scale_embedding, positions from the [sin | cos] table
 * (MarianSinusoidalPositionalEmbedding, not stored in model.safetensors), one matrix for
 * both embeddings and the output projection (share_encoder_decoder_embeddings,
 * tie_word_embeddings) plus final_logits_bias, the source framed as pieces + </s> (no
 * <s>), decoding started from decoder_start_token_id (the pad id) and bad_words_ids
 * (pad) never generated. vocab.json must have as many pieces as the weights' vocabulary
 * rows; the three tokenizer files are copied as they are. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "import.h"
#include "model_dir.h"
#include "clformer/tokenizer.h"

/* Keys of MarianConfig (and PretrainedConfig) that change the model's arithmetic in a way
 * model.yaml cannot say, with the value that it can. */
static clf_status check_fixed(const importer *im)
{
    static const char *const false_keys[] = {"normalize_before",    "add_final_layer_norm",
                                             "normalize_embedding", "static_position_embeddings",
                                             "add_bias_logits",     "is_decoder"};
    for (size_t i = 0; i < sizeof false_keys / sizeof false_keys[0]; i++)
        if (json_is_true(json_object_get(im->cfg, false_keys[i])))
            return import_bad_key(im, false_keys[i],
                                  "clformer's Marian import supports only false");
    return CLF_OK;
}

/* config.json -> the model: section (im->yaml), validated by clformer's own reader. */
static clf_status read_config_only(importer *im)
{
    clf_status st = check_fixed(im);
    if (st != CLF_OK)
        return st;
    static const import_defaults def = {.maxpos = 512,
                                        .pad = -1,
                                        .eos = -1,
                                        .has_bos = 0,
                                        .start_from_eos = 0,
                                        .scale = 0,
                                        .adrop = 0.0};
    import_common c;
    long long Vd;
    int share, tie;
    if ((st = import_read_common(im, &def, &c)) != CLF_OK ||
        (st = import_get_int(im, "decoder_vocab_size", c.V, 1, &Vd)) != CLF_OK ||
        (st = import_get_bool(im, "share_encoder_decoder_embeddings", 1, &share)) != CLF_OK ||
        (st = import_get_bool(im, "tie_word_embeddings", 1, &tie)) != CLF_OK)
        return st;
    if (!share)
        return import_bad_key(im, "share_encoder_decoder_embeddings",
                              "separate source and target vocabularies are not supported");
    if (Vd != c.V)
        return import_bad_key(im, "decoder_vocab_size",
                              "must equal vocab_size (one shared vocabulary)");
    /* bad_words_ids: single ids only (longer sequences need a prefix match) */
    char banned[256] = "";
    const json_t *bw = json_object_get(im->cfg, "bad_words_ids");
    if (bw && !json_is_null(bw)) {
        size_t i;
        const json_t *seq;
        if (!json_is_array(bw) || json_array_size(bw) > CLF_BANNED_IDS_MAX)
            return import_bad_key(im, "bad_words_ids", "expected at most 16 single-id lists");
        json_array_foreach(bw, i, seq)
        {
            const json_t *id = json_array_get(seq, 0);
            if (!json_is_array(seq) || json_array_size(seq) != 1 || !json_is_integer(id) ||
                json_integer_value(id) < 0 || json_integer_value(id) >= c.V)
                return import_bad_key(im, "bad_words_ids",
                                      "only single ids of the vocabulary can be banned");
            size_t used = strlen(banned);
            snprintf(banned + used, sizeof banned - used, "%s%lld", i ? ", " : "",
                     (long long)json_integer_value(id));
        }
    }
    if ((st = import_yaml_model(im, "import marian", "MarianMTModel", &c, 0)) != CLF_OK ||
        (st = import_yaml(im,
                          "  positional: sinusoidal_split\n  tie_embeddings: %s\n"
                          "  embed_scale: %s\n  eos_id: %lld\n  decoder_start_id: %lld\n"
                          "  source_bos: false\n  source_eos: true\n  banned_ids: [%s]\n",
                          tie ? "all" : "none", c.scale ? "sqrt_d_model" : "1.0", c.eos, c.start,
                          banned)) != CLF_OK)
        return st;
    if ((st = import_read_clean_up(im, im->yaml, sizeof im->yaml)) != CLF_OK ||
        (st = import_read_generate(im, c.eos, c.maxpos, im->yaml, sizeof im->yaml)) != CLF_OK)
        return st;
    return import_yaml_parse(im);
}

/* ---- tokenizer files ---- */

static clf_status check_tokenizer(importer *im)
{
    char spm[CLF_PATH_MAX], vocab[CLF_PATH_MAX];
    if (snprintf(vocab, sizeof vocab, "%s/" MODEL_DIR_VOCAB, im->hf) >= (int)sizeof vocab)
        return clf_error(CLF_ERR_INPUT, "%s: the path is too long", im->hf);
    /* transformers' names, which an imported model's directory keeps */
    static const char *const sides[2] = {MODEL_DIR_SRC_SPM, MODEL_DIR_TGT_SPM};
    for (int i = 0; i < 2; i++) {
        clf_tokenizer *tok = NULL;
        if (snprintf(spm, sizeof spm, "%s/%s", im->hf, sides[i]) >= (int)sizeof spm)
            return clf_error(CLF_ERR_INPUT, "%s: the path is too long", im->hf);
        clf_status st = clf_tokenizer_load_mapped(spm, vocab, &tok);
        if (st != CLF_OK)
            return st;
        int size = clf_tokenizer_size(tok);
        clf_tokenizer_specials sp = clf_tokenizer_special_ids(tok);
        clf_tokenizer_free(tok);
        if (size != im->config.model.src_vocab)
            return clf_error(CLF_ERR_INPUT,
                             "%s: %d pieces, but the weights (and config.json vocab_size) have "
                             "%d rows",
                             vocab, size, im->config.model.src_vocab);
        if (sp.eos != im->config.model.eos_id || sp.pad != im->config.model.pad_id)
            return clf_error(CLF_ERR_INPUT,
                             "%s: </s> is %d and <pad> %d, but config.json says eos_token_id %d "
                             "and pad_token_id %d",
                             vocab, sp.eos, sp.pad, im->config.model.eos_id,
                             im->config.model.pad_id);
    }
    return CLF_OK;
}

static clf_status read_config(importer *im)
{
    clf_status st = read_config_only(im);
    return st != CLF_OK ? st : check_tokenizer(im);
}

const import_family clf_import_marian = {.model_type = "marian",
                                         .what = "a MarianMTModel (OPUS-MT)",
                                         .read_config = read_config,
                                         .zero_proj_bias = 0,
                                         .final_norms = 0};
