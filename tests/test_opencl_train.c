/* The OpenCL backend's elementwise training ops, loss and optimiser: relu_backward,
 * dropout, fill (bit for bit with the CPU backend), sum_squares, adam, cross_entropy and
 * embed_backward, each on the same inputs through both backends, compared with a host
 * reference in double and with the CPU backend.
 * Without an OpenCL device the suite says why and exits 77 (ctest: skipped; a failure with
 * CLF_TEST_REQUIRE_OPENCL=1). */
#include "opencl_testutil.h"

#include "clformer/tensor.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* dx = relu'(y) * dy at element offset off; alias: dx is dy's buffer, else dx holds the
 * buffer's initial contents on entry (what lies outside the op's range must stay). */
static void run_relu_backward(bk *k, const float *dy, const float *y, size_t n, size_t off,
                              int alias, float *dx)
{
    size_t bytes = (n + off) * 4;
    clf_buffer *bdy = up(k, dy, bytes), *by = up(k, y, bytes);
    clf_buffer *bdx = alias ? bdy : up(k, dx, bytes);
    clf_ptr pdx = {bdx, off * 4}, pdy = {bdy, off * 4}, py = {by, off * 4};
    CLF_ASSERT_OK(k->api->relu_backward(k->be, pdx, pdy, py, n));
    down(k, dx, bdx, bytes);
    clf_buffer *all[] = {bdy, by, alias ? NULL : bdx};
    free_all(k, all, 3);
}

START_TEST(test_relu_backward)
{
    static const size_t ns[] = {1, 7, 33, 65, 65537};
    for (int t = 0; t < 5; t++) {
        size_t n = ns[t], off = t % 2 ? 3 : 0, all = n + off;
        int alias = t % 3 == 1;
        if (clf_test_too_big((double)n))
            continue;
        float *dy = clf_test_frand(all, 2000 + t, -1, 1), *y = clf_test_frand(all, 2100 + t, -1, 1);
        for (size_t i = 0; i < all; i += 3)
            y[i] = 0.0f; /* relu's output is often exactly 0: no gradient there */
        float *sentinel = clf_test_frand(all, 2150 + t, 5, 6);
        float *want = fdup(alias ? dy : sentinel, all), *got = fdup(sentinel, all),
              *cgot = fdup(sentinel, all);
        for (size_t i = off; i < all; i++)
            want[i] = y[i] > 0.0f ? dy[i] : 0.0f;
        run_relu_backward(&ocl, dy, y, n, off, alias, got);
        run_relu_backward(&cpu, dy, y, n, off, alias, cgot);
        char what[64];
        snprintf(what, sizeof what, "relu_backward n=%zu off=%zu alias=%d", n, off, alias);
        expect_same_bits(got, want, all, what, "host reference");
        expect_same_bits(got, cgot, all, what, "cpu backend");
        free(dy);
        free(y);
        free(sentinel);
        free(want);
        free(got);
        free(cgot);
    }
}
END_TEST

/* -- dropout -- */

/* As run_relu_backward: out holds the initial contents unless it aliases x. */
START_TEST(test_dropout)
{
    static const size_t ns[] = {1, 7, 33, 65, 1000003};
    static const float ps[] = {0.0f, 0.1f, 0.5f, 0.999f};
    static const uint64_t seeds[] = {0, 1, 0x9E3779B97F4A7C15ull, UINT64_MAX};
    int v = 0;
    for (int t = 0; t < 5; t++)
        for (int pi = 0; pi < 4; pi++, v++) {
            size_t n = ns[t], off = v % 3 == 2 ? 5 : 0, all = n + off;
            if (clf_test_too_big((double)n))
                continue;
            float p = ps[pi];
            uint64_t seed = seeds[v % 4];
            int alias = v % 2;
            float *x = clf_test_frand(all, 2200 + v, -2, 2);
            float *sentinel = clf_test_frand(all, 2250 + v, 5, 6);
            float *want = fdup(alias ? x : sentinel, all), *got = fdup(sentinel, all),
                  *cgot = fdup(sentinel, all);
            const uint32_t thr = clf_dropout_threshold(p);
            const float keep_scale = 1.0f / (1.0f - p);
            size_t dropped = 0;
            for (size_t i = 0; i < n; i++) {
                int keep = clf_dropout_bits(seed, i) >= thr;
                want[off + i] = keep ? x[off + i] * keep_scale : 0.0f;
                dropped += !keep;
            }
            run_dropout(&ocl, x, n, off, p, seed, alias, got);
            run_dropout(&cpu, x, n, off, p, seed, alias, cgot);
            char what[96];
            snprintf(what, sizeof what, "dropout n=%zu off=%zu p=%g seed=%llx alias=%d", n, off,
                     (double)p, (unsigned long long)seed, alias);
            /* the mask and the kept values: the same bits as the CPU backend */
            expect_same_bits(got, want, all, what, "host reference");
            expect_same_bits(got, cgot, all, what, "cpu backend");
            if (n > 100000) /* the mask drops a fraction p (10 standard deviations) */
                ck_assert_msg(fabs((double)dropped / n - p) < 0.005, "%s: dropped %.4f", what,
                              (double)dropped / n);
            free(x);
            free(sentinel);
            free(want);
            free(got);
            free(cgot);
        }

    /* the masks alone, on a buffer of ones: every element kept or dropped by both */
    size_t n = (1u << 20) + 3;
    float *ones = malloc(n * 4), *mo = malloc(n * 4), *mc = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        ones[i] = mo[i] = mc[i] = 1.0f;
    run_dropout(&ocl, ones, n, 0, 0.1f, 12345, 0, mo);
    run_dropout(&cpu, ones, n, 0, 0.1f, 12345, 0, mc);
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += (mo[i] == 0.0f) != (mc[i] == 0.0f);
    ck_assert_msg(differ == 0, "dropout: %zu of %zu mask elements differ from the cpu backend",
                  differ, n);
    expect_same_bits(mo, mc, n, "dropout mask of ones", "cpu backend");
    free(ones);
    free(mo);
    free(mc);

    clf_buffer *b = up(&ocl, NULL, 64);
    clf_dropout_args bad = {.out = {b, 0}, .x = {b, 0}, .n = 8, .p = 1.0f};
    EXPECT_ERROR(clf_op_dropout(ocl.api, ocl.be, &bad), CLF_ERR_INPUT, "dropout", "[0, 1)");
    bad.p = -0.25f;
    EXPECT_ERROR(clf_op_dropout(ocl.api, ocl.be, &bad), CLF_ERR_INPUT, "dropout");
    bad.p = NAN;
    EXPECT_ERROR(clf_op_dropout(ocl.api, ocl.be, &bad), CLF_ERR_INPUT, "dropout");
    bad.p = 0.5f;
    bad.out.off = 8; /* partly over x */
    EXPECT_ERROR(clf_op_dropout(ocl.api, ocl.be, &bad), CLF_ERR_INPUT, "dropout", "overlaps");
    ocl.api->free(ocl.be, b);
}
END_TEST

/* -- fill -- */

static void run_fill(bk *k, const float *init, size_t all, size_t off, size_t n, float value,
                     float *out)
{
    clf_buffer *b = up(k, init, all * 4);
    CLF_ASSERT_OK(k->api->fill(k->be, (clf_ptr){b, off * 4}, value, n));
    down(k, out, b, all * 4);
    k->api->free(k->be, b);
}

START_TEST(test_fill)
{
    static const size_t ns[] = {0, 1, 7, 33, 65, 65537};
    static const float values[] = {0.0f, -1.5f, 3.0e38f, -0.0f, 1e-40f /* subnormal */, 7.0f};
    for (int t = 0; t < 6; t++) {
        size_t n = ns[t], off = t % 2 ? 3 : 0, all = n + off + 5;
        if (clf_test_too_big((double)n))
            continue;
        float *init = clf_test_frand(all, 2300 + t, -1, 1), *want = fdup(init, all);
        float *got = malloc(all * 4), *cgot = malloc(all * 4);
        for (size_t i = 0; i < n; i++)
            want[off + i] = values[t];
        run_fill(&ocl, init, all, off, n, values[t], got);
        run_fill(&cpu, init, all, off, n, values[t], cgot);
        char what[64];
        snprintf(what, sizeof what, "fill n=%zu off=%zu value=%g", n, off, (double)values[t]);
        expect_same_bits(got, want, all, what, "host reference"); /* and nothing else touched */
        expect_same_bits(got, cgot, all, what, "cpu backend");
        free(init);
        free(want);
        free(got);
        free(cgot);
    }
}
END_TEST

/* -- sum_squares -- */

START_TEST(test_sum_squares)
{
    static const size_t ns[] = {0, 1, 7, 33, 65, 65537, 1000003, 4194311};
    worst w = {0};
    for (int t = 0; t < 8; t++) {
        size_t n = ns[t], off = t % 2 ? 3 : 0;
        if (clf_test_too_big((double)n))
            continue;
        float *x = clf_test_frand(n + off, 2400 + t, -3, 3);
        double s = 0;
        for (size_t i = off; i < n + off; i++)
            s += (double)x[i] * x[i];
        float want = (float)s;
        float got = run_sum_squares(&ocl, x, n, off), cgot = run_sum_squares(&cpu, x, n, off);
        char what[64];
        snprintf(what, sizeof what, "sum_squares n=%zu off=%zu", n, off);
        expect_both(&got, &want, &cgot, 1, TOL_SUMSQ, what, &w);
        /* deterministic: a second run gives the same bits */
        float again = run_sum_squares(&ocl, x, n, off);
        expect_same_bits(&again, &got, 1, what, "its own first run");
        free(x);
    }
    report("test_sum_squares", &w, TOL_SUMSQ);
}
END_TEST

/* -- adam -- */

typedef struct adam_state {
    float *p, *m, *v;
} adam_state;

/* steps Adam steps with the same gradient g, bias corrections for t = 1, 2, ... */
static void run_adam(bk *k, const clf_adam_args *tmpl, int steps, const float *g, adam_state *s)
{
    size_t bytes = tmpl->n * 4;
    clf_buffer *bp = up(k, s->p, bytes), *bg = up(k, g, bytes), *bm = up(k, s->m, bytes),
               *bv = up(k, s->v, bytes);
    clf_adam_args a = *tmpl;
    a.param = (clf_ptr){bp, 0};
    a.grad = (clf_ptr){bg, 0};
    a.m = (clf_ptr){bm, 0};
    a.v = (clf_ptr){bv, 0};
    for (int t = 1; t <= steps; t++) {
        a.bias_correction1 = (float)(1.0 - pow(a.beta1, t));
        a.sqrt_bias_correction2 = (float)sqrt(1.0 - pow(a.beta2, t));
        CLF_ASSERT_OK(k->api->adam(k->be, &a));
    }
    down(k, s->p, bp, bytes);
    down(k, s->m, bm, bytes);
    down(k, s->v, bv, bytes);
    float check[1];
    down(k, check, bg, 4);
    ck_assert_float_eq(check[0], g[0]); /* grad is not modified */
    clf_buffer *all[] = {bp, bg, bm, bv};
    free_all(k, all, 4);
}

/* The same steps in double, with torch.optim.Adam / AdamW's formula. */
static void ref_adam(const clf_adam_args *a, int steps, const float *g, adam_state *s)
{
    for (size_t i = 0; i < a->n; i++) {
        double p = s->p[i], m = s->m[i], v = s->v[i];
        for (int t = 1; t <= steps; t++) {
            double bc1 = (float)(1.0 - pow(a->beta1, t)),
                   sbc2 = (float)sqrt(1.0 - pow(a->beta2, t));
            double gi = (double)g[i] * a->grad_scale;
            if (a->decoupled)
                p *= 1.0 - (double)a->lr * a->weight_decay;
            else
                gi += (double)a->weight_decay * p;
            m = a->beta1 * m + (1.0 - a->beta1) * gi;
            v = a->beta2 * v + (1.0 - a->beta2) * gi * gi;
            p -= (double)a->lr / bc1 * m / (sqrt(v) / sbc2 + a->eps);
        }
        s->p[i] = (float)p;
        s->m[i] = (float)m;
        s->v[i] = (float)v;
    }
}

START_TEST(test_adam)
{
    static const size_t ns[] = {1, 7, 33, 65537};
    worst w = {0};
    int c = 0;
    for (int t = 0; t < 4; t++)
        for (int decoupled = 0; decoupled < 2; decoupled++)
            for (int wd = 0; wd < 2; wd++, c++) {
                size_t n = ns[t];
                if (clf_test_too_big((double)n))
                    continue;
                clf_adam_args a = {.n = n,
                                   .lr = 1e-3f,
                                   .beta1 = 0.9f,
                                   .beta2 = 0.98f,
                                   .eps = 1e-9f,
                                   .weight_decay = wd ? 0.01f : 0.0f,
                                   .grad_scale = c % 3 == 0 ? 1.0f : 0.25f,
                                   .decoupled = decoupled};
                float *g = clf_test_frand(n, 2500 + c, -1, 1);
                adam_state s[3];
                for (int k = 0; k < 3; k++) {
                    s[k].p = clf_test_frand(n, 2600 + c, -1, 1);
                    s[k].m = clf_test_frand(n, 2700 + c, -0.1f, 0.1f);
                    s[k].v = clf_test_frand(n, 2800 + c, 0.0f, 0.01f);
                }
                if (n > 2) /* a zero gradient and a zero second moment: the eps path */
                    g[1] = s[0].m[1] = s[0].v[1] = s[1].m[1] = s[1].v[1] = s[2].m[1] = s[2].v[1] =
                        0.0f;
                ref_adam(&a, 3, g, &s[0]);
                run_adam(&ocl, &a, 3, g, &s[1]);
                run_adam(&cpu, &a, 3, g, &s[2]);
                char what[96];
                snprintf(what, sizeof what, "adam n=%zu decoupled=%d weight_decay=%g", n, decoupled,
                         (double)a.weight_decay);
                expect_both(s[1].p, s[0].p, s[2].p, n, TOL_ADAM, what, &w);
                expect_both(s[1].m, s[0].m, s[2].m, n, TOL_ADAM, what, &w);
                expect_both(s[1].v, s[0].v, s[2].v, n, TOL_ADAM, what, &w);
                free(g);
                for (int k = 0; k < 3; k++) {
                    free(s[k].p);
                    free(s[k].m);
                    free(s[k].v);
                }
            }
    report("test_adam", &w, TOL_ADAM);

    clf_buffer *b = up(&ocl, NULL, 64);
    clf_adam_args bad = {.n = 8,
                         .param = {b, 0},
                         .grad = {b, 32},
                         .m = {b, 16}, /* overlaps param */
                         .v = {b, 0},
                         .bias_correction1 = 0.1f,
                         .sqrt_bias_correction2 = 0.1f};
    EXPECT_ERROR(clf_op_adam(ocl.api, ocl.be, &bad), CLF_ERR_INPUT, "adam", "overlap");
    bad.bias_correction1 = 0.0f;
    EXPECT_ERROR(clf_op_adam(ocl.api, ocl.be, &bad), CLF_ERR_INPUT, "adam", "bias correction");
    ocl.api->free(ocl.be, b);
}
END_TEST

/* -- cross_entropy -- */

/* dl_mode: 0 loss only, 1 a separate dlogits, 2 dlogits aliasing logits. */
static void run_cross_entropy(bk *k, const clf_cross_entropy_args *tmpl, const float *logits,
                              const int32_t *targets, int dl_mode, float *loss, float *dl)
{
    size_t n = (size_t)tmpl->rows * tmpl->cols, rows = (size_t)tmpl->rows;
    clf_buffer *bx = up(k, logits, n * 4), *bt = up(k, targets, rows * 4),
               *bl = up(k, NULL, rows * 4), *bd = dl_mode == 1 ? up(k, NULL, n * 4) : NULL;
    clf_cross_entropy_args a = *tmpl;
    a.logits = (clf_ptr){bx, 0};
    a.targets = (clf_ptr){bt, 0};
    a.loss = (clf_ptr){bl, 0};
    a.dlogits = (clf_ptr){dl_mode == 2 ? bx : bd, 0};
    CLF_ASSERT_OK(k->api->cross_entropy(k->be, &a));
    down(k, loss, bl, rows * 4);
    if (dl_mode)
        down(k, dl, dl_mode == 2 ? bx : bd, n * 4);
    clf_buffer *all[] = {bx, bt, bl, bd};
    free_all(k, all, 4);
}

static void ref_cross_entropy(const clf_cross_entropy_args *a, const float *logits,
                              const int32_t *targets, float *loss, float *dl)
{
    int C = a->cols;
    double ls = a->label_smoothing;
    for (int r = 0; r < a->rows; r++) {
        const float *x = logits + (size_t)r * C;
        float *d = dl + (size_t)r * C;
        int t = targets[r];
        if (t == a->ignore_index || t < 0 || t >= C) {
            loss[r] = 0.0f;
            for (int c = 0; c < C; c++)
                d[c] = 0.0f;
            continue;
        }
        double mx = x[0], s = 0, sum_lp = 0;
        for (int c = 1; c < C; c++)
            mx = x[c] > mx ? x[c] : mx;
        for (int c = 0; c < C; c++)
            s += exp(x[c] - mx);
        double lse = mx + log(s);
        for (int c = 0; c < C; c++)
            sum_lp += x[c] - lse;
        loss[r] = (float)(-(1 - ls) * (x[t] - lse) - ls / C * sum_lp);
        for (int c = 0; c < C; c++)
            d[c] = (float)(a->grad_scale * (exp(x[c] - lse) - (c == t ? 1 - ls : 0) - ls / C));
    }
}

START_TEST(test_cross_entropy)
{
    static const int rows[] = {1, 7, 33}, cols[] = {1, 2, 7, 65, 1000, 8000};
    worst w = {0};
    int v = 0;
    for (int ri = 0; ri < 3; ri++)
        for (int ci = 0; ci < 6; ci++)
            for (int smooth = 0; smooth < 2; smooth++, v++) {
                int R = rows[ri], C = cols[ci], dl_mode = v % 3;
                if (clf_test_too_big((double)R * C))
                    continue;
                size_t n = (size_t)R * C;
                clf_cross_entropy_args a = {.rows = R,
                                            .cols = C,
                                            .ignore_index = v % 2 ? 1 : -100,
                                            .label_smoothing = smooth ? 0.1f : 0.0f,
                                            .grad_scale = v % 4 == 0 ? 1.0f : 1.0f / 37};
                /* large: needs the max subtracted */
                float *x = clf_test_frand(n, 2900 + v, -20, 20);
                int32_t *tg = malloc((size_t)R * sizeof *tg);
                for (int r = 0; r < R; r++)
                    tg[r] = (r * 7 + v) % C;
                if (R > 3) {
                    tg[1] = a.ignore_index; /* ignored: loss 0, no gradient */
                    tg[2] = C + 3;          /* out of range: the same */
                    tg[3] = C - 1;
                }
                float *wl = malloc((size_t)R * 4), *gl = malloc((size_t)R * 4),
                      *cl = malloc((size_t)R * 4);
                float *wd = malloc(n * 4), *gd = malloc(n * 4), *cd = malloc(n * 4);
                ref_cross_entropy(&a, x, tg, wl, wd);
                run_cross_entropy(&ocl, &a, x, tg, dl_mode, gl, gd);
                run_cross_entropy(&cpu, &a, x, tg, dl_mode, cl, cd);
                char what[128];
                snprintf(what, sizeof what,
                         "cross_entropy rows=%d cols=%d ls=%g ignore=%d grad_scale=%g dlogits=%s",
                         R, C, (double)a.label_smoothing, a.ignore_index, (double)a.grad_scale,
                         dl_mode == 0   ? "none"
                         : dl_mode == 1 ? "separate"
                                        : "aliasing logits");
                expect_both(gl, wl, cl, (size_t)R, TOL_XENT, what, &w);
                if (dl_mode)
                    expect_both(gd, wd, cd, n, TOL_XENT, what, &w);
                if (R > 3)
                    ck_assert_msg(gl[1] == 0.0f && gl[2] == 0.0f, "%s: ignored rows' loss", what);
                free(x);
                free(tg);
                free(wl);
                free(gl);
                free(cl);
                free(wd);
                free(gd);
                free(cd);
            }
    report("test_cross_entropy", &w, TOL_XENT);
}
END_TEST

/* -- embed_backward -- */

static void run_embed_backward(bk *k, const clf_embed_backward_args *tmpl, const float *dtable0,
                               const float *dout, const int32_t *ids, size_t off, float *dtable)
{
    size_t nt = (size_t)tmpl->vocab * tmpl->dim + off, nd = (size_t)tmpl->rows * tmpl->dim + off;
    clf_buffer *bt = up(k, dtable0, nt * 4), *bd = up(k, dout, nd * 4),
               *bi = up(k, ids, (size_t)tmpl->rows * 4);
    clf_embed_backward_args a = *tmpl;
    a.dtable = (clf_ptr){bt, off * 4};
    a.dout = (clf_ptr){bd, off * 4};
    a.ids = (clf_ptr){bi, 0};
    CLF_ASSERT_OK(k->api->embed_backward(k->be, &a));
    down(k, dtable, bt, nt * 4);
    clf_buffer *all[] = {bt, bd, bi};
    free_all(k, all, 3);
}

START_TEST(test_embed_backward)
{
    static const int rows[] = {1, 7, 33, 65, 300}, dims[] = {1, 7, 65, 512};
    worst w = {0};
    int v = 0;
    for (int ri = 0; ri < 5; ri++)
        for (int di = 0; di < 4; di++, v++) {
            int R = rows[ri], dim = dims[di], vocab = 13;
            if (clf_test_too_big((double)R * dim))
                continue;
            size_t off = v % 3 == 1 ? 5 : 0;
            size_t nt = (size_t)vocab * dim + off, nd = (size_t)R * dim + off;
            clf_embed_backward_args a = {
                .rows = R, .dim = dim, .vocab = vocab, .scale = sqrtf((float)dim)};
            int32_t *ids = malloc((size_t)R * sizeof *ids);
            for (int r = 0; r < R; r++) /* repeats, and ids -2, -1, 13, 14 (skipped) */
                ids[r] = (r * 5 + v) % (vocab + 4) - 2;
            float *t0 = clf_test_frand(nt, 3000 + v, -1, 1),
                  *dout = clf_test_frand(nd, 3100 + v, -1, 1);
            float *want = fdup(t0, nt), *got = malloc(nt * 4), *cgot = malloc(nt * 4);
            double *acc = malloc((size_t)vocab * dim * sizeof *acc);
            for (size_t i = 0; i < (size_t)vocab * dim; i++)
                acc[i] = t0[off + i];
            for (int r = 0; r < R; r++)
                if (ids[r] >= 0 && ids[r] < vocab)
                    for (int d = 0; d < dim; d++)
                        acc[(size_t)ids[r] * dim + d] +=
                            (double)a.scale * dout[off + (size_t)r * dim + d];
            for (size_t i = 0; i < (size_t)vocab * dim; i++)
                want[off + i] = (float)acc[i];
            run_embed_backward(&ocl, &a, t0, dout, ids, off, got);
            run_embed_backward(&cpu, &a, t0, dout, ids, off, cgot);
            char what[96];
            snprintf(what, sizeof what, "embed_backward rows=%d dim=%d off=%zu", R, dim, off);
            expect_both(got, want, cgot, nt, TOL_EMBED_BWD, what, &w);
            free(ids);
            free(t0);
            free(dout);
            free(want);
            free(got);
            free(cgot);
            free(acc);
        }
    report("test_embed_backward", &w, TOL_EMBED_BWD);
}
END_TEST

CLF_TEST_MAIN(ocl_test_run, "opencl_train", "train", test_relu_backward, test_dropout, test_fill,
              test_sum_squares, test_adam, test_cross_entropy, test_embed_backward)
