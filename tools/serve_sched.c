/* clformer serve: one model's queue of sentences and its scheduler thread (serve.h).
 *
 * The queue holds (job, sentence) items in arrival order, at most queue_cap. The thread
 * takes the oldest item's decoding options and every waiting item with the same options,
 * oldest first, up to max_batch, decodes them in one clf_translator_translate call, and
 * moves each result into its job. A job is freed when both its caller (serve_job_release)
 * and the scheduler (its last sentence decoded or dropped) are done with it; everything
 * is under the scheduler's mutex except the decode itself. */
#include "serve.h"

#include <errno.h>
#include <pthread.h>
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
    clf_translation *out; /* [n] */
    int pending;          /* sentences not yet decoded or dropped */
    int released;         /* the caller is done: drop what is queued */
    int failed;           /* the backend failed on one of its batches */
    char *error;
    pthread_cond_t done;
};

typedef struct item {
    serve_job *job;
    int index;
} item;

struct serve_sched {
    clf_translator *t;
    serve_metrics *metrics;
    int max_batch, cap;
    item *queue; /* [cap], queue[0..depth) waiting, oldest first */
    int depth;
    int stopping;
    /* the scheduler thread's batch: [max_batch] each */
    item *batch;
    const char **text;
    size_t *len;
    clf_translation *out;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_t thread;
};

static int same_opts(const clf_translate_opts *a, const clf_translate_opts *b)
{
    return a->beam == b->beam && a->n_best == b->n_best && a->length_penalty == b->length_penalty &&
           a->max_len == b->max_len && a->beam_style == b->beam_style &&
           a->forced_eos == b->forced_eos && a->want_scores == b->want_scores;
}

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

static void *sched_main(void *arg)
{
    serve_sched *s = arg;
    item *batch = s->batch;
    const char **text = s->text;
    size_t *len = s->len;
    clf_translation *out = s->out;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        /* drop the sentences of jobs their callers left */
        int kept = 0;
        for (int i = 0; i < s->depth; i++) {
            if (s->queue[i].job->released)
                job_settle(s->queue[i].job);
            else
                s->queue[kept++] = s->queue[i];
        }
        s->depth = kept;
        if (s->depth == 0) {
            if (s->stopping)
                break;
            pthread_cond_wait(&s->wake, &s->mu);
            continue;
        }
        int nb = 0;
        kept = 0;
        const clf_translate_opts o = s->queue[0].job->o;
        for (int i = 0; i < s->depth; i++) {
            if (nb < s->max_batch && same_opts(&s->queue[i].job->o, &o))
                batch[nb++] = s->queue[i];
            else
                s->queue[kept++] = s->queue[i];
        }
        s->depth = kept;
        for (int i = 0; i < nb; i++) {
            text[i] = batch[i].job->text[batch[i].index];
            len[i] = batch[i].job->len[batch[i].index];
        }
        pthread_mutex_unlock(&s->mu);
        clf_status st = clf_translator_translate(s->t, text, len, nb, &o, out);
        const char *why = st == CLF_OK ? NULL : clf_last_error();
        long tokens = 0;
        if (st == CLF_OK)
            for (int i = 0; i < nb; i++)
                for (int h = 0; h < out[i].n_hyps && h < 1; h++)
                    tokens += out[i].hyps[h].len;
        serve_metrics_batch(s->metrics, nb, tokens);
        pthread_mutex_lock(&s->mu);
        for (int i = 0; i < nb; i++) {
            serve_job *j = batch[i].job;
            if (st != CLF_OK) {
                if (!j->failed) {
                    j->failed = 1;
                    j->error = strdup(why && *why ? why : clf_status_name(st));
                }
            } else if (j->released) {
                clf_translations_free(&out[i], 1);
            } else {
                j->out[batch[i].index] = out[i];
            }
            memset(&out[i], 0, sizeof out[i]);
            job_settle(j);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* The scheduler and its arrays, after its thread is gone (or was never started). */
static void sched_free(serve_sched *s)
{
    free(s->queue);
    free(s->batch);
    free(s->text);
    free(s->len);
    free(s->out);
    free(s);
}

int serve_sched_start(clf_translator *t, int max_batch, int queue_cap, serve_metrics *metrics,
                      serve_sched **out)
{
    serve_sched *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->t = t;
    s->metrics = metrics;
    s->max_batch = max_batch;
    s->cap = queue_cap;
    s->queue = malloc((size_t)queue_cap * sizeof *s->queue);
    s->batch = malloc((size_t)max_batch * sizeof *s->batch);
    s->text = malloc((size_t)max_batch * sizeof *s->text);
    s->len = malloc((size_t)max_batch * sizeof *s->len);
    s->out = calloc((size_t)max_batch, sizeof *s->out);
    if (!s->queue || !s->batch || !s->text || !s->len || !s->out)
        goto fail;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->wake, NULL);
    if (pthread_create(&s->thread, NULL, sched_main, s) != 0) {
        pthread_cond_destroy(&s->wake);
        pthread_mutex_destroy(&s->mu);
        goto fail;
    }
    *out = s;
    return 0;
fail:
    sched_free(s);
    return -1;
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
                       serve_job **out)
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
    j->pending = n;
    pthread_cond_init(&j->done, NULL);
    pthread_mutex_lock(&s->mu);
    if (s->stopping || n > s->cap - s->depth) {
        pthread_mutex_unlock(&s->mu);
        j->text = NULL; /* still the caller's */
        j->len = NULL;
        job_free(j);
        return 429;
    }
    for (int i = 0; i < n; i++)
        s->queue[s->depth++] = (item){j, i};
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
        int e = pthread_cond_timedwait(&j->done, &s->mu, &ts);
        (void)e;
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
        pthread_cond_signal(&s->wake); /* drops its queued sentences */
    }
    pthread_mutex_unlock(&s->mu);
}
