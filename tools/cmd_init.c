/* clformer init -c model.yaml --seed N -o w.safetensors: reproducible random weights
 * (Xavier-uniform matrices, ones/zeros norms) under the tutorial names. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "clformer/weights.h"

int clf_cmd_init(int argc, char **argv)
{
    const char *path = NULL, *out = NULL, *plugin_dir = NULL;
    int seed = 1;
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                             {"seed", required_argument, NULL, 's'},
                                             {"output", required_argument, NULL, 'o'},
                                             {"init", required_argument, NULL, 'i'},
                                             {"plugin-dir", required_argument, NULL, 'p'},
                                             {"help", no_argument, NULL, 'h'},
                                             {0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:s:o:i:p:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            path = optarg;
            break;
        case 's':
            if (!cli_parse_int("--seed", optarg, 0, &seed))
                return 2;
            break;
        case 'o':
            out = optarg;
            break;
        case 'p':
            plugin_dir = optarg;
            break;
        case 'i':
            if (strcmp(optarg, "xavier") != 0)
                return cli_usage_error("init: --init '%s' is not known (only 'xavier')", optarg);
            break;
        case 'h':
            printf("usage: clformer init -c model.yaml [--init xavier] [--seed N] -o "
                   "w.safetensors [--plugin-dir DIR]\n");
            return 0;
        default:
            return 2;
        }
    }
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
