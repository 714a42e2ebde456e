/* Backend plugin loader and registry.
 *
 * Backends are clformer-<name>.so files found on a search path and opened with
 * dlopen(RTLD_NOW | RTLD_LOCAL). Handles are kept in a process-wide registry and never
 * dlclose'd: a backend's code may still be running (OpenMP pools, OpenCL callbacks) and
 * unloading it under them would crash. The registry is the one piece of global mutable
 * state in libclformer; a mutex guards it. */
#include "clformer/backend.h"
#include "clformer/fs.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/search_path.h"

#define CLF_MAX_LOADED 32

typedef struct loaded_backend {
    char path[PATH_MAX];
    void *handle;
    const clf_backend_api *api;
} loaded_backend;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static loaded_backend registry[CLF_MAX_LOADED];
static int registry_count;

const char *clf_op_name(clf_op op)
{
    static const char *const names[CLF_OP_COUNT] = {
        [CLF_OP_GEMM] = "gemm",
        [CLF_OP_GEMM_STRIDED_BATCHED] = "gemm_strided_batched",
        [CLF_OP_LAYERNORM] = "layernorm",
        [CLF_OP_ATTENTION] = "attention",
        [CLF_OP_EMBED] = "embed",
        [CLF_OP_ADD] = "add",
        [CLF_OP_SOFTMAX] = "softmax",
        [CLF_OP_ARGMAX] = "argmax",
        [CLF_OP_RELU_BACKWARD] = "relu_backward",
        [CLF_OP_LAYERNORM_BACKWARD] = "layernorm_backward",
        [CLF_OP_ATTENTION_BACKWARD] = "attention_backward",
        [CLF_OP_EMBED_BACKWARD] = "embed_backward",
        [CLF_OP_DROPOUT] = "dropout",
        [CLF_OP_CROSS_ENTROPY] = "cross_entropy",
        [CLF_OP_ADAM] = "adam",
        [CLF_OP_SUM_SQUARES] = "sum_squares",
        [CLF_OP_FILL] = "fill",
        [CLF_OP_ACTIVATION] = "activation",
        [CLF_OP_ACTIVATION_BACKWARD] = "activation_backward",
        [CLF_OP_NORM] = "norm",
        [CLF_OP_NORM_BACKWARD] = "norm_backward",
        [CLF_OP_GEMM_BF16] = "gemm (BF16 weights)",
        [CLF_OP_GEMM_I8] = "gemm (int8 weights)",
        [CLF_OP_ATTENTION_KV_ROWS] = "attention (key/value rows through a table)",
        [CLF_OP_GEMM_HALF_ARITH] = "gemm (F16 arithmetic for products of many rows)",
        [CLF_OP_TOPK] = "topk",
        [CLF_OP_GEMM_BF16_ARITH] = "gemm (BF16 arithmetic for products of many rows)",
        [CLF_OP_QUEUED] = "queued ops (decoding runs steps ahead)",
        [CLF_OP_TOPK_LOG_SOFTMAX] = "topk over log_softmax",
        [CLF_OP_ATTENTION_APPEND] = "attention (appending this step's keys and values)",
        [CLF_OP_GEMM_LAYERNORM] = "gemm (layer-normalizing A first)",
        [CLF_OP_DEVICE_POS] = "positions read on the device (pos_add)",
        [CLF_OP_CAPTURE] = "capture and replay",
        [CLF_OP_BEAM_CHOOSE] = "beam_choose",
    };
    if ((int)op < 0 || op >= CLF_OP_COUNT)
        return "unknown-op";
    return names[op];
}

static int is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static void add_dir(char dirs[][4096], int *n, int max, const char *d, size_t len)
{
    if (len == 0 || *n >= max || len >= 4096)
        return;
    char tmp[4096];
    memcpy(tmp, d, len);
    tmp[len] = '\0';
    for (int i = 0; i < *n; i++)
        if (strcmp(dirs[i], tmp) == 0)
            return;
    memcpy(dirs[*n], tmp, len + 1);
    (*n)++;
}

/* The install dir relative to the running executable (<prefix>/bin/clformer ->
 * <prefix>/lib/clformer), so that a relocated install still finds its backends. */
static void add_exe_relative_dir(char dirs[][4096], int *n, int max)
{
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return;
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return;
    *slash = '\0';
    slash = strrchr(exe, '/');
    if (!slash)
        return;
    *slash = '\0';
    char d[4096];
    int m = snprintf(d, sizeof d, "%s/lib/clformer", exe);
    if (m > 0 && (size_t)m < sizeof d && is_dir(d))
        add_dir(dirs, n, max, d, (size_t)m);
}

int clf_backend_search_dirs(const char *plugin_dir, char dirs[][4096], int max_dirs)
{
    int n = 0;
    if (plugin_dir && *plugin_dir)
        add_dir(dirs, &n, max_dirs, plugin_dir, strlen(plugin_dir));
    const char *env = getenv("CLF_PLUGIN_PATH");
    while (env && *env) {
        const char *colon = strchr(env, ':');
        size_t len = colon ? (size_t)(colon - env) : strlen(env);
        add_dir(dirs, &n, max_dirs, env, len);
        env = colon ? colon + 1 : NULL;
    }
    add_dir(dirs, &n, max_dirs, CLF_BUILD_BACKEND_DIR, strlen(CLF_BUILD_BACKEND_DIR));
    add_dir(dirs, &n, max_dirs, CLF_INSTALL_BACKEND_DIR, strlen(CLF_INSTALL_BACKEND_DIR));
    add_exe_relative_dir(dirs, &n, max_dirs);
    return n;
}

int clf_search_path_find(const char *plugin_dir, const char *file, char *path, size_t path_size,
                         char *looked, size_t looked_size)
{
    char dirs[CLF_MAX_SEARCH_DIRS][4096];
    int n = clf_backend_search_dirs(plugin_dir, dirs, CLF_MAX_SEARCH_DIRS);
    size_t used = 0;
    path[0] = '\0';
    if (looked && looked_size)
        looked[0] = '\0';
    for (int i = 0; i < n; i++) {
        /* joined here, not in path: under -fsanitize=undefined GCC 12 keeps path == NULL
         * alive past access()'s nonnull check and refuses the snprintf into it */
        char cand[4096 + NAME_MAX + 2];
        int m = snprintf(cand, sizeof cand, "%s/%s", dirs[i], file);
        if (m > 0 && (size_t)m < sizeof cand && (size_t)m < path_size && access(cand, F_OK) == 0) {
            memcpy(path, cand, (size_t)m + 1);
            return 1;
        }
        if (!looked || !looked_size)
            continue;
        int w = snprintf(looked + used, looked_size - used, "%s%s", used ? ", " : "", dirs[i]);
        if (w > 0 && used + (size_t)w < looked_size)
            used += (size_t)w;
        looked[used] = '\0'; /* a directory that did not fit is left out whole */
    }
    return 0;
}

/* Opens path, finds the entry symbol and checks the ABI version. Caller holds the lock. */
static clf_status load_locked(const char *path, const clf_backend_api **out)
{
    char real[PATH_MAX];
    if (!realpath(path, real))
        return clf_error(CLF_ERR_INPUT, "%s: cannot open backend: %s", path, strerror(errno));
    for (int i = 0; i < registry_count; i++) {
        if (strcmp(registry[i].path, real) == 0) {
            *out = registry[i].api;
            return CLF_OK;
        }
    }
    if (registry_count >= CLF_MAX_LOADED)
        return clf_error(CLF_ERR_INPUT, "%s: too many backends loaded (at most %d)", path,
                         CLF_MAX_LOADED);
    clf_status st = clf_fs_check_input(real); /* dlopen would block on a FIFO */
    if (st != CLF_OK)
        return clf_error_context(st, "cannot open backend");
    void *h = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return clf_error(CLF_ERR_INPUT, "%s: not a loadable backend: %s", path, dlerror());
    clf_backend_entry_fn entry;
    *(void **)&entry = dlsym(h, CLF_BACKEND_ENTRY_SYMBOL);
    if (!entry) {
        /* Nothing from it can be running yet, so unloading is safe here. */
        dlclose(h);
        return clf_error(CLF_ERR_INPUT, "%s: not a clformer backend: no '%s' symbol", path,
                         CLF_BACKEND_ENTRY_SYMBOL);
    }
    const clf_backend_api *api = entry();
    if (!api) {
        dlclose(h);
        return clf_error(CLF_ERR_INPUT, "%s: %s() returned NULL", path, CLF_BACKEND_ENTRY_SYMBOL);
    }
    if (api->abi_version != CLF_BACKEND_ABI) {
        int v = api->abi_version;
        dlclose(h);
        return clf_error(CLF_ERR_INPUT,
                         "%s: backend ABI version %d, but this clformer needs version %d "
                         "(rebuild the backend against this clformer)",
                         path, v, CLF_BACKEND_ABI);
    }
    if (!api->name || !api->open || !api->close || !api->alloc || !api->free || !api->buffer_size ||
        !api->upload || !api->download || !api->synchronize || !api->supports) {
        dlclose(h);
        return clf_error(CLF_ERR_INPUT,
                         "%s: backend table is incomplete (a required lifecycle or memory "
                         "function is NULL)",
                         path);
    }
    loaded_backend *lb = &registry[registry_count++];
    snprintf(lb->path, sizeof lb->path, "%s", real);
    lb->handle = h;
    lb->api = api;
    *out = api;
    return CLF_OK;
}

clf_status clf_backend_load_file(const char *path, const clf_backend_api **out)
{
    pthread_mutex_lock(&registry_lock);
    clf_status st = load_locked(path, out);
    pthread_mutex_unlock(&registry_lock);
    return st;
}

static int valid_backend_name(const char *name)
{
    if (!name || !*name || strlen(name) > 64)
        return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
            return 0;
    return 1;
}

clf_status clf_backend_load(const char *name, const char *plugin_dir, const clf_backend_api **out)
{
    *out = NULL;
    if (!valid_backend_name(name))
        return clf_error(CLF_ERR_INPUT,
                         "backend name '%s' is not valid (expected cpu, opencl, "
                         "auto or another [a-z0-9_-] plugin name)",
                         name ? name : "");
    char file[96], path[4200], looked[2048];
    snprintf(file, sizeof file, "clformer-%s.so", name);
    if (!clf_search_path_find(plugin_dir, file, path, sizeof path, looked, sizeof looked))
        return clf_error(CLF_ERR_BACKEND,
                         "backend '%s' not found: no %s in %s (set --plugin-dir or "
                         "CLF_PLUGIN_PATH)",
                         name, file, looked[0] ? looked : "(no search directories)");
    return clf_backend_load_file(path, out);
}

/* An OpenCL backend counts for "auto" only when its default device is a GPU. */
static void auto_gpu_cb(void *user, const clf_device_info *info)
{
    int *found = user;
    if (strcasecmp(info->type, "GPU") == 0)
        *found = 1;
}

clf_status clf_backend_open_named(const char *name, const char *plugin_dir,
                                  const clf_backend_opts *opts, const clf_backend_api **api,
                                  clf_backend **be)
{
    *api = NULL;
    *be = NULL;
    const char *env = getenv("CLF_BACKEND");
    if ((!name || !*name) && env && *env)
        name = env;
    if (!name || !*name)
        name = "cpu";
    clf_status st;
    if (strcmp(name, "auto") == 0) {
        const clf_backend_api *ocl = NULL;
        int gpu = 0;
        if (clf_backend_load("opencl", plugin_dir, &ocl) == CLF_OK && ocl->list_devices &&
            ocl->list_devices(auto_gpu_cb, &gpu) == CLF_OK && gpu &&
            ocl->open(opts, be) == CLF_OK) {
            *api = ocl;
            return CLF_OK;
        }
        clf_clear_error();
        name = "cpu";
    }
    if ((st = clf_backend_load(name, plugin_dir, api)) != CLF_OK)
        return st;
    if ((st = (*api)->open(opts, be)) != CLF_OK) {
        *api = NULL;
        *be = NULL;
        return st;
    }
    return CLF_OK;
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

void clf_backend_scan(const char *plugin_dir, clf_backend_found_fn fn, void *user)
{
    char dirs[CLF_MAX_SEARCH_DIRS][4096];
    char seen[CLF_MAX_LOADED][256];
    int n_seen = 0;
    pthread_mutex_lock(&registry_lock);
    int n = clf_backend_search_dirs(plugin_dir, dirs, CLF_MAX_SEARCH_DIRS);
    pthread_mutex_unlock(&registry_lock);
    for (int i = 0; i < n; i++) {
        DIR *d = opendir(dirs[i]);
        if (!d)
            continue;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strncmp(e->d_name, "clformer-", 9) != 0 || !has_suffix(e->d_name, ".so"))
                continue;
            if (strncmp(e->d_name, "clformer-plugin-", 16) == 0)
                continue; /* op plugins (clformer/plugin.h) share the directory */
            /* earlier directories shadow later ones, as clf_backend_load does */
            int dup = 0;
            for (int j = 0; j < n_seen; j++)
                if (strcmp(seen[j], e->d_name) == 0)
                    dup = 1;
            if (dup)
                continue;
            if (n_seen < CLF_MAX_LOADED)
                snprintf(seen[n_seen++], sizeof seen[0], "%s", e->d_name);
            char path[4400];
            snprintf(path, sizeof path, "%.4095s/%.255s", dirs[i], e->d_name);
            const clf_backend_api *api = NULL;
            clf_status st = clf_backend_load_file(path, &api);
            fn(user, path, st == CLF_OK ? api : NULL, st == CLF_OK ? NULL : clf_last_error());
        }
        closedir(d);
    }
}

/* Whether the table has a function for op: a backend that says supports() but left the
 * pointer NULL would otherwise crash the first run. */
static int op_fn_present(const clf_backend_api *api, clf_op op)
{
    switch (op) {
    case CLF_OP_GEMM:
        return api->gemm != NULL;
    case CLF_OP_GEMM_STRIDED_BATCHED:
        return api->gemm_strided_batched != NULL;
    case CLF_OP_LAYERNORM:
        return api->layernorm != NULL;
    case CLF_OP_ATTENTION:
        return api->attention != NULL;
    case CLF_OP_EMBED:
        return api->embed != NULL;
    case CLF_OP_ADD:
        return api->add != NULL;
    case CLF_OP_SOFTMAX:
        return api->softmax != NULL;
    case CLF_OP_ARGMAX:
        return api->argmax != NULL;
    case CLF_OP_RELU_BACKWARD:
        return api->relu_backward != NULL;
    case CLF_OP_LAYERNORM_BACKWARD:
        return api->layernorm_backward != NULL;
    case CLF_OP_ATTENTION_BACKWARD:
        return api->attention_backward != NULL;
    case CLF_OP_EMBED_BACKWARD:
        return api->embed_backward != NULL;
    case CLF_OP_DROPOUT:
        return api->dropout != NULL;
    case CLF_OP_CROSS_ENTROPY:
        return api->cross_entropy != NULL;
    case CLF_OP_ADAM:
        return api->adam != NULL;
    case CLF_OP_SUM_SQUARES:
        return api->sum_squares != NULL;
    case CLF_OP_FILL:
        return api->fill != NULL;
    case CLF_OP_ACTIVATION:
        return api->plugin_prepare != NULL && api->activation != NULL;
    case CLF_OP_ACTIVATION_BACKWARD:
        return api->plugin_prepare != NULL && api->activation_backward != NULL;
    case CLF_OP_NORM:
        return api->plugin_prepare != NULL && api->norm != NULL;
    case CLF_OP_NORM_BACKWARD:
        return api->plugin_prepare != NULL && api->norm_backward != NULL;
    case CLF_OP_GEMM_BF16:
    case CLF_OP_GEMM_I8:
    case CLF_OP_GEMM_HALF_ARITH:
    case CLF_OP_GEMM_BF16_ARITH:
    case CLF_OP_GEMM_LAYERNORM:
        return api->gemm != NULL;
    case CLF_OP_TOPK:
    case CLF_OP_TOPK_LOG_SOFTMAX:
        return api->topk != NULL;
    case CLF_OP_ATTENTION_KV_ROWS:
    case CLF_OP_ATTENTION_APPEND:
        return api->attention != NULL;
    case CLF_OP_DEVICE_POS:
        return api->attention != NULL && api->embed != NULL;
    case CLF_OP_CAPTURE:
        return api->capture_begin && api->capture_end && api->replay && api->capture_free;
    case CLF_OP_BEAM_CHOOSE:
        return api->beam_choose != NULL;
    case CLF_OP_QUEUED:
        return 1;
    default:
        return 0;
    }
}

clf_status clf_backend_require(const clf_backend_api *api, clf_backend *be, clf_op op)
{
    if (!api->supports(be, op) || !op_fn_present(api, op))
        return clf_error(CLF_ERR_UNSUPPORTED,
                         "the %s backend does not implement op '%s' (no silent fallback to "
                         "another backend; choose a backend that has it)",
                         api->name, clf_op_name(op));
    return CLF_OK;
}
