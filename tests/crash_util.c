/* Helpers of the crash-safety and fault-injection suites (see crash_util.h). */
#include "crash_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clformer/hash.h"
#include "clformer/tensor.h"

const char *cu_path(const char *dir, const char *name)
{
    static char p[16][512];
    static int next;
    char *out = p[next++ % 16];
    snprintf(out, sizeof p[0], "%s/%s", dir, name);
    return out;
}

static void write_yaml(const char *dir, long long steps, int every)
{
    FILE *f = fopen(cu_path(dir, "exp.yaml"), "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "model: {max_len: 16, d_model: 16, layers: 1, heads: 2, d_ff: 32, dropout: 0.1}\n"
            "train:\n"
            "  data: {train: %s/train.tsv}\n"
            "  vocab: {src: %s/run/src.json, tgt: %s/run/tgt.json}\n"
            "  batch_size: 8\n"
            "  steps: %lld\n"
            "  log_every: 100000\n"
            "  checkpoint: {dir: %s/run, every: %d, keep: 2}\n",
            dir, dir, dir, steps, dir, every);
    ck_assert_int_eq(fclose(f), 0);
}

void cu_write_experiment(const char *dir, long long steps, int every)
{
    clf_test_write_reversal_corpus(cu_path(dir, "train.tsv"), 200, 3);
    write_yaml(dir, steps, every);
}

void cu_set_steps(const char *dir, long long steps)
{
    /* the experiment's only other setting that varies is `every`: read it back */
    char *text = clf_test_read_file(cu_path(dir, "exp.yaml"), NULL);
    const char *e = strstr(text, ", every: "); /* checkpoint's, not log_every */
    ck_assert_ptr_nonnull(e);
    int every = atoi(e + 9);
    free(text);
    write_yaml(dir, steps, every);
}

pid_t cu_spawn(const char *fault, long fsize, const char *errpath, const char *const *argv)
{
    const char *args[64];
    int n = 0;
    args[n++] = CLF_CLI_PATH;
    for (int i = 0; argv[i] && n < 63; i++)
        args[n++] = argv[i];
    args[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY), out = open("/dev/null", O_WRONLY),
            err = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        if (in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
            _exit(126);
        if (fault)
            setenv("CLF_FAULT", fault, 1);
        else
            unsetenv("CLF_FAULT");
        unsetenv("CLF_PLUGIN_PATH");
        signal(SIGXFSZ, SIG_DFL); /* clformer must ignore it itself */
        if (fsize > 0) {
            struct rlimit lim = {(rlim_t)fsize, (rlim_t)fsize};
            if (setrlimit(RLIMIT_FSIZE, &lim) != 0)
                _exit(126);
        }
        execv(CLF_CLI_PATH, (char *const *)args);
        _exit(127);
    }
    return pid;
}

int cu_wait(pid_t pid)
{
    int status;
    pid_t r;
    while ((r = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
    ck_assert_int_eq(r, pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int cu_run(const char *fault, long fsize, char *err, size_t errsize, const char *const *argv)
{
    char errpath[] = "/tmp/clf-cu-err-XXXXXX";
    int fd = mkstemp(errpath);
    ck_assert_int_ge(fd, 0);
    close(fd);
    int rc = cu_wait(cu_spawn(fault, fsize, errpath, argv));
    clf_test_take_file(errpath, err, errsize);
    return rc;
}

void cu_train_argv(const char *dir, const char *backend, int resume, const char **argv)
{
    static char yaml[512]; /* outlives cu_path's buffers: argv is kept across calls */
    snprintf(yaml, sizeof yaml, "%s/exp.yaml", dir);
    int n = 0;
    argv[n++] = "train";
    argv[n++] = "-c";
    argv[n++] = yaml;
    argv[n++] = "--backend";
    argv[n++] = backend;
    const char *device = getenv("CLF_TEST_DEVICE");
    if (strcmp(backend, "opencl") == 0 && device && *device) {
        argv[n++] = "--device";
        argv[n++] = device;
    }
    if (resume)
        argv[n++] = "--resume";
    argv[n] = NULL;
}

void cu_first_run(const char *dir, const char *backend, long long steps, int every, long long then,
                  char *err, size_t errsize, const char **argv)
{
    cu_write_experiment(dir, steps, every);
    cu_train_argv(dir, backend, 0, argv);
    ck_assert_msg(cu_run(NULL, 0, err, errsize, argv) == 0, "train failed: %s", err);
    cu_set_steps(dir, then);
    cu_train_argv(dir, backend, 1, argv);
}

void cu_assert_error_line(const char *err, ...)
{
    ck_assert_msg(!strstr(err, "Sanitizer") && !strstr(err, "runtime error"),
                  "a sanitizer reported: %s", err);
    size_t n = strlen(err);
    ck_assert_msg(n > 0 && err[n - 1] == '\n', "stderr does not end in a line: '%s'", err);
    const char *line = err + n - 1;
    while (line > err && line[-1] != '\n')
        line--;
    ck_assert_msg(strncmp(line, "clformer: ", 10) == 0, "last line is not an error: '%s'", line);
    va_list ap;
    va_start(ap, err);
    for (const char *w; (w = va_arg(ap, const char *)) != NULL;) {
        const char *hit = strstr(line, w);
        ck_assert_msg(hit && hit < err + n - 1, "error line '%.*s' lacks '%s'",
                      (int)(err + n - 1 - line), line, w);
    }
    va_end(ap);
}

static int by_data(const void *a, const void *b)
{
    const clf_tensor *x = *(const clf_tensor *const *)a, *y = *(const clf_tensor *const *)b;
    const char *p = x->data, *q = y->data;
    return p < q ? -1 : p > q;
}

long long cu_check_checkpoint(const char *path)
{
    clf_safetensors *f;
    clf_status st = clf_safetensors_open(path, &f);
    ck_assert_msg(st == CLF_OK, "%s does not load: %s", path, clf_last_error());
    int n = clf_safetensors_count(f);
    const clf_tensor **ts = malloc((size_t)n * sizeof *ts);
    ck_assert_ptr_nonnull(ts);
    for (int i = 0; i < n; i++)
        ts[i] = clf_safetensors_at(f, i);
    qsort(ts, (size_t)n, sizeof *ts, by_data);
    uint64_t h = CLF_FNV1A64_OFFSET;
    for (int i = 0; i < n; i++) {
        /* the data section is the tensors back to back: a gap would be unhashed bytes */
        if (i > 0)
            ck_assert_ptr_eq((const char *)ts[i - 1]->data + ts[i - 1]->nbytes, ts[i]->data);
        h = clf_hash_fnv1a64(h, ts[i]->data, ts[i]->nbytes);
    }
    free(ts);
    char got[32];
    snprintf(got, sizeof got, "%016" PRIx64, h);
    const char *want = clf_safetensors_meta(f, "data_fnv1a64");
    const char *step = clf_safetensors_meta(f, "step");
    ck_assert_msg(want != NULL, "%s: no data_fnv1a64 in its metadata", path);
    ck_assert_msg(strcmp(got, want) == 0, "%s: data hashes to %s, metadata says %s", path, got,
                  want);
    ck_assert_ptr_nonnull(step);
    long long s = atoll(step);
    clf_safetensors_close(f);
    return s;
}

long long cu_check_run(const char *dir)
{
    char run[512];
    snprintf(run, sizeof run, "%s/run", dir);
    DIR *d = opendir(run);
    if (!d)
        return -1;
    struct dirent *e;
    long long newest = -1;
    while ((e = readdir(d)) != NULL) {
        long long s;
        char tail[32];
        if (sscanf(e->d_name, "step-%lld.%31s", &s, tail) == 2 &&
            strcmp(tail, "safetensors") == 0) {
            ck_assert_int_eq(cu_check_checkpoint(cu_path(run, e->d_name)), s);
            if (s > newest)
                newest = s;
        }
    }
    closedir(d);
    if (access(cu_path(run, "last.safetensors"), F_OK) != 0)
        return -1;
    long long last = cu_check_checkpoint(cu_path(run, "last.safetensors"));
    /* last is the newest, or (killed between writing step-N and linking it) the one before */
    ck_assert_msg(last <= newest, "last.safetensors is step %lld, the newest file step %lld", last,
                  newest);
    return last;
}

int cu_count_temporaries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}
