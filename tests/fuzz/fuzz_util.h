/* Shared by the fuzz targets (tests/fuzz/README.md). */
#ifndef CLF_FUZZ_UTIL_H
#define CLF_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* The entry points libFuzzer (or replay_main.c) calls. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Readers that take a path read the input through an in-memory file: slot (0 or 1) is
 * rewritten with data[0..size) and "/proc/self/fd/N" is returned (valid until the next
 * call for the same slot). No disk write, no cleanup between inputs. */
const char *fuzz_file(int slot, const void *data, size_t size);

/* The first occurrence of sep in data[0..size), or NULL. */
const uint8_t *fuzz_find(const uint8_t *data, size_t size, const char *sep);

/* Encodes text[0..len) with tok; when that succeeds, every id must be in the vocabulary
 * and decode (with and without the specials) must take them (else a finding). Shared by
 * the tokenizer JSON and SentencePiece targets. */
struct clf_tokenizer;
void fuzz_tokenizer_round_trip(const struct clf_tokenizer *tok, const char *text, size_t len);

/* The model section of the small model the checkpoint and safetensors seeds were saved from
 * (tests/fuzz/corpus/): a seed holds its weights (and moments) in a few KB. */
#define FUZZ_TINY_MODEL_YAML                                                                       \
    "model:\n"                                                                                     \
    "  src_vocab: 6\n"                                                                             \
    "  tgt_vocab: 6\n"                                                                             \
    "  max_len: 8\n"                                                                               \
    "  d_model: 4\n"                                                                               \
    "  layers: 1\n"                                                                                \
    "  heads: 2\n"                                                                                 \
    "  d_ff: 4\n"

/* Sets one thread for OpenBLAS and OpenMP (deterministic and cheap per input); then the model
 * of the YAML text yaml (its config into *cfg) with weights from seed 1, on the
 * CPU backend with one thread (*api, *be); any failure is a finding. */
struct clf_config;
struct clf_backend_api;
struct clf_backend;
struct clf_model;
void fuzz_cpu_model(const char *yaml, struct clf_config *cfg, const struct clf_backend_api **api,
                    struct clf_backend **be, struct clf_model **model);

/* Aborts with msg when cond is false: a finding for libFuzzer, a failure for the replay. */
#define FUZZ_CHECK(cond, msg)                                                                      \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fuzz_fail(__FILE__, __LINE__, (msg));                                                  \
    } while (0)
_Noreturn void fuzz_fail(const char *file, int line, const char *msg);

#endif
