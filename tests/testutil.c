#include "testutil.h"

#include <dirent.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clformer/ops.h"
#include "clformer/rng.h"

double clf_test_max_abs_err(const float *got, const float *want, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (isnan(d))
            return INFINITY;
        if (d > m)
            m = d;
    }
    return m;
}

double clf_test_rel_err(const float *got, const float *want, size_t n)
{
    double ref = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(want[i]) > ref)
            ref = fabs(want[i]);
    /* an all-zero reference is compared absolutely */
    if (ref < 1e-30)
        ref = 1.0;
    return clf_test_max_abs_err(got, want, n) / ref;
}

double clf_test_rel_err_d(const float *gotf, const double *gotd, const double *want, size_t n)
{
    double ref = 0, err = 0;
    for (size_t i = 0; i < n; i++) {
        double g = gotf ? (double)gotf[i] : gotd[i], d = fabs(g - want[i]);
        if (isnan(d))
            return INFINITY;
        err = d > err ? d : err;
        ref = fabs(want[i]) > ref ? fabs(want[i]) : ref;
    }
    return err / (ref < 1e-30 ? 1.0 : ref);
}

void clf_test_open_backend(const char *name, const clf_backend_api **api, clf_backend **be)
{
    clf_backend_opts opts = {.abi_version = CLF_BACKEND_ABI};
    /* CLF_TEST_DEVICE names an OpenCL device; the cpu backend has only its own */
    opts.device = strcmp(name, "cpu") == 0 ? NULL : getenv("CLF_TEST_DEVICE");
    *api = NULL;
    *be = NULL;
    CLF_ASSERT_OK(clf_backend_load(name, CLF_BUILD_BACKEND_DIR, api));
    CLF_ASSERT_OK((*api)->open(&opts, be));
}

const char *clf_test_be_name;
const clf_backend_api *clf_test_api;
clf_backend *clf_test_be;

static void open_named(const char *name)
{
    clf_test_be_name = name;
    clf_test_open_backend(name, &clf_test_api, &clf_test_be);
}

static void setup_cpu(void)
{
    open_named("cpu");
}

static void setup_opencl(void)
{
    open_named("opencl");
}

static void teardown(void)
{
    if (clf_test_api && clf_test_be)
        clf_test_api->close(clf_test_be);
    clf_test_be = NULL;
}

TCase *clf_test_backend_tcase(const char *backend, double timeout)
{
    TCase *tc = tcase_create(backend);
    tcase_add_checked_fixture(tc, strcmp(backend, "cpu") == 0 ? setup_cpu : setup_opencl, teardown);
    tcase_set_timeout(tc, timeout);
    return tc;
}

int clf_test_is_cpu(void)
{
    return strcmp(clf_test_be_name, "cpu") == 0;
}

int clf_test_have(const char *suite, clf_op op, int supported)
{
    if (supported)
        return 1;
    ck_assert_msg(!clf_test_is_cpu(), "the cpu backend does not support %s", clf_op_name(op));
    printf("%s: %s does not support %s yet: the %s part of this check is skipped\n", suite,
           clf_test_be_name, clf_op_name(op), clf_test_be_name);
    return 0;
}

void clf_test_cpu_threads_same_bits(size_t (*run)(float *out), const float *a, float *b, size_t n)
{
    static const int threads[] = {1, 3};
    clf_backend *keep = clf_test_be;
    for (int t = 0; t < 2; t++) {
        clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .threads = threads[t]};
        CLF_ASSERT_OK(clf_test_api->open(&o, &clf_test_be));
        run(b);
        clf_test_api->close(clf_test_be);
        ck_assert_msg(memcmp(a, b, n * sizeof *a) == 0, "cpu: %d threads give other bits",
                      threads[t]);
    }
    clf_test_be = keep;
}

clf_buffer *clf_test_upload(const clf_backend_api *api, clf_backend *be, const void *host,
                            size_t bytes)
{
    clf_buffer *b = NULL;
    CLF_ASSERT_OK(api->alloc(be, bytes ? bytes : 4, &b));
    if (host && bytes)
        CLF_ASSERT_OK(api->upload(be, (clf_ptr){b, 0}, host, bytes));
    return b;
}

void clf_test_fill(float *x, size_t n, unsigned seed, float lo, float hi)
{
    clf_rng r;
    clf_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        x[i] = clf_rng_uniform_range(&r, lo, hi);
}

float *clf_test_frand(size_t n, unsigned seed, float lo, float hi)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    ck_assert_ptr_nonnull(x);
    clf_test_fill(x, n, seed, lo, hi);
    return x;
}

double *clf_test_dalloc(size_t n)
{
    double *x = calloc(n ? n : 1, sizeof *x);
    ck_assert_ptr_nonnull(x);
    return x;
}

double *clf_test_to_double(const float *x, size_t n)
{
    double *y = clf_test_dalloc(n);
    for (size_t i = 0; i < n; i++)
        y[i] = x[i];
    return y;
}

double clf_test_ln_row(const double *x, int C, int style, double eps, double *mean)
{
    double m = 0, ss = 0;
    for (int c = 0; c < C; c++)
        m += x[c];
    m /= C;
    for (int c = 0; c < C; c++)
        ss += (x[c] - m) * (x[c] - m);
    *mean = m;
    return style == CLF_LN_TUTORIAL ? sqrt(ss / (C - 1)) + eps : sqrt(ss / C + eps);
}

void clf_test_ref_gemm(const clf_gemm_args *g, int batch, const float *A, const float *B,
                       const float *bias, float *C)
{
    for (int bt = 0; bt < batch; bt++) {
        const float *a = A + g->a.off / 4 + bt * g->stride_a;
        const float *b = B + g->b.off / 4 + bt * g->stride_b;
        float *c = C + g->c.off / 4 + bt * g->stride_c;
        for (int i = 0; i < g->m; i++) {
            for (int j = 0; j < g->n; j++) {
                double s = 0;
                for (int p = 0; p < g->k; p++) {
                    double x = g->trans_a ? a[(size_t)p * g->lda + i] : a[(size_t)i * g->lda + p];
                    double y = g->trans_b ? b[(size_t)j * g->ldb + p] : b[(size_t)p * g->ldb + j];
                    s += x * y;
                }
                float *cij = &c[(size_t)i * g->ldc + j];
                double v = g->alpha * s + (g->beta == 0.0f ? 0.0 : g->beta * (double)*cij);
                if (bias)
                    v += bias[g->bias.off / 4 + j];
                if (g->relu && v < 0)
                    v = 0;
                *cij = (float)v;
            }
        }
    }
}

int clf_test_run_cli(const char *args, char *err, size_t errsize)
{
    return clf_test_run_cli_within(0, args, err, errsize);
}

void clf_test_take_file(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    size_t len = f ? fread(buf, 1, size - 1, f) : 0;
    buf[len] = '\0';
    if (f)
        fclose(f);
    remove(path);
}

int clf_test_run_cli_within(unsigned seconds, const char *args, char *err, size_t errsize)
{
    char errfile[] = "/tmp/clf-test-err-XXXXXX";
    int fd = mkstemp(errfile);
    ck_assert_int_ge(fd, 0);
    close(fd);
    char cmd[8192], limit[48] = "";
    if (seconds) /* KILL: a CLI that hangs is stopped, whatever it waits on */
        snprintf(limit, sizeof limit, "timeout -s KILL %u ", seconds);
    snprintf(cmd, sizeof cmd, "CLF_PLUGIN_PATH= %s'%s' %s 2>'%s' </dev/null", limit, CLF_CLI_PATH,
             args, errfile);
    int rc = system(cmd);
    clf_test_take_file(errfile, err, errsize);
    if (rc == -1 || !WIFEXITED(rc))
        return -1;
    return WEXITSTATUS(rc);
}

char *clf_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return buf;
}

static char tmpdir[256];

void clf_test_make_tmpdir(const char *prefix)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/%s-XXXXXX", prefix);
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

const char *clf_test_tmpdir(void)
{
    return tmpdir;
}

const char *clf_test_tmp_path(const char *name)
{
    static char p[8][512];
    static int next;
    char *out = p[next++ % 8];
    snprintf(out, sizeof p[0], "%s/%s", tmpdir, name);
    return out;
}

void clf_test_remove_tmpdir(void)
{
    clf_test_remove_dir(tmpdir);
}

int clf_test_tmpdir_entries(void)
{
    DIR *d = opendir(clf_test_tmpdir());
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

clf_status clf_test_write_under_size_limit(clf_status (*write)(void *arg), void *arg)
{
    struct rlimit old_lim, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old_lim), 0);
    void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old_lim;
    lim.rlim_cur = 1024;
    int set = setrlimit(RLIMIT_FSIZE, &lim);
    clf_status st = write(arg);
    int restored = setrlimit(RLIMIT_FSIZE, &old_lim);
    signal(SIGXFSZ, old_sig);
    ck_assert_int_eq(set, 0);
    ck_assert_int_eq(restored, 0);
    return st;
}

/* nftw's callback: each entry removed, a directory after what it holds (FTW_DEPTH) */
static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *at)
{
    (void)sb;
    (void)flag;
    (void)at;
    (void)remove(path);
    return 0;
}

void clf_test_remove_dir(const char *dir)
{
    (void)nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void clf_test_import(const char *tag, const char *import_args, char *dir, size_t size)
{
    char err[2048], args[2048], base[256];
    snprintf(base, sizeof base, "/tmp/clf-%s-XXXXXX", tag);
    ck_assert_ptr_nonnull(mkdtemp(base));
    snprintf(dir, size, "%s/model", base);
    snprintf(args, sizeof args, "import %s -o '%s' >/dev/null", import_args, dir);
    int rc = clf_test_run_cli(args, err, sizeof err);
    ck_assert_msg(rc == 0, "clformer %s: exit %d: %s", args, rc, err);
}

void clf_test_remove_import(const char *dir)
{
    char base[256];
    clf_test_remove_dir(dir);
    snprintf(base, sizeof base, "%s", dir);
    char *slash = strrchr(base, '/');
    if (slash) {
        *slash = '\0';
        rmdir(base);
    }
}

void clf_test_write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

void clf_test_write_text(const char *path, const char *text)
{
    clf_test_write_file(path, text, strlen(text));
}

void clf_test_write_sparse(const char *path, const char *text, uint64_t size)
{
    clf_test_write_text(path, text);
    ck_assert_int_eq(truncate(path, (off_t)size), 0);
}

void clf_test_load_model(const char *dir, clf_config *cfg, clf_weights **w)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/model.yaml", dir);
    CLF_ASSERT_OK(clf_config_load(path, cfg));
    snprintf(path, sizeof path, "%s/weights.safetensors", dir);
    CLF_ASSERT_OK(clf_weights_load(path, &cfg->model, w));
}

void clf_test_assert_decodes(const clf_tokenizer *tok, const int32_t *ids, int n, int skip_specials,
                             const char *want)
{
    char *got;
    CLF_ASSERT_OK(clf_tokenizer_decode(tok, ids, n, skip_specials, &got));
    ck_assert_str_eq(got, want);
    free(got);
}

void clf_test_model_open(clf_test_model *t, const char *backend, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", CLF_FIXTURES_DIR, name);
    clf_test_load_model(path, &t->cfg, &t->w);
    clf_test_open_backend(backend, &t->api, &t->be);
    CLF_ASSERT_OK(clf_model_create(&t->cfg.model, t->w, t->api, t->be, &t->m));
    t->t = NULL;
}

void clf_test_model_close(clf_test_model *t)
{
    clf_model_free(t->m);
    t->api->close(t->be);
    clf_weights_free(t->w);
}

void clf_test_trainer_start(clf_test_model *tr, int dropout)
{
    CLF_ASSERT_OK(clf_model_create(&tr->cfg.model, tr->w, tr->api, tr->be, &tr->m));
    CLF_ASSERT_OK(clf_trainer_create(tr->m, &tr->cfg.train, dropout, &tr->t));
}

void clf_test_trainer_stop(clf_test_model *tr)
{
    clf_trainer_free(tr->t);
    clf_model_free(tr->m);
}

int clf_test_fixture_variants(char names[][256], int max)
{
    DIR *d = opendir(CLF_FIXTURES_DIR);
    int n = 0;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < max) {
        char p[1024];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s/io.safetensors", CLF_FIXTURES_DIR, e->d_name);
        if (e->d_name[0] != '.' && stat(p, &sb) == 0)
            snprintf(names[n++], 256, "%s", e->d_name);
    }
    closedir(d);
    return n;
}

int clf_test_opencl_required(void)
{
    const char *v = getenv("CLF_TEST_REQUIRE_OPENCL");
    return v && strcmp(v, "1") == 0;
}

int clf_test_opencl_unavailable(const char *suite, const char *why)
{
    if (!clf_test_opencl_required()) {
        printf("%s: the OpenCL part is skipped: %s\n", suite, why);
        fflush(stdout);
        return 0;
    }
    printf("%s: FAILED: CLF_TEST_REQUIRE_OPENCL=1 but the OpenCL part cannot run: %s\n", suite,
           why);
    fflush(stdout);
    return 1;
}

int clf_test_opencl_opens(const char *suite)
{
    /* the child writes why the backend does not open into the pipe */
    int fds[2];
    char why[512] = "cannot fork the probe";
    fflush(stdout);
    if (pipe(fds) != 0) {
        if (clf_test_opencl_unavailable(suite, "cannot create the probe's pipe"))
            exit(EXIT_FAILURE);
        return 0;
    }
    pid_t pid = fork();
    if (pid == 0) {
        const clf_backend_api *api = NULL;
        clf_backend *be = NULL;
        clf_backend_opts o = {.abi_version = CLF_BACKEND_ABI, .device = getenv("CLF_TEST_DEVICE")};
        close(fds[0]);
        if (clf_backend_load("opencl", CLF_BUILD_BACKEND_DIR, &api) != CLF_OK ||
            api->open(&o, &be) != CLF_OK) {
            const char *msg = clf_last_error();
            ssize_t w = write(fds[1], msg, strlen(msg));
            _exit(w >= 0 ? 1 : 2);
        }
        api->close(be);
        _exit(0);
    }
    close(fds[1]);
    if (pid > 0) {
        ssize_t n = read(fds[0], why, sizeof why - 1);
        if (n > 0)
            why[n] = '\0';
        else
            snprintf(why, sizeof why, "the probe process ended without a message");
    }
    close(fds[0]);
    int status = 0;
    if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 1;
    if (clf_test_opencl_unavailable(suite, why))
        exit(EXIT_FAILURE);
    return 0;
}

int clf_test_small(void)
{
    const char *v = getenv("CLF_TEST_SMALL");
    return v && *v && strcmp(v, "0") != 0;
}

int clf_test_sanitized(void)
{
#ifdef CLF_TEST_SANITIZED
    return 1;
#else
    return 0;
#endif
}

int clf_test_too_big(double work)
{
    return work > CLF_TEST_SMALL_WORK && clf_test_small();
}

Suite *clf_test_suite_of(const char *suite, TCase *tc, const TTest *const *tests, int n)
{
    Suite *s = suite_create(suite);
    for (int i = 0; i < n; i++)
        tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    return s;
}

int clf_test_main(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

int clf_test_run(const char *suite, const char *tcase, const TTest *const *tests, int n)
{
    return clf_test_main(clf_test_suite_of(suite, tcase_create(tcase), tests, n));
}

void clf_test_add_items(TCase *tc, const clf_test_item *items, int n)
{
    for (int i = 0; i < n; i++) {
        if (items[i].loop > 0)
            tcase_add_loop_test(tc, items[i].test, 0, items[i].loop);
        else
            tcase_add_test(tc, items[i].test);
    }
}

int clf_test_tcases_run(const char *suite, const clf_test_tcase *cases, int n)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    Suite *s = suite_create(suite);
    for (int c = 0; c < n; c++) {
        TCase *tc = tcase_create(cases[c].name);
        if (cases[c].timeout > 0)
            tcase_set_timeout(tc, cases[c].timeout);
        if (cases[c].setup || cases[c].teardown)
            tcase_add_checked_fixture(tc, cases[c].setup, cases[c].teardown);
        clf_test_add_items(tc, cases[c].items, cases[c].n);
        suite_add_tcase(s, tc);
    }
    return clf_test_main(s);
}

/* add(tc) where given, then the n tests listed. */
static void add_to(TCase *tc, void (*add)(TCase *tc), const TTest *const *tests, int n)
{
    if (add)
        add(tc);
    for (int i = 0; i < n; i++)
        tcase_add_test(tc, tests[i]);
}

/* clf_test_backends_main, the tests added by add_tests or listed (tests, n) */
static int backends_main(const char *name, void (*add_tests)(TCase *tc), const TTest *const *tests,
                         int n, void (*cpu_only)(TCase *tc), void (*opencl_only)(TCase *tc))
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines printed by a test that then fails still show */
    Suite *s = suite_create(name);
    TCase *cpu = clf_test_backend_tcase("cpu", 120);
    add_to(cpu, add_tests, tests, n);
    if (cpu_only)
        cpu_only(cpu);
    suite_add_tcase(s, cpu);
#ifdef CLF_HAVE_OPENCL
    if (clf_test_opencl_opens(name)) {
        TCase *ocl = clf_test_backend_tcase("opencl", 300);
        add_to(ocl, add_tests, tests, n);
        if (opencl_only)
            opencl_only(ocl);
        suite_add_tcase(s, ocl);
    }
#else
    (void)opencl_only;
    if (clf_test_opencl_unavailable(name, "this build has no OpenCL backend"))
        return EXIT_FAILURE;
#endif
    return clf_test_main(s);
}

int clf_test_backends_main(const char *name, void (*add_tests)(TCase *tc),
                           void (*cpu_only)(TCase *tc), void (*opencl_only)(TCase *tc))
{
    return backends_main(name, add_tests, NULL, 0, cpu_only, opencl_only);
}

int clf_test_backends_run(const char *name, const TTest *const *tests, int n)
{
    return backends_main(name, NULL, tests, n, NULL, NULL);
}

void clf_test_refuses_null_args(const clf_backend_api *api, clf_backend *be, const char *backend)
{
    char want[96];
#define EXPECT_NO_ARGS(entry)                                                                      \
    do {                                                                                           \
        ck_assert_int_eq(api->entry(be, NULL), CLF_ERR_INPUT);                                     \
        snprintf(want, sizeof want, "%s: %s: no arguments", backend, #entry);                      \
        ck_assert_msg(strstr(clf_last_error(), want), "%s: %s", want, clf_last_error());           \
    } while (0)
    EXPECT_NO_ARGS(gemm);
    EXPECT_NO_ARGS(gemm_strided_batched);
    EXPECT_NO_ARGS(layernorm);
    EXPECT_NO_ARGS(attention);
    EXPECT_NO_ARGS(embed);
    EXPECT_NO_ARGS(layernorm_backward);
    EXPECT_NO_ARGS(attention_backward);
    EXPECT_NO_ARGS(embed_backward);
    EXPECT_NO_ARGS(dropout);
    EXPECT_NO_ARGS(cross_entropy);
    EXPECT_NO_ARGS(adam);
    EXPECT_NO_ARGS(activation);
    EXPECT_NO_ARGS(activation_backward);
    EXPECT_NO_ARGS(norm);
    EXPECT_NO_ARGS(norm_backward);
#undef EXPECT_NO_ARGS
}

void clf_test_refuses_gemm_overlap(const clf_backend_api *api, clf_backend *be, const char *backend)
{
    /* 4x4x4 products in one buffer of 64 floats: A at 0, B at 16, C after them at 32;
     * bias [4] and b_half (4x4 halves = 8 floats) at 48 */
    float zero[64] = {0};
    clf_buffer *buf = clf_test_upload(api, be, zero, sizeof zero);
    clf_gemm_args g = {.m = 4,
                       .n = 4,
                       .k = 4,
                       .alpha = 1,
                       .lda = 4,
                       .ldb = 4,
                       .ldc = 4,
                       .a = {buf, 0},
                       .b = {buf, 64},
                       .c = {buf, 128}};
    char want[128];
#define EXPECT_OVERLAP(entry, operand)                                                             \
    do {                                                                                           \
        ck_assert_int_eq(clf_op_##entry(api, be, &g), CLF_ERR_INPUT);                              \
        snprintf(want, sizeof want, "%s: %s: 'c' may not overlap '%s'", backend, #entry, operand); \
        ck_assert_msg(strstr(clf_last_error(), want), "want '%s', got '%s'", want,                 \
                      clf_last_error());                                                           \
    } while (0)
    CLF_ASSERT_OK(api->gemm(be, &g)); /* neighbouring spans of one buffer */
    g.c.off = 4 * 15;                 /* C's first element is A's last */
    EXPECT_OVERLAP(gemm, "a");
    g.c.off = 4 * 31; /* C's first element is B's last */
    EXPECT_OVERLAP(gemm, "b");
    g.c.off = 0; /* in place, as test_bounds once did */
    EXPECT_OVERLAP(gemm, "a");
    g.c.off = 4 * 32;
    g.bias = (clf_ptr){buf, 4 * 47}; /* bias[0] is C's last element */
    EXPECT_OVERLAP(gemm, "bias");
    g.bias = (clf_ptr){buf, 4 * 48};
    CLF_ASSERT_OK(api->gemm(be, &g));
    g.trans_b = 1;
    g.b_half = (clf_ptr){buf, 4 * 32 + 2}; /* F16 B inside C */
    EXPECT_OVERLAP(gemm, "b_half");
    g.b_half = (clf_ptr){buf, 4 * 48};
    g.bias = (clf_ptr){buf, 4 * 60};
    CLF_ASSERT_OK(api->gemm(be, &g));
    g.bias = (clf_ptr){NULL, 0};
    g.b_half = (clf_ptr){NULL, 0};
    g.k = 0; /* A and B are not read: C may lie over them */
    g.c.off = 0;
    CLF_ASSERT_OK(api->gemm(be, &g));
    /* two products: A at stride 4 spans 0 .. 19, B at stride 20 spans 16 .. 51 */
    g.k = 4;
    g.batch = 2;
    g.stride_a = 4;
    g.stride_b = 20;
    g.stride_c = 10;
    g.b.off = 4 * 16;
    g.c.off = 4 * 40; /* C spans 40 .. 65: out of bounds, refused before any overlap */
    ck_assert_int_eq(clf_op_gemm_strided_batched(api, be, &g), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "'c'"), "%s", clf_last_error());
    g.c.off = 4 * 30; /* 30 .. 55: clear of A, over B */
    EXPECT_OVERLAP(gemm_strided_batched, "b");
    g.stride_b = 4; /* B 16 .. 35, C 36 .. 61: apart */
    g.c.off = 4 * 36;
    CLF_ASSERT_OK(api->gemm_strided_batched(be, &g));
#undef EXPECT_OVERLAP
    CLF_ASSERT_OK(api->synchronize(be));
    api->free(be, buf);
}

void clf_test_write_reversal_corpus(const char *path, int n, unsigned seed)
{
    static const char *const words[10] = {"alpha",   "bravo", "charlie", "delta", "echo",
                                          "foxtrot", "golf",  "hotel",   "india", "juliet"};
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "%s: cannot write", path);
    for (int i = 0; i < n; i++) {
        int ids[5], len;
        seed = seed * 1103515245u + 12345u;
        len = 1 + (int)((seed >> 16) % 5);
        for (int j = 0; j < len; j++) {
            seed = seed * 1103515245u + 12345u;
            ids[j] = (int)((seed >> 16) % 10);
        }
        for (int j = 0; j < len; j++)
            fprintf(f, "%s%s", j ? " " : "", words[ids[j]]);
        fputc('\t', f);
        for (int j = len - 1; j >= 0; j--)
            fprintf(f, "%s%s", j < len - 1 ? " " : "", words[ids[j]]);
        fputc('\n', f);
    }
    ck_assert_int_eq(fclose(f), 0);
}

void clf_test_io_model_open(const char *dir, clf_test_io_model *f)
{
    char path[1024];
    clf_safetensors *io = NULL;
    clf_test_load_model(dir, &f->cfg, &f->w);
    snprintf(path, sizeof path, "%s/io.safetensors", dir);
    CLF_ASSERT_OK(clf_safetensors_open(path, &io));
    const clf_tensor *src = clf_safetensors_find(io, "src"), *tgt = clf_safetensors_find(io, "tgt");
    ck_assert(src && tgt);
    f->B = (int)src->shape[0], f->S = (int)src->shape[1], f->T = (int)tgt->shape[1];
    f->V = f->cfg.model.tgt_vocab;
    f->src = malloc((size_t)f->B * f->S * 4), f->tgt = malloc((size_t)f->B * f->T * 4);
    CLF_ASSERT_OK(clf_tensor_to_i32(src, f->src));
    CLF_ASSERT_OK(clf_tensor_to_i32(tgt, f->tgt));
    clf_safetensors_close(io);
    CLF_ASSERT_OK(clf_model_create(&f->cfg.model, f->w, clf_test_api, clf_test_be, &f->m));
}

void clf_test_io_model_close(clf_test_io_model *f)
{
    clf_model_free(f->m);
    clf_weights_free(f->w);
    free(f->src);
    free(f->tgt);
}

void clf_test_beam_make(clf_test_beam *t, int n, int K, int top_k, int n_banned, int ld, int pos,
                        unsigned seed, int nan)
{
    const size_t rows = (size_t)n * K, top = rows * top_k;
    clf_rng r;
    clf_rng_seed(&r, seed);
    memset(t, 0, sizeof *t);
    t->a = (clf_beam_args){
        .n = n, .K = K, .top_k = top_k, .n_banned = n_banned, .eos_id = 3, .ld = ld, .pos = pos};
    t->val = clf_test_frand(top, seed, -6, 0);
    t->base = malloc(rows * sizeof *t->base);
    t->idx = malloc(top * sizeof *t->idx);
    t->banned = malloc(2 * sizeof *t->banned);
    t->rows_in = malloc(rows * ld * sizeof *t->rows_in);
    ck_assert(t->base && t->idx && t->banned && t->rows_in);
    t->banned[0] = 5;
    t->banned[1] = 7;
    for (size_t i = 0; i < top; i++) {
        const size_t s = i / ((size_t)K * top_k);
        t->val[i] = floorf(t->val[i] * 2) / 2; /* ties */
        if (i % 13 == 4)
            t->val[i] = -INFINITY;
        if (nan && i % 17 == 6)
            t->val[i] = NAN;
        t->idx[i] = s == 1 && i % 2 ? 3 : (int32_t)(clf_rng_next(&r) % 24);
    }
    for (size_t i = 0; i < rows; i++) {
        const size_t s = i / (size_t)K;
        t->base[i] = s == 2 || (i % (size_t)K) % 3 == 2 ? -INFINITY : -(float)(i % 5);
    }
    for (size_t i = 0; i < rows * ld; i++)
        t->rows_in[i] = (int32_t)(1000 + i);
}

void clf_test_beam_free(clf_test_beam *t)
{
    free(t->val), free(t->base), free(t->idx), free(t->banned), free(t->rows_in);
}

void clf_test_beam_run(const clf_backend_api *api, clf_backend *be, const clf_test_beam *t,
                       int32_t *choices, int32_t *ids, float *base, int32_t *rows_out)
{
    const size_t rows = (size_t)t->a.n * t->a.K, top = rows * t->a.top_k,
                 table = rows * t->a.ld * 4;
    clf_buffer *val = clf_test_upload(api, be, t->val, top * 4),
               *idx = clf_test_upload(api, be, t->idx, top * 4),
               *bs = clf_test_upload(api, be, t->base, rows * 4),
               *ban = clf_test_upload(api, be, t->banned, 8),
               *rin = clf_test_upload(api, be, t->rows_in, table),
               *ch = clf_test_upload(api, be, NULL, rows * 24),
               *id = clf_test_upload(api, be, NULL, rows * 4),
               *rout = clf_test_upload(api, be, NULL, table);
    clf_beam_args a = t->a;
    a.val = (clf_ptr){val, 0};
    a.idx = (clf_ptr){idx, 0};
    a.base = (clf_ptr){bs, 0};
    a.banned = t->a.n_banned ? (clf_ptr){ban, 0} : (clf_ptr){0};
    a.rows_in = (clf_ptr){rin, 0};
    a.choices = (clf_ptr){ch, 0};
    a.ids = (clf_ptr){id, 0};
    a.rows_out = (clf_ptr){rout, 0};
    CLF_ASSERT_OK(clf_op_beam_choose(api, be, &a));
    CLF_ASSERT_OK(api->download(be, choices, (clf_ptr){ch, 0}, rows * 24));
    CLF_ASSERT_OK(api->download(be, ids, (clf_ptr){id, 0}, rows * 4));
    CLF_ASSERT_OK(api->download(be, base, (clf_ptr){bs, 0}, rows * 4));
    CLF_ASSERT_OK(api->download(be, rows_out, (clf_ptr){rout, 0}, table));
    clf_buffer *all[] = {val, idx, bs, ban, rin, ch, id, rout};
    for (int i = 0; i < 8; i++)
        api->free(be, all[i]);
}
