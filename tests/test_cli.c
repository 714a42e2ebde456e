/* The clformer CLI as a user runs it: exit codes (0 ok, 2 bad input, 3 backend), one-line
 * errors on stderr, reproducible init, and forward through files matching the PyTorch
 * fixture. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clformer/tensor.h"
#include "clformer/tokenizer.h"
#include "testutil.h"

static char tmpdir[64];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/clf-cli-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* stderr of a failing command is exactly one line starting with "clformer: " */
static void assert_one_line_error(const char *err)
{
    ck_assert_msg(strncmp(err, "clformer: ", 10) == 0, "stderr: %s", err);
    const char *nl = strchr(err, '\n');
    ck_assert_msg(nl && nl[1] == '\0', "not one line: %s", err);
}

static int file_equal(const char *a, const char *b)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
    return system(cmd) == 0;
}

START_TEST(test_help_and_unknown_command)
{
    char err[4096];
    ck_assert_int_eq(clf_test_run_cli("--help >/dev/null", err, sizeof err), 0);
    ck_assert_int_eq(clf_test_run_cli("frobnicate", err, sizeof err), 2);
    assert_one_line_error(err);
    ck_assert_int_eq(clf_test_run_cli("forward --bogus-flag", err, sizeof err), 2);
}
END_TEST

START_TEST(test_info_lists_cpu)
{
    char err[4096], args[512];
    snprintf(args, sizeof args, "info > %s/info.txt", tmpdir);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 0);
    snprintf(args, sizeof args, "grep -q 'cpu (ABI' %s/info.txt", tmpdir);
    ck_assert_int_eq(system(args), 0);
}
END_TEST

START_TEST(test_config_dump_and_errors)
{
    char err[4096], args[1024], path[256];
    snprintf(args, sizeof args, "config -c %s/base.yaml --dump > %s/dump.yaml", CLF_CONFIGS_DIR,
             tmpdir);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 0);
    /* the dump is itself a valid config */
    snprintf(args, sizeof args, "config -c %s/dump.yaml", tmpdir);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 0);

    /* every shipped preset, as a user runs it: a broken one fails here */
    snprintf(args, sizeof args,
             "sh -c 'n=0; for f in %s/*.yaml; do \"%s\" config -c \"$f\" --dump > %s/d.yaml && "
             "\"%s\" config -c %s/d.yaml > /dev/null || { echo \"$f\" >&2; exit 1; }; "
             "n=$((n+1)); done; test $n -ge 12'",
             CLF_CONFIGS_DIR, CLF_CLI_PATH, tmpdir, CLF_CLI_PATH, tmpdir);
    ck_assert_msg(system(args) == 0, "a preset in configs/ fails `clformer config --dump`");

    snprintf(path, sizeof path, "%s/bad.yaml", tmpdir);
    clf_test_write_text(path, "model:\n  src_vocab: 10\n  tgt_vocab: 10\n  hedas: 4\n");
    snprintf(args, sizeof args, "config -c %s", path);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 2);
    assert_one_line_error(err);
    ck_assert_msg(strstr(err, "bad.yaml:4:3"), "no file:line:col in: %s", err);
    ck_assert_msg(strstr(err, "hedas"), "key not named in: %s", err);

    snprintf(args, sizeof args, "config -c %s/does-not-exist.yaml", tmpdir);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 2);
    assert_one_line_error(err);
}
END_TEST

START_TEST(test_init_reproducible)
{
    char err[4096], args[1024], a[256], b[256], c[256];
    snprintf(a, sizeof a, "%s/a.safetensors", tmpdir);
    snprintf(b, sizeof b, "%s/b.safetensors", tmpdir);
    snprintf(c, sizeof c, "%s/c.safetensors", tmpdir);
    snprintf(args, sizeof args, "init -c %s/tiny.yaml --seed 5 -o %s", CLF_CONFIGS_DIR, a);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 0);
    snprintf(args, sizeof args, "init -c %s/tiny.yaml --seed 5 -o %s", CLF_CONFIGS_DIR, b);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 0);
    snprintf(args, sizeof args, "init -c %s/tiny.yaml --seed 6 -o %s", CLF_CONFIGS_DIR, c);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 0);
    ck_assert(file_equal(a, b));
    ck_assert(!file_equal(a, c));
    snprintf(args, sizeof args, "init -c %s/tiny.yaml --seed x -o %s", CLF_CONFIGS_DIR, c);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 2);
}
END_TEST

START_TEST(test_forward_matches_fixture)
{
    char err[4096], args[2048], out[256];
    const char *fx = CLF_FIXTURES_DIR "/pre_tutorial";
    snprintf(out, sizeof out, "%s/out.safetensors", tmpdir);
    snprintf(args, sizeof args,
             "forward -c %s/model.yaml -w %s/weights.safetensors -i %s/io.safetensors -o %s "
             "--backend cpu --threads 1",
             fx, fx, fx, out);
    ck_assert_msg(clf_test_run_cli(args, err, sizeof err) == 0, "%s", err);
    clf_safetensors *got = NULL, *want = NULL;
    CLF_ASSERT_OK(clf_safetensors_open(out, &got));
    CLF_ASSERT_OK(clf_safetensors_open(CLF_FIXTURES_DIR "/pre_tutorial/io.safetensors", &want));
    const char *names[2] = {"logits", "encoder_out"};
    for (int i = 0; i < 2; i++) {
        const clf_tensor *g = clf_safetensors_find(got, names[i]);
        const clf_tensor *w = clf_safetensors_find(want, names[i]);
        ck_assert_ptr_nonnull(g);
        ck_assert_ptr_nonnull(w);
        ck_assert_int_eq(g->ndim, 3);
        ck_assert_int_eq(clf_tensor_numel(g), clf_tensor_numel(w));
        CLF_ASSERT_CLOSE((const float *)g->data, (const float *)w->data,
                         (size_t)clf_tensor_numel(w), 1e-5);
    }
    clf_safetensors_close(got);
    clf_safetensors_close(want);
}
END_TEST

/* The pre_tutorial fixture: its config, weights and batch */
#define FX CLF_FIXTURES_DIR "/pre_tutorial"

/* `clformer forward` of FX's config with the weights w and the input in (paths) into
 * tmpdir/o, and the options extra; returns its exit status, its stderr in err. */
static int run_forward(const char *w, const char *in, const char *extra, char *err, size_t size)
{
    char args[2048];
    snprintf(args, sizeof args, "forward -c %s/model.yaml -w %s -i %s -o %s/o%s", FX, w, in, tmpdir,
             extra);
    return clf_test_run_cli(args, err, size);
}

START_TEST(test_forward_errors)
{
    char err[4096], args[2048], w[256], in[256];
    /* weights missing */
    snprintf(w, sizeof w, "%s/nope.safetensors", tmpdir);
    ck_assert_int_eq(run_forward(w, FX "/io.safetensors", "", err, sizeof err), 2);
    assert_one_line_error(err);
    ck_assert_ptr_nonnull(strstr(err, "nope.safetensors"));
    /* weights of another architecture: the message names a tensor */
    snprintf(w, sizeof w, "%s/tiny.safetensors", tmpdir);
    snprintf(args, sizeof args, "init -c %s/tiny.yaml -o %s", CLF_CONFIGS_DIR, w);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 0);
    ck_assert_int_eq(run_forward(w, FX "/io.safetensors", "", err, sizeof err), 2);
    assert_one_line_error(err);
    ck_assert_msg(strstr(err, "tensor '"), "%s", err);
    /* the weights given as the input: no 'src' */
    ck_assert_int_eq(
        run_forward(FX "/weights.safetensors", FX "/weights.safetensors", "", err, sizeof err), 2);
    ck_assert_msg(strstr(err, "'src'"), "%s", err);
    /* an unknown backend is a backend failure: exit 3 */
    ck_assert_int_eq(run_forward(FX "/weights.safetensors", FX "/io.safetensors",
                                 " --backend nosuch", err, sizeof err),
                     3);
    assert_one_line_error(err);
    /* ids outside the vocabulary */
    snprintf(in, sizeof in, "%s/badids.safetensors", tmpdir);
    int32_t src[3] = {2, 999, 3}, tgt[2] = {2, 5};
    clf_tensor t[2] = {{.name = "src",
                        .dtype = CLF_I32,
                        .ndim = 2,
                        .shape = {1, 3},
                        .data = src,
                        .nbytes = sizeof src},
                       {.name = "tgt",
                        .dtype = CLF_I32,
                        .ndim = 2,
                        .shape = {1, 2},
                        .data = tgt,
                        .nbytes = sizeof tgt}};
    CLF_ASSERT_OK(clf_safetensors_write(in, t, 2, NULL, 0));
    ck_assert_int_eq(run_forward(FX "/weights.safetensors", in, "", err, sizeof err), 2);
    ck_assert_msg(strstr(err, "999"), "%s", err);
    /* nothing was written for the failed runs */
    snprintf(args, sizeof args, "%s/o", tmpdir);
    ck_assert_int_ne(access(args, F_OK), 0);
}
END_TEST

/* clformer vocab: min_frequency applies, the file loads as a tokenizer, both-side mode
 * writes two files, a missing input is a named error (exit 2). */
START_TEST(test_vocab)
{
    char dir[256], path[320], out[320], out2[320], args[1200], err[2048];
    snprintf(dir, sizeof dir, "%s/vocab-%d", CLF_TEST_BIN_DIR, (int)getpid());
    snprintf(args, sizeof args, "mkdir -p '%s'", dir);
    ck_assert_int_eq(system(args), 0);
    snprintf(path, sizeof path, "%s/text.txt", dir);
    clf_test_write_text(path, "hello world\nhello there world\nbye\n");
    snprintf(out, sizeof out, "%s/v.json", dir);
    snprintf(args, sizeof args, "vocab -o '%s' '%s'", out, path);
    ck_assert_msg(clf_test_run_cli(args, err, sizeof err) == 0, "vocab failed: %s", err);
    clf_tokenizer *t;
    CLF_ASSERT_OK(clf_tokenizer_load(out, &t));
    ck_assert_int_eq(clf_tokenizer_size(t), 6); /* 4 specials + hello, world */
    ck_assert_int_ge(clf_tokenizer_id(t, "hello"), 4);
    ck_assert_int_ge(clf_tokenizer_id(t, "world"), 4);
    ck_assert_int_eq(clf_tokenizer_id(t, "bye"), -1);
    clf_tokenizer_free(t);
    /* --min-frequency 1 keeps every word */
    snprintf(args, sizeof args, "vocab --min-frequency 1 -o '%s' '%s'", out, path);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 0);
    CLF_ASSERT_OK(clf_tokenizer_load(out, &t));
    ck_assert_int_eq(clf_tokenizer_size(t), 8);
    clf_tokenizer_free(t);
    /* both sides of a TSV */
    snprintf(path, sizeof path, "%s/pairs.tsv", dir);
    clf_test_write_text(path, "a b\tx y\na c\tx z\n");
    snprintf(out2, sizeof out2, "%s/t.json", dir);
    snprintf(args, sizeof args, "vocab --src-out '%s' --tgt-out '%s' '%s'", out, out2, path);
    ck_assert_msg(clf_test_run_cli(args, err, sizeof err) == 0, "vocab failed: %s", err);
    CLF_ASSERT_OK(clf_tokenizer_load(out2, &t));
    ck_assert_int_ge(clf_tokenizer_id(t, "x"), 4);
    ck_assert_int_eq(clf_tokenizer_id(t, "a"), -1);
    clf_tokenizer_free(t);
    /* errors */
    snprintf(args, sizeof args, "vocab -o '%s' '%s/missing.txt'", out, dir);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "missing.txt"));
    snprintf(args, sizeof args, "vocab '%s'", path);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 2);
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(args), 0);
}
END_TEST

/* A tiny experiment: data at tmpdir/<data>, checkpoints in tmpdir/run, `steps` steps. */
static void write_train_yaml(const char *yaml, const char *data, int steps)
{
    FILE *f = fopen(yaml, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "model: {max_len: 16, d_model: 16, layers: 1, heads: 2, d_ff: 32}\n"
            "train:\n  data: {train: %s/%s}\n  batch_size: 8\n  steps: %d\n"
            "  checkpoint: {dir: %s/run, every: 100}\n",
            tmpdir, data, steps, tmpdir);
    fclose(f);
}

static int exists_in_tmpdir(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    return access(path, F_OK) == 0;
}

/* train's vocabularies: none is written from data without words; one built from other
 * data is refused (naming it and what differs); a resumed run reuses its own; one without
 * its provenance file is the user's, used as given. */
START_TEST(test_train_vocab_provenance)
{
    char yaml[128], path[256], args[512], err[4096];
    snprintf(yaml, sizeof yaml, "%s/exp.yaml", tmpdir);
    snprintf(path, sizeof path, "%s/blank.tsv", tmpdir);
    clf_test_write_text(path, "\t\n  \n\t\n");
    write_train_yaml(yaml, "blank.tsv", 2);
    snprintf(args, sizeof args, "train -c '%s' --backend cpu -q", yaml);
    ck_assert_int_ne(clf_test_run_cli(args, err, sizeof err), 0);
    assert_one_line_error(err);
    ck_assert_msg(strstr(err, "blank.tsv: no source words"), "%s", err);
    ck_assert(!exists_in_tmpdir("run/src.json") && !exists_in_tmpdir("run/tgt.json"));
    ck_assert(!exists_in_tmpdir("run/src.json.provenance"));

    /* good data: built, with provenance; --resume reuses them without a word */
    snprintf(path, sizeof path, "%s/a.tsv", tmpdir);
    clf_test_write_reversal_corpus(path, 40, 3);
    write_train_yaml(yaml, "a.tsv", 2);
    ck_assert_msg(clf_test_run_cli(args, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(strstr(err, "built vocabularies"), "%s", err);
    ck_assert(exists_in_tmpdir("run/src.json.provenance"));
    write_train_yaml(yaml, "a.tsv", 3);
    snprintf(args, sizeof args, "train -c '%s' --backend cpu -q --resume", yaml);
    ck_assert_msg(clf_test_run_cli(args, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(!strstr(err, "built vocabularies") && !strstr(err, "stale"), "%s", err);

    /* the checkpoints gone, the run again on other data: its vocabularies are refused */
    snprintf(args, sizeof args, "rm -f '%s'/run/*.safetensors", tmpdir);
    ck_assert_int_eq(system(args), 0);
    snprintf(path, sizeof path, "%s/b.tsv", tmpdir);
    clf_test_write_reversal_corpus(path, 40, 5);
    write_train_yaml(yaml, "b.tsv", 2);
    snprintf(args, sizeof args, "train -c '%s' --backend cpu -q", yaml);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 2);
    assert_one_line_error(err);
    ck_assert_msg(strstr(err, "run/src.json: a stale vocabulary: built from ") &&
                      strstr(err, "/a.tsv (") && strstr(err, "this run's train.data ") &&
                      strstr(err, "/b.tsv is ") && strstr(err, "delete it"),
                  "%s", err);
    /* min_frequency is part of it too */
    write_train_yaml(yaml, "a.tsv", 2);
    FILE *f = fopen(yaml, "a");
    fprintf(f, "  vocab: {min_frequency: 1}\n");
    fclose(f);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 2);
    ck_assert_msg(strstr(err, "built with train.vocab.min_frequency 2, this run's is 1"), "%s",
                  err);

    /* without its provenance file a vocabulary is the user's: used as given */
    write_train_yaml(yaml, "b.tsv", 2);
    snprintf(args, sizeof args, "rm '%s/run/src.json.provenance' '%s/run/tgt.json.provenance'",
             tmpdir, tmpdir);
    ck_assert_int_eq(system(args), 0);
    snprintf(args, sizeof args, "train -c '%s' --backend cpu -q", yaml);
    ck_assert_msg(clf_test_run_cli(args, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(!strstr(err, "built vocabularies"), "%s", err);

    /* a provenance file that is a symbolic link to nothing is not a missing one */
    snprintf(args, sizeof args,
             "rm -f '%s'/run/*.safetensors && ln -s nowhere '%s/run/src.json.provenance'", tmpdir,
             tmpdir);
    ck_assert_int_eq(system(args), 0);
    snprintf(args, sizeof args, "train -c '%s' --backend cpu -q", yaml);
    ck_assert_int_eq(clf_test_run_cli(args, err, sizeof err), 2);
    assert_one_line_error(err);
    ck_assert_msg(strstr(err, "run/src.json.provenance: a symbolic link that leads nowhere"), "%s",
                  err);
}
END_TEST

/* bench --train --profile: the per-op table times every op the step runs, a plugin op by
 * its name (the fixture's activation, gelu, is one), on stderr and in the JSON report. */
START_TEST(test_bench_profile_names_ops)
{
    char args[1024], err[8192], json[256];
    snprintf(json, sizeof json, "%s/bench.json", tmpdir);
    snprintf(args, sizeof args,
             "bench -c %s/pre_gelu/model.yaml --backend cpu --threads 1 --train --profile "
             "--batch 2 --src-len 5 --tgt-len 4 --iters 1 --warmup 0 --json '%s' >/dev/null",
             CLF_FIXTURES_DIR, json);
    ck_assert_msg(clf_test_run_cli(args, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(strstr(err, "per-op time over 1 profiled steps of "), "%s", err);
    ck_assert_msg(strstr(err, "(outside the ops: host work)"), "%s", err);
    char *report = clf_test_read_file(json, NULL);
    ck_assert_ptr_nonnull(report);
    const char *want[] = {
        "\"op\": \"activation gelu\"",      "\"op\": \"activation_backward gelu\"",
        "\"op\": \"gemm x.W^T (forward)\"", "\"op\": \"adam\"",
        "\"op\": \"attention_backward\"",   "\"profile_host_ms_per_step\""};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(report, want[i]), "no %s in %s", want[i], report);
    ck_assert_msg(strstr(err, "    activation gelu "), "%s", err);
    free(report);
}
END_TEST

/* The memory bound of a config (CLF_CONFIG_MODEL_BYTES_MAX) holds for the sizes train fills
 * in from its vocabularies: a config exactly at the bound with its vocabularies left out
 * (positional 16 GiB - 4 MiB, layers 4 MiB) goes over once they are known, and is refused
 * before the model is made (a run that made it would fill a 16 GiB table; the timeout
 * stops one). */
START_TEST(test_train_model_bytes_after_vocab)
{
    char yaml[128], path[256], args[512], err[4096];
    snprintf(yaml, sizeof yaml, "%s/big.yaml", tmpdir);
    snprintf(path, sizeof path, "%s/a.tsv", tmpdir);
    clf_test_write_reversal_corpus(path, 20, 3);
    FILE *f = fopen(yaml, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "model: {max_len: 16773120, d_model: 256, layers: 1, heads: 2, d_ff: 256}\n"
            "train:\n  data: {train: %s}\n  steps: 1\n  checkpoint: {dir: %s/bigrun}\n",
            path, tmpdir);
    fclose(f);
    snprintf(args, sizeof args, "train -c '%s' --backend cpu -q", yaml);
    ck_assert_int_eq(clf_test_run_cli_within(60, args, err, sizeof err), 2);
    /* after the line that says the vocabularies were built (they are kept for the next run) */
    const char *line = strstr(err, "\nclformer: ");
    ck_assert_msg(strstr(err, "built vocabularies") == err + strlen("clformer: ") && line, "%s",
                  err);
    assert_one_line_error(line + 1);
    ck_assert_msg(strstr(err, "big.yaml: model: the weights and tables come to 16.0") &&
                      strstr(err, "max_len 16773120 x d_model") && strstr(err, "src_vocab ") &&
                      strstr(err, "more than the limit of 16 GiB (src_vocab and tgt_vocab as "
                                  "filled in from ") &&
                      strstr(err, "bigrun/src.json and "),
                  "%s", err);
    ck_assert(!exists_in_tmpdir("bigrun/last.safetensors"));
}
END_TEST

CLF_TEST_SUITE_MAIN(
    "cli", CLF_TCASE_FIXTURE("cli", 120, setup, teardown, {test_help_and_unknown_command},
                             {test_info_lists_cpu}, {test_config_dump_and_errors},
                             {test_init_reproducible}, {test_forward_matches_fixture},
                             {test_forward_errors}, {test_vocab}, {test_train_vocab_provenance},
                             {test_train_model_bytes_after_vocab}, {test_bench_profile_names_ops}))
