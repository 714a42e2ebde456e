/* Fuzz target: the tokenizer.json loader (clf_tokenizer_load), and for a file it accepts,
 * encode and decode with the loaded vocabulary (added tokens cut out of the text included)
 * on a fixed sentence and on the input's own bytes. */
#include <stdlib.h>
#include <string.h>

#include "clformer/tokenizer.h"
#include "fuzz_util.h"

/* Bytes of the input also encoded as text: enough to meet the vocabulary's words. */
#define ENCODE_MAX 512

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    clf_clear_error(); /* a finding names this input's last error, not an earlier one's */
    clf_tokenizer *tok = NULL;
    if (clf_tokenizer_load(fuzz_file(0, data, size), &tok) != CLF_OK)
        return 0;
    int n = clf_tokenizer_size(tok);
    for (int32_t id = 0; id < n; id++) {
        const char *w = clf_tokenizer_word(tok, id);
        FUZZ_CHECK(w != NULL, "a vocabulary id has no word");
        (void)clf_tokenizer_id(tok, w);
        (void)clf_tokenizer_is_special(tok, id);
    }
    (void)clf_tokenizer_special_ids(tok);
    static const char sentence[] = "Hello, world! [SOS]a [UNK] Grüße ab.. 你好\tx";
    fuzz_tokenizer_round_trip(tok, sentence, sizeof sentence - 1);
    fuzz_tokenizer_round_trip(tok, (const char *)data, size < ENCODE_MAX ? size : ENCODE_MAX);
    clf_tokenizer_free(tok);
    return 0;
}
