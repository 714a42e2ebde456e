/* Crash safety of `clformer train` (README: Limits and failure behaviour): SIGKILL at random
 * moments, some inside a checkpoint write, never costs a committed checkpoint, the newest
 * one always loads with the hash of its metadata, and --resume continues from it; a full
 * disk (a file size limit, or CLF_FAULT=write) is a one-line error that keeps the previous
 * checkpoint and leaves no temporary file; a second run on the directory is refused while
 * one holds its lock, and a dead holder's lock is taken over; a damaged checkpoint is
 * refused by its hash, and so is one whose metadata changed. Each test works in a fresh temporary
 * directory, on the CPU backend. */
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clformer/rng.h"
#include "crash_util.h"

/* The kill test: kills, and the pause CLF_FAULT=write_slow puts inside each checkpoint
 * write (between its temporary file and the rename) for the kills aimed at that window. */
#define KILLS       10
#define WRITE_PAUSE "write_slow:250"
/* A kill lands this long at most after the temporary file appears: 150 ms before the pause
 * ends, room for a busy machine's scheduling delays. */
#define WINDOW_MS    100
#define MAX_DELAY_MS 800

static char err[16384];

static void setup(void)
{
    clf_test_make_tmpdir("clf-crash");
}

static void teardown(void)
{
    clf_test_remove_tmpdir();
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Fails (with what the process said) unless pid still runs. */
static void assert_running(pid_t pid, const char *errpath)
{
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) {
        char *text = clf_test_read_file(errpath, NULL);
        ck_abort_msg("clformer train ended early (status %d): %s", status, text);
    }
}

/* Whether <run>/step-*.safetensors.tmp.<pid> exists: pid is writing a checkpoint. */
static int writing_checkpoint(const char *run, pid_t pid)
{
    char suffix[32];
    snprintf(suffix, sizeof suffix, ".safetensors.tmp.%d", (int)pid);
    DIR *d = opendir(run);
    int found = 0;
    struct dirent *e;
    while (d && !found && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name), k = strlen(suffix);
        found =
            strncmp(e->d_name, "step-", 5) == 0 && n > k && strcmp(e->d_name + n - k, suffix) == 0;
    }
    if (d)
        closedir(d);
    return found;
}

/* Ten SIGKILLs, at random moments (even rounds: 20 to MAX_DELAY_MS ms after the start,
 * startup included) and inside a checkpoint write (odd rounds: once the temporary file is
 * there, within the write's pause). After each: every checkpoint on disk loads and hashes
 * to its metadata, the newest committed step never goes back, and the next round resumes
 * from it. Then a last --resume finishes three steps further. */
START_TEST(test_kill_at_random_moments)
{
    const char *dir = clf_test_tmpdir();
    char run[512], errpath[512]; /* kept: cu_path's buffers are reused */
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(errpath, sizeof errpath, "%s/err.txt", dir);
    const char *seed_env = getenv("CLF_TEST_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10)
                             : (uint64_t)time(NULL) * 1000003u ^ (uint64_t)getpid();
    printf("crash: kill test seed %llu (CLF_TEST_SEED=%llu repeats the moments)\n",
           (unsigned long long)seed, (unsigned long long)seed);
    clf_rng rng;
    clf_rng_seed(&rng, seed);
    cu_write_experiment(dir, 1000000, 1);
    long long committed = -1;
    for (int k = 0; k < KILLS; k++) {
        const int in_write = k % 2 == 1;
        const char *argv[CU_ARGV];
        cu_train_argv(dir, "cpu", committed >= 0, argv);
        pid_t pid = cu_spawn(in_write ? WRITE_PAUSE : NULL, 0, errpath, argv);
        long delay;
        if (in_write) {
            for (int waited = 0; !writing_checkpoint(run, pid); waited++) {
                ck_assert_msg(waited < 60000, "no checkpoint write within 60 s");
                assert_running(pid, errpath);
                sleep_ms(1);
            }
            delay = (long)(clf_rng_next(&rng) % (WINDOW_MS + 1));
        } else {
            delay = 20 + (long)(clf_rng_next(&rng) % (MAX_DELAY_MS - 19));
        }
        sleep_ms(delay);
        assert_running(pid, errpath);
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        ck_assert_int_eq(cu_wait(pid), 128 + SIGKILL);
        /* the kill hit the write: its temporary file is still there, never renamed */
        if (in_write)
            ck_assert_msg(writing_checkpoint(run, pid), "kill %d missed the checkpoint write", k);
        char *said = clf_test_read_file(errpath, NULL);
        if (in_write && committed >= 0) { /* it trained, so it had resumed: from where? */
            char want[64];
            snprintf(want, sizeof want, "from step %lld\n", committed);
            ck_assert_msg(strstr(said, want), "kill %d: the run did not resume from step %lld: %s",
                          k, committed, said);
        }
        free(said);
        long long now = cu_check_run(dir);
        ck_assert_msg(now >= committed,
                      "kill %d: the newest checkpoint went from step %lld to %lld", k, committed,
                      now);
        printf("crash: kill %d %s, %ld ms: newest checkpoint step %lld, hash ok\n", k,
               in_write ? "inside a checkpoint write" : "after the start", delay, now);
        committed = now;
    }
    ck_assert_msg(committed > 0, "ten runs and no checkpoint");
    cu_set_steps(dir, committed + 3);
    const char *argv[CU_ARGV];
    cu_train_argv(dir, "cpu", 1, argv);
    ck_assert_msg(cu_run(NULL, 0, err, sizeof err, argv) == 0, "resume failed: %s", err);
    char want[64];
    snprintf(want, sizeof want, "from step %lld\n", committed);
    ck_assert_msg(strstr(err, want), "did not resume from step %lld: %s", committed, err);
    ck_assert_int_eq(cu_check_run(dir), committed + 3);
    /* what the killed writers left was removed by the next run, under the lock */
    ck_assert_int_eq(cu_count_temporaries(run), 0);
    ck_assert_int_ne(access(cu_path(run, "train.lock"), F_OK), 0); /* released at exit */
}
END_TEST

/* A checkpoint that does not fit: under a file size limit (EFBIG; clformer ignores
 * SIGXFSZ) and with CLF_FAULT=write (ENOSPC, as a full disk). */
START_TEST(test_disk_full)
{
    const char *dir = clf_test_tmpdir();
    const char *argv[CU_ARGV];
    char run[512];
    snprintf(run, sizeof run, "%s/run", dir);
    cu_first_run(dir, "cpu", 4, 2, 8, err, sizeof err, argv);
    ck_assert_int_eq(cu_check_run(dir), 4);

    /* 16 KiB: config.yaml and log.csv fit, a checkpoint (88 KB) does not */
    ck_assert_int_eq(cu_run(NULL, 16384, err, sizeof err, argv), 2);
    cu_assert_error_line(err, "step-6.safetensors", "File too large", NULL);
    ck_assert_int_eq(cu_check_run(dir), 4);
    ck_assert_int_eq(cu_count_temporaries(run), 0);

    /* writes of the resumed run: config.yaml, log.csv (trimmed), step-6 */
    ck_assert_int_eq(cu_run("write:3", 0, err, sizeof err, argv), 2);
    cu_assert_error_line(err, "step-6.safetensors", "No space left on device", NULL);
    ck_assert_int_eq(cu_check_run(dir), 4);
    ck_assert_int_eq(cu_count_temporaries(run), 0);
    /* the run's first write, config.yaml */
    ck_assert_int_eq(cu_run("write:1", 0, err, sizeof err, argv), 2);
    cu_assert_error_line(err, "config.yaml", "No space left on device", NULL);
    ck_assert_int_eq(cu_check_run(dir), 4);

    ck_assert_msg(cu_run(NULL, 0, err, sizeof err, argv) == 0, "resume failed: %s", err);
    ck_assert_int_eq(cu_check_run(dir), 8);
    ck_assert_int_eq(cu_count_temporaries(run), 0);
}
END_TEST

/* One run per directory: a second is refused naming the directory and the holder's
 * process; once the holder is killed, its lock (flock, dropped by the kernel at death) is
 * taken over. */
START_TEST(test_second_run_refused)
{
    const char *dir = clf_test_tmpdir();
    const char *argv[CU_ARGV];
    char run[512], errpath[512];
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(errpath, sizeof errpath, "%s/err.txt", dir);
    cu_write_experiment(dir, 1000000, 1);
    cu_train_argv(dir, "cpu", 0, argv);
    pid_t holder = cu_spawn(WRITE_PAUSE, 0, errpath, argv);
    char holder_says[64];
    snprintf(holder_says, sizeof holder_says, "process %d ", (int)holder);
    for (int waited = 0;; waited++) {
        ck_assert_msg(waited < 60000, "no lock file within 60 s");
        assert_running(holder, errpath);
        FILE *f = fopen(cu_path(run, "train.lock"), "r");
        char text[256] = "";
        if (f) {
            size_t n = fread(text, 1, sizeof text - 1, f);
            text[n] = '\0';
            fclose(f);
        }
        if (strstr(text, holder_says))
            break;
        sleep_ms(1);
    }
    ck_assert_int_eq(cu_run(NULL, 0, err, sizeof err, argv), 2);
    cu_assert_error_line(err, run, "in use", holder_says, NULL);
    assert_running(holder, errpath);

    ck_assert_int_eq(kill(holder, SIGKILL), 0);
    ck_assert_int_eq(cu_wait(holder), 128 + SIGKILL);
    ck_assert_int_eq(access(cu_path(run, "train.lock"), F_OK), 0); /* stale, left behind */
    long long step = cu_check_run(dir);
    cu_set_steps(dir, (step > 0 ? step : 0) + 2);
    cu_train_argv(dir, "cpu", step >= 0, argv);
    ck_assert_msg(cu_run(NULL, 0, err, sizeof err, argv) == 0, "run after the kill failed: %s",
                  err);
    ck_assert_int_eq(cu_check_run(dir), (step > 0 ? step : 0) + 2);
    ck_assert_int_ne(access(cu_path(run, "train.lock"), F_OK), 0);
}
END_TEST

/* A 2-step run whose last checkpoint damage(path) then changes: --resume to step 4 refuses
 * it as damaged, naming the hash (hash) that no longer matches. */
static void assert_damage_refused(void (*damage)(const char *path), const char *hash)
{
    const char *dir = clf_test_tmpdir();
    const char *argv[CU_ARGV];
    cu_first_run(dir, "cpu", 2, 2, 4, err, sizeof err, argv);
    damage(cu_path(dir, "run/last.safetensors"));
    ck_assert_int_eq(cu_run(NULL, 0, err, sizeof err, argv), 2);
    cu_assert_error_line(err, "last.safetensors", "damaged checkpoint", hash, NULL);
}

/* Flips one bit of a byte of the last tensor's data. */
static void flip_data_byte(const char *path)
{
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, -5, SEEK_END), 0); /* a byte of the last tensor */
    int c = fgetc(f);
    ck_assert_int_eq(fseek(f, -5, SEEK_END), 0);
    fputc(c ^ 0x10, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* Changes the step in the metadata from 2 to 9, the data as it was. */
static void change_step(const char *path)
{
    size_t n;
    char *data = clf_test_read_file(path, &n);
    ck_assert_ptr_nonnull(data);
    static const char step[] = "\"step\":\"2\"";
    char *at = memmem(data, n, step, sizeof step - 1);
    ck_assert_ptr_nonnull(at);
    at[sizeof step - 3] = '9';
    clf_test_write_file(path, data, n);
    free(data);
}

/* One flipped byte in a checkpoint's data: --resume refuses it by its hash. */
START_TEST(test_damaged_checkpoint_refused)
{
    assert_damage_refused(flip_data_byte, "data_fnv1a64");
}
END_TEST

/* The step in a checkpoint's metadata changed (2 -> 9), its data as it was: --resume
 * refuses it by the metadata hash instead of resuming at step 9 (nothing left to do). */
START_TEST(test_changed_step_refused)
{
    assert_damage_refused(change_step, "checkpoint_fnv1a64");
}
END_TEST

CLF_TEST_SUITE_MAIN("crash",
                    CLF_TCASE_FIXTURE("crash", 300, setup, teardown, {test_kill_at_random_moments},
                                      {test_disk_full}, {test_second_run_refused},
                                      {test_damaged_checkpoint_refused},
                                      {test_changed_step_refused}))
