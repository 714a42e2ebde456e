/* The parity checks the suites of the many-language families of `clformer import` share
 * (test_m2m100.c, test_mbart.c): a fixture made by tests/reference/make_<family>_fixture.py
 * with transformers 4.40.2 (a small random model in the Hugging Face layout, its own
 * SentencePiece model, and reference.safetensors: the framed sources, teacher-forced logits,
 * greedy / beam-4 / beam-4-early-stopping outputs into two target languages, the generate()
 * arguments as metadata) is imported with `clformer import`, and on each backend its logits
 * must match transformers' to 1e-4 relative (F16, BF16 and int8 weights within test_quant.c's
 * bounds), decoding (clf_decode and continuous decoding) must give generate()'s outputs token
 * for token, and `clformer translate -m --source-lang --target-lang` its decoded text; on the
 * CPU the translator's source framing, scores against decoding and the CLI's refusals.
 *
 * A suite defines hf_fixture (what differs between families) and passes
 * hf_family_add_tests / hf_family_cpu_only to clf_test_backends_main (or calls them from
 * its own). */
#ifndef CLF_HF_FAMILY_H
#define CLF_HF_FAMILY_H

#include <check.h>

#define HF_FAMILY_TARGETS 2

typedef struct hf_family_fixture {
    const char *dir;                        /* CLF_FIXTURES_DIR's folder: "m2m100" */
    const char *source;                     /* the source language's code: "en" */
    const char *source_token;               /* its token: "__en__" */
    const char *targets[HF_FAMILY_TARGETS]; /* the target languages: "de", "fr" */
    int n_languages;                        /* the model's codes, per side */
    const char *first_codes;                /* the start of info -m's list: "af am ar" */
} hf_family_fixture;

/* defined by the suite */
extern const hf_family_fixture hf_fixture;

/* CLF_FIXTURES_DIR/<hf_fixture.dir>/name, in a buffer of its own per call (the last 8
 * stay valid) */
const char *hf_family_path(const char *name);
/* Imports the fixture's hf/ into a fresh directory; returns its path (static storage).
 * clf_test_remove_import removes it. */
const char *hf_family_import(void);

/* The tests on every backend, and those on the CPU only. */
void hf_family_add_tests(TCase *tc);
void hf_family_cpu_only(TCase *tc);

#endif
