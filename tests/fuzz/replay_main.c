/* Runs a fuzz target's LLVMFuzzerTestOneInput once on each file given (or each file of a
 * directory given), without libFuzzer: the ctest fuzz_replay_* tests replay the committed
 * corpora with the normal build, so that a fixed finding stays fixed. Exits 0 when every
 * input ran (a finding aborts, as under libFuzzer). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_util.h"

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    size_t cap = 4096, len = 0, n;
    uint8_t *buf = malloc(cap);
    while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            uint8_t *grown = realloc(buf, cap *= 2);
            if (!grown) {
                free(buf);
                buf = NULL;
            } else
                buf = grown;
        }
    }
    int bad = !buf || ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "%s: cannot read\n", path);
        free(buf);
        return 1;
    }
    /* an exact-size copy, so that ASan sees a read one past the input */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) {
        free(buf);
        return 1;
    }
    memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

/* The files of dir in name order (a stable replay order); returns the failures. */
static int run_dir(const char *dir)
{
    struct dirent **entries = NULL;
    int n = scandir(dir, &entries, NULL, alphasort);
    if (n < 0) {
        perror(dir);
        return 1;
    }
    int failed = 0, ran = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, entries[i]->d_name);
        if (entries[i]->d_name[0] != '.' && stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
            failed += run_file(path);
            ran++;
        }
        free(entries[i]);
    }
    free(entries);
    printf("%s: %d inputs\n", dir, ran);
    if (ran == 0) {
        fprintf(stderr, "%s: no inputs\n", dir);
        failed++;
    }
    return failed;
}

int main(int argc, char **argv)
{
    LLVMFuzzerInitialize(&argc, &argv);
    int failed = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) == 0 && S_ISDIR(sb.st_mode))
            failed += run_dir(argv[i]);
        else
            failed += run_file(argv[i]);
    }
    return failed ? 1 : 0;
}
