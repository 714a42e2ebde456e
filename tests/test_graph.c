/* The memory planner (clf_graph_plan, core/src/graph/graph.c) on random graphs, seeded and
 * reproducible, checked against what this file works out itself from the graph:
 *   - lifetimes: a value lives from the first to the last node that binds it; inputs from
 *     node 0, outputs to the end (n_nodes), a value no node binds for the whole graph;
 *   - placement: every arena value starts at a multiple of CLF_GRAPH_ALIGN and ends inside
 *     the arena, and no two values alive at the same node share a byte;
 *   - the planner's rule, "greedy by size": taking the values largest first (ties: lower
 *     index first), each one sits at the LOWEST offset where its CLF_GRAPH_ALIGN-rounded
 *     span misses every value placed before it that it is alive with. The lowest fit is 0
 *     or the end of such a value (just below it a byte would be taken), so checking that
 *     every such candidate below its offset collides proves it;
 *   - the bounds on the arena that follow, with R(v) the rounded size of v: the arena holds
 *     at least the widest point, max over nodes t of the sum of R(v) alive at t, and at
 *     most the sum of all R(v) (no reuse at all); and each value ends by
 *     R(v) + sum over the values C(v) placed before it and alive with it of R(c), plus
 *     |C(v)| gaps of at most R(v) - CLF_GRAPH_ALIGN (a gap below the offset is too small for
 *     v, and each one ends where some c in C(v) starts). So the arena grows with the widest
 *     overlap of lifetimes, not with the length of the graph: a chain of 300 nodes needs the
 *     arena of one link (checked exactly).
 * Sizes are exact integers: no tolerance. */
#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clformer/graph.h"
#include "clformer/rng.h"
#include "testutil.h"

enum { GRAPHS = 1000, MAX_VALUES = 48, MAX_NODES = 64 };

static size_t rounded(size_t bytes)
{
    size_t b = bytes ? bytes : 1;
    return (b + CLF_GRAPH_ALIGN - 1) / CLF_GRAPH_ALIGN * CLF_GRAPH_ALIGN;
}

static int rand_below(clf_rng *r, int n)
{
    return (int)(clf_rng_next(r) % (uint64_t)n);
}

/* Sizes from 4 bytes to 64 KiB, log-uniform-ish, multiples of 4 (operands are F32/I32),
 * with repeats so that ties in the size order happen. */
static size_t random_bytes(clf_rng *r)
{
    static const size_t common[] = {1024, 4096, 65536};
    if (rand_below(r, 4) == 0)
        return common[rand_below(r, 3)];
    int shift = 2 + rand_below(r, 15); /* 4 .. 64 Ki */
    size_t hi = (size_t)1 << shift;
    return (hi / 2 + (size_t)rand_below(r, (int)(hi / 2) + 1)) / 4 * 4 + 4;
}

/* A random graph: values of every kind, nodes that bind 1..6 of them, mostly values made
 * recently (as a network's layers do) and now and then an old one (a residual, an encoder
 * output read by every decoder layer). */
static void random_graph(clf_rng *r, clf_graph *g)
{
    clf_graph_init(g);
    const int nv = 1 + rand_below(r, MAX_VALUES), nn = rand_below(r, MAX_NODES + 1);
    for (int i = 0; i < nv; i++) {
        int k = rand_below(r, 16);
        clf_value_kind kind = k < 10   ? CLF_VALUE_ACTIVATION
                              : k < 12 ? CLF_VALUE_INPUT
                              : k < 14 ? CLF_VALUE_OUTPUT
                                       : CLF_VALUE_EXTERNAL;
        size_t bytes = random_bytes(r);
        int v = kind == CLF_VALUE_EXTERNAL
                    ? clf_graph_external(g, (clf_ptr){NULL, 0}, bytes, "external")
                    : clf_graph_value(g, kind, bytes, "value");
        ck_assert_int_eq(v, i);
    }
    for (int ni = 0; ni < nn; ni++) {
        clf_add_args args = {.n = 1};
        clf_node *n = clf_graph_node(g, CLF_OP_ADD, &args, sizeof args, "node");
        ck_assert_ptr_nonnull(n);
        const int centre = (int)((long long)ni * nv / (nn ? nn : 1));
        for (int k = 1 + rand_below(r, 6); k > 0; k--) {
            int v = rand_below(r, 5) == 0 ? rand_below(r, nv) : centre - 2 + rand_below(r, 5);
            v = v < 0 ? 0 : v >= nv ? nv - 1 : v;
            size_t last_elem = g->values[v].bytes / 4 - 1;
            clf_graph_bind(g, n, (size_t)k * sizeof(clf_ptr), v,
                           (size_t)rand_below(r, (int)last_elem + 1));
        }
    }
    ck_assert_int_eq(g->status, CLF_OK);
}

typedef struct life {
    int first, last;
} life;

/* The lifetimes of the arena values as the header defines them; externals get first -1. */
static void lifetimes(const clf_graph *g, life *lv)
{
    for (int i = 0; i < g->n_values; i++)
        lv[i] = (life){-1, -1};
    for (int ni = 0; ni < g->n_nodes; ni++)
        for (int k = 0; k < g->nodes[ni].n_operands; k++) {
            life *l = &lv[g->nodes[ni].operands[k].value];
            if (l->first < 0)
                l->first = ni;
            l->last = ni;
        }
    for (int i = 0; i < g->n_values; i++) {
        const clf_value_kind kind = g->values[i].kind;
        if (kind == CLF_VALUE_EXTERNAL) {
            lv[i] = (life){-1, -1};
            continue;
        }
        if (kind == CLF_VALUE_INPUT || lv[i].first < 0)
            lv[i].first = 0;
        if (kind == CLF_VALUE_OUTPUT || lv[i].last < 0)
            lv[i].last = g->n_nodes;
    }
}

static int alive_together(const life *a, const life *b)
{
    return a->first >= 0 && b->first >= 0 && a->first <= b->last && b->first <= a->last;
}

/* Whether [off, off + size) meets the rounded span of value p. */
static int collides(const clf_graph *g, int p, size_t off, size_t size)
{
    const size_t po = g->values[p].offset, pe = po + rounded(g->values[p].bytes);
    return off < pe && po < off + size;
}

/* Placed before: larger, or as large with a lower index. */
static int placed_before(const clf_graph *g, int p, int v)
{
    const size_t bp = g->values[p].bytes, bv = g->values[v].bytes;
    return bp > bv || (bp == bv && p < v);
}

static void check_plan(const clf_graph *g, uint64_t seed)
{
    const int nv = g->n_values;
    life *lv = malloc(sizeof(life) * (size_t)nv);
    ck_assert_ptr_nonnull(lv);
    lifetimes(g, lv);
    size_t sum_rounded = 0, widest = 0;
    for (int v = 0; v < nv; v++) {
        const clf_value *x = &g->values[v];
        if (x->kind == CLF_VALUE_EXTERNAL)
            continue;
        ck_assert_msg(x->first == lv[v].first && x->last == lv[v].last,
                      "seed %llu value %d: planner lifetime [%d, %d], expected [%d, %d]",
                      (unsigned long long)seed, v, x->first, x->last, lv[v].first, lv[v].last);
        ck_assert_msg(x->offset % CLF_GRAPH_ALIGN == 0, "seed %llu value %d: offset %zu unaligned",
                      (unsigned long long)seed, v, x->offset);
        ck_assert_msg(x->offset + x->bytes <= g->arena_bytes,
                      "seed %llu value %d: [%zu, +%zu) ends past the arena (%zu bytes)",
                      (unsigned long long)seed, v, x->offset, x->bytes, g->arena_bytes);
        sum_rounded += rounded(x->bytes);

        size_t bound = rounded(x->bytes), gap = rounded(x->bytes) - CLF_GRAPH_ALIGN;
        for (int p = 0; p < nv; p++) {
            if (p == v || !alive_together(&lv[v], &lv[p]))
                continue;
            const clf_value *y = &g->values[p];
            ck_assert_msg(x->offset + x->bytes <= y->offset || y->offset + y->bytes <= x->offset,
                          "seed %llu: values %d [%zu, +%zu) and %d [%zu, +%zu) are alive together "
                          "(nodes %d..%d and %d..%d) and overlap",
                          (unsigned long long)seed, v, x->offset, x->bytes, p, y->offset, y->bytes,
                          lv[v].first, lv[v].last, lv[p].first, lv[p].last);
            if (placed_before(g, p, v))
                bound += rounded(y->bytes) + gap;
        }
        ck_assert_msg(x->offset + rounded(x->bytes) <= bound,
                      "seed %llu value %d: ends at %zu, past the greedy bound %zu",
                      (unsigned long long)seed, v, x->offset + rounded(x->bytes), bound);

        /* lowest fit: every candidate below the offset collides with an earlier value */
        for (int c = -1; c < nv; c++) {
            size_t cand = 0;
            if (c >= 0) {
                if (c == v || !alive_together(&lv[v], &lv[c]) || !placed_before(g, c, v))
                    continue;
                cand = g->values[c].offset + rounded(g->values[c].bytes);
            }
            if (cand >= x->offset)
                continue;
            int taken = 0;
            for (int p = 0; p < nv && !taken; p++)
                taken = p != v && alive_together(&lv[v], &lv[p]) && placed_before(g, p, v) &&
                        collides(g, p, cand, rounded(x->bytes));
            ck_assert_msg(taken,
                          "seed %llu value %d (%zu bytes) sits at %zu, but %zu was free: not the "
                          "lowest fit",
                          (unsigned long long)seed, v, x->bytes, x->offset, cand);
        }
    }
    for (int t = 0; t <= g->n_nodes; t++) {
        size_t live = 0;
        for (int v = 0; v < nv; v++)
            if (lv[v].first >= 0 && lv[v].first <= t && t <= lv[v].last)
                live += rounded(g->values[v].bytes);
        widest = live > widest ? live : widest;
    }
    ck_assert_msg(widest <= g->arena_bytes && g->arena_bytes <= sum_rounded,
                  "seed %llu: arena %zu bytes, outside [widest point %zu, sum of sizes %zu]",
                  (unsigned long long)seed, g->arena_bytes, widest, sum_rounded);
    free(lv);
}

START_TEST(test_random_graphs)
{
    for (uint64_t seed = 1; seed <= GRAPHS; seed++) {
        clf_rng r;
        clf_rng_seed(&r, seed);
        clf_graph g;
        random_graph(&r, &g);
        CLF_ASSERT_OK(clf_graph_plan(&g));
        check_plan(&g, seed);
        /* planning again (as the model does after a rebuild) gives the same plan */
        size_t arena = g.arena_bytes, off0 = g.values[0].offset;
        CLF_ASSERT_OK(clf_graph_plan(&g));
        ck_assert(g.arena_bytes == arena && g.values[0].offset == off0);
        clf_graph_free(&g);
    }
}
END_TEST

/* x0 -> x1 -> ... -> x[links] of equal values of `bytes` each: node i is x[i+1] = x[i] + x[i]
 * (so it reads one value and writes the next) */
static void add_chain(clf_graph *g, int links, size_t bytes)
{
    for (int i = 0; i <= links; i++)
        clf_graph_value(g,
                        i == 0       ? CLF_VALUE_INPUT
                        : i == links ? CLF_VALUE_OUTPUT
                                     : CLF_VALUE_ACTIVATION,
                        bytes, "x");
    for (int i = 0; i < links; i++) {
        clf_add_args args = {.n = bytes / 4};
        clf_node *n = clf_graph_node(g, CLF_OP_ADD, &args, sizeof args, "double");
        clf_graph_bind(g, n, offsetof(clf_add_args, a), i, 0);
        clf_graph_bind(g, n, offsetof(clf_add_args, b), i, 0);
        clf_graph_bind(g, n, offsetof(clf_add_args, out), i + 1, 0);
    }
}

/* A chain x0 -> x1 -> ... -> x300 of equal values, each node reading one and writing the
 * next: two are alive at a time, so the arena is two values, whatever the length. */
START_TEST(test_chain_needs_two_values)
{
    enum { LINKS = 300, BYTES = 1000 };
    clf_graph g;
    clf_graph_init(&g);
    add_chain(&g, LINKS, BYTES);
    CLF_ASSERT_OK(clf_graph_plan(&g));
    ck_assert_uint_eq(g.arena_bytes, 2 * rounded(BYTES));
    check_plan(&g, 0);
    clf_graph_free(&g);
}
END_TEST

/* clf_graph_run_hooked on the CPU backend: the hook comes after each node, in order, with
 * that node's result in place (x[i+1] = x[i] + x[i] = 2^(i+1) when hook(i) runs), and a
 * hook's error stops the run there and comes back as it is. */
typedef struct hook_log {
    const clf_graph *g;
    const clf_backend_api *api;
    clf_backend *be;
    clf_buffer *arena;
    int calls, fail_at;
} hook_log;

static clf_status log_hook(void *ctx, int node)
{
    hook_log *h = ctx;
    ck_assert_int_eq(node, h->calls);
    h->calls++;
    float x[4];
    CLF_ASSERT_OK(h->api->download(h->be, x, clf_graph_ptr(h->g, h->arena, node + 1), sizeof x));
    for (int k = 0; k < 4; k++)
        ck_assert_float_eq(x[k], (float)(1 << (node + 1)));
    if (node == h->fail_at)
        return clf_error(CLF_ERR_INPUT, "hook: stop at node %d", node);
    return CLF_OK;
}

START_TEST(test_run_hooked)
{
    enum { LINKS = 10 };
    const clf_backend_api *api;
    clf_backend *be;
    clf_test_open_backend("cpu", &api, &be);
    clf_graph g;
    clf_graph_init(&g);
    add_chain(&g, LINKS, 16);
    CLF_ASSERT_OK(clf_graph_plan(&g));
    clf_buffer *arena = NULL;
    size_t cap = 0;
    CLF_ASSERT_OK(clf_graph_reserve_arena(&g, api, be, &arena, &cap, "test"));
    const float one[4] = {1, 1, 1, 1};
    hook_log h = {.g = &g, .api = api, .be = be, .arena = arena, .fail_at = -1};
    CLF_ASSERT_OK(api->upload(be, clf_graph_ptr(&g, arena, 0), one, sizeof one));
    CLF_ASSERT_OK(clf_graph_run_hooked(&g, api, be, arena, log_hook, &h));
    ck_assert_int_eq(h.calls, LINKS);
    h = (hook_log){.g = &g, .api = api, .be = be, .arena = arena, .fail_at = 4};
    CLF_ASSERT_OK(api->upload(be, clf_graph_ptr(&g, arena, 0), one, sizeof one));
    ck_assert_int_eq(clf_graph_run_hooked(&g, api, be, arena, log_hook, &h), CLF_ERR_INPUT);
    ck_assert_int_eq(h.calls, 5);
    ck_assert_str_eq(clf_last_error(), "hook: stop at node 4");
    api->free(be, arena);
    api->close(be);
    clf_graph_free(&g);
}
END_TEST

CLF_TEST_MAIN(clf_test_run, "graph", "planner", test_random_graphs, test_chain_needs_two_values,
              test_run_hooked)
