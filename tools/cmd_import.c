/* clformer import marian HF_DIR -o MODEL_DIR: a transformers MarianMTModel (an OPUS-MT
 * model as the Hugging Face hub has it) as a clformer model directory.
 *
 * Reads HF_DIR/config.json (clf_json_parse_file, at most IMPORT_CONFIG_JSON_MAX bytes),
 * model.safetensors, source.spm, target.spm and vocab.json; writes MODEL_DIR/model.yaml (the model:
 * section that says what Marian is in clformer's keys), weights.safetensors (clformer's weight
 * names, F32) and copies of the three tokenizer files, all into MODEL_DIR.tmp.<pid> first, renamed
 * to MODEL_DIR at the end: an error leaves no MODEL_DIR behind. `clformer translate -m MODEL_DIR`
 * runs it.
 *
 * What Marian is, in clformer's terms (transformers 4.40's modeling_marian.py): post-norm
 * layers (LN(x + f(x)), torch.nn.LayerNorm with eps 1e-5) and no final norm, biases on
 * every projection, the FFN's activation_function (swish = silu), embeddings scaled by
 * sqrt(d_model) when scale_embedding, positions from the [sin | cos] table
 * (MarianSinusoidalPositionalEmbedding, not stored in model.safetensors), one matrix for
 * both embeddings and the output projection (share_encoder_decoder_embeddings,
 * tie_word_embeddings) plus final_logits_bias, the source framed as pieces + </s> (no
 * <s>), decoding started from decoder_start_token_id (the pad id) and bad_words_ids
 * (pad) never generated.
 *
 * model.yaml's generate: section holds what transformers' generate() does with the model
 * by default (generation_config.json's settings when the file is there, as
 * from_pretrained reads them, else config.json's; transformers' defaults for absent keys):
 * num_beams, max_length (or max_new_tokens), length_penalty, forced_eos_token_id, and
 * beams ranked as transformers ranks them (beam_style: hf).
 *
 * A config it cannot express is refused naming the key and value; vocab.json must have as
 * many pieces as the weights' vocabulary rows. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "model_dir.h"
#include "clformer/config.h"
#include "clformer/fs.h"
#include "clformer/json.h"
#include "clformer/tensor.h"
#include "clformer/tokenizer.h"
#include "clformer/weights.h"

/* config.json is about 1 KB; a larger one is not a config, refused before it is read
 * (README, "Limits"). Read by clformer's JSON reader (clformer/json.h), with the nesting and
 * string limits and the error messages of every JSON file clformer reads. */
#define IMPORT_CONFIG_JSON_MAX ((size_t)1 << 20)
#define IMPORT_YAML_MAX        4096

static void usage(void)
{
    printf("usage: clformer import marian HF_DIR -o MODEL_DIR\n"
           "Converts a transformers MarianMTModel directory (config.json, model.safetensors,\n"
           "source.spm, target.spm, vocab.json; an OPUS-MT model from the Hugging Face hub)\n"
           "into a clformer model directory (model.yaml, weights.safetensors and the three\n"
           "tokenizer files) for `clformer translate -m MODEL_DIR`. MODEL_DIR must not exist.\n"
           "A pytorch_model.bin is converted first with scripts/pt_to_safetensors.py.\n");
}

typedef struct importer {
    const char *hf, *out;
    char path[CLF_PATH_MAX]; /* scratch for file names */
    json_t *cfg;
    const char *cfg_name; /* the file cfg came from, for messages: config.json unless set */
    char yaml[IMPORT_YAML_MAX];
    clf_config config;
    clf_safetensors *st;
    clf_tensor *tensors;
    int n_tensors;
} importer;

/* dir/name in im->path (cli_dir_file) */
static const char *in_dir(importer *im, const char *dir, const char *name)
{
    return cli_dir_file(im->path, sizeof im->path, dir, name);
}

/* ---- config.json ---- */

static clf_status bad_key(const importer *im, const char *key, const char *why)
{
    char *v = json_dumps(json_object_get(im->cfg, key), JSON_ENCODE_ANY | JSON_COMPACT);
    clf_status st =
        clf_error(CLF_ERR_INPUT, "%s/%s: %s = %s: %s", im->hf,
                  im->cfg_name ? im->cfg_name : "config.json", key, v ? v : "(absent)", why);
    free(v);
    return st;
}

/* An integer key >= lo; def when absent (def < lo: required). */
static clf_status get_int(const importer *im, const char *key, long long def, long long lo,
                          long long *out)
{
    const json_t *v = json_object_get(im->cfg, key);
    if (!v || json_is_null(v)) {
        if (def < lo)
            return bad_key(im, key, "required, an integer");
        *out = def;
        return CLF_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > (1 << 24))
        return bad_key(im, key, "expected an integer in range");
    *out = json_integer_value(v);
    return CLF_OK;
}

static clf_status get_bool(const importer *im, const char *key, int def, int *out)
{
    const json_t *v = json_object_get(im->cfg, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return CLF_OK;
    }
    if (!json_is_boolean(v))
        return bad_key(im, key, "expected true or false");
    *out = json_is_true(v);
    return CLF_OK;
}

static clf_status get_float(const importer *im, const char *key, double def, double *out)
{
    const json_t *v = json_object_get(im->cfg, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return CLF_OK;
    }
    if (!json_is_number(v))
        return bad_key(im, key, "expected a number");
    *out = json_number_value(v);
    return CLF_OK;
}

/* model.activation for transformers' activation_function */
static const char *activation_of(const char *hf)
{
    static const char *const map[][2] = {
        {"swish", "silu"}, {"silu", "silu"},          {"relu", "relu"},
        {"gelu", "gelu"},  {"gelu_new", "gelu_tanh"}, {"gelu_pytorch_tanh", "gelu_tanh"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(hf, map[i][0]))
            return map[i][1];
    return NULL;
}

/* Keys of MarianConfig (and PretrainedConfig) that change the model's arithmetic in a way
 * model.yaml cannot say, with the value that it can. */
static clf_status check_fixed(const importer *im)
{
    static const char *const false_keys[] = {"normalize_before",    "add_final_layer_norm",
                                             "normalize_embedding", "static_position_embeddings",
                                             "add_bias_logits",     "is_decoder"};
    for (size_t i = 0; i < sizeof false_keys / sizeof false_keys[0]; i++)
        if (json_is_true(json_object_get(im->cfg, false_keys[i])))
            return bad_key(im, false_keys[i], "clformer's Marian import supports only false");
    const json_t *mt = json_object_get(im->cfg, "model_type");
    if (!json_is_string(mt) || strcmp(json_string_value(mt), "marian") != 0)
        return bad_key(im, "model_type", "expected \"marian\" (a MarianMTModel)");
    return CLF_OK;
}

/* The generate: section of model.yaml (appended to yaml[size]) from the generation
 * settings of generation_config.json, or of config.json without one; max_len is at most
 * the positions the decoder has after its start token (maxpos - 1). */
static clf_status read_generate(importer *im, long long eos, long long maxpos, char *yaml,
                                size_t size)
{
    json_t *const model_cfg = im->cfg;
    json_t *gen = NULL;
    clf_status st = CLF_OK;
    const char *path = in_dir(im, im->hf, "generation_config.json");
    int present = 0;
    if ((st = cli_optional_file(path, &present)) != CLF_OK)
        return st;
    if (present) {
        if ((st = clf_json_parse_file(path, IMPORT_CONFIG_JSON_MAX, &gen)) != CLF_OK)
            return st;
        if (!json_is_object(gen)) {
            json_decref(gen);
            return clf_error(CLF_ERR_INPUT, "%s: expected a JSON object", path);
        }
        im->cfg = gen; /* get_* and bad_key read im->cfg */
        im->cfg_name = "generation_config.json";
    }
    long long beams, max_length, max_new = 0;
    double lp = 1.0;
    const json_t *forced = json_object_get(im->cfg, "forced_eos_token_id");
    const json_t *new_tokens = json_object_get(im->cfg, "max_new_tokens");
    if ((st = get_int(im, "num_beams", 1, 1, &beams)) != CLF_OK ||
        (st = get_int(im, "max_length", 20, 2, &max_length)) != CLF_OK ||
        (new_tokens && !json_is_null(new_tokens) &&
         (st = get_int(im, "max_new_tokens", -1, 1, &max_new)) != CLF_OK) ||
        (st = get_float(im, "length_penalty", 1.0, &lp)) != CLF_OK)
        goto done;
    if (!(lp >= 0.0 && lp <= 100.0)) {
        st = bad_key(im, "length_penalty", "clformer's length penalty is a number in [0, 100]");
        goto done;
    }
    if (forced && !json_is_null(forced) &&
        (!json_is_integer(forced) || json_integer_value(forced) != eos)) {
        st = bad_key(im, "forced_eos_token_id", "only the eos_token_id can be forced");
        goto done;
    }
    /* max_length counts the decoder start; max_new_tokens, when set, wins over it */
    long long max_len = max_new > 0 ? max_new : max_length - 1;
    if (max_len > maxpos - 1)
        max_len = maxpos - 1;
    size_t used = strlen(yaml);
    int n = snprintf(yaml + used, size - used,
                     "generate:  # transformers' generate() defaults for this model\n"
                     "  beam: %lld\n  beam_style: hf\n  length_penalty: %.9g\n"
                     "  max_len: %lld\n  forced_eos: %s\n",
                     beams, lp, max_len, forced && !json_is_null(forced) ? "true" : "false");
    if (n < 0 || (size_t)n >= size - used)
        st = clf_error(CLF_ERR_INPUT, "%s/config.json: the path is too long", im->hf);
done:
    im->cfg = model_cfg;
    im->cfg_name = NULL;
    json_decref(gen);
    return st;
}

/* config.json -> the model: section (im->yaml), validated by clformer's own reader. */
static clf_status read_config(importer *im)
{
    const char *path = in_dir(im, im->hf, "config.json");
    clf_status st = clf_json_parse_file(path, IMPORT_CONFIG_JSON_MAX, &im->cfg);
    if (st != CLF_OK)
        return st;
    if (!json_is_object(im->cfg))
        return clf_error(CLF_ERR_INPUT, "%s: expected a JSON object", path);
    st = check_fixed(im);
    if (st != CLF_OK)
        return st;
    long long V, Vd, d, el, dl, eh, dh, ef, df, maxpos, pad, eos, start;
    int scale, share, tie;
    double drop, adrop, actdrop;
    if ((st = get_int(im, "vocab_size", -1, 1, &V)) != CLF_OK ||
        (st = get_int(im, "decoder_vocab_size", V, 1, &Vd)) != CLF_OK ||
        (st = get_int(im, "d_model", -1, 1, &d)) != CLF_OK ||
        (st = get_int(im, "encoder_layers", -1, 1, &el)) != CLF_OK ||
        (st = get_int(im, "decoder_layers", -1, 1, &dl)) != CLF_OK ||
        (st = get_int(im, "encoder_attention_heads", -1, 1, &eh)) != CLF_OK ||
        (st = get_int(im, "decoder_attention_heads", -1, 1, &dh)) != CLF_OK ||
        (st = get_int(im, "encoder_ffn_dim", -1, 1, &ef)) != CLF_OK ||
        (st = get_int(im, "decoder_ffn_dim", -1, 1, &df)) != CLF_OK ||
        (st = get_int(im, "max_position_embeddings", 512, 2, &maxpos)) != CLF_OK ||
        (st = get_int(im, "pad_token_id", -1, 0, &pad)) != CLF_OK ||
        (st = get_int(im, "eos_token_id", -1, 0, &eos)) != CLF_OK ||
        (st = get_int(im, "decoder_start_token_id", pad, 0, &start)) != CLF_OK ||
        (st = get_bool(im, "scale_embedding", 0, &scale)) != CLF_OK ||
        (st = get_bool(im, "share_encoder_decoder_embeddings", 1, &share)) != CLF_OK ||
        (st = get_bool(im, "tie_word_embeddings", 1, &tie)) != CLF_OK ||
        (st = get_float(im, "dropout", 0.1, &drop)) != CLF_OK ||
        (st = get_float(im, "attention_dropout", 0.0, &adrop)) != CLF_OK ||
        (st = get_float(im, "activation_dropout", 0.0, &actdrop)) != CLF_OK)
        return st;
    /* the special ids index the vocabulary: one out of it is named here, not where it is
     * first compared (generation_config.json's forced_eos_token_id, the weights) */
    const char *const id_keys[3] = {"pad_token_id", "eos_token_id", "decoder_start_token_id"};
    const long long ids[3] = {pad, eos, start};
    for (int i = 0; i < 3; i++)
        if (ids[i] >= V) {
            char why[96];
            snprintf(why, sizeof why,
                     "expected an id of the vocabulary, 0 to %lld (vocab_size %lld)", V - 1, V);
            return bad_key(im, id_keys[i], why);
        }
    if (dh != eh)
        return bad_key(im, "decoder_attention_heads",
                       "differs from encoder_attention_heads (clformer has one model.heads)");
    if (df != ef)
        return bad_key(im, "decoder_ffn_dim",
                       "differs from encoder_ffn_dim (clformer has one model.d_ff)");
    if (!share)
        return bad_key(im, "share_encoder_decoder_embeddings",
                       "separate source and target vocabularies are not supported");
    if (Vd != V)
        return bad_key(im, "decoder_vocab_size", "must equal vocab_size (one shared vocabulary)");
    const json_t *act = json_object_get(im->cfg, "activation_function");
    const char *activation = json_is_string(act) ? activation_of(json_string_value(act)) : NULL;
    if (!activation)
        return bad_key(im, "activation_function",
                       "not one clformer has (swish, silu, relu, gelu, gelu_new)");
    /* bad_words_ids: single ids only (longer sequences need a prefix match) */
    char banned[256] = "";
    const json_t *bw = json_object_get(im->cfg, "bad_words_ids");
    if (bw && !json_is_null(bw)) {
        size_t i;
        const json_t *seq;
        if (!json_is_array(bw) || json_array_size(bw) > CLF_BANNED_IDS_MAX)
            return bad_key(im, "bad_words_ids", "expected at most 16 single-id lists");
        json_array_foreach(bw, i, seq)
        {
            const json_t *id = json_array_get(seq, 0);
            if (!json_is_array(seq) || json_array_size(seq) != 1 || !json_is_integer(id) ||
                json_integer_value(id) < 0 || json_integer_value(id) >= V)
                return bad_key(im, "bad_words_ids",
                               "only single ids of the vocabulary can be banned");
            size_t used = strlen(banned);
            snprintf(banned + used, sizeof banned - used, "%s%lld", i ? ", " : "",
                     (long long)json_integer_value(id));
        }
    }
    /* each rate named by its own key (one message for all three named the wrong one) */
    const char *const rate_keys[3] = {"dropout", "attention_dropout", "activation_dropout"};
    const double rates[3] = {drop, adrop, actdrop};
    for (int i = 0; i < 3; i++)
        if (!(rates[i] >= 0 && rates[i] < 1))
            return bad_key(im, rate_keys[i], "dropout rates must be in [0, 1)");
    int n =
        snprintf(im->yaml, sizeof im->yaml,
                 "# Imported by `clformer import marian` from %s (a transformers "
                 "MarianMTModel).\n"
                 "model:\n"
                 "  src_vocab: %lld\n  tgt_vocab: %lld\n  max_len: %lld\n  d_model: %lld\n"
                 "  encoder_layers: %lld\n  decoder_layers: %lld\n  heads: %lld\n"
                 "  d_ff: %lld\n  norm: post\n  final_norm: false\n"
                 "  layernorm: {style: standard, eps: 1.0e-5}\n  attention_bias: true\n"
                 "  activation: %s\n  output: logits\n"
                 "  dropout: {residual: %.9g, embedding: %.9g, attention: %.9g, ffn: %.9g}\n"
                 "  pad_id: %lld\n  positional: sinusoidal_split\n  tie_embeddings: %s\n"
                 "  embed_scale: %s\n  eos_id: %lld\n  decoder_start_id: %lld\n"
                 "  source_bos: false\n  source_eos: true\n  banned_ids: [%s]\n",
                 im->hf, V, V, maxpos, d, el, dl, eh, ef, activation, drop, drop, adrop, actdrop,
                 pad, tie ? "all" : "none", scale ? "sqrt_d_model" : "1.0", eos, start, banned);
    if (n < 0 || (size_t)n >= sizeof im->yaml)
        return clf_error(CLF_ERR_INPUT, "%s/config.json: the path is too long", im->hf);
    if ((st = read_generate(im, eos, maxpos, im->yaml, sizeof im->yaml)) != CLF_OK)
        return st;
    st = clf_config_parse_string(im->yaml, "model.yaml (from config.json)", &im->config);
    if (st != CLF_OK)
        return clf_error_context(st, "%s/config.json", im->hf);
    return CLF_OK;
}

/* ---- weights ---- */

/* The transformers name of clformer weight `name` (the pattern table of
 * io/weight_names.c, read the other way), or 0 when it has none. */
static int hf_name_of(const char *name, char *out, size_t size)
{
    static const char *const attn[][2] = {
        {"w_q", "q_proj"}, {"w_k", "k_proj"}, {"w_v", "v_proj"}, {"w_o", "out_proj"}};
    static const char *const enc_norm[] = {"self_attn_layer_norm", "final_layer_norm"};
    static const char *const dec_norm[] = {"self_attn_layer_norm", "encoder_attn_layer_norm",
                                           "final_layer_norm"};
    char stack[16], block[32], part[16], leaf[16];
    int layer, idx;
    if (!strcmp(name, "tgt_embed.embedding.weight") || !strcmp(name, "src_embed.embedding.weight"))
        return snprintf(out, size, "model.shared.weight"), 1;
    if (!strcmp(name, "projection_layer.proj.weight"))
        return snprintf(out, size, "lm_head.weight"), 1;
    if (!strcmp(name, "projection_layer.proj.bias"))
        return snprintf(out, size, "final_logits_bias"), 1;
    if (sscanf(name, "%15[a-z].layers.%d.residual_connections.%d.norm.%15s", stack, &layer, &idx,
               leaf) == 4) {
        int dec = !strcmp(stack, "decoder");
        if (idx < 0 || idx > (dec ? 2 : 1))
            return 0;
        snprintf(out, size, "model.%s.layers.%d.%s.%s", stack, layer,
                 dec ? dec_norm[idx] : enc_norm[idx], strcmp(leaf, "alpha") ? leaf : "weight");
        return 1;
    }
    if (sscanf(name, "%15[a-z].layers.%d.%31[a-z_].%15[a-z_0-9].%15s", stack, &layer, block, part,
               leaf) != 5)
        return 0;
    if (!strcmp(block, "feed_forward_block")) {
        if (strcmp(part, "linear_1") && strcmp(part, "linear_2"))
            return 0;
        snprintf(out, size, "model.%s.layers.%d.fc%c.%s", stack, layer, part[7], leaf);
        return 1;
    }
    const char *hf_block = !strcmp(block, "self_attention_block")    ? "self_attn"
                           : !strcmp(block, "cross_attention_block") ? "encoder_attn"
                                                                     : NULL;
    for (size_t i = 0; hf_block && i < 4; i++)
        if (!strcmp(part, attn[i][0])) {
            snprintf(out, size, "model.%s.layers.%d.%s.%s.%s", stack, layer, hf_block, attn[i][1],
                     leaf);
            return 1;
        }
    return 0;
}

/* The tensor the HF file holds for hf_name; shared embeddings may be stored under the
 * encoder's or decoder's name instead of model.shared. */
static const clf_tensor *find_hf(const importer *im, const char *hf_name)
{
    const clf_tensor *t = clf_safetensors_find(im->st, hf_name);
    static const char *const alias[] = {"model.decoder.embed_tokens.weight",
                                        "model.encoder.embed_tokens.weight"};
    for (int i = 0; !t && !strcmp(hf_name, "model.shared.weight") && i < 2; i++)
        t = clf_safetensors_find(im->st, alias[i]);
    return t;
}

static clf_status read_weights(importer *im)
{
    const char *path = in_dir(im, im->hf, "model.safetensors");
    clf_weight_spec *specs = NULL;
    int n = 0;
    clf_status st;
    if (!cli_file_exists(path) && cli_file_exists(in_dir(im, im->hf, "pytorch_model.bin")))
        return clf_error(CLF_ERR_INPUT,
                         "%s/model.safetensors: missing; convert %s/pytorch_model.bin first: "
                         "scripts/pt_to_safetensors.py %s/pytorch_model.bin "
                         "%s/model.safetensors",
                         im->hf, im->hf, im->hf, im->hf);
    if ((st = clf_safetensors_open(in_dir(im, im->hf, "model.safetensors"), &im->st)) != CLF_OK)
        return st;
    /* every tensor of the file must be one clformer reads, or one it computes itself */
    for (int i = 0; i < clf_safetensors_count(im->st); i++) {
        const char *name = clf_safetensors_at(im->st, i)->name;
        if (strstr(name, "embed_positions.weight"))
            continue; /* the sinusoidal table (older transformers saved it) */
        int known = !strcmp(name, "final_logits_bias") || !strcmp(name, "lm_head.weight") ||
                    !strcmp(name, "model.shared.weight") ||
                    !strcmp(name, "model.encoder.embed_tokens.weight") ||
                    !strcmp(name, "model.decoder.embed_tokens.weight");
        int layer;
        char rest[200];
        known |= sscanf(name, "model.encoder.layers.%d.%199s", &layer, rest) == 2 ||
                 sscanf(name, "model.decoder.layers.%d.%199s", &layer, rest) == 2;
        if (!known)
            return clf_error(CLF_ERR_INPUT,
                             "%s/model.safetensors: tensor %s is not part of a MarianMTModel "
                             "clformer can import",
                             im->hf, name);
    }
    if ((st = clf_weight_specs(&im->config.model, &specs, &n)) != CLF_OK)
        return st;
    im->tensors = calloc((size_t)n, sizeof *im->tensors);
    if (!im->tensors) {
        free(specs);
        return clf_error(CLF_ERR_NOMEM, "import: out of host memory");
    }
    for (int i = 0; i < n; i++) {
        const clf_weight_spec *s = &specs[i];
        char hf[256];
        if (!hf_name_of(s->name, hf, sizeof hf)) {
            st = clf_error(CLF_ERR_INTERNAL, "import: no transformers name for %s", s->name);
            goto fail;
        }
        const clf_tensor *t = find_hf(im, hf);
        if (!t) {
            st = clf_error(CLF_ERR_INPUT,
                           "%s/model.safetensors: tensor %s (clformer's %s) is missing", im->hf, hf,
                           s->name);
            goto fail;
        }
        /* final_logits_bias is [1, V]; everything else has clformer's shape */
        int64_t numel = clf_weight_spec_numel(s);
        int same = t->ndim == s->ndim;
        for (int k = 0; same && k < s->ndim; k++)
            same = t->shape[k] == s->shape[k];
        if (!same && !(t->ndim == 2 && t->shape[0] == 1 && s->ndim == 1 && t->shape[1] == numel)) {
            char a[64], b[64];
            st = clf_error(CLF_ERR_INPUT,
                           "%s/model.safetensors: tensor %s has shape %s, config.json implies %s",
                           im->hf, hf, clf_shape_str(t->shape, t->ndim, a, sizeof a),
                           clf_shape_str(s->shape, s->ndim, b, sizeof b));
            goto fail;
        }
        clf_tensor *o = &im->tensors[i];
        snprintf(o->name, sizeof o->name, "%s", s->name);
        o->dtype = CLF_F32;
        o->ndim = s->ndim;
        memcpy(o->shape, s->shape, sizeof o->shape);
        o->nbytes = (size_t)numel * sizeof(float);
        if (!(o->data = malloc(o->nbytes))) {
            st = clf_error(CLF_ERR_NOMEM, "import: out of host memory for %s", s->name);
            goto fail;
        }
        im->n_tensors = i + 1;
        if ((st = clf_tensor_to_f32(t, o->data)) != CLF_OK) {
            st = clf_error_context(st, "%s/model.safetensors: %s", im->hf, hf);
            goto fail;
        }
    }
    st = CLF_OK;
fail:
    free(specs);
    return st;
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

static clf_status write_dir(importer *im)
{
    const char *meta[] = {"clformer.imported_from", im->hf};
    const cli_model_dir_content c = {.config_yaml = im->yaml,
                                     .tensors = im->tensors,
                                     .n_tensors = im->n_tensors,
                                     .meta = meta,
                                     .n_meta = 1,
                                     .tokenizer_dir = im->hf};
    return cli_model_dir_write(im->out, &c);
}

static clf_status import_marian(importer *im)
{
    struct stat sb;
    clf_status st;
    if (stat(im->out, &sb) == 0)
        return clf_error(CLF_ERR_IO, "%s: already exists (remove it, or choose another name)",
                         im->out);
    if ((st = read_config(im)) != CLF_OK || (st = check_tokenizer(im)) != CLF_OK ||
        (st = read_weights(im)) != CLF_OK)
        return st;
    return write_dir(im);
}

int clf_cmd_import(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'}, {0}};
    importer im = {0};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o':
            im.out = optarg;
            break;
        case 'h':
            usage();
            return 0;
        default:
            return 2;
        }
    }
    if (argc - optind != 2 || strcmp(argv[optind], "marian") != 0)
        return cli_usage_error("import: expected `marian HF_DIR -o MODEL_DIR` (marian is the one "
                               "format clformer imports)");
    if (!im.out)
        return cli_usage_error("import: -o MODEL_DIR is required");
    im.hf = argv[optind + 1];
    clf_status st = import_marian(&im);
    for (int i = 0; i < im.n_tensors; i++)
        free(im.tensors[i].data);
    free(im.tensors);
    clf_safetensors_close(im.st);
    json_decref(im.cfg);
    if (st != CLF_OK)
        return cli_fail(st);
    printf("imported %s into %s\n", im.hf, im.out);
    return 0;
}
