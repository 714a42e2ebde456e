/* Fuzz target: the `clformer translate` input path. The input is what stdin would hold:
 * it is cut into lines as getline() cuts them, each line is encoded with the source
 * vocabulary, checked against the model's max_len, framed [SOS] x [EOS] [PAD]... in
 * batches and decoded by a tiny model on the CPU backend, and the output words come back
 * through the target vocabulary, as tools/cmd_translate.c's read_batch, decode_batch and
 * hyp_text do. Every input line must give exactly one output line: decoded, or empty for
 * an empty, blank or refused line (not UTF-8, a NUL byte, more than LINE_MAX bytes, longer
 * than the model's positions), as the CLI's input policy says (README, "Translate input"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/backend.h"
#include "clformer/config.h"
#include "clformer/decode.h"
#include "clformer/model.h"
#include "clformer/tokenizer.h"
#include "clformer/weights.h"
#include "fuzz_util.h"

#define BATCH   4  /* lines decoded together (the CLI's --batch) */
#define MAX_LEN 16 /* the model's positions: a line of more than 14 tokens is refused */
/* The CLI's default output limit: 2 * source tokens + 10, capped at max_len - 1. */
#define MAX_LEN_FACTOR 2
#define MAX_LEN_EXTRA  10
/* The CLI's TRANSLATE_LINE_MAX: bytes of a line read, a longer one is refused. */
#define LINE_MAX_BYTES (1 << 20)

/* The process's model, made once (LLVMFuzzerInitialize) and kept to the end. */
static struct {
    clf_config cfg;
    clf_tokenizer *tok; /* both sides: the model's vocabularies are this one's */
    clf_tokenizer_specials sp;
    const clf_backend_api *api;
    clf_backend *be;
    clf_model *model;
} fz;

static const char *const corpus[] = {
    "Hello, world!", "Grüße aus Berlin.", "你好 世界", "a b c d e f g h", "x_y 12 ½ €",
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    FUZZ_CHECK(clf_tokenizer_build(corpus, sizeof corpus / sizeof *corpus, 1, &fz.tok) == CLF_OK,
               "building the vocabulary failed");
    fz.sp = clf_tokenizer_special_ids(fz.tok);
    /* tgt_vocab 2 past the vocabulary: the model can emit ids with no word, which the CLI
     * leaves out (a model with a rounded-up vocabulary) */
    char yaml[512];
    int size = clf_tokenizer_size(fz.tok);
    snprintf(yaml, sizeof yaml,
             "model: {src_vocab: %d, tgt_vocab: %d, max_len: %d, d_model: 8, layers: 1,\n"
             "        heads: 2, d_ff: 8}\n"
             "backend: {name: cpu, threads: 1}\n",
             size, size + 2, MAX_LEN);
    fuzz_cpu_model(yaml, &fz.cfg, &fz.api, &fz.be, &fz.model);
    return 0;
}

typedef struct line_ids {
    int32_t *ids;
    int n;
} line_ids;

/* Turns one hypothesis into words as the CLI does (ids past the vocabulary left out). */
static void check_output(const clf_hypothesis *h)
{
    int size = clf_tokenizer_size(fz.tok), kept = 0;
    int32_t *ids = malloc((size_t)(h->len > 0 ? h->len : 1) * sizeof *ids);
    FUZZ_CHECK(ids, "out of memory");
    for (int i = 0; i < h->len; i++) {
        FUZZ_CHECK(h->tokens[i] >= 0 && h->tokens[i] < fz.cfg.model.tgt_vocab,
                   "the decoder emitted an id outside the model's vocabulary");
        if (h->tokens[i] < size)
            ids[kept++] = h->tokens[i];
    }
    char *text = NULL;
    FUZZ_CHECK(clf_tokenizer_decode(fz.tok, ids, kept, 1, &text) == CLF_OK,
               "decoding the output ids failed");
    free(text);
    free(ids);
}

/* Frames and decodes lines[0..count); each non-empty line must get one hypothesis.
 * Returns the output lines: one per line. */
static int decode_batch(const line_ids *lines, int count, int beam)
{
    int rows = 0, longest = 0;
    for (int i = 0; i < count; i++) {
        rows += lines[i].n > 0;
        if (lines[i].n > longest)
            longest = lines[i].n;
    }
    if (rows == 0)
        return count; /* every line empty: empty output lines, nothing decoded */
    const int S = longest + 2;
    int32_t *src = malloc((size_t)rows * S * sizeof *src);
    FUZZ_CHECK(src, "out of memory");
    int r = 0;
    for (int i = 0; i < count; i++) {
        if (lines[i].n == 0)
            continue;
        int32_t *row = src + (size_t)r++ * S;
        row[0] = fz.sp.sos;
        memcpy(row + 1, lines[i].ids, (size_t)lines[i].n * sizeof *row);
        row[lines[i].n + 1] = fz.sp.eos;
        for (int j = lines[i].n + 2; j < S; j++)
            row[j] = fz.cfg.model.pad_id;
    }
    clf_decode_opts o;
    clf_decode_opts_default(&fz.cfg.model, &o);
    o.beam = beam;
    o.sos_id = fz.sp.sos;
    o.eos_id = fz.sp.eos;
    o.max_len = MAX_LEN_FACTOR * longest + MAX_LEN_EXTRA;
    if (o.max_len > MAX_LEN - 1)
        o.max_len = MAX_LEN - 1;
    clf_decode_result res = {0};
    FUZZ_CHECK(clf_decode(fz.model, src, rows, S, &o, &res) == CLF_OK,
               "decoding accepted lines failed");
    FUZZ_CHECK(res.batch == rows && res.n_best == 1, "one hypothesis per decoded line expected");
    for (int i = 0; i < rows; i++)
        check_output(&res.hyps[i]);
    clf_decode_result_free(&res);
    free(src);
    return count;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    clf_clear_error(); /* a finding names this input's last error, not an earlier one's */
    line_ids lines[BATCH];
    int count = 0;
    long in_lines = 0, out_lines = 0;
    const int beam = (size & 1) ? 2 : 1; /* greedy and beam search both see inputs */
    size_t pos = 0;
    while (pos < size) {
        /* one line as the CLI reads it, less its '\n' (and a '\r' before it) */
        const uint8_t *nl = memchr(data + pos, '\n', size - pos);
        size_t len = nl ? (size_t)(nl - (data + pos)) : size - pos;
        const char *text = (const char *)data + pos;
        pos += len + (nl != NULL);
        in_lines++;
        size_t kept = len > LINE_MAX_BYTES ? LINE_MAX_BYTES : len;
        if (kept > 0 && text[kept - 1] == '\r')
            kept--;
        line_ids *l = &lines[count++];
        l->ids = NULL;
        l->n = 0;
        /* refused (an empty output line): more than LINE_MAX_BYTES, a NUL byte, not UTF-8
         * (encode fails), or longer than the model's positions (never cut) */
        if (len <= LINE_MAX_BYTES && !memchr(text, '\0', kept) &&
            clf_tokenizer_encode(fz.tok, text, kept, &l->ids, &l->n) == CLF_OK) {
            FUZZ_CHECK(l->n >= 0 && (l->n == 0) == (l->ids == NULL), "encode's result is odd");
            if (l->n + 2 > MAX_LEN) {
                free(l->ids);
                l->ids = NULL;
                l->n = 0;
            }
        } else {
            l->ids = NULL;
            l->n = 0;
        }
        if (count == BATCH || pos >= size) {
            out_lines += decode_batch(lines, count, beam);
            for (int i = 0; i < count; i++)
                free(lines[i].ids);
            count = 0;
        }
    }
    FUZZ_CHECK(out_lines == in_lines, "an input line without its output line");
    for (int i = 0; i < count; i++)
        free(lines[i].ids);
    return 0;
}
