/* The NLLB-200 import against transformers: the m2m_100 family's parity suite
 * (family_suite.c) on tests/fixtures/nllb (tests/reference/make_nllb_fixture.py: a small
 * random M2M100ForConditionalGeneration with NllbTokenizer's files, no vocab.json), whose
 * language codes are their own tokens (eng_Latn), after the SentencePiece pieces + 1. Then
 * NllbTokenizer's particulars: legacy_behaviour's source framing (pieces </s> eng_Latn) as
 * the tokenizer frames it, the tokenizer found without tokenizer_config.json (config.json's
 * tokenizer_class, special_tokens_map.json's codes) giving the same vocabulary, and one-line
 * refusals of a tokenizer_class clformer does not import and of an added_tokens_decoder
 * that disagrees with NllbTokenizer's ids. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clformer/config.h"
#include "clformer/framing.h"
#include "clformer/tensor.h"
#include "clformer/tokenizer.h"
#include "clformer/translator.h"
#include "family_suite.h"
#include "testutil.h"

/* the files of the fixture's hf/ */
static const char *const hf_files[] = {"config.json",
                                       "generation_config.json",
                                       "model.safetensors",
                                       "sentencepiece.bpe.model",
                                       "special_tokens_map.json",
                                       "tokenizer.json",
                                       "tokenizer_config.json"};
#define N_HF_FILES (sizeof hf_files / sizeof hf_files[0])

/* A copy of the fixture's hf/ in a fresh directory (links to its files) without the file
 * `without` (NULL: all), into base (a mkdtemp template). */
static void hf_copy(char *base, const char *without)
{
    ck_assert_ptr_nonnull(mkdtemp(base));
    char src[512], dst[512], name[128];
    for (size_t i = 0; i < N_HF_FILES; i++) {
        if (without && !strcmp(hf_files[i], without))
            continue;
        snprintf(name, sizeof name, "hf/%s", hf_files[i]);
        clf_test_family_file(name, src, sizeof src);
        snprintf(dst, sizeof dst, "%s/%s", base, hf_files[i]);
        ck_assert_int_eq(symlink(src, dst), 0);
    }
}

/* base/tokenizer_config.json: the fixture's with its first `from` made `to` */
static void edit_tokenizer_config(const char *base, const char *from, const char *to)
{
    char src[512], dst[512];
    size_t len;
    clf_test_family_file("hf/tokenizer_config.json", src, sizeof src);
    char *text = clf_test_read_file(src, &len);
    char *at = strstr(text, from);
    ck_assert_msg(at != NULL, "tokenizer_config.json has no %s", from);
    char *out = malloc(len + strlen(to) + 1);
    snprintf(out, len + strlen(to) + 1, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    snprintf(dst, sizeof dst, "%s/tokenizer_config.json", base);
    unlink(dst);
    clf_test_write_text(dst, out);
    free(out);
    free(text);
}

static int32_t *ints(clf_safetensors *f, const char *name, int64_t *shape)
{
    const clf_tensor *t = clf_safetensors_find(f, name);
    ck_assert_msg(t != NULL, "reference.safetensors: no %s", name);
    int32_t *v = malloc(sizeof *v * (size_t)clf_tensor_numel(t));
    CLF_ASSERT_OK(clf_tensor_to_i32(t, v));
    memcpy(shape, t->shape, sizeof t->shape);
    return v;
}

/* legacy_behaviour: true frames the source as NllbTokenizer(legacy_behaviour=True) does,
 * pieces </s> eng_Latn (the reference's src_legacy), through the imported model.yaml's
 * source_language: after. */
START_TEST(legacy_framing_matches_tokenizer)
{
    char base[] = "/tmp/clf-nllb-legacy-XXXXXX", dir[600], args[1400], err[2048], path[512];
    hf_copy(base, "tokenizer_config.json");
    edit_tokenizer_config(base, "\"legacy_behaviour\": false", "\"legacy_behaviour\": true");
    snprintf(dir, sizeof dir, "%s/out", base);
    snprintf(args, sizeof args, "import '%s' -o '%s'", base, dir);
    ck_assert_msg(clf_test_run_cli(args, err, sizeof err) == 0, "%s", err);
    clf_safetensors *f;
    CLF_ASSERT_OK(
        clf_safetensors_open(clf_test_family_file("reference.safetensors", path, sizeof path), &f));
    int64_t shape[8], lshape[8];
    int32_t *legacy = ints(f, "src_legacy", shape), *len = ints(f, "src_legacy_len", lshape);
    const int N = (int)shape[0], S = (int)shape[1];
    clf_config cfg;
    snprintf(path, sizeof path, "%s/model.yaml", dir);
    CLF_ASSERT_OK(clf_config_load(path, &cfg));
    ck_assert_int_eq(cfg.model.source_language, CLF_LANG_AFTER);
    clf_translator *t = clf_test_family_translator(dir);
    clf_tokenizer *tok;
    char spm[512], vocab[512];
    snprintf(spm, sizeof spm, "%s/source.spm", dir);
    snprintf(vocab, sizeof vocab, "%s/vocab.json", dir);
    CLF_ASSERT_OK(clf_tokenizer_load_mapped(spm, vocab, &tok));
    clf_framing vf = clf_tokenizer_framing(tok, tok), fr;
    CLF_ASSERT_OK(clf_model_framing(&cfg.model, &vf, &fr));
    fr.src_lang = clf_tokenizer_id(tok, "eng_Latn");
    ck_assert_int_ge(fr.src_lang, 0);
    FILE *in = fopen(clf_test_family_file("sentences.txt", path, sizeof path), "r");
    ck_assert_ptr_nonnull(in);
    char line[1024];
    int32_t *row = malloc(sizeof *row * (size_t)S);
    int i = 0;
    for (; fgets(line, sizeof line, in); i++) {
        line[strcspn(line, "\n")] = '\0';
        ck_assert_int_lt(i, N);
        int32_t *ids = NULL;
        int n = 0;
        CLF_ASSERT_OK(clf_translator_encode(t, 0, line, strlen(line), &ids, &n));
        ck_assert_int_eq(n + clf_framing_source_extra(&fr), len[i]);
        clf_framing_source_row(&fr, ids, n, S, row);
        for (int j = 0; j < len[i]; j++)
            ck_assert_msg(row[j] == legacy[(size_t)i * S + j], "line %d id %d: %d, not %d", i + 1,
                          j, row[j], legacy[(size_t)i * S + j]);
        free(ids);
    }
    ck_assert_int_eq(i, N);
    fclose(in);
    free(row);
    free(legacy);
    free(len);
    clf_tokenizer_free(tok);
    clf_translator_free(t);
    clf_safetensors_close(f);
    clf_test_remove_dir(base);
}
END_TEST

/* Without tokenizer_config.json the tokenizer is config.json's tokenizer_class, its codes
 * special_tokens_map.json's: the same vocabulary as the full directory's. */
START_TEST(without_tokenizer_config)
{
    char base[] = "/tmp/clf-nllb-notc-XXXXXX", dir[600], args[1400], err[2048], path[700];
    hf_copy(base, "tokenizer_config.json");
    snprintf(dir, sizeof dir, "%s/out", base);
    snprintf(args, sizeof args, "import '%s' -o '%s'", base, dir);
    ck_assert_msg(clf_test_run_cli(args, err, sizeof err) == 0, "%s", err);
    const char *full = clf_test_family_import();
    size_t a_len, b_len;
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    char *a = clf_test_read_file(path, &a_len);
    snprintf(path, sizeof path, "%s/vocab.json", full);
    char *b = clf_test_read_file(path, &b_len);
    ck_assert_msg(a_len == b_len && !memcmp(a, b, a_len), "the vocab.json files differ");
    free(a);
    free(b);
    clf_test_remove_import(full);
    clf_test_remove_dir(base);
}
END_TEST

/* base's import fails with one line holding want, and leaves nothing */
static void check_refused(const char *base, const char *want)
{
    char args[1400], err[2048], out[600];
    snprintf(out, sizeof out, "%s/out", base);
    snprintf(args, sizeof args, "import '%s' -o '%s'", base, out);
    ck_assert_int_ne(clf_test_run_cli(args, err, sizeof err), 0);
    ck_assert_msg(strstr(err, want), "%s", err);
    ck_assert_msg(strchr(err, '\n') == strrchr(err, '\n'), "not one line: %s", err);
    ck_assert_int_ne(access(out, F_OK), 0);
}

START_TEST(refusals)
{
    char base[] = "/tmp/clf-nllb-bad-XXXXXX";
    hf_copy(base, "tokenizer_config.json");
    edit_tokenizer_config(base, "\"NllbTokenizer\"", "\"T5Tokenizer\"");
    check_refused(base, "tokenizer_config.json: tokenizer_class = \"T5Tokenizer\": clformer "
                        "imports model_type m2m_100 with \"NllbTokenizer\" or "
                        "\"M2M100Tokenizer\"");
    /* deu_Latn's entry named as another code */
    edit_tokenizer_config(base, "\"content\": \"deu_Latn\"", "\"content\": \"xxx_Latn\"");
    check_refused(base, "tokenizer_config.json: added_tokens_decoder: id");
    check_refused(base, "is 'xxx_Latn', but NllbTokenizer's ids (pieces + 1, then the");
    edit_tokenizer_config(base, "\"legacy_behaviour\": false", "\"legacy_behaviour\": 3");
    check_refused(base, "tokenizer_config.json: legacy_behaviour: expected true or false");
    edit_tokenizer_config(base, "\"clean_up_tokenization_spaces\": true",
                          "\"clean_up_tokenization_spaces\": \"yes\"");
    check_refused(base, "tokenizer_config.json: clean_up_tokenization_spaces: expected true, "
                        "false or null");
    clf_test_remove_dir(base);
}
END_TEST

/* model.clean_up_spaces is tokenizer_config.json's clean_up_tokenization_spaces as
 * transformers 4.40 reads it: true as the fixture has it, false, null (false), and absent
 * with the file (true) */
START_TEST(clean_up_spaces_imported)
{
    static const struct {
        const char *to;
        int want;
    } cases[] = {{"true", 1}, {"false", 0}, {"null", 0}, {NULL, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char base[] = "/tmp/clf-nllb-cleanup-XXXXXX", dir[600], args[1400], err[2048],
             path[700], to[64];
        hf_copy(base, "tokenizer_config.json");
        if (cases[i].to) {
            snprintf(to, sizeof to, "\"clean_up_tokenization_spaces\": %s", cases[i].to);
            edit_tokenizer_config(base, "\"clean_up_tokenization_spaces\": true", to);
        } else {
            edit_tokenizer_config(base, "\"clean_up_tokenization_spaces\": true,", "");
        }
        snprintf(dir, sizeof dir, "%s/out", base);
        snprintf(args, sizeof args, "import '%s' -o '%s'", base, dir);
        ck_assert_msg(clf_test_run_cli(args, err, sizeof err) == 0, "%s", err);
        clf_config cfg;
        snprintf(path, sizeof path, "%s/model.yaml", dir);
        CLF_ASSERT_OK(clf_config_load(path, &cfg));
        ck_assert_msg(cfg.model.clean_up_spaces == cases[i].want, "case %zu", i);
        clf_test_remove_dir(base);
    }
}
END_TEST

static void nllb_tests(TCase *tc)
{
    tcase_add_test(tc, clean_up_spaces_imported);
    tcase_add_test(tc, legacy_framing_matches_tokenizer);
    tcase_add_test(tc, without_tokenizer_config);
    tcase_add_test(tc, refusals);
}

const clf_test_family clf_test_family_this = {.tag = "nllb",
                                              .source = "eng_Latn",
                                              .source_token = "eng_Latn",
                                              .targets = {"deu_Latn", "fra_Latn"},
                                              .n_languages = 202,
                                              .first_codes = "ace_Arab ace_Latn acm_Arab",
                                              .cpu_extra = nllb_tests};
