/* Helpers shared by the crash-safety and fault-injection suites (tests/test_crash.c,
 * tests/test_fault.c): a tiny training experiment on disk, the clformer CLI started with
 * CLF_FAULT and a file size limit, and an independent check of a checkpoint's hash. */
#ifndef CLF_CRASH_UTIL_H
#define CLF_CRASH_UTIL_H

#include <stddef.h>
#include <sys/types.h>

#include "testutil.h"

/* Writes <dir>/train.tsv (200 reversal pairs over 10 words) and <dir>/exp.yaml: a model of
 * d_model 16 (checkpoints of 88 KB), batches of 8, `steps` steps, a checkpoint every
 * `every` steps into <dir>/run (keep 2), vocabularies built into <dir>/run. */
void cu_write_experiment(const char *dir, long long steps, int every);
/* Rewrites <dir>/exp.yaml with another train.steps. */
void cu_set_steps(const char *dir, long long steps);

/* Starts the CLI with the arguments argv (NULL-terminated, without the program), in the
 * environment of this process plus CLF_FAULT=fault (unset when fault is NULL), with a file
 * size limit of fsize bytes (none when 0) and SIGXFSZ at its default, stderr written to
 * errpath, stdin and stdout /dev/null. */
pid_t cu_spawn(const char *fault, long fsize, const char *errpath, const char *const *argv);
/* Waits for pid: its exit code, or 128 + the signal that ended it. */
int cu_wait(pid_t pid);
/* cu_spawn + cu_wait, stderr read into err (errsize). */
int cu_run(const char *fault, long fsize, char *err, size_t errsize, const char *const *argv);

/* Fills argv (room for CU_ARGV entries) with `train -c <dir>/exp.yaml --backend B`, the
 * OpenCL backend with --device $CLF_TEST_DEVICE when that is set (the device choice of the
 * OpenCL suites), and --resume when resume is set. */
#define CU_ARGV 12
void cu_train_argv(const char *dir, const char *backend, int resume, const char **argv);

/* The experiment's first run: cu_write_experiment(dir, steps, every) trained on backend,
 * which must succeed (err: its stderr); then exp.yaml set to `then` steps and argv filled
 * to resume it (cu_train_argv). */
void cu_first_run(const char *dir, const char *backend, long long steps, int every, long long then,
                  char *err, size_t errsize, const char **argv);

/* <dir>/<name> in a buffer of its own per call (the last 16 stay valid: a path kept longer
 * must be copied). */
const char *cu_path(const char *dir, const char *name);

/* Asserts that err ends in one line "clformer: ..." holding each of the NULL-terminated
 * words, and that no sanitizer reported anything. */
void cu_assert_error_line(const char *err, ...);

/* Opens the checkpoint at path, hashes its data section (every tensor's bytes in file
 * order, FNV-1a 64) independently of the trainer, fails unless that is its metadata
 * data_fnv1a64, and returns its step. */
long long cu_check_checkpoint(const char *path);
/* The step of <dir>/run/last.safetensors after checking it (cu_check_checkpoint), also
 * checking every step-<N>.safetensors there; -1 when there is no last.safetensors. */
long long cu_check_run(const char *dir);
/* How many files named *.tmp.* the directory holds. */
int cu_count_temporaries(const char *dir);

#endif
