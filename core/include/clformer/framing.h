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

/* How a sentence pair is framed, by `clformer train` (clformer/dataset.h's batches) and
 * `clformer translate` alike:
 *     src    [src_bos] x [src_eos] src_pad...   (src_bos / src_eos -1: left out)
 *     tgt_in tgt_start y tgt_pad...             (the decoder's input)
 *     labels y tgt_eos tgt_pad...               (what it predicts; decoding ends at tgt_eos) */
typedef struct clf_framing {
    int32_t src_bos, src_eos, src_pad;
    int32_t tgt_start, tgt_eos, tgt_pad;
} clf_framing;

#ifdef __cplusplus
}
#endif
#endif
