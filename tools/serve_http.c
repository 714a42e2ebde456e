/* clformer serve: the HTTP side, on libmicrohttpd (serve.h).
 *
 * A thread per connection (MHD_USE_THREAD_PER_CONNECTION): a request's handler reads the
 * body (refused with 413 once past --max-body), parses it (serve_api.c), queues its
 * sentences with its model's scheduler (serve_sched.c) and waits for them in its own
 * thread, watching the deadline and the socket: a client that closed its connection has
 * its queued sentences dropped before they are decoded. Every answer is one line of JSON
 * ({"error": "..."} for a refusal), or the Prometheus text of /metrics. */
#include "serve.h"

#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* Connections served at once (each a thread), and how long one may stay idle. */
#define SERVE_CONNECTIONS_MAX 512
#define SERVE_IDLE_TIMEOUT_S  30
/* Bytes of a body past --max-body read and dropped before the 413 is sent anyway. */
#define SERVE_DROP_MAX (64u << 20)

struct serve_server {
    serve_options o;
    serve_model *models;
    int n_models;
    char **keys;
    int n_keys;
    serve_metrics *metrics;
    struct MHD_Daemon *d;
    int port;
    pthread_mutex_t mu;
    pthread_cond_t idle;
    int in_flight; /* requests whose answer is not yet sent */
    int quiescing;
};

typedef enum {
    ROUTE_NONE,
    ROUTE_LIBRE,
    ROUTE_NATIVE,
    ROUTE_LANGUAGES,
    ROUTE_HEALTH,
    ROUTE_METRICS
} route;

/* One request's state, from its first call to the completed callback. */
typedef struct conn {
    serve_server *s;
    route r;
    double t0;
    char *body;
    size_t len, cap;
    size_t dropped; /* bytes of a body past --max-body, read and dropped */
    int too_big;    /* the body is past --max-body: 413 once it is read */
    int answered;   /* a response is queued */
    int late;       /* begun after SIGTERM: 503 */
} conn;

static route find_route(const char *url, int *post)
{
    static const struct {
        const char *url;
        route r;
        int post;
    } routes[] = {
        {"/translate", ROUTE_LIBRE, 1},     {"/v1/translate", ROUTE_NATIVE, 1},
        {"/languages", ROUTE_LANGUAGES, 0}, {"/health", ROUTE_HEALTH, 0},
        {"/metrics", ROUTE_METRICS, 0},
    };
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (strcmp(url, routes[i].url) == 0) {
            *post = routes[i].post;
            return routes[i].r;
        }
    return ROUTE_NONE;
}

/* Queues body (malloc'd, taken) with status code; NULL body: out of memory, 500. */
static enum MHD_Result respond(conn *c, struct MHD_Connection *mc, unsigned code, char *body,
                               const char *type)
{
    if (!body) {
        code = 500;
        type = "application/json";
        body = strdup("{\"error\":\"out of memory\"}\n");
        if (!body)
            return MHD_NO;
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (code == 429)
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (code == 405)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW,
                                c->r == ROUTE_LIBRE || c->r == ROUTE_NATIVE ? "POST" : "GET");
    pthread_mutex_lock(&c->s->mu);
    int closing = c->s->quiescing;
    pthread_mutex_unlock(&c->s->mu);
    if (closing)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(mc, code, r);
    MHD_destroy_response(r);
    c->answered = 1;
    serve_metrics_request(c->s->metrics, (int)code, cli_now_s() - c->t0);
    return ret;
}

static enum MHD_Result respond_error(conn *c, struct MHD_Connection *mc, unsigned code,
                                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static enum MHD_Result respond_error(conn *c, struct MHD_Connection *mc, unsigned code,
                                     const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return respond(c, mc, code, serve_error_json(why), "application/json");
}

static int has_code(char *const *codes, int n, const char *code)
{
    for (int i = 0; i < n; i++)
        if (strcmp(codes[i], code) == 0)
            return 1;
    return 0;
}

static int has_target(const serve_model *m, const char *target)
{
    return has_code(m->targets, m->n_targets, target);
}

static int has_source(const serve_model *m, const char *source)
{
    return has_code(m->sources, m->n_sources, source);
}

/* GET /languages: LibreTranslate's [{"code", "name", "targets"}], one entry per source
 * language, its targets those of every model that translates from it. */
static char *languages_json(const serve_server *s)
{
    json_t *list = json_array();
    for (int i = 0; list && i < s->n_models; i++) {
        const serve_model *m = &s->models[i];
        for (int k = 0; k < m->n_sources; k++) {
            json_t *entry = NULL, *e;
            size_t at;
            json_array_foreach(list, at, e)
            {
                if (strcmp(json_string_value(json_object_get(e, "code")), m->sources[k]) == 0)
                    entry = e;
            }
            if (!entry) {
                entry = json_pack("{s:s,s:s,s:[]}", "code", m->sources[k], "name", m->sources[k],
                                  "targets");
                if (json_array_append_new(list, entry))
                    goto fail;
            }
            json_t *targets = json_object_get(entry, "targets");
            for (int t = 0; t < m->n_targets; t++) {
                int seen = 0;
                json_array_foreach(targets, at, e)
                {
                    seen |= strcmp(json_string_value(e), m->targets[t]) == 0;
                }
                if (!seen && json_array_append_new(targets, json_string(m->targets[t])))
                    goto fail;
            }
        }
    }
    return serve_json_line(list);
fail:
    json_decref(list);
    return NULL;
}

/* codes[0..n) as a JSON array, or NULL. */
static json_t *code_list(char *const *codes, int n)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_string(codes[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static char *health_json(const serve_server *s)
{
    json_t *models = json_array();
    for (int i = 0; models && i < s->n_models; i++) {
        if (json_array_append_new(
                models,
                json_pack("{s:s,s:o,s:o,s:i,s:i,s:s}", "name", s->models[i].name, "sources",
                          code_list(s->models[i].sources, s->models[i].n_sources), "targets",
                          code_list(s->models[i].targets, s->models[i].n_targets), "max_len",
                          s->models[i].max_len, "beam", s->models[i].beam, "backend",
                          s->models[i].backend))) {
            json_decref(models);
            return NULL;
        }
    }
    return serve_json_line(json_pack("{s:s,s:o}", "status", "ok", "models", models));
}

static char *metrics_text(const serve_server *s)
{
    const char *names[64];
    int depth[64];
    int n = s->n_models < 64 ? s->n_models : 64;
    for (int i = 0; i < n; i++) {
        names[i] = s->models[i].name;
        depth[i] = serve_sched_depth(s->models[i].sched);
    }
    return serve_metrics_text(s->metrics, names, depth, n);
}

/* The model a request names: by "model", or by source and target languages. Returns it, or
 * NULL with why set (an HTTP 400). */
static serve_model *pick_model(serve_server *s, const serve_request *q, char *why, size_t n)
{
    if (q->model) {
        for (int i = 0; i < s->n_models; i++)
            if (strcmp(s->models[i].name, q->model) == 0) {
                serve_model *m = &s->models[i];
                if ((q->source && strcmp(q->source, "auto") != 0 && !has_source(m, q->source)) ||
                    (q->target && !has_target(m, q->target))) {
                    snprintf(why, n, "model '%s' does not translate %s to %s (GET /languages)",
                             m->name, q->source ? q->source : "auto",
                             q->target ? q->target : "any language");
                    return NULL;
                }
                return m;
            }
        snprintf(why, n, "unknown model '%s' (GET /health lists them)", q->model);
        return NULL;
    }
    if (q->kind == SERVE_API_LIBRE && (!q->source || !q->target)) {
        snprintf(why, n, "missing '%s'", q->source ? "target" : "source");
        return NULL;
    }
    if (!q->source && !q->target) {
        if (s->n_models == 1)
            return &s->models[0];
        snprintf(why, n, "%d models are served: name one ('model') or the languages", s->n_models);
        return NULL;
    }
    int auto_src = !q->source || strcmp(q->source, "auto") == 0;
    serve_model *found = NULL;
    int matches = 0;
    for (int i = 0; i < s->n_models; i++) {
        serve_model *m = &s->models[i];
        if ((auto_src || has_source(m, q->source)) && (!q->target || has_target(m, q->target))) {
            if (!found)
                found = m;
            matches++;
        }
    }
    if (!found)
        snprintf(why, n, "no model translates %s to %s (GET /languages lists the pairs)",
                 auto_src ? "auto" : q->source, q->target ? q->target : "any language");
    else if (auto_src && matches > 1) {
        snprintf(why, n, "source 'auto' matches %d models: name the source language", matches);
        return NULL;
    }
    return found;
}

/* The decoding options of request q for model m; 0, or 400 with why. */
static int request_opts(const serve_model *m, const serve_request *q, clf_translate_opts *o,
                        char *why, size_t n)
{
    clf_translate_opts_default(o);
    o->max_len = m->max_len;
    if (q->kind == SERVE_API_LIBRE) {
        if (q->alternatives > 0) {
            o->n_best = q->alternatives + 1;
            o->beam = m->beam > o->n_best ? m->beam : o->n_best;
        }
        return 0;
    }
    o->want_scores = 1; /* every hypothesis of the answer has its score, greedy ones too */
    if (q->max_len > m->max_len) {
        snprintf(why, n, "'max_len': %d is more than the model's limit of %d", q->max_len,
                 m->max_len);
        return 400;
    }
    if (q->max_len > 0)
        o->max_len = q->max_len;
    if (q->length_penalty >= 0.0f)
        o->length_penalty = q->length_penalty;
    if (q->n_best > 0)
        o->n_best = q->n_best;
    o->beam = q->beam > 0 ? q->beam : (m->beam > o->n_best ? m->beam : o->n_best);
    if (o->n_best > o->beam) {
        snprintf(why, n, "'n_best': %d is more than the beam of %d", o->n_best, o->beam);
        return 400;
    }
    return 0;
}

/* The client closed its side: a read would end (0) or fail for good. */
static int client_gone(void *arg)
{
    int fd = *(int *)arg;
    char b;
    ssize_t r = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static int key_ok(const serve_server *s, const char *key)
{
    for (int i = 0; key && i < s->n_keys; i++)
        if (strcmp(s->keys[i], key) == 0)
            return 1;
    return 0;
}

/* The q item that split sentence k came from (k itself when nothing was split). */
static int split_item(const serve_split *sp, int k)
{
    for (int i = 0; i < sp->n_items; i++)
        for (int p = sp->first[i]; p < sp->first[i] + sp->count[i]; p++)
            if (sp->pieces[p].sentence == k)
                return i;
    return k;
}

/* LibreTranslate's answer: each q item joined back from its sentences' translations, the
 * h-th alternative from their h-th hypotheses (a sentence without one: nothing). */
static enum MHD_Result respond_libre(conn *c, struct MHD_Connection *mc, const serve_model *m,
                                     const serve_request *q, const serve_split *sp,
                                     const clf_translate_opts *o, const clf_translation *tr)
{
    const int items = sp->n_items, per = o->n_best > 0 ? o->n_best : 1;
    char **joined = calloc((size_t)(items > 0 ? items : 1) * per, sizeof *joined);
    const char **texts = calloc(q->n > 0 ? (size_t)q->n : 1, sizeof *texts);
    float *scores = calloc((size_t)(items > 0 ? items : 1) * per, sizeof *scores);
    serve_result *res = calloc(items > 0 ? (size_t)items : 1, sizeof *res);
    char *body = NULL;
    int ok = joined && texts && scores && res;
    for (int h = 0; ok && h < per; h++) {
        for (int k = 0; k < q->n; k++)
            texts[k] = h < tr[k].n_hyps ? tr[k].hyps[h].text : "";
        for (int i = 0; ok && i < items; i++)
            ok = (joined[(size_t)i * per + h] = serve_split_join(sp, i, texts)) != NULL;
    }
    if (ok) {
        for (int i = 0; i < items; i++)
            res[i] = (serve_result){.n_hyps = per,
                                    .text = (const char *const *)joined + (size_t)i * per,
                                    .score = scores + (size_t)i * per};
        /* the answer's shape is q's as sent: one item per q entry */
        serve_request shape = *q;
        shape.n = items;
        int auto_src = q->source && strcmp(q->source, "auto") == 0;
        body =
            serve_libre_response(&shape, res, auto_src && m->n_sources == 1 ? m->sources[0] : NULL);
    }
    for (int i = 0; joined && i < items * per; i++)
        free(joined[i]);
    free(joined);
    free(texts);
    free(scores);
    free(res);
    return respond(c, mc, 200, body, "application/json");
}

static enum MHD_Result translate(conn *c, struct MHD_Connection *mc)
{
    serve_server *s = c->s;
    serve_request q;
    serve_split split = {0};
    serve_job *job = NULL;
    char why[512];
    const double t_body = cli_now_s();
    const char *ctype = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Content-Type");
    int form = ctype && strncasecmp(ctype, "application/x-www-form-urlencoded", 33) == 0;
    if (ctype && strncasecmp(ctype, "multipart/", 10) == 0)
        return respond_error(c, mc, 400,
                             "%s bodies are not supported: send JSON or "
                             "application/x-www-form-urlencoded",
                             "multipart");
    int code =
        serve_parse_request(c->r == ROUTE_LIBRE ? SERVE_API_LIBRE : SERVE_API_NATIVE, form,
                            c->body ? c->body : "", c->len, &s->o.limits, &q, why, sizeof why);
    if (code)
        return respond_error(c, mc, (unsigned)code, "%s", why);
    enum MHD_Result ret;
    if (s->n_keys > 0) {
        const char *key = q.api_key;
        const char *auth = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Authorization");
        if (!key && auth && strncmp(auth, "Bearer ", 7) == 0)
            key = auth + 7;
        if (!key_ok(s, key)) {
            ret = respond_error(c, mc, 403, key ? "invalid api_key" : "missing api_key");
            goto done;
        }
    }
    serve_model *m = pick_model(s, &q, why, sizeof why);
    clf_translate_opts o;
    if (!m || request_opts(m, &q, &o, why, sizeof why)) {
        ret = respond_error(c, mc, 400, "%s", why);
        goto done;
    }
    if (c->late) {
        ret = respond_error(c, mc, 503, "the server is shutting down");
        goto done;
    }
    /* LibreTranslate's q is text: its sentences are decoded one by one */
    if (c->r == ROUTE_LIBRE &&
        (code = serve_split_request(&q, s->o.limits.max_sentences, &split, why, sizeof why))) {
        ret = respond_error(c, mc, (unsigned)code, "%s", why);
        goto done;
    }
    code = serve_sched_submit(m->sched, q.text, q.len, q.n, &o, &job);
    if (code == 429) {
        ret = respond_error(c, mc, 429, "the queue of model '%s' is full (%d sentences)", m->name,
                            s->o.queue);
        goto done;
    } else if (code) {
        ret = respond_error(c, mc, 500, "out of memory");
        goto done;
    }
    q.text = NULL; /* the job's now */
    q.len = NULL;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    int fd = ci ? ci->connect_fd : -1;
    /* the deadline counts from the whole body, so that a slow upload is not held against it */
    code = serve_job_wait(job, t_body + s->o.timeout_s, fd >= 0 ? client_gone : NULL, &fd);
    if (code == -1) {
        /* nobody to answer: drop the connection */
        serve_metrics_request(s->metrics, 499, cli_now_s() - c->t0);
        c->answered = 1;
        ret = MHD_NO;
        goto done;
    }
    if (code == 504) {
        ret = respond_error(c, mc, 504, "no answer within the server's --timeout of %g s",
                            s->o.timeout_s);
        goto done;
    }
    const char *error;
    const clf_translation *tr = serve_job_results(job, &error);
    if (!tr) {
        ret = respond_error(c, mc, 500, "translation failed: %s", error);
        goto done;
    }
    const char *field = c->r == ROUTE_LIBRE ? "q" : "sentences";
    for (int i = 0; i < q.n; i++)
        if (tr[i].status != CLF_OK) {
            ret = respond_error(c, mc, 400, "%s[%d]: %s", field, split_item(&split, i),
                                tr[i].error ? tr[i].error : "refused");
            goto done;
        }
    if (c->r == ROUTE_LIBRE) {
        ret = respond_libre(c, mc, m, &q, &split, &o, tr);
        goto done;
    }
    serve_result *res = calloc(q.n > 0 ? (size_t)q.n : 1, sizeof *res);
    const char **texts = NULL;
    float *scores = NULL;
    int total = 0;
    for (int i = 0; i < q.n; i++)
        total += tr[i].n_hyps;
    texts = malloc((size_t)(total > 0 ? total : 1) * sizeof *texts);
    scores = malloc((size_t)(total > 0 ? total : 1) * sizeof *scores);
    char *body = NULL;
    if (res && texts && scores) {
        int at = 0;
        for (int i = 0; i < q.n; i++) {
            res[i].n_hyps = tr[i].n_hyps;
            res[i].text = texts + at;
            res[i].score = scores + at;
            for (int h = 0; h < tr[i].n_hyps; h++, at++) {
                texts[at] = tr[i].hyps[h].text;
                scores[at] = tr[i].hyps[h].score;
            }
        }
        body = serve_native_response(m->name, res, q.n);
    }
    free(res);
    free(texts);
    free(scores);
    ret = respond(c, mc, 200, body, "application/json");
done:
    serve_job_release(job);
    serve_split_free(&split);
    serve_request_free(&q);
    return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *mc, const char *url,
                               const char *method, const char *version, const char *upload_data,
                               size_t *upload_data_size, void **con_cls)
{
    serve_server *s = cls;
    conn *c = *con_cls;
    (void)version;
    if (!c) {
        if (!(c = calloc(1, sizeof *c)))
            return MHD_NO;
        c->s = s;
        c->t0 = cli_now_s();
        *con_cls = c;
        pthread_mutex_lock(&s->mu);
        s->in_flight++;
        c->late = s->quiescing;
        pthread_mutex_unlock(&s->mu);
        int post = 0;
        c->r = find_route(url, &post);
        if (c->r == ROUTE_NONE)
            return respond_error(c, mc, 404, "no such path '%s'", url);
        int is_get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
        if (post ? strcmp(method, "POST") != 0 : !is_get)
            return respond_error(c, mc, 405, "%s %s: expected %s", method, url,
                                 post ? "POST" : "GET");
        if (!post)
            return MHD_YES;
        const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Content-Length");
        unsigned long long declared = cl ? strtoull(cl, NULL, 10) : 0;
        c->too_big = declared > s->o.max_body;
        /* a client that waits for 100 Continue, or whose body is past what is read and
         * dropped, is answered at once */
        const char *expect = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Expect");
        if (c->too_big && (expect || declared > SERVE_DROP_MAX))
            return respond_error(c, mc, 413, "the body of %s bytes is more than the limit of %zu",
                                 cl, s->o.max_body);
        return MHD_YES;
    }
    if (c->answered) {
        *upload_data_size = 0; /* the rest of a refused body is dropped */
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (c->too_big || n > s->o.max_body - c->len) {
            c->too_big = 1;
            /* Read on and drop the rest before answering 413 (closing with unread bytes
             * would reset the connection and lose the answer), up to a bound. */
            c->dropped += n;
            if (c->dropped > SERVE_DROP_MAX)
                return respond_error(c, mc, 413, "the body is more than the limit of %zu bytes",
                                     s->o.max_body);
            return MHD_YES;
        }
        if (c->len + n > c->cap) {
            size_t cap = c->cap ? 2 * c->cap : 4096;
            while (cap < c->len + n)
                cap *= 2;
            char *b = realloc(c->body, cap);
            if (!b)
                return respond_error(c, mc, 500, "out of memory");
            c->body = b;
            c->cap = cap;
        }
        memcpy(c->body + c->len, upload_data, n);
        c->len += n;
        return MHD_YES;
    }
    if (c->too_big)
        return respond_error(c, mc, 413, "the body is more than the limit of %zu bytes",
                             s->o.max_body);
    switch (c->r) {
    case ROUTE_LIBRE:
    case ROUTE_NATIVE:
        return translate(c, mc);
    case ROUTE_LANGUAGES:
        return respond(c, mc, 200, languages_json(s), "application/json");
    case ROUTE_HEALTH:
        return respond(c, mc, 200, health_json(s), "application/json");
    case ROUTE_METRICS:
        return respond(c, mc, 200, metrics_text(s), "text/plain; version=0.0.4");
    default:
        return MHD_NO;
    }
}

static void completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    serve_server *s = cls;
    conn *c = *con_cls;
    (void)mc;
    (void)toe;
    if (!c)
        return;
    free(c->body);
    free(c);
    *con_cls = NULL;
    pthread_mutex_lock(&s->mu);
    if (--s->in_flight == 0)
        pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->mu);
}

static void log_mhd(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    fprintf(stderr, "clformer: http: ");
    vfprintf(stderr, fmt, ap);
}

int serve_http_start(const serve_options *o, serve_model *models, int n, char **keys, int n_keys,
                     serve_metrics *metrics, serve_server **out)
{
    struct addrinfo hints = {0}, *ai = NULL;
    char port[16];
    serve_server *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->o = *o;
    s->models = models;
    s->n_models = n;
    s->keys = keys;
    s->n_keys = n_keys;
    s->metrics = metrics;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->idle, NULL);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(port, sizeof port, "%d", o->port);
    int e = getaddrinfo(o->host, port, &hints, &ai);
    if (e != 0) {
        fprintf(stderr, "clformer: --host %s: %s\n", o->host, gai_strerror(e));
        goto fail;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, handler, s, MHD_OPTION_EXTERNAL_LOGGER, log_mhd,
                            NULL, MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_NOTIFY_COMPLETED,
                            completed, s, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)SERVE_CONNECTIONS_MAX, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)SERVE_IDLE_TIMEOUT_S, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->d) {
        fprintf(stderr, "clformer: cannot listen on %s port %d: %s\n", o->host, o->port,
                errno ? strerror(errno) : "libmicrohttpd refused");
        goto fail;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : o->port;
    *out = s;
    return 0;
fail:
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return -1;
}

int serve_http_port(serve_server *s)
{
    return s->port;
}

void serve_http_quiesce(serve_server *s)
{
    pthread_mutex_lock(&s->mu);
    s->quiescing = 1;
    pthread_mutex_unlock(&s->mu);
    MHD_socket fd = MHD_quiesce_daemon(s->d);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
}

void serve_http_drain(serve_server *s, double wait_s)
{
    double end = cli_now_s() + wait_s;
    pthread_mutex_lock(&s->mu);
    while (s->in_flight > 0 && cli_now_s() < end) {
        pthread_mutex_unlock(&s->mu);
        usleep(20000);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
}

void serve_http_stop(serve_server *s)
{
    if (!s)
        return;
    MHD_stop_daemon(s->d);
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
