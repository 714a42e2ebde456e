/* clformer config -c model.yaml --dump: validate a YAML and print it fully resolved. */
#include <stdio.h>

#include "cli.h"

static void usage(void)
{
    printf("usage: clformer config -c model.yaml [--dump] [--plugin-dir DIR]\n"
           "Checks the file; with --dump prints the fully resolved config.\n");
}

int clf_cmd_config(int argc, char **argv)
{
    const char *path = NULL, *plugin_dir = NULL;
    int dump = 0;
    const cli_opt opts[] = {CLI_STRING("config", 'c', &path),
                            CLI_FLAG("dump", 'd', &dump),
                            CLI_STRING("plugin-dir", 'p', &plugin_dir),
                            {0}};
    int rc = cli_parse_options(argc, argv, opts, usage);
    if (rc >= 0)
        return rc;
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
