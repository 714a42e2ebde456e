/* A model directory, by name: what `clformer import marian` writes. Reading one (`translate
 * -m`, the server, Python) is the translator's: clf_model_files_find (clformer/translator.h),
 * whose names these are. An imported model's directory holds MODEL_DIR_CONFIG (the model:,
 * generate: and languages: sections), MODEL_DIR_WEIGHTS, and the tokenizer files: Marian's
 * two SentencePiece models and the vocab.json that maps their pieces to the weights' ids. */
#ifndef CLF_MODEL_DIR_H
#define CLF_MODEL_DIR_H

#include <stddef.h>

#include "clformer/config.h"
#include "clformer/status.h"
#include "clformer/tensor.h"
#include "clformer/translator.h"

#define MODEL_DIR_CONFIG  CLF_MODEL_DIR_CONFIG
#define MODEL_DIR_WEIGHTS CLF_MODEL_DIR_WEIGHTS
#define MODEL_DIR_SRC_SPM CLF_MODEL_DIR_SRC_SPM
#define MODEL_DIR_TGT_SPM CLF_MODEL_DIR_TGT_SPM
#define MODEL_DIR_VOCAB   CLF_MODEL_DIR_VOCAB

/* What an imported model's directory is written from. */
typedef struct cli_model_dir_content {
    const char *config_yaml;
    const clf_tensor *tensors; /* the weights, F32 */
    int n_tensors;
    const char *const *meta; /* key, value pairs of the weights file's metadata */
    int n_meta;
    const char *tokenizer_dir; /* where MODEL_DIR_SRC_SPM, _TGT_SPM and _VOCAB are copied from */
    const char *spm_from;      /* non-NULL: the file both .spm files are copied from instead */
    const char *vocab_text;    /* non-NULL: written as MODEL_DIR_VOCAB instead of a copy */
} cli_model_dir_content;

/* Writes the model directory dir, which must not exist: everything into dir.tmp.<pid>
 * first, renamed to dir at the end, so that an error leaves no dir (and no temporary one). */
clf_status cli_model_dir_write(const char *dir, const cli_model_dir_content *c);

/* dir/name in buf; "" when it does not fit (opening it then fails, naming nothing worse). */
const char *cli_dir_file(char *buf, size_t size, const char *dir, const char *name);

#endif
