/* clformer config -c model.yaml --dump: validate a YAML and print it fully resolved. */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"

int clf_cmd_config(int argc, char **argv)
{
    const char *path = NULL, *plugin_dir = NULL;
    int dump = 0;
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                             {"dump", no_argument, NULL, 'd'},
                                             {"plugin-dir", required_argument, NULL, 'p'},
                                             {"help", no_argument, NULL, 'h'},
                                             {0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:dp:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            path = optarg;
            break;
        case 'd':
            dump = 1;
            break;
        case 'p':
            plugin_dir = optarg;
            break;
        case 'h':
            printf("usage: clformer config -c model.yaml [--dump] [--plugin-dir DIR]\n"
                   "Checks the file; with --dump prints the fully resolved config.\n");
            return 0;
        default:
            return 2;
        }
    }
    if (!path)
        return cli_usage_error("config: -c model.yaml is required");
    clf_config cfg;
    clf_status st = clf_config_load_with_plugins(path, plugin_dir, &cfg);
    if (st != CLF_OK)
        return cli_fail(st);
    if (dump)
        st = clf_config_dump(&cfg, stdout);
    else
        printf("%s: ok\n", path);
    return st == CLF_OK ? 0 : cli_fail(st);
}
