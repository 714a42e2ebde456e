/* clformer serve: the requests' bodies parsed into a struct, and the responses' JSON built.
 * No I/O and no model here (tests/fuzz/fuzz_serve_request.c runs the parsers on any bytes).
 *
 * Two request formats (README, "Serving"):
 *   - LibreTranslate's POST /translate (and /detect), as JSON or as a form
 *     (application/x-www-form-urlencoded or multipart/form-data, whose fields
 *     libmicrohttpd's post processor hands to serve_form_add): q (a string or, in JSON, an
 *     array of strings; in a form, one field or several), source, target, format ("text"),
 *     alternatives (an integer, or its decimal text), api_key;
 *   - the native POST /v1/translate, JSON: model, source, target, sentences (an array of
 *     strings), beam, n_best, max_len, length_penalty, api_key.
 * A parse either fills a serve_request or returns the HTTP status to answer (400 for what
 * is malformed or of the wrong type, 413 for what is over a limit) with a one-line reason. */
#ifndef CLF_SERVE_API_H
#define CLF_SERVE_API_H

#include <stddef.h>
#include <stdint.h>

/* Limits on the decoding options a request may ask for (README, "Limits"). */
#define SERVE_BEAM_MAX         16
#define SERVE_ALTERNATIVES_MAX 8
#define SERVE_MAX_LEN_MAX      65536
/* Longest model, language or key name in a request, in bytes. */
#define SERVE_NAME_MAX 256
/* Form fields other than q a request may have (q's count toward max_sentences). */
#define SERVE_FORM_OTHER_MAX 32

typedef enum { SERVE_API_LIBRE, SERVE_API_NATIVE } serve_api_kind;

struct json_t;

typedef struct serve_limits {
    int max_sentences; /* sentences (q's items) per request */
    int max_chars;     /* characters (UTF-8 code points) per sentence */
} serve_limits;

typedef struct serve_request {
    serve_api_kind kind;
    char *model;           /* native "model", or NULL */
    char *source, *target; /* NULL when not given; "auto" is kept as given */
    char *api_key;         /* the body's api_key, or NULL */
    int n;                 /* sentences */
    char **text;           /* [n], each NUL-terminated (a JSON string may hold a NUL: len) */
    size_t *len;           /* [n] bytes */
    int q_array;           /* LibreTranslate: q was an array (the answer is one too) */
    int alternatives;      /* LibreTranslate: 0.. SERVE_ALTERNATIVES_MAX */
    /* native decoding options; -1 (length_penalty: < -1.5, max_len: 0): the model's */
    int beam, n_best, max_len;
    float length_penalty;
} serve_request;

void serve_limits_default(serve_limits *l);

/* Parses the JSON body[0..len) (not NUL-terminated) of the given kind. Returns 0 with *req
 * filled (free it with serve_request_free), or the HTTP status with why[0..why_len) set and
 * *req empty. */
int serve_parse_request(serve_api_kind kind, const char *body, size_t len, const serve_limits *lim,
                        serve_request *req, char *why, size_t why_len);
void serve_request_free(serve_request *req);

/* A form body's fields, in order, as libmicrohttpd's post processor hands them over. */
typedef struct serve_form_field {
    char *key;
    char *value; /* [len] bytes and a NUL (a value may hold NULs of its own) */
    size_t len, cap;
} serve_form_field;

typedef struct serve_form {
    serve_form_field *fields;
    int n, cap;
} serve_form;

/* One call of the post processor's iterator: bytes data[0..size) at offset off of field
 * key's value. Offset 0 starts a field, a later offset continues the last one, which must
 * be key's and hold exactly off bytes. libmicrohttpd may announce a value before its first
 * byte (offset 0, no bytes) and then hand its bytes at offset 0 too: a field that is still
 * empty takes the bytes at offset 0 of its own key (so two empty fields of one key in a row
 * are one). Returns 0; 400 for a field without a name or an offset that continues nothing;
 * 413 past max_sentences + SERVE_FORM_OTHER_MAX fields; 500 out of memory. The values'
 * bytes are bounded by the body's, which the caller limits. */
int serve_form_add(serve_form *f, const char *key, const char *data, uint64_t off, size_t size,
                   const serve_limits *lim, char *why, size_t why_len);
void serve_form_free(serve_form *f);
/* The request of a form's fields (LibreTranslate's kind only: the native one is JSON). A
 * repeated q is a list (translatedText is then an array), a single q a string; fields not
 * known are ignored, as LibreTranslate does. Returns as serve_parse_request. */
int serve_parse_form(serve_api_kind kind, const serve_form *f, const serve_limits *lim,
                     serve_request *req, char *why, size_t why_len);

/* The English name of language code in Debian's iso-codes JSON (already parsed, borrowed):
 * the entry of iso3's "639-3" list whose alpha_2 or alpha_3 is code, else of iso2's "639-2"
 * list whose alpha_2, alpha_3 or bibliographic is; its "name". NULL when none is (or a
 * file is NULL or not of that shape). The result points into the JSON. */
const char *serve_language_name(const struct json_t *iso3, const struct json_t *iso2,
                                const char *code);

/* Code points of text[0..len) counted as UTF-8 lead bytes (what is not UTF-8 is refused
 * later, by the translator). */
size_t serve_utf8_chars(const char *text, size_t len);

/* Response bodies, malloc'd NUL-terminated JSON on one line ending in '\n'; NULL when out of
 * memory. */
char *serve_error_json(const char *message);
/* json's compact text and a '\n' (the form of every body above), or NULL; takes json's
 * reference (NULL is fine: out of memory before it). */
char *serve_json_line(struct json_t *json);

/* One sentence's answer: its hypotheses' texts and scores, best first. */
typedef struct serve_result {
    int n_hyps;
    const char *const *text; /* [n_hyps] */
    const float *score;      /* [n_hyps] */
} serve_result;

/* LibreTranslate's q is text, often a paragraph: each of its items is split into sentences
 * at line breaks and after a sentence's end (. ! ? and the ideographic and fullwidth
 * 。！？, with any closing quotes or brackets after them) that whitespace follows. The
 * sentences are translated one by one; the whitespace between them is kept verbatim, so an
 * item's answer has the line breaks of its text. An abbreviation followed by a space
 * ("e.g. this") splits too. */
typedef struct serve_piece {
    int sentence; /* the split request's sentence, or -1: nothing (whitespace first) */
    char *sep;    /* the whitespace after it, verbatim (malloc'd) */
    size_t sep_len;
} serve_piece;

typedef struct serve_split {
    int n_items;        /* the request's q items */
    int *first, *count; /* [n_items]: item i is pieces[first[i] .. first[i] + count[i]) */
    serve_piece *pieces;
    int n_pieces;
} serve_split;

/* Replaces q's sentences with their split pieces (q->n, text, len), recording in *sp how
 * to join them back. Returns 0, 413 with why when there are more than max_sentences
 * pieces, or 500 (out of memory; q is then unchanged). */
int serve_split_request(serve_request *q, int max_sentences, serve_split *sp, char *why,
                        size_t why_len);
/* Item i's text: its pieces' texts (text[k] for the split sentence k) joined with the
 * whitespace that followed each; malloc'd, or NULL. */
char *serve_split_join(const serve_split *sp, int item, const char *const *text);
void serve_split_free(serve_split *sp);

/* LibreTranslate's answer: translatedText (a string, or an array when q was one) and, when
 * alternatives were asked for, alternatives (a list, or a list of lists); detected: the
 * language chosen for source "auto", else NULL. */
char *serve_libre_response(const serve_request *req, const serve_result *res, const char *detected);
/* The native answer: {"model", "translations": [{"text", "hypotheses": [{"text","score"}]}]} */
char *serve_native_response(const char *model, const serve_result *res, int n);

#endif
