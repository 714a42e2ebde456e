/* The precision of a model's products (clf_model_set_precision; README "Precision"): with
 * BF16 on a backend that has BF16 arithmetic, a BF16 copy of the matrices the linear layers
 * multiply with, which gemm nodes bind as b_bf16 with bf16_arith set (model_build.c); and
 * the weight type (clf_model_set_weight_type: model.c's copy, then the precision's again)
 * and an inference model's creation with it. */
#include "clformer/model.h"

#include "graph/graph_private.h"
#include "numeric/numeric_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Why products run in F32 despite precision p, or "" when they do not: the backend has
 * no such arithmetic, or the weight type decides the products (int8). */
static void precision_note(const clf_model *m, clf_precision p, char *note, size_t size)
{
    const char *name = clf_precision_name(p);
    if (m->lowp_type == CLF_WEIGHT_INT8)
        snprintf(note, size, "precision %s: int8 weights multiply in int8 arithmetic", name);
    else if (p == CLF_PRECISION_BF16 && !m->api->supports(m->be, CLF_OP_GEMM_BF16_ARITH))
        snprintf(note, size,
                 "precision bf16: the %s backend has no BF16 arithmetic here; "
                 "products run in F32",
                 m->api->name);
    else if (p == CLF_PRECISION_F16 &&
             !(m->lowp_type == CLF_WEIGHT_F16 && m->api->supports(m->be, CLF_OP_GEMM_HALF_ARITH)))
        snprintf(note, size,
                 "precision f16: the %s backend has no F16 arithmetic for %s here; "
                 "products run in F32",
                 m->api->name,
                 m->api->supports(m->be, CLF_OP_GEMM_HALF_ARITH) ? "F32 weights (it has for "
                                                                   "--weight-type f16)"
                                                                 : "products of many rows");
}

clf_status clf_model_set_weight_type(clf_model *m, clf_weight_type type)
{
    clf_status st = clf_model_lowp_set(m, type);
    /* the precision's copy follows the weight type (BF16 weights serve as it) */
    if (st == CLF_OK && m->precision != CLF_PRECISION_F32)
        st = clf_model_set_precision(m, m->precision, NULL, 0);
    return st;
}

clf_status clf_model_enable_half_weights(clf_model *m)
{
    return clf_model_set_weight_type(m, CLF_WEIGHT_F16);
}

/* The BF16 copy of m's GEMM matrices made from the weights as they are now. */
static clf_status make_copy(clf_model *m)
{
    for (int c = 0; c < m->n_chunks; c++) {
        const clf_status st = clf_model_copy16(m, c, CLF_WEIGHT_BF16, m->arith_chunks[c]);
        if (st != CLF_OK)
            return clf_error_context(st, "model: precision bf16");
    }
    return CLF_OK;
}

clf_status clf_model_set_precision(clf_model *m, clf_precision p, char *note, size_t note_size)
{
    if (note && note_size > 0)
        note[0] = '\0';
    if (!m || (int)p < 0 || p > CLF_PRECISION_F16)
        return clf_error(CLF_ERR_INPUT, "clf_model_set_precision: %s",
                         m ? "unknown precision" : "NULL model");
    clf_model_arith_free(m);
    m->g_valid = 0; /* the cached forward graph was built with the previous setting */
    m->precision = p;
    if (p == CLF_PRECISION_F32)
        return CLF_OK;
    char why[256] = "";
    precision_note(m, p, why, sizeof why);
    if (note && note_size > 0)
        snprintf(note, note_size, "%s", why);
    /* BF16 weights already multiply in BF16 arithmetic where the backend has it */
    if (why[0] || p != CLF_PRECISION_BF16 || m->lowp_type == CLF_WEIGHT_BF16)
        return CLF_OK;
    /* a model being trained keeps no copy: its weights change every step, and remaking a
     * copy through the host costs more than the backend rounding each product's weights
     * as it reads them */
    if (m->grad_chunks) {
        m->arith_on = 1;
        return CLF_OK;
    }
    clf_status st = CLF_OK;
    if (!(m->arith_chunks = calloc((size_t)m->n_chunks, sizeof *m->arith_chunks)))
        return clf_error(CLF_ERR_NOMEM, "model: out of host memory");
    for (int c = 0; c < m->n_chunks; c++) {
        const size_t bytes = m->chunk_bytes[c] / 2;
        if ((st = m->api->alloc(m->be, bytes, &m->arith_chunks[c])) != CLF_OK) {
            clf_error_context(st, "model: precision bf16: allocating %zu bytes", bytes);
            goto fail;
        }
        m->arith_bytes += bytes;
    }
    m->arith_on = 1;
    if ((st = make_copy(m)) != CLF_OK)
        goto fail;
    return CLF_OK;
fail:
    clf_model_arith_free(m);
    return st;
}

clf_precision clf_model_precision(const clf_model *m, int *bf16_arith)
{
    if (bf16_arith)
        *bf16_arith =
            m->arith_on || (m->precision == CLF_PRECISION_BF16 && m->lowp_type == CLF_WEIGHT_BF16 &&
                            m->api->supports(m->be, CLF_OP_GEMM_BF16_ARITH));
    return m->precision;
}

/* F16 weights on a backend whose products of 8+ rows do not run in half precision: what
 * falls back. Only the OpenCL backend has F16 arithmetic at all (CLBlast's HGEMM, on a GPU
 * with cl_khr_fp16, or any device with CLF_OPENCL_HGEMM=on). */
static void half_fallback_note(const clf_backend_api *api, clf_backend *be, char *note, size_t size)
{
    char desc[256];
    if (strcmp(api->name, "opencl") != 0 || api->supports(be, CLF_OP_GEMM_HALF_ARITH))
        return;
    if (api->describe(be, desc, sizeof desc) != CLF_OK) {
        clf_clear_error();
        snprintf(desc, sizeof desc, "the OpenCL device");
    }
    snprintf(note, size,
             "%s: F16 weights serve the products of up to 7 rows (decoding at batch 1, small "
             "beams); the larger ones (the encoder, batched decoding) multiply the F32 weights, "
             "as CLBlast's HGEMM runs only on a GPU with cl_khr_fp16 (CLF_OPENCL_HGEMM=on: any "
             "device with it)",
             desc);
}

clf_status clf_model_create_inference(const clf_model_config *cfg, clf_weights **w,
                                      const clf_backend_api *api, clf_backend *be, int type_set,
                                      clf_weight_type *type, char *note, size_t note_size,
                                      clf_model **out)
{
    if (note && note_size > 0)
        note[0] = '\0';
    if (!out || !w || !*w || !type)
        return clf_error(CLF_ERR_INPUT, "clf_model_create_inference: NULL argument");
    if (!type_set)
        *type = (*w)->stored_type;
    /* from a mapped file, int8's matrices are quantized from it, never uploaded as F32 */
    const int defer = (*w)->source && *type == CLF_WEIGHT_INT8 && api->supports(be, CLF_OP_GEMM_I8);
    clf_status st = clf_model_create_from(cfg, *w, defer, api, be, out);
    if (st == CLF_OK)
        st = clf_model_set_weight_type(*out, *type);
    if (st == CLF_OK && *type == CLF_WEIGHT_INT8)
        st = clf_model_release_f32(*out, NULL);
    if (*out)
        (*out)->pending = NULL;
    clf_weights_free(*w); /* its tensors went as they reached the device */
    *w = NULL;
    if (st == CLF_OK && *type == CLF_WEIGHT_F16 && note && note_size > 0)
        half_fallback_note(api, be, note, note_size);
    if (st != CLF_OK) {
        clf_model_free(*out);
        *out = NULL;
    }
    return st;
}
