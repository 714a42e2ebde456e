/* Helpers shared by the subcommands: error printing, backend opening, option values. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

int cli_fail(clf_status st)
{
    const char *msg = clf_last_error();
    fprintf(stderr, "clformer: %s\n", *msg ? msg : clf_status_name(st));
    return clf_status_exit_code(st);
}

int cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("clformer: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

int cli_file_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

clf_status cli_optional_file(const char *path, int *present)
{
    struct stat sb;
    *present = stat(path, &sb) == 0;
    if (*present || errno != ENOENT || lstat(path, &sb) != 0)
        return CLF_OK; /* there; absent; or not to be looked at: left to the reader */
    return clf_error(CLF_ERR_INPUT,
                     "%s: a symbolic link that leads nowhere (%s): remove it, or point it at the "
                     "file",
                     path, strerror(ENOENT));
}

double cli_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int cli_parse_int(const char *opt, const char *val, int min, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || !end || *end || end == val || v < min || v > INT_MAX) {
        cli_usage_error("%s: expected an integer >= %d, got '%s'", opt, min, val);
        return 0;
    }
    *out = (int)v;
    return 1;
}

int cli_take_weight_type(const char *value, void *to)
{
    if (clf_weight_type_parse(value, to) != CLF_OK)
        return !cli_usage_error("--weight-type: expected f32, f16, bf16 or int8, got '%s'", value);
    return 1;
}

int cli_take_precision(const char *value, void *to)
{
    if (clf_precision_parse(value, to) != CLF_OK) {
        clf_clear_error();
        return !cli_usage_error("--precision: expected f32, bf16 or f16, got '%s'", value);
    }
    return 1;
}

clf_status cli_open_backend(const clf_config *cfg, const cli_backend_opts *o,
                            const clf_backend_api **api, clf_backend **be)
{
    return clf_config_open_backend(cfg, o->backend, o->device, o->threads, o->plugin_dir, api, be);
}

void cli_thread_wait_policy(cli_thread_work work)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT"))
        return; /* the user's choice */
#ifdef CLF_OPENBLAS_OPENMP
    (void)work; /* one pool for every kind of work */
    setenv("GOMP_SPINCOUNT", "3000", 0);
#else
    if (work == CLI_THREADS_BLAS) {
        setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
        return;
    }
    setenv("GOMP_SPINCOUNT", "3000", 0);
    setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0);
#endif
}

/* The most options of a command, --help included. */
#define CLI_MAX_OPTS 32

/* Stores the value of option o (its argument arg). Returns 1, or 0 after printing why the
 * value is bad. */
static int take_option(const cli_opt *o, const char *arg)
{
    char flag[64];
    int ok = 1;
    if (o->kind == CLI_OPT_FLAG)
        *(int *)o->to = 1;
    else if (o->kind == CLI_OPT_INT) {
        snprintf(flag, sizeof flag, "--%s", o->name);
        ok = cli_parse_int(flag, arg, o->min, o->to);
    } else if (o->take)
        ok = o->take(arg, o->to);
    else
        *(const char **)o->to = arg;
    if (ok && o->set)
        *o->set = 1;
    return ok;
}

int cli_parse_options(int argc, char **argv, const cli_opt *opts, void (*usage)(void))
{
    struct option longopts[CLI_MAX_OPTS + 1] = {{0}};
    char shortopts[3 * CLI_MAX_OPTS + 1] = "h";
    size_t n = 0, used = 1;
    for (; opts[n].name; n++) {
        if (n + 1 >= CLI_MAX_OPTS)
            abort(); /* a command's table, not input: more than this file allows */
        const int arg = opts[n].kind != CLI_OPT_FLAG;
        longopts[n] =
            (struct option){opts[n].name, arg ? required_argument : no_argument, NULL, opts[n].key};
        if (opts[n].key < 256) {
            shortopts[used++] = (char)opts[n].key;
            if (arg)
                shortopts[used++] = ':';
        }
    }
    longopts[n] = (struct option){"help", no_argument, NULL, 'h'};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        if (c == 'h') {
            usage();
            return 0;
        }
        size_t i = 0;
        while (i < n && opts[i].key != c)
            i++;
        if (i == n || !take_option(&opts[i], optarg))
            return 2;
    }
    return -1;
}

int cli_parse_plugin_dir_only(int argc, char **argv, const char *usage, const char **plugin_dir)
{
    static const struct option longopts[] = {
        {"plugin-dir", required_argument, NULL, 'p'}, {"help", no_argument, NULL, 'h'}, {0}};
    int c;
    *plugin_dir = NULL;
    optind = 1;
    while ((c = getopt_long(argc, argv, "p:h", longopts, NULL)) != -1) {
        if (c == 'p')
            *plugin_dir = optarg;
        else if (c == 'h') {
            printf("usage: %s\n", usage);
            return 0;
        } else
            return 2;
    }
    return -1;
}

int cli_resident_mib(double *now, double *peak)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long rss = -1, hwm = -1;
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "VmRSS:", 6) == 0)
            rss = strtol(line + 6, NULL, 10);
        else if (strncmp(line, "VmHWM:", 6) == 0)
            hwm = strtol(line + 6, NULL, 10);
    }
    fclose(f);
    if (rss < 0 || hwm < 0)
        return 0;
    *now = rss / 1024.0; /* the kernel's kB are KiB */
    *peak = hwm / 1024.0;
    return 1;
}

clf_weight_type cli_file_weight_type(const char *path)
{
    clf_safetensors *f = NULL;
    clf_weight_type t = CLF_WEIGHT_F32;
    if (path && clf_safetensors_open(path, &f) == CLF_OK) {
        const char *meta = clf_safetensors_meta(f, CLF_WEIGHT_TYPE_META);
        if (!meta || clf_weight_type_parse(meta, &t) != CLF_OK)
            t = CLF_WEIGHT_F32;
    }
    clf_safetensors_close(f);
    clf_clear_error();
    return t;
}
