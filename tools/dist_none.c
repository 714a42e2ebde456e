/* The build without MPI (CLF_MPI=OFF): one process; more is refused (see dist.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dist.h"

clf_status cli_dist_init(cli_dist *d)
{
    *d = (cli_dist){.rank = 0, .size = 1, .saved_stderr = -1};
    const int n = cli_dist_launcher_size();
    if (n > 1)
        return clf_error(CLF_ERR_INPUT,
                         "started as one of %d processes (mpirun), but this clformer was built "
                         "without MPI: install Open MPI (libopenmpi-dev) and rebuild with "
                         "-DCLF_MPI=ON, or run one process",
                         n);
    return CLF_OK;
}

clf_status cli_dist_agree(cli_dist *d, const char *config_yaml, clf_trainer *t)
{
    (void)d, (void)config_yaml, (void)t;
    return CLF_OK;
}

clf_status cli_dist_accumulate(cli_dist *d, clf_trainer *t, const clf_train_batch *b, int last,
                               double *loss_sum, long long *tokens)
{
    (void)d, (void)last;
    return clf_trainer_accumulate(t, b, loss_sum, tokens);
}

clf_status cli_dist_reduce_grads(cli_dist *d, clf_trainer *t)
{
    (void)d, (void)t;
    return CLF_OK;
}

clf_status cli_dist_barrier(cli_dist *d)
{
    (void)d;
    return CLF_OK;
}

clf_status cli_dist_sum(cli_dist *d, double *v, int n)
{
    (void)d, (void)v, (void)n;
    return CLF_OK;
}

clf_status cli_dist_bcast_bytes(cli_dist *d, char **buf, size_t *len)
{
    (void)d, (void)buf, (void)len;
    return CLF_OK;
}

clf_status cli_dist_gather_bytes(cli_dist *d, const char *mine, size_t len, char **all,
                                 size_t *all_len)
{
    (void)d;
    *all = malloc(len ? len : 1);
    if (!*all)
        return clf_error(CLF_ERR_NOMEM, "out of host memory");
    if (len)
        memcpy(*all, mine, len);
    *all_len = len;
    return CLF_OK;
}

int cli_dist_exit(cli_dist *d, clf_status st, int ok_code)
{
    (void)d;
    return st == CLF_OK ? ok_code : cli_fail(st);
}
