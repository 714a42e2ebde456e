/* Checks of op arguments that every backend makes alike (clformer/backend.h): one rule,
 * one message, whatever backend refuses the call. */
#include "clformer/backend.h"

clf_status clf_check_ln_shape(const char *backend, const char *op, int rows, int cols,
                              clf_ln_style style)
{
    if (rows < 0 || cols <= 0)
        return clf_error(CLF_ERR_INPUT, "%s: %s: bad shape rows=%d cols=%d", backend, op, rows,
                         cols);
    if (style != CLF_LN_TUTORIAL && style != CLF_LN_STANDARD)
        return clf_error(CLF_ERR_INPUT, "%s: %s: unknown style %d", backend, op, (int)style);
    if (style == CLF_LN_TUTORIAL && cols < 2)
        return clf_error(CLF_ERR_INPUT, "%s: %s: the tutorial style needs cols >= 2 (unbiased std)",
                         backend, op);
    return CLF_OK;
}

/* CLF_ERR_INPUT when the span of abytes bytes at a and that of bbytes bytes at b share a byte
 * of one buffer or, with same_ok (an elementwise op may run in place), share one without
 * being the same span. */
static clf_status check_spans_apart(const char *backend, const char *op, const char *na, clf_ptr a,
                                    uint64_t abytes, const char *nb, clf_ptr b, uint64_t bbytes,
                                    int same_ok)
{
    const int overlap = clf_ptr_overlap(a, abytes, b, bbytes);
    if (overlap && !(same_ok && a.off == b.off && abytes == bbytes))
        return clf_error(CLF_ERR_INPUT, "%s: %s: '%s' %s '%s'", backend, op, na,
                         same_ok ? "partly overlaps" : "may not overlap", nb);
    return CLF_OK;
}

/* check_spans_apart for two spans of the same length. */
static clf_status check_no_overlap(const char *backend, const char *op, const char *na, clf_ptr a,
                                   const char *nb, clf_ptr b, uint64_t bytes, int same_ok)
{
    return check_spans_apart(backend, op, na, a, bytes, nb, b, bytes, same_ok);
}

/* clf_span_elems of an operand whose counts may be negative (then 0). The caller has
 * bounds-checked the operand, so this fits in its buffer. */
static uint64_t matrix_span(int rows, int cols, int ld, int batch, size_t stride)
{
    if (rows <= 0 || cols <= 0 || batch <= 0)
        return 0;
    return clf_span_elems((uint64_t)rows, (uint64_t)cols, (uint64_t)ld, (uint64_t)batch, stride);
}

clf_status clf_check_gemm_overlap(const char *backend, const char *op, const clf_gemm_args *a,
                                  int batched)
{
    const int batch = batched ? a->batch : 1;
    const size_t sa = batched ? a->stride_a : 0, sb = batched ? a->stride_b : 0,
                 sc = batched ? a->stride_c : 0;
    const int a_rows = a->trans_a ? a->k : a->m, a_cols = a->trans_a ? a->m : a->k;
    const int b_rows = a->trans_b ? a->n : a->k, b_cols = a->trans_b ? a->k : a->n;
    const uint64_t c_bytes = 4 * matrix_span(a->m, a->n, a->ldc, batch, sc);
    /* A and B are read only when k > 0; b_half by gemm only */
    const uint64_t a_bytes = a->k > 0 ? 4 * matrix_span(a_rows, a_cols, a->lda, batch, sa) : 0;
    const uint64_t b_bytes = a->k > 0 ? 4 * matrix_span(b_rows, b_cols, a->ldb, batch, sb) : 0;
    const uint64_t h_bytes =
        a->k > 0 && !batched ? 2 * matrix_span(b_rows, b_cols, a->ldb, 1, 0) : 0;
    const uint64_t i8_bytes = a->k > 0 && !batched ? matrix_span(b_rows, b_cols, a->ldb, 1, 0) : 0;
    const uint64_t bias_bytes = c_bytes ? 4 * (uint64_t)a->n : 0;
    clf_status st;
    if ((st = check_spans_apart(backend, op, "c", a->c, c_bytes, "a", a->a, a_bytes, 0)) !=
            CLF_OK ||
        (st = check_spans_apart(backend, op, "c", a->c, c_bytes, "b", a->b, b_bytes, 0)) !=
            CLF_OK ||
        (st = check_spans_apart(backend, op, "c", a->c, c_bytes, "b_half", a->b_half, h_bytes,
                                0)) != CLF_OK ||
        (st = check_spans_apart(backend, op, "c", a->c, c_bytes, "b_bf16", a->b_bf16, h_bytes,
                                0)) != CLF_OK ||
        (st = check_spans_apart(backend, op, "c", a->c, c_bytes, "b_i8", a->b_i8, i8_bytes, 0)) !=
            CLF_OK ||
        (st = check_spans_apart(backend, op, "c", a->c, c_bytes, "b_scale", a->b_scale,
                                a->b_i8.buf && !batched ? bias_bytes : 0, 0)) != CLF_OK)
        return st;
    return check_spans_apart(backend, op, "c", a->c, c_bytes, "bias", a->bias, bias_bytes, 0);
}

clf_status clf_check_activation_overlap(const char *backend, const char *op,
                                        const clf_activation_args *a)
{
    const uint64_t bytes = 4 * (uint64_t)a->n;
    clf_status st;
    if ((st = check_no_overlap(backend, op, "out", a->out, "x", a->x, bytes, 1)) != CLF_OK)
        return st;
    return check_no_overlap(backend, op, "out", a->out, "gate", a->gate, bytes, 0);
}

clf_status clf_check_activation_backward_overlap(const char *backend, const char *op,
                                                 const clf_activation_backward_args *a)
{
    const uint64_t bytes = 4 * (uint64_t)a->n;
    const int gated = a->op->kind == CLF_PLUGIN_GATED_ACTIVATION;
    /* each output against what it may not share, and whether the same span is allowed */
    const struct {
        const char *na, *nb;
        clf_ptr a, b;
        int same_ok;
    } rules[] = {
        {"dx", "dy", a->dx, a->dy, !gated},      {"dx", "x", a->dx, a->x, 0},
        {"dx", "gate", a->dx, a->gate, 0},       {"dx", "dgate", a->dx, a->dgate, 0},
        {"dgate", "dy", a->dgate, a->dy, 1},     {"dgate", "x", a->dgate, a->x, 0},
        {"dgate", "gate", a->dgate, a->gate, 0},
    };
    clf_status st = CLF_OK;
    for (size_t i = 0; i < sizeof rules / sizeof rules[0] && st == CLF_OK; i++)
        st = check_no_overlap(backend, op, rules[i].na, rules[i].a, rules[i].nb, rules[i].b, bytes,
                              rules[i].same_ok);
    return st;
}
