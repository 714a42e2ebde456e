/* The CPU backend's training ops (ABI 2) except attention_backward: the backward forms of
 * relu, layernorm and embed, dropout, the label-smoothed cross-entropy, the Adam step, the
 * squared norm used for gradient clipping, and fill. Semantics: clformer/backend.h.
 *
 * Reductions that decide accuracy are accumulated in double. Reductions over rows
 * (dalpha, dbeta, dtable, sum_squares) split the work by column or by a fixed chunk size,
 * never by thread, and sum each column or chunk in index order: the bits do not depend
 * on the number of threads, so a training run repeats exactly. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/backend.h"
#include "cpu_internal.h"

/* Columns per task in the row reductions: 32 floats are two cache lines, few enough that
 * a d_model of 512 still gives every thread work. */
#define COL_BLOCK 32
/* Elements per partial sum in sum_squares: fixed (not per thread) so the partials, and
 * the order they are added in, are the same whatever the thread count. */
#define SUMSQ_CHUNK 8192
/* Elementwise ops go parallel above this many elements (below, threads cost more). */
#define PAR_MIN 65536

/* Shapes, ranges, operand bounds and aliasing are checked by the core (clformer/ops.h)
 * before any of these runs. */

/* ---- elementwise ---- */

/* dx, dy, y: [n]. dx[i] = y[i] > 0 ? dy[i] : 0 (y is the relu's output). */
clf_status cpu_relu_backward(clf_backend *be, clf_ptr dx, clf_ptr dy, clf_ptr y, size_t n)
{
    float *DX = fptr(dx);
    const float *DY = fptr(dy), *Y = fptr(y);
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++)
        DX[i] = Y[i] > 0.0f ? DY[i] : 0.0f;
    return CLF_OK;
}

/* out, x: [n]. out[i] = keep(i) ? x[i] / (1 - p) : 0 with the stateless mask of
 * clf_dropout_bits, so every backend drops the same elements for the same seed. */
clf_status cpu_dropout(clf_backend *be, const clf_dropout_args *a)
{
    CPU_REQUIRE_ARGS("dropout", a);
    size_t n = a->n;
    float *out = fptr(a->out);
    const float *x = fptr(a->x);
    const float scale = 1.0f / (1.0f - a->p);
    const uint32_t threshold = clf_dropout_threshold(a->p);
    const uint64_t seed = a->seed;
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++)
        out[i] = clf_dropout_bits(seed, i) >= threshold ? x[i] * scale : 0.0f;
    return CLF_OK;
}

/* out: [n]. out[i] = value. */
clf_status cpu_fill(clf_backend *be, clf_ptr out, float value, size_t n)
{
    float *o = fptr(out);
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++)
        o[i] = value;
    return CLF_OK;
}

/* out: [1], x: [n]. out[0] = sum_i x[i]^2 in double: fixed chunks summed in parallel,
 * then the chunk sums added in chunk order. */
clf_status cpu_sum_squares(clf_backend *be, clf_ptr out, clf_ptr x, size_t n)
{
    const float *X = n ? fptr(x) : NULL;
    size_t chunks = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
    double *part = malloc(sizeof(double) * (chunks ? chunks : 1));
    if (!part)
        return clf_error(CLF_ERR_NOMEM, "cpu: sum_squares: cannot allocate %zu partial sums",
                         chunks);
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > PAR_MIN)
    for (size_t c = 0; c < chunks; c++) {
        size_t lo = c * SUMSQ_CHUNK, hi = lo + SUMSQ_CHUNK < n ? lo + SUMSQ_CHUNK : n;
        double s = 0.0;
        for (size_t i = lo; i < hi; i++)
            s += (double)X[i] * X[i];
        part[c] = s;
    }
    double total = 0.0;
    for (size_t c = 0; c < chunks; c++)
        total += part[c];
    free(part);
    fptr(out)[0] = (float)total;
    return CLF_OK;
}

/* ---- layernorm ---- */

/* dx, dy, x: [rows, cols]; alpha, dalpha, dbeta: [cols]. With g = dy * alpha and
 * c = x - mean over the row (sums in double):
 *   standard (D = sqrt(var_biased + eps)):
 *     dx = (g - mean(g)) / D - c * sum(g c) / (cols D^3)
 *   tutorial (D = s + eps, s = std_unbiased = sqrt(sum c^2 / (cols - 1))):
 *     dx = (g - mean(g)) / D - c * sum(g c) / (D^2 (cols - 1) s)
 *     (dD/dx_i = c_i / ((cols - 1) s); a constant row, s = 0, has sum(g c) = 0 and takes
 *     0 for the second term where PyTorch's std backward would give NaN)
 *   dalpha += sum_r dy c / D;  dbeta += sum_r dy */
clf_status cpu_layernorm_backward(clf_backend *be, const clf_layernorm_backward_args *a)
{
    CPU_REQUIRE_ARGS("layernorm_backward", a);
    /* shape, bounds and aliasing: checked by the core (clformer/ops.h) */
    size_t n = (size_t)a->rows * a->cols;
    if (n == 0)
        return CLF_OK;
    const float *x = fptr(a->x), *dy = fptr(a->dy), *alpha = fptr(a->alpha);
    float *dx = fptr(a->dx);
    float *dalpha = a->dalpha.buf ? fptr(a->dalpha) : NULL;
    float *dbeta = a->dbeta.buf ? fptr(a->dbeta) : NULL;
    int rows = a->rows, cols = a->cols, tutorial = a->style == CLF_LN_TUTORIAL;
    int accumulate = a->accumulate;
    double eps = a->eps;
    /* per row: mean and 1/D, kept for the column pass (dalpha) */
    double *stats = malloc(sizeof(double) * 2 * (size_t)rows);
    if (!stats)
        return clf_error(CLF_ERR_NOMEM, "cpu: layernorm_backward: cannot allocate row stats");
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > 16384)
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * cols, *gr = dy + (size_t)r * cols;
        float *dr = dx + (size_t)r * cols;
        double mean = 0.0;
        for (int c = 0; c < cols; c++)
            mean += xr[c];
        mean /= cols;
        double ss = 0.0, sg = 0.0, sgc = 0.0;
        for (int c = 0; c < cols; c++) {
            double cc = xr[c] - mean, g = (double)gr[c] * alpha[c];
            ss += cc * cc;
            sg += g;
            sgc += g * cc;
        }
        double inv, k; /* dx = (g - mean(g)) * inv - c * k */
        if (tutorial) {
            double s = sqrt(ss / (cols - 1));
            inv = 1.0 / (s + eps);
            k = s > 0.0 ? sgc * inv * inv / ((cols - 1) * s) : 0.0;
        } else {
            inv = 1.0 / sqrt(ss / cols + eps);
            k = sgc * inv * inv * inv / cols;
        }
        double mg = sg / cols;
        for (int c = 0; c < cols; c++) {
            double g = (double)gr[c] * alpha[c];
            double v = (g - mg) * inv - (xr[c] - mean) * k;
            dr[c] = accumulate ? (float)(dr[c] + v) : (float)v;
        }
        stats[2 * r] = mean;
        stats[2 * r + 1] = inv;
    }
    if (dalpha || dbeta) {
        int blocks = (cols + COL_BLOCK - 1) / COL_BLOCK;
        /* Each column is summed over the rows in order by one thread: deterministic. */
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > 16384)
        for (int blk = 0; blk < blocks; blk++) {
            int c0 = blk * COL_BLOCK, c1 = c0 + COL_BLOCK < cols ? c0 + COL_BLOCK : cols;
            double sa[COL_BLOCK] = {0}, sb[COL_BLOCK] = {0};
            for (int r = 0; r < rows; r++) {
                const float *xr = x + (size_t)r * cols, *gr = dy + (size_t)r * cols;
                double mean = stats[2 * r], inv = stats[2 * r + 1];
                for (int c = c0; c < c1; c++) {
                    sa[c - c0] += gr[c] * ((xr[c] - mean) * inv);
                    sb[c - c0] += gr[c];
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
    free(stats);
    return CLF_OK;
}

/* ---- embedding ---- */

/* dtable: [vocab, dim], dout: [rows, dim], ids: I32 [rows].
 * dtable[ids[r], :] += scale * dout[r, :] in increasing r; out-of-range ids are skipped.
 * Threads split the columns, so rows sharing an id are added in order by one thread. */
clf_status cpu_embed_backward(clf_backend *be, const clf_embed_backward_args *a)
{
    CPU_REQUIRE_ARGS("embed_backward", a);
    size_t dim = (size_t)a->dim;
    const int32_t *ids = iptr(a->ids);
    const float *dout = fptr(a->dout);
    float *dtable = fptr(a->dtable);
    int rows = a->rows, vocab = a->vocab;
    const float scale = a->scale;
    int blocks = (int)((dim + COL_BLOCK - 1) / COL_BLOCK);
#pragma omp parallel for num_threads(be->threads) schedule(static) if ((size_t)rows * dim > PAR_MIN)
    for (int blk = 0; blk < blocks; blk++) {
        size_t c0 = (size_t)blk * COL_BLOCK, c1 = c0 + COL_BLOCK < dim ? c0 + COL_BLOCK : dim;
        for (int r = 0; r < rows; r++) {
            int id = ids[r];
            if (id < 0 || id >= vocab)
                continue;
            float *t = dtable + (size_t)id * dim;
            const float *g = dout + (size_t)r * dim;
            for (size_t c = c0; c < c1; c++)
                t[c] += scale * g[c];
        }
    }
    return CLF_OK;
}

/* ---- loss ---- */

/* logits, dlogits: [rows, cols]; targets: I32 [rows]; loss: [rows]. Per row, in double:
 * lse = max + log(sum exp(x - max)), lp = x - lse,
 * loss = -(1 - ls) lp[t] - (ls / cols) sum lp,
 * dlogits = grad_scale (exp(lp) - (1 - ls) [j == t] - ls / cols); ignored rows are 0. */
clf_status cpu_cross_entropy(clf_backend *be, const clf_cross_entropy_args *a)
{
    CPU_REQUIRE_ARGS("cross_entropy", a);
    size_t n = (size_t)a->rows * a->cols;
    const float *X = fptr(a->logits);
    const int32_t *T = iptr(a->targets);
    float *L = fptr(a->loss), *G = a->dlogits.buf ? fptr(a->dlogits) : NULL;
    int cols = a->cols, ignore = a->ignore_index;
    double ls = a->label_smoothing, gs = a->grad_scale, smooth = ls / cols;
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > 16384)
    for (int r = 0; r < a->rows; r++) {
        const float *xr = X + (size_t)r * cols;
        float *gr = G ? G + (size_t)r * cols : NULL;
        int t = T[r];
        if (t == ignore || t < 0 || t >= cols) {
            L[r] = 0.0f;
            if (gr)
                memset(gr, 0, sizeof(float) * (size_t)cols);
            continue;
        }
        float mx = xr[0];
        for (int c = 1; c < cols; c++)
            mx = xr[c] > mx ? xr[c] : mx;
        double sum = 0.0, sumx = 0.0;
        for (int c = 0; c < cols; c++) {
            sum += exp((double)xr[c] - mx);
            sumx += xr[c];
        }
        double lse = mx + log(sum);
        L[r] = (float)(-(1.0 - ls) * ((double)xr[t] - lse) - smooth * (sumx - cols * lse));
        if (gr) /* gr may be xr: element c is read before it is written */
            for (int c = 0; c < cols; c++) {
                double p = exp((double)xr[c] - lse);
                gr[c] = (float)(gs * (p - (c == t ? 1.0 - ls : 0.0) - smooth));
            }
    }
    return CLF_OK;
}

/* ---- optimizer ---- */

/* param, grad, m, v: [n]. One step of torch.optim.Adam (decoupled = 0) or AdamW
 * (decoupled = 1) in float, operation for operation as PyTorch's CPU kernels round:
 * add/mul with a scalar (the scalar rounded to float), addcmul v + (s * g) * g, and
 * addcdiv p + (s * m) / denom. Python-double scalars (1 - lr * wd, lr / bc1) are formed in
 * double from the float arguments and rounded once. */
clf_status cpu_adam(clf_backend *be, const clf_adam_args *a)
{
    CPU_REQUIRE_ARGS("adam", a);
    size_t n = a->n;
    float *P = fptr(a->param), *M = fptr(a->m), *V = fptr(a->v);
    const float *G = fptr(a->grad);
    const float gs = a->grad_scale, wd = a->weight_decay, b1 = a->beta1, b2 = a->beta2;
    const float one_b1 = (float)(1.0 - (double)b1), one_b2 = (float)(1.0 - (double)b2);
    const float decay = (float)(1.0 - (double)a->lr * a->weight_decay);
    const float neg_step = (float)(-((double)a->lr / a->bias_correction1));
    const float bc2 = a->sqrt_bias_correction2, eps = a->eps;
    const int decoupled = a->decoupled, has_wd = a->weight_decay != 0.0f;
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float g = G[i] * gs, p = P[i];
        if (has_wd) {
            if (decoupled)
                p = p * decay;
            else
                g = g + wd * p;
        }
        float m = M[i] * b1 + one_b1 * g;
        float v = V[i] * b2 + one_b2 * g * g;
        float denom = sqrtf(v) / bc2 + eps;
        P[i] = p + neg_step * m / denom;
        M[i] = m;
        V[i] = v;
    }
    return CLF_OK;
}
