/* clformer serve: the HTTP side, on libmicrohttpd (serve.h).
 *
 * A thread per connection (MHD_USE_THREAD_PER_CONNECTION): a request's handler reads the
 * body (refused with 413 once past --max-body; a form body, urlencoded or multipart, goes
 * through libmicrohttpd's post processor into a serve_form as it arrives), parses it
 * (serve_api.c), queues its
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

/* The post processor's buffer (keys and multipart headers): more is a malformed form. */
#define SERVE_FORM_BUFFER 8192

typedef enum {
    ROUTE_NONE,
    ROUTE_LIBRE,
    ROUTE_DETECT,
    ROUTE_NATIVE,
    ROUTE_LANGUAGES,
    ROUTE_HEALTH,
    ROUTE_METRICS
} route;

/* The methods of a route: GET (and HEAD), POST. */
enum { METHOD_GET = 1, METHOD_POST = 2 };

/* One request's state, from its first call to the completed callback. */
typedef struct conn {
    serve_server *s;
    route r;
    int methods; /* the route's */
    double t0;
    char *body;
    size_t len, cap; /* len: the body's bytes read (a form's too, which are not kept) */
    size_t dropped;  /* bytes of a body past --max-body, read and dropped */
    int too_big;     /* the body is past --max-body: 413 once it is read */
    int answered;    /* a response is queued */
    int late;        /* begun after SIGTERM: 503 */
    /* a form body: its post processor and fields, or the refusal its parse met */
    struct MHD_PostProcessor *pp;
    int is_form;
    serve_form form;
    int refused; /* the HTTP status to answer once the body is read, else 0 */
    char why[512];
} conn;

static route find_route(const char *url, int *methods)
{
    static const struct {
        const char *url;
        route r;
        int methods;
    } routes[] = {
        {"/translate", ROUTE_LIBRE, METHOD_POST},
        {"/detect", ROUTE_DETECT, METHOD_POST},
        {"/v1/translate", ROUTE_NATIVE, METHOD_POST},
        {"/languages", ROUTE_LANGUAGES, METHOD_GET | METHOD_POST}, /* LibreTranslate takes both */
        {"/health", ROUTE_HEALTH, METHOD_GET},
        {"/metrics", ROUTE_METRICS, METHOD_GET},
    };
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (strcmp(url, routes[i].url) == 0) {
            *methods = routes[i].methods;
            return routes[i].r;
        }
    return ROUTE_NONE;
}

static const char *methods_text(int methods)
{
    return methods == (METHOD_GET | METHOD_POST) ? "GET, POST"
           : methods == METHOD_POST              ? "POST"
                                                 : "GET";
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
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, methods_text(c->methods));
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
 * language, its targets those of every model that translates from it; the name is
 * iso-codes' (cmd_serve.c), else the code. */
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
                entry = json_pack("{s:s,s:s,s:[]}", "code", m->sources[k], "name",
                                  m->source_names[k], "targets");
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
    const int auto_src = !q->source || strcmp(q->source, "auto") == 0;
    if (q->model) {
        for (int i = 0; i < s->n_models; i++)
            if (strcmp(s->models[i].name, q->model) == 0) {
                serve_model *m = &s->models[i];
                if ((!auto_src && !has_source(m, q->source)) ||
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

/* The languages request q's sentences are framed with on model m: *source and *target set
 * to the codes to give the scheduler (NULL: the translator's own). There is no language
 * detector: a source of "auto" (or none) is the model's when it has one source language,
 * else refused, as is no target for a model of several target languages that picks its
 * target by a token. 0, or 400 with why. */
static int request_languages(const serve_model *m, const serve_request *q, const char **source,
                             const char **target, char *why, size_t n)
{
    const int auto_src = !q->source || strcmp(q->source, "auto") == 0;
    *source = *target = NULL;
    if (auto_src && m->n_sources > 1 && (q->source || m->source_tokens)) {
        if (q->source)
            snprintf(why, n,
                     "source 'auto': there is no language detector, and model '%s' translates "
                     "from %d languages: name one (GET /languages)",
                     m->name, m->n_sources);
        else
            snprintf(why, n, "model '%s' translates from %d languages: give 'source'", m->name,
                     m->n_sources);
        return 400;
    }
    if (!q->target && m->n_targets > 1 && m->target_tokens) {
        snprintf(why, n, "model '%s' translates into %d languages: give 'target'", m->name,
                 m->n_targets);
        return 400;
    }
    if (!auto_src && m->source_tokens && m->n_sources > 1)
        *source = q->source;
    if (q->target && m->target_tokens && m->n_targets > 1)
        *target = q->target;
    return 0;
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

/* The request of c's body, JSON or a form's fields; 0, or the HTTP status with why. */
static int parse_body(conn *c, serve_api_kind kind, serve_request *q, char *why, size_t n)
{
    const serve_limits *lim = &c->s->o.limits;
    if (c->is_form)
        return serve_parse_form(kind, &c->form, lim, q, why, n);
    return serve_parse_request(kind, c->body ? c->body : "", c->len, lim, q, why, n);
}

/* With --api-keys: NULL when the request gives a key of the file (api_key, or an
 * Authorization: Bearer header), else why not (a 403). */
static const char *key_refused(const serve_server *s, struct MHD_Connection *mc,
                               const serve_request *q)
{
    if (s->n_keys == 0)
        return NULL;
    const char *key = q->api_key;
    const char *auth = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Authorization");
    if (!key && auth && strncmp(auth, "Bearer ", 7) == 0)
        key = auth + 7;
    return key_ok(s, key) ? NULL : key ? "invalid api_key" : "missing api_key";
}

/* POST /detect: there is no language detector. When every model served translates from
 * the same single language, that is the answer (LibreTranslate's [{"confidence",
 * "language"}]); otherwise 501, saying to name the source language. */
static enum MHD_Result detect(conn *c, struct MHD_Connection *mc)
{
    serve_server *s = c->s;
    serve_request q;
    char why[512];
    int code = parse_body(c, SERVE_API_LIBRE, &q, why, sizeof why);
    if (code)
        return respond_error(c, mc, (unsigned)code, "%s", why);
    const char *refused = key_refused(s, mc, &q);
    serve_request_free(&q);
    if (refused)
        return respond_error(c, mc, 403, "%s", refused);
    const char *only = s->models[0].sources[0];
    int one = 1;
    for (int i = 0; i < s->n_models; i++)
        for (int k = 0; k < s->models[i].n_sources; k++)
            one &= strcmp(only, s->models[i].sources[k]) == 0;
    if (!one)
        return respond_error(c, mc, 501,
                             "there is no language detector: name the source language "
                             "(GET /languages lists them)");
    return respond(c, mc, 200,
                   serve_json_line(json_pack("[{s:f,s:s}]", "confidence", 100.0, "language", only)),
                   "application/json");
}

static enum MHD_Result translate(conn *c, struct MHD_Connection *mc)
{
    serve_server *s = c->s;
    serve_request q;
    serve_split split = {0};
    serve_job *job = NULL;
    char why[512];
    const double t_body = cli_now_s();
    int code = parse_body(c, c->r == ROUTE_LIBRE ? SERVE_API_LIBRE : SERVE_API_NATIVE, &q, why,
                          sizeof why);
    if (code)
        return respond_error(c, mc, (unsigned)code, "%s", why);
    enum MHD_Result ret;
    const char *refused = key_refused(s, mc, &q);
    if (refused) {
        ret = respond_error(c, mc, 403, "%s", refused);
        goto done;
    }
    serve_model *m = pick_model(s, &q, why, sizeof why);
    clf_translate_opts o;
    const char *source = NULL, *target = NULL;
    if (!m || request_opts(m, &q, &o, why, sizeof why) ||
        request_languages(m, &q, &source, &target, why, sizeof why)) {
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
    code = serve_sched_submit(m->sched, q.text, q.len, q.n, &o, source, target, &job);
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

/* The post processor's iterator: each piece of a form field's value into c->form; a
 * refusal stops the parse (c->refused answers once the body is read). */
static enum MHD_Result form_piece(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *filename, const char *content_type,
                                  const char *transfer_encoding, const char *data, uint64_t off,
                                  size_t size)
{
    conn *c = cls;
    (void)kind;
    (void)filename;
    (void)content_type;
    (void)transfer_encoding;
    int code =
        serve_form_add(&c->form, key, data, off, size, &c->s->o.limits, c->why, sizeof c->why);
    if (code) {
        c->refused = code;
        return MHD_NO;
    }
    return MHD_YES;
}

/* A POST body's Content-Type: a form (urlencoded or multipart/form-data) gets a post
 * processor; JSON (or anything else) is read whole. */
static void begin_body(conn *c, struct MHD_Connection *mc)
{
    const char *ctype = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Content-Type");
    if (!ctype || (c->r != ROUTE_LIBRE && c->r != ROUTE_DETECT && c->r != ROUTE_NATIVE))
        return;
    int urlencoded = strncasecmp(ctype, MHD_HTTP_POST_ENCODING_FORM_URLENCODED,
                                 strlen(MHD_HTTP_POST_ENCODING_FORM_URLENCODED)) == 0;
    int multipart = strncasecmp(ctype, "multipart/", 10) == 0;
    if (!urlencoded && !multipart)
        return;
    c->is_form = 1;
    if (!(c->pp = MHD_create_post_processor(mc, SERVE_FORM_BUFFER, form_piece, c))) {
        c->refused = 400;
        if (strncasecmp(ctype, MHD_HTTP_POST_ENCODING_MULTIPART_FORMDATA,
                        strlen(MHD_HTTP_POST_ENCODING_MULTIPART_FORMDATA)) != 0)
            snprintf(c->why, sizeof c->why,
                     "Content-Type '%.64s': expected JSON, application/x-www-form-urlencoded or "
                     "multipart/form-data",
                     ctype);
        else
            snprintf(c->why, sizeof c->why,
                     "Content-Type '%.64s': a multipart/form-data body needs a boundary", ctype);
    }
}

/* Ends a form body's parse: the post processor's last field and its verdict. */
static void end_form(conn *c)
{
    if (!c->pp)
        return;
    enum MHD_Result ok = MHD_destroy_post_processor(c->pp);
    c->pp = NULL;
    if (ok != MHD_YES && !c->refused) {
        c->refused = 400;
        snprintf(c->why, sizeof c->why, "a malformed or incomplete form body");
    }
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
        c->r = find_route(url, &c->methods);
        if (c->r == ROUTE_NONE)
            return respond_error(c, mc, 404, "no such path '%s'", url);
        int is_get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
        int is_post = strcmp(method, "POST") == 0;
        if (!((is_get && (c->methods & METHOD_GET)) || (is_post && (c->methods & METHOD_POST))))
            return respond_error(c, mc, 405, "%s %s: expected %s", method, url,
                                 methods_text(c->methods));
        if (!is_post)
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
        begin_body(c, mc);
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
        if (c->is_form) { /* parsed as it comes; after a refusal, read and dropped */
            c->len += n;
            if (c->pp && !c->refused && MHD_post_process(c->pp, upload_data, n) != MHD_YES &&
                !c->refused) {
                c->refused = 400;
                snprintf(c->why, sizeof c->why, "a malformed form body");
            }
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
    if (!c->refused)
        end_form(c);
    if (c->refused)
        return respond_error(c, mc, (unsigned)c->refused, "%s", c->why);
    switch (c->r) {
    case ROUTE_LIBRE:
    case ROUTE_NATIVE:
        return translate(c, mc);
    case ROUTE_DETECT:
        return detect(c, mc);
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
    if (c->pp)
        MHD_destroy_post_processor(c->pp);
    serve_form_free(&c->form);
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
