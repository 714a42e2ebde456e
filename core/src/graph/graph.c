/* Op list, liveness-based buffer planning and execution (see clformer/graph.h). */
#include "clformer/graph.h"
#include "clformer/ops.h"

#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

void clf_graph_init(clf_graph *g)
{
    memset(g, 0, sizeof *g);
}

void clf_graph_free(clf_graph *g)
{
    if (!g)
        return;
    free(g->values);
    free(g->nodes);
    memset(g, 0, sizeof *g);
}

/* dst = label cut to size - 1 bytes, as snprintf(dst, size, "%s", label) would write it
 * (NULL: ""): a copy, since every value and node of every decoding step's graph gets a
 * label and formatting them showed in the step's profile. size >= 1. */
static void copy_label(char *dst, size_t size, const char *label)
{
    const size_t n = label ? strnlen(label, size - 1) : 0;
    memcpy(dst, label ? label : "", n);
    dst[n] = '\0';
}

int clf_graph_value(clf_graph *g, clf_value_kind kind, size_t bytes, const char *label)
{
    if (g->status != CLF_OK)
        return -1;
    if (!clf_grow((void **)&g->values, &g->cap_values, g->n_values + 1, sizeof(clf_value), 64)) {
        g->status = clf_error(CLF_ERR_NOMEM, "graph: out of host memory");
        return -1;
    }
    clf_value *v = &g->values[g->n_values];
    memset(v, 0, sizeof *v);
    v->kind = kind;
    v->bytes = bytes;
    v->first = -1;
    v->last = -1;
    copy_label(v->label, sizeof v->label, label);
    return g->n_values++;
}

int clf_graph_external(clf_graph *g, clf_ptr where, size_t bytes, const char *label)
{
    int v = clf_graph_value(g, CLF_VALUE_EXTERNAL, bytes, label);
    if (v >= 0)
        g->values[v].ext = where;
    return v;
}

clf_node *clf_graph_node(clf_graph *g, clf_op op, const void *args, size_t args_size,
                         const char *label)
{
    if (g->status != CLF_OK)
        return NULL;
    if (!clf_grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof(clf_node), 64)) {
        g->status = clf_error(CLF_ERR_NOMEM, "graph: out of host memory");
        return NULL;
    }
    clf_node *n = &g->nodes[g->n_nodes++];
    memset(n, 0, sizeof *n);
    n->op = op;
    memcpy(&n->args, args, args_size);
    copy_label(n->label, sizeof n->label, label);
    return n;
}

void clf_graph_bind(clf_graph *g, clf_node *n, size_t field, int v, size_t elem_off)
{
    if (!n || g->status != CLF_OK)
        return;
    if (v < 0 || v >= g->n_values || n->n_operands >= CLF_NODE_MAX_OPERANDS) {
        g->status = clf_error(CLF_ERR_INTERNAL, "graph: bad operand for node '%s'", n->label);
        return;
    }
    size_t need = (elem_off + 1) * sizeof(float);
    if (need > g->values[v].bytes) {
        g->status = clf_error(CLF_ERR_INTERNAL, "graph: node '%s' reads past value '%s'", n->label,
                              g->values[v].label);
        return;
    }
    n->operands[n->n_operands++] = (clf_operand){.value = v, .elem_off = elem_off, .field = field};
}

const clf_operand *clf_node_operand(const clf_node *n, size_t field)
{
    for (int k = 0; k < n->n_operands; k++)
        if (n->operands[k].field == field)
            return &n->operands[k];
    return NULL;
}

static size_t align_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

static int lifetimes_overlap(const clf_value *a, const clf_value *b)
{
    return a->first <= b->last && b->first <= a->last;
}

/* Greedy by size: place the largest values first, each at the lowest offset where it
 * does not collide with an already placed value that is alive at the same time. This is
 * the "greedy by size" offset planner of TFLite's arena planner; for the Transformer's
 * repeating layers it reaches the width of the widest layer. */
clf_status clf_graph_plan(clf_graph *g)
{
    if (g->status != CLF_OK)
        return g->status;
    int nv = g->n_values;
    for (int i = 0; i < nv; i++) {
        g->values[i].first = -1;
        g->values[i].last = -1;
    }
    for (int ni = 0; ni < g->n_nodes; ni++) {
        const clf_node *n = &g->nodes[ni];
        for (int k = 0; k < n->n_operands; k++) {
            clf_value *v = &g->values[n->operands[k].value];
            if (v->first < 0)
                v->first = ni;
            v->last = ni;
        }
    }
    int *order = malloc(sizeof(int) * (size_t)(nv ? nv : 1));
    int *placed = malloc(sizeof(int) * (size_t)(nv ? nv : 1));
    if (!order || !placed) {
        free(order);
        free(placed);
        return clf_error(CLF_ERR_NOMEM, "graph: out of host memory");
    }
    int n_order = 0;
    for (int i = 0; i < nv; i++) {
        clf_value *v = &g->values[i];
        if (v->kind == CLF_VALUE_EXTERNAL)
            continue;
        if (v->kind == CLF_VALUE_INPUT || v->first < 0)
            v->first = 0;
        if (v->kind == CLF_VALUE_OUTPUT || v->last < 0)
            v->last = g->n_nodes;
        order[n_order++] = i;
    }
    /* insertion sort by size, descending, ties by index (stable and deterministic) */
    for (int i = 1; i < n_order; i++) {
        int x = order[i], j = i - 1;
        while (j >= 0 && g->values[order[j]].bytes < g->values[x].bytes) {
            order[j + 1] = order[j];
            j--;
        }
        order[j + 1] = x;
    }
    size_t total = 0;
    int n_placed = 0;
    for (int oi = 0; oi < n_order; oi++) {
        clf_value *v = &g->values[order[oi]];
        size_t size = align_up(v->bytes ? v->bytes : 1, CLF_GRAPH_ALIGN);
        size_t offset = 0;
        /* Candidate offsets are 0 and the ends of conflicting placed values; re-scan
         * until a candidate fits (values placed so far are few: one layer's worth). */
        for (int moved = 1; moved;) {
            moved = 0;
            for (int pi = 0; pi < n_placed; pi++) {
                const clf_value *p = &g->values[placed[pi]];
                if (!lifetimes_overlap(v, p))
                    continue;
                size_t pend = p->offset + align_up(p->bytes ? p->bytes : 1, CLF_GRAPH_ALIGN);
                if (offset < pend && p->offset < offset + size) {
                    offset = pend;
                    moved = 1;
                }
            }
        }
        v->offset = offset;
        placed[n_placed++] = order[oi];
        if (offset + size > total)
            total = offset + size;
    }
    free(order);
    free(placed);
    g->arena_bytes = total;
    return CLF_OK;
}

clf_status clf_graph_reserve_arena(const clf_graph *g, const clf_backend_api *api, clf_backend *be,
                                   clf_buffer **arena, size_t *cap, const char *what)
{
    if (g->arena_bytes <= *cap)
        return CLF_OK;
    if (*arena)
        api->free(be, *arena);
    *arena = NULL;
    *cap = 0;
    clf_status st = api->alloc(be, g->arena_bytes, arena);
    if (st != CLF_OK)
        return clf_error_context(st, "%s: activation arena of %zu bytes", what, g->arena_bytes);
    *cap = g->arena_bytes;
    return CLF_OK;
}

clf_ptr clf_graph_ptr(const clf_graph *g, clf_buffer *arena, int v)
{
    const clf_value *val = &g->values[v];
    if (val->kind == CLF_VALUE_EXTERNAL)
        return val->ext;
    return (clf_ptr){.buf = arena, .off = val->offset};
}

double clf_graph_gemm_flops(const clf_graph *g)
{
    double f = 0;
    for (int ni = 0; ni < g->n_nodes; ni++) {
        const clf_gemm_args *a = &g->nodes[ni].args.gemm;
        if (g->nodes[ni].op == CLF_OP_GEMM)
            f += 2.0 * a->m * a->n * a->k;
        else if (g->nodes[ni].op == CLF_OP_GEMM_STRIDED_BATCHED)
            f += 2.0 * a->m * a->n * a->k * a->batch;
    }
    return f;
}

static clf_status run_nodes(const clf_graph *g, const clf_backend_api *api, clf_backend *be,
                            clf_buffer *arena, uint64_t op_mask, clf_graph_hook_fn hook, void *ctx);

clf_status clf_graph_run(const clf_graph *g, const clf_backend_api *api, clf_backend *be,
                         clf_buffer *arena)
{
    return run_nodes(g, api, be, arena, ~0ull, NULL, NULL);
}

/* every node kind, CLF_NODE_COPY included, has a bit of op_mask */
_Static_assert(CLF_NODE_COPY < 64, "clf_graph_run_ops' op_mask has a bit per node kind");

clf_status clf_graph_run_ops(const clf_graph *g, const clf_backend_api *api, clf_backend *be,
                             clf_buffer *arena, uint64_t op_mask)
{
    return run_nodes(g, api, be, arena, op_mask, NULL, NULL);
}

clf_status clf_graph_run_hooked(const clf_graph *g, const clf_backend_api *api, clf_backend *be,
                                clf_buffer *arena, clf_graph_hook_fn hook, void *ctx)
{
    return run_nodes(g, api, be, arena, ~0ull, hook, ctx);
}

static clf_status run_nodes(const clf_graph *g, const clf_backend_api *api, clf_backend *be,
                            clf_buffer *arena, uint64_t op_mask, clf_graph_hook_fn hook, void *ctx)
{
    for (int ni = 0; ni < g->n_nodes; ni++) {
        if (!(op_mask & (1ull << g->nodes[ni].op)))
            continue;
        clf_node n = g->nodes[ni]; /* a copy: the pointer fields get filled in */
        for (int k = 0; k < n.n_operands; k++) {
            const clf_operand *o = &n.operands[k];
            clf_ptr p = clf_ptr_add(clf_graph_ptr(g, arena, o->value), o->elem_off * 4);
            memcpy((char *)&n.args + o->field, &p, sizeof p);
        }
        clf_status st;
        switch (n.op) {
        case CLF_OP_GEMM:
            st = clf_op_gemm(api, be, &n.args.gemm);
            break;
        case CLF_OP_GEMM_STRIDED_BATCHED:
            st = clf_op_gemm_strided_batched(api, be, &n.args.gemm);
            break;
        case CLF_OP_LAYERNORM:
            st = clf_op_layernorm(api, be, &n.args.layernorm);
            break;
        case CLF_OP_ATTENTION:
            st = clf_op_attention(api, be, &n.args.attention);
            break;
        case CLF_OP_EMBED:
            st = clf_op_embed(api, be, &n.args.embed);
            break;
        case CLF_OP_ADD:
            st = clf_op_add(api, be, n.args.add.out, n.args.add.a, n.args.add.b, n.args.add.n);
            break;
        case CLF_OP_SOFTMAX:
            st = clf_op_softmax(api, be, n.args.softmax.out, n.args.softmax.x, n.args.softmax.rows,
                                n.args.softmax.cols, n.args.softmax.log);
            break;
        case CLF_NODE_COPY:
            st = clf_op_copy(api, be, n.args.add.out, n.args.add.a, n.args.add.n);
            break;
        case CLF_OP_ARGMAX: /* args in the softmax layout; log unused */
            st = clf_op_argmax(api, be, n.args.softmax.out, n.args.softmax.x, n.args.softmax.rows,
                               n.args.softmax.cols);
            break;
        case CLF_OP_TOPK:
            st = clf_op_topk(api, be, &n.args.topk);
            break;
        case CLF_OP_RELU_BACKWARD:
            st = clf_op_relu_backward(api, be, n.args.add.out, n.args.add.a, n.args.add.b,
                                      n.args.add.n);
            break;
        case CLF_OP_LAYERNORM_BACKWARD:
            st = clf_op_layernorm_backward(api, be, &n.args.layernorm_backward);
            break;
        case CLF_OP_ATTENTION_BACKWARD:
            st = clf_op_attention_backward(api, be, &n.args.attention_backward);
            break;
        case CLF_OP_EMBED_BACKWARD:
            st = clf_op_embed_backward(api, be, &n.args.embed_backward);
            break;
        case CLF_OP_DROPOUT:
            st = clf_op_dropout(api, be, &n.args.dropout);
            break;
        case CLF_OP_CROSS_ENTROPY:
            st = clf_op_cross_entropy(api, be, &n.args.cross_entropy);
            break;
        case CLF_OP_ADAM:
            st = clf_op_adam(api, be, &n.args.adam);
            break;
        case CLF_OP_SUM_SQUARES:
            st = clf_op_sum_squares(api, be, n.args.add.out, n.args.add.a, n.args.add.n);
            break;
        case CLF_OP_FILL:
            st = clf_op_fill(api, be, n.args.fill.out, n.args.fill.value, n.args.fill.n);
            break;
        case CLF_OP_ACTIVATION:
            st = clf_op_activation(api, be, &n.args.activation);
            break;
        case CLF_OP_ACTIVATION_BACKWARD:
            st = clf_op_activation_backward(api, be, &n.args.activation_backward);
            break;
        case CLF_OP_NORM:
            st = clf_op_norm(api, be, &n.args.norm);
            break;
        case CLF_OP_NORM_BACKWARD:
            st = clf_op_norm_backward(api, be, &n.args.norm_backward);
            break;
        default:
            st = clf_error(CLF_ERR_INTERNAL, "graph: node '%s' has op %d that cannot run", n.label,
                           (int)n.op);
        }
        if (st != CLF_OK)
            return clf_error_context(st, "%s (%s)", n.label,
                                     n.op == CLF_NODE_COPY ? "copy" : clf_op_name(n.op));
        if (hook && (st = hook(ctx, ni)) != CLF_OK)
            return st;
    }
    return CLF_OK;
}
