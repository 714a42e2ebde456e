/* clformer/framing.h - how a sentence pair is framed with special tokens: the one type that
 * the tokenizers (clformer/tokenizer.h, which fill it from their vocabularies), the model
 * config (clformer/config.h, which resolves the model's keys over it) and the batches
 * (clformer/dataset.h) share. A plain struct, so that a tokenizer needs no configuration. */
#ifndef CLFORMER_FRAMING_H
#define CLFORMER_FRAMING_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where a source language's token goes (model.source_language). */
typedef enum clf_lang_place {
    CLF_LANG_NONE = 0,   /* no language token */
    CLF_LANG_BEFORE = 1, /* [src_bos] lang x [src_eos] */
    CLF_LANG_AFTER = 2   /* [src_bos] x [src_eos] lang */
} clf_lang_place;

/* How a sentence pair is framed, by `clformer train` (clformer/dataset.h's batches) and
 * `clformer translate` alike:
 *     src    [src_bos] x [src_eos] src_pad...   (src_bos / src_eos -1: left out; a language
 *                                                token before x or after src_eos, by
 *                                                src_lang_place)
 *     tgt_in tgt_start [lang] y tgt_pad...      (the decoder's input)
 *     labels [lang] y tgt_eos tgt_pad...        (what it predicts; decoding ends at tgt_eos)
 * where the target's [lang] is the target language's token when tgt_lang_forced (a model
 * whose target_language is forced: M2M-100, NLLB, mBART-50), as transformers' generate()
 * sees the target: decoder start, then the forced first token. */
typedef struct clf_framing {
    int32_t src_bos, src_eos, src_pad;
    int32_t tgt_start, tgt_eos, tgt_pad;
    /* The source language's token and its place; zero-initialised: none. The model config
     * gives the place, the caller the language (translate's --source-lang). */
    int32_t src_lang;
    clf_lang_place src_lang_place;
    /* 1: the target language's token tgt_lang leads the target (labels) and so follows
     * tgt_start in the decoder's input; zero-initialised: none. The caller sets both for
     * a model whose target_language is forced (`clformer train`'s target_lang); translate
     * forces it through decoding instead (clf_decode_opts.forced_bos_id). */
    int32_t tgt_lang;
    int tgt_lang_forced;
} clf_framing;

/* The tokens the framing adds to a source sentence. */
static inline int clf_framing_source_extra(const clf_framing *f)
{
    return (f->src_bos >= 0) + (f->src_eos >= 0) + (f->src_lang_place != CLF_LANG_NONE);
}

/* The tokens the framing adds to a target sentence: tgt_eos (in the labels; tgt_start in
 * the decoder's input), and the language's token when forced. */
static inline int clf_framing_target_extra(const clf_framing *f)
{
    return 1 + (f->tgt_lang_forced != 0);
}

/* The rows above, the one place they are written (batches, decoding, scoring). */

/* row[0..len) := [src_bos] [lang] ids[0..n) [src_eos] [lang] src_pad... (lang by
 * src_lang_place); len must be at least n plus clf_framing_source_extra. */
static inline void clf_framing_source_row(const clf_framing *f, const int32_t *ids, int n, int len,
                                          int32_t *row)
{
    int k = 0;
    if (f->src_bos >= 0)
        row[k++] = f->src_bos;
    if (f->src_lang_place == CLF_LANG_BEFORE)
        row[k++] = f->src_lang;
    for (int i = 0; i < n; i++)
        row[k++] = ids[i];
    if (f->src_eos >= 0)
        row[k++] = f->src_eos;
    if (f->src_lang_place == CLF_LANG_AFTER)
        row[k++] = f->src_lang;
    while (k < len)
        row[k++] = f->src_pad;
}

/* in[0..len) := tgt_start [lang] y[0..n) tgt_pad...; labels (may be NULL) := [lang] y
 * tgt_eos tgt_pad... (lang when tgt_lang_forced); len must be at least n plus
 * clf_framing_target_extra. */
static inline void clf_framing_target_rows(const clf_framing *f, const int32_t *y, int n, int len,
                                           int32_t *in, int32_t *labels)
{
    const int lang = f->tgt_lang_forced != 0, m = n + lang; /* [lang] y */
    in[0] = f->tgt_start;
    if (lang)
        in[1] = f->tgt_lang;
    for (int i = 0; i < n; i++)
        in[lang + i + 1] = y[i];
    for (int j = m + 1; j < len; j++)
        in[j] = f->tgt_pad;
    if (!labels)
        return;
    if (lang)
        labels[0] = f->tgt_lang;
    for (int i = 0; i < n; i++)
        labels[lang + i] = y[i];
    labels[m] = f->tgt_eos;
    for (int j = m + 1; j < len; j++)
        labels[j] = f->tgt_pad;
}

#ifdef __cplusplus
}
#endif
#endif
