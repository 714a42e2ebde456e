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

/* CLF_ERR_INPUT when the spans of bytes bytes at a and b share a byte of one buffer or,
 * with same_ok (an elementwise op may run in place), share one without being the same span. */
static clf_status check_no_overlap(const char *backend, const char *op, const char *na, clf_ptr a,
                                   const char *nb, clf_ptr b, uint64_t bytes, int same_ok)
{
    int overlap =
        a.buf && a.buf == b.buf && bytes && a.off < b.off + bytes && b.off < a.off + bytes;
    if (overlap && !(same_ok && a.off == b.off))
        return clf_error(CLF_ERR_INPUT, "%s: %s: '%s' %s '%s'", backend, op, na,
                         same_ok ? "partly overlaps" : "may not overlap", nb);
    return CLF_OK;
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
