/* Fuzz target: the training-data reader. The input is two option bytes, then the data:
 *   byte 0: bit 0 set = two line-aligned files (the data split at its first 0x1e byte,
 *           source before it, target after), else one TSV file; bits 1-3 pick max_len;
 *   byte 1: bits 0-1 batch_size - 1, bit 2 shuffle, bits 3-4 pick batch_tokens.
 * Vocabularies are built from the data (clf_dataset_build_vocabs), the pairs loaded with
 * them (clf_dataset_load), and two epochs planned and cut into batches: every kept pair
 * must be in exactly one batch of each, framed as dataset.h says. */
#include <stdlib.h>
#include <string.h>

#include "clformer/dataset.h"
#include "clformer/tokenizer.h"
#include "fuzz_util.h"

#define FILE_SEPARATOR "\x1e"

static const int max_lens[8] = {0, 2, 3, 4, 6, 8, 16, 64};
static const int batch_tokens_of[4] = {0, 1, 8, 64};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

/* Plans epoch e and checks that its batches hold each pair once, framed [SOS] x [EOS]. */
static void check_epoch(const clf_dataset *d, clf_batcher *b, int e, const clf_tokenizer *src,
                        const clf_tokenizer *tgt, unsigned char *seen)
{
    FUZZ_CHECK(clf_batcher_plan_epoch(b, e) == CLF_OK, "planning an epoch failed");
    size_t n = clf_dataset_size(d);
    memset(seen, 0, n);
    clf_tokenizer_specials ss = clf_tokenizer_special_ids(src), ts = clf_tokenizer_special_ids(tgt);
    for (int i = 0; i < clf_batcher_count(b); i++) {
        clf_batch batch;
        FUZZ_CHECK(clf_batcher_get(b, i, &batch) == CLF_OK, "getting a planned batch failed");
        for (int r = 0; r < batch.batch; r++) {
            size_t k = batch.index[r];
            FUZZ_CHECK(k < n && !seen[k], "a batch holds a pair twice or one out of range");
            seen[k] = 1;
            const int32_t *sx, *ty;
            int sn, tn;
            clf_dataset_ids(d, k, &sx, &sn, &ty, &tn);
            FUZZ_CHECK(sn > 0 && tn > 0 && sn + 2 <= batch.src_len && tn + 1 <= batch.tgt_len,
                       "a pair does not fit its batch");
            const int32_t *row = batch.src + (size_t)r * batch.src_len;
            FUZZ_CHECK(row[0] == ss.sos && row[sn + 1] == ss.eos, "source row not framed");
            const int32_t *in = batch.tgt_in + (size_t)r * batch.tgt_len;
            const int32_t *lab = batch.labels + (size_t)r * batch.tgt_len;
            FUZZ_CHECK(in[0] == ts.sos && lab[tn] == ts.eos, "target rows not framed");
        }
        clf_batch_free(&batch);
    }
    for (size_t k = 0; k < n; k++)
        FUZZ_CHECK(seen[k], "an epoch left a pair out");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    clf_clear_error(); /* a finding names this input's last error, not an earlier one's */
    if (size < 2)
        return 0;
    const int two_files = data[0] & 1, max_len = max_lens[(data[0] >> 1) & 7];
    const int batch_size = 1 + (data[1] & 3), shuffle = (data[1] >> 2) & 1;
    const int batch_tokens = batch_tokens_of[(data[1] >> 3) & 3];
    data += 2;
    size = size - 2;
    const char *src_path, *tgt_path = NULL;
    if (two_files) {
        const uint8_t *sep = fuzz_find(data, size, FILE_SEPARATOR);
        size_t src_size = sep ? (size_t)(sep - data) : size;
        src_path = fuzz_file(0, data, src_size);
        tgt_path = sep ? fuzz_file(1, sep + 1, size - src_size - 1) : fuzz_file(1, "", 0);
    } else
        src_path = fuzz_file(0, data, size);

    clf_tokenizer *src = NULL, *tgt = NULL;
    if (clf_dataset_build_vocabs(src_path, tgt_path, 1, &src, &tgt) != CLF_OK) {
        FUZZ_CHECK(!src && !tgt, "build_vocabs failed but left a vocabulary");
        return 0;
    }
    clf_dataset_opts o = {.src_path = src_path,
                          .tgt_path = tgt_path,
                          .src_tok = src,
                          .tgt_tok = tgt,
                          .max_len = max_len};
    clf_dataset *d = NULL;
    if (clf_dataset_load(&o, &d) == CLF_OK) {
        size_t n = clf_dataset_size(d);
        FUZZ_CHECK(n > 0, "a loaded dataset has no pair");
        for (size_t i = 0; i < n; i++) {
            const char *s, *t;
            clf_dataset_text(d, i, &s, &t);
            FUZZ_CHECK(!strchr(s, '\n') && !strchr(t, '\n'), "a pair's text holds a line end");
            FUZZ_CHECK(clf_dataset_line(d, i) >= 1, "a pair has no line");
        }
        clf_batcher *b = NULL;
        if (clf_batcher_create(d, batch_size, batch_tokens, shuffle, 7, &b) == CLF_OK) {
            unsigned char *seen = malloc(n);
            FUZZ_CHECK(seen, "out of memory");
            check_epoch(d, b, 0, src, tgt, seen);
            check_epoch(d, b, 1, src, tgt, seen);
            free(seen);
            clf_batcher_free(b);
        }
        clf_dataset_free(d);
    }
    clf_tokenizer_free(src);
    clf_tokenizer_free(tgt);
    return 0;
}
