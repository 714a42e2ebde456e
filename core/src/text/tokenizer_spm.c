/* tokenizer_spm.c - the SentencePiece kind of clf_tokenizer (see clformer/tokenizer.h and
 * tokenizer_spm.h): reading and writing .model files, the checks clformer makes around
 * the library's encode and decode, and training. The library does the tokenizing. */
#include "text/tokenizer_spm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clformer/fs.h"

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

int clf_tokenizer_name_is_sentencepiece(const char *path)
{
    return ends_with(path, ".model") || ends_with(path, ".spm");
}

int clf_tok_spm_detect(const char *path)
{
    int first = EOF, c = EOF, fd;
    uint64_t size;
    /* only a regular file is looked into, without waiting (a FIFO): the load refuses the rest */
    FILE *f = clf_fs_open_regular(path, UINT64_MAX, &fd, &size) == CLF_OK ? fdopen(fd, "rb") : NULL;
    if (!f && fd >= 0)
        close(fd);
    if (f) {
        first = c = getc(f);
        while (c == ' ' || c == '\t' || c == '\n' || c == '\r')
            c = getc(f);
        fclose(f);
    }
    if (c == '{')
        return 0;
    /* 0x0A: field 1 (the pieces), length-delimited, which a ModelProto starts with */
    if (first == 0x0A)
        return 1;
    return clf_tokenizer_name_is_sentencepiece(path);
}

clf_status clf_tok_spm_load(const char *path, clf_spm **out)
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

clf_status clf_tok_spm_save(const clf_spm *spm, const char *path)
{
    char *data = NULL;
    size_t len;
    clf_status st = clf_spm_serialize(spm, &data, &len);
    if (st != CLF_OK)
        return clf_error_context(st, "%s", path);
    st = clf_fs_write_atomic_bytes(path, data, len);
    free(data);
    return st;
}

clf_status clf_tok_spm_encode(const clf_spm *spm, const char *text, size_t len, int32_t **ids,
                              int *n)
{
    *ids = NULL;
    *n = 0;
    if (len == 0) /* text checked by clf_tokenizer_encode */
        return CLF_OK;
    return clf_spm_encode(spm, text, len, ids, n);
}

clf_status clf_tok_spm_decode(const clf_spm *spm, const int32_t *ids, int n, int skip_specials,
                              char **text)
{
    *text = NULL;
    if (n < 0 || (n > 0 && !ids))
        return clf_error(CLF_ERR_INPUT, "tokenizer decode: invalid arguments (n = %d)", n);
    int size = clf_spm_size(spm), kept = 0;
    int32_t *keep = malloc((size_t)(n > 0 ? n : 1) * sizeof *keep);
    if (!keep)
        return clf_error(CLF_ERR_NOMEM, "tokenizer decode: out of memory");
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= size) {
            free(keep);
            return clf_error(CLF_ERR_INPUT,
                             "tokenizer decode: id %d at position %d is outside the "
                             "vocabulary (size %d)",
                             (int)ids[i], i, size);
        }
        if (!skip_specials || !clf_spm_is_special(spm, ids[i]))
            keep[kept++] = ids[i];
    }
    clf_status st = clf_spm_decode(spm, keep, kept, text);
    free(keep);
    return st;
}

clf_tokenizer_specials clf_tok_spm_specials(const clf_spm *spm)
{
    clf_tokenizer_specials s;
    clf_spm_specials(spm, &s.unk, &s.sos, &s.eos, &s.pad);
    return s;
}

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
    if (!(*out = clf_tok_wrap_spm(spm)))
        return clf_error(CLF_ERR_NOMEM, "SentencePiece training: out of memory");
    return CLF_OK;
}
