/* clformer/graph.h - an op list over values, a buffer plan by liveness, and its executor.
 *
 * The model is lowered to a flat list of backend ops (nodes). Each node carries the
 * backend's args struct with its pointer fields left empty, plus operands that say which
 * value (and element offset inside it) each pointer field refers to. Values are either
 * activations (placed in one arena by the planner), inputs (placed in the arena too and
 * uploaded before the run) or external buffers (weights, the PE table) that the caller
 * owns. The planner gives each activation an arena offset such that two values whose
 * lifetimes (first to last node touching them) overlap never share bytes; so activation
 * memory depends on the widest layer, not on the number of layers. */
#ifndef CLFORMER_GRAPH_H
#define CLFORMER_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "clformer/backend.h"
#include "clformer/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum clf_value_kind {
    CLF_VALUE_ACTIVATION = 0, /* arena, lifetime from first to last use */
    CLF_VALUE_INPUT,          /* arena, live from the start, uploaded by the caller */
    CLF_VALUE_OUTPUT,         /* arena, live until the end, downloaded by the caller */
    CLF_VALUE_EXTERNAL        /* a caller-owned buffer (weights, PE table) */
} clf_value_kind;

typedef struct clf_value {
    clf_value_kind kind;
    size_t bytes;
    clf_ptr ext;     /* CLF_VALUE_EXTERNAL: where it lives */
    size_t offset;   /* arena values: byte offset, set by clf_graph_plan */
    int first, last; /* node indices of first and last use */
    char label[64];
} clf_value;

/* Extra op kinds whose arguments are not structs in the backend ABI. */
typedef struct clf_add_args {
    clf_ptr out, a, b;
    size_t n;
} clf_add_args;
typedef struct clf_softmax_args {
    clf_ptr out, x;
    int rows, cols, log;
} clf_softmax_args;
/* relu_backward uses the add layout (out = dx, a = dy, b = y), sum_squares too (out, a = x);
 * fill has its own. */
typedef struct clf_fill_args {
    clf_ptr out;
    size_t n;
    float value;
} clf_fill_args;

/* A graph-level node kind beyond the backend's ops: out[0:bytes) = x[0:bytes), run with
 * the backend's copy(). Its args use the add layout (out, a; n = bytes). */
#define CLF_NODE_COPY ((clf_op)CLF_OP_COUNT)

#define CLF_NODE_MAX_OPERANDS 12

typedef struct clf_operand {
    int value;       /* index into the graph's values */
    size_t elem_off; /* F32/I32 elements into the value */
    size_t field;    /* offsetof(<args struct>, <clf_ptr field>) */
} clf_operand;

typedef struct clf_node {
    clf_op op;
    union {
        clf_gemm_args gemm;
        clf_layernorm_args layernorm;
        clf_attention_args attention;
        clf_embed_args embed;
        clf_add_args add;
        clf_softmax_args softmax;
        clf_fill_args fill;
        clf_layernorm_backward_args layernorm_backward;
        clf_attention_backward_args attention_backward;
        clf_embed_backward_args embed_backward;
        clf_dropout_args dropout;
        clf_cross_entropy_args cross_entropy;
        clf_adam_args adam;
        clf_activation_args activation;
        clf_activation_backward_args activation_backward;
        clf_norm_args norm;
        clf_norm_backward_args norm_backward;
        clf_topk_args topk;
    } args;
    int n_operands;
    clf_operand operands[CLF_NODE_MAX_OPERANDS];
    char label[64]; /* e.g. "decoder.layers.1.cross_attention_block", for error messages */
    int tag;        /* free for the builder: a dropout node's site number (see train.c) */
} clf_node;

typedef struct clf_graph {
    clf_value *values;
    int n_values, cap_values;
    clf_node *nodes;
    int n_nodes, cap_nodes;
    size_t arena_bytes; /* set by clf_graph_plan */
    clf_status status;  /* first error met while building (sticky), CLF_OK otherwise */
} clf_graph;

CLF_API void clf_graph_init(clf_graph *g);
CLF_API void clf_graph_free(clf_graph *g);

/* Adds a value; returns its index, or -1 after recording an error in g->status. */
CLF_API int clf_graph_value(clf_graph *g, clf_value_kind kind, size_t bytes, const char *label);
CLF_API int clf_graph_external(clf_graph *g, clf_ptr where, size_t bytes, const char *label);

/* Appends a node with the given args (pointer fields are filled at run time from its
 * operands, added next with clf_graph_bind). Returns the node, or NULL on error. */
CLF_API clf_node *clf_graph_node(clf_graph *g, clf_op op, const void *args, size_t args_size,
                                 const char *label);
/* Binds pointer field `field` (an offsetof) of node n to value v at element offset off. */
CLF_API void clf_graph_bind(clf_graph *g, clf_node *n, size_t field, int v, size_t elem_off);

/* Finds the operand bound to pointer field `field` of n; NULL when absent. */
CLF_API const clf_operand *clf_node_operand(const clf_node *n, size_t field);

/* Computes lifetimes and arena offsets (aligned to CLF_GRAPH_ALIGN bytes). */
#define CLF_GRAPH_ALIGN 256
CLF_API clf_status clf_graph_plan(clf_graph *g);

/* Grows a caller-owned activation arena to g->arena_bytes when it is smaller (the old
 * buffer is freed first: nothing in it survives). what names the caller in the error. */
CLF_API clf_status clf_graph_reserve_arena(const clf_graph *g, const clf_backend_api *api,
                                           clf_backend *be, clf_buffer **arena, size_t *cap,
                                           const char *what);

/* The arena address of a value (arena values) or its external pointer. */
CLF_API clf_ptr clf_graph_ptr(const clf_graph *g, clf_buffer *arena, int v);

/* Runs every node in order on the backend, with arena values in `arena` (at least
 * g->arena_bytes). Errors name the node's label. Does not synchronize. */
CLF_API clf_status clf_graph_run(const clf_graph *g, const clf_backend_api *api, clf_backend *be,
                                 clf_buffer *arena);
/* The same, running only the nodes whose op bit (1ull << op; CLF_NODE_COPY included) is set
 * in op_mask: the bench times the GEMMs alone this way to get the backend's own SGEMM rate
 * at the model's shapes. */
CLF_API clf_status clf_graph_run_ops(const clf_graph *g, const clf_backend_api *api,
                                     clf_backend *be, clf_buffer *arena, uint64_t op_mask);
/* The same as clf_graph_run, calling hook(ctx, i) after node i has been dispatched (its
 * op called: on an asynchronous backend it may still be queued, and a download() waits for
 * it). A hook's error stops the run and is returned as it is. The trainer starts the
 * gradient all-reduce of data-parallel training this way as soon as the backward pass has
 * completed a bucket (clf_trainer_accumulate_reduce). */
typedef clf_status (*clf_graph_hook_fn)(void *ctx, int node);
CLF_API clf_status clf_graph_run_hooked(const clf_graph *g, const clf_backend_api *api,
                                        clf_backend *be, clf_buffer *arena, clf_graph_hook_fn hook,
                                        void *ctx);
/* FLOPs (2 per multiply-add) of the GEMM nodes. */
CLF_API double clf_graph_gemm_flops(const clf_graph *g);

#ifdef __cplusplus
}
#endif
#endif
