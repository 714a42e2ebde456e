/* clformer/translator.h - a model directory opened for translation: text in, text out.
 *
 * The one path from sentences to translations that the CLI (`clformer translate`), the
 * server (`clformer serve`) and the Python package share: the model directory's files
 * found by name (an imported model's or a training run's), the config with its plugins,
 * both vocabularies checked against the model, the framing, the weights on the backend
 * the options or the config name, and the decoding defaults of the config's generate:
 * section. A sentence is tokenized with the source vocabulary, framed, decoded in a batch
 * (clf_decode) and its hypotheses' tokens joined back into text, specials left out.
 *
 * Sentences are refused one by one, never cut: one that is not valid UTF-8, holds a NUL
 * byte, is longer than CLF_TRANSLATE_SENTENCE_MAX bytes, or whose framed length exceeds
 * the model's max_len gets status CLF_ERR_INPUT and a one-line reason in its result, and
 * the others of the call are translated. An empty or all-blank sentence is not decoded:
 * it gets no hypotheses' tokens and the empty string.
 *
 * A translator is used by one thread at a time (the caller serializes: the Python
 * package holds a lock per translator, the server has one scheduler thread per model). */
#ifndef CLFORMER_TRANSLATOR_H
#define CLFORMER_TRANSLATOR_H

#include <stddef.h>
#include <stdint.h>

#include "clformer/config.h"
#include "clformer/decode.h"
#include "clformer/export.h"
#include "clformer/status.h"
#include "clformer/tokenizer.h"
#include "clformer/weights.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest sentence translated, in bytes (README, "Limits"). */
#define CLF_TRANSLATE_SENTENCE_MAX (1 << 20)

typedef struct clf_translator clf_translator;

typedef struct clf_translator_opts {
    const char *model_dir;  /* an imported model's directory or a training run's */
    const char *backend;    /* NULL: $CLF_BACKEND, else the config's backend.name */
    const char *device;     /* NULL: the config's backend.device */
    const char *plugin_dir; /* NULL: the default search path of backends and plugins */
    int threads;            /* -1: the config's backend.threads */
    int weight_type_set;    /* 0: the weights file's own type */
    clf_weight_type weight_type;
    /* Each replaces the file of model_dir (NULL: model_dir's); with all four, model_dir may
     * be NULL (`clformer translate -c -w --src-vocab --tgt-vocab`). A vocabulary given here
     * is loaded by clf_translator_load_vocab's rule. */
    const char *config_path, *weights_path, *src_vocab, *tgt_vocab;
    clf_precision precision; /* the products' (clf_model_set_precision); default f32 */
} clf_translator_opts;

/* The files of a model directory, by name: an imported model's (`clformer import`:
 * model.yaml, weights.safetensors, source.spm and target.spm mapped through vocab.json, or
 * word-level src.json / tgt.json, or SentencePiece src.model / tgt.model) or a training
 * run's (config.yaml, last.safetensors and the vocabularies its train.vocab names, looked
 * for in the directory when those paths do not exist from here; src.json / tgt.json, else
 * src.model / tgt.model, when it names none). */
#define CLF_MODEL_DIR_CONFIG  "model.yaml"
#define CLF_MODEL_DIR_WEIGHTS "weights.safetensors"
#define CLF_MODEL_DIR_SRC_SPM "source.spm"
#define CLF_MODEL_DIR_TGT_SPM "target.spm"
#define CLF_MODEL_DIR_VOCAB   "vocab.json" /* pieces -> ids for both .spm files */
#define CLF_RUN_DIR_CONFIG    "config.yaml"
#define CLF_RUN_DIR_LAST      "last.safetensors"
#define CLF_RUN_DIR_SRC_VOCAB "src.json" /* train.vocab.src's default */
#define CLF_RUN_DIR_TGT_VOCAB "tgt.json"
#define CLF_RUN_DIR_SRC_SPM   "src.model"
#define CLF_RUN_DIR_TGT_SPM   "tgt.model"

typedef struct clf_model_files {
    char config[CLF_PATH_MAX];
    char weights[CLF_PATH_MAX];
    char src_vocab[CLF_PATH_MAX], tgt_vocab[CLF_PATH_MAX];
    char vocab_map[CLF_PATH_MAX]; /* CLF_MODEL_DIR_VOCAB when the vocabularies are mapped */
    int is_run;                   /* a training run's directory */
} clf_model_files;

/* The files of dir as above (plugin_dir: for loading a run's config). CLF_ERR_INPUT naming
 * dir when it holds neither config; the files themselves are not opened. */
CLF_API clf_status clf_model_files_find(const char *dir, const char *plugin_dir,
                                        clf_model_files *out);

/* Loads a vocabulary file: a SentencePiece model (.model, .spm) with a vocab.json beside
 * it is Marian's mapped kind (clf_tokenizer_load_mapped), anything else clf_tokenizer_load. */
CLF_API clf_status clf_translator_load_vocab(const char *path, clf_tokenizer **tok);

/* model_dir NULL, backend/device/plugin_dir NULL, threads -1, the file's weight type,
 * precision f32. */
CLF_API void clf_translator_opts_default(clf_translator_opts *o);

/* Opens o->model_dir (or the four files of o, each of which replaces the directory's).
 * Errors name the file and why (a missing directory or file, a vocabulary for another
 * model, a backend that does not load). */
CLF_API clf_status clf_translator_open(const clf_translator_opts *o, clf_translator **out);
CLF_API void clf_translator_free(clf_translator *t); /* NULL is fine */

/* What was opened, for messages, /languages and `info`. Valid until clf_translator_free. */
typedef struct clf_translator_info {
    const clf_config *config;          /* resolved, with generate: and languages: */
    const char *backend;               /* the backend's name ("cpu", "opencl") */
    const char *device;                /* the backend's description of its device */
    clf_weight_type weight_type;       /* the type the model multiplies with */
    const char *src_vocab, *tgt_vocab; /* the vocabulary files' paths */
    int src_words, tgt_words;          /* the vocabularies' sizes (ids 0..words-1) */
    const char *note;        /* what opening noticed and a CLI prints (F16 products that fall back
                                to F32 on this device, a precision without its arithmetic here),
                                else NULL */
    clf_precision precision; /* as opened */
    int bf16_arith;          /* products of many rows run in BF16 arithmetic */
} clf_translator_info;
CLF_API void clf_translator_get_info(const clf_translator *t, clf_translator_info *info);

/* The languages of a model whose config places language tokens (model.source_language,
 * model.target_language: M2M-100, NLLB, mBART-50): source and target are codes of its
 * languages: section (NULL: keep the current one). Opening picks a side's code when the
 * section lists exactly one; otherwise translating needs one set first. CLF_ERR_INPUT, one
 * line, for a code the model does not list or whose token its vocabulary lacks, saying how
 * to list them (`clformer info -m DIR`); the languages stay as they were. For a model without
 * language tokens any code is refused. */
CLF_API clf_status clf_translator_set_languages(clf_translator *t, const char *source,
                                                const char *target);

/* Token <-> id of a side (0: source, 1: target): -1 / NULL when there is none. */
CLF_API int32_t clf_translator_token_id(const clf_translator *t, int side, const char *token);
CLF_API const char *clf_translator_token(const clf_translator *t, int side, int32_t id);
/* A sentence's source tokens as the model sees them, without the framing; *ids is
 * malloc'd (NULL when *n == 0). Errors: CLF_ERR_INPUT for text that cannot be encoded. */
CLF_API clf_status clf_translator_encode(const clf_translator *t, int side, const char *text,
                                         size_t len, int32_t **ids, int *n);

/* Decoding settings of one call. A field < 0 (or, for max_len, 0) takes the config's
 * generate: value, as `clformer translate` does without the option. */
typedef struct clf_translate_opts {
    int beam;             /* 1: greedy; K > 1: beam search */
    int n_best;           /* hypotheses per sentence, 1..beam; default 1 */
    float length_penalty; /* < -1.5: generate.length_penalty; -1: 0.6 for beams, 0 greedy */
    int max_len;          /* output tokens; 0: 2 * (longest source of the batch) + 10, capped
                             at the model's max_len - 1: give it for outputs that do not
                             depend on how sentences are batched */
    int beam_style;       /* clf_beam_style, or -1 */
    int forced_eos;       /* 0/1, or -1 */
    int use_cache;        /* 1 (default): KV cache */
    int max_batch;        /* sentences per clf_decode call, in input order; default 32 */
    int want_attention;   /* keep each hypothesis' cross-attention (clf_hypothesis) */
    /* Greedy decoding picks each token on the device and sums no log-probabilities
     * (logprob and score 0). 1: each greedy hypothesis is then scored by teacher forcing
     * (one forward pass per batch, as clf_translator_score_ids), which fills logprob (EOS
     * counted when finished) and score (logprob over clf_decode_length_penalty). Beam
     * search and models with banned_ids fill them anyway. Default 0. */
    int want_scores;
    int early_stopping; /* 0/1 (clf_decode_opts), or -1 (default): generate.early_stopping */
    int sync_steps;     /* clf_decode_opts.sync_steps; default 0: the backend's choice */
} clf_translate_opts;

/* beam -1, n_best 1, length_penalty -2 (the config's), max_len 0, beam_style -1,
 * forced_eos -1, use_cache 1, max_batch 32, no attention. */
CLF_API void clf_translate_opts_default(clf_translate_opts *o);

/* One hypothesis of a sentence. Greedy decoding (beam 1) of a model without banned_ids
 * picks on the device and sums nothing: logprob and score are 0 there unless the call
 * asked for want_scores. */
typedef struct clf_translation_hyp {
    char *text;      /* the target words joined, specials left out; one line (no '\n') */
    int32_t *tokens; /* [len] target ids, without SOS and the final EOS */
    int len;
    int finished;     /* 1: ended with EOS; 0: stopped at max_len */
    float logprob;    /* sum of the tokens' log-probabilities (and of EOS if finished) */
    float score;      /* logprob over the length penalty: what beams are ranked by */
    float *attention; /* want_attention: [len + finished, attn_cols]; else NULL */
    int attn_cols;    /* the framed source's length (its columns, without padding) */
} clf_translation_hyp;

/* One sentence's result. */
typedef struct clf_translation {
    clf_status status;         /* CLF_OK, or CLF_ERR_INPUT when the sentence was refused */
    char *error;               /* why it was refused (one line), else NULL */
    int n_src;                 /* source tokens, without the framing */
    int n_hyps;                /* n_best when decoded; 0 when refused or empty */
    clf_translation_hyp *hyps; /* best first */
} clf_translation;

/* Translates n sentences (text[i] of len[i] bytes; len NULL: NUL-terminated) into out[n],
 * which the caller allocates and frees with clf_translations_free. A refused sentence is
 * not an error of the call; the call fails only for the backend, memory or bad options,
 * and then out holds nothing to free. */
CLF_API clf_status clf_translator_translate(clf_translator *t, const char *const *text,
                                            const size_t *len, int n, const clf_translate_opts *o,
                                            clf_translation *out);
/* The same from source ids (without the framing): ids[i] of lens[i] tokens. An id out of
 * the source vocabulary refuses its sentence. */
CLF_API clf_status clf_translator_translate_ids(clf_translator *t, const int32_t *const *ids,
                                                const int *lens, int n, const clf_translate_opts *o,
                                                clf_translation *out);
CLF_API void clf_translations_free(clf_translation *r, int n);

/* What the decoder steps of every clf_translator_translate / _translate_ids call so far did
 * (sums of clf_decode_result's fields, clformer/decode.h): for `translate --stats`. */
typedef struct clf_translator_stats {
    long long steps;      /* decoder steps */
    long long step_calls; /* their backend calls: graph ops, uploads, downloads, cache copies */
    double step_s;        /* seconds in the steps */
    double host_s;        /* of those, seconds in decoding's own host code */
} clf_translator_stats;
CLF_API void clf_translator_get_stats(const clf_translator *t, clf_translator_stats *out);

/* Scores given translations: logprob[i] is the sum of the log-probabilities the model gives
 * tgt[i]'s tokens and the final EOS after src[i] (teacher forcing), tokens[i] the count
 * (EOS included). A pair that cannot be scored (refused as translate refuses, or too long
 * for max_len) gets logprob NaN, tokens 0 and its reason in error[i] (malloc'd; NULL
 * otherwise; free each). The probabilities are the model's own, over its whole vocabulary:
 * a beam's logprob equals them, except for an EOS that forced_eos forced (0 there). One
 * forward pass per pair batch, no KV cache: an independent check of decoding. A model with
 * a forced target language (model.target_language) scores tgt[i] after its language's token,
 * which counts log-prob 0 as decoding gives it, and in tokens[i]. */
CLF_API clf_status clf_translator_score(clf_translator *t, const char *const *src,
                                        const char *const *tgt, int n, float *logprob, int *tokens,
                                        char **error);
/* The same from ids (without the framing): src[i] of src_lens[i] source ids, tgt[i] of
 * tgt_lens[i] target ids; an id out of its vocabulary makes the pair unscorable. */
CLF_API clf_status clf_translator_score_ids(clf_translator *t, const int32_t *const *src,
                                            const int *src_lens, const int32_t *const *tgt,
                                            const int *tgt_lens, int n, float *logprob, int *tokens,
                                            char **error);

/* ---- continuous translation (for a server) ----
 * Sentences join a running decoding batch at every step and leave it when done
 * (clf_decode_stream): each client's sentence waits for at most the step it arrives in,
 * not for a batch to finish. A sentence's result is what clf_translator_translate gives it
 * with the same options and an explicit max_len (the default max_len, 2 * its own length
 * + 10, depends on no batch here); clformer/decode.h states the bound (tokens exact on the
 * fixtures, scores within 1e-4). want_scores sums the greedy log-probabilities while
 * decoding instead of a teacher-forced pass; attention and use_cache 0 are refused. */
typedef struct clf_translator_stream clf_translator_stream;

typedef struct clf_translator_stream_opts {
    int max_rows;        /* hypotheses decoded per step at most (0: 32) */
    int max_out;         /* longest output (0: generate.max_len, else the model's max_len - 1) */
    int max_join_tokens; /* source tokens encoded per step at most (0: no limit but max_rows) */
    int join_wait;       /* steps waiting sentences may be held back so that one encoder pass
                            takes several (0: none; the rule: clformer/decode.h) */
} clf_translator_stream_opts;

/* Opens a stream on t's model; t must outlive it. Its caches are allocated now
 * (clformer/decode.h gives their size, with the model's max_len as the longest source). */
CLF_API clf_status clf_translator_stream_open(clf_translator *t,
                                              const clf_translator_stream_opts *o,
                                              clf_translator_stream **out);
/* Queues a sentence (text of len bytes) with decoding options o, known as tag. A sentence
 * translate refuses, or an empty one, is finished at once (its clf_translation says why).
 * CLF_ERR_INPUT for bad options (nothing is queued), CLF_ERR_NOMEM. */
CLF_API clf_status clf_translator_stream_add(clf_translator_stream *s, const char *text, size_t len,
                                             const clf_translate_opts *o, uint64_t tag);
/* One decoder step (the waiting sentences that fit join first), then the finished
 * sentences' text. After a failure (the backend's, or memory) every sentence in the
 * stream is lost: free the stream (and, for a backend failure, the translator) and open
 * them again. */
CLF_API clf_status clf_translator_stream_step(clf_translator_stream *s);
/* The oldest finished sentence: 1 with *tag and *out (free with clf_translations_free(out,
 * 1)), else 0. */
CLF_API int clf_translator_stream_take(clf_translator_stream *s, uint64_t *tag,
                                       clf_translation *out);
/* Drops the sentences with this tag, wherever they are; returns how many. */
CLF_API int clf_translator_stream_cancel(clf_translator_stream *s, uint64_t tag);
/* waiting/active/rows: the decoder's; finished: results not yet taken. */
CLF_API void clf_translator_stream_get_state(const clf_translator_stream *s,
                                             clf_decode_stream_state *st);
CLF_API void clf_translator_stream_free(clf_translator_stream *s); /* NULL is fine */

#ifdef __cplusplus
}
#endif
#endif
