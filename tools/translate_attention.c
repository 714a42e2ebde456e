/* translate's attention outputs (translate_attention.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "png.h"
#include "translate_attention.h"

/* Pixels per attention weight in each direction, so that short sentences stay visible. */
#define PNG_CELL 8

clf_status tr_attention_keep(tr_attention *a, long line, const clf_hypothesis *h, int cols,
                             int src_len)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 64;
        clf_tensor *t = realloc(a->t, cap * sizeof *t);
        if (!t)
            return clf_error(CLF_ERR_NOMEM, "translate: out of host memory");
        a->t = t;
        a->cap = cap;
    }
    clf_tensor *x = &a->t[a->n];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "attention.%ld", line);
    x->dtype = CLF_F32;
    x->ndim = 2;
    a->n++;
    if (!h)
        return CLF_OK;
    if (!h->attention)
        return clf_error(CLF_ERR_INTERNAL, "translate: the decoder returned no attention");
    int rows = h->len + h->finished;
    float *d = malloc((size_t)(rows > 0 ? rows : 1) * cols * sizeof *d);
    if (!d)
        return clf_error(CLF_ERR_NOMEM, "translate: out of host memory");
    for (int r = 0; r < rows; r++)
        memcpy(d + (size_t)r * cols, h->attention + (size_t)r * src_len, cols * sizeof *d);
    x->shape[0] = rows;
    x->shape[1] = cols;
    x->data = d;
    x->nbytes = (size_t)rows * cols * sizeof *d;
    return CLF_OK;
}

clf_status tr_attention_write(const tr_attention *a, const char *path)
{
    const char *meta[] = {"clformer.attention",
                          "cross-attention of the last decoder layer, mean of the heads, "
                          "best hypothesis; rows: output tokens (+[EOS]), columns: [SOS] "
                          "source [EOS]"};
    return clf_safetensors_write(path, a->t, (int)a->n, meta, 1);
}

void tr_attention_free(tr_attention *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->t[i].data);
    free(a->t);
    *a = (tr_attention){0};
}

/* The weights as gray levels (0 black, 1 white), PNG_CELL x PNG_CELL pixels each, rows =
 * output tokens, columns = source. */
clf_status tr_attention_png(const char *prefix, long line, const clf_hypothesis *h, int cols,
                            int src_len)
{
    clf_status st = CLF_OK;
    int rows = h->len + h->finished;
    if (rows < 1)
        return CLF_OK; /* nothing was generated: no image has 0 rows */
    if (!h->attention)
        return clf_error(CLF_ERR_INTERNAL, "translate: the decoder returned no attention");
    size_t plen = strlen(prefix) + 32;
    char *path = malloc(plen);
    uint8_t *px = malloc((size_t)rows * PNG_CELL * cols * PNG_CELL);
    if (!path || !px) {
        st = clf_error(CLF_ERR_NOMEM, "translate: out of host memory");
        goto fail;
    }
    snprintf(path, plen, "%s.%ld.png", prefix, line);
    const int W = cols * PNG_CELL;
    for (int r = 0; r < rows; r++) {
        uint8_t *row = px + (size_t)r * PNG_CELL * W;
        for (int c = 0; c < cols; c++) {
            float w = h->attention[(size_t)r * src_len + c];
            w = w < 0.0f ? 0.0f : (w > 1.0f ? 1.0f : w);
            memset(row + c * PNG_CELL, (int)(w * 255.0f + 0.5f), PNG_CELL);
        }
        for (int k = 1; k < PNG_CELL; k++)
            memcpy(row + (size_t)k * W, row, W);
    }
    st = png_write_gray8(path, px, W, rows * PNG_CELL);
fail:
    free(path);
    free(px);
    return st;
}
