/* Fuzz target: `clformer serve`'s request parser (tools/serve_api.c). The first byte picks
 * the format (byte % 3: LibreTranslate JSON, a LibreTranslate form's fields, the native
 * /v1/translate JSON; byte 3: iso-codes JSON for language names), the rest is the body.
 *
 * A form's fields come as libmicrohttpd's post processor hands them to serve_form_add
 * (its own parse of urlencoded and multipart bytes is libmicrohttpd's): records split at
 * 0x1e bytes, each a mode byte, the key, a 0x1f byte and the value's bytes (no 0x1f: the
 * record is all key, no bytes). Mode & 1: the bytes continue the last field (its length
 * as the offset, else 0); mode & 2: at an offset one past it (refused unless at 0). Then
 * serve_parse_form reads the fields.
 *
 * An accepted request must respect the limits
 * (sentences, characters per sentence), hold NUL-terminated sentences of their stated
 * length and options in their ranges, and its answer (each sentence's hypotheses a fixed
 * text) must be JSON with one translation per sentence; a refused one must have a 400 or
 * 413 and a one-line reason that serve_error_json turns into JSON. A LibreTranslate q is
 * then split into sentences (check_split). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "serve_api.h"

#define MAX_SENTENCES 8
#define MAX_CHARS     64
#define KEY_MAX       64

static void finding(const char *what)
{
    fprintf(stderr, "fuzz_serve_request: %s\n", what);
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

/* text must be one JSON value with the answer's shape for req. */
static void check_answer(const char *text, const serve_request *req)
{
    if (!text)
        finding("no answer for an accepted request");
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    if (!j)
        finding("the answer is not JSON");
    if (strchr(text, '\n') != text + strlen(text) - 1)
        finding("the answer is not one line");
    if (req->kind == SERVE_API_NATIVE) {
        if (json_array_size(json_object_get(j, "translations")) != (size_t)req->n)
            finding("translations: not one per sentence");
    } else {
        json_t *t = json_object_get(j, "translatedText");
        if (req->q_array ? json_array_size(t) != (size_t)req->n : !json_is_string(t))
            finding("translatedText: not the shape of q");
    }
    json_decref(j);
}

/* q split into sentences (serve_split_request): every sentence non-empty, without a line
 * break, not starting or ending with whitespace; joining the untranslated sentences back
 * gives each item's text byte for byte (items without a NUL, which strlen would cut). */
static void check_split(serve_request *req)
{
    const int n = req->n;
    char *orig[MAX_SENTENCES];
    size_t orig_len[MAX_SENTENCES];
    for (int i = 0; i < n; i++) {
        orig_len[i] = req->len[i];
        if (!(orig[i] = malloc(orig_len[i] + 1)))
            finding("out of memory");
        memcpy(orig[i], req->text[i], orig_len[i] + 1);
    }
    serve_split sp;
    char why[512];
    const int max = 1 << 20;
    int code = serve_split_request(req, max, &sp, why, sizeof why);
    if (code != 0)
        finding("splitting an accepted request failed");
    if (sp.n_items != n)
        finding("split: not one item per q entry");
    for (int k = 0; k < req->n; k++) {
        const char *t = req->text[k];
        const size_t l = req->len[k];
        if (l == 0 || t[l] != '\0' || memchr(t, '\n', l) || memchr(t, '\r', l) ||
            (t[0] && strchr(" \t\f\v", t[0])) || (t[l - 1] && strchr(" \t\f\v", t[l - 1])))
            finding("split: a sentence empty, with a line break or edged with whitespace");
    }
    for (int i = 0; i < n; i++) {
        if (memchr(orig[i], '\0', orig_len[i]))
            continue;
        char *joined = serve_split_join(&sp, i, (const char *const *)req->text);
        if (!joined || strlen(joined) != orig_len[i] || memcmp(joined, orig[i], orig_len[i]) != 0)
            finding("split: the sentences joined back differ from the text");
        free(joined);
    }
    for (int i = 0; i < n; i++)
        free(orig[i]);
    serve_split_free(&sp);
}

/* The form records of body[0..len) (above) through serve_form_add, then serve_parse_form. */
static int parse_form_records(const uint8_t *body, size_t len, const serve_limits *lim,
                              serve_request *req, char *why, size_t why_len)
{
    serve_form form = {0};
    int code = 0;
    for (size_t at = 0; at < len && code == 0;) {
        const uint8_t *end = memchr(body + at, 0x1e, len - at);
        const size_t rec_end = end ? (size_t)(end - body) : len;
        const uint8_t mode = body[at];
        const size_t k0 = at + 1 < rec_end ? at + 1 : rec_end;
        const uint8_t *sep = memchr(body + k0, 0x1f, rec_end - k0);
        const size_t k1 = sep ? (size_t)(sep - body) : rec_end;
        const size_t v0 = sep ? k1 + 1 : rec_end;
        char key[KEY_MAX + 1];
        size_t klen = k1 - k0 < KEY_MAX ? k1 - k0 : KEY_MAX;
        memcpy(key, body + k0, klen);
        key[klen] = '\0'; /* a key holding a NUL is cut there, as a C string is */
        uint64_t off = 0;
        if ((mode & 1) && form.n > 0)
            off = form.fields[form.n - 1].len;
        if (mode & 2)
            off++;
        code = serve_form_add(&form, key, (const char *)body + v0, off, rec_end - v0, lim, why,
                              why_len);
        if (code != 0 && code != 400 && code != 413)
            finding("serve_form_add: a refusal that is neither 400 nor 413");
        if (code == 0 && form.n > MAX_SENTENCES + SERVE_FORM_OTHER_MAX)
            finding("serve_form_add: more fields than its limit");
        for (int i = 0; code == 0 && i < form.n; i++)
            if (form.fields[i].value[form.fields[i].len] != '\0')
                finding("serve_form_add: a value not NUL-terminated at its length");
        at = rec_end + 1;
    }
    if (code == 0)
        code = serve_parse_form(SERVE_API_LIBRE, &form, lim, req, why, why_len);
    else
        memset(req, 0, sizeof *req);
    serve_form_free(&form);
    return code;
}

/* iso-codes JSON: a few codes named from it as both files (639-3 and 639-2). */
static void check_names(const uint8_t *body, size_t len)
{
    static const char *const codes[] = {"en", "de", "ast", "ger", "", "ns"};
    json_t *j = json_loadb((const char *)body, len, 0, NULL);
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *a = serve_language_name(j, NULL, codes[i]);
        const char *b = serve_language_name(NULL, j, codes[i]);
        const char *c = serve_language_name(j, j, codes[i]);
        if ((a && !*a) || (b && !*b) || (c && !*c) || (a && !c))
            finding("serve_language_name: an empty name, or 639-3's lost with both");
    }
    json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] == 3) {
        check_names(data + 1, size - 1);
        return 0;
    }
    static const serve_api_kind kinds[3] = {SERVE_API_LIBRE, SERVE_API_LIBRE, SERVE_API_NATIVE};
    const int f = data[0] % 3;
    serve_limits lim = {MAX_SENTENCES, MAX_CHARS};
    serve_request req;
    char why[512];
    why[0] = '\0';
    int code = f == 1 ? parse_form_records(data + 1, size - 1, &lim, &req, why, sizeof why)
                      : serve_parse_request(kinds[f], (const char *)data + 1, size - 1, &lim, &req,
                                            why, sizeof why);
    if (code != 0) {
        if (code != 400 && code != 413)
            finding("a refusal that is neither 400 nor 413");
        if (!why[0] || strchr(why, '\n'))
            finding("a refusal's reason is empty or not one line");
        if (req.n != 0 || req.text)
            finding("a refused request holds sentences");
        char *e = serve_error_json(why);
        if (!e)
            finding("no error JSON");
        json_t *j = json_loads(e, 0, NULL);
        if (!j || !json_is_string(json_object_get(j, "error")))
            finding("the error is not {\"error\": string}");
        json_decref(j);
        free(e);
        return 0;
    }
    if (req.n < 0 || req.n > MAX_SENTENCES)
        finding("more sentences than the limit");
    if (req.kind == SERVE_API_LIBRE && req.n == 0)
        finding("an accepted LibreTranslate request without q");
    for (int i = 0; i < req.n; i++) {
        if (req.text[i][req.len[i]] != '\0')
            finding("a sentence not NUL-terminated at its length");
        if (serve_utf8_chars(req.text[i], req.len[i]) > MAX_CHARS)
            finding("a sentence past the character limit");
    }
    if (req.alternatives < 0 || req.alternatives > SERVE_ALTERNATIVES_MAX ||
        req.beam > SERVE_BEAM_MAX || req.n_best > SERVE_BEAM_MAX ||
        (req.beam > 0 && req.n_best > req.beam) || req.max_len < 0 ||
        req.max_len > SERVE_MAX_LEN_MAX)
        finding("an option out of its range");
    /* each sentence answered with 1 + alternatives hypotheses */
    const char *texts[1 + SERVE_ALTERNATIVES_MAX];
    float scores[1 + SERVE_ALTERNATIVES_MAX];
    for (int h = 0; h <= SERVE_ALTERNATIVES_MAX; h++) {
        texts[h] = h ? "eine Alternative" : "eine Übersetzung";
        scores[h] = -0.5f * (float)h;
    }
    serve_result res[MAX_SENTENCES];
    for (int i = 0; i < req.n; i++)
        res[i] = (serve_result){1 + req.alternatives, texts, scores};
    char *answer = req.kind == SERVE_API_LIBRE ? serve_libre_response(&req, res, NULL)
                                               : serve_native_response("model", res, req.n);
    check_answer(answer, &req);
    free(answer);
    if (req.kind == SERVE_API_LIBRE)
        check_split(&req);
    serve_request_free(&req);
    return 0;
}
