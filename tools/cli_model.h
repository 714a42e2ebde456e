/* Opening a model: the one path of every command that runs one (forward, bench, translate,
 * train): the config (with its plugins), the weights (a file, or fresh ones from a seed),
 * the backend (cli_open_backend) and the model on it. */
#ifndef CLF_CLI_MODEL_H
#define CLF_CLI_MODEL_H

#include <stdint.h>

#include "cli.h"

typedef struct cli_model_opts {
    const char *cfg_path; /* the YAML, loaded with its plugins (bo->plugin_dir)... */
    int cfg_loaded;       /* ...unless the caller already loaded it into the cli_model's cfg */
    const char *w_path;   /* the weights file; NULL: fresh weights (clf_weights_init) */
    uint64_t init_seed;   /* their seed */
    const cli_backend_opts *bo;
    /* 0: an inference model (cli_inference_model: the host copy of the weights freed as
     * they reach the device, weight type weight_type if weight_type_set, else the file's);
     * 1: a model to train (clf_model_create, F32) */
    int train;
    int weight_type_set;
    clf_weight_type weight_type;
    clf_precision precision; /* clf_model_set_precision; a note about it goes to stderr */
    /* optional: called with the open backend before the model is built, it may give the
     * model another table and handle (bench's profiler, bench_profile.h) */
    clf_status (*wrap)(void *ctx, const clf_backend_api **api, clf_backend **be);
    void *wrap_ctx;
} cli_model_opts;

typedef struct cli_model {
    clf_config cfg;
    const clf_backend_api *api; /* the backend as opened: cli_model_close closes it */
    clf_backend *be;
    clf_model *model;
    clf_weight_type weight_type; /* the type the model multiplies with */
    int bf16_arith;              /* products of many rows run in BF16 arithmetic */
} cli_model;

/* Fills *m (zeroed first unless o->cfg_loaded); on failure what was opened stays in *m for
 * cli_model_close. */
clf_status cli_model_open(const cli_model_opts *o, cli_model *m);
/* Frees the model and closes the backend; *m may be partly opened, or all zero. */
void cli_model_close(cli_model *m);

#endif
