/* clformer info: version, the backends found on the search path, their devices. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void print_device(void *user, const clf_device_info *d)
{
    (void)user;
    printf("    device %d: %s / %s (%s, %d compute units, %.1f GiB, %s)\n", d->index, d->platform,
           d->name, d->type, d->compute_units, (double)d->global_mem_bytes / (1 << 30), d->version);
}

static void print_backend(void *user, const char *path, const clf_backend_api *api,
                          const char *error)
{
    int *count = user;
    (*count)++;
    if (!api) {
        printf("  %s: not usable: %s\n", path, error);
        return;
    }
    printf("  %s (ABI %d): %s\n    file: %s\n", api->name, api->abi_version,
           api->description ? api->description : "", path);
    if (api->list_devices && api->list_devices(print_device, NULL) != CLF_OK)
        printf("    no devices: %s\n", clf_last_error());
}

int clf_cmd_info(int argc, char **argv)
{
    const char *plugin_dir = NULL;
    static const struct option longopts[] = {
        {"plugin-dir", required_argument, NULL, 'p'}, {"help", no_argument, NULL, 'h'}, {0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "p:h", longopts, NULL)) != -1) {
        if (c == 'p')
            plugin_dir = optarg;
        else if (c == 'h') {
            printf("usage: clformer info [--plugin-dir DIR]\n");
            return 0;
        } else
            return 2;
    }
    printf("clformer %s (backend ABI %d)\n", CLF_VERSION_STRING, CLF_BACKEND_ABI);
    char dirs[16][4096];
    int n = clf_backend_search_dirs(plugin_dir, dirs, 16);
    printf("backend search path:\n");
    for (int i = 0; i < n; i++)
        printf("  %s\n", dirs[i]);
    printf("backends:\n");
    int count = 0;
    clf_backend_scan(plugin_dir, print_backend, &count);
    if (!count)
        printf("  none found\n");
    return 0;
}
