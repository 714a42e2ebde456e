/* The config module: every shipped configs/ YAML file loads; defaults and resolution (layers,
 * final_norm auto, vocab paths); every kind of bad input is CLF_ERR_INPUT with one line
 * "<file>:<line>:<col>: <key>: <why>"; and dump -> load gives back the same struct. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clformer/config.h"
#include "testutil.h"

static const char *const all_configs[] = {
    "tiny",          "base",     "base-prenorm", "big",         "big-prenorm", "iwslt",
    "iwslt-prenorm", "tiny-pre", "tiny-post",    "tiny-branch", NULL};

/* A preset of configs/ and the numbers of the model it mirrors (its file says where they
 * come from): the paper's table 3 for base and big, fairseq's transformer_iwslt_de_en. */
typedef struct preset {
    const char *name;
    int d_model, d_ff, heads, layers;
    float dropout;
    clf_norm_place norm;
    clf_ln_style ln_style;
    float ln_eps;
    int attention_bias;
    clf_tie tie;
} preset;

static const preset presets[] = {
    {"base", 512, 2048, 8, 6, 0.1f, CLF_NORM_POST, CLF_LN_STANDARD, 1e-6f, 0, CLF_TIE_ALL},
    {"base-prenorm", 512, 2048, 8, 6, 0.1f, CLF_NORM_PRE, CLF_LN_STANDARD, 1e-6f, 0, CLF_TIE_ALL},
    {"big", 1024, 4096, 16, 6, 0.3f, CLF_NORM_POST, CLF_LN_STANDARD, 1e-6f, 0, CLF_TIE_ALL},
    {"big-prenorm", 1024, 4096, 16, 6, 0.3f, CLF_NORM_PRE, CLF_LN_STANDARD, 1e-6f, 0, CLF_TIE_ALL},
    {"iwslt", 512, 1024, 4, 6, 0.3f, CLF_NORM_POST, CLF_LN_STANDARD, 1e-5f, 1, CLF_TIE_DECODER},
    {"iwslt-prenorm", 512, 1024, 4, 6, 0.3f, CLF_NORM_PRE, CLF_LN_STANDARD, 1e-5f, 1,
     CLF_TIE_DECODER},
};

/* Same parsed content (the path is where it came from, not content). */
static void assert_same_config(const clf_config *a, const clf_config *b)
{
    ck_assert_int_eq(memcmp(&a->model, &b->model, sizeof a->model), 0);
    ck_assert_int_eq(memcmp(&a->backend, &b->backend, sizeof a->backend), 0);
    ck_assert_int_eq(memcmp(&a->train, &b->train, sizeof a->train), 0);
    ck_assert_int_eq(memcmp(&a->generate, &b->generate, sizeof a->generate), 0);
    ck_assert_int_eq(memcmp(&a->languages, &b->languages, sizeof a->languages), 0);
}

/* Dumps cfg to a string (caller frees). */
static char *dump_to_string(const clf_config *cfg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    CLF_ASSERT_OK(clf_config_dump(cfg, f));
    fclose(f);
    return text;
}

/* dump, parse the dump, compare; then the dump of the reloaded config is the same text */
static void assert_round_trip(const clf_config *cfg)
{
    clf_config *again = malloc(sizeof *again);
    ck_assert_ptr_nonnull(again);
    char *text = dump_to_string(cfg);
    clf_status st = clf_config_parse_string(text, "<dump>", again);
    ck_assert_msg(st == CLF_OK, "dump does not load: %s\n%s", clf_last_error(), text);
    assert_same_config(cfg, again);
    char *text2 = dump_to_string(again);
    ck_assert_str_eq(text, text2);
    free(text2);
    free(text);
    free(again);
}

/* dropout: a rate (the paper's two sites) or a map of the four sites; dumps read back. */
START_TEST(test_dropout_sites)
{
    clf_config c, back;
    const char *base = "model: {src_vocab: 9, tgt_vocab: 9, d_model: 8, heads: 2,\n"
                       "        dropout: %s}\n";
    char yaml[512];
    snprintf(yaml, sizeof yaml, base, "0.3");
    CLF_ASSERT_OK(clf_config_parse_string(yaml, NULL, &c));
    ck_assert_float_eq(c.model.dropout, 0.3f);
    ck_assert_float_eq(c.model.dropout_embedding, 0.3f);
    ck_assert_float_eq(c.model.dropout_attention, 0.0f);
    ck_assert_float_eq(c.model.dropout_ffn, 0.0f);
    snprintf(yaml, sizeof yaml, base, "{attention: 0.125, ffn: 0.25}");
    CLF_ASSERT_OK(clf_config_parse_string(yaml, NULL, &c));
    ck_assert_float_eq(c.model.dropout, 0.1f); /* absent keys keep their defaults */
    ck_assert_float_eq(c.model.dropout_embedding, 0.1f);
    ck_assert_float_eq(c.model.dropout_attention, 0.125f);
    ck_assert_float_eq(c.model.dropout_ffn, 0.25f);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CLF_ASSERT_OK(clf_config_dump(&c, f));
    fclose(f);
    ck_assert_msg(strstr(text, "dropout: {residual: 0.1, embedding: 0.1, attention: 0.125, "
                               "ffn: 0.25}"),
                  "%s", text);
    CLF_ASSERT_OK(clf_config_parse_string(text, "dump", &back));
    free(text);
    ck_assert_mem_eq(&back.model, &c.model, sizeof c.model);
}
END_TEST

START_TEST(test_shipped_configs_load)
{
    clf_config *cfg = malloc(sizeof *cfg);
    char path[1024];
    for (int i = 0; all_configs[i]; i++) {
        snprintf(path, sizeof path, "%s/%s.yaml", CLF_CONFIGS_DIR, all_configs[i]);
        CLF_ASSERT_OK(clf_config_load(path, cfg));
        ck_assert_str_eq(cfg->path, path);
        ck_assert_int_eq(cfg->train.present, 0);
        ck_assert_str_eq(cfg->backend.name, "cpu");
        ck_assert_str_eq(cfg->backend.device, "");
        assert_round_trip(cfg);
    }
    /* and every yaml in the directory, including ones added later */
    DIR *d = opendir(CLF_CONFIGS_DIR);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".yaml"))
            continue;
        snprintf(path, sizeof path, "%s/%s", CLF_CONFIGS_DIR, e->d_name);
        clf_status st = clf_config_load(path, cfg);
        ck_assert_msg(st == CLF_OK, "%s: %s", e->d_name, clf_last_error());
        assert_round_trip(cfg); /* what `clformer config --dump` prints loads back */
        n++;
    }
    closedir(d);
    ck_assert_int_ge(n, 12);

    snprintf(path, sizeof path, "%s/tiny.yaml", CLF_CONFIGS_DIR);
    CLF_ASSERT_OK(clf_config_load(path, cfg));
    ck_assert_int_eq(cfg->model.d_model, 64);
    ck_assert_int_eq(cfg->model.encoder_layers, 2);
    ck_assert_int_eq(cfg->model.decoder_layers, 2);
    ck_assert_int_eq(cfg->model.heads, 4);
    ck_assert_int_eq(cfg->model.d_ff, 128);
    ck_assert_int_eq(cfg->model.src_vocab, 1000);
    ck_assert_int_eq(cfg->model.tgt_vocab, 1000);
    ck_assert_int_eq(cfg->model.max_len, 128);
    ck_assert_int_eq(cfg->model.norm, CLF_NORM_PRE);

    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        const preset *p = &presets[i];
        snprintf(path, sizeof path, "%s/%s.yaml", CLF_CONFIGS_DIR, p->name);
        CLF_ASSERT_OK(clf_config_load(path, cfg));
        const clf_model_config *m = &cfg->model;
        ck_assert_msg(m->d_model == p->d_model && m->d_ff == p->d_ff && m->heads == p->heads &&
                          m->encoder_layers == p->layers && m->decoder_layers == p->layers,
                      "%s: sizes", p->name);
        ck_assert_msg(m->dropout == p->dropout, "%s: dropout %g", p->name, m->dropout);
        ck_assert_msg(m->norm == p->norm && m->final_norm == (p->norm == CLF_NORM_PRE), "%s: norm",
                      p->name);
        ck_assert_msg(m->ln_style == p->ln_style && m->ln_eps == p->ln_eps, "%s: layernorm",
                      p->name);
        ck_assert_msg(m->attention_bias == p->attention_bias, "%s: attention_bias", p->name);
        ck_assert_msg(m->tie_embeddings == p->tie, "%s: tie_embeddings", p->name);
        ck_assert_int_eq(m->src_vocab, 8000);
        ck_assert_int_eq(m->max_len, 256);
    }

    static const char *const variants[3] = {"tiny-pre", "tiny-post", "tiny-branch"};
    static const clf_norm_place places[3] = {CLF_NORM_PRE, CLF_NORM_POST, CLF_NORM_BRANCH};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s.yaml", CLF_CONFIGS_DIR, variants[i]);
        CLF_ASSERT_OK(clf_config_load(path, cfg));
        ck_assert_int_eq(cfg->model.norm, places[i]);
        ck_assert_int_eq(cfg->model.final_norm, i == 0);
        ck_assert_int_eq(cfg->model.d_model, 64);
    }
    free(cfg);
}
END_TEST

START_TEST(test_defaults)
{
    clf_config *cfg = malloc(sizeof *cfg), *def = malloc(sizeof *def);
    clf_config_defaults(def);
    ck_assert_int_eq(def->model.src_vocab, 0);
    ck_assert_int_eq(def->model.max_len, 256);
    ck_assert_int_eq(def->model.d_model, 512);
    ck_assert_int_eq(def->model.encoder_layers, 6);
    ck_assert_int_eq(def->model.decoder_layers, 6);
    ck_assert_int_eq(def->model.heads, 8);
    ck_assert_int_eq(def->model.d_ff, 2048);
    ck_assert_int_eq(def->model.norm, CLF_NORM_PRE);
    ck_assert_int_eq(def->model.final_norm_auto, 1);
    ck_assert_int_eq(def->model.ln_style, CLF_LN_TUTORIAL);
    ck_assert_float_eq(def->model.ln_eps, 1.0e-6f);
    ck_assert_int_eq(def->model.attention_bias, 0);
    ck_assert_int_eq(def->model.activation, CLF_ACT_RELU);
    ck_assert_int_eq(def->model.output, CLF_OUTPUT_LOGITS);
    ck_assert_float_eq(def->model.dropout, 0.1f);
    ck_assert_int_eq(def->model.pad_id, 1);
    ck_assert_int_eq(def->model.positional, CLF_POS_SINUSOIDAL);
    ck_assert_int_eq(def->model.tie_embeddings, CLF_TIE_NONE);
    ck_assert_str_eq(def->backend.name, "cpu");
    ck_assert_str_eq(def->backend.device, "");
    ck_assert_int_eq(def->backend.threads, 0);
    ck_assert_int_eq(def->train.present, 0);
    ck_assert_int_eq(def->train.epochs, 10);
    ck_assert_float_eq(def->train.beta2, 0.98f);

    /* a minimal file is the defaults plus the two vocabularies */
    CLF_ASSERT_OK(clf_config_parse_string("model: {src_vocab: 10, tgt_vocab: 12}\n", "<m>", cfg));
    ck_assert_str_eq(cfg->path, "<m>");
    def->model.src_vocab = 10;
    def->model.tgt_vocab = 12;
    def->model.final_norm = 1; /* auto, pre */
    assert_same_config(cfg, def);
    assert_round_trip(cfg);

    ck_assert_str_eq(clf_norm_place_name(CLF_NORM_PRE), "pre");
    ck_assert_str_eq(clf_norm_place_name(CLF_NORM_POST), "post");
    ck_assert_str_eq(clf_norm_place_name(CLF_NORM_BRANCH), "branch");
    ck_assert_str_eq(clf_ln_style_name(CLF_LN_TUTORIAL), "tutorial");
    ck_assert_str_eq(clf_ln_style_name(CLF_LN_STANDARD), "standard");
    ck_assert_str_eq(clf_activation_name(CLF_ACT_RELU), "relu");
    ck_assert_str_eq(clf_output_name(CLF_OUTPUT_LOG_SOFTMAX), "log_softmax");
    ck_assert_str_eq(clf_optimizer_name(CLF_OPT_ADAMW), "adamw");
    ck_assert_str_eq(clf_schedule_name(CLF_SCHED_INVERSE_SQRT), "inverse_sqrt");
    ck_assert_str_eq(clf_norm_place_name((clf_norm_place)7), "unknown");
    ck_assert_str_eq(clf_positional_name(CLF_POS_LEARNED), "learned");

    /* the issue-6 variants parse, dump and load back */
    CLF_ASSERT_OK(clf_config_parse_string(
        "model: {src_vocab: 10, tgt_vocab: 12, d_model: 9, heads: 3, positional: learned}\n", "<v>",
        cfg));
    ck_assert_int_eq(cfg->model.positional, CLF_POS_LEARNED);
    assert_round_trip(cfg);
    CLF_ASSERT_OK(clf_config_parse_string(
        "model: {src_vocab: 10, tgt_vocab: 10, tie_embeddings: all}\n", "<v>", cfg));
    ck_assert_int_eq(cfg->model.tie_embeddings, CLF_TIE_ALL);
    assert_round_trip(cfg);
    CLF_ASSERT_OK(clf_config_parse_string(
        "model: {src_vocab: 10, tgt_vocab: 12, tie_embeddings: decoder}\n", "<v>", cfg));
    ck_assert_int_eq(cfg->model.tie_embeddings, CLF_TIE_DECODER);
    assert_round_trip(cfg);
    ck_assert_str_eq(clf_tie_name(CLF_TIE_NONE), "none");
    free(cfg);
    free(def);
}
END_TEST

START_TEST(test_layers)
{
    clf_config *cfg = malloc(sizeof *cfg);
    CLF_ASSERT_OK(
        clf_config_parse_string("model: {src_vocab: 5, tgt_vocab: 5, layers: 3}", NULL, cfg));
    ck_assert_int_eq(cfg->model.encoder_layers, 3);
    ck_assert_int_eq(cfg->model.decoder_layers, 3);
    CLF_ASSERT_OK(clf_config_parse_string(
        "model: {src_vocab: 5, tgt_vocab: 5, encoder_layers: 3, decoder_layers: 1}", NULL, cfg));
    ck_assert_int_eq(cfg->model.encoder_layers, 3);
    ck_assert_int_eq(cfg->model.decoder_layers, 1);
    assert_round_trip(cfg);
    CLF_ASSERT_OK(clf_config_parse_string("model: {src_vocab: 5, tgt_vocab: 5, decoder_layers: 2}",
                                          NULL, cfg));
    ck_assert_int_eq(cfg->model.encoder_layers, 6);
    ck_assert_int_eq(cfg->model.decoder_layers, 2);
    free(cfg);
}
END_TEST

START_TEST(test_final_norm)
{
    static const struct {
        const char *norm, *final_norm;
        int want, want_auto;
    } cases[] = {
        {"pre", "auto", 1, 1},  {"post", "auto", 0, 1}, {"branch", "auto", 0, 1},
        {"pre", NULL, 1, 1},    {"post", NULL, 0, 1},   {"branch", NULL, 0, 1},
        {"pre", "false", 0, 0}, {"post", "true", 1, 0}, {"branch", "yes", 1, 0},
        {"post", "no", 0, 0},
    };
    clf_config *cfg = malloc(sizeof *cfg);
    char text[256];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(text, sizeof text, "model:\n  src_vocab: 7\n  tgt_vocab: 7\n  norm: %s\n%s%s\n",
                 cases[i].norm, cases[i].final_norm ? "  final_norm: " : "",
                 cases[i].final_norm ? cases[i].final_norm : "");
        CLF_ASSERT_OK(clf_config_parse_string(text, "<f>", cfg));
        ck_assert_msg(cfg->model.final_norm == cases[i].want &&
                          cfg->model.final_norm_auto == cases[i].want_auto,
                      "case %zu: final_norm %d auto %d", i, cfg->model.final_norm,
                      cfg->model.final_norm_auto);
        assert_round_trip(cfg);
    }
    free(cfg);
}
END_TEST

static const char *full_train_yaml =
    "model:\n"
    "  src_vocab: 300\n"
    "  tgt_vocab: 400\n"
    "  max_len: 100\n"
    "  d_model: 48\n"
    "  encoder_layers: 3\n"
    "  decoder_layers: 1\n"
    "  heads: 3\n"
    "  d_ff: 72\n"
    "  norm: post\n"
    "  final_norm: true\n"
    "  layernorm: {style: standard, eps: 1.0e-5}\n"
    "  attention_bias: yes\n"
    "  activation: relu\n"
    "  output: log_softmax\n"
    "  dropout: 0.25\n"
    "  pad_id: 0\n"
    "backend:\n"
    "  name: opencl\n"
    "  device: NVIDIA H100\n"
    "  threads: 4\n"
    "train:\n"
    "  data: {train: data/train.tsv, valid: 'data/va: \"lid\".tsv'}\n"
    "  vocab: {src: runs/x/src.json, tgt: runs/x/tgt.json, min_frequency: 3}\n"
    "  init: runs/y/last.safetensors\n"
    "  seed: 1234567890123\n"
    "  shuffle: false\n"
    "  batch_size: 16\n"
    "  batch_tokens: 2048\n"
    "  max_len: 90\n"
    "  steps: 1000\n"
    "  epochs: 0\n"
    "  accumulate: 2\n"
    "  optimizer: {name: adamw, lr: 3.0e-4, betas: [0.85, 0.995], eps: 1.0e-8, weight_decay: "
    "0.01}\n"
    "  schedule: {name: noam, warmup: 4000}\n"
    "  label_smoothing: 0.0\n"
    "  clip_norm: 1\n"
    "  precision: bf16\n"
    "  loss_scale: {init: 1024, window: 100}\n"
    "  log_every: 10\n"
    "  validate_every: 0\n"
    "  checkpoint:\n"
    "    dir: runs/x\n"
    "    every: 250\n"
    "    keep: 5\n";

START_TEST(test_train_full)
{
    clf_config *cfg = malloc(sizeof *cfg);
    CLF_ASSERT_OK(clf_config_parse_string(full_train_yaml, "<train>", cfg));
    const clf_model_config *m = &cfg->model;
    ck_assert_int_eq(m->src_vocab, 300);
    ck_assert_int_eq(m->tgt_vocab, 400);
    ck_assert_int_eq(m->max_len, 100);
    ck_assert_int_eq(m->encoder_layers, 3);
    ck_assert_int_eq(m->decoder_layers, 1);
    ck_assert_int_eq(m->norm, CLF_NORM_POST);
    ck_assert_int_eq(m->final_norm, 1);
    ck_assert_int_eq(m->final_norm_auto, 0);
    ck_assert_int_eq(m->ln_style, CLF_LN_STANDARD);
    ck_assert_float_eq(m->ln_eps, 1.0e-5f);
    ck_assert_int_eq(m->attention_bias, 1);
    ck_assert_int_eq(m->output, CLF_OUTPUT_LOG_SOFTMAX);
    ck_assert_float_eq(m->dropout, 0.25f);
    ck_assert_int_eq(m->pad_id, 0);
    ck_assert_str_eq(cfg->backend.name, "opencl");
    ck_assert_str_eq(cfg->backend.device, "NVIDIA H100");
    ck_assert_int_eq(cfg->backend.threads, 4);
    const clf_train_config *t = &cfg->train;
    ck_assert_int_eq(t->present, 1);
    ck_assert_str_eq(t->data_train, "data/train.tsv");
    ck_assert_str_eq(t->data_valid, "data/va: \"lid\".tsv");
    ck_assert_str_eq(t->data_train_tgt, "");
    ck_assert_str_eq(t->data_valid_tgt, "");
    ck_assert_str_eq(t->vocab_src, "runs/x/src.json");
    ck_assert_str_eq(t->vocab_tgt, "runs/x/tgt.json");
    ck_assert_int_eq(t->min_frequency, 3);
    ck_assert_str_eq(t->init, "runs/y/last.safetensors");
    ck_assert(t->seed == 1234567890123LL);
    ck_assert_int_eq(t->shuffle, 0);
    ck_assert_int_eq(t->batch_size, 16);
    ck_assert_int_eq(t->batch_tokens, 2048);
    ck_assert_int_eq(t->max_len, 90);
    ck_assert(t->steps == 1000);
    ck_assert_int_eq(t->epochs, 0);
    ck_assert_int_eq(t->accumulate, 2);
    ck_assert_int_eq(t->optimizer, CLF_OPT_ADAMW);
    ck_assert_float_eq(t->lr, 3.0e-4f);
    ck_assert_float_eq(t->beta1, 0.85f);
    ck_assert_float_eq(t->beta2, 0.995f);
    ck_assert_float_eq(t->adam_eps, 1.0e-8f);
    ck_assert_float_eq(t->weight_decay, 0.01f);
    ck_assert_int_eq(t->schedule, CLF_SCHED_NOAM);
    ck_assert_int_eq(t->warmup, 4000);
    ck_assert_float_eq(t->label_smoothing, 0.0f);
    ck_assert_float_eq(t->clip_norm, 1.0f);
    ck_assert_int_eq(t->precision, CLF_PRECISION_BF16);
    ck_assert_float_eq(t->loss_scale_init, 1024.0f);
    ck_assert_int_eq(t->loss_scale_window, 100);
    ck_assert_int_eq(t->log_every, 10);
    ck_assert_int_eq(t->validate_every, 0);
    ck_assert_str_eq(t->checkpoint_dir, "runs/x");
    ck_assert_int_eq(t->checkpoint_every, 250);
    ck_assert_int_eq(t->checkpoint_keep, 5);
    assert_round_trip(cfg);

    /* a small train section: defaults, init null, resolved vocab paths and max_len */
    CLF_ASSERT_OK(clf_config_parse_string("model: {src_vocab: 9, tgt_vocab: 9, max_len: 64}\n"
                                          "train:\n"
                                          "  data: {train: a.tsv}\n"
                                          "  init: null\n"
                                          "  checkpoint: {dir: runs/q}\n",
                                          "<small>", cfg));
    ck_assert_str_eq(t->init, "");
    ck_assert_str_eq(t->data_valid, "");
    ck_assert_str_eq(t->vocab_src, "runs/q/src.json");
    ck_assert_str_eq(t->vocab_tgt, "runs/q/tgt.json");
    ck_assert_int_eq(t->max_len, 64);
    ck_assert_int_eq(t->batch_size, 32);
    ck_assert_int_eq(t->optimizer, CLF_OPT_ADAM);
    ck_assert_float_eq(t->lr, 1.0e-4f);
    ck_assert_float_eq(t->adam_eps, 1.0e-9f);
    ck_assert_float_eq(t->label_smoothing, 0.1f);
    assert_round_trip(cfg);
    free(cfg);
}
END_TEST

START_TEST(test_train_data_forms)
{
    /* a TSV, two line-aligned files, and the two mixed; each round-trips through --dump */
    static const struct {
        const char *data;
        const char *train, *train_tgt, *valid, *valid_tgt;
    } cases[] = {
        {"{train: t.tsv, valid: v.tsv}", "t.tsv", "", "v.tsv", ""},
        {"{train: [t.en, t.de], valid: [v.en, v.de]}", "t.en", "t.de", "v.en", "v.de"},
        {"{train: [t.en, t.de]}", "t.en", "t.de", "", ""},
        {"{train: t.tsv, valid: [v.en, 'v de']}", "t.tsv", "", "v.en", "v de"},
        {"{train: [t.en, t.de], valid: v.tsv}", "t.en", "t.de", "v.tsv", ""},
        {"{train: [t.en, t.de], valid: null}", "t.en", "t.de", "", ""},
        {"\n    train:\n      - \"t [en]\"\n      - t.de\n", "t [en]", "t.de", "", ""},
    };
    clf_config *cfg = malloc(sizeof *cfg);
    char text[512];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(text, sizeof text, "model: {src_vocab: 9, tgt_vocab: 9}\ntrain:\n  data: %s\n",
                 cases[i].data);
        clf_status st = clf_config_parse_string(text, "<data>", cfg);
        ck_assert_msg(st == CLF_OK, "case %zu: %s", i, clf_last_error());
        const clf_train_config *t = &cfg->train;
        ck_assert_str_eq(t->data_train, cases[i].train);
        ck_assert_str_eq(t->data_train_tgt, cases[i].train_tgt);
        ck_assert_str_eq(t->data_valid, cases[i].valid);
        ck_assert_str_eq(t->data_valid_tgt, cases[i].valid_tgt);
        assert_round_trip(cfg);
    }
    /* the dump spells two files as a flow sequence */
    CLF_ASSERT_OK(clf_config_parse_string(
        "model: {src_vocab: 9, tgt_vocab: 9}\ntrain: {data: {train: [a.en, a.de]}}\n", "<d>", cfg));
    char *dump = dump_to_string(cfg);
    ck_assert_ptr_nonnull(strstr(dump, "  data: {train: [\"a.en\", \"a.de\"], valid: null}\n"));
    free(dump);
    free(cfg);
}
END_TEST

START_TEST(test_dump_strings_round_trip)
{
    /* strings that need quoting, a device given as an index, odd floats */
    clf_config *cfg = malloc(sizeof *cfg);
    CLF_ASSERT_OK(clf_config_parse_string(
        "model: {src_vocab: 3, tgt_vocab: 3, d_model: 6, heads: 3, dropout: 0.123456789,\n"
        "        layernorm: {eps: 3.0e-38}}\n"
        "backend: {name: auto, device: 1}\n"
        "train:\n"
        "  data: {train: \"tab\\there #x: y\", valid: \"back\\\\slash \\\"q\\\" \\u00e9\"}\n"
        "  vocab: {src: '- [a]', tgt: '{b}'}\n"
        "  init: '@weird, path'\n"
        "  optimizer: {lr: 1, betas: [0, 0.999999]}\n",
        "<s>", cfg));
    ck_assert_str_eq(cfg->backend.device, "1");
    ck_assert_str_eq(cfg->train.data_train, "tab\there #x: y");
    ck_assert_str_eq(cfg->train.data_valid, "back\\slash \"q\" \xc3\xa9");
    assert_round_trip(cfg);
    CLF_ASSERT_OK(clf_config_parse_string(
        "model: {src_vocab: 3, tgt_vocab: 3}\nbackend: {device: gpu}\n", "<s>", cfg));
    ck_assert_str_eq(cfg->backend.device, "gpu");
    assert_round_trip(cfg);
    free(cfg);
}
END_TEST

/* The keys real checkpoints need: defaults keep the tutorial's model, set values dump and
 * read back. */
START_TEST(test_real_model_keys)
{
    clf_config *cfg = malloc(sizeof *cfg);
    CLF_ASSERT_OK(clf_config_parse_string("model: {src_vocab: 9, tgt_vocab: 9}\n", "<s>", cfg));
    ck_assert_float_eq(cfg->model.embed_scale, 0.0f);
    ck_assert_int_eq(cfg->model.bos_id, -1);
    ck_assert_int_eq(cfg->model.eos_id, -1);
    ck_assert_int_eq(cfg->model.unk_id, -1);
    ck_assert_int_eq(cfg->model.decoder_start_id, -1);
    ck_assert_int_eq(cfg->model.source_bos, 1);
    ck_assert_int_eq(cfg->model.source_eos, 1);
    ck_assert_int_eq(cfg->model.n_banned_ids, 0);
    assert_round_trip(cfg);
    CLF_ASSERT_OK(clf_config_parse_string(
        "model: {src_vocab: 9, tgt_vocab: 9, embed_scale: 1, eos_id: 0, decoder_start_id: 8,\n"
        "        bos_id: 2, unk_id: 1, source_bos: false, source_eos: true,\n"
        "        banned_ids: [8, 3], positional: sinusoidal_split}\n",
        "<s>", cfg));
    ck_assert_float_eq(cfg->model.embed_scale, 1.0f);
    ck_assert_int_eq(cfg->model.eos_id, 0);
    ck_assert_int_eq(cfg->model.bos_id, 2);
    ck_assert_int_eq(cfg->model.unk_id, 1);
    ck_assert_int_eq(cfg->model.decoder_start_id, 8);
    ck_assert_int_eq(cfg->model.source_bos, 0);
    ck_assert_int_eq(cfg->model.n_banned_ids, 2);
    ck_assert_int_eq(cfg->model.banned_ids[1], 3);
    ck_assert_int_eq(cfg->model.positional, CLF_POS_SINUSOIDAL_SPLIT);
    assert_round_trip(cfg);
    char *text = dump_to_string(cfg);
    ck_assert_ptr_nonnull(strstr(text, "  embed_scale: 1.0\n"));
    ck_assert_ptr_nonnull(strstr(text, "  banned_ids: [8, 3]\n"));
    ck_assert_ptr_nonnull(strstr(text, "  positional: sinusoidal_split\n"));
    free(text);
    free(cfg);
}
END_TEST

/* framing of the config `model: {src_vocab: 12, tgt_vocab: 12, <keys>}` over vocab */
static clf_status framing_of(const char *keys, const clf_framing *vocab, clf_framing *f)
{
    char yaml[512];
    clf_config *cfg = malloc(sizeof *cfg);
    snprintf(yaml, sizeof yaml, "model: {src_vocab: 12, tgt_vocab: 12%s%s}\n", *keys ? ", " : "",
             keys);
    CLF_ASSERT_OK(clf_config_parse_string(yaml, "<s>", cfg));
    clf_status st = clf_model_framing(&cfg->model, vocab, f);
    free(cfg);
    return st;
}

static void assert_framing(const clf_framing *f, int src_bos, int src_eos, int src_pad,
                           int tgt_start, int tgt_eos, int tgt_pad)
{
    const int got[6] = {f->src_bos, f->src_eos, f->src_pad, f->tgt_start, f->tgt_eos, f->tgt_pad};
    const int want[6] = {src_bos, src_eos, src_pad, tgt_start, tgt_eos, tgt_pad};
    static const char *const names[6] = {"src_bos",   "src_eos", "src_pad",
                                         "tgt_start", "tgt_eos", "tgt_pad"};
    for (int i = 0; i < 6; i++)
        ck_assert_msg(got[i] == want[i], "%s = %d, want %d", names[i], got[i], want[i]);
}

/* clf_model_framing: the model's keys first, the vocabularies' own ids otherwise, the pad
 * always pad_id; an id needed and given by neither is an error naming the key. */
START_TEST(test_framing_rule)
{
    clf_framing f;
    /* a built vocabulary on both sides: [PAD] 1, [SOS] 2, [EOS] 3 */
    const clf_framing built = {2, 3, 1, 2, 3, 1, -1, CLF_LANG_NONE, -1, 0};
    CLF_ASSERT_OK(framing_of("", &built, &f));
    assert_framing(&f, 2, 3, 1, 2, 3, 1); /* the defaults: the tutorial's framing */
    CLF_ASSERT_OK(framing_of("", NULL, &f));
    assert_framing(&f, 2, 3, 1, 2, 3, 1); /* no vocabulary: a built one's ids */
    /* other vocabulary ids, per side (sides may differ) */
    const clf_framing other = {5, 6, -1, 7, 8, 4, -1, CLF_LANG_NONE, -1, 0};
    CLF_ASSERT_OK(framing_of("pad_id: 4", &other, &f));
    assert_framing(&f, 5, 6, 4, 7, 8, 4);
    /* bos_id frames the source and starts the decoder; eos_id ends both */
    CLF_ASSERT_OK(framing_of("bos_id: 10, eos_id: 11", &built, &f));
    assert_framing(&f, 10, 11, 1, 10, 11, 1);
    CLF_ASSERT_OK(framing_of("bos_id: 10, decoder_start_id: 9", &built, &f));
    assert_framing(&f, 10, 3, 1, 9, 3, 1);
    CLF_ASSERT_OK(framing_of("source_bos: false, source_eos: false", &built, &f));
    assert_framing(&f, -1, -1, 1, 2, 3, 1);
    /* Marian's (clformer import marian): x </s>, <pad> y, y </s>; its vocabulary has no <s> */
    const clf_framing marian = {-1, 0, 11, -1, 0, 11, -1, CLF_LANG_NONE, -1, 0};
    CLF_ASSERT_OK(
        framing_of("pad_id: 11, eos_id: 0, decoder_start_id: 11, source_bos: false", &marian, &f));
    assert_framing(&f, -1, 0, 11, 11, 0, 11);

    /* needed, given by neither: the key to set */
    const clf_framing none = {-1, -1, -1, -1, -1, -1, -1, CLF_LANG_NONE, -1, 0};
    ck_assert_int_eq(framing_of("", &none, &f), CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), "the source vocabulary has no [SOS] token (set "
                                       "model.bos_id, or model.source_bos: false)");
    ck_assert_int_eq(framing_of("source_bos: false", &none, &f), CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), "the source vocabulary has no [EOS] token (set "
                                       "model.eos_id, or model.source_eos: false)");
    ck_assert_int_eq(framing_of("source_bos: false, eos_id: 3", &none, &f), CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), "the target vocabulary has no [SOS] token (set "
                                       "model.decoder_start_id or model.bos_id)");
    const clf_framing no_tgt_eos = {2, 3, 1, 2, -1, 1, -1, CLF_LANG_NONE, -1, 0};
    ck_assert_int_eq(framing_of("", &no_tgt_eos, &f), CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(),
                     "the target vocabulary has no [EOS] token (set model.eos_id)");
    CLF_ASSERT_OK(framing_of("eos_id: 3", &no_tgt_eos, &f));
    CLF_ASSERT_OK(framing_of("source_bos: false, source_eos: false, decoder_start_id: 1, "
                             "eos_id: 3",
                             &none, &f));
    assert_framing(&f, -1, -1, 1, 1, 3, 1);
    /* a vocabulary's own pad that is not pad_id */
    ck_assert_int_eq(framing_of("pad_id: 0", &built, &f), CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), "the source vocabulary's [PAD] is id 1 but model.pad_id "
                                       "is 0");
    const clf_framing tgt_pad = {2, 3, -1, 2, 3, 5, -1, CLF_LANG_NONE, -1, 0};
    ck_assert_int_eq(framing_of("", &tgt_pad, &f), CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), "the target vocabulary's [PAD] is id 5 but model.pad_id "
                                       "is 1");
    ck_assert_int_eq(clf_model_framing(NULL, NULL, &f), CLF_ERR_INPUT);
}
END_TEST

/* languages: the codes a model translates from and to; absent, no section in the dump;
 * given as lists or one code, read, dumped and read back ("no", Norwegian, stays a code). */
START_TEST(test_languages)
{
    clf_config *cfg = malloc(sizeof *cfg);
    const clf_languages_config *l = &cfg->languages;
    CLF_ASSERT_OK(clf_config_parse_string("model: {src_vocab: 9, tgt_vocab: 9}\n", "<s>", cfg));
    ck_assert_int_eq(l->present, 0);
    ck_assert_int_eq(l->n_source + l->n_target, 0);
    char *text = dump_to_string(cfg);
    ck_assert_ptr_null(strstr(text, "languages:"));
    free(text);
    CLF_ASSERT_OK(clf_config_parse_string("model: {src_vocab: 9, tgt_vocab: 9}\n"
                                          "languages: {source: [en, pt-BR], target: no}\n",
                                          "<s>", cfg));
    ck_assert_int_eq(l->present, 1);
    ck_assert_int_eq(l->n_source, 2);
    ck_assert_str_eq(l->source[0], "en");
    ck_assert_str_eq(l->source[1], "pt-BR");
    ck_assert_int_eq(l->n_target, 1);
    ck_assert_str_eq(l->target[0], "no");
    assert_round_trip(cfg);
    text = dump_to_string(cfg);
    ck_assert_ptr_nonnull(
        strstr(text, "languages:\n  source: [\"en\", \"pt-BR\"]\n  target: [\"no\"]\n"));
    free(text);
    /* the shipped model says what it translates */
    CLF_ASSERT_OK(clf_config_read(CLF_MODELS_DIR "/en-de-gettext/model.yaml", cfg));
    ck_assert_int_eq(l->n_source, 1);
    ck_assert_str_eq(l->source[0], "en");
    ck_assert_int_eq(l->n_target, 1);
    ck_assert_str_eq(l->target[0], "de");
    free(cfg);
}
END_TEST

/* The keys of many-language models (M2M-100, NLLB, mBART): fairseq's sinusoidal table, the
 * position offset, the language tokens' places and the added specials; defaults, a
 * round trip through the dump, the framing's place, and the errors at their lines. */
START_TEST(test_language_model_keys)
{
    clf_config *cfg = malloc(sizeof *cfg);
    const clf_model_config *m = &cfg->model;
    CLF_ASSERT_OK(clf_config_parse_string("model: {src_vocab: 9, tgt_vocab: 9}\n", "<s>", cfg));
    ck_assert_int_eq(m->position_offset, 0);
    ck_assert_int_eq(m->source_language, CLF_LANG_NONE);
    ck_assert_int_eq(m->target_language, CLF_TGT_LANG_NONE);
    ck_assert_int_eq(m->specials_from, -1);
    ck_assert_int_eq(m->embed_norm, 0);
    ck_assert_int_eq(m->clean_up_spaces, 0);
    ck_assert_int_eq(m->fixed_output_bias, 0);
    ck_assert_int_eq(cfg->generate.early_stopping, 0);
    CLF_ASSERT_OK(clf_config_parse_string(
        "model: {src_vocab: 9, tgt_vocab: 9, d_model: 8, heads: 2, positional: "
        "sinusoidal_fairseq,\n  position_offset: 2, source_language: before, target_language: "
        "forced, specials_from: 7, embed_norm: true, clean_up_spaces: true,\n"
        "  fixed_output_bias: true}\n"
        "generate: {beam: 4, beam_style: hf, early_stopping: true}\n"
        "languages: {source: [en, de], target: [en, de], token_prefix: __, token_suffix: __}\n",
        "<s>", cfg));
    ck_assert_int_eq(m->positional, CLF_POS_SINUSOIDAL_FAIRSEQ);
    ck_assert_int_eq(m->position_offset, 2);
    ck_assert_int_eq(m->source_language, CLF_LANG_BEFORE);
    ck_assert_int_eq(m->target_language, CLF_TGT_LANG_FORCED);
    ck_assert_int_eq(m->specials_from, 7);
    ck_assert_int_eq(m->embed_norm, 1);
    ck_assert_int_eq(m->clean_up_spaces, 1);
    ck_assert_int_eq(m->fixed_output_bias, 1);
    ck_assert_int_eq(cfg->generate.early_stopping, 1);
    ck_assert_str_eq(cfg->languages.token_prefix, "__");
    ck_assert_str_eq(cfg->languages.token_suffix, "__");
    assert_round_trip(cfg);
    clf_framing f;
    CLF_ASSERT_OK(clf_model_framing(m, NULL, &f));
    ck_assert_int_eq(f.src_lang_place, CLF_LANG_BEFORE);
    ck_assert_int_eq(f.src_lang, -1);
    /* the row writer: [bos] lang x [eos] lang-after, and the count it adds */
    f.src_lang = 5;
    const int32_t x[2] = {7, 8};
    int32_t row[6];
    clf_framing_source_row(&f, x, 2, 6, row);
    const int32_t want[6] = {2, 5, 7, 8, 3, 1};
    ck_assert_int_eq(clf_framing_source_extra(&f), 3);
    ck_assert_int_eq(memcmp(row, want, sizeof row), 0);
    f.src_lang_place = CLF_LANG_AFTER;
    clf_framing_source_row(&f, x, 2, 6, row);
    const int32_t after[6] = {2, 7, 8, 3, 5, 1};
    ck_assert_int_eq(memcmp(row, after, sizeof row), 0);
    /* a language token needs its codes; specials_from is an id of tgt_vocab */
    ck_assert_int_eq(clf_config_parse_string("model: {src_vocab: 9, tgt_vocab: 9,\n"
                                             "  source_language: after}\n",
                                             "<t>", cfg),
                     CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), "<t>:2:20: model.source_language: after needs the codes "
                                       "of languages.source (none given)");
    ck_assert_int_eq(clf_config_parse_string("model: {src_vocab: 9, tgt_vocab: 9,\n"
                                             "  target_language: forced}\n",
                                             "<t>", cfg),
                     CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), "<t>:2:20: model.target_language: forced needs the codes "
                                       "of languages.target (none given)");
    ck_assert_int_eq(clf_config_parse_string("model: {src_vocab: 9, tgt_vocab: 9, "
                                             "specials_from: 10}\n",
                                             "<t>", cfg),
                     CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), "<t>:1:52: model.specials_from: 10 is past tgt_vocab 9");
    ck_assert_int_eq(clf_config_parse_string("model: {src_vocab: 9, tgt_vocab: 9, "
                                             "clean_up_spaces: maybe}\n",
                                             "<t>", cfg),
                     CLF_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "model.clean_up_spaces"));
    ck_assert_int_eq(clf_config_parse_string("model: {src_vocab: 9, tgt_vocab: 9, "
                                             "source_language: middle}\n",
                                             "<t>", cfg),
                     CLF_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "model.source_language: unknown language token "
                                                   "place 'middle' (expected none, before or "
                                                   "after)"));
    free(cfg);
}
END_TEST

/* generate: translate's decoding settings; absent, translate's own defaults and no section
 * in the dump; given, every key read, dumped and read back. */
START_TEST(test_generate)
{
    clf_config *cfg = malloc(sizeof *cfg);
    CLF_ASSERT_OK(clf_config_parse_string("model: {src_vocab: 9, tgt_vocab: 9}\n", "<s>", cfg));
    const clf_generate_config *g = &cfg->generate;
    ck_assert_int_eq(g->present, 0);
    ck_assert_int_eq(g->beam, 1);
    ck_assert_int_eq(g->beam_style, 0);
    ck_assert_float_eq(g->length_penalty, -1.0f);
    ck_assert_int_eq(g->max_len, 0);
    ck_assert_int_eq(g->forced_eos, 0);
    char *text = dump_to_string(cfg);
    ck_assert_ptr_null(strstr(text, "generate:"));
    free(text);
    CLF_ASSERT_OK(clf_config_parse_string("model: {src_vocab: 9, tgt_vocab: 9, max_len: 512}\n"
                                          "generate: {beam: 4, beam_style: hf, length_penalty: "
                                          "1.0, max_len: 511, forced_eos: true}\n",
                                          "<s>", cfg));
    ck_assert_int_eq(g->present, 1);
    ck_assert_int_eq(g->beam, 4);
    ck_assert_int_eq(g->beam_style, 1);
    ck_assert_float_eq(g->length_penalty, 1.0f);
    ck_assert_int_eq(g->max_len, 511);
    ck_assert_int_eq(g->forced_eos, 1);
    assert_round_trip(cfg);
    text = dump_to_string(cfg);
    ck_assert_ptr_nonnull(strstr(text, "generate:\n  beam: 4\n  beam_style: hf\n"
                                       "  length_penalty: 1.0\n  max_len: 511\n"
                                       "  forced_eos: true\n"));
    free(text);
    /* a section with one key: the others keep translate's defaults, auto included */
    CLF_ASSERT_OK(clf_config_parse_string("model: {src_vocab: 9, tgt_vocab: 9}\n"
                                          "generate: {beam: 2, length_penalty: auto}\n",
                                          "<s>", cfg));
    ck_assert_int_eq(g->present, 1);
    ck_assert_int_eq(g->beam, 2);
    ck_assert_float_eq(g->length_penalty, -1.0f);
    ck_assert_int_eq(g->beam_style, 0);
    assert_round_trip(cfg);
    text = dump_to_string(cfg);
    ck_assert_ptr_nonnull(strstr(text, "  length_penalty: auto\n"));
    free(text);
    free(cfg);
}
END_TEST

/* A bad config and a piece of the one-line message it must give. */
typedef struct bad_case {
    const char *text;
    const char *want;
} bad_case;

#define M "model:\n  src_vocab: 10\n  tgt_vocab: 10\n"
#define T M "train:\n  data: {train: a.tsv}\n"

static const bad_case bad_cases[] = {
    /* unknown keys, with and without a suggestion */
    {M "  hedas: 4\n", "<t>:4:3: model.hedas: unknown key 'hedas' (did you mean 'heads'?)"},
    {M "  dmodel: 4\n", "<t>:4:3: model.dmodel: unknown key 'dmodel' (did you mean 'd_model'?)"},
    {M "  zzz: 4\n", "<t>:4:3: model.zzz: unknown key 'zzz' (valid keys: src_vocab, tgt_vocab"},
    {"modle: {src_vocab: 1}\n", "<t>:1:1: modle: unknown key 'modle' (did you mean 'model'?)"},
    {M "backend: {nmae: cpu}\n", "<t>:4:11: backend.nmae: unknown key 'nmae'"},
    {T "  optimizer: {lr: 1.0e-3, beta: [0.9, 0.98]}\n",
     "<t>:6:27: train.optimizer.beta: unknown key 'beta' (did you mean 'betas'?)"},
    {M "  layernorm: {style: tutorial, epsilon: 1.0e-6}\n",
     "<t>:4:32: model.layernorm.epsilon: unknown key 'epsilon'"},
    /* wrong types */
    {M "  heads: abc\n", "<t>:4:10: model.heads: expected an integer, got 'abc'"},
    {M "  heads: 4.5\n", "<t>:4:10: model.heads: expected an integer, got '4.5'"},
    {M "  heads: 1e3\n", "model.heads: expected an integer, got '1e3'"},
    {M "  heads: \"4\"\n", "model.heads: expected an integer, got the quoted string '4'"},
    {M "  heads:\n", "model.heads: expected an integer, got nothing"},
    {M "  heads: ~\n", "model.heads: expected an integer, got null"},
    {M "  d_model: {a: 1}\n", "<t>:4:12: model.d_model: expected an integer, got a mapping"},
    {M "  d_model: [512]\n", "<t>:4:12: model.d_model: expected an integer, got a sequence"},
    {M "  max_len: 99999999999999999999\n",
     "model.max_len: integer 99999999999999999999 is out of range"},
    {M "  dropout: nan\n", "model.dropout: expected a number, got 'nan'"},
    {M "  dropout: .inf\n", "model.dropout: expected a number, got '.inf'"},
    {M "  dropout: 0x1p-3\n", "model.dropout: expected a number, got '0x1p-3'"},
    {M "  layernorm: {eps: 1e99}\n", "model.layernorm.eps: number 1e99 is out of range"},
    {M "  attention_bias: maybe\n",
     "<t>:4:19: model.attention_bias: expected true or false, got 'maybe'"},
    {M "  final_norm: sometimes\n",
     "<t>:4:15: model.final_norm: expected auto, true or false, got 'sometimes'"},
    {M "  layernorm: tutorial\n", "<t>:4:14: model.layernorm: expected a mapping, got 'tutorial'"},
    {"model: 5\n", "<t>:1:8: model: expected a mapping, got '5'"},
    {M "  norm: [pre]\n", "model.norm: expected pre, post or branch, got a sequence"},
    {M "  ? [a]\n  : 1\n", "<t>:4:5: model: expected a key name, got a sequence"},
    /* sizes */
    {M "  d_model: -5\n", "<t>:4:12: model.d_model: must be > 0, got -5"},
    {M "  heads: 0\n", "<t>:4:10: model.heads: must be > 0, got 0"},
    {M "  layers: 0\n", "model.layers: must be > 0, got 0"},
    {M "  layers: 5000\n", "model.layers: must be <= 1024, got 5000"},
    {M "  d_ff: -1\n", "model.d_ff: must be > 0, got -1"},
    {"model:\n  src_vocab: 0\n  tgt_vocab: 10\n", "<t>:2:14: model.src_vocab: must be > 0, got 0"},
    {M "  pad_id: -1\n", "model.pad_id: must be >= 0, got -1"},
    {M "  pad_id: 10\n", "<t>:4:11: model.pad_id: 10 is not an id of the vocabularies"},
    {M "backend: {threads: -2}\n", "backend.threads: must be >= 0, got -2"},
    {M "backend: {device: -1}\n", "<t>:4:19: backend.device: a device index must be >= 0"},
    {M "  d_model: 512\n  heads: 7\n",
     "<t>:5:10: model.heads: d_model 512 is not divisible by heads 7"},
    {M "  d_model: 30\n", "<t>:4:12: model.heads: d_model 30 is not divisible by heads 8"},
    /* configurations that parse but cannot run are refused at load, with the line */
    {M "  d_model: 9\n  heads: 3\n",
     "<t>:4:12: model.d_model: 9 must be even for positional: sinusoidal (sin/cos pairs)"},
    /* names */
    {M "  norm: middle\n",
     "<t>:4:9: model.norm: unknown norm 'middle' (expected pre, post or branch)"},
    {M "  positional: rotary\n",
     "<t>:4:15: model.positional: unknown positional encoding 'rotary' (expected sinusoidal, "
     "learned, sinusoidal_split or sinusoidal_fairseq)"},
    /* the keys of real checkpoints (Marian) */
    {M "  embed_scale: big\n",
     "<t>:4:16: model.embed_scale: expected sqrt_d_model or a number > 0, got 'big'"},
    {M "  embed_scale: 0\n", "<t>:4:16: model.embed_scale: must be > 0, got 0"},
    {M "  eos_id: -2\n", "<t>:4:11: model.eos_id: must be >= -1, got -2"},
    {M "  decoder_start_id: 10\n",
     "<t>:4:21: model.decoder_start_id: 10 is not an id of the vocabularies (src_vocab 10, "
     "tgt_vocab 10)"},
    {M "  banned_ids: 3\n", "<t>:4:15: model.banned_ids: expected a list of ids like [58100]"},
    {M "  banned_ids: [1, x]\n", "<t>:4:19: model.banned_ids[1]: expected an integer"},
    {M "  banned_ids: [12]\n", "model.banned_ids: 12 is not an id of tgt_vocab 10"},
    {M "  banned_ids: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5, 6]\n",
     "<t>:4:15: model.banned_ids: at most 16 ids, got 17"},
    {M "  source_eos: maybe\n", "<t>:4:15: model.source_eos: expected true or false"},
    /* generate: translate's settings */
    {M "generate: {beem: 4}\n",
     "<t>:4:12: generate.beem: unknown key 'beem' (did you mean 'beam'?)"},
    {M "generate: {beam: 0}\n", "<t>:4:18: generate.beam: must be > 0, got 0"},
    {M "generate: {beam_style: marian}\n",
     "<t>:4:24: generate.beam_style: unknown beam style 'marian' (expected gnmt or hf)"},
    {M "generate: {length_penalty: -1}\n",
     "<t>:4:28: generate.length_penalty: must be in [0, 100], got -1"},
    {M "generate: {length_penalty: long}\n",
     "<t>:4:28: generate.length_penalty: expected auto or a number in [0, 100], got 'long'"},
    {M "generate: {max_len: 256}\n",
     "<t>:4:21: generate.max_len: 256 is more than model.max_len - 1 = 255"},
    {M "languages: {source: [en, \"e n\"]}\n",
     "<t>:4:26: languages.source[1]: expected a language code like en or pt-BR (letters, digits, "
     "'-', '_'), got 'e n'"},
    {M "languages: {source: {en: 1}}\n",
     "<t>:4:21: languages.source: expected a list of language codes like [en, de], got a "
     "mapping"},
    {M "languages: {target: [abcdefghijklmnopq]}\n",
     "<t>:4:22: languages.target[0]: too long (17 characters, at most 15)"},
    {M "languages: {sources: [en]}\n", "languages.sources: unknown key 'sources'"},
    {M "generate: {forced_eos: 1}\n",
     "<t>:4:24: generate.forced_eos: expected true or false, got '1'"},
    {M "  tie_embeddings: both\n",
     "<t>:4:19: model.tie_embeddings: unknown tie_embeddings 'both' (expected none, decoder or "
     "all)"},
    {"model:\n  src_vocab: 10\n  tgt_vocab: 12\n  tie_embeddings: all\n",
     "<t>:4:19: model.tie_embeddings: all shares one matrix between source and target "
     "embeddings, which needs src_vocab == tgt_vocab (got 10 and 12)"},
    {M "  norm: Post\n", "model.norm: unknown norm 'Post' (did you mean 'post'? expected pre, "
                         "post or branch)"},
    {M "  layernorm: {style: fancy}\n",
     "model.layernorm.style: unknown norm style 'fancy': not built in (tutorial or standard) "
     "and no plugin provides it"},
    {M "  activation: swishy\n",
     "model.activation: unknown activation 'swishy': not built in (relu) and no plugin "
     "provides it"},
    {M "  activation: Bad-Name\n", "model.activation: unknown activation 'Bad-Name'"},
    /* an op name is resolved after parsing, at the position parsing recorded */
    {"plugins: []\n" M "  activation: swishy\n",
     "<t>:5:15: model.activation: unknown activation 'swishy'"},
    {M "  layernorm: {style: fancy}\n", "<t>:4:22: model.layernorm.style: unknown norm style"},
    /* the memory a model implies at load (CLF_CONFIG_MODEL_BYTES_MAX), each product named */
    {"model: {src_vocab: 10, tgt_vocab: 10, max_len: 16777216, d_model: 512}\n",
     "<t>:1:48: model.max_len: max_len 16777216 x d_model 512 = 32 GiB of positional table "
     "exceeds the limit of 16 GiB"},
    {"model: {src_vocab: 10, tgt_vocab: 10, max_len: 16777216, d_model: 512, positional: "
     "learned}\n",
     "model.max_len: max_len 16777216 x d_model 512 = 32 GiB of positional table"},
    {"model: {src_vocab: 16777216, tgt_vocab: 10, d_model: 1024}\n",
     "<t>:1:20: model.src_vocab: src_vocab 16777216 x d_model 1024 = 64 GiB of source "
     "embedding exceeds the limit of 16 GiB"},
    {"model: {src_vocab: 10, tgt_vocab: 10000000, d_model: 512}\n",
     "<t>:1:35: model.tgt_vocab: tgt_vocab 10000000 x d_model 512 = 19.07 GiB of target "
     "embedding exceeds the limit of 16 GiB"},
    /* each product within the limit, their sum not: three matrices of 6 GiB */
    {"model: {src_vocab: 1572864, tgt_vocab: 1572864, d_model: 1024, max_len: 64}\n",
     "<t>:1:58: model: the weights and tables come to 18.47 GiB (positional 0.25 MiB: max_len "
     "64 x d_model; embeddings 18 GiB: src_vocab 1572864, tgt_vocab 1572864 x d_model; layers "
     "480 MiB: 6 encoder, 6 decoder of d_model 1024, d_ff 2048), more than the limit of 16 GiB"},
    {"model: {src_vocab: 10, tgt_vocab: 10, d_model: 8192, d_ff: 32768, layers: 3}\n",
     "<t>:1:48: model: the weights and tables come to 21.01 GiB (positional 8 MiB: max_len 256 "
     "x d_model; embeddings 0.94 MiB: src_vocab 10, tgt_vocab 10 x d_model; layers 21 GiB: 3 "
     "encoder, 3 decoder of d_model 8192, d_ff 32768), more than the limit of 16 GiB"},
    {M "  activation: [relu]\n",
     "model.activation: expected relu or an op plugin's name, got a sequence"},
    {M "  output: probs\n",
     "model.output: unknown output 'probs' (expected logits or log_softmax)"},
    {M "backend: {name: cuda}\n",
     "<t>:4:17: backend.name: unknown backend 'cuda' (expected cpu, opencl or auto)"},
    {T "  optimizer: {name: sgd}\n",
     "train.optimizer.name: unknown optimizer 'sgd' (expected adam or adamw)"},
    {T "  schedule: {name: cosine}\n",
     "train.schedule.name: unknown schedule 'cosine' (expected constant, noam or inverse_sqrt)"},
    /* ranges of floats */
    {M "  dropout: 1.0\n", "<t>:4:12: model.dropout: must be in [0, 1), got 1.0"},
    {M "  dropout: -0.1\n", "model.dropout: must be in [0, 1), got -0.1"},
    {M "  dropout: 0.99999999999\n", "model.dropout: must be in [0, 1), got 0.99999999999"},
    {M "  dropout: {attention: 1.5}\n", "model.dropout.attention: must be in [0, 1), got 1.5"},
    {M "  dropout: {atention: 0.1}\n",
     "model.dropout.atention: unknown key 'atention' (did you mean 'attention'?)"},
    {M "  dropout: [0.1]\n", "model.dropout: expected a number"},
    {M "  layernorm: {eps: 0}\n", "model.layernorm.eps: must be > 0, got 0"},
    {T "  optimizer: {lr: -1.0e-4}\n", "train.optimizer.lr: must be > 0, got -1.0e-4"},
    {T "  label_smoothing: 1\n", "train.label_smoothing: must be in [0, 1), got 1"},
    {T "  clip_norm: -1\n", "train.clip_norm: must be >= 0, got -1"},
    {T "  precision: fp8\n",
     "<t>:6:14: train.precision: unknown precision 'fp8' (expected f32, bf16 or f16)"},
    {T "  loss_scale: {init: 0}\n", "train.loss_scale.init: must be > 0, got 0"},
    {T "  loss_scale: {window: 0}\n", "train.loss_scale.window: must be > 0, got 0"},
    {T "  optimizer: {betas: [0.9, 1.5]}\n",
     "<t>:6:28: train.optimizer.betas[1]: must be in [0, 1), got 1.5"},
    {T "  optimizer: {betas: [0.9]}\n",
     "<t>:6:22: train.optimizer.betas: expected two numbers [beta1, beta2], got 1 of them"},
    {T "  optimizer: {betas: 0.9}\n", "train.optimizer.betas: expected two numbers"},
    /* required keys, conflicts, cross-key checks */
    {"model:\n  tgt_vocab: 5\n", "<t>:2:3: model.src_vocab: required key missing"},
    {"model:\n  src_vocab: 5\n", "<t>:2:3: model.tgt_vocab: required key missing"},
    {"model:\n", "<t>:1:1: model.src_vocab: required key missing"},
    {"backend: {name: cpu}\n", "<t>:1:1: model: missing section"},
    {M "  layers: 2\n  encoder_layers: 3\n",
     "<t>:5:19: model.encoder_layers: conflicts with model.layers at line 4"},
    {M "  decoder_layers: 3\n  layers: 2\n",
     "<t>:4:19: model.decoder_layers: conflicts with model.layers at line 5"},
    {M "  src_vocab: 11\n", "<t>:4:3: model.src_vocab: duplicate key (first at line 2)"},
    {M "backend: {}\nbackend: {}\n", "<t>:5:1: backend: duplicate key (first at line 4)"},
    {M "train:\n  seed: 1\n", "<t>:5:3: train.data.train: required key missing"},
    {T "  steps: 0\n  epochs: 0\n", "<t>:7:11: train.epochs: steps and epochs are both 0"},
    {T "  schedule: {name: noam}\n",
     "<t>:6:13: train.schedule.warmup: schedule noam needs warmup > 0"},
    {T "  max_len: 512\n", "<t>:6:12: train.max_len: 512 exceeds model.max_len 256"},
    {T "  seed: -1\n", "train.seed: must be >= 0, got -1"},
    {T "  accumulate: 0\n", "train.accumulate: must be > 0, got 0"},
    /* data: a TSV path or [source, target] */
    {M "train:\n  data: {train: [a, b, c]}\n",
     "<t>:5:17: train.data.train: expected a TSV file or two line-aligned files [source, "
     "target], got 3 files"},
    {M "train:\n  data: {train: [a]}\n", "<t>:5:17: train.data.train: expected a TSV file or "
                                         "two line-aligned files [source, target], got 1 file"},
    {M "train:\n  data: {train: a.tsv, valid: []}\n",
     "<t>:5:31: train.data.valid: expected a TSV file or two line-aligned files [source, "
     "target], got 0 files"},
    {M "train:\n  data: {train: [a, {b: 1}]}\n",
     "<t>:5:21: train.data.train[1]: expected a string, got a mapping"},
    {M "train:\n  data: {train: [~, b]}\n",
     "<t>:5:18: train.data.train[0]: expected a string, got null"},
    {M "train:\n  data: {train: [a, '']}\n",
     "<t>:5:21: train.data.train[1]: expected a file name, got ''"},
    {M "train:\n  data: {train: [a, [b]]}\n",
     "<t>:5:21: train.data.train[1]: expected a string, got a sequence"},
    {M "train:\n  data: {train: {src: a}}\n",
     "<t>:5:17: train.data.train: expected a string, got a mapping"},
    {M "train:\n  data: {valid: [a, b]}\n",
     "<t>:5:9: train.data.train: required key missing (a file of source<TAB>target lines, or "
     "[source file, target file])"},
    {M "train:\n  data: {train: a, vaild: b}\n",
     "<t>:5:20: train.data.vaild: unknown key 'vaild' (did you mean 'valid'?)"},
    /* not a configuration at all */
    {"", "<t>:1:1: empty configuration: expected a mapping with a 'model:' section"},
    {"# only a comment\n\n", "<t>:1:1: empty configuration"},
    {"- a\n- b\n", "<t>:1:1: expected a mapping with a 'model:' section at the top level, got a "
                   "sequence"},
    {"just words\n", "<t>:1:1: expected a mapping with a 'model:' section at the top level, got "
                     "'just words'"},
    {"model: {src_vocab: 10\n", "<t>:2:1: invalid YAML: did not find expected ',' or '}' (while "
                                "parsing a flow mapping at line 1, column 8)"},
    {"model:\n  src_vocab: 10\n tgt_vocab: 10\n",
     "<t>:3:2: invalid YAML: did not find expected key"},
    {"model: *nothing\n", "<t>:1:8: invalid YAML: found undefined alias"},
    {M "\t\n", "invalid YAML"},
    {M "  norm: \"\xff\"\n", "<t>:4:10: invalid YAML: invalid leading UTF-8 octet (byte 0xff)"},
    {M "---\nmodel: {}\n", "<t>:5:1: a second YAML document"},
    /* the limits (README, "Limits"): aliases that expand past CFG_NODES_MAX (10 x 10 x 10 x
     * 10 leaves: "billion laughs"), an alias inside what it names, nesting past 64 */
    {M "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
       "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
       "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
       "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n",
     "<t>:7:4: expands to more than the limit of 10000 nodes (aliases count as the nodes they "
     "stand for)"},
    {M "a: &a [x, *a]\n", "<t>:4:4: an alias inside the node it names (a recursive alias)"},
    {M
     "a: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[x]]]]]]]]]]]]]]]]]]]]]]]]"
     "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n",
     "<t>:4:67: nested deeper than the limit of 64 levels"},
};

START_TEST(test_errors)
{
    clf_config *cfg = malloc(sizeof *cfg);
    const bad_case *c = &bad_cases[_i];
    clf_clear_error();
    clf_status st = clf_config_parse_string(c->text, "<t>", cfg);
    const char *msg = clf_last_error();
    ck_assert_msg(st == CLF_ERR_INPUT, "case %d: status %d (%s) for:\n%s", _i, (int)st, msg,
                  c->text);
    ck_assert_msg(strstr(msg, c->want) != NULL, "case %d: message\n  %s\nlacks\n  %s", _i, msg,
                  c->want);
    ck_assert_msg(strchr(msg, '\n') == NULL, "case %d: message is not one line: %s", _i, msg);
    ck_assert_msg(strncmp(msg, "<t>:", 4) == 0, "case %d: no position: %s", _i, msg);
    free(cfg);
}
END_TEST

START_TEST(test_file_errors)
{
    clf_config *cfg = malloc(sizeof *cfg);
    char dir[] = "/tmp/clf-config-XXXXXX", path[256], want[512];
    ck_assert_ptr_nonnull(mkdtemp(dir));

    snprintf(path, sizeof path, "%s/missing.yaml", dir);
    ck_assert_int_eq(clf_config_load(path, cfg), CLF_ERR_IO);
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
    ck_assert_str_eq(clf_last_error(), want);

    ck_assert_int_eq(clf_config_load(dir, cfg), CLF_ERR_IO); /* a directory */
    ck_assert_ptr_nonnull(strstr(clf_last_error(), dir));

    snprintf(path, sizeof path, "%s/empty.yaml", dir);
    FILE *f = fopen(path, "w");
    fclose(f);
    ck_assert_int_eq(clf_config_load(path, cfg), CLF_ERR_INPUT);
    snprintf(want, sizeof want,
             "%s:1:1: empty configuration: expected a mapping with a 'model:' section", path);
    ck_assert_str_eq(clf_last_error(), want);
    unlink(path);

    snprintf(path, sizeof path, "%s/bad.yaml", dir);
    f = fopen(path, "w");
    fputs("# a comment\nmodel:\n  src_vocab: 10\n  tgt_vocab: 10\n  heads: abc\n", f);
    fclose(f);
    ck_assert_int_eq(clf_config_load(path, cfg), CLF_ERR_INPUT);
    snprintf(want, sizeof want, "%s:5:10: model.heads: expected an integer, got 'abc'", path);
    ck_assert_str_eq(clf_last_error(), want);
    unlink(path);

    /* a dumped file loads back from disk too */
    snprintf(path, sizeof path, "%s/dump.yaml", dir);
    clf_config *orig = malloc(sizeof *orig);
    CLF_ASSERT_OK(clf_config_parse_string(full_train_yaml, path, orig));
    f = fopen(path, "w");
    CLF_ASSERT_OK(clf_config_dump(orig, f));
    fclose(f);
    CLF_ASSERT_OK(clf_config_load(path, cfg));
    assert_same_config(orig, cfg);
    ck_assert_str_eq(orig->path, cfg->path);
    unlink(path);
    free(orig);

    rmdir(dir);
    free(cfg);
}
END_TEST

/* The document's size limit (1 MiB): a file one byte over it is refused before it is read,
 * naming the file and the limit; a string one byte over it likewise. */
START_TEST(test_size_limit)
{
    clf_config *cfg = malloc(sizeof *cfg);
    const size_t max = 1 << 20;
    char dir[] = "/tmp/clf-config-XXXXXX", path[256], want[512];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/big.yaml", dir);
    char *text = malloc(max + 2);
    ck_assert_ptr_nonnull(text);
    /* a valid config padded with a comment to exactly max + 1 bytes */
    const char head[] = "model: {src_vocab: 10, tgt_vocab: 10}\n#";
    memcpy(text, head, sizeof head - 1);
    memset(text + sizeof head - 1, 'x', max + 1 - (sizeof head - 1) - 1);
    text[max] = '\n';
    text[max + 1] = '\0';
    clf_test_write_file(path, text, max + 1);
    ck_assert_int_eq(clf_config_load(path, cfg), CLF_ERR_INPUT);
    snprintf(want, sizeof want, "%s: 1048577 bytes, more than the limit of 1048576", path);
    ck_assert_str_eq(clf_last_error(), want);
    ck_assert_int_eq(clf_config_parse_string(text, "<t>", cfg), CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), "<t>: 1048577 bytes, more than the limit of 1048576");
    /* one byte less loads */
    text[max - 1] = '\n';
    text[max] = '\0';
    clf_test_write_file(path, text, max);
    CLF_ASSERT_OK(clf_config_load(path, cfg));
    CLF_ASSERT_OK(clf_config_parse_string(text, "<t>", cfg));
    unlink(path);
    rmdir(dir);
    free(text);
    free(cfg);
}
END_TEST

/* The memory bound counts what is allocated: one matrix for tied embeddings (the sizes
 * refused untied above load tied), a gate for a plugin activation; a big config within it
 * loads without allocating its tables (configs/big.yaml is among the shipped configs). */
START_TEST(test_model_bytes_limit)
{
    clf_config *cfg = malloc(sizeof *cfg);
    CLF_ASSERT_OK(clf_config_parse_string("model: {src_vocab: 1572864, tgt_vocab: 1572864, "
                                          "d_model: 1024, max_len: 64, tie_embeddings: all}\n",
                                          "<t>", cfg));
    /* a table of 8 GiB is within the limit, and not allocated by parsing */
    CLF_ASSERT_OK(clf_config_read_string("model: {src_vocab: 10, tgt_vocab: 10, max_len: 4194304, "
                                         "d_model: 512}\n",
                                         "<t>", cfg));
    ck_assert_int_eq(clf_config_read_string("model: {src_vocab: 10, tgt_vocab: 10, max_len: "
                                            "8388609, d_model: 512}\n",
                                            "<t>", cfg),
                     CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "max_len 8388609 x d_model 512 = 16.000002 GiB of "
                                           "positional table exceeds the limit of 16 GiB"),
                  "%s", clf_last_error());
    /* relu: 2 FFN matrices of d_model x d_ff a layer; an op plugin's name may be gated: 3 */
    const char *ffn = "model: {src_vocab: 10, tgt_vocab: 10, d_model: 8192, d_ff: 98304, "
                      "encoder_layers: 1, decoder_layers: 1, activation: %s}\n";
    char text[256];
    snprintf(text, sizeof text, ffn, "relu");
    CLF_ASSERT_OK(clf_config_read_string(text, "<t>", cfg));
    snprintf(text, sizeof text, ffn, "swiglu");
    ck_assert_int_eq(clf_config_read_string(text, "<t>", cfg), CLF_ERR_INPUT);
    ck_assert_msg(
        strstr(clf_last_error(), "<t>:1:48: model: the weights and tables come to 21.01 GiB"), "%s",
        clf_last_error());
    free(cfg);
}
END_TEST

/* The same rule on a config whose vocabulary sizes are filled in after reading (train:
 * leaves them to its vocabularies): exactly the limit with sizes 0, over it with 12 words
 * each; a bad config is refused the same way at read time. */
START_TEST(test_model_bytes_after_fill)
{
    clf_config *cfg = malloc(sizeof *cfg);
    /* positional 16 GiB - 4 MiB + layers 4 MiB = 16 GiB */
    CLF_ASSERT_OK(clf_config_read_string("model: {max_len: 16773120, d_model: 256, d_ff: 256, "
                                         "layers: 1}\n"
                                         "train: {data: {train: d.tsv}, steps: 1}\n",
                                         "run.yaml", cfg));
    CLF_ASSERT_OK(clf_config_check_model_bytes(cfg));
    cfg->model.src_vocab = cfg->model.tgt_vocab = 12;
    ck_assert_int_eq(clf_config_check_model_bytes(cfg), CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(),
                     "run.yaml: model: the weights and tables come to 16.00003 GiB (positional "
                     "16.00 GiB: max_len 16773120 x d_model; embeddings 0.04 MiB: src_vocab "
                     "12, tgt_vocab 12 x d_model; layers 4 MiB: 1 encoder, 1 decoder of d_model "
                     "256, d_ff 256), more than the limit of 16 GiB");
    /* one product alone: named by its key */
    cfg->model.src_vocab = 16777216;
    cfg->model.d_model = 512;
    cfg->model.max_len = 256;
    ck_assert_int_eq(clf_config_check_model_bytes(cfg), CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), "run.yaml: model.src_vocab: src_vocab 16777216 x d_model "
                                       "512 = 32 GiB of source embedding exceeds the limit of 16 "
                                       "GiB");
    free(cfg);
}
END_TEST

CLF_TEST_SUITE_MAIN("config",
                    CLF_TCASE("config", 0, {test_shipped_configs_load}, {test_defaults},
                              {test_dropout_sites}, {test_layers}, {test_final_norm},
                              {test_train_full}, {test_train_data_forms},
                              {test_dump_strings_round_trip}, {test_real_model_keys},
                              {test_framing_rule}, {test_generate}, {test_languages},
                              {test_language_model_keys}, {test_errors, CLF_LOOPS(bad_cases)},
                              {test_file_errors}, {test_size_limit}, {test_model_bytes_limit},
                              {test_model_bytes_after_fill}))
