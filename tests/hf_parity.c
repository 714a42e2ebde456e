/* The parity suites' shared checks against transformers' reference (hf_parity.h). */
#include "hf_parity.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

int32_t *clf_test_ref_ints(clf_safetensors *f, const char *name, int64_t *shape)
{
    const clf_tensor *t = clf_safetensors_find(f, name);
    ck_assert_msg(t != NULL, "the reference file has no tensor %s", name);
    int32_t *v = malloc(sizeof *v * (size_t)clf_tensor_numel(t));
    CLF_ASSERT_OK(clf_tensor_to_i32(t, v));
    if (shape)
        memcpy(shape, t->shape, sizeof t->shape);
    return v;
}

clf_safetensors *clf_test_ref_open(const char *path, const char *src_name, int32_t **src,
                                   int32_t **src_len, int *N, int *S)
{
    clf_safetensors *f;
    int64_t shape[8];
    CLF_ASSERT_OK(clf_safetensors_open(path, &f));
    *src = clf_test_ref_ints(f, src_name, shape);
    *N = (int)shape[0];
    *S = (int)shape[1];
    *src_len = clf_test_ref_ints(f, "src_len", NULL);
    return f;
}

void clf_test_ref_close(clf_safetensors *f, int32_t *src, int32_t *src_len)
{
    free(src);
    free(src_len);
    clf_safetensors_close(f);
}

void clf_test_loaded_open(clf_test_loaded *l, const char *dir)
{
    l->dir = dir;
    clf_test_load_model(l->dir, &l->cfg, &l->w);
    CLF_ASSERT_OK(clf_model_create(&l->cfg.model, l->w, clf_test_api, clf_test_be, &l->m));
}

void clf_test_loaded_close(clf_test_loaded *l)
{
    clf_model_free(l->m);
    clf_weights_free(l->w);
    clf_test_remove_import(l->dir);
}

void clf_test_ref_logits_match(const char *ref_path, const char *dir, double tol)
{
    clf_safetensors *f;
    CLF_ASSERT_OK(clf_safetensors_open(ref_path, &f));
    clf_test_loaded l = {0};
    clf_test_loaded_open(&l, dir);
    int64_t ss[8], ts[8];
    int32_t *src = clf_test_ref_ints(f, "logits_src", ss);
    int32_t *tgt = clf_test_ref_ints(f, "logits_tgt", ts);
    const clf_tensor *want = clf_safetensors_find(f, "logits");
    ck_assert_ptr_nonnull(want);
    size_t n = (size_t)clf_tensor_numel(want);
    ck_assert_uint_eq(n, (size_t)ts[0] * ts[1] * l.cfg.model.tgt_vocab);
    float *w = malloc(sizeof *w * n), *got = malloc(sizeof *got * n);
    CLF_ASSERT_OK(clf_tensor_to_f32(want, w));
    clf_forward_io io = {.batch = (int)ss[0],
                         .src_len = (int)ss[1],
                         .tgt_len = (int)ts[1],
                         .src = src,
                         .tgt = tgt,
                         .logits = got};
    CLF_ASSERT_OK(clf_model_forward(l.m, &io));
    CLF_ASSERT_CLOSE(got, w, n, tol);
    free(w);
    free(got);
    free(src);
    free(tgt);
    clf_test_loaded_close(&l);
    clf_safetensors_close(f);
}

void clf_test_hyps_match(const clf_decode_result *res, int N, const int32_t *want,
                         const int32_t *want_len, int M, int eos, const char *what)
{
    for (int i = 0; i < N; i++) {
        const clf_hypothesis *h = &res->hyps[i];
        const int32_t *w = want + (size_t)i * M;
        int n = want_len[i];
        int ended = n > 0 && w[n - 1] == eos;
        ck_assert_msg(h->len == n - ended && h->finished == ended,
                      "%s sentence %d: %d tokens%s, transformers %d%s", what, i, h->len,
                      h->finished ? " + EOS" : "", n - ended, ended ? " + EOS" : "");
        for (int t = 0; t < h->len; t++)
            ck_assert_msg(h->tokens[t] == w[t], "%s sentence %d: token %d is %d, not %d", what, i,
                          t, h->tokens[t], w[t]);
    }
}

void clf_test_cli_text_matches(const char *args, const char *input, const char *out,
                               const char *want_file, void (*edit)(char *text))
{
    char full[4096], err[1024];
    /* clf_test_run_cli reads stdin from /dev/null: this one runs with the input */
    snprintf(full, sizeof full, "CLF_PLUGIN_PATH= '%s' %s <'%s' >'%s' 2>'%s.err'", CLF_CLI_PATH,
             args, input, out, out);
    int rc = system(full);
    size_t len;
    snprintf(err, sizeof err, "%s.err", out);
    char *e = clf_test_read_file(err, &len);
    ck_assert_msg(rc == 0, "clformer %s: %s", args, e);
    free(e);
    char *got = clf_test_read_file(out, &len), *want = clf_test_read_file(want_file, &len);
    if (edit)
        edit(want);
    /* line by line, so that a difference is named briefly */
    int line = 1;
    for (const char *g = got, *w = want; *g || *w; line++) {
        size_t gl = strcspn(g, "\n"), wl = strcspn(w, "\n");
        ck_assert_msg(gl == wl && !memcmp(g, w, gl),
                      "%s line %d: '%.60s' (%zu bytes), want '%.60s' (%zu bytes)", want_file, line,
                      g, gl, w, wl);
        g += gl + (g[gl] == '\n');
        w += wl + (w[wl] == '\n');
    }
    free(got);
    free(want);
    remove(out);
    remove(err);
}
