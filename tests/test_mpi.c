/* Data-parallel training over MPI (`mpirun -np N clformer train`, tools/dist_mpi.c):
 * equal to one process with accumulation (CPU and OpenCL), resume with 2 ranks and with 1,
 * start-up agreement, a rank that fails, a rank killed, a signal to one rank, and
 * `mpirun -np 2 clformer translate`.
 *
 * The exactness bound, 1e-5 relative (max abs error / max abs value, per log.csv loss and
 * per checkpoint tensor): two ranks with accumulate: 1 and one process with accumulate: 2
 * compute the same micro-batches with the same dropout masks; the step's gradient is the
 * same sum of float terms, but each rank sums its own micro-batch from zero and
 * the all-reduce adds the two at the end, where one process adds the second micro-batch's
 * terms onto the first's one by one. The reassociation changes a gradient element by a few
 * units of float rounding (2^-24) of the terms' magnitude; Adam's update
 * lr * m / (sqrt(v) + eps) is scale-free, so its relative change stays at that level (an
 * element whose gradient is itself within rounding of zero could flip its update's sign:
 * none does in these runs). Measured after 3 and 6 steps: 3.7e-7 on the CPU backend,
 * 1.1e-6 on PoCL, for the weights and moments, the losses identical to the printed digits;
 * 1e-5 leaves about 10x. A run with wrong shards or dropout seeds is off by far more (the
 * step's loss alone differs at the first step).
 * Losses are summed in double over ranks; with two ranks that sum is the one process's.
 *
 * Without MPI in the build (CLF_MPI=OFF) the suite checks that clformer refuses to run as
 * one of several processes, then says the mpirun tests are skipped and exits 77. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clformer/tensor.h"
#include "testutil.h"

#define TOL 1e-5

static unsigned lcg(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 16) & 0x7fff;
}

static void setup(void)
{
    clf_test_make_tmpdir("clf-mpi");
    clf_test_write_reversal_corpus(clf_test_tmp_path("train.tsv"), 120, 3);
    clf_test_write_reversal_corpus(clf_test_tmp_path("valid.tsv"), 8, 4);
}

static void teardown(void)
{
    clf_test_remove_tmpdir();
}

/* The end of a long output, for a message (Check's messages hold a few KiB). */
static const char *tail_of(const char *out)
{
    size_t n = strlen(out);
    return n > 2000 ? out + n - 2000 : out;
}

/* Runs `[timeout] mpirun --oversubscribe -np np <tail>` (np 0: `<tail>` alone), output and
 * errors into out (unless tail redirects them); returns the exit code (124: timed out). */
static int run_raw(int np, const char *tail, char *out, size_t size)
{
    char cmd[4096];
    const char *log = clf_test_tmp_path("run.log");
    if (np > 0)
        snprintf(cmd, sizeof cmd,
                 "(timeout 120 mpirun --oversubscribe --bind-to none -np %d %s) >'%s' 2>&1 "
                 "</dev/null",
                 np, tail, log);
    else
        snprintf(cmd, sizeof cmd, "(timeout 120 %s) >'%s' 2>&1 </dev/null", tail, log);
    int rc = system(cmd);
    char *text = clf_test_read_file(log, NULL);
    snprintf(out, size, "%s", text);
    free(text);
    return rc == -1 || !WIFEXITED(rc) ? -1 : WEXITSTATUS(rc);
}

/* The same for `clformer <args>` */
static int run(int np, const char *args, char *out, size_t size)
{
    char tail[2048];
    snprintf(tail, sizeof tail, "'%s' %s", CLF_CLI_PATH, args);
    return run_raw(np, tail, out, size);
}

#ifdef CLF_HAVE_MPI
/* <tmp>/<name>.yaml: a tiny model with every dropout site on (the masks follow the
 * micro-batch number, so a rank that counted wrong would differ), the data and
 * vocabularies of the test directory, checkpoints in <tmp>/<dir>. */
static const char *write_yaml(const char *name, const char *dir, int accumulate, int steps,
                              int every, const char *backend)
{
    char path[64], text[2048];
    snprintf(path, sizeof path, "%s.yaml", name);
    const char *t = clf_test_tmpdir();
    snprintf(text, sizeof text,
             "model: {src_vocab: 14, tgt_vocab: 14, max_len: 16, d_model: 32, layers: 1, "
             "heads: 2, d_ff: 64,\n"
             "        dropout: {residual: 0.1, embedding: 0.1, attention: 0.1, ffn: 0.1}}\n"
             "backend: {name: %s, threads: 1}\n"
             "train:\n"
             "  data: {train: %s/train.tsv, valid: %s/valid.tsv}\n"
             "  vocab: {src: %s/src.json, tgt: %s/tgt.json}\n"
             "  batch_size: 12\n"
             "  accumulate: %d\n"
             "  steps: %d\n"
             "  optimizer: {name: adamw, lr: 0.003, weight_decay: 0.01}\n"
             "  clip_norm: 1.0\n"
             "  log_every: 1\n"
             "  validate_every: 3\n"
             "  checkpoint: {dir: %s/%s, every: %d, keep: 100}\n",
             backend, t, t, t, t, accumulate, steps, t, dir, every);
    const char *p = clf_test_tmp_path(path);
    clf_test_write_text(p, text);
    return p;
}

#define RUN_OK(np, out, ...)                                                                       \
    do {                                                                                           \
        char a_[1024];                                                                             \
        snprintf(a_, sizeof a_, __VA_ARGS__);                                                      \
        int rc_ = run((np), a_, (out), sizeof(out));                                               \
        ck_assert_msg(rc_ == 0, "`%s` (%d ranks) exited %d:\n%s", a_, (np), rc_, tail_of(out));    \
    } while (0)

/* The loss column of <tmp>/<dir>/log.csv, one per step row; returns the rows. */
static int read_losses(const char *dir, double *loss, int max)
{
    char path[128];
    snprintf(path, sizeof path, "%s/log.csv", dir);
    FILE *f = fopen(clf_test_tmp_path(path), "r");
    ck_assert_msg(f != NULL, "no %s", path);
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f) && n < max) {
        long long step;
        int epoch;
        double l;
        if (sscanf(line, "%lld,%d,%lf,", &step, &epoch, &l) == 3)
            loss[n++] = l;
    }
    fclose(f);
    return n;
}

/* Every tensor of checkpoint a against b (relative error at most tol; 0: the same bits),
 * and the same step, micro-batch, epoch and batch. */
static void compare_checkpoints(const char *a, const char *b, double tol)
{
    clf_safetensors *fa, *fb;
    CLF_ASSERT_OK(clf_safetensors_open(clf_test_tmp_path(a), &fa));
    CLF_ASSERT_OK(clf_safetensors_open(clf_test_tmp_path(b), &fb));
    static const char *const keys[] = {"step", "micro", "epoch", "batch"};
    for (int k = 0; k < 4; k++)
        ck_assert_msg(
            strcmp(clf_safetensors_meta(fa, keys[k]), clf_safetensors_meta(fb, keys[k])) == 0,
            "%s: %s %s, %s: %s", a, keys[k], clf_safetensors_meta(fa, keys[k]), b,
            clf_safetensors_meta(fb, keys[k]));
    ck_assert_int_eq(clf_safetensors_count(fa), clf_safetensors_count(fb));
    double worst = 0;
    for (int i = 0; i < clf_safetensors_count(fa); i++) {
        const clf_tensor *x = clf_safetensors_at(fa, i);
        const clf_tensor *y = clf_safetensors_find(fb, x->name);
        ck_assert_msg(y != NULL, "%s lacks '%s'", b, x->name);
        ck_assert_uint_eq(x->nbytes, y->nbytes);
        if (tol == 0) {
            ck_assert_msg(memcmp(x->data, y->data, x->nbytes) == 0, "%s and %s differ in '%s'", a,
                          b, x->name);
            continue;
        }
        const size_t n = x->nbytes / sizeof(float);
        float *u = malloc(x->nbytes ? x->nbytes : 1), *v = malloc(x->nbytes ? x->nbytes : 1);
        ck_assert(u && v);
        CLF_ASSERT_OK(clf_tensor_to_f32(x, u));
        CLF_ASSERT_OK(clf_tensor_to_f32(y, v));
        double e = clf_test_rel_err(u, v, n);
        ck_assert_msg(e <= tol, "%s vs %s: '%s' relative error %.3g > %.3g", a, b, x->name, e, tol);
        worst = e > worst ? e : worst;
        free(u);
        free(v);
    }
    if (tol > 0)
        printf("mpi: %s vs %s: largest relative error %.3g (bound %.3g)\n", a, b, worst, tol);
    clf_safetensors_close(fa);
    clf_safetensors_close(fb);
}

static void compare_losses(const char *a, const char *b, int steps)
{
    double la[64], lb[64];
    ck_assert_int_eq(read_losses(a, la, 64), steps);
    ck_assert_int_eq(read_losses(b, lb, 64), steps);
    for (int i = 0; i < steps; i++)
        ck_assert_msg(fabs(la[i] - lb[i]) <= TOL * fabs(lb[i]),
                      "step %d: loss %.6f (%s) vs %.6f (%s)", i + 1, la[i], a, lb[i], b);
}

/* mpirun -np 2 with accumulate: 1 = one process with accumulate: 2, with the all-reduce
 * overlapping the backward pass (the default) and without (CLF_DIST_OVERLAP=0, the
 * all-reduce after it), both in buckets of 4 KiB (CLF_DIST_BUCKET_BYTES: the tiny model's
 * gradients are some 30 of them, most started mid-backward; the default 4 MiB would be one,
 * started at the end). The two ways sum the same buckets, each element once over the two
 * ranks (a + b rounds the same as b + a), so their runs agree bit for bit. with_off: also
 * the run without overlap (the CPU case; on OpenCL the train suite checks the overlapped
 * buckets against the plain gradients, and a third PoCL run would cost the sanitized suite
 * too much time). */
static void equivalence(const char *backend, int with_off)
{
    char out[16384];
    const char *one = write_yaml("one", "run-one", 2, 6, 3, backend);
    const char *two = write_yaml("two", "run-two", 1, 6, 3, backend);
    const char *off = with_off ? write_yaml("off", "run-off", 1, 6, 3, backend) : NULL;
    RUN_OK(0, out, "train -c '%s' -q", one);
    setenv("CLF_DIST_BUCKET_BYTES", "4096", 1);
    RUN_OK(2, out, "train -c '%s' -q", two);
    /* rank 0 alone prints: one "pairs" line, not two */
    const char *p = strstr(out, "pairs (");
    ck_assert_msg(p && !strstr(p + 1, "pairs ("), "expected rank 0 alone to print:\n%s", out);
    if (with_off) {
        setenv("CLF_DIST_OVERLAP", "0", 1);
        RUN_OK(2, out, "train -c '%s' -q", off);
        unsetenv("CLF_DIST_OVERLAP");
    }
    unsetenv("CLF_DIST_BUCKET_BYTES");
    compare_losses("run-one", "run-two", 6);
    compare_checkpoints("run-one/step-3.safetensors", "run-two/step-3.safetensors", TOL);
    compare_checkpoints("run-one/last.safetensors", "run-two/last.safetensors", TOL);
    if (!with_off)
        return;
    compare_losses("run-one", "run-off", 6);
    compare_checkpoints("run-one/last.safetensors", "run-off/last.safetensors", TOL);
    compare_checkpoints("run-off/step-3.safetensors", "run-two/step-3.safetensors", 0);
    compare_checkpoints("run-off/last.safetensors", "run-two/last.safetensors", 0);
}

/* A checkpoint of 2 ranks resumes with 2 ranks bit for bit, and with 1 process (and
 * accumulate: 2, the equivalent run) within the bound; against equivalence()'s run-two
 * (whose buckets were smaller: the sums are the same). */
static void resume(void)
{
    char out[16384];
    const char *half = write_yaml("half", "run-half", 1, 3, 3, "cpu");
    RUN_OK(2, out, "train -c '%s' -q", half);
    const char *rest = write_yaml("half", "run-half", 1, 6, 3, "cpu");
    RUN_OK(2, out, "train -c '%s' -q --resume", rest);
    compare_checkpoints("run-two/last.safetensors", "run-half/last.safetensors", 0);

    /* stopped by 2 ranks at step 3 (run-half's step 3), continued by one process with
     * accumulate: 2 */
    ck_assert_int_eq(mkdir(clf_test_tmp_path("run-other"), 0777), 0);
    char from[512];
    snprintf(from, sizeof from, "%s", clf_test_tmp_path("run-half/step-3.safetensors"));
    ck_assert_int_eq(link(from, clf_test_tmp_path("run-other/last.safetensors")), 0);
    const char *other = write_yaml("other", "run-other", 2, 6, 3, "cpu");
    RUN_OK(0, out, "train -c '%s' -q --resume", other);
    compare_checkpoints("run-two/last.safetensors", "run-other/last.safetensors", TOL);
}

START_TEST(test_equivalence_and_resume_cpu)
{
    equivalence("cpu", 1);
    resume();
}
END_TEST

START_TEST(test_equivalence_opencl)
{
    equivalence("opencl", 0);
}
END_TEST

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Runs tail on 2 ranks (as run_raw): the job must fail with rank 1's line that it does not
 * start from what rank 0 does, "its <what>". */
static void assert_rank1_differs(const char *tail, const char *what)
{
    char out[16384], want[256];
    ck_assert_int_ne(run_raw(2, tail, out, sizeof out), 0);
    snprintf(want, sizeof want, "clformer: rank 1 does not start from what rank 0 does: its %s",
             what);
    ck_assert_msg(strstr(out, want), "%s", tail_of(out));
}

/* Ranks that start from different configs or weights refuse, naming the rank. */
START_TEST(test_agreement)
{
    char out[16384], tail[2048], ck[64];
    const char *t = clf_test_tmpdir();
    /* a config that differs: rank 1 reads cfg1.yaml, which has another train.steps */
    write_yaml("cfg0", "run-cfg", 1, 2, 2, "cpu");
    write_yaml("cfg1", "run-cfg", 1, 3, 2, "cpu");
    snprintf(tail, sizeof tail,
             "sh -c 'exec \"$0\" train -q -c %s/cfg$OMPI_COMM_WORLD_RANK.yaml' '%s'", t,
             CLF_CLI_PATH);
    assert_rank1_differs(tail, "resolved config differs");
    snprintf(ck, sizeof ck, "run-cfg/last.safetensors");
    ck_assert_int_ne(access(clf_test_tmp_path(ck), F_OK), 0);

    /* all-reduce settings that differ (their collectives would not match), and one that
     * makes no sense (this also shows that mpirun hands the ranks the environment, which
     * the equivalence test relies on) */
    char alt[2048];
    snprintf(alt, sizeof alt,
             "sh -c 'CLF_DIST_BUCKET_BYTES=$((4096 + 4 * OMPI_COMM_WORLD_RANK)) exec \"$0\" "
             "train -q -c %s/cfg0.yaml' '%s'",
             t, CLF_CLI_PATH);
    assert_rank1_differs(alt, "all-reduce settings (CLF_DIST_OVERLAP, CLF_DIST_BUCKET_BYTES) "
                              "differ");
    setenv("CLF_DIST_OVERLAP", "yes", 1);
    snprintf(alt, sizeof alt, "train -q -c %s/cfg0.yaml", t);
    ck_assert_int_ne(run(2, alt, out, sizeof out), 0);
    unsetenv("CLF_DIST_OVERLAP");
    ck_assert_msg(strstr(out, "clformer: CLF_DIST_OVERLAP is 'yes': it takes 0 (no overlap) or 1"),
                  "%s", tail_of(out));

    /* a rank that fails alone (its data file is missing) names itself and aborts the job */
    char *text0 = clf_test_read_file(clf_test_tmp_path("cfg0.yaml"), NULL);
    char *train_tsv = strstr(text0, "/train.tsv");
    ck_assert_ptr_nonnull(train_tsv);
    memcpy(train_tsv, "/nothere.x", 10);
    clf_test_write_text(clf_test_tmp_path("cfg1.yaml"), text0);
    free(text0);
    const double t0 = now_s();
    ck_assert_int_ne(run_raw(2, tail, out, sizeof out), 0);
    ck_assert_msg(strstr(out, "clformer: rank 1: ") && strstr(out, "/nothere.x"), "%s",
                  tail_of(out));
    ck_assert_msg(now_s() - t0 < 20, "the job took %.1f s to stop", now_s() - t0);

    /* the same config, other weights: train.init is a relative path and each rank runs in
     * a directory of its own, holding weights of another seed */
    char text[2048], *yaml = clf_test_read_file(write_yaml("w", "run-w", 1, 2, 2, "cpu"), NULL);
    snprintf(text, sizeof text, "%s  init: w.safetensors\n", yaml);
    free(yaml);
    clf_test_write_text(clf_test_tmp_path("w.yaml"), text);
    for (int r = 0; r < 2; r++) {
        char dir[32];
        snprintf(dir, sizeof dir, "r%d", r);
        ck_assert_int_eq(mkdir(clf_test_tmp_path(dir), 0777), 0);
        RUN_OK(0, out, "init -c '%s/w.yaml' --seed %d -o '%s/r%d/w.safetensors'", t, 7 + r, t, r);
    }
    snprintf(tail, sizeof tail,
             "sh -c 'cd %s/r$OMPI_COMM_WORLD_RANK && exec \"$0\" train -q -c ../w.yaml' '%s'", t,
             CLF_CLI_PATH);
    assert_rank1_differs(tail, "initial weights and optimizer state differ");
}
END_TEST

/* Starts `mpirun -np 2 clformer train -q -c yaml` in the background (each rank writes its
 * pid to <tmp>/pid.<rank>), waits for <tmp>/<file> and returns mpirun's process (a child
 * running run_raw). */
static pid_t start_and_wait(const char *yaml, const char *file)
{
    char tail[2048];
    snprintf(tail, sizeof tail,
             "sh -c 'echo $$ >%s/pid.$OMPI_COMM_WORLD_RANK; exec \"$0\" train -q -c %s' '%s'",
             clf_test_tmpdir(), yaml, CLF_CLI_PATH);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        char o[256];
        _exit(run_raw(2, tail, o, sizeof o));
    }
    int found = 0;
    for (int i = 0; i < 6000 && !found; i++) {
        found = access(clf_test_tmp_path(file), F_OK) == 0 &&
                access(clf_test_tmp_path("pid.1"), F_OK) == 0;
        if (!found)
            usleep(10000);
    }
    ck_assert_msg(found, "the run never wrote %s", file);
    return child;
}

static pid_t rank_pid(int rank)
{
    char name[32];
    snprintf(name, sizeof name, "pid.%d", rank);
    char *text = clf_test_read_file(clf_test_tmp_path(name), NULL);
    pid_t pid = (pid_t)atoi(text);
    free(text);
    ck_assert_int_gt(pid, 0);
    return pid;
}

/* Waits (30 s at most) for the child; returns its wait status, *took the seconds since t0. */
static int wait_child(pid_t child, double t0, double *took)
{
    int status = 0;
    pid_t w = 0;
    while ((w = waitpid(child, &status, WNOHANG)) == 0 && now_s() - t0 < 30)
        usleep(20000);
    *took = now_s() - t0;
    ck_assert_msg(w == child, "mpirun still runs 30 s later");
    return status;
}

static int checkpoint_step(const char *name)
{
    clf_safetensors *f;
    CLF_ASSERT_OK(clf_safetensors_open(clf_test_tmp_path(name), &f));
    const int step = atoi(clf_safetensors_meta(f, "step"));
    clf_safetensors_close(f);
    return step;
}

/* kill -9 of rank 1 mid-run: mpirun stops rank 0 within seconds and names rank 1 (Open
 * MPI's own handling: its daemon sees the death and terminates the job), and the last
 * checkpoint is whole: two ranks resume from it. */
START_TEST(test_rank_killed)
{
    char out[16384];
    const char *yaml = write_yaml("kill", "run-kill", 1, 100000, 2, "cpu");
    pid_t child = start_and_wait(yaml, "run-kill/step-4.safetensors");
    const double t0 = now_s();
    ck_assert_int_eq(kill(rank_pid(1), SIGKILL), 0);
    double took;
    int status = wait_child(child, t0, &took);
    ck_assert_msg(took < 10, "mpirun took %.1f s to stop after rank 1 was killed", took);
    printf("mpi: rank 1 killed: mpirun stopped %.2f s later\n", took);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    char *log = clf_test_read_file(clf_test_tmp_path("run.log"), NULL);
    ck_assert_msg(strstr(log, "process rank 1") && strstr(log, "signal 9"),
                  "mpirun's output does not name rank 1 and signal 9:\n%s", tail_of(log));
    free(log);
    /* the newest checkpoint is whole: resume it two steps further with two ranks */
    const int step = checkpoint_step("run-kill/last.safetensors");
    ck_assert_int_ge(step, 4);
    yaml = write_yaml("kill", "run-kill", 1, step + 2, 2, "cpu");
    RUN_OK(2, out, "train -q -c '%s' --resume", yaml);
    ck_assert_int_eq(checkpoint_step("run-kill/last.safetensors"), step + 2);
}
END_TEST

/* SIGINT to one rank: the ranks agree at the next step, rank 0 writes the checkpoint of
 * that step, all exit 130 (as one process does). */
START_TEST(test_signal_stops_together)
{
    const char *yaml = write_yaml("int", "run-int", 1, 100000, 1000, "cpu");
    pid_t child = start_and_wait(yaml, "run-int/log.csv");
    /* a logged step: both ranks are in the loop, their handlers installed */
    double l[2];
    for (int i = 0; i < 3000 && read_losses("run-int", l, 2) < 2; i++)
        usleep(10000);
    ck_assert_int_eq(kill(rank_pid(1), SIGINT), 0);
    double took;
    int status = wait_child(child, now_s(), &took);
    char *log = clf_test_read_file(clf_test_tmp_path("run.log"), NULL);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 130, "exit %d:\n%s",
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1, tail_of(log));
    int stopped = -1;
    const char *p = strstr(log, "clformer: stopped at step ");
    ck_assert_msg(p && sscanf(p, "clformer: stopped at step %d", &stopped) == 1, "%s",
                  tail_of(log));
    free(log);
    ck_assert_int_eq(checkpoint_step("run-int/last.safetensors"), stopped);
}
END_TEST

/* mpirun -np 2 translate: the same bytes as one process (rank r translates the r-th batch
 * of each round, so the batches are one process's), and a bad line on rank 1 is refused
 * by its number. */
START_TEST(test_translate)
{
    char out[16384];
    const char *t = clf_test_tmpdir();
    const char *yaml = write_yaml("tr", "run-tr", 1, 2, 2, "cpu");
    RUN_OK(0, out, "train -q -c '%s'", yaml);
    /* 17 lines (one empty) in rounds of 3 x 2: the last round leaves rank 1 without lines */
    FILE *f = fopen(clf_test_tmp_path("in.txt"), "w");
    ck_assert_ptr_nonnull(f);
    unsigned seed = 5;
    static const char *words[4] = {"alpha", "golf", "india", "juliet"};
    for (int i = 0; i < 17; i++) {
        for (int j = 0, n = i == 7 ? 0 : 1 + (int)(lcg(&seed) % 4); j < n; j++)
            fprintf(f, "%s%s", j ? " " : "", words[lcg(&seed) % 4]);
        fputc('\n', f);
    }
    fclose(f);
    char args[2048];
    snprintf(args, sizeof args,
             "translate -c %s/run-tr/config.yaml -w %s/run-tr/last.safetensors --src-vocab "
             "%s/src.json --tgt-vocab %s/tgt.json --batch 3 --max-len 6",
             t, t, t, t);
    RUN_OK(0, out, "%s <%s/in.txt >%s/out1.txt", args, t, t);
    RUN_OK(2, out, "%s <%s/in.txt >%s/out2.txt", args, t, t);
    size_t n1, n2;
    char *o1 = clf_test_read_file(clf_test_tmp_path("out1.txt"), &n1);
    char *o2 = clf_test_read_file(clf_test_tmp_path("out2.txt"), &n2);
    int lines = 0;
    for (size_t i = 0; i < n1; i++)
        lines += o1[i] == '\n';
    ck_assert_int_eq(lines, 17);
    ck_assert_msg(n1 == n2 && memcmp(o1, o2, n1) == 0, "one process:\n%s\ntwo ranks:\n%s", o1, o2);
    free(o1);
    free(o2);
    /* line 5 (rank 1's second line of the first round) is not UTF-8: refused by the input
     * policy (README, Translate input), the rest translated, and the job's exit status
     * non-zero: every rank knows the summed count and fails with it, rank 0 saying it once
     * for the job (no rank aborts while another finalizes; rank 1's own warning can still
     * be lost at exit: mpirun forwards output asynchronously) */
    clf_test_write_text(clf_test_tmp_path("bad.txt"), "alpha\ngolf\nindia\njuliet\n\xff\n");
    char cmd[2600];
    snprintf(cmd, sizeof cmd, "%s <%s/bad.txt", args, t);
    ck_assert_int_ne(run(2, cmd, out, sizeof out), 0);
    ck_assert_msg(strstr(out, "clformer: translate: 1 of 5 input lines refused"), "%s",
                  tail_of(out));
}
END_TEST

static Suite *mpi_suite(int opencl)
{
    Suite *s = suite_create("mpi");
    TCase *tc = tcase_create("mpi");
    tcase_set_timeout(tc, 300);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_equivalence_and_resume_cpu);
    tcase_add_test(tc, test_agreement);
    tcase_add_test(tc, test_rank_killed);
    tcase_add_test(tc, test_signal_stops_together);
    tcase_add_test(tc, test_translate);
    if (opencl)
        tcase_add_test(tc, test_equivalence_opencl);
    suite_add_tcase(s, tc);
    return s;
}

#else
/* Built without MPI: as one of several processes, train refuses to start. */
START_TEST(test_refused_without_mpi)
{
    char out[4096];
    /* the launcher's variable, as mpirun -np 2 sets it */
    int rc = run(0, "train -c /nonexistent.yaml", out, sizeof out);
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(out, "/nonexistent.yaml"), "%s", tail_of(out));
    char args[256];
    snprintf(args, sizeof args, "train -c /nonexistent.yaml");
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    rc = run(0, args, out, sizeof out);
    unsetenv("OMPI_COMM_WORLD_SIZE");
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(out, "clformer: started as one of 2 processes (mpirun), but this "
                              "clformer was built without MPI"),
                  "%s", tail_of(out));
}
END_TEST

static int no_mpi_main(void)
{
    Suite *s = suite_create("mpi");
    TCase *tc = tcase_create("no-mpi");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_refused_without_mpi);
    suite_add_tcase(s, tc);
    if (clf_test_main(s) != 0)
        return 1;
    printf("mpi: skipped: clformer was built without MPI (CLF_MPI=OFF), so the mpirun tests "
           "cannot run (only the refusal to run as one of several processes was checked)\n");
    return 77;
}

#endif

int main(void)
{
#ifndef CLF_HAVE_MPI
    return no_mpi_main();
#else
    int opencl = clf_test_opencl_opens("mpi");
    return clf_test_main(mpi_suite(opencl));
#endif
}
