/* Time of clf_tokenizer_load on one tokenizer.json: read, parse the JSON, check, build the
 * word table. Prints the median, min and max of REPEATS loads in milliseconds.
 *
 *   python3 bench/make_tokenizer_json.py /tmp/tok60k.json 60000
 *   cc -O2 -Icore/include -o /tmp/tokenizer_load bench/tokenizer_load.c \
 *      -Lbuild/lib -lclformer -Wl,-rpath,$PWD/build/lib
 *   /tmp/tokenizer_load /tmp/tok60k.json [REPEATS]      (default 21)
 *
 * bench/RESULTS.md compares the hand-written JSON parser with Jansson on this. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "clformer/tokenizer.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s tokenizer.json [repeats]\n", argv[0]);
        return 2;
    }
    int repeats = argc > 2 ? atoi(argv[2]) : 21;
    if (repeats < 1)
        repeats = 1;
    double *ms = malloc((size_t)repeats * sizeof *ms);
    if (!ms)
        return 1;
    int words = 0;
    for (int i = 0; i < repeats; i++) {
        clf_tokenizer *tok = NULL;
        double t0 = now_s();
        if (clf_tokenizer_load(argv[1], &tok) != CLF_OK) {
            fprintf(stderr, "%s\n", clf_last_error());
            return 1;
        }
        ms[i] = 1e3 * (now_s() - t0);
        words = clf_tokenizer_size(tok);
        clf_tokenizer_free(tok);
    }
    qsort(ms, (size_t)repeats, sizeof *ms, cmp_double);
    printf("%s: %d words, %d loads: median %.2f ms (min %.2f, max %.2f)\n", argv[1], words, repeats,
           ms[repeats / 2], ms[0], ms[repeats - 1]);
    free(ms);
    return 0;
}
