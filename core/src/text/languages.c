/* A many-language model's language code -> its token's id (clformer/tokenizer.h's
 * clf_tokenizer_language_id): the model config says whether and how a side carries a
 * language token, the tokenizer holds the token. Only the configuration's types are used. */
#include <stdio.h>
#include <string.h>

#include "clformer/config.h"
#include "clformer/tokenizer.h"

clf_status clf_tokenizer_language_id(const clf_tokenizer *tok, const clf_config *cfg, int side,
                                     const char *code, const char *vocab, int32_t *id)
{
    if (!id)
        return clf_error(CLF_ERR_INPUT, "clf_tokenizer_language_id: NULL id");
    *id = -1;
    if (!tok || !cfg || !code || (side != 0 && side != 1))
        return clf_error(CLF_ERR_INPUT, "clf_tokenizer_language_id: invalid arguments");
    const clf_languages_config *l = &cfg->languages;
    const char(*list)[CLF_LANGUAGE_CODE_MAX] = side ? l->target : l->source;
    const int n = side ? l->n_target : l->n_source;
    const int placed = side ? cfg->model.target_language != CLF_TGT_LANG_NONE
                            : cfg->model.source_language != CLF_LANG_NONE;
    const char *what = side ? "target" : "source";
    if (!placed)
        return clf_error(CLF_ERR_INPUT, "%s language '%s': %s has no %s language tokens", what,
                         code, cfg->path, what);
    int found = 0;
    for (int i = 0; i < n && !found; i++)
        found = !strcmp(list[i], code);
    if (!found)
        return clf_error(CLF_ERR_INPUT,
                         "%s language '%s' is not one of the model's %d (`clformer info -m "
                         "DIR` lists them)",
                         what, code, n);
    char token[3 * CLF_LANGUAGE_CODE_MAX];
    snprintf(token, sizeof token, "%s%s%s", l->token_prefix, code, l->token_suffix);
    const int32_t got = clf_tokenizer_id(tok, token);
    if (got < 0)
        return clf_error(CLF_ERR_INPUT, "%s language '%s': its token '%s' is not in %s", what, code,
                         token, vocab ? vocab : "the vocabulary");
    *id = got;
    return CLF_OK;
}
