/* What the checkpoint hash (data_fnv1a64, clformer/hash.h's FNV-1a 64) costs against the
 * checkpoint write it rides on: the same buffer hashed, and written with
 * clf_fs_write_atomic_bytes (temporary file, fsync, rename, directory fsync), interleaved,
 * rounds times; medians. A save hashes once more than it writes, a --resume hashes what it
 * reads. With build a Release build of the repository:
 *
 *   cc -O2 -Icore/include -o /tmp/bench_checkpoint_hash bench/checkpoint_hash.c \
 *      -Lbuild/lib -lclformer -Wl,-rpath,$PWD/build/lib
 *   /tmp/bench_checkpoint_hash DIR [MiB] [rounds]
 *
 * DIR: where the file is written (the disk checkpoints go to); MiB default 256 (the base
 * model's checkpoint is ~750 MiB: weights and two Adam moments), rounds default 3. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clformer/fs.h"
#include "clformer/hash.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [MiB] [rounds]\n", argv[0]);
        return 2;
    }
    size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 256, n = mib << 20;
    int rounds = argc > 3 ? atoi(argv[3]) : 3;
    if (rounds < 1 || rounds > 99 || mib == 0)
        return 2;
    unsigned char *buf = malloc(n);
    char path[4096];
    snprintf(path, sizeof path, "%s/bench-checkpoint-hash.bin", argv[1]);
    if (!buf)
        return 1;
    for (size_t i = 0; i < n; i++) /* not all equal bytes: no shortcut anywhere */
        buf[i] = (unsigned char)(i * 2654435761u >> 13);
    double hash_s[99], write_s[99];
    unsigned long long h = 0;
    for (int r = 0; r < rounds; r++) {
        double t0 = now_s();
        h ^= clf_hash_fnv1a64(CLF_FNV1A64_OFFSET, buf, n);
        double t1 = now_s();
        if (clf_fs_write_atomic_bytes(path, buf, n) != CLF_OK) {
            fprintf(stderr, "%s\n", clf_last_error());
            return 1;
        }
        write_s[r] = now_s() - t1;
        hash_s[r] = t1 - t0;
    }
    remove(path);
    qsort(hash_s, (size_t)rounds, sizeof(double), by_value);
    qsort(write_s, (size_t)rounds, sizeof(double), by_value);
    double hs = hash_s[rounds / 2], ws = write_s[rounds / 2];
    printf("%zu MiB, median of %d: hash %.3f s (%.0f MiB/s), atomic write %.3f s (%.0f MiB/s), "
           "hash / write = %.2f (%llx)\n",
           mib, rounds, hs, mib / hs, ws, mib / ws, hs / ws, h);
    free(buf);
    return 0;
}
