/* The vocabularies of a translator: loaded, and checked against the model config. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "translate/translator_private.h"

clf_status clf_translator_load_vocab(const char *path, clf_tokenizer **tok)
{
    char map[CLF_PATH_MAX];
    if (!path || !tok)
        return clf_error(CLF_ERR_INPUT, "clf_translator_load_vocab: NULL argument");
    const char *slash = strrchr(path, '/');
    int dir_len = slash ? (int)(slash - path) : 1;
    int n = snprintf(map, sizeof map, "%.*s/" CLF_MODEL_DIR_VOCAB, dir_len, slash ? path : ".");
    if (clf_tokenizer_name_is_sentencepiece(path) && n > 0 && (size_t)n < sizeof map &&
        access(map, F_OK) == 0)
        return clf_tokenizer_load_mapped(path, map, tok);
    return clf_tokenizer_load(path, tok);
}

/* A vocabulary made by clformer (the model config names no specials): its size, its [SOS]
 * and [EOS], and its [PAD] against the model. */
static clf_status check_own(const char *path, const char *side, const clf_tokenizer *tok,
                            int model_vocab, int pad_id)
{
    int size = clf_tokenizer_size(tok);
    clf_tokenizer_specials sp = clf_tokenizer_special_ids(tok);
    if (size > model_vocab)
        return clf_error(CLF_ERR_INPUT,
                         "%s: the %s vocabulary has %d words but the model's %s_vocab is %d "
                         "(a vocabulary for another model?)",
                         path, side, size, side, model_vocab);
    if (sp.sos < 0 || sp.eos < 0)
        return clf_error(CLF_ERR_INPUT, "%s: the %s vocabulary has no %s token", path, side,
                         sp.sos < 0 ? "[SOS]" : "[EOS]");
    if (sp.pad >= 0 && sp.pad != pad_id)
        return clf_error(CLF_ERR_INPUT,
                         "%s: [PAD] has id %d in the %s vocabulary but the model's pad_id is %d",
                         path, (int)sp.pad, side, pad_id);
    return CLF_OK;
}

/* Loads a vocabulary for a model side and checks that they fit (check_own, unless the
 * model config names its specials itself: then only the size and pad are checked). */
static clf_status load_side(const char *path, const char *vocab_map, const char *side,
                            const clf_model_config *mc, clf_tokenizer **tok)
{
    const int model_vocab = side[0] == 's' ? mc->src_vocab : mc->tgt_vocab;
    clf_status st = vocab_map && vocab_map[0] ? clf_tokenizer_load_mapped(path, vocab_map, tok)
                                              : clf_translator_load_vocab(path, tok);
    if (st != CLF_OK)
        return st;
    if (mc->eos_id < 0 || (mc->bos_id < 0 && mc->decoder_start_id < 0))
        return check_own(path, side, *tok, model_vocab, mc->pad_id);
    clf_tokenizer_specials sp = clf_tokenizer_special_ids(*tok);
    int size = clf_tokenizer_size(*tok);
    if (size > model_vocab)
        return clf_error(CLF_ERR_INPUT,
                         "%s: the %s vocabulary has %d words but the model's %s_vocab is %d "
                         "(a vocabulary for another model?)",
                         path, side, size, side, model_vocab);
    if (sp.pad >= 0 && sp.pad != mc->pad_id)
        return clf_error(CLF_ERR_INPUT,
                         "%s: the pad token has id %d in the %s vocabulary but the model's "
                         "pad_id is %d",
                         path, (int)sp.pad, side, mc->pad_id);
    return CLF_OK;
}

clf_status clf_translate_vocabs_load(clf_translator *t, const char *src, const char *tgt,
                                     const char *vocab_map)
{
    clf_status st;
    snprintf(t->vocab[0], sizeof t->vocab[0], "%s", src);
    snprintf(t->vocab[1], sizeof t->vocab[1], "%s", tgt);
    if ((st = load_side(src, vocab_map, "src", &t->cfg.model, &t->tok[0])) != CLF_OK ||
        (st = load_side(tgt, vocab_map, "tgt", &t->cfg.model, &t->tok[1])) != CLF_OK)
        return st;
    /* the model config's ids first, the vocabulary's otherwise: the rule train frames with */
    const clf_framing own = clf_tokenizer_framing(t->tok[0], t->tok[1]);
    if ((st = clf_model_framing(&t->cfg.model, &own, &t->fr)) != CLF_OK)
        return clf_error_context(st, "%s", t->cfg.path);
    t->framing = clf_framing_source_extra(&t->fr);
    return CLF_OK;
}
