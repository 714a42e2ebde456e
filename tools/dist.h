/* Data-parallel training across processes (`mpirun -np N clformer train`).
 *
 * tools/dist_mpi.c implements it over MPI (built with CLF_MPI); tools/dist_none.c is the
 * build without MPI, which runs one process and refuses to start under a launcher that
 * asked for more. libclformer knows nothing of MPI: the trainer only lends its gradients
 * (clf_trainer_reduce_grads) and a hash of its state (clf_trainer_hash).
 *
 * The scheme (README "Training on several machines", docs/ARCHITECTURE.md section 8):
 * with N ranks and accumulate: A, one optimizer step takes the A x N micro-batches that
 * one process with accumulate: A x N would take, and rank r computes those at positions
 * r, r + N, ... of the step; the gradients are summed over the ranks (MPI_Iallreduce in
 * buckets, each started as soon as the backward pass of the rank's last micro-batch has
 * completed it: clf_trainer_accumulate_reduce), then every rank applies the same step.
 * Rank 0 alone writes files and logs. */
#ifndef CLF_CLI_DIST_H
#define CLF_CLI_DIST_H

#include <stdint.h>

#include "clformer/status.h"
#include "clformer/train.h"

/* Gradient buckets: a few MiB, large enough that the per-message latency is small against
 * the transfer on a 10 Gb/s link, small enough to keep the host copy small. */
#define CLI_DIST_BUCKET_BYTES ((size_t)4 << 20)

/* The environment's say over the all-reduce (read by cli_dist_init under MPI, and part of
 * the start-up agreement: ranks that differ refuse to start, since their collectives would
 * not match). CLF_DIST_OVERLAP=0: no overlap, every bucket is summed (MPI_Allreduce) after
 * the backward pass, as before the overlap was built. CLF_DIST_BUCKET_BYTES: the bucket
 * size in bytes (default CLI_DIST_BUCKET_BYTES; the tests use small ones to have many). */
#define CLI_DIST_OVERLAP_ENV "CLF_DIST_OVERLAP"
#define CLI_DIST_BUCKET_ENV  "CLF_DIST_BUCKET_BYTES"

typedef struct cli_dist {
    int rank, size;      /* this process and how many there are: 0 and 1 outside mpirun */
    int mpi;             /* MPI is initialised (size > 1) */
    int failed_together; /* the error is every rank's (a start-up disagreement) */
    int saved_stderr;    /* ranks > 0: the real stderr while silenced; -1 otherwise */
    int overlap;         /* the all-reduce overlaps the backward pass (CLF_DIST_OVERLAP) */
    size_t bucket_bytes; /* CLF_DIST_BUCKET_BYTES, or CLI_DIST_BUCKET_BYTES */
    int reduced;         /* the gradients of this step are summed already */
} cli_dist;

/* The number of processes the launcher started (OMPI_COMM_WORLD_SIZE of Open MPI's
 * mpirun, PMI_SIZE of MPICH's and Slurm's), 1 outside one. */
int cli_dist_launcher_size(void);

/* Joins the job when the launcher started more than one process (MPI_Init); ranks > 0 are
 * silenced (stderr to /dev/null) until they fail. Without MPI in the build, more than one
 * process is an error saying so. */
clf_status cli_dist_init(cli_dist *d);

/* Start-up agreement: every rank hashes the resolved config and the trainer's state; a
 * rank that differs from rank 0 makes every rank refuse, naming it (failed_together). */
clf_status cli_dist_agree(cli_dist *d, const char *config_yaml, clf_trainer *t);

/* One micro-batch of this rank (clf_trainer_accumulate). last: the rank's last of the
 * step; under MPI with overlap on, its backward pass then starts the sum of each gradient
 * bucket (MPI_Iallreduce) as soon as it has completed it, and the sums are in place on
 * return (clf_trainer_accumulate_reduce). */
clf_status cli_dist_accumulate(cli_dist *d, clf_trainer *t, const clf_train_batch *b, int last,
                               double *loss_sum, long long *tokens);

/* Sums the gradients of every rank (MPI_Allreduce in d->bucket_bytes buckets), unless
 * cli_dist_accumulate has summed them already. */
clf_status cli_dist_reduce_grads(cli_dist *d, clf_trainer *t);

/* Waits until every rank calls it (MPI_Barrier). */
clf_status cli_dist_barrier(cli_dist *d);

/* Sums n doubles over the ranks, in place. */
clf_status cli_dist_sum(cli_dist *d, double *v, int n);

/* Rank 0's *buf (*len bytes) to every rank: the others get a malloc'd copy (free() it; NULL
 * when *len is 0). */
clf_status cli_dist_bcast_bytes(cli_dist *d, char **buf, size_t *len);

/* Every rank's mine (len bytes) to rank 0, in rank order: *all (malloc'd, free() it) and
 * *all_len there; NULL and 0 on the other ranks. */
clf_status cli_dist_gather_bytes(cli_dist *d, const char *mine, size_t len, char **all,
                                 size_t *all_len);

/* The exit code of a command that ends with st (ok_code when CLF_OK). A failure prints
 * "clformer: [rank R: ]<error>"; under MPI a rank that fails alone then aborts the job
 * (MPI_Abort: the other ranks are stopped by the launcher), otherwise MPI is finalised. */
int cli_dist_exit(cli_dist *d, clf_status st, int ok_code);

#endif
