/* The checks every op of the op layer makes (runtime/op_checks.h). */
#include "runtime/op_checks.h"

#include <inttypes.h>

/* Each given operand aligned to its element and inside its buffer; each required one given. */
clf_status ops_check_operands(const clf_backend_api *api, clf_backend *be, const char *op,
                              const operand *list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const operand *o = &list[i];
        if (!o->p.buf) {
            if (o->required)
                return clf_error(CLF_ERR_INPUT, "%s: %s: operand '%s' is missing", api->name, op,
                                 o->name);
            continue;
        }
        if (o->p.off % o->elem_bytes != 0)
            return clf_error(CLF_ERR_INPUT,
                             "%s: %s: operand '%s' is misaligned: offset %zu bytes is not a "
                             "multiple of %u",
                             api->name, op, o->name, o->p.off, o->elem_bytes);
        size_t size = 0;
        if (api->buffer_size(be, o->p.buf, &size) != CLF_OK)
            return clf_error(CLF_ERR_INPUT,
                             "%s: %s: operand '%s' is a buffer of another backend instance",
                             api->name, op, o->name);
        const uint64_t bytes =
            o->elems > UINT64_MAX / o->elem_bytes ? UINT64_MAX : o->elems * o->elem_bytes;
        if (o->p.off > size || bytes > size - o->p.off)
            return clf_error(CLF_ERR_INPUT,
                             "%s: %s: operand '%s' out of bounds: needs %" PRIu64
                             " bytes at offset %zu, its buffer holds %zu bytes",
                             api->name, op, o->name, bytes, o->p.off, size);
    }
    return CLF_OK;
}

/* Each of the nw written operands clear of each of the nr others (a call writes one while it
 * still reads the other); role words the others in the message ("the input ", or ""). */
clf_status ops_check_apart(const clf_backend_api *api, const char *op, const operand *written,
                           size_t nw, const operand *others, size_t nr, const char *role)
{
    for (size_t o = 0; o < nw; o++)
        for (size_t i = 0; i < nr; i++)
            if (clf_ptr_overlap(written[o].p, 4 * written[o].elems, others[i].p,
                                4 * others[i].elems))
                return clf_error(CLF_ERR_INPUT, "%s: %s: '%s' overlaps %s'%s'", api->name, op,
                                 written[o].name, role, others[i].name);
    return CLF_OK;
}

/* The table implements the op. */
clf_status ops_check_present(const clf_backend_api *api, const char *op, int present)
{
    if (!present)
        return clf_error(CLF_ERR_UNSUPPORTED, "%s: %s: not supported by this backend", api->name,
                         op);
    return CLF_OK;
}

/* The table implements the op and the call has its argument struct. */
clf_status ops_check_entry(const clf_backend_api *api, const char *op, int present,
                           const void *args)
{
    clf_status st = ops_check_present(api, op, present);
    if (st == CLF_OK && !args)
        st = clf_error(CLF_ERR_INPUT, "%s: %s: no arguments", api->name, op);
    return st;
}

/* rows >= 0 and cols >= 1: the shape of a row op. */
clf_status ops_check_rows(const clf_backend_api *api, const char *op, int rows, int cols)
{
    if (rows < 0 || cols <= 0)
        return clf_error(CLF_ERR_INPUT, "%s: %s: bad shape rows=%d cols=%d", api->name, op, rows,
                         cols);
    return CLF_OK;
}

/* Output a may be input b (the op runs in place) or apart from it, not partly over it. */
clf_status ops_check_in_place(const clf_backend_api *api, const char *op, const operand *a,
                              const operand *b)
{
    if (clf_ptr_overlap(a->p, 4 * a->elems, b->p, 4 * b->elems) && a->p.off != b->p.off)
        return clf_error(CLF_ERR_INPUT, "%s: %s: '%s' partly overlaps '%s'", api->name, op, a->name,
                         b->name);
    return CLF_OK;
}

/* An elementwise op over list[0].elems elements: the table has it and, unless that is 0
 * (*run = 0: nothing to do), the operands, the first nout of them outputs that may each
 * run in place over every input. */
clf_status ops_check_elementwise(const clf_backend_api *api, clf_backend *be, const char *op,
                                 int present, const operand *list, size_t count, size_t nout,
                                 int *run)
{
    *run = 0;
    clf_status st = ops_check_present(api, op, present);
    if (st != CLF_OK || list[0].elems == 0 ||
        (st = ops_check_operands(api, be, op, list, count)) != CLF_OK)
        return st;
    for (size_t o = 0; o < nout; o++)
        for (size_t i = nout; i < count; i++)
            if ((st = ops_check_in_place(api, op, &list[o], &list[i])) != CLF_OK)
                return st;
    *run = 1;
    return CLF_OK;
}
