/* Fuzz target: the `clformer translate` input path, the translator's
 * (clformer/translator.h). The input is what stdin would hold: it is cut into lines as the
 * CLI cuts them (a '\r' before the '\n' dropped; one byte past the 1 MiB limit kept, so that
 * the line is refused), given in batches to clf_translator_translate on a tiny model
 * directory (written once per process: a random model on the CPU backend, word-level
 * vocabularies) and each result checked: translated (n_best hypotheses, one line of text,
 * ids in the model's range) or refused (CLF_ERR_INPUT with a one-line reason) or empty (an
 * empty or blank line), as the CLI's input policy says (README, "Translate input"). The
 * same bytes, as ids (byte - 2, some past the vocabulary), go through
 * clf_translator_translate_ids, which must refuse exactly the rows with an unknown id. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clformer/config.h"
#include "clformer/tokenizer.h"
#include "clformer/translator.h"
#include "clformer/weights.h"
#include "fuzz_util.h"

#define BATCH   4  /* lines translated together (the CLI's --batch) */
#define MAX_LEN 16 /* the model's positions: a line of more than 14 tokens is refused */

/* The process's translator and its directory, made once (LLVMFuzzerInitialize). */
static struct {
    char dir[64];
    clf_translator *t;
    int src_words, tgt_vocab;
} fz = {.dir = "/tmp/clf-fuzz-translate-XXXXXX"};

static const char *const corpus[] = {
    "Hello, world!", "Grüße aus Berlin.", "你好 世界", "a b c d e f g h", "x_y 12 ½ €",
};

static const char *in_dir(const char *name)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", fz.dir, name);
    return path;
}

static void remove_dir(void)
{
    clf_translator_free(fz.t);
    const char *files[] = {CLF_MODEL_DIR_CONFIG, CLF_MODEL_DIR_WEIGHTS, CLF_RUN_DIR_SRC_VOCAB,
                           CLF_RUN_DIR_TGT_VOCAB};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        unlink(in_dir(files[i]));
    rmdir(fz.dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    FUZZ_CHECK(mkdtemp(fz.dir) != NULL, "mkdtemp failed");
    atexit(remove_dir);
    clf_tokenizer *tok = NULL;
    FUZZ_CHECK(clf_tokenizer_build(corpus, sizeof corpus / sizeof *corpus, 1, &tok) == CLF_OK,
               "building the vocabulary failed");
    fz.src_words = clf_tokenizer_size(tok);
    FUZZ_CHECK(clf_tokenizer_save(tok, in_dir(CLF_RUN_DIR_SRC_VOCAB)) == CLF_OK &&
                   clf_tokenizer_save(tok, in_dir(CLF_RUN_DIR_TGT_VOCAB)) == CLF_OK,
               "saving the vocabulary failed");
    clf_tokenizer_free(tok);
    /* tgt_vocab 2 past the vocabulary: the model can emit ids with no word, which the
     * translator leaves out of the text (a model with a rounded-up vocabulary) */
    fz.tgt_vocab = fz.src_words + 2;
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "model: {src_vocab: %d, tgt_vocab: %d, max_len: %d, d_model: 8, layers: 1,\n"
             "        heads: 2, d_ff: 8}\n"
             "backend: {name: cpu, threads: 1}\n",
             fz.src_words, fz.tgt_vocab, MAX_LEN);
    FILE *f = fopen(in_dir(CLF_MODEL_DIR_CONFIG), "w");
    FUZZ_CHECK(f && fputs(yaml, f) >= 0 && fclose(f) == 0, "writing model.yaml failed");
    clf_config cfg;
    clf_weights *w = NULL;
    FUZZ_CHECK(clf_config_parse_string(yaml, "<fuzz model>", &cfg) == CLF_OK,
               "the fuzz model config does not load");
    FUZZ_CHECK(clf_weights_init(&cfg.model, 1, &w) == CLF_OK &&
                   clf_weights_save(w, in_dir(CLF_MODEL_DIR_WEIGHTS), NULL, 0) == CLF_OK,
               "writing the weights failed");
    clf_weights_free(w);
    clf_translator_opts o;
    clf_translator_opts_default(&o);
    o.model_dir = fz.dir;
    FUZZ_CHECK(clf_translator_open(&o, &fz.t) == CLF_OK, "the translator does not open");
    return 0;
}

/* One result as the contract says: translated, refused or empty. */
static void check_result(const clf_translation *r, int n_best)
{
    if (r->status != CLF_OK) {
        FUZZ_CHECK(r->status == CLF_ERR_INPUT && r->error && *r->error && !strchr(r->error, '\n') &&
                       r->n_hyps == 0 && !r->hyps,
                   "a refused sentence without its one-line reason, or with hypotheses");
        return;
    }
    FUZZ_CHECK(!r->error, "a translated sentence with a reason");
    FUZZ_CHECK(r->n_hyps == (r->n_src > 0 ? n_best : 0), "hypotheses per sentence");
    for (int j = 0; j < r->n_hyps; j++) {
        const clf_translation_hyp *h = &r->hyps[j];
        FUZZ_CHECK(h->text && !strchr(h->text, '\n') && !strchr(h->text, '\r'),
                   "a hypothesis' text is not one line");
        FUZZ_CHECK(h->len >= 0 && h->len <= MAX_LEN - 1, "a hypothesis longer than max_len");
        for (int k = 0; k < h->len; k++)
            FUZZ_CHECK(h->tokens[k] >= 0 && h->tokens[k] < fz.tgt_vocab,
                       "the decoder emitted an id outside the model's vocabulary");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    clf_clear_error(); /* a finding names this input's last error, not an earlier one's */
    const char *text[BATCH];
    size_t len[BATCH];
    int32_t *ids[BATCH];
    int lens[BATCH], count = 0;
    clf_translation out[BATCH];
    clf_translate_opts o;
    clf_translate_opts_default(&o);
    o.beam = (size & 1) ? 2 : 1; /* greedy and beam search both see inputs */
    o.n_best = o.beam;
    o.max_batch = 3; /* a call of BATCH lines is two clf_decode batches */
    size_t pos = 0;
    while (pos < size) {
        /* one line as the CLI reads it, less its '\n' (and a '\r' before it) */
        const uint8_t *nl = memchr(data + pos, '\n', size - pos);
        size_t n = nl ? (size_t)(nl - (data + pos)) : size - pos;
        text[count] = (const char *)data + pos;
        pos += n + (nl != NULL);
        if (n > (size_t)CLF_TRANSLATE_SENTENCE_MAX)
            n = (size_t)CLF_TRANSLATE_SENTENCE_MAX + 1;
        else if (n > 0 && text[count][n - 1] == '\r')
            n--;
        len[count++] = n;
        if (count < BATCH && pos < size)
            continue;
        FUZZ_CHECK(clf_translator_translate(fz.t, text, len, count, &o, out) == CLF_OK,
                   "translate failed on input lines");
        for (int i = 0; i < count; i++)
            check_result(&out[i], o.n_best);
        clf_translations_free(out, count);
        /* the same bytes as ids: byte - 2, so -2, -1 and ids past the words are refused */
        for (int i = 0; i < count; i++) {
            const size_t m = len[i] < MAX_LEN ? len[i] : MAX_LEN;
            ids[i] = malloc((m ? m : 1) * sizeof *ids[i]);
            FUZZ_CHECK(ids[i], "out of memory");
            lens[i] = (int)m;
            for (size_t k = 0; k < m; k++)
                ids[i][k] = (int32_t)(uint8_t)text[i][k] - 2;
        }
        FUZZ_CHECK(clf_translator_translate_ids(fz.t, (const int32_t *const *)ids, lens, count, &o,
                                                out) == CLF_OK,
                   "translate_ids failed");
        for (int i = 0; i < count; i++) {
            int unknown = 0;
            for (int k = 0; k < lens[i]; k++)
                unknown |= ids[i][k] < 0 || ids[i][k] >= fz.src_words;
            FUZZ_CHECK(!unknown || out[i].status == CLF_ERR_INPUT,
                       "translate_ids took an id outside the source vocabulary");
            check_result(&out[i], o.n_best);
            free(ids[i]);
        }
        clf_translations_free(out, count);
        count = 0;
    }
    return 0;
}
