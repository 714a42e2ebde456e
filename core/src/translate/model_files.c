/* A model directory's files, by name (clf_model_files_find, clformer/translator.h). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clformer/translator.h"

static int exists(const char *path)
{
    return path[0] && access(path, F_OK) == 0;
}

/* dir/name in buf; "" when it does not fit (opening it then fails, naming nothing worse). */
static void in_dir(char *buf, const char *dir, const char *name)
{
    int n = snprintf(buf, CLF_PATH_MAX, "%s/%s", dir, name);
    if (n < 0 || n >= CLF_PATH_MAX)
        buf[0] = '\0';
}

/* A run's vocabularies: the paths its config names (from here, else by base name in dir),
 * or the usual names in dir (word-level first, then SentencePiece). */
static void find_run_vocabs(const char *dir, const char *plugin_dir, clf_model_files *out)
{
    clf_config cfg;
    int have =
        clf_config_load_with_plugins(out->config, plugin_dir, &cfg) == CLF_OK && cfg.train.present;
    clf_clear_error();
    const char *named[2] = {have ? cfg.train.vocab_src : "", have ? cfg.train.vocab_tgt : ""};
    static const char *const guess[2][2] = {{CLF_RUN_DIR_SRC_VOCAB, CLF_RUN_DIR_SRC_SPM},
                                            {CLF_RUN_DIR_TGT_VOCAB, CLF_RUN_DIR_TGT_SPM}};
    char *path[2] = {out->src_vocab, out->tgt_vocab};
    for (int i = 0; i < 2; i++) {
        const char *base = strrchr(named[i], '/');
        if (named[i][0] && exists(named[i]))
            snprintf(path[i], CLF_PATH_MAX, "%s", named[i]);
        else if (named[i][0])
            in_dir(path[i], dir, base ? base + 1 : named[i]);
        else
            in_dir(path[i], dir, guess[i][0]);
        if (!exists(path[i]) && !named[i][0])
            in_dir(path[i], dir, guess[i][1]);
    }
}

clf_status clf_model_files_find(const char *dir, const char *plugin_dir, clf_model_files *out)
{
    if (!dir || !out)
        return clf_error(CLF_ERR_INPUT, "clf_model_files_find: NULL argument");
    memset(out, 0, sizeof *out);
    in_dir(out->config, dir, CLF_MODEL_DIR_CONFIG);
    in_dir(out->weights, dir, CLF_MODEL_DIR_WEIGHTS);
    if (!exists(out->config)) {
        out->is_run = 1;
        in_dir(out->config, dir, CLF_RUN_DIR_CONFIG);
        in_dir(out->weights, dir, CLF_RUN_DIR_LAST);
    }
    if (!exists(out->config))
        return clf_error(CLF_ERR_INPUT,
                         "%s: no " CLF_MODEL_DIR_CONFIG " (clformer import) or " CLF_RUN_DIR_CONFIG
                         " (a training run) there",
                         dir);
    in_dir(out->vocab_map, dir, CLF_MODEL_DIR_VOCAB);
    if (exists(out->vocab_map)) {
        in_dir(out->src_vocab, dir, CLF_MODEL_DIR_SRC_SPM);
        in_dir(out->tgt_vocab, dir, CLF_MODEL_DIR_TGT_SPM);
    } else {
        out->vocab_map[0] = '\0';
        find_run_vocabs(dir, plugin_dir, out);
    }
    return CLF_OK;
}
