/* The CPU backend's plugin ops (ABI 3): activations, gated activations and norms whose math
 * a plugin supplies as C functions (clformer/plugin.h). The plugin gives f and f' (or the
 * row map n and its vector-Jacobian product); this file owns the rest: threads, the gate
 * product, alpha/beta and their gradients (the core has checked the operands,
 * clformer/ops.h). Semantics: clformer/backend.h.
 *
 * Elementwise ops split n into fixed chunks (not per thread) and rows are independent, so
 * the bits never depend on the number of threads. dalpha and dbeta sum each column over
 * the rows in order, in double, like cpu_layernorm_backward. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/backend.h"
#include "cpu_internal.h"

/* Elements per call of a plugin's activation function: 8 KiB per operand, so x, dy, gate
 * and the chunk's temporary stay in L1/L2 between the plugin's pass and ours. */
#define ACT_CHUNK 2048
/* Elementwise ops go parallel above this many elements (below, threads cost more). */
#define ACT_PAR_MIN 65536
/* Row ops go parallel above this many elements. */
#define ROW_PAR_MIN 16384
/* Columns per task of the dalpha/dbeta column sums (as in cpu_train.c): two cache lines. */
#define PARAM_COL_BLOCK 32

/* CLF_OK when op can run here: a known kind and both CPU functions of that kind. */
clf_status cpu_plugin_prepare(clf_backend *be, const clf_plugin_op *op)
{
    (void)be;
    if (!op || !op->name)
        return clf_error(CLF_ERR_INPUT, "cpu: plugin_prepare: no plugin op (or an op without a "
                                        "name)");
    int has_forward, has_backward;
    switch (op->kind) {
    case CLF_PLUGIN_ACTIVATION:
    case CLF_PLUGIN_GATED_ACTIVATION:
        has_forward = op->cpu.act_forward != NULL;
        has_backward = op->cpu.act_backward != NULL;
        break;
    case CLF_PLUGIN_NORM:
        has_forward = op->cpu.norm_forward != NULL;
        has_backward = op->cpu.norm_backward != NULL;
        break;
    default:
        return clf_error(CLF_ERR_INPUT, "cpu: plugin op '%s' has an unknown kind %d", op->name,
                         (int)op->kind);
    }
    if (!has_forward && !has_backward)
        return clf_error(CLF_ERR_UNSUPPORTED, "cpu: plugin op '%s' (%s) has no CPU form", op->name,
                         clf_plugin_kind_name(op->kind));
    if (!has_forward || !has_backward)
        return clf_error(
            CLF_ERR_INPUT, "cpu: plugin op '%s' (%s) has half a CPU form (its %s function is NULL)",
            op->name, clf_plugin_kind_name(op->kind), has_forward ? "backward" : "forward");
    return CLF_OK;
}

/* What every entry checks itself before it runs: that it has arguments and that their op
 * has a CPU form (cpu_plugin_prepare); returns from the entry otherwise. The core
 * (clformer/ops.h) has checked the rest: the op's kind against the entry, the gates, the
 * shape, the operands' bounds and aliasing. */
#define PLUGIN_ENTRY(entry, a)                                                                     \
    do {                                                                                           \
        CPU_REQUIRE_ARGS(entry, a);                                                                \
        clf_status entry_st = cpu_plugin_prepare(be, (a)->op);                                     \
        if (entry_st != CLF_OK)                                                                    \
            return entry_st;                                                                       \
    } while (0)

/* Runs chunk(job, lo, len) over [0, n) in chunks of ACT_CHUNK elements [lo, lo + len),
 * in parallel above ACT_PAR_MIN. */
static void act_chunks(clf_backend *be, size_t n, void (*chunk)(const void *, size_t, size_t),
                       const void *job)
{
    size_t chunks = (n + ACT_CHUNK - 1) / ACT_CHUNK;
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > ACT_PAR_MIN)
    for (size_t k = 0; k < chunks; k++) {
        size_t lo = k * ACT_CHUNK;
        chunk(job, lo, n - lo < ACT_CHUNK ? n - lo : ACT_CHUNK);
    }
}

/* ---- activations ---- */

/* out, x, gate: [n]. out[i] = f(x[i]) * (gate ? gate[i] : 1), f = a->op's act_forward.
 * out may be x (the same span), not gate. */
static void activation_chunk(const void *job, size_t lo, size_t len)
{
    const clf_activation_args *a = job;
    float *out = fptr(a->out) + lo;
    a->op->cpu.act_forward(out, fptr(a->x) + lo, len);
    if (a->op->kind == CLF_PLUGIN_GATED_ACTIVATION) {
        const float *gate = fptr(a->gate) + lo;
        for (size_t i = 0; i < len; i++)
            out[i] *= gate[i];
    }
}

clf_status cpu_plugin_activation(clf_backend *be, const clf_activation_args *a)
{
    PLUGIN_ENTRY("activation", a);
    act_chunks(be, a->n, activation_chunk, a);
    return CLF_OK;
}

/* dx, dgate, dy, x, gate: [n].
 *   dx[i] = (dy[i] * gate[i]) * f'(x[i])   (gate read as 1 without a gate)
 *   dgate[i] = dy[i] * f(x[i])             (with a gate)
 * dx may be dy only without a gate; dgate may be dy (each element is read before it is
 * written); nothing else may overlap an output. */
static void activation_backward_chunk(const void *job, size_t lo, size_t len)
{
    const clf_activation_backward_args *a = job;
    float *dx = fptr(a->dx) + lo;
    const float *dy = fptr(a->dy) + lo, *x = fptr(a->x) + lo;
    if (a->op->kind != CLF_PLUGIN_GATED_ACTIVATION) {
        a->op->cpu.act_backward(dx, dy, x, len);
        return;
    }
    float *dgate = fptr(a->dgate) + lo;
    const float *gate = fptr(a->gate) + lo;
    float fx[ACT_CHUNK]; /* f(x) of the chunk: dgate may be dy, so not staged in dgate */
    for (size_t i = 0; i < len; i++)
        dx[i] = dy[i] * gate[i];
    a->op->cpu.act_backward(dx, dx, x, len);
    a->op->cpu.act_forward(fx, x, len);
    for (size_t i = 0; i < len; i++)
        dgate[i] = dy[i] * fx[i];
}

clf_status cpu_plugin_activation_backward(clf_backend *be, const clf_activation_backward_args *a)
{
    PLUGIN_ENTRY("activation_backward", a);
    act_chunks(be, a->n, activation_backward_chunk, a);
    return CLF_OK;
}

/* ---- norms ---- */

/* out, x: [rows, cols]; alpha, beta: [cols] (beta optional).
 * out[r,:] = alpha * n(x[r,:]) + beta, n = a->op's norm_forward (written into out first).
 * out may not overlap x, alpha or beta. */
clf_status cpu_plugin_norm(clf_backend *be, const clf_norm_args *a)
{
    PLUGIN_ENTRY("norm", a);
    size_t n = (size_t)a->rows * a->cols;
    const float *x = fptr(a->x), *alpha = fptr(a->alpha);
    const float *beta = a->beta.buf ? fptr(a->beta) : NULL;
    float *out = fptr(a->out);
    clf_plugin_norm_fn forward = a->op->cpu.norm_forward;
    int cols = a->cols;
    float eps = a->eps;
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > ROW_PAR_MIN)
    for (int r = 0; r < a->rows; r++) {
        float *o = out + (size_t)r * cols;
        forward(o, x + (size_t)r * cols, cols, eps);
        for (int c = 0; c < cols; c++)
            o[c] = alpha[c] * o[c] + (beta ? beta[c] : 0.0f);
    }
    return CLF_OK;
}

/* dx, dy, x: [rows, cols]; alpha, dalpha, dbeta: [cols] (dalpha, dbeta optional).
 *   dx[r,:] (= or, with accumulate, +=) J_n(x[r,:])^T (alpha * dy[r,:])  (the plugin's
 *           norm_backward; with accumulate it writes a per-thread row that is then added)
 *   dalpha[c] += sum_r dy[r,c] * n(x[r,:])[c];  dbeta[c] += sum_r dy[r,c]
 * n(x) is recomputed into a temporary [rows, cols] for dalpha; the column sums run in
 * double over the rows in order, in blocks of columns (deterministic). dx may not overlap
 * dy, x or alpha. */
clf_status cpu_plugin_norm_backward(clf_backend *be, const clf_norm_backward_args *a)
{
    PLUGIN_ENTRY("norm_backward", a);
    size_t n = (size_t)a->rows * a->cols, bytes = 4 * n;

    const float *x = fptr(a->x), *dy = fptr(a->dy), *alpha = fptr(a->alpha);
    float *dx = fptr(a->dx);
    float *dalpha = a->dalpha.buf ? fptr(a->dalpha) : NULL;
    float *dbeta = a->dbeta.buf ? fptr(a->dbeta) : NULL;
    clf_plugin_norm_fn forward = a->op->cpu.norm_forward;
    clf_plugin_norm_backward_fn backward = a->op->cpu.norm_backward;
    int rows = a->rows, cols = a->cols, accumulate = a->accumulate, threads = be->threads;
    float eps = a->eps;
    float *rowtmp = NULL, *xhat = NULL;
    clf_status st = CLF_OK;
    if (accumulate && !(rowtmp = malloc(sizeof(float) * (size_t)threads * (size_t)cols))) {
        st = clf_error(CLF_ERR_NOMEM,
                       "cpu: norm_backward '%s': cannot allocate %d rows of %d floats", a->op->name,
                       threads, cols);
        goto fail;
    }
    if (dalpha && !(xhat = malloc(bytes))) {
        st = clf_error(CLF_ERR_NOMEM,
                       "cpu: norm_backward '%s': cannot allocate the [%d, %d] n(x) for dalpha",
                       a->op->name, rows, cols);
        goto fail;
    }

#pragma omp parallel num_threads(threads) if (n > ROW_PAR_MIN)
    {
        float *tmp = rowtmp ? rowtmp + (size_t)omp_get_thread_num() * (size_t)cols : NULL;
#pragma omp for schedule(static)
        for (int r = 0; r < rows; r++) {
            size_t row = (size_t)r * cols;
            float *dr = dx + row;
            if (!tmp) {
                backward(dr, dy + row, alpha, x + row, cols, eps);
            } else {
                backward(tmp, dy + row, alpha, x + row, cols, eps);
                for (int c = 0; c < cols; c++)
                    dr[c] += tmp[c];
            }
            if (xhat)
                forward(xhat + row, x + row, cols, eps);
        }
    }

    if (dalpha || dbeta) {
        int blocks = (cols + PARAM_COL_BLOCK - 1) / PARAM_COL_BLOCK;
        /* Each column is summed over the rows in order by one thread: deterministic. */
#pragma omp parallel for num_threads(threads) schedule(static) if (n > ROW_PAR_MIN)
        for (int blk = 0; blk < blocks; blk++) {
            int c0 = blk * PARAM_COL_BLOCK;
            int c1 = c0 + PARAM_COL_BLOCK < cols ? c0 + PARAM_COL_BLOCK : cols;
            double sa[PARAM_COL_BLOCK] = {0}, sb[PARAM_COL_BLOCK] = {0};
            for (int r = 0; r < rows; r++) {
                size_t row = (size_t)r * cols;
                for (int c = c0; c < c1; c++) {
                    if (xhat)
                        sa[c - c0] += (double)dy[row + c] * xhat[row + c];
                    sb[c - c0] += dy[row + c];
                }
            }
            for (int c = c0; c < c1; c++) {
                if (dalpha)
                    dalpha[c] = (float)(dalpha[c] + sa[c - c0]);
                if (dbeta)
                    dbeta[c] = (float)(dbeta[c] + sb[c - c0]);
            }
        }
    }
fail:
    free(rowtmp);
    free(xhat);
    return st;
}
