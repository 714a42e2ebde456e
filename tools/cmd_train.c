/* clformer train: the experiment of a YAML's train: section, with progress, a CSV of the
 * curves, validation (loss, BLEU, sample translations) and checkpoints.
 *
 * Decisions a user relies on (README):
 *   - vocabularies: train.vocab.src/tgt are loaded when they exist, else built from the
 *     training data (min_frequency) and saved there, never without words, with their
 *     provenance, which a later run checks against its data (run_vocab.h);
 *     model.src_vocab/tgt_vocab may be left
 *     out of the YAML (taken from the vocabularies) and, when given, must hold them;
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
 *   - validation BLEU is corpus BLEU (4-gram, brevity penalty) over the target
 *     vocabulary's words of greedy translations against the references' words, so a word
 *     outside the vocabulary is [UNK] on both sides. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_model.h"
#include "dist.h"
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
    clf_fs_lock *lock; /* <dir>/train.lock, held for the whole run */
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
           "  --backend cpu|opencl|auto, --device D, --threads N, --plugin-dir DIR\n"
           "Writes <dir>/log.csv (step,epoch,loss,lr,tokens_per_s,valid_loss,valid_bleu),\n"
           "<dir>/config.yaml and checkpoints <dir>/step-<N>.safetensors + last.safetensors.\n"
           "SIGINT/SIGTERM: finish the step, write a checkpoint, exit 130.\n"
           "Under mpirun -np N: data-parallel, accumulate x N micro-batches a step.\n");
}

static int parse_args(int argc, char **argv, train_opts *o)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'}, {"resume", no_argument, NULL, 'r'},
        {"quiet", no_argument, NULL, 'q'},        CLI_BACKEND_LONGOPTS,
        {"help", no_argument, NULL, 'h'},         {0}};
    *o = (train_opts){.bo = {.threads = -1}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:" CLI_BACKEND_SHORTOPTS "hrq", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            o->cfg_path = optarg;
            break;
        case 'r':
            o->resume = 1;
            break;
        case 'q':
            o->quiet = 1;
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
        return cli_usage_error("train: unexpected argument '%s'", argv[optind]);
    if (!o->cfg_path)
        return cli_usage_error("train: -c experiment.yaml is required");
    return -1;
}

/* ---------------------------------------------------------------------------------- */
/* files                                                                               */

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* mkdir -p */
static clf_status make_dirs(const char *path)
{
    char p[CLF_PATH_MAX];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s)
            continue;
        char saved = *s;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            return clf_error(CLF_ERR_IO, "%s: cannot create the directory: %s", p, strerror(errno));
        *s = saved;
        if (!saved)
            break;
    }
    return CLF_OK;
}

/* Takes <dir>/train.lock (a second run on the directory is refused, naming the holder's
 * process), then removes what a killed run left half-written: files named
 * <anything>.tmp.<digits> (clformer/fs.h's temporary names); nobody else writes there
 * while we hold the lock. */
static clf_status lock_run(run *r)
{
    if (r->dist.rank > 0) /* rank 0 holds it for the whole job */
        return CLF_OK;
    const char *dir = r->m.cfg.train.checkpoint_dir;
    char path[CLF_PATH_MAX + 320]; /* room for a file name of the directory */
    snprintf(path, sizeof path, "%s/train.lock", dir);
    clf_status st = clf_fs_lock_acquire(path, &r->lock);
    if (st != CLF_OK) /* held ("...: locked by process N on host H"), or not lockable at all */
        return clf_error_context(st, "train.checkpoint.dir %s %s", dir,
                                 strstr(clf_last_error(), ": locked by ")
                                     ? "is in use by another run"
                                     : "cannot be locked");
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        const char *tmp = strstr(e->d_name, ".tmp.");
        if (!tmp || !tmp[5] || tmp[5 + strspn(tmp + 5, "0123456789")])
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) == 0)
            fprintf(stderr, "clformer: removed %s, left by a killed run\n", path);
    }
    if (d)
        closedir(d);
    return CLF_OK;
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
    char path[CLF_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/config.yaml", r->m.cfg.train.checkpoint_dir);
    return clf_fs_write_atomic_bytes(path, r->config_yaml, len);
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
    /* the specials the batches need: the model's keys, else the vocabularies' own (one rule
     * with translate's) */
    const clf_framing own = clf_tokenizer_framing(r->src_tok, r->tgt_tok);
    if ((st = clf_model_framing(mc, &own, &r->framing)) != CLF_OK)
        return clf_error_context(st, "%s", r->m.cfg.path);
    return CLF_OK;
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

/* Deletes step-<N>.safetensors files beyond the newest `keep`. */
static void prune_checkpoints(const char *dir, int keep)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    long long steps[4096];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 4096) {
        long long s;
        char tail[32];
        if (sscanf(e->d_name, "step-%lld.%31s", &s, tail) == 2 && strcmp(tail, "safetensors") == 0)
            steps[n++] = s;
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        int newer = 0;
        for (int j = 0; j < n; j++)
            newer += steps[j] > steps[i];
        if (newer >= keep) {
            char path[CLF_PATH_MAX + 64];
            snprintf(path, sizeof path, "%s/step-%lld.safetensors", dir, steps[i]);
            unlink(path);
        }
    }
}

static clf_status save_checkpoint(run *r)
{
    if (r->dist.rank > 0) /* rank 0 writes the files */
        return CLF_OK;
    const clf_train_config *tc = &r->m.cfg.train;
    long long step = clf_trainer_state(r->trainer)->step;
    char path[CLF_PATH_MAX + 64], last[CLF_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/step-%lld.safetensors", tc->checkpoint_dir, step);
    snprintf(last, sizeof last, "%s/last.safetensors", tc->checkpoint_dir);
    clf_status st = clf_trainer_save(r->trainer, path, r->config_yaml);
    /* last.safetensors: a hard link to the newest, swapped in by rename */
    if (st != CLF_OK || (st = clf_fs_link_atomic(path, last)) != CLF_OK)
        return st;
    prune_checkpoints(tc->checkpoint_dir, tc->checkpoint_keep);
    return CLF_OK;
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
            o.max_len = 2 * (b.tgt_len - 1) + 10; /* tgt_len - 1: the longest reference */
            clf_decode_result res;
            if ((st = clf_decode(r->m.model, b.src, B, b.src_len, &o, &res)) != CLF_OK)
                goto fail;
            for (int k = 0; k < B && st == CLF_OK; k++) {
                const int32_t *src_ids, *ref;
                int src_n, ref_n;
                const size_t pair = b.index[k];
                clf_dataset_ids(r->valid, pair, &src_ids, &src_n, &ref, &ref_n);
                const clf_hypothesis *h = &res.hyps[k];
                st = clf_bleu_add(&bl, h->tokens, h->len, ref, ref_n);
                if (st == CLF_OK && pair < VALID_SAMPLES && !r->o.quiet) {
                    const char *src_text, *ref_text;
                    char *hyp = NULL;
                    clf_dataset_text(r->valid, pair, &src_text, &ref_text);
                    if ((st = clf_tokenizer_decode(r->tgt_tok, h->tokens, h->len, 1, &hyp)) ==
                        CLF_OK)
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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void format_eta(double s, char *buf, size_t size)
{
    if (!(s >= 0) || s > 1e8)
        snprintf(buf, size, "?");
    else if (s >= 3600)
        snprintf(buf, size, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else
        snprintf(buf, size, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
}

/* A resumed run drops the rows logged after its checkpoint (a run killed hard logged
 * steps it will now redo), rewriting the file atomically, then appends. */
typedef struct csv_trim {
    FILE *in;
    const char *path;
    long long last_step;
} csv_trim;

static clf_status write_trimmed_csv(FILE *out, void *ctx)
{
    const csv_trim *t = ctx;
    char line[1024];
    while (fgets(line, sizeof line, t->in)) {
        long long step;
        if (sscanf(line, "%lld,", &step) == 1 && step > t->last_step)
            continue;
        if (!strchr(line, '\n') && feof(t->in)) /* half a row: the run was killed writing it */
            break;
        fputs(line, out);
    }
    if (ferror(t->in))
        return clf_error(CLF_ERR_IO, "%s: cannot read: %s", t->path, strerror(errno));
    return CLF_OK;
}

static clf_status trim_csv(const char *path, long long last_step)
{
    FILE *in = fopen(path, "r");
    if (!in)
        return clf_error(CLF_ERR_IO, "%s: cannot rewrite: %s", path, strerror(errno));
    csv_trim t = {in, path, last_step};
    clf_status st = clf_fs_write_atomic(path, write_trimmed_csv, &t);
    fclose(in);
    return st;
}

static clf_status open_csv(run *r)
{
    char path[CLF_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/log.csv", r->m.cfg.train.checkpoint_dir);
    if (r->dist.rank > 0) { /* rank 0 writes the log */
        r->csv = fopen("/dev/null", "w");
        return r->csv ? CLF_OK : clf_error(CLF_ERR_IO, "/dev/null: cannot open");
    }
    int append = r->o.resume && file_exists(path);
    clf_status st;
    if (append && (st = trim_csv(path, clf_trainer_state(r->trainer)->step)) != CLF_OK)
        return st;
    r->csv = fopen(path, append ? "a" : "w");
    if (!r->csv)
        return clf_error(CLF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (!append)
        fprintf(r->csv, "step,epoch,loss,lr,tokens_per_s,valid_loss,valid_bleu\n");
    fflush(r->csv);
    return CLF_OK;
}

static clf_status train_loop(run *r)
{
    const clf_train_config *tc = &r->m.cfg.train;
    clf_train_state *state = clf_trainer_state(r->trainer);
    clf_status st = CLF_OK;
    clf_batch b = {0};
    double t_start = now_s(), t_mark = t_start, step_loss = 0;
    long long tokens_mark = 0, step_tokens = 0, steps_at_start = state->step;
    int in_accum = 0;
    double accum_loss = 0;
    if (!r->tty && !r->o.quiet)
        fprintf(stderr, "clformer: training %s from step %lld\n", tc->checkpoint_dir, state->step);
    for (;;) {
        if (tc->steps > 0 ? state->step >= tc->steps : state->epoch >= tc->epochs)
            break;
        if (stop_requested && in_accum == 0) /* stop on a step boundary only */
            break;
        if (clf_batcher_epoch(r->batcher) != state->epoch &&
            (st = clf_batcher_plan_epoch(r->batcher, state->epoch)) != CLF_OK)
            goto fail;
        if (state->batch >= clf_batcher_count(r->batcher)) {
            state->epoch++;
            state->batch = 0;
            continue;
        }
        double ls = 0;
        long long nt = 0;
        if (in_accum % r->dist.size != r->dist.rank) {
            state->micro++; /* another rank's micro-batch (dropout seeds follow micro) */
        } else {
            if ((st = clf_batcher_get(r->batcher, state->batch, &b)) != CLF_OK)
                goto fail;
            const clf_train_batch tb = train_view(&b);
            /* this rank's last micro-batch of the step: its backward pass starts the sums */
            const int last = in_accum >= (tc->accumulate - 1) * r->dist.size;
            if ((st = cli_dist_accumulate(&r->dist, r->trainer, &tb, last, &ls, &nt)) != CLF_OK)
                goto fail;
            clf_batch_free(&b);
        }
        state->batch++;
        accum_loss += nt ? ls / (double)nt : 0.0;
        step_tokens += nt; /* tokens/s counts target tokens, as fairseq's wps does */
        if (++in_accum < tc->accumulate * r->dist.size)
            continue;
        if (r->dist.size > 1) { /* all ranks' gradients, losses, tokens and stop requests */
            double sums[3] = {accum_loss, (double)step_tokens, signal_pending};
            if ((st = cli_dist_reduce_grads(&r->dist, r->trainer)) != CLF_OK ||
                (st = cli_dist_sum(&r->dist, sums, 3)) != CLF_OK)
                goto fail;
            accum_loss = sums[0];
            step_tokens = (long long)sums[1];
            stop_requested = sums[2] > 0;
        }
        tokens_mark += step_tokens;
        step_tokens = 0;
        double lr, norm;
        if ((st = clf_trainer_step(r->trainer, &lr, &norm)) != CLF_OK)
            goto fail;
        step_loss = accum_loss / in_accum;
        in_accum = 0;
        accum_loss = 0;
        const long long step = state->step;
        double t = now_s();
        double tok_s = tokens_mark / (t - t_mark > 1e-9 ? t - t_mark : 1e-9);
        int log_row = step % tc->log_every == 0;
        int do_valid = r->valid && tc->validate_every > 0 && step % tc->validate_every == 0;
        if (r->tty && !r->o.quiet) {
            char eta[32];
            double per = (t - t_start) / (double)(step - steps_at_start);
            format_eta(per * (double)(r->total_steps - step), eta, sizeof eta);
            fprintf(stderr,
                    "\rstep %lld/%lld | epoch %d | loss %.4f | %.0f tok/s | lr %.3g | "
                    "ETA %s   ",
                    step, r->total_steps, state->epoch + 1, step_loss, tok_s, lr, eta);
        }
        if (log_row && !r->tty && !r->o.quiet)
            fprintf(stderr, "step %lld epoch %d loss %.4f lr %.3g tok/s %.0f grad_norm %.3g\n",
                    step, state->epoch + 1, step_loss, lr, tok_s, norm);
        if (log_row || do_valid) {
            double vloss = 0, vbleu = 0;
            if (do_valid) {
                if (r->tty && !r->o.quiet)
                    fputc('\n', stderr);
                if ((st = validate(r, &vloss, &vbleu)) != CLF_OK)
                    goto fail;
                if (!r->o.quiet)
                    fprintf(stderr, "validation at step %lld: loss %.4f BLEU %.2f\n", step, vloss,
                            vbleu);
            }
            fprintf(r->csv, "%lld,%d,%.6f,%.6g,%.1f,", step, state->epoch + 1, step_loss, lr,
                    tok_s);
            if (do_valid)
                fprintf(r->csv, "%.6f,%.4f\n", vloss, vbleu);
            else
                fprintf(r->csv, ",\n");
            fflush(r->csv);
            t_mark = now_s();
            tokens_mark = 0;
        }
        if (tc->checkpoint_every > 0 && step % tc->checkpoint_every == 0 &&
            (st = save_checkpoint(r)) != CLF_OK)
            goto fail;
    }
    if (r->tty && !r->o.quiet)
        fputc('\n', stderr);
    /* epochs that end inside an accumulation leave a partial step: it is dropped (the
     * run is over, the checkpoint holds the last full step) */
    /* the finished model is always validated (unless that step just was) */
    if (!stop_requested && r->valid && state->step > steps_at_start &&
        !(tc->validate_every > 0 && state->step % tc->validate_every == 0)) {
        double vloss, vbleu;
        if ((st = validate(r, &vloss, &vbleu)) != CLF_OK)
            goto fail;
        if (!r->o.quiet)
            fprintf(stderr, "validation at step %lld: loss %.4f BLEU %.2f\n", state->step, vloss,
                    vbleu);
        fprintf(r->csv, "%lld,%d,%.6f,,,%.6f,%.4f\n", state->step, state->epoch + 1, step_loss,
                vloss, vbleu);
        fflush(r->csv);
    }
    if (state->step > steps_at_start && (st = save_checkpoint(r)) != CLF_OK)
        goto fail;
    if (stop_requested) {
        fprintf(stderr, "clformer: stopped at step %lld; --resume continues\n", state->step);
        return STOPPED;
    }
    if (state->step == steps_at_start)
        fprintf(stderr, "clformer: nothing to do: the run is at step %lld, its end (%s)\n",
                state->step, tc->steps > 0 ? "train.steps" : "train.epochs");
    else
        fprintf(stderr, "clformer: done: step %lld, last loss %.4f, %s/last.safetensors\n",
                state->step, step_loss, tc->checkpoint_dir);
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
    char last[CLF_PATH_MAX + 32];
    snprintf(last, sizeof last, "%s/last.safetensors", tc->checkpoint_dir);
    if (r.o.resume && !file_exists(last)) {
        st = clf_error(CLF_ERR_INPUT, "--resume: %s does not exist (nothing to resume)", last);
        goto fail;
    }
    if ((st = make_dirs(tc->checkpoint_dir)) != CLF_OK || (st = lock_run(&r)) != CLF_OK)
        goto fail;
    if (!r.o.resume && file_exists(last)) {
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
