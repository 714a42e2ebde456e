/* What the parity suites of imported Hugging Face fixtures share (test_marian.c,
 * family_suite.c; test_train_lang.c reads its references with clf_test_ref_ints): reading the
 * reference file transformers wrote, loading the imported model on the suite's backend, and the
 * checks of logits, decoded ids and the CLI's text against that reference. */
#ifndef CLF_TEST_HF_PARITY_H
#define CLF_TEST_HF_PARITY_H

#include <stdint.h>

#include "clformer/config.h"
#include "clformer/decode.h"
#include "clformer/model.h"
#include "clformer/tensor.h"
#include "clformer/weights.h"

/* The I32 tensor name of the reference f, converted (asserted present; the caller frees);
 * shape, when not NULL, gets its shape. */
int32_t *clf_test_ref_ints(clf_safetensors *f, const char *name, int64_t *shape);

/* Opens the reference file at path (asserted to open) and reads its source batch: the I32
 * tensor src_name [N, S] into *src and src_len [N] into *src_len (clf_test_ref_close frees
 * them). */
clf_safetensors *clf_test_ref_open(const char *path, const char *src_name, int32_t **src,
                                   int32_t **src_len, int *N, int *S);
/* Frees the source batch of clf_test_ref_open and closes f. */
void clf_test_ref_close(clf_safetensors *f, int32_t *src, int32_t *src_len);

/* An imported model directory loaded on the suite's backend (clf_test_api, clf_test_be). */
typedef struct clf_test_loaded {
    const char *dir;
    clf_config cfg;
    clf_weights *w;
    clf_model *m;
} clf_test_loaded;
void clf_test_loaded_open(clf_test_loaded *l, const char *dir);
/* Frees the model and weights and removes the imported directory. */
void clf_test_loaded_close(clf_test_loaded *l);

/* The teacher-forced logits of the model imported into dir (loaded, then removed) on the
 * logits_src / logits_tgt of the reference file ref_path must be its logits [B, T, V]
 * within tol (CLF_ASSERT_CLOSE). */
void clf_test_ref_logits_match(const char *ref_path, const char *dir, double tol);

/* Hypothesis i of res (N sentences) must be want[i] (rows of M: generated ids, EOS
 * included when it ended, want_len[i] of them); what names the case in a failure. */
void clf_test_hyps_match(const clf_decode_result *res, int N, const int32_t *want,
                         const int32_t *want_len, int M, int eos, const char *what);

/* `clformer args` with input on stdin and stdout into out (out.err its stderr) must exit 0
 * and print want_file's text line for line, after edit (NULL: none) changed that text in
 * place; out and out.err are removed. */
void clf_test_cli_text_matches(const char *args, const char *input, const char *out,
                               const char *want_file, void (*edit)(char *text));

#endif
