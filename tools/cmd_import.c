/* clformer import HF_DIR -o MODEL_DIR: a transformers translation model (as the Hugging Face
 * hub has it) as a clformer model directory. config.json's model_type picks the family from
 * one table (families[]); each family is a file of its own (import_marian.c,
 * import_m2m100.c, which takes NLLB's vocabulary from import_nllb.c, import_mbart.c) that
 * turns config.json into model.yaml and checks the tokenizer files; this file has the
 * command, the steps they share (config.json's keys, the generate: section, the weights under
 * their transformers names) and the writing of the directory.
 * `clformer import marian HF_DIR -o MODEL_DIR` is the older spelling, still accepted.
 *
 * Reads HF_DIR/config.json (clf_json_parse_file, at most IMPORT_CONFIG_JSON_MAX bytes, as
 * every JSON file of HF_DIR), model.safetensors and the family's tokenizer files; writes
 * MODEL_DIR/model.yaml, weights.safetensors (clformer's weight names, F32), source.spm, target.spm
 * and vocab.json, all into MODEL_DIR.tmp.<pid> first, renamed to MODEL_DIR at the end: an error
 * leaves no MODEL_DIR behind. `clformer translate -m MODEL_DIR` runs it.
 *
 * model.yaml's generate: section holds what transformers' generate() does with the model
 * by default (generation_config.json's settings when the file is there, as
 * from_pretrained reads them, else config.json's; transformers' defaults for absent keys):
 * num_beams, max_length (or max_new_tokens), length_penalty, forced_eos_token_id,
 * early_stopping, and beams ranked as transformers ranks them (beam_style: hf).
 *
 * A config it cannot express is refused naming the key and value. */
#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "import.h"
#include "model_dir.h"
#include "clformer/config.h"
#include "clformer/fs.h"
#include "clformer/json.h"
#include "clformer/tensor.h"
#include "clformer/tokenizer.h"
#include "clformer/weights.h"

/* The families clformer imports, by config.json's model_type. */
static const import_family *const families[] = {&clf_import_marian, &clf_import_m2m100,
                                                &clf_import_mbart};
#define N_FAMILIES (sizeof families / sizeof families[0])

static void usage(void)
{
    printf("usage: clformer import HF_DIR -o MODEL_DIR\n"
           "Converts a transformers translation model directory (config.json,\n"
           "model.safetensors and its tokenizer files, as the Hugging Face hub has them) into a\n"
           "clformer model directory (model.yaml, weights.safetensors, source.spm, target.spm,\n"
           "vocab.json) for `clformer translate -m MODEL_DIR`. MODEL_DIR must not exist.\n"
           "config.json's model_type says what it is:\n");
    for (size_t i = 0; i < N_FAMILIES; i++)
        printf("  %-8s %s\n", families[i]->model_type, families[i]->what);
    printf("A pytorch_model.bin is converted first with scripts/pt_to_safetensors.py.\n"
           "`clformer import marian HF_DIR -o MODEL_DIR` is the same command.\n");
}

const char *import_in_dir(importer *im, const char *dir, const char *name)
{
    return cli_dir_file(im->path, sizeof im->path, dir, name);
}

/* ---- config.json ---- */

clf_status import_bad_key(const importer *im, const char *key, const char *why)
{
    char *v = json_dumps(json_object_get(im->cfg, key), JSON_ENCODE_ANY | JSON_COMPACT);
    clf_status st =
        clf_error(CLF_ERR_INPUT, "%s/%s: %s = %s: %s", im->hf,
                  im->cfg_name ? im->cfg_name : "config.json", key, v ? v : "(absent)", why);
    free(v);
    return st;
}

clf_status import_get_int(const importer *im, const char *key, long long def, long long lo,
                          long long *out)
{
    const json_t *v = json_object_get(im->cfg, key);
    if (!v || json_is_null(v)) {
        if (def < lo)
            return import_bad_key(im, key, "required, an integer");
        *out = def;
        return CLF_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > (1 << 24))
        return import_bad_key(im, key, "expected an integer in range");
    *out = json_integer_value(v);
    return CLF_OK;
}

/* config.json's key into *out, def when it is absent or null: true or false (as 1 or 0) for
 * type JSON_TRUE, any number for JSON_REAL; CLF_ERR_INPUT when it holds something else. */
static clf_status get_value(const importer *im, const char *key, json_type type, double def,
                            double *out)
{
    const json_t *v = json_object_get(im->cfg, key);
    if (!v || json_is_null(v))
        *out = def;
    else if (type == JSON_TRUE && json_is_boolean(v))
        *out = json_is_true(v);
    else if (type == JSON_REAL && json_is_number(v))
        *out = json_number_value(v);
    else
        return import_bad_key(im, key,
                              type == JSON_TRUE ? "expected true or false" : "expected a number");
    return CLF_OK;
}

clf_status import_get_bool(const importer *im, const char *key, int def, int *out)
{
    double v = def;
    clf_status st = get_value(im, key, JSON_TRUE, def, &v);
    if (st == CLF_OK)
        *out = v != 0.0;
    return st;
}

clf_status import_get_float(const importer *im, const char *key, double def, double *out)
{
    return get_value(im, key, JSON_REAL, def, out);
}

clf_status import_yaml(importer *im, const char *fmt, ...)
{
    size_t used = strlen(im->yaml);
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(im->yaml + used, sizeof im->yaml - used, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof im->yaml - used)
        return clf_error(CLF_ERR_INPUT, "%s/config.json: the path is too long", im->hf);
    return CLF_OK;
}

clf_status import_yaml_model(importer *im, const char *command, const char *what,
                             const import_common *c, int pre_norm)
{
    im->yaml[0] = '\0';
    return import_yaml(im,
                       "# Imported by `clformer %s` from %s (a transformers %s).\n"
                       "model:\n"
                       "  src_vocab: %lld\n  tgt_vocab: %lld\n  max_len: %lld\n  d_model: %lld\n"
                       "  encoder_layers: %lld\n  decoder_layers: %lld\n  heads: %lld\n"
                       "  d_ff: %lld\n  norm: %s\n  final_norm: %s\n"
                       "  layernorm: {style: standard, eps: 1.0e-5}\n  attention_bias: true\n"
                       "  activation: %s\n  output: logits\n"
                       "  dropout: {residual: %.9g, embedding: %.9g, attention: %.9g, ffn: %.9g}\n"
                       "  pad_id: %lld\n"
                       /* final_logits_bias is a buffer, or the model has no bias */
                       "  fixed_output_bias: true\n",
                       command, im->hf, what, c->V, c->V, c->maxpos, c->d, c->enc_layers,
                       c->dec_layers, c->heads, c->ffn, pre_norm ? "pre" : "post",
                       pre_norm ? "true" : "false", c->activation, c->drop, c->drop, c->adrop,
                       c->actdrop, c->pad);
}

/* Appends "[c0, c1, ...]\n" of l's codes. */
static clf_status put_codes(importer *im, const import_languages *l)
{
    clf_status st = CLF_OK;
    for (int i = 0; i < l->n_codes && st == CLF_OK; i++)
        st = import_yaml(im, "%s%s", i ? ", " : "[", l->codes[i]);
    return st == CLF_OK ? import_yaml(im, "]\n") : st;
}

clf_status import_yaml_languages(importer *im, const import_languages *l, int affixes)
{
    clf_status st =
        affixes ? import_yaml(im, "languages:\n  token_prefix: \"%s\"\n  token_suffix: \"%s\"\n",
                              l->prefix, l->suffix)
                : import_yaml(im, "languages:\n");
    if (st == CLF_OK)
        st = import_yaml(im, "  source: ");
    if (st == CLF_OK)
        st = put_codes(im, l);
    if (st == CLF_OK)
        st = import_yaml(im, "  target: ");
    return st == CLF_OK ? put_codes(im, l) : st;
}

clf_status import_yaml_parse(importer *im)
{
    clf_status st = clf_config_parse_string(im->yaml, "model.yaml (from config.json)", &im->config);
    return st == CLF_OK ? CLF_OK : clf_error_context(st, "%s/config.json", im->hf);
}

/* model.activation for transformers' activation_function; NULL when clformer has none */
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

clf_status import_read_json(importer *im, const char *name, int optional, json_t **out)
{
    const char *path = import_in_dir(im, im->hf, name);
    int present = 1;
    clf_status st;
    *out = NULL;
    if (optional && (st = cli_optional_file(path, &present)) != CLF_OK)
        return st;
    if (!present)
        return CLF_OK;
    if ((st = clf_json_parse_file(path, IMPORT_CONFIG_JSON_MAX, out)) != CLF_OK)
        return st;
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return clf_error(CLF_ERR_INPUT, "%s: expected a JSON object", path);
    }
    return CLF_OK;
}

clf_status import_read_common(importer *im, const import_defaults *def, import_common *c)
{
    clf_status st;
    c->bos = 0;
    if ((st = import_get_int(im, "vocab_size", -1, 1, &c->V)) != CLF_OK ||
        (st = import_get_int(im, "d_model", -1, 1, &c->d)) != CLF_OK ||
        (st = import_get_int(im, "encoder_layers", -1, 1, &c->enc_layers)) != CLF_OK ||
        (st = import_get_int(im, "decoder_layers", -1, 1, &c->dec_layers)) != CLF_OK ||
        (st = import_get_int(im, "encoder_attention_heads", -1, 1, &c->heads)) != CLF_OK ||
        (st = import_get_int(im, "encoder_ffn_dim", -1, 1, &c->ffn)) != CLF_OK ||
        (st = import_get_int(im, "max_position_embeddings", def->maxpos, 2, &c->maxpos)) !=
            CLF_OK ||
        (st = import_get_int(im, "pad_token_id", def->pad, 0, &c->pad)) != CLF_OK ||
        (st = import_get_int(im, "eos_token_id", def->eos, 0, &c->eos)) != CLF_OK ||
        (def->has_bos && (st = import_get_int(im, "bos_token_id", 0, 0, &c->bos)) != CLF_OK) ||
        (st = import_get_int(im, "decoder_start_token_id",
                             def->start_from_eos   ? c->eos
                             : def->start_from_bos ? c->bos
                                                   : c->pad,
                             0, &c->start)) != CLF_OK ||
        (st = import_get_bool(im, "scale_embedding", def->scale, &c->scale)) != CLF_OK ||
        (st = import_get_float(im, "dropout", 0.1, &c->drop)) != CLF_OK ||
        (st = import_get_float(im, "attention_dropout", def->adrop, &c->adrop)) != CLF_OK ||
        (st = import_get_float(im, "activation_dropout", 0.0, &c->actdrop)) != CLF_OK)
        return st;
    /* the special ids index the vocabulary: one out of it is named here, not where it is
     * first compared (generation_config.json's forced_eos_token_id, the weights) */
    const char *const id_keys[4] = {"pad_token_id", "eos_token_id", "decoder_start_token_id",
                                    "bos_token_id"};
    const long long ids[4] = {c->pad, c->eos, c->start, c->bos};
    for (int i = 0; i < 3 + def->has_bos; i++)
        if (ids[i] >= c->V) {
            char why[96];
            snprintf(why, sizeof why,
                     "expected an id of the vocabulary, 0 to %lld (vocab_size %lld)", c->V - 1,
                     c->V);
            return import_bad_key(im, id_keys[i], why);
        }
    long long dh, df;
    if ((st = import_get_int(im, "decoder_attention_heads", -1, 1, &dh)) != CLF_OK ||
        (st = import_get_int(im, "decoder_ffn_dim", -1, 1, &df)) != CLF_OK)
        return st;
    if (dh != c->heads)
        return import_bad_key(
            im, "decoder_attention_heads",
            "differs from encoder_attention_heads (clformer has one model.heads)");
    if (df != c->ffn)
        return import_bad_key(im, "decoder_ffn_dim",
                              "differs from encoder_ffn_dim (clformer has one model.d_ff)");
    const json_t *act = json_object_get(im->cfg, "activation_function");
    if (!(c->activation = act && !json_is_null(act)
                              ? (json_is_string(act) ? activation_of(json_string_value(act)) : NULL)
                              : def->activation))
        return import_bad_key(im, "activation_function",
                              "not one clformer has (swish, silu, relu, gelu, gelu_new)");
    /* each rate named by its own key (one message for all three named the wrong one) */
    const char *const rate_keys[3] = {"dropout", "attention_dropout", "activation_dropout"};
    const double rates[3] = {c->drop, c->adrop, c->actdrop};
    for (int i = 0; i < 3; i++)
        if (!(rates[i] >= 0 && rates[i] < 1))
            return import_bad_key(im, rate_keys[i], "dropout rates must be in [0, 1)");
    return CLF_OK;
}

clf_status import_read_clean_up(importer *im, char *yaml, size_t size)
{
    json_t *tc = NULL;
    clf_status st = import_read_json(im, "tokenizer_config.json", 1, &tc);
    if (st != CLF_OK)
        return st;
    const json_t *v = json_object_get(tc, "clean_up_tokenization_spaces"); /* NULL tc: NULL */
    const int on = !v || json_is_true(v);
    if (v && !json_is_boolean(v) && !json_is_null(v))
        st = clf_error(CLF_ERR_INPUT,
                       "%s/tokenizer_config.json: clean_up_tokenization_spaces: expected true, "
                       "false or null",
                       im->hf);
    json_decref(tc);
    const size_t used = strlen(yaml);
    if (st == CLF_OK && (size_t)snprintf(yaml + used, size - used, "  clean_up_spaces: %s\n",
                                         on ? "true" : "false") >= size - used)
        st = clf_error(CLF_ERR_INPUT, "%s: model.yaml would be too long", im->hf);
    return st;
}

/* The generate: section of model.yaml (appended to yaml[size]) from the generation
 * settings of generation_config.json, or of config.json without one; max_len is at most
 * the positions the decoder has after its start token (maxpos - 1). */
clf_status import_read_generate(importer *im, long long eos, long long maxpos, char *yaml,
                                size_t size)
{
    json_t *const model_cfg = im->cfg;
    json_t *gen = NULL;
    clf_status st = import_read_json(im, "generation_config.json", 1, &gen);
    if (st != CLF_OK)
        return st;
    if (gen) {
        im->cfg = gen; /* get_* and bad_key read im->cfg */
        im->cfg_name = "generation_config.json";
    }
    long long beams, max_length, max_new = 0;
    double lp = 1.0;
    const json_t *forced = json_object_get(im->cfg, "forced_eos_token_id");
    const json_t *new_tokens = json_object_get(im->cfg, "max_new_tokens");
    if ((st = import_get_int(im, "num_beams", 1, 1, &beams)) != CLF_OK ||
        (st = import_get_int(im, "max_length", 20, 2, &max_length)) != CLF_OK ||
        (new_tokens && !json_is_null(new_tokens) &&
         (st = import_get_int(im, "max_new_tokens", -1, 1, &max_new)) != CLF_OK) ||
        (st = import_get_float(im, "length_penalty", 1.0, &lp)) != CLF_OK)
        goto done;
    if (!(lp >= 0.0 && lp <= 100.0)) {
        st = import_bad_key(im, "length_penalty",
                            "clformer's length penalty is a number in [0, 100]");
        goto done;
    }
    int early = 0;
    if ((st = import_get_bool(im, "early_stopping", 0, &early)) != CLF_OK) {
        st = import_bad_key(im, "early_stopping", "clformer's hf beams have true and false");
        goto done;
    }
    if (forced && !json_is_null(forced) &&
        (!json_is_integer(forced) || json_integer_value(forced) != eos)) {
        st = import_bad_key(im, "forced_eos_token_id", "only the eos_token_id can be forced");
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
                     "  max_len: %lld\n  forced_eos: %s\n  early_stopping: %s\n",
                     beams, lp, max_len, forced && !json_is_null(forced) ? "true" : "false",
                     early ? "true" : "false");
    if (n < 0 || (size_t)n >= size - used)
        st = clf_error(CLF_ERR_INPUT, "%s/config.json: the path is too long", im->hf);
done:
    im->cfg = model_cfg;
    im->cfg_name = NULL;
    json_decref(gen);
    return st;
}

/* ---- weights ---- */

/* The transformers name of clformer weight `name` (the pattern table of
 * io/weight_names.c, read the other way), or 0 when it has none; "" for a weight the family
 * does not store (zeros). */
static int hf_name_of(const import_family *fam, const char *name, char *out, size_t size)
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
        return snprintf(out, size, "%s", fam->zero_proj_bias ? "" : "final_logits_bias"), 1;
    /* learned positions and embed_norm (mBART): each stack's own table and LayerNorm */
    if (!strcmp(name, "src_pos.embedding.weight") || !strcmp(name, "tgt_pos.embedding.weight"))
        return snprintf(out, size, "model.%s.embed_positions.weight",
                        name[0] == 's' ? "encoder" : "decoder"),
               1;
    if (sscanf(name, "%15[a-z].embed.norm.%15s", stack, leaf) == 2)
        return snprintf(out, size, "model.%s.layernorm_embedding.%s", stack,
                        strcmp(leaf, "alpha") ? leaf : "weight"),
               1;
    if (fam->final_norms && sscanf(name, "%15[a-z].norm.%15s", stack, leaf) == 2)
        return snprintf(out, size, "model.%s.layer_norm.%s", stack,
                        strcmp(leaf, "alpha") ? leaf : "weight"),
               1;
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

/* The tensor the HF file holds for hf_name; shared embeddings may be stored under any of
 * their tied names instead of model.shared. */
static const clf_tensor *find_hf(const importer *im, const char *hf_name)
{
    const clf_tensor *t = clf_safetensors_find(im->st, hf_name);
    static const char *const alias[] = {"model.decoder.embed_tokens.weight",
                                        "model.encoder.embed_tokens.weight", "lm_head.weight"};
    for (int i = 0; !t && !strcmp(hf_name, "model.shared.weight") && i < 3; i++)
        t = clf_safetensors_find(im->st, alias[i]);
    return t;
}

static clf_status read_weights(importer *im)
{
    const char *path = import_in_dir(im, im->hf, "model.safetensors");
    clf_weight_spec *specs = NULL;
    int n = 0;
    clf_status st;
    if (!cli_file_exists(path) && cli_file_exists(import_in_dir(im, im->hf, "pytorch_model.bin")))
        return clf_error(CLF_ERR_INPUT,
                         "%s/model.safetensors: missing; convert %s/pytorch_model.bin first: "
                         "scripts/pt_to_safetensors.py %s/pytorch_model.bin "
                         "%s/model.safetensors",
                         im->hf, im->hf, im->hf, im->hf);
    if ((st = clf_safetensors_open(import_in_dir(im, im->hf, "model.safetensors"), &im->st)) !=
        CLF_OK)
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
        known |= im->family->final_norms && (!strncmp(name, "model.encoder.layer_norm.", 25) ||
                                             !strncmp(name, "model.decoder.layer_norm.", 25));
        known |= im->config.model.embed_norm &&
                 (!strncmp(name, "model.encoder.layernorm_embedding.", 34) ||
                  !strncmp(name, "model.decoder.layernorm_embedding.", 34));
        if (!known)
            return clf_error(CLF_ERR_INPUT,
                             "%s/model.safetensors: tensor %s is not part of %s clformer can "
                             "import",
                             im->hf, name, im->family->what);
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
        if (!hf_name_of(im->family, s->name, hf, sizeof hf)) {
            st = clf_error(CLF_ERR_INTERNAL, "import: no transformers name for %s", s->name);
            goto fail;
        }
        const clf_tensor *t = hf[0] ? find_hf(im, hf) : NULL;
        /* not stored: zeros; final_logits_bias too, a buffer transformers starts at zeros */
        if (!t && (!hf[0] || !strcmp(hf, "final_logits_bias"))) {
            clf_tensor *o = &im->tensors[i];
            snprintf(o->name, sizeof o->name, "%s", s->name);
            o->dtype = CLF_F32;
            o->ndim = s->ndim;
            memcpy(o->shape, s->shape, sizeof o->shape);
            o->nbytes = (size_t)clf_weight_spec_numel(s) * sizeof(float);
            if (!(o->data = calloc(1, o->nbytes))) {
                st = clf_error(CLF_ERR_NOMEM, "import: out of host memory for %s", s->name);
                goto fail;
            }
            im->n_tensors = i + 1;
            continue;
        }
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

/* ---- the command ---- */

static clf_status write_dir(importer *im)
{
    const char *meta[] = {"clformer.imported_from", im->hf};
    const cli_model_dir_content c = {.config_yaml = im->yaml,
                                     .tensors = im->tensors,
                                     .n_tensors = im->n_tensors,
                                     .meta = meta,
                                     .n_meta = 1,
                                     .tokenizer_dir = im->hf,
                                     .spm_from = im->spm_from,
                                     .vocab_text = im->vocab_text};
    return cli_model_dir_write(im->out, &c);
}

/* config.json's model_type -> the family, or a one-line error naming it and the families */
static clf_status pick_family(importer *im)
{
    clf_status st = import_read_json(im, "config.json", 0, &im->cfg);
    if (st != CLF_OK)
        return st;
    const json_t *mt = json_object_get(im->cfg, "model_type");
    for (size_t i = 0; json_is_string(mt) && i < N_FAMILIES; i++)
        if (!strcmp(json_string_value(mt), families[i]->model_type)) {
            im->family = families[i];
            return CLF_OK;
        }
    char list[256] = "";
    for (size_t i = 0; i < N_FAMILIES; i++) {
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s\"%s\"", i ? ", " : "",
                 families[i]->model_type);
    }
    char why[320];
    snprintf(why, sizeof why, "clformer imports model_type %s", list);
    return import_bad_key(im, "model_type", why);
}

static clf_status import_dir(importer *im, int marian_alias)
{
    struct stat sb;
    clf_status st;
    if (stat(im->out, &sb) == 0)
        return clf_error(CLF_ERR_IO, "%s: already exists (remove it, or choose another name)",
                         im->out);
    if ((st = pick_family(im)) != CLF_OK)
        return st;
    if (marian_alias && im->family != &clf_import_marian)
        return import_bad_key(im, "model_type", "expected \"marian\" (a MarianMTModel)");
    if ((st = im->family->read_config(im)) != CLF_OK || (st = read_weights(im)) != CLF_OK)
        return st;
    return write_dir(im);
}

int clf_cmd_import(int argc, char **argv)
{
    importer im = {0};
    const cli_opt opts[] = {CLI_STRING("output", 'o', &im.out), {0}};
    int rc = cli_parse_options(argc, argv, opts, usage);
    if (rc >= 0)
        return rc;
    /* `import HF_DIR`, or the older `import marian HF_DIR` */
    const int alias = argc - optind == 2 && !strcmp(argv[optind], "marian");
    if (argc - optind != 1 && !alias)
        return cli_usage_error("import: expected `HF_DIR -o MODEL_DIR` (config.json's "
                               "model_type says the family)");
    if (!im.out)
        return cli_usage_error("import: -o MODEL_DIR is required");
    im.hf = argv[optind + alias];
    clf_status st = import_dir(&im, alias);
    for (int i = 0; i < im.n_tensors; i++)
        free(im.tensors[i].data);
    free(im.tensors);
    free(im.vocab_text);
    clf_safetensors_close(im.st);
    json_decref(im.cfg);
    if (st != CLF_OK)
        return cli_fail(st);
    printf("imported %s (%s) into %s\n", im.hf, im.family->model_type, im.out);
    return 0;
}
