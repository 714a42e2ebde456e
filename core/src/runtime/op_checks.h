/* What the op layer's files (ops.c, ops_train.c) share: an op's operands and the checks
 * every op makes of them (op_checks.c), the rules of clformer/backend.h. Private to
 * runtime/. */
#ifndef CLF_OP_CHECKS_H
#define CLF_OP_CHECKS_H

#include "clformer/backend.h"
#include "clformer/status.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* One operand of an op: its name in messages, where it is, how many elements it spans
 * from its offset, the element size (its alignment) and whether it must be given. */
typedef struct operand {
    const char *name;
    clf_ptr p;
    uint64_t elems;
    unsigned elem_bytes;
    int required;
} operand;

static inline operand required(const char *name, clf_ptr p, uint64_t elems)
{
    return (operand){name, p, elems, 4, 1};
}

static inline operand optional(const char *name, clf_ptr p, uint64_t elems)
{
    return (operand){name, p, elems, 4, 0};
}

/* Each given operand aligned to its element and inside its buffer; each required one given. */
clf_status ops_check_operands(const clf_backend_api *api, clf_backend *be, const char *op,
                              const operand *list, size_t n);

/* Each of the nw written operands clear of each of the nr others (a call writes one while it
 * still reads the other); role words the others in the message ("the input ", or ""). */
clf_status ops_check_apart(const clf_backend_api *api, const char *op, const operand *written,
                           size_t nw, const operand *others, size_t nr, const char *role);

/* The table implements the op. */
clf_status ops_check_present(const clf_backend_api *api, const char *op, int present);

/* The table implements the op and the call has its argument struct. */
clf_status ops_check_entry(const clf_backend_api *api, const char *op, int present,
                           const void *args);

/* rows >= 0 and cols >= 1: the shape of a row op. */
clf_status ops_check_rows(const clf_backend_api *api, const char *op, int rows, int cols);

/* Output a may be input b (the op runs in place) or apart from it, not partly over it. */
clf_status ops_check_in_place(const clf_backend_api *api, const char *op, const operand *a,
                              const operand *b);

/* An elementwise op over list[0].elems elements: the table has it and, unless that is 0
 * (*run = 0: nothing to do), the operands, the first nout of them outputs that may each
 * run in place over every input. */
clf_status ops_check_elementwise(const clf_backend_api *api, clf_backend *be, const char *op,
                                 int present, const operand *list, size_t count, size_t nout,
                                 int *run);

#endif
