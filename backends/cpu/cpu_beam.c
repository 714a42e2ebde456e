/* Beam search's next beams chosen after a step (clf_beam_args): for each sentence, the best
 * 2K of its beams' topk continuations, then the K that go on with their ids, sums and row
 * tables. Only comparisons, made in the host's order (core/src/decode/hypotheses.c), so the
 * choices are the host's bit for bit. */
#include <math.h>
#include <string.h>

#include "cpu_internal.h"

static int is_banned(const int32_t *banned, int n, int32_t id)
{
    for (int i = 0; i < n; i++)
        if (banned[i] == id)
            return 1;
    return 0;
}

/* Sentence s: its choices written, its beams' ids and sums set, parent[k] = the slot beam k
 * continues. */
static void choose_sentence(const clf_beam_args *a, int s, int32_t *parent)
{
    const int K = a->K, n2 = 2 * K;
    const size_t first = (size_t)s * K;
    const float *val = fptr(a->val);
    const int32_t *idx = iptr(a->idx), *banned = a->n_banned ? iptr(a->banned) : NULL;
    float *base = fptr(a->base), lp[CLF_TOPK_MAX];
    int32_t par[CLF_TOPK_MAX], tok[CLF_TOPK_MAX], go[CLF_TOPK_MAX];
    int have = 0, m = 0;
    for (int k = 0; k < K; k++) {
        if (base[first + k] == -INFINITY) /* a dead beam gives nothing */
            continue;
        for (int j = 0; j < a->top_k; j++) {
            const size_t e = (first + k) * a->top_k + j;
            const float x = val[e];
            if (is_banned(banned, a->n_banned, idx[e]) || (have == n2 && x <= lp[n2 - 1]))
                continue;
            int i = have < n2 ? have++ : n2 - 1;
            for (; i > 0 && lp[i - 1] < x; i--) { /* after every value not below x */
                lp[i] = lp[i - 1];
                par[i] = par[i - 1];
                tok[i] = tok[i - 1];
            }
            lp[i] = x;
            par[i] = k;
            tok[i] = idx[e];
        }
    }
    int32_t *ch = iptr(a->choices) + first * 6;
    for (int i = 0; i < n2; i++) {
        int32_t bits = 0;
        if (i < have)
            memcpy(&bits, &lp[i], 4);
        ch[3 * i] = bits;
        ch[3 * i + 1] = i < have ? par[i] : -1;
        ch[3 * i + 2] = i < have ? tok[i] : -1;
    }
    for (int i = 0; i < have && m < K; i++)
        if (tok[i] != a->eos_id)
            go[m++] = i;
    for (int k = 0; k < K; k++) { /* beams past the m that go on: dead copies of the first */
        const int c = k < m ? go[k] : m > 0 ? go[0] : -1;
        iptr(a->ids)[first + k] = c >= 0 ? tok[c] : a->eos_id;
        base[first + k] = k < m ? lp[c] : -INFINITY;
        parent[k] = (int32_t)first + (c >= 0 ? par[c] : 0);
    }
}

clf_status cpu_beam_choose(clf_backend *be, const clf_beam_args *a)
{
    (void)be;
    const size_t ld = (size_t)a->ld;
    int32_t parent[CLF_TOPK_MAX];
    for (int s = 0; s < a->n; s++) {
        choose_sentence(a, s, parent);
        for (int k = 0; k < a->K; k++) {
            const size_t i = (size_t)s * a->K + k;
            int32_t *out = iptr(a->rows_out) + i * ld;
            memcpy(out, iptr(a->rows_in) + (size_t)parent[k] * ld, ld * sizeof(int32_t));
            if ((size_t)a->pos + 1 < ld)
                out[a->pos + 1] = (int32_t)i;
        }
    }
    return CLF_OK;
}
