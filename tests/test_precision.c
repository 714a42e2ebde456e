/* The precision setting (clf_model_set_precision, --precision, train: precision; README
 * "Precision"): products of BF16 inputs summed in F32 against F32, on the PyTorch fixtures
 * (logits within a stated bound), on the shipped model (greedy translations equal F32's on
 * at least 95% of lines) and the Marian fixture (at least its measured 85%); the note and F32
 * products where a backend has no such arithmetic; the CLI's flag and its refusals.
 *
 * Where products ran in F32 (no AVX512_BF16, CLF_CPU_BF16_ARITH=off, OpenCL) the results
 * must equal F32's exactly: the graphs are the same. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/config.h"
#include "clformer/model.h"
#include "clformer/numeric.h"
#include "clformer/ops.h"
#include "clformer/tensor.h"
#include "clformer/weights.h"
#include "testutil.h"

/* Logits with precision bf16 against F32, relative to the largest F32 logit of the
 * fixture (max and mean of |x - f32| / max |f32|): BF16 keeps 8 significant bits of both
 * operands of every linear layer's product, as --weight-type bf16 with BF16 arithmetic does
 * for the weights, so test_quant's BF16 bounds hold (measured on Zen 5 over the 22 fixture
 * variants, whole batches: worst max 9.74e-3, worst mean 1.87e-3; bench/RESULTS.md). */
#define BF16_MAX_BOUND  1.5e-2
#define BF16_MEAN_BOUND 2.5e-3
#define MIN_VARIANTS    11

/* The logits [B, T, V] of fixture dir with precision p, the whole batch in one forward
 * (so that every product has more than 7 rows: products of many rows). *arith gets
 * whether BF16 arithmetic ran, *count B * T * V; note gets the precision's note. */
static float *batch_logits(const char *dir, clf_precision p, int *arith, size_t *count, char *note,
                           size_t note_size)
{
    clf_test_io_model f;
    clf_test_io_model_open(dir, &f);
    float *logits = malloc((size_t)f.B * f.T * f.V * sizeof(float));
    CLF_ASSERT_OK(clf_model_set_precision(f.m, p, note, note_size));
    ck_assert_int_eq(clf_model_precision(f.m, arith), p);
    clf_forward_io fio = {
        .batch = f.B, .src_len = f.S, .tgt_len = f.T, .src = f.src, .tgt = f.tgt, .logits = logits};
    CLF_ASSERT_OK(clf_model_forward(f.m, &fio));
    *count = (size_t)f.B * f.T * f.V;
    clf_test_io_model_close(&f);
    return logits;
}

START_TEST(bf16_logits_against_f32)
{
    char names[64][256];
    const int n = clf_test_fixture_variants(names, 64);
    ck_assert_msg(n >= MIN_VARIANTS, "only %d fixture variants in %s", n, CLF_FIXTURES_DIR);
    const int have = clf_test_api->supports(clf_test_be, CLF_OP_GEMM_BF16_ARITH);
    double worst_max = 0, worst_mean = 0;
    for (int v = 0; v < n; v++) {
        char dir[1024], note[512];
        snprintf(dir, sizeof dir, "%s/%s", CLF_FIXTURES_DIR, names[v]);
        size_t cnt = 0, cnt2 = 0;
        int arith = 0;
        float *ref = batch_logits(dir, CLF_PRECISION_F32, &arith, &cnt, note, sizeof note);
        ck_assert_int_eq(arith, 0);
        ck_assert_str_eq(note, "");
        float *got = batch_logits(dir, CLF_PRECISION_BF16, &arith, &cnt2, note, sizeof note);
        ck_assert_uint_eq(cnt, cnt2);
        ck_assert_int_eq(arith, have);
        if (!have) { /* the note, and F32 products: the same logits */
            char want[256];
            snprintf(want, sizeof want,
                     "precision bf16: the %s backend has no BF16 arithmetic here; products run "
                     "in F32",
                     clf_test_be_name);
            ck_assert_str_eq(note, want);
            ck_assert_msg(memcmp(ref, got, cnt * sizeof *ref) == 0,
                          "%s: products in F32 but the logits differ", names[v]);
            free(ref);
            free(got);
            continue;
        }
        ck_assert_str_eq(note, "");
        double ref_max = 0, mx = 0, sum = 0;
        for (size_t i = 0; i < cnt; i++) {
            ref_max = fmax(ref_max, fabs(ref[i]));
            const double d = fabs((double)got[i] - ref[i]);
            mx = fmax(mx, d);
            sum += d;
        }
        ck_assert(ref_max > 0);
        mx /= ref_max;
        const double mean = sum / (double)cnt / ref_max;
        ck_assert_msg(mx > 0, "%s: bf16 logits equal F32's: the BF16 arithmetic did not run",
                      names[v]);
        ck_assert_msg(mx <= BF16_MAX_BOUND, "%s: bf16 max logit difference %.3g > %.3g", names[v],
                      mx, BF16_MAX_BOUND);
        ck_assert_msg(mean <= BF16_MEAN_BOUND, "%s: bf16 mean logit difference %.3g > %.3g",
                      names[v], mean, BF16_MEAN_BOUND);
        worst_max = fmax(worst_max, mx);
        worst_mean = fmax(worst_mean, mean);
        free(ref);
        free(got);
    }
    if (have)
        fprintf(stderr,
                "  %s precision bf16 over %d fixtures: worst max |dlogit|/max|logit| %.2e (bound "
                "%.2g), worst mean %.2e (bound %.2g)\n",
                clf_test_be_name, n, worst_max, BF16_MAX_BOUND, worst_mean, BF16_MEAN_BOUND);
    else
        fprintf(stderr, "  %s: no BF16 arithmetic; precision bf16 ran F32 (the note path)\n",
                clf_test_be_name);
}
END_TEST

/* f16 on F32 weights: no backend multiplies those in F16, so a note and F32's logits. */
START_TEST(f16_notes_and_runs_f32)
{
    char dir[1024], note[512];
    snprintf(dir, sizeof dir, "%s/pre_tutorial", CLF_FIXTURES_DIR);
    size_t cnt = 0, cnt2 = 0;
    int arith = 0;
    float *ref = batch_logits(dir, CLF_PRECISION_F32, &arith, &cnt, note, sizeof note);
    float *got = batch_logits(dir, CLF_PRECISION_F16, &arith, &cnt2, note, sizeof note);
    ck_assert_int_eq(arith, 0);
    ck_assert_msg(strstr(note, "precision f16: the ") && strstr(note, "products run in F32"),
                  "note: '%s'", note);
    ck_assert_uint_eq(cnt, cnt2);
    ck_assert(memcmp(ref, got, cnt * sizeof *ref) == 0);
    free(ref);
    free(got);
}
END_TEST

/* The setting with weight types: kept across clf_model_set_weight_type; BF16 weights serve
 * as the copy; int8 weights keep int8 arithmetic (a note). */
START_TEST(precision_with_weight_types)
{
    clf_test_model t;
    clf_test_model_open(&t, "cpu", "pre_tutorial");
    char note[512];
    int arith = 0;
    const int have = t.api->supports(t.be, CLF_OP_GEMM_BF16_ARITH);
    CLF_ASSERT_OK(clf_model_set_precision(t.m, CLF_PRECISION_BF16, note, sizeof note));
    clf_model_precision(t.m, &arith);
    ck_assert_int_eq(arith, have);
    clf_model_memory mem0, mem1;
    clf_model_memory_usage(t.m, &mem0);
    CLF_ASSERT_OK(clf_model_set_weight_type(t.m, CLF_WEIGHT_F16));
    ck_assert_int_eq(clf_model_precision(t.m, &arith), CLF_PRECISION_BF16);
    ck_assert_int_eq(arith, have);
    CLF_ASSERT_OK(clf_model_set_weight_type(t.m, CLF_WEIGHT_BF16));
    clf_model_precision(t.m, &arith);
    ck_assert_int_eq(arith, have);
    clf_model_memory_usage(t.m, &mem1); /* the BF16 weights are the copy: no second one */
    if (have)
        ck_assert_uint_eq(mem1.weight_bytes, mem0.weight_bytes);
    CLF_ASSERT_OK(clf_model_set_weight_type(t.m, CLF_WEIGHT_F32));
    clf_model_precision(t.m, &arith);
    ck_assert_int_eq(arith, have);
    CLF_ASSERT_OK(clf_model_set_weight_type(t.m, CLF_WEIGHT_INT8));
    clf_model_precision(t.m, &arith);
    ck_assert_int_eq(arith, 0);
    CLF_ASSERT_OK(clf_model_set_precision(t.m, CLF_PRECISION_BF16, note, sizeof note));
    ck_assert_str_eq(note, "precision bf16: int8 weights multiply in int8 arithmetic");
    ck_assert_int_eq(clf_model_set_precision(t.m, (clf_precision)7, note, sizeof note),
                     CLF_ERR_INPUT);
    clf_test_model_close(&t);
    /* the names */
    clf_precision p;
    ck_assert_str_eq(clf_precision_name(CLF_PRECISION_BF16), "bf16");
    CLF_ASSERT_OK(clf_precision_parse("f16", &p));
    ck_assert_int_eq(p, CLF_PRECISION_F16);
    ck_assert_int_eq(clf_precision_parse("fp16", &p), CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), "precision 'fp16' is not one of f32, bf16, f16");
}
END_TEST

/* --precision on forward, bench and translate: accepted values run, another is refused
 * naming the flag and the values. */
START_TEST(cli_flag)
{
    char args[4096], err[4096];
    const char *fx = CLF_FIXTURES_DIR "/pre_standard_bias";
    clf_test_make_tmpdir("clf-precision");
    const char *out = clf_test_tmp_path("out.safetensors");
    snprintf(args, sizeof args,
             "forward -c %s/model.yaml -w %s/weights.safetensors -i %s/io.safetensors -o %s "
             "--precision bf16",
             fx, fx, fx, out);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 0);
    snprintf(args, sizeof args,
             "forward -c %s/model.yaml -w %s/weights.safetensors -i %s/io.safetensors -o %s "
             "--precision f16",
             fx, fx, fx, out);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "clformer: note: precision f16: the cpu backend has no F16 "
                              "arithmetic"),
                  "%s", err);
    const char *cmds[3] = {"forward -c x -w y -i z -o w", "bench -c x", "translate -m x"};
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "%s --precision fp8", cmds[i]);
        ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 2);
        ck_assert_msg(strstr(err, "--precision: expected f32, bf16 or f16, got 'fp8'"), "%s: %s",
                      cmds[i], err);
        ck_assert_msg(!strchr(err, '\n') || strchr(err, '\n') == err + strlen(err) - 1,
                      "%s: more than one line: %s", cmds[i], err);
    }
    for (int i = 0; i < 3; i++) { /* the flag and its rule in --help */
        const char *help = clf_test_tmp_path("help.txt");
        snprintf(args, sizeof args, "%.*s --help >'%s'", (int)strcspn(cmds[i], " "), cmds[i], help);
        ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 0);
        char *text = clf_test_read_file(help, NULL);
        ck_assert_msg(strstr(text, "--precision P        f32|bf16|f16 (default f32)"), "%s", args);
        free(text);
    }
    clf_test_remove_tmpdir();
}
END_TEST

/* The lines of text (NUL-terminated, '\n'-separated) equal to want's, and their count. */
static int equal_lines(const char *got, const char *want, int *lines)
{
    int same = 0;
    *lines = 0;
    while (*got || *want) {
        const size_t gl = strcspn(got, "\n"), wl = strcspn(want, "\n");
        same += gl == wl && memcmp(got, want, gl) == 0;
        ++*lines;
        got += gl + (got[gl] == '\n');
        want += wl + (want[wl] == '\n');
    }
    return same;
}

/* translate -m DIR --beam 1 --precision P (and opts) of the first `lines` lines of src;
 * stderr into err_path. Returns stdout's text (malloc'd). */
static char *greedy(const char *dir, const char *src, int lines, const char *opts,
                    const char *precision, const char *err_path)
{
    char cmd[4096];
    const char *out = clf_test_tmp_path("greedy.out");
    snprintf(cmd, sizeof cmd,
             "head -n %d '%s' | CLF_PLUGIN_PATH= '%s' translate -m '%s' --backend cpu --beam 1 %s "
             "--precision %s >'%s' 2>'%s'",
             lines, src, CLF_CLI_PATH, dir, opts, precision, out, err_path);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
    return clf_test_read_file(out, NULL);
}

/* Greedy translations of the first `lines` lines of src under bf16 and F32 (the sentences
 * decoded together: the products have many rows); the count of equal lines, which must
 * reach min_equal; without BF16 arithmetic, the note, and every line. */
static void greedy_bf16_against_f32(const char *what, const char *dir, const char *src, int lines,
                                    const char *opts, int min_equal)
{
    const char *err_path = clf_test_tmp_path("err.txt");
    char *f32 = greedy(dir, src, lines, opts, "f32", err_path);
    char *bf16 = greedy(dir, src, lines, opts, "bf16", err_path);
    char *err = clf_test_read_file(err_path, NULL);
    int n = 0;
    const int same = equal_lines(bf16, f32, &n);
    ck_assert_int_eq(n, lines);
    const int note = strstr(err, "precision bf16: the cpu backend has no BF16 arithmetic here; "
                                 "products run in F32") != NULL;
    fprintf(stderr, "  %s greedy, precision bf16 against f32: %d of %d lines equal (%.0f%%)%s\n",
            what, same, n, 100.0 * same / n, note ? " (no BF16 arithmetic: F32 ran)" : "");
    ck_assert_msg(same >= (note ? n : min_equal), "%s: %d of %d lines equal, want %d", what, same,
                  n, note ? n : min_equal);
    free(err);
    free(f32);
    free(bf16);
}

/* The Marian fixture: a MarianMT model of random weights (d_model 16, init_std 0.35), 20
 * sentences. Its logits are close together, so greedy paths of up to 23 tokens turn on
 * near-ties: measured on Zen 5 (AVX512_BF16), 17 of 20 lines (85%) equal F32's, as with
 * --weight-type bf16 (BF16 weights and arithmetic: 17 of 20 too). The bar is the measured
 * figure; the trained model below holds the 95%. */
START_TEST(marian_greedy_bf16_against_f32)
{
    char dir[256], args[1024];
    clf_test_make_tmpdir("clf-precision");
    snprintf(args, sizeof args, "marian '%s/marian/hf'", CLF_FIXTURES_DIR);
    clf_test_import("precision", args, dir, sizeof dir);
    greedy_bf16_against_f32("marian fixture", dir, CLF_FIXTURES_DIR "/marian/sentences.txt", 20,
                            "--forced-eos", 17);
    clf_test_remove_import(dir);
    clf_test_remove_tmpdir();
}
END_TEST

/* The shipped en-de model (trained), the first 100 lines of its valid.en: at least 95%
 * equal. Measured on Zen 5: 96 or 97 of 100 by the thread count (oneDNN's sums differ in
 * order); 484 of all 500 lines (96.8%). */
START_TEST(shipped_greedy_bf16_against_f32)
{
    clf_test_make_tmpdir("clf-precision");
    greedy_bf16_against_f32("shipped en-de", CLF_MODELS_DIR "/en-de-gettext",
                            CLF_MODELS_DIR "/en-de-gettext/valid.en", 100, "", 95);
    clf_test_remove_tmpdir();
}
END_TEST

/* BF16 arithmetic asked for (clf_gemm_args.bf16_arith: the precision's forward and backward
 * products) for each trans_a / trans_b, odd m, n, k, k up to 4096, padded leading
 * dimensions, with and without b_bf16: against the double sum of the BF16-rounded operands,
 * within 1e-6 of the sum of |terms| (F32 sums of up to 4096 exact products: measured worst
 * 9.1e-8 on Zen 5; an F32 product of the unrounded operands misses by about 1e-3). Without BF16
 * arithmetic the flag is ignored: F32, against the double sum of the operands themselves. */
START_TEST(gemm_bf16_arith_transposes)
{
    const clf_backend_api *api = clf_test_api;
    clf_backend *be = clf_test_be;
    const int have = api->supports(be, CLF_OP_GEMM_BF16_ARITH);
    static const int shapes[][3] = {{33, 129, 65}, {9, 17, 4096}, {127, 5, 301},
                                    {64, 48, 1},   {8, 8, 8},     {45, 96, 777}};
    double worst = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int v = 0; v < 8; v++) {
            const int ta = v & 1, tb = (v >> 1) & 1, with16 = v >> 2;
            const int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            const int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k,
                      b_cols = tb ? k : n, lda = a_cols + 3, ldb = b_cols + 1, ldc = n + 2;
            float *A = clf_test_frand((size_t)a_rows * lda, 300 + (unsigned)v, -2, 2),
                  *B = clf_test_frand((size_t)b_rows * ldb, 400 + (unsigned)s, -1, 1);
            float *bias = clf_test_frand((size_t)n, 7, -1, 1),
                  *C0 = clf_test_frand((size_t)m * ldc, 8, -1, 1);
            uint16_t *b16 = malloc((size_t)b_rows * ldb * sizeof *b16);
            for (size_t i = 0; i < (size_t)b_rows * ldb; i++)
                b16[i] = clf_float_to_bf16(B[i]);
            clf_buffer *da = clf_test_upload(api, be, A, (size_t)a_rows * lda * 4),
                       *db = clf_test_upload(api, be, B, (size_t)b_rows * ldb * 4),
                       *db16 = clf_test_upload(api, be, b16, (size_t)b_rows * ldb * 2),
                       *dbias = clf_test_upload(api, be, bias, (size_t)n * 4),
                       *dc = clf_test_upload(api, be, C0, (size_t)m * ldc * 4);
            const float beta = s % 2 ? 0.5f : 0.0f;
            const int relu = v == 3;
            clf_gemm_args g = {.trans_a = ta,
                               .trans_b = tb,
                               .m = m,
                               .n = n,
                               .k = k,
                               .alpha = 0.75f,
                               .beta = beta,
                               .a = {da, 0},
                               .lda = lda,
                               .b = {db, 0},
                               .ldb = ldb,
                               .c = {dc, 0},
                               .ldc = ldc,
                               .bias = {dbias, 0},
                               .relu = relu,
                               .bf16_arith = 1};
            if (with16)
                g.b_bf16 = (clf_ptr){db16, 0};
            CLF_ASSERT_OK(clf_op_gemm(api, be, &g));
            float *got = malloc((size_t)m * ldc * sizeof *got);
            CLF_ASSERT_OK(clf_op_download(api, be, got, (clf_ptr){dc, 0}, (size_t)m * ldc * 4));
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                    double sum = 0, mag = 0;
                    for (int p = 0; p < k; p++) {
                        float x = ta ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p];
                        float y = tb ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j];
                        if (have) {
                            x = clf_bf16_to_float(clf_float_to_bf16(x));
                            y = clf_bf16_to_float(clf_float_to_bf16(y));
                        }
                        sum += (double)x * y;
                        mag += fabs((double)x * y);
                    }
                    const double c0 = C0[(size_t)i * ldc + j];
                    double want = 0.75 * sum + beta * c0 + bias[j];
                    mag = 0.75 * mag + fabs(beta * c0) + fabs(bias[j]);
                    if (relu && want < 0)
                        want = 0;
                    const double err = fabs(got[(size_t)i * ldc + j] - want) / mag;
                    worst = fmax(worst, err);
                    ck_assert_msg(err <= 1e-6,
                                  "m %d n %d k %d trans %d %d b_bf16 %d (%d, %d): %g, want %g", m,
                                  n, k, ta, tb, with16, i, j, got[(size_t)i * ldc + j], want);
                }
            api->free(be, da), api->free(be, db), api->free(be, db16), api->free(be, dbias);
            api->free(be, dc);
            free(A), free(B), free(bias), free(C0), free(b16), free(got);
        }
    fprintf(stderr,
            "  gemm bf16_arith%s, 4 transposes x 6 shapes x b_bf16 or not: worst |error| / "
            "sum|terms| %.2e (bound 1e-6)\n",
            have ? "" : " (ignored: no BF16 arithmetic)", worst);
}
END_TEST

/* `clformer train` on the CPU, which must succeed (stderr into err), of dir/name.yaml: a
 * model of max_len 16 and `model` (keys of its mapping), no dropout, trained on dir's corpus
 * with the vocabularies of vocab_dir at precision p, train's other keys the YAML lines of
 * fmt (printf's), its checkpoints in dir/name. */
__attribute__((format(printf, 8, 9))) static void
run_train(const char *dir, const char *name, const char *model, const char *vocab_dir,
          const char *p, char *err, size_t err_size, const char *fmt, ...)
{
    char settings[512], yaml[512], args[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(settings, sizeof settings, fmt, ap);
    va_end(ap);
    snprintf(yaml, sizeof yaml, "%s/%s.yaml", dir, name);
    FILE *f = fopen(yaml, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "model: {max_len: 16, %s, dropout: 0.0}\n"
            "train:\n"
            "  data: {train: %s/train.tsv}\n"
            "  vocab: {src: %s/src.json, tgt: %s/tgt.json, min_frequency: 1}\n"
            "  seed: 1\n  max_len: 16\n  validate_every: 0\n  precision: %s\n%s"
            "  checkpoint: {dir: %s/%s, every: 0, keep: 1}\n",
            model, dir, vocab_dir, vocab_dir, p, settings, dir, name);
    fclose(f);
    snprintf(args, sizeof args, "train -c '%s' --backend cpu", yaml);
    ck_assert_msg(clf_test_run_cli(args, err, err_size) == 0, "train %s: %s", name, err);
}

/* Trains the test's model (the demo config's form, pre-norm with the standard LayerNorm,
 * noam, clipping, label smoothing; small: d_model 64, 2 + 2 layers) on dir's reversal
 * corpus for `steps` steps at precision p, logging every step; returns the rows' losses
 * (steps of them, malloc'd) and, in err, what it printed. */
#define STEPS  300
#define WINDOW 50
static double *train_losses(const char *dir, const char *p, int steps, char *err, size_t err_size)
{
    char vocab[512], path[512];
    snprintf(vocab, sizeof vocab, "%s/%s", dir, p);
    run_train(dir, p,
              "d_model: 64, layers: 2, heads: 4, d_ff: 128, norm: pre, "
              "layernorm: {style: standard, eps: 1.0e-5}",
              vocab, p, err, err_size,
              "  batch_size: 32\n  steps: %d\n"
              "  optimizer: {name: adam, lr: 0.5, betas: [0.9, 0.98], eps: 1.0e-9}\n"
              "  schedule: {name: noam, warmup: 100}\n"
              "  label_smoothing: 0.1\n  clip_norm: 1.0\n  log_every: 1\n",
              steps);
    snprintf(path, sizeof path, "%s/%s/log.csv", dir, p);
    char *text = clf_test_read_file(path, NULL);
    double *loss = calloc((size_t)steps, sizeof *loss);
    int rows = 0;
    for (char *line = strchr(text, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        long long step;
        int epoch;
        double l;
        ck_assert_int_eq(sscanf(line + 1, "%lld,%d,%lf", &step, &epoch, &l), 3);
        ck_assert_int_eq(step, rows + 1);
        loss[rows++] = l;
    }
    ck_assert_int_eq(rows, steps);
    free(text);
    return loss;
}

/* A training run, bf16 against F32, 300 steps from the same seed: the loss curve, as means
 * over windows of 50 steps, within 8% of F32's in every window (measured on Zen 5: worst
 * 4.8%, in the last window; F32 alone at 1 and 2 threads differs by up to 1.7%, as the
 * runs' paths part), and the runs learned (the last window below half the first). The
 * start line logs the precision. Without BF16 arithmetic: the note, and F32's curve
 * exactly, over one window (both runs are F32: what 300 steps would add is test_train's). */
START_TEST(train_bf16_against_f32)
{
    char path[512], err32[4096], err16[4096];
    const int have = clf_test_api->supports(clf_test_be, CLF_OP_GEMM_BF16_ARITH);
    const int steps = have ? STEPS : WINDOW;
    clf_test_make_tmpdir("clf-precision");
    const char *dir = clf_test_tmpdir();
    snprintf(path, sizeof path, "%s/train.tsv", dir);
    clf_test_write_reversal_corpus(path, 600, 3);
    double *f32 = train_losses(dir, "f32", steps, err32, sizeof err32);
    double *bf16 = train_losses(dir, "bf16", steps, err16, sizeof err16);
    ck_assert_msg(strstr(err32, "from step 0\n") && !strstr(err32, "clformer: precision"), "%s",
                  err32);
    const int note = strstr(err16, "clformer: note: precision bf16: the cpu backend has no BF16 "
                                   "arithmetic here; products run in F32\n") != NULL;
    ck_assert_msg(strstr(err16, note ? "clformer: precision bf16\n"
                                     : "clformer: precision bf16 (BF16 arithmetic)\n"),
                  "%s", err16);
    double worst = 0, first = 0, last = 0;
    int differ = 0;
    for (int w = 0; w < steps / WINDOW; w++) {
        double a = 0, b = 0;
        for (int i = w * WINDOW; i < (w + 1) * WINDOW; i++) {
            a += f32[i] / WINDOW;
            b += bf16[i] / WINDOW;
            differ |= f32[i] != bf16[i];
        }
        const double gap = fabs(b - a) / a;
        fprintf(stderr, "  steps %3d-%3d: mean loss f32 %.4f, bf16 %.4f (%+.1f%%)\n",
                w * WINDOW + 1, (w + 1) * WINDOW, a, b, 100 * (b - a) / a);
        worst = fmax(worst, gap);
        ck_assert_msg(gap <= 0.08, "steps %d-%d: bf16 mean loss %.4f, f32 %.4f", w * WINDOW + 1,
                      (w + 1) * WINDOW, b, a);
        if (w == 0)
            first = a;
        last = a;
    }
    fprintf(stderr,
            "  training, bf16 against f32 over %d steps: worst window gap %.1f%% (bound 8%%)%s\n",
            steps, 100 * worst, note ? " (no BF16 arithmetic: F32 ran)" : "");
    ck_assert_msg(!have || last < 0.5 * first, "the runs did not learn: %.4f -> %.4f", first, last);
    ck_assert_int_eq(note, !have);
    ck_assert_int_eq(differ, !note); /* BF16 arithmetic moved the curve; F32 left it */
    free(f32);
    free(bf16);
    clf_test_remove_tmpdir();
}
END_TEST

/* `clformer train` of a tiny model (d_model 32, 1 + 1 layers, Adam lr 1e-3, no clipping,
 * 40 steps) on dir's corpus into dir/name, precision p with `extra` YAML under train:;
 * stderr into err. */
static void train_tiny(const char *dir, const char *name, const char *p, const char *extra,
                       char *err, size_t err_size)
{
    run_train(dir, name, "d_model: 32, layers: 1, heads: 2, d_ff: 64", dir, p, err, err_size,
              "  batch_size: 16\n  steps: 40\n  optimizer: {name: adam, lr: 1.0e-3}\n"
              "  log_every: 10\n%s",
              extra);
}

/* The largest |a - b| / max |a| over the weights of two runs' last.safetensors. */
static double weights_gap(const char *dir, const char *a, const char *b)
{
    char pa[512], pb[512];
    snprintf(pa, sizeof pa, "%s/%s/last.safetensors", dir, a);
    snprintf(pb, sizeof pb, "%s/%s/last.safetensors", dir, b);
    clf_safetensors *fa, *fb;
    CLF_ASSERT_OK(clf_safetensors_open(pa, &fa));
    CLF_ASSERT_OK(clf_safetensors_open(pb, &fb));
    double gap = 0;
    int tensors = 0;
    for (int i = 0; i < clf_safetensors_count(fa); i++) {
        const clf_tensor *x = clf_safetensors_at(fa, i);
        if (strncmp(x->name, "optim.", 6) == 0)
            continue;
        const clf_tensor *y = clf_safetensors_find(fb, x->name);
        ck_assert_ptr_nonnull(y);
        const size_t n = (size_t)clf_tensor_numel(x);
        float *u = malloc(n * sizeof *u), *v = malloc(n * sizeof *v);
        CLF_ASSERT_OK(clf_tensor_to_f32(x, u));
        CLF_ASSERT_OK(clf_tensor_to_f32(y, v));
        double mx = 0, d = 0;
        for (size_t e = 0; e < n; e++) {
            mx = fmax(mx, fabs(u[e]));
            d = fmax(d, fabs((double)u[e] - v[e]));
        }
        gap = fmax(gap, mx > 0 ? d / mx : d);
        tensors++;
        free(u), free(v);
    }
    ck_assert_int_gt(tensors, 4);
    clf_safetensors_close(fa);
    clf_safetensors_close(fb);
    return gap;
}

/* f16's dynamic loss scaling (products in F32 here: the note). A scale that cannot
 * overflow (1024, doubling every 8 good steps: 32768 after 40) skips nothing, and as the
 * scales are powers of two the weights equal an unscaled F32 run's (bound 1e-6 of each
 * tensor's largest; measured: printed, 0 on Zen 5). An injected overflow, a start scale of
 * 2^70 (the scaled gradients' squares overflow F32), skips steps, halving the scale each
 * time, and the run goes on learning; its checkpoint keeps the scale and the count. */
START_TEST(train_f16_loss_scaling)
{
    char path[512], err[4096];
    clf_test_make_tmpdir("clf-precision");
    const char *dir = clf_test_tmpdir();
    snprintf(path, sizeof path, "%s/train.tsv", dir);
    clf_test_write_reversal_corpus(path, 300, 5);
    train_tiny(dir, "f32", "f32", "", err, sizeof err);
    train_tiny(dir, "small", "f16", "  loss_scale: {init: 1024, window: 8}\n", err, sizeof err);
    ck_assert_msg(strstr(err, "clformer: note: precision f16: the cpu backend has no F16 "
                              "arithmetic for products of many rows here; products run in F32\n"),
                  "%s", err);
    ck_assert_msg(strstr(err, "clformer: loss scale 32768, 0 steps skipped"), "%s", err);
    const double gap = weights_gap(dir, "f32", "small");
    fprintf(stderr, "  f16 loss scale 1024 (x2 every 8 steps): weights against f32 %.2e\n", gap);
    ck_assert_msg(gap <= 1e-6, "weights differ from F32's by %g", gap);
    train_tiny(dir, "huge", "f16", "  loss_scale: {init: 1.180591620717411e21, window: 1000}\n",
               err, sizeof err);
    const char *line = strstr(err, "clformer: loss scale ");
    ck_assert_msg(line != NULL, "%s", err);
    double scale = 0;
    long long skipped = -1;
    ck_assert_int_eq(sscanf(line, "clformer: loss scale %lg, %lld steps skipped", &scale, &skipped),
                     2);
    fprintf(stderr, "  f16 loss scale 2^70: %lld steps skipped, scale now %g\n", skipped, scale);
    ck_assert_msg(skipped >= 1 && skipped < 40, "%lld steps skipped", skipped);
    ck_assert(fabs(scale - ldexp(1.0, 70 - (int)skipped)) <= 1e-5 * scale);
    ck_assert_msg(strstr(err, " loss_scale ") && strstr(err, " skipped "), "%s", err);
    /* the checkpoint keeps the scale and the skipped steps (Adam's step count): --resume of
     * the finished run restores them as they were */
    char want[128], args[700];
    snprintf(want, sizeof want, "clformer: loss scale %g, %lld steps skipped", scale, skipped);
    snprintf(args, sizeof args, "train -c '%s/huge.yaml' --backend cpu --resume", dir);
    ck_assert_msg(clf_test_run_cli(args, err, sizeof err) == 0, "resume: %s", err);
    ck_assert_msg(strstr(err, "nothing to do") && strstr(err, want), "want '%s': %s", want, err);
    clf_test_remove_tmpdir();
}
END_TEST

static void add_tests(TCase *tc)
{
    tcase_add_test(tc, bf16_logits_against_f32);
    tcase_add_test(tc, f16_notes_and_runs_f32);
}

static void cpu_only(TCase *tc)
{
    /* two 300-step trainings: where the CPU has no BF16 arithmetic both run F32, and
     * under ASan on 2 cores they outlast the CPU case's 120 s */
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, gemm_bf16_arith_transposes);
    tcase_add_test(tc, train_bf16_against_f32);
    tcase_add_test(tc, train_f16_loss_scaling);
    tcase_add_test(tc, precision_with_weight_types);
    tcase_add_test(tc, cli_flag);
    tcase_add_test(tc, marian_greedy_bf16_against_f32);
    tcase_add_test(tc, shipped_greedy_bf16_against_f32);
}

int main(void)
{
    return clf_test_backends_main("precision", add_tests, cpu_only, NULL);
}
