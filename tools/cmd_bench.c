/* clformer bench: forward-pass or training throughput of a model on a backend.
 *
 * Forward (default): tokens/s (source + target tokens per second), effective GFLOP/s (the
 * model's GEMM and attention FLOPs over the whole forward time), the backend's own SGEMM
 * rate at the model's GEMM shapes (the same GEMM nodes run alone, in the same process),
 * their ratio, and device memory (weights + activation arena).
 *
 * --train: optimizer steps (forward, label-smoothed cross-entropy, backward, Adam) on
 * synthetic batches through the trainer, with the train: section of the YAML (or its
 * defaults); reports the median step time, target and source+target tokens/s, effective
 * GFLOP/s (3x the forward FLOPs: the usual convention that the backward pass costs twice
 * the forward), and the peak of device memory allocated through the backend. --profile
 * adds a per-op breakdown of the step, measured by a wrapped backend (bench_profile.h).
 *
 * Never a pass/fail: numbers only. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench_profile.h"
#include "cli.h"
#include "cli_model.h"
#include "clformer/fs.h"
#include "clformer/model.h"
#include "clformer/rng.h"
#include "clformer/train.h"
#include "clformer/weights.h"

/* Token ids of the specials ([SOS] 2, [EOS] 3, clformer/tokenizer.h): the synthetic batches
 * frame sentences with them. */
enum { ID_SOS = 2, ID_EOS = 3, ID_FIRST_WORD = 4 };

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct bench_opts {
    int batch, src_len, tgt_len, iters, warmup;
    int train, profile;
    int weight_type_set;         /* --weight-type; else the weights file's type */
    clf_weight_type weight_type; /* forward passes only */
    clf_precision precision;     /* --precision */
    int precision_set;           /* given: --train's too, over train: precision */
} bench_opts;

static clf_status put_line(FILE *f, void *text)
{
    fprintf(f, "%s\n", (const char *)text);
    return CLF_OK;
}

/* Writes text + "\n" to path atomically (clf_fs_write_atomic). */
static clf_status write_json(const char *path, const char *text)
{
    return clf_fs_write_atomic(path, put_line, (void *)text);
}

/* Prints the report (built by json_pack_ex; NULL: err says why) on stdout as one line of
 * JSON and, with --json, writes it to json_path; frees it. Jansson escapes the strings (a
 * path may hold '"'); reals keep 7 significant digits. */
static clf_status emit_report(json_t *report, const json_error_t *err, const char *json_path)
{
    if (!report)
        return clf_error(CLF_ERR_INPUT, "bench: cannot make the JSON report: %s", err->text);
    char *text = json_dumps(report, JSON_REAL_PRECISION(7));
    json_decref(report);
    if (!text)
        return clf_error(CLF_ERR_NOMEM, "bench: out of memory writing the JSON report");
    printf("%s\n", text);
    clf_status st = json_path ? write_json(json_path, text) : CLF_OK;
    free(text);
    return st;
}

/* ------------------------------------------------------------------------------------ */
/* forward                                                                              */

/* What every report states besides its timings: the device, the OpenBLAS core type the
 * user forced (if any), the model's memory and the process's peak RSS. */
typedef struct run_facts {
    char desc[256];
    const char *coretype;
    clf_model_memory mem;
    long peak_rss_kib;
} run_facts;

static void get_run_facts(const clf_backend_api *api, clf_backend *be, const clf_model *model,
                          run_facts *f)
{
    clf_model_memory_usage(model, &f->mem);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    f->peak_rss_kib = ru.ru_maxrss;
    f->desc[0] = '\0';
    if (api->describe)
        api->describe(be, f->desc, sizeof f->desc);
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    f->coretype = coretype ? coretype : "";
}

/* cli_model_opts.wrap of the forward bench: notes when the model starts to be built (the
 * backend is open), for model_setup_s. */
static clf_status note_setup_start(void *ctx, const clf_backend_api **api, clf_backend **be)
{
    (void)api, (void)be;
    *(double *)ctx = cli_now_s();
    return CLF_OK;
}

static int bench_forward(const char *cfg_path, const char *w_path, const char *json_path,
                         const cli_backend_opts *bo, const bench_opts *o)
{
    clf_status st;
    cli_model m = {0};
    double t_open = 0;
    const cli_model_opts mo = {.cfg_path = cfg_path,
                               .w_path = w_path,
                               .init_seed = 1,
                               .bo = bo,
                               .weight_type_set = o->weight_type_set,
                               .weight_type = o->weight_type,
                               .precision = o->precision,
                               .wrap = note_setup_start,
                               .wrap_ctx = &t_open};
    int32_t *src = NULL, *tgt = NULL;
    double *times = calloc((size_t)o->iters, sizeof(double));
    double *gemm_times = calloc((size_t)o->iters, sizeof(double));
    if (!times || !gemm_times) {
        st = clf_error(CLF_ERR_NOMEM, "bench: out of host memory");
        goto fail;
    }
    if ((st = cli_model_open(&mo, &m)) != CLF_OK)
        goto fail;
    const clf_config *cfg = &m.cfg;
    const clf_backend_api *api = m.api;
    clf_model *model = m.model;
    const clf_weight_type wt = m.weight_type;
    const int B = o->batch, S = o->src_len, T = o->tgt_len;
    src = malloc((size_t)B * S * sizeof(int32_t));
    tgt = malloc((size_t)B * T * sizeof(int32_t));
    if (!src || !tgt) {
        st = clf_error(CLF_ERR_NOMEM, "bench: out of host memory");
        goto fail;
    }
    /* random non-special ids; no padding, so every token costs what it does in a real batch */
    clf_rng rng;
    clf_rng_seed(&rng, 7);
    for (int i = 0; i < B * S; i++)
        src[i] = 4 + (int32_t)(clf_rng_next(&rng) % (uint64_t)(cfg->model.src_vocab - 4));
    for (int i = 0; i < B * T; i++)
        tgt[i] = 4 + (int32_t)(clf_rng_next(&rng) % (uint64_t)(cfg->model.tgt_vocab - 4));
    clf_forward_io io = {.batch = B, .src_len = S, .tgt_len = T, .src = src, .tgt = tgt};
    double t0 = cli_now_s();
    if ((st = clf_model_forward(model, &io)) != CLF_OK)
        goto fail;
    double first_call = cli_now_s() - t0, setup = t0 - t_open;
    for (int i = 0; i < o->warmup; i++)
        if ((st = clf_model_forward(model, &io)) != CLF_OK)
            goto fail;
    for (int i = 0; i < o->iters; i++) {
        t0 = cli_now_s();
        if ((st = clf_model_forward(model, &io)) != CLF_OK)
            goto fail;
        times[i] = cli_now_s() - t0;
    }
    for (int i = 0; i < o->iters; i++) {
        t0 = cli_now_s();
        if ((st = clf_model_rerun(model, 1ull << CLF_OP_GEMM)) != CLF_OK)
            goto fail;
        gemm_times[i] = cli_now_s() - t0;
    }
    double t = median(times, o->iters), tg = median(gemm_times, o->iters);
    double flops = clf_model_forward_flops(&cfg->model, B, S, T);
    double gemm_flops = clf_graph_gemm_flops(clf_model_last_graph(model));
    double gflops = flops / t * 1e-9, sgemm_gflops = gemm_flops / tg * 1e-9;
    run_facts facts;
    get_run_facts(api, m.be, model, &facts);

    json_error_t jerr;
    json_t *report = json_pack_ex(
        &jerr, 0,
        "{s:s, s:s, s:s, s:s, s:b, s:s, s:s, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, "
        "s:f, s:f, s:I, s:I, s:I}",
        "config", cfg_path, "backend", api->name, "weight_type", clf_weight_type_name(wt),
        "precision", clf_precision_name(o->precision), "bf16_arithmetic", m.bf16_arith, "device",
        facts.desc, "openblas_coretype_env", facts.coretype, "batch", B, "src_len", S, "tgt_len", T,
        "iters", o->iters, "seconds_per_forward", t, "tokens_per_s", (double)B * (S + T) / t,
        "gflops", gflops, "sgemm_gflops_same_shapes", sgemm_gflops, "ratio_to_sgemm",
        gflops / sgemm_gflops, "gemm_seconds", tg, "model_setup_s", setup, "first_forward_s",
        first_call, "weight_bytes", (json_int_t)facts.mem.weight_bytes, "activation_bytes",
        (json_int_t)facts.mem.arena_bytes, "peak_rss_bytes", (json_int_t)facts.peak_rss_kib * 1024);
    fprintf(stderr,
            "%s on %s (%s), %s weights, precision %s%s\n  batch %d, src %d, tgt %d: %.2f "
            "ms/forward, %.0f "
            "tokens/s, %.1f GFLOP/s\n  backend GEMM alone at the same shapes: %.1f GFLOP/s -> "
            "ratio %.2f\n"
            "  device memory: weights %.1f MiB, activations %.1f MiB\n",
            cfg_path, api->name, facts.desc, clf_weight_type_name(wt),
            clf_precision_name(o->precision), m.bf16_arith ? " (BF16 arithmetic)" : "", B, S, T,
            t * 1e3, (double)B * (S + T) / t, gflops, sgemm_gflops, gflops / sgemm_gflops,
            facts.mem.weight_bytes / 1048576.0, facts.mem.arena_bytes / 1048576.0);
    st = emit_report(report, &jerr, json_path);
fail:
    cli_model_close(&m);
    free(src);
    free(tgt);
    free(times);
    free(gemm_times);
    return st == CLF_OK ? 0 : cli_fail(st);
}

/* ------------------------------------------------------------------------------------ */
/* training                                                                             */

/* A synthetic batch without padding, framed as the trainer expects (clformer/train.h):
 * src = [SOS] x [EOS], tgt = [SOS] y, labels = y [EOS], with x, y random non-special ids.
 * Every row is full length, so every token costs what it costs in a real, well-bucketed
 * batch, and the loss is a mean over B*T labels. */
static void synthetic_batch(clf_rng *rng, const clf_model_config *mc, int B, int S, int T,
                            int32_t *src, int32_t *tgt, int32_t *labels)
{
    const uint64_t sv = (uint64_t)(mc->src_vocab - ID_FIRST_WORD);
    const uint64_t tv = (uint64_t)(mc->tgt_vocab - ID_FIRST_WORD);
    for (int b = 0; b < B; b++) {
        int32_t *s = src + (size_t)b * S, *t = tgt + (size_t)b * T, *l = labels + (size_t)b * T;
        for (int j = 0; j < S; j++)
            s[j] = ID_FIRST_WORD + (int32_t)(clf_rng_next(rng) % sv);
        s[0] = ID_SOS;
        if (S > 1)
            s[S - 1] = ID_EOS;
        t[0] = ID_SOS;
        for (int j = 1; j < T; j++)
            t[j] = l[j - 1] = ID_FIRST_WORD + (int32_t)(clf_rng_next(rng) % tv);
        l[T - 1] = ID_EOS;
    }
}

/* Fresh ids for the n micro-batches of one step: batch a's src, tgt and labels lie one
 * after the other at ids + a * B*(S+2T), where mb[a] points. */
static void next_batches(clf_rng *rng, const clf_model_config *mc, int32_t *ids, int n, int B,
                         int S, int T)
{
    const size_t per = (size_t)B * (S + 2 * T);
    for (int a = 0; a < n; a++) {
        int32_t *p = ids + (size_t)a * per;
        synthetic_batch(rng, mc, B, S, T, p, p + (size_t)B * S, p + (size_t)B * (S + T));
    }
}

/* One optimizer step over the prepared micro-batches; *loss = mean of their mean losses. */
static clf_status train_step(clf_trainer *tr, const clf_train_batch *mb, int n, double *loss)
{
    clf_status st;
    double sum = 0;
    for (int a = 0; a < n; a++) {
        double ls;
        long long nt;
        if ((st = clf_trainer_accumulate(tr, &mb[a], &ls, &nt)) != CLF_OK)
            return st;
        sum += nt ? ls / (double)nt : 0.0;
    }
    *loss = sum / n;
    return clf_trainer_step(tr, NULL, NULL);
}

/* What a training bench holds; freed by train_bench_free. */
typedef struct train_bench {
    cli_model m;
    cli_profiler *prof; /* the model's backend: it counts device bytes, and times --profile */
    clf_trainer *tr;
    int32_t *ids;        /* the micro-batches' ids (next_batches) */
    clf_train_batch *mb; /* accumulate micro-batches over ids */
    double *times;       /* the timed steps' seconds */
    clf_rng rng;
    double loss_first, loss_last, first_step, prof_step;
} train_bench;

/* cli_model_opts.wrap of the training bench: the model gets the profiler's backend. */
static clf_status wrap_profiler(void *ctx, const clf_backend_api **api, clf_backend **be)
{
    train_bench *b = ctx;
    clf_status st = cli_profiler_create(*api, *be, &b->prof);
    if (st == CLF_OK) {
        *api = cli_profiler_api(b->prof);
        *be = cli_profiler_backend(b->prof);
    }
    return st;
}

/* The config, the model on the profiling backend, its trainer and the micro-batches. */
static clf_status train_bench_open(train_bench *b, const char *cfg_path, const char *w_path,
                                   const cli_backend_opts *bo, const bench_opts *o)
{
    clf_status st;
    /* Without a train: section the config still holds the design's train defaults
     * (Adam, lr 1e-4, betas 0.9/0.98, eps 1e-9, label smoothing 0.1, accumulate 1, no
     * clipping), which is what a first `clformer train` would run. */
    if ((st = clf_config_load_with_plugins(cfg_path, bo->plugin_dir, &b->m.cfg)) != CLF_OK)
        return st;
    const clf_model_config *mc = &b->m.cfg.model;
    if (o->precision_set) /* --precision overrides train: precision */
        b->m.cfg.train.precision = o->precision;
    if (mc->src_vocab <= ID_FIRST_WORD || mc->tgt_vocab <= ID_FIRST_WORD)
        return clf_error(CLF_ERR_INPUT, "bench: --train needs vocabularies of more than %d ids",
                         ID_FIRST_WORD);
    const cli_model_opts mo = {.cfg_loaded = 1,
                               .w_path = w_path,
                               .init_seed = 1,
                               .bo = bo,
                               .train = 1,
                               .wrap = wrap_profiler,
                               .wrap_ctx = b};
    if ((st = cli_model_open(&mo, &b->m)) != CLF_OK ||
        (st = clf_trainer_create(b->m.model, &b->m.cfg.train, 1, &b->tr)) != CLF_OK)
        return st;
    if (clf_trainer_note(b->tr))
        fprintf(stderr, "clformer: note: %s\n", clf_trainer_note(b->tr));
    const int B = o->batch, S = o->src_len, T = o->tgt_len, A = b->m.cfg.train.accumulate;
    const size_t per = (size_t)B * (S + 2 * T);
    b->times = calloc((size_t)o->iters, sizeof(double));
    b->ids = malloc((size_t)A * per * sizeof(int32_t));
    b->mb = calloc((size_t)A, sizeof *b->mb);
    if (!b->times || !b->ids || !b->mb)
        return clf_error(CLF_ERR_NOMEM, "bench: out of host memory");
    for (int a = 0; a < A; a++) {
        int32_t *p = b->ids + (size_t)a * per;
        b->mb[a] = (clf_train_batch){.batch = B,
                                     .src_len = S,
                                     .tgt_len = T,
                                     .src = p,
                                     .tgt = p + (size_t)B * S,
                                     .labels = p + (size_t)B * (S + T)};
    }
    clf_rng_seed(&b->rng, 7);
    return CLF_OK;
}

/* One step on fresh batches (drawn outside the timed region, as training sees them);
 * *seconds its time, *loss its loss. */
static clf_status bench_step(train_bench *b, const bench_opts *o, double *seconds, double *loss)
{
    const int A = b->m.cfg.train.accumulate;
    next_batches(&b->rng, &b->m.cfg.model, b->ids, A, o->batch, o->src_len, o->tgt_len);
    double t0 = cli_now_s();
    clf_status st = train_step(b->tr, b->mb, A, loss);
    *seconds = cli_now_s() - t0;
    return st;
}

/* The first step, the warm-up, the timed steps and, with --profile, the profiled ones:
 * after the timed ones, so that the per-op synchronization cannot change the step time. */
static clf_status train_bench_run(train_bench *b, const bench_opts *o)
{
    clf_status st;
    double s, loss, total = 0;
    if ((st = bench_step(b, o, &b->first_step, &b->loss_first)) != CLF_OK)
        return st;
    for (int i = 0; i < o->warmup; i++)
        if ((st = bench_step(b, o, &s, &loss)) != CLF_OK)
            return st;
    for (int i = 0; i < o->iters; i++)
        if ((st = bench_step(b, o, &b->times[i], &b->loss_last)) != CLF_OK)
            return st;
    if (!o->profile)
        return CLF_OK;
    cli_profiler_timing(b->prof, 1);
    for (int i = 0; i < o->iters; i++) {
        if ((st = bench_step(b, o, &s, &loss)) != CLF_OK)
            return st;
        total += s;
    }
    cli_profiler_timing(b->prof, 0);
    b->prof_step = total / o->iters;
    return CLF_OK;
}

/* The report: one JSON line on stdout (and --json), a summary on stderr. */
static clf_status train_bench_report(train_bench *b, const char *cfg_path, const char *json_path,
                                     const bench_opts *o)
{
    const clf_train_config *tc = &b->m.cfg.train;
    const clf_model_config *mc = &b->m.cfg.model;
    const int B = o->batch, S = o->src_len, T = o->tgt_len, A = tc->accumulate;
    const double t = median(b->times, o->iters), t_min = b->times[0]; /* median() sorted them */
    const double tgt_tokens = (double)A * B * T, all_tokens = (double)A * B * (S + T);
    const double fwd_flops = (double)A * clf_model_forward_flops(mc, B, S, T);
    const double flops = 3.0 * fwd_flops, gflops = flops / t * 1e-9;
    const size_t peak = cli_profiler_peak_bytes(b->prof);
    const char *backend = b->m.api->name;
    run_facts facts;
    get_run_facts(b->m.api, b->m.be, b->m.model, &facts);

    json_error_t jerr;
    json_t *report = json_pack_ex(
        &jerr, 0,
        "{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:s, s:i, s:i, s:f, s:s, s:f, s:f, "
        "s:f, s:f, s:f, s:f, s:f, s:f, s:s, s:f, s:f, s:f, s:I, s:I, s:I, s:s}",
        "mode", "train", "framework", "clformer", "config", cfg_path, "backend", backend, "device",
        facts.desc, "openblas_coretype_env", facts.coretype, "batch", B, "src_len", S, "tgt_len", T,
        "accumulate", A, "padding", "none", "iters", o->iters, "warmup", o->warmup, "dropout",
        (double)mc->dropout, "optimizer", clf_optimizer_name(tc->optimizer), "lr", (double)tc->lr,
        "label_smoothing", (double)tc->label_smoothing, "seconds_per_step", t, "seconds_min", t_min,
        "tgt_tokens_per_s", tgt_tokens / t, "tokens_per_s", all_tokens / t, "gflop_per_step",
        flops * 1e-9, "gflops", gflops, "flops_convention",
        "3 x forward (GEMMs + attention products)", "first_step_s", b->first_step, "loss_first",
        b->loss_first, "loss_last", b->loss_last, "weight_bytes",
        (json_int_t)facts.mem.weight_bytes, "peak_device_bytes", (json_int_t)peak, "peak_rss_bytes",
        (json_int_t)facts.peak_rss_kib * 1024, "precision", clf_precision_name(tc->precision));
    fprintf(stderr,
            "%s on %s (%s), training, precision %s\n  accumulate %d x batch %d, src %d, tgt %d, "
            "dropout %g, %s "
            "lr %g: "
            "%.1f ms/step, %.0f target tokens/s, %.0f src+tgt tokens/s, %.1f GFLOP/s (3x "
            "forward)\n  loss %.4f -> %.4f; first step %.2f s\n  device memory: peak %.1f MiB "
            "allocated (weights %.1f MiB); peak RSS %.1f MiB\n",
            cfg_path, backend, facts.desc, clf_precision_name(tc->precision), A, B, S, T,
            mc->dropout, clf_optimizer_name(tc->optimizer), tc->lr, t * 1e3, tgt_tokens / t,
            all_tokens / t, gflops, b->loss_first, b->loss_last, b->first_step, peak / 1048576.0,
            facts.mem.weight_bytes / 1048576.0, facts.peak_rss_kib / 1024.0);
    if (o->profile && report)
        cli_profiler_report(b->prof, b->prof_step, o->iters, report);
    return emit_report(report, &jerr, json_path);
}

static void train_bench_free(train_bench *b)
{
    clf_trainer_free(b->tr);
    cli_model_close(&b->m); /* the model first: it frees its buffers through the profiler */
    cli_profiler_free(b->prof);
    free(b->ids);
    free(b->mb);
    free(b->times);
}

static int bench_train(const char *cfg_path, const char *w_path, const char *json_path,
                       const cli_backend_opts *bo, const bench_opts *o)
{
    train_bench b = {0};
    clf_status st = train_bench_open(&b, cfg_path, w_path, bo, o);
    if (st == CLF_OK && (st = train_bench_run(&b, o)) == CLF_OK)
        st = train_bench_report(&b, cfg_path, json_path, o);
    train_bench_free(&b);
    return st == CLF_OK ? 0 : cli_fail(st);
}

/* ------------------------------------------------------------------------------------ */

/* After the options: what they need of each other. Returns -1 to go on, else the exit
 * code. */
static int check_args(const char *cfg_path, const bench_opts *o)
{
    if (!cfg_path)
        return cli_usage_error("bench: -c model.yaml is required");
    if (o->train && o->weight_type_set && o->weight_type != CLF_WEIGHT_F32)
        return cli_usage_error("bench: --train trains F32 weights; --weight-type is for forward "
                               "passes");
    if (o->profile && !o->train)
        return cli_usage_error("bench: --profile needs --train");
    if (o->train && o->tgt_len < 2)
        return cli_usage_error("bench: --train needs --tgt-len >= 2 ([SOS] and one word)");
    return -1;
}

static void usage(void)
{
    printf("usage: clformer bench -c model.yaml [-w w.safetensors] [--backend B] "
           "[--device D]\n"
           "       [--threads N] [--batch 32] [--src-len 64] [--tgt-len 64] "
           "[--iters 10] [--warmup 2] [--json FILE]\n"
           "       [--train [--profile]] [--weight-type f32|f16|bf16|int8]\n"
           "       [--precision f32|bf16|f16]\n"
           "  --weight-type  the forward passes' weight matrices (default: the weights\n"
           "             file's type, f32 without -w); --train is always f32\n"
           "  --train    time optimizer steps (forward, loss, backward, Adam as the\n"
           "             YAML's train: section or its defaults say) on random batches\n"
           "             without padding, instead of forward passes\n"
           "  --profile  with --train: --iters more steps timed op by op\n" CLI_PRECISION_HELP
           "                       With --train: the training's, over train: precision\n");
}

int clf_cmd_bench(int argc, char **argv)
{
    enum { OPT_TRAIN = 256, OPT_PROFILE, OPT_WEIGHT_TYPE, OPT_PRECISION };
    const char *cfg_path = NULL, *w_path = NULL, *json_path = NULL;
    cli_backend_opts bo = {.threads = -1};
    bench_opts o = {.batch = 32, .src_len = 64, .tgt_len = 64, .iters = 10, .warmup = 2};
    const cli_opt opts[] = {CLI_STRING("config", 'c', &cfg_path),
                            CLI_STRING("weights", 'w', &w_path),
                            CLI_BACKEND_OPTS(&bo),
                            CLI_INT("batch", 'B', &o.batch, 1),
                            CLI_INT("src-len", 'S', &o.src_len, 1),
                            CLI_INT("tgt-len", 'T', &o.tgt_len, 1),
                            CLI_INT("iters", 'n', &o.iters, 1),
                            CLI_INT("warmup", 'W', &o.warmup, 0),
                            CLI_STRING("json", 'j', &json_path),
                            CLI_FLAG("train", OPT_TRAIN, &o.train),
                            CLI_FLAG("profile", OPT_PROFILE, &o.profile),
                            CLI_WEIGHT_TYPE(OPT_WEIGHT_TYPE, &o.weight_type, &o.weight_type_set),
                            CLI_PRECISION(OPT_PRECISION, &o.precision, &o.precision_set),
                            {0}};
    int rc = cli_parse_options(argc, argv, opts, usage);
    if (rc < 0)
        rc = check_args(cfg_path, &o);
    if (rc >= 0)
        return rc;
    return o.train ? bench_train(cfg_path, w_path, json_path, &bo, &o)
                   : bench_forward(cfg_path, w_path, json_path, &bo, &o);
}
