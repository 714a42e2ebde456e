/* The CPU backend's layernorm (both styles: CLF_LN_STANDARD and CLF_LN_TUTORIAL, with the
 * residual sum fused in) and the elementwise add of a residual connection. The moments are
 * accumulated in double: this backend is the reference the OpenCL one is tested against.
 * The backward is in cpu_train.c. */
#include <math.h>
#include <string.h>

#include "clformer/backend.h"
#include "cpu_internal.h"

/* ---- layernorm ---- */

clf_status cpu_layernorm(clf_backend *be, const clf_layernorm_args *a)
{
    CPU_REQUIRE_ARGS("layernorm", a);
    /* shape, bounds and aliasing: checked by the core (clformer/ops.h) */
    size_t n = (size_t)a->rows * a->cols;
    if (n == 0)
        return CLF_OK;
    const float *x = fptr(a->x), *res = a->residual.buf ? fptr(a->residual) : NULL;
    const float *alpha = fptr(a->alpha), *beta = fptr(a->beta);
    float *out = fptr(a->out), *sum = a->sum_out.buf ? fptr(a->sum_out) : NULL;
    int cols = a->cols, tutorial = a->style == CLF_LN_TUTORIAL;
    double eps = a->eps;
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > CPU_PAR_MIN)
    for (int r = 0; r < a->rows; r++) {
        const float *xr = x + (size_t)r * cols, *rr = res ? res + (size_t)r * cols : NULL;
        float *orow = out + (size_t)r * cols;
        /* The row sum x + residual, rounded to float as the reference rounds it, is staged
         * in out (which does not alias x) and, if asked, written to sum_out afterwards: sum
         * may alias x, so it must not be written before x is read. */
        /* The sums in double, in SIMD lanes (`omp simd`): one double accumulator added in
         * order is a chain of dependent adds, and made a decoding step's layernorms cost
         * as much as its attention. */
        double mean = 0.0;
        if (rr) {
#pragma omp simd reduction(+ : mean)
            for (int c = 0; c < cols; c++) {
                float v = xr[c] + rr[c];
                orow[c] = v;
                mean += v;
            }
        } else {
#pragma omp simd reduction(+ : mean)
            for (int c = 0; c < cols; c++) {
                orow[c] = xr[c];
                mean += xr[c];
            }
        }
        mean /= cols;
        double ss = 0.0;
#pragma omp simd reduction(+ : ss)
        for (int c = 0; c < cols; c++) {
            double d = orow[c] - mean;
            ss += d * d;
        }
        if (sum)
            memcpy(sum + (size_t)r * cols, orow, 4 * (size_t)cols);
        double inv = tutorial ? 1.0 / (sqrt(ss / (cols - 1)) + eps) : 1.0 / sqrt(ss / cols + eps);
#pragma omp simd
        for (int c = 0; c < cols; c++)
            orow[c] = (float)(alpha[c] * ((orow[c] - mean) * inv) + beta[c]);
    }
    return CLF_OK;
}

/* ---- residual add ---- */

/* shape and operands: checked by the core (clformer/ops.h) */
clf_status cpu_add(clf_backend *be, clf_ptr out, clf_ptr a, clf_ptr b, size_t n)
{
    float *o = fptr(out);
    const float *x = fptr(a), *y = fptr(b);
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        o[i] = x[i] + y[i];
    return CLF_OK;
}
