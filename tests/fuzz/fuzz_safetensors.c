/* Fuzz target: the safetensors reader (clf_safetensors_open: header, offsets, data bounds)
 * and, for a file it accepts, every tensor converted as the loaders convert them, then the
 * weights loader (names and shapes against a small model config, untied and tied all: a
 * tied matrix under any one of its names, or several as copies). */
#include <stdlib.h>
#include <string.h>

#include "clformer/config.h"
#include "clformer/tensor.h"
#include "clformer/weights.h"
#include "fuzz_util.h"

/* A tensor of more elements than this is not converted (the data bounds are checked by
 * open either way); keeps one input's work small. */
#define CONVERT_MAX_ELEMS (1 << 20)

/* The models the weights loader checks against
 * (tests/fuzz/corpus/safetensors/tiny_weights.safetensors, and tied_one_name.safetensors:
 * the same without tgt_embed and src_embed, the tied matrix as the projection's). */
static const char model_yaml[] = FUZZ_TINY_MODEL_YAML;
static const char tied_yaml[] = FUZZ_TINY_MODEL_YAML "  tie_embeddings: all\n";
static clf_config model_cfg, tied_cfg;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    FUZZ_CHECK(clf_config_parse_string(model_yaml, "<fuzz model>", &model_cfg) == CLF_OK,
               "the fuzz model config does not load");
    FUZZ_CHECK(clf_config_parse_string(tied_yaml, "<fuzz tied model>", &tied_cfg) == CLF_OK,
               "the tied fuzz model config does not load");
    return 0;
}

static void convert(const clf_tensor *t)
{
    int64_t n = clf_tensor_numel(t);
    FUZZ_CHECK(n >= 0, "negative element count of an accepted tensor");
    FUZZ_CHECK((size_t)n * clf_dtype_size(t->dtype) == t->nbytes,
               "an accepted tensor's size disagrees with its shape");
    if (n > CONVERT_MAX_ELEMS)
        return;
    void *dst = malloc(n ? (size_t)n * 4 : 1);
    FUZZ_CHECK(dst, "out of memory");
    (void)clf_tensor_to_f32(t, dst);
    (void)clf_tensor_to_i32(t, dst);
    free(dst);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    clf_clear_error(); /* a finding names this input's last error, not an earlier one's */
    const char *path = fuzz_file(0, data, size);
    clf_safetensors *f = NULL;
    if (clf_safetensors_open(path, &f) == CLF_OK) {
        int n = clf_safetensors_count(f);
        for (int i = 0; i < n; i++) {
            const clf_tensor *t = clf_safetensors_at(f, i);
            FUZZ_CHECK(t && clf_safetensors_find(f, t->name) != NULL,
                       "an accepted tensor cannot be found by its name");
            convert(t);
        }
        (void)clf_safetensors_meta(f, "format");
        clf_safetensors_close(f);
        clf_weights *w = NULL;
        if (clf_weights_load(path, &model_cfg.model, &w) == CLF_OK)
            clf_weights_free(w);
        w = NULL;
        if (clf_weights_load(path, &tied_cfg.model, &w) == CLF_OK)
            clf_weights_free(w);
    }
    return 0;
}
