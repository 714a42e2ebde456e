/* clformer serve: each model's sentences, and the one thread that decodes them all
 * (serve.h).
 *
 * Continuous batching: a model's scheduler owns its translator and a translator stream
 * (clformer/translator.h). A request's sentences are items, each with a tag (its index in
 * the item table); new items wait in a FIFO until they are added to the stream, and every
 * pass over a busy model runs one decoder step, in which the sentences that fit join and
 * the finished leave, and moves each finished sentence's result into its job. A job of a
 * many-language model names its source and target languages: the translator is set to them
 * (clf_translator_set_languages) before each of its sentences is added, which frames the
 * sentence with its source language token and forces its target language's as its first
 * output token; sentences of other languages in the batch keep theirs. A job whose
 * caller left (disconnect, deadline) has its items cancelled, in the stream or not yet.
 * A step that fails answers every sentence in the stream with the error, then the
 * translator is opened again from its options (a backend that failed may hold a broken
 * device context); while it cannot be, sentences fail with that reason.
 *
 * One runner thread steps every model in turn, a step each per pass. Every OpenMP region
 * of the server runs on it (a model's loading and its stream's opening run on threads that
 * exit, serve_on_thread): libgomp keeps a team of workers per thread that ran a region,
 * and when teams outnumber the cores it lets waiting workers spin only briefly, so that
 * every region of every step pays a wake-up in the kernel.
 * Everything is under the runner's mutex except the streams' calls, which only the runner
 * makes; a job is freed when both its caller (serve_job_release) and the scheduler (its
 * last item settled) are done with it. */
#include "serve.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clformer/status.h"

struct serve_job {
    serve_sched *s;
    char **text; /* [n], owned */
    size_t *len;
    int n;
    clf_translate_opts o;
    /* the languages its sentences are framed with ("": the translator's own) */
    char source[CLF_LANGUAGE_CODE_MAX], target[CLF_LANGUAGE_CODE_MAX];
    clf_translation *out; /* [n] */
    int pending;          /* sentences not yet decoded or dropped */
    int released;         /* the caller is done: drop what is left */
    int failed;           /* one of its sentences failed */
    char *error;
    pthread_cond_t done;
};

typedef enum { ITEM_FREE, ITEM_QUEUED, ITEM_STREAM } item_state;

typedef struct item {
    serve_job *job;
    int index;
    item_state state;
} item;

struct serve_sched {
    clf_translator *t; /* the runner's; NULL while it cannot be reopened */
    clf_translator_opts reopen;
    clf_translator_stream *stream;
    clf_translator_stream_opts stream_opts;
    char *broken; /* why t or the stream could not be reopened */
    serve_metrics *metrics;
    int cap;
    item *items; /* [cap], tag = index */
    int *free;   /* [cap] stack of free item indices */
    int n_free;
    int *queue; /* [cap] FIFO of ITEM_QUEUED indices, oldest first */
    int n_queue;
    int depth;    /* items not free: accepted and not yet settled */
    int released; /* jobs released with items left: their items to cancel */
    int *batch;   /* [cap] the items a pass adds to the stream */
    serve_runner *r;
    serve_sched *next; /* the runner's next model */
};

struct serve_runner {
    serve_sched *first; /* the models, in the order they were started */
    int stopping;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_t thread;
};

static void job_free(serve_job *j)
{
    if (j->out) {
        for (int i = 0; i < j->n; i++)
            clf_translations_free(&j->out[i], 1);
        free(j->out);
    }
    for (int i = 0; i < j->n && j->text; i++)
        free(j->text[i]);
    free(j->text);
    free(j->len);
    free(j->error);
    pthread_cond_destroy(&j->done);
    free(j);
}

/* One of j's sentences is decoded or dropped (under the mutex). */
static void job_settle(serve_job *j)
{
    if (--j->pending == 0) {
        if (j->released)
            job_free(j);
        else
            pthread_cond_broadcast(&j->done);
    }
}

static void job_fail(serve_job *j, const char *why)
{
    if (!j->failed) {
        j->failed = 1;
        j->error = strdup(why && *why ? why : "translation failed");
    }
}

/* Item tag back to the free stack, its job settled (under the mutex). */
static void item_settle(serve_sched *s, int tag)
{
    item *it = &s->items[tag];
    serve_job *j = it->job;
    *it = (item){0};
    s->free[s->n_free++] = tag;
    s->depth--;
    job_settle(j);
}

/* The items of released jobs: cancelled in the stream or taken out of the FIFO. */
static void drop_released(serve_sched *s)
{
    if (s->released == 0)
        return;
    s->released = 0;
    int kept = 0;
    for (int i = 0; i < s->n_queue; i++) {
        const int tag = s->queue[i];
        if (s->items[tag].job->released)
            item_settle(s, tag);
        else
            s->queue[kept++] = tag;
    }
    s->n_queue = kept;
    for (int tag = 0; tag < s->cap; tag++)
        if (s->items[tag].state == ITEM_STREAM && s->items[tag].job->released) {
            if (s->stream)
                clf_translator_stream_cancel(s->stream, (uint64_t)tag);
            item_settle(s, tag);
        }
}

/* Every item in the stream fails with why; the stream is gone (under the mutex). */
static void fail_stream(serve_sched *s, const char *why)
{
    for (int tag = 0; tag < s->cap; tag++)
        if (s->items[tag].state == ITEM_STREAM) {
            job_fail(s->items[tag].job, why);
            item_settle(s, tag);
        }
}

/* Opens the translator (unless open) and its stream; on failure s->broken says why. Runs
 * without the mutex (a model load); only the runner touches t and the stream. */
static void reopen(serve_sched *s, int translator_too)
{
    clf_translator_stream_free(s->stream);
    s->stream = NULL;
    if (translator_too) {
        clf_translator_free(s->t);
        s->t = NULL;
    }
    clf_status st = CLF_OK;
    if (!s->t)
        st = clf_translator_open(&s->reopen, &s->t);
    if (st == CLF_OK)
        st = clf_translator_stream_open(s->t, &s->stream_opts, &s->stream);
    free(s->broken);
    s->broken = NULL;
    if (st != CLF_OK) {
        const char *e = clf_last_error();
        char msg[1200];
        snprintf(msg, sizeof msg, "the backend could not be reopened: %s",
                 e && *e ? e : clf_status_name(st));
        s->broken = strdup(msg);
        fprintf(stderr, "clformer: %s\n", msg);
    }
}

/* One pass over model s (under the runner's mutex, which it releases while it computes):
 * its queue into its stream and one decoder step; 0 when it had nothing to do. */
static int sched_pass(serve_sched *s)
{
    drop_released(s);
    clf_decode_stream_state state = {0};
    if (s->stream)
        clf_translator_stream_get_state(s->stream, &state);
    const int busy = state.waiting + state.active + state.finished > 0;
    if (s->n_queue == 0 && !busy)
        return 0;
    pthread_mutex_t *mu = &s->r->mu;
    /* the FIFO into the stream; tokenizing runs without the mutex, and an item's job
     * is not freed while the item is queued or in the stream */
    int nb = 0, *batch = s->batch;
    if (s->n_queue > 0 && !s->stream) { /* after a failed reopen: try again */
        pthread_mutex_unlock(mu);
        reopen(s, 1);
        pthread_mutex_lock(mu);
    }
    if (!s->stream) {
        for (int i = 0; i < s->n_queue; i++) {
            job_fail(s->items[s->queue[i]].job, s->broken ? s->broken : "out of memory");
            item_settle(s, s->queue[i]);
        }
        s->n_queue = 0;
    }
    for (int i = 0; i < s->n_queue; i++) {
        batch[nb++] = s->queue[i];
        s->items[s->queue[i]].state = ITEM_STREAM;
    }
    s->n_queue = 0;
    pthread_mutex_unlock(mu);
    for (int i = 0; i < nb && s->stream; i++) {
        const item *it = &s->items[batch[i]];
        const serve_job *j = it->job;
        /* the stream takes a sentence's languages when it is added (its source row
         * framed with its language token, its target's token forced in its options):
         * the next sentences may set others */
        clf_status added = CLF_OK;
        if (j->source[0] || j->target[0])
            added = clf_translator_set_languages(s->t, j->source[0] ? j->source : NULL,
                                                 j->target[0] ? j->target : NULL);
        if (added == CLF_OK)
            added = clf_translator_stream_add(s->stream, j->text[it->index], j->len[it->index],
                                              &j->o, (uint64_t)batch[i]);
        if (added != CLF_OK) { /* the request's options, or memory: this sentence fails */
            const char *e = clf_last_error();
            pthread_mutex_lock(mu);
            job_fail(s->items[batch[i]].job, e);
            item_settle(s, batch[i]);
            pthread_mutex_unlock(mu);
        }
    }
    clf_status st = CLF_OK;
    char *why = NULL;
    long rows = -1; /* the step's decoder rows; -1: no step ran */
    if (s->stream) {
        clf_decode_stream_state after;
        clf_translator_stream_get_state(s->stream, &state);
        st = clf_translator_stream_step(s->stream);
        clf_translator_stream_get_state(s->stream, &after);
        if (after.steps > state.steps)
            rows = (long)(after.token_steps - state.token_steps);
        if (st != CLF_OK) {
            const char *e = clf_last_error();
            why = strdup(e && *e ? e : clf_status_name(st));
        }
    }
    pthread_mutex_lock(mu);
    if (st != CLF_OK) {
        char msg[1200];
        snprintf(msg, sizeof msg, "decoding failed: %s", why ? why : "out of memory");
        fprintf(stderr, "clformer: %s; reopening the backend\n", msg);
        fail_stream(s, msg);
        free(why);
        pthread_mutex_unlock(mu);
        reopen(s, 1);
        pthread_mutex_lock(mu);
        return 1;
    }
    /* the finished: into their jobs */
    uint64_t tag;
    clf_translation r;
    long tokens = 0;
    int sentences = 0;
    while (s->stream && clf_translator_stream_take(s->stream, &tag, &r)) {
        item *it = &s->items[tag];
        if (it->state != ITEM_STREAM || it->job->released) {
            clf_translations_free(&r, 1);
            if (it->state == ITEM_STREAM)
                item_settle(s, (int)tag);
            continue;
        }
        tokens += r.n_hyps > 0 ? r.hyps[0].len : 0;
        sentences++;
        it->job->out[it->index] = r;
        item_settle(s, (int)tag);
    }
    serve_metrics_step(s->metrics, rows, sentences, tokens);
    return 1;
}

static void *runner_main(void *arg)
{
    serve_runner *r = arg;
    /* left as found: see serve_on_thread (a reopened backend may compile kernels here) */
    stack_t old;
    const int saved = sigaltstack(NULL, &old) == 0;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        int work = 0;
        for (serve_sched *s = r->first; s; s = s->next)
            work |= sched_pass(s);
        if (!work) {
            if (r->stopping)
                break;
            pthread_cond_wait(&r->wake, &r->mu);
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (saved)
        (void)sigaltstack(&old, NULL);
    return NULL;
}

/* A thread for fn(arg), waited for */
typedef struct {
    clf_status (*fn)(void *);
    void *arg;
    clf_status st;
    char error[1024]; /* fn's message (clf_last_error is per thread) */
} on_thread;

static void *on_thread_main(void *p)
{
    on_thread *c = p;
    /* The thread's signal stack is left as it was found: the first thread to compile an
     * OpenCL kernel with PoCL gets LLVM's own (malloc'd) signal stack, and a sanitized
     * build's thread exit would unmap that one as if it were the sanitizer's. */
    stack_t old;
    const int saved = sigaltstack(NULL, &old) == 0;
    if ((c->st = c->fn(c->arg)) != CLF_OK)
        snprintf(c->error, sizeof c->error, "%s", clf_last_error());
    if (saved)
        (void)sigaltstack(&old, NULL);
    return NULL;
}

clf_status serve_on_thread(clf_status (*fn)(void *), void *arg)
{
    on_thread c = {.fn = fn, .arg = arg};
    pthread_t th;
    if (pthread_create(&th, NULL, on_thread_main, &c) != 0)
        return fn(arg); /* correct, only slower */
    pthread_join(th, NULL);
    return c.st == CLF_OK ? CLF_OK : clf_error(c.st, "%s", c.error);
}

/* The scheduler and its arrays, once the runner is gone or never had it. */
static void sched_free(serve_sched *s)
{
    clf_translator_stream_free(s->stream);
    clf_translator_free(s->t);
    free(s->broken);
    free(s->items);
    free(s->free);
    free(s->queue);
    free(s->batch);
    free(s);
}

static clf_status open_stream(void *arg)
{
    serve_sched *s = arg;
    return clf_translator_stream_open(s->t, &s->stream_opts, &s->stream);
}

clf_status serve_runner_start(serve_runner **out)
{
    serve_runner *r = calloc(1, sizeof *r);
    if (!r)
        return clf_error(CLF_ERR_NOMEM, "serve: out of memory");
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->wake, NULL);
    if (pthread_create(&r->thread, NULL, runner_main, r) != 0) {
        pthread_cond_destroy(&r->wake);
        pthread_mutex_destroy(&r->mu);
        free(r);
        return clf_error(CLF_ERR_NOMEM, "serve: cannot start the decoding thread");
    }
    *out = r;
    return CLF_OK;
}

void serve_runner_stop(serve_runner *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->stopping = 1;
    pthread_cond_signal(&r->wake);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    pthread_cond_destroy(&r->wake);
    pthread_mutex_destroy(&r->mu);
    for (serve_sched *s = r->first, *next; s; s = next) {
        next = s->next;
        sched_free(s);
    }
    free(r);
}

clf_status serve_sched_start(serve_runner *r, clf_translator *t,
                             const clf_translator_opts *reopen_opts, int max_rows, int join_wait,
                             int queue_cap, serve_metrics *metrics, serve_sched **out)
{
    serve_sched *s = calloc(1, sizeof *s);
    if (!s) {
        clf_translator_free(t);
        return clf_error(CLF_ERR_NOMEM, "serve: out of memory");
    }
    s->t = t;
    s->r = r;
    s->reopen = *reopen_opts;
    s->metrics = metrics;
    s->cap = queue_cap;
    /* every output length a request may ask for (translate caps at the model's max_len - 1
     * too), so that no request is refused for it */
    clf_translator_info info;
    clf_translator_get_info(t, &info);
    s->stream_opts = (clf_translator_stream_opts){
        .max_rows = max_rows, .max_out = info.config->model.max_len - 1, .join_wait = join_wait};
    s->items = calloc((size_t)queue_cap, sizeof *s->items);
    s->free = malloc((size_t)queue_cap * sizeof *s->free);
    s->queue = malloc((size_t)queue_cap * sizeof *s->queue);
    s->batch = malloc((size_t)queue_cap * sizeof *s->batch);
    clf_status st = CLF_OK;
    if (!s->items || !s->free || !s->queue || !s->batch) {
        st = clf_error(CLF_ERR_NOMEM, "serve: out of memory");
        goto fail;
    }
    for (int i = 0; i < queue_cap; i++)
        s->free[i] = queue_cap - 1 - i;
    s->n_free = queue_cap;
    /* opening a stream runs OpenMP regions: on a thread that exits (see the top) */
    if ((st = serve_on_thread(open_stream, s)) != CLF_OK)
        goto fail;
    pthread_mutex_lock(&r->mu);
    serve_sched **tail = &r->first;
    while (*tail)
        tail = &(*tail)->next;
    *tail = s;
    pthread_mutex_unlock(&r->mu);
    *out = s;
    return CLF_OK;
fail:
    sched_free(s);
    return st;
}

int serve_sched_depth(serve_sched *s)
{
    pthread_mutex_lock(&s->r->mu);
    int d = s->depth;
    pthread_mutex_unlock(&s->r->mu);
    return d;
}

int serve_sched_submit(serve_sched *s, char **text, size_t *len, int n, const clf_translate_opts *o,
                       const char *source, const char *target, serve_job **out)
{
    serve_job *j = calloc(1, sizeof *j);
    if (!j || !(j->out = calloc(n > 0 ? (size_t)n : 1, sizeof *j->out))) {
        free(j);
        return 500;
    }
    j->s = s;
    j->text = text;
    j->len = len;
    j->n = n;
    j->o = *o;
    snprintf(j->source, sizeof j->source, "%s", source ? source : "");
    snprintf(j->target, sizeof j->target, "%s", target ? target : "");
    j->pending = n;
    pthread_cond_init(&j->done, NULL);
    pthread_mutex_lock(&s->r->mu);
    if (s->r->stopping || n > s->n_free) {
        pthread_mutex_unlock(&s->r->mu);
        j->text = NULL; /* still the caller's */
        j->len = NULL;
        job_free(j);
        return 429;
    }
    for (int i = 0; i < n; i++) {
        const int tag = s->free[--s->n_free];
        s->items[tag] = (item){.job = j, .index = i, .state = ITEM_QUEUED};
        s->queue[s->n_queue++] = tag;
        s->depth++;
    }
    pthread_cond_signal(&s->r->wake);
    pthread_mutex_unlock(&s->r->mu);
    *out = j;
    return 0;
}

int serve_job_wait(serve_job *j, double deadline, int (*gone)(void *), void *arg)
{
    serve_sched *s = j->s;
    int rc = 0;
    pthread_mutex_lock(&s->r->mu);
    while (j->pending > 0) {
        double now = cli_now_s();
        if (now >= deadline) {
            rc = 504;
            break;
        }
        pthread_mutex_unlock(&s->r->mu);
        if (gone && gone(arg)) {
            pthread_mutex_lock(&s->r->mu);
            rc = -1;
            break;
        }
        pthread_mutex_lock(&s->r->mu);
        if (j->pending == 0)
            break;
        double until = now + 0.05 < deadline ? now + 0.05 : deadline;
        struct timespec rt, ts;
        clock_gettime(CLOCK_REALTIME, &rt);
        double wake = (double)rt.tv_sec + 1e-9 * (double)rt.tv_nsec + (until - now);
        ts.tv_sec = (time_t)wake;
        ts.tv_nsec = (long)((wake - (double)ts.tv_sec) * 1e9);
        (void)pthread_cond_timedwait(&j->done, &s->r->mu, &ts);
    }
    pthread_mutex_unlock(&s->r->mu);
    return rc;
}

const clf_translation *serve_job_results(serve_job *j, const char **error)
{
    *error = j->failed ? (j->error ? j->error : "out of memory") : NULL;
    return j->failed ? NULL : j->out;
}

void serve_job_release(serve_job *j)
{
    if (!j)
        return;
    serve_sched *s = j->s;
    pthread_mutex_lock(&s->r->mu);
    j->released = 1;
    if (j->pending == 0) {
        job_free(j);
    } else {
        s->released++;
        pthread_cond_signal(&s->r->wake); /* drops its sentences */
    }
    pthread_mutex_unlock(&s->r->mu);
}
