/* translate's attention outputs: --attention FILE (one safetensors file, an F32 tensor
 * 'attention.<line>' per input line) and --attention-png PREFIX (a grayscale heatmap
 * PREFIX.<line>.png per line). Both hold the cross-attention of the last decoder layer,
 * mean of the heads, of the best hypothesis: rows its output tokens (+[EOS]), columns the
 * framed source ([SOS] source [EOS], without the batch's padding). */
#ifndef CLF_TRANSLATE_ATTENTION_H
#define CLF_TRANSLATE_ATTENTION_H

#include <stddef.h>

#include "clformer/decode.h"
#include "clformer/tensor.h"

/* The tensors kept for --attention, in line order. */
typedef struct tr_attention {
    clf_tensor *t; /* data malloc'd */
    size_t n, cap;
} tr_attention;

/* Keeps line `line`'s weights: cols columns of each of h's rows, src_len apart in
 * h->attention; h NULL (a line not decoded): a [0, 0] tensor. */
clf_status tr_attention_keep(tr_attention *a, long line, const clf_hypothesis *h, int cols,
                             int src_len);
/* Writes every kept tensor to path, with a clformer.attention note saying what they hold. */
clf_status tr_attention_write(const tr_attention *a, const char *path);
void tr_attention_free(tr_attention *a);

/* Writes PREFIX.<line>.png from h as tr_attention_keep reads it (no file when h generated
 * nothing: no image has 0 rows). */
clf_status tr_attention_png(const char *prefix, long line, const clf_hypothesis *h, int cols,
                            int src_len);

#endif
