/* spm_shim.h - a C view of the SentencePiece library (libsentencepiece, C++), internal to
 * libclformer. spm_shim.cc is the only C++ in the project: it catches every C++ exception
 * and turns it, and every failed sentencepiece::util::Status, into a clf_status with a
 * one-line message (clf_error); nothing here throws or prints.
 *
 * The ids are the model's: 0..clf_spm_size()-1. A loaded processor is immutable and the
 * library's const methods are thread-safe, so one clf_spm may be shared across threads. */
#ifndef CLF_SPM_SHIM_H
#define CLF_SPM_SHIM_H

#include <stddef.h>
#include <stdint.h>

#include "clformer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clf_spm clf_spm;

/* Parses a serialized ModelProto (the bytes of a .model file). name (the file) starts the
 * message of a failure: CLF_ERR_INPUT "<name>: not a valid SentencePiece model: <why>". */
clf_status clf_spm_load(const void *data, size_t n, const char *name, clf_spm **out);
void clf_spm_free(clf_spm *spm); /* NULL is fine */

/* The model as a serialized ModelProto (malloc'd; free() it). */
clf_status clf_spm_serialize(const clf_spm *spm, char **data, size_t *n);

int clf_spm_size(const clf_spm *spm);
/* Id of piece[0..len), or -1 when the model has no such piece (the library itself answers
 * unk_id for those). */
int32_t clf_spm_piece_id(const clf_spm *spm, const char *piece, size_t len);
/* The piece of id (NUL-terminated, owned by spm), or NULL when out of range. */
const char *clf_spm_piece(const clf_spm *spm, int32_t id);
/* The model's unk/bos/eos/pad ids; -1 for one the model disables. */
void clf_spm_specials(const clf_spm *spm, int32_t *unk, int32_t *bos, int32_t *eos, int32_t *pad);
/* 1 when id is the unknown piece or a control piece (<s>, </s>, <pad>, ...), else 0. */
int clf_spm_is_special(const clf_spm *spm, int32_t id);

/* The library's Encode of text[0..len) (valid UTF-8, checked by the caller) into ids
 * (malloc'd; NULL when *n is 0). */
clf_status clf_spm_encode(const clf_spm *spm, const char *text, size_t len, int32_t **ids, int *n);
/* The library's Decode (detokenization) of ids[0..n) (each in range, checked by the caller)
 * as a malloc'd NUL-terminated string. */
clf_status clf_spm_decode(const clf_spm *spm, const int32_t *ids, int n, char **text);

/* The library's Encode of text[0..len) into pieces (strings; text the model cannot cover
 * comes back as its surface, as Python's encode(out_type=str)): *pool holds them
 * NUL-terminated back to back (malloc'd; NULL when *n is 0). */
clf_status clf_spm_encode_pieces(const clf_spm *spm, const char *text, size_t len, char **pool,
                                 int *n);
/* The library's Decode of the pieces pieces[0..n) (NUL-terminated strings; a piece the
 * model lacks decodes as unk does) as a malloc'd NUL-terminated string. */
clf_status clf_spm_decode_pieces(const clf_spm *spm, const char *const *pieces, int n, char **text);
/* Trains a model with the library's trainer on the text files inputs[0..n_inputs) (one
 * sentence per line) and returns it serialized (malloc'd). model_type: "unigram" or
 * "bpe". The ids: <unk> 0, <pad> 1, <s> 2, </s> 3 (the word level's), then the pieces. The
 * library's progress log is silenced (it keeps only errors, which come back as the message). */
clf_status clf_spm_train(const char *const *inputs, int n_inputs, int vocab_size,
                         const char *model_type, char **data, size_t *n);

#ifdef __cplusplus
}
#endif
#endif
