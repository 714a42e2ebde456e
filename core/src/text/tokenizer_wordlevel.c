/* tokenizer_wordlevel.c - the word-level kind of clf_tokenizer (see clformer/tokenizer.h):
 * the tokenizers library's WordLevel model with the Whitespace pre-tokenizer (pretokenize.c),
 * its added tokens, encode/decode, and its file, tokenizer.json. */
#include "clformer/fs.h"
#include "clformer/tokenizer.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "io/json_jansson.h"
#include "text/pretokenize.h"
#include "text/tokenizer_kinds.h"

static void wordlevel_free(clf_tokenizer *tok)
{
    free(tok->added);
    free(tok->unk_token);
}

/* Longer added tokens first, so that the first match at a position is the longest. */
static int by_length_desc(const void *a, const void *b)
{
    const struct added_token *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* tok->added: the words flagged TOK_ADDED (but empty ones), longest first. */
static clf_status index_added(clf_tokenizer *tok, const char *name)
{
    for (int i = 0; i < tok->n; i++)
        if ((tok->flags[i] & TOK_ADDED) && tok->len[i] > 0)
            tok->n_added++;
    if (tok->n_added == 0)
        return CLF_OK;
    if (!(tok->added = malloc((size_t)tok->n_added * sizeof *tok->added)))
        return clf_error(CLF_ERR_NOMEM, "%s: out of memory", name);
    int k = 0;
    for (int i = 0; i < tok->n; i++)
        if ((tok->flags[i] & TOK_ADDED) && tok->len[i] > 0) {
            tok->added[k++] = (struct added_token){tok->pool + tok->off[i], tok->len[i], i};
            tok->first[(unsigned char)tok->pool[tok->off[i]]] = 1;
        }
    qsort(tok->added, (size_t)k, sizeof *tok->added, by_length_desc);
    return CLF_OK;
}

clf_status clf_tok_wordlevel_create(int n, const char *const *words, const size_t *lens,
                                    const unsigned char *flags, const char *unk, const char *name,
                                    clf_tokenizer **out)
{
    const char *const specials[4] = {unk, "[PAD]", "[SOS]", "[EOS]"};
    clf_status st =
        clf_tok_vocab_create(&clf_tok_wordlevel, n, words, lens, flags, specials, name, out);
    if (st != CLF_OK)
        return st;
    if (!((*out)->unk_token = strdup(unk)))
        st = clf_error(CLF_ERR_NOMEM, "%s: out of memory for %d words", name, n);
    else
        st = index_added(*out, name);
    if (st != CLF_OK) {
        clf_tok_free(*out);
        *out = NULL;
    }
    return st;
}

/* ---- encoding and decoding ---- */

/* Position of the leftmost added token in s[from..end) (the longest one there), or end. */
static size_t find_added(const clf_tokenizer *tok, const unsigned char *s, size_t from, size_t end,
                         const struct added_token **which)
{
    if (tok->n_added == 0)
        return end;
    for (size_t i = from; i < end; i++) {
        if (!tok->first[s[i]])
            continue;
        for (int k = 0; k < tok->n_added; k++) {
            const struct added_token *a = &tok->added[k];
            if (a->len <= end - i && memcmp(s + i, a->s, a->len) == 0) {
                *which = a;
                return i;
            }
        }
    }
    return end;
}

typedef struct id_list {
    int32_t *v;
    size_t n, cap;
} id_list;

static int push_id(id_list *l, int32_t id)
{
    int32_t *v = clf_tok_reserve(l->v, &l->cap, l->n + 1, sizeof *v);
    if (!v)
        return -1;
    l->v = v;
    l->v[l->n++] = id;
    return 0;
}

/* The added tokens cut out first, then the words of the rest, unk_token's id for a word not
 * in the vocabulary. */
static clf_status wordlevel_encode(const clf_tokenizer *tok, const char *text, size_t len,
                                   int32_t **ids, int *n)
{
    const unsigned char *s = (const unsigned char *)text;
    id_list out = {0};
    size_t i = 0;
    while (i < len) {
        const struct added_token *a = NULL;
        size_t cut = find_added(tok, s, i, len, &a);
        size_t pos = i, start, wlen;
        while (clf_pretokenize_next(s, cut, &pos, &start, &wlen)) {
            int32_t id = clf_tok_vocab_id_n(tok, text + start, wlen);
            if (id < 0 && (id = tok->sp.unk) < 0) {
                free(out.v);
                return clf_error(CLF_ERR_INPUT,
                                 "tokenizer encode: '%.*s' is not in the vocabulary, which "
                                 "has no unk_token '%s'",
                                 (int)wlen, text + start, tok->unk_token);
            }
            if (push_id(&out, id) != 0)
                goto nomem;
        }
        if (cut == len)
            break;
        if (push_id(&out, a->id) != 0)
            goto nomem;
        i = cut + a->len;
    }
    *ids = out.v;
    *n = (int)out.n;
    return CLF_OK;
nomem:
    free(out.v);
    return clf_error(CLF_ERR_NOMEM, "tokenizer encode: out of memory");
}

/* The words joined by single spaces. */
static clf_status wordlevel_decode(const clf_tokenizer *tok, const int32_t *ids, int n,
                                   int skip_specials, char **text)
{
    size_t total = 1;
    for (int i = 0; i < n; i++)
        total += tok->len[ids[i]] + 1;
    char *out = malloc(total);
    if (!out)
        return clf_error(CLF_ERR_NOMEM, "tokenizer decode: out of memory");
    size_t at = 0;
    int first = 1;
    for (int i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (skip_specials && (tok->flags[id] & TOK_SPECIAL))
            continue;
        if (!first)
            out[at++] = ' ';
        first = 0;
        memcpy(out + at, tok->pool + tok->off[id], tok->len[id]);
        at += tok->len[id];
    }
    out[at] = '\0';
    *text = out;
    return CLF_OK;
}

/* ---- tokenizer.json ---- */

/* "null" or the "type" of a component object, for messages. */
static const char *component_type(const json_t *v)
{
    if (!v || json_is_null(v))
        return "null";
    const json_t *t = json_object_get(v, "type");
    return json_is_string(t) ? json_string_value(t) : clf_json_type_name(v);
}

/* A component that clformer does not implement must be absent or null. */
static clf_status check_absent(const char *path, const json_t *root, const char *key,
                               const char *why)
{
    const json_t *v = json_object_get(root, key);
    if (v && !json_is_null(v))
        return clf_error(CLF_ERR_INPUT, "%s: %s '%s' is not supported (%s)", path, key,
                         component_type(v), why);
    return CLF_OK;
}

static clf_status check_header(const char *path, const json_t *root)
{
    clf_status st;
    if (!json_is_object(root))
        return clf_error(CLF_ERR_INPUT, "%s: not a tokenizer file: the top level is %s %s", path,
                         json_is_array(root) ? "an" : "a", clf_json_type_name(root));
    const json_t *v = json_object_get(root, "version");
    if (v && (!json_is_string(v) || strcmp(json_string_value(v), "1.0") != 0))
        return clf_error(CLF_ERR_INPUT,
                         "%s: unknown tokenizer file version %s%s%s (expected "
                         "\"1.0\")",
                         path, json_is_string(v) ? "'" : "",
                         json_is_string(v) ? json_string_value(v) : clf_json_type_name(v),
                         json_is_string(v) ? "'" : "");
    const json_t *model = json_object_get(root, "model");
    if (!json_is_object(model))
        return clf_error(CLF_ERR_INPUT, "%s: not a tokenizer file: no \"model\" object", path);
    const json_t *type = json_object_get(model, "type");
    if (!json_is_string(type))
        return clf_error(CLF_ERR_INPUT,
                         "%s: the model has no \"type\"; clformer reads WordLevel tokenizers "
                         "only",
                         path);
    if (strcmp(json_string_value(type), "WordLevel") != 0)
        return clf_error(CLF_ERR_INPUT,
                         "%s: the model type is '%s'; clformer reads WordLevel tokenizers only",
                         path, json_string_value(type));
    if ((st = check_absent(path, root, "normalizer", "clformer applies no normalizer")) ||
        (st = check_absent(path, root, "post_processor",
                           "clformer adds [SOS]/[EOS] itself, not through the tokenizer")) ||
        (st = check_absent(path, root, "decoder", "clformer joins words with spaces")))
        return st;
    const json_t *pre = json_object_get(root, "pre_tokenizer");
    if (strcmp(component_type(pre), "Whitespace") != 0)
        return clf_error(CLF_ERR_INPUT,
                         "%s: pre_tokenizer '%s' is not supported (clformer implements "
                         "Whitespace only)",
                         path, component_type(pre));
    return CLF_OK;
}

static int get_flag(const json_t *obj, const char *key)
{
    return json_is_true(json_object_get(obj, key));
}

/* Puts every entry of added_tokens[0..n_added) at its id in w/wl/fl: an added token may
 * repeat a word of model.vocab at the same id, and fills an id model.vocab leaves out. */
static clf_status read_added(const char *path, const json_t *added, size_t n_added, size_t total,
                             const char **w, size_t *wl, unsigned char *fl)
{
    for (size_t i = 0; i < n_added; i++) {
        const json_t *a = json_array_get(added, i);
        const json_t *id = json_object_get(a, "id"), *content = json_object_get(a, "content");
        if (!json_is_object(a) || !json_is_integer(id) || json_integer_value(id) < 0 ||
            !json_is_string(content))
            return clf_error(CLF_ERR_INPUT,
                             "%s: added_tokens[%zu] needs an integer \"id\" >= 0 and a string "
                             "\"content\"",
                             path, i);
        const char *opt[3] = {"single_word", "lstrip", "rstrip"};
        for (int k = 0; k < 3; k++)
            if (get_flag(a, opt[k]))
                return clf_error(CLF_ERR_INPUT,
                                 "%s: added token '%s' sets \"%s\", which clformer does not "
                                 "support",
                                 path, json_string_value(content), opt[k]);
        const char *text = json_string_value(content);
        size_t text_len = json_string_length(content);
        int64_t k = json_integer_value(id);
        if ((uint64_t)k >= total)
            return clf_error(CLF_ERR_INPUT,
                             "%s: added token '%s' has id %lld, beyond the %zu entries of the "
                             "file: ids must run 0..n-1 without gaps",
                             path, text, (long long)k, total);
        if (w[k] && (wl[k] != text_len || memcmp(w[k], text, wl[k]) != 0))
            return clf_error(CLF_ERR_INPUT, "%s: added token '%s' has id %lld, which is '%s'", path,
                             text, (long long)k, w[k]);
        w[k] = text;
        wl[k] = text_len;
        fl[k] = TOK_ADDED | (get_flag(a, "special") ? TOK_SPECIAL : 0) |
                (get_flag(a, "normalized") ? TOK_NORMALIZED : 0);
    }
    return CLF_OK;
}

static clf_status wordlevel_load(const char *path, clf_tokenizer **out)
{
    clf_status st;
    *out = NULL;
    json_t *root = NULL;
    tok_words t = {0};
    if ((st = clf_json_parse_file(path, CLF_TOKENIZER_JSON_MAX, &root)) != CLF_OK)
        return st;
    if ((st = check_header(path, root)) != CLF_OK)
        goto done;
    json_t *model = json_object_get(root, "model");
    json_t *vocab = json_object_get(model, "vocab");
    const json_t *unk = json_object_get(model, "unk_token");
    const json_t *added = json_object_get(root, "added_tokens");
    if (!json_is_object(vocab)) {
        st = clf_error(CLF_ERR_INPUT, "%s: model.vocab is missing or not an object", path);
        goto done;
    }
    if (!json_is_string(unk)) {
        st = clf_error(CLF_ERR_INPUT, "%s: model.unk_token is missing or not a string", path);
        goto done;
    }
    if (added && !json_is_null(added) && !json_is_array(added)) {
        st = clf_error(CLF_ERR_INPUT, "%s: added_tokens is not an array", path);
        goto done;
    }
    size_t n_added = json_is_array(added) ? json_array_size(added) : 0;
    size_t total = json_object_size(vocab) + n_added;
    if ((st = clf_tok_check_vocab_size(path, total)) != CLF_OK)
        goto done;
    if (clf_tok_words_alloc(&t, total) != 0) {
        st = clf_error(CLF_ERR_NOMEM, "%s: out of memory for %zu words", path, total);
        goto done;
    }
    if ((st = clf_tok_read_vocab(path, vocab, total, t.w, t.wl)) != CLF_OK ||
        (st = read_added(path, added, n_added, total, t.w, t.wl, t.fl)) != CLF_OK)
        goto done;
    size_t n = total;
    while (n > 0 && !t.w[n - 1])
        n--;
    for (size_t id = 0; id < n; id++)
        if (!t.w[id]) {
            st = clf_error(CLF_ERR_INPUT,
                           "%s: no word has id %zu, but '%s' has id %zu: ids must run 0..n-1 "
                           "without gaps",
                           path, id, t.w[n - 1], n - 1);
            goto done;
        }
    st = clf_tok_wordlevel_create((int)n, t.w, t.wl, t.fl, json_string_value(unk), path, out);
done:
    clf_tok_words_free(&t);
    json_decref(root);
    return st;
}

/* The file as the library's Tokenizer.save writes it (serde_json's pretty printer: two
 * spaces of indent, "key": value, no newline at the end), which is Jansson's JSON_INDENT(2)
 * with members in insertion order. */
typedef struct json_text {
    char *data; /* malloc'd by Jansson */
    size_t len;
    int failed; /* out of memory */
} json_text;

static json_t *added_token_json(const clf_tokenizer *tok, int i)
{
    json_t *a = json_object();
    int bad = !a;
    bad |= json_object_set_new(a, "id", json_integer(i));
    bad |= json_object_set_new(a, "content", json_stringn(tok->pool + tok->off[i], tok->len[i]));
    bad |= json_object_set_new(a, "single_word", json_false());
    bad |= json_object_set_new(a, "lstrip", json_false());
    bad |= json_object_set_new(a, "rstrip", json_false());
    bad |= json_object_set_new(a, "normalized", json_boolean(tok->flags[i] & TOK_NORMALIZED));
    bad |= json_object_set_new(a, "special", json_boolean(tok->flags[i] & TOK_SPECIAL));
    if (bad) {
        json_decref(a);
        return NULL;
    }
    return a;
}

static void write_json(const clf_tokenizer *tok, json_text *b)
{
    json_t *root = json_object(), *added = json_array(), *vocab = json_object();
    json_t *pre = json_pack("{s:s}", "type", "Whitespace");
    int bad = !root || !added || !vocab || !pre;
    for (int i = 0; i < tok->n && !bad; i++)
        if (tok->flags[i] & TOK_ADDED)
            bad |= json_array_append_new(added, added_token_json(tok, i));
    for (int i = 0; i < tok->n && !bad; i++)
        bad |= json_object_setn_new(vocab, tok->pool + tok->off[i], tok->len[i], json_integer(i));
    json_t *model = json_pack("{s:s, s:o, s:s}", "type", "WordLevel", "vocab", vocab, "unk_token",
                              tok->unk_token); /* takes vocab */
    bad |= json_object_set_new(root, "version", json_string("1.0"));
    bad |= json_object_set_new(root, "truncation", json_null());
    bad |= json_object_set_new(root, "padding", json_null());
    bad |= json_object_set_new(root, "added_tokens", added);
    bad |= json_object_set_new(root, "normalizer", json_null());
    bad |= json_object_set_new(root, "pre_tokenizer", pre);
    bad |= json_object_set_new(root, "post_processor", json_null());
    bad |= json_object_set_new(root, "decoder", json_null());
    bad |= json_object_set_new(root, "model", model);
    b->data = bad ? NULL : json_dumps(root, JSON_INDENT(2));
    b->len = b->data ? strlen(b->data) : 0;
    b->failed = !b->data;
    json_decref(root);
}

static clf_status wordlevel_save(const clf_tokenizer *tok, const char *path)
{
    json_text b = {0};
    write_json(tok, &b);
    clf_status st = b.failed
                        ? clf_error(CLF_ERR_NOMEM, "%s: out of memory writing the tokenizer", path)
                        : clf_fs_write_atomic_bytes(path, b.data, b.len);
    free(b.data);
    return st;
}

const tok_kind clf_tok_wordlevel = {
    .name = "word level",
    .kind = CLF_TOKENIZER_WORD_LEVEL,
    .load = wordlevel_load,
    .save = wordlevel_save,
    .encode = wordlevel_encode,
    .decode = wordlevel_decode,
    .id_n = clf_tok_vocab_id_n,
    .word = clf_tok_vocab_word,
    .size = clf_tok_vocab_size,
    .specials = clf_tok_vocab_specials,
    .is_special = clf_tok_vocab_is_special,
    .free = wordlevel_free,
};
