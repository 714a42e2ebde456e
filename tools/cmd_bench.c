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
 * adds a per-op breakdown of the step, measured by wrapping the backend's table.
 *
 * Never a pass/fail: numbers only. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cli.h"
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

static int bench_forward(const char *cfg_path, const char *w_path, const char *json_path,
                         const cli_backend_opts *bo, const bench_opts *o)
{
    clf_status st;
    clf_config cfg;
    clf_weights *w = NULL;
    const clf_backend_api *api = NULL;
    clf_backend *be = NULL;
    clf_model *model = NULL;
    int32_t *src = NULL, *tgt = NULL;
    double *times = calloc((size_t)o->iters, sizeof(double));
    double *gemm_times = calloc((size_t)o->iters, sizeof(double));
    if (!times || !gemm_times) {
        st = clf_error(CLF_ERR_NOMEM, "bench: out of host memory");
        goto fail;
    }
    if ((st = clf_config_load_with_plugins(cfg_path, bo->plugin_dir, &cfg)) != CLF_OK)
        goto fail;
    st = w_path ? clf_weights_load(w_path, &cfg.model, &w) : clf_weights_init(&cfg.model, 1, &w);
    if (st != CLF_OK)
        goto fail;
    if ((st = cli_open_backend(&cfg, bo, &api, &be)) != CLF_OK)
        goto fail;
    double t_open = cli_now_s();
    clf_weight_type wt = o->weight_type;
    if ((st = cli_inference_model(&cfg.model, &w, api, be, o->weight_type_set, &wt, &model)) !=
        CLF_OK)
        goto fail;
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
        src[i] = 4 + (int32_t)(clf_rng_next(&rng) % (uint64_t)(cfg.model.src_vocab - 4));
    for (int i = 0; i < B * T; i++)
        tgt[i] = 4 + (int32_t)(clf_rng_next(&rng) % (uint64_t)(cfg.model.tgt_vocab - 4));
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
        if ((st = clf_model_rerun(model, 1u << CLF_OP_GEMM)) != CLF_OK)
            goto fail;
        gemm_times[i] = cli_now_s() - t0;
    }
    double t = median(times, o->iters), tg = median(gemm_times, o->iters);
    double flops = clf_model_forward_flops(&cfg.model, B, S, T);
    double gemm_flops = clf_graph_gemm_flops(clf_model_last_graph(model));
    double gflops = flops / t * 1e-9, sgemm_gflops = gemm_flops / tg * 1e-9;
    run_facts facts;
    get_run_facts(api, be, model, &facts);

    json_error_t jerr;
    json_t *report = json_pack_ex(
        &jerr, 0,
        "{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, "
        "s:I, s:I, s:I}",
        "config", cfg_path, "backend", api->name, "weight_type", clf_weight_type_name(wt), "device",
        facts.desc, "openblas_coretype_env", facts.coretype, "batch", B, "src_len", S, "tgt_len", T,
        "iters", o->iters, "seconds_per_forward", t, "tokens_per_s", (double)B * (S + T) / t,
        "gflops", gflops, "sgemm_gflops_same_shapes", sgemm_gflops, "ratio_to_sgemm",
        gflops / sgemm_gflops, "gemm_seconds", tg, "model_setup_s", setup, "first_forward_s",
        first_call, "weight_bytes", (json_int_t)facts.mem.weight_bytes, "activation_bytes",
        (json_int_t)facts.mem.arena_bytes, "peak_rss_bytes", (json_int_t)facts.peak_rss_kib * 1024);
    fprintf(stderr,
            "%s on %s (%s), %s weights\n  batch %d, src %d, tgt %d: %.2f ms/forward, %.0f "
            "tokens/s, %.1f GFLOP/s\n  backend GEMM alone at the same shapes: %.1f GFLOP/s -> "
            "ratio %.2f\n"
            "  device memory: weights %.1f MiB, activations %.1f MiB\n",
            cfg_path, api->name, facts.desc, clf_weight_type_name(wt), B, S, T, t * 1e3,
            (double)B * (S + T) / t, gflops, sgemm_gflops, gflops / sgemm_gflops,
            facts.mem.weight_bytes / 1048576.0, facts.mem.arena_bytes / 1048576.0);
    st = emit_report(report, &jerr, json_path);
fail:
    clf_model_free(model);
    if (be)
        api->close(be);
    clf_weights_free(w);
    free(src);
    free(tgt);
    free(times);
    free(gemm_times);
    return st == CLF_OK ? 0 : cli_fail(st);
}

/* ------------------------------------------------------------------------------------ */
/* the instrumented backend table (training)                                            */

/* The trainer's step is one graph run inside the library, so per-op times cannot come
 * from the graph API (as the forward's SGEMM rate does). Instead the bench hands the model
 * a copy of the backend's table whose entries call the real ones: alloc/free keep a tally
 * of live device bytes (the peak of weights + gradients + Adam moments + activation arena,
 * which the public API does not report for a trainer), and, while `timing` is on, every op
 * is followed by synchronize() and its wall time is added to its kind. On the CPU backend
 * ops are synchronous, so this measures them as they run; on a queued backend it measures
 * them serialised. GEMMs are split by the role their transpose flags give them in the
 * training graph (core/src/graph/autodiff.c): A·W^T is a forward Linear, dY·W an input
 * gradient, dY^T·X a weight gradient, 1^T·dY (one row) a bias gradient. */
typedef enum prof_kind {
    P_GEMM_FWD,
    P_GEMM_DX,
    P_GEMM_DW,
    P_GEMM_DBIAS,
    P_GEMM_BATCHED,
    P_LAYERNORM,
    P_ATTENTION,
    P_EMBED,
    P_ADD,
    P_SOFTMAX,
    P_ARGMAX,
    P_RELU_BW,
    P_LAYERNORM_BW,
    P_ATTENTION_BW,
    P_EMBED_BW,
    P_DROPOUT,
    P_CROSS_ENTROPY,
    P_ADAM,
    P_SUM_SQUARES,
    P_FILL,
    P_COPY,
    P_UPLOAD,
    P_DOWNLOAD,
    P_COUNT
} prof_kind;

static const char *const prof_name[P_COUNT] = {"gemm x.W^T (forward)",
                                               "gemm dY.W (input grads)",
                                               "gemm dY^T.X (weight grads)",
                                               "gemm 1^T.dY (bias grads)",
                                               "gemm_strided_batched",
                                               "layernorm",
                                               "attention",
                                               "embed",
                                               "add",
                                               "softmax",
                                               "argmax",
                                               "relu_backward",
                                               "layernorm_backward",
                                               "attention_backward",
                                               "embed_backward",
                                               "dropout",
                                               "cross_entropy",
                                               "adam",
                                               "sum_squares",
                                               "fill",
                                               "copy",
                                               "upload",
                                               "download"};

typedef struct prof_stat {
    double seconds, flops;
    long long calls;
} prof_stat;

typedef struct live_buffer {
    clf_buffer *buf;
    size_t bytes;
} live_buffer;

static struct {
    const clf_backend_api *real;
    clf_backend_api api;
    int timing;
    prof_stat stat[P_COUNT];
    size_t live_bytes, peak_bytes;
    live_buffer *bufs;
    size_t n_bufs, cap_bufs;
} W;

/* Ends the timing of one op that started at t0; st is what the op returned. */
static clf_status timed(clf_backend *be, prof_kind k, double flops, double t0, clf_status st)
{
    if (!W.timing || st != CLF_OK)
        return st;
    st = W.real->synchronize(be);
    W.stat[k].seconds += cli_now_s() - t0;
    W.stat[k].flops += flops;
    W.stat[k].calls++;
    return st;
}

static clf_status w_alloc(clf_backend *be, size_t bytes, clf_buffer **out)
{
    clf_status st = W.real->alloc(be, bytes, out);
    if (st != CLF_OK)
        return st;
    if (W.n_bufs == W.cap_bufs) {
        size_t cap = W.cap_bufs ? 2 * W.cap_bufs : 256;
        live_buffer *b = realloc(W.bufs, cap * sizeof *b);
        if (!b) {
            W.real->free(be, *out);
            *out = NULL;
            return clf_error(CLF_ERR_NOMEM, "bench: out of host memory");
        }
        W.bufs = b;
        W.cap_bufs = cap;
    }
    W.bufs[W.n_bufs++] = (live_buffer){*out, bytes};
    W.live_bytes += bytes;
    if (W.live_bytes > W.peak_bytes)
        W.peak_bytes = W.live_bytes;
    return CLF_OK;
}

static void w_free(clf_backend *be, clf_buffer *buf)
{
    for (size_t i = 0; i < W.n_bufs; i++)
        if (W.bufs[i].buf == buf) {
            W.live_bytes -= W.bufs[i].bytes;
            W.bufs[i] = W.bufs[--W.n_bufs];
            break;
        }
    W.real->free(be, buf);
}

static clf_status w_upload(clf_backend *be, clf_ptr dst, const void *src, size_t bytes)
{
    double t0 = cli_now_s();
    return timed(be, P_UPLOAD, 0, t0, W.real->upload(be, dst, src, bytes));
}

static clf_status w_download(clf_backend *be, void *dst, clf_ptr src, size_t bytes)
{
    double t0 = cli_now_s();
    return timed(be, P_DOWNLOAD, 0, t0, W.real->download(be, dst, src, bytes));
}

static clf_status w_copy(clf_backend *be, clf_ptr dst, clf_ptr src, size_t bytes)
{
    double t0 = cli_now_s();
    return timed(be, P_COPY, 0, t0, W.real->copy(be, dst, src, bytes));
}

static clf_status w_gemm(clf_backend *be, const clf_gemm_args *a)
{
    prof_kind k = a->trans_a   ? P_GEMM_DW
                  : a->trans_b ? P_GEMM_FWD
                  : a->m == 1  ? P_GEMM_DBIAS
                               : P_GEMM_DX;
    double t0 = cli_now_s();
    return timed(be, k, 2.0 * a->m * a->n * a->k, t0, W.real->gemm(be, a));
}

static clf_status w_gemm_strided_batched(clf_backend *be, const clf_gemm_args *a)
{
    double t0 = cli_now_s();
    return timed(be, P_GEMM_BATCHED, 2.0 * a->batch * a->m * a->n * a->k, t0,
                 W.real->gemm_strided_batched(be, a));
}

static clf_status w_layernorm(clf_backend *be, const clf_layernorm_args *a)
{
    double t0 = cli_now_s();
    return timed(be, P_LAYERNORM, 0, t0, W.real->layernorm(be, a));
}

/* QK^T and PV: 2 products of q_len x kv_len x head_dim per (batch, head) */
static double attention_products(const clf_attention_args *a)
{
    return 2.0 * a->batch * a->heads * (double)a->q_len * a->kv_len * a->head_dim;
}

static clf_status w_attention(clf_backend *be, const clf_attention_args *a)
{
    double t0 = cli_now_s();
    return timed(be, P_ATTENTION, 2.0 * attention_products(a), t0, W.real->attention(be, a));
}

static clf_status w_embed(clf_backend *be, const clf_embed_args *a)
{
    double t0 = cli_now_s();
    return timed(be, P_EMBED, 0, t0, W.real->embed(be, a));
}

static clf_status w_add(clf_backend *be, clf_ptr out, clf_ptr a, clf_ptr b, size_t n)
{
    double t0 = cli_now_s();
    return timed(be, P_ADD, 0, t0, W.real->add(be, out, a, b, n));
}

static clf_status w_softmax(clf_backend *be, clf_ptr out, clf_ptr x, int rows, int cols, int log)
{
    double t0 = cli_now_s();
    return timed(be, P_SOFTMAX, 0, t0, W.real->softmax(be, out, x, rows, cols, log));
}

static clf_status w_argmax(clf_backend *be, clf_ptr out, clf_ptr x, int rows, int cols)
{
    double t0 = cli_now_s();
    return timed(be, P_ARGMAX, 0, t0, W.real->argmax(be, out, x, rows, cols));
}

static clf_status w_relu_backward(clf_backend *be, clf_ptr dx, clf_ptr dy, clf_ptr y, size_t n)
{
    double t0 = cli_now_s();
    return timed(be, P_RELU_BW, 0, t0, W.real->relu_backward(be, dx, dy, y, n));
}

static clf_status w_layernorm_backward(clf_backend *be, const clf_layernorm_backward_args *a)
{
    double t0 = cli_now_s();
    return timed(be, P_LAYERNORM_BW, 0, t0, W.real->layernorm_backward(be, a));
}

/* counted as 5 products: QK^T recomputed, dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q */
static clf_status w_attention_backward(clf_backend *be, const clf_attention_backward_args *a)
{
    double t0 = cli_now_s();
    return timed(be, P_ATTENTION_BW, 5.0 * attention_products(&a->fwd), t0,
                 W.real->attention_backward(be, a));
}

static clf_status w_embed_backward(clf_backend *be, const clf_embed_backward_args *a)
{
    double t0 = cli_now_s();
    return timed(be, P_EMBED_BW, 0, t0, W.real->embed_backward(be, a));
}

static clf_status w_dropout(clf_backend *be, const clf_dropout_args *a)
{
    double t0 = cli_now_s();
    return timed(be, P_DROPOUT, 0, t0, W.real->dropout(be, a));
}

static clf_status w_cross_entropy(clf_backend *be, const clf_cross_entropy_args *a)
{
    double t0 = cli_now_s();
    return timed(be, P_CROSS_ENTROPY, 0, t0, W.real->cross_entropy(be, a));
}

static clf_status w_adam(clf_backend *be, const clf_adam_args *a)
{
    double t0 = cli_now_s();
    return timed(be, P_ADAM, 0, t0, W.real->adam(be, a));
}

static clf_status w_sum_squares(clf_backend *be, clf_ptr out, clf_ptr x, size_t n)
{
    double t0 = cli_now_s();
    return timed(be, P_SUM_SQUARES, 0, t0, W.real->sum_squares(be, out, x, n));
}

static clf_status w_fill(clf_backend *be, clf_ptr out, float value, size_t n)
{
    double t0 = cli_now_s();
    return timed(be, P_FILL, 0, t0, W.real->fill(be, out, value, n));
}

/* The wrapped table; an entry the backend leaves NULL stays NULL (supports() is the real
 * one, so the trainer's checks see exactly what the backend offers). */
static const clf_backend_api *wrap_backend(const clf_backend_api *real)
{
    memset(&W, 0, sizeof W);
    W.real = real;
    W.api = *real;
    W.api.alloc = w_alloc;
    W.api.free = w_free;
    W.api.upload = w_upload;
    W.api.download = w_download;
    W.api.copy = real->copy ? w_copy : NULL;
    W.api.gemm = real->gemm ? w_gemm : NULL;
    W.api.gemm_strided_batched = real->gemm_strided_batched ? w_gemm_strided_batched : NULL;
    W.api.layernorm = real->layernorm ? w_layernorm : NULL;
    W.api.attention = real->attention ? w_attention : NULL;
    W.api.embed = real->embed ? w_embed : NULL;
    W.api.add = real->add ? w_add : NULL;
    W.api.softmax = real->softmax ? w_softmax : NULL;
    W.api.argmax = real->argmax ? w_argmax : NULL;
    W.api.relu_backward = real->relu_backward ? w_relu_backward : NULL;
    W.api.layernorm_backward = real->layernorm_backward ? w_layernorm_backward : NULL;
    W.api.attention_backward = real->attention_backward ? w_attention_backward : NULL;
    W.api.embed_backward = real->embed_backward ? w_embed_backward : NULL;
    W.api.dropout = real->dropout ? w_dropout : NULL;
    W.api.cross_entropy = real->cross_entropy ? w_cross_entropy : NULL;
    W.api.adam = real->adam ? w_adam : NULL;
    W.api.sum_squares = real->sum_squares ? w_sum_squares : NULL;
    W.api.fill = real->fill ? w_fill : NULL;
    return &W.api;
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

static int cmp_stat_desc(const void *a, const void *b)
{
    double x = W.stat[*(const int *)a].seconds, y = W.stat[*(const int *)b].seconds;
    return (x < y) - (x > y);
}

/* The per-op table on stderr and as members of report (NULL: stderr only). */
static void report_profile(double step_s, int steps, json_t *report)
{
    int order[P_COUNT];
    double ops_s = 0;
    for (int k = 0; k < P_COUNT; k++) {
        order[k] = k;
        ops_s += W.stat[k].seconds;
    }
    qsort(order, P_COUNT, sizeof order[0], cmp_stat_desc);
    fprintf(stderr, "  per-op time over %d profiled steps of %.1f ms (each op synchronized):\n",
            steps, step_s * 1e3);
    fprintf(stderr, "    %-28s %10s %10s %7s %9s\n", "op", "calls/step", "ms/step", "share",
            "GFLOP/s");
    json_t *ops = json_array();
    for (int i = 0; i < P_COUNT; i++) {
        const prof_stat *s = &W.stat[order[i]];
        if (!s->calls)
            continue;
        double ms = s->seconds / steps * 1e3, share = s->seconds / (step_s * steps);
        double gf = s->flops > 0 && s->seconds > 0 ? s->flops / s->seconds * 1e-9 : 0;
        fprintf(stderr, "    %-28s %10.1f %10.2f %6.1f%%", prof_name[order[i]],
                (double)s->calls / steps, ms, 100 * share);
        if (gf > 0)
            fprintf(stderr, " %9.1f", gf);
        fputc('\n', stderr);
        json_array_append_new(ops, json_pack("{s:s, s:f, s:f, s:f, s:f}", "op", prof_name[order[i]],
                                             "calls_per_step", (double)s->calls / steps,
                                             "ms_per_step", ms, "share", share, "gflops", gf));
    }
    double other = step_s - ops_s / steps;
    fprintf(stderr, "    %-28s %10s %10.2f %6.1f%%\n", "(outside the ops: host work)", "",
            other * 1e3, 100 * other / step_s);
    json_object_set_new(report, "profile_steps", json_integer(steps));
    json_object_set_new(report, "profile_ms_per_step", json_real(step_s * 1e3));
    json_object_set_new(report, "profile", ops);
    json_object_set_new(report, "profile_host_ms_per_step", json_real(other * 1e3));
}

static int bench_train(const char *cfg_path, const char *w_path, const char *json_path,
                       const cli_backend_opts *bo, const bench_opts *o)
{
    clf_status st;
    clf_config cfg;
    clf_weights *w = NULL;
    const clf_backend_api *real = NULL, *api = NULL;
    clf_backend *be = NULL;
    clf_model *model = NULL;
    clf_trainer *tr = NULL;
    int32_t *ids = NULL;
    clf_train_batch *mb = NULL;
    double *times = calloc((size_t)o->iters, sizeof(double));
    if (!times) {
        st = clf_error(CLF_ERR_NOMEM, "bench: out of host memory");
        goto fail;
    }
    /* Without a train: section the config still holds the design's train defaults
     * (Adam, lr 1e-4, betas 0.9/0.98, eps 1e-9, label smoothing 0.1, accumulate 1, no
     * clipping), which is what a first `clformer train` would run. */
    if ((st = clf_config_load_with_plugins(cfg_path, bo->plugin_dir, &cfg)) != CLF_OK)
        goto fail;
    const clf_train_config *tc = &cfg.train;
    const clf_model_config *mc = &cfg.model;
    if (mc->src_vocab <= ID_FIRST_WORD || mc->tgt_vocab <= ID_FIRST_WORD) {
        st = clf_error(CLF_ERR_INPUT, "bench: --train needs vocabularies of more than %d ids",
                       ID_FIRST_WORD);
        goto fail;
    }
    st = w_path ? clf_weights_load(w_path, mc, &w) : clf_weights_init(mc, 1, &w);
    if (st != CLF_OK)
        goto fail;
    if ((st = cli_open_backend(&cfg, bo, &real, &be)) != CLF_OK)
        goto fail;
    api = wrap_backend(real);
    if ((st = clf_model_create(mc, w, api, be, &model)) != CLF_OK)
        goto fail;
    clf_weights_free(w);
    w = NULL;
    if ((st = clf_trainer_create(model, tc, 1, &tr)) != CLF_OK)
        goto fail;

    const int B = o->batch, S = o->src_len, T = o->tgt_len, A = tc->accumulate;
    const size_t per = (size_t)B * (S + 2 * T);
    ids = malloc((size_t)A * per * sizeof(int32_t));
    mb = calloc((size_t)A, sizeof *mb);
    if (!ids || !mb) {
        st = clf_error(CLF_ERR_NOMEM, "bench: out of host memory");
        goto fail;
    }
    for (int a = 0; a < A; a++) {
        int32_t *p = ids + (size_t)a * per;
        mb[a] = (clf_train_batch){.batch = B,
                                  .src_len = S,
                                  .tgt_len = T,
                                  .src = p,
                                  .tgt = p + (size_t)B * S,
                                  .labels = p + (size_t)B * (S + T)};
    }
    clf_rng rng;
    clf_rng_seed(&rng, 7);
    /* A fresh batch for every step (drawn outside the timed region), as training sees. */
    double loss_first = 0, loss_last = 0, loss;
    next_batches(&rng, mc, ids, A, B, S, T);
    double t0 = cli_now_s();
    if ((st = train_step(tr, mb, A, &loss_first)) != CLF_OK)
        goto fail;
    double first_step = cli_now_s() - t0;
    for (int i = 0; i < o->warmup; i++) {
        next_batches(&rng, mc, ids, A, B, S, T);
        if ((st = train_step(tr, mb, A, &loss)) != CLF_OK)
            goto fail;
    }
    for (int i = 0; i < o->iters; i++) {
        next_batches(&rng, mc, ids, A, B, S, T);
        t0 = cli_now_s();
        if ((st = train_step(tr, mb, A, &loss_last)) != CLF_OK)
            goto fail;
        times[i] = cli_now_s() - t0;
    }
    /* Profiled steps come after the timed ones, so that the per-op synchronization cannot
     * change the step time reported above. */
    double prof_step = 0;
    if (o->profile) {
        double total = 0;
        W.timing = 1;
        for (int i = 0; i < o->iters; i++) {
            next_batches(&rng, mc, ids, A, B, S, T);
            t0 = cli_now_s();
            if ((st = train_step(tr, mb, A, &loss)) != CLF_OK)
                goto fail;
            total += cli_now_s() - t0;
        }
        W.timing = 0;
        prof_step = total / o->iters;
    }

    const double t = median(times, o->iters), t_min = times[0]; /* median() sorted them */
    const double tgt_tokens = (double)A * B * T, all_tokens = (double)A * B * (S + T);
    const double fwd_flops = (double)A * clf_model_forward_flops(mc, B, S, T);
    const double flops = 3.0 * fwd_flops, gflops = flops / t * 1e-9;
    run_facts facts;
    get_run_facts(real, be, model, &facts);

    json_error_t jerr;
    json_t *report = json_pack_ex(
        &jerr, 0,
        "{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:s, s:i, s:i, s:f, s:s, s:f, s:f, "
        "s:f, s:f, s:f, s:f, s:f, s:f, s:s, s:f, s:f, s:f, s:I, s:I, s:I}",
        "mode", "train", "framework", "clformer", "config", cfg_path, "backend", real->name,
        "device", facts.desc, "openblas_coretype_env", facts.coretype, "batch", B, "src_len", S,
        "tgt_len", T, "accumulate", A, "padding", "none", "iters", o->iters, "warmup", o->warmup,
        "dropout", (double)mc->dropout, "optimizer", clf_optimizer_name(tc->optimizer), "lr",
        (double)tc->lr, "label_smoothing", (double)tc->label_smoothing, "seconds_per_step", t,
        "seconds_min", t_min, "tgt_tokens_per_s", tgt_tokens / t, "tokens_per_s", all_tokens / t,
        "gflop_per_step", flops * 1e-9, "gflops", gflops, "flops_convention",
        "3 x forward (GEMMs + attention products)", "first_step_s", first_step, "loss_first",
        loss_first, "loss_last", loss_last, "weight_bytes", (json_int_t)facts.mem.weight_bytes,
        "peak_device_bytes", (json_int_t)W.peak_bytes, "peak_rss_bytes",
        (json_int_t)facts.peak_rss_kib * 1024);
    fprintf(stderr,
            "%s on %s (%s), training\n  accumulate %d x batch %d, src %d, tgt %d, dropout %g, %s "
            "lr %g: "
            "%.1f ms/step, %.0f target tokens/s, %.0f src+tgt tokens/s, %.1f GFLOP/s (3x "
            "forward)\n  loss %.4f -> %.4f; first step %.2f s\n  device memory: peak %.1f MiB "
            "allocated (weights %.1f MiB); peak RSS %.1f MiB\n",
            cfg_path, real->name, facts.desc, A, B, S, T, mc->dropout,
            clf_optimizer_name(tc->optimizer), tc->lr, t * 1e3, tgt_tokens / t, all_tokens / t,
            gflops, loss_first, loss_last, first_step, W.peak_bytes / 1048576.0,
            facts.mem.weight_bytes / 1048576.0, facts.peak_rss_kib / 1024.0);
    if (o->profile)
        report_profile(prof_step, o->iters, report);
    st = emit_report(report, &jerr, json_path);
fail:
    clf_trainer_free(tr);
    clf_model_free(model);
    if (be)
        real->close(be);
    clf_weights_free(w);
    free(ids);
    free(mb);
    free(times);
    free(W.bufs);
    W.bufs = NULL;
    return st == CLF_OK ? 0 : cli_fail(st);
}

/* ------------------------------------------------------------------------------------ */

int clf_cmd_bench(int argc, char **argv)
{
    const char *cfg_path = NULL, *w_path = NULL, *json_path = NULL;
    cli_backend_opts bo = {.threads = -1};
    bench_opts o = {.batch = 32, .src_len = 64, .tgt_len = 64, .iters = 10, .warmup = 2};
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                             {"weights", required_argument, NULL, 'w'},
                                             CLI_BACKEND_LONGOPTS,
                                             {"batch", required_argument, NULL, 'B'},
                                             {"src-len", required_argument, NULL, 'S'},
                                             {"tgt-len", required_argument, NULL, 'T'},
                                             {"iters", required_argument, NULL, 'n'},
                                             {"warmup", required_argument, NULL, 'W'},
                                             {"json", required_argument, NULL, 'j'},
                                             {"train", no_argument, NULL, 'r'},
                                             {"profile", no_argument, NULL, 'P'},
                                             {"weight-type", required_argument, NULL, 'Q'},
                                             {"help", no_argument, NULL, 'h'},
                                             {0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:w:" CLI_BACKEND_SHORTOPTS "B:S:T:n:W:j:h", longopts,
                            NULL)) != -1) {
        int ok = 1;
        switch (c) {
        case 'c':
            cfg_path = optarg;
            break;
        case 'w':
            w_path = optarg;
            break;
        case 'B':
            ok = cli_parse_int("--batch", optarg, 1, &o.batch);
            break;
        case 'S':
            ok = cli_parse_int("--src-len", optarg, 1, &o.src_len);
            break;
        case 'T':
            ok = cli_parse_int("--tgt-len", optarg, 1, &o.tgt_len);
            break;
        case 'n':
            ok = cli_parse_int("--iters", optarg, 1, &o.iters);
            break;
        case 'W':
            ok = cli_parse_int("--warmup", optarg, 0, &o.warmup);
            break;
        case 'j':
            json_path = optarg;
            break;
        case 'r':
            o.train = 1;
            break;
        case 'P':
            o.profile = 1;
            break;
        case 'Q':
            ok = cli_weight_type_option(optarg, &o.weight_type, &o.weight_type_set);
            break;
        case 'h':
            printf("usage: clformer bench -c model.yaml [-w w.safetensors] [--backend B] "
                   "[--device D]\n"
                   "       [--threads N] [--batch 32] [--src-len 64] [--tgt-len 64] "
                   "[--iters 10] [--warmup 2] [--json FILE]\n"
                   "       [--train [--profile]] [--weight-type f32|f16|bf16|int8]\n"
                   "  --weight-type  the forward passes' weight matrices (default: the weights\n"
                   "             file's type, f32 without -w); --train is always f32\n"
                   "  --train    time optimizer steps (forward, loss, backward, Adam as the\n"
                   "             YAML's train: section or its defaults say) on random batches\n"
                   "             without padding, instead of forward passes\n"
                   "  --profile  with --train: --iters more steps timed op by op\n");
            return 0;
        default:
            if (cli_backend_option(c, optarg, &bo) != 1)
                return 2;
        }
        if (!ok)
            return 2;
    }
    if (!cfg_path)
        return cli_usage_error("bench: -c model.yaml is required");
    if (o.train && o.weight_type_set && o.weight_type != CLF_WEIGHT_F32)
        return cli_usage_error("bench: --train trains F32 weights; --weight-type is for forward "
                               "passes");
    if (o.profile && !o.train)
        return cli_usage_error("bench: --profile needs --train");
    if (o.train && o.tgt_len < 2)
        return cli_usage_error("bench: --train needs --tgt-len >= 2 ([SOS] and one word)");
    return o.train ? bench_train(cfg_path, w_path, json_path, &bo, &o)
                   : bench_forward(cfg_path, w_path, json_path, &bo, &o);
}
