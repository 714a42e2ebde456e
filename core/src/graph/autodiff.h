/* Reverse-mode differentiation of a forward op list (see autodiff.c). Not installed. */
#ifndef CLF_AUTODIFF_H
#define CLF_AUTODIFF_H

#include "clformer/graph.h"

/* Where the gradient of a parameter lives: given an external value's pointer (a weight),
 * returns the pointer of its gradient, or {NULL, 0} when it is not trained (the PE table,
 * masks). Parameter gradients are accumulated into (+=), never overwritten. */
typedef clf_ptr (*clf_grad_of_fn)(void *user, clf_ptr param);

typedef struct clf_backward_spec {
    int n_forward;  /* nodes [0, n_forward) are differentiated, last to first */
    int seed_value; /* the forward value whose gradient is already known ... */
    int seed_grad;  /* ... held by this value (e.g. dlogits written by cross_entropy) */
    int ones;       /* external value of >= max GEMM rows 1.0f (bias gradients), or -1 */
    clf_grad_of_fn grad_of;
    void *user;
} clf_backward_spec;

/* Appends to g the nodes computing every parameter's gradient. The forward part must be
 * in single-assignment form (each activation written by one node, no accumulating GEMM,
 * no fused residual in a layernorm): the training builder guarantees it, and anything
 * else is CLF_ERR_INTERNAL naming the node. */
clf_status clf_graph_append_backward(clf_graph *g, const clf_backward_spec *spec);

#endif
