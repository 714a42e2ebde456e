/* The step after parsing a configuration: the entries of its `plugins:` list loaded by
 * runtime/'s plugin loader, and the names of model.activation and model.layernorm.style
 * that are not built in found among the loaded plugins (then on the search path). Errors
 * cite the position parsing recorded, as the parser's own do:
 * "<file>:<line>:<col>: <key>: <why>". Also the loaders of the public API that do both
 * steps (clf_config_load, _load_with_plugins, _parse_string): parsing itself (config.c)
 * loads nothing. */
#include "clformer/config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/plugin_loader.h"

/* The message of the YAML's parser at pos (config_yaml.c's clf_cfg_fail_at): the same
 * room for the reason, so that a long loader message is cut the same way. */
static clf_status fail_at(const clf_config *cfg, clf_config_pos pos, const char *key,
                          const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static clf_status fail_at(const clf_config *cfg, clf_config_pos pos, const char *key,
                          const char *fmt, ...)
{
    char why[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return clf_error(CLF_ERR_INPUT, "%s:%d:%d: %s: %s", cfg->path, pos.line, pos.column, key, why);
}

/* The directory part of the YAML's path ("." when it has none, or for a string's name). */
static void yaml_dir(const char *path, char *dir, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash || path[0] == '<')
        snprintf(dir, size, ".");
    else if (slash == path)
        snprintf(dir, size, "/");
    else
        snprintf(dir, size, "%.*s", (int)(slash - path), path);
}

/* Each entry of `plugins:`, loaded in order (a path relative to the YAML's directory, or
 * a bare name); the entry is replaced by the loaded file's absolute path. */
static clf_status load_listed(clf_config *cfg, const char *plugin_dir)
{
    char dir[CLF_PATH_MAX], entry[CLF_PATH_MAX], key[32], msg[1024];
    yaml_dir(cfg->path, dir, sizeof dir);
    for (int i = 0; i < cfg->n_plugins; i++) {
        memcpy(entry, cfg->plugins[i], sizeof entry);
        if (clf_plugin_load_listed(entry, dir, plugin_dir, cfg->plugins[i],
                                   sizeof cfg->plugins[i]) != CLF_OK) {
            snprintf(msg, sizeof msg, "%s", clf_last_error());
            snprintf(key, sizeof key, "plugins[%d]", i);
            memcpy(cfg->plugins[i], entry, sizeof entry); /* as written, not half-resolved */
            return fail_at(cfg, cfg->plugin_pos[i], key, "%s", msg);
        }
    }
    return CLF_OK;
}

/* A model.activation or model.layernorm.style name that is not built in: an op of a
 * plugin the YAML lists, else of one on the search path. */
static clf_status find_op(const clf_config *cfg, const char *plugin_dir, int norm,
                          const clf_plugin_op **out)
{
    const char *key = norm ? "model.layernorm.style" : "model.activation";
    const char *name = norm ? cfg->model.norm_op_name : cfg->model.activation_op_name;
    const clf_config_pos pos = norm ? cfg->norm_pos : cfg->activation_pos;
    char msg[1024], builtins[64];
    if (norm)
        snprintf(builtins, sizeof builtins, "%s or %s", clf_ln_style_name(CLF_LN_TUTORIAL),
                 clf_ln_style_name(CLF_LN_STANDARD));
    else
        snprintf(builtins, sizeof builtins, "%s", clf_activation_name(CLF_ACT_RELU));
    clf_status st = clf_plugin_find(name, plugin_dir, out);
    if (st != CLF_OK) {
        snprintf(msg, sizeof msg, "%s", clf_last_error());
        return fail_at(cfg, pos, key, "looking for '%s' in the plugins: %s", name, msg);
    }
    if (!*out)
        return fail_at(cfg, pos, key,
                       "unknown %s '%s': not built in (%s) and no plugin provides it (list "
                       "its .so under plugins:, or put it in --plugin-dir or CLF_PLUGIN_PATH)",
                       norm ? "norm style" : "activation", name, builtins);
    int is_norm = (*out)->kind == CLF_PLUGIN_NORM;
    if (is_norm != norm)
        return fail_at(cfg, pos, key, "'%s' is a %s op of %s, not %s", name,
                       clf_plugin_kind_name((*out)->kind), clf_plugin_path_of(*out),
                       norm ? "a norm style" : "an activation");
    return CLF_OK;
}

clf_status clf_config_resolve_plugins(clf_config *cfg, const char *plugin_dir)
{
    if (!cfg)
        return clf_error(CLF_ERR_INPUT, "config: no configuration to resolve");
    clf_model_config *m = &cfg->model;
    clf_status st;
    if (!plugin_dir)
        plugin_dir = "";
    m->activation_op = NULL;
    m->norm_op = NULL;
    if ((st = load_listed(cfg, plugin_dir)) != CLF_OK)
        return st;
    if (m->activation_op_name[0]) {
        if ((st = find_op(cfg, plugin_dir, 0, &m->activation_op)) != CLF_OK)
            return st;
        m->activation = CLF_ACT_PLUGIN;
    }
    if (m->norm_op_name[0] && (st = find_op(cfg, plugin_dir, 1, &m->norm_op)) != CLF_OK)
        return st;
    return CLF_OK;
}

clf_status clf_config_load_with_plugins(const char *path, const char *plugin_dir, clf_config *cfg)
{
    clf_status st = clf_config_read(path, cfg);
    return st == CLF_OK ? clf_config_resolve_plugins(cfg, plugin_dir) : st;
}

clf_status clf_config_load(const char *path, clf_config *cfg)
{
    return clf_config_load_with_plugins(path, NULL, cfg);
}

clf_status clf_config_parse_string(const char *text, const char *name, clf_config *cfg)
{
    clf_status st = clf_config_read_string(text, name, cfg);
    return st == CLF_OK ? clf_config_resolve_plugins(cfg, NULL) : st;
}

clf_status clf_config_open_backend(const clf_config *cfg, const char *backend, const char *device,
                                   int threads, const char *plugin_dir, const clf_backend_api **api,
                                   clf_backend **be)
{
    clf_backend_opts opts = {.abi_version = CLF_BACKEND_ABI,
                             .device = device ? device : cfg->backend.device,
                             .threads = threads >= 0 ? threads : cfg->backend.threads,
                             .cache_dir = NULL};
    /* a NULL name makes clf_backend_open_named read $CLF_BACKEND */
    const char *env = getenv("CLF_BACKEND");
    const char *name = backend ? backend : env && *env ? NULL : cfg->backend.name;
    return clf_backend_open_named(name, plugin_dir, &opts, api, be);
}
