/* clformer serve: translation over HTTP (README, "Serving"; the parts in serve.h).
 *
 * Opens each -m model directory (clf_translator_open), starts its scheduler, listens
 * (loopback unless --host says otherwise) and prints "clformer: serving on http://HOST:PORT"
 * on stderr once it accepts connections. SIGTERM or SIGINT: it stops accepting, answers the
 * requests it has read, and exits 0.
 *
 * The output limit of a request that gives none is the same for every sentence of a model:
 * its config's generate.max_len, else its max_len - 1 (the decoder's positions), so that a
 * sentence's translation does not depend on the sentences it is batched with: it is what
 * `clformer translate --max-len M` gives for it (M: GET /health's max_len). */
#include <errno.h>
#include <getopt.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "clformer/json.h"
#include "serve.h"

#define DEFAULT_PORT      5000
#define DEFAULT_MAX_BATCH 32
#define DEFAULT_JOIN_WAIT 4
#define DEFAULT_QUEUE     1024
#define DEFAULT_MAX_BODY  (1 << 20)
#define DEFAULT_TIMEOUT_S 60
#define MODELS_MAX        16
/* --api-keys: a key is one line of at most this many bytes; at most KEYS_MAX of them */
#define KEY_MAX  256
#define KEYS_MAX 4096
/* Debian's iso-codes (scripts/deps.sh): the languages' names of GET /languages. */
#define ISO_CODES_DIR "/usr/share/iso-codes/json"
/* iso_639-3.json is ~0.9 MB */
#define ISO_CODES_JSON_MAX (8 << 20)

enum {
    OPT_HOST = 256,
    OPT_PORT,
    OPT_WEIGHT_TYPE,
    OPT_PRECISION,
    OPT_MAX_BATCH,
    OPT_JOIN_WAIT,
    OPT_QUEUE,
    OPT_API_KEYS,
    OPT_MAX_BODY,
    OPT_MAX_SENTENCES,
    OPT_MAX_CHARS,
    OPT_TIMEOUT,
};

static void usage(void)
{
    printf("usage: clformer serve -m MODEL_DIR [-m NAME=MODEL_DIR ...] [options]\n"
           "Translation over HTTP: LibreTranslate's POST /translate, /detect and /languages,\n"
           "the native POST /v1/translate, GET /health, GET /metrics (README, \"Serving\").\n"
           "  -m [NAME=]DIR        a model directory (as translate -m); NAME defaults to the\n"
           "                       directory's name ([A-Za-z0-9._-])\n"
           "  --host H             address to listen on (default 127.0.0.1)\n"
           "  --port P             port (default %d; 0: any free one)\n"
           "  --max-batch N        sentences decoded together at the model's beam: each\n"
           "                       decoder step holds up to N x beam rows (default %d)\n"
           "  --join-wait STEPS    steps arrivals may wait for others to share their encoder\n"
           "                       pass while the batch is at least half full (default %d;\n"
           "                       0: they join at the next step)\n"
           "  --queue N            sentences waiting per model; more: 429 (default %d)\n"
           "  --max-body BYTES     request body limit; more: 413 (default %d)\n"
           "  --max-sentences N    sentences per request; more: 413 (default 128)\n"
           "  --max-chars N        characters per sentence; more: 413 (default 10000)\n"
           "  --timeout S          seconds a request may take; more: 504 (default %d)\n"
           "  --api-keys FILE      keys, one a line: requests must give one (api_key, or\n"
           "                       Authorization: Bearer KEY), else 403\n"
           "  --weight-type T      f32|f16|bf16|int8 (as translate)\n"
           "  --precision P        f32|bf16|f16 (as translate: the products of many rows)\n"
           "  --backend cpu|opencl|auto, --device D, --threads N, --plugin-dir DIR\n"
           "Prints \"clformer: serving on http://HOST:PORT\" on stderr when ready. SIGTERM or\n"
           "SIGINT: stops accepting, answers the requests read, exits 0.\n",
           DEFAULT_PORT, DEFAULT_MAX_BATCH, DEFAULT_JOIN_WAIT, DEFAULT_QUEUE, DEFAULT_MAX_BODY,
           DEFAULT_TIMEOUT_S);
}

static int valid_name(const char *s, size_t n)
{
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '_' || s[i] == '-'))
            return 0;
    return 1;
}

/* -m [NAME=]DIR: *name malloc'd, *dir into arg. 0 after printing why. */
static int model_arg(const char *arg, char **name, const char **dir)
{
    const char *eq = strchr(arg, '=');
    const char *n0 = arg;
    size_t n;
    if (eq) {
        n = (size_t)(eq - arg);
        *dir = eq + 1;
    } else {
        *dir = arg;
        size_t len = strlen(arg);
        while (len > 1 && arg[len - 1] == '/')
            len--;
        n0 = arg + len;
        while (n0 > arg && n0[-1] != '/')
            n0--;
        n = (size_t)(arg + len - n0);
    }
    if (!valid_name(n0, n))
        return !cli_usage_error("-m %s: the model's name must be 1 to 64 of [A-Za-z0-9._-] "
                                "(give -m NAME=DIR)",
                                arg);
    if (!**dir)
        return !cli_usage_error("-m %s: no directory", arg);
    *name = strndup(n0, n);
    return *name != NULL;
}

/* --api-keys FILE: one key a line (blank lines and # comments skipped). */
static int read_keys(const char *path, char ***keys, int *n)
{
    FILE *f = fopen(path, "r");
    char line[KEY_MAX + 2];
    int lineno = 0;
    if (!f) {
        fprintf(stderr, "clformer: --api-keys %s: cannot open: %s\n", path, strerror(errno));
        return 0;
    }
    *keys = NULL;
    *n = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            fprintf(stderr, "clformer: %s:%d: a key longer than %d bytes\n", path, lineno, KEY_MAX);
            goto fail;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ' ||
                           line[len - 1] == '\t'))
            line[--len] = '\0';
        if (len == 0 || line[0] == '#')
            continue;
        if (*n >= KEYS_MAX) {
            fprintf(stderr, "clformer: %s: more than %d keys\n", path, KEYS_MAX);
            goto fail;
        }
        char **k = realloc(*keys, (size_t)(*n + 1) * sizeof *k);
        if (!k || !(k[*n] = strdup(line))) {
            if (k)
                *keys = k;
            fprintf(stderr, "clformer: %s: out of memory\n", path);
            goto fail;
        }
        *keys = k;
        (*n)++;
    }
    if (ferror(f)) {
        fprintf(stderr, "clformer: --api-keys %s: cannot read: %s\n", path, strerror(errno));
        goto fail;
    }
    fclose(f);
    if (*n == 0) {
        fprintf(stderr, "clformer: --api-keys %s: no key in the file\n", path);
        return 0;
    }
    return 1;
fail:
    fclose(f);
    for (int i = 0; i < *n; i++)
        free((*keys)[i]);
    free(*keys);
    *keys = NULL;
    *n = 0;
    return 0;
}

/* The model's names and its translator if not yet the scheduler's (serve_runner_stop
 * frees the scheduler). */
static void model_free(serve_model *m)
{
    clf_translator_free(m->tr);
    for (int t = 0; t < m->n_targets; t++)
        free(m->targets[t]);
    free(m->targets);
    for (int t = 0; t < m->n_sources; t++) {
        free(m->sources[t]);
        if (m->source_names)
            free(m->source_names[t]);
    }
    free(m->sources);
    free(m->source_names);
    free(m->name);
    memset(m, 0, sizeof *m);
}

/* Copies of the n codes of list (each CLF_LANGUAGE_CODE_MAX bytes), or of name when n is
 * 0, into *out; 0 when out of memory. */
static int codes(const char (*list)[CLF_LANGUAGE_CODE_MAX], int n, const char *name, char ***out,
                 int *n_out)
{
    *out = calloc(n > 0 ? (size_t)n : 1, sizeof **out);
    if (!*out)
        return 0;
    for (int i = 0; i < (n > 0 ? n : 1); i++)
        if (!((*out)[(*n_out)++] = strdup(n > 0 ? list[i] : name)))
            return 0;
    return 1;
}

/* The languages of m: the config's languages: section, else the model's name for both;
 * whether it places language tokens (then a request's languages pick them). */
static int model_languages(serve_model *m, const clf_config *cfg)
{
    const clf_languages_config *l = &cfg->languages;
    int given = l->present && l->n_source > 0 && l->n_target > 0;
    m->source_tokens = given && cfg->model.source_language != CLF_LANG_NONE;
    m->target_tokens = given && cfg->model.target_language != CLF_TGT_LANG_NONE;
    return codes(l->source, given ? l->n_source : 0, m->name, &m->sources, &m->n_sources) &&
           codes(l->target, given ? l->n_target : 0, m->name, &m->targets, &m->n_targets);
}

/* The names of codes[0..n) into *names (malloc'd): iso-codes' (serve_language_name), else
 * the code itself. 0 when out of memory. */
static int code_names(const json_t *iso3, const json_t *iso2, char *const *codes, int n,
                      char ***names)
{
    if (!(*names = calloc(n > 0 ? (size_t)n : 1, sizeof **names)))
        return 0;
    for (int i = 0; i < n; i++) {
        const char *name = serve_language_name(iso3, iso2, codes[i]);
        if (!((*names)[i] = strdup(name ? name : codes[i])))
            return 0;
    }
    return 1;
}

/* Every model's source languages (the entries of GET /languages) named from Debian's iso-codes
 * (ISO 639-3, then 639-2), read once here under clformer's JSON rules (clformer/json.h); without
 * the files (a warning) or for a code they lack, a language's name is its code. 0 when out of
 * memory. */
static int language_names(serve_model *models, int n)
{
    static const char *const files[2] = {ISO_CODES_DIR "/iso_639-3.json",
                                         ISO_CODES_DIR "/iso_639-2.json"};
    json_t *iso[2] = {NULL, NULL};
    for (int f = 0; f < 2; f++)
        if (clf_json_parse_file(files[f], ISO_CODES_JSON_MAX, &iso[f]) != CLF_OK)
            fprintf(stderr,
                    "clformer: warning: %s: GET /languages names languages by their codes "
                    "(install iso-codes)\n",
                    clf_last_error());
    int ok = 1;
    for (int i = 0; ok && i < n; i++)
        ok = code_names(iso[0], iso[1], models[i].sources, models[i].n_sources,
                        &models[i].source_names);
    json_decref(iso[0]);
    json_decref(iso[1]);
    return ok;
}

/* glibc raises its mmap threshold to the size of each mapped block freed (up to 32 MiB), so
 * a server's per-call decode buffers soon come from the malloc arenas instead, where the holes
 * one batch's shapes leave need not fit the next batch's, and the resident size creeps up
 * under steady load (bench/RESULTS.md, the soak of bench/serve_soak.sh). A fixed threshold
 * (glibc's default) keeps large blocks mapped and gives them back when freed.
 * MALLOC_MMAP_THRESHOLD_ in the environment still wins. */
static void fix_mmap_threshold(void)
{
#ifdef __GLIBC__
    if (!getenv("MALLOC_MMAP_THRESHOLD_"))
        mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
}

/* What the command line asks for: the server's options, the backend and weight type, and
 * the models (-m NAME=DIR) with their directories. */
typedef struct serve_args {
    serve_options o;
    cli_backend_opts bo;
    int weight_type_set;
    clf_weight_type weight_type;
    clf_precision precision;
    const char *dirs[MODELS_MAX];
    serve_model models[MODELS_MAX];
    int n_models;
} serve_args;

/* -m [NAME=]DIR: one more model (to: the serve_args) */
static int take_model(const char *value, void *to)
{
    serve_args *a = to;
    if (a->n_models == MODELS_MAX)
        return !cli_usage_error("at most %d models (-m)", MODELS_MAX);
    if (!model_arg(value, &a->models[a->n_models].name, &a->dirs[a->n_models]))
        return 0;
    int ok = 1;
    for (int i = 0; i < a->n_models; i++)
        if (strcmp(a->models[i].name, a->models[a->n_models].name) == 0)
            ok = !cli_usage_error("two models named '%s' (give -m NAME=DIR)", a->models[i].name);
    a->n_models++;
    return ok;
}

/* --port: 0..65535 */
static int take_port(const char *value, void *to)
{
    int *port = to;
    if (!cli_parse_int("--port", value, 0, port))
        return 0;
    if (*port > 65535)
        return !cli_usage_error("--port: %d is not a port (0..65535)", *port);
    return 1;
}

/* Reads the options into a (and the API keys' file into *keys): 1 to go on, 0 after
 * --help, -1 after a usage error (printed). */
static int parse_args(int argc, char **argv, serve_args *a, char ***keys, int *n_keys)
{
    serve_options *o = &a->o;
    int max_body = DEFAULT_MAX_BODY, timeout = DEFAULT_TIMEOUT_S;
    const cli_opt opts[] = {
        {"model", 'm', CLI_OPT_STRING, a, 0, NULL, take_model},
        CLI_STRING("host", OPT_HOST, &o->host),
        {"port", OPT_PORT, CLI_OPT_STRING, &o->port, 0, NULL, take_port},
        CLI_WEIGHT_TYPE(OPT_WEIGHT_TYPE, &a->weight_type, &a->weight_type_set),
        CLI_PRECISION(OPT_PRECISION, &a->precision, NULL),
        CLI_INT("max-batch", OPT_MAX_BATCH, &o->max_batch, 1),
        CLI_INT("join-wait", OPT_JOIN_WAIT, &o->join_wait, 0),
        CLI_INT("queue", OPT_QUEUE, &o->queue, 1),
        CLI_STRING("api-keys", OPT_API_KEYS, &o->api_keys),
        CLI_INT("max-body", OPT_MAX_BODY, &max_body, 1),
        CLI_INT("max-sentences", OPT_MAX_SENTENCES, &o->limits.max_sentences, 1),
        CLI_INT("max-chars", OPT_MAX_CHARS, &o->limits.max_chars, 1),
        CLI_INT("timeout", OPT_TIMEOUT, &timeout, 1),
        CLI_BACKEND_OPTS(&a->bo),
        {0}};
    int rc = cli_parse_options(argc, argv, opts, usage);
    if (rc >= 0)
        return rc == 0 ? 0 : -1;
    if (optind < argc)
        return cli_usage_error("serve: unexpected argument '%s'", argv[optind]), -1;
    if (a->n_models == 0)
        return cli_usage_error("serve: no model (-m MODEL_DIR)"), -1;
    if (o->limits.max_sentences > o->queue)
        return cli_usage_error("--max-sentences %d is more than --queue %d: such a request could "
                               "never be queued",
                               o->limits.max_sentences, o->queue),
               -1;
    o->max_body = (size_t)max_body;
    o->timeout_s = timeout;
    return o->api_keys && !read_keys(o->api_keys, keys, n_keys) ? -1 : 1;
}

/* The translator opened on a thread of its own that exits when it is done: loading runs
 * OpenMP regions, and their workers go with that thread (serve_sched.c says why). */
typedef struct {
    const clf_translator_opts *to;
    clf_translator **tr;
} load_call;

static clf_status load(void *arg)
{
    const load_call *c = arg;
    return clf_translator_open(c->to, c->tr);
}

/* Opens each model's translator and starts its scheduler; 0, or the exit status after a
 * one-line error. */
static int open_models(serve_args *a, serve_runner *runner, serve_metrics *metrics)
{
    for (int i = 0; i < a->n_models; i++) {
        serve_model *m = &a->models[i];
        clf_translator_opts to;
        clf_translator_opts_default(&to);
        to.model_dir = a->dirs[i];
        to.backend = a->bo.backend;
        to.device = a->bo.device;
        to.plugin_dir = a->bo.plugin_dir;
        to.threads = a->bo.threads;
        to.weight_type_set = a->weight_type_set;
        to.weight_type = a->weight_type;
        to.precision = a->precision;
        clf_status st = serve_on_thread(load, &(load_call){&to, &m->tr});
        if (st != CLF_OK)
            return cli_fail(st);
        clf_translator_info info;
        clf_translator_get_info(m->tr, &info);
        if (info.note)
            fprintf(stderr, "clformer: note: %s: %s\n", m->name, info.note);
        const clf_config *cfg = info.config;
        m->max_len = cfg->generate.max_len > 0 ? cfg->generate.max_len : cfg->model.max_len - 1;
        m->beam = cfg->generate.beam > 0 ? cfg->generate.beam : 1;
        snprintf(m->backend, sizeof m->backend, "%s", info.backend ? info.backend : "");
        if (!model_languages(m, cfg)) {
            fprintf(stderr, "clformer: model '%s': out of memory\n", m->name);
            return 1;
        }
        fprintf(stderr,
                "clformer: model '%s' (%s): %s%s -> %s%s (%d source, %d target language%s) on %s\n",
                m->name, a->dirs[i], m->sources[0], m->n_sources > 1 ? ", ..." : "", m->targets[0],
                m->n_targets > 1 ? ", ..." : "", m->n_sources, m->n_targets,
                m->n_targets == 1 ? "" : "s", info.backend ? info.backend : "?");
        /* --max-batch sentences at the model's beam; a request's larger beam takes more
         * rows, so that one sentence of the largest beam always fits */
        const int rows =
            a->o.max_batch * m->beam > SERVE_BEAM_MAX ? a->o.max_batch * m->beam : SERVE_BEAM_MAX;
        clf_translator *tr = m->tr;
        m->tr = NULL; /* the scheduler's from here */
        if ((st = serve_sched_start(runner, tr, &to, rows, a->o.join_wait, a->o.queue, metrics,
                                    &m->sched)) != CLF_OK)
            return cli_fail(st);
    }
    if (!language_names(a->models, a->n_models)) {
        fprintf(stderr, "clformer: out of memory\n");
        return 1;
    }
    return 0;
}

int clf_cmd_serve(int argc, char **argv)
{
    serve_args *a = calloc(1, sizeof *a);
    if (!a) {
        fprintf(stderr, "clformer: out of memory\n");
        return 1;
    }
    a->o = (serve_options){.host = "127.0.0.1",
                           .port = DEFAULT_PORT,
                           .max_batch = DEFAULT_MAX_BATCH,
                           .join_wait = DEFAULT_JOIN_WAIT,
                           .queue = DEFAULT_QUEUE,
                           .max_body = DEFAULT_MAX_BODY,
                           .timeout_s = DEFAULT_TIMEOUT_S};
    serve_limits_default(&a->o.limits);
    a->bo = (cli_backend_opts){NULL, NULL, NULL, -1};
    char **keys = NULL;
    int n_keys = 0, served = 0, rc = 2;
    serve_metrics *metrics = NULL;
    serve_server *server = NULL;
    serve_runner *runner = NULL;
    fix_mmap_threshold();
    const int go = parse_args(argc, argv, a, &keys, &n_keys);
    if (go <= 0) {
        rc = go == 0 ? 0 : 2;
        goto done;
    }
    /* Signals are taken by sigwait below: blocked here, before any thread starts, so that
     * every thread inherits the mask. A client gone mid-answer is an error, not SIGPIPE. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (!(metrics = serve_metrics_new())) {
        fprintf(stderr, "clformer: out of memory\n");
        rc = 1;
        goto done;
    }
    clf_status st = serve_runner_start(&runner);
    if (st != CLF_OK) {
        rc = cli_fail(st);
        goto done;
    }
    if ((rc = open_models(a, runner, metrics)) != 0)
        goto done;
    rc = 1;
    if (serve_http_start(&a->o, a->models, a->n_models, keys, n_keys, metrics, &server) != 0)
        goto done;
    int ipv6 = strchr(a->o.host, ':') != NULL;
    fprintf(stderr, "clformer: serving on http://%s%s%s:%d\n", ipv6 ? "[" : "", a->o.host,
            ipv6 ? "]" : "", serve_http_port(server));
    fflush(stderr);

    int sig = 0;
    while (sigwait(&sigs, &sig) != 0)
        ;
    fprintf(stderr, "clformer: %s: finishing the requests in flight\n",
            sig == SIGTERM ? "SIGTERM" : "SIGINT");
    serve_http_quiesce(server);
    serve_http_drain(server, a->o.timeout_s + 5.0);
    rc = 0;
    served = 1;
done:
    serve_http_stop(server);
    serve_runner_stop(runner);
    for (int i = 0; i < a->n_models; i++)
        model_free(&a->models[i]);
    for (int i = 0; i < n_keys; i++)
        free(keys[i]);
    free(keys);
    serve_metrics_free(metrics);
    free(a);
    if (served)
        fprintf(stderr, "clformer: stopped\n");
    return rc;
}
