/* clformer forward: safetensors in ("src" [B,S], "tgt" [B,T] token ids), safetensors out
 * ("logits" [B,T,tgt_vocab], "encoder_out" [B,S,d_model]). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_model.h"
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

/* An output: data as an F32 tensor [a, b, c] named name. */
static clf_tensor f32_tensor(const char *name, float *data, int a, int b, int c)
{
    clf_tensor t = {.dtype = CLF_F32,
                    .ndim = 3,
                    .shape = {a, b, c},
                    .data = data,
                    .nbytes = (size_t)a * b * c * sizeof(float)};
    snprintf(t.name, sizeof t.name, "%s", name);
    return t;
}

typedef struct fwd_opts {
    const char *in_path, *out_path;
    cli_backend_opts bo;
    cli_model_opts mo; /* -c, -w, --weight-type */
} fwd_opts;

static void usage(void)
{
    printf("usage: clformer forward -c model.yaml -w w.safetensors -i in.safetensors "
           "-o out.safetensors\n"
           "       [--backend cpu|opencl|auto] [--device D] [--threads N] "
           "[--plugin-dir DIR]\n"
           "       [--weight-type f32|f16|bf16|int8] (default: the weights file's "
           "type)\n"
           "       [--precision f32|bf16|f16]\n" CLI_PRECISION_HELP
           "in: I32 'src' [B,S], 'tgt' [B,T]; out: F32 'logits' [B,T,tgt_vocab], "
           "'encoder_out' [B,S,d_model]\n");
}

/* Parses argv into o. Returns -1 to go on, else the exit code (0 after --help). */
static int parse_args(int argc, char **argv, fwd_opts *o)
{
    enum { OPT_WEIGHT_TYPE = 1000, OPT_PRECISION };
    const cli_opt opts[] = {
        CLI_STRING("config", 'c', &o->mo.cfg_path),
        CLI_WEIGHT_TYPE(OPT_WEIGHT_TYPE, &o->mo.weight_type, &o->mo.weight_type_set),
        CLI_PRECISION(OPT_PRECISION, &o->mo.precision, NULL),
        CLI_STRING("weights", 'w', &o->mo.w_path),
        CLI_STRING("input", 'i', &o->in_path),
        CLI_STRING("output", 'o', &o->out_path),
        CLI_BACKEND_OPTS(&o->bo),
        {0}};
    int rc = cli_parse_options(argc, argv, opts, usage);
    if (rc >= 0)
        return rc;
    if (!o->mo.cfg_path || !o->mo.w_path || !o->in_path || !o->out_path)
        return cli_usage_error("forward: -c, -w, -i and -o are all required");
    return -1;
}

int clf_cmd_forward(int argc, char **argv)
{
    fwd_opts o = {.bo = {.threads = -1}};
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    o.mo.bo = &o.bo;
    clf_status st;
    cli_model m = {0};
    clf_safetensors *in = NULL;
    int32_t *src = NULL, *tgt = NULL;
    float *logits = NULL, *enc = NULL;
    int B = 0, S = 0, B2 = 0, T = 0;
    const char *in_path = o.in_path;

    if ((st = cli_model_open(&o.mo, &m)) != CLF_OK)
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
    const int d = m.cfg.model.d_model, V = m.cfg.model.tgt_vocab;
    logits = malloc((size_t)B * T * V * sizeof(float));
    enc = malloc((size_t)B * S * d * sizeof(float));
    if (!logits || !enc) {
        st = clf_error(CLF_ERR_NOMEM, "forward: out of host memory");
        goto fail;
    }
    clf_forward_io io = {.batch = B,
                         .src_len = S,
                         .tgt_len = T,
                         .src = src,
                         .tgt = tgt,
                         .logits = logits,
                         .encoder_out = enc};
    if ((st = clf_model_forward(m.model, &io)) != CLF_OK)
        goto fail;
    clf_tensor outs[2] = {f32_tensor("logits", logits, B, T, V),
                          f32_tensor("encoder_out", enc, B, S, d)};
    const char *meta[] = {"output",
                          m.cfg.model.output == CLF_OUTPUT_LOG_SOFTMAX ? "log_softmax" : "logits"};
    st = clf_safetensors_write(o.out_path, outs, 2, meta, 1);
fail:
    cli_model_close(&m);
    clf_safetensors_close(in);
    free(src);
    free(tgt);
    free(logits);
    free(enc);
    return st == CLF_OK ? 0 : cli_fail(st);
}
