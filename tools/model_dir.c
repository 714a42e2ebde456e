/* A model directory, by name (model_dir.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "model_dir.h"
#include "run_dir.h"
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

#define IN_DIR(field, dir, name) cli_dir_file(out->field, sizeof out->field, dir, name)

/* A run's vocabularies: the paths its config names (from here, else by base name in dir),
 * or the usual names in dir (word-level first, then SentencePiece). */
static void find_run_vocabs(const char *dir, const char *plugin_dir, cli_model_dir *out)
{
    clf_config cfg;
    int have =
        clf_config_load_with_plugins(out->config, plugin_dir, &cfg) == CLF_OK && cfg.train.present;
    clf_clear_error();
    const char *named[2] = {have ? cfg.train.vocab_src : "", have ? cfg.train.vocab_tgt : ""};
    static const char *const guess[2][2] = {{RUN_DIR_SRC_VOCAB, RUN_DIR_SRC_SPM},
                                            {RUN_DIR_TGT_VOCAB, RUN_DIR_TGT_SPM}};
    char *path[2] = {out->src_vocab, out->tgt_vocab};
    for (int i = 0; i < 2; i++) {
        const char *base = strrchr(named[i], '/');
        if (named[i][0] && cli_file_exists(named[i]))
            snprintf(path[i], CLF_PATH_MAX, "%s", named[i]);
        else if (named[i][0])
            cli_dir_file(path[i], CLF_PATH_MAX, dir, base ? base + 1 : named[i]);
        else
            cli_dir_file(path[i], CLF_PATH_MAX, dir, guess[i][0]);
        if (!cli_file_exists(path[i]) && !named[i][0])
            cli_dir_file(path[i], CLF_PATH_MAX, dir, guess[i][1]);
    }
}

int cli_model_dir_find(const char *dir, const char *plugin_dir, cli_model_dir *out)
{
    memset(out, 0, sizeof *out);
    IN_DIR(config, dir, MODEL_DIR_CONFIG);
    IN_DIR(weights, dir, MODEL_DIR_WEIGHTS);
    if (!cli_file_exists(out->config)) {
        out->is_run = 1;
        IN_DIR(config, dir, RUN_DIR_CONFIG);
        IN_DIR(weights, dir, RUN_DIR_LAST);
    }
    if (!cli_file_exists(out->config))
        return 0;
    IN_DIR(vocab_map, dir, MODEL_DIR_VOCAB);
    if (cli_file_exists(out->vocab_map)) {
        IN_DIR(src_vocab, dir, MODEL_DIR_SRC_SPM);
        IN_DIR(tgt_vocab, dir, MODEL_DIR_TGT_SPM);
    } else {
        out->vocab_map[0] = '\0';
        find_run_vocabs(dir, plugin_dir, out);
    }
    return 1;
}

/* The tokenizer files of an imported model, copied as they are. */
static const char *const tokenizer_files[] = {MODEL_DIR_SRC_SPM, MODEL_DIR_TGT_SPM,
                                              MODEL_DIR_VOCAB};

static clf_status copy_file(const char *from_dir, const char *to_dir, const char *name)
{
    char from[CLF_PATH_MAX], to[CLF_PATH_MAX], *data = NULL;
    size_t len = 0;
    clf_status st = clf_fs_read_all(cli_dir_file(from, sizeof from, from_dir, name),
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
    for (size_t i = 0; i < sizeof tokenizer_files / sizeof tokenizer_files[0]; i++)
        if ((st = copy_file(c->tokenizer_dir, tmp, tokenizer_files[i])) != CLF_OK)
            goto fail;
    if (rename(tmp, dir) != 0) {
        st = clf_error(CLF_ERR_IO, "%s: cannot rename %s to it: %s", dir, tmp, strerror(errno));
        goto fail;
    }
    return CLF_OK;
fail:
    remove_tmp(tmp);
    return st;
}
