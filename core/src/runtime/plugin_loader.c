/* Op-plugin loader and registry (clformer/plugin.h).
 *
 * A plugin is validated whole before any of its ops is registered, so a refused plugin
 * leaves nothing behind and a run never starts half-configured. Handles are never
 * dlclose'd once registered (a backend may hold compiled forms of their ops). Like the
 * backend registry, this is process-wide state behind one mutex. */
#include "clformer/plugin.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clformer/backend.h"
#include "clformer/fs.h"
#include "runtime/plugin_loader.h"
#include "runtime/search_path.h"

#define CLF_MAX_PLUGINS    32
#define CLF_MAX_PLUGIN_OPS 256
#define PLUGIN_PREFIX      "clformer-plugin-"

typedef struct loaded_plugin {
    char path[PATH_MAX];
    void *handle;
    const clf_plugin_api *api;
} loaded_plugin;

typedef struct registered_op {
    const clf_plugin_op *op;
    int plugin; /* index into plugins[] */
} registered_op;

static pthread_mutex_t plugin_lock = PTHREAD_MUTEX_INITIALIZER;
static loaded_plugin plugins[CLF_MAX_PLUGINS];
static int n_plugins;
static registered_op ops[CLF_MAX_PLUGIN_OPS];
static int n_ops;

/* Names the YAML already gives a meaning to: activation relu, norm styles. */
static const char *const builtin_names[] = {"relu", "tutorial", "standard"};

const char *clf_plugin_kind_name(clf_plugin_kind kind)
{
    switch (kind) {
    case CLF_PLUGIN_ACTIVATION:
        return "activation";
    case CLF_PLUGIN_GATED_ACTIVATION:
        return "gated activation";
    case CLF_PLUGIN_NORM:
        return "norm";
    default:
        return "unknown";
    }
}

clf_status clf_plugin_check_entry_kind(const char *backend, const char *entry,
                                       const clf_plugin_op *op, int want_norm, char *label,
                                       size_t label_size)
{
    if ((op->kind == CLF_PLUGIN_NORM) != want_norm)
        return clf_error(CLF_ERR_INPUT, "%s: %s: plugin op '%s' (%s) is not %s", backend, entry,
                         op->name, clf_plugin_kind_name(op->kind),
                         want_norm ? "a norm" : "an activation");
    snprintf(label, label_size, "%s '%s'", entry, op->name);
    return CLF_OK;
}

clf_status clf_plugin_check_gates(const char *backend, const char *label, const clf_plugin_op *op,
                                  int gates, int given)
{
    const int gated = op->kind == CLF_PLUGIN_GATED_ACTIVATION;
    if (gated ? given == gates : given == 0)
        return CLF_OK;
    const char *why = gates == 1 ? (gated ? "needs a gate" : "takes no gate")
                                 : (gated ? "needs gate and dgate" : "takes no gate or dgate");
    return clf_error(CLF_ERR_INPUT, "%s: %s: plugin op '%s' (%s) %s", backend, label, op->name,
                     clf_plugin_kind_name(op->kind), why);
}

static int valid_op_name(const char *s)
{
    if (!s || !*s || strlen(s) >= CLF_PLUGIN_NAME_MAX)
        return 0;
    if (!((*s >= 'a' && *s <= 'z') || *s == '_'))
        return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
            return 0;
    return 1;
}

/* Caller holds the lock. */
static const registered_op *find_locked(const char *name)
{
    for (int i = 0; i < n_ops; i++)
        if (strcmp(ops[i].op->name, name) == 0)
            return &ops[i];
    return NULL;
}

/* Checks one op of the plugin at path; the error names the plugin, the op and the reason. */
static clf_status check_op(const char *path, const clf_plugin_api *api, int k)
{
    const clf_plugin_op *op = &api->ops[k];
    const char *name = op->name;
    if (!valid_op_name(name))
        return clf_error(CLF_ERR_INPUT,
                         "%s: op %d is named '%s': an op name is a lower-case C identifier "
                         "([a-z_][a-z0-9_]*) of at most %d characters",
                         path, k, name ? name : "(null)", CLF_PLUGIN_NAME_MAX - 1);
    for (size_t i = 0; i < sizeof builtin_names / sizeof builtin_names[0]; i++)
        if (strcmp(name, builtin_names[i]) == 0)
            return clf_error(CLF_ERR_INPUT,
                             "%s: op '%s' collides with clformer's built-in '%s' (rename the "
                             "op)",
                             path, name, builtin_names[i]);
    for (int j = 0; j < k; j++)
        if (strcmp(api->ops[j].name, name) == 0)
            return clf_error(CLF_ERR_INPUT, "%s: op '%s' is listed twice", path, name);
    const registered_op *other = find_locked(name);
    if (other)
        return clf_error(CLF_ERR_INPUT, "%s: op '%s' collides with the op of that name in %s", path,
                         name, plugins[other->plugin].path);
    int cpu_forms;
    switch (op->kind) {
    case CLF_PLUGIN_ACTIVATION:
    case CLF_PLUGIN_GATED_ACTIVATION:
        cpu_forms = (op->cpu.act_forward != NULL) + (op->cpu.act_backward != NULL);
        break;
    case CLF_PLUGIN_NORM:
        cpu_forms = (op->cpu.norm_forward != NULL) + (op->cpu.norm_backward != NULL);
        break;
    default:
        return clf_error(CLF_ERR_INPUT,
                         "%s: op '%s' has kind %d; this clformer knows activation (%d), "
                         "gated activation (%d) and norm (%d)",
                         path, name, (int)op->kind, CLF_PLUGIN_ACTIVATION,
                         CLF_PLUGIN_GATED_ACTIVATION, CLF_PLUGIN_NORM);
    }
    if (cpu_forms == 1)
        return clf_error(CLF_ERR_INPUT,
                         "%s: op '%s' has half a CPU form: the forward and the backward "
                         "function are both set or both NULL",
                         path, name);
    if (cpu_forms == 0 && !op->opencl_source)
        return clf_error(CLF_ERR_INPUT,
                         "%s: op '%s' has no form for any backend (no CPU "
                         "functions, no OpenCL source)",
                         path, name);
    return CLF_OK;
}

/* Opens path, checks the entry, the ABI and every op, then registers them all. Caller
 * holds the lock. */
static clf_status load_locked(const char *path, const clf_plugin_api **out)
{
    char real[PATH_MAX];
    clf_status st = CLF_OK;
    void *h = NULL;
    if (!realpath(path, real))
        return clf_error(CLF_ERR_INPUT, "%s: cannot open plugin: %s", path, strerror(errno));
    for (int i = 0; i < n_plugins; i++) {
        if (strcmp(plugins[i].path, real) == 0) {
            *out = plugins[i].api;
            return CLF_OK;
        }
    }
    if (n_plugins >= CLF_MAX_PLUGINS)
        return clf_error(CLF_ERR_INPUT, "%s: too many plugins loaded (at most %d)", path,
                         CLF_MAX_PLUGINS);
    if ((st = clf_fs_check_input(real)) != CLF_OK) /* dlopen would block on a FIFO */
        return clf_error_context(st, "cannot open plugin");
    h = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return clf_error(CLF_ERR_INPUT, "%s: not a loadable plugin: %s", path, dlerror());
    clf_plugin_entry_fn entry;
    *(void **)&entry = dlsym(h, CLF_PLUGIN_ENTRY_SYMBOL);
    if (!entry) {
        st = clf_error(CLF_ERR_INPUT, "%s: not a clformer plugin: no '%s' symbol", path,
                       CLF_PLUGIN_ENTRY_SYMBOL);
        goto fail;
    }
    const clf_plugin_api *api = entry();
    if (!api) {
        st = clf_error(CLF_ERR_INPUT, "%s: %s() returned NULL", path, CLF_PLUGIN_ENTRY_SYMBOL);
        goto fail;
    }
    if (api->abi_version != CLF_PLUGIN_ABI) {
        st = clf_error(CLF_ERR_INPUT,
                       "%s: plugin ABI version %d, but this clformer needs version %d (rebuild "
                       "the plugin against this clformer's plugin.h)",
                       path, api->abi_version, CLF_PLUGIN_ABI);
        goto fail;
    }
    if (!api->name || api->n_ops < 0 || (api->n_ops > 0 && !api->ops)) {
        st = clf_error(CLF_ERR_INPUT,
                       "%s: plugin table is malformed (no name, or n_ops %d with "
                       "ops %s)",
                       path, api->n_ops, api->ops ? "set" : "NULL");
        goto fail;
    }
    if (n_ops + api->n_ops > CLF_MAX_PLUGIN_OPS) {
        st = clf_error(CLF_ERR_INPUT, "%s: too many plugin ops (at most %d in all)", path,
                       CLF_MAX_PLUGIN_OPS);
        goto fail;
    }
    for (int k = 0; k < api->n_ops; k++)
        if ((st = check_op(path, api, k)) != CLF_OK)
            goto fail;
    loaded_plugin *lp = &plugins[n_plugins];
    snprintf(lp->path, sizeof lp->path, "%s", real);
    lp->handle = h;
    lp->api = api;
    for (int k = 0; k < api->n_ops; k++)
        ops[n_ops++] = (registered_op){.op = &api->ops[k], .plugin = n_plugins};
    n_plugins++;
    *out = api;
    return CLF_OK;
fail:
    /* nothing of it is registered or running, so unloading is safe here */
    dlclose(h);
    return st;
}

clf_status clf_plugin_load_file(const char *path, const clf_plugin_api **out)
{
    const clf_plugin_api *api = NULL;
    pthread_mutex_lock(&plugin_lock);
    clf_status st = load_locked(path, &api);
    pthread_mutex_unlock(&plugin_lock);
    if (out)
        *out = api;
    return st;
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Loads every clformer-plugin-*.so of one directory, in name order, skipping file names
 * an earlier directory had (it shadows them). With fn, every file is reported and the
 * scan goes on past a refused one; without, the first refusal stops it. Caller holds the
 * lock; fn runs under it (it must not call back into the registry). */
static clf_status scan_dir_locked(const char *dir, char seen[][256], int *n_seen, int max_seen,
                                  clf_plugin_found_fn fn, void *user)
{
    clf_status st = CLF_OK;
    char *names[CLF_MAX_PLUGINS];
    int n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return CLF_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < CLF_MAX_PLUGINS) {
        if (strncmp(e->d_name, PLUGIN_PREFIX, strlen(PLUGIN_PREFIX)) != 0 ||
            !has_suffix(e->d_name, ".so") || strlen(e->d_name) >= 256)
            continue;
        if (!(names[n] = strdup(e->d_name))) {
            st = clf_error(CLF_ERR_NOMEM, "plugins: out of host memory");
            break;
        }
        n++;
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], compare_names);
    for (int i = 0; i < n && st == CLF_OK; i++) {
        int dup = 0;
        for (int j = 0; j < *n_seen; j++)
            dup |= strcmp(seen[j], names[i]) == 0;
        if (dup)
            continue;
        if (*n_seen < max_seen)
            snprintf(seen[(*n_seen)++], 256, "%s", names[i]);
        char path[4400];
        snprintf(path, sizeof path, "%.4095s/%.255s", dir, names[i]);
        const clf_plugin_api *api = NULL;
        st = load_locked(path, &api);
        if (fn) {
            fn(user, path, st == CLF_OK ? api : NULL, st == CLF_OK ? NULL : clf_last_error());
            st = CLF_OK;
        }
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    return st;
}

/* Every directory of the search path, in order. Caller holds the lock. */
static clf_status scan_path_locked(const char *plugin_dir, clf_plugin_found_fn fn, void *user)
{
    char(*dirs)[4096] = malloc(sizeof(char[4096]) * CLF_MAX_SEARCH_DIRS);
    char(*seen)[256] = malloc(sizeof(char[256]) * CLF_MAX_PLUGINS * 2);
    int n_seen = 0;
    clf_status st = CLF_OK;
    if (!dirs || !seen) {
        st = clf_error(CLF_ERR_NOMEM, "plugins: out of host memory");
        goto fail;
    }
    int n = clf_backend_search_dirs(plugin_dir, dirs, CLF_MAX_SEARCH_DIRS);
    for (int i = 0; i < n && st == CLF_OK; i++)
        st = scan_dir_locked(dirs[i], seen, &n_seen, CLF_MAX_PLUGINS * 2, fn, user);
fail:
    free(dirs);
    free(seen);
    return st;
}

clf_status clf_plugin_load_listed(const char *entry, const char *base_dir, const char *plugin_dir,
                                  char *real_path, size_t size)
{
    char path[PATH_MAX * 2 + 32];
    if (!strchr(entry, '/')) {
        char file[PATH_MAX + 32];
        snprintf(file, sizeof file, PLUGIN_PREFIX "%s.so", entry);
        if (!clf_search_path_find(plugin_dir, file, path, sizeof path, NULL, 0))
            return clf_error(CLF_ERR_INPUT,
                             "no " PLUGIN_PREFIX "%s.so on the plugin search path (give a path "
                             "with a '/', or set --plugin-dir or CLF_PLUGIN_PATH)",
                             entry);
    } else if (entry[0] == '/') {
        snprintf(path, sizeof path, "%s", entry);
    } else {
        snprintf(path, sizeof path, "%s/%s", base_dir, entry);
    }
    clf_status st = clf_plugin_load_file(path, NULL);
    if (st != CLF_OK)
        return st;
    char real[PATH_MAX];
    if (!realpath(path, real) || strlen(real) >= size)
        return clf_error(CLF_ERR_INPUT, "%s: cannot resolve the path", path);
    snprintf(real_path, size, "%s", real);
    return CLF_OK;
}

void clf_plugin_scan(const char *plugin_dir, clf_plugin_found_fn fn, void *user)
{
    pthread_mutex_lock(&plugin_lock);
    if (scan_path_locked(plugin_dir, fn, user) != CLF_OK)
        fn(user, "(plugin search path)", NULL, clf_last_error());
    pthread_mutex_unlock(&plugin_lock);
}

clf_status clf_plugin_find(const char *name, const char *plugin_dir_or_scan,
                           const clf_plugin_op **op)
{
    *op = NULL;
    if (!name)
        return CLF_OK;
    pthread_mutex_lock(&plugin_lock);
    clf_status st = CLF_OK;
    const registered_op *r = find_locked(name);
    if (!r && plugin_dir_or_scan) {
        st = scan_path_locked(plugin_dir_or_scan, NULL, NULL);
        if (st == CLF_OK)
            r = find_locked(name);
    }
    if (r)
        *op = r->op;
    pthread_mutex_unlock(&plugin_lock);
    return st;
}

const char *clf_plugin_path_of(const clf_plugin_op *op)
{
    const char *path = "";
    pthread_mutex_lock(&plugin_lock);
    for (int i = 0; i < n_ops; i++)
        if (ops[i].op == op)
            path = plugins[ops[i].plugin].path;
    pthread_mutex_unlock(&plugin_lock);
    return path;
}

void clf_plugin_each(clf_plugin_op_fn fn, void *user)
{
    pthread_mutex_lock(&plugin_lock);
    int n = n_ops;
    registered_op copy[CLF_MAX_PLUGIN_OPS];
    memcpy(copy, ops, sizeof(registered_op) * (size_t)n);
    pthread_mutex_unlock(&plugin_lock);
    for (int i = 0; i < n; i++)
        fn(user, plugins[copy[i].plugin].path, plugins[copy[i].plugin].api, copy[i].op);
}
