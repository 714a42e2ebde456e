/* The in-memory files of the fuzz targets; see fuzz_util.h. */
#include "fuzz_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clformer/backend.h"
#include "clformer/config.h"
#include "clformer/model.h"
#include "clformer/status.h"
#include "clformer/tokenizer.h"
#include "clformer/weights.h"

#define SLOTS 2

_Noreturn void fuzz_fail(const char *file, int line, const char *msg)
{
    fprintf(stderr, "%s:%d: %s (last error: %s)\n", file, line, msg, clf_last_error());
    abort();
}

const char *fuzz_file(int slot, const void *data, size_t size)
{
    /* the harness's own state, one memfd per slot for the life of the process */
    static int fds[SLOTS] = {-1, -1};
    static char paths[SLOTS][64];
    FUZZ_CHECK(slot >= 0 && slot < SLOTS, "fuzz_file: bad slot");
    if (fds[slot] < 0) {
        fds[slot] = memfd_create("clf-fuzz", 0);
        FUZZ_CHECK(fds[slot] >= 0, "memfd_create failed");
        snprintf(paths[slot], sizeof paths[slot], "/proc/self/fd/%d", fds[slot]);
    }
    FUZZ_CHECK(ftruncate(fds[slot], 0) == 0, "ftruncate failed");
    const char *p = data;
    size_t done = 0;
    while (done < size) {
        ssize_t n = pwrite(fds[slot], p + done, size - done, (off_t)done);
        FUZZ_CHECK(n > 0, "pwrite failed");
        done += (size_t)n;
    }
    return paths[slot];
}

const uint8_t *fuzz_find(const uint8_t *data, size_t size, const char *sep)
{
    size_t n = strlen(sep);
    if (n == 0 || size < n)
        return NULL;
    for (size_t i = 0; i + n <= size; i++)
        if (memcmp(data + i, sep, n) == 0)
            return data + i;
    return NULL;
}

void fuzz_tokenizer_round_trip(const clf_tokenizer *tok, const char *text, size_t len)
{
    int32_t *ids = NULL;
    int n = 0;
    if (clf_tokenizer_encode(tok, text, len, &ids, &n) != CLF_OK)
        return;
    int size = clf_tokenizer_size(tok);
    for (int i = 0; i < n; i++)
        FUZZ_CHECK(ids[i] >= 0 && ids[i] < size, "encode gave an id outside the vocabulary");
    for (int skip = 0; skip <= 1; skip++) {
        char *out = NULL;
        FUZZ_CHECK(clf_tokenizer_decode(tok, ids, n, skip, &out) == CLF_OK,
                   "decode refused the ids encode gave");
        free(out);
    }
    free(ids);
}

void fuzz_cpu_model(const char *yaml, clf_config *cfg, const clf_backend_api **api,
                    clf_backend **be, clf_model **model)
{
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    FUZZ_CHECK(clf_config_parse_string(yaml, "<fuzz model>", cfg) == CLF_OK,
               "the fuzz model config does not load");
    clf_weights *w = NULL;
    FUZZ_CHECK(clf_weights_init(&cfg->model, 1, &w) == CLF_OK, "clf_weights_init failed");
    clf_backend_opts bo = {.abi_version = CLF_BACKEND_ABI, .threads = 1};
    FUZZ_CHECK(clf_backend_open_named("cpu", NULL, &bo, api, be) == CLF_OK,
               "the cpu backend does not open");
    FUZZ_CHECK(clf_model_create(&cfg->model, w, *api, *be, model) == CLF_OK,
               "clf_model_create failed");
    clf_weights_free(w);
}
