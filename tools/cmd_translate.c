/* clformer translate: sentences on stdin, translations on stdout, one line per line.
 *
 * Lines are read in batches of --batch, tokenized with the source vocabulary, framed as
 * the tutorial frames them ([SOS] words [EOS], padded with the model's pad_id to the
 * batch's longest) and decoded together by clf_decode (greedy, or beam search with
 * --beam). The output words are those of the target vocabulary joined by single spaces,
 * special tokens left out. Each batch's lines are written, in input order, and flushed
 * before the next batch is read, so an error leaves only whole lines of earlier batches.
 *
 * Decisions a user relies on (README):
 *   - an empty or all-blank line is not decoded: its output is an empty line (with
 *     --n-best N, N lines `0.000000<TAB>`); with --attention its tensor is [0, 0] and
 *     --attention-png writes no image for it;
 *   - a line whose framed length (tokens + 2) exceeds the model's max_len is an error
 *     naming the line (exit 2), never a silent truncation;
 *   - a line that is not valid UTF-8 is an error naming the line and the byte (exit 2);
 *   - --max-len defaults to 2 * (tokens of the batch's longest line) + 10, always capped
 *     at the model's max_len - 1 (the decoder's positions); give --max-len for outputs
 *     that do not depend on how lines are batched;
 *   - --length-penalty defaults to GNMT's 0.6 for beam search, 0 (raw log-probability)
 *     for greedy decoding;
 *   - the files of --attention and --attention-png are indexed by line from 0. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "cli.h"
#include "png.h"
#include "clformer/decode.h"
#include "clformer/model.h"
#include "clformer/tensor.h"
#include "clformer/tokenizer.h"
#include "clformer/weights.h"

/* Sentences decoded together: enough rows for the GEMMs to reach most of their speed on
 * a CPU, few enough that the first lines come out quickly. */
#define DEFAULT_BATCH 32
/* GNMT's length-penalty alpha (Wu et al. 2016), a common default for beam search. */
#define DEFAULT_BEAM_LENGTH_PENALTY 0.6f
/* Default output limit: 2 * source tokens + 10, room for any plausible translation. */
#define MAX_LEN_FACTOR 2
#define MAX_LEN_EXTRA  10
/* Pixels per attention weight in each direction, so that short sentences stay visible. */
#define PNG_CELL 8

enum {
    OPT_SRC_VOCAB = 256,
    OPT_TGT_VOCAB,
    OPT_BEAM,
    OPT_N_BEST,
    OPT_MAX_LEN,
    OPT_LENGTH_PENALTY,
    OPT_BATCH,
    OPT_NO_CACHE,
    OPT_STATS,
    OPT_ATTENTION,
    OPT_ATTENTION_PNG,
    OPT_WEIGHT_TYPE,
};

typedef struct tr_opts {
    const char *cfg_path, *w_path, *src_vocab, *tgt_vocab;
    const char *attn_path;  /* --attention FILE, or NULL */
    const char *png_prefix; /* --attention-png PREFIX, or NULL */
    int beam, n_best;
    int n_best_given;     /* --n-best was given: `score<TAB>text` lines */
    int max_len;          /* --max-len, 0 = from the source lengths */
    float length_penalty; /* < 0 until given: then the default for the beam */
    int batch;            /* --batch */
    int use_cache;        /* 0 with --no-cache */
    int stats;            /* --stats: timing on stderr at the end */
    int weight_type_set;  /* --weight-type given; else the weights file's own type */
    clf_weight_type weight_type;
    cli_backend_opts bo;
} tr_opts;

/* One input line of the current batch. */
typedef struct src_line {
    long index;   /* from 0 */
    int32_t *ids; /* source tokens without [SOS]/[EOS]; NULL when n == 0 */
    int n;        /* 0: empty or blank, not decoded */
} src_line;

/* Everything a run holds; freed by translator_free. */
typedef struct translator {
    tr_opts o;
    clf_config cfg;
    clf_tokenizer *src_tok, *tgt_tok;
    clf_tokenizer_specials src_sp, tgt_sp;
    const clf_backend_api *api;
    clf_backend *be;
    clf_model *model;
    clf_decode_opts dopts; /* max_len set per batch */
    char *line;            /* getline's buffer */
    size_t line_cap;
    long lines_read;
    int warned_unknown_id;
    clf_tensor *attn; /* --attention: one per line, data malloc'd */
    size_t n_attn, cap_attn;
    /* --stats: what clf_decode did and how long it took, loading excluded */
    double open_s, decode_s;
    long decoded_lines, out_tokens;
} translator;

static void usage(void)
{
    printf("usage: clformer translate -c model.yaml -w w.safetensors --src-vocab src.json\n"
           "       --tgt-vocab tgt.json [options] < sentences > translations\n"
           "One line in, one line out: the translation's words joined by single spaces, or\n"
           "detokenized by SentencePiece when the vocabularies are SentencePiece .model files.\n"
           "  --beam K             beam size (default 1: greedy)\n"
           "  --n-best N           N lines per input, `score<TAB>text`, best first (N <= K)\n"
           "  --max-len N          output tokens at most (default 2 * longest source line of\n"
           "                       the batch + 10; always <= the model's max_len - 1)\n"
           "  --length-penalty A   GNMT alpha: score = logprob / ((5 + len) / 6)^A\n"
           "                       (default 0.6 with --beam > 1, else 0)\n"
           "  --batch N            sentences decoded together (default %d)\n"
           "  --no-cache           re-run the whole decoder every step (slow; for comparison)\n"
           "  --weight-type T      f32|f16|bf16|int8 (default: the weights file's type, f32\n"
           "                       for a plain file). f16, bf16: the products of few rows\n"
           "                       (batch 1, small beams) read a 16-bit copy of the weight\n"
           "                       matrices, about twice as fast where memory bandwidth\n"
           "                       bounds them. int8: every product uses int8 weights (per\n"
           "                       output channel) and int8 activations (per row; cpu only)\n"
           "  --stats              at the end, on stderr: lines, output tokens and the time\n"
           "                       spent decoding them (tokens/s), loading excluded\n"
           "  --attention FILE     safetensors: F32 'attention.<i>' [out tokens (+EOS), source\n"
           "                       tokens incl. [SOS]/[EOS]] per line i (from 0), best hypothesis\n"
           "  --attention-png P    grayscale heatmap P.<i>.png per line (rows: output tokens)\n"
           "  --backend cpu|opencl|auto, --device D, --threads N, --plugin-dir DIR\n"
           "An empty line gives an empty line; a line longer than the model's max_len (with\n"
           "[SOS] and [EOS]) or not valid UTF-8 is an error (exit 2).\n",
           DEFAULT_BATCH);
}

/* Parses argv into o. Returns -1 to go on, else the exit code (0 after --help). */
static int parse_args(int argc, char **argv, tr_opts *o)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},
        {"weights", required_argument, NULL, 'w'},
        {"src-vocab", required_argument, NULL, OPT_SRC_VOCAB},
        {"tgt-vocab", required_argument, NULL, OPT_TGT_VOCAB},
        {"beam", required_argument, NULL, OPT_BEAM},
        {"n-best", required_argument, NULL, OPT_N_BEST},
        {"max-len", required_argument, NULL, OPT_MAX_LEN},
        {"length-penalty", required_argument, NULL, OPT_LENGTH_PENALTY},
        {"batch", required_argument, NULL, OPT_BATCH},
        {"no-cache", no_argument, NULL, OPT_NO_CACHE},
        {"stats", no_argument, NULL, OPT_STATS},
        {"attention", required_argument, NULL, OPT_ATTENTION},
        {"attention-png", required_argument, NULL, OPT_ATTENTION_PNG},
        {"weight-type", required_argument, NULL, OPT_WEIGHT_TYPE},
        CLI_BACKEND_LONGOPTS,
        {"help", no_argument, NULL, 'h'},
        {0}};
    *o = (tr_opts){.beam = 1,
                   .n_best = 1,
                   .length_penalty = -1.0f,
                   .batch = DEFAULT_BATCH,
                   .use_cache = 1,
                   .bo = {.threads = -1}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:w:" CLI_BACKEND_SHORTOPTS "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            o->cfg_path = optarg;
            break;
        case 'w':
            o->w_path = optarg;
            break;
        case OPT_SRC_VOCAB:
            o->src_vocab = optarg;
            break;
        case OPT_TGT_VOCAB:
            o->tgt_vocab = optarg;
            break;
        case OPT_BEAM:
            if (!cli_parse_int("--beam", optarg, 1, &o->beam))
                return 2;
            break;
        case OPT_N_BEST:
            if (!cli_parse_int("--n-best", optarg, 1, &o->n_best))
                return 2;
            o->n_best_given = 1;
            break;
        case OPT_MAX_LEN:
            if (!cli_parse_int("--max-len", optarg, 1, &o->max_len))
                return 2;
            break;
        case OPT_LENGTH_PENALTY: {
            char *end = NULL;
            errno = 0;
            float v = strtof(optarg, &end);
            if (errno || end == optarg || *end || !(v >= 0.0f && v <= 100.0f))
                return cli_usage_error("--length-penalty: expected a number in [0, 100], got "
                                       "'%s'",
                                       optarg);
            o->length_penalty = v;
            break;
        }
        case OPT_BATCH:
            if (!cli_parse_int("--batch", optarg, 1, &o->batch))
                return 2;
            break;
        case OPT_NO_CACHE:
            o->use_cache = 0;
            break;
        case OPT_STATS:
            o->stats = 1;
            break;
        case OPT_ATTENTION:
            o->attn_path = optarg;
            break;
        case OPT_ATTENTION_PNG:
            o->png_prefix = optarg;
            break;
        case OPT_WEIGHT_TYPE:
            if (clf_weight_type_parse(optarg, &o->weight_type) != CLF_OK)
                return cli_usage_error("--weight-type: expected f32, f16, bf16 or int8, got '%s'",
                                       optarg);
            o->weight_type_set = 1;
            break;
        case 'h':
            usage();
            return 0;
        default:
            if (cli_backend_option(c, optarg, &o->bo) != 1)
                return 2;
        }
    }
    if (optind < argc)
        return cli_usage_error("translate: unexpected argument '%s' (sentences come on stdin)",
                               argv[optind]);
    if (!o->cfg_path || !o->w_path || !o->src_vocab || !o->tgt_vocab)
        return cli_usage_error("translate: -c, -w, --src-vocab and --tgt-vocab are all required");
    if (o->n_best > o->beam)
        return cli_usage_error("translate: --n-best %d is more than --beam %d", o->n_best, o->beam);
    if (o->length_penalty < 0.0f)
        o->length_penalty = o->beam > 1 ? DEFAULT_BEAM_LENGTH_PENALTY : 0.0f;
    return -1;
}

/* Loads a vocabulary for a model side and checks that they fit (cli_check_vocab). */
static clf_status load_vocab(const char *path, const char *side, int model_vocab, int pad_id,
                             clf_tokenizer **tok, clf_tokenizer_specials *sp)
{
    clf_status st = clf_tokenizer_load(path, tok);
    if (st != CLF_OK)
        return st;
    *sp = clf_tokenizer_special_ids(*tok);
    return cli_check_vocab(path, side, *tok, model_vocab, pad_id);
}

/* Reads up to o.batch lines into lines[], tokenized and checked. *count is how many were
 * read (0 at the end of the input). */
static clf_status read_batch(translator *t, src_line *lines, int *count)
{
    *count = 0;
    while (*count < t->o.batch) {
        errno = 0;
        ssize_t len = getline(&t->line, &t->line_cap, stdin);
        if (len < 0) {
            if (ferror(stdin))
                return clf_error(CLF_ERR_IO, "stdin: read error: %s", strerror(errno));
            break;
        }
        if (len > 0 && t->line[len - 1] == '\n')
            len--;
        src_line *l = &lines[*count];
        l->index = t->lines_read++;
        clf_status st = clf_tokenizer_encode(t->src_tok, t->line, (size_t)len, &l->ids, &l->n);
        if (st != CLF_OK)
            return clf_error_context(st, "input line %ld", l->index + 1);
        (*count)++; /* counted now, so that its ids are freed with the batch */
        if (l->n + 2 > t->cfg.model.max_len)
            return clf_error(CLF_ERR_INPUT,
                             "input line %ld has %d tokens, %d with [SOS] and [EOS], more than "
                             "the model's max_len %d (split the line)",
                             l->index + 1, l->n, l->n + 2, t->cfg.model.max_len);
    }
    return CLF_OK;
}

/* Decodes the non-empty lines of the batch; res->hyps of the k-th non-empty line start at
 * k * n_best. res is zeroed when every line is empty. */
static clf_status decode_batch(translator *t, const src_line *lines, int count,
                               clf_decode_result *res)
{
    clf_status st = CLF_OK;
    int32_t *src = NULL;
    int rows = 0, longest = 0;
    memset(res, 0, sizeof *res);
    for (int i = 0; i < count; i++) {
        if (lines[i].n > 0)
            rows++;
        if (lines[i].n > longest)
            longest = lines[i].n;
    }
    if (rows == 0)
        return CLF_OK;
    const int S = longest + 2;
    src = malloc((size_t)rows * S * sizeof *src);
    if (!src)
        return clf_error(CLF_ERR_NOMEM, "translate: out of host memory");
    int r = 0;
    for (int i = 0; i < count; i++) {
        if (lines[i].n == 0)
            continue;
        int32_t *row = src + (size_t)r++ * S;
        row[0] = t->src_sp.sos;
        memcpy(row + 1, lines[i].ids, (size_t)lines[i].n * sizeof *row);
        row[lines[i].n + 1] = t->src_sp.eos;
        for (int j = lines[i].n + 2; j < S; j++)
            row[j] = t->cfg.model.pad_id;
    }
    clf_decode_opts o = t->dopts;
    int cap = t->cfg.model.max_len - 1;
    o.max_len = t->o.max_len > 0 ? t->o.max_len : MAX_LEN_FACTOR * longest + MAX_LEN_EXTRA;
    if (o.max_len > cap)
        o.max_len = cap;
    double t0 = cli_now_s();
    st = clf_decode(t->model, src, rows, S, &o, res);
    t->decode_s += cli_now_s() - t0;
    if (st != CLF_OK)
        memset(res, 0, sizeof *res); /* nothing to free after a failure */
    else {
        t->decoded_lines += rows;
        for (int i = 0; i < rows; i++) /* the best hypothesis: what goes to stdout */
            t->out_tokens += res->hyps[(size_t)i * res->n_best].len;
    }
    free(src);
    return st;
}

/* The words of h's tokens, specials left out, as a malloc'd string. */
static clf_status hyp_text(translator *t, const clf_hypothesis *h, char **text)
{
    *text = NULL;
    int size = clf_tokenizer_size(t->tgt_tok), kept = 0;
    int32_t *ids = malloc((size_t)(h->len > 0 ? h->len : 1) * sizeof *ids);
    if (!ids)
        return clf_error(CLF_ERR_NOMEM, "translate: out of host memory");
    for (int i = 0; i < h->len; i++) {
        int32_t id = h->tokens[i];
        if (id < 0 || id >= size) {
            /* A model whose tgt_vocab is larger than the vocabulary (rounded up, say) can
             * emit ids with no word: leave them out like specials, and say so once. */
            if (!t->warned_unknown_id)
                fprintf(stderr,
                        "clformer: warning: the model emitted id %d, beyond the %d words of "
                        "%s; such ids are left out\n",
                        (int)id, size, t->o.tgt_vocab);
            t->warned_unknown_id = 1;
            continue;
        }
        ids[kept++] = id;
    }
    clf_status st = clf_tokenizer_decode(t->tgt_tok, ids, kept, 1, text);
    free(ids);
    if (st != CLF_OK)
        return st;
    /* A vocabulary file may hold a word with a line break; one line out per line in. */
    for (char *p = *text; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    return CLF_OK;
}

/* Copies the best hypothesis' attention of line l (columns: its framed source, without
 * the batch's padding) into a new tensor of t->attn; a [0, 0] tensor for an empty line. */
static clf_status keep_attention(translator *t, const src_line *l, const clf_hypothesis *h,
                                 int src_len)
{
    if (t->n_attn == t->cap_attn) {
        size_t cap = t->cap_attn ? 2 * t->cap_attn : 64;
        clf_tensor *a = realloc(t->attn, cap * sizeof *a);
        if (!a)
            return clf_error(CLF_ERR_NOMEM, "translate: out of host memory");
        t->attn = a;
        t->cap_attn = cap;
    }
    clf_tensor *x = &t->attn[t->n_attn];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "attention.%ld", l->index);
    x->dtype = CLF_F32;
    x->ndim = 2;
    t->n_attn++;
    if (l->n == 0)
        return CLF_OK;
    if (!h->attention)
        return clf_error(CLF_ERR_INTERNAL, "translate: the decoder returned no attention");
    int rows = h->len + h->finished, cols = l->n + 2;
    float *d = malloc((size_t)(rows > 0 ? rows : 1) * cols * sizeof *d);
    if (!d)
        return clf_error(CLF_ERR_NOMEM, "translate: out of host memory");
    for (int r = 0; r < rows; r++)
        memcpy(d + (size_t)r * cols, h->attention + (size_t)r * src_len, cols * sizeof *d);
    x->shape[0] = rows;
    x->shape[1] = cols;
    x->data = d;
    x->nbytes = (size_t)rows * cols * sizeof *d;
    return CLF_OK;
}

/* Writes PREFIX.<index>.png: the weights of the best hypothesis as gray levels (0 black,
 * 1 white), PNG_CELL x PNG_CELL pixels each, rows = output tokens, columns = source. */
static clf_status write_png(translator *t, const src_line *l, const clf_hypothesis *h, int src_len)
{
    clf_status st = CLF_OK;
    int rows = h->len + h->finished, cols = l->n + 2;
    if (rows < 1)
        return CLF_OK; /* nothing was generated: no image has 0 rows */
    if (!h->attention)
        return clf_error(CLF_ERR_INTERNAL, "translate: the decoder returned no attention");
    size_t plen = strlen(t->o.png_prefix) + 32;
    char *path = malloc(plen);
    uint8_t *px = malloc((size_t)rows * PNG_CELL * cols * PNG_CELL);
    if (!path || !px) {
        st = clf_error(CLF_ERR_NOMEM, "translate: out of host memory");
        goto fail;
    }
    snprintf(path, plen, "%s.%ld.png", t->o.png_prefix, l->index);
    const int W = cols * PNG_CELL;
    for (int r = 0; r < rows; r++) {
        uint8_t *line = px + (size_t)r * PNG_CELL * W;
        for (int c = 0; c < cols; c++) {
            float w = h->attention[(size_t)r * src_len + c];
            w = w < 0.0f ? 0.0f : (w > 1.0f ? 1.0f : w);
            memset(line + c * PNG_CELL, (int)(w * 255.0f + 0.5f), PNG_CELL);
        }
        for (int k = 1; k < PNG_CELL; k++)
            memcpy(line + (size_t)k * W, line, W);
    }
    st = png_write_gray8(path, px, W, rows * PNG_CELL);
fail:
    free(path);
    free(px);
    return st;
}

/* Writes the batch's output lines in input order and keeps what --attention and
 * --attention-png want. */
static clf_status write_batch(translator *t, const src_line *lines, int count,
                              const clf_decode_result *res)
{
    clf_status st = CLF_OK;
    const int N = t->o.n_best, per_line = t->o.n_best_given ? N : 1;
    char *buf = NULL, *text = NULL;
    size_t len = 0;
    /* The batch goes to memory first and to stdout only once all of its lines (and their
     * attention files) are done: an error leaves no partial batch behind. */
    FILE *mem = open_memstream(&buf, &len);
    if (!mem)
        return clf_error(CLF_ERR_NOMEM, "translate: out of host memory");
    int k = 0; /* index of the line among the decoded ones */
    for (int i = 0; i < count; i++) {
        const src_line *l = &lines[i];
        const clf_hypothesis *best = l->n > 0 ? &res->hyps[(size_t)k++ * N] : NULL;
        for (int j = 0; j < per_line; j++) {
            if (best && (st = hyp_text(t, &best[j], &text)) != CLF_OK)
                goto fail;
            if (t->o.n_best_given)
                fprintf(mem, "%.6f\t", best ? best[j].score : 0.0f);
            fprintf(mem, "%s\n", text ? text : "");
            free(text);
            text = NULL;
        }
        if (t->o.attn_path && (st = keep_attention(t, l, best, res->src_len)) != CLF_OK)
            goto fail;
        if (t->o.png_prefix && best && (st = write_png(t, l, best, res->src_len)) != CLF_OK)
            goto fail;
    }
    int bad = fclose(mem) != 0;
    mem = NULL;
    if (bad) {
        st = clf_error(CLF_ERR_NOMEM, "translate: out of host memory");
        goto fail;
    }
    if (fwrite(buf, 1, len, stdout) != len || fflush(stdout) != 0)
        st = clf_error(CLF_ERR_IO, "stdout: write failed: %s", strerror(errno));
fail:
    if (mem)
        fclose(mem);
    free(text);
    free(buf);
    return st;
}

/* Loads the config, the weights, both vocabularies and the backend. */
static clf_status translator_open(translator *t)
{
    clf_status st;
    clf_weights *w = NULL;
    const clf_model_config *mc = &t->cfg.model;
    /* before anything loads libgomp or OpenBLAS (op plugins with the config, backends):
     * with F16 weights a decoding step is the backend's own OpenMP loops back to back */
    if (!t->o.weight_type_set)
        t->o.weight_type = cli_file_weight_type(t->o.w_path);
    cli_thread_wait_policy(t->o.weight_type != CLF_WEIGHT_F32 ? CLI_THREADS_OPENMP
                                                              : CLI_THREADS_BLAS);
    if ((st = clf_config_load_with_plugins(t->o.cfg_path, t->o.bo.plugin_dir, &t->cfg)) != CLF_OK)
        goto fail;
    if ((st = load_vocab(t->o.src_vocab, "src", mc->src_vocab, mc->pad_id, &t->src_tok,
                         &t->src_sp)) != CLF_OK ||
        (st = load_vocab(t->o.tgt_vocab, "tgt", mc->tgt_vocab, mc->pad_id, &t->tgt_tok,
                         &t->tgt_sp)) != CLF_OK)
        goto fail;
    if ((st = clf_weights_load(t->o.w_path, mc, &w)) != CLF_OK)
        goto fail;
    if ((st = cli_open_backend(&t->cfg, &t->o.bo, &t->api, &t->be)) != CLF_OK)
        goto fail;
    if ((st = clf_model_create(mc, w, t->api, t->be, &t->model)) != CLF_OK)
        goto fail;
    if (!t->o.weight_type_set)
        t->o.weight_type = w->stored_type;
    if ((st = clf_model_set_weight_type(t->model, t->o.weight_type)) != CLF_OK)
        goto fail;
    clf_decode_opts_default(mc, &t->dopts);
    t->dopts.beam = t->o.beam;
    t->dopts.n_best = t->o.n_best;
    t->dopts.length_penalty = t->o.length_penalty;
    t->dopts.use_cache = t->o.use_cache;
    t->dopts.sos_id = t->tgt_sp.sos;
    t->dopts.eos_id = t->tgt_sp.eos;
    t->dopts.pad_id = mc->pad_id;
    t->dopts.want_attention = t->o.attn_path || t->o.png_prefix;
fail:
    clf_weights_free(w); /* the model holds its own copy on the device */
    return st;
}

static void translator_free(translator *t)
{
    clf_model_free(t->model);
    if (t->be)
        t->api->close(t->be);
    clf_tokenizer_free(t->src_tok);
    clf_tokenizer_free(t->tgt_tok);
    for (size_t i = 0; i < t->n_attn; i++)
        free(t->attn[i].data);
    free(t->attn);
    free(t->line);
}

int clf_cmd_translate(int argc, char **argv)
{
    translator t = {0};
    int rc = parse_args(argc, argv, &t.o);
    if (rc >= 0)
        return rc;
    clf_status st;
    src_line *lines = calloc((size_t)t.o.batch, sizeof *lines);
    clf_decode_result res = {0};
    int count = 0;
    if (!lines) {
        st = clf_error(CLF_ERR_NOMEM, "translate: out of host memory for --batch %d", t.o.batch);
        goto fail;
    }
    double t_open = cli_now_s();
    if ((st = translator_open(&t)) != CLF_OK)
        goto fail;
    t.open_s = cli_now_s() - t_open;
    for (;;) {
        if ((st = read_batch(&t, lines, &count)) != CLF_OK || count == 0)
            break;
        if ((st = decode_batch(&t, lines, count, &res)) != CLF_OK)
            break;
        if ((st = write_batch(&t, lines, count, &res)) != CLF_OK)
            break;
        if (res.hyps)
            clf_decode_result_free(&res);
        memset(&res, 0, sizeof res);
        for (int i = 0; i < count; i++)
            free(lines[i].ids);
        count = 0;
    }
    if (st == CLF_OK && t.o.attn_path) {
        const char *meta[] = {"clformer.attention",
                              "cross-attention of the last decoder layer, mean of the heads, "
                              "best hypothesis; rows: output tokens (+[EOS]), columns: [SOS] "
                              "source [EOS]"};
        st = clf_safetensors_write(t.o.attn_path, t.attn, (int)t.n_attn, meta, 1);
    }
    if (st == CLF_OK && t.o.stats)
        fprintf(stderr,
                "clformer: translate: %ld lines, %ld decoded, %ld output tokens in %.3f s: "
                "%.1f tokens/s (loading the model took %.3f s)\n",
                t.lines_read, t.decoded_lines, t.out_tokens, t.decode_s,
                t.decode_s > 0.0 ? (double)t.out_tokens / t.decode_s : 0.0, t.open_s);
fail:
    if (res.hyps)
        clf_decode_result_free(&res);
    for (int i = 0; i < count; i++)
        free(lines[i].ids);
    free(lines);
    translator_free(&t);
    return st == CLF_OK ? 0 : cli_fail(st);
}
