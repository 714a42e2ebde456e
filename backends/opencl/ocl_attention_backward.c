/* ocl_attention_backward.c - the backward of the attention op (see
 * clf_attention_backward_args and kernels/attention_backward.cl).
 *
 * Two kernels on the in-order queue: attention_backward_query (one work-group per query,
 * head and batch: the softmax statistics of the row, D_i and dq) leaves (m, l, D) per
 * query row in the backend's scratch buffer; attention_backward_key (one work-group per
 * key, head and batch) reads them and writes dk and dv. No atomics, fixed summation
 * orders: the same bits run after run. Dropout on the probabilities (fwd.dropout_p) redraws
 * the forward's mask from fwd.dropout_seed in both kernels. */
#include "ocl_internal.h"

/* Shapes, row strides and the bounds of every operand (dout has fwd.out's layout, dq, dk
 * and dv those of q, k and v). */
static clf_status check_args(clf_backend *be, const char *op, const clf_attention_backward_args *a)
{
    const clf_attention_args *f = &a->fwd;
    clf_status st;
    if ((st = ocl_check_attention_dropout(op, f)) != CLF_OK)
        return st;
    if (f->batch < 0 || f->heads <= 0 || f->q_len < 0 || f->kv_len <= 0 || f->head_dim <= 0)
        return clf_error(CLF_ERR_INPUT,
                         "opencl: %s: bad shape batch=%d heads=%d q_len=%d kv_len=%d "
                         "head_dim=%d",
                         op, f->batch, f->heads, f->q_len, f->kv_len, f->head_dim);
    uint64_t B = (uint64_t)f->batch, Tq = (uint64_t)f->q_len, Tk = (uint64_t)f->kv_len,
             width = (uint64_t)f->heads * (uint64_t)f->head_dim;
    if (f->q_ld < 0 || f->k_ld < 0 || f->v_ld < 0 || f->out_ld < 0 || (uint64_t)f->q_ld < width ||
        (uint64_t)f->k_ld < width || (uint64_t)f->v_ld < width || (uint64_t)f->out_ld < width)
        return clf_error(CLF_ERR_INPUT,
                         "opencl: %s: row strides q_ld=%d k_ld=%d v_ld=%d out_ld=%d must be at "
                         "least heads * head_dim = %llu",
                         op, f->q_ld, f->k_ld, f->v_ld, f->out_ld, (unsigned long long)width);
    uint64_t nq = ocl_extent(Tq, width, (uint64_t)f->q_ld, B, f->q_bstride);
    uint64_t nk = ocl_extent(Tk, width, (uint64_t)f->k_ld, B, f->kv_bstride);
    uint64_t nv = ocl_extent(Tk, width, (uint64_t)f->v_ld, B, f->kv_bstride);
    uint64_t nout = ocl_extent(Tq, width, (uint64_t)f->out_ld, B, f->out_bstride);
    if ((st = ocl_check_operand(be, op, "q", f->q, nq, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "k", f->k, nk, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "v", f->v, nv, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "dout", a->dout, nout, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "dq", a->dq, nq, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "dk", a->dk, nk, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "dv", a->dv, nv, 1)) != CLF_OK ||
        (st = ocl_check_operand(be, op, "key_mask", f->key_mask,
                                ocl_extent(1, Tk, Tk, B, f->key_mask_stride), 0)) != CLF_OK)
        return st;
    /* the kernels write the gradients while other work-groups still read the inputs */
    const clf_ptr outs[3] = {a->dq, a->dk, a->dv}, ins[4] = {f->q, f->k, f->v, a->dout};
    const uint64_t out_bytes[3] = {4 * nq, 4 * nk, 4 * nv},
                   in_bytes[4] = {4 * nq, 4 * nk, 4 * nv, 4 * nout};
    static const char *const out_names[3] = {"dq", "dk", "dv"};
    static const char *const in_names[4] = {"q", "k", "v", "dout"};
    for (int o = 0; o < 3; o++)
        for (int i = 0; i < 4; i++)
            if (ocl_overlap(outs[o], out_bytes[o], ins[i], in_bytes[i]))
                return clf_error(CLF_ERR_INPUT, "opencl: %s: '%s' overlaps the input '%s'", op,
                                 out_names[o], in_names[i]);
    return CLF_OK;
}

/* Local memory of a kernel: vectors [head_dim] and tiles [wg], floats. */
static clf_status check_local(clf_backend *be, const char *op, int head_dim, int vectors, size_t wg,
                              int tiles)
{
    uint64_t bytes = ((uint64_t)vectors * (uint64_t)head_dim + (uint64_t)tiles * wg) * 4;
    if (bytes > be->local_mem)
        return clf_error(CLF_ERR_INPUT,
                         "opencl: %s: head_dim %d needs %llu bytes of local memory, the device "
                         "has %llu",
                         op, head_dim, (unsigned long long)bytes,
                         (unsigned long long)be->local_mem);
    return CLF_OK;
}

clf_status ocl_attention_backward(clf_backend *be, const clf_attention_backward_args *a)
{
    const char *op = "attention_backward";
    clf_status st;
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: no arguments", op);
    const clf_attention_args *f = &a->fwd;
    if ((st = check_args(be, op, a)) != CLF_OK || f->batch == 0)
        return st;
    const size_t wq = be->wg[OCL_K_ATTENTION_BACKWARD_QUERY],
                 wk = be->wg[OCL_K_ATTENTION_BACKWARD_KEY];
    if ((st = check_local(be, op, f->head_dim, 3, wq, 2)) != CLF_OK ||
        (st = check_local(be, op, f->head_dim, 4, wk, 2)) != CLF_OK)
        return st;
    /* (m, l, D) per query row; ints, so no overflow in 64 bits */
    uint64_t stats_bytes = (uint64_t)f->batch * (uint64_t)f->heads * (uint64_t)f->q_len * 3 * 4;
    cl_mem stats = NULL;
    if ((st = ocl_scratch(be, op, (size_t)stats_bytes, &stats)) != CLF_OK)
        return st;

    cl_mem q = ocl_mem(f->q), k = ocl_mem(f->k), v = ocl_mem(f->v), dout = ocl_mem(a->dout),
           mask = ocl_mem(f->key_mask), dq = ocl_mem(a->dq), dk = ocl_mem(a->dk),
           dv = ocl_mem(a->dv);
    cl_ulong q_off = ocl_elems(f->q), q_ld = (cl_ulong)f->q_ld, q_bs = f->q_bstride,
             k_off = ocl_elems(f->k), k_ld = (cl_ulong)f->k_ld, v_off = ocl_elems(f->v),
             v_ld = (cl_ulong)f->v_ld, kv_bs = f->kv_bstride, do_off = ocl_elems(a->dout),
             do_ld = (cl_ulong)f->out_ld, do_bs = f->out_bstride, mask_off = ocl_elems(f->key_mask),
             mask_stride = f->key_mask_stride, dq_off = ocl_elems(a->dq), dk_off = ocl_elems(a->dk),
             dv_off = ocl_elems(a->dv);
    cl_int has_mask = f->key_mask.buf != NULL, q_len = f->q_len, kv_len = f->kv_len,
           hd = f->head_dim, causal = f->causal != 0, q_pos0 = f->q_pos0;
    cl_float scale = f->scale;
    ocl_attn_dropout dr = ocl_attention_dropout(f);
    const size_t hd_bytes = (size_t)f->head_dim * sizeof(cl_float);

    /* the arguments both kernels share; then the length of the other axis */
    enum { NGEOM = 19 };
    const ocl_arg geom[NGEOM] = {
        {sizeof q, &q},
        {sizeof q_off, &q_off},
        {sizeof q_ld, &q_ld},
        {sizeof q_bs, &q_bs},
        {sizeof k, &k},
        {sizeof k_off, &k_off},
        {sizeof k_ld, &k_ld},
        {sizeof v, &v},
        {sizeof v_off, &v_off},
        {sizeof v_ld, &v_ld},
        {sizeof kv_bs, &kv_bs},
        {sizeof dout, &dout},
        {sizeof do_off, &do_off},
        {sizeof do_ld, &do_ld},
        {sizeof do_bs, &do_bs},
        {sizeof mask, &mask},
        {sizeof mask_off, &mask_off},
        {sizeof mask_stride, &mask_stride},
        {sizeof has_mask, &has_mask},
    };
    ocl_arg args[NGEOM + 19];
    for (int i = 0; i < NGEOM; i++)
        args[i] = geom[i];

    /* pass 1, skipped without queries (a global size of 0 is an error in OpenCL 1.2) */
    if (f->q_len > 0) {
        int n = NGEOM;
        args[n++] = (ocl_arg){sizeof kv_len, &kv_len};
        args[n++] = (ocl_arg){sizeof hd, &hd};
        args[n++] = (ocl_arg){sizeof causal, &causal};
        args[n++] = (ocl_arg){sizeof q_pos0, &q_pos0};
        args[n++] = (ocl_arg){sizeof scale, &scale};
        args[n++] = (ocl_arg){sizeof dr.seed, &dr.seed};
        args[n++] = (ocl_arg){sizeof dr.threshold, &dr.threshold};
        args[n++] = (ocl_arg){sizeof dr.scale, &dr.scale};
        args[n++] = (ocl_arg){sizeof stats, &stats};
        args[n++] = (ocl_arg){sizeof dq, &dq};
        args[n++] = (ocl_arg){sizeof dq_off, &dq_off};
        args[n++] = (ocl_arg){hd_bytes, NULL};              /* qs */
        args[n++] = (ocl_arg){hd_bytes, NULL};              /* dos */
        args[n++] = (ocl_arg){hd_bytes, NULL};              /* acc */
        args[n++] = (ocl_arg){wq * sizeof(cl_float), NULL}; /* ds */
        args[n++] = (ocl_arg){wq * sizeof(cl_float), NULL}; /* red */
        size_t global[3] = {(size_t)f->q_len * wq, (size_t)f->heads, (size_t)f->batch};
        size_t local[3] = {wq, 1, 1};
        if ((st = ocl_launch(be, op, OCL_K_ATTENTION_BACKWARD_QUERY, args, n, 3, global, local)) !=
            CLF_OK)
            return st;
    }

    /* pass 2: with no queries it writes dk = dv = 0 */
    int n = NGEOM;
    args[n++] = (ocl_arg){sizeof q_len, &q_len};
    args[n++] = (ocl_arg){sizeof hd, &hd};
    args[n++] = (ocl_arg){sizeof causal, &causal};
    args[n++] = (ocl_arg){sizeof q_pos0, &q_pos0};
    args[n++] = (ocl_arg){sizeof scale, &scale};
    args[n++] = (ocl_arg){sizeof dr.seed, &dr.seed};
    args[n++] = (ocl_arg){sizeof dr.threshold, &dr.threshold};
    args[n++] = (ocl_arg){sizeof dr.scale, &dr.scale};
    args[n++] = (ocl_arg){sizeof stats, &stats};
    args[n++] = (ocl_arg){sizeof dk, &dk};
    args[n++] = (ocl_arg){sizeof dk_off, &dk_off};
    args[n++] = (ocl_arg){sizeof dv, &dv};
    args[n++] = (ocl_arg){sizeof dv_off, &dv_off};
    args[n++] = (ocl_arg){hd_bytes, NULL};              /* ks */
    args[n++] = (ocl_arg){hd_bytes, NULL};              /* vs */
    args[n++] = (ocl_arg){hd_bytes, NULL};              /* acck */
    args[n++] = (ocl_arg){hd_bytes, NULL};              /* accv */
    args[n++] = (ocl_arg){wk * sizeof(cl_float), NULL}; /* p */
    args[n++] = (ocl_arg){wk * sizeof(cl_float), NULL}; /* ds */
    size_t global[3] = {(size_t)f->kv_len * wk, (size_t)f->heads, (size_t)f->batch};
    size_t local[3] = {wk, 1, 1};
    return ocl_launch(be, op, OCL_K_ATTENTION_BACKWARD_KEY, args, n, 3, global, local);
}
