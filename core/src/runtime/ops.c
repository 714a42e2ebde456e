/* The core's side of every op call (clformer/ops.h): the argument checks that need no
 * device knowledge, made once here for every backend, then the backend's entry. The rules
 * are those of clformer/backend.h; the gemm overlap and layernorm shape rules are in
 * backend_checks.c, with the checks the backends still make themselves. */
#include "clformer/ops.h"
#include "runtime/op_checks.h"

#include <inttypes.h>
#include <limits.h>

/* ---- gemm ---- */

/* The layernorm of A (clf_gemm_args.ln_out): gemm only, on a backend that has it, A not
 * transposed and its rows contiguous (as the layernorm op's), the three operands given and the
 * layernorm's shape and style; ln_out [m, k] clear of everything else the call reads or writes.
 * ab[0..3]: a, b, c, bias as checked. */
static clf_status check_gemm_ln(const clf_backend_api *api, clf_backend *be, const char *op,
                                const clf_gemm_args *g, int batched, const operand *abcb)
{
    if (batched || !api->supports(be, CLF_OP_GEMM_LAYERNORM))
        return clf_error(CLF_ERR_UNSUPPORTED, "%s: %s: %s", api->name, op,
                         batched ? "ln_out is for gemm only"
                                 : "this backend does not layer-normalize A (ln_out)");
    if (g->trans_a || g->lda != g->k)
        return clf_error(CLF_ERR_INPUT,
                         "%s: %s: ln_out needs A not transposed, its rows k apart (lda %d, k %d)",
                         api->name, op, g->lda, g->k);
    clf_status st = clf_check_ln_shape(api->name, op, g->m, g->k, g->ln_style);
    if (st != CLF_OK)
        return st;
    const operand ln[] = {required("ln_out", g->ln_out, (uint64_t)g->m * (uint64_t)g->k),
                          required("ln_alpha", g->ln_alpha, (uint64_t)g->k),
                          required("ln_beta", g->ln_beta, (uint64_t)g->k)};
    if ((st = ops_check_operands(api, be, op, ln, COUNT(ln))) != CLF_OK)
        return st;
    const operand others[] = {abcb[0], abcb[1], abcb[2], abcb[3], ln[1], ln[2]};
    return ops_check_apart(api, op, ln, 1, others, COUNT(others), "");
}

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
    clf_status st = ops_check_operands(api, be, op, operands + skip, COUNT(operands) - skip);
    if (st == CLF_OK)
        st = clf_check_gemm_overlap(api->name, op, g, batched);
    if (st == CLF_OK && (g->ln_out.buf || g->ln_alpha.buf || g->ln_beta.buf))
        st = check_gemm_ln(api, be, op, g, batched, operands);
    return st;
}

clf_status clf_op_gemm(const clf_backend_api *api, clf_backend *be, const clf_gemm_args *a)
{
    int empty = 0;
    clf_status st = ops_check_entry(api, "gemm", api->gemm != NULL, a);
    if (st == CLF_OK)
        st = check_gemm(api, be, "gemm", a, 0, &empty);
    return st != CLF_OK || empty ? st : api->gemm(be, a);
}

clf_status clf_op_gemm_strided_batched(const clf_backend_api *api, clf_backend *be,
                                       const clf_gemm_args *a)
{
    const char *op = "gemm_strided_batched";
    int empty = 0;
    clf_status st = ops_check_entry(api, op, api->gemm_strided_batched != NULL, a);
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
    if ((st = ops_check_operands(api, be, op, list, 6)) != CLF_OK)
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
    clf_status st = ops_check_entry(api, "layernorm", api->layernorm != NULL, a);
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
    const clf_status st = ops_check_entry(api, op, api->layernorm_backward != NULL, a);
    if (st != CLF_OK)
        return st;
    const clf_ptr p[6] = {a->dx, a->dy, a->x, a->alpha, a->dalpha, a->dbeta};
    const clf_status ck = check_ln(api, be, op, a->rows, a->cols, a->style, p, 1);
    return ck != CLF_OK || a->rows == 0 ? ck : api->layernorm_backward(be, a);
}

/* ---- attention ---- */

/* The spans of q, k, v and out (elements; out's layout is also dout's) and key_mask. */
typedef struct attn_extent {
    uint64_t q, k, v, out, key_mask, kv_rows;
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
    /* with a row table, keys and values span its kv_entries entries instead of batch */
    uint64_t entries = B;
    e->kv_rows = 0;
    if (f->kv_rows.buf) {
        if (f->kv_entries <= 0 || f->kv_rows_ld < f->kv_len)
            return clf_error(CLF_ERR_INPUT,
                             "%s: %s: kv_rows: kv_entries=%d must be positive and kv_rows_ld=%d "
                             "at least kv_len=%d",
                             api->name, op, f->kv_entries, f->kv_rows_ld, f->kv_len);
        entries = (uint64_t)f->kv_entries;
        e->kv_rows = clf_span_elems(1, Tk, (uint64_t)f->kv_rows_ld, B, (uint64_t)f->kv_rows_ld);
    }
    e->q = clf_span_elems(Tq, width, (uint64_t)f->q_ld, B, f->q_bstride);
    e->k = clf_span_elems(Tk, width, (uint64_t)f->k_ld, entries, f->kv_bstride);
    e->v = clf_span_elems(Tk, width, (uint64_t)f->v_ld, entries, f->kv_bstride);
    e->out = clf_span_elems(Tq, width, (uint64_t)f->out_ld, B, f->out_bstride);
    e->key_mask = clf_span_elems(1, Tk, Tk, B, f->key_mask_stride);
    return CLF_OK;
}

/* Row `row` of an F32 operand with rows ld apart; an offset past any buffer (and so
 * refused by the bounds check) when it does not fit. */
static clf_ptr row_of(clf_ptr p, int row, int ld)
{
    const uint64_t elems = (uint64_t)row * (uint64_t)ld;
    p.off = elems > (SIZE_MAX - p.off) / 4 ? SIZE_MAX : p.off + 4 * (size_t)elems;
    return p;
}

/* The append's own rules (clf_attention_args.k_new): both rows given, one query, a row
 * index >= 0, a row stride that holds a row, a backend that appends. */
static clf_status check_append(const clf_backend_api *api, clf_backend *be, const char *op,
                               const clf_attention_args *a)
{
    if (!api->supports(be, CLF_OP_ATTENTION_APPEND))
        return clf_error(CLF_ERR_UNSUPPORTED,
                         "%s: %s: this backend does not append keys and values (k_new, v_new)",
                         api->name, op);
    if (!a->k_new.buf || !a->v_new.buf)
        return clf_error(CLF_ERR_INPUT, "%s: %s: k_new and v_new are appended together", api->name,
                         op);
    if (a->q_len != 1 || a->new_pos < 0 || (int64_t)a->new_ld < (int64_t)a->heads * a->head_dim)
        return clf_error(CLF_ERR_INPUT,
                         "%s: %s: append needs q_len = 1 (it is %d), new_pos >= 0 (it is %d) and "
                         "new_ld >= heads * head_dim (%d)",
                         api->name, op, a->q_len, a->new_pos, a->new_ld);
    return CLF_OK;
}

/* pos_add (ABI 10): a backend that reads it, a bound max >= 0 that keeps each of the n
 * positions it moves an int, the I32 itself inside its buffer. */
static clf_status check_pos_add(const clf_backend_api *api, clf_backend *be, const char *op,
                                clf_ptr pos_add, int max, const int *moved, int n)
{
    if (!api->supports(be, CLF_OP_DEVICE_POS))
        return clf_error(CLF_ERR_UNSUPPORTED,
                         "%s: %s: this backend does not read positions on the device (pos_add)",
                         api->name, op);
    int fits = max >= 0;
    for (int i = 0; i < n && fits; i++)
        fits = moved[i] <= INT_MAX - max;
    if (!fits)
        return clf_error(CLF_ERR_INPUT,
                         "%s: %s: pos_add_max = %d must be >= 0 and keep every position an int",
                         api->name, op, max);
    return ops_check_operands(api, be, op, (const operand[]){required("pos_add", pos_add, 1)}, 1);
}

clf_status clf_op_attention(const clf_backend_api *api, clf_backend *be,
                            const clf_attention_args *in)
{
    const char *op = "attention";
    attn_extent e = {0};
    clf_status st = ops_check_entry(api, op, api->attention != NULL, in);
    if (st != CLF_OK)
        return st;
    /* with pos_add, the largest reach: every check below sees p = pos_add_max */
    clf_attention_args w = *in;
    const clf_attention_args *a = &w;
    const int shift = in->pos_add.buf ? in->pos_add_max : 0;
    if (in->pos_add.buf) {
        const int moved[] = {in->kv_len, in->q_pos0, in->new_pos};
        if ((st = check_pos_add(api, be, op, in->pos_add, shift, moved, 3)) != CLF_OK)
            return st;
        if (in->probs.buf || in->dropout_p != 0.0f)
            return clf_error(CLF_ERR_INPUT,
                             "%s: %s: pos_add is for an op without probs and dropout", api->name,
                             op);
        w.kv_len += shift, w.q_pos0 += shift, w.new_pos += shift;
    }
    if ((st = check_attention_shape(api, op, a, &e)) != CLF_OK)
        return st;
    if (a->kv_rows.buf && !api->supports(be, CLF_OP_ATTENTION_KV_ROWS))
        return clf_error(CLF_ERR_UNSUPPORTED,
                         "%s: %s: this backend does not read key/value rows through a table "
                         "(kv_rows)",
                         api->name, op);
    const int append = a->k_new.buf || a->v_new.buf;
    if (append && (st = check_append(api, be, op, in)) != CLF_OK)
        return st;
    if (a->batch == 0 || a->q_len == 0)
        return st;
    /* ints: no overflow in 64 bits */
    const uint64_t np =
        (uint64_t)a->batch * (uint64_t)a->heads * (uint64_t)a->q_len * (uint64_t)a->kv_len;
    const uint64_t width = (uint64_t)a->heads * (uint64_t)a->head_dim,
                   nn = clf_span_elems((uint64_t)a->batch, width, (uint64_t)a->new_ld, 1, 0),
                   rows = clf_span_elems((uint64_t)a->batch, width, a->kv_bstride, 1, 0);
    /* where the appended rows are written: row new_pos (.. new_pos + pos_add_max) of entries
     * 0..batch-1 */
    const clf_ptr none = {0};
    const clf_ptr k_rows = row_of(a->k, in->new_pos, a->k_ld),
                  v_rows = row_of(a->v, in->new_pos, a->v_ld);
    const uint64_t k_reach = clf_span_elems((uint64_t)shift + 1, rows, (uint64_t)a->k_ld, 1, 0),
                   v_reach = clf_span_elems((uint64_t)shift + 1, rows, (uint64_t)a->v_ld, 1, 0);
    const operand operands[] = {required("q", a->q, e.q),
                                required("k", a->k, e.k),
                                required("v", a->v, e.v),
                                required("out", a->out, e.out),
                                optional("key_mask", a->key_mask, e.key_mask),
                                optional("probs", a->probs, np),
                                optional("kv_rows", a->kv_rows, e.kv_rows),
                                optional("k_new", a->k_new, nn),
                                optional("v_new", a->v_new, nn),
                                optional("k's appended rows", append ? k_rows : none, k_reach),
                                optional("v's appended rows", append ? v_rows : none, v_reach)};
    if ((st = ops_check_operands(api, be, op, operands, COUNT(operands))) != CLF_OK)
        return st;
    /* the appended rows are read while k and v are written */
    if (append && (st = ops_check_apart(api, op, operands + 9, 2, operands + 7, 2, "")) != CLF_OK)
        return st;
    return api->attention(be, in);
}

clf_status clf_op_attention_backward(const clf_backend_api *api, clf_backend *be,
                                     const clf_attention_backward_args *a)
{
    const char *op = "attention_backward";
    attn_extent e = {0};
    clf_status st = ops_check_entry(api, op, api->attention_backward != NULL, a);
    /* q_len = 0 is not empty: it zeroes dk and dv */
    if (st != CLF_OK || (st = check_attention_shape(api, op, &a->fwd, &e)) != CLF_OK)
        return st;
    if (a->fwd.kv_rows.buf || a->fwd.k_new.buf || a->fwd.v_new.buf ||
        a->fwd.pos_add.buf) /* decoding only */
        return clf_error(CLF_ERR_INPUT, "%s: %s: %s is for the forward op only", api->name, op,
                         a->fwd.kv_rows.buf   ? "kv_rows"
                         : a->fwd.pos_add.buf ? "pos_add"
                                              : "k_new/v_new");
    if (a->fwd.batch == 0)
        return st;
    const clf_attention_args *f = &a->fwd;
    const operand operands[] = {
        required("q", f->q, e.q),   required("k", f->k, e.k),
        required("v", f->v, e.v),   required("dout", a->dout, e.out),
        required("dq", a->dq, e.q), required("dk", a->dk, e.k),
        required("dv", a->dv, e.v), optional("key_mask", f->key_mask, e.key_mask)};
    if ((st = ops_check_operands(api, be, op, operands, COUNT(operands))) != CLF_OK)
        return st;
    /* the gradients (dq, dk, dv) are written while the inputs (q, k, v, dout) are still read */
    if ((st = ops_check_apart(api, op, operands + 4, 3, operands, 4, "the input ")) != CLF_OK)
        return st;
    return api->attention_backward(be, a);
}

/* ---- embedding, elementwise and row ops ---- */

clf_status clf_op_embed(const clf_backend_api *api, clf_backend *be, const clf_embed_args *a)
{
    const char *op = "embed";
    clf_status st = ops_check_entry(api, op, api->embed != NULL, a);
    if (st != CLF_OK)
        return st;
    if (a->rows < 0 || a->dim <= 0 || a->vocab <= 0 || a->seq_len <= 0 || a->pos0 < 0)
        return clf_error(CLF_ERR_INPUT,
                         "%s: %s: bad shape rows=%d dim=%d vocab=%d seq_len=%d pos0=%d", api->name,
                         op, a->rows, a->dim, a->vocab, a->seq_len, a->pos0);
    if (a->pos_add.buf &&
        (st = check_pos_add(api, be, op, a->pos_add, a->pos_add_max, &a->pos0, 1)) != CLF_OK)
        return st;
    if (a->rows == 0)
        return CLF_OK;
    const uint64_t rows = (uint64_t)a->rows, dim = (uint64_t)a->dim;
    /* pe rows pos0 .. pos0 + min(rows, seq_len) - 1, with pos_add up to pos_add_max more */
    const uint64_t pe_rows = (uint64_t)a->pos0 + (a->pos_add.buf ? (uint64_t)a->pos_add_max : 0) +
                             (a->rows < a->seq_len ? rows : (uint64_t)a->seq_len);
    const operand operands[] = {required("out", a->out, rows * dim), required("ids", a->ids, rows),
                                required("table", a->table, (uint64_t)a->vocab * dim),
                                optional("pe", a->pe, pe_rows * dim)};
    st = ops_check_operands(api, be, op, operands, COUNT(operands));
    return st != CLF_OK ? st : api->embed(be, a);
}

clf_status clf_op_add(const clf_backend_api *api, clf_backend *be, clf_ptr out, clf_ptr a,
                      clf_ptr b, size_t n)
{
    const operand list[] = {required("out", out, n), required("a", a, n), required("b", b, n)};
    int run;
    clf_status st =
        ops_check_elementwise(api, be, "add", api->add != NULL, list, COUNT(list), 1, &run);
    return st != CLF_OK || !run ? st : api->add(be, out, a, b, n);
}

/* A row op: the table has it, the shape and (rows > 0, else *run = 0) out [rows,
 * out_cols] and x [rows, cols], out the same span as x (softmax in place) or apart. */
static clf_status check_row_op(const clf_backend_api *api, clf_backend *be, const char *op,
                               int present, clf_ptr out, int out_cols, clf_ptr x, int rows,
                               int cols, int *run)
{
    *run = 0;
    clf_status st = ops_check_present(api, op, present);
    if (st != CLF_OK || (st = ops_check_rows(api, op, rows, cols)) != CLF_OK || rows == 0)
        return st;
    const operand list[] = {required("out", out, (uint64_t)rows * (uint64_t)out_cols),
                            required("x", x, (uint64_t)rows * (uint64_t)cols)};
    if ((st = ops_check_operands(api, be, op, list, COUNT(list))) != CLF_OK)
        return st;
    if (clf_ptr_overlap(out, 4 * list[0].elems, x, 4 * list[1].elems) &&
        !(out.off == x.off && out_cols == cols))
        return clf_error(CLF_ERR_INPUT, "%s: %s: 'out' %s 'x'", api->name, op,
                         out_cols == cols ? "partly overlaps" : "may not overlap");
    *run = 1;
    return CLF_OK;
}

clf_status clf_op_softmax(const clf_backend_api *api, clf_backend *be, clf_ptr out, clf_ptr x,
                          int rows, int cols, int log)
{
    int run;
    const clf_status st = check_row_op(api, be, log ? "log_softmax" : "softmax",
                                       api->softmax != NULL, out, cols, x, rows, cols, &run);
    return st != CLF_OK || !run ? st : api->softmax(be, out, x, rows, cols, log);
}

clf_status clf_op_argmax(const clf_backend_api *api, clf_backend *be, clf_ptr out, clf_ptr x,
                         int rows, int cols)
{
    int run;
    const clf_status st =
        check_row_op(api, be, "argmax", api->argmax != NULL, out, 1, x, rows, cols, &run);
    return st != CLF_OK || !run ? st : api->argmax(be, out, x, rows, cols);
}

clf_status clf_op_topk(const clf_backend_api *api, clf_backend *be, const clf_topk_args *a)
{
    const char *op = "topk";
    clf_status st = ops_check_entry(api, op, api->topk != NULL, a);
    if (st != CLF_OK || (st = ops_check_rows(api, op, a->rows, a->cols)) != CLF_OK)
        return st;
    if (a->k < 1 || a->k > a->cols || a->k > CLF_TOPK_MAX)
        return clf_error(CLF_ERR_INPUT, "%s: %s: k=%d outside [1, %d] (cols=%d, at most %d)",
                         api->name, op, a->k, a->cols < CLF_TOPK_MAX ? a->cols : CLF_TOPK_MAX,
                         a->cols, CLF_TOPK_MAX);
    if (a->log_softmax && !api->supports(be, CLF_OP_TOPK_LOG_SOFTMAX))
        return clf_error(CLF_ERR_UNSUPPORTED, "%s: %s: log_softmax is not supported", api->name,
                         op);
    if (a->rows == 0)
        return CLF_OK;
    const uint64_t rows = (uint64_t)a->rows, out = rows * (uint64_t)a->k;
    const operand list[] = {required("val", a->val, out), required("idx", a->idx, out),
                            required("x", a->x, rows * (uint64_t)a->cols),
                            optional("base", a->base, rows)};
    if ((st = ops_check_operands(api, be, op, list, COUNT(list))) != CLF_OK)
        return st;
    /* the outputs are written while the inputs are still read */
    for (int i = 0; i < 2; i++)
        for (int j = i + 1; j < (int)COUNT(list); j++)
            if (clf_ptr_overlap(list[i].p, 4 * list[i].elems, list[j].p, 4 * list[j].elems))
                return clf_error(CLF_ERR_INPUT, "%s: %s: '%s' may not overlap '%s'", api->name, op,
                                 list[i].name, list[j].name);
    return api->topk(be, a);
}

clf_status clf_op_beam_choose(const clf_backend_api *api, clf_backend *be, const clf_beam_args *a)
{
    const char *op = "beam_choose";
    clf_status st = ops_check_entry(api, op, api->beam_choose != NULL, a);
    if (st != CLF_OK)
        return st;
    if (a->n < 0 || a->K < 1 || 2 * a->K > CLF_TOPK_MAX || a->top_k < 1 ||
        a->top_k > CLF_TOPK_MAX || a->n_banned < 0 || a->ld < 1 || a->pos < 0)
        return clf_error(CLF_ERR_INPUT,
                         "%s: %s: bad shape n=%d K=%d top_k=%d n_banned=%d ld=%d pos=%d (1 <= K, "
                         "2K <= %d, 1 <= top_k <= %d)",
                         api->name, op, a->n, a->K, a->top_k, a->n_banned, a->ld, a->pos,
                         CLF_TOPK_MAX, CLF_TOPK_MAX);
    if (a->n == 0)
        return CLF_OK;
    const uint64_t rows = (uint64_t)a->n * (uint64_t)a->K, top = rows * (uint64_t)a->top_k,
                   table = rows * (uint64_t)a->ld;
    const operand out[] = {required("choices", a->choices, rows * 6), required("ids", a->ids, rows),
                           required("rows_out", a->rows_out, table)};
    const operand in[] = {required("val", a->val, top),
                          required("idx", a->idx, top),
                          required("rows_in", a->rows_in, table),
                          required("base", a->base, rows),
                          {"banned", a->banned, (uint64_t)a->n_banned, 4, a->n_banned > 0}};
    if ((st = ops_check_operands(api, be, op, out, COUNT(out))) != CLF_OK ||
        (st = ops_check_operands(api, be, op, in, COUNT(in))) != CLF_OK ||
        (st = ops_check_apart(api, op, out, COUNT(out), in, COUNT(in), "")) != CLF_OK ||
        (st = ops_check_apart(api, op, out, 1, out + 1, 2, "")) != CLF_OK ||
        (st = ops_check_apart(api, op, out + 1, 1, out + 2, 1, "")) != CLF_OK ||
        (st = ops_check_apart(api, op, in + 3, 1, in, 3, "")) != CLF_OK)
        return st;
    return api->beam_choose(be, a);
}

/* ---- plugin ops ---- */

/* The plugin op of an entry: given, of a known kind and of the kind the entry takes (a
 * norm when want_norm); label then gets "<entry> '<op name>'" for the later messages.
 * Whether the backend has a form of it is the backend's to say (plugin_prepare). */
static clf_status check_plugin_op(const clf_backend_api *api, const char *entry,
                                  const clf_plugin_op *op, int want_norm, char *label,
                                  size_t label_size)
{
    if (!op || !op->name)
        return clf_error(CLF_ERR_INPUT, "%s: %s: no plugin op (or an op without a name)", api->name,
                         entry);
    if (op->kind != CLF_PLUGIN_ACTIVATION && op->kind != CLF_PLUGIN_GATED_ACTIVATION &&
        op->kind != CLF_PLUGIN_NORM)
        return clf_error(CLF_ERR_INPUT, "%s: %s: plugin op '%s' has an unknown kind %d", api->name,
                         entry, op->name, (int)op->kind);
    return clf_plugin_check_entry_kind(api->name, entry, op, want_norm, label, label_size);
}

clf_status clf_op_activation(const clf_backend_api *api, clf_backend *be,
                             const clf_activation_args *a)
{
    const char *entry = "activation";
    char op[96];
    clf_status st = ops_check_entry(api, entry, api->activation != NULL, a);
    if (st != CLF_OK || (st = check_plugin_op(api, entry, a->op, 0, op, sizeof op)) != CLF_OK ||
        (st = clf_plugin_check_gates(api->name, op, a->op, 1, a->gate.buf != NULL)) != CLF_OK ||
        a->n == 0)
        return st;
    const operand list[] = {required("out", a->out, a->n), required("x", a->x, a->n),
                            optional("gate", a->gate, a->n)};
    if ((st = ops_check_operands(api, be, op, list, COUNT(list))) == CLF_OK &&
        (st = clf_check_activation_overlap(api->name, op, a)) == CLF_OK)
        st = api->activation(be, a);
    return st;
}

clf_status clf_op_activation_backward(const clf_backend_api *api, clf_backend *be,
                                      const clf_activation_backward_args *a)
{
    const char *entry = "activation_backward";
    char op[96];
    clf_status st = ops_check_entry(api, entry, api->activation_backward != NULL, a);
    if (st != CLF_OK || (st = check_plugin_op(api, entry, a->op, 0, op, sizeof op)) != CLF_OK ||
        (st = clf_plugin_check_gates(api->name, op, a->op, 2,
                                     (a->gate.buf != NULL) + (a->dgate.buf != NULL))) != CLF_OK ||
        a->n == 0)
        return st;
    const uint64_t n = a->n;
    const operand list[] = {required("dx", a->dx, n), required("dy", a->dy, n),
                            required("x", a->x, n), optional("gate", a->gate, n),
                            optional("dgate", a->dgate, n)};
    if ((st = ops_check_operands(api, be, op, list, COUNT(list))) == CLF_OK &&
        (st = clf_check_activation_backward_overlap(api->name, op, a)) == CLF_OK)
        st = api->activation_backward(be, a);
    return st;
}

/* A plugin norm or its backward: the op and the shape, then (rows > 0, else *run = 0) the
 * operands p in the order of the args struct (out, x, alpha, beta or dx, dy, x, alpha,
 * dalpha, dbeta: per_row of [rows, cols], then one required [cols], the rest optional), and
 * that the first (the output) overlaps none of the next three ("<why>" after the op). */
static clf_status check_norm(const clf_backend_api *api, clf_backend *be, const char *entry,
                             const clf_plugin_op *norm, int rows, int cols,
                             const char *const *names, const clf_ptr *p, int count, int per_row,
                             const char *why, int *run)
{
    char op[96];
    *run = 0;
    clf_status st = check_plugin_op(api, entry, norm, 1, op, sizeof op);
    if (st != CLF_OK || (st = ops_check_rows(api, op, rows, cols)) != CLF_OK || rows == 0)
        return st;
    const uint64_t n = (uint64_t)rows * (uint64_t)cols, c = (uint64_t)cols;
    operand list[6];
    for (int i = 0; i < count; i++)
        list[i] = (operand){names[i], p[i], i < per_row ? n : c, 4, i <= per_row};
    if ((st = ops_check_operands(api, be, op, list, (size_t)count)) != CLF_OK)
        return st;
    /* the output is written while rows of the next three (x, alpha, beta or dy, x, alpha)
     * are still read */
    for (int i = 1; i < 4; i++)
        if (clf_ptr_overlap(p[0], 4 * n, p[i], 4 * list[i].elems))
            return clf_error(CLF_ERR_INPUT, "%s: %s: %s", api->name, op, why);
    *run = 1;
    return CLF_OK;
}

clf_status clf_op_norm(const clf_backend_api *api, clf_backend *be, const clf_norm_args *a)
{
    static const char *const names[] = {"out", "x", "alpha", "beta"};
    int run;
    clf_status st = ops_check_entry(api, "norm", api->norm != NULL, a);
    if (st == CLF_OK &&
        (st = check_norm(api, be, "norm", a->op, a->rows, a->cols, names,
                         (const clf_ptr[]){a->out, a->x, a->alpha, a->beta}, 4, 2,
                         "out may not overlap x, alpha or beta", &run)) == CLF_OK &&
        run)
        st = api->norm(be, a);
    return st;
}

clf_status clf_op_norm_backward(const clf_backend_api *api, clf_backend *be,
                                const clf_norm_backward_args *a)
{
    static const char *const names[] = {"dx", "dy", "x", "alpha", "dalpha", "dbeta"};
    const char *entry = "norm_backward";
    int run;
    clf_status st = ops_check_entry(api, entry, api->norm_backward != NULL, a);
    if (st != CLF_OK)
        return st;
    const clf_ptr p[] = {a->dx, a->dy, a->x, a->alpha, a->dalpha, a->dbeta};
    st = check_norm(api, be, entry, a->op, a->rows, a->cols, names, p, 6, 3,
                    "dx may not overlap dy, x or alpha", &run);
    return st != CLF_OK || !run ? st : api->norm_backward(be, a);
}

/* ---- memory ---- */

/* An operand of bytes bytes at any offset (upload, download, copy). */
static operand bytes_at(const char *name, clf_ptr p, uint64_t bytes)
{
    return (operand){name, p, bytes, 1, 1};
}

clf_status clf_op_upload(const clf_backend_api *api, clf_backend *be, clf_ptr dst, const void *src,
                         size_t bytes)
{
    const operand o = bytes_at("dst", dst, bytes);
    const clf_status st = ops_check_operands(api, be, "upload", &o, 1);
    return st != CLF_OK || bytes == 0 ? st : api->upload(be, dst, src, bytes);
}

clf_status clf_op_download(const clf_backend_api *api, clf_backend *be, void *dst, clf_ptr src,
                           size_t bytes)
{
    const operand o = bytes_at("src", src, bytes);
    const clf_status st = ops_check_operands(api, be, "download", &o, 1);
    return st != CLF_OK || bytes == 0 ? st : api->download(be, dst, src, bytes);
}

clf_status clf_op_discard(const clf_backend_api *api, clf_backend *be, clf_ptr p, size_t bytes,
                          size_t *freed)
{
    *freed = 0;
    const operand o = bytes_at("p", p, bytes);
    const clf_status st = ops_check_operands(api, be, "discard", &o, 1);
    return st != CLF_OK || bytes == 0 || !api->discard ? st : api->discard(be, p, bytes, freed);
}

clf_status clf_op_copy(const clf_backend_api *api, clf_backend *be, clf_ptr dst, clf_ptr src,
                       size_t bytes)
{
    const operand list[] = {bytes_at("dst", dst, bytes), bytes_at("src", src, bytes)};
    clf_status st = ops_check_present(api, "copy", api->copy != NULL);
    if (st == CLF_OK && (st = ops_check_operands(api, be, "copy", list, COUNT(list))) == CLF_OK &&
        bytes > 0)
        st = api->copy(be, dst, src, bytes);
    return st;
}

/* ---- capture and replay ---- */

static clf_status check_capture(const clf_backend_api *api, clf_backend *be, const char *op)
{
    return api->supports(be, CLF_OP_CAPTURE) && api->capture_begin && api->capture_end &&
                   api->replay && api->capture_free
               ? CLF_OK
               : clf_error(CLF_ERR_UNSUPPORTED, "%s: %s: this backend does not capture ops",
                           api->name, op);
}

clf_status clf_op_capture_begin(const clf_backend_api *api, clf_backend *be)
{
    clf_status st = check_capture(api, be, "capture_begin");
    return st != CLF_OK ? st : api->capture_begin(be);
}

clf_status clf_op_capture_end(const clf_backend_api *api, clf_backend *be, clf_capture **out)
{
    clf_status st = check_capture(api, be, "capture_end");
    if (out)
        *out = NULL;
    return st != CLF_OK ? st : api->capture_end(be, out);
}

clf_status clf_op_replay(const clf_backend_api *api, clf_backend *be, clf_capture *c)
{
    clf_status st = c ? check_capture(api, be, "replay")
                      : clf_error(CLF_ERR_INPUT, "%s: replay: no capture", api->name);
    return st != CLF_OK ? st : api->replay(be, c);
}

void clf_op_capture_free(const clf_backend_api *api, clf_backend *be, clf_capture *c)
{
    if (c && api->capture_free)
        api->capture_free(be, c);
}
