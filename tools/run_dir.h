/* A training run's directory (train.checkpoint.dir), by name: `clformer train` writes it,
 * `translate -m` reads it (clf_model_files_find, clformer/translator.h).
 *
 *   RUN_DIR_CONFIG       the resolved YAML of the run
 *   step-<N>.safetensors checkpoints, the newest `keep` kept
 *   RUN_DIR_LAST         a hard link to the newest checkpoint
 *   RUN_DIR_LOCK         held (flock) while a run writes the directory
 *   RUN_DIR_LOG          the curves, a row every log_every steps and at every validation
 *   src.json, tgt.json   the vocabularies train builds by default (train.vocab.src/tgt),
 *                        each with its provenance (run_vocab.h)
 * Every file is written under a temporary name, fsynced and renamed (clformer/fs.h), so a
 * kill or a power loss leaves the previous one whole. */
#ifndef CLF_RUN_DIR_H
#define CLF_RUN_DIR_H

#include <stdio.h>

#include "clformer/config.h"
#include "clformer/fs.h"
#include "clformer/status.h"
#include "clformer/train.h"
#include "clformer/translator.h"

#define RUN_DIR_CONFIG CLF_RUN_DIR_CONFIG
#define RUN_DIR_LAST   CLF_RUN_DIR_LAST
#define RUN_DIR_LOCK   "train.lock"
#define RUN_DIR_LOG    "log.csv"
/* src.json, tgt.json: the vocabularies train builds by default, named by config/ and read
 * by the translator (clformer/translator.h, CLF_RUN_DIR_*) */

/* The directory and its files' paths. */
typedef struct cli_run_dir {
    const char *dir;
    char config[CLF_PATH_MAX + 32], last[CLF_PATH_MAX + 32];
    char lock[CLF_PATH_MAX + 32], log[CLF_PATH_MAX + 32];
} cli_run_dir;

void run_dir_init(cli_run_dir *rd, const char *dir);
/* Creates the directory and its parents (mkdir -p). */
clf_status run_dir_create(const cli_run_dir *rd);
/* Takes RUN_DIR_LOCK (a second run on the directory is refused, naming the holder's
 * process), then removes what a killed run left half-written: files named
 * <anything>.tmp.<digits> (clformer/fs.h's temporary names). */
clf_status run_dir_lock(const cli_run_dir *rd, clf_fs_lock **lock);
/* RUN_DIR_CONFIG := yaml[0, len). */
clf_status run_dir_write_config(const cli_run_dir *rd, const char *yaml, size_t len);
/* step-<step>.safetensors from the trainer, RUN_DIR_LAST linked to it, and all but the
 * newest keep step-<N> files deleted. */
clf_status run_dir_save_checkpoint(const cli_run_dir *rd, clf_trainer *tr, long long step,
                                   const char *config_yaml, int keep);
/* RUN_DIR_LOG for writing: with append (a resumed run), its rows past last_step dropped (the
 * steps it will redo) and the file opened at its end; else a new file with the header. */
clf_status run_dir_open_log(const cli_run_dir *rd, int append, long long last_step, FILE **out);

#endif
