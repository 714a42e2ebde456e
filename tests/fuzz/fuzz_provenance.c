/* Fuzz target: the reader of a vocabulary's provenance, <vocabulary>.provenance
 * (tools/run_vocab.c, compiled in: run_vocabs_load_or_build, called as `clformer train`
 * calls it for a run whose vocabularies exist), which decides whether a vocabulary a
 * previous run built may be used with this run's data.
 *
 * At start the target builds a run of its own in a temporary directory (removed at exit):
 * a small TSV as train.data and, through run_vocabs_load_or_build, the word-level
 * vocabularies src.json and tgt.json with their provenance files. Each provenance file is
 * then replaced by a symbolic link to an in-memory file (fuzz_file): the input is
 * src.json.provenance, optionally followed by a 0x1e byte (the ASCII record separator) and
 * tgt.json.provenance; without one, tgt.json.provenance is the one the build wrote.
 *
 * A refusal must free both vocabularies and name a file of the run; an accepted input must
 * be a provenance that records this run's data exactly: its data file's size and FNV-1a 64
 * hash (16 lower-case hex digits) and the run's min_frequency. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "clformer/config.h"
#include "clformer/fs.h"
#include "clformer/hash.h"
#include "clformer/json.h"
#include "clformer/tokenizer.h"
#include "fuzz_util.h"
#include "run_vocab.h"

#define FILE_SEPARATOR "\x1e"

/* the run's data: two sides with words that occur once (min_frequency 1) */
static const char data_text[] = "the cat sat\tdie katze sass\n"
                                "a dog ran\tein hund lief\n";

/* The run (its directory, train: section and data's hash), set up once. */
static char run_dir[64];
static clf_train_config *tc;
static char data_hash[17];
/* the provenance the build wrote for tgt.json: the second file of an input without 0x1e */
static char *tgt_written;
static size_t tgt_written_len;

static void path_of(char *buf, size_t size, const char *name)
{
    FUZZ_CHECK((size_t)snprintf(buf, size, "%s/%s", run_dir, name) < size, "path too long");
}

static void remove_run_dir(void)
{
    static const char *const names[] = {"data.tsv", "src.json", "tgt.json",
                                        "src.json" RUN_VOCAB_PROVENANCE,
                                        "tgt.json" RUN_VOCAB_PROVENANCE};
    char path[128];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        path_of(path, sizeof path, names[i]);
        unlink(path);
    }
    rmdir(run_dir);
    free(tgt_written);
    free(tc);
}

/* Replaces the provenance of vocabulary name by a link to slot's in-memory file. */
static void link_slot(const char *name, int slot)
{
    char path[128];
    path_of(path, sizeof path, name);
    const char *target = fuzz_file(slot, "", 0);
    FUZZ_CHECK(unlink(path) == 0 && symlink(target, path) == 0,
               "cannot link a provenance file to its in-memory file");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(run_dir, sizeof run_dir, "%s", "/tmp/clf-fuzz-provenance.XXXXXX");
    FUZZ_CHECK(mkdtemp(run_dir) != NULL, "cannot make the run's temporary directory");
    clf_config *cfg = malloc(sizeof *cfg);
    FUZZ_CHECK(cfg != NULL, "out of memory");
    clf_config_defaults(cfg);
    tc = malloc(sizeof *tc);
    FUZZ_CHECK(tc != NULL, "out of memory");
    *tc = cfg->train;
    free(cfg);
    atexit(remove_run_dir);
    tc->present = 1;
    tc->min_frequency = 1;
    path_of(tc->data_train, sizeof tc->data_train, "data.tsv");
    path_of(tc->vocab_src, sizeof tc->vocab_src, "src.json");
    path_of(tc->vocab_tgt, sizeof tc->vocab_tgt, "tgt.json");
    FUZZ_CHECK(clf_fs_write_atomic_bytes(tc->data_train, data_text, strlen(data_text)) == CLF_OK,
               "cannot write the run's data");
    snprintf(data_hash, sizeof data_hash, "%016" PRIx64,
             clf_hash_fnv1a64(CLF_FNV1A64_OFFSET, data_text, strlen(data_text)));

    clf_tokenizer *src = NULL, *tgt = NULL;
    FUZZ_CHECK(run_vocabs_load_or_build(tc, &src, &tgt) == CLF_OK, "cannot build the vocabularies");
    clf_tokenizer_free(src);
    clf_tokenizer_free(tgt);
    char path[128];
    path_of(path, sizeof path, "tgt.json" RUN_VOCAB_PROVENANCE);
    FUZZ_CHECK(clf_fs_read_all(path, 1 << 16, &tgt_written, &tgt_written_len) == CLF_OK,
               "cannot read the provenance the build wrote");
    link_slot("src.json" RUN_VOCAB_PROVENANCE, 0);
    link_slot("tgt.json" RUN_VOCAB_PROVENANCE, 1);
    return 0;
}

/* An accepted provenance file (vocabulary name's) records this run's data exactly. */
static void check_accepted(const char *name)
{
    char path[128];
    json_t *root = NULL;
    path_of(path, sizeof path, name);
    FUZZ_CHECK(clf_json_parse_file(path, 1 << 16, &root) == CLF_OK,
               "an accepted provenance file is not JSON");
    const json_t *files = json_object_get(root, "data");
    const json_t *file = json_array_get(files, 0);
    const char *hash = json_string_value(json_object_get(file, "fnv1a64"));
    const json_t *bytes = json_object_get(file, "bytes");
    const json_t *mf = json_object_get(root, "min_frequency");
    FUZZ_CHECK(json_is_integer(mf) && json_integer_value(mf) == tc->min_frequency,
               "accepted a provenance with another min_frequency");
    FUZZ_CHECK(json_array_size(files) == 1, "accepted a provenance of another number of files");
    FUZZ_CHECK(json_is_integer(bytes) && json_integer_value(bytes) == (json_int_t)strlen(data_text),
               "accepted a provenance of another data size");
    FUZZ_CHECK(hash && strcmp(hash, data_hash) == 0,
               "accepted a provenance whose hash is not the data's, as written");
    json_decref(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    clf_clear_error(); /* a finding names this input's last error, not an earlier one's */
    const uint8_t *sep = fuzz_find(data, size, FILE_SEPARATOR);
    const size_t first = sep ? (size_t)(sep - data) : size;
    fuzz_file(0, data, first);
    if (sep)
        fuzz_file(1, sep + 1, size - first - 1);
    else
        fuzz_file(1, tgt_written, tgt_written_len);

    clf_tokenizer *src = NULL, *tgt = NULL;
    if (run_vocabs_load_or_build(tc, &src, &tgt) == CLF_OK) {
        FUZZ_CHECK(src && tgt, "accepted without both vocabularies");
        check_accepted("src.json" RUN_VOCAB_PROVENANCE);
        check_accepted("tgt.json" RUN_VOCAB_PROVENANCE);
        clf_tokenizer_free(src);
        clf_tokenizer_free(tgt);
    } else {
        FUZZ_CHECK(!src && !tgt, "a refusal left a vocabulary");
        FUZZ_CHECK(strstr(clf_last_error(), run_dir) != NULL,
                   "a refusal does not name a file of the run");
    }
    return 0;
}
