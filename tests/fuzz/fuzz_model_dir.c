/* Fuzz target: the model-directory loader, `clformer import HF_DIR -o MODEL_DIR`
 * (tools/cmd_import.c and the families' files, compiled in: its entry clf_cmd_import runs as
 * the CLI runs it), then the imported directory loaded as `clformer translate -m` loads it.
 *
 * An input may start with a 0x1d byte (the group separator, which valid JSON never holds
 * raw) and a byte f that picks the fixture HF_DIR is made from (f % 4: the Marian fixture,
 * imported as `import marian HF_DIR`; M2M-100's; NLLB's; mBART-50's); without it, Marian's.
 * Then it is the fixture's files in its order, separated by 0x1e bytes (the ASCII record
 * separator):
 *   Marian   config.json, vocab.json, generation_config.json
 *   M2M-100  config.json, vocab.json, generation_config.json, tokenizer_config.json
 *   NLLB     config.json, tokenizer_config.json, generation_config.json,
 *            special_tokens_map.json
 *   mBART    config.json, generation_config.json
 * the last taking the rest of the input; without a 0x1e byte the second file is the
 * fixture's, and a later one the input does not reach is absent from HF_DIR. The other
 * files of HF_DIR are links to the fixture's own (Marian: source.spm, target.spm,
 * model.safetensors; the others: sentencepiece.bpe.model, model.safetensors), so an
 * input that keeps the config's sizes reaches the weights and the copy.
 *
 * An input that then has a 0x1f byte (the unit separator, which valid JSON never holds
 * raw either) puts something that is not a regular file in place of one file of HF_DIR:
 * the byte after it, b, picks the file (b % n of the files above then the links, in that
 * order: Marian's six are config.json, vocab.json, generation_config.json, source.spm,
 * target.spm, model.safetensors) and what takes its place (b / n % 4: a FIFO, a directory,
 * a symbolic link to nothing, a symbolic link to HF_DIR itself); the rest of the input is
 * read as above. A reader that waits on the FIFO hangs the target (libFuzzer's -timeout
 * reports it). Every refusal must be an exit status from the CLI with nothing left behind;
 * an import that succeeds must give a directory whose model.yaml loads, whose weights load
 * against it and whose vocab.json maps the source pieces to the model's vocabulary size. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "clformer/config.h"
#include "clformer/tokenizer.h"
#include "clformer/weights.h"
#include "fuzz_util.h"

#define FILE_SEPARATOR "\x1e"
/* the first byte of an input that picks the fixture (above) */
#define FAMILY_MARK 0x1d
/* the first byte of an input that puts a special file into HF_DIR (above) */
#define SPECIAL_MARK 0x1f

/* The process's HF_DIR (a temporary directory, removed at exit). */
static char hf_dir[64];

/* A fixture an input is imported against. */
typedef struct family {
    const char *dir;        /* its hf/, below CLF_FUZZ_FIXTURES_DIR */
    const char *written[4]; /* the files an input becomes, in its order */
    int n_written;
    const char *linked[3]; /* the fixture's files HF_DIR links to */
    int n_linked;
    int marian_alias; /* imported as `import marian HF_DIR` */
} family;

static const family families[] = {
    {"marian/hf",
     {"config.json", "vocab.json", "generation_config.json"},
     3,
     {"source.spm", "target.spm", "model.safetensors"},
     3,
     1},
    {"m2m100/hf",
     {"config.json", "vocab.json", "generation_config.json", "tokenizer_config.json"},
     4,
     {"sentencepiece.bpe.model", "model.safetensors"},
     2,
     0},
    {"nllb/hf",
     {"config.json", "tokenizer_config.json", "generation_config.json", "special_tokens_map.json"},
     4,
     {"sentencepiece.bpe.model", "model.safetensors"},
     2,
     0},
    {"mbart/hf",
     {"config.json", "generation_config.json"},
     2,
     {"sentencepiece.bpe.model", "model.safetensors"},
     2,
     0},
};
#define N_FAMILIES (sizeof families / sizeof *families)

static const char *const imported[] = {"model.yaml", "weights.safetensors", "source.spm",
                                       "target.spm", "vocab.json"};

static void path_of(char *buf, size_t size, const char *dir, const char *name)
{
    FUZZ_CHECK((size_t)snprintf(buf, size, "%s/%s", dir, name) < size, "path too long");
}

static void write_file(const char *name, const void *data, size_t size)
{
    char path[128];
    path_of(path, sizeof path, hf_dir, name);
    FILE *f = fopen(path, "wb");
    FUZZ_CHECK(f != NULL, "cannot write into the temporary HF_DIR");
    FUZZ_CHECK(fwrite(data, 1, size, f) == size && fclose(f) == 0, "write failed");
}

/* Removes HF_DIR/name, whatever it is (a directory an input put there is empty). */
static void clear_name(const char *name)
{
    char path[128];
    path_of(path, sizeof path, hf_dir, name);
    if (unlink(path) != 0)
        rmdir(path);
}

/* file k of family f: its written files, then its links */
static const char *name_of(const family *f, int k)
{
    return k < f->n_written ? f->written[k] : f->linked[k - f->n_written];
}

/* Removes every name any family puts into HF_DIR. */
static void clear_all(void)
{
    for (size_t i = 0; i < N_FAMILIES; i++)
        for (int k = 0; k < families[i].n_written + families[i].n_linked; k++)
            clear_name(name_of(&families[i], k));
}

static void remove_hf_dir(void)
{
    clear_all();
    rmdir(hf_dir);
}

/* HF_DIR as each input starts from: the links to f's fixture, and nothing else (the
 * written files are written by the input; what the last input put there is gone). */
static void reset_hf_dir(const family *f)
{
    char src[512], dst[128];
    clear_all();
    for (int i = 0; i < f->n_linked; i++) {
        snprintf(src, sizeof src, "%s/%s/%s", CLF_FUZZ_FIXTURES_DIR, f->dir, f->linked[i]);
        path_of(dst, sizeof dst, hf_dir, f->linked[i]);
        FUZZ_CHECK(symlink(src, dst) == 0, "cannot link the fixture into HF_DIR");
    }
}

/* Puts what b picks (see above) in place of the file b picks. */
static void place_special(const family *f, uint8_t b)
{
    char path[128];
    const unsigned n = (unsigned)(f->n_written + f->n_linked);
    const char *name = name_of(f, (int)(b % n));
    path_of(path, sizeof path, hf_dir, name);
    clear_name(name);
    int made;
    switch (b / n % 4) {
    case 0:
        made = mkfifo(path, 0600);
        break;
    case 1:
        made = mkdir(path, 0700);
        break;
    case 2:
        made = symlink("nowhere", path);
        break;
    default:
        made = symlink(".", path);
        break;
    }
    FUZZ_CHECK(made == 0, "cannot put a special file into HF_DIR");
}

/* Each fixture's second file, for inputs without a separator. */
static char *fixture_second[N_FAMILIES];
static size_t fixture_second_len[N_FAMILIES];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    snprintf(hf_dir, sizeof hf_dir, "%s", "/tmp/clf-fuzz-model-dir-XXXXXX");
    FUZZ_CHECK(mkdtemp(hf_dir) != NULL, "mkdtemp failed");
    atexit(remove_hf_dir);
    for (size_t i = 0; i < N_FAMILIES; i++) {
        char src[512];
        snprintf(src, sizeof src, "%s/%s/%s", CLF_FUZZ_FIXTURES_DIR, families[i].dir,
                 families[i].written[1]);
        FILE *f = fopen(src, "rb");
        FUZZ_CHECK(f != NULL, "no fixture file");
        fixture_second[i] = malloc(1 << 17);
        FUZZ_CHECK(fixture_second[i] != NULL, "out of memory");
        fixture_second_len[i] = fread(fixture_second[i], 1, 1 << 17, f);
        FUZZ_CHECK(feof(f), "a fixture file over 128 KiB");
        fclose(f);
    }
    return 0;
}

/* The imported directory loads as translate -m loads it. */
static void check_imported(const char *out)
{
    char path[128], spm[128];
    clf_config cfg;
    path_of(path, sizeof path, out, "model.yaml");
    FUZZ_CHECK(clf_config_load(path, &cfg) == CLF_OK, "an imported model.yaml does not load");
    clf_weights *w = NULL;
    path_of(path, sizeof path, out, "weights.safetensors");
    FUZZ_CHECK(clf_weights_load(path, &cfg.model, &w) == CLF_OK,
               "imported weights do not load against the imported model.yaml");
    clf_weights_free(w);
    clf_tokenizer *tok = NULL;
    path_of(spm, sizeof spm, out, "source.spm");
    path_of(path, sizeof path, out, "vocab.json");
    FUZZ_CHECK(clf_tokenizer_load_mapped(spm, path, &tok) == CLF_OK,
               "the imported vocab.json does not load");
    FUZZ_CHECK(clf_tokenizer_size(tok) == cfg.model.src_vocab,
               "the imported vocabulary's size is not model.src_vocab");
    clf_tokenizer_free(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t fam = 0;
    if (size >= 2 && data[0] == FAMILY_MARK) {
        fam = data[1] % N_FAMILIES;
        data += 2;
        size -= 2;
    }
    const family *f = &families[fam];
    reset_hf_dir(f);
    int special = size >= 2 && data[0] == SPECIAL_MARK;
    /* the written files, each up to the next separator, the last to the end */
    const uint8_t *part = special ? data + 2 : data;
    size_t left = special ? size - 2 : size;
    int parts = 0;
    for (; parts < f->n_written && (parts == 0 || part); parts++) {
        const uint8_t *sep =
            parts < f->n_written - 1 ? fuzz_find(part, left, FILE_SEPARATOR) : NULL;
        const size_t len = sep ? (size_t)(sep - part) : left;
        write_file(f->written[parts], part, len);
        part = sep ? sep + 1 : NULL;
        left = sep ? left - len - 1 : 0;
    }
    if (parts < 2)
        write_file(f->written[1], fixture_second[fam], fixture_second_len[fam]);
    if (special)
        place_special(f, data[1]);

    char out[128];
    path_of(out, sizeof out, hf_dir, "out");
    char *alias[] = {"import", "marian", hf_dir, "-o", out, NULL};
    char *plain[] = {"import", hf_dir, "-o", out, NULL};
    int rc = f->marian_alias ? clf_cmd_import(5, alias) : clf_cmd_import(4, plain);
    struct stat sb;
    if (rc != 0) {
        FUZZ_CHECK(rc > 0, "a negative exit status");
        FUZZ_CHECK(stat(out, &sb) != 0, "a refused import left MODEL_DIR behind");
        char tmp[160];
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out, (long)getpid());
        FUZZ_CHECK(stat(tmp, &sb) != 0, "a refused import left its temporary directory");
        return 0;
    }
    check_imported(out);
    char path[128];
    for (size_t i = 0; i < sizeof imported / sizeof *imported; i++) {
        path_of(path, sizeof path, out, imported[i]);
        FUZZ_CHECK(unlink(path) == 0, "an imported file is missing");
    }
    FUZZ_CHECK(rmdir(out) == 0, "MODEL_DIR holds more than the import writes");
    return 0;
}
