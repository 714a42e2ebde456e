/* Fuzz target: the YAML configuration reader (clf_config_read: parsing and every check,
 * but no plugin loaded, so that an input's `plugins:` list cannot make the fuzzer dlopen a
 * file), and for every config it accepts, the dump it writes must read back unchanged
 * (clf_config_dump's promise): the same plugins list, model, backend, train and generate
 * fields, and the same dump again. No input may register a plugin op. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/config.h"
#include "clformer/plugin.h"
#include "fuzz_util.h"

static void count_op(void *user, const char *path, const clf_plugin_api *api,
                     const clf_plugin_op *op)
{
    (void)path;
    (void)api;
    (void)op;
    ++*(int *)user;
}

/* The plugin ops registered in this process: none, as nothing here loads a plugin. */
static int registered_ops(void)
{
    int n = 0;
    clf_plugin_each(count_op, &n);
    return n;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

/* cfg dumped into a malloc'd string (*len bytes). */
static char *dump(const clf_config *cfg, size_t *len)
{
    char *text = NULL;
    FILE *mem = open_memstream(&text, len);
    FUZZ_CHECK(mem, "open_memstream failed");
    FUZZ_CHECK(clf_config_dump(cfg, mem) == CLF_OK, "clf_config_dump failed on a loaded config");
    FUZZ_CHECK(fclose(mem) == 0, "fclose of the dump failed");
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    clf_clear_error(); /* a finding names this input's last error, not an earlier one's */
    /* two configs of ~60 KB each: on the heap, so that ASan watches them */
    clf_config *cfg = malloc(sizeof *cfg), *again = malloc(sizeof *again);
    FUZZ_CHECK(cfg && again, "out of memory");
    if (clf_config_read(fuzz_file(0, data, size), cfg) == CLF_OK) {
        size_t len1 = 0, len2 = 0;
        char *text1 = dump(cfg, &len1);
        if (clf_config_read_string(text1, "<dump>", again) != CLF_OK)
            fuzz_fail(__FILE__, __LINE__, "a loaded config's dump does not load back");
        char *text2 = dump(again, &len2);
        FUZZ_CHECK(len1 == len2 && memcmp(text1, text2, len1) == 0,
                   "a loaded config's dump loads back to another dump");
        /* The same fields (clf_config_defaults zeroes the struct first, so padding compares
         * equal); the plugins list as written, as nothing was resolved. */
        FUZZ_CHECK(!cfg->model.activation_op && !cfg->model.norm_op,
                   "clf_config_read resolved a plugin op");
        if (cfg->n_plugins != again->n_plugins ||
            memcmp(cfg->plugins, again->plugins, sizeof cfg->plugins) != 0 ||
            memcmp(&cfg->model, &again->model, sizeof cfg->model) != 0 ||
            memcmp(&cfg->backend, &again->backend, sizeof cfg->backend) != 0 ||
            memcmp(&cfg->train, &again->train, sizeof cfg->train) != 0 ||
            memcmp(&cfg->generate, &again->generate, sizeof cfg->generate) != 0) {
            fprintf(stderr, "the dump:\n%s", text1);
            fuzz_fail(__FILE__, __LINE__, "a loaded config's dump loads back to another config");
        }
        free(text1);
        free(text2);
    }
    free(cfg);
    free(again);
    FUZZ_CHECK(registered_ops() == 0, "a configuration loaded a plugin");
    return 0;
}
