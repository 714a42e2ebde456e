/* tokenizer_kinds.h - the kinds of clf_tokenizer behind one table of functions each,
 * internal to libclformer (see clformer/tokenizer.h for what each kind does).
 *
 *   tokenizer.c           the public entry points, which check their arguments and
 *                         dispatch through tok->kind; loading, which picks the kind of a
 *                         file (the one place that names the tables)
 *   tokenizer_vocab.c     what the kinds share: the vocabulary of ids (a hash table of
 *                         words) of the word-level and Marian kinds, its JSON reader, and
 *                         freeing a tokenizer
 *   tokenizer_wordlevel.c the tokenizers library's WordLevel kind and its tokenizer.json
 *   tokenizer_build.c     a word-level vocabulary counted from text
 *   tokenizer_spm.c       the SentencePiece kind (.model files, training), over spm_shim.h
 *   tokenizer_marian.c    Marian's mapped kind: a SentencePiece model that cuts text into
 *                         pieces whose ids come from a separate vocab.json
 *
 * Calls go one way: tokenizer.c -> the kinds' tables -> tokenizer_vocab.c, which reaches
 * a kind only through tok->kind. tokenizer_build.c makes word-level tokenizers and
 * tokenizer_marian.c reads its model with tokenizer_spm.c's reader; neither is called
 * back. */
#ifndef CLF_TOKENIZER_KINDS_H
#define CLF_TOKENIZER_KINDS_H

#include "clformer/tokenizer.h"
#include "text/spm_shim.h"

struct json_t; /* Jansson's */

/* One kind of tokenizer. Every entry is set unless it says otherwise. The arguments are
 * checked by the public functions before they get here: encode's text is valid UTF-8 of at
 * most INT_MAX bytes (*ids NULL and *n 0 already), decode's ids are in [0, size) (*text
 * NULL already). */
typedef struct tok_kind {
    const char *name;        /* "word level", "SentencePiece", "Marian" */
    clf_tokenizer_kind kind; /* what clf_tokenizer_get_kind answers */
    /* Reads the one file of this kind; NULL for a kind read otherwise (Marian's two files,
     * clf_tokenizer_load_mapped). */
    clf_status (*load)(const char *path, clf_tokenizer **out);
    clf_status (*save)(const clf_tokenizer *tok, const char *path);
    clf_status (*encode)(const clf_tokenizer *tok, const char *text, size_t len, int32_t **ids,
                         int *n);
    clf_status (*decode)(const clf_tokenizer *tok, const int32_t *ids, int n, int skip_specials,
                         char **text);
    int32_t (*id_n)(const clf_tokenizer *tok, const char *word, size_t len);
    const char *(*word)(const clf_tokenizer *tok, int32_t id); /* id may be out of range */
    int (*size)(const clf_tokenizer *tok);
    clf_tokenizer_specials (*specials)(const clf_tokenizer *tok);
    int (*is_special)(const clf_tokenizer *tok, int32_t id); /* id may be out of range */
    void (*free)(clf_tokenizer *tok); /* the kind's own fields; the vocabulary is freed after */
} tok_kind;

extern const tok_kind clf_tok_wordlevel; /* tokenizer_wordlevel.c */
extern const tok_kind clf_tok_spm;       /* tokenizer_spm.c */
extern const tok_kind clf_tok_marian;    /* tokenizer_marian.c */

/* Flags of a vocabulary word. */
enum {
    TOK_ADDED = 1,     /* in "added_tokens": cut out of the raw text before pre-tokenizing */
    TOK_SPECIAL = 2,   /* "special": true (dropped by decode with skip_specials) */
    TOK_NORMALIZED = 4 /* "normalized": true (kept only to write the file back) */
};

struct added_token {
    const char *s; /* into the pool */
    size_t len;
    int32_t id;
};

struct clf_tokenizer {
    const tok_kind *kind; /* chosen once, when the tokenizer is made */
    /* The vocabulary (word level, Marian; unused by SentencePiece): ids 0..n-1. */
    int n;
    char *pool;  /* the words, each NUL-terminated, back to back */
    size_t *off; /* word of id i: pool + off[i], len[i] bytes */
    size_t *len;
    unsigned char *flags; /* TOK_* per id */
    int32_t *slots;       /* open addressing by FNV-1a, linear probing: ids, -1 empty */
    size_t cap;           /* power of two */
    clf_tokenizer_specials sp;
    /* Word level: the added tokens, longest first (first[b]: one starts with byte b), and
     * model.unk_token (possibly not in the vocabulary). */
    struct added_token *added;
    int n_added;
    unsigned char first[256];
    char *unk_token;
    /* SentencePiece (the whole tokenizer), Marian (cuts text into pieces and joins them). */
    clf_spm *spm;
};

/* ---- helpers of tokenizer_vocab.c ---- */

/* Frees tok (NULL is fine): the kind's fields (tok->kind->free), then the vocabulary. */
void clf_tok_free(clf_tokenizer *tok);

/* FNV-1a of s[0..n), the hash of every word table here. */
uint64_t clf_tok_hash(const char *s, size_t n);
/* Smallest power of two >= 2n (load factor <= 1/2), at least 16. */
size_t clf_tok_table_cap(size_t n);
/* p (room for *cap elements of elem bytes) with room for need > 0 elements: p itself, or p
 * moved by realloc with *cap doubled enough; NULL when out of memory (p is then intact). */
void *clf_tok_reserve(void *p, size_t *cap, size_t need, size_t elem);

/* CLF_ERR_INPUT "<path>: <n> words, more than the limit of ..." when a vocabulary of n ids
 * exceeds CLF_TOKENIZER_VOCAB_MAX; the one check of every kind. */
clf_status clf_tok_check_vocab_size(const char *path, size_t n);

/* A tokenizer of the given kind over the vocabulary words[0..n) (id = index; lens[i] bytes
 * each) with flags[i] (TOK_*; flags NULL: none). sp is the ids of the words named by
 * specials (unk, pad, sos, eos; -1 for one absent). A word that appears twice is an error
 * naming it and `name`. */
clf_status clf_tok_vocab_create(const tok_kind *kind, int n, const char *const *words,
                                const size_t *lens, const unsigned char *flags,
                                const char *const specials[4], const char *name,
                                clf_tokenizer **out);
/* A vocabulary being read, by id: w[i] (wl[i] bytes; NULL until set) with flags fl[i]. */
typedef struct tok_words {
    const char **w;
    size_t *wl;
    unsigned char *fl;
} tok_words;
/* Room for ids 0..n, all unset and without flags; -1 when out of memory (t then freed). */
int clf_tok_words_alloc(tok_words *t, size_t n);
void clf_tok_words_free(tok_words *t);

/* Puts every word of the JSON object vocab ({"word": id}) at its id in w/wl; ids must be
 * < total (else some id below them is missing) and unique. Messages start with
 * "<path>: model.vocab:" (the tokenizers library's model.vocab; Marian's vocab.json too). */
clf_status clf_tok_read_vocab(const char *path, struct json_t *vocab, size_t total, const char **w,
                              size_t *wl);

/* The vocabulary's entries of a tok_kind (word level, Marian). */
int32_t clf_tok_vocab_id_n(const clf_tokenizer *tok, const char *word, size_t len);
const char *clf_tok_vocab_word(const clf_tokenizer *tok, int32_t id);
int clf_tok_vocab_size(const clf_tokenizer *tok);
clf_tokenizer_specials clf_tok_vocab_specials(const clf_tokenizer *tok);
int clf_tok_vocab_is_special(const clf_tokenizer *tok, int32_t id);

/* ---- made by a kind, for another file ---- */

/* tokenizer_wordlevel.c: a word-level tokenizer over words[0..n) (as clf_tok_vocab_create)
 * with the given unk token; the specials are [PAD], [SOS], [EOS] and unk. */
clf_status clf_tok_wordlevel_create(int n, const char *const *words, const size_t *lens,
                                    const unsigned char *flags, const char *unk, const char *name,
                                    clf_tokenizer **out);

/* tokenizer_spm.c: reads a .model file. CLF_ERR_IO when unreadable, CLF_ERR_INPUT when the
 * library refuses it; messages start with the path. */
clf_status clf_tok_spm_read(const char *path, clf_spm **out);

#endif
