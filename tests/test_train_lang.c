/* `clformer train` on a many-language model (M2M-100, NLLB, mBART-50, imported with
 * `clformer import`) against transformers 4.40 (tests/reference/make_train_lang_reference.py):
 *   - the batches of the fixtures' sentence pairs are transformers' training framing, id for
 *     id: the source as the family's tokenizer frames it (tok(src, text_target=tgt)), the
 *     labels `lang y </s>`, the decoder inputs shift_tokens_right(labels) = `</s> lang y`
 *     (M2M-100 with its decoder_start_token_id, mBART-50 wrapping the last label; NLLB's
 *     and mBART-50's ids from the committed train_framing.json; legacy NLLB's source,
 *     pieces </s> eng_Latn, too);
 *   - M2M-100: the first step's loss is transformers' model(input_ids, labels=...).loss,
 *     and with label smoothing 0.1 its LabelSmoother's, to 1e-4 relative (through the API
 *     and as `clformer train` logs it), and the loss after one Adam step transformers' after
 *     the same torch.optim.Adam step (1e-4 relative): the imported model's output bias is
 *     fixed (model.fixed_output_bias), as M2M-100 has none;
 *   - a short `clformer train` run lowers the loss, and its checkpoint translates with
 *     --source-lang/--target-lang;
 *   - the refusals: a side without a language, a code the model lacks. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/config.h"
#include "clformer/dataset.h"
#include "clformer/json.h"
#include "clformer/model.h"
#include "clformer/tensor.h"
#include "clformer/tokenizer.h"
#include "clformer/train.h"
#include "clformer/weights.h"
#include "hf_parity.h"
#include "testutil.h"

#define LOSS_TOL 1e-4 /* relative, as the families' logits */

static const char *fix(const char *family, const char *name)
{
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s/%s", CLF_FIXTURES_DIR, family, name);
    return buf[k];
}

/* The family's fixture imported with `clformer import`; its path (static storage). */
static const char *import_family(const char *family)
{
    static char dir[256];
    char args[1024];
    snprintf(args, sizeof args, "'%s'", fix(family, "hf"));
    clf_test_import(family, args, dir, sizeof dir);
    return dir;
}

/* The imported model's vocabularies (its .spm pieces through vocab.json) and the framing of
 * its model.yaml with the languages src / tgt, resolved as `clformer train` resolves them. */
typedef struct framed {
    clf_config cfg;
    clf_tokenizer *tok[2];
    clf_framing f;
} framed;

static void framed_open(framed *fr, const char *dir, const char *src, const char *tgt,
                        clf_lang_place place)
{
    char path[512], spm[2][512], vocab[512];
    snprintf(path, sizeof path, "%s/model.yaml", dir);
    CLF_ASSERT_OK(clf_config_read(path, &fr->cfg));
    if (place != CLF_LANG_NONE) /* another placement than the import's */
        fr->cfg.model.source_language = place;
    snprintf(spm[0], sizeof spm[0], "%s/source.spm", dir);
    snprintf(spm[1], sizeof spm[1], "%s/target.spm", dir);
    snprintf(vocab, sizeof vocab, "%s/vocab.json", dir);
    for (int i = 0; i < 2; i++)
        CLF_ASSERT_OK(clf_tokenizer_load_mapped(spm[i], vocab, &fr->tok[i]));
    const clf_framing own = clf_tokenizer_framing(fr->tok[0], fr->tok[1]);
    CLF_ASSERT_OK(clf_model_framing(&fr->cfg.model, &own, &fr->f));
    CLF_ASSERT_OK(clf_tokenizer_language_id(fr->tok[0], &fr->cfg, 0, src, spm[0], &fr->f.src_lang));
    CLF_ASSERT_OK(clf_tokenizer_language_id(fr->tok[1], &fr->cfg, 1, tgt, spm[1], &fr->f.tgt_lang));
    fr->f.tgt_lang_forced = 1;
}

static void framed_close(framed *fr)
{
    clf_tokenizer_free(fr->tok[0]);
    clf_tokenizer_free(fr->tok[1]);
}

/* All pairs of tsv in one batch of the framing's (file order kept in b->index). */
static void one_batch(const framed *fr, const char *tsv, int n, clf_dataset **d, clf_batch *b)
{
    clf_dataset_opts o = {tsv, NULL, fr->tok[0], fr->tok[1], fr->cfg.model.max_len};
    CLF_ASSERT_OK(clf_dataset_load_framed(&o, &fr->f, d));
    ck_assert_uint_eq(clf_dataset_size(*d), (size_t)n);
    clf_batcher *bat;
    CLF_ASSERT_OK(clf_batcher_create(*d, n, 0, 0, 1, &bat));
    ck_assert_int_eq(clf_batcher_count(bat), 1);
    CLF_ASSERT_OK(clf_batcher_get(bat, 0, b));
    ck_assert_int_eq(b->batch, n);
    clf_batcher_free(bat);
}

/* Row k of rows [., len] equals want[0..n) then pad to len. */
static void check_row(const char *what, int k, const int32_t *row, int len, const int32_t *want,
                      int n, int32_t pad)
{
    ck_assert_msg(n <= len, "%s %d: transformers has %d ids, the batch %d", what, k, n, len);
    for (int j = 0; j < len; j++) {
        const int32_t w = j < n ? want[j] : pad;
        ck_assert_msg(row[j] == w, "%s %d position %d: %d, transformers %d", what, k, j,
                      (int)row[j], (int)w);
    }
}

/* ---- M2M-100: ids and loss against transformers' training step ---- */

typedef struct m2m_ref {
    clf_safetensors *f;
    int N, S, T;
    int32_t *src, *src_len, *labels, *tgt_len, *dec;
    float loss[2], after[2]; /* [plain, label smoothing 0.1] */
} m2m_ref;

static void ref_floats(clf_safetensors *f, const char *name, float *out)
{
    const clf_tensor *t = clf_safetensors_find(f, name);
    ck_assert_msg(t != NULL && clf_tensor_numel(t) == 2, "train_reference.safetensors: no %s[2]",
                  name);
    CLF_ASSERT_OK(clf_tensor_to_f32(t, out));
}

static void m2m_ref_open(m2m_ref *r)
{
    int64_t shape[8];
    r->f = clf_test_ref_open(fix("m2m100", "train_reference.safetensors"), "input_ids", &r->src,
                             &r->src_len, &r->N, &r->S);
    r->labels = clf_test_ref_ints(r->f, "labels", shape);
    r->T = (int)shape[1];
    r->tgt_len = clf_test_ref_ints(r->f, "tgt_len", NULL);
    r->dec = clf_test_ref_ints(r->f, "decoder_input_ids", NULL);
    ref_floats(r->f, "loss", r->loss);
    ref_floats(r->f, "loss_after", r->after);
    /* the training settings the reference was made with */
    static const char *const settings[][2] = {
        {"label_smoothing", "0.1"}, {"lr", "0.001"}, {"betas", "0.9,0.98"}, {"eps", "1e-09"}};
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++)
        ck_assert_str_eq(clf_safetensors_meta(r->f, settings[i][0]), settings[i][1]);
}

static void m2m_ref_close(m2m_ref *r)
{
    free(r->labels);
    free(r->tgt_len);
    free(r->dec);
    clf_test_ref_close(r->f, r->src, r->src_len);
}

static void check_close(const char *what, double got, double want)
{
    ck_assert_msg(fabs(got - want) <= LOSS_TOL * fabs(want), "%s: %.7f, transformers %.7f", what,
                  got, want);
}

/* The loss of b on a fresh model of dir (no dropout): label smoothing ls; with step, one Adam
 * step (the reference's lr, betas, eps) then the loss again in *after. */
static double model_loss(const char *dir, const clf_batch *b, float ls, int step, double *after)
{
    clf_config cfg;
    clf_weights *w;
    clf_model *m;
    clf_trainer *tr;
    const clf_backend_api *api;
    clf_backend *be;
    clf_test_open_backend("cpu", &api, &be);
    clf_test_load_model(dir, &cfg, &w);
    CLF_ASSERT_OK(clf_model_create(&cfg.model, w, api, be, &m));
    clf_train_config tc = cfg.train;
    tc.label_smoothing = ls;
    tc.accumulate = 1;
    tc.optimizer = CLF_OPT_ADAM;
    tc.lr = 1e-3f;
    tc.beta1 = 0.9f;
    tc.beta2 = 0.98f;
    tc.adam_eps = 1e-9f;
    tc.weight_decay = 0.0f;
    tc.clip_norm = 0.0f;
    tc.schedule = CLF_SCHED_CONSTANT;
    tc.warmup = 0;
    CLF_ASSERT_OK(clf_trainer_create(m, &tc, 0, &tr));
    const clf_train_batch tb = {b->batch, b->src_len, b->tgt_len, b->src, b->tgt_in, b->labels};
    double sum;
    long long tokens;
    CLF_ASSERT_OK(clf_trainer_accumulate(tr, &tb, &sum, &tokens));
    ck_assert_int_eq(tokens, b->tgt_tokens);
    const double loss = sum / (double)tokens;
    if (step) {
        CLF_ASSERT_OK(clf_trainer_step(tr, NULL, NULL));
        CLF_ASSERT_OK(clf_trainer_evaluate(tr, &tb, &sum, &tokens));
        *after = sum / (double)tokens;
    }
    clf_trainer_free(tr);
    clf_model_free(m);
    clf_weights_free(w);
    api->close(be);
    return loss;
}

START_TEST(m2m100_step_matches_transformers)
{
    m2m_ref r;
    m2m_ref_open(&r);
    const char *dir = import_family("m2m100");
    framed fr;
    framed_open(&fr, dir, "en", "de", CLF_LANG_NONE);
    clf_dataset *d;
    clf_batch b;
    one_batch(&fr, fix("m2m100", "train_pairs.tsv"), r.N, &d, &b);
    const int32_t pad = fr.f.tgt_pad;
    long long label_tokens = 0;
    for (int k = 0; k < b.batch; k++) {
        const int i = (int)b.index[k]; /* the pair's line - 1: the reference's row */
        check_row("source", i, b.src + (size_t)k * b.src_len, b.src_len, r.src + (size_t)i * r.S,
                  r.src_len[i], pad);
        check_row("labels", i, b.labels + (size_t)k * b.tgt_len, b.tgt_len,
                  r.labels + (size_t)i * r.T, r.tgt_len[i], pad);
        check_row("decoder input", i, b.tgt_in + (size_t)k * b.tgt_len, b.tgt_len,
                  r.dec + (size_t)i * r.T, r.tgt_len[i], pad);
        label_tokens += r.tgt_len[i];
    }
    ck_assert_int_eq(b.tgt_tokens, label_tokens); /* the loss covers the language token */

    double after[2];
    check_close("loss", model_loss(dir, &b, 0.0f, 0, NULL), r.loss[0]);
    check_close("label-smoothed loss", model_loss(dir, &b, 0.1f, 1, after), r.loss[1]);
    /* after one step: transformers', the output bias left as it is (M2M-100 has none) */
    check_close("label-smoothed loss after a step", after[0], r.after[1]);

    clf_batch_free(&b);
    clf_dataset_free(d);
    framed_close(&fr);
    clf_test_remove_import(dir);
    m2m_ref_close(&r);
}
END_TEST

/* ---- NLLB and mBART-50: ids against their tokenizers ---- */

static int32_t *json_ints(const json_t *row, int *n)
{
    ck_assert(json_is_array(row));
    *n = (int)json_array_size(row);
    int32_t *v = malloc(sizeof *v * (size_t)(*n ? *n : 1));
    for (int i = 0; i < *n; i++)
        v[i] = (int32_t)json_integer_value(json_array_get(row, (size_t)i));
    return v;
}

/* The sources of the family's train_framing.json framed with the source language token
 * placed as place says, against its key (input_ids, or NLLB's input_ids_legacy for "after");
 * with CLF_LANG_NONE the import's placement, the labels and the decoder inputs too. */
static void check_framing_json(const char *family, clf_lang_place place, const char *key)
{
    json_t *root;
    CLF_ASSERT_OK(clf_json_parse_file(fix(family, "train_framing.json"), 1 << 20, &root));
    const json_t *pairs = json_object_get(root, "pairs");
    const int n = (int)json_array_size(pairs);
    ck_assert_int_gt(n, 0);
    char tsv[512], *text = calloc(1, 1 << 16);
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        const json_t *p = json_array_get(pairs, (size_t)i);
        used += (size_t)snprintf(text + used, (1 << 16) - used, "%s\t%s\n",
                                 json_string_value(json_array_get(p, 0)),
                                 json_string_value(json_array_get(p, 1)));
    }
    const char *dir = import_family(family);
    snprintf(tsv, sizeof tsv, "%s.tsv", dir);
    clf_test_write_text(tsv, text);
    free(text);
    framed fr;
    framed_open(&fr, dir, json_string_value(json_object_get(root, "source")),
                json_string_value(json_object_get(root, "target")), place);
    clf_dataset *d;
    clf_batch b;
    one_batch(&fr, tsv, n, &d, &b);
    const char *const keys[3] = {key, "labels", "decoder_input_ids"};
    const int sides = place == CLF_LANG_NONE ? 3 : 1;
    for (int k = 0; k < b.batch; k++) {
        const int i = (int)b.index[k];
        const int32_t *rows[3] = {b.src + (size_t)k * b.src_len, b.labels + (size_t)k * b.tgt_len,
                                  b.tgt_in + (size_t)k * b.tgt_len};
        const int lens[3] = {b.src_len, b.tgt_len, b.tgt_len};
        for (int s = 0; s < sides; s++) {
            int m;
            int32_t *want =
                json_ints(json_array_get(json_object_get(root, keys[s]), (size_t)i), &m);
            check_row(keys[s], i, rows[s], lens[s], want, m, fr.f.tgt_pad);
            free(want);
        }
    }
    clf_batch_free(&b);
    clf_dataset_free(d);
    framed_close(&fr);
    remove(tsv);
    clf_test_remove_import(dir);
    json_decref(root);
}

START_TEST(nllb_batches_are_transformers_framing)
{
    check_framing_json("nllb", CLF_LANG_NONE, "input_ids");
    /* legacy_behaviour's source, pieces </s> eng_Latn (the target is framed as above) */
    check_framing_json("nllb", CLF_LANG_AFTER, "input_ids_legacy");
}
END_TEST

START_TEST(mbart_batches_are_transformers_framing)
{
    check_framing_json("mbart", CLF_LANG_NONE, "input_ids");
}
END_TEST

/* ---- clformer train, end to end ---- */

/* dir/model.yaml without dropout, then a train: section on the fixture's pairs (extra: more
 * train: keys), as path. */
static void write_experiment(const char *dir, const char *path, const char *run, int steps,
                             const char *extra)
{
    char p[512];
    snprintf(p, sizeof p, "%s/model.yaml", dir);
    char *model = clf_test_read_file(p, NULL);
    ck_assert_ptr_nonnull(model);
    char *line = strstr(model, "\n  dropout:");
    ck_assert_ptr_nonnull(line);
    char *end = strchr(line + 1, '\n');
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%.*s\n  dropout: 0%s", (int)(line - model), model, end);
    fprintf(f,
            "train:\n"
            "  data: {train: %s, valid: %s}\n"
            "  vocab: {src: %s/source.spm, tgt: %s/target.spm}\n"
            "  init: %s/weights.safetensors\n"
            "  batch_size: 8\n  shuffle: false\n  steps: %d\n"
            "  optimizer: {name: adam, lr: 0.001, betas: [0.9, 0.98], eps: 1.0e-9}\n"
            "  label_smoothing: 0.1\n  log_every: 1\n  validate_every: %d\n"
            "  checkpoint: {dir: %s, every: 0}\n%s",
            fix("m2m100", "train_pairs.tsv"), fix("m2m100", "train_pairs.tsv"), dir, dir, dir,
            steps, steps, run, extra);
    ck_assert_int_eq(fclose(f), 0);
    free(model);
}

/* The loss column of log.csv's rows (step, epoch, loss, ...), n of them. */
static int read_losses(const char *run, double *loss, int max)
{
    char p[512], line[512];
    snprintf(p, sizeof p, "%s/log.csv", run);
    FILE *f = fopen(p, "r");
    ck_assert_ptr_nonnull(f);
    int n = 0;
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f)); /* header */
    while (n < max && fgets(line, sizeof line, f)) {
        long long step;
        int epoch;
        ck_assert_int_eq(sscanf(line, "%lld,%d,%lf", &step, &epoch, &loss[n]), 3);
        ck_assert_int_eq(step, n + 1);
        n++;
    }
    fclose(f);
    return n;
}

/* The next line of *p (its '\n' overwritten), or NULL at the end; empty lines count. */
static char *next_line(char **p)
{
    if (!**p)
        return NULL;
    char *line = *p, *nl = strchr(line, '\n');
    *p = nl ? nl + 1 : line + strlen(line);
    if (nl)
        *nl = '\0';
    return line;
}

/* How many of the fixture's training pairs `translate -m model --source-lang en
 * --target-lang de` (greedy) translates to their target exactly; scratch files beside tmp. */
static int exact_translations(const char *model, const char *tmp)
{
    char src[512], out[512], args[4096], err[8192];
    char *pairs = clf_test_read_file(fix("m2m100", "train_pairs.tsv"), NULL);
    char *targets = calloc(1, strlen(pairs) + 1), *sources = calloc(1, strlen(pairs) + 1);
    size_t ns = 0, nt = 0;
    char *p = pairs;
    for (char *line = next_line(&p); line; line = next_line(&p)) {
        char *tab = strchr(line, '\t');
        ck_assert_ptr_nonnull(tab);
        ns += (size_t)sprintf(sources + ns, "%.*s\n", (int)(tab - line), line);
        nt += (size_t)sprintf(targets + nt, "%s\n", tab + 1);
    }
    snprintf(src, sizeof src, "%s.src", tmp);
    snprintf(out, sizeof out, "%s.out", tmp);
    clf_test_write_text(src, sources);
    /* sh -c: the runner's own stdin is /dev/null */
    snprintf(args, sizeof args,
             "--help >/dev/null && sh -c \"'%s' translate -m '%s' --source-lang en "
             "--target-lang de --beam 1 < '%s' > '%s'\"",
             CLF_CLI_PATH, model, src, out);
    ck_assert_msg(clf_test_run_cli(args, err, sizeof err) == 0, "translate failed: %s", err);
    char *text = clf_test_read_file(out, NULL);
    int exact = 0, lines = 0;
    char *pt = targets, *po = text;
    for (char *t = next_line(&pt), *o = next_line(&po); t && o;
         t = next_line(&pt), o = next_line(&po)) {
        exact += !strcmp(t, o);
        lines++;
    }
    ck_assert_int_eq(lines, 6);
    remove(src);
    remove(out);
    free(text);
    free(targets);
    free(sources);
    free(pairs);
    return exact;
}

START_TEST(cli_train_then_translate)
{
    m2m_ref r;
    m2m_ref_open(&r);
    const char *dir = import_family("m2m100");
    char yaml[512], run[512], args[2048];
    static char err[1 << 16]; /* 200 log lines */
    snprintf(yaml, sizeof yaml, "%s.yaml", dir);
    snprintf(run, sizeof run, "%s.run", dir);
    enum { STEPS = 200 };
    /* the source language from the YAML, the target one from the flag */
    write_experiment(dir, yaml, run, STEPS, "  source_lang: en\n");
    /* the refusals, before anything is trained: no target language; a code the model
     * lacks */
    snprintf(args, sizeof args, "train -c '%s' --backend cpu", yaml);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "puts a target language token on every pair: give "
                              "train.target_lang (or --target-lang CODE") != NULL,
                  "%s", err);
    snprintf(args, sizeof args, "train -c '%s' --backend cpu --target-lang xx", yaml);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "train: target language 'xx' is not one of the model's 100 "
                              "(`clformer info -m DIR` lists them)") != NULL,
                  "%s", err);
    snprintf(args, sizeof args, "train -c '%s' --backend cpu --source-lang qq --target-lang de",
             yaml);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "train: source language 'qq' is not one of the model's 100") != NULL,
                  "%s", err);

    snprintf(args, sizeof args, "train -c '%s' --backend cpu --target-lang de", yaml);
    ck_assert_msg(clf_test_run_cli(args, err, sizeof err) == 0, "train failed: %s", err);
    ck_assert_ptr_nonnull(strstr(err, "validation at step 200: loss"));
    double loss[STEPS];
    ck_assert_int_eq(read_losses(run, loss, STEPS), STEPS);
    /* one batch of all pairs: step 1 is transformers' step, step 2 the loss after it */
    check_close("clformer train's step 1", loss[0], r.loss[1]);
    check_close("clformer train's step 2", loss[1], r.after[1]);
    ck_assert_msg(loss[STEPS - 1] < 0.75 * loss[0], "the loss went from %.4f to %.4f", loss[0],
                  loss[STEPS - 1]);

    /* the run directory translates, with the target language given: the fine-tuned model
     * gives most training targets word for word, the imported one none */
    ck_assert_int_ge(exact_translations(run, dir), 4);
    ck_assert_int_eq(exact_translations(dir, dir), 0);

    clf_test_remove_dir(run);
    remove(yaml);
    clf_test_remove_import(dir);
    m2m_ref_close(&r);
}
END_TEST

/* train.source_lang / target_lang: read, dumped and read back; a code longer than a
 * language code can be is refused with its position. */
START_TEST(config_keys)
{
    clf_config cfg, back;
    CLF_ASSERT_OK(clf_config_read_string("model: {src_vocab: 10, tgt_vocab: 10}\n"
                                         "train: {data: {train: x.tsv}, source_lang: eng_Latn, "
                                         "target_lang: deu_Latn}\n",
                                         "t.yaml", &cfg));
    ck_assert_str_eq(cfg.train.source_lang, "eng_Latn");
    ck_assert_str_eq(cfg.train.target_lang, "deu_Latn");
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    CLF_ASSERT_OK(clf_config_dump(&cfg, mem));
    fclose(mem);
    ck_assert_ptr_nonnull(
        strstr(text, "  source_lang: \"eng_Latn\"\n  target_lang: \"deu_Latn\"\n"));
    CLF_ASSERT_OK(clf_config_read_string(text, "dump.yaml", &back));
    ck_assert_str_eq(back.train.source_lang, "eng_Latn");
    ck_assert_str_eq(back.train.target_lang, "deu_Latn");
    free(text);
    CLF_ASSERT_OK(clf_config_read_string("model: {src_vocab: 10, tgt_vocab: 10}\n"
                                         "train: {data: {train: x.tsv}}\n",
                                         "t.yaml", &cfg));
    ck_assert_str_eq(cfg.train.source_lang, ""); /* none by default */
    ck_assert_int_eq(clf_config_read_string("model: {src_vocab: 10, tgt_vocab: 10}\n"
                                            "train: {data: {train: x.tsv}, target_lang: "
                                            "abcdefghijklmnopq}\n",
                                            "t.yaml", &cfg),
                     CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(),
                     "t.yaml:2:44: train.target_lang: too long (17 characters, at most 15)");
}
END_TEST

CLF_TEST_SUITE_MAIN("train_lang",
                    CLF_TCASE("cpu", 300, {config_keys}, {m2m100_step_matches_transformers},
                              {nllb_batches_are_transformers_framing},
                              {mbart_batches_are_transformers_framing}, {cli_train_then_translate}))
