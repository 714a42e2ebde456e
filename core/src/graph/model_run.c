/* Running the model: the checks of a batch, uploading ids and their key masks, and the
 * forward pass with its graph cached while the shape stays. */
#include "clformer/model.h"

#include "graph/graph_private.h"

#include <stdlib.h>

/* ---------------------------------------------------------------------------------- */
/* running                                                                             */

static clf_status check_ids(const int32_t *ids, size_t n, int vocab, const char *what,
                            const char *side)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return clf_error(CLF_ERR_INPUT,
                             "%s: %s: token id %d at position %zu is outside the "
                             "vocabulary [0, %d)",
                             what, side, ids[i], i, vocab);
    return CLF_OK;
}

clf_status clf_model_check_batch(const clf_model *m, const char *what, int B, int S, int T,
                                 const int32_t *src, const int32_t *tgt, const int32_t *labels)
{
    const clf_model_config *c = &m->cfg;
    clf_status st;
    if (B < 1 || S < 1 || T < 1)
        return clf_error(CLF_ERR_INPUT, "%s: empty batch (batch %d, src_len %d, tgt_len %d)", what,
                         B, S, T);
    if (S > c->max_len || T > c->max_len)
        return clf_error(CLF_ERR_INPUT,
                         "%s: sequence length %d exceeds model.max_len %d (the "
                         "positional-encoding table)",
                         what, S > T ? S : T, c->max_len);
    if ((st = check_ids(src, (size_t)B * S, c->src_vocab, what, "src")) != CLF_OK ||
        (st = check_ids(tgt, (size_t)B * T, c->tgt_vocab, what, "tgt")) != CLF_OK ||
        (labels && (st = check_ids(labels, (size_t)B * T, c->tgt_vocab, what, "labels")) != CLF_OK))
        return st;
    return CLF_OK;
}

clf_status clf_model_upload_ids(const clf_model *m, clf_ptr ids_dst, clf_ptr mask_dst,
                                const int32_t *ids, size_t n)
{
    return clf_model_upload_tgt_ids(m, ids_dst, mask_dst, ids, n, 0);
}

clf_status clf_model_upload_tgt_ids(const clf_model *m, clf_ptr ids_dst, clf_ptr mask_dst,
                                    const int32_t *ids, size_t n, int row_len)
{
    /* a decoder that starts from the pad id (Marian) must still see its first position */
    const int start_is_pad = row_len > 0 && m->cfg.decoder_start_id == m->cfg.pad_id;
    clf_status st = clf_op_upload(m->api, m->be, ids_dst, ids, n * 4);
    if (st != CLF_OK || !mask_dst.buf)
        return st;
    int32_t *mask = malloc(n * sizeof(int32_t));
    if (!mask)
        return clf_error(CLF_ERR_NOMEM, "model: out of host memory");
    for (size_t i = 0; i < n; i++)
        mask[i] = ids[i] != m->cfg.pad_id || (start_is_pad && i % (size_t)row_len == 0);
    st = clf_op_upload(m->api, m->be, mask_dst, mask, n * 4);
    free(mask);
    return st;
}

clf_status clf_model_forward(clf_model *m, const clf_forward_io *io)
{
    const clf_model_config *c = &m->cfg;
    const int B = io->batch, S = io->src_len, T = io->tgt_len;
    clf_status st;
    if ((st = clf_model_check_batch(m, "forward", B, S, T, io->src, io->tgt, NULL)) != CLF_OK)
        return st;
    if (!m->g_valid || m->g_batch != B || m->g_src != S || m->g_tgt != T) {
        clf_graph_free(&m->g);
        m->g_valid = 0;
        if ((st = clf_model_build_forward_graph(m, B, S, T, &m->g)) != CLF_OK)
            return st;
        if ((st = clf_graph_reserve_arena(&m->g, m->api, m->be, &m->arena, &m->arena_cap,
                                          "forward")) != CLF_OK)
            return st;
        m->g_valid = 1;
        m->g_batch = B, m->g_src = S, m->g_tgt = T;
    }
#define GRAPH_PTR(v) clf_graph_ptr(&m->g, m->arena, (v))
    if ((st = clf_model_upload_ids(m, GRAPH_PTR(m->v_src), GRAPH_PTR(m->v_src_mask), io->src,
                                   (size_t)B * S)) != CLF_OK ||
        (st = clf_model_upload_tgt_ids(m, GRAPH_PTR(m->v_tgt), GRAPH_PTR(m->v_tgt_mask), io->tgt,
                                       (size_t)B * T, T)) != CLF_OK)
#undef GRAPH_PTR
        return st;
    if ((st = clf_graph_run(&m->g, m->api, m->be, m->arena)) != CLF_OK)
        return clf_error_context(st, "forward");
    if (io->encoder_out &&
        (st = clf_op_download(m->api, m->be, io->encoder_out,
                              clf_graph_ptr(&m->g, m->arena, m->v_enc),
                              (size_t)B * S * c->d_model * sizeof(float))) != CLF_OK)
        return st;
    if (io->logits && (st = clf_op_download(
                           m->api, m->be, io->logits, clf_graph_ptr(&m->g, m->arena, m->v_logits),
                           (size_t)B * T * c->tgt_vocab * sizeof(float))) != CLF_OK)
        return st;
    return m->api->synchronize(m->be);
}

clf_status clf_model_rerun(clf_model *m, uint64_t op_mask)
{
    if (!m->g_valid)
        return clf_error(CLF_ERR_INTERNAL, "model: rerun before any forward");
    clf_status st = clf_graph_run_ops(&m->g, m->api, m->be, m->arena, op_mask);
    if (st != CLF_OK)
        return st;
    return m->api->synchronize(m->be);
}

const clf_graph *clf_model_last_graph(const clf_model *m)
{
    return m->g_valid ? &m->g : NULL;
}
