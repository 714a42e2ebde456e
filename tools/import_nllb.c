/* NllbTokenizer's vocabulary, for the m2m_100 family of clformer import (import.h,
 * import_m2m100.c): NLLB-200 (facebook/nllb-200-distilled-600M, -1.3B, -3.3B) is an
 * M2M100ForConditionalGeneration whose tokenizer is NllbTokenizer, saved as
 * sentencepiece.bpe.model, tokenizer_config.json, special_tokens_map.json and tokenizer.json
 * (the fast tokenizer's, which clformer does not read): no vocab.json.
 *
 * Its ids (transformers 4.40's tokenization_nllb.py): fairseq's <s> 0, <pad> 1, </s> 2,
 * <unk> 3, then the SentencePiece model's piece i as id i + 1 (fairseq_offset; the model's
 * own <unk> <s> </s>, pieces 0 to 2, are those four), then the language codes from
 * len(sentencepiece) + 1 on, spelled as they are (eng_Latn), then <mask>; vocab_size may
 * count rows past it (256206 for NLLB-200's 256204 ids), named <unused_N> here. The codes
 * are tokenizer_config.json's additional_special_tokens, else special_tokens_map.json's
 * (as from_pretrained merges them), else transformers' FAIRSEQ_LANGUAGE_CODES (202);
 * tokenizer_config.json's added_tokens_decoder, where saved, must agree with those ids.
 * The model directory's vocab.json holds them all; ids from the first language code on are
 * specials_from (never text).
 *
 * The source is src_lang pieces </s> (source_language: before), or with
 * tokenizer_config.json's legacy_behaviour: true, pieces </s> src_lang (after); as for
 * M2M-100, decoding starts from </s> with the target language's code forced first. */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "import.h"
#include "clformer/tokenizer.h"

#define NLLB_SPM "sentencepiece.bpe.model"

/* transformers' FAIRSEQ_LANGUAGE_CODES for NLLB, in their order (the ids follow it) */
static const char *const codes_nllb[] = {
    "ace_Arab", "ace_Latn", "acm_Arab", "acq_Arab", "aeb_Arab", "afr_Latn", "ajp_Arab", "aka_Latn",
    "amh_Ethi", "apc_Arab", "arb_Arab", "ars_Arab", "ary_Arab", "arz_Arab", "asm_Beng", "ast_Latn",
    "awa_Deva", "ayr_Latn", "azb_Arab", "azj_Latn", "bak_Cyrl", "bam_Latn", "ban_Latn", "bel_Cyrl",
    "bem_Latn", "ben_Beng", "bho_Deva", "bjn_Arab", "bjn_Latn", "bod_Tibt", "bos_Latn", "bug_Latn",
    "bul_Cyrl", "cat_Latn", "ceb_Latn", "ces_Latn", "cjk_Latn", "ckb_Arab", "crh_Latn", "cym_Latn",
    "dan_Latn", "deu_Latn", "dik_Latn", "dyu_Latn", "dzo_Tibt", "ell_Grek", "eng_Latn", "epo_Latn",
    "est_Latn", "eus_Latn", "ewe_Latn", "fao_Latn", "pes_Arab", "fij_Latn", "fin_Latn", "fon_Latn",
    "fra_Latn", "fur_Latn", "fuv_Latn", "gla_Latn", "gle_Latn", "glg_Latn", "grn_Latn", "guj_Gujr",
    "hat_Latn", "hau_Latn", "heb_Hebr", "hin_Deva", "hne_Deva", "hrv_Latn", "hun_Latn", "hye_Armn",
    "ibo_Latn", "ilo_Latn", "ind_Latn", "isl_Latn", "ita_Latn", "jav_Latn", "jpn_Jpan", "kab_Latn",
    "kac_Latn", "kam_Latn", "kan_Knda", "kas_Arab", "kas_Deva", "kat_Geor", "knc_Arab", "knc_Latn",
    "kaz_Cyrl", "kbp_Latn", "kea_Latn", "khm_Khmr", "kik_Latn", "kin_Latn", "kir_Cyrl", "kmb_Latn",
    "kon_Latn", "kor_Hang", "kmr_Latn", "lao_Laoo", "lvs_Latn", "lij_Latn", "lim_Latn", "lin_Latn",
    "lit_Latn", "lmo_Latn", "ltg_Latn", "ltz_Latn", "lua_Latn", "lug_Latn", "luo_Latn", "lus_Latn",
    "mag_Deva", "mai_Deva", "mal_Mlym", "mar_Deva", "min_Latn", "mkd_Cyrl", "plt_Latn", "mlt_Latn",
    "mni_Beng", "khk_Cyrl", "mos_Latn", "mri_Latn", "zsm_Latn", "mya_Mymr", "nld_Latn", "nno_Latn",
    "nob_Latn", "npi_Deva", "nso_Latn", "nus_Latn", "nya_Latn", "oci_Latn", "gaz_Latn", "ory_Orya",
    "pag_Latn", "pan_Guru", "pap_Latn", "pol_Latn", "por_Latn", "prs_Arab", "pbt_Arab", "quy_Latn",
    "ron_Latn", "run_Latn", "rus_Cyrl", "sag_Latn", "san_Deva", "sat_Beng", "scn_Latn", "shn_Mymr",
    "sin_Sinh", "slk_Latn", "slv_Latn", "smo_Latn", "sna_Latn", "snd_Arab", "som_Latn", "sot_Latn",
    "spa_Latn", "als_Latn", "srd_Latn", "srp_Cyrl", "ssw_Latn", "sun_Latn", "swe_Latn", "swh_Latn",
    "szl_Latn", "tam_Taml", "tat_Cyrl", "tel_Telu", "tgk_Cyrl", "tgl_Latn", "tha_Thai", "tir_Ethi",
    "taq_Latn", "taq_Tfng", "tpi_Latn", "tsn_Latn", "tso_Latn", "tuk_Latn", "tum_Latn", "tur_Latn",
    "twi_Latn", "tzm_Tfng", "uig_Arab", "ukr_Cyrl", "umb_Latn", "urd_Arab", "uzn_Latn", "vec_Latn",
    "vie_Latn", "war_Latn", "wol_Latn", "xho_Latn", "ydd_Hebr", "yor_Latn", "yue_Hant", "zho_Hans",
    "zho_Hant", "zul_Latn",
};
#define N_CODES_NLLB ((int)(sizeof codes_nllb / sizeof codes_nllb[0]))

/* fairseq's dictionary before the pieces, and the SentencePiece model's own first pieces */
static const char *const fairseq_specials[4] = {"<s>", "<pad>", "</s>", "<unk>"};
static const char *const spm_first[3] = {"<unk>", "<s>", "</s>"};

/* A code of a model's language list: 1 to 15 letters, digits, '_' or '-'. */
static int is_code(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= CLF_LANGUAGE_CODE_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
            return 0;
    return 1;
}

/* Appends the codes of list (strings, or AddedToken objects with "content") to l, those
 * already there left out. what names the list for messages. */
static clf_status add_codes(const json_t *list, const char *what, import_languages *l)
{
    size_t i;
    const json_t *v;
    if (!json_is_array(list))
        return clf_error(CLF_ERR_INPUT, "%s: expected a list of language codes", what);
    json_array_foreach(list, i, v)
    {
        const char *code = json_string_value(json_is_object(v) ? json_object_get(v, "content") : v);
        if (!code || !is_code(code))
            return clf_error(CLF_ERR_INPUT,
                             "%s[%zu]: expected a language code (1 to 15 letters, digits, '_' "
                             "or '-')",
                             what, i);
        int seen = 0;
        for (int k = 0; k < l->n_codes && !seen; k++)
            seen = !strcmp(l->codes[k], code);
        if (seen)
            continue;
        if (l->n_codes == CLF_LANGUAGES_MAX)
            return clf_error(CLF_ERR_INPUT, "%s: more than %d language codes", what,
                             CLF_LANGUAGES_MAX);
        snprintf(l->codes[l->n_codes++], CLF_LANGUAGE_CODE_MAX, "%s", code);
    }
    return CLF_OK;
}

/* The language codes, as NllbTokenizer.from_pretrained has them (see the top). */
static clf_status read_codes(importer *im, json_t *tc, import_languages *l)
{
    char what[CLF_PATH_MAX + 64];
    const json_t *ast = tc ? json_object_get(tc, "additional_special_tokens") : NULL;
    clf_status st = CLF_OK;
    l->n_codes = 0;
    if (ast && !json_is_null(ast)) {
        snprintf(what, sizeof what, "%s/tokenizer_config.json: additional_special_tokens", im->hf);
        if ((st = add_codes(ast, what, l)) != CLF_OK)
            return st;
    }
    if (!tc || !json_object_get(tc, "added_tokens_decoder")) {
        json_t *map = NULL;
        if ((st = import_read_json(im, "special_tokens_map.json", 1, &map)) != CLF_OK)
            return st;
        const json_t *more = map ? json_object_get(map, "additional_special_tokens") : NULL;
        snprintf(what, sizeof what, "%s/special_tokens_map.json: additional_special_tokens",
                 im->hf);
        if (more && !json_is_null(more))
            st = add_codes(more, what, l);
        json_decref(map);
    }
    for (int i = 0; st == CLF_OK && l->n_codes == 0 && i < N_CODES_NLLB; i++)
        snprintf(l->codes[i], CLF_LANGUAGE_CODE_MAX, "%s", codes_nllb[i]);
    if (l->n_codes == 0)
        l->n_codes = N_CODES_NLLB;
    return st;
}

/* The word of id in NllbTokenizer's layout (buf for the unused rows). */
static const char *word_of(const clf_tokenizer *spm, const import_languages *l, long long id,
                           char *buf, size_t size)
{
    const long long n = clf_tokenizer_size(spm);
    if (id < 4)
        return fairseq_specials[id];
    if (id <= n)
        return clf_tokenizer_word(spm, (int32_t)(id - 1));
    if (id <= n + l->n_codes)
        return l->codes[id - n - 1];
    if (id == n + l->n_codes + 1)
        return "<mask>";
    snprintf(buf, size, "<unused_%lld>", id - n - l->n_codes - 2);
    return buf;
}

/* tokenizer_config.json's added_tokens_decoder ({"id": {"content": ...}}) against the
 * layout's words. */
static clf_status check_added(const importer *im, const json_t *tc, const clf_tokenizer *spm,
                              const import_languages *l, long long V)
{
    const json_t *added = tc ? json_object_get(tc, "added_tokens_decoder") : NULL;
    const char *key;
    const json_t *v;
    if (!added || json_is_null(added))
        return CLF_OK;
    if (!json_is_object(added))
        return clf_error(CLF_ERR_INPUT,
                         "%s/tokenizer_config.json: added_tokens_decoder: expected an object "
                         "of id: token",
                         im->hf);
    json_object_foreach((json_t *)added, key, v)
    {
        char *end = NULL, buf[32];
        long long id = strtoll(key, &end, 10);
        const char *content = json_string_value(json_object_get(v, "content"));
        if (!*key || *end || id < 0 || id >= V || !content)
            return clf_error(CLF_ERR_INPUT,
                             "%s/tokenizer_config.json: added_tokens_decoder: \"%.20s\": "
                             "expected an id below vocab_size %lld with a \"content\"",
                             im->hf, key, V);
        const char *want = word_of(spm, l, id, buf, sizeof buf);
        if (strcmp(content, want))
            return clf_error(CLF_ERR_INPUT,
                             "%s/tokenizer_config.json: added_tokens_decoder: id %lld is "
                             "'%.40s', but NllbTokenizer's ids (pieces + 1, then the %d "
                             "language codes, then <mask>) put '%.40s' there",
                             im->hf, id, content, l->n_codes, want);
    }
    return CLF_OK;
}

/* The model directory's vocab.json: every id's word, in id order. */
static clf_status make_vocab(importer *im, const clf_tokenizer *spm, const import_languages *l,
                             long long V)
{
    json_t *root = json_object();
    clf_status st = root ? CLF_OK : clf_error(CLF_ERR_NOMEM, "import: out of host memory");
    for (long long id = 0; id < V && st == CLF_OK; id++) {
        char buf[32];
        const char *w = word_of(spm, l, id, buf, sizeof buf);
        if (json_object_get(root, w))
            st = clf_error(CLF_ERR_INPUT,
                           "%s/" NLLB_SPM ": '%.40s' is id %lld and an earlier one of "
                           "NllbTokenizer's ids",
                           im->hf, w, id);
        else if (json_object_set_new(root, w, json_integer(id)) != 0)
            st = clf_error(CLF_ERR_INPUT, "%s/" NLLB_SPM ": piece %lld is not valid UTF-8", im->hf,
                           id - 1);
    }
    if (st == CLF_OK && !(im->vocab_text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER)))
        st = clf_error(CLF_ERR_NOMEM, "import: out of host memory");
    json_decref(root);
    return st;
}

clf_status import_nllb_vocab(importer *im, const import_common *c, json_t *tc, import_languages *l)
{
    clf_tokenizer *spm = NULL;
    int legacy = 0;
    const json_t *lb = tc ? json_object_get(tc, "legacy_behaviour") : NULL;
    if (lb && !json_is_null(lb) && !json_is_boolean(lb))
        return clf_error(CLF_ERR_INPUT,
                         "%s/tokenizer_config.json: legacy_behaviour: expected true or false",
                         im->hf);
    legacy = json_is_true(lb);
    if (c->pad != 1 || c->eos != 2)
        return clf_error(CLF_ERR_INPUT,
                         "%s/config.json: pad_token_id %lld and eos_token_id %lld, but "
                         "NllbTokenizer's <pad> is 1 and </s> 2",
                         im->hf, c->pad, c->eos);
    clf_status st = read_codes(im, tc, l);
    if (st != CLF_OK)
        return st;
    snprintf(im->spm_path, sizeof im->spm_path, "%s", import_in_dir(im, im->hf, NLLB_SPM));
    if ((st = clf_tokenizer_load(im->spm_path, &spm)) != CLF_OK)
        return st;
    const long long n = clf_tokenizer_size(spm);
    for (int i = 0; i < 3 && st == CLF_OK; i++) {
        const char *w = clf_tokenizer_word(spm, i);
        if (!w || strcmp(w, spm_first[i]))
            st = clf_error(CLF_ERR_INPUT,
                           "%s: piece %d is '%.40s', but NllbTokenizer's ids need <unk> <s> "
                           "</s> first",
                           im->spm_path, i, w ? w : "");
    }
    if (st == CLF_OK && n + l->n_codes + 2 > c->V)
        st = clf_error(CLF_ERR_INPUT,
                       "%s: %lld pieces, <s> <pad> </s> <unk>, %d language codes and <mask> "
                       "are more ids than config.json's vocab_size %lld",
                       im->spm_path, n - 3, l->n_codes, c->V);
    if (st == CLF_OK && (st = check_added(im, tc, spm, l, c->V)) == CLF_OK)
        st = make_vocab(im, spm, l, c->V);
    clf_tokenizer_free(spm);
    im->spm_from = im->spm_path;
    l->prefix = l->suffix = "";
    l->place = legacy ? "after" : "before";
    l->specials_from = (int)n + 1;
    return st;
}
