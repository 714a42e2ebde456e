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

clf_status ocl_attention_backward(clf_backend *be, const clf_attention_backward_args *a)
{
    const char *op = "attention_backward";
    clf_status st;
    if (!a)
        return clf_error(CLF_ERR_INPUT, "opencl: %s: no arguments", op);
    const clf_attention_args *f = &a->fwd;
    /* dropout_p, shape, strides, operands and aliasing: checked by the core (clformer/ops.h) */
    if (f->batch == 0)
        return CLF_OK;
    const size_t wq = be->wg[OCL_K_ATTENTION_BACKWARD_QUERY],
                 wk = be->wg[OCL_K_ATTENTION_BACKWARD_KEY];
    if ((st = ocl_check_attention_local(be, op, f->head_dim, 3, wq, 2)) != CLF_OK ||
        (st = ocl_check_attention_local(be, op, f->head_dim, 4, wk, 2)) != CLF_OK)
        return st;
    /* (m, l, D) per query row; ints, so no overflow in 64 bits */
    uint64_t stats_bytes = (uint64_t)f->batch * (uint64_t)f->heads * (uint64_t)f->q_len * 3 * 4;
    cl_mem stats = NULL;
    if ((st = ocl_scratch(be, op, (size_t)stats_bytes, &stats)) != CLF_OK)
        return st;
    const ocl_kval vec = ocl_kfloats((size_t)f->head_dim);

    /* pass 1, skipped without queries (a global size of 0 is an error in OpenCL 1.2) */
    if (f->q_len > 0) {
        const ocl_kval tile = ocl_kfloats(wq);
        /* stats, dq, dq_off and the local scratch: qs, dos, acc, ds, red */
        const ocl_kval tail[] = {ocl_kmem(stats), OCL_KBUF(a->dq), vec, vec, vec, tile, tile};
        if ((st = ocl_run_attention(be, op, be->kernels[OCL_K_ATTENTION_BACKWARD_QUERY], wq, f,
                                    a->dout, 0, tail, OCL_COUNT(tail))) != CLF_OK)
            return st;
    }

    /* pass 2: with no queries it writes dk = dv = 0 */
    const ocl_kval tile = ocl_kfloats(wk);
    /* stats, dk, dk_off, dv, dv_off and the local scratch: ks, vs, acck, accv, p, ds */
    const ocl_kval tail[] = {
        ocl_kmem(stats), OCL_KBUF(a->dk), OCL_KBUF(a->dv), vec, vec, vec, vec, tile, tile};
    return ocl_run_attention(be, op, be->kernels[OCL_K_ATTENTION_BACKWARD_KEY], wk, f, a->dout, 1,
                             tail, OCL_COUNT(tail));
}
