/* clformer translate: sentences on stdin, translations on stdout, one line per line.
 *
 * Lines are read in batches of --batch and given to the translator (clformer/translator.h:
 * tokenized with the source vocabulary, framed, decoded together by clf_decode, greedy or
 * beam search with --beam, and joined back into text, special tokens left out); the
 * translator's refusals and their reasons are the lines refused below. Each batch's lines are
 * written, in input order, and flushed before the next batch is read, so an error leaves only whole
 * lines of earlier batches.
 *
 * Decisions a user relies on (README, "Translate input"):
 *   - one output line per input line, always (n-best: N per input line), in order;
 *   - an empty or all-blank line is not decoded: its output is an empty line (with
 *     --n-best N, N lines `0.000000<TAB>`); with --attention its tensor is [0, 0] and
 *     --attention-png writes no image for it;
 *   - a line that cannot be translated whole is refused: a warning on stderr names the
 *     line and why, its output is that of an empty line, and the run goes on; at the end
 *     a count of the refused lines and exit status 2. Refused: a line that is not valid
 *     UTF-8 or holds a NUL byte (naming the byte), a line of more than TRANSLATE_LINE_MAX
 *     bytes, a line whose framed length (tokens + 2) exceeds the model's max_len. Never a
 *     silent truncation: half a sentence translated reads like a whole one;
 *   - a '\r' before the '\n' is dropped (CRLF input reads as LF input);
 *   - memory does not grow with the input (without --attention, which keeps a tensor per
 *     line): lines are read into one buffer of at most TRANSLATE_LINE_MAX bytes (the rest
 *     of a longer line is read and dropped) and each batch is written and flushed before
 *     the next is read;
 *   - --max-len defaults to 2 * (tokens of the batch's longest line) + 10, always capped
 *     at the model's max_len - 1 (the decoder's positions); give --max-len for outputs
 *     that do not depend on how lines are batched;
 *   - --length-penalty defaults to GNMT's 0.6 for beam search, 0 (raw log-probability)
 *     for greedy decoding;
 *   - the files of --attention and --attention-png are indexed by line from 0. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "cli.h"
#include "translate_attention.h"
#include "dist.h"
#include "clformer/decode.h"
#include "clformer/tensor.h"
#include "clformer/translator.h"
#include "clformer/weights.h"

/* Sentences decoded together: enough rows for the GEMMs to reach most of their speed on
 * a CPU, few enough that the first lines come out quickly. */
#define DEFAULT_BATCH 32
/* Longest input line translated, in bytes (README, "Limits"): the translator's limit. One
 * byte more is kept of a longer line, so that the translator refuses it; the rest is read
 * and dropped, a bound on the line buffer whatever comes on stdin. */
#define TRANSLATE_LINE_MAX CLF_TRANSLATE_SENTENCE_MAX

enum {
    OPT_SRC_VOCAB = 256,
    OPT_TGT_VOCAB,
    OPT_BEAM,
    OPT_N_BEST,
    OPT_MAX_LEN,
    OPT_LENGTH_PENALTY,
    OPT_BATCH,
    OPT_NO_CACHE,
    OPT_SYNC_STEPS,
    OPT_STATS,
    OPT_ATTENTION,
    OPT_ATTENTION_PNG,
    OPT_WEIGHT_TYPE,
    OPT_PRECISION,
    OPT_BEAM_STYLE,
    OPT_FORCED_EOS,
    OPT_SOURCE_LANG,
    OPT_EARLY_STOPPING,
    OPT_TARGET_LANG,
};

typedef struct tr_opts {
    const char *cfg_path, *w_path, *src_vocab, *tgt_vocab;
    const char *model_dir; /* -m: the four paths above come from it */
    /* the decoding settings below: < 0 (beam, max_len: 0) until given, else the config's
     * generate: section's (the translator's rule) */
    int beam_style;                        /* --beam-style: clf_beam_style */
    int forced_eos;                        /* --forced-eos */
    int early_stopping;                    /* --early-stopping */
    const char *source_lang, *target_lang; /* --source-lang, --target-lang, or NULL */
    const char *attn_path;                 /* --attention FILE, or NULL */
    const char *png_prefix;                /* --attention-png PREFIX, or NULL */
    int beam, n_best;
    int n_best_given;     /* --n-best was given: `score<TAB>text` lines */
    int max_len;          /* --max-len, 0 = from the source lengths */
    float length_penalty; /* < -1.5: not given */
    int batch;            /* --batch */
    int use_cache;        /* 0 with --no-cache */
    int sync_steps;       /* --sync-steps (clf_decode_opts.sync_steps); 0: the backend's */
    int stats;            /* --stats: timing on stderr at the end */
    int weight_type_set;  /* --weight-type given; else the weights file's own type */
    clf_weight_type weight_type;
    clf_precision precision; /* --precision */
    cli_backend_opts bo;
} tr_opts;

/* One input line of the current batch: bytes [off, off + len) of the batch's text. */
typedef struct src_line {
    long index; /* from 0 */
    size_t off, len;
} src_line;

/* Everything a run holds; freed by translator_free. */
typedef struct translator {
    tr_opts o;
    clf_translator *tr;
    clf_translator_info info;
    clf_translate_opts topts;
    clf_translation *res; /* [batch]: the current batch's results */
    const char **text;    /* [batch]: its lines, into btext */
    size_t *text_len;
    char *btext; /* the batch's lines one after the other */
    size_t btext_len, btext_cap;
    char *line;     /* the line being read: line_cap <= TRANSLATE_LINE_MAX + 1 bytes */
    FILE *in, *out; /* stdin and stdout; under mpirun a rank's share (dist.h) */
    size_t line_cap;
    long lines_read, lines_refused;
    int warned_unknown_id;
    tr_attention attn; /* --attention: a tensor per line */
    /* --stats: what clf_decode did and how long it took, loading excluded */
    double open_s, decode_s;
    long decoded_lines, out_tokens;
} translator;

static void usage(void)
{
    printf("usage: clformer translate -m MODEL_DIR [options] < sentences > translations\n"
           "       clformer translate -c model.yaml -w w.safetensors --src-vocab src.json\n"
           "       --tgt-vocab tgt.json [options] < sentences > translations\n"
           "MODEL_DIR: one `clformer import marian` wrote (model.yaml, weights.safetensors,\n"
           "source.spm, target.spm, vocab.json) or a training run's checkpoint directory\n"
           "(config.yaml, last.safetensors and its vocabularies).\n"
           "One line in, one line out: the translation's words joined by single spaces, or\n"
           "detokenized by SentencePiece when the vocabularies are SentencePiece .model files.\n"
           "  --beam K             beam size (default 1: greedy)\n"
           "  --n-best N           N lines per input, `score<TAB>text`, best first (N <= K)\n"
           "  --max-len N          output tokens at most (default 2 * longest source line of\n"
           "                       the batch + 10; always <= the model's max_len - 1)\n"
           "  --length-penalty A   GNMT alpha: score = logprob / ((5 + len) / 6)^A\n"
           "                       (default 0.6 with --beam > 1, else 0)\n"
           "  --beam-style gnmt|hf how beams are ranked and when a sentence is done: gnmt\n"
           "                       (default) as above; hf as transformers' generate: score =\n"
           "                       logprob / len^A, early_stopping=False (see README)\n"
           "  --forced-eos         the last token allowed by --max-len can only be the end\n"
           "                       (transformers' forced_eos_token_id)\n"
           "  --early-stopping     with --beam-style hf, a sentence ends once K hypotheses\n"
           "                       have (transformers' early_stopping=True)\n"
           "  --source-lang CODE   the source language, --target-lang CODE the target one, of a\n"
           "                       model of many languages (M2M-100); `clformer info -m DIR`\n"
           "                       lists its codes\n"
           "The model's YAML may set these five in a generate: section (`import marian` writes\n"
           "the model's own); a flag given here overrides its key.\n"
           "  --batch N            sentences decoded together (default %d)\n"
           "  --no-cache           re-run the whole decoder every step (slow; for comparison)\n"
           "  --sync-steps N       steps the device runs before the host reads their tokens\n"
           "                       (greedy and beam search; 0, default: 4 on a queued backend\n"
           "                       such as opencl, else 1); the tokens are the same for every N\n"
           "  --weight-type T      f32|f16|bf16|int8 (default: the weights file's type, f32\n"
           "                       for a plain file). f16, bf16: the products of few rows\n"
           "                       (batch 1, small beams) read a 16-bit copy of the weight\n"
           "                       matrices, about twice as fast where memory bandwidth\n"
           "                       bounds them. int8: every product uses int8 weights (per\n"
           "                       output channel) and int8 activations (per row; cpu "
           "only)\n" CLI_PRECISION_HELP
           "  --stats              at the end, on stderr: lines, output tokens and the time\n"
           "                       spent decoding them (tokens/s), loading excluded, and the\n"
           "                       process's resident memory then and at its peak; per\n"
           "                       decoder step the backend calls (ops, transfers), the time,\n"
           "                       and the part of it spent in decoding's host code\n"
           "  --attention FILE     safetensors: F32 'attention.<i>' [out tokens (+EOS), source\n"
           "                       tokens incl. [SOS]/[EOS]] per line i (from 0), best hypothesis\n"
           "  --attention-png P    grayscale heatmap P.<i>.png per line (rows: output tokens)\n"
           "  --backend cpu|opencl|auto, --device D, --threads N, --plugin-dir DIR\n"
           "One line out per line in. An empty line gives an empty line; a line that is not\n"
           "valid UTF-8, holds a NUL byte, is longer than %d bytes or than the model's\n"
           "max_len (with [SOS] and [EOS]) is refused: a warning names it, its output is an\n"
           "empty line, the rest is translated, and the exit status is 2.\n"
           "Under mpirun -np N: the ranks share the batches; output in input order.\n",
           DEFAULT_BATCH, TRANSLATE_LINE_MAX);
}

/* --beam-style gnmt|hf into an int (clf_beam_style) */
static int take_beam_style(const char *value, void *to)
{
    if (strcmp(value, "gnmt") != 0 && strcmp(value, "hf") != 0)
        return !cli_usage_error("--beam-style: expected gnmt or hf, got '%s'", value);
    *(int *)to = strcmp(value, "hf") == 0 ? CLF_BEAM_HF : CLF_BEAM_GNMT;
    return 1;
}

/* --length-penalty A into a float, A in [0, 100] */
static int take_length_penalty(const char *value, void *to)
{
    char *end = NULL;
    errno = 0;
    float v = strtof(value, &end);
    if (errno || end == value || *end || !(v >= 0.0f && v <= 100.0f))
        return !cli_usage_error("--length-penalty: expected a number in [0, 100], got '%s'", value);
    *(float *)to = v;
    return 1;
}

/* After the options: -m's files (model_dir.h), or the four of the long form. Returns -1 to
 * go on, else the exit code. */
static int check_args(tr_opts *o)
{
    if (o->model_dir && (o->cfg_path || o->w_path || o->src_vocab || o->tgt_vocab))
        return cli_usage_error("translate: -m MODEL_DIR replaces -c, -w, --src-vocab and "
                               "--tgt-vocab: give one form");
    if (o->model_dir) { /* the translator opens the directory; here it must exist */
        clf_model_files files;
        if (clf_model_files_find(o->model_dir, o->bo.plugin_dir, &files) != CLF_OK)
            return cli_usage_error("translate: -m %s", clf_last_error());
        return -1;
    }
    if (!o->cfg_path || !o->w_path || !o->src_vocab || !o->tgt_vocab)
        return cli_usage_error("translate: -m MODEL_DIR, or -c, -w, --src-vocab and --tgt-vocab, "
                               "are required");
    if (o->beam > 0 && o->n_best > o->beam)
        return cli_usage_error("translate: --n-best %d is more than --beam %d", o->n_best, o->beam);
    return -1;
}

/* Parses argv into o. Returns -1 to go on, else the exit code (0 after --help). */
static int parse_args(int argc, char **argv, tr_opts *o)
{
    *o = (tr_opts){.beam = 0,
                   .beam_style = -1,
                   .forced_eos = -1,
                   .early_stopping = -1,
                   .n_best = 1,
                   .length_penalty = -2.0f,
                   .batch = DEFAULT_BATCH,
                   .bo = {.threads = -1}};
    int no_cache = 0;
    const cli_opt opts[] = {
        CLI_STRING("config", 'c', &o->cfg_path),
        CLI_STRING("model", 'm', &o->model_dir),
        {"beam-style", OPT_BEAM_STYLE, CLI_OPT_STRING, &o->beam_style, 0, NULL, take_beam_style},
        CLI_FLAG("forced-eos", OPT_FORCED_EOS, &o->forced_eos),
        CLI_FLAG("early-stopping", OPT_EARLY_STOPPING, &o->early_stopping),
        CLI_STRING("source-lang", OPT_SOURCE_LANG, &o->source_lang),
        CLI_STRING("target-lang", OPT_TARGET_LANG, &o->target_lang),
        CLI_STRING("weights", 'w', &o->w_path),
        CLI_STRING("src-vocab", OPT_SRC_VOCAB, &o->src_vocab),
        CLI_STRING("tgt-vocab", OPT_TGT_VOCAB, &o->tgt_vocab),
        CLI_INT("beam", OPT_BEAM, &o->beam, 1),
        {"n-best", OPT_N_BEST, CLI_OPT_INT, &o->n_best, 1, &o->n_best_given, NULL},
        CLI_INT("max-len", OPT_MAX_LEN, &o->max_len, 1),
        {"length-penalty", OPT_LENGTH_PENALTY, CLI_OPT_STRING, &o->length_penalty, 0, NULL,
         take_length_penalty},
        CLI_INT("batch", OPT_BATCH, &o->batch, 1),
        CLI_FLAG("no-cache", OPT_NO_CACHE, &no_cache),
        CLI_INT("sync-steps", OPT_SYNC_STEPS, &o->sync_steps, 0),
        CLI_FLAG("stats", OPT_STATS, &o->stats),
        CLI_STRING("attention", OPT_ATTENTION, &o->attn_path),
        CLI_STRING("attention-png", OPT_ATTENTION_PNG, &o->png_prefix),
        CLI_WEIGHT_TYPE(OPT_WEIGHT_TYPE, &o->weight_type, &o->weight_type_set),
        CLI_PRECISION(OPT_PRECISION, &o->precision, NULL),
        CLI_BACKEND_OPTS(&o->bo),
        {0}};
    int rc = cli_parse_options(argc, argv, opts, usage);
    if (rc >= 0)
        return rc;
    o->use_cache = !no_cache;
    if (optind < argc)
        return cli_usage_error("translate: unexpected argument '%s' (sentences come on stdin)",
                               argv[optind]);
    return check_args(o);
}

/* Reads one line of t->in (stdin, or a rank's share under mpirun), less its '\n', into
 * t->line[0..*len): at most TRANSLATE_LINE_MAX + 1 bytes are kept (*too_long set when more
 * than TRANSLATE_LINE_MAX were read: the translator refuses the line). *got is 1 for a
 * line, 0 at the end of the input. */
static clf_status read_line(translator *t, int *got, size_t *len, int *too_long)
{
    size_t n = 0;
    int c;
    *got = 0;
    *too_long = 0;
    while ((c = getc_unlocked(t->in)) != EOF && c != '\n') {
        if (n >= TRANSLATE_LINE_MAX) {
            *too_long = 1;
            if (n > TRANSLATE_LINE_MAX)
                continue;
        }
        if (n == t->line_cap) {
            size_t cap = t->line_cap ? 2 * t->line_cap : 256;
            if (cap > (size_t)TRANSLATE_LINE_MAX + 1)
                cap = (size_t)TRANSLATE_LINE_MAX + 1;
            char *grown = realloc(t->line, cap);
            if (!grown)
                return clf_error(CLF_ERR_NOMEM, "translate: out of host memory for a line");
            t->line = grown;
            t->line_cap = cap;
        }
        t->line[n++] = (char)c;
    }
    if (c == EOF && ferror(t->in))
        return clf_error(CLF_ERR_IO, "stdin: read error: %s", strerror(errno));
    *len = n;
    *got = c != EOF || n > 0;
    return CLF_OK;
}

/* Reads up to o.batch lines into lines[] and the batch's text. *count is how many were
 * read (0 at the end of the input). */
static clf_status read_batch(translator *t, src_line *lines, int *count)
{
    *count = 0;
    t->btext_len = 0;
    while (*count < t->o.batch) {
        size_t len = 0;
        int too_long = 0;
        int got = 0;
        errno = 0;
        clf_status st = read_line(t, &got, &len, &too_long);
        if (st != CLF_OK)
            return st;
        if (!got)
            break;
        if (!too_long && len > 0 && t->line[len - 1] == '\r')
            len--;
        if (t->btext_len + len > t->btext_cap) {
            size_t cap = t->btext_cap ? t->btext_cap : 4096;
            while (cap < t->btext_len + len)
                cap *= 2;
            char *grown = realloc(t->btext, cap);
            if (!grown)
                return clf_error(CLF_ERR_NOMEM, "translate: out of host memory for a batch");
            t->btext = grown;
            t->btext_cap = cap;
        }
        src_line *l = &lines[(*count)++];
        l->index = t->lines_read++;
        l->off = t->btext_len;
        l->len = len;
        if (len)
            memcpy(t->btext + t->btext_len, t->line, len);
        t->btext_len += len;
    }
    return CLF_OK;
}

/* Translates the batch into t->res; says on stderr why a line is refused (its output is
 * that of an empty line). */
static clf_status translate_batch(translator *t, const src_line *lines, int count)
{
    for (int i = 0; i < count; i++) {
        t->text[i] = t->btext ? t->btext + lines[i].off : "";
        t->text_len[i] = lines[i].len;
    }
    double t0 = cli_now_s();
    clf_status st = clf_translator_translate(t->tr, t->text, t->text_len, count, &t->topts, t->res);
    t->decode_s += cli_now_s() - t0;
    if (st == CLF_ERR_INPUT) /* of the call: a decode plan over its limit (clformer/decode.h) */
        return clf_error_context(st, "translate: --batch %d", t->o.batch);
    if (st != CLF_OK)
        return st;
    for (int i = 0; i < count; i++) {
        const clf_translation *r = &t->res[i];
        if (r->status != CLF_OK) {
            t->lines_refused++;
            fprintf(stderr,
                    "clformer: warning: input line %ld refused (%s): its output is an empty line\n",
                    lines[i].index + 1, r->error ? r->error : clf_status_name(r->status));
        } else if (r->n_hyps > 0) {
            t->decoded_lines++;
            t->out_tokens += r->hyps[0].len; /* the best hypothesis: what goes to stdout */
        }
    }
    return CLF_OK;
}

/* A model whose tgt_vocab is larger than the vocabulary (rounded up, say) can emit ids with
 * no word: the translator leaves them out like specials; say so once. */
static void warn_unknown_ids(translator *t, const clf_translation_hyp *h)
{
    for (int i = 0; i < h->len && !t->warned_unknown_id; i++) {
        int32_t id = h->tokens[i];
        if (id >= 0 && id < t->info.tgt_words)
            continue;
        fprintf(stderr,
                "clformer: warning: the model emitted id %d, beyond the %d words of %s; such ids "
                "are left out\n",
                (int)id, t->info.tgt_words, t->info.tgt_vocab);
        t->warned_unknown_id = 1;
    }
}

/* Writes the batch's output lines in input order and keeps what --attention and
 * --attention-png want. */
static clf_status write_batch(translator *t, const src_line *lines, int count)
{
    clf_status st = CLF_OK;
    const int per_line = t->o.n_best_given ? t->o.n_best : 1;
    char *buf = NULL;
    size_t len = 0;
    /* The batch goes to memory first and to stdout only once all of its lines (and their
     * attention files) are done: an error leaves no partial batch behind. */
    FILE *mem = open_memstream(&buf, &len);
    if (!mem)
        return clf_error(CLF_ERR_NOMEM, "translate: out of host memory");
    for (int i = 0; i < count; i++) {
        const clf_translation *r = &t->res[i];
        const clf_translation_hyp *best = r->n_hyps > 0 ? r->hyps : NULL;
        for (int j = 0; j < per_line; j++) {
            if (best)
                warn_unknown_ids(t, &best[j]);
            if (t->o.n_best_given)
                fprintf(mem, "%.6f\t", best ? best[j].score : 0.0f);
            fprintf(mem, "%s\n", best ? best[j].text : "");
        }
        /* the attention as decode.h's hypothesis holds it, over the framed source */
        const clf_hypothesis h = best ? (clf_hypothesis){.tokens = best->tokens,
                                                         .len = best->len,
                                                         .finished = best->finished,
                                                         .logprob = best->logprob,
                                                         .score = best->score,
                                                         .attention = best->attention}
                                      : (clf_hypothesis){0};
        const int cols = best ? best->attn_cols : 0;
        if (t->o.attn_path && (st = tr_attention_keep(&t->attn, lines[i].index, best ? &h : NULL,
                                                      cols, cols)) != CLF_OK)
            goto fail;
        if (t->o.png_prefix && best &&
            (st = tr_attention_png(t->o.png_prefix, lines[i].index, &h, cols, cols)) != CLF_OK)
            goto fail;
    }
    int bad = fclose(mem) != 0;
    mem = NULL;
    if (bad) {
        st = clf_error(CLF_ERR_NOMEM, "translate: out of host memory");
        goto fail;
    }
    if (fwrite(buf, 1, len, t->out) != len || fflush(t->out) != 0)
        st = clf_error(CLF_ERR_IO, "stdout: write failed: %s", strerror(errno));
fail:
    if (mem)
        fclose(mem);
    free(buf);
    return st;
}

/* Opens the translator: the model directory (-m) or the four files, the backend options,
 * the decoding settings of the command line (the rest from the config's generate:). */
static clf_status translator_open(translator *t)
{
    clf_status st;
    clf_translator_opts to;
    clf_translator_opts_default(&to);
    to.model_dir = t->o.model_dir;
    to.config_path = t->o.cfg_path;
    to.weights_path = t->o.w_path;
    to.src_vocab = t->o.src_vocab;
    to.tgt_vocab = t->o.tgt_vocab;
    to.backend = t->o.bo.backend;
    to.device = t->o.bo.device;
    to.plugin_dir = t->o.bo.plugin_dir;
    to.threads = t->o.bo.threads;
    to.weight_type_set = t->o.weight_type_set;
    to.weight_type = t->o.weight_type;
    to.precision = t->o.precision;
    /* before anything loads libgomp or OpenBLAS (op plugins with the config, backends):
     * with F16 weights a decoding step is the backend's own OpenMP loops back to back */
    clf_weight_type wt = t->o.weight_type;
    if (!t->o.weight_type_set) {
        clf_model_files files;
        const char *w = t->o.w_path;
        if (!w && clf_model_files_find(t->o.model_dir, t->o.bo.plugin_dir, &files) == CLF_OK)
            w = files.weights;
        clf_clear_error();
        wt = cli_file_weight_type(w);
    }
    cli_thread_wait_policy(wt != CLF_WEIGHT_F32 ? CLI_THREADS_OPENMP : CLI_THREADS_BLAS);
    if ((st = clf_translator_open(&to, &t->tr)) != CLF_OK ||
        (st = clf_translator_set_languages(t->tr, t->o.source_lang, t->o.target_lang)) != CLF_OK)
        return st;
    clf_translator_get_info(t->tr, &t->info);
    if (t->info.note)
        fprintf(stderr, "clformer: note: %s\n", t->info.note);
    const clf_generate_config *g = &t->info.config->generate;
    if (t->o.beam <= 0 && t->o.n_best > g->beam)
        return clf_error(CLF_ERR_INPUT,
                         "translate: --n-best %d is more than %s's generate.beam %d (give "
                         "--beam)",
                         t->o.n_best, t->info.config->path, g->beam);
    clf_translate_opts *d = &t->topts;
    clf_translate_opts_default(d);
    d->beam = t->o.beam;
    d->n_best = t->o.n_best;
    d->length_penalty = t->o.length_penalty;
    d->max_len = t->o.max_len;
    d->beam_style = t->o.beam_style;
    d->forced_eos = t->o.forced_eos;
    d->early_stopping = t->o.early_stopping;
    d->use_cache = t->o.use_cache;
    d->sync_steps = t->o.sync_steps;
    d->max_batch = t->o.batch;
    d->want_attention = t->o.attn_path || t->o.png_prefix;
    d->want_scores = t->o.n_best_given; /* the score column, for greedy decoding too */
    /* the options checked before any input is read (a language the model needs, ...) */
    if ((st = clf_translator_translate(t->tr, NULL, NULL, 0, d, NULL)) != CLF_OK)
        return st;
    if (!(t->res = calloc((size_t)t->o.batch, sizeof *t->res)) ||
        !(t->text = calloc((size_t)t->o.batch, sizeof *t->text)) ||
        !(t->text_len = calloc((size_t)t->o.batch, sizeof *t->text_len)))
        return clf_error(CLF_ERR_NOMEM, "translate: out of host memory for --batch %d", t->o.batch);
    return CLF_OK;
}

static void translator_free(translator *t)
{
    if (t->res)
        clf_translations_free(t->res, t->o.batch);
    free(t->res);
    free(t->text);
    free(t->text_len);
    clf_translator_free(t->tr);
    tr_attention_free(&t->attn);
    free(t->btext);
    free(t->line);
}

/* Under mpirun (dist.h): rank 0 reads rounds of --batch x ranks lines and sends each round
 * to every rank; rank r translates the round's r-th batch (so batches are those of one
 * process) and rank 0 gathers the output and prints it in input order. */
static clf_status translate_ranks(translator *t, cli_dist *d, src_line *lines, int *count)
{
    clf_status st = CLF_OK;
    char *round = NULL, *mine = NULL, *all = NULL;
    size_t round_len = 0, mine_len = 0, all_len = 0;
    long base = 0; /* index of the round's first line */
    FILE *in = NULL, *out = NULL;
    for (;;) {
        if (d->rank == 0) { /* the round, each line ending in \n */
            FILE *mem = open_memstream(&round, &round_len);
            if (!mem)
                return clf_error(CLF_ERR_NOMEM, "translate: out of host memory");
            /* read_line's bound holds here too; a line over it is sent with the one byte
             * more than the bound it keeps, so that the rank that reads it refuses it. */
            t->in = stdin;
            for (long i = 0; i < (long)t->o.batch * d->size; i++) {
                size_t len = 0;
                int got = 0, too_long = 0;
                errno = 0;
                if ((st = read_line(t, &got, &len, &too_long)) != CLF_OK || !got)
                    break;
                fwrite(t->line, 1, len, mem);
                fputc('\n', mem);
            }
            if (fclose(mem) != 0 && st == CLF_OK)
                st = clf_error(CLF_ERR_NOMEM, "translate: out of host memory");
            if (st != CLF_OK)
                goto fail;
        }
        if ((st = cli_dist_bcast_bytes(d, &round, &round_len)) != CLF_OK || round_len == 0)
            goto fail;
        /* this rank's lines: [rank x batch, (rank + 1) x batch) of the round */
        size_t from = round_len, to = round_len;
        long line = 0, first = (long)d->rank * t->o.batch, end = first + t->o.batch;
        for (size_t i = 0; i <= round_len; i++) {
            if (line == first && from == round_len)
                from = i;
            if (line == end) {
                to = i;
                break;
            }
            if (i < round_len && round[i] == '\n')
                line++;
        }
        out = open_memstream(&mine, &mine_len);
        if (!out) {
            st = clf_error(CLF_ERR_NOMEM, "translate: out of host memory");
            goto fail;
        }
        if (to > from) {
            if (!(in = fmemopen(round + from, to - from, "r"))) {
                st = clf_error(CLF_ERR_NOMEM, "translate: out of host memory");
                goto fail;
            }
            t->in = in, t->out = out;
            t->lines_read = base + first;
            if ((st = read_batch(t, lines, count)) != CLF_OK ||
                (st = translate_batch(t, lines, *count)) != CLF_OK ||
                (st = write_batch(t, lines, *count)) != CLF_OK)
                goto fail;
            clf_translations_free(t->res, *count);
            *count = 0;
            fclose(in);
            in = NULL;
        }
        int bad = fclose(out) != 0;
        out = NULL;
        if (bad) {
            st = clf_error(CLF_ERR_NOMEM, "translate: out of host memory");
            goto fail;
        }
        if ((st = cli_dist_gather_bytes(d, mine, mine_len, &all, &all_len)) != CLF_OK)
            goto fail;
        if (d->rank == 0 && (fwrite(all, 1, all_len, stdout) != all_len || fflush(stdout) != 0)) {
            st = clf_error(CLF_ERR_IO, "stdout: write failed: %s", strerror(errno));
            goto fail;
        }
        for (size_t i = 0; i < round_len; i++)
            base += round[i] == '\n';
        free(round), free(mine), free(all);
        round = mine = all = NULL;
        round_len = mine_len = all_len = 0;
    }
fail:
    if (in)
        fclose(in);
    if (out)
        fclose(out);
    free(round), free(mine), free(all);
    t->in = stdin, t->out = stdout;
    t->lines_read = base;
    return st;
}

int clf_cmd_translate(int argc, char **argv)
{
    translator t = {0};
    int rc = parse_args(argc, argv, &t.o);
    if (rc >= 0)
        return rc;
    clf_status st;
    src_line *lines = calloc((size_t)t.o.batch, sizeof *lines);
    int count = 0;
    cli_dist d;
    t.in = stdin, t.out = stdout;
    if ((st = cli_dist_init(&d)) != CLF_OK)
        goto fail;
    if (d.size > 1 && (t.o.attn_path || t.o.png_prefix)) {
        st = clf_error(CLF_ERR_INPUT,
                       "translate: --attention and --attention-png need one "
                       "process, not %d (mpirun)",
                       d.size);
        goto fail;
    }
    if (!lines) {
        st = clf_error(CLF_ERR_NOMEM, "translate: out of host memory for --batch %d", t.o.batch);
        goto fail;
    }
    double t_open = cli_now_s();
    if ((st = translator_open(&t)) != CLF_OK)
        goto fail;
    t.open_s = cli_now_s() - t_open;
    for (;;) {
        if (d.size > 1) {
            st = translate_ranks(&t, &d, lines, &count);
            break;
        }
        if ((st = read_batch(&t, lines, &count)) != CLF_OK || count == 0)
            break;
        if ((st = translate_batch(&t, lines, count)) != CLF_OK)
            break;
        if ((st = write_batch(&t, lines, count)) != CLF_OK)
            break;
        clf_translations_free(t.res, count);
        count = 0;
    }
    if (st == CLF_OK && t.o.attn_path)
        st = tr_attention_write(&t.attn, t.o.attn_path);
    double totals[3] = {(double)t.decoded_lines, (double)t.out_tokens, (double)t.lines_refused};
    if (st == CLF_OK && d.size > 1 && (st = cli_dist_sum(&d, totals, 3)) == CLF_OK)
        t.decoded_lines = (long)totals[0], t.out_tokens = (long)totals[1],
        t.lines_refused = (long)totals[2];
    /* under mpirun: every rank's lines and tokens, rank 0's decoding time and memory */
    if (st == CLF_OK && t.o.stats) {
        double now = 0, peak = 0;
        char mem[96] = "";
        if (cli_resident_mib(&now, &peak))
            snprintf(mem, sizeof mem, "; resident %.0f MiB, at most %.0f MiB", now, peak);
        fprintf(stderr,
                "clformer: translate: %ld lines, %ld decoded, %ld output tokens in %.3f s: "
                "%.1f tokens/s (loading the model took %.3f s)%s\n",
                t.lines_read, t.decoded_lines, t.out_tokens, t.decode_s,
                t.decode_s > 0.0 ? (double)t.out_tokens / t.decode_s : 0.0, t.open_s, mem);
        clf_translator_stats ds;
        clf_translator_get_stats(t.tr, &ds);
        if (ds.steps > 0)
            fprintf(stderr,
                    "clformer: translate: %lld decoder steps: %.1f backend calls, %.3f ms a step, "
                    "%.3f ms of it in decoding's host code\n",
                    ds.steps, (double)ds.step_calls / (double)ds.steps, 1e3 * ds.step_s / ds.steps,
                    1e3 * ds.host_s / ds.steps);
    }
    /* The sum, the same on every rank: they fail together (rank 0 says it once), so that no
     * rank aborts the job while another is already finalizing MPI (Open MPI can hang in
     * that race) */
    if (st == CLF_OK && t.lines_refused > 0) {
        st = clf_error(CLF_ERR_INPUT,
                       "translate: %ld of %ld input lines refused (warnings above); their output "
                       "lines are empty",
                       t.lines_refused, t.lines_read);
        d.failed_together = 1;
    }
fail:
    free(lines);
    translator_free(&t);
    return cli_dist_exit(&d, st, 0);
}
