/* The core's side of every op call (clformer/ops.h): the argument checks that need no
 * device knowledge, made once here for every backend, then the backend's entry. The rules
 * are those of clformer/backend.h; the gemm overlap and layernorm shape rules are in
 * backend_checks.c, with the checks the backends still make themselves. */
#include "clformer/ops.h"

#include <inttypes.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* One operand of an op: its name in messages, where it is, how many elements it spans
 * from its offset, the element size (its alignment) and whether it must be given. */
typedef struct operand {
    const char *name;
    clf_ptr p;
    uint64_t elems;
    unsigned elem_bytes;
    int required;
} operand;

static operand required(const char *name, clf_ptr p, uint64_t elems)
{
    return (operand){name, p, elems, 4, 1};
}

static operand optional(const char *name, clf_ptr p, uint64_t elems)
{
    return (operand){name, p, elems, 4, 0};
}

/* Each given operand aligned to its element and inside its buffer; each required one given. */
static clf_status check_operands(const clf_backend_api *api, clf_backend *be, const char *op,
                                 const operand *list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const operand *o = &list[i];
        if (!o->p.buf) {
            if (o->required)
                return clf_error(CLF_ERR_INPUT, "%s: %s: operand '%s' is missing", api->name, op,
                                 o->name);
            continue;
        }
        if (o->p.off % o->elem_bytes != 0)
            return clf_error(CLF_ERR_INPUT,
                             "%s: %s: operand '%s' is misaligned: offset %zu bytes is not a "
                             "multiple of %u",
                             api->name, op, o->name, o->p.off, o->elem_bytes);
        size_t size = 0;
        if (api->buffer_size(be, o->p.buf, &size) != CLF_OK)
            return clf_error(CLF_ERR_INPUT,
                             "%s: %s: operand '%s' is a buffer of another backend instance",
                             api->name, op, o->name);
        const uint64_t bytes =
            o->elems > UINT64_MAX / o->elem_bytes ? UINT64_MAX : o->elems * o->elem_bytes;
        if (o->p.off > size || bytes > size - o->p.off)
            return clf_error(CLF_ERR_INPUT,
                             "%s: %s: operand '%s' out of bounds: needs %" PRIu64
                             " bytes at offset %zu, its buffer holds %zu bytes",
                             api->name, op, o->name, bytes, o->p.off, size);
    }
    return CLF_OK;
}

/* The table implements the op and the call has arguments. */
static clf_status check_entry(const clf_backend_api *api, const char *op, int present,
                              const void *args)
{
    if (!present)
        return clf_error(CLF_ERR_UNSUPPORTED, "%s: %s: not supported by this backend", api->name,
                         op);
    if (!args)
        return clf_error(CLF_ERR_INPUT, "%s: %s: no arguments", api->name, op);
    return CLF_OK;
}

/* ---- gemm ---- */

static clf_status check_gemm(const clf_backend_api *api, clf_backend *be, const char *op,
                             const clf_gemm_args *g, int batched, int *empty)
{
    const int batch = batched ? g->batch : 1;
    const uint64_t sa = batched ? g->stride_a : 0, sb = batched ? g->stride_b : 0,
                   sc = batched ? g->stride_c : 0;
    if (g->m < 0 || g->n < 0 || g->k < 0 || batch < 0)
        return clf_error(CLF_ERR_INPUT, "%s: %s: negative size m=%d n=%d k=%d batch=%d", api->name,
                         op, g->m, g->n, g->k, batch);
    /* stored shapes: A [m,k] or [k,m]; B [k,n] or [n,k]; C [m,n] */
    const int a_rows = g->trans_a ? g->k : g->m, a_cols = g->trans_a ? g->m : g->k;
    const int b_rows = g->trans_b ? g->n : g->k, b_cols = g->trans_b ? g->k : g->n;
    const int lda_min = a_cols > 1 ? a_cols : 1, ldb_min = b_cols > 1 ? b_cols : 1,
              ldc_min = g->n > 1 ? g->n : 1;
    if (g->lda < lda_min || g->ldb < ldb_min || g->ldc < ldc_min)
        return clf_error(CLF_ERR_INPUT,
                         "%s: %s: leading dimension too small: lda=%d (needs >= %d), "
                         "ldb=%d (needs >= %d), ldc=%d (needs >= %d)",
                         api->name, op, g->lda, lda_min, g->ldb, ldb_min, g->ldc, ldc_min);
    *empty = g->m == 0 || g->n == 0 || batch == 0;
    if (*empty)
        return CLF_OK; /* nothing is read or written */
    /* A and B are read only when k > 0 (k = 0 leaves C = beta * C + bias) */
    const operand operands[] = {required("a", g->a,
                                         clf_span_elems((uint64_t)a_rows, (uint64_t)a_cols,
                                                        (uint64_t)g->lda, (uint64_t)batch, sa)),
                                required("b", g->b,
                                         clf_span_elems((uint64_t)b_rows, (uint64_t)b_cols,
                                                        (uint64_t)g->ldb, (uint64_t)batch, sb)),
                                required("c", g->c,
                                         clf_span_elems((uint64_t)g->m, (uint64_t)g->n,
                                                        (uint64_t)g->ldc, (uint64_t)batch, sc)),
                                optional("bias", g->bias, (uint64_t)g->n)};
    const size_t skip = g->k > 0 ? 0 : 2;
    clf_status st = check_operands(api, be, op, operands + skip, COUNT(operands) - skip);
    if (st == CLF_OK)
        st = clf_check_gemm_overlap(api->name, op, g, batched);
    return st;
}

clf_status clf_op_gemm(const clf_backend_api *api, clf_backend *be, const clf_gemm_args *a)
{
    int empty = 0;
    clf_status st = check_entry(api, "gemm", api->gemm != NULL, a);
    if (st == CLF_OK)
        st = check_gemm(api, be, "gemm", a, 0, &empty);
    return st != CLF_OK || empty ? st : api->gemm(be, a);
}

clf_status clf_op_gemm_strided_batched(const clf_backend_api *api, clf_backend *be,
                                       const clf_gemm_args *a)
{
    const char *op = "gemm_strided_batched";
    int empty = 0;
    clf_status st = check_entry(api, op, api->gemm_strided_batched != NULL, a);
    if (st == CLF_OK)
        st = check_gemm(api, be, op, a, 1, &empty);
    return st != CLF_OK || empty ? st : api->gemm_strided_batched(be, a);
}

/* ---- layernorm ---- */

/* layernorm (backward 0) or its backward (1): clf_check_ln_shape, then (rows > 0) the
 * operands p, in the order of the args struct (out, x, residual, sum_out, alpha, beta or
 * dx, dy, x, alpha, dalpha, dbeta), then the aliasing: the forward stages each row in out
 * while x is read, so out may not be x (sum_out may); the backward writes rows of dx while
 * other rows of dy and x are still read. */
static clf_status check_ln(const clf_backend_api *api, clf_backend *be, const char *op, int rows,
                           int cols, clf_ln_style style, const clf_ptr p[6], int backward)
{
    static const char *const names[2][6] = {{"out", "x", "residual", "sum_out", "alpha", "beta"},
                                            {"dx", "dy", "x", "alpha", "dalpha", "dbeta"}};
    clf_status st = clf_check_ln_shape(api->name, op, rows, cols, style);
    if (st != CLF_OK || rows == 0)
        return st;
    /* [rows, cols] then [cols]; the forward's residual and sum_out, the backward's dalpha
     * and dbeta are optional */
    const int per_row = backward ? 3 : 4, first_optional = backward ? 4 : 2;
    const uint64_t n = (uint64_t)rows * (uint64_t)cols;
    operand list[6];
    for (int i = 0; i < 6; i++)
        list[i] = (operand){names[backward][i], p[i], i < per_row ? n : (uint64_t)cols, 4,
                            i < first_optional || i >= first_optional + 2};
    if ((st = check_operands(api, be, op, list, 6)) != CLF_OK)
        return st;
    if (!backward && p[0].buf == p[1].buf && p[0].off == p[1].off)
        return clf_error(CLF_ERR_INPUT, "%s: %s: out may not alias x", api->name, op);
    if (backward &&
        (clf_ptr_overlap(p[0], 4 * n, p[1], 4 * n) || clf_ptr_overlap(p[0], 4 * n, p[2], 4 * n)))
        return clf_error(CLF_ERR_INPUT, "%s: %s: dx may not alias dy or x", api->name, op);
    return CLF_OK;
}

clf_status clf_op_layernorm(const clf_backend_api *api, clf_backend *be,
                            const clf_layernorm_args *a)
{
    clf_status st = check_entry(api, "layernorm", api->layernorm != NULL, a);
    if (st == CLF_OK &&
        (st = check_ln(api, be, "layernorm", a->rows, a->cols, a->style,
                       (const clf_ptr[]){a->out, a->x, a->residual, a->sum_out, a->alpha, a->beta},
                       0)) == CLF_OK &&
        a->rows > 0)
        st = api->layernorm(be, a);
    return st;
}

clf_status clf_op_layernorm_backward(const clf_backend_api *api, clf_backend *be,
                                     const clf_layernorm_backward_args *a)
{
    const char *op = "layernorm_backward";
    const clf_status st = check_entry(api, op, api->layernorm_backward != NULL, a);
    if (st != CLF_OK)
        return st;
    const clf_ptr p[6] = {a->dx, a->dy, a->x, a->alpha, a->dalpha, a->dbeta};
    const clf_status ck = check_ln(api, be, op, a->rows, a->cols, a->style, p, 1);
    return ck != CLF_OK || a->rows == 0 ? ck : api->layernorm_backward(be, a);
}

/* ---- attention ---- */

/* The spans of q, k, v and out (elements; out's layout is also dout's) and key_mask. */
typedef struct attn_extent {
    uint64_t q, k, v, out, key_mask;
} attn_extent;

static clf_status check_attention_shape(const clf_backend_api *api, const char *op,
                                        const clf_attention_args *f, attn_extent *e)
{
    if (!(f->dropout_p >= 0.0f && f->dropout_p < 1.0f)) /* NaN fails too */
        return clf_error(CLF_ERR_INPUT, "%s: %s: dropout_p = %g is outside [0, 1)", api->name, op,
                         (double)f->dropout_p);
    /* kv_len 0 would be a softmax over no keys */
    if (f->batch < 0 || f->heads <= 0 || f->q_len < 0 || f->kv_len <= 0 || f->head_dim <= 0)
        return clf_error(CLF_ERR_INPUT,
                         "%s: %s: bad shape batch=%d heads=%d q_len=%d kv_len=%d head_dim=%d",
                         api->name, op, f->batch, f->heads, f->q_len, f->kv_len, f->head_dim);
    const uint64_t B = (uint64_t)f->batch, Tq = (uint64_t)f->q_len, Tk = (uint64_t)f->kv_len,
                   width = (uint64_t)f->heads * (uint64_t)f->head_dim;
    if (f->q_ld < 0 || f->k_ld < 0 || f->v_ld < 0 || f->out_ld < 0 || (uint64_t)f->q_ld < width ||
        (uint64_t)f->k_ld < width || (uint64_t)f->v_ld < width || (uint64_t)f->out_ld < width)
        return clf_error(CLF_ERR_INPUT,
                         "%s: %s: row strides q_ld=%d k_ld=%d v_ld=%d out_ld=%d must be at "
                         "least heads * head_dim = %" PRIu64,
                         api->name, op, f->q_ld, f->k_ld, f->v_ld, f->out_ld, width);
    e->q = clf_span_elems(Tq, width, (uint64_t)f->q_ld, B, f->q_bstride);
    e->k = clf_span_elems(Tk, width, (uint64_t)f->k_ld, B, f->kv_bstride);
    e->v = clf_span_elems(Tk, width, (uint64_t)f->v_ld, B, f->kv_bstride);
    e->out = clf_span_elems(Tq, width, (uint64_t)f->out_ld, B, f->out_bstride);
    e->key_mask = clf_span_elems(1, Tk, Tk, B, f->key_mask_stride);
    return CLF_OK;
}

clf_status clf_op_attention(const clf_backend_api *api, clf_backend *be,
                            const clf_attention_args *a)
{
    const char *op = "attention";
    attn_extent e = {0};
    clf_status st = check_entry(api, op, api->attention != NULL, a);
    if (st != CLF_OK || (st = check_attention_shape(api, op, a, &e)) != CLF_OK || a->batch == 0 ||
        a->q_len == 0)
        return st;
    /* ints: no overflow in 64 bits */
    const uint64_t np =
        (uint64_t)a->batch * (uint64_t)a->heads * (uint64_t)a->q_len * (uint64_t)a->kv_len;
    const operand operands[] = {required("q", a->q, e.q),
                                required("k", a->k, e.k),
                                required("v", a->v, e.v),
                                required("out", a->out, e.out),
                                optional("key_mask", a->key_mask, e.key_mask),
                                optional("probs", a->probs, np)};
    if ((st = check_operands(api, be, op, operands, COUNT(operands))) != CLF_OK)
        return st;
    return api->attention(be, a);
}

clf_status clf_op_attention_backward(const clf_backend_api *api, clf_backend *be,
                                     const clf_attention_backward_args *a)
{
    const char *op = "attention_backward";
    attn_extent e = {0};
    clf_status st = check_entry(api, op, api->attention_backward != NULL, a);
    /* q_len = 0 is not empty: it zeroes dk and dv */
    if (st != CLF_OK || (st = check_attention_shape(api, op, &a->fwd, &e)) != CLF_OK ||
        a->fwd.batch == 0)
        return st;
    const clf_attention_args *f = &a->fwd;
    const operand operands[] = {
        required("q", f->q, e.q),   required("k", f->k, e.k),
        required("v", f->v, e.v),   required("dout", a->dout, e.out),
        required("dq", a->dq, e.q), required("dk", a->dk, e.k),
        required("dv", a->dv, e.v), optional("key_mask", f->key_mask, e.key_mask)};
    if ((st = check_operands(api, be, op, operands, COUNT(operands))) != CLF_OK)
        return st;
    /* the gradients (dq, dk, dv) are written while the inputs (q, k, v, dout) are still read */
    for (int o = 4; o < 7; o++)
        for (int i = 0; i < 4; i++)
            if (clf_ptr_overlap(operands[o].p, 4 * operands[o].elems, operands[i].p,
                                4 * operands[i].elems))
                return clf_error(CLF_ERR_INPUT, "%s: %s: '%s' overlaps the input '%s'", api->name,
                                 op, operands[o].name, operands[i].name);
    return api->attention_backward(be, a);
}
