/* The training ops of the backend ABI (version 2) outside the attention, layernorm and
 * optimizer families: relu_backward, embed_backward, dropout, cross_entropy, and the
 * refusal of too small buffers by every training op; on "cpu" and "opencl" (see
 * train_ops_util.h for the method and the tolerances). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_ops_util.h"

/* ---- relu_backward ---- */

START_TEST(relu_backward_exact_aliased_and_fd)
{
    if (!have(CLF_OP_RELU_BACKWARD))
        return;
    static const size_t sizes[] = {1, 7, 33, 65, 100003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        if (clf_test_too_big((double)n))
            continue;
        float *x = clf_test_frand(n, 1, -1, 1), *dy = clf_test_frand(n, 2, -1, 1),
              *y = malloc(n * 4);
        float *want = malloc(n * 4), *got = malloc(n * 4);
        for (size_t i = 0; i < n; i++) {
            if (i % 5 == 3)
                x[i] = 0.0f; /* relu'(0) = 0, as PyTorch's threshold_backward */
            y[i] = x[i] > 0 ? x[i] : 0.0f;
            want[i] = y[i] > 0 ? dy[i] : 0.0f;
        }
        clf_buffer *ddy = up(dy, n * 4), *dyb = up(y, n * 4), *ddx = up(NULL, n * 4);
        CLF_ASSERT_OK(clf_test_api->relu_backward(clf_test_be, P(ddx), P(ddy), P(dyb), n));
        down(ddx, got, n * 4);
        ck_assert_msg(memcmp(got, want, n * 4) == 0, "relu_backward n=%zu", n);
        /* dx aliases dy */
        CLF_ASSERT_OK(clf_test_api->relu_backward(clf_test_be, P(ddy), P(ddy), P(dyb), n));
        down(ddy, got, n * 4);
        ck_assert_msg(memcmp(got, want, n * 4) == 0, "relu_backward in place n=%zu", n);
        clf_test_api->free(clf_test_be, ddy), clf_test_api->free(clf_test_be, dyb),
            clf_test_api->free(clf_test_be, ddx);
        free(x), free(dy), free(y), free(want), free(got);
    }
    /* finite differences of L = sum(dy * relu(x)), x away from the kink */
    enum { N = 41 };
    float *x = clf_test_frand(N, 3, -1, 1), *dy = clf_test_frand(N, 4, -1, 1), y[N], got[N];
    for (int i = 0; i < N; i++) {
        x[i] += x[i] > 0 ? 0.1f : -0.1f;
        y[i] = x[i] > 0 ? x[i] : 0.0f;
    }
    double fd[N];
    for (int i = 0; i < N; i++) {
        double h = FD_H, xp = x[i] + h, xm = x[i] - h;
        fd[i] = dy[i] * ((xp > 0 ? xp : 0) - (xm > 0 ? xm : 0)) / (2 * h);
    }
    clf_buffer *ddy = up(dy, sizeof got), *dyb = up(y, sizeof got), *ddx = up(NULL, sizeof got);
    CLF_ASSERT_OK(clf_test_api->relu_backward(clf_test_be, P(ddx), P(ddy), P(dyb), N));
    down(ddx, got, sizeof got);
    expect_close("relu_backward vs finite differences", got, fd, N, TOL_FD);
    clf_test_api->free(clf_test_be, ddy), clf_test_api->free(clf_test_be, dyb),
        clf_test_api->free(clf_test_be, ddx);
    free(x), free(dy);
}
END_TEST

/* ---- embed_backward ---- */

typedef struct embed_user {
    double *table, *dout, *pe;
    const int32_t *ids;
    int rows, seq_len, dim;
    double scale;
} embed_user;

/* L = sum(dout * (table[ids] * scale + pe)) */
static double embed_loss(void *u)
{
    embed_user *s = u;
    double L = 0;
    for (int r = 0; r < s->rows; r++)
        for (int c = 0; c < s->dim; c++)
            L += s->dout[(size_t)r * s->dim + c] *
                 (s->table[(size_t)s->ids[r] * s->dim + c] * s->scale +
                  s->pe[(size_t)(r % s->seq_len) * s->dim + c]);
    return L;
}

START_TEST(embed_backward_fd_repeats_skips_and_accumulates)
{
    if (!have(CLF_OP_EMBED_BACKWARD))
        return;
    { /* finite differences, ids repeated */
        enum { V = 4, Dm = 5, R = 9, S = 3 };
        int32_t ids[R] = {2, 0, 2, 3, 2, 0, 1, 2, 0};
        float *dout = clf_test_frand(R * Dm, 40, -1, 1), *table = clf_test_frand(V * Dm, 41, -1, 1);
        float *pe = clf_test_frand(S * Dm, 42, -1, 1), *got = fconst(V * Dm, 0);
        embed_user u = {clf_test_to_double(table, V * Dm),
                        clf_test_to_double(dout, R * Dm),
                        clf_test_to_double(pe, S * Dm),
                        ids,
                        R,
                        S,
                        Dm,
                        2.5};
        double fd[V * Dm];
        fd_grad(u.table, NULL, V * Dm, embed_loss, &u, fd);
        run_embed_backward(ids, dout, R, Dm, V, 2.5f, got);
        expect_close("embed_backward vs finite differences", got, fd, V * Dm, TOL_FD);
        free(dout), free(table), free(pe), free(got), free(u.table), free(u.dout), free(u.pe);
    }
    static const int rows[] = {1, 7, 33, 65}, dims[] = {1, 7, 33, 65};
    for (int ri = 0; ri < 4; ri++)
        for (int di = 0; di < 4; di++) {
            enum { V = 5 };
            int R = rows[ri], Dm = dims[di];
            int32_t *ids = malloc(R * 4);
            for (int r = 0; r < R; r++) /* repeats, and -1, V and 99 which are skipped */
                ids[r] = r % 11 == 4 ? -1 : r % 13 == 6 ? V : r % 17 == 9 ? 99 : (r * 7) % V;
            float *dout = clf_test_frand((size_t)R * Dm, 43, -1, 1);
            float *dt = clf_test_frand((size_t)V * Dm, 44, -1, 1); /* accumulated onto */
            double *want = clf_test_to_double(dt, (size_t)V * Dm);
            for (int r = 0; r < R; r++)
                if (ids[r] >= 0 && ids[r] < V)
                    for (int c = 0; c < Dm; c++)
                        want[(size_t)ids[r] * Dm + c] += 0.75 * dout[(size_t)r * Dm + c];
            run_embed_backward(ids, dout, R, Dm, V, 0.75f, dt);
            char what[64];
            snprintf(what, sizeof what, "embed_backward rows=%d dim=%d", R, Dm);
            expect_close(what, dt, want, (size_t)V * Dm, TOL_ROUND);
            free(ids), free(dout), free(dt), free(want);
        }
}
END_TEST

/* ---- dropout ---- */

static void run_dropout(const float *x, float *out, size_t n, float p, uint64_t seed, int in_place)
{
    clf_buffer *bx = up(x, n * 4), *bo = in_place ? bx : up(NULL, n * 4);
    clf_dropout_args a = {.out = P(bo), .x = P(bx), .n = n, .p = p, .seed = seed};
    CLF_ASSERT_OK(clf_test_api->dropout(clf_test_be, &a));
    down(bo, out, n * 4);
    clf_test_api->free(clf_test_be, bx);
    if (!in_place)
        clf_test_api->free(clf_test_be, bo);
}

START_TEST(dropout_mask_scale_fraction_and_aliasing)
{
    if (!have(CLF_OP_DROPOUT))
        return;
    enum { N = 100003 };
    float *x = clf_test_frand(N, 50, 0.5f, 1.5f), *got = malloc(N * 4), *got2 = malloc(N * 4);
    double *want = clf_test_dalloc(N);
    static const float ps[] = {0.1f, 0.5f, 0.9f};
    for (int k = 0; k < 3; k++) {
        float p = ps[k];
        uint64_t seed = 0x5eedULL + 977 * (uint64_t)k;
        uint32_t thr = clf_dropout_threshold(p);
        size_t dropped = 0;
        for (size_t i = 0; i < N; i++)
            want[i] = clf_dropout_bits(seed, i) >= thr ? (double)x[i] / (1.0 - p) : 0.0;
        run_dropout(x, got, N, p, seed, 0);
        for (size_t i = 0; i < N; i++) {
            ck_assert_msg((got[i] != 0.0f) == (want[i] != 0.0), "dropout p=%g: element %zu %s",
                          (double)p, i, got[i] != 0.0f ? "kept, should drop" : "dropped");
            dropped += got[i] == 0.0f;
        }
        char what[64];
        snprintf(what, sizeof what, "dropout p=%.1f kept values (scale)", (double)p);
        expect_close(what, got, want, N, TOL_ROUND);
        double frac = (double)dropped / N, sd = sqrt(p * (1.0 - p) / N);
        ck_assert_msg(fabs(frac - p) < 5 * sd, "dropout p=%g dropped %.4f", (double)p, frac);
        run_dropout(x, got2, N, p, seed, 1); /* out aliases x */
        ck_assert_msg(memcmp(got, got2, N * 4) == 0, "dropout in place differs, p=%g", (double)p);
    }
    run_dropout(x, got, N, 0.0f, 42, 0); /* p = 0: the identity, bit for bit */
    ck_assert_msg(memcmp(got, x, N * 4) == 0, "dropout p=0 is not the identity");
    /* another seed, another mask */
    run_dropout(x, got, 1000, 0.5f, 1, 0);
    run_dropout(x, got2, 1000, 0.5f, 2, 0);
    ck_assert_msg(memcmp(got, got2, 1000 * 4) != 0, "dropout ignores the seed");
    free(x), free(got), free(got2), free(want);
}
END_TEST

/* ---- cross_entropy ---- */

/* loss of one row (double), PyTorch's CrossEntropyLoss(label_smoothing, reduction='none') */
static double ce_row(const double *x, int C, int t, double ls)
{
    double mx = x[0], s = 0, sl = 0;
    for (int j = 1; j < C; j++)
        mx = x[j] > mx ? x[j] : mx;
    for (int j = 0; j < C; j++)
        s += exp(x[j] - mx);
    double lse = mx + log(s);
    for (int j = 0; j < C; j++)
        sl += x[j] - lse;
    return -(1 - ls) * (x[t] - lse) - ls / C * sl;
}

typedef struct ce_user {
    double *x;
    const int32_t *t;
    int R, C, ignore;
    double ls;
} ce_user;

static int ce_ignored(const ce_user *s, int r)
{
    return s->t[r] == s->ignore || s->t[r] < 0 || s->t[r] >= s->C;
}

static double ce_loss(void *u)
{
    ce_user *s = u;
    double L = 0;
    for (int r = 0; r < s->R; r++)
        if (!ce_ignored(s, r))
            L += ce_row(s->x + (size_t)r * s->C, s->C, s->t[r], s->ls);
    return L;
}

/* loss[r] and dlogits = gs * (softmax - (1 - ls) onehot - ls / C), 0 on ignored rows */
static void ce_ref(const ce_user *s, double gs, double *loss, double *grad)
{
    for (int r = 0; r < s->R; r++) {
        const double *x = s->x + (size_t)r * s->C;
        double *g = grad + (size_t)r * s->C;
        loss[r] = 0;
        for (int j = 0; j < s->C; j++)
            g[j] = 0;
        if (ce_ignored(s, r))
            continue;
        loss[r] = ce_row(x, s->C, s->t[r], s->ls);
        double mx = x[0], sum = 0;
        for (int j = 1; j < s->C; j++)
            mx = x[j] > mx ? x[j] : mx;
        for (int j = 0; j < s->C; j++)
            sum += exp(x[j] - mx);
        for (int j = 0; j < s->C; j++)
            g[j] = gs * (exp(x[j] - mx) / sum - (j == s->t[r]) * (1 - s->ls) - s->ls / s->C);
    }
}

/* Runs cross_entropy; grad NULL: loss only; in_place: dlogits aliases logits. dlogits
 * starts as SENTINEL so that the zeroing of ignored rows shows. */
static void run_ce(const float *x, const int32_t *t, int R, int C, int ignore, float ls, float gs,
                   float *loss, float *grad, int in_place)
{
    size_t n = (size_t)R * C;
    float *sent = fconst(n, SENTINEL);
    clf_buffer *bx = up(x, n * 4), *bt = up(t, R * 4), *bl = up(NULL, R * 4);
    clf_buffer *bg = grad && !in_place ? up(sent, n * 4) : NULL;
    clf_cross_entropy_args a = {.loss = P(bl),
                                .dlogits = grad ? P(in_place ? bx : bg) : P(NULL),
                                .logits = P(bx),
                                .targets = P(bt),
                                .rows = R,
                                .cols = C,
                                .ignore_index = ignore,
                                .label_smoothing = ls,
                                .grad_scale = gs};
    CLF_ASSERT_OK(clf_test_api->cross_entropy(clf_test_be, &a));
    down(bl, loss, R * 4);
    if (grad)
        down(in_place ? bx : bg, grad, n * 4);
    clf_test_api->free(clf_test_be, bx), clf_test_api->free(clf_test_be, bt),
        clf_test_api->free(clf_test_be, bl);
    if (bg)
        clf_test_api->free(clf_test_be, bg);
    free(sent);
}

START_TEST(cross_entropy_smoothing_ignore_scale_aliasing_fd)
{
    if (!have(CLF_OP_CROSS_ENTROPY))
        return;
    static const int shapes[][2] = {{1, 1}, {7, 7}, {33, 65}, {5, 1000}, {3, 8000}};
    enum { IGNORE = 1 };
    for (int s = 0; s < 5; s++)
        for (int k = 0; k < 2; k++) {
            int R = shapes[s][0], C = shapes[s][1];
            if (clf_test_too_big((double)R * C))
                continue;
            size_t n = (size_t)R * C;
            float ls = k ? 0.1f : 0.0f, gs = k ? 0.25f : 1.0f;
            float *x = clf_test_frand(n, 60 + s, -8, 8), *loss = malloc(R * 4),
                  *grad = malloc(n * 4);
            int32_t *t = malloc(R * 4);
            for (int r = 0; r < R; r++) /* row 3 mod 4 is padding; row 5 an invalid target */
                t[r] = r % 4 == 3 ? IGNORE : r == 5 ? C + 3 : (r * 37 + 2) % C;
            if (C > 1)
                t[0] = 0;
            ce_user u = {clf_test_to_double(x, n), t, R, C, IGNORE, ls};
            double *rl = clf_test_dalloc(R), *rg = clf_test_dalloc(n);
            ce_ref(&u, gs, rl, rg);
            run_ce(x, t, R, C, IGNORE, ls, gs, loss, grad, k);
            char what[96];
            snprintf(what, sizeof what, "cross_entropy %dx%d ls=%.1f loss", R, C, (double)ls);
            expect_close(what, loss, rl, R, tol_reduce());
            snprintf(what, sizeof what, "cross_entropy %dx%d ls=%.1f gs=%.2f dlogits%s", R, C,
                     (double)ls, (double)gs, k ? " (in place)" : "");
            expect_close(what, grad, rg, n, tol_reduce());
            for (int r = 0; r < R; r++)
                if (ce_ignored(&u, r)) {
                    ck_assert_msg(loss[r] == 0.0f, "cross_entropy: ignored row %d has loss", r);
                    for (int j = 0; j < C; j++)
                        ck_assert_msg(grad[(size_t)r * C + j] == 0.0f,
                                      "cross_entropy: ignored row %d has a gradient", r);
                }
            run_ce(x, t, R, C, IGNORE, ls, gs, loss, NULL, 0); /* loss only */
            expect_close("cross_entropy loss without dlogits", loss, rl, R, tol_reduce());
            free(x), free(loss), free(grad), free(t), free(u.x), free(rl), free(rg);
        }
    /* finite differences of the summed loss */
    enum { R = 6, C = 9 };
    int32_t t[R] = {0, 4, IGNORE, 8, 3, 4};
    for (int k = 0; k < 2; k++) {
        float *x = clf_test_frand(R * C, 70 + k, -3, 3), loss[R], grad[R * C];
        ce_user u = {clf_test_to_double(x, R * C), t, R, C, IGNORE, k ? 0.1 : 0.0};
        double fd[R * C], rl[R], rg[R * C];
        fd_grad(u.x, NULL, R * C, ce_loss, &u, fd);
        ce_ref(&u, 1.0, rl, rg);
        expect_ref_close("cross_entropy dlogits", rg, fd, R * C);
        run_ce(x, t, R, C, IGNORE, (float)u.ls, 1.0f, loss, grad, 0);
        expect_close("cross_entropy dlogits vs finite differences", grad, fd, R * C, TOL_FD);
        free(x), free(u.x);
    }
}
END_TEST

/* ---- bad operands ---- */

/* st must be CLF_ERR_INPUT with a message naming op */
static void expect_refused(clf_status st, const char *op)
{
    ck_assert_msg(st == CLF_ERR_INPUT, "%s: %s with a too small buffer gave %d", clf_test_be_name,
                  op, (int)st);
    ck_assert_msg(strstr(clf_last_error(), op), "%s: the error does not name %s: %s",
                  clf_test_be_name, op, clf_last_error());
}

START_TEST(too_small_buffers_are_refused_by_op_name)
{
    clf_buffer *small, *big;
    CLF_ASSERT_OK(clf_test_api->alloc(clf_test_be, 16, &small));
    CLF_ASSERT_OK(clf_test_api->alloc(clf_test_be, 1 << 16, &big));
    float zeros[1024] = {0};
    /* ids 0, masks 0 */
    CLF_ASSERT_OK(clf_test_api->upload(clf_test_be, P(big), zeros, sizeof zeros));
    if (have(CLF_OP_RELU_BACKWARD))
        expect_refused(clf_op_relu_backward(clf_test_api, clf_test_be, P(small), P(big), P(big), 8),
                       "relu_backward");
    if (have(CLF_OP_LAYERNORM_BACKWARD)) {
        clf_layernorm_backward_args a = {.dx = P(small),
                                         .dy = P(big),
                                         .x = clf_ptr_add(P(big), 1024),
                                         .alpha = P(big),
                                         .rows = 2,
                                         .cols = 4,
                                         .eps = 1e-6f};
        expect_refused(clf_op_layernorm_backward(clf_test_api, clf_test_be, &a),
                       "layernorm_backward");
    }
    if (have(CLF_OP_ATTENTION_BACKWARD)) {
        clf_attention_backward_args a = {.fwd = {.batch = 1,
                                                 .heads = 1,
                                                 .q_len = 4,
                                                 .kv_len = 4,
                                                 .head_dim = 4,
                                                 .q = P(big),
                                                 .k = P(big),
                                                 .v = P(big),
                                                 .q_ld = 4,
                                                 .k_ld = 4,
                                                 .v_ld = 4,
                                                 .out_ld = 4,
                                                 .scale = 0.5f},
                                         .dout = P(big),
                                         .dq = P(small),
                                         .dk = clf_ptr_add(P(big), 4096),
                                         .dv = clf_ptr_add(P(big), 8192)};
        expect_refused(clf_op_attention_backward(clf_test_api, clf_test_be, &a),
                       "attention_backward");
    }
    if (have(CLF_OP_EMBED_BACKWARD)) {
        clf_embed_backward_args a = {
            .dtable = P(small), .dout = P(big), .ids = P(big), .rows = 4, .dim = 4, .vocab = 3};
        expect_refused(clf_op_embed_backward(clf_test_api, clf_test_be, &a), "embed_backward");
    }
    if (have(CLF_OP_DROPOUT)) {
        clf_dropout_args a = {.out = P(big), .x = P(small), .n = 8, .p = 0.1f};
        expect_refused(clf_op_dropout(clf_test_api, clf_test_be, &a), "dropout");
    }
    if (have(CLF_OP_CROSS_ENTROPY)) {
        clf_cross_entropy_args a = {.loss = P(big),
                                    .logits = P(small),
                                    .targets = P(big),
                                    .rows = 2,
                                    .cols = 4,
                                    .ignore_index = -100,
                                    .grad_scale = 1};
        expect_refused(clf_op_cross_entropy(clf_test_api, clf_test_be, &a), "cross_entropy");
    }
    if (have(CLF_OP_ADAM)) {
        clf_adam_args a = {.param = P(big),
                           .grad = clf_ptr_add(P(big), 4096),
                           .m = clf_ptr_add(P(big), 8192),
                           .v = P(small),
                           .n = 8,
                           .lr = 1e-3f,
                           .beta1 = 0.9f,
                           .beta2 = 0.98f,
                           .eps = 1e-9f,
                           .grad_scale = 1,
                           .bias_correction1 = 0.1f,
                           .sqrt_bias_correction2 = 0.1f};
        expect_refused(clf_op_adam(clf_test_api, clf_test_be, &a), "adam");
    }
    if (have(CLF_OP_SUM_SQUARES))
        expect_refused(clf_op_sum_squares(clf_test_api, clf_test_be, P(big), P(small), 8),
                       "sum_squares");
    if (have(CLF_OP_FILL))
        expect_refused(clf_op_fill(clf_test_api, clf_test_be, P(small), 1.0f, 8), "fill");
    clf_test_api->free(clf_test_be, small), clf_test_api->free(clf_test_be, big);
}
END_TEST

/* ---- the suite ---- */

CLF_TEST_BACKENDS_MAIN("train_ops", relu_backward_exact_aliased_and_fd,
                       embed_backward_fd_repeats_skips_and_accumulates,
                       dropout_mask_scale_fraction_and_aliasing,
                       cross_entropy_smoothing_ignore_scale_aliasing_fd,
                       too_small_buffers_are_refused_by_op_name)
