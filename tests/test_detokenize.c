/* Text after decoding: clf_text_clean_up_spaces against transformers' clean_up_tokenization
 * (tests/fixtures/clean_up_spaces.json, made by tests/reference/make_clean_up_fixture.py),
 * byte for byte. */
#include <check.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/json.h"
#include "clformer/tokenizer.h"
#include "testutil.h"

START_TEST(clean_up_equals_transformers)
{
    json_t *root = NULL;
    ck_assert_int_eq(clf_json_parse_file(CLF_FIXTURES_DIR "/clean_up_spaces.json", 1 << 20, &root),
                     CLF_OK);
    const json_t *cases = json_object_get(root, "cases");
    ck_assert(json_array_size(cases) >= 40);
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *c = json_array_get(cases, i);
        const char *in = json_string_value(json_array_get(c, 0));
        const char *want = json_string_value(json_array_get(c, 1));
        ck_assert(in && want);
        char *got = strdup(in);
        ck_assert_ptr_nonnull(got);
        clf_text_clean_up_spaces(got);
        ck_assert_msg(strcmp(got, want) == 0, "case %zu: '%s' -> '%s', transformers '%s'", i, in,
                      got, want);
        free(got);
    }
    json_decref(root);
    clf_text_clean_up_spaces(NULL);
}
END_TEST

CLF_TEST_MAIN(clf_test_run, "detokenize", "core", clean_up_equals_transformers)
