/* clformer/plugin.h - the op-plugin ABI: layer variants a YAML can name without a rebuild.
 *
 * A plugin is a shared object that exports one symbol, clf_plugin_entry, returning a const
 * clf_plugin_api whose first field is abi_version. The table lists ops, each of one kind:
 *
 *   CLF_PLUGIN_ACTIVATION        `model.activation: NAME`; the FFN is
 *                                  u = f(x W1^T + b1);  y = u W2^T + b2
 *   CLF_PLUGIN_GATED_ACTIVATION  `model.activation: NAME`; the FFN gains
 *                                  feed_forward_block.linear_3 (weight [d_ff, d], bias [d_ff]):
 *                                  u = f(x W1^T + b1) * (x W3^T + b3);  y = u W2^T + b2
 *   CLF_PLUGIN_NORM              `model.layernorm: {style: NAME}`; every norm becomes
 *                                  y[r,:] = alpha * n(x[r,:]) + beta   (beta only with
 *                                  norm_has_bias; else the weights file has no norm.bias)
 *
 * A plugin supplies only the math: f and f' for an activation, the parameter-free row map n
 * and its vector-Jacobian product for a norm. The backends own everything else (threads,
 * launch geometry, view offsets, the gate product, alpha/beta and their gradients), so a
 * plugin op trains as soon as it loads, on every backend it has a form for.
 *
 * Forms per backend:
 *   cpu     C function pointers (below). NULL: no CPU form.
 *   opencl  OpenCL C source (NULL: no OpenCL form) defining, for an op called NAME,
 *           activation kinds:
 *             float clf_NAME_forward(float x);   f(x)
 *             float clf_NAME_grad(float x);      f'(x)
 *           norm kind (one work-group per row, its size a power of two; every work-item
 *           of the group calls it; row pointers already point at the row; scratch holds
 *           get_local_size(0) floats; the backend's prelude defines
 *           float clf_group_sum(float v, local float *scratch), a work-group sum that
 *           every work-item must reach, returning the total to all of them):
 *             void clf_NAME_forward(global float *xhat, const global float *x, int cols,
 *                                   float eps, local float *scratch);
 *             void clf_NAME_backward(global float *dx, const global float *dy,
 *                                    const global float *alpha, const global float *x,
 *                                    int cols, float eps, local float *scratch);
 *           Each work-item handles the columns c = get_local_id(0) + k * get_local_size(0).
 * A run on a backend the op has no form for is refused before it starts, with a message
 * naming the plugin, the op and the backend.
 *
 * Names are C identifiers ([a-z_][a-z0-9_]*, at most 31 characters) and may not collide
 * with a built-in (activation relu; norm styles tutorial, standard) or with an op of
 * another loaded plugin. Plugins are never unloaded while the process runs.
 *
 * Where plugins come from (core/src/runtime/plugin_loader.c): the paths under the YAML's top-level
 * `plugins:` list (relative to the YAML's directory), then, for a name none of those
 * provides, every clformer-plugin-*.so in the backend search path (--plugin-dir,
 * $CLF_PLUGIN_PATH, the build tree, the install libdir). */
#ifndef CLFORMER_PLUGIN_H
#define CLFORMER_PLUGIN_H

#include <stddef.h>

#include "clformer/export.h"
#include "clformer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever the layout or meaning of clf_plugin_api or clf_plugin_op changes. */
#define CLF_PLUGIN_ABI 1

#define CLF_PLUGIN_NAME_MAX 32 /* op names: at most 31 characters */

typedef enum clf_plugin_kind {
    CLF_PLUGIN_ACTIVATION = 1,
    CLF_PLUGIN_GATED_ACTIVATION = 2,
    CLF_PLUGIN_NORM = 3
} clf_plugin_kind;

/* Activation, CPU form. y[i] = f(x[i]) for i < n; y may alias x. */
typedef void (*clf_plugin_act_fn)(float *y, const float *x, size_t n);
/* dx[i] = dy[i] * f'(x[i]) for i < n; dx may alias dy. */
typedef void (*clf_plugin_act_backward_fn)(float *dx, const float *dy, const float *x, size_t n);

/* Norm, CPU form, one row of cols features: xhat = n(x) (xhat does not alias x). */
typedef void (*clf_plugin_norm_fn)(float *xhat, const float *x, int cols, float eps);
/* dx = J_n(x)^T (alpha * dy): the gradient reaching x through y = alpha * n(x) + beta.
 * dx is overwritten and does not alias dy, alpha or x. */
typedef void (*clf_plugin_norm_backward_fn)(float *dx, const float *dy, const float *alpha,
                                            const float *x, int cols, float eps);

typedef struct clf_plugin_op {
    const char *name; /* the YAML spelling, e.g. "gelu" */
    clf_plugin_kind kind;
    int norm_has_bias; /* CLF_PLUGIN_NORM: 1 = a beta vector (norm.bias), 0 = alpha only */
    struct {
        /* activation kinds: both set or both NULL */
        clf_plugin_act_fn act_forward;
        clf_plugin_act_backward_fn act_backward;
        /* norm kind: both set or both NULL */
        clf_plugin_norm_fn norm_forward;
        clf_plugin_norm_backward_fn norm_backward;
    } cpu;
    const char *opencl_source; /* NULL: no OpenCL form */
} clf_plugin_op;

typedef struct clf_plugin_api {
    int abi_version;         /* CLF_PLUGIN_ABI: first, checked by the loader */
    const char *name;        /* e.g. "activations", for messages and `clformer info` */
    const char *description; /* one line */
    const clf_plugin_op *ops;
    int n_ops;
} clf_plugin_api;

/* The one symbol a plugin exports. */
typedef const clf_plugin_api *(*clf_plugin_entry_fn)(void);
#define CLF_PLUGIN_ENTRY_SYMBOL "clf_plugin_entry"

/* ---- loader and registry (core/src/runtime/plugin_loader.c) ---- */

/* Loads the plugin at path (once per real path) and registers its ops. Refused, with a
 * message naming the file and the reason, and nothing registered: not a shared object,
 * no clf_plugin_entry, an ABI version other than CLF_PLUGIN_ABI (naming both), an op with
 * a bad name or kind, half a CPU form, no form at all, or a name that collides with a
 * built-in or with an op already registered (naming the other plugin). */
CLF_API clf_status clf_plugin_load_file(const char *path, const clf_plugin_api **out);

/* The registered op called name, or NULL. With plugin_dir_or_scan set to a non-NULL
 * string ("" for none), a name not yet registered makes the loader scan the search path
 * (plugin_dir first) for clformer-plugin-*.so and load each one not loaded yet; a plugin
 * that fails to load there is an error (CLF_ERR_INPUT), not skipped. *op is NULL (and the
 * status CLF_OK) when nothing provides the name. */
CLF_API clf_status clf_plugin_find(const char *name, const char *plugin_dir_or_scan,
                                   const clf_plugin_op **op);

/* The file that registered op (for messages); "" for an op the registry does not know. */
CLF_API const char *clf_plugin_path_of(const clf_plugin_op *op);

/* "activation", "gated activation", "norm"; "unknown" otherwise. */
CLF_API const char *clf_plugin_kind_name(clf_plugin_kind kind);

/* For the plugin entries' checks (clformer/ops.h): CLF_OK when op is of the kind
 * the entry takes, a norm when want_norm, else an activation (gated or not); label then
 * gets "<entry> '<op name>'" for the entry's later messages. Otherwise CLF_ERR_INPUT with
 * "<backend>: <entry>: plugin op '<name>' (<kind>) is not a norm" (or "an activation"),
 * backend being the message prefix of the caller ("cpu", "opencl"). op is not NULL. */
CLF_API clf_status clf_plugin_check_entry_kind(const char *backend, const char *entry,
                                               const clf_plugin_op *op, int want_norm, char *label,
                                               size_t label_size);

/* For the activation entries' checks, after clf_plugin_check_entry_kind: CLF_OK when
 * the gate operands the entry takes (gates: 1 for gate, 2 for gate and dgate) are all given
 * for a gated activation and none for another (given: how many are). Otherwise
 * CLF_ERR_INPUT with "<backend>: <label>: plugin op '<name>' (<kind>) needs a gate" (or
 * "takes no gate", "needs gate and dgate", "takes no gate or dgate"). */
CLF_API clf_status clf_plugin_check_gates(const char *backend, const char *label,
                                          const clf_plugin_op *op, int gates, int given);

/* Loads every clformer-plugin-*.so on the search path (plugin_dir first; NULL for none)
 * and calls fn once per file with its table, or NULL and the reason it was refused. */
typedef void (*clf_plugin_found_fn)(void *user, const char *path, const clf_plugin_api *api,
                                    const char *error);
CLF_API void clf_plugin_scan(const char *plugin_dir, clf_plugin_found_fn fn, void *user);

/* Calls fn for every registered op, in registration order. */
typedef void (*clf_plugin_op_fn)(void *user, const char *path, const clf_plugin_api *api,
                                 const clf_plugin_op *op);
CLF_API void clf_plugin_each(clf_plugin_op_fn fn, void *user);

#ifdef __cplusplus
}
#endif
#endif
