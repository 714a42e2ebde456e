/* clformer info: version, the backends found on the search path, their devices, and the
 * op plugins there with their ops. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "clformer/translator.h"

static void print_device(void *user, const clf_device_info *d)
{
    (void)user;
    printf("    device %d: %s / %s (%s, %d compute units, %.1f GiB, %s)\n", d->index, d->platform,
           d->name, d->type, d->compute_units, (double)d->global_mem_bytes / (1 << 30), d->version);
}

/* Counts a file found (user: the int count); says why it is not usable when api is NULL.
 * Returns 1 when it is usable. */
static int found_usable(void *user, const char *path, const void *api, const char *error)
{
    int *count = user;
    (*count)++;
    if (!api)
        printf("  %s: not usable: %s\n", path, error);
    return api != NULL;
}

static void print_backend(void *user, const char *path, const clf_backend_api *api,
                          const char *error)
{
    if (!found_usable(user, path, api, error))
        return;
    printf("  %s (ABI %d): %s\n    file: %s\n", api->name, api->abi_version,
           api->description ? api->description : "", path);
    if (api->list_devices && api->list_devices(print_device, NULL) != CLF_OK)
        printf("    no devices: %s\n", clf_last_error());
}

static void print_plugin(void *user, const char *path, const clf_plugin_api *api, const char *error)
{
    if (!found_usable(user, path, api, error))
        return;
    printf("  %s (plugin ABI %d): %s\n    file: %s\n    ops:", api->name, api->abi_version,
           api->description ? api->description : "", path);
    for (int i = 0; i < api->n_ops; i++) {
        const clf_plugin_op *op = &api->ops[i];
        int cpu = op->kind == CLF_PLUGIN_NORM ? op->cpu.norm_forward != NULL
                                              : op->cpu.act_forward != NULL;
        printf("%s %s (%s; %s%s%s)", i ? "," : "", op->name, clf_plugin_kind_name(op->kind),
               cpu ? "cpu" : "", cpu && op->opencl_source ? ", " : "",
               op->opencl_source ? "opencl" : "");
    }
    printf("\n");
}

/* clformer info -m DIR: the model directory's languages (the codes of --source-lang and
 * --target-lang) and what it is, from its config alone (nothing is loaded). */
static int model_info(const char *dir, const char *plugin_dir)
{
    clf_model_files files;
    clf_config *cfg = malloc(sizeof *cfg);
    clf_status st = cfg ? clf_model_files_find(dir, plugin_dir, &files)
                        : clf_error(CLF_ERR_NOMEM, "info: out of host memory");
    if (st == CLF_OK)
        st = clf_config_read(files.config, cfg);
    if (st != CLF_OK) {
        free(cfg);
        return cli_fail(st);
    }
    const clf_model_config *m = &cfg->model;
    const clf_languages_config *l = &cfg->languages;
    printf("model: %s\n  d_model %d, %d+%d layers, vocabularies %d and %d\n", files.config,
           m->d_model, m->encoder_layers, m->decoder_layers, m->src_vocab, m->tgt_vocab);
    printf("  source language token: %s; target language: %s\n",
           clf_lang_place_name(m->source_language), clf_target_language_name(m->target_language));
    const char(*codes[2])[CLF_LANGUAGE_CODE_MAX] = {l->source, l->target};
    const int n[2] = {l->n_source, l->n_target};
    for (int s = 0; s < 2; s++) {
        printf("%s languages (%d):", s ? "target" : "source", n[s]);
        for (int i = 0; i < n[s]; i++)
            printf(" %s", codes[s][i]);
        printf("\n");
    }
    free(cfg);
    return 0;
}

int clf_cmd_info(int argc, char **argv)
{
    const char *plugin_dir;
    /* info -m DIR [--plugin-dir DIR] */
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) {
            const char *pd = NULL;
            for (int k = 1; k + 1 < argc; k++)
                if (!strcmp(argv[k], "--plugin-dir"))
                    pd = argv[k + 1];
            return model_info(argv[i + 1], pd);
        }
    int rc = cli_parse_plugin_dir_only(
        argc, argv, "clformer info [-m MODEL_DIR] [--plugin-dir DIR]", &plugin_dir);
    if (rc >= 0)
        return rc;
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
    printf("op plugins (plugin ABI %d):\n", CLF_PLUGIN_ABI);
    count = 0;
    clf_plugin_scan(plugin_dir, print_plugin, &count);
    if (!count)
        printf("  none found\n");
    return 0;
}
