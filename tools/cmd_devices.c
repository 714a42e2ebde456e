/* clformer devices: the OpenCL platforms and devices, like `clinfo -l`. */
#include <stdio.h>

#include "cli.h"

static void print_device(void *user, const clf_device_info *d)
{
    int *count = user;
    (*count)++;
    printf("%d: %s / %s\n   type %s, %d compute units, memory %.2f GiB, max alloc %.2f GiB, "
           "%s, fp16 %s\n",
           d->index, d->platform, d->name, d->type, d->compute_units,
           (double)d->global_mem_bytes / (1 << 30), (double)d->max_alloc_bytes / (1 << 30),
           d->version, d->fp16 ? "yes" : "no");
}

int clf_cmd_devices(int argc, char **argv)
{
    const char *plugin_dir;
    int rc =
        cli_parse_plugin_dir_only(argc, argv, "clformer devices [--plugin-dir DIR]", &plugin_dir);
    if (rc >= 0)
        return rc;
    const clf_backend_api *api = NULL;
    clf_status st = clf_backend_load("opencl", plugin_dir, &api);
    if (st != CLF_OK)
        return cli_fail(st);
    int count = 0;
    if (!api->list_devices)
        return cli_usage_error("the opencl backend cannot list devices");
    if ((st = api->list_devices(print_device, &count)) != CLF_OK)
        return cli_fail(st);
    return 0;
}
