/* What the finite check costs clf_weights_load: the load timed whole, and the conversion of
 * every tensor to F32 timed without the check (clf_tensor_to_f32) and with it
 * (clf_tensor_to_f32_finite, the one clf_weights_load calls), each on a fresh mapping of
 * the file so that both pay the same page faults. The check's share is
 * (finite - plain) / load. With build a Release build of the repository:
 *
 *   cc -O2 -Icore/include -o /tmp/bench_weights_load bench/weights_load.c \
 *      -Lbuild/lib -lclformer -Wl,-rpath,$PWD/build/lib
 *   build/bin/clformer init -c configs/base.yaml --seed 1 -o /tmp/base.safetensors
 *   /tmp/bench_weights_load configs/base.yaml /tmp/base.safetensors [reps]
 *
 * Medians over reps (default 9) runs, the three kinds interleaved; the file stays in the
 * page cache (run it once before to warm it). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "clformer/config.h"
#include "clformer/tensor.h"
#include "clformer/weights.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Seconds to map path and convert each F32/F16/BF16 tensor into buf, with or without the
 * check; -1 on an error. */
static double convert_all(const char *path, float *buf, int finite)
{
    clf_safetensors *f = NULL;
    const double t0 = now();
    if (clf_safetensors_open(path, &f) != CLF_OK)
        return -1;
    for (int i = 0; i < clf_safetensors_count(f); i++) {
        const clf_tensor *t = clf_safetensors_at(f, i);
        int64_t bad = -1;
        if (t->dtype != CLF_F32 && t->dtype != CLF_F16 && t->dtype != CLF_BF16)
            continue;
        clf_status st = finite ? clf_tensor_to_f32_finite(t, buf, &bad) : clf_tensor_to_f32(t, buf);
        if (st != CLF_OK || bad >= 0) {
            clf_safetensors_close(f);
            return -1;
        }
    }
    clf_safetensors_close(f);
    return now() - t0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s CONFIG.yaml WEIGHTS.safetensors [reps]\n", argv[0]);
        return 2;
    }
    const int reps = argc > 3 ? atoi(argv[3]) : 9;
    clf_config cfg;
    if (reps < 1 || clf_config_load(argv[1], &cfg) != CLF_OK) {
        fprintf(stderr, "%s\n", reps < 1 ? "reps must be >= 1" : clf_last_error());
        return 1;
    }
    /* the largest tensor's floats: each conversion writes into the same buffer */
    clf_safetensors *f = NULL;
    if (clf_safetensors_open(argv[2], &f) != CLF_OK) {
        fprintf(stderr, "%s\n", clf_last_error());
        return 1;
    }
    int64_t most = 1, total = 0;
    for (int i = 0; i < clf_safetensors_count(f); i++) {
        const int64_t n = clf_tensor_numel(clf_safetensors_at(f, i));
        most = n > most ? n : most;
        total += n;
    }
    clf_safetensors_close(f);
    float *buf = malloc((size_t)most * sizeof *buf);
    double *t = calloc(3 * (size_t)reps, sizeof *t);
    if (!buf || !t)
        return 1;
    for (int r = 0; r < reps; r++) {
        clf_weights *w = NULL;
        const double t0 = now();
        if (clf_weights_load(argv[2], &cfg.model, &w) != CLF_OK) {
            fprintf(stderr, "%s\n", clf_last_error());
            return 1;
        }
        t[r] = now() - t0;
        clf_weights_free(w);
        t[reps + r] = convert_all(argv[2], buf, 0);
        t[2 * reps + r] = convert_all(argv[2], buf, 1);
        if (t[reps + r] < 0 || t[2 * reps + r] < 0) {
            fprintf(stderr, "%s\n", clf_last_error());
            return 1;
        }
    }
    for (int k = 0; k < 3; k++)
        qsort(t + k * reps, (size_t)reps, sizeof *t, cmp_double);
    const double load = t[reps / 2], plain = t[reps + reps / 2], fin = t[2 * reps + reps / 2];
    printf("%s: %lld floats (%.0f MB F32), median of %d\n", argv[2], (long long)total,
           4e-6 * (double)total, reps);
    printf("  clf_weights_load              %8.1f ms\n", 1e3 * load);
    printf("  convert, no check             %8.1f ms\n", 1e3 * plain);
    printf("  convert + finite check        %8.1f ms\n", 1e3 * fin);
    printf("  check's cost                  %8.1f ms = %.1f%% of the load\n", 1e3 * (fin - plain),
           100.0 * (fin - plain) / load);
    free(t);
    free(buf);
    return 0;
}
