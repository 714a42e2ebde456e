/* Fuzz target: the SentencePiece model loader (clf_tokenizer_load of a .model file:
 * core/src/text/tokenizer_spm.c, the library through spm_shim.cc), and for a model it
 * accepts, encode and decode (the library's normalizer and its pieces) on a fixed sentence
 * and on the input's own bytes. The input is the whole .model file. It is read through a
 * name ending in .model (a symbolic link to the in-memory file), so that it goes to the
 * SentencePiece loader whatever its first bytes are. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clformer/tokenizer.h"
#include "fuzz_util.h"

/* Bytes of the input also encoded as text: enough to meet the model's pieces. */
#define ENCODE_MAX 512

/* The harness's own state: the link and its directory, made once and removed at exit. */
static char dir[64], link_path[96];

static void remove_link(void)
{
    unlink(link_path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/clf-fuzz-spm-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    FUZZ_CHECK(mkdtemp(dir) != NULL, "mkdtemp failed");
    snprintf(link_path, sizeof link_path, "%s/input.model", dir);
    /* /proc/self/fd/N names this process's memfd whoever follows the link: this process */
    FUZZ_CHECK(symlink(fuzz_file(0, "", 0), link_path) == 0, "symlink failed");
    atexit(remove_link);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    clf_clear_error(); /* a finding names this input's last error, not an earlier one's */
    clf_tokenizer *tok = NULL;
    fuzz_file(0, data, size);
    if (clf_tokenizer_load(link_path, &tok) != CLF_OK)
        return 0;
    FUZZ_CHECK(clf_tokenizer_get_kind(tok) == CLF_TOKENIZER_SENTENCEPIECE,
               "a .model file loaded as another kind");
    int n = clf_tokenizer_size(tok);
    FUZZ_CHECK(n >= 1 && n <= CLF_TOKENIZER_VOCAB_MAX, "a vocabulary size beyond the limit");
    for (int32_t id = 0; id < n; id++) {
        const char *w = clf_tokenizer_word(tok, id);
        FUZZ_CHECK(w != NULL, "a vocabulary id has no piece");
        (void)clf_tokenizer_id(tok, w);
        (void)clf_tokenizer_is_special(tok, id);
    }
    clf_tokenizer_specials sp = clf_tokenizer_special_ids(tok);
    FUZZ_CHECK(sp.unk < n && sp.pad < n && sp.sos < n && sp.eos < n,
               "a special id outside the vocabulary");
    static const char sentence[] = "Hello, world! Grüße aus Köln.  ＡＢ 你好\t<s>x</s> 🙂";
    fuzz_tokenizer_round_trip(tok, sentence, sizeof sentence - 1);
    fuzz_tokenizer_round_trip(tok, (const char *)data, size < ENCODE_MAX ? size : ENCODE_MAX);
    clf_tokenizer_free(tok);
    return 0;
}
