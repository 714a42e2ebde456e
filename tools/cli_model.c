/* Opening a model (cli_model.h). */
#include <stdio.h>
#include <string.h>

#include "cli_model.h"
#include "clformer/weights.h"

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
    st = o->w_path ? clf_weights_map(o->w_path, mc, &w) : clf_weights_init(mc, o->init_seed, &w);
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
        char note[512];
        st = clf_model_create_inference(mc, &w, api, be, o->weight_type_set, &m->weight_type, note,
                                        sizeof note, &m->model);
        if (st == CLF_OK && note[0])
            fprintf(stderr, "clformer: note: %s\n", note);
    }
    if (st == CLF_OK && o->precision != CLF_PRECISION_F32) {
        char note[512];
        st = clf_model_set_precision(m->model, o->precision, note, sizeof note);
        if (st == CLF_OK && note[0])
            fprintf(stderr, "clformer: note: %s\n", note);
    }
    if (st == CLF_OK)
        clf_model_precision(m->model, &m->bf16_arith);
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
