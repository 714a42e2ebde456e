/* Fuzz target: the model-directory loader, `clformer import HF_DIR -o MODEL_DIR`
 * (tools/cmd_import.c and the families' files, compiled in: its entry clf_cmd_import runs as
 * the CLI runs it), then the imported directory loaded as `clformer translate -m` loads it.
 *
 * The input is HF_DIR's config.json, then a 0x1e byte (the ASCII record separator, which
 * valid JSON never holds raw) and vocab.json, then optionally another 0x1e byte and
 * generation_config.json (which the import reads through the same JSON reader); without a
 * 0x1e byte the input is config.json and vocab.json is the fixture's; without a second one
 * HF_DIR has no generation_config.json. The other files of HF_DIR are links to the small
 * fixture's real source.spm, target.spm and model.safetensors (tests/fixtures/marian/hf),
 * and to the mBART fixture's sentencepiece.bpe.model (tests/fixtures/mbart/hf); a
 * config.json that says "mbart" gets the mBART fixture's model.safetensors instead, so an
 * input that keeps the config's sizes reaches the weights and the copy in either family.
 *
 * An input that starts with a 0x1f byte (the unit separator, which valid JSON never holds
 * raw either) puts something that is not a regular file in place of one file of HF_DIR:
 * the byte after it, b, picks the file (b % 6 of config.json, vocab.json,
 * generation_config.json, source.spm, target.spm, model.safetensors) and what takes its
 * place (b / 6 % 4: a FIFO, a directory, a symbolic link to nothing, a symbolic link to
 * HF_DIR itself); the rest of the input is read as above. A reader that waits on the FIFO
 * hangs the target (libFuzzer's -timeout reports it). Every
 * refusal must be an exit status from the CLI with nothing left behind; an import that
 * succeeds must give a directory whose model.yaml loads, whose weights load against it
 * and whose vocab.json maps the source pieces to the model's vocabulary size. */
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
/* the first byte of an input that puts a special file into HF_DIR (above) */
#define SPECIAL_MARK 0x1f

/* The process's HF_DIR (a temporary directory, removed at exit). */
static char hf_dir[64];

static const char *const linked[] = {"source.spm", "target.spm", "model.safetensors"};
/* linked to the mBART fixture's, whatever the input (not one the input may replace) */
#define MBART_SPM "sentencepiece.bpe.model"
/* the files an input becomes, in its order */
static const char *const written[] = {"config.json", "vocab.json", "generation_config.json"};
/* every name of HF_DIR an input may replace, in the order the byte after SPECIAL_MARK
 * picks it */
static const char *const special_names[] = {"config.json", "vocab.json", "generation_config.json",
                                            "source.spm",  "target.spm", "model.safetensors"};
#define SPECIAL_NAMES (sizeof special_names / sizeof *special_names)
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

static void remove_hf_dir(void)
{
    for (size_t i = 0; i < SPECIAL_NAMES; i++)
        clear_name(special_names[i]);
    clear_name(MBART_SPM);
    rmdir(hf_dir);
}

/* HF_DIR as each input starts from: the links to the fixtures, and nothing else (the
 * written files are written by the input; what the last input put there is gone); mbart:
 * model.safetensors is the mBART fixture's. */
static void reset_hf_dir(int mbart)
{
    char src[512], dst[128];
    for (size_t i = 0; i < SPECIAL_NAMES; i++)
        clear_name(special_names[i]);
    for (size_t i = 0; i < sizeof linked / sizeof *linked; i++) {
        const int weights = !strcmp(linked[i], "model.safetensors");
        path_of(src, sizeof src, mbart && weights ? CLF_FUZZ_MBART_DIR : CLF_FUZZ_MARIAN_DIR,
                linked[i]);
        path_of(dst, sizeof dst, hf_dir, linked[i]);
        FUZZ_CHECK(symlink(src, dst) == 0, "cannot link the fixture into HF_DIR");
    }
    path_of(dst, sizeof dst, hf_dir, MBART_SPM);
    if (access(dst, F_OK) != 0) {
        path_of(src, sizeof src, CLF_FUZZ_MBART_DIR, MBART_SPM);
        FUZZ_CHECK(symlink(src, dst) == 0, "cannot link the fixture into HF_DIR");
    }
}

/* Puts what b picks (see above) in place of the file b picks. */
static void place_special(uint8_t b)
{
    char path[128];
    const char *name = special_names[b % SPECIAL_NAMES];
    path_of(path, sizeof path, hf_dir, name);
    clear_name(name);
    int made;
    switch (b / SPECIAL_NAMES % 4) {
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

/* The fixture's vocab.json, for inputs without a separator. */
static char *fixture_vocab;
static size_t fixture_vocab_len;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    snprintf(hf_dir, sizeof hf_dir, "%s", "/tmp/clf-fuzz-model-dir-XXXXXX");
    FUZZ_CHECK(mkdtemp(hf_dir) != NULL, "mkdtemp failed");
    atexit(remove_hf_dir);
    char src[512];
    path_of(src, sizeof src, CLF_FUZZ_MARIAN_DIR, "vocab.json");
    FILE *f = fopen(src, "rb");
    FUZZ_CHECK(f != NULL, "no fixture vocab.json");
    fixture_vocab = malloc(1 << 16);
    FUZZ_CHECK(fixture_vocab != NULL, "out of memory");
    fixture_vocab_len = fread(fixture_vocab, 1, 1 << 16, f);
    fclose(f);
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
    int special = size >= 2 && data[0] == SPECIAL_MARK;
    /* up to three files, each up to the next separator */
    const uint8_t *part = special ? data + 2 : data;
    size_t left = special ? size - 2 : size;
    const uint8_t *config_end = fuzz_find(part, left, FILE_SEPARATOR);
    reset_hf_dir(fuzz_find(part, config_end ? (size_t)(config_end - part) : left, "\"mbart\"") !=
                 NULL);
    int parts = 0;
    for (; parts < 3 && (parts == 0 || part); parts++) {
        const uint8_t *sep = parts < 2 ? fuzz_find(part, left, FILE_SEPARATOR) : NULL;
        const size_t len = sep ? (size_t)(sep - part) : left;
        write_file(written[parts], part, len);
        part = sep ? sep + 1 : NULL;
        left = sep ? left - len - 1 : 0;
    }
    if (parts < 2)
        write_file("vocab.json", fixture_vocab, fixture_vocab_len);
    char gen[128];
    path_of(gen, sizeof gen, hf_dir, written[2]);
    if (parts < 3)
        unlink(gen);
    if (special)
        place_special(data[1]);

    char out[128];
    path_of(out, sizeof out, hf_dir, "out");
    char *argv[] = {"import", hf_dir, "-o", out, NULL};
    int rc = clf_cmd_import(4, argv);
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
