/* clformer serve: the counters of GET /metrics, in Prometheus's text exposition format
 * (version 0.0.4): requests by HTTP status, sentences and output tokens decoded, the
 * sentences waiting per model, and histograms of the decoder rows per step (batch
 * occupancy) and of the requests' latency. */
#include "serve.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int codes[] = {200, 400, 403, 404, 405, 413, 429, 500, 503, 504};
#define N_CODES (int)(sizeof codes / sizeof codes[0])
static const double batch_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128};
#define N_BATCH (int)(sizeof batch_bounds / sizeof batch_bounds[0])
static const double latency_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                        1,     2.5,  5,     10,   30,  60};
#define N_LATENCY (int)(sizeof latency_bounds / sizeof latency_bounds[0])

typedef struct histogram {
    long count[16]; /* per bound, not cumulative; [n]: above the last */
    double sum;
    long total;
} histogram;

struct serve_metrics {
    pthread_mutex_t mu;
    long requests[N_CODES + 1]; /* [N_CODES]: any other status */
    long sentences, tokens, batches;
    histogram batch, latency;
};

serve_metrics *serve_metrics_new(void)
{
    serve_metrics *m = calloc(1, sizeof *m);
    if (m)
        pthread_mutex_init(&m->mu, NULL);
    return m;
}

void serve_metrics_free(serve_metrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static void observe(histogram *h, const double *bounds, int n, double v)
{
    int i = 0;
    while (i < n && v > bounds[i])
        i++;
    h->count[i]++;
    h->sum += v;
    h->total++;
}

void serve_metrics_request(serve_metrics *m, int code, double seconds)
{
    int i = 0;
    while (i < N_CODES && codes[i] != code)
        i++;
    pthread_mutex_lock(&m->mu);
    m->requests[i]++;
    observe(&m->latency, latency_bounds, N_LATENCY, seconds);
    pthread_mutex_unlock(&m->mu);
}

void serve_metrics_step(serve_metrics *m, long rows, int sentences, long tokens)
{
    pthread_mutex_lock(&m->mu);
    m->sentences += sentences;
    m->tokens += tokens;
    if (rows >= 0) {
        m->batches++;
        observe(&m->batch, batch_bounds, N_BATCH, (double)rows);
    }
    pthread_mutex_unlock(&m->mu);
}

/* A growing text buffer; ok drops to 0 when out of memory. */
typedef struct text {
    char *s;
    size_t len, cap;
    int ok;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(text *t, const char *fmt, ...)
{
    if (!t->ok)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->ok = 0;
            return;
        }
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = 2 * t->cap + (size_t)n;
        char *s = realloc(t->s, cap);
        if (!s) {
            t->ok = 0;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
}

static void put_histogram(text *t, const char *name, const char *help, const histogram *h,
                          const double *bounds, int n)
{
    put(t, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    long cum = 0;
    for (int i = 0; i < n; i++) {
        cum += h->count[i];
        put(t, "%s_bucket{le=\"%g\"} %ld\n", name, bounds[i], cum);
    }
    put(t, "%s_bucket{le=\"+Inf\"} %ld\n%s_sum %.6f\n%s_count %ld\n", name, h->total, name, h->sum,
        name, h->total);
}

char *serve_metrics_text(serve_metrics *m, const char *const *name, const int *queue_depth,
                         int n_models)
{
    text t = {malloc(4096), 0, 4096, 1};
    if (!t.s)
        return NULL;
    pthread_mutex_lock(&m->mu);
    put(&t, "# HELP clformer_requests_total HTTP requests answered, by status.\n"
            "# TYPE clformer_requests_total counter\n");
    for (int i = 0; i < N_CODES; i++)
        put(&t, "clformer_requests_total{code=\"%d\"} %ld\n", codes[i], m->requests[i]);
    put(&t, "clformer_requests_total{code=\"other\"} %ld\n", m->requests[N_CODES]);
    put(&t,
        "# HELP clformer_sentences_total Sentences decoded.\n"
        "# TYPE clformer_sentences_total counter\nclformer_sentences_total %ld\n"
        "# HELP clformer_tokens_out_total Output tokens of the best hypotheses.\n"
        "# TYPE clformer_tokens_out_total counter\nclformer_tokens_out_total %ld\n",
        m->sentences, m->tokens);
    put_histogram(&t, "clformer_batch_rows",
                  "Decoder rows per step (batch occupancy; a sentence of beam K takes K).",
                  &m->batch, batch_bounds, N_BATCH);
    put_histogram(&t, "clformer_request_seconds", "Time from a request's headers to its answer.",
                  &m->latency, latency_bounds, N_LATENCY);
    pthread_mutex_unlock(&m->mu);
    put(&t, "# HELP clformer_queue_sentences Sentences waiting to be decoded, by model.\n"
            "# TYPE clformer_queue_sentences gauge\n");
    for (int i = 0; i < n_models; i++)
        put(&t, "clformer_queue_sentences{model=\"%s\"} %d\n", name[i], queue_depth[i]);
    if (!t.ok) {
        free(t.s);
        return NULL;
    }
    return t.s;
}
