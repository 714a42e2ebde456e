/* clformer quantize: a weights file rewritten with its GEMM matrices as F16, BF16 or int8
 * (clf_weights_quantize_file, clformer/weights.h). Which tensors: 2-D ones that are not
 * embedding tables (those are looked up, not multiplied) - the names say which, so no
 * config is needed. A tied projection's table stays F32 in the file (unless
 * CLF_QUANTIZE_EMBEDDINGS), under whichever one of its names the file has; a model quantizes
 * it at load (clf_model_set_weight_type) where it multiplies with it. */
#include "clformer/weights.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/weight_names.h"
#include "numeric/numeric_internal.h"

/* A tied model's shared matrix, which clf_weights_load takes under any one of its names:
 * 1 when t is another name's exact copy of tgt_embed.embedding.weight (PyTorch's
 * state_dict() of a tied model lists every name), which is then left out, the matrix
 * written once under tgt_embed's name as clformer writes it. */
static int is_tied_copy(const clf_safetensors *f, const clf_tensor *t)
{
    const clf_tensor *e = clf_safetensors_find(f, CLF_WN_TGT_EMBED);
    if (!e || e == t ||
        (strcmp(t->name, CLF_WN_PROJ_WEIGHT) != 0 && strcmp(t->name, CLF_WN_SRC_EMBED) != 0))
        return 0;
    return e->dtype == t->dtype && e->ndim == 2 && t->ndim == 2 && e->shape[0] == t->shape[0] &&
           e->shape[1] == t->shape[1] && memcmp(e->data, t->data, t->nbytes) == 0;
}

/* 1 when t is converted: a matrix a linear layer multiplies with (by its name and shape),
 * or with CLF_QUANTIZE_EMBEDDINGS an embedding table too. A projection_layer.proj.weight
 * without a tgt_embed.embedding.weight beside it is a tied model's table (safetensors'
 * save_model keeps that name only): a table. */
static int is_converted(const clf_safetensors *f, const clf_tensor *t, unsigned flags)
{
    unsigned kinds = clf_weight_name_kinds(t->name);
    if (strcmp(t->name, CLF_WN_PROJ_WEIGHT) == 0 && !clf_safetensors_find(f, CLF_WN_TGT_EMBED))
        kinds |= CLF_WK_EMBEDDING_TABLE;
    const unsigned kept = CLF_WK_POSITIONAL | CLF_WK_NOT_PARAMETER |
                          (flags & CLF_QUANTIZE_EMBEDDINGS ? 0u : CLF_WK_EMBEDDING_TABLE);
    return t->ndim == 2 && !(kinds & kept);
}

/* out = t as type (its new data malloc'd into *owned, and for int8 the scales in
 * out[1], *n_out = 2). */
static clf_status convert(const char *path, const clf_tensor *t, clf_weight_type type,
                          clf_tensor out[2], int *n_out, void **owned, void **owned2)
{
    const int64_t n = clf_tensor_numel(t), rows = t->shape[0], k = t->shape[1];
    clf_status st = CLF_OK;
    float *f = NULL;
    *n_out = 1;
    out[0] = *t;
    if (t->dtype != CLF_F32 && t->dtype != CLF_F16 && t->dtype != CLF_BF16)
        return clf_error(CLF_ERR_INPUT,
                         "%s: tensor '%s' has dtype %s; quantize reads F32, F16 or BF16 "
                         "matrices (an already quantized file cannot be quantized again)",
                         path, t->name, clf_dtype_name(t->dtype));
    if (!(f = malloc((size_t)(n ? n : 1) * sizeof *f)))
        return clf_error(CLF_ERR_NOMEM, "quantize: out of memory for '%s'", t->name);
    if ((st = clf_tensor_to_f32(t, f)) != CLF_OK)
        goto done;
    if (type == CLF_WEIGHT_F16 || type == CLF_WEIGHT_BF16) {
        uint16_t *h = malloc((size_t)(n ? n : 1) * sizeof *h);
        if (!h) {
            st = clf_error(CLF_ERR_NOMEM, "quantize: out of memory for '%s'", t->name);
            goto done;
        }
        *owned = h;
        out[0].dtype = type == CLF_WEIGHT_F16 ? CLF_F16 : CLF_BF16;
        for (int64_t e = 0; e < n; e++) {
            const int fits =
                type == CLF_WEIGHT_F16 ? clf_float_fits_half(f[e]) : clf_float_fits_bf16(f[e]);
            if (!fits) {
                st = clf_unfit_error(path, t->name, e, f[e], out[0].dtype);
                goto done;
            }
            h[e] = type == CLF_WEIGHT_F16 ? clf_float_to_half(f[e]) : clf_float_to_bf16(f[e]);
        }
        out[0].data = h;
        out[0].nbytes = (size_t)n * 2;
        goto done;
    }
    int8_t *q = malloc((size_t)(n ? n : 1));
    float *sc = malloc((size_t)(rows ? rows : 1) * sizeof *sc);
    *owned = q;
    *owned2 = sc;
    if (!q || !sc) {
        st = clf_error(CLF_ERR_NOMEM, "quantize: out of memory for '%s'", t->name);
        goto done;
    }
    int64_t bad = clf_quantize_rows_i8(f, rows, k, q, sc);
    if (bad >= 0) {
        st = clf_unfit_error(path, t->name, bad, f[bad], CLF_I8);
        goto done;
    }
    out[0].dtype = CLF_I8;
    out[0].data = q;
    out[0].nbytes = (size_t)n;
    memset(&out[1], 0, sizeof out[1]);
    const size_t nl = strlen(t->name), sl = strlen(CLF_SCALE_SUFFIX);
    if (nl + sl >= sizeof out[1].name) {
        st = clf_error(CLF_ERR_INPUT, "%s: tensor '%s': name too long for its scales", path,
                       t->name);
        goto done;
    }
    memcpy(out[1].name, t->name, nl);
    memcpy(out[1].name + nl, CLF_SCALE_SUFFIX, sl + 1);
    out[1].dtype = CLF_F32;
    out[1].ndim = 1;
    out[1].shape[0] = rows;
    out[1].data = sc;
    out[1].nbytes = (size_t)rows * sizeof *sc;
    *n_out = 2;
done:
    free(f);
    return st;
}

clf_status clf_weights_quantize_file(const char *in_path, const char *out_path,
                                     clf_weight_type type, unsigned flags)
{
    clf_safetensors *f = NULL;
    clf_tensor *ts = NULL;
    void **owned = NULL;
    int nt = 0, no = 0;
    clf_status st;
    if (type == CLF_WEIGHT_F32)
        return clf_error(CLF_ERR_INPUT, "quantize: --type must be int8, bf16 or f16");
    if ((st = clf_safetensors_open(in_path, &f)) != CLF_OK)
        return st;
    const int n = clf_safetensors_count(f);
    ts = calloc((size_t)(2 * n + 1), sizeof *ts);
    owned = calloc((size_t)(2 * n + 1), sizeof *owned);
    if (!ts || !owned) {
        st = clf_error(CLF_ERR_NOMEM, "quantize: out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        const clf_tensor *t = clf_safetensors_at(f, i);
        if (clf_weight_name_kinds(t->name) & CLF_WK_NOT_PARAMETER)
            continue; /* optimizer state: a quantized file is for inference */
        if (is_tied_copy(f, t))
            continue;
        if (!is_converted(f, t, flags)) {
            ts[nt++] = *t;
            continue;
        }
        int k = 0;
        if ((st = convert(in_path, t, type, &ts[nt], &k, &owned[no], &owned[no + 1])) != CLF_OK)
            goto done;
        nt += k;
        no += 2;
    }
    const char *meta[2] = {CLF_WEIGHT_TYPE_META, clf_weight_type_name(type)};
    st = clf_safetensors_write(out_path, ts, nt, meta, 1);
done:
    if (owned)
        for (int i = 0; i < 2 * n + 1; i++)
            free(owned[i]);
    free(owned);
    free(ts);
    clf_safetensors_close(f);
    return st;
}
