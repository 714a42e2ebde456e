/* Writing a model directory (model_dir.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "model_dir.h"
#include "clformer/fs.h"

/* A tokenizer file is small: a larger one is refused before it is copied. */
#define MODEL_DIR_FILE_MAX ((size_t)64 << 20)

const char *cli_dir_file(char *buf, size_t size, const char *dir, const char *name)
{
    int n = snprintf(buf, size, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= size)
        buf[0] = '\0';
    return buf;
}

/* The tokenizer files of an imported model, copied as they are. */
static const char *const tokenizer_files[] = {MODEL_DIR_SRC_SPM, MODEL_DIR_TGT_SPM,
                                              MODEL_DIR_VOCAB};

/* to_dir/name := from (a file), or from_dir/name when from is NULL */
static clf_status copy_file(const char *from_dir, const char *from_file, const char *to_dir,
                            const char *name)
{
    char from[CLF_PATH_MAX], to[CLF_PATH_MAX], *data = NULL;
    size_t len = 0;
    clf_status st =
        clf_fs_read_all(from_file ? from_file : cli_dir_file(from, sizeof from, from_dir, name),
                        MODEL_DIR_FILE_MAX, &data, &len);
    if (st == CLF_OK)
        st = clf_fs_write_atomic_bytes(cli_dir_file(to, sizeof to, to_dir, name), data, len);
    free(data);
    return st;
}

/* Removes the files cli_model_dir_write wrote into tmp, and tmp. */
static void remove_tmp(const char *tmp)
{
    static const char *const files[] = {MODEL_DIR_CONFIG, MODEL_DIR_WEIGHTS, MODEL_DIR_SRC_SPM,
                                        MODEL_DIR_TGT_SPM, MODEL_DIR_VOCAB};
    char path[CLF_PATH_MAX];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        unlink(cli_dir_file(path, sizeof path, tmp, files[i]));
    rmdir(tmp);
}

clf_status cli_model_dir_write(const char *dir, const cli_model_dir_content *c)
{
    char tmp[CLF_PATH_MAX], path[CLF_PATH_MAX];
    clf_status st = CLF_OK;
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", dir, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp)
        return clf_error(CLF_ERR_INPUT, "%s: the path is too long", dir);
    if (mkdir(tmp, 0755) != 0)
        return clf_error(CLF_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    if ((st = clf_fs_write_atomic_bytes(cli_dir_file(path, sizeof path, tmp, MODEL_DIR_CONFIG),
                                        c->config_yaml, strlen(c->config_yaml))) != CLF_OK ||
        (st = clf_safetensors_write(cli_dir_file(path, sizeof path, tmp, MODEL_DIR_WEIGHTS),
                                    c->tensors, c->n_tensors, c->meta, c->n_meta)) != CLF_OK)
        goto fail;
    for (size_t i = 0; i < sizeof tokenizer_files / sizeof tokenizer_files[0]; i++) {
        const int vocab = !strcmp(tokenizer_files[i], MODEL_DIR_VOCAB);
        if (vocab && c->vocab_text)
            st = clf_fs_write_atomic_bytes(cli_dir_file(path, sizeof path, tmp, MODEL_DIR_VOCAB),
                                           c->vocab_text, strlen(c->vocab_text));
        else
            st = copy_file(c->tokenizer_dir, vocab ? NULL : c->spm_from, tmp, tokenizer_files[i]);
        if (st != CLF_OK)
            goto fail;
    }
    if (rename(tmp, dir) != 0) {
        st = clf_error(CLF_ERR_IO, "%s: cannot rename %s to it: %s", dir, tmp, strerror(errno));
        goto fail;
    }
    return CLF_OK;
fail:
    remove_tmp(tmp);
    return st;
}
