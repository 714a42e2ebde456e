/* clformer serve: the parts of the server (README, "Serving").
 *   cmd_serve.c     options, the models opened, startup, signals, shutdown
 *   serve_http.c    libmicrohttpd: routes, bodies up to --max-body, answers
 *   serve_api.c     request bodies parsed, answers' JSON built (serve_api.h; no I/O)
 *   serve_sched.c   per model: a bounded set of sentences; one thread that decodes them all
 *   serve_metrics.c counters and histograms, in Prometheus's text format
 * A request's sentences go to its model's scheduler as one job; each model keeps one
 * decoding batch (a clf_translator_stream) that sentences join at every step, whatever
 * their options, and leave when done (continuous batching); the runner thread steps the
 * models in turn and hands each job its results. */
#ifndef CLF_SERVE_H
#define CLF_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "cli.h" /* cli_now_s: every duration of the server */
#include "serve_api.h"
#include "clformer/translator.h"

/* ---- metrics (serve_metrics.c) ---- */
typedef struct serve_metrics serve_metrics;
serve_metrics *serve_metrics_new(void);
void serve_metrics_free(serve_metrics *m);
void serve_metrics_request(serve_metrics *m, int code, double seconds);
/* One pass of a scheduler: a decoder step of `rows` rows (-1: no step ran), after which
 * `sentences` sentences finished with `tokens` output tokens (their best hypotheses). */
void serve_metrics_step(serve_metrics *m, long rows, int sentences, long tokens);
/* The Prometheus text: the counters, and queue_depth[i] sentences waiting for model name[i].
 * malloc'd, or NULL. */
char *serve_metrics_text(serve_metrics *m, const char *const *name, const int *queue_depth,
                         int n_models);

/* ---- schedulers and their runner (serve_sched.c) ---- */
typedef struct serve_runner serve_runner;
typedef struct serve_sched serve_sched;
typedef struct serve_job serve_job;

/* fn(arg) on a thread started for it, which exits when fn returns (so that the OpenMP
 * workers fn makes go with it; serve_sched.c says why), waited for; fn's status, with its
 * message as this thread's clf_last_error. */
clf_status serve_on_thread(clf_status (*fn)(void *), void *arg);
/* The thread that decodes for every model: each pass steps each busy model once. */
clf_status serve_runner_start(serve_runner **out);
/* Decodes what every model accepted, then stops the thread and frees r and the schedulers
 * started on it. */
void serve_runner_stop(serve_runner *r);
/* A scheduler on r for translator t, which it takes (freed with r, or here on failure):
 * steps of at most max_rows decoder rows, arrivals held back up to join_wait steps to
 * share an encoder pass (clformer/decode.h), at most queue_cap sentences accepted and not
 * yet answered. After a failed step the translator is opened again with reopen (its
 * strings must outlive s). */
clf_status serve_sched_start(serve_runner *r, clf_translator *t, const clf_translator_opts *reopen,
                             int max_rows, int join_wait, int queue_cap, serve_metrics *metrics,
                             serve_sched **out);
int serve_sched_depth(serve_sched *s);

/* Queues n sentences decoded with o, from language source into target (codes of the
 * model's languages: section, for a model that places language tokens; NULL: the
 * translator's own, which it has when the model lists one). Returns 0 with *out, the job
 * then owning text[0..n), text and len (malloc'd); or 429 when the queue has no room for
 * them, 500 out of memory, leaving them the caller's. */
int serve_sched_submit(serve_sched *s, char **text, size_t *len, int n, const clf_translate_opts *o,
                       const char *source, const char *target, serve_job **out);
/* Waits until the job is decoded (0), until monotonic time deadline (504), or until
 * gone(arg) says the client left (-1; checked every 50 ms). */
int serve_job_wait(serve_job *j, double deadline, int (*gone)(void *), void *arg);
/* A decoded job's results ([n]; status CLF_OK), or NULL with *error set when the backend
 * failed. */
const clf_translation *serve_job_results(serve_job *j, const char **error);
/* The caller is done with j: its sentences still queued are dropped, its results freed once
 * the scheduler is done with them. */
void serve_job_release(serve_job *j);

/* ---- the server (serve_http.c) ---- */
typedef struct serve_model {
    char *name;
    clf_translator *tr; /* until the scheduler takes it */
    char backend[64];   /* the backend's name, for GET /health */
    serve_sched *sched;
    char **sources, **targets; /* language codes: the config's languages:, else the name */
    int n_sources, n_targets;
    char **source_names; /* [n_sources]: their names, for GET /languages */
    /* the model places language tokens (M2M-100): a request's languages pick them */
    int source_tokens, target_tokens;
    int max_len; /* the output limit of a request that gives none (README, "Serving") */
    int beam;    /* the config's generate: beam (1 without one) */
} serve_model;

typedef struct serve_options {
    const char *host;
    int port;
    int max_batch, join_wait, queue;
    size_t max_body;
    double timeout_s;
    serve_limits limits;
    const char *api_keys; /* file, or NULL */
} serve_options;

typedef struct serve_server serve_server;
/* Listens on o->host:o->port and answers over models[0..n) (borrowed). */
int serve_http_start(const serve_options *o, serve_model *models, int n, char **keys, int n_keys,
                     serve_metrics *metrics, serve_server **out);
int serve_http_port(serve_server *s);
/* Stops accepting connections; requests already read are answered. */
void serve_http_quiesce(serve_server *s);
/* Waits until no request is in flight, or up to wait_s seconds. */
void serve_http_drain(serve_server *s, double wait_s);
void serve_http_stop(serve_server *s);

#endif
