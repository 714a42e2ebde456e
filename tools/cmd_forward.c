/* clformer forward: safetensors in ("src" [B,S], "tgt" [B,T] token ids), safetensors out
 * ("logits" [B,T,tgt_vocab], "encoder_out" [B,S,d_model]). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "clformer/model.h"
#include "clformer/tensor.h"
#include "clformer/weights.h"

/* Reads a 2-D integer tensor `name` from f into a new I32 array. */
static clf_status read_ids(const clf_safetensors *f, const char *path, const char *name,
                           int32_t **out, int *rows, int *cols)
{
    const clf_tensor *t = clf_safetensors_find(f, name);
    if (!t)
        return clf_error(CLF_ERR_INPUT,
                         "%s: tensor '%s' is missing (forward needs I32 'src' "
                         "[B,S] and 'tgt' [B,T])",
                         path, name);
    if (t->ndim != 2 || t->shape[0] < 1 || t->shape[1] < 1)
        return clf_error(CLF_ERR_INPUT,
                         "%s: tensor '%s' must be 2-D [batch, length] and "
                         "non-empty",
                         path, name);
    if (t->shape[0] > (1 << 20) || t->shape[1] > (1 << 20))
        return clf_error(CLF_ERR_INPUT, "%s: tensor '%s' is too large", path, name);
    *rows = (int)t->shape[0];
    *cols = (int)t->shape[1];
    *out = malloc((size_t)*rows * *cols * sizeof(int32_t));
    if (!*out)
        return clf_error(CLF_ERR_NOMEM, "out of host memory");
    clf_status st = clf_tensor_to_i32(t, *out);
    if (st != CLF_OK)
        clf_error_context(st, "%s: tensor '%s'", path, name);
    return st;
}

int clf_cmd_forward(int argc, char **argv)
{
    const char *cfg_path = NULL, *w_path = NULL, *in_path = NULL, *out_path = NULL;
    cli_backend_opts bo = {.threads = -1};
    int weight_type_set = 0;
    clf_weight_type weight_type = CLF_WEIGHT_F32;
    enum { OPT_WEIGHT_TYPE = 1000 };
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},
        {"weight-type", required_argument, NULL, OPT_WEIGHT_TYPE},
        {"weights", required_argument, NULL, 'w'},
        {"input", required_argument, NULL, 'i'},
        {"output", required_argument, NULL, 'o'},
        CLI_BACKEND_LONGOPTS,
        {"help", no_argument, NULL, 'h'},
        {0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:w:i:o:" CLI_BACKEND_SHORTOPTS "h", longopts, NULL)) !=
           -1) {
        switch (c) {
        case 'c':
            cfg_path = optarg;
            break;
        case 'w':
            w_path = optarg;
            break;
        case 'i':
            in_path = optarg;
            break;
        case 'o':
            out_path = optarg;
            break;
        case OPT_WEIGHT_TYPE:
            if (!cli_weight_type_option(optarg, &weight_type, &weight_type_set))
                return 2;
            break;
        case 'h':
            printf("usage: clformer forward -c model.yaml -w w.safetensors -i in.safetensors "
                   "-o out.safetensors\n"
                   "       [--backend cpu|opencl|auto] [--device D] [--threads N] "
                   "[--plugin-dir DIR]\n"
                   "       [--weight-type f32|f16|bf16|int8] (default: the weights file's "
                   "type)\n"
                   "in: I32 'src' [B,S], 'tgt' [B,T]; out: F32 'logits' [B,T,tgt_vocab], "
                   "'encoder_out' [B,S,d_model]\n");
            return 0;
        default:
            if (cli_backend_option(c, optarg, &bo) != 1)
                return 2;
        }
    }
    if (!cfg_path || !w_path || !in_path || !out_path)
        return cli_usage_error("forward: -c, -w, -i and -o are all required");

    clf_status st;
    clf_config cfg;
    clf_weights *w = NULL;
    clf_safetensors *in = NULL;
    int32_t *src = NULL, *tgt = NULL;
    float *logits = NULL, *enc = NULL;
    const clf_backend_api *api = NULL;
    clf_backend *be = NULL;
    clf_model *model = NULL;
    int B = 0, S = 0, B2 = 0, T = 0;

    if ((st = clf_config_load_with_plugins(cfg_path, bo.plugin_dir, &cfg)) != CLF_OK)
        goto fail;
    if ((st = clf_weights_load(w_path, &cfg.model, &w)) != CLF_OK)
        goto fail;
    if ((st = clf_safetensors_open(in_path, &in)) != CLF_OK)
        goto fail;
    if ((st = read_ids(in, in_path, "src", &src, &B, &S)) != CLF_OK ||
        (st = read_ids(in, in_path, "tgt", &tgt, &B2, &T)) != CLF_OK)
        goto fail;
    if (B != B2) {
        st = clf_error(CLF_ERR_INPUT, "%s: 'src' has batch %d but 'tgt' has batch %d", in_path, B,
                       B2);
        goto fail;
    }
    const int d = cfg.model.d_model, V = cfg.model.tgt_vocab;
    logits = malloc((size_t)B * T * V * sizeof(float));
    enc = malloc((size_t)B * S * d * sizeof(float));
    if (!logits || !enc) {
        st = clf_error(CLF_ERR_NOMEM, "forward: out of host memory");
        goto fail;
    }
    if ((st = cli_open_backend(&cfg, &bo, &api, &be)) != CLF_OK)
        goto fail;
    if ((st = cli_inference_model(&cfg.model, &w, api, be, weight_type_set, &weight_type,
                                  &model)) != CLF_OK)
        goto fail;
    clf_forward_io io = {.batch = B,
                         .src_len = S,
                         .tgt_len = T,
                         .src = src,
                         .tgt = tgt,
                         .logits = logits,
                         .encoder_out = enc};
    if ((st = clf_model_forward(model, &io)) != CLF_OK)
        goto fail;
    clf_tensor outs[2] = {
        {.name = "logits",
         .dtype = CLF_F32,
         .ndim = 3,
         .shape = {B, T, V},
         .data = logits,
         .nbytes = (size_t)B * T * V * sizeof(float)},
        {.name = "encoder_out",
         .dtype = CLF_F32,
         .ndim = 3,
         .shape = {B, S, d},
         .data = enc,
         .nbytes = (size_t)B * S * d * sizeof(float)},
    };
    const char *meta[] = {"output",
                          cfg.model.output == CLF_OUTPUT_LOG_SOFTMAX ? "log_softmax" : "logits"};
    st = clf_safetensors_write(out_path, outs, 2, meta, 1);
fail:
    clf_model_free(model);
    if (be)
        api->close(be);
    clf_weights_free(w);
    clf_safetensors_close(in);
    free(src);
    free(tgt);
    free(logits);
    free(enc);
    return st == CLF_OK ? 0 : cli_fail(st);
}
