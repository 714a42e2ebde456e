/* A training run's directory (run_dir.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clformer/fs.h"
#include "cli.h"
#include "run_dir.h"

/* Checkpoint files remembered at most when pruning (far more than any `keep`). */
#define PRUNE_MAX 4096

void run_dir_init(cli_run_dir *rd, const char *dir)
{
    rd->dir = dir;
    snprintf(rd->config, sizeof rd->config, "%s/" RUN_DIR_CONFIG, dir);
    snprintf(rd->last, sizeof rd->last, "%s/" RUN_DIR_LAST, dir);
    snprintf(rd->lock, sizeof rd->lock, "%s/" RUN_DIR_LOCK, dir);
    snprintf(rd->log, sizeof rd->log, "%s/" RUN_DIR_LOG, dir);
}

clf_status run_dir_create(const cli_run_dir *rd)
{
    char p[CLF_PATH_MAX];
    snprintf(p, sizeof p, "%s", rd->dir);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s)
            continue;
        char saved = *s;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            return clf_error(CLF_ERR_IO, "%s: cannot create the directory: %s", p, strerror(errno));
        *s = saved;
        if (!saved)
            break;
    }
    return CLF_OK;
}

clf_status run_dir_lock(const cli_run_dir *rd, clf_fs_lock **lock)
{
    char path[CLF_PATH_MAX + 320]; /* room for a file name of the directory */
    clf_status st = clf_fs_lock_acquire(rd->lock, lock);
    if (st != CLF_OK) /* held ("...: locked by process N on host H"), or not lockable at all */
        return clf_error_context(st, "train.checkpoint.dir %s %s", rd->dir,
                                 strstr(clf_last_error(), ": locked by ")
                                     ? "is in use by another run"
                                     : "cannot be locked");
    /* nobody else writes there while we hold the lock */
    DIR *d = opendir(rd->dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        const char *tmp = strstr(e->d_name, ".tmp.");
        if (!tmp || !tmp[5] || tmp[5 + strspn(tmp + 5, "0123456789")])
            continue;
        snprintf(path, sizeof path, "%s/%s", rd->dir, e->d_name);
        if (unlink(path) == 0)
            fprintf(stderr, "clformer: removed %s, left by a killed run\n", path);
    }
    if (d)
        closedir(d);
    return CLF_OK;
}

clf_status run_dir_write_config(const cli_run_dir *rd, const char *yaml, size_t len)
{
    return clf_fs_write_atomic_bytes(rd->config, yaml, len);
}

/* Deletes step-<N>.safetensors files beyond the newest `keep`. */
static void prune_checkpoints(const char *dir, int keep)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    long long steps[PRUNE_MAX];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < PRUNE_MAX) {
        long long s;
        char tail[32];
        if (sscanf(e->d_name, "step-%lld.%31s", &s, tail) == 2 && strcmp(tail, "safetensors") == 0)
            steps[n++] = s;
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        int newer = 0;
        for (int j = 0; j < n; j++)
            newer += steps[j] > steps[i];
        if (newer >= keep) {
            char path[CLF_PATH_MAX + 64];
            snprintf(path, sizeof path, "%s/step-%lld.safetensors", dir, steps[i]);
            unlink(path);
        }
    }
}

clf_status run_dir_save_checkpoint(const cli_run_dir *rd, clf_trainer *tr, long long step,
                                   const char *config_yaml, int keep)
{
    char path[CLF_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/step-%lld.safetensors", rd->dir, step);
    clf_status st = clf_trainer_save(tr, path, config_yaml);
    /* RUN_DIR_LAST: a hard link to the newest, swapped in by rename */
    if (st != CLF_OK || (st = clf_fs_link_atomic(path, rd->last)) != CLF_OK)
        return st;
    prune_checkpoints(rd->dir, keep);
    return CLF_OK;
}

/* A resumed run drops the rows logged after its checkpoint (a run killed hard logged
 * steps it will now redo), rewriting the file atomically, then appends. */
typedef struct csv_trim {
    FILE *in;
    const char *path;
    long long last_step;
} csv_trim;

static clf_status write_trimmed_csv(FILE *out, void *ctx)
{
    const csv_trim *t = ctx;
    char line[1024];
    while (fgets(line, sizeof line, t->in)) {
        long long step;
        if (sscanf(line, "%lld,", &step) == 1 && step > t->last_step)
            continue;
        if (!strchr(line, '\n') && feof(t->in)) /* half a row: the run was killed writing it */
            break;
        fputs(line, out);
    }
    if (ferror(t->in))
        return clf_error(CLF_ERR_IO, "%s: cannot read: %s", t->path, strerror(errno));
    return CLF_OK;
}

static clf_status trim_csv(const char *path, long long last_step)
{
    FILE *in = fopen(path, "r");
    if (!in)
        return clf_error(CLF_ERR_IO, "%s: cannot rewrite: %s", path, strerror(errno));
    csv_trim t = {in, path, last_step};
    clf_status st = clf_fs_write_atomic(path, write_trimmed_csv, &t);
    fclose(in);
    return st;
}

clf_status run_dir_open_log(const cli_run_dir *rd, int append, long long last_step, FILE **out)
{
    clf_status st = clf_fs_check_output(rd->log); /* a FIFO or a device is refused, not opened */
    if (st != CLF_OK)
        return st;
    append = append && cli_file_exists(rd->log);
    if (append && (st = trim_csv(rd->log, last_step)) != CLF_OK)
        return st;
    *out = fopen(rd->log, append ? "a" : "w");
    if (!*out)
        return clf_error(CLF_ERR_IO, "%s: cannot open: %s", rd->log, strerror(errno));
    if (!append)
        fprintf(*out, "step,epoch,loss,lr,tokens_per_s,valid_loss,valid_bleu\n");
    fflush(*out);
    return CLF_OK;
}
