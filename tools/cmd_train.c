/* clformer train: the experiment of a YAML's train: section, with progress, a CSV of the
 * curves, validation (loss, BLEU, sample translations) and checkpoints, in the run's
 * directory (run_dir.h).
 *
 * Decisions a user relies on (README):
 *   - vocabularies: train.vocab.src/tgt are loaded when they exist, else built from the
 *     training data (min_frequency) and saved there, never without words, with their
 *     provenance, which a later run checks against its data (run_vocab.h);
 *     model.src_vocab/tgt_vocab may be left out of the YAML (taken from the vocabularies)
 *     and, when given, must hold them;
 *   - a fresh run refuses a checkpoint directory that already holds last.safetensors
 *     (nothing a user trained is overwritten): --resume continues it instead;
 *   - <dir>/log.csv gets a row every log_every steps and at every validation; a resumed run
 *     appends to it after dropping rows past its checkpoint (steps it redoes);
 *     <dir>/config.yaml is the resolved YAML;
 *   - checkpoints: <dir>/step-<N>.safetensors every checkpoint.every steps and at the end,
 *     the newest `keep` of them kept, and <dir>/last.safetensors (a hard link to the
 *     newest); each is written under a temporary name, fsynced and renamed, the directory
 *     fsynced (clformer/fs.h), so a kill or a power loss leaves the previous one whole;
 *   - <dir>/train.lock (clf_fs_lock_acquire: flock, which the kernel drops when the holder
 *     dies) keeps a second run out of the directory while one runs; the temporary files a
 *     killed run left are removed under the lock;
 *   - Ctrl-C (SIGINT) or SIGTERM finishes the step in progress, writes a checkpoint and
 *     exits with 130: `--resume` then continues exactly where it stopped;
 *   - a many-language model (model.source_language / target_language: M2M-100, NLLB,
 *     mBART-50) trains on pairs of one language pair, train.source_lang / target_lang or
 *     --source-lang / --target-lang (a side whose model lists one language has it): the
 *     source framed as translate frames it, the target as transformers' generate() sees it,
 *     decoder input `start lang y`, labels `lang y eos`, the loss over the language token
 *     too, as transformers' training with the family's tokenizer (text_target) computes it;
 *   - validation BLEU is corpus BLEU (4-gram, brevity penalty) over the target
 *     vocabulary's words of greedy translations against the references' words, so a word
 *     outside the vocabulary is [UNK] on both sides. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_model.h"
#include "dist.h"
#include "run_dir.h"
#include "run_vocab.h"
#include "clformer/dataset.h"
#include "clformer/decode.h"
#include "clformer/fs.h"
#include "clformer/metrics.h"
#include "clformer/model.h"
#include "clformer/tokenizer.h"
#include "clformer/train.h"
#include "clformer/weights.h"

/* Validation sentences translated for BLEU at most (greedy, batched), and shown. */
#define VALID_BLEU_MAX 1000
#define VALID_SAMPLES  3

static volatile sig_atomic_t stop_requested;
/* under mpirun a signal only asks (on_signal_ask); the ranks stop together at the step
 * where the sum over ranks says one asked (dist.h) */
static volatile sig_atomic_t signal_pending;
/* train_loop's result after a signal: not an error, exit code 130 (128 + SIGINT) */
#define STOPPED ((clf_status)1000)

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void on_signal_ask(int sig)
{
    (void)sig;
    signal_pending = 1;
}

typedef struct train_opts {
    const char *cfg_path;
    const char *source_lang, *target_lang; /* --source-lang, --target-lang, or NULL */
    int resume;
    int quiet;
    cli_backend_opts bo;
} train_opts;

typedef struct run {
    train_opts o;
    cli_model m; /* the config, the backend, the model */
    char *config_yaml;
    clf_tokenizer *src_tok, *tgt_tok;
    clf_framing framing; /* clf_model_framing's: the ids translate frames with */
    clf_dataset *train, *valid;
    clf_batcher *batcher, *valid_batcher;
    clf_trainer *trainer;
    cli_run_dir dir;   /* train.checkpoint.dir */
    clf_fs_lock *lock; /* its lock, held for the whole run (rank 0) */
    FILE *csv;
    int tty;
    long long total_steps; /* planned optimizer steps (for the ETA) */
    cli_dist dist;         /* data-parallel ranks (one outside mpirun) */
} run;

static void usage(void)
{
    printf("usage: clformer train -c experiment.yaml [--resume] [options]\n"
           "Trains the model of the YAML's model: section as its train: section says.\n"
           "  --resume      continue from <checkpoint.dir>/last.safetensors\n"
           "  --quiet       no progress bar, no per-step log lines\n"
           "  --source-lang CODE, --target-lang CODE  a many-language model's pair (over\n"
           "                train.source_lang / target_lang; `clformer info -m DIR` lists them)\n"
           "  --backend cpu|opencl|auto, --device D, --threads N, --plugin-dir DIR\n"
           "Writes <dir>/log.csv (step,epoch,loss,lr,tokens_per_s,valid_loss,valid_bleu),\n"
           "<dir>/config.yaml and checkpoints <dir>/step-<N>.safetensors + last.safetensors.\n"
           "SIGINT/SIGTERM: finish the step, write a checkpoint, exit 130.\n"
           "Under mpirun -np N: data-parallel, accumulate x N micro-batches a step.\n");
}

enum { OPT_SOURCE_LANG = 256, OPT_TARGET_LANG };

static int parse_args(int argc, char **argv, train_opts *o)
{
    *o = (train_opts){.bo = {.threads = -1}};
    const cli_opt opts[] = {CLI_STRING("config", 'c', &o->cfg_path),
                            CLI_FLAG("resume", 'r', &o->resume),
                            CLI_FLAG("quiet", 'q', &o->quiet),
                            CLI_STRING("source-lang", OPT_SOURCE_LANG, &o->source_lang),
                            CLI_STRING("target-lang", OPT_TARGET_LANG, &o->target_lang),
                            CLI_BACKEND_OPTS(&o->bo),
                            {0}};
    int rc = cli_parse_options(argc, argv, opts, usage);
    if (rc >= 0)
        return rc;
    if (optind < argc)
        return cli_usage_error("train: unexpected argument '%s'", argv[optind]);
    if (!o->cfg_path)
        return cli_usage_error("train: -c experiment.yaml is required");
    return -1;
}

/* ---------------------------------------------------------------------------------- */
/* files                                                                               */

/* Takes the lock of the run's directory (rank 0, for the whole job) and removes what a
 * killed run left half-written. */
static clf_status lock_run(run *r)
{
    return r->dist.rank > 0 ? CLF_OK : run_dir_lock(&r->dir, &r->lock);
}

/* The resolved YAML as a string (for checkpoints) and as <dir>/config.yaml. */
static clf_status write_config(run *r)
{
    size_t len = 0;
    FILE *mem = open_memstream(&r->config_yaml, &len);
    if (!mem)
        return clf_error(CLF_ERR_NOMEM, "train: out of host memory");
    clf_status st = clf_config_dump(&r->m.cfg, mem);
    fclose(mem);
    if (st != CLF_OK)
        return st;
    if (r->dist.rank > 0) /* rank 0 writes the files */
        return CLF_OK;
    return run_dir_write_config(&r->dir, r->config_yaml, len);
}

/* A many-language model's languages into the framing (one lookup with translate's,
 * clf_tokenizer_language_id): the source's token where model.source_language puts it, the
 * target's first in the labels (model.target_language: forced). The code is the flag's,
 * else train.source_lang / target_lang, else the model's only language of that side; a
 * side that places a token and has no code is refused, as is a code the model lacks or a
 * code for a side without language tokens. */
static clf_status resolve_languages(run *r)
{
    const clf_config *cfg = &r->m.cfg;
    const clf_train_config *tc = &cfg->train;
    const clf_languages_config *l = &cfg->languages;
    const char *flag[2] = {r->o.source_lang, r->o.target_lang};
    const char *key[2] = {tc->source_lang, tc->target_lang};
    const char(*only[2])[CLF_LANGUAGE_CODE_MAX] = {l->source, l->target};
    const int n[2] = {l->n_source, l->n_target};
    const int placed[2] = {cfg->model.source_language != CLF_LANG_NONE,
                           cfg->model.target_language != CLF_TGT_LANG_NONE};
    const clf_tokenizer *tok[2] = {r->src_tok, r->tgt_tok};
    const char *vocab[2] = {tc->vocab_src, tc->vocab_tgt};
    static const char *const side[2] = {"source", "target"};
    for (int i = 0; i < 2; i++) {
        const char *code = flag[i]                  ? flag[i]
                           : key[i][0]              ? key[i]
                           : placed[i] && n[i] == 1 ? only[i][0]
                                                    : NULL;
        if (!code) {
            if (placed[i])
                return clf_error(CLF_ERR_INPUT,
                                 "train: %s puts a %s language token on every pair: give "
                                 "train.%s_lang (or --%s-lang CODE; `clformer info -m DIR` lists "
                                 "the codes)",
                                 cfg->path, side[i], side[i], side[i]);
            continue;
        }
        int32_t id;
        clf_status st = clf_tokenizer_language_id(tok[i], cfg, i, code, vocab[i], &id);
        if (st != CLF_OK)
            return clf_error_context(st, "train");
        if (i == 0) {
            r->framing.src_lang = id;
        } else {
            r->framing.tgt_lang = id;
            r->framing.tgt_lang_forced = 1;
        }
    }
    return CLF_OK;
}

/* Loads both vocabularies (word-level JSON or SentencePiece .model), or builds (and saves)
 * word-level ones from the training data (run_vocab.h), then sizes the model's vocabularies
 * and its framing from them. */
static clf_status prepare_vocabs(run *r)
{
    const clf_train_config *tc = &r->m.cfg.train;
    clf_model_config *mc = &r->m.cfg.model;
    clf_status st = run_vocabs_load_or_build(tc, &r->src_tok, &r->tgt_tok);
    if (st != CLF_OK)
        return st;
    const struct {
        const char *side, *path;
        clf_tokenizer *tok;
        int *size;
    } sides[2] = {{"src", tc->vocab_src, r->src_tok, &mc->src_vocab},
                  {"tgt", tc->vocab_tgt, r->tgt_tok, &mc->tgt_vocab}};
    /* a size the YAML left out is the vocabulary's */
    for (int i = 0; i < 2; i++) {
        if (*sides[i].size == 0)
            *sides[i].size = clf_tokenizer_size(sides[i].tok);
        int size = clf_tokenizer_size(sides[i].tok);
        if (size > *sides[i].size)
            return clf_error(CLF_ERR_INPUT,
                             "%s: the %s vocabulary has %d words but the model's %s_vocab is %d "
                             "(a vocabulary for another model?)",
                             sides[i].path, sides[i].side, size, sides[i].side, *sides[i].size);
    }
    /* the memory bound reading the config checked, again with the sizes now known */
    if ((st = clf_config_check_model_bytes(&r->m.cfg)) != CLF_OK) {
        char why[1024];
        snprintf(why, sizeof why, "%s", clf_last_error());
        return clf_error(st, "%s (src_vocab and tgt_vocab as filled in from %s and %s)", why,
                         tc->vocab_src, tc->vocab_tgt);
    }
    /* the specials the batches need: the model's keys, else the vocabularies' own (one rule
     * with translate's) */
    const clf_framing own = clf_tokenizer_framing(r->src_tok, r->tgt_tok);
    if ((st = clf_model_framing(mc, &own, &r->framing)) != CLF_OK)
        return clf_error_context(st, "%s", r->m.cfg.path);
    return resolve_languages(r);
}

static clf_status load_data(run *r)
{
    const clf_train_config *tc = &r->m.cfg.train;
    clf_dataset_opts o = {.src_path = tc->data_train,
                          .tgt_path = tc->data_train_tgt,
                          .src_tok = r->src_tok,
                          .tgt_tok = r->tgt_tok,
                          .max_len = tc->max_len};
    clf_status st = clf_dataset_load_framed(&o, &r->framing, &r->train);
    if (st != CLF_OK)
        return st;
    fprintf(stderr,
            "clformer: %s: %zu pairs (%zu skipped: %zu longer than max_len %d, %zu empty)\n",
            tc->data_train, clf_dataset_size(r->train), clf_dataset_skipped(r->train),
            clf_dataset_skipped_long(r->train), tc->max_len, clf_dataset_skipped_empty(r->train));
    if ((st = clf_batcher_create(r->train, tc->batch_size, tc->batch_tokens, tc->shuffle,
                                 (uint64_t)tc->seed, &r->batcher)) != CLF_OK)
        return st;
    if (tc->data_valid[0]) {
        o.src_path = tc->data_valid;
        o.tgt_path = tc->data_valid_tgt;
        if ((st = clf_dataset_load_framed(&o, &r->framing, &r->valid)) != CLF_OK ||
            (st = clf_batcher_create(r->valid, tc->batch_size, tc->batch_tokens, 0, 0,
                                     &r->valid_batcher)) != CLF_OK)
            return st;
    }
    return CLF_OK;
}

static clf_status save_checkpoint(run *r)
{
    if (r->dist.rank > 0) /* rank 0 writes the files */
        return CLF_OK;
    const clf_train_config *tc = &r->m.cfg.train;
    return run_dir_save_checkpoint(&r->dir, r->trainer, clf_trainer_state(r->trainer)->step,
                                   r->config_yaml, tc->checkpoint_keep);
}

/* ---------------------------------------------------------------------------------- */
/* validation                                                                          */

/* A dataset batch as the trainer takes it (the arrays stay b's). */
static clf_train_batch train_view(const clf_batch *b)
{
    return (clf_train_batch){.batch = b->batch,
                             .src_len = b->src_len,
                             .tgt_len = b->tgt_len,
                             .src = b->src,
                             .tgt = b->tgt_in,
                             .labels = b->labels};
}

/* Mean loss over the validation set's non-pad tokens, and the BLEU of greedy
 * translations of its first VALID_BLEU_MAX sentences; prints VALID_SAMPLES of them. One
 * pass over the validation batches (file order, framed by the dataset): each batch is
 * scored, then its sources are decoded. */
static clf_status validate(run *r, double *loss, double *bleu)
{
    clf_status st = CLF_OK;
    double sum = 0;
    long long tokens = 0;
    size_t translated = 0;
    clf_batch b = {0};
    clf_decode_opts o;
    clf_decode_opts_default(&r->m.cfg.model, &o);
    o.sos_id = r->framing.tgt_start; /* the vocabulary's when the model does not say */
    o.eos_id = r->framing.tgt_eos;
    o.forced_bos_id = r->framing.tgt_lang_forced ? r->framing.tgt_lang : -1;
    /* the forced language token leads every hypothesis; the references are without it */
    const int skip = r->framing.tgt_lang_forced != 0;
    clf_bleu bl;
    clf_bleu_init(&bl);
    for (int i = 0; i < clf_batcher_count(r->valid_batcher); i++) {
        if ((st = clf_batcher_get(r->valid_batcher, i, &b)) != CLF_OK)
            goto fail;
        const clf_train_batch tb = train_view(&b);
        double s;
        long long n;
        if ((st = clf_trainer_evaluate(r->trainer, &tb, &s, &n)) != CLF_OK)
            goto fail;
        sum += s;
        tokens += n;
        /* the batch's first rows, up to the BLEU budget: src rows are contiguous */
        int B = b.batch;
        if ((size_t)B > VALID_BLEU_MAX - translated)
            B = (int)(VALID_BLEU_MAX - translated);
        if (B > 0) {
            o.max_len = 2 * (b.tgt_len - 1) + 10; /* tgt_len - 1: the longest framed reference */
            clf_decode_result res;
            if ((st = clf_decode(r->m.model, b.src, B, b.src_len, &o, &res)) != CLF_OK)
                goto fail;
            for (int k = 0; k < B && st == CLF_OK; k++) {
                const int32_t *src_ids, *ref;
                int src_n, ref_n;
                const size_t pair = b.index[k];
                clf_dataset_ids(r->valid, pair, &src_ids, &src_n, &ref, &ref_n);
                const clf_hypothesis *h = &res.hyps[k];
                const int32_t *hyp_ids = h->tokens + (h->len >= skip ? skip : 0);
                const int hyp_n = h->len >= skip ? h->len - skip : h->len;
                st = clf_bleu_add(&bl, hyp_ids, hyp_n, ref, ref_n);
                if (st == CLF_OK && pair < VALID_SAMPLES && !r->o.quiet) {
                    const char *src_text, *ref_text;
                    char *hyp = NULL;
                    clf_dataset_text(r->valid, pair, &src_text, &ref_text);
                    if ((st = clf_tokenizer_decode(r->tgt_tok, hyp_ids, hyp_n, 1, &hyp)) == CLF_OK)
                        fprintf(stderr, "  src: %s\n  ref: %s\n  out: %s\n", src_text, ref_text,
                                hyp);
                    free(hyp);
                }
            }
            clf_decode_result_free(&res);
            if (st != CLF_OK)
                goto fail;
            translated += (size_t)B;
        }
        clf_batch_free(&b);
    }
    *loss = tokens ? sum / (double)tokens : 0.0;
    *bleu = bl.score;
fail:
    clf_batch_free(&b);
    return st;
}

/* ---------------------------------------------------------------------------------- */
/* the loop                                                                            */

static void format_eta(double s, char *buf, size_t size)
{
    if (!(s >= 0) || s > 1e8)
        snprintf(buf, size, "?");
    else if (s >= 3600)
        snprintf(buf, size, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else
        snprintf(buf, size, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
}

static clf_status open_csv(run *r)
{
    if (r->dist.rank > 0) { /* rank 0 writes the log */
        r->csv = fopen("/dev/null", "w");
        return r->csv ? CLF_OK : clf_error(CLF_ERR_IO, "/dev/null: cannot open");
    }
    return run_dir_open_log(&r->dir, r->o.resume, clf_trainer_state(r->trainer)->step, &r->csv);
}

/* The loop's running figures. */
typedef struct loop_state {
    double t_start, t_mark; /* the run's start, the last log row's time */
    long long tokens_mark;  /* target tokens since t_mark */
    long long steps_at_start;
    int in_accum;      /* micro-batches of the step so far (every rank's) */
    double accum_loss; /* the sum of their mean losses (this rank's) */
    long long step_tokens;
    double step_loss; /* the last step's loss */
} loop_state;

/* The next micro-batch: this rank's is accumulated, another rank's only counted. */
static clf_status micro_batch(run *r, loop_state *ls, clf_batch *b)
{
    const clf_train_config *tc = &r->m.cfg.train;
    clf_train_state *state = clf_trainer_state(r->trainer);
    double loss = 0;
    long long nt = 0;
    clf_status st;
    if (ls->in_accum % r->dist.size != r->dist.rank) {
        state->micro++; /* another rank's micro-batch (dropout seeds follow micro) */
    } else {
        if ((st = clf_batcher_get(r->batcher, state->batch, b)) != CLF_OK)
            return st;
        const clf_train_batch tb = train_view(b);
        /* this rank's last micro-batch of the step: its backward pass starts the sums */
        const int last = ls->in_accum >= (tc->accumulate - 1) * r->dist.size;
        if ((st = cli_dist_accumulate(&r->dist, r->trainer, &tb, last, &loss, &nt)) != CLF_OK)
            return st;
        clf_batch_free(b);
    }
    state->batch++;
    ls->accum_loss += nt ? loss / (double)nt : 0.0;
    ls->step_tokens += nt; /* tokens/s counts target tokens, as fairseq's wps does */
    ls->in_accum++;
    return CLF_OK;
}

/* The optimizer step over all ranks' gradients, losses, tokens and stop requests. */
static clf_status optimizer_step(run *r, loop_state *ls, double *lr, double *norm)
{
    clf_status st;
    if (r->dist.size > 1) {
        double sums[3] = {ls->accum_loss, (double)ls->step_tokens, signal_pending};
        if ((st = cli_dist_reduce_grads(&r->dist, r->trainer)) != CLF_OK ||
            (st = cli_dist_sum(&r->dist, sums, 3)) != CLF_OK)
            return st;
        ls->accum_loss = sums[0];
        ls->step_tokens = (long long)sums[1];
        stop_requested = sums[2] > 0;
    }
    ls->tokens_mark += ls->step_tokens;
    ls->step_tokens = 0;
    if ((st = clf_trainer_step(r->trainer, lr, norm)) != CLF_OK)
        return st;
    ls->step_loss = ls->accum_loss / ls->in_accum;
    ls->in_accum = 0;
    ls->accum_loss = 0;
    return CLF_OK;
}

/* After a step: the progress line, the log row with its validation when due, and the
 * checkpoint when due. */
static clf_status after_step(run *r, loop_state *ls, double lr, double norm)
{
    const clf_train_config *tc = &r->m.cfg.train;
    const clf_train_state *state = clf_trainer_state(r->trainer);
    const long long step = state->step;
    const int show = !r->o.quiet;
    clf_status st;
    double t = cli_now_s();
    double tok_s = ls->tokens_mark / (t - ls->t_mark > 1e-9 ? t - ls->t_mark : 1e-9);
    int log_row = step % tc->log_every == 0;
    int do_valid = r->valid && tc->validate_every > 0 && step % tc->validate_every == 0;
    if (r->tty && show) {
        char eta[32];
        double per = (t - ls->t_start) / (double)(step - ls->steps_at_start);
        format_eta(per * (double)(r->total_steps - step), eta, sizeof eta);
        fprintf(stderr,
                "\rstep %lld/%lld | epoch %d | loss %.4f | %.0f tok/s | lr %.3g | "
                "ETA %s   ",
                step, r->total_steps, state->epoch + 1, ls->step_loss, tok_s, lr, eta);
    }
    double scale = 1;
    long long skipped = 0;
    clf_trainer_loss_scale(r->trainer, &scale, &skipped);
    if (log_row && !r->tty && show && tc->precision == CLF_PRECISION_F16)
        fprintf(stderr,
                "step %lld epoch %d loss %.4f lr %.3g tok/s %.0f grad_norm %.3g loss_scale %g "
                "skipped %lld\n",
                step, state->epoch + 1, ls->step_loss, lr, tok_s, norm, scale, skipped);
    else if (log_row && !r->tty && show)
        fprintf(stderr, "step %lld epoch %d loss %.4f lr %.3g tok/s %.0f grad_norm %.3g\n", step,
                state->epoch + 1, ls->step_loss, lr, tok_s, norm);
    if (log_row || do_valid) {
        double vloss = 0, vbleu = 0;
        if (do_valid) {
            if (r->tty && show)
                fputc('\n', stderr);
            if ((st = validate(r, &vloss, &vbleu)) != CLF_OK)
                return st;
            if (show)
                fprintf(stderr, "validation at step %lld: loss %.4f BLEU %.2f\n", step, vloss,
                        vbleu);
        }
        fprintf(r->csv, "%lld,%d,%.6f,%.6g,%.1f,", step, state->epoch + 1, ls->step_loss, lr,
                tok_s);
        if (do_valid)
            fprintf(r->csv, "%.6f,%.4f\n", vloss, vbleu);
        else
            fprintf(r->csv, ",\n");
        fflush(r->csv);
        ls->t_mark = cli_now_s();
        ls->tokens_mark = 0;
    }
    if (tc->checkpoint_every > 0 && step % tc->checkpoint_every == 0)
        return save_checkpoint(r);
    return CLF_OK;
}

/* After the last step (or a stop): the finished model validated (unless that step just
 * was), its checkpoint, and a line saying how the run ended. Epochs that end inside an
 * accumulation leave a partial step: it is dropped (the checkpoint holds the last full
 * step). */
static clf_status finish_run(run *r, const loop_state *ls)
{
    const clf_train_config *tc = &r->m.cfg.train;
    const clf_train_state *state = clf_trainer_state(r->trainer);
    clf_status st;
    if (r->tty && !r->o.quiet)
        fputc('\n', stderr);
    if (!stop_requested && r->valid && state->step > ls->steps_at_start &&
        !(tc->validate_every > 0 && state->step % tc->validate_every == 0)) {
        double vloss, vbleu;
        if ((st = validate(r, &vloss, &vbleu)) != CLF_OK)
            return st;
        if (!r->o.quiet)
            fprintf(stderr, "validation at step %lld: loss %.4f BLEU %.2f\n", state->step, vloss,
                    vbleu);
        fprintf(r->csv, "%lld,%d,%.6f,,,%.6f,%.4f\n", state->step, state->epoch + 1, ls->step_loss,
                vloss, vbleu);
        fflush(r->csv);
    }
    if (state->step > ls->steps_at_start && (st = save_checkpoint(r)) != CLF_OK)
        return st;
    if (stop_requested) {
        fprintf(stderr, "clformer: stopped at step %lld; --resume continues\n", state->step);
        return STOPPED;
    }
    if (state->step == ls->steps_at_start)
        fprintf(stderr, "clformer: nothing to do: the run is at step %lld, its end (%s)\n",
                state->step, tc->steps > 0 ? "train.steps" : "train.epochs");
    else
        fprintf(stderr, "clformer: done: step %lld, last loss %.4f, %s/last.safetensors\n",
                state->step, ls->step_loss, tc->checkpoint_dir);
    long long skipped = 0;
    double scale = 1;
    clf_trainer_loss_scale(r->trainer, &scale, &skipped);
    if (tc->precision == CLF_PRECISION_F16)
        fprintf(stderr, "clformer: loss scale %g, %lld steps skipped (gradients not finite)\n",
                scale, skipped);
    return CLF_OK;
}

static clf_status train_loop(run *r)
{
    const clf_train_config *tc = &r->m.cfg.train;
    clf_train_state *state = clf_trainer_state(r->trainer);
    clf_status st = CLF_OK;
    clf_batch b = {0};
    loop_state ls = {.t_start = cli_now_s(), .steps_at_start = state->step};
    ls.t_mark = ls.t_start;
    int bf16 = 0;
    clf_model_precision(r->m.model, &bf16);
    if (!r->tty && !r->o.quiet && tc->precision != CLF_PRECISION_F32)
        fprintf(stderr, "clformer: precision %s%s\n", clf_precision_name(tc->precision),
                bf16 ? " (BF16 arithmetic)" : "");
    if (!r->tty && !r->o.quiet)
        fprintf(stderr, "clformer: training %s from step %lld\n", tc->checkpoint_dir, state->step);
    for (;;) {
        if (tc->steps > 0 ? state->step >= tc->steps : state->epoch >= tc->epochs)
            break;
        if (stop_requested && ls.in_accum == 0) /* stop on a step boundary only */
            break;
        if (clf_batcher_epoch(r->batcher) != state->epoch &&
            (st = clf_batcher_plan_epoch(r->batcher, state->epoch)) != CLF_OK)
            goto fail;
        if (state->batch >= clf_batcher_count(r->batcher)) {
            state->epoch++;
            state->batch = 0;
            continue;
        }
        if ((st = micro_batch(r, &ls, &b)) != CLF_OK)
            goto fail;
        if (ls.in_accum < tc->accumulate * r->dist.size)
            continue;
        double lr, norm;
        if ((st = optimizer_step(r, &ls, &lr, &norm)) != CLF_OK ||
            (st = after_step(r, &ls, lr, norm)) != CLF_OK)
            goto fail;
    }
    st = finish_run(r, &ls);
fail:
    clf_batch_free(&b);
    return st;
}

static void run_free(run *r)
{
    if (r->csv)
        fclose(r->csv);
    clf_trainer_free(r->trainer);
    cli_model_close(&r->m);
    clf_batcher_free(r->batcher);
    clf_batcher_free(r->valid_batcher);
    clf_dataset_free(r->train);
    clf_dataset_free(r->valid);
    clf_tokenizer_free(r->src_tok);
    clf_tokenizer_free(r->tgt_tok);
    free(r->config_yaml);
    clf_fs_lock_release(r->lock);
}

int clf_cmd_train(int argc, char **argv)
{
    run r = {0};
    int rc = parse_args(argc, argv, &r.o);
    if (rc >= 0)
        return rc;
    clf_status st = cli_dist_init(&r.dist);
    if (st != CLF_OK ||
        (st = clf_config_load_with_plugins(r.o.cfg_path, r.o.bo.plugin_dir, &r.m.cfg)) != CLF_OK)
        goto fail;
    clf_train_config *tc = &r.m.cfg.train;
    if (!tc->present) {
        st = clf_error(CLF_ERR_INPUT, "%s: no train: section (see README: training)", r.o.cfg_path);
        goto fail;
    }
    run_dir_init(&r.dir, tc->checkpoint_dir);
    const char *last = r.dir.last;
    if (r.o.resume && !cli_file_exists(last)) {
        st = clf_error(CLF_ERR_INPUT, "--resume: %s does not exist (nothing to resume)", last);
        goto fail;
    }
    if ((st = run_dir_create(&r.dir)) != CLF_OK || (st = lock_run(&r)) != CLF_OK)
        goto fail;
    if (!r.o.resume && cli_file_exists(last)) {
        st = clf_error(CLF_ERR_INPUT,
                       "%s already holds a run (%s): use --resume to continue it, or another "
                       "train.checkpoint.dir",
                       tc->checkpoint_dir, last);
        goto fail;
    }
    /* rank 0 first (the lock, a killed run's leftovers, vocabularies built from the data),
     * then the other ranks, which find the vocabularies and write nothing there */
    if (r.dist.rank > 0 && (st = cli_dist_barrier(&r.dist)) != CLF_OK)
        goto fail;
    if ((st = prepare_vocabs(&r)) != CLF_OK || (st = load_data(&r)) != CLF_OK ||
        (st = write_config(&r)) != CLF_OK)
        goto fail;
    if (r.dist.rank == 0 && (st = cli_dist_barrier(&r.dist)) != CLF_OK)
        goto fail;
    if (r.dist.rank > 0) { /* rank 0 validates */
        clf_batcher_free(r.valid_batcher);
        clf_dataset_free(r.valid);
        r.valid_batcher = NULL, r.valid = NULL;
    }
    /* the trainer scales each micro-batch's gradient by 1 / (accumulate x ranks) */
    clf_train_config step_tc = *tc;
    step_tc.accumulate *= r.dist.size;
    const cli_model_opts mo = {.cfg_loaded = 1,
                               .w_path = tc->init[0] && !r.o.resume ? tc->init : NULL,
                               .init_seed = (uint64_t)tc->seed,
                               .bo = &r.o.bo,
                               .train = 1};
    if ((st = cli_model_open(&mo, &r.m)) != CLF_OK ||
        (st = clf_trainer_create(r.m.model, &step_tc, 1, &r.trainer)) != CLF_OK)
        goto fail;
    if (clf_trainer_note(r.trainer) && !r.o.quiet)
        fprintf(stderr, "clformer: note: %s\n", clf_trainer_note(r.trainer));
    /* the largest batch the train: section allows must fit the device now, not when the
     * first such batch comes (token mode: batch_tokens of pairs at max_len) */
    const int largest =
        tc->batch_tokens > 0
            ? (tc->batch_tokens / tc->max_len > 0 ? tc->batch_tokens / tc->max_len : 1)
            : tc->batch_size;
    if ((st = clf_model_check_train_batch(r.m.model, largest, tc->max_len, tc->max_len)) != CLF_OK)
        goto fail;
    if (r.o.resume && (st = clf_trainer_load(r.trainer, last)) != CLF_OK)
        goto fail;
    if ((st = cli_dist_agree(&r.dist, r.config_yaml, r.trainer)) != CLF_OK)
        goto fail;
    if ((st = open_csv(&r)) != CLF_OK)
        goto fail;
    r.tty = isatty(2);
    r.total_steps = tc->steps > 0
                        ? tc->steps
                        : (long long)tc->epochs * clf_batcher_count(r.batcher) / step_tc.accumulate;
    struct sigaction sa = {.sa_handler = r.dist.size > 1 ? on_signal_ask : on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    st = train_loop(&r);
fail:
    run_free(&r);
    return st == STOPPED ? cli_dist_exit(&r.dist, CLF_OK, 130) : cli_dist_exit(&r.dist, st, 0);
}
