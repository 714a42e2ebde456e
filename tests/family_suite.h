/* The parity suite of a fixture of the m2m_100 family (family_suite.c): a suite's own file
 * (test_m2m100.c, test_nllb.c) defines clf_test_family_this, its fixture's particulars,
 * and main() is family_suite.c's: the shared tests on each backend, cpu_extra's on the CPU
 * backend. */
#ifndef CLF_TEST_FAMILY_SUITE_H
#define CLF_TEST_FAMILY_SUITE_H

#include <check.h>
#include <stddef.h>

#include "clformer/translator.h"

typedef struct clf_test_family {
    const char *tag;              /* the fixture's folder under tests/fixtures; the suite's name */
    const char *source;           /* the source language's code ("en") */
    const char *source_token;     /* its token ("__en__") */
    const char *targets[2];       /* the fixture's two target languages */
    int n_languages;              /* the codes the model has */
    const char *first_codes;      /* its first three, as `clformer info -m` lists them */
    void (*cpu_extra)(TCase *tc); /* the suite's own tests (CPU only), or NULL */
} clf_test_family;

extern const clf_test_family clf_test_family_this;

/* tests/fixtures/<tag>/name in buf */
const char *clf_test_family_file(const char *name, char *buf, size_t size);
/* The fixture's hf/ imported with `clformer import` into a fresh directory; its path (static
 * storage; clf_test_remove_import removes it). */
const char *clf_test_family_import(void);
/* A translator of the imported model dir on the CPU backend (asserted to open) */
clf_translator *clf_test_family_translator(const char *dir);

#endif
