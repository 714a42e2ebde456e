/* clf_config -> YAML: the fully resolved configuration, in a form clf_config_load reads
 * back to the same struct (floats in their shortest exact decimal, strings double-quoted). */
#include "clformer/config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The shortest decimal that reads back as the same float, always with a '.' so that
 * YAML 1.1 readers (PyYAML) see a float: 1.0e-06, 0.1, 2.0. */
static const char *fmt_float(float v, char *buf, size_t size)
{
    char tmp[32]; /* "%.9g" of a float needs at most 15 */
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, (double)v);
        if ((float)strtod(tmp, NULL) == v)
            break;
    }
    char *e = strchr(tmp, 'e');
    if (strchr(tmp, '.'))
        snprintf(buf, size, "%s", tmp);
    else if (e)
        snprintf(buf, size, "%.*s.0%s", (int)(e - tmp), tmp, e);
    else
        snprintf(buf, size, "%s.0", tmp);
    return buf;
}

/* A double-quoted YAML string, or null for "". */
static void put_string(FILE *out, const char *s)
{
    if (!*s) {
        fputs("null", out);
        return;
    }
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(out, "\\x%02x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static void dump_model(const clf_model_config *m, FILE *out)
{
    char a[40];
    fprintf(out, "model:\n");
    /* 0: left to the vocabularies of a train: section (not a value the parser takes) */
    if (m->src_vocab)
        fprintf(out, "  src_vocab: %d\n", m->src_vocab);
    if (m->tgt_vocab)
        fprintf(out, "  tgt_vocab: %d\n", m->tgt_vocab);
    fprintf(out, "  max_len: %d\n  d_model: %d\n", m->max_len, m->d_model);
    if (m->encoder_layers == m->decoder_layers)
        fprintf(out, "  layers: %d\n", m->encoder_layers);
    else
        fprintf(out, "  encoder_layers: %d\n  decoder_layers: %d\n", m->encoder_layers,
                m->decoder_layers);
    fprintf(out, "  heads: %d\n  d_ff: %d\n", m->heads, m->d_ff);
    fprintf(out, "  norm: %s\n", clf_norm_place_name(m->norm));
    if (m->final_norm_auto)
        fprintf(out, "  final_norm: auto  # resolved: %s\n", m->final_norm ? "true" : "false");
    else
        fprintf(out, "  final_norm: %s\n", m->final_norm ? "true" : "false");
    fprintf(out, "  layernorm: {style: %s, eps: %s}\n", clf_model_norm_style_name(m),
            fmt_float(m->ln_eps, a, sizeof a));
    fprintf(out, "  attention_bias: %s\n", m->attention_bias ? "true" : "false");
    fprintf(out, "  activation: %s\n", clf_model_activation_name(m));
    fprintf(out, "  output: %s\n", clf_output_name(m->output));
    if (m->dropout_embedding == m->dropout && m->dropout_attention == 0.0f &&
        m->dropout_ffn == 0.0f) {
        fprintf(out, "  dropout: %s\n", fmt_float(m->dropout, a, sizeof a));
    } else {
        fprintf(out, "  dropout: {residual: %s, ", fmt_float(m->dropout, a, sizeof a));
        fprintf(out, "embedding: %s, ", fmt_float(m->dropout_embedding, a, sizeof a));
        fprintf(out, "attention: %s, ", fmt_float(m->dropout_attention, a, sizeof a));
        fprintf(out, "ffn: %s}\n", fmt_float(m->dropout_ffn, a, sizeof a));
    }
    fprintf(out, "  pad_id: %d\n", m->pad_id);
    fprintf(out, "  positional: %s\n", clf_positional_name(m->positional));
    fprintf(out, "  position_offset: %d\n", m->position_offset);
    fprintf(out, "  embed_norm: %s\n", m->embed_norm ? "true" : "false");
    fprintf(out, "  tie_embeddings: %s\n", clf_tie_name(m->tie_embeddings));
    if (m->embed_scale > 0.0f)
        fprintf(out, "  embed_scale: %s\n", fmt_float(m->embed_scale, a, sizeof a));
    else
        fprintf(out, "  embed_scale: sqrt_d_model\n");
    fprintf(out, "  bos_id: %d\n  eos_id: %d\n  unk_id: %d\n  decoder_start_id: %d\n", m->bos_id,
            m->eos_id, m->unk_id, m->decoder_start_id);
    fprintf(out, "  source_bos: %s\n  source_eos: %s\n", m->source_bos ? "true" : "false",
            m->source_eos ? "true" : "false");
    fprintf(out, "  source_language: %s\n  target_language: %s\n  specials_from: %d\n",
            clf_lang_place_name(m->source_language), clf_target_language_name(m->target_language),
            m->specials_from);
    fprintf(out, "  clean_up_spaces: %s\n  fixed_output_bias: %s\n",
            m->clean_up_spaces ? "true" : "false", m->fixed_output_bias ? "true" : "false");
    fprintf(out, "  banned_ids: [");
    for (int i = 0; i < m->n_banned_ids; i++)
        fprintf(out, "%s%d", i ? ", " : "", m->banned_ids[i]);
    fprintf(out, "]\n");
}

/* A line "  key: <string>" of a section (put_string). */
static void put_string_line(FILE *out, const char *key, const char *s)
{
    fprintf(out, "  %s: ", key);
    put_string(out, s);
    fputc('\n', out);
}

static void dump_backend(const clf_backend_config *b, FILE *out)
{
    fprintf(out, "backend:\n  name: %s\n  device: ", b->name);
    if (b->device[0] && strspn(b->device, "0123456789") == strlen(b->device))
        fprintf(out, "%s", b->device); /* an index stays a plain integer */
    else
        put_string(out, b->device);
    fprintf(out, "\n  threads: %d\n", b->threads);
}

/* A data file: "file.tsv", or ["src.txt", "tgt.txt"] when the target is a file of its own. */
static void put_data(FILE *out, const char *path, const char *tgt_path)
{
    if (!tgt_path[0]) {
        put_string(out, path);
        return;
    }
    fputc('[', out);
    put_string(out, path);
    fputs(", ", out);
    put_string(out, tgt_path);
    fputc(']', out);
}

static void dump_train(const clf_train_config *t, FILE *out)
{
    char a[40], b[40], c[40];
    fprintf(out, "train:\n  data: {train: ");
    put_data(out, t->data_train, t->data_train_tgt);
    fprintf(out, ", valid: ");
    put_data(out, t->data_valid, t->data_valid_tgt);
    fprintf(out, "}\n  vocab: {src: ");
    put_string(out, t->vocab_src);
    fprintf(out, ", tgt: ");
    put_string(out, t->vocab_tgt);
    fprintf(out, ", min_frequency: %d}\n  init: ", t->min_frequency);
    put_string(out, t->init);
    fprintf(out, "\n  seed: %lld\n  shuffle: %s\n", t->seed, t->shuffle ? "true" : "false");
    fprintf(out, "  batch_size: %d\n  batch_tokens: %d\n", t->batch_size, t->batch_tokens);
    fprintf(out, "  max_len: %d\n  steps: %lld\n  epochs: %d\n", t->max_len, t->steps, t->epochs);
    fprintf(out, "  accumulate: %d\n", t->accumulate);
    fprintf(out, "  optimizer: {name: %s, lr: %s, betas: [%s, %s], ",
            clf_optimizer_name(t->optimizer), fmt_float(t->lr, a, sizeof a),
            fmt_float(t->beta1, b, sizeof b), fmt_float(t->beta2, c, sizeof c));
    fprintf(out, "eps: %s, ", fmt_float(t->adam_eps, a, sizeof a));
    fprintf(out, "weight_decay: %s}\n", fmt_float(t->weight_decay, a, sizeof a));
    fprintf(out, "  schedule: {name: %s, warmup: %d}\n", clf_schedule_name(t->schedule), t->warmup);
    fprintf(out, "  label_smoothing: %s\n", fmt_float(t->label_smoothing, a, sizeof a));
    fprintf(out, "  clip_norm: %s\n", fmt_float(t->clip_norm, a, sizeof a));
    fprintf(out, "  precision: %s\n", clf_precision_name(t->precision));
    fprintf(out, "  loss_scale: {init: %s, window: %d}\n",
            fmt_float(t->loss_scale_init, a, sizeof a), t->loss_scale_window);
    fprintf(out, "  log_every: %d\n  validate_every: %d\n", t->log_every, t->validate_every);
    fprintf(out, "  checkpoint: {dir: ");
    put_string(out, t->checkpoint_dir);
    fprintf(out, ", every: %d, keep: %d}\n", t->checkpoint_every, t->checkpoint_keep);
    put_string_line(out, "source_lang", t->source_lang);
    put_string_line(out, "target_lang", t->target_lang);
}

static void dump_generate(const clf_generate_config *g, FILE *out)
{
    char a[40];
    fprintf(out, "generate:\n  beam: %d\n  beam_style: %s\n", g->beam,
            clf_beam_style_name(g->beam_style));
    fprintf(out, "  length_penalty: %s\n",
            g->length_penalty < 0.0f ? "auto" : fmt_float(g->length_penalty, a, sizeof a));
    fprintf(out, "  max_len: %d\n  forced_eos: %s\n", g->max_len, g->forced_eos ? "true" : "false");
    fprintf(out, "  early_stopping: %s\n", g->early_stopping ? "true" : "false");
}

static void dump_languages(const clf_languages_config *l, FILE *out)
{
    const char(*codes[2])[CLF_LANGUAGE_CODE_MAX] = {l->source, l->target};
    const int n[2] = {l->n_source, l->n_target};
    fprintf(out, "languages:\n");
    for (int s = 0; s < 2; s++) {
        fprintf(out, "  %s: [", s ? "target" : "source");
        for (int i = 0; i < n[s]; i++) {
            fputs(i ? ", " : "", out);
            put_string(out, codes[s][i]);
        }
        fprintf(out, "]\n");
    }
    put_string_line(out, "token_prefix", l->token_prefix);
    put_string_line(out, "token_suffix", l->token_suffix);
}

/* The plugins: list, with the plugins that provided model ops by a search-path lookup
 * added, so that the resolved file names every .so it depends on. */
static void dump_plugins(const clf_config *cfg, FILE *out)
{
    const char *paths[CLF_CONFIG_PLUGINS_MAX + 2];
    int n = 0;
    for (int i = 0; i < cfg->n_plugins; i++)
        paths[n++] = cfg->plugins[i];
    const clf_plugin_op *used[2] = {cfg->model.activation_op, cfg->model.norm_op};
    for (int k = 0; k < 2; k++) {
        const char *p = used[k] ? clf_plugin_path_of(used[k]) : "";
        int dup = !*p;
        for (int i = 0; i < n && !dup; i++)
            dup = strcmp(paths[i], p) == 0;
        if (!dup)
            paths[n++] = p;
    }
    if (n == 0)
        return;
    fprintf(out, "plugins:\n");
    for (int i = 0; i < n; i++) {
        fprintf(out, "  - ");
        put_string(out, paths[i]);
        fputc('\n', out);
    }
}

clf_status clf_config_dump(const clf_config *cfg, FILE *out)
{
    fprintf(out, "# clformer configuration, fully resolved\n");
    dump_plugins(cfg, out);
    dump_model(&cfg->model, out);
    dump_backend(&cfg->backend, out);
    if (cfg->train.present)
        dump_train(&cfg->train, out);
    if (cfg->generate.present)
        dump_generate(&cfg->generate, out);
    if (cfg->languages.present)
        dump_languages(&cfg->languages, out);
    if (fflush(out) != 0 || ferror(out))
        return clf_error(CLF_ERR_IO, "cannot write the configuration: %s", strerror(errno));
    return CLF_OK;
}
