/* The parity suite of a fixture of the m2m_100 family (tests/family_suite.h; test_m2m100.c
 * runs it on tests/fixtures/m2m100, made by tests/reference/make_m2m100_fixture.py, and
 * test_nllb.c on tests/fixtures/nllb, made by make_nllb_fixture.py, both with transformers
 * 4.40.2): a small random M2M100ForConditionalGeneration in the Hugging Face layout is
 * imported with `clformer import`, then on each backend (CPU; OpenCL, the device of
 * CLF_TEST_DEVICE) its logits must match transformers' to 1e-4 relative, and greedy and
 * beam-4 decoding into each of the two target languages (the target language's token forced
 * first, as forced_bos_token_id) must give transformers' generate() outputs token for token
 * (the fixture's metadata holds the generate() arguments). The source framing (the source
 * language's token, pieces, </s>) must be the tokenizer's (M2M100Tokenizer's,
 * NllbTokenizer's), and `clformer translate -m --source-lang S --target-lang L` its decoded
 * text. A language the model lacks, a missing one and an unknown model_type are one-line
 * errors. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clformer/decode.h"
#include "clformer/model.h"
#include "clformer/tensor.h"
#include "clformer/tokenizer.h"
#include "clformer/translator.h"
#include "clformer/weights.h"
#include "family_suite.h"
#include "hf_parity.h"
#include "testutil.h"

#define LOGITS_TOL 1e-4
#define N_TARGETS  2

#define fam       (&clf_test_family_this)
#define targets   (fam->targets)
#define FIX(name) clf_test_family_file(name, (char[512]){0}, 512)

typedef struct ref {
    clf_safetensors *f;
    int N, S, M;
    int32_t *src, *src_len;
    int max_length, num_beams;
    float length_penalty, early_length_penalty;
    int forced[N_TARGETS];
    int forced_eos;    /* generate()'s forced_eos_token_id (mBART): the eos id, or -1 */
    int decoder_start; /* decoder_start_token_id */
} ref;

static void ref_open(ref *r)
{
    r->f =
        clf_test_ref_open(FIX("reference.safetensors"), "src", &r->src, &r->src_len, &r->N, &r->S);
    r->max_length = atoi(clf_safetensors_meta(r->f, "max_length"));
    r->num_beams = atoi(clf_safetensors_meta(r->f, "num_beams"));
    r->length_penalty = (float)atof(clf_safetensors_meta(r->f, "length_penalty"));
    r->early_length_penalty = (float)atof(clf_safetensors_meta(r->f, "early_length_penalty"));
    ck_assert_str_eq(clf_safetensors_meta(r->f, "early_stopping"), "False");
    char langs[64];
    snprintf(langs, sizeof langs, "%s,%s", targets[0], targets[1]);
    ck_assert_str_eq(clf_safetensors_meta(r->f, "target_langs"), langs);
    ck_assert_int_eq(sscanf(clf_safetensors_meta(r->f, "forced_bos_token_ids"), "%d,%d",
                            &r->forced[0], &r->forced[1]),
                     2);
    const char *fe = clf_safetensors_meta(r->f, "forced_eos_token_id");
    r->forced_eos = fe ? atoi(fe) : -1;
    r->decoder_start = atoi(clf_safetensors_meta(r->f, "decoder_start_token_id"));
}

static void ref_close(ref *r)
{
    clf_test_ref_close(r->f, r->src, r->src_len);
}

const char *clf_test_family_file(const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s/%s", CLF_FIXTURES_DIR, fam->tag, name);
    return buf;
}

const char *clf_test_family_import(void)
{
    static char dir[256];
    char args[1024];
    snprintf(args, sizeof args, "'%s'", FIX("hf"));
    clf_test_import(fam->tag, args, dir, sizeof dir);
    return dir;
}

static const char *import_fixture(void)
{
    return clf_test_family_import();
}

clf_translator *clf_test_family_translator(const char *dir)
{
    clf_translator_opts to;
    clf_translator_opts_default(&to);
    to.model_dir = dir;
    to.backend = "cpu";
    clf_translator *t;
    CLF_ASSERT_OK(clf_translator_open(&to, &t));
    return t;
}

/* The reference opened, the fixture imported (*dir) and a CPU translator of it. */
static clf_translator *ref_translator(ref *r, const char **dir)
{
    ref_open(r);
    *dir = import_fixture();
    return clf_test_family_translator(*dir);
}

static void ref_translator_close(ref *r, const char *dir, clf_translator *t)
{
    clf_translator_free(t);
    clf_test_remove_import(dir);
    ref_close(r);
}

START_TEST(logits_match_transformers)
{
    clf_test_ref_logits_match(FIX("reference.safetensors"), import_fixture(), LOGITS_TOL);
}
END_TEST

/* F16, BF16 and int8 weights against transformers' logits within test_quant.c's bounds
 * (max and mean |x - ref| / max |ref|), each sentence run alone so that the decoder's
 * products have few rows and read the copies. */
static const struct {
    clf_weight_type type;
    clf_op op;
    double max_bound, mean_bound;
} weight_types[] = {
    {CLF_WEIGHT_F16, CLF_OP_GEMM, 2e-3, 3e-4},
    {CLF_WEIGHT_BF16, CLF_OP_GEMM_BF16, 1.5e-2, 2.5e-3},
    {CLF_WEIGHT_INT8, CLF_OP_GEMM_I8, 6e-2, 1.2e-2},
};

START_TEST(weight_types_match_transformers)
{
    ref r = {0};
    clf_test_loaded l = {0};
    ref_open(&r);
    clf_test_loaded_open(&l, import_fixture());
    int64_t ss[8], ts[8];
    int32_t *src = clf_test_ref_ints(r.f, "logits_src", ss),
            *tgt = clf_test_ref_ints(r.f, "logits_tgt", ts);
    const clf_tensor *want = clf_safetensors_find(r.f, "logits");
    const size_t n = (size_t)clf_tensor_numel(want), row = n / (size_t)ss[0];
    float *w = malloc(sizeof *w * n), *got = malloc(sizeof *got * n);
    CLF_ASSERT_OK(clf_tensor_to_f32(want, w));
    double ref_max = 0;
    for (size_t i = 0; i < n; i++)
        ref_max = fmax(ref_max, fabs(w[i]));
    const int arith = clf_test_api->supports(clf_test_be, CLF_OP_GEMM_HALF_ARITH);
    for (size_t k = 0; k < sizeof weight_types / sizeof weight_types[0]; k++) {
        if (!clf_test_api->supports(clf_test_be, weight_types[k].op) ||
            (weight_types[k].type == CLF_WEIGHT_F16 && arith))
            continue; /* another backend's products: test_quant.c bounds them */
        CLF_ASSERT_OK(clf_model_set_weight_type(l.m, weight_types[k].type));
        for (int b = 0; b < (int)ss[0]; b++) {
            clf_forward_io io = {.batch = 1,
                                 .src_len = (int)ss[1],
                                 .tgt_len = (int)ts[1],
                                 .src = src + (size_t)b * ss[1],
                                 .tgt = tgt + (size_t)b * ts[1],
                                 .logits = got + (size_t)b * row};
            CLF_ASSERT_OK(clf_model_forward(l.m, &io));
        }
        double mx = 0, sum = 0;
        for (size_t i = 0; i < n; i++) {
            mx = fmax(mx, fabs((double)got[i] - w[i]));
            sum += fabs((double)got[i] - w[i]);
        }
        const char *name = clf_weight_type_name(weight_types[k].type);
        ck_assert_msg(mx > 0, "%s: the logits equal F32's: the copy was not read", name);
        ck_assert_msg(mx / ref_max <= weight_types[k].max_bound, "%s: max logit difference %.3g",
                      name, mx / ref_max);
        ck_assert_msg(sum / (double)n / ref_max <= weight_types[k].mean_bound,
                      "%s: mean logit difference %.3g", name, sum / (double)n / ref_max);
    }
    free(w);
    free(got);
    free(src);
    free(tgt);
    clf_test_loaded_close(&l);
    ref_close(&r);
}
END_TEST

/* clf_decode of all sentences at once (padded as the reference's batch) into target k with
 * transformers' generate() options; hypothesis i must be the reference's (generated ids,
 * the forced language token first, EOS included when it ended). early: beam search with the
 * model's own settings, early_stopping=True and its length penalty. stream: the sentences
 * through continuous decoding instead (clf_decode_stream), joining a running batch. */
static void check_decode(int beam, int k, int early, int stream)
{
    ref r = {0};
    clf_test_loaded l = {0};
    ref_open(&r);
    clf_test_loaded_open(&l, import_fixture());
    char name[64];
    int64_t shape[8];
    const char *kind = early ? "beam_early" : beam > 1 ? "beam" : "greedy";
    snprintf(name, sizeof name, "%s_%s", kind, targets[k]);
    int32_t *want = clf_test_ref_ints(r.f, name, shape);
    const int M = (int)shape[1];
    snprintf(name, sizeof name, "%s_%s_len", kind, targets[k]);
    int32_t *want_len = clf_test_ref_ints(r.f, name, NULL);
    clf_decode_opts o;
    clf_decode_opts_default(&l.cfg.model, &o);
    ck_assert_int_eq(o.sos_id, r.decoder_start); /* </s> in all three families */
    o.forced_eos = r.forced_eos >= 0;
    if (o.forced_eos)
        ck_assert_int_eq(r.forced_eos, o.eos_id);
    o.beam = beam;
    o.max_len = r.max_length - 1; /* max_length counts the decoder start */
    o.forced_bos_id = r.forced[k];
    if (beam > 1) {
        o.style = CLF_BEAM_HF;
        o.length_penalty = early ? r.early_length_penalty : r.length_penalty;
        o.early_stopping = early;
    }
    clf_decode_result res;
    clf_decode_result *one = NULL; /* stream: each sentence's result */
    if (!stream) {
        CLF_ASSERT_OK(clf_decode(l.m, r.src, r.N, r.S, &o, &res));
    } else { /* continuous decoding: 3 sentences at first, then one a step, 8 rows */
        one = calloc((size_t)r.N, sizeof *one);
        clf_decode_stream *ds;
        clf_decode_stream_opts so = {.max_rows = 8, .max_src_len = r.S, .max_out = o.max_len};
        CLF_ASSERT_OK(clf_decode_stream_open(l.m, &so, &ds));
        int added = 0, got = 0;
        for (int step = 0; got < r.N; step++) {
            ck_assert(step < 100000);
            for (int j = 0; added < r.N && j < (added ? 1 : 3); j++, added++)
                CLF_ASSERT_OK(clf_decode_stream_add(ds, r.src + (size_t)added * r.S, r.S, &o,
                                                    (uint64_t)added));
            CLF_ASSERT_OK(clf_decode_stream_step(ds));
            uint64_t tag;
            clf_decode_result x;
            while (clf_decode_stream_take(ds, &tag, &x)) {
                one[tag] = x;
                got++;
            }
        }
        clf_decode_stream_free(ds);
        res = (clf_decode_result){.batch = r.N, .n_best = 1};
        res.hyps = calloc((size_t)r.N, sizeof *res.hyps);
        for (int i = 0; i < r.N; i++) { /* the best of each, moved */
            res.hyps[i] = one[i].hyps[0];
            one[i].hyps[0] = (clf_hypothesis){0};
            clf_decode_result_free(&one[i]);
        }
        free(one);
    }
    snprintf(name, sizeof name, "%s, beam %d%s%s:", targets[k], beam, early ? ", early" : "",
             stream ? ", stream" : "");
    clf_test_hyps_match(&res, r.N, want, want_len, M, o.eos_id, name);
    clf_decode_result_free(&res);
    free(want);
    free(want_len);
    clf_test_loaded_close(&l);
    ref_close(&r);
}

START_TEST(greedy_matches_generate)
{
    check_decode(1, _i, 0, 0);
}
END_TEST

/* Continuous decoding: greedy and beam 4 (early stopping too) as generate() gives them */
START_TEST(stream_matches_generate)
{
    check_decode(1, _i, 0, 1);
    check_decode(4, _i, 0, 1);
    check_decode(4, _i, 1, 1);
}
END_TEST

START_TEST(beam4_matches_generate)
{
    check_decode(4, _i, 0, 0);
}
END_TEST

/* early_stopping=True changes some sentences at this length penalty (m2m100: 7 of 20 into de) */
START_TEST(beam4_early_stopping_matches_generate)
{
    check_decode(4, _i, 1, 0);
}
END_TEST

/* The translator frames a sentence as the tokenizer does: the source language's token,
 * pieces, </s> (through the imported vocab.json, whose language tokens come after the
 * pieces). */
START_TEST(source_framing_matches_tokenizer)
{
    ref r = {0};
    const char *dir;
    clf_translator *t = ref_translator(&r, &dir);
    CLF_ASSERT_OK(clf_translator_set_languages(t, fam->source, targets[0]));
    ck_assert_int_eq(clf_translator_token_id(t, 0, fam->source_token), r.src[0]);
    FILE *f = fopen(FIX("sentences.txt"), "r");
    ck_assert_ptr_nonnull(f);
    char line[1024];
    for (int i = 0; fgets(line, sizeof line, f); i++) {
        line[strcspn(line, "\n")] = '\0';
        ck_assert_int_lt(i, r.N);
        int32_t *ids;
        int n;
        CLF_ASSERT_OK(clf_translator_encode(t, 0, line, strlen(line), &ids, &n));
        const int32_t *row = r.src + (size_t)i * r.S;
        ck_assert_msg(n + 2 == r.src_len[i], "line %d: %d pieces, transformers %d", i + 1, n,
                      r.src_len[i] - 2);
        ck_assert_int_eq(row[0], r.src[0]);
        for (int j = 0; j < n; j++)
            ck_assert_msg(ids[j] == row[j + 1], "line %d piece %d: %d, not %d", i + 1, j, ids[j],
                          row[j + 1]);
        ck_assert_int_eq(row[n + 1], 2);
        free(ids);
    }
    fclose(f);
    /* a code the model lacks: one line, saying how to list them; nothing changed */
    ck_assert_int_eq(clf_translator_set_languages(t, NULL, "xx"), CLF_ERR_INPUT);
    char want[256];
    snprintf(want, sizeof want,
             "translate: target language 'xx' is not one of the model's %d (`clformer info -m "
             "DIR` lists them)",
             fam->n_languages);
    ck_assert_str_eq(clf_last_error(), want);
    ref_translator_close(&r, dir, t);
}
END_TEST

/* Beam search's log-probabilities, by the translator, are those of teacher forcing
 * (clf_translator_score_ids, an independent path): the target language's token first with
 * log-prob 0, then the tokens and EOS, to 1e-4 relative; greedy decoding's want_scores the
 * same; and a model that needs languages refuses to score without them. */
START_TEST(scores_match_decoding)
{
    ref r = {0};
    const char *dir;
    clf_translator *t = ref_translator(&r, &dir);
    float lp;
    int tokens;
    char *error = NULL;
    const int32_t one = 5, *one_p = &one;
    const int one_len = 1;
    ck_assert_int_eq(
        clf_translator_score_ids(t, &one_p, &one_len, &one_p, &one_len, 1, &lp, &tokens, &error),
        CLF_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(clf_last_error(), "needs a source and a target language"));
    CLF_ASSERT_OK(clf_translator_set_languages(t, fam->source, targets[1]));
    const int32_t *src[64];
    int src_len[64], checked = 0;
    ck_assert_int_le(r.N, 64);
    for (int i = 0; i < r.N; i++) { /* the pieces between the language's token and </s> */
        src[i] = r.src + (size_t)i * r.S + 1;
        src_len[i] = r.src_len[i] - 2;
    }
    for (int beam = 1; beam <= 4; beam += 3) {
        clf_translate_opts o;
        clf_translate_opts_default(&o);
        o.beam = beam;
        o.max_len = r.max_length - 1;
        o.want_scores = 1;
        clf_translation *out = calloc((size_t)r.N, sizeof *out);
        CLF_ASSERT_OK(clf_translator_translate_ids(t, src, src_len, r.N, &o, out));
        for (int i = 0; i < r.N; i++) {
            const clf_translation_hyp *h = &out[i].hyps[0];
            ck_assert_int_ge(h->len, 1);
            ck_assert_int_eq(h->tokens[0], r.forced[1]);
            /* scoring always ends with EOS, which has its log-prob there, and 0 in decoding
             * when forced at max_len (forced_eos_token_id) */
            if (!h->finished || (r.forced_eos >= 0 && h->len + 1 >= o.max_len))
                continue;
            const int32_t *y = h->tokens + 1;
            const int yn = h->len - 1;
            CLF_ASSERT_OK(clf_translator_score_ids(t, &src[i], &src_len[i], &y, &yn, 1, &lp,
                                                   &tokens, &error));
            ck_assert_ptr_null(error);
            ck_assert_int_eq(tokens, h->len + 1);
            ck_assert_msg(fabsf(lp - h->logprob) <= 1e-4f * fabsf(h->logprob),
                          "sentence %d (beam %d): scored %.6f, decoded %.6f", i, beam, lp,
                          h->logprob);
            checked++;
        }
        clf_translations_free(out, r.N);
        free(out);
    }
    ck_assert_int_ge(checked, 10);
    ref_translator_close(&r, dir, t);
}
END_TEST

/* text with every "<unk>" taken out, in place */
static void drop_unk(char *text)
{
    char *w = text;
    for (const char *r = text; *r;)
        if (!strncmp(r, "<unk>", 5))
            r += 5;
        else
            *w++ = *r++;
    *w = '\0';
}

/* `clformer translate -m DIR --source-lang S --target-lang L` end to end: the text
 * transformers' tokenizer decodes (the language token and added specials left out), less
 * its "<unk>"s: M2M100Tokenizer (4.40) names fairseq's made-up words unk_token and then
 * writes them, which clformer, like the tokenizer for every other special, leaves out. */
static void check_translate_cli(const char *kind, int k, const char *opts, int early_off)
{
    char want_file[512], name[64];
    snprintf(name, sizeof name, "%s_%s.txt", kind, targets[k]);
    clf_test_family_file(name, want_file, sizeof want_file);
    const char *dir = import_fixture();
    if (early_off) { /* the reference's generate() ran without the model's early_stopping */
        char path[512];
        size_t len;
        snprintf(path, sizeof path, "%s/model.yaml", dir);
        char *yaml = clf_test_read_file(path, &len);
        const char *from = "early_stopping: true\n";
        char *at = strstr(yaml, from);
        ck_assert_msg(at != NULL, "%s: no early_stopping: true", path);
        char *text = malloc(len + 2);
        ck_assert_ptr_nonnull(text);
        snprintf(text, len + 2, "%.*searly_stopping: false\n%s", (int)(at - yaml), yaml,
                 at + strlen(from));
        clf_test_write_text(path, text);
        free(text);
        free(yaml);
    }
    char args[2048], out[256];
    snprintf(out, sizeof out, "%s.out", dir);
    snprintf(args, sizeof args,
             "translate -m '%s' --backend %s --source-lang %s --target-lang %s %s", dir,
             clf_test_be_name, fam->source, targets[k], opts);
    clf_test_cli_text_matches(args, FIX("sentences.txt"), out, want_file, drop_unk);
    clf_test_remove_import(dir);
}

START_TEST(translate_cli_greedy_text)
{
    check_translate_cli("greedy", 1, "--beam 1", 0);
}
END_TEST

/* no decoding flags: model.yaml's generate: section is the model's generate() defaults
 * (beam 4, early_stopping, its length penalty) */
START_TEST(translate_cli_model_defaults)
{
    check_translate_cli("beam_early", 0, "", 0);
}
END_TEST

START_TEST(translate_cli_beam_text)
{
    check_translate_cli("beam", 1, "--length-penalty 1", 1);
}
END_TEST

/* ---- refusals (CPU only) ---- */

START_TEST(cli_refusals)
{
    char args[1024], err[2048];
    const char *dir = import_fixture();
    /* no target language: one line, before any input is read */
    snprintf(args, sizeof args, "translate -m '%s' --source-lang %s", dir, fam->source);
    ck_assert_int_ne(clf_test_run_cli(args, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "needs a target language (--target-lang CODE; `clformer info -m "
                              "DIR` lists them)"),
                  "%s", err);
    ck_assert_msg(strchr(err, '\n') == strrchr(err, '\n'), "not one line: %s", err);
    snprintf(args, sizeof args, "translate -m '%s' --source-lang qq --target-lang %s", dir,
             targets[0]);
    ck_assert_int_ne(clf_test_run_cli(args, err, sizeof err), 0);
    char want[128];
    snprintf(want, sizeof want, "source language 'qq' is not one of the model's %d",
             fam->n_languages);
    ck_assert_msg(strstr(err, want), "%s", err);
    ck_assert_msg(strchr(err, '\n') == strrchr(err, '\n'), "not one line: %s", err);
    /* train refuses to train without the languages the model's framing needs */
    char tsv[512], yaml[512], text[32768]; /* model.yaml: NLLB's lists 2 x 202 codes */
    snprintf(tsv, sizeof tsv, "%s.tsv", dir);
    snprintf(yaml, sizeof yaml, "%s.yaml", dir);
    clf_test_write_text(tsv, "the cat\tdie katze\n");
    size_t len;
    char *model =
        clf_test_read_file((snprintf(text, sizeof text, "%s/model.yaml", dir), text), &len);
    snprintf(text, sizeof text,
             "%strain:\n  data: {train: '%s'}\n  vocab: {src: '%s/source.spm', tgt: "
             "'%s/target.spm'}\n  steps: 1\n  checkpoint: {dir: '%s.run'}\n",
             model, tsv, dir, dir, dir);
    free(model);
    clf_test_write_text(yaml, text);
    snprintf(args, sizeof args, "train -c '%s'", yaml);
    ck_assert_int_ne(clf_test_run_cli(args, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "puts a source language token on every pair: give "
                              "train.source_lang (or --source-lang CODE"),
                  "%s", err);
    remove(tsv);
    remove(yaml);
    snprintf(text, sizeof text, "%s.run", dir);
    clf_test_remove_dir(text);
    /* info -m lists the codes */
    snprintf(args, sizeof args, "info -m '%s'", dir);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' %s | grep -q 'target languages (%d): %s'", CLF_CLI_PATH, args,
             fam->n_languages, fam->first_codes);
    ck_assert_int_eq(system(cmd), 0);
    clf_test_remove_import(dir);
    /* a model_type clformer does not import: named, with the ones it does */
    char base[] = "/tmp/clf-family-bad-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(base));
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", base);
    clf_test_write_text(path, "{\"model_type\": \"t5\"}");
    snprintf(args, sizeof args, "import '%s' -o '%s/out'", base, base);
    ck_assert_int_ne(clf_test_run_cli(args, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "config.json: model_type = \"t5\": clformer imports model_type "
                              "\"marian\", \"m2m_100\""),
                  "%s", err);
    ck_assert_msg(strchr(err, '\n') == strrchr(err, '\n'), "not one line: %s", err);
    snprintf(path, sizeof path, "%s/out", base);
    ck_assert_int_ne(access(path, F_OK), 0);
    clf_test_remove_dir(base);
}
END_TEST

/* The tests every family suite runs on each backend. */
static void add_tests(TCase *tc)
{
    const clf_test_item tests[] = {
        {logits_match_transformers, 0},       {weight_types_match_transformers, 0},
        {greedy_matches_generate, N_TARGETS}, {stream_matches_generate, N_TARGETS},
        {beam4_matches_generate, N_TARGETS},  {beam4_early_stopping_matches_generate, N_TARGETS},
        {translate_cli_greedy_text, 0},       {translate_cli_model_defaults, 0},
        {translate_cli_beam_text, 0}};
    clf_test_add_items(tc, tests, CLF_LOOPS(tests));
}

static void cpu_only(TCase *tc)
{
    tcase_add_test(tc, source_framing_matches_tokenizer);
    tcase_add_test(tc, scores_match_decoding);
    tcase_add_test(tc, cli_refusals);
    if (fam->cpu_extra)
        fam->cpu_extra(tc);
}

/* Every family suite's main(): the shared tests on each backend, cpu_extra's on the CPU
 * backend. */
int main(void)
{
    return clf_test_backends_main(fam->tag, add_tests, cpu_only, NULL);
}
