/* A model directory, by name: what `clformer import marian` writes and `translate -m` reads.
 *
 * An imported model's directory holds MODEL_DIR_CONFIG (the model: and generate: sections),
 * MODEL_DIR_WEIGHTS, and the tokenizer files: Marian's two SentencePiece models and the
 * vocab.json that maps their pieces to the weights' ids (or word-level src.json / tgt.json,
 * or SentencePiece src.model / tgt.model). `translate -m` also takes a training run's
 * directory (run_dir.h): its config.yaml, last.safetensors and the vocabularies its config
 * names. */
#ifndef CLF_MODEL_DIR_H
#define CLF_MODEL_DIR_H

#include <stddef.h>

#include "clformer/config.h"
#include "clformer/status.h"
#include "clformer/tensor.h"

#define MODEL_DIR_CONFIG  "model.yaml"
#define MODEL_DIR_WEIGHTS "weights.safetensors"
#define MODEL_DIR_SRC_SPM "source.spm"
#define MODEL_DIR_TGT_SPM "target.spm"
#define MODEL_DIR_VOCAB   "vocab.json" /* pieces -> ids for both .spm files */

/* The files of a model a command reads, named. */
typedef struct cli_model_dir {
    char config[CLF_PATH_MAX];
    char weights[CLF_PATH_MAX];
    char src_vocab[CLF_PATH_MAX], tgt_vocab[CLF_PATH_MAX];
    char vocab_map[CLF_PATH_MAX]; /* MODEL_DIR_VOCAB when the vocabularies are mapped, else "" */
    int is_run;                   /* a training run's directory */
} cli_model_dir;

/* The files of dir: an imported model's (MODEL_DIR_CONFIG there) or a training run's
 * (RUN_DIR_CONFIG, RUN_DIR_LAST, and the vocabularies its config names, looked for in dir
 * when those paths do not exist from here; src.json / tgt.json, else src.model / tgt.model,
 * when it names none). plugin_dir: for loading the run's config. Returns 0 when dir holds
 * neither config. */
int cli_model_dir_find(const char *dir, const char *plugin_dir, cli_model_dir *out);

/* What an imported model's directory is written from. */
typedef struct cli_model_dir_content {
    const char *config_yaml;
    const clf_tensor *tensors; /* the weights, F32 */
    int n_tensors;
    const char *const *meta; /* key, value pairs of the weights file's metadata */
    int n_meta;
    const char *tokenizer_dir; /* where MODEL_DIR_SRC_SPM, _TGT_SPM and _VOCAB are copied from */
} cli_model_dir_content;

/* Writes the model directory dir, which must not exist: everything into dir.tmp.<pid>
 * first, renamed to dir at the end, so that an error leaves no dir (and no temporary one). */
clf_status cli_model_dir_write(const char *dir, const cli_model_dir_content *c);

/* dir/name in buf; "" when it does not fit (opening it then fails, naming nothing worse). */
const char *cli_dir_file(char *buf, size_t size, const char *dir, const char *name);

#endif
