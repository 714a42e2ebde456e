/* The plugin parts of a configuration: the top-level `plugins:` list (each entry loaded
 * by the plugin loader as it is read) and the names of model.activation and
 * model.layernorm.style that are not built in, resolved against the loaded plugins once
 * the whole file is read. */
#include "config/config_yaml.h"

#include <stdio.h>
#include <string.h>

#include "runtime/plugin_loader.h"

/* model.activation / model.layernorm.style: a built-in name (its enum index), or a name
 * kept for an op plugin, resolved by clf_cfg_resolve_plugin_ops() after the whole file is read
 * (the `plugins:` list may come after the model). */
clf_status clf_cfg_parse_opname(parse_ctx *c, const yaml_node_t *v, const field *f, const char *key)
{
    char buf[96];
    char *slot = f->flag == OPNAME_NORM ? c->norm_op : c->activation_op;
    if (!clf_cfg_is_plain(v)) {
        char list[256];
        clf_cfg_join_names(f->names, list, sizeof list);
        return clf_cfg_fail_at(c, v->start_mark, key, "expected %s or an op plugin's name, got %s",
                               list, clf_cfg_describe(v, buf, sizeof buf));
    }
    const char *name = clf_cfg_scalar_text(v);
    memset(slot, 0, CLF_PLUGIN_NAME_MAX);
    for (int i = 0; f->names[i]; i++) {
        if (!strcmp(name, f->names[i])) {
            *(int *)((char *)c->cfg + f->off) = i;
            return CLF_OK;
        }
    }
    if (strlen(name) >= CLF_PLUGIN_NAME_MAX)
        return clf_cfg_fail_at(c, v->start_mark, key, "'%.40s...' is too long for an op name",
                               name);
    memcpy(slot, name, strlen(name));
    return CLF_OK;
}

/* The directory part of the YAML's path ("." when it has none). */
static void yaml_dir(const parse_ctx *c, char *dir, size_t size)
{
    const char *slash = strrchr(c->name, '/');
    if (!slash || c->name[0] == '<')
        snprintf(dir, size, ".");
    else if (slash == c->name)
        snprintf(dir, size, "/");
    else
        snprintf(dir, size, "%.*s", (int)(slash - c->name), c->name);
}

/* One entry of `plugins:`, loaded by the plugin loader (a path relative to the YAML's
 * directory, or a bare name); its absolute path goes to out. */
static clf_status load_listed_plugin(parse_ctx *c, const yaml_node_t *item, const char *key,
                                     char *out, size_t size)
{
    char text[CLF_PATH_MAX], dir[CLF_PATH_MAX], msg[1024];
    clf_status st = clf_cfg_parse_string(c, item, key, 0, text, sizeof text);
    if (st != CLF_OK)
        return st;
    if (!text[0])
        return clf_cfg_fail_at(c, item->start_mark, key, "expected a plugin path or name, got ''");
    yaml_dir(c, dir, sizeof dir);
    if (clf_plugin_load_listed(text, dir, c->plugin_dir, out, size) != CLF_OK) {
        snprintf(msg, sizeof msg, "%s", clf_last_error());
        return clf_cfg_fail_at(c, item->start_mark, key, "%s", msg);
    }
    return CLF_OK;
}

clf_status clf_cfg_parse_plugins(parse_ctx *c, const yaml_node_t *v, const char *key)
{
    clf_config *cfg = c->cfg;
    if (clf_cfg_is_null(v))
        return CLF_OK;
    const yaml_node_item_t *items;
    long count;
    clf_status st =
        clf_cfg_sequence(c, v, key, "a list of plugin paths like [./x.so]", &items, &count);
    if (st != CLF_OK)
        return st;
    if (count > CLF_CONFIG_PLUGINS_MAX)
        return clf_cfg_fail_at(c, v->start_mark, key, "%ld plugins, at most %d", count,
                               CLF_CONFIG_PLUGINS_MAX);
    for (long i = 0; i < count; i++) {
        char item_key[CFG_ITEM_KEY_MAX];
        const yaml_node_t *item = clf_cfg_item(c, items, i, key, item_key);
        st = load_listed_plugin(c, item, item_key, cfg->plugins[cfg->n_plugins],
                                sizeof cfg->plugins[0]);
        if (st != CLF_OK)
            return st;
        cfg->n_plugins++;
    }
    return CLF_OK;
}

/* A model.activation or model.layernorm.style name that is not built in: an op of a
 * plugin the YAML lists, else of one on the search path. */
static clf_status resolve_plugin_op(parse_ctx *c, const char *key, const char *name, int norm,
                                    const char *const *builtins, const clf_plugin_op **out)
{
    char msg[1024], list[128];
    yaml_mark_t m = clf_cfg_mark_of(c, key, "model", NULL);
    clf_status st = clf_plugin_find(name, c->plugin_dir, out);
    if (st != CLF_OK) {
        snprintf(msg, sizeof msg, "%s", clf_last_error());
        return clf_cfg_fail_at(c, m, key, "looking for '%s' in the plugins: %s", name, msg);
    }
    clf_cfg_join_names(builtins, list, sizeof list);
    if (!*out)
        return clf_cfg_fail_at(
            c, m, key,
            "unknown %s '%s': not built in (%s) and no plugin provides it (list "
            "its .so under plugins:, or put it in --plugin-dir or CLF_PLUGIN_PATH)",
            norm ? "norm style" : "activation", name, list);
    int is_norm = (*out)->kind == CLF_PLUGIN_NORM;
    if (is_norm != norm)
        return clf_cfg_fail_at(c, m, key, "'%s' is a %s op of %s, not %s", name,
                               clf_plugin_kind_name((*out)->kind), clf_plugin_path_of(*out),
                               norm ? "a norm style" : "an activation");
    return CLF_OK;
}

clf_status clf_cfg_resolve_plugin_ops(parse_ctx *c, const char *const *act_names,
                                      const char *const *ln_names)
{
    clf_model_config *m = &c->cfg->model;
    clf_status st;
    m->activation_op = NULL;
    m->norm_op = NULL;
    if (c->activation_op[0]) {
        if ((st = resolve_plugin_op(c, "model.activation", c->activation_op, 0, act_names,
                                    &m->activation_op)) != CLF_OK)
            return st;
        m->activation = CLF_ACT_PLUGIN;
    }
    if (c->norm_op[0] && (st = resolve_plugin_op(c, "model.layernorm.style", c->norm_op, 1,
                                                 ln_names, &m->norm_op)) != CLF_OK)
        return st;
    return CLF_OK;
}
