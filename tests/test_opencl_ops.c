/* The OpenCL backend's small inference ops and its memory: embed, softmax / log_softmax,
 * add, argmax, topk, beam_choose, and copy / upload / download (overlapping copies as memmove),
 * compared with a host reference in double and with the CPU backend. Without an OpenCL device the
 * suite says why and exits 77 (ctest: skipped; a failure with CLF_TEST_REQUIRE_OPENCL=1). */
#include "opencl_testutil.h"

#include "clformer/tensor.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_embed)
{
    static const int dims[] = {1, 7, 65, 512}, rows[] = {1, 21, 33}, seqs[] = {1, 7, 33};
    int v = 0;
    for (int di = 0; di < 4; di++)
        for (int ri = 0; ri < 3; ri++, v++) {
            int vocab = 33, dim = dims[di], R = rows[ri], seq = seqs[ri], pos0 = v % 2 ? 3 : 0;
            int max_len = pos0 + seq + 1, with_pe = v % 4 != 3;
            clf_embed_args a = {.rows = R,
                                .seq_len = seq,
                                .pos0 = pos0,
                                .dim = dim,
                                .vocab = vocab,
                                .scale = sqrtf((float)dim)};
            int32_t *ids = malloc(R * sizeof *ids);
            for (int r = 0; r < R; r++)
                ids[r] = (r * 7 + v) % vocab;
            if (R > 2) { /* out of range: clamped, never read outside the table */
                ids[0] = -4;
                ids[1] = vocab + 5;
            }
            size_t n = (size_t)R * dim, npe = (size_t)max_len * dim;
            float *table = clf_test_frand((size_t)vocab * dim, 900 + v, -1, 1);
            float *pe = with_pe ? clf_test_frand(npe, 950 + v, -1, 1) : NULL;
            float *want = malloc(n * 4), *got = malloc(n * 4), *cgot = malloc(n * 4);
            for (int r = 0; r < R; r++) {
                int id = ids[r] < 0 ? 0 : ids[r] >= vocab ? vocab - 1 : ids[r];
                for (int c = 0; c < dim; c++)
                    want[(size_t)r * dim + c] =
                        table[(size_t)id * dim + c] * a.scale +
                        (pe ? pe[(size_t)(pos0 + r % seq) * dim + c] : 0.0f);
            }
            char what[96];
            snprintf(what, sizeof what, "embed rows=%d dim=%d seq_len=%d pos0=%d pe=%d", R, dim,
                     seq, pos0, with_pe);
            run_embed(&ocl, &a, ids, table, pe, npe, got);
            run_embed(&cpu, &a, ids, table, pe, npe, cgot);
            expect_close_both(got, want, cgot, n, TOL_EXACT, what);
            free(ids);
            free(table);
            free(pe);
            free(want);
            free(got);
            free(cgot);
        }
}
END_TEST

START_TEST(test_softmax)
{
    static const int rows[] = {1, 7, 33}, cols[] = {1, 7, 33, 65, 129, 1000, 8000};
    int v = 0;
    for (int log = 0; log < 2; log++)
        for (int ri = 0; ri < 3; ri++)
            for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++, v++) {
                int R = rows[ri], C = cols[ci], alias = v % 2;
                if (clf_test_too_big((double)R * C))
                    continue;
                size_t n = (size_t)R * C;
                /* large: needs the max subtracted */
                float *x = clf_test_frand(n, 1200 + v, -20, 20);
                float *want = malloc(n * 4), *got = malloc(n * 4), *cgot = malloc(n * 4);
                for (int r = 0; r < R; r++) {
                    const float *xr = x + (size_t)r * C;
                    double mx = xr[0], s = 0;
                    for (int c = 1; c < C; c++)
                        mx = xr[c] > mx ? xr[c] : mx;
                    for (int c = 0; c < C; c++)
                        s += exp(xr[c] - mx);
                    for (int c = 0; c < C; c++)
                        want[(size_t)r * C + c] =
                            (float)(log ? xr[c] - mx - (double)logl(s) : exp(xr[c] - mx) / s);
                }
                char what[96];
                snprintf(what, sizeof what, "%s rows=%d cols=%d out aliasing x=%d",
                         log ? "log_softmax" : "softmax", R, C, alias);
                run_softmax(&ocl, x, R, C, log, alias, got);
                run_softmax(&cpu, x, R, C, log, alias, cgot);
                expect_close_both(got, want, cgot, n, TOL_NORM, what);
                free(x);
                free(want);
                free(got);
                free(cgot);
            }
}
END_TEST

START_TEST(test_add)
{
    static const size_t ns[] = {1, 7, 129, 65537, 1000003};
    for (int i = 0; i < 5; i++) {
        size_t n = ns[i];
        int alias = i % 3; /* 0: separate out, 1: out = a, 2: out = b */
        if (clf_test_too_big((double)n))
            continue;
        float *a = clf_test_frand(n, 1300 + i, -5, 5), *b = clf_test_frand(n, 1400 + i, -5, 5);
        float *want = malloc(n * 4), *got = malloc(n * 4);
        for (size_t j = 0; j < n; j++)
            want[j] = a[j] + b[j];
        clf_buffer *ba = up(&ocl, a, n * 4), *bb = up(&ocl, b, n * 4);
        clf_buffer *bo = alias == 1 ? ba : alias == 2 ? bb : up(&ocl, NULL, n * 4);
        CLF_ASSERT_OK(
            ocl.api->add(ocl.be, (clf_ptr){bo, 0}, (clf_ptr){ba, 0}, (clf_ptr){bb, 0}, n));
        down(&ocl, got, bo, n * 4);
        char what[64];
        snprintf(what, sizeof what, "add n=%zu alias=%d", n, alias);
        expect_close(got, want, n, 0.0, what, "host reference"); /* one rounding: exact */
        ocl.api->free(ocl.be, ba);
        ocl.api->free(ocl.be, bb);
        if (!alias)
            ocl.api->free(ocl.be, bo);
        free(a);
        free(b);
        free(want);
        free(got);
    }
}
END_TEST

/* Row topk of base + x (base + log_softmax(x) with log) on backend k into val, idx [rows, kk]. */
static void run_topk(bk *k, const float *x, const float *base, int rows, int cols, int kk, int log,
                     float *val, int32_t *idx)
{
    clf_buffer *bx = up(k, x, (size_t)rows * cols * 4),
               *bb = base ? up(k, base, (size_t)rows * 4) : NULL,
               *bv = up(k, NULL, (size_t)rows * kk * 4), *bi = up(k, NULL, (size_t)rows * kk * 4);
    const clf_topk_args a = {.val = {bv, 0},
                             .idx = {bi, 0},
                             .x = {bx, 0},
                             .base = {bb, 0},
                             .rows = rows,
                             .cols = cols,
                             .k = kk,
                             .log_softmax = log};
    CLF_ASSERT_OK(k->api->topk(k->be, &a));
    down(k, val, bv, (size_t)rows * kk * 4);
    down(k, idx, bi, (size_t)rows * kk * 4);
    k->api->free(k->be, bx);
    if (bb)
        k->api->free(k->be, bb);
    k->api->free(k->be, bv);
    k->api->free(k->be, bi);
}

/* Against the CPU backend (test_ops checks it against a sort): the same pairs, exactly. */
START_TEST(test_topk)
{
    static const int rows[] = {1, 5, 33}, cols[] = {1, 7, 65, 1000, 8000}, ks[] = {1, 9, 64};
    for (int ri = 0; ri < 3; ri++)
        for (int ci = 0; ci < 5; ci++)
            for (int ki = 0; ki < 3; ki++) {
                const int R = rows[ri], C = cols[ci], K = ks[ki] < C ? ks[ki] : C;
                if (clf_test_too_big((double)R * C * K)) /* k passes over a row */
                    continue;
                size_t n = (size_t)R * C;
                float *x = clf_test_frand(n, 1600 + ri * 5 + ci, -3, 3);
                float *base = clf_test_frand((size_t)R, 1700 + ri, -30, 0);
                for (size_t i = 0; i < n; i++)
                    x[i] = i % 97 == 5 ? NAN : i % 89 == 3 ? -INFINITY : floorf(x[i] * 4) / 4;
                float *val = malloc(n * 4), *cval = malloc(n * 4);
                int32_t *idx = malloc(n * 4), *cidx = malloc(n * 4);
                for (int with_base = 0; with_base < 2; with_base++) {
                    run_topk(&ocl, x, with_base ? base : NULL, R, C, K, 0, val, idx);
                    run_topk(&cpu, x, with_base ? base : NULL, R, C, K, 0, cval, cidx);
                    for (size_t i = 0; i < (size_t)R * K; i++)
                        ck_assert_msg(idx[i] == cidx[i] &&
                                          (val[i] == cval[i] || (isnan(val[i]) && isnan(cval[i]))),
                                      "topk rows=%d cols=%d k=%d base=%d entry %zu: (%g, %d), cpu "
                                      "(%g, %d)",
                                      R, C, K, with_base, i, val[i], idx[i], cval[i], cidx[i]);
                }
                /* the log_softmax form, on logits without NaN (a row holding one is NaN
                 * throughout): the same picks, values within the exponentials' rounding */
                for (size_t i = 0; i < n; i++)
                    x[i] = isnan(x[i]) ? -2.5f : x[i];
                for (int with_base = 0; with_base < 2; with_base++) {
                    run_topk(&ocl, x, with_base ? base : NULL, R, C, K, 1, val, idx);
                    run_topk(&cpu, x, with_base ? base : NULL, R, C, K, 1, cval, cidx);
                    for (size_t i = 0; i < (size_t)R * K; i++)
                        ck_assert_msg(
                            idx[i] == cidx[i] &&
                                (val[i] == cval[i] || (isnan(val[i]) && isnan(cval[i])) ||
                                 fabsf(val[i] - cval[i]) <= 1e-5f * fmaxf(1, fabsf(cval[i]))),
                            "topk log_softmax rows=%d cols=%d k=%d base=%d entry %zu: "
                            "(%g, %d), cpu (%g, %d)",
                            R, C, K, with_base, i, val[i], idx[i], cval[i], cidx[i]);
                }
                free(x), free(base), free(val), free(cval), free(idx), free(cidx);
            }
}
END_TEST

/* beam_choose against the CPU backend (test_ops checks it against a sort), NaN among the
 * values too: the same choices, ids, sums and row tables, bit for bit. */
START_TEST(test_beam_choose)
{
    static const int shapes[][4] = {
        {3, 1, 2, 5}, {4, 3, 2, 4}, {5, 4, 0, 0}, {4, 32, 0, 7}, {3, 31, 2, 6}};
    for (int sh = 0; sh < 5; sh++)
        for (int nan = 0; nan < 2; nan++) {
            const int n = shapes[sh][0], K = shapes[sh][1], n_banned = shapes[sh][2], ld = 8;
            clf_test_beam t;
            clf_test_beam_make(&t, n, K, 2 * K + n_banned, n_banned, ld, shapes[sh][3],
                               400 + (unsigned)sh, nan);
            const size_t rows = (size_t)n * K;
            int32_t *ch[2], *ids[2], *rout[2];
            float *base[2];
            bk *on[2] = {&ocl, &cpu};
            for (int b = 0; b < 2; b++) {
                ch[b] = malloc(rows * 24), ids[b] = malloc(rows * 4);
                rout[b] = malloc(rows * ld * 4), base[b] = malloc(rows * 4);
                clf_test_beam_run(on[b]->api, on[b]->be, &t, ch[b], ids[b], base[b], rout[b]);
            }
            ck_assert_msg(memcmp(ch[0], ch[1], rows * 24) == 0 &&
                              memcmp(ids[0], ids[1], rows * 4) == 0 &&
                              memcmp(base[0], base[1], rows * 4) == 0 &&
                              memcmp(rout[0], rout[1], rows * ld * 4) == 0,
                          "beam_choose n=%d K=%d nan=%d: not the CPU backend's", n, K, nan);
            for (int b = 0; b < 2; b++)
                free(ch[b]), free(ids[b]), free(rout[b]), free(base[b]);
            clf_test_beam_free(&t);
        }
}
END_TEST

static void run_argmax(bk *k, const float *x, int rows, int cols, int32_t *out)
{
    clf_buffer *bx = up(k, x, (size_t)rows * cols * 4), *bo = up(k, NULL, (size_t)rows * 4);
    CLF_ASSERT_OK(k->api->argmax(k->be, (clf_ptr){bo, 0}, (clf_ptr){bx, 0}, rows, cols));
    down(k, out, bo, (size_t)rows * 4);
    k->api->free(k->be, bx);
    k->api->free(k->be, bo);
}

START_TEST(test_argmax)
{
    static const int rows[] = {1, 7, 33}, cols[] = {1, 7, 65, 1000, 8000};
    for (int ri = 0; ri < 3; ri++)
        for (int ci = 0; ci < 5; ci++) {
            int R = rows[ri], C = cols[ci];
            if (clf_test_too_big((double)R * C))
                continue;
            size_t n = (size_t)R * C;
            float *x = clf_test_frand(n, 1500 + ri * 5 + ci, -3, 3);
            for (size_t i = 0; i < n; i++)
                x[i] = floorf(x[i]) - 10.0f; /* few distinct values: many ties, all negative */
            if (R > 2) {
                for (int c = 0; c < C; c++)
                    x[c] = -1;                  /* row 0 all equal: index 0 */
                x[(size_t)2 * C + C - 1] = 100; /* row 2: the maximum at the very end */
            }
            int32_t *want = malloc(R * 4), *got = malloc(R * 4), *cgot = malloc(R * 4);
            for (int r = 0; r < R; r++) {
                const float *xr = x + (size_t)r * C;
                int best = 0;
                for (int c = 1; c < C; c++)
                    if (xr[c] > xr[best])
                        best = c;
                want[r] = best;
            }
            run_argmax(&ocl, x, R, C, got);
            run_argmax(&cpu, x, R, C, cgot);
            for (int r = 0; r < R; r++) {
                ck_assert_msg(got[r] == want[r], "argmax rows=%d cols=%d row %d: %d, want %d", R, C,
                              r, got[r], want[r]);
                ck_assert_int_eq(got[r], cgot[r]);
            }
            free(x);
            free(want);
            free(got);
            free(cgot);
        }
}
END_TEST

/* ---- memory ---- */

START_TEST(test_memory)
{
    /* copy between and within buffers, including overlapping ranges (memmove semantics) */
    float h[64], g[64];
    for (int i = 0; i < 64; i++)
        h[i] = (float)i;
    clf_buffer *a = up(&ocl, h, sizeof h), *b = up(&ocl, NULL, sizeof h);
    CLF_ASSERT_OK(ocl.api->copy(ocl.be, (clf_ptr){b, 8}, (clf_ptr){a, 0}, 40));
    down(&ocl, g, b, sizeof g);
    ck_assert_float_eq(g[0], 0);
    ck_assert_float_eq(g[2], 0);
    ck_assert_float_eq(g[11], 9);
    CLF_ASSERT_OK(ocl.api->copy(ocl.be, (clf_ptr){a, 4}, (clf_ptr){a, 0}, 32)); /* forward */
    CLF_ASSERT_OK(ocl.api->download(ocl.be, g, (clf_ptr){a, 0}, sizeof g));
    for (int i = 1; i <= 8; i++)
        ck_assert_float_eq(g[i], (float)(i - 1));
    CLF_ASSERT_OK(ocl.api->copy(ocl.be, (clf_ptr){a, 0}, (clf_ptr){a, 8}, 32)); /* backward */
    CLF_ASSERT_OK(ocl.api->synchronize(ocl.be));
    CLF_ASSERT_OK(ocl.api->download(ocl.be, g, (clf_ptr){a, 0}, sizeof g));
    ck_assert_float_eq(g[0], 1); /* a was 0 0 1 2 3 4 5 6 7 9 10 ... */
    ck_assert_float_eq(g[6], 7);
    ck_assert_float_eq(g[7], 9);
    /* a fresh buffer reads as zeros; an empty one is fine */
    clf_buffer *z = NULL;
    CLF_ASSERT_OK(ocl.api->alloc(ocl.be, 0, &z));
    CLF_ASSERT_OK(ocl.api->upload(ocl.be, (clf_ptr){z, 0}, h, 0));
    ocl.api->free(ocl.be, z);
    down(&ocl, g, b, sizeof g);
    ck_assert_float_eq(g[63], 0);
    ocl.api->free(ocl.be, a);
    ocl.api->free(ocl.be, b);
}
END_TEST

CLF_TEST_MAIN(ocl_test_run, "opencl_ops", "ops", test_embed, test_softmax, test_add, test_argmax,
              test_topk, test_beam_choose, test_memory)
