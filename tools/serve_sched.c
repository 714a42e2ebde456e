/* clformer serve: one model's sentences and its scheduler thread (serve.h).
 *
 * Continuous batching: the thread owns the model's translator and a translator stream
 * (clformer/translator.h). A request's sentences are items, each with a tag (its index in
 * the item table); new items wait in a FIFO until the thread adds them to the stream, and
 * every pass of the thread runs one decoder step, in which the sentences that fit join and
 * the finished leave, and moves each finished sentence's result into its job. A job of a
 * many-language model names its source and target languages: the translator is set to them
 * (clf_translator_set_languages) before each of its sentences is added, which frames the
 * sentence with its source language token and forces its target language's as its first
 * output token; sentences of other languages in the batch keep theirs. A job whose
 * caller left (disconnect, deadline) has its items cancelled, in the stream or not yet.
 * A step that fails answers every sentence in the stream with the error, then the
 * translator is opened again from its options (a backend that failed may hold a broken
 * device context); while it cannot be, sentences fail with that reason.
 * Everything is under the scheduler's mutex except the stream's calls, which only the
 * thread makes; a job is freed when both its caller (serve_job_release) and the scheduler
 * (its last item settled) are done with it. */
#include "serve.h"

#include <pthread.h>
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
    clf_translator *t; /* the thread's; NULL while it cannot be reopened */
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
    int stopping;
    int started;            /* the thread has opened the stream, or failed to */
    clf_status start;       /* how that went */
    char start_error[1024]; /* its message (clf_last_error is per thread) */
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_cond_t ready; /* started */
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
 * without the mutex (a model load); only the thread touches t and the stream. */
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

/* The thread's start: it opens the stream it steps (serve_sched_start says why) and tells
 * the starter how that went; returns with the mutex held when it went well. */
static int open_stream(serve_sched *s)
{
    const clf_status opened = clf_translator_stream_open(s->t, &s->stream_opts, &s->stream);
    pthread_mutex_lock(&s->mu);
    s->start = opened;
    if (opened != CLF_OK)
        snprintf(s->start_error, sizeof s->start_error, "%s", clf_last_error());
    s->started = 1;
    pthread_cond_broadcast(&s->ready);
    if (opened != CLF_OK)
        pthread_mutex_unlock(&s->mu);
    return opened == CLF_OK;
}

static void *sched_main(void *arg)
{
    serve_sched *s = arg;
    if (!open_stream(s))
        return NULL;
    int *batch = malloc(sizeof(int) * (size_t)s->cap);
    for (;;) {
        drop_released(s);
        clf_decode_stream_state state = {0};
        if (s->stream)
            clf_translator_stream_get_state(s->stream, &state);
        const int busy = state.waiting + state.active + state.finished > 0;
        if (s->n_queue == 0 && !busy) {
            if (s->stopping)
                break;
            pthread_cond_wait(&s->wake, &s->mu);
            continue;
        }
        /* the FIFO into the stream; tokenizing runs without the mutex, and an item's job
         * is not freed while the item is queued or in the stream */
        int nb = 0;
        if (batch && s->n_queue > 0 && !s->stream) { /* after a failed reopen: try again */
            pthread_mutex_unlock(&s->mu);
            reopen(s, 1);
            pthread_mutex_lock(&s->mu);
        }
        if (!batch || !s->stream) {
            for (int i = 0; i < s->n_queue; i++) {
                job_fail(s->items[s->queue[i]].job, s->broken ? s->broken : "out of memory");
                item_settle(s, s->queue[i]);
            }
            s->n_queue = 0;
            if (!batch)
                continue;
        }
        for (int i = 0; i < s->n_queue; i++) {
            batch[nb++] = s->queue[i];
            s->items[s->queue[i]].state = ITEM_STREAM;
        }
        s->n_queue = 0;
        pthread_mutex_unlock(&s->mu);
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
                pthread_mutex_lock(&s->mu);
                job_fail(s->items[batch[i]].job, e);
                item_settle(s, batch[i]);
                pthread_mutex_unlock(&s->mu);
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
        pthread_mutex_lock(&s->mu);
        if (st != CLF_OK) {
            char msg[1200];
            snprintf(msg, sizeof msg, "decoding failed: %s", why ? why : "out of memory");
            fprintf(stderr, "clformer: %s; reopening the backend\n", msg);
            fail_stream(s, msg);
            free(why);
            pthread_mutex_unlock(&s->mu);
            reopen(s, 1);
            pthread_mutex_lock(&s->mu);
            continue;
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
    }
    pthread_mutex_unlock(&s->mu);
    free(batch);
    return NULL;
}

/* The scheduler and its arrays, after its thread is gone (or was never started). */
static void sched_free(serve_sched *s)
{
    clf_translator_stream_free(s->stream);
    clf_translator_free(s->t);
    free(s->broken);
    free(s->items);
    free(s->free);
    free(s->queue);
    free(s);
}

clf_status serve_sched_start(clf_translator *t, const clf_translator_opts *reopen_opts,
                             int max_rows, int join_wait, int queue_cap, serve_metrics *metrics,
                             serve_sched **out)
{
    serve_sched *s = calloc(1, sizeof *s);
    if (!s) {
        clf_translator_free(t);
        return clf_error(CLF_ERR_NOMEM, "serve: out of memory");
    }
    s->t = t;
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
    clf_status st = CLF_OK;
    if (!s->items || !s->free || !s->queue) {
        st = clf_error(CLF_ERR_NOMEM, "serve: out of memory");
        goto fail;
    }
    for (int i = 0; i < queue_cap; i++)
        s->free[i] = queue_cap - 1 - i;
    s->n_free = queue_cap;
    /* Everything that runs OpenMP regions (the stream's opening, every step) runs on the
     * scheduler thread, so that its team of workers is the process's only one: libgomp
     * lets waiting workers spin only briefly when its threads outnumber the cores, and
     * every region then pays a wake-up in the kernel (cmd_serve.c loads a model on a
     * thread of its own for the same reason). */
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->wake, NULL);
    pthread_cond_init(&s->ready, NULL);
    if (pthread_create(&s->thread, NULL, sched_main, s) != 0) {
        st = clf_error(CLF_ERR_NOMEM, "serve: cannot start the scheduler thread");
        goto fail_sync;
    }
    pthread_mutex_lock(&s->mu);
    while (!s->started)
        pthread_cond_wait(&s->ready, &s->mu);
    pthread_mutex_unlock(&s->mu);
    if (s->start != CLF_OK) {
        pthread_join(s->thread, NULL);
        st = clf_error(s->start, "%s", s->start_error);
        goto fail_sync;
    }
    *out = s;
    return CLF_OK;
fail_sync:
    pthread_cond_destroy(&s->ready);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->mu);
fail:
    sched_free(s);
    return st;
}

void serve_sched_stop(serve_sched *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->ready);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->mu);
    sched_free(s);
}

int serve_sched_depth(serve_sched *s)
{
    pthread_mutex_lock(&s->mu);
    int d = s->depth;
    pthread_mutex_unlock(&s->mu);
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
    pthread_mutex_lock(&s->mu);
    if (s->stopping || n > s->n_free) {
        pthread_mutex_unlock(&s->mu);
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
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    *out = j;
    return 0;
}

int serve_job_wait(serve_job *j, double deadline, int (*gone)(void *), void *arg)
{
    serve_sched *s = j->s;
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    while (j->pending > 0) {
        double now = cli_now_s();
        if (now >= deadline) {
            rc = 504;
            break;
        }
        pthread_mutex_unlock(&s->mu);
        if (gone && gone(arg)) {
            pthread_mutex_lock(&s->mu);
            rc = -1;
            break;
        }
        pthread_mutex_lock(&s->mu);
        if (j->pending == 0)
            break;
        double until = now + 0.05 < deadline ? now + 0.05 : deadline;
        struct timespec rt, ts;
        clock_gettime(CLOCK_REALTIME, &rt);
        double wake = (double)rt.tv_sec + 1e-9 * (double)rt.tv_nsec + (until - now);
        ts.tv_sec = (time_t)wake;
        ts.tv_nsec = (long)((wake - (double)ts.tv_sec) * 1e9);
        (void)pthread_cond_timedwait(&j->done, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
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
    pthread_mutex_lock(&s->mu);
    j->released = 1;
    if (j->pending == 0) {
        job_free(j);
    } else {
        s->released++;
        pthread_cond_signal(&s->wake); /* drops its sentences */
    }
    pthread_mutex_unlock(&s->mu);
}
