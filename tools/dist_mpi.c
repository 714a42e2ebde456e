/* Data-parallel training over MPI (CLF_MPI; see dist.h). Everything MPI in clformer is
 * here: joining the job, the start-up agreement, the gradient all-reduce, the end. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "clformer/hash.h"
#include "dist.h"

/* An MPI call's failure as a clformer error naming the call. */
static clf_status mpi_check(int rc, const char *call)
{
    if (rc == MPI_SUCCESS)
        return CLF_OK;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "error %d", rc);
    return clf_error(CLF_ERR_BACKEND, "%s: %s", call, msg);
}

/* CLF_DIST_OVERLAP and CLF_DIST_BUCKET_BYTES (dist.h) into d. */
static clf_status read_env(cli_dist *d)
{
    const char *v = getenv(CLI_DIST_OVERLAP_ENV);
    if (v && *v) {
        if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
            return clf_error(CLF_ERR_INPUT, "%s is '%s': it takes 0 (no overlap) or 1",
                             CLI_DIST_OVERLAP_ENV, v);
        d->overlap = v[0] == '1';
    }
    v = getenv(CLI_DIST_BUCKET_ENV);
    if (v && *v) {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(v, &end, 10);
        /* a bucket's floats are one message's int count */
        if (*end || errno || v[0] == '-' || n < sizeof(float) || n > (1ull << 30))
            return clf_error(CLF_ERR_INPUT, "%s is '%s': it takes a byte count from 4 to 2^30",
                             CLI_DIST_BUCKET_ENV, v);
        d->bucket_bytes = (size_t)n;
    }
    return CLF_OK;
}

clf_status cli_dist_init(cli_dist *d)
{
    *d = (cli_dist){.rank = 0,
                    .size = 1,
                    .saved_stderr = -1,
                    .overlap = 1,
                    .bucket_bytes = CLI_DIST_BUCKET_BYTES};
    if (cli_dist_launcher_size() <= 1)
        return CLF_OK; /* one process: no MPI at all (a singleton MPI_Init starts daemons) */
    clf_status st = read_env(d);
    if (st != CLF_OK)
        return st;
    int provided = 0;
    /* only the main thread calls MPI (OpenMP and OpenBLAS threads never do) */
    st = mpi_check(MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    if (st != CLF_OK)
        return st;
    d->mpi = 1;
    /* errors come back as return codes (and become clformer errors) instead of aborting
     * inside MPI without a word */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    if (d->rank > 0) {
        /* silent unless it fails: cli_dist_exit gives the rank its stderr back */
        fflush(stderr);
        int null = open("/dev/null", O_WRONLY);
        d->saved_stderr = dup(2);
        if (null >= 0 && d->saved_stderr >= 0)
            dup2(null, 2);
        if (null >= 0)
            close(null);
    }
    return CLF_OK;
}

clf_status cli_dist_agree(cli_dist *d, const char *config_yaml, clf_trainer *t)
{
    if (!d->mpi)
        return CLF_OK;
    clf_status st;
    enum { K = 3 };
    static const char *const what[K] = {
        "resolved config differs", "initial weights and optimizer state differ",
        "all-reduce settings (" CLI_DIST_OVERLAP_ENV ", " CLI_DIST_BUCKET_ENV ") differ"};
    uint64_t mine[K];
    mine[0] = clf_hash_fnv1a64(CLF_FNV1A64_OFFSET, config_yaml, strlen(config_yaml));
    if ((st = clf_trainer_hash(t, &mine[1])) != CLF_OK)
        return st;
    mine[2] = (uint64_t)d->bucket_bytes << 1 | (uint64_t)d->overlap;
    uint64_t *all = malloc((size_t)d->size * sizeof mine);
    if (!all)
        return clf_error(CLF_ERR_NOMEM, "train: out of host memory");
    st = mpi_check(MPI_Allgather(mine, K, MPI_UINT64_T, all, K, MPI_UINT64_T, MPI_COMM_WORLD),
                   "MPI_Allgather (start-up agreement)");
    for (int r = 1; r < d->size && st == CLF_OK; r++)
        for (int k = 0; k < K; k++)
            if (all[K * r + k] != all[k]) {
                st = clf_error(CLF_ERR_INPUT,
                               "rank %d does not start from what rank 0 does: its %s "
                               "(%016" PRIx64 " against %016" PRIx64
                               "); every rank needs the same config, data, checkpoint and "
                               "environment",
                               r, what[k], all[K * r + k], all[k]);
                d->failed_together = 1; /* every rank saw the same table */
                break;
            }
    free(all);
    return st;
}

static clf_status allreduce_bucket(void *ctx, float *data, size_t n)
{
    (void)ctx;
    /* n <= 2^30 / 4 (read_env) fits an int count */
    return mpi_check(MPI_Allreduce(MPI_IN_PLACE, data, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                     "MPI_Allreduce (gradients)");
}

/* The sums in flight during the backward pass of the step's last micro-batch: req[0, done)
 * have completed, req[done, n) not yet. */
typedef struct overlap_run {
    MPI_Request *req;
    int n, cap, done;
} overlap_run;

static clf_status overlap_start(void *ctx, float *data, size_t n)
{
    overlap_run *o = ctx;
    if (o->n == o->cap) {
        int cap = o->cap ? 2 * o->cap : 64;
        MPI_Request *r = realloc(o->req, (size_t)cap * sizeof *r);
        if (!r)
            return clf_error(CLF_ERR_NOMEM, "train: out of host memory");
        o->req = r;
        o->cap = cap;
    }
    /* the same element-wise sum as MPI_Allreduce; nonblocking, so the backward pass goes on
     * while the bucket travels */
    clf_status st = mpi_check(MPI_Iallreduce(MPI_IN_PLACE, data, (int)n, MPI_FLOAT, MPI_SUM,
                                             MPI_COMM_WORLD, &o->req[o->n]),
                              "MPI_Iallreduce (gradients)");
    if (st == CLF_OK)
        o->n++;
    return st;
}

/* Open MPI moves a nonblocking collective on only inside MPI calls (it has no progress
 * thread by default): one MPI_Test per node of the backward pass, on the oldest sum in
 * flight, is that call. */
static clf_status overlap_progress(void *ctx)
{
    overlap_run *o = ctx;
    while (o->done < o->n) {
        int flag = 0;
        clf_status st =
            mpi_check(MPI_Test(&o->req[o->done], &flag, MPI_STATUS_IGNORE), "MPI_Test (gradients)");
        if (st != CLF_OK)
            return st;
        if (!flag)
            break;
        o->done++;
    }
    return CLF_OK;
}

static clf_status overlap_finish(void *ctx)
{
    overlap_run *o = ctx;
    clf_status st = mpi_check(MPI_Waitall(o->n - o->done, o->req + o->done, MPI_STATUSES_IGNORE),
                              "MPI_Waitall (gradients)");
    o->done = o->n;
    return st;
}

clf_status cli_dist_accumulate(cli_dist *d, clf_trainer *t, const clf_train_batch *b, int last,
                               double *loss_sum, long long *tokens)
{
    if (!d->mpi || !d->overlap || !last)
        return clf_trainer_accumulate(t, b, loss_sum, tokens);
    overlap_run o = {0};
    const clf_trainer_reducer r = {.bucket_bytes = d->bucket_bytes,
                                   .start = overlap_start,
                                   .progress = overlap_progress,
                                   .finish = overlap_finish,
                                   .ctx = &o};
    /* the trainer has called finish when it started anything, error or not: no request is
     * left in flight here */
    clf_status st = clf_trainer_accumulate_reduce(t, b, &r, loss_sum, tokens);
    free(o.req);
    if (st == CLF_OK)
        d->reduced = 1;
    return st;
}

clf_status cli_dist_reduce_grads(cli_dist *d, clf_trainer *t)
{
    if (!d->mpi)
        return CLF_OK;
    if (d->reduced) { /* by cli_dist_accumulate, during the backward pass */
        d->reduced = 0;
        return CLF_OK;
    }
    return clf_trainer_reduce_grads(t, d->bucket_bytes, allreduce_bucket, NULL);
}

clf_status cli_dist_barrier(cli_dist *d)
{
    return d->mpi ? mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier") : CLF_OK;
}

clf_status cli_dist_sum(cli_dist *d, double *v, int n)
{
    if (!d->mpi)
        return CLF_OK;
    return mpi_check(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
                     "MPI_Allreduce (step totals)");
}

/* Byte counts travel as unsigned long long; one message is at most INT_MAX bytes (a
 * translation round is --batch x ranks lines). */
clf_status cli_dist_bcast_bytes(cli_dist *d, char **buf, size_t *len)
{
    if (!d->mpi)
        return CLF_OK;
    unsigned long long n = *len;
    clf_status st = mpi_check(MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD),
                              "MPI_Bcast (length)");
    if (st != CLF_OK)
        return st;
    if (n > INT_MAX)
        return clf_error(CLF_ERR_INPUT, "%llu bytes are too many for one message", n);
    if (d->rank > 0) {
        *len = (size_t)n;
        *buf = NULL;
        if (n == 0)
            return CLF_OK;
        if (!(*buf = malloc((size_t)n)))
            return clf_error(CLF_ERR_NOMEM, "out of host memory");
    }
    return n ? mpi_check(MPI_Bcast(*buf, (int)n, MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Bcast")
             : CLF_OK;
}

clf_status cli_dist_gather_bytes(cli_dist *d, const char *mine, size_t len, char **all,
                                 size_t *all_len)
{
    *all = NULL;
    *all_len = 0;
    if (len > INT_MAX)
        return clf_error(CLF_ERR_INPUT, "%zu bytes are too many for one message", len);
    int n = (int)len, *counts = NULL, *offs = NULL;
    clf_status st = CLF_OK;
    if (d->rank == 0) {
        counts = calloc((size_t)d->size, sizeof *counts);
        offs = calloc((size_t)d->size, sizeof *offs);
        if (!counts || !offs) {
            st = clf_error(CLF_ERR_NOMEM, "out of host memory");
            goto fail;
        }
    }
    if ((st = mpi_check(MPI_Gather(&n, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD),
                        "MPI_Gather (lengths)")) != CLF_OK)
        goto fail;
    size_t total = 0;
    if (d->rank == 0) {
        for (int r = 0; r < d->size; r++) {
            if (total + (size_t)counts[r] > INT_MAX) {
                st = clf_error(CLF_ERR_INPUT, "%zu bytes are too many for one message",
                               total + (size_t)counts[r]);
                goto fail;
            }
            offs[r] = (int)total;
            total += (size_t)counts[r];
        }
        if (!(*all = malloc(total ? total : 1))) {
            st = clf_error(CLF_ERR_NOMEM, "out of host memory");
            goto fail;
        }
    }
    st = mpi_check(MPI_Gatherv(mine, n, MPI_CHAR, *all, counts, offs, MPI_CHAR, 0, MPI_COMM_WORLD),
                   "MPI_Gatherv");
    if (st == CLF_OK)
        *all_len = total;
fail:
    if (st != CLF_OK) {
        free(*all);
        *all = NULL;
    }
    free(counts);
    free(offs);
    return st;
}

int cli_dist_exit(cli_dist *d, clf_status st, int ok_code)
{
    int rc = ok_code;
    if (st != CLF_OK) {
        if (d->saved_stderr >= 0) {
            fflush(stderr);
            dup2(d->saved_stderr, 2);
        }
        if (d->size > 1 && !d->failed_together)
            clf_error_context(st, "rank %d", d->rank);
        /* a disagreement is reported once, by rank 0 */
        if (d->failed_together && d->rank > 0)
            rc = clf_status_exit_code(st);
        else
            rc = cli_fail(st);
        fflush(stderr);
        if (d->mpi && !d->failed_together)
            MPI_Abort(MPI_COMM_WORLD, rc); /* the others may be waiting in a collective */
    }
    if (d->saved_stderr >= 0)
        close(d->saved_stderr);
    if (d->mpi)
        MPI_Finalize();
    return rc;
}
