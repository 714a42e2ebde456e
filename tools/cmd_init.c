/* clformer init -c model.yaml --seed N -o w.safetensors: reproducible random weights
 * (Xavier-uniform matrices, ones/zeros norms) under the tutorial names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "clformer/weights.h"

static void usage(void)
{
    printf("usage: clformer init -c model.yaml [--init xavier] [--seed N] -o w.safetensors "
           "[--plugin-dir DIR]\n");
}

/* --init: only xavier */
static int take_init(const char *value, void *to)
{
    (void)to;
    if (strcmp(value, "xavier") != 0)
        return !cli_usage_error("init: --init '%s' is not known (only 'xavier')", value);
    return 1;
}

int clf_cmd_init(int argc, char **argv)
{
    const char *path = NULL, *out = NULL, *plugin_dir = NULL;
    int seed = 1;
    const cli_opt opts[] = {CLI_STRING("config", 'c', &path),
                            CLI_INT("seed", 's', &seed, 0),
                            CLI_STRING("output", 'o', &out),
                            {"init", 'i', CLI_OPT_STRING, NULL, .take = take_init},
                            CLI_STRING("plugin-dir", 'p', &plugin_dir),
                            {0}};
    int rc = cli_parse_options(argc, argv, opts, usage);
    if (rc >= 0)
        return rc;
    if (!path || !out)
        return cli_usage_error("init: -c model.yaml and -o w.safetensors are required");
    clf_config cfg;
    clf_weights *w = NULL;
    clf_status st = clf_config_load_with_plugins(path, plugin_dir, &cfg);
    if (st == CLF_OK)
        st = clf_weights_init(&cfg.model, (uint64_t)seed, &w);
    if (st == CLF_OK) {
        char seed_str[32];
        snprintf(seed_str, sizeof seed_str, "%d", seed);
        const char *meta[] = {"format", "pt", "clformer.init", "xavier", "clformer.seed", seed_str};
        st = clf_weights_save(w, out, meta, 3);
    }
    clf_weights_free(w);
    if (st != CLF_OK)
        return cli_fail(st);
    return 0;
}
