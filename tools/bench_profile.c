/* The profiling backend of bench --train (bench_profile.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_profile.h"
#include "cli.h"

/* Rows past the clf_op ones: the GEMMs by role and the transfers. */
enum {
    ROW_GEMM_FWD = CLF_OP_COUNT,
    ROW_GEMM_DX,
    ROW_GEMM_DW,
    ROW_GEMM_DBIAS,
    ROW_UPLOAD,
    ROW_DOWNLOAD,
    ROW_COPY,
    ROW_FIXED /* then the plugin ops' rows */
};
static const char *const extra_row_name[ROW_FIXED - CLF_OP_COUNT] = {"gemm x.W^T (forward)",
                                                                     "gemm dY.W (input grads)",
                                                                     "gemm dY^T.X (weight grads)",
                                                                     "gemm 1^T.dY (bias grads)",
                                                                     "upload",
                                                                     "download",
                                                                     "copy"};
/* Plugin ops with a row of their own, each direction counted once; more share their
 * kind's row ("activation", "norm_backward"). */
#define PLUGIN_ROWS 16
#define PROF_ROWS   (ROW_FIXED + PLUGIN_ROWS)

typedef struct prof_stat {
    double seconds, flops;
    long long calls;
} prof_stat;

typedef struct live_buffer {
    clf_buffer *buf;
    size_t bytes;
} live_buffer;

struct cli_profiler {
    clf_backend_api api; /* the wrapped table */
    const clf_backend_api *real;
    clf_backend *real_be;
    int timing;
    prof_stat stat[PROF_ROWS];
    /* plugin rows: which op and direction (its clf_op) each is, and its name */
    const clf_plugin_op *plugin_op[PLUGIN_ROWS];
    clf_op plugin_kind[PLUGIN_ROWS];
    char plugin_name[PLUGIN_ROWS][64];
    int n_plugin;
    size_t live_bytes, peak_bytes;
    live_buffer *bufs;
    size_t n_bufs, cap_bufs;
};

/* The handle the model holds is the profiler itself. */
static cli_profiler *of(clf_backend *be)
{
    return (cli_profiler *)(void *)be;
}

/* Ends the timing of one op that started at t0; st is what the op returned. */
static clf_status timed(cli_profiler *p, int row, double flops, double t0, clf_status st)
{
    if (!p->timing || st != CLF_OK)
        return st;
    st = p->real->synchronize(p->real_be);
    p->stat[row].seconds += cli_now_s() - t0;
    p->stat[row].flops += flops;
    p->stat[row].calls++;
    return st;
}

static int gemm_row(const clf_gemm_args *a)
{
    return a->trans_a   ? ROW_GEMM_DW
           : a->trans_b ? ROW_GEMM_FWD
           : a->m == 1  ? ROW_GEMM_DBIAS
                        : ROW_GEMM_DX;
}

/* The row of plugin op `op` run as `kind`: its own, named "<kind> <op>", while there is room. */
static int plugin_row(cli_profiler *p, clf_op kind, const clf_plugin_op *op)
{
    for (int i = 0; i < p->n_plugin; i++)
        if (p->plugin_op[i] == op && p->plugin_kind[i] == kind)
            return ROW_FIXED + i;
    if (!op || p->n_plugin == PLUGIN_ROWS)
        return (int)kind;
    int i = p->n_plugin++;
    p->plugin_op[i] = op;
    p->plugin_kind[i] = kind;
    snprintf(p->plugin_name[i], sizeof p->plugin_name[i], "%s %s", clf_op_name(kind),
             op->name ? op->name : "?");
    return ROW_FIXED + i;
}

static const char *row_name(const cli_profiler *p, int row)
{
    if (row < CLF_OP_COUNT)
        return clf_op_name((clf_op)row);
    return row < ROW_FIXED ? extra_row_name[row - CLF_OP_COUNT] : p->plugin_name[row - ROW_FIXED];
}

/* QK^T and PV: 2 products of q_len x kv_len x head_dim per (batch, head) */
static double attention_products(const clf_attention_args *a)
{
    return 2.0 * a->batch * a->heads * (double)a->q_len * a->kv_len * a->head_dim;
}

#define PROF_LIST(...) __VA_ARGS__

/* The timed entries: X(entry, row, (parameters after the handle), (arguments after it),
 * flops counted). A new op of clf_backend_api is one line here (its clf_op names its row);
 * a plugin op's row is plugin_row's. Attention's backward is counted as 5 products: QK^T
 * recomputed, dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q. */
#define PROF_TIMED(X)                                                                              \
    X(upload, ROW_UPLOAD, (clf_ptr dst, const void *src, size_t n), (dst, src, n), 0)              \
    X(download, ROW_DOWNLOAD, (void *dst, clf_ptr src, size_t n), (dst, src, n), 0)                \
    X(copy, ROW_COPY, (clf_ptr dst, clf_ptr src, size_t n), (dst, src, n), 0)                      \
    X(gemm, gemm_row(a), (const clf_gemm_args *a), (a), 2.0 * a->m * a->n * a->k)                  \
    X(gemm_strided_batched, CLF_OP_GEMM_STRIDED_BATCHED, (const clf_gemm_args *a), (a),            \
      2.0 * a->batch * a->m * a->n * a->k)                                                         \
    X(layernorm, CLF_OP_LAYERNORM, (const clf_layernorm_args *a), (a), 0)                          \
    X(attention, CLF_OP_ATTENTION, (const clf_attention_args *a), (a),                             \
      2.0 * attention_products(a))                                                                 \
    X(embed, CLF_OP_EMBED, (const clf_embed_args *a), (a), 0)                                      \
    X(add, CLF_OP_ADD, (clf_ptr out, clf_ptr x, clf_ptr y, size_t n), (out, x, y, n), 0)           \
    X(softmax, CLF_OP_SOFTMAX, (clf_ptr out, clf_ptr x, int rows, int cols, int log),              \
      (out, x, rows, cols, log), 0)                                                                \
    X(argmax, CLF_OP_ARGMAX, (clf_ptr out, clf_ptr x, int rows, int cols), (out, x, rows, cols),   \
      0)                                                                                           \
    X(relu_backward, CLF_OP_RELU_BACKWARD, (clf_ptr dx, clf_ptr dy, clf_ptr y, size_t n),          \
      (dx, dy, y, n), 0)                                                                           \
    X(layernorm_backward, CLF_OP_LAYERNORM_BACKWARD, (const clf_layernorm_backward_args *a), (a),  \
      0)                                                                                           \
    X(attention_backward, CLF_OP_ATTENTION_BACKWARD, (const clf_attention_backward_args *a), (a),  \
      5.0 * attention_products(&a->fwd))                                                           \
    X(embed_backward, CLF_OP_EMBED_BACKWARD, (const clf_embed_backward_args *a), (a), 0)           \
    X(dropout, CLF_OP_DROPOUT, (const clf_dropout_args *a), (a), 0)                                \
    X(cross_entropy, CLF_OP_CROSS_ENTROPY, (const clf_cross_entropy_args *a), (a), 0)              \
    X(adam, CLF_OP_ADAM, (const clf_adam_args *a), (a), 0)                                         \
    X(sum_squares, CLF_OP_SUM_SQUARES, (clf_ptr out, clf_ptr x, size_t n), (out, x, n), 0)         \
    X(fill, CLF_OP_FILL, (clf_ptr out, float value, size_t n), (out, value, n), 0)                 \
    X(activation, plugin_row(prof, CLF_OP_ACTIVATION, a->op), (const clf_activation_args *a), (a), \
      0)                                                                                           \
    X(activation_backward, plugin_row(prof, CLF_OP_ACTIVATION_BACKWARD, a->op),                    \
      (const clf_activation_backward_args *a), (a), 0)                                             \
    X(norm, plugin_row(prof, CLF_OP_NORM, a->op), (const clf_norm_args *a), (a), 0)                \
    X(norm_backward, plugin_row(prof, CLF_OP_NORM_BACKWARD, a->op),                                \
      (const clf_norm_backward_args *a), (a), 0)                                                   \
    X(topk, CLF_OP_TOPK, (const clf_topk_args *a), (a), 0)                                         \
    X(beam_choose, CLF_OP_BEAM_CHOOSE, (const clf_beam_args *a), (a), 0)

/* The entries that are passed through untimed: X(entry, return type, (parameters after
 * the handle), (arguments after it)). */
#define PROF_FORWARDED(X)                                                                          \
    X(describe, clf_status, (char *buf, size_t size), (buf, size))                                 \
    X(buffer_size, clf_status, (const clf_buffer *buf, size_t *bytes), (buf, bytes))               \
    X(discard, clf_status, (clf_ptr at, size_t bytes, size_t * freed), (at, bytes, freed))         \
    X(plugin_prepare, clf_status, (const clf_plugin_op *op), (op))

#define DEFINE_TIMED(entry, row, params, args, flops)                                              \
    static clf_status prof_##entry(clf_backend *be, PROF_LIST params)                              \
    {                                                                                              \
        cli_profiler *prof = of(be);                                                               \
        double t0 = cli_now_s();                                                                   \
        clf_status st = prof->real->entry(prof->real_be, PROF_LIST args);                          \
        return timed(prof, (row), (flops), t0, st);                                                \
    }
#define DEFINE_FORWARDED(entry, type, params, args)                                                \
    static type prof_##entry(clf_backend *be, PROF_LIST params)                                    \
    {                                                                                              \
        cli_profiler *prof = of(be);                                                               \
        return prof->real->entry(prof->real_be, PROF_LIST args);                                   \
    }
PROF_TIMED(DEFINE_TIMED)
PROF_FORWARDED(DEFINE_FORWARDED)

/* The entries that take the handle and are neither timed nor passed through unchanged. */
static void prof_close(clf_backend *be)
{
    (void)be; /* the real backend is its opener's to close */
}

static uint64_t prof_max_alloc(clf_backend *be)
{
    return of(be)->real->max_alloc(of(be)->real_be);
}

/* The real backend's, except capture: a replay would time a whole step as one entry */
static int prof_supports(clf_backend *be, clf_op op)
{
    return op != CLF_OP_CAPTURE && of(be)->real->supports(of(be)->real_be, op);
}

static clf_status prof_synchronize(clf_backend *be)
{
    return of(be)->real->synchronize(of(be)->real_be);
}

static clf_status prof_alloc(clf_backend *be, size_t bytes, clf_buffer **out)
{
    cli_profiler *p = of(be);
    clf_status st = p->real->alloc(p->real_be, bytes, out);
    if (st != CLF_OK)
        return st;
    if (p->n_bufs == p->cap_bufs) {
        size_t cap = p->cap_bufs ? 2 * p->cap_bufs : 256;
        live_buffer *b = realloc(p->bufs, cap * sizeof *b);
        if (!b) {
            p->real->free(p->real_be, *out);
            *out = NULL;
            return clf_error(CLF_ERR_NOMEM, "bench: out of host memory");
        }
        p->bufs = b;
        p->cap_bufs = cap;
    }
    p->bufs[p->n_bufs++] = (live_buffer){*out, bytes};
    p->live_bytes += bytes;
    if (p->live_bytes > p->peak_bytes)
        p->peak_bytes = p->live_bytes;
    return CLF_OK;
}

static void prof_free(clf_backend *be, clf_buffer *buf)
{
    cli_profiler *p = of(be);
    for (size_t i = 0; i < p->n_bufs; i++)
        if (p->bufs[i].buf == buf) {
            p->live_bytes -= p->bufs[i].bytes;
            p->bufs[i] = p->bufs[--p->n_bufs];
            break;
        }
    p->real->free(p->real_be, buf);
}

/* Every function slot of the table is one of: the two that take no handle (open,
 * list_devices: the real ones), the six above, the four of capture (none here), or an
 * entry of the two lists. */
#define COUNT_ENTRY(...) +1
enum { PROF_LISTED = 0 PROF_TIMED(COUNT_ENTRY) PROF_FORWARDED(COUNT_ENTRY) };
_Static_assert(2 + 6 + 4 + PROF_LISTED ==
                   (sizeof(clf_backend_api) - offsetof(clf_backend_api, open)) /
                       sizeof(void (*)(void)),
               "an entry of clf_backend_api is not wrapped: add it to PROF_TIMED or "
               "PROF_FORWARDED in tools/bench_profile.c");

clf_status cli_profiler_create(const clf_backend_api *real, clf_backend *real_be,
                               cli_profiler **out)
{
    cli_profiler *p = calloc(1, sizeof *p);
    *out = NULL;
    if (!p)
        return clf_error(CLF_ERR_NOMEM, "bench: out of host memory");
    p->real = real;
    p->real_be = real_be;
    p->api = *real; /* the name, the description, open and list_devices */
    p->api.close = prof_close;
    p->api.max_alloc = real->max_alloc ? prof_max_alloc : NULL;
    p->api.supports = prof_supports;
    p->api.capture_begin = NULL;
    p->api.capture_end = NULL;
    p->api.replay = NULL;
    p->api.capture_free = NULL;
    p->api.synchronize = prof_synchronize;
    p->api.alloc = prof_alloc;
    p->api.free = prof_free;
#define SET_ENTRY(entry, ...) p->api.entry = real->entry ? prof_##entry : NULL;
    PROF_TIMED(SET_ENTRY)
    PROF_FORWARDED(SET_ENTRY)
#undef SET_ENTRY
    *out = p;
    return CLF_OK;
}

void cli_profiler_free(cli_profiler *p)
{
    if (!p)
        return;
    free(p->bufs);
    free(p);
}

const clf_backend_api *cli_profiler_api(cli_profiler *p)
{
    return &p->api;
}

clf_backend *cli_profiler_backend(cli_profiler *p)
{
    return (clf_backend *)(void *)p;
}

void cli_profiler_timing(cli_profiler *p, int on)
{
    p->timing = on;
}

size_t cli_profiler_peak_bytes(const cli_profiler *p)
{
    return p->peak_bytes;
}

typedef struct row_time {
    int row;
    double seconds;
} row_time;

static int cmp_time_desc(const void *a, const void *b)
{
    const row_time *x = a, *y = b;
    if (x->seconds != y->seconds)
        return (x->seconds < y->seconds) - (x->seconds > y->seconds);
    return (x->row > y->row) - (x->row < y->row); /* ties in row order */
}

void cli_profiler_report(const cli_profiler *p, double step_s, int steps, json_t *report)
{
    row_time order[PROF_ROWS];
    double ops_s = 0;
    for (int k = 0; k < PROF_ROWS; k++) {
        order[k] = (row_time){k, p->stat[k].seconds};
        ops_s += p->stat[k].seconds;
    }
    qsort(order, PROF_ROWS, sizeof order[0], cmp_time_desc);
    fprintf(stderr, "  per-op time over %d profiled steps of %.1f ms (each op synchronized):\n",
            steps, step_s * 1e3);
    fprintf(stderr, "    %-28s %10s %10s %7s %9s\n", "op", "calls/step", "ms/step", "share",
            "GFLOP/s");
    json_t *ops = json_array();
    for (int i = 0; i < PROF_ROWS; i++) {
        const prof_stat *s = &p->stat[order[i].row];
        const char *name = row_name(p, order[i].row);
        if (!s->calls)
            continue;
        double ms = s->seconds / steps * 1e3, share = s->seconds / (step_s * steps);
        double gf = s->flops > 0 && s->seconds > 0 ? s->flops / s->seconds * 1e-9 : 0;
        fprintf(stderr, "    %-28s %10.1f %10.2f %6.1f%%", name, (double)s->calls / steps, ms,
                100 * share);
        if (gf > 0)
            fprintf(stderr, " %9.1f", gf);
        fputc('\n', stderr);
        json_array_append_new(ops, json_pack("{s:s, s:f, s:f, s:f, s:f}", "op", name,
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
