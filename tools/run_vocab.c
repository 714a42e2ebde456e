/* The vocabularies of a training run, with their provenance (run_vocab.h). */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "run_vocab.h"
#include "clformer/translator.h"
#include "clformer/dataset.h"
#include "clformer/fs.h"
#include "clformer/hash.h"
#include "clformer/json.h"

/* Bytes read at a time while hashing a data file. */
#define HASH_CHUNK ((size_t)1 << 20)
/* A provenance file is a few hundred bytes; anything far larger is not one. */
#define PROVENANCE_MAX ((size_t)1 << 16)

/* What a data file was when a vocabulary was built from it. */
typedef struct data_print {
    const char *path;
    long long bytes;
    uint64_t fnv1a64;
} data_print;

/* The run's training data as it is now: one TSV, or the source and the target file. */
typedef struct run_data {
    data_print file[2];
    int n;
    int min_frequency;
} run_data;

static clf_status print_file(const char *path, data_print *p)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = malloc(HASH_CHUNK);
    clf_status st = CLF_OK;
    size_t got;
    *p = (data_print){.path = path, .fnv1a64 = CLF_FNV1A64_OFFSET};
    if (!f || !buf) {
        st = !f ? clf_error(CLF_ERR_IO, "%s: cannot open: %s", path, strerror(errno))
                : clf_error(CLF_ERR_NOMEM, "train: out of host memory");
        goto fail;
    }
    while ((got = fread(buf, 1, HASH_CHUNK, f)) > 0) {
        p->fnv1a64 = clf_hash_fnv1a64(p->fnv1a64, buf, got);
        p->bytes += (long long)got;
    }
    if (ferror(f))
        st = clf_error(CLF_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
fail:
    if (f)
        fclose(f);
    free(buf);
    return st;
}

static clf_status print_data(const clf_train_config *tc, run_data *d)
{
    clf_status st;
    d->n = tc->data_train_tgt[0] ? 2 : 1;
    d->min_frequency = tc->min_frequency;
    if ((st = print_file(tc->data_train, &d->file[0])) != CLF_OK)
        return st;
    return d->n == 2 ? print_file(tc->data_train_tgt, &d->file[1]) : CLF_OK;
}

static void provenance_path(const char *vocab, char *out, size_t size)
{
    snprintf(out, size, "%s" RUN_VOCAB_PROVENANCE, vocab);
}

static clf_status write_provenance(const char *vocab, const run_data *d)
{
    char path[CLF_PATH_MAX + 16], hash[17];
    json_t *files = json_array();
    for (int i = 0; i < d->n; i++) {
        snprintf(hash, sizeof hash, "%016" PRIx64, d->file[i].fnv1a64);
        json_array_append_new(files, json_pack("{s:s, s:I, s:s}", "path", d->file[i].path, "bytes",
                                               (json_int_t)d->file[i].bytes, "fnv1a64", hash));
    }
    json_t *root = json_pack("{s:s, s:o, s:i}", "built_by", "clformer train", "data", files,
                             "min_frequency", d->min_frequency);
    char *text = root ? json_dumps(root, JSON_INDENT(2)) : NULL;
    json_decref(root);
    if (!text)
        return clf_error(CLF_ERR_NOMEM, "train: out of host memory");
    provenance_path(vocab, path, sizeof path);
    clf_status st = clf_fs_write_atomic_bytes(path, text, strlen(text));
    free(text);
    return st;
}

/* The recorded file i of root's data, or 0 when it is not one. */
static int recorded_file(const json_t *root, size_t i, data_print *p)
{
    const json_t *f = json_array_get(json_object_get(root, "data"), i);
    const char *hash = json_string_value(json_object_get(f, "fnv1a64"));
    const json_t *bytes = json_object_get(f, "bytes");
    if (!hash || !json_is_integer(bytes) || !json_string_value(json_object_get(f, "path")))
        return 0;
    p->path = json_string_value(json_object_get(f, "path"));
    p->bytes = json_integer_value(bytes);
    /* exactly as write_provenance writes it: 16 lower-case hex digits (strtoull alone would
     * take a sign, spaces, a 0x prefix and more digits) */
    p->fnv1a64 = 0;
    for (int k = 0; k < 16; k++) {
        const char ch = hash[k];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')))
            return 0;
        p->fnv1a64 = p->fnv1a64 << 4 | (uint64_t)(ch <= '9' ? ch - '0' : ch - 'a' + 10);
    }
    return hash[16] == '\0';
}

/* What differs between root (a vocabulary's provenance) and the run's data d, written to
 * why; 0 when nothing does. */
static int provenance_differs(const json_t *root, const run_data *d, char *why, size_t size)
{
    const json_t *mf = json_object_get(root, "min_frequency");
    const json_t *files = json_object_get(root, "data");
    if (!json_is_integer(mf) || !json_is_array(files)) {
        snprintf(why, size, "its provenance is not one clformer train wrote");
        return 1;
    }
    if (json_integer_value(mf) != d->min_frequency) {
        snprintf(why, size, "built with train.vocab.min_frequency %lld, this run's is %d",
                 (long long)json_integer_value(mf), d->min_frequency);
        return 1;
    }
    if (json_array_size(files) != (size_t)d->n) {
        snprintf(why, size, "built from %zu data file(s), this run's train.data has %d",
                 json_array_size(files), d->n);
        return 1;
    }
    for (int i = 0; i < d->n; i++) {
        data_print was;
        const data_print *now = &d->file[i];
        if (!recorded_file(root, (size_t)i, &was)) {
            snprintf(why, size, "its provenance is not one clformer train wrote");
            return 1;
        }
        if (was.bytes != now->bytes || was.fnv1a64 != now->fnv1a64) {
            snprintf(why, size,
                     "built from %s (%lld bytes, FNV-1a %016" PRIx64
                     "), this run's train.data %s is %lld bytes, FNV-1a %016" PRIx64,
                     was.path, was.bytes, was.fnv1a64, now->path, now->bytes, now->fnv1a64);
            return 1;
        }
    }
    return 0;
}

/* A vocabulary train built is refused when its provenance differs from the run's data
 * (*d, read here on first need: d->n 0 until then); one without a provenance file is the
 * user's, used as given. */
static clf_status check_provenance(const char *vocab, const clf_train_config *tc, run_data *d)
{
    char path[CLF_PATH_MAX + 16], why[2 * CLF_PATH_MAX + 160];
    json_t *root = NULL;
    int present = 0;
    provenance_path(vocab, path, sizeof path);
    clf_status st = cli_optional_file(path, &present);
    if (st != CLF_OK || !present)
        return st;
    if ((st = d->n ? CLF_OK : print_data(tc, d)) != CLF_OK ||
        (st = clf_json_parse_file(path, PROVENANCE_MAX, &root)) != CLF_OK)
        return st;
    if (provenance_differs(root, d, why, sizeof why))
        st = clf_error(CLF_ERR_INPUT,
                       "%s: a stale vocabulary: %s; delete it to build it from this data, or "
                       "delete %s to use it as it is",
                       vocab, why, path);
    json_decref(root);
    return st;
}

/* Word-level vocabularies from the data, refused when a side has no word (nothing is
 * written then), saved each after its provenance: a run killed in between leaves a
 * provenance without a vocabulary, which the next run rebuilds. */
static clf_status build_vocabs(const clf_train_config *tc, const run_data *d, clf_tokenizer **src,
                               clf_tokenizer **tgt)
{
    clf_status st =
        clf_dataset_build_vocabs(tc->data_train, tc->data_train_tgt, tc->min_frequency, src, tgt);
    if (st != CLF_OK)
        return st;
    const char *side[2] = {"source", "target"};
    const clf_tokenizer *tok[2] = {*src, *tgt};
    const char *data[2] = {tc->data_train, d->n == 2 ? tc->data_train_tgt : tc->data_train};
    for (int i = 0; i < 2; i++) {
        clf_tokenizer_specials sp = clf_tokenizer_special_ids(tok[i]);
        int specials = (sp.unk >= 0) + (sp.pad >= 0) + (sp.sos >= 0) + (sp.eos >= 0);
        if (clf_tokenizer_size(tok[i]) <= specials)
            return clf_error(CLF_ERR_INPUT,
                             "%s: no %s words to build a vocabulary from (an empty file, or only "
                             "blank or tab-only lines); no vocabulary written",
                             data[i], side[i]);
    }
    if ((st = write_provenance(tc->vocab_src, d)) != CLF_OK ||
        (st = clf_tokenizer_save(*src, tc->vocab_src)) != CLF_OK ||
        (st = write_provenance(tc->vocab_tgt, d)) != CLF_OK ||
        (st = clf_tokenizer_save(*tgt, tc->vocab_tgt)) != CLF_OK)
        return st;
    fprintf(stderr, "clformer: built vocabularies %s (%d words) and %s (%d words)\n", tc->vocab_src,
            clf_tokenizer_size(*src), tc->vocab_tgt, clf_tokenizer_size(*tgt));
    return CLF_OK;
}

clf_status run_vocabs_load_or_build(const clf_train_config *tc, clf_tokenizer **src,
                                    clf_tokenizer **tgt)
{
    clf_status st;
    run_data d = {.n = 0};
    *src = *tgt = NULL;
    const char *missing = !cli_file_exists(tc->vocab_src)   ? tc->vocab_src
                          : !cli_file_exists(tc->vocab_tgt) ? tc->vocab_tgt
                                                            : NULL;
    if (missing && (clf_tokenizer_name_is_sentencepiece(tc->vocab_src) ||
                    clf_tokenizer_name_is_sentencepiece(tc->vocab_tgt)))
        /* train builds word-level vocabularies only */
        return clf_error(CLF_ERR_IO,
                         "%s: no such file (train builds word-level vocabularies only; make "
                         "SentencePiece models first with `clformer vocab --sentencepiece`)",
                         missing);
    if (missing) {
        if ((st = print_data(tc, &d)) == CLF_OK)
            st = build_vocabs(tc, &d, src, tgt);
    } else if ((st = check_provenance(tc->vocab_src, tc, &d)) == CLF_OK &&
               (st = check_provenance(tc->vocab_tgt, tc, &d)) == CLF_OK &&
               (st = clf_translator_load_vocab(tc->vocab_src, src)) == CLF_OK)
        st = clf_translator_load_vocab(tc->vocab_tgt, tgt);
    if (st != CLF_OK) {
        clf_tokenizer_free(*src);
        clf_tokenizer_free(*tgt);
        *src = *tgt = NULL;
    }
    return st;
}
