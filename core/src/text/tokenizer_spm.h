/* tokenizer_spm.h - the SentencePiece kind of clf_tokenizer (see clformer/tokenizer.h),
 * internal to libclformer. tokenizer.c holds the public functions; for a SentencePiece
 * tokenizer they dispatch here (tok->spm set), and these call the library through
 * spm_shim.h. */
#ifndef CLF_TOKENIZER_SPM_H
#define CLF_TOKENIZER_SPM_H

#include "clformer/tokenizer.h"
#include "text/spm_shim.h"

/* 1 when path is to be read as a SentencePiece model, 0 for tokenizer JSON: the rule of
 * clformer/tokenizer.h (content first, then the name). */
int clf_tok_spm_detect(const char *path);

/* Reads a .model file. CLF_ERR_IO when unreadable, CLF_ERR_INPUT when the library refuses
 * it; messages start with the path. */
clf_status clf_tok_spm_load(const char *path, clf_spm **out);
/* Writes the model (path.tmp.<pid>, fsync, rename). */
clf_status clf_tok_spm_save(const clf_spm *spm, const char *path);

/* text: checked by clf_tokenizer_encode (not NULL, at most INT_MAX bytes, valid UTF-8). */
clf_status clf_tok_spm_encode(const clf_spm *spm, const char *text, size_t len, int32_t **ids,
                              int *n);
clf_status clf_tok_spm_decode(const clf_spm *spm, const int32_t *ids, int n, int skip_specials,
                              char **text);
clf_tokenizer_specials clf_tok_spm_specials(const clf_spm *spm);

/* Defined in tokenizer.c: CLF_ERR_INPUT "<path>: <n> words, more than the limit of ..."
 * when a vocabulary of n ids exceeds CLF_TOKENIZER_VOCAB_MAX; the one check of both kinds. */
clf_status clf_tok_check_vocab_size(const char *path, size_t n);

/* Defined in tokenizer.c: a tokenizer of the SentencePiece kind that owns spm (freed, and
 * NULL returned, when out of memory). */
clf_tokenizer *clf_tok_wrap_spm(clf_spm *spm);

#endif
