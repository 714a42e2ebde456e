/* clformer bench: forward-pass throughput of a model on a backend.
 *
 * Reports tokens/s (source + target tokens per second), effective GFLOP/s (the model's
 * GEMM and attention FLOPs over the whole forward time), the backend's own SGEMM rate at
 * the model's GEMM shapes (the same GEMM nodes run alone, in the same process), their
 * ratio, and device memory (weights + activation arena). Never a pass/fail: numbers only. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cli.h"
#include "clformer/model.h"
#include "clformer/rng.h"
#include "clformer/weights.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct bench_opts {
    int batch, src_len, tgt_len, iters, warmup;
} bench_opts;

int clf_cmd_bench(int argc, char **argv)
{
    const char *cfg_path = NULL, *w_path = NULL, *json_path = NULL;
    cli_backend_opts bo = {.threads = -1};
    bench_opts o = {.batch = 32, .src_len = 64, .tgt_len = 64, .iters = 10, .warmup = 2};
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},  {"weights", required_argument, NULL, 'w'},
        {"backend", required_argument, NULL, 'b'}, {"device", required_argument, NULL, 'D'},
        {"threads", required_argument, NULL, 't'}, {"plugin-dir", required_argument, NULL, 'p'},
        {"batch", required_argument, NULL, 'B'},   {"src-len", required_argument, NULL, 'S'},
        {"tgt-len", required_argument, NULL, 'T'}, {"iters", required_argument, NULL, 'n'},
        {"warmup", required_argument, NULL, 'W'},  {"json", required_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},          {0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:w:b:D:t:p:B:S:T:n:W:j:h", longopts, NULL)) != -1) {
        int ok = 1;
        switch (c) {
        case 'c':
            cfg_path = optarg;
            break;
        case 'w':
            w_path = optarg;
            break;
        case 'b':
            bo.backend = optarg;
            break;
        case 'D':
            bo.device = optarg;
            break;
        case 't':
            ok = cli_parse_int("--threads", optarg, 0, &bo.threads);
            break;
        case 'p':
            bo.plugin_dir = optarg;
            break;
        case 'B':
            ok = cli_parse_int("--batch", optarg, 1, &o.batch);
            break;
        case 'S':
            ok = cli_parse_int("--src-len", optarg, 1, &o.src_len);
            break;
        case 'T':
            ok = cli_parse_int("--tgt-len", optarg, 1, &o.tgt_len);
            break;
        case 'n':
            ok = cli_parse_int("--iters", optarg, 1, &o.iters);
            break;
        case 'W':
            ok = cli_parse_int("--warmup", optarg, 0, &o.warmup);
            break;
        case 'j':
            json_path = optarg;
            break;
        case 'h':
            printf("usage: clformer bench -c model.yaml [-w w.safetensors] [--backend B] "
                   "[--device D]\n"
                   "       [--threads N] [--batch 32] [--src-len 64] [--tgt-len 64] "
                   "[--iters 10] [--warmup 2] [--json FILE]\n");
            return 0;
        default:
            return 2;
        }
        if (!ok)
            return 2;
    }
    if (!cfg_path)
        return cli_usage_error("bench: -c model.yaml is required");

    clf_status st;
    clf_config cfg;
    clf_weights *w = NULL;
    const clf_backend_api *api = NULL;
    clf_backend *be = NULL;
    clf_model *model = NULL;
    int32_t *src = NULL, *tgt = NULL;
    double *times = calloc((size_t)o.iters, sizeof(double));
    double *gemm_times = calloc((size_t)o.iters, sizeof(double));
    if (!times || !gemm_times) {
        st = clf_error(CLF_ERR_NOMEM, "bench: out of host memory");
        goto fail;
    }
    if ((st = clf_config_load(cfg_path, &cfg)) != CLF_OK)
        goto fail;
    st = w_path ? clf_weights_load(w_path, &cfg.model, &w) : clf_weights_init(&cfg.model, 1, &w);
    if (st != CLF_OK)
        goto fail;
    if ((st = cli_open_backend(&cfg, &bo, &api, &be)) != CLF_OK)
        goto fail;
    double t_open = now_s();
    if ((st = clf_model_create(&cfg.model, w, api, be, &model)) != CLF_OK)
        goto fail;
    clf_weights_free(w);
    w = NULL;
    const int B = o.batch, S = o.src_len, T = o.tgt_len;
    src = malloc((size_t)B * S * sizeof(int32_t));
    tgt = malloc((size_t)B * T * sizeof(int32_t));
    if (!src || !tgt) {
        st = clf_error(CLF_ERR_NOMEM, "bench: out of host memory");
        goto fail;
    }
    /* random non-special ids; no padding, so every token costs what it does in a real batch */
    clf_rng rng;
    clf_rng_seed(&rng, 7);
    for (int i = 0; i < B * S; i++)
        src[i] = 4 + (int32_t)(clf_rng_next(&rng) % (uint64_t)(cfg.model.src_vocab - 4));
    for (int i = 0; i < B * T; i++)
        tgt[i] = 4 + (int32_t)(clf_rng_next(&rng) % (uint64_t)(cfg.model.tgt_vocab - 4));
    clf_forward_io io = {.batch = B, .src_len = S, .tgt_len = T, .src = src, .tgt = tgt};
    double t0 = now_s();
    if ((st = clf_model_forward(model, &io)) != CLF_OK)
        goto fail;
    double first_call = now_s() - t0, setup = t0 - t_open;
    for (int i = 0; i < o.warmup; i++)
        if ((st = clf_model_forward(model, &io)) != CLF_OK)
            goto fail;
    for (int i = 0; i < o.iters; i++) {
        t0 = now_s();
        if ((st = clf_model_forward(model, &io)) != CLF_OK)
            goto fail;
        times[i] = now_s() - t0;
    }
    for (int i = 0; i < o.iters; i++) {
        t0 = now_s();
        if ((st = clf_model_rerun(model, 1u << CLF_OP_GEMM)) != CLF_OK)
            goto fail;
        gemm_times[i] = now_s() - t0;
    }
    double t = median(times, o.iters), tg = median(gemm_times, o.iters);
    double flops = clf_model_forward_flops(&cfg.model, B, S, T);
    double gemm_flops = clf_graph_gemm_flops(clf_model_last_graph(model));
    double gflops = flops / t * 1e-9, sgemm_gflops = gemm_flops / tg * 1e-9;
    clf_model_memory mem;
    clf_model_memory_usage(model, &mem);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    char desc[256] = "";
    if (api->describe)
        api->describe(be, desc, sizeof desc);
    const char *coretype = getenv("OPENBLAS_CORETYPE");

    char json[2048];
    snprintf(json, sizeof json,
             "{\"config\": \"%s\", \"backend\": \"%s\", \"device\": \"%s\", "
             "\"openblas_coretype_env\": \"%s\", \"batch\": %d, \"src_len\": %d, \"tgt_len\": "
             "%d, \"iters\": %d, \"seconds_per_forward\": %.6f, \"tokens_per_s\": %.1f, "
             "\"gflops\": %.2f, \"sgemm_gflops_same_shapes\": %.2f, \"ratio_to_sgemm\": %.3f, "
             "\"gemm_seconds\": %.6f, \"model_setup_s\": %.3f, \"first_forward_s\": %.3f, "
             "\"weight_bytes\": %zu, \"activation_bytes\": %zu, \"peak_rss_bytes\": %ld}",
             cfg_path, api->name, desc, coretype ? coretype : "", B, S, T, o.iters, t,
             (double)B * (S + T) / t, gflops, sgemm_gflops, gflops / sgemm_gflops, tg, setup,
             first_call, mem.weight_bytes, mem.arena_bytes, ru.ru_maxrss * 1024L);
    fprintf(stderr,
            "%s on %s (%s)\n  batch %d, src %d, tgt %d: %.2f ms/forward, %.0f tokens/s, %.1f "
            "GFLOP/s\n  backend SGEMM at the same shapes: %.1f GFLOP/s -> ratio %.2f\n"
            "  device memory: weights %.1f MiB, activations %.1f MiB\n",
            cfg_path, api->name, desc, B, S, T, t * 1e3, (double)B * (S + T) / t, gflops,
            sgemm_gflops, gflops / sgemm_gflops, mem.weight_bytes / 1048576.0,
            mem.arena_bytes / 1048576.0);
    printf("%s\n", json);
    if (json_path) {
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%.4000s.tmp", json_path);
        FILE *f = fopen(tmp, "w");
        if (!f || fprintf(f, "%s\n", json) < 0 || fclose(f) != 0 || rename(tmp, json_path)) {
            st = clf_error(CLF_ERR_IO, "%s: cannot write", json_path);
            remove(tmp);
            goto fail;
        }
    }
fail:
    clf_model_free(model);
    if (be)
        api->close(be);
    clf_weights_free(w);
    free(src);
    free(tgt);
    free(times);
    free(gemm_times);
    return st == CLF_OK ? 0 : cli_fail(st);
}
