/* The M2M-100 import against transformers: the m2m_100 family's parity suite
 * (family_suite.c) on tests/fixtures/m2m100 (tests/reference/make_m2m100_fixture.py), whose
 * language tokens are __xx__ (M2M100Tokenizer's: 100 codes, after vocab.json's pieces). */
#include "family_suite.h"

const clf_test_family clf_test_family_this = {.tag = "m2m100",
                                              .source = "en",
                                              .source_token = "__en__",
                                              .targets = {"de", "fr"},
                                              .n_languages = 100,
                                              .first_codes = "af am ar"};
