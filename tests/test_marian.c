/* The Marian import against transformers (tests/fixtures/marian, made by
 * tests/reference/make_marian_fixture.py with transformers 4.40.2): a small random
 * MarianMTModel in the Hugging Face layout is imported with `clformer import marian`, then
 * on each backend (CPU; OpenCL, the device of CLF_TEST_DEVICE) its logits must match
 * transformers' to 1e-4 relative, and greedy and beam-4 decoding must give transformers'
 * generate() outputs token for token (the fixture's metadata holds the generate()
 * arguments: max_length, num_beams, length_penalty, early_stopping, forced_eos_token_id,
 * bad_words_ids). The tokenizer (source.spm pieces through vocab.json) must give the ids
 * of transformers' MarianTokenizer, and `clformer translate -m` its decoded text. The
 * import's refusals (a config it cannot express, a corrupt .spm, a vocab.json of another
 * size, an existing output) leave nothing behind. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clformer/dataset.h"
#include "clformer/decode.h"
#include "clformer/model.h"
#include "clformer/tensor.h"
#include "clformer/tokenizer.h"
#include "clformer/train.h"
#include "clformer/weights.h"
#include "hf_parity.h"
#include "testutil.h"

/* The fixture directory: tests/fixtures/marian, or $CLF_MARIAN_FIXTURE (the full-size check
 * of bench/marian_fullsize.sh, where only the comparisons with transformers run). */
static const char *fix_dir(void)
{
    const char *e = getenv("CLF_MARIAN_FIXTURE");
    return e && *e ? e : CLF_FIXTURES_DIR "/marian";
}

/* fix_dir()/name, in one of four rotating static buffers */
static const char *fix(const char *name)
{
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", fix_dir(), name);
    return buf[k];
}
#define LOGITS_TOL 1e-4

typedef struct ref {
    clf_safetensors *f;
    int N, S, M; /* sentences, padded source length, max tokens out */
    int32_t *src, *src_len;
    int32_t *greedy, *greedy_len, *beam, *beam_len;
    int max_length, num_beams;
    float length_penalty;
} ref;

static int meta_int(const ref *r, const char *key)
{
    const char *v = clf_safetensors_meta(r->f, key);
    ck_assert_msg(v != NULL, "reference.safetensors: no metadata %s", key);
    return atoi(v);
}

static void ref_open(ref *r)
{
    int64_t shape[8];
    r->f =
        clf_test_ref_open(fix("reference.safetensors"), "src", &r->src, &r->src_len, &r->N, &r->S);
    r->greedy = clf_test_ref_ints(r->f, "greedy", shape);
    r->M = (int)shape[1];
    r->greedy_len = clf_test_ref_ints(r->f, "greedy_len", NULL);
    r->beam = clf_test_ref_ints(r->f, "beam", NULL);
    r->beam_len = clf_test_ref_ints(r->f, "beam_len", NULL);
    r->max_length = meta_int(r, "max_length");
    r->num_beams = meta_int(r, "num_beams");
    r->length_penalty = (float)atof(clf_safetensors_meta(r->f, "length_penalty"));
    /* what this suite reproduces; another generate() call needs other options */
    ck_assert_str_eq(clf_safetensors_meta(r->f, "early_stopping"), "False");
    ck_assert_str_eq(clf_safetensors_meta(r->f, "forced_eos_token_id"), "0");
}

static void ref_close(ref *r)
{
    free(r->greedy);
    free(r->greedy_len);
    free(r->beam);
    free(r->beam_len);
    clf_test_ref_close(r->f, r->src, r->src_len);
}

/* Imports the fixture into a fresh directory; returns its path (static storage). */
static const char *import_fixture(void)
{
    static char dir[256];
    char args[1024];
    snprintf(args, sizeof args, "marian '%s/hf'", fix_dir());
    clf_test_import("marian", args, dir, sizeof dir);
    return dir;
}

START_TEST(logits_match_transformers)
{
    clf_test_ref_logits_match(fix("reference.safetensors"), import_fixture(), LOGITS_TOL);
}
END_TEST

/* clf_decode of all sentences at once (padded as the reference's batch) with transformers'
 * generate() options; hypothesis i must be want[i] (generated ids, EOS included when it
 * ended, want_len[i] of them). */
static void check_decode(int beam, const int32_t *want, const int32_t *want_len, int M)
{
    ref r = {0};
    clf_test_loaded l = {0};
    ref_open(&r);
    clf_test_loaded_open(&l, import_fixture());
    clf_decode_opts o;
    clf_decode_opts_default(&l.cfg.model, &o);
    ck_assert_int_eq(o.sos_id, l.cfg.model.pad_id); /* Marian starts from the pad id */
    o.beam = beam;
    o.max_len = r.max_length - 1; /* max_length counts the decoder start */
    o.forced_eos = 1;
    if (beam > 1) {
        o.style = CLF_BEAM_HF;
        o.length_penalty = r.length_penalty;
    }
    clf_decode_result res;
    CLF_ASSERT_OK(clf_decode(l.m, r.src, r.N, r.S, &o, &res));
    char what[32];
    snprintf(what, sizeof what, "beam %d:", beam);
    clf_test_hyps_match(&res, r.N, want, want_len, M, o.eos_id, what);
    clf_decode_result_free(&res);
    clf_test_loaded_close(&l);
    ref_close(&r);
}

START_TEST(greedy_matches_generate)
{
    ref r = {0};
    ref_open(&r);
    check_decode(1, r.greedy, r.greedy_len, r.M);
    ref_close(&r);
}
END_TEST

START_TEST(beam4_matches_generate)
{
    ref r = {0};
    ref_open(&r);
    ck_assert_int_eq(r.num_beams, 4);
    check_decode(r.num_beams, r.beam, r.beam_len, r.M);
    ref_close(&r);
}
END_TEST

/* source.spm through vocab.json gives MarianTokenizer's ids (then </s>) */
START_TEST(tokenizer_matches_marian_tokenizer)
{
    ref r = {0};
    ref_open(&r);
    clf_tokenizer *tok;
    CLF_ASSERT_OK(clf_tokenizer_load_mapped(fix("hf/source.spm"), fix("hf/vocab.json"), &tok));
    clf_tokenizer_specials sp = clf_tokenizer_special_ids(tok);
    ck_assert_int_eq(sp.eos, 0);
    ck_assert_int_eq(sp.unk, 1);
    ck_assert_int_eq(sp.sos, -1);
    ck_assert_int_eq(sp.pad, clf_tokenizer_size(tok) - 1);
    FILE *f = fopen(fix("sentences.txt"), "r");
    ck_assert_ptr_nonnull(f);
    char line[1024];
    int i = 0, unk_seen = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        ck_assert_int_lt(i, r.N);
        int32_t *ids;
        int n;
        CLF_ASSERT_OK(clf_tokenizer_encode(tok, line, strlen(line), &ids, &n));
        ck_assert_msg(n + 1 == r.src_len[i], "line %d: %d pieces, transformers %d", i + 1, n,
                      r.src_len[i] - 1);
        for (int j = 0; j < n; j++) {
            ck_assert_msg(ids[j] == r.src[(size_t)i * r.S + j], "line %d piece %d: %d, not %d",
                          i + 1, j, ids[j], r.src[(size_t)i * r.S + j]);
            unk_seen |= ids[j] == sp.unk;
        }
        ck_assert_int_eq(r.src[(size_t)i * r.S + n], sp.eos);
        free(ids);
        i++;
    }
    fclose(f);
    ck_assert_int_eq(i, r.N);
    ck_assert_msg(unk_seen, "no sentence checks the unknown piece");
    clf_tokenizer_free(tok);
    ref_close(&r);
}
END_TEST

/* `clformer translate -m` end to end: the text transformers' tokenizer decodes. opts NULL:
 * no decoding flags at all, the model.yaml's generate: section (import marian's, from
 * config.json) must be the reference's generate() arguments. */
static void check_translate_cli(const char *opts, const char *want_file)
{
    const char *dir = import_fixture();
    char args[2048], out[256];
    snprintf(out, sizeof out, "%s.out", dir);
    ref r = {0};
    ref_open(&r); /* generate()'s max_length counts the decoder start */
    if (opts)
        snprintf(args, sizeof args, "translate -m '%s' --backend %s --max-len %d --forced-eos %s",
                 dir, clf_test_be_name, r.max_length - 1, opts);
    else
        snprintf(args, sizeof args, "translate -m '%s' --backend %s", dir, clf_test_be_name);
    if (!opts) {
        clf_config cfg;
        char yaml[512];
        snprintf(yaml, sizeof yaml, "%s/model.yaml", dir);
        CLF_ASSERT_OK(clf_config_load(yaml, &cfg));
        const clf_generate_config *g = &cfg.generate;
        ck_assert_int_eq(g->present, 1);
        ck_assert_int_eq(g->beam, r.num_beams);
        ck_assert_int_eq(g->beam_style, CLF_BEAM_HF);
        ck_assert_float_eq(g->length_penalty, r.length_penalty);
        ck_assert_int_eq(g->max_len, r.max_length - 1);
        ck_assert_int_eq(g->forced_eos, 1);
    }
    ref_close(&r);
    clf_test_cli_text_matches(args, fix("sentences.txt"), out, want_file, NULL);
    clf_test_remove_import(dir);
}

START_TEST(translate_cli_greedy_text)
{
    check_translate_cli("--beam 1", fix("greedy.txt"));
}
END_TEST

START_TEST(translate_cli_beam_text)
{
    check_translate_cli("--beam 4 --beam-style hf --length-penalty 1", fix("beam.txt"));
}
END_TEST

/* no flags: model.yaml's generate: section is transformers' default generate() (beam 4) */
START_TEST(translate_cli_model_defaults)
{
    check_translate_cli(NULL, fix("beam.txt"));
}
END_TEST

/* Line n (from 1) of the fixture's sentences.txt, without its newline (static storage). */
static const char *sentence(int n)
{
    static char line[4][512];
    static int k;
    k = (k + 1) % 4;
    FILE *f = fopen(fix("sentences.txt"), "r");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < n; i++)
        ck_assert_ptr_nonnull(fgets(line[k], sizeof line[k], f));
    fclose(f);
    line[k][strcspn(line[k], "\n")] = '\0';
    return line[k];
}

/* Fine-tuning an imported model: the training loss is transformers' cross-entropy.
 * The batcher frames the logits reference's three sentences (reference.safetensors
 * logits_src: sentences 0, 3, 13) with the model's keys, as Marian does (x </s>, padded
 * with <pad>), and the trainer's loss on those sources with the reference's decoder inputs
 * logits_tgt = <pad> y and labels y </s> must be the mean -log softmax of transformers'
 * logits at the labels, to 1e-4 relative: in evaluation and in a training step's forward
 * (no dropout, no label smoothing). */
START_TEST(finetune_loss_matches_transformers)
{
    ref r = {0};
    clf_test_loaded l = {0};
    ref_open(&r);
    clf_test_loaded_open(&l, import_fixture());
    const clf_model_config *mc = &l.cfg.model;
    const int V = mc->tgt_vocab, pad = mc->pad_id;
    int64_t ss[8], ts[8];
    int32_t *lsrc = clf_test_ref_ints(r.f, "logits_src", ss),
            *ltgt = clf_test_ref_ints(r.f, "logits_tgt", ts);
    const int B = (int)ss[0], S = (int)ss[1], T = (int)ts[1];
    const clf_tensor *lt = clf_safetensors_find(r.f, "logits");
    ck_assert_ptr_nonnull(lt);
    float *logits = malloc(sizeof *logits * (size_t)B * T * V);
    CLF_ASSERT_OK(clf_tensor_to_f32(lt, logits));

    /* the framing of the imported model.yaml over its vocabularies: Marian's */
    char spm[2][512], vocab[512];
    snprintf(spm[0], sizeof spm[0], "%s/source.spm", l.dir);
    snprintf(spm[1], sizeof spm[1], "%s/target.spm", l.dir);
    snprintf(vocab, sizeof vocab, "%s/vocab.json", l.dir);
    clf_tokenizer *st, *tt;
    CLF_ASSERT_OK(clf_tokenizer_load_mapped(spm[0], vocab, &st));
    CLF_ASSERT_OK(clf_tokenizer_load_mapped(spm[1], vocab, &tt));
    const clf_framing own = clf_tokenizer_framing(st, tt);
    clf_framing f;
    CLF_ASSERT_OK(clf_model_framing(mc, &own, &f));
    ck_assert_int_eq(f.src_bos, -1);
    ck_assert_int_eq(f.src_eos, 0);
    ck_assert_int_eq(f.src_pad, pad);
    ck_assert_int_eq(f.tgt_start, pad);
    ck_assert_int_eq(f.tgt_eos, 0);
    ck_assert_int_eq(f.tgt_pad, pad);

    /* the batcher's sources are transformers' (its padding to the batch's longest) */
    char tsv[600], text[4096];
    snprintf(tsv, sizeof tsv, "%s.tsv", l.dir);
    const int lines[3] = {1, 4, 14}; /* the reference's sentences 0, 3, 13 */
    ck_assert_int_eq(B, 3);
    int used = 0;
    for (int k = 0; k < B; k++) /* any target: its ids are checked for the framing only */
        used += snprintf(text + used, sizeof text - (size_t)used, "%s\tdie katze sitzt\n",
                         sentence(lines[k]));
    clf_test_write_text(tsv, text);
    clf_dataset_opts o = {tsv, NULL, st, tt, mc->max_len};
    clf_dataset *d;
    CLF_ASSERT_OK(clf_dataset_load_framed(&o, &f, &d));
    clf_batcher *bat;
    CLF_ASSERT_OK(clf_batcher_create(d, B, 0, 0, 1, &bat));
    clf_batch bt;
    CLF_ASSERT_OK(clf_batcher_get(bat, 0, &bt));
    ck_assert_int_eq(bt.batch, B);
    ck_assert_int_le(bt.src_len, S);
    for (int k = 0; k < B; k++) {
        for (int j = 0; j < S; j++) {
            int32_t want = lsrc[(size_t)k * S + j];
            int32_t got = j < bt.src_len ? bt.src[(size_t)k * bt.src_len + j] : pad;
            ck_assert_msg(got == want, "sentence %d source position %d: %d, transformers %d", k, j,
                          got, want);
        }
        const int32_t *y;
        int yn;
        clf_dataset_ids(d, bt.index[k], NULL, NULL, &y, &yn);
        ck_assert_int_eq(bt.tgt_in[(size_t)k * bt.tgt_len], pad);    /* <pad> y */
        ck_assert_int_eq(bt.labels[(size_t)k * bt.tgt_len + yn], 0); /* y </s> */
    }

    /* the reference's decoder inputs <pad> y, framed by the rule: labels y </s> */
    int32_t *labels = malloc(sizeof *labels * (size_t)B * T);
    for (int k = 0; k < B; k++) {
        ck_assert_int_eq(ltgt[(size_t)k * T], f.tgt_start);
        for (int t = 0; t + 1 < T; t++)
            labels[(size_t)k * T + t] = ltgt[(size_t)k * T + t + 1];
        labels[(size_t)k * T + T - 1] = f.tgt_eos;
    }
    /* transformers' loss: mean over the labels of -log softmax(logits)[label] */
    double want = 0;
    for (int i = 0; i < B * T; i++) {
        const float *row = logits + (size_t)i * V;
        double mx = row[0], sum = 0;
        for (int v = 1; v < V; v++)
            mx = row[v] > mx ? row[v] : mx;
        for (int v = 0; v < V; v++)
            sum += exp((double)row[v] - mx);
        want += mx + log(sum) - row[labels[i]];
    }
    want /= B * T;

    clf_train_config tc = l.cfg.train;
    tc.label_smoothing = 0.0f;
    tc.accumulate = 1;
    clf_trainer *trainer;
    CLF_ASSERT_OK(clf_trainer_create(l.m, &tc, 0, &trainer));
    const clf_train_batch tb = {B, bt.src_len, T, bt.src, ltgt, labels};
    double sum;
    long long tokens;
    CLF_ASSERT_OK(clf_trainer_evaluate(trainer, &tb, &sum, &tokens));
    ck_assert_int_eq(tokens, (long long)B * T);
    ck_assert_msg(fabs(sum / tokens - want) <= LOGITS_TOL * fabs(want),
                  "evaluate: loss %.8f, transformers %.8f", sum / tokens, want);
    CLF_ASSERT_OK(clf_trainer_accumulate(trainer, &tb, &sum, &tokens));
    ck_assert_msg(fabs(sum / tokens - want) <= LOGITS_TOL * fabs(want),
                  "train step: loss %.8f, transformers %.8f", sum / tokens, want);
    CLF_ASSERT_OK(clf_trainer_step(trainer, NULL, NULL));

    clf_trainer_free(trainer);
    free(labels);
    clf_batch_free(&bt);
    clf_batcher_free(bat);
    clf_dataset_free(d);
    remove(tsv);
    clf_tokenizer_free(st);
    clf_tokenizer_free(tt);
    free(logits);
    free(lsrc);
    free(ltgt);
    clf_test_loaded_close(&l);
    ref_close(&r);
}
END_TEST

/* ---- refusals (CPU only: no backend is opened) ---- */

/* Copies the fixture's hf/ into a new directory, with file name replaced by text (NULL:
 * unchanged). Returns the directory (static storage). */
static const char *hf_copy(const char *name, const char *text)
{
    static char dir[256];
    char base[] = "/tmp/clf-marian-bad-XXXXXX", cmd[1024];
    ck_assert_ptr_nonnull(mkdtemp(base));
    snprintf(dir, sizeof dir, "%s", base);
    snprintf(cmd, sizeof cmd, "cp '%s'/hf/* '%s'/", fix_dir(), dir);
    ck_assert_int_eq(system(cmd), 0);
    if (name) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        clf_test_write_text(path, text);
    }
    return dir;
}

/* import of hf must fail with a message holding want, and leave no output behind */
static void expect_refusal(const char *hf, const char *want)
{
    char args[1024], err[2048], out[512];
    snprintf(out, sizeof out, "%s/out", hf);
    snprintf(args, sizeof args, "import marian '%s' -o '%s'", hf, out);
    int rc = clf_test_run_cli(args, err, sizeof err);
    ck_assert_msg(rc != 0, "clformer %s succeeded", args);
    ck_assert_msg(strstr(err, want), "clformer %s: '%s' lacks '%s'", args, err, want);
    ck_assert_msg(strchr(err, '\n') == strrchr(err, '\n'), "not one line: %s", err);
    ck_assert_msg(access(out, F_OK) != 0, "%s was written", out);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -c tmp >/dev/null", hf);
    ck_assert_msg(system(cmd) != 0, "a temporary directory was left in %s", hf);
}

static char *fixture_config(void)
{
    size_t len;
    return clf_test_read_file(fix("hf/config.json"), &len);
}

/* config.json with the text of key's value replaced */
static const char *config_with(const char *key_and_value, const char *replacement)
{
    char *c = fixture_config();
    char *at = strstr(c, key_and_value);
    ck_assert_msg(at != NULL, "config.json has no %s", key_and_value);
    size_t n = strlen(c) + strlen(replacement) + 1;
    char *out = malloc(n);
    snprintf(out, n, "%.*s%s%s", (int)(at - c), c, replacement, at + strlen(key_and_value));
    const char *dir = hf_copy("config.json", out);
    free(out);
    free(c);
    return dir;
}

/* The import's refusals of a bad HF_DIR: the fixture's hf/ with file changed (the text find
 * replaced by text, or, without find, the whole file written as text; NULL text: the file
 * removed; find "->": the file made a symbolic link to text), or made a sparse file of sparse bytes
 * (no disk) past its limit, refused before it is read. */
static const struct refusal {
    const char *file, *find, *text;
    uint64_t sparse;
    const char *want;
} refusals[] = {
    {"config.json", "\"activation_function\": \"swish\"", "\"activation_function\": \"tanh\"", 0,
     "config.json: activation_function = \"tanh\": not one clformer has"},
    {"config.json", "\"decoder_ffn_dim\": 32", "\"decoder_ffn_dim\": 64", 0,
     "config.json: decoder_ffn_dim = 64: differs from encoder_ffn_dim"},
    {"config.json", "\"model_type\": \"marian\"", "\"model_type\": \"bart\"", 0,
     "config.json: model_type = \"bart\": clformer imports model_type \"marian\", "
     "\"m2m_100\""},
    {"config.json", "\"bad_words_ids\": [", "\"normalize_before\": true, \"bad_words_ids\": [", 0,
     "config.json: normalize_before = true"},
    {"config.json", "\"d_model\": 16", "\"d_model\": 32", 0, "model.safetensors: tensor "},
    {"config.json", "\"attention_dropout\": 0.0", "\"attention_dropout\": 1.5", 0,
     "config.json: attention_dropout = 1.5: dropout rates must be in [0, 1)"},
    /* a special id outside the vocabulary is named in config.json, with the valid range
     * (not as generation_config.json's forced_eos_token_id, compared with it later) */
    {"config.json", "\"eos_token_id\": 0", "\"eos_token_id\": 99999", 0,
     "config.json: eos_token_id = 99999: expected an id of the vocabulary, 0 to 143 "
     "(vocab_size 144)"},
    {"config.json", "\"pad_token_id\": 143", "\"pad_token_id\": 144", 0,
     "config.json: pad_token_id = 144: expected an id of the vocabulary, 0 to 143"},
    /* config.json is read by clformer's JSON reader: its messages and limits */
    {"config.json", NULL, "{\"model_type\": ", 0,
     "config.json: invalid JSON at byte 15 (line 1, column 16): unexpected end of input"},
    {"config.json", NULL, "{\"a\": 1, \"a\": 2}", 0,
     "config.json: invalid JSON at byte 9 (line 1, column 10): duplicate key \"a\" in object"},
    /* generation settings: generation_config.json's, which transformers reads first */
    {"generation_config.json", NULL, "{\"forced_eos_token_id\": 5}", 0,
     "generation_config.json: forced_eos_token_id = 5: only the eos_token_id can be forced"},
    {"generation_config.json", NULL, "{\"num_beams\": 4, \"length_penalty\": -1.0}", 0,
     "generation_config.json: length_penalty = -1.0: clformer's length penalty is a number in "
     "[0, 100]"},
    {"generation_config.json", NULL, "[1]", 0, "generation_config.json: expected a JSON object"},
    /* a link to nothing is not an absent file (the model's generation settings would be
     * silently config.json's) */
    {"generation_config.json", "->", "nowhere.json", 0,
     "generation_config.json: a symbolic link that leads nowhere (No such file or directory)"},
    {"source.spm", NULL, "this is not a SentencePiece model", 0,
     "source.spm: not a valid SentencePiece model"},
    {"target.spm", NULL, NULL, 0, "target.spm"},
    {"vocab.json", NULL, "{\"</s>\": 0, \"<unk>\": 1, \"a\": 2, \"<pad>\": 3}", 0,
     "vocab.json: 4 pieces, but the weights (and config.json vocab_size) have 144 rows"},
    {"config.json", NULL, "{", ((uint64_t)1 << 20) + 1,
     "config.json: 1048577 bytes, more than the limit of 1048576"},
    {"vocab.json", NULL, "{", (uint64_t)CLF_TOKENIZER_JSON_MAX + 1,
     "vocab.json: 268435457 bytes, more than the limit of 268435456"},
};

START_TEST(import_refuses_bad_input)
{
    const struct refusal *r = &refusals[_i];
    const char *d;
    if (r->find && !strcmp(r->find, "->")) { /* file made a symbolic link to text */
        d = hf_copy(NULL, NULL);
        char path[512];
        snprintf(path, sizeof path, "%s/%s", d, r->file);
        remove(path);
        ck_assert_int_eq(symlink(r->text, path), 0);
    } else if (r->find) {
        d = config_with(r->find, r->text);
    } else {
        d = hf_copy(NULL, NULL);
        char path[512];
        snprintf(path, sizeof path, "%s/%s", d, r->file);
        if (r->sparse)
            clf_test_write_sparse(path, r->text, r->sparse);
        else if (r->text)
            clf_test_write_text(path, r->text);
        else
            remove(path);
    }
    expect_refusal(d, r->want);
    clf_test_remove_dir(d);
}
END_TEST

/* The memory config.json implies at load is bounded as model.yaml's is (config.h,
 * CLF_CONFIG_MODEL_BYTES_MAX): a positional table of max_position_embeddings x d_model
 * beyond it is refused, config.json named, before a weight is read. */
START_TEST(import_refuses_huge_tables)
{
    char *c = fixture_config(), *pos = strstr(c, "\"max_position_embeddings\": 64,");
    char *d_model = strstr(c, "\"d_model\": 16,");
    ck_assert_ptr_nonnull(pos);
    ck_assert_ptr_nonnull(d_model);
    ck_assert(d_model < pos);
    size_t n = strlen(c) + 64;
    char *text = malloc(n);
    snprintf(text, n, "%.*s\"d_model\": 512,%.*s\"max_position_embeddings\": 16777216,%s",
             (int)(d_model - c), c, (int)(pos - d_model - strlen("\"d_model\": 16,")),
             d_model + strlen("\"d_model\": 16,"),
             pos + strlen("\"max_position_embeddings\": 64,"));
    const char *dir = hf_copy("config.json", text);
    expect_refusal(dir, "config.json: ");
    expect_refusal(dir, "model.max_len: max_len 16777216 x d_model 512 = 32 GiB of positional "
                        "table exceeds the limit of 16 GiB");
    clf_test_remove_dir(dir);
    free(text);
    free(c);
}
END_TEST

START_TEST(import_refuses_usage)
{
    char out[512], args[1024], err[2048];
    const char *d;
    /* usage errors: exit 2, one line */
    ck_assert_int_eq(clf_test_run_cli("import", err, sizeof err), 2);
    ck_assert_msg(strstr(err, "`HF_DIR -o MODEL_DIR`"), "%s", err);
    ck_assert_int_eq(clf_test_run_cli("import bart x -o y", err, sizeof err), 2);
    ck_assert_int_eq(clf_test_run_cli("import marian x", err, sizeof err), 2);
    ck_assert_msg(strstr(err, "-o MODEL_DIR is required"), "%s", err);
    /* an existing output is never overwritten */
    d = hf_copy(NULL, NULL);
    snprintf(out, sizeof out, "%s/out", d);
    ck_assert_int_eq(mkdir(out, 0755), 0);
    snprintf(args, sizeof args, "import marian '%s' -o '%s'", d, out);
    ck_assert_int_ne(clf_test_run_cli(args, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "already exists"), "%s", err);
    clf_test_remove_dir(d);
}
END_TEST

static void add_tests(TCase *tc)
{
    tcase_add_test(tc, logits_match_transformers);
    tcase_add_test(tc, greedy_matches_generate);
    tcase_add_test(tc, beam4_matches_generate);
    tcase_add_test(tc, translate_cli_greedy_text);
    tcase_add_test(tc, translate_cli_beam_text);
    tcase_add_test(tc, translate_cli_model_defaults);
}

static void cpu_only(TCase *tc)
{
    if (getenv("CLF_MARIAN_FIXTURE") && *getenv("CLF_MARIAN_FIXTURE"))
        return; /* the fixture's own checks, for tests/fixtures/marian only */
    tcase_add_test(tc, tokenizer_matches_marian_tokenizer);
    tcase_add_test(tc, finetune_loss_matches_transformers);
    tcase_add_loop_test(tc, import_refuses_bad_input, 0,
                        (int)(sizeof refusals / sizeof refusals[0]));
    tcase_add_test(tc, import_refuses_usage);
    tcase_add_test(tc, import_refuses_huge_tables);
}

int main(void)
{
    return clf_test_backends_main("marian", add_tests, cpu_only, NULL);
}
