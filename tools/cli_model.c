/* Opening a model (cli_model.h). */
#include <stdio.h>
#include <string.h>

#include "cli_model.h"
#include "clformer/weights.h"

/* F16 weights on an OpenCL device whose products of 8+ rows do not run in CLBlast's HGEMM
 * (no cl_khr_fp16, not a GPU, or CLF_OPENCL_HGEMM=off): say once what falls back. (The
 * CPU backend has no F16 arithmetic on any machine: no note there.) */
static void note_half_fallback(const clf_backend_api *api, clf_backend *be)
{
    char desc[256];
    if (strcmp(api->name, "opencl") != 0 || api->supports(be, CLF_OP_GEMM_HALF_ARITH))
        return;
    if (api->describe(be, desc, sizeof desc) != CLF_OK) {
        clf_clear_error();
        snprintf(desc, sizeof desc, "the OpenCL device");
    }
    fprintf(stderr,
            "clformer: note: %s: F16 weights serve the products of up to 7 rows (decoding at "
            "batch 1, small beams); the larger ones (the encoder, batched decoding) multiply the "
            "F32 weights, as CLBlast's HGEMM runs only on a GPU with cl_khr_fp16 "
            "(CLF_OPENCL_HGEMM=on: any device with it)\n",
            desc);
}

/* An inference model (translate, forward, bench): created from *w, which it
 * consumes (clf_model_create_consuming, then freed and *w = NULL, whatever happens: the
 * host never holds the weights twice), with weight type *type if type_set, else the file's
 * (written back to *type); with int8 the F32 matrices, which these commands never read,
 * are given back (clf_model_release_f32); with f16 on an OpenCL device whose
 * products of 8+ rows do not run in HGEMM, a note on stderr says which products fall back
 * to the F32 weights. On failure *out is NULL. */
static clf_status inference_model(const clf_model_config *mc, clf_weights **w,
                                  const clf_backend_api *api, clf_backend *be, int type_set,
                                  clf_weight_type *type, clf_model **out)
{
    clf_status st = clf_model_create_consuming(mc, *w, api, be, out);
    if (!type_set)
        *type = (*w)->stored_type;
    clf_weights_free(*w); /* its tensors went as they reached the device */
    *w = NULL;
    if (st == CLF_OK)
        st = clf_model_set_weight_type(*out, *type);
    if (st == CLF_OK && *type == CLF_WEIGHT_INT8)
        st = clf_model_release_f32(*out, NULL);
    if (st == CLF_OK && *type == CLF_WEIGHT_F16)
        note_half_fallback(api, be);
    if (st != CLF_OK) {
        clf_model_free(*out);
        *out = NULL;
    }
    return st;
}

clf_status cli_model_open(const cli_model_opts *o, cli_model *m)
{
    clf_status st;
    clf_weights *w = NULL;
    const clf_backend_api *api;
    clf_backend *be;
    if (!o->cfg_loaded) {
        memset(m, 0, sizeof *m);
        if ((st = clf_config_load_with_plugins(o->cfg_path, o->bo->plugin_dir, &m->cfg)) != CLF_OK)
            return st;
    }
    const clf_model_config *mc = &m->cfg.model;
    st = o->w_path ? clf_weights_load(o->w_path, mc, &w) : clf_weights_init(mc, o->init_seed, &w);
    if (st != CLF_OK || (st = cli_open_backend(&m->cfg, o->bo, &m->api, &m->be)) != CLF_OK)
        goto fail;
    api = m->api, be = m->be;
    if (o->wrap && (st = o->wrap(o->wrap_ctx, &api, &be)) != CLF_OK)
        goto fail;
    m->weight_type = o->weight_type;
    if (o->train) {
        m->weight_type = CLF_WEIGHT_F32;
        st = clf_model_create(mc, w, api, be, &m->model);
    } else {
        st = inference_model(mc, &w, api, be, o->weight_type_set, &m->weight_type, &m->model);
    }
fail:
    clf_weights_free(w); /* the model holds its own copy on the device */
    return st;
}

void cli_model_close(cli_model *m)
{
    clf_model_free(m->model);
    if (m->be)
        m->api->close(m->be);
    m->model = NULL;
    m->be = NULL;
}
