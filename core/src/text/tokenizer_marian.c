/* tokenizer_marian.c - Marian's mapped kind of clf_tokenizer (clf_tokenizer_load_mapped,
 * see clformer/tokenizer.h): a SentencePiece model (read by tokenizer_spm.c) cuts text into
 * pieces and joins pieces into text, and the ids are those of a separate piece vocabulary,
 * vocab.json, held as the vocabulary of tokenizer_vocab.c. transformers' MarianTokenizer does
 * the same. */
#include "clformer/tokenizer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/json_jansson.h"
#include "text/tokenizer_kinds.h"

/* Marian's MarianTokenizer: the SentencePiece model's pieces (their text), each looked up
 * in the piece vocabulary, unk_id when it is not there. */
static clf_status marian_encode(const clf_tokenizer *tok, const char *text, size_t len,
                                int32_t **ids, int *n)
{
    if (len == 0) /* text checked by clf_tokenizer_encode */
        return CLF_OK;
    char *pool = NULL;
    int count = 0;
    clf_status st = clf_spm_encode_pieces(tok->spm, text, len, &pool, &count);
    if (st != CLF_OK || count == 0)
        return st;
    int32_t *v = malloc(sizeof *v * (size_t)count);
    if (!v) {
        free(pool);
        return clf_error(CLF_ERR_NOMEM, "tokenizer encode: out of memory");
    }
    const char *p = pool;
    for (int i = 0; i < count; i++) {
        size_t l = strlen(p);
        int32_t id = clf_tok_vocab_id_n(tok, p, l);
        if (id < 0 && tok->sp.unk < 0) {
            st = clf_error(CLF_ERR_INPUT,
                           "tokenizer encode: piece '%s' is not in the vocabulary, which has no "
                           "<unk>",
                           p);
            free(v);
            free(pool);
            return st;
        }
        v[i] = id < 0 ? tok->sp.unk : id;
        p += l + 1;
    }
    free(pool);
    *ids = v;
    *n = count;
    return CLF_OK;
}

/* The pieces of ids (specials left out with skip_specials) joined by the SentencePiece
 * model's Decode, U+2581 left by unknown pieces made spaces and the ends stripped of white
 * space (MarianTokenizer's decode). */
static clf_status marian_decode(const clf_tokenizer *tok, const int32_t *ids, int n,
                                int skip_specials, char **text)
{
    const char **pieces = malloc(sizeof *pieces * (size_t)(n > 0 ? n : 1));
    if (!pieces)
        return clf_error(CLF_ERR_NOMEM, "tokenizer decode: out of memory");
    int kept = 0;
    for (int i = 0; i < n; i++)
        if (!skip_specials || !(tok->flags[ids[i]] & TOK_SPECIAL))
            pieces[kept++] = tok->pool + tok->off[ids[i]];
    clf_status st = clf_spm_decode_pieces(tok->spm, pieces, kept, text);
    free(pieces);
    if (st != CLF_OK)
        return st;
    /* pieces the model lacks keep their U+2581: MarianTokenizer turns every one into a
     * space, then strips white space at both ends (Python's str.strip, ASCII part) */
    char *t = *text, *w = t;
    for (const char *r = t; *r;) {
        if (!strncmp(r, "\xe2\x96\x81", 3)) {
            *w++ = ' ';
            r += 3;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
    char *b = t;
    while (*b && strchr(" \t\n\r\v\f", *b))
        b++;
    size_t l = strlen(b);
    while (l > 0 && strchr(" \t\n\r\v\f", b[l - 1]))
        l--;
    memmove(t, b, l);
    t[l] = '\0';
    return CLF_OK;
}

static clf_status marian_save(const clf_tokenizer *tok, const char *path)
{
    (void)tok;
    return clf_error(CLF_ERR_INPUT,
                     "%s: a SentencePiece model with a piece vocabulary is two files: copy "
                     "them instead",
                     path);
}

static void marian_free(clf_tokenizer *tok)
{
    clf_spm_free(tok->spm);
}

const tok_kind clf_tok_marian = {
    .name = "Marian",
    .kind = CLF_TOKENIZER_SENTENCEPIECE,
    .load = NULL, /* two files: clf_tokenizer_load_mapped */
    .save = marian_save,
    .encode = marian_encode,
    .decode = marian_decode,
    .id_n = clf_tok_vocab_id_n,
    .word = clf_tok_vocab_word,
    .size = clf_tok_vocab_size,
    .specials = clf_tok_vocab_specials,
    .is_special = clf_tok_vocab_is_special,
    .free = marian_free,
};

/* Marian's names of the specials in vocab.json. */
static const char *const mapped_special[4] = {"<unk>", "<pad>", "<s>", "</s>"};

clf_status clf_tokenizer_load_mapped(const char *spm_path, const char *vocab_path,
                                     clf_tokenizer **out)
{
    *out = NULL;
    clf_spm *spm = NULL;
    json_t *root = NULL;
    tok_words t = {0};
    clf_status st = clf_tok_spm_read(spm_path, &spm);
    if (st != CLF_OK)
        return st;
    if ((st = clf_json_parse_file(vocab_path, CLF_TOKENIZER_JSON_MAX, &root)) != CLF_OK)
        goto done;
    if (!json_is_object(root)) {
        st = clf_error(CLF_ERR_INPUT, "%s: expected an object of piece: id pairs", vocab_path);
        goto done;
    }
    size_t total = json_object_size(root);
    if (total == 0 || total > (size_t)INT32_MAX) {
        st = clf_error(CLF_ERR_INPUT, "%s: %zu pieces: not a vocabulary", vocab_path, total);
        goto done;
    }
    if (clf_tok_words_alloc(&t, total) != 0) {
        st = clf_error(CLF_ERR_NOMEM, "%s: out of memory for %zu pieces", vocab_path, total);
        goto done;
    }
    if ((st = clf_tok_read_vocab(vocab_path, root, total, t.w, t.wl)) != CLF_OK)
        goto done;
    for (size_t id = 0; id < total; id++) {
        if (!t.w[id]) {
            st = clf_error(CLF_ERR_INPUT, "%s: no piece has id %zu: ids must run 0..n-1",
                           vocab_path, id);
            goto done;
        }
        for (int k = 0; k < 4; k++)
            if (t.wl[id] == strlen(mapped_special[k]) &&
                !memcmp(t.w[id], mapped_special[k], t.wl[id]))
                t.fl[id] = TOK_SPECIAL;
    }
    if ((st = clf_tok_vocab_create(&clf_tok_marian, (int)total, t.w, t.wl, t.fl, mapped_special,
                                   vocab_path, out)) != CLF_OK)
        goto done;
    (*out)->spm = spm;
    spm = NULL;
done:
    clf_spm_free(spm);
    json_decref(root);
    clf_tok_words_free(&t);
    return st;
}
