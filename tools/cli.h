/* The clformer CLI: one file per subcommand (cmd_<name>.c), shared helpers in cli_common.c;
 * opening a model in cli_model.h; the directories a command reads and writes in model_dir.h
 * (a model's) and run_dir.h (a training run's, its vocabularies in run_vocab.h). */
#ifndef CLF_CLI_H
#define CLF_CLI_H

#include "clformer/backend.h"
#include "clformer/config.h"
#include "clformer/model.h"
#include "clformer/status.h"
#include "clformer/tokenizer.h"
#include "clformer/weights.h"

int clf_cmd_info(int argc, char **argv);
int clf_cmd_devices(int argc, char **argv);
int clf_cmd_config(int argc, char **argv);
int clf_cmd_init(int argc, char **argv);
int clf_cmd_forward(int argc, char **argv);
int clf_cmd_bench(int argc, char **argv);
int clf_cmd_quantize(int argc, char **argv);
int clf_cmd_translate(int argc, char **argv);
int clf_cmd_train(int argc, char **argv);
int clf_cmd_vocab(int argc, char **argv);
int clf_cmd_import(int argc, char **argv);
int clf_cmd_serve(int argc, char **argv);

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

/* 1 when path names something that exists (access F_OK). */
int cli_file_exists(const char *path);
/* For a file that may be absent: *present 1 when something is at path (followed through
 * symbolic links), 0 when nothing is. A symbolic link that leads nowhere is not taken for
 * an absent file: CLF_ERR_INPUT, "<path>: a symbolic link that leads nowhere (<why>)". */
clf_status cli_optional_file(const char *path, int *present);
/* Seconds on the monotonic clock, for durations. */
double cli_now_s(void);

/* How idle worker threads wait, set in the environment before a backend (and libgomp and
 * OpenBLAS with it) is loaded; a variable the user set is left alone.
 * Built against OpenBLAS's OpenMP build (CLF_OPENBLAS_OPENMP, the default where Debian's
 * libopenblas0-openmp is installed), the GEMMs and the backend's own loops share OpenMP's
 * threads: they spin ~3000 rounds (microseconds) before sleeping, for every kind of work.
 * Otherwise the CPU backend runs its own loops on OpenMP threads and its GEMMs on OpenBLAS's
 * pthreads: threads of one pool that spin while the other works steal its cores
 * (bench/RESULTS.md, "Two thread pools"), so:
 *   CLI_THREADS_BLAS: OpenMP threads sleep at once (OMP_WAIT_POLICY=PASSIVE); the default.
 *   CLI_THREADS_OPENMP: for work that is ~100 short OpenMP loops in a row (decoding with F16
 *     weights: its few-row products are the backend's own kernels, not OpenBLAS's): OpenMP
 *     threads spin ~3000 rounds (microseconds) before sleeping, so that the next loop does
 *     not pay a futex wake-up, and OpenBLAS's threads, which would yield-spin far longer,
 *     sleep at once (OPENBLAS_THREAD_TIMEOUT=4). bench/RESULTS.md has the figures. */
typedef enum { CLI_THREADS_BLAS, CLI_THREADS_OPENMP } cli_thread_work;
void cli_thread_wait_policy(cli_thread_work work);

/* Parses an int option value >= min; on error prints and returns 0. */
int cli_parse_int(const char *opt, const char *val, int min, int *out);
/* The type a weights file records (CLF_WEIGHT_TYPE_META), f32 when it has none or cannot
 * be read (clf_weights_load reports that): read before the backend loads, for the thread
 * policy. */
clf_weight_type cli_file_weight_type(const char *path);
/* The --precision lines of forward's, bench's and translate's --help. */
#define CLI_PRECISION_HELP                                                                         \
    "  --precision P        f32|bf16|f16 (default f32): what the products of many rows (the\n"     \
    "                       encoder, batched decoding, a forward pass) take as inputs, summed\n"   \
    "                       in F32; layernorm, softmax and residual sums stay F32, and the\n"      \
    "                       products of few rows follow --weight-type. bf16 keeps a BF16\n"        \
    "                       copy of the weight matrices; without BF16 arithmetic (cpu without\n"   \
    "                       AVX512_BF16, opencl) or F16 arithmetic, a note says F32 runs\n"

/* This process's resident memory now and at its peak (VmRSS, VmHWM of /proc/self/status),
 * in MiB; 0 where the system does not say (not Linux). */
int cli_resident_mib(double *now, double *peak);
/* One option of a command, for cli_parse_options: its value goes to `to` as kind says. */
typedef enum {
    CLI_OPT_STRING, /* const char **to = the value (take: take(value, to) stores it) */
    CLI_OPT_FLAG,   /* int *to = 1; no value */
    CLI_OPT_INT     /* int *to = the value, an int >= min (cli_parse_int) */
} cli_opt_kind;
typedef struct cli_opt {
    const char *name; /* the long name, without "--" */
    int key;          /* its short letter, or a value above 255 for a long option only */
    cli_opt_kind kind;
    void *to;
    int min;  /* CLI_OPT_INT: the least value */
    int *set; /* set to 1 when the option is given (may be NULL) */
    /* CLI_OPT_STRING: checks the value and stores it at to; 0 after printing why it is bad */
    int (*take)(const char *value, void *to);
} cli_opt;
/* The plain kinds' entries: a string, a flag, an int >= min. */
#define CLI_STRING(name, key, to)                                                                  \
    {                                                                                              \
        (name), (key), CLI_OPT_STRING, (to), 0, NULL, NULL                                         \
    }
#define CLI_FLAG(name, key, to)                                                                    \
    {                                                                                              \
        (name), (key), CLI_OPT_FLAG, (to), 0, NULL, NULL                                           \
    }
#define CLI_INT(name, key, to, min)                                                                \
    {                                                                                              \
        (name), (key), CLI_OPT_INT, (to), (min), NULL, NULL                                        \
    }
/* CLI_OPT_STRING takes: --weight-type VAL into a clf_weight_type, --precision VAL into a
 * clf_precision; 0 after printing why a VAL that is not f32, f16, bf16 or int8 (bf16 or f16
 * for --precision) is bad. */
int cli_take_weight_type(const char *value, void *to);
int cli_take_precision(const char *value, void *to);
/* Their entries: the value into to, *set = 1 when given (set may be NULL). */
#define CLI_WEIGHT_TYPE(key, to, set)                                                              \
    {                                                                                              \
        "weight-type", (key), CLI_OPT_STRING, (to), 0, (set), cli_take_weight_type                 \
    }
#define CLI_PRECISION(key, to, set)                                                                \
    {                                                                                              \
        "precision", (key), CLI_OPT_STRING, (to), 0, (set), cli_take_precision                     \
    }
/* The entries of the options every model-running command shares, into o (a
 * cli_backend_opts *), for a cli_opt table. */
#define CLI_BACKEND_OPTS(o)                                                                        \
    CLI_STRING("backend", 'b', &(o)->backend), CLI_STRING("device", 'D', &(o)->device),            \
        CLI_INT("threads", 't', &(o)->threads, 0), CLI_STRING("plugin-dir", 'p', &(o)->plugin_dir)
/* Parses argv by opts (ended by an entry without a name; --help/-h is added): returns -1 to
 * go on (optind at the first operand), 0 after usage() for --help, 2 after getopt's message
 * for an unknown option or the message for a bad value. */
int cli_parse_options(int argc, char **argv, const cli_opt *opts, void (*usage)(void));
/* Parses the options of a command that takes only --plugin-dir and --help. Returns -1 to go
 * on (with *plugin_dir set, or NULL), or the exit code: 0 after printing "usage: <usage>"
 * for --help, 2 for an unknown option. */
int cli_parse_plugin_dir_only(int argc, char **argv, const char *usage, const char **plugin_dir);

#endif
