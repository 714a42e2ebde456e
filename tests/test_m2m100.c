/* The M2M-100 import against transformers (tests/fixtures/m2m100, made by
 * tests/reference/make_m2m100_fixture.py with transformers 4.40.2): a small random
 * M2M100ForConditionalGeneration in the Hugging Face layout is imported with `clformer
 * import`, then on each backend (CPU; OpenCL, the device of CLF_TEST_DEVICE) its logits must
 * match transformers' to 1e-4 relative, and greedy and beam-4 decoding into each of the two
 * target languages (the target language's token forced first, as forced_bos_token_id) must
 * give transformers' generate() outputs token for token (the fixture's metadata holds the
 * generate() arguments). The source framing (__en__ pieces </s>) must be M2M100Tokenizer's,
 * and `clformer translate -m --source-lang en --target-lang L` its decoded text. A language
 * the model lacks, a missing one and an unknown model_type are one-line errors. The checks
 * are hf_family.c's, shared with the other families. */
#include "hf_family.h"
#include "testutil.h"

const hf_family_fixture hf_fixture = {.dir = "m2m100",
                                      .source = "en",
                                      .source_token = "__en__",
                                      .targets = {"de", "fr"},
                                      .n_languages = 100,
                                      .first_codes = "af am ar"};

int main(void)
{
    return clf_test_backends_main("m2m100", hf_family_add_tests, hf_family_cpu_only, NULL);
}
