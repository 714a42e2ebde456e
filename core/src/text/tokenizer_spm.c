/* tokenizer_spm.c - the SentencePiece kind of clf_tokenizer (see clformer/tokenizer.h and
 * tokenizer_kinds.h): reading and writing .model files, the library's encode and decode
 * behind the checks of tokenizer.c, and training. The library (through spm_shim.h) does
 * the tokenizing. */
#include "clformer/fs.h"
#include "clformer/tokenizer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "text/tokenizer_kinds.h"

clf_status clf_tok_spm_read(const char *path, clf_spm **out)
{
    clf_status st;
    *out = NULL;
    char *data = NULL;
    size_t len = 0;
    /* a model is ~0.2-10 MB (its normalization table and pieces): anything over
     * CLF_TOKENIZER_SPM_MAX is not one, and is refused before it is read */
    if ((st = clf_fs_read_all(path, CLF_TOKENIZER_SPM_MAX, &data, &len)) != CLF_OK)
        return st;
    if (len == 0) {
        st = clf_error(CLF_ERR_INPUT, "%s: not a valid SentencePiece model: the file is empty",
                       path);
        goto fail;
    }
    if ((st = clf_spm_load(data, len, path, out)) == CLF_OK &&
        (st = clf_tok_check_vocab_size(path, (size_t)clf_spm_size(*out))) != CLF_OK) {
        clf_spm_free(*out);
        *out = NULL;
    }
fail:
    free(data);
    return st;
}

static clf_status spm_save(const clf_tokenizer *tok, const char *path)
{
    char *data = NULL;
    size_t len;
    clf_status st = clf_spm_serialize(tok->spm, &data, &len);
    if (st != CLF_OK)
        return clf_error_context(st, "%s", path);
    st = clf_fs_write_atomic_bytes(path, data, len);
    free(data);
    return st;
}

/* A tokenizer of this kind that owns spm (freed, and NULL returned, when out of memory). */
static clf_tokenizer *spm_wrap(clf_spm *spm)
{
    clf_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) {
        clf_spm_free(spm);
        return NULL;
    }
    tok->kind = &clf_tok_spm;
    tok->spm = spm;
    return tok;
}

static clf_status spm_load(const char *path, clf_tokenizer **out)
{
    clf_spm *spm;
    clf_status st;
    *out = NULL;
    if ((st = clf_tok_spm_read(path, &spm)) != CLF_OK)
        return st;
    if (!(*out = spm_wrap(spm)))
        return clf_error(CLF_ERR_NOMEM, "%s: out of memory", path);
    return CLF_OK;
}

static clf_status spm_encode(const clf_tokenizer *tok, const char *text, size_t len, int32_t **ids,
                             int *n)
{
    if (len == 0)
        return CLF_OK;
    return clf_spm_encode(tok->spm, text, len, ids, n);
}

/* The library's Decode of the ids, the specials left out first with skip_specials. */
static clf_status spm_decode(const clf_tokenizer *tok, const int32_t *ids, int n, int skip_specials,
                             char **text)
{
    int kept = 0;
    int32_t *keep = malloc((size_t)(n > 0 ? n : 1) * sizeof *keep);
    if (!keep)
        return clf_error(CLF_ERR_NOMEM, "tokenizer decode: out of memory");
    for (int i = 0; i < n; i++)
        if (!skip_specials || !clf_spm_is_special(tok->spm, ids[i]))
            keep[kept++] = ids[i];
    clf_status st = clf_spm_decode(tok->spm, keep, kept, text);
    free(keep);
    return st;
}

static int32_t spm_id_n(const clf_tokenizer *tok, const char *word, size_t len)
{
    return clf_spm_piece_id(tok->spm, word, len);
}

static const char *spm_word(const clf_tokenizer *tok, int32_t id)
{
    return clf_spm_piece(tok->spm, id);
}

static int spm_size(const clf_tokenizer *tok)
{
    return clf_spm_size(tok->spm);
}

static clf_tokenizer_specials spm_specials(const clf_tokenizer *tok)
{
    clf_tokenizer_specials s;
    clf_spm_specials(tok->spm, &s.unk, &s.sos, &s.eos, &s.pad);
    return s;
}

static int spm_is_special(const clf_tokenizer *tok, int32_t id)
{
    return clf_spm_is_special(tok->spm, id);
}

static void spm_free(clf_tokenizer *tok)
{
    clf_spm_free(tok->spm);
}

const tok_kind clf_tok_spm = {
    .name = "SentencePiece",
    .kind = CLF_TOKENIZER_SENTENCEPIECE,
    .load = spm_load,
    .save = spm_save,
    .encode = spm_encode,
    .decode = spm_decode,
    .id_n = spm_id_n,
    .word = spm_word,
    .size = spm_size,
    .specials = spm_specials,
    .is_special = spm_is_special,
    .free = spm_free,
};

clf_status clf_tokenizer_train_sentencepiece(const char *const *paths, int n_paths, int vocab_size,
                                             const char *model_type, clf_tokenizer **out)
{
    *out = NULL;
    if (!paths || n_paths <= 0 || vocab_size < 5 || !model_type)
        return clf_error(CLF_ERR_INPUT,
                         "SentencePiece training: needs at least one file and a vocabulary "
                         "size >= 5 (got %d files, size %d)",
                         n_paths, vocab_size);
    if (strcmp(model_type, "unigram") != 0 && strcmp(model_type, "bpe") != 0)
        return clf_error(CLF_ERR_INPUT,
                         "SentencePiece training: model type '%s' is not unigram or bpe",
                         model_type);
    for (int i = 0; i < n_paths; i++)
        if (access(paths[i], R_OK) != 0)
            return clf_error(CLF_ERR_IO, "%s: cannot read: %s", paths[i], strerror(errno));
    char *data = NULL;
    size_t len = 0;
    clf_spm *spm = NULL;
    clf_status st = clf_spm_train(paths, n_paths, vocab_size, model_type, &data, &len);
    if (st == CLF_OK)
        st = clf_spm_load(data, len, "SentencePiece training", &spm);
    free(data);
    if (st != CLF_OK)
        return st;
    if (!(*out = spm_wrap(spm)))
        return clf_error(CLF_ERR_NOMEM, "SentencePiece training: out of memory");
    return CLF_OK;
}
