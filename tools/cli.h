/* The clformer CLI: one file per subcommand, shared helpers in cli_common.c. */
#ifndef CLF_CLI_H
#define CLF_CLI_H

#include "clformer/backend.h"
#include "clformer/config.h"
#include "clformer/status.h"

int clf_cmd_info(int argc, char **argv);
int clf_cmd_devices(int argc, char **argv);
int clf_cmd_config(int argc, char **argv);
int clf_cmd_init(int argc, char **argv);
int clf_cmd_forward(int argc, char **argv);
int clf_cmd_bench(int argc, char **argv);
int clf_cmd_translate(int argc, char **argv);
int clf_cmd_train(int argc, char **argv);
int clf_cmd_vocab(int argc, char **argv);

/* Prints "clformer: <last error>" to stderr and returns the exit code for st. */
int cli_fail(clf_status st);
/* Prints "clformer: <message>" and returns 2 (bad arguments). */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Options shared by the commands that run a model. */
typedef struct cli_backend_opts {
    const char *backend;    /* --backend, overrides CLF_BACKEND and the config */
    const char *device;     /* --device, overrides backend.device */
    const char *plugin_dir; /* --plugin-dir */
    int threads;            /* --threads, -1 = from the config */
} cli_backend_opts;

/* Opens the backend the config and the options name (see clf_backend_open_named). */
clf_status cli_open_backend(const clf_config *cfg, const cli_backend_opts *o,
                            const clf_backend_api **api, clf_backend **be);

/* Parses a positive int option value; on error prints and returns 0. */
int cli_parse_int(const char *opt, const char *val, int min, int *out);

#endif
