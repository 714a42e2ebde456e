/* The mBART-50 import against transformers (tests/fixtures/mbart, made by
 * tests/reference/make_mbart_fixture.py with transformers 4.40.2): a small random
 * MBartForConditionalGeneration with MBart50Tokenizer's files (its own SentencePiece model)
 * is imported with `clformer import`, then on each backend (CPU; OpenCL, the device of
 * CLF_TEST_DEVICE) its logits must match transformers' to 1e-4 relative (pre-norm with final
 * norms, layernorm_embedding, learned positions from row 2, a non-zero final_logits_bias), and
 * greedy and beam-4 decoding into de_DE and fr_XX (the code forced first, </s> forced at
 * max_length) must give transformers' generate() outputs token for token: the family
 * suite's checks (family_suite.c, shared with test_m2m100 and test_nllb). The source framing (en_XX pieces </s>) must be MBart50Tokenizer's, and `clformer
 * translate -m --source-lang en_XX --target-lang L` its decoded text. Here, on the CPU: the
 * config.json keys and tokenizer files the import refuses, each with one line naming it. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "family_suite.h"
#include "testutil.h"

/* the files of the fixture's hf/ the import reads */
static const char *const hf_files[] = {"config.json", "generation_config.json", "model.safetensors",
                                       "sentencepiece.bpe.model"};

/* One change to a copy of the fixture's hf/ and the error it must give: config.json with
 * from replaced by to, or (spm non-NULL) that SentencePiece model instead of its own. */
static const struct {
    const char *from, *to, *spm, *error;
} refusals[] = {
    {"\"normalize_before\": true", "\"normalize_before\": false", NULL,
     "config.json: normalize_before = false: clformer's mBART import supports only true"},
    {"\"add_final_layer_norm\": true", "\"add_final_layer_norm\": false", NULL,
     "config.json: add_final_layer_norm = false: clformer's mBART import supports only true"},
    {"\"normalize_embedding\": true", "\"normalize_embedding\": 1", NULL,
     "config.json: normalize_embedding = 1: clformer's mBART import supports only true"},
    {"\"static_position_embeddings\": false", "\"static_position_embeddings\": true", NULL,
     "config.json: static_position_embeddings = true: clformer's mBART import supports only "
     "false"},
    {"\"add_bias_logits\": false", "\"add_bias_logits\": true", NULL,
     "config.json: add_bias_logits = true: clformer's mBART import supports only false"},
    {"\"tokenizer_class\": \"MBart50Tokenizer\"", "\"tokenizer_class\": \"MBartTokenizer\"", NULL,
     "config.json: tokenizer_class = \"MBartTokenizer\": clformer imports mBART-50"},
    {"\"scale_embedding\": true", "\"scale_embedding\": \"yes\"", NULL,
     "config.json: scale_embedding = \"yes\": expected true or false"},
    {"\"activation_function\": \"gelu\"", "\"activation_function\": \"gelu_fast\"", NULL,
     "config.json: activation_function = \"gelu_fast\": not one clformer has"},
    {"\"pad_token_id\": 1", "\"pad_token_id\": 0", NULL,
     "pad_token_id 0, eos_token_id 2, bos_token_id 0: MBart50Tokenizer's are 1, 2 and 0"},
    {"\"vocab_size\": ", "\"vocab_size\": 10, \"old_vocab_size\": ", NULL,
     "more than config.json's vocab_size 10"},
    {"\"model_type\": \"mbart\"", "\"model_type\": \"mbart\", \"extra_pos_embeddings\": 0", NULL,
     "config.json: extra_pos_embeddings = 0: mBART's learned positions start at row 2"},
    /* M2M-100's SentencePiece model has no <s> </s> pieces: fairseq's ids would collide */
    {NULL, NULL, "m2m100/hf/sentencepiece.bpe.model", "sentencepiece.bpe.model: piece 1 is '"},
};

/* text with the first from replaced by to (malloc'd); from must be in it */
static char *replaced(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    ck_assert_msg(at != NULL, "config.json has no '%s'", from);
    size_t head = (size_t)(at - text), n = strlen(text) - strlen(from) + strlen(to) + 1;
    char *out = malloc(n);
    ck_assert_ptr_nonnull(out);
    snprintf(out, n, "%.*s%s%s", (int)head, text, to, at + strlen(from));
    return out;
}

START_TEST(import_refuses)
{
    clf_test_make_tmpdir("clf-mbart-bad");
    for (size_t i = 0; i < sizeof hf_files / sizeof hf_files[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "hf/%s", hf_files[i]);
        const int spm = !strcmp(hf_files[i], "sentencepiece.bpe.model") && refusals[_i].spm;
        char other[512];
        snprintf(other, sizeof other, "%s/%s", CLF_FIXTURES_DIR, refusals[_i].spm);
        size_t len;
        char buf[512];
        char *data =
            clf_test_read_file(spm ? other : clf_test_family_file(name, buf, sizeof buf), &len);
        if (!strcmp(hf_files[i], "config.json") && refusals[_i].from) {
            char *changed = replaced(data, refusals[_i].from, refusals[_i].to);
            free(data);
            data = changed;
            len = strlen(data);
        }
        clf_test_write_file(clf_test_tmp_path(hf_files[i]), data, len);
        free(data);
    }
    char args[1024], err[2048];
    snprintf(args, sizeof args, "import '%s' -o '%s'", clf_test_tmpdir(), clf_test_tmp_path("out"));
    ck_assert_int_ne(clf_test_run_cli(args, err, sizeof err), 0);
    ck_assert_msg(strstr(err, refusals[_i].error), "%s: %s", refusals[_i].error, err);
    ck_assert_msg(strchr(err, '\n') == strrchr(err, '\n'), "not one line: %s", err);
    ck_assert_int_ne(access(clf_test_tmp_path("out"), F_OK), 0);
    clf_test_remove_tmpdir();
}
END_TEST

/* The imported model.yaml says mBART in clformer's keys, and the vocabulary puts the codes
 * and <mask> where MBart50Tokenizer does (the fixture's forced ids). */
START_TEST(imported_config)
{
    const char *dir = clf_test_family_import();
    char path[512];
    snprintf(path, sizeof path, "%s/model.yaml", dir);
    size_t len;
    char *yaml = clf_test_read_file(path, &len);
    static const char *const want[] = {"norm: pre\n",
                                       "final_norm: true\n",
                                       "positional: learned\n",
                                       "position_offset: 2\n",
                                       "embed_norm: true\n",
                                       "tie_embeddings: all\n",
                                       "embed_scale: sqrt_d_model\n",
                                       "activation: gelu\n",
                                       "decoder_start_id: 2\n",
                                       "source_language: before\n",
                                       "target_language: forced\n",
                                       "forced_eos: true\n",
                                       "early_stopping: true\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(yaml, want[i]), "model.yaml has no '%s':\n%s", want[i], yaml);
    free(yaml);
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    char *vocab = clf_test_read_file(path, &len);
    ck_assert_msg(strstr(vocab, "\"<s>\": 0,") && strstr(vocab, "\"<pad>\": 1,") &&
                      strstr(vocab, "\"</s>\": 2,") && strstr(vocab, "\"<unk>\": 3,"),
                  "fairseq's ids: %.200s", vocab);
    free(vocab);
    clf_test_remove_import(dir);
}
END_TEST

static void mbart_tests(TCase *tc)
{
    tcase_add_loop_test(tc, import_refuses, 0, (int)(sizeof refusals / sizeof refusals[0]));
    tcase_add_test(tc, imported_config);
}

const clf_test_family clf_test_family_this = {.tag = "mbart",
                                              .source = "en_XX",
                                              .source_token = "en_XX",
                                              .targets = {"de_DE", "fr_XX"},
                                              .n_languages = 52,
                                              .first_codes = "ar_AR cs_CZ de_DE",
                                              .cpu_extra = mbart_tests};
