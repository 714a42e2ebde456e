/* clformer translate as a user runs it: a tiny random model (made per test with
 * `clformer init`) and the fixture vocabulary; one line out per line in, n-best lines,
 * empty/too-long/non-UTF-8 lines, the attention outputs (safetensors and PNG), cache and
 * no-cache agreeing. Also the PNG writer, its files decoded by libspng. */
#include <math.h>
#include <spng.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clformer/tensor.h"
#include "clformer/tokenizer.h"
#include "png.h"
#include "testutil.h"

#define VOCAB_PATH CLF_FIXTURES_DIR "/tokenizer/wordlevel.json"
/* The tiny model's positional table: lines of more than MODEL_MAX_LEN - 2 words are
 * too long. */
#define MODEL_MAX_LEN 64
/* Attention rows are softmax outputs: they sum to 1 up to float rounding. */
#define ROW_SUM_TOL 1e-4
#define OUT_MAX     (1 << 16)

static char tmpdir[64];
static char model_yaml[128], weights[128];
static clf_tokenizer *tok;
static char out[OUT_MAX], err[OUT_MAX];

static size_t read_bytes(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        buf[0] = '\0';
        return 0;
    }
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
    return n;
}

/* A model config with vocabularies of `vocab` words, the layers the brief of the suite
 * names, and 1 CPU thread (suites run side by side under ctest -j). */
static void write_model(const char *path, int vocab)
{
    char yaml[512];
    int n = snprintf(yaml, sizeof yaml,
                     "model:\n  src_vocab: %d\n  tgt_vocab: %d\n  max_len: %d\n  d_model: 32\n"
                     "  layers: 2\n  heads: 4\n  d_ff: 64\nbackend:\n  name: cpu\n"
                     "  threads: 1\n",
                     vocab, vocab, MODEL_MAX_LEN);
    clf_test_write_file(path, yaml, (size_t)n);
}

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/clf-translate-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    CLF_ASSERT_OK(clf_tokenizer_load(VOCAB_PATH, &tok));
    snprintf(model_yaml, sizeof model_yaml, "%s/model.yaml", tmpdir);
    snprintf(weights, sizeof weights, "%s/w.safetensors", tmpdir);
    write_model(model_yaml, clf_tokenizer_size(tok));
    char args[512];
    snprintf(args, sizeof args, "init -c %s --seed 1 -o %s", model_yaml, weights);
    ck_assert_msg(clf_test_run_cli(args, err, sizeof err) == 0, "init: %s", err);
}

static void teardown(void)
{
    clf_tokenizer_free(tok);
    tok = NULL;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Runs `clformer translate` on input[0..n) with the model yaml and weights w, the fixture
 * vocabulary on both sides and extra options; stdout lands in out, stderr in err. Returns
 * the exit code. */
static int translate_model(const char *yaml, const char *w, const char *opts, const char *input,
                           size_t n)
{
    char in_path[128], out_path[128], err_path[128], cmd[2048];
    snprintf(in_path, sizeof in_path, "%s/in.txt", tmpdir);
    snprintf(out_path, sizeof out_path, "%s/out.txt", tmpdir);
    snprintf(err_path, sizeof err_path, "%s/err.txt", tmpdir);
    clf_test_write_file(in_path, input, n);
    snprintf(cmd, sizeof cmd,
             "CLF_PLUGIN_PATH= '%s' translate -c '%s' -w '%s' --src-vocab '%s' "
             "--tgt-vocab '%s' %s <'%s' >'%s' 2>'%s'",
             CLF_CLI_PATH, yaml, w, VOCAB_PATH, VOCAB_PATH, opts, in_path, out_path, err_path);
    int rc = system(cmd);
    read_bytes(out_path, out, sizeof out);
    read_bytes(err_path, err, sizeof err);
    ck_assert_msg(rc != -1 && WIFEXITED(rc), "translate did not exit normally: %s", err);
    return WEXITSTATUS(rc);
}

static int translate_with(const char *yaml, const char *opts, const char *input, size_t n)
{
    return translate_model(yaml, weights, opts, input, n);
}

static int translate(const char *opts, const char *input)
{
    return translate_with(model_yaml, opts, input, strlen(input));
}

/* translate of input with each of the n options must succeed and print what the first
 * printed; err is the last run's stderr. */
static void assert_same_output(const char *input, const char *const *opts, int n)
{
    static char first[OUT_MAX];
    for (int i = 0; i < n; i++) {
        ck_assert_msg(translate(opts[i], input) == 0, "stderr: %s", err);
        if (i == 0)
            strcpy(first, out);
        else
            ck_assert_str_eq(out, first);
    }
}

/* Splits text in place at '\n' into lines[] (without the final empty piece); returns
 * the number of lines. */
static int split_lines(char *text, char **lines, int max)
{
    int n = 0;
    char *p = text;
    while (*p && n < max) {
        char *nl = strchr(p, '\n');
        ck_assert_msg(nl != NULL, "output does not end with a newline: %s", text);
        *nl = '\0';
        lines[n++] = p;
        p = nl + 1;
    }
    return n;
}

/* Every space-separated word of text is a non-special word of the vocabulary, and
 * words are separated by exactly one space. */
static void assert_vocab_words(const char *text)
{
    if (!*text)
        return;
    ck_assert_msg(text[0] != ' ' && text[strlen(text) - 1] != ' ', "stray space in '%s'", text);
    const char *p = text;
    while (*p) {
        const char *sp = strchr(p, ' ');
        size_t len = sp ? (size_t)(sp - p) : strlen(p);
        ck_assert_msg(len > 0, "two spaces in a row in '%s'", text);
        int32_t id = clf_tokenizer_id_n(tok, p, len);
        ck_assert_msg(id >= 0, "'%.*s' is not in the vocabulary", (int)len, p);
        ck_assert_msg(!clf_tokenizer_is_special(tok, id), "special '%.*s' in the output", (int)len,
                      p);
        p += len + (sp ? 1 : 0);
    }
}

static void assert_one_line_error(const char *e)
{
    ck_assert_msg(strncmp(e, "clformer: ", 10) == 0, "stderr: %s", e);
    const char *nl = strchr(e, '\n');
    ck_assert_msg(nl && nl[1] == '\0', "not one line: %s", e);
}

static const char *const sentences = "Hello , world !\n"
                                     "the cat sat on the dog .\n"
                                     "Grüße aus Köln\n"
                                     "I and again and again\n";

START_TEST(test_greedy_one_line_per_line)
{
    ck_assert_msg(translate("", sentences) == 0, "stderr: %s", err);
    ck_assert_str_eq(err, "");
    char *lines[16];
    ck_assert_int_eq(split_lines(out, lines, 16), 4);
    for (int i = 0; i < 4; i++)
        assert_vocab_words(lines[i]);
}
END_TEST

START_TEST(test_deterministic_and_batch_independent)
{
    /* the same line twice in one input, and the whole input twice */
    const char *twice = "the cat sat on the dog .\nthe cat sat on the dog .\n";
    ck_assert_msg(translate("", twice) == 0, "stderr: %s", err);
    char *lines[4];
    ck_assert_int_eq(split_lines(out, lines, 4), 2);
    ck_assert_str_eq(lines[0], lines[1]);

    /* the whole input twice; with an explicit --max-len, the batching does not change the
     * translations */
    const char *const runs[] = {"--max-len 20", "--max-len 20", "--max-len 20 --batch 1",
                                "--max-len 20 --batch 3"};
    assert_same_output(sentences, runs, 4);
}
END_TEST

START_TEST(test_n_best)
{
    ck_assert_msg(translate("--beam 4 --n-best 3", sentences) == 0, "stderr: %s", err);
    char *lines[32];
    ck_assert_int_eq(split_lines(out, lines, 32), 4 * 3);
    for (int s = 0; s < 4; s++) {
        double prev = INFINITY;
        for (int i = 0; i < 3; i++) {
            char *line = lines[s * 3 + i];
            char *tab = strchr(line, '\t');
            ck_assert_msg(tab != NULL, "no tab in '%s'", line);
            *tab = '\0';
            char *end = NULL;
            double score = strtod(line, &end);
            ck_assert_msg(end == tab && end != line, "bad score '%s'", line);
            ck_assert_msg(isfinite(score) && score <= 0.0, "score %g", score);
            ck_assert_msg(score <= prev, "sentence %d: score %g after %g", s, score, prev);
            prev = score;
            assert_vocab_words(tab + 1);
        }
    }
    /* more best than beams is a usage error */
    ck_assert_int_eq(translate("--beam 2 --n-best 3", sentences), 2);
    assert_one_line_error(err);
}
END_TEST

START_TEST(test_empty_line)
{
    ck_assert_msg(translate("", "Hello\n\n  \t \nworld") == 0, "stderr: %s", err);
    char *lines[8];
    ck_assert_int_eq(split_lines(out, lines, 8), 4);
    ck_assert_str_eq(lines[1], "");
    ck_assert_str_eq(lines[2], "");

    ck_assert_msg(translate("--beam 2 --n-best 2", "\nHello\n") == 0, "stderr: %s", err);
    ck_assert_int_eq(split_lines(out, lines, 8), 4);
    ck_assert_str_eq(lines[0], "0.000000\t");
    ck_assert_str_eq(lines[1], "0.000000\t");

    ck_assert_msg(translate("", "") == 0, "stderr: %s", err);
    ck_assert_str_eq(out, "");
}
END_TEST

/* The output line of `translate --max-len 20` for one line alone (batch-independent with
 * an explicit --max-len), into buf. */
static void translate_alone(const char *line, char *buf, size_t size)
{
    char input[1024];
    snprintf(input, sizeof input, "%s\n", line);
    ck_assert_msg(translate("--max-len 20", input) == 0, "stderr: %s", err);
    ck_assert_msg(strlen(out) > 0 && out[strlen(out) - 1] == '\n', "output: %s", out);
    snprintf(buf, size, "%.*s", (int)strlen(out) - 1, out);
}

/* Every line of stderr starts with "clformer: ". */
static void assert_clformer_lines(const char *e)
{
    for (const char *p = e; *p; p = strchr(p, '\n') + 1) {
        ck_assert_msg(strncmp(p, "clformer: ", 10) == 0, "stderr line: %s", p);
        ck_assert_msg(strchr(p, '\n') != NULL, "stderr does not end with a newline: %s", e);
    }
}

/* The input policy (README, "Translate input"): a line that is not valid UTF-8, holds a NUL
 * byte or is longer than the model's positions is refused with a warning naming it, its
 * output is an empty line, the other lines are translated as they would be alone, and the
 * exit status is 2 after the last line. CRLF reads as LF. */
START_TEST(test_refused_lines)
{
    static char want[3][512];
    translate_alone("Hello , world !", want[0], sizeof want[0]);
    translate_alone("the cat sat", want[1], sizeof want[1]);
    translate_alone("Grüße aus Köln", want[2], sizeof want[2]);
    char input[2048];
    size_t at = 0;
    at += (size_t)snprintf(input + at, sizeof input - at, "Hello , world !\n");
    at += (size_t)snprintf(input + at, sizeof input - at, "the \xff\xfe cat\n");
    memcpy(input + at, "a\0b\n", 4);
    at += 4;
    at += (size_t)snprintf(input + at, sizeof input - at, "\n");
    for (int i = 0; i < MODEL_MAX_LEN - 1; i++) /* 63 words + [SOS] + [EOS] > 64 */
        at += (size_t)snprintf(input + at, sizeof input - at, "cat ");
    at += (size_t)snprintf(input + at, sizeof input - at, "\nthe cat sat\r\nGrüße aus Köln");
    for (int batch = 1; batch <= 32; batch += 31) {
        char opts[64];
        snprintf(opts, sizeof opts, "--max-len 20 --batch %d", batch);
        ck_assert_int_eq(translate_with(model_yaml, opts, input, at), 2);
        char *lines[16];
        ck_assert_int_eq(split_lines(out, lines, 16), 7);
        ck_assert_str_eq(lines[0], want[0]);
        for (int i = 1; i <= 4; i++)
            ck_assert_msg(lines[i][0] == '\0', "line %d: '%s'", i + 1, lines[i]);
        ck_assert_str_eq(lines[5], want[1]);
        ck_assert_str_eq(lines[6], want[2]);
        assert_clformer_lines(err);
        ck_assert_msg(strstr(err, "warning: input line 2 refused (") &&
                          strstr(err, "UTF-8 at byte 4"),
                      "stderr: %s", err);
        ck_assert_msg(strstr(err, "warning: input line 3 refused (a NUL byte at byte 1): its "
                                  "output is an empty line"),
                      "stderr: %s", err);
        ck_assert_msg(strstr(err, "warning: input line 5 refused (63 tokens, 65 with [SOS] and "
                                  "[EOS], more than the model's max_len 64"),
                      "stderr: %s", err);
        ck_assert_msg(!strstr(err, "input line 4") && !strstr(err, "input line 6"), "stderr: %s",
                      err);
        ck_assert_msg(strstr(err, "clformer: translate: 3 of 7 input lines refused"), "stderr: %s",
                      err);
    }
    /* n-best: a refused line gives N lines, as an empty line does */
    ck_assert_int_eq(translate_with(model_yaml, "--beam 2 --n-best 2", input, at), 2);
    char *lines[32];
    ck_assert_int_eq(split_lines(out, lines, 32), 14);
    ck_assert_str_eq(lines[2], "0.000000\t");
    ck_assert_str_eq(lines[3], "0.000000\t");

    /* 62 words fit exactly */
    at = 0;
    for (int i = 0; i < MODEL_MAX_LEN - 2; i++)
        at += (size_t)snprintf(input + at, sizeof input - at, "cat ");
    ck_assert_msg(translate("--max-len 3", input) == 0, "stderr: %s", err);
    ck_assert_str_eq(err, "");
}
END_TEST

/* A line of TRANSLATE_LINE_MAX (1 MiB) bytes is read; one byte more is refused, its bytes
 * read and dropped, and the next line is translated. */
START_TEST(test_line_byte_limit)
{
    const size_t max = 1 << 20;
    static char want[512];
    translate_alone("the cat sat", want, sizeof want);
    char *input = malloc(max + 64);
    ck_assert_ptr_nonnull(input);
    for (size_t n = max; n <= max + 1; n++) {
        memset(input, 'x', n); /* one word: [UNK] */
        memcpy(input + n, "\nthe cat sat\n", 13);
        int rc = translate_with(model_yaml, "--max-len 20", input, n + 13);
        char *lines[4];
        ck_assert_int_eq(split_lines(out, lines, 4), 2);
        ck_assert_str_eq(lines[1], want);
        if (n == max) {
            ck_assert_msg(rc == 0, "stderr: %s", err);
            continue;
        }
        ck_assert_int_eq(rc, 2);
        ck_assert_str_eq(lines[0], "");
        ck_assert_msg(strstr(err, "clformer: warning: input line 1 refused (longer than the limit "
                                  "of 1048576 bytes)"),
                      "stderr: %s", err);
    }
    free(input);
}
END_TEST

/* Max resident set (KiB) of the processes cmd runs, measured in a child of its own. */
static long max_rss_kib(const char *cmd, int *exit_code)
{
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fd[0]);
        int rc = system(cmd);
        struct rusage ru;
        getrusage(RUSAGE_CHILDREN, &ru);
        long v[2] = {ru.ru_maxrss, rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1};
        ssize_t w = write(fd[1], v, sizeof v);
        _exit(w == (ssize_t)sizeof v ? 0 : 1);
    }
    close(fd[1]);
    long v[2] = {0, -1};
    ck_assert_int_eq(read(fd[0], v, sizeof v), (ssize_t)sizeof v);
    close(fd[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    *exit_code = (int)v[1];
    return v[0];
}

/* 100,000 lines stream through in constant memory: one output line per input line, each
 * the translation of its sentence alone, and the peak memory no more than that of a
 * 1,000-line run plus 4 MiB (the 100,000 lines are ~1.7 MB: a reader that kept them, or
 * their output, would show; under ASan the quarantine of freed memory is cut to 1 MB, or it
 * alone would grow). A tinier model than the suite's and 2 output tokens at most: ~1 s for
 * the 100,000 lines. */
START_TEST(test_100k_lines_constant_memory)
{
    static const char *const cycle[] = {"the cat sat on the dog .", "Hello , world !",
                                        "I and again and again", ""};
    char yaml[256], w[256], in_path[128], out_path[128], cmd[2048];
    snprintf(yaml, sizeof yaml, "%s/tiny.yaml", tmpdir);
    snprintf(w, sizeof w, "%s/tiny.safetensors", tmpdir);
    snprintf(in_path, sizeof in_path, "%s/many.txt", tmpdir);
    snprintf(out_path, sizeof out_path, "%s/many.out", tmpdir);
    char text[512];
    int tn = snprintf(text, sizeof text,
                      "model: {src_vocab: %d, tgt_vocab: %d, max_len: 16, d_model: 8, layers: 1, "
                      "heads: 2, d_ff: 8}\nbackend: {name: cpu, threads: 1}\n",
                      clf_tokenizer_size(tok), clf_tokenizer_size(tok));
    clf_test_write_file(yaml, text, (size_t)tn);
    snprintf(cmd, sizeof cmd, "init -c %s --seed 2 -o %s", yaml, w);
    ck_assert_msg(clf_test_run_cli(cmd, err, sizeof err) == 0, "init: %s", err);
    static char want[4][512];
    for (int k = 0; k < 4; k++) {
        ck_assert_msg(translate_model(yaml, w, "--max-len 2", cycle[k], strlen(cycle[k])) == 0,
                      "stderr: %s", err);
        snprintf(want[k], sizeof want[k], "%.*s", (int)strcspn(out, "\n"), out);
    }
    const long counts[2] = {1000, 100000};
    long rss[2];
    for (int run = 0; run < 2; run++) {
        FILE *f = fopen(in_path, "w");
        ck_assert_ptr_nonnull(f);
        for (long i = 0; i < counts[run]; i++)
            fprintf(f, "%s\n", cycle[i % 4]);
        ck_assert_int_eq(fclose(f), 0);
        snprintf(cmd, sizeof cmd,
                 "ASAN_OPTIONS=\"${ASAN_OPTIONS:-}:quarantine_size_mb=1\" CLF_PLUGIN_PATH= '%s' "
                 "translate -c '%s' -w '%s' --src-vocab '%s' --tgt-vocab '%s' --max-len 2 "
                 "--batch 64 <'%s' >'%s' 2>/dev/null",
                 CLF_CLI_PATH, yaml, w, VOCAB_PATH, VOCAB_PATH, in_path, out_path);
        int rc = -1;
        rss[run] = max_rss_kib(cmd, &rc);
        ck_assert_int_eq(rc, 0);
        size_t len = 0;
        char *res = clf_test_read_file(out_path, &len);
        long n = 0;
        for (char *p = res; p < res + len; n++) {
            char *nl = memchr(p, '\n', (size_t)(res + len - p));
            ck_assert_msg(nl != NULL, "output line %ld has no newline", n + 1);
            *nl = '\0';
            ck_assert_msg(strcmp(p, want[n % 4]) == 0, "output line %ld: '%s', want '%s'", n + 1, p,
                          want[n % 4]);
            p = nl + 1;
        }
        free(res);
        ck_assert_int_eq(n, counts[run]);
    }
    ck_assert_msg(rss[1] <= rss[0] + 4096,
                  "peak memory grew with the input: %ld KiB for %ld lines, %ld KiB for %ld", rss[0],
                  counts[0], rss[1], counts[1]);
}
END_TEST

/* Framed source length of a line: its tokens plus [SOS] and [EOS]. */
static int framed_len(const char *line)
{
    int32_t *ids = NULL;
    int n = 0;
    CLF_ASSERT_OK(clf_tokenizer_encode(tok, line, strlen(line), &ids, &n));
    free(ids);
    return n + 2;
}

static const char *const att_lines[] = {"Hello , world !", "", "the cat sat on the dog ."};

START_TEST(test_attention_safetensors)
{
    char opts[256], path[128];
    snprintf(path, sizeof path, "%s/att.safetensors", tmpdir);
    snprintf(opts, sizeof opts, "--beam 2 --attention '%s'", path);
    const char *input = "Hello , world !\n\nthe cat sat on the dog .\n";
    ck_assert_msg(translate(opts, input) == 0, "stderr: %s", err);
    clf_safetensors *f = NULL;
    CLF_ASSERT_OK(clf_safetensors_open(path, &f));
    ck_assert_int_eq(clf_safetensors_count(f), 3);
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "attention.%d", i);
        const clf_tensor *t = clf_safetensors_find(f, name);
        ck_assert_msg(t != NULL, "%s missing", name);
        ck_assert_int_eq(t->dtype, CLF_F32);
        ck_assert_int_eq(t->ndim, 2);
        if (i == 1) { /* the empty line: not decoded */
            ck_assert_int_eq(t->shape[0], 0);
            continue;
        }
        ck_assert_int_eq(t->shape[1], framed_len(att_lines[i]));
        ck_assert_int_ge(t->shape[0], 1);
        float *a = malloc(t->nbytes);
        CLF_ASSERT_OK(clf_tensor_to_f32(t, a));
        for (int64_t r = 0; r < t->shape[0]; r++) {
            double sum = 0;
            for (int64_t c = 0; c < t->shape[1]; c++) {
                float w = a[r * t->shape[1] + c];
                ck_assert_msg(w >= 0.0f && w <= 1.0f, "%s[%lld]: weight %g", name, (long long)r,
                              (double)w);
                sum += w;
            }
            ck_assert_msg(fabs(sum - 1.0) <= ROW_SUM_TOL, "%s row %lld sums to %.7f", name,
                          (long long)r, sum);
        }
        free(a);
    }
    clf_safetensors_close(f);
}
END_TEST

/* Decodes a PNG with libspng, which checks what a decoder must (the signature, every
 * chunk's CRC, the zlib stream and its Adler-32, the filters), and checks it is 8-bit
 * grayscale. *width and *height get the size, *pixels (when pixels is not NULL) a malloc'd
 * copy of the image. */
static void read_png(const char *path, int *width, int *height, unsigned char **pixels)
{
    static unsigned char buf[1 << 22];
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s missing", path);
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ck_assert_msg(n < sizeof buf, "%s: larger than the test reads", path);
    spng_ctx *dec = spng_ctx_new(0);
    ck_assert_ptr_nonnull(dec);
    ck_assert_int_eq(spng_set_crc_action(dec, SPNG_CRC_ERROR, SPNG_CRC_ERROR), 0);
    ck_assert_int_eq(spng_set_png_buffer(dec, buf, n), 0);
    struct spng_ihdr ihdr;
    int err = spng_get_ihdr(dec, &ihdr);
    ck_assert_msg(err == 0, "%s: %s", path, spng_strerror(err));
    ck_assert_int_eq(ihdr.bit_depth, 8);
    ck_assert_int_eq(ihdr.color_type, SPNG_COLOR_TYPE_GRAYSCALE);
    ck_assert_int_eq(ihdr.interlace_method, 0);
    *width = (int)ihdr.width;
    *height = (int)ihdr.height;
    size_t size = 0;
    ck_assert_int_eq(spng_decoded_image_size(dec, SPNG_FMT_PNG, &size), 0);
    ck_assert_uint_eq(size, (size_t)*width * *height);
    unsigned char *img = malloc(size);
    ck_assert_ptr_nonnull(img);
    err = spng_decode_image(dec, img, size, SPNG_FMT_PNG, 0);
    ck_assert_msg(err == 0, "%s: %s", path, spng_strerror(err));
    err = spng_decode_chunks(dec); /* the chunks after the image, up to IEND */
    ck_assert_msg(err == 0, "%s: %s", path, spng_strerror(err));
    spng_ctx_free(dec);
    if (pixels)
        *pixels = img;
    else
        free(img);
}

START_TEST(test_attention_png)
{
    char opts[512], st_path[128], prefix[128], png[160];
    snprintf(st_path, sizeof st_path, "%s/att.safetensors", tmpdir);
    snprintf(prefix, sizeof prefix, "%s/heat", tmpdir);
    snprintf(opts, sizeof opts, "--attention '%s' --attention-png '%s'", st_path, prefix);
    const char *input = "Hello , world !\n\nthe cat sat on the dog .\n";
    ck_assert_msg(translate(opts, input) == 0, "stderr: %s", err);
    clf_safetensors *f = NULL;
    CLF_ASSERT_OK(clf_safetensors_open(st_path, &f));
    for (int i = 0; i < 3; i++) {
        snprintf(png, sizeof png, "%s.%d.png", prefix, i);
        if (i == 1) {
            ck_assert_msg(access(png, F_OK) != 0, "%s written for an empty line", png);
            continue;
        }
        char name[32];
        snprintf(name, sizeof name, "attention.%d", i);
        const clf_tensor *t = clf_safetensors_find(f, name);
        ck_assert_ptr_nonnull(t);
        int w = 0, h = 0;
        unsigned char *px = NULL;
        read_png(png, &w, &h, &px);
        ck_assert_int_eq(w, (int)t->shape[1] * 8);
        ck_assert_int_eq(h, (int)t->shape[0] * 8);
        /* each 8x8 cell is its weight as a gray level */
        float *a = malloc(t->nbytes);
        CLF_ASSERT_OK(clf_tensor_to_f32(t, a));
        for (int r = 0; r < (int)t->shape[0]; r++)
            for (int c = 0; c < (int)t->shape[1]; c++) {
                int want = (int)lroundf(a[r * t->shape[1] + c] * 255.0f);
                int got = px[(size_t)(r * 8 + 7) * w + c * 8 + 3];
                ck_assert_msg(abs(got - want) <= 1, "cell %d,%d: %d, want %d", r, c, got, want);
            }
        free(a);
        free(px);
    }
    clf_safetensors_close(f);
    /* no temporary files left behind */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q tmp", tmpdir);
    ck_assert_int_ne(system(cmd), 0);
}
END_TEST

START_TEST(test_no_cache_matches_cache)
{
    const char *const greedy[] = {"--max-len 16", "--max-len 16 --no-cache"};
    assert_same_output(sentences, greedy, 2);
    const char *const beam[] = {"--max-len 12 --beam 3", "--max-len 12 --beam 3 --no-cache"};
    assert_same_output(sentences, beam, 2);
}
END_TEST

/* --stats adds two lines on stderr (the totals; the decoder steps' backend calls and time)
 * and changes nothing on stdout. */
START_TEST(test_stats)
{
    static char input[1024];
    snprintf(input, sizeof input, "%s\n", sentences); /* and an empty line, not decoded */
    const char *const runs[] = {"--max-len 12", "--max-len 12 --stats"};
    assert_same_output(input, runs, 2);
    long lines = -1, decoded = -1, tokens = -1, words = 0;
    double secs = -1.0;
    ck_assert_msg(sscanf(err,
                         "clformer: translate: %ld lines, %ld decoded, %ld output tokens in %lf s",
                         &lines, &decoded, &tokens, &secs) == 4,
                  "stderr: %s", err);
    const char *second = strchr(err, '\n');
    ck_assert_ptr_nonnull(second);
    long long steps = -1;
    double calls = -1.0, step_ms = -1.0, host_ms = -1.0;
    ck_assert_msg(sscanf(second + 1,
                         "clformer: translate: %lld decoder steps: %lf backend calls, %lf ms a "
                         "step, %lf ms of it in decoding's host code",
                         &steps, &calls, &step_ms, &host_ms) == 4,
                  "stderr: %s", err);
    assert_one_line_error(second + 1);
    ck_assert_msg(steps >= 1 && steps <= 12 && calls >= 1.0 && host_ms >= 0.0 && host_ms <= step_ms,
                  "%s", err);
    ck_assert_int_eq(lines, 5);
    ck_assert_int_eq(decoded, 4);
    for (const char *p = out; *p; p++) /* words printed: specials are not, so <= tokens */
        words += *p != ' ' && *p != '\n' && (p == out || p[-1] == ' ' || p[-1] == '\n');
    ck_assert_msg(tokens >= words && tokens <= 4 * 12, "%ld tokens, %ld words: %s", tokens, words,
                  err);
    ck_assert_msg(secs >= 0.0, "%s", err); /* printed to the millisecond: 0.000 on a fast run */
}
END_TEST

/* --weight-type f16, bf16 and int8 decode every line (test_decode and test_quant check
 * their arithmetic); a bad value is a usage error naming the option. */
START_TEST(test_weight_type)
{
    static char f32[OUT_MAX];
    ck_assert_msg(translate("--max-len 12 --batch 1", sentences) == 0, "stderr: %s", err);
    strcpy(f32, out);
    ck_assert_msg(translate("--max-len 12 --batch 1 --weight-type f16", sentences) == 0,
                  "stderr: %s", err);
    int lines32 = 0, lines16 = 0;
    for (const char *p = f32; *p; p++)
        lines32 += *p == '\n';
    for (const char *p = out; *p; p++)
        lines16 += *p == '\n';
    ck_assert_int_eq(lines16, lines32);
    const char *const others[] = {"--max-len 12 --batch 1 --weight-type bf16",
                                  "--max-len 12 --batch 1 --weight-type int8",
                                  "--max-len 12 --beam 2 --weight-type int8"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        ck_assert_msg(translate(others[i], sentences) == 0, "%s: stderr: %s", others[i], err);
        int lines = 0;
        for (const char *p = out; *p; p++)
            lines += *p == '\n';
        ck_assert_int_eq(lines, lines32);
    }
    ck_assert_msg(translate("--max-len 12 --weight-type f32", sentences) == 0, "stderr: %s", err);
    ck_assert_int_eq(translate("--weight-type int4", "Hello\n"), 2);
    assert_one_line_error(err);
    ck_assert_msg(strstr(err, "--weight-type") && strstr(err, "int4"), "stderr: %s", err);
}
END_TEST

START_TEST(test_argument_errors)
{
    char args[1024];
    snprintf(args, sizeof args, "translate -c %s -w %s --tgt-vocab %s", model_yaml, weights,
             VOCAB_PATH);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 2);
    assert_one_line_error(err);
    ck_assert_msg(strstr(err, "--src-vocab"), "stderr: %s", err);
    ck_assert_int_eq(translate("--beam 0", "Hello\n"), 2);
    ck_assert_int_eq(translate("--length-penalty x", "Hello\n"), 2);
    ck_assert_int_eq(clf_test_run_cli("translate --help >/dev/null", err, sizeof err), 0);
}
END_TEST

/* A batch x beam whose KV caches would not fit the decode's bound (CLF_DECODE_BYTES_MAX,
 * 16 GiB) is refused with one line naming the options, before anything is allocated: here
 * 8 x 100000 hypotheses, each with a self-attention cache of 2 layers x 63 positions x 2 x
 * d_model 32 floats (32256 bytes), plan 24 GiB and more. The same options on fewer
 * hypotheses decode. */
START_TEST(test_decode_plan_refused)
{
    const char *eight = "Hello\nHello\nHello\nHello\nHello\nHello\nHello\nHello\n";
    ck_assert_int_eq(translate("--batch 8 --beam 100000 --max-len 63", eight), 2);
    assert_one_line_error(err);
    ck_assert_msg(strstr(err, "translate: --batch 8: decode: batch 8 x beam 100000 x max_len 63 "
                              "(src_len 3) plans ") &&
                      strstr(err, "GiB (self-attention caches 24.03 GiB") &&
                      strstr(err, "more than the limit of 16.00 GiB (CLF_DECODE_BYTES_MAX)"),
                  "stderr: %s", err);
    ck_assert_str_eq(out, "");
    ck_assert_msg(translate("--batch 8 --beam 4 --max-len 63", eight) == 0, "stderr: %s", err);
}
END_TEST

/* -m RUN_DIR: a training run's directory (config.yaml with its train: section,
 * last.safetensors, the vocabularies the config names) translates as the long form does,
 * from another working directory too; -m with -c is refused. */
START_TEST(test_model_dir_of_a_run)
{
    const char *input = "Hello world\nthe file\n";
    ck_assert_int_eq(translate("--beam 2", input), 0);
    char want[OUT_MAX];
    snprintf(want, sizeof want, "%s", out);
    char run[160], yaml[1024], cmd[2048];
    snprintf(run, sizeof run, "%s/run", tmpdir);
    snprintf(cmd, sizeof cmd,
             "mkdir '%s' && cp '%s' '%s/last.safetensors' && cp '%s' '%s/src.json'"
             " && cp '%s' '%s/tgt.json'",
             run, weights, run, VOCAB_PATH, run, VOCAB_PATH, run);
    ck_assert_int_eq(system(cmd), 0);
    /* the vocabularies as a run's config names them: relative to where train ran */
    int n = snprintf(yaml, sizeof yaml,
                     "model: {src_vocab: %d, tgt_vocab: %d, max_len: %d, d_model: 32, layers: 2,"
                     " heads: 4, d_ff: 64}\nbackend: {name: cpu, threads: 1}\n"
                     "train: {data: {train: nowhere.tsv}, checkpoint: {dir: elsewhere/run}}\n",
                     clf_tokenizer_size(tok), clf_tokenizer_size(tok), MODEL_MAX_LEN);
    snprintf(cmd, sizeof cmd, "%s/config.yaml", run);
    clf_test_write_file(cmd, yaml, (size_t)n);
    char in_path[160], out_path[160], err_path[160];
    snprintf(in_path, sizeof in_path, "%s/in.txt", tmpdir);
    snprintf(out_path, sizeof out_path, "%s/out-m.txt", tmpdir);
    snprintf(err_path, sizeof err_path, "%s/err-m.txt", tmpdir);
    clf_test_write_file(in_path, input, strlen(input));
    snprintf(cmd, sizeof cmd,
             "cd / && CLF_PLUGIN_PATH= '%s' translate -m '%s' --beam 2 <'%s' >'%s' 2>'%s'",
             CLF_CLI_PATH, run, in_path, out_path, err_path);
    int rc = system(cmd);
    read_bytes(out_path, out, sizeof out);
    read_bytes(err_path, err, sizeof err);
    ck_assert_msg(rc == 0, "translate -m: %s", err);
    ck_assert_str_eq(out, want);
    snprintf(cmd, sizeof cmd, "translate -m '%s' -c '%s'", run, model_yaml);
    ck_assert_int_eq(clf_test_run_cli(cmd, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "give one form"), "stderr: %s", err);
    snprintf(cmd, sizeof cmd, "translate -m '%s/none'", tmpdir);
    ck_assert_int_eq(clf_test_run_cli(cmd, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "no model.yaml"), "stderr: %s", err);
}
END_TEST

START_TEST(test_vocab_larger_than_model)
{
    char yaml[128];
    snprintf(yaml, sizeof yaml, "%s/small.yaml", tmpdir);
    write_model(yaml, 10);
    ck_assert_int_eq(translate_with(yaml, "", "Hello\n", 6), 2);
    assert_one_line_error(err);
    ck_assert_msg(strstr(err, "src_vocab is 10"), "stderr: %s", err);
}
END_TEST

/* A NaN in a weight (here a norm's gain) is refused at load with one line naming the
 * tensor and the element, also with --weight-type f16 and --n-best: before, every
 * translation was an empty line with exit 0 (and the n-best scores nan). */
START_TEST(test_non_finite_weight_refused)
{
    clf_safetensors *f = NULL;
    CLF_ASSERT_OK(clf_safetensors_open(weights, &f));
    const int n = clf_safetensors_count(f);
    clf_tensor *ts = calloc((size_t)n, sizeof *ts);
    float *gain = NULL;
    for (int i = 0; i < n; i++) {
        ts[i] = *clf_safetensors_at(f, i);
        if (strcmp(ts[i].name, "decoder.norm.alpha") == 0) {
            gain = malloc(ts[i].nbytes);
            memcpy(gain, ts[i].data, ts[i].nbytes);
            gain[7] = NAN;
            ts[i].data = gain;
        }
    }
    ck_assert_ptr_nonnull(gain);
    char bad[160], want[512];
    snprintf(bad, sizeof bad, "%s/nan.safetensors", tmpdir);
    CLF_ASSERT_OK(clf_safetensors_write(bad, ts, n, NULL, 0));
    clf_safetensors_close(f);
    free(ts);
    free(gain);
    snprintf(want, sizeof want,
             "clformer: %s: tensor 'decoder.norm.alpha' holds a non-finite value (NaN) at index "
             "7\n",
             bad);
    static const char *const opts[] = {"", "--weight-type f16", "--n-best 2 --beam 2"};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        ck_assert_int_ne(translate_model(model_yaml, bad, opts[i], "Hello\n", 6), 0);
        assert_one_line_error(err);
        ck_assert_str_eq(err, want);
        ck_assert_str_eq(out, "");
    }
}
END_TEST

START_TEST(test_png_writer_round_trip)
{
    char path[128];
    snprintf(path, sizeof path, "%s/x.png", tmpdir);
    /* more than 64 KiB of pixels (several deflate blocks), in a pattern that varies along
     * rows and columns so that every PNG filter type has work to do */
    const int W = 300, H = 250;
    uint8_t *px = malloc((size_t)W * H);
    for (int i = 0; i < W * H; i++)
        px[i] = (uint8_t)(i * 7 + i / W);
    CLF_ASSERT_OK(png_write_gray8(path, px, W, H));
    int w = 0, h = 0;
    unsigned char *back = NULL;
    read_png(path, &w, &h, &back);
    ck_assert_int_eq(w, W);
    ck_assert_int_eq(h, H);
    ck_assert_int_eq(memcmp(back, px, (size_t)W * H), 0);
    free(back);
    free(px);
    ck_assert_int_eq(png_write_gray8(path, NULL, 0, 3), CLF_ERR_INPUT);
}
END_TEST

#ifdef CLF_HAVE_OPENCL
/* The OpenCL backend translates exactly as the CPU backend does (greedy and beam, an
 * empty line, sentences finishing at different steps), when an OpenCL device exists. */
START_TEST(test_opencl_matches_cpu)
{
    const char *in = "Hello , world !\n\nthe cat sat on the dog .\nGrüße aus Köln\n";
    static const char *const opts[2] = {"--max-len 20", "--max-len 20 --beam 3 --n-best 2"};
    if (system("CLF_PLUGIN_PATH= '" CLF_CLI_PATH "' devices >/dev/null 2>&1") != 0) {
        ck_assert_msg(!clf_test_opencl_unavailable("translate", "`clformer devices` lists no "
                                                                "OpenCL device"),
                      "CLF_TEST_REQUIRE_OPENCL=1 but there is no OpenCL device");
        return;
    }
    for (int i = 0; i < 2; i++) {
        char cpu_out[sizeof out], opt[256];
        ck_assert_int_eq(translate(opts[i], in), 0);
        memcpy(cpu_out, out, sizeof out);
        snprintf(opt, sizeof opt, "%s --backend opencl", opts[i]);
        ck_assert_msg(translate(opt, in) == 0, "opencl: %s", err);
        if (i == 0) {
            ck_assert_str_eq(out, cpu_out);
            continue;
        }
        /* n-best: the same texts; scores printed with 6 decimals may differ in the last */
        char *a[16], *b[16];
        int na = split_lines(cpu_out, a, 16), nb = split_lines(out, b, 16);
        ck_assert_int_eq(na, nb);
        for (int k = 0; k < na; k++) {
            const char *ta = strchr(a[k], '\t'), *tb = strchr(b[k], '\t');
            ck_assert(ta && tb);
            ck_assert_str_eq(ta, tb);
            ck_assert(fabs(atof(a[k]) - atof(b[k])) < 1e-3);
        }
    }
    /* f16 without cl_khr_fp16 (capped off), so without HGEMM: one note says what falls
     * back, and the lines still decode */
    setenv("CLF_OPENCL_LIMITS", "fp16=0", 1);
    int rc = translate("--max-len 20 --backend opencl --weight-type f16 --batch 8", in);
    unsetenv("CLF_OPENCL_LIMITS");
    ck_assert_msg(rc == 0, "opencl f16: %s", err);
    assert_one_line_error(err);
    ck_assert_msg(strstr(err, "clformer: note: ") && strstr(err, "cl_khr_fp16") &&
                      strstr(err, "F32 weights"),
                  "stderr: %s", err);
    int lines = 0;
    for (const char *p = out; *p; p++)
        lines += *p == '\n';
    ck_assert_int_eq(lines, 4);
}
END_TEST
/* the suite's OpenCL items, none where the backend is not built */
#define OPENCL_TESTS {test_opencl_matches_cpu},
#else
#define OPENCL_TESTS
#endif

CLF_TEST_SUITE_MAIN(
    "translate",
    CLF_TCASE_FIXTURE("translate", 120, setup, teardown, {test_greedy_one_line_per_line},
                      {test_deterministic_and_batch_independent}, {test_n_best}, {test_empty_line},
                      {test_refused_lines}, {test_line_byte_limit},
                      {test_100k_lines_constant_memory}, {test_attention_safetensors},
                      {test_attention_png}, {test_no_cache_matches_cache}, {test_stats},
                      {test_weight_type}, {test_argument_errors}, {test_decode_plan_refused},
                      {test_vocab_larger_than_model}, {test_model_dir_of_a_run},
                      {test_non_finite_weight_refused}, {test_png_writer_round_trip}, OPENCL_TESTS))
