/* The core's side of the training ops (clformer/ops.h): their argument checks, then the
 * backend's entry. */
#include "clformer/ops.h"
#include "runtime/op_checks.h"

clf_status clf_op_relu_backward(const clf_backend_api *api, clf_backend *be, clf_ptr dx, clf_ptr dy,
                                clf_ptr y, size_t n)
{
    const operand list[] = {required("dx", dx, n), required("dy", dy, n), required("y", y, n)};
    int run;
    clf_status st = ops_check_elementwise(api, be, "relu_backward", api->relu_backward != NULL,
                                          list, COUNT(list), 1, &run);
    return st != CLF_OK || !run ? st : api->relu_backward(be, dx, dy, y, n);
}

clf_status clf_op_embed_backward(const clf_backend_api *api, clf_backend *be,
                                 const clf_embed_backward_args *a)
{
    const char *op = "embed_backward";
    clf_status st = ops_check_entry(api, op, api->embed_backward != NULL, a);
    if (st != CLF_OK)
        return st;
    if (a->rows < 0 || a->dim <= 0 || a->vocab <= 0)
        return clf_error(CLF_ERR_INPUT, "%s: %s: bad shape rows=%d dim=%d vocab=%d", api->name, op,
                         a->rows, a->dim, a->vocab);
    if (a->rows == 0)
        return CLF_OK;
    const uint64_t rows = (uint64_t)a->rows, dim = (uint64_t)a->dim;
    const operand operands[] = {required("dtable", a->dtable, (uint64_t)a->vocab * dim),
                                required("dout", a->dout, rows * dim),
                                required("ids", a->ids, rows)};
    st = ops_check_operands(api, be, op, operands, COUNT(operands));
    return st != CLF_OK ? st : api->embed_backward(be, a);
}

clf_status clf_op_dropout(const clf_backend_api *api, clf_backend *be, const clf_dropout_args *a)
{
    const char *op = "dropout";
    int run;
    clf_status st = ops_check_entry(api, op, api->dropout != NULL, a);
    if (st != CLF_OK)
        return st;
    if (!(a->p >= 0.0f && a->p < 1.0f)) /* NaN fails too */
        return clf_error(CLF_ERR_INPUT, "%s: %s: p = %g is outside [0, 1)", api->name, op,
                         (double)a->p);
    const operand list[] = {required("out", a->out, a->n), required("x", a->x, a->n)};
    st = ops_check_elementwise(api, be, op, 1, list, COUNT(list), 1, &run);
    return st != CLF_OK || !run ? st : api->dropout(be, a);
}

clf_status clf_op_cross_entropy(const clf_backend_api *api, clf_backend *be,
                                const clf_cross_entropy_args *a)
{
    const char *op = "cross_entropy";
    clf_status st = ops_check_entry(api, op, api->cross_entropy != NULL, a);
    if (st != CLF_OK || (st = ops_check_rows(api, op, a->rows, a->cols)) != CLF_OK)
        return st;
    if (!(a->label_smoothing >= 0.0f && a->label_smoothing <= 1.0f))
        return clf_error(CLF_ERR_INPUT, "%s: %s: label_smoothing = %g is outside [0, 1]", api->name,
                         op, (double)a->label_smoothing);
    if (a->rows == 0)
        return CLF_OK;
    const uint64_t rows = (uint64_t)a->rows, n = rows * (uint64_t)a->cols;
    const operand operands[] = {required("loss", a->loss, rows), optional("dlogits", a->dlogits, n),
                                required("logits", a->logits, n),
                                required("targets", a->targets, rows)};
    if ((st = ops_check_operands(api, be, op, operands, COUNT(operands))) != CLF_OK ||
        (st = ops_check_in_place(api, op, &operands[1], &operands[2])) != CLF_OK)
        return st;
    /* the losses are written while rows of the logits (and dlogits) are still read */
    if (clf_ptr_overlap(a->loss, 4 * rows, a->logits, 4 * n) ||
        clf_ptr_overlap(a->loss, 4 * rows, a->dlogits, 4 * n))
        return clf_error(CLF_ERR_INPUT, "%s: %s: 'loss' overlaps the logits", api->name, op);
    return api->cross_entropy(be, a);
}

clf_status clf_op_adam(const clf_backend_api *api, clf_backend *be, const clf_adam_args *a)
{
    const char *op = "adam";
    clf_status st = ops_check_entry(api, op, api->adam != NULL, a);
    if (st != CLF_OK)
        return st;
    if (!(a->bias_correction1 > 0.0f && a->sqrt_bias_correction2 > 0.0f))
        return clf_error(
            CLF_ERR_INPUT, "%s: %s: bias corrections %g and %g must be positive (step >= 1)",
            api->name, op, (double)a->bias_correction1, (double)a->sqrt_bias_correction2);
    if (a->n == 0)
        return CLF_OK;
    const operand operands[] = {required("param", a->param, a->n), required("grad", a->grad, a->n),
                                required("m", a->m, a->n), required("v", a->v, a->n)};
    if ((st = ops_check_operands(api, be, op, operands, COUNT(operands))) != CLF_OK)
        return st;
    /* param, m and v are updated in place, each element from all four */
    const uint64_t bytes = 4 * (uint64_t)a->n;
    for (size_t i = 0; i < COUNT(operands); i++)
        for (size_t j = i + 1; j < COUNT(operands); j++)
            if (clf_ptr_overlap(operands[i].p, bytes, operands[j].p, bytes))
                return clf_error(CLF_ERR_INPUT, "%s: %s: param, grad, m and v may not overlap",
                                 api->name, op);
    return api->adam(be, a);
}

clf_status clf_op_sum_squares(const clf_backend_api *api, clf_backend *be, clf_ptr out, clf_ptr x,
                              size_t n)
{
    const char *op = "sum_squares";
    /* n = 0 is not empty: it writes out = 0 */
    const operand list[] = {required("out", out, 1), {"x", x, n, 4, n > 0}};
    clf_status st = ops_check_present(api, op, api->sum_squares != NULL);
    if (st == CLF_OK && (st = ops_check_operands(api, be, op, list, COUNT(list))) == CLF_OK)
        st = api->sum_squares(be, out, x, n);
    return st;
}

clf_status clf_op_fill(const clf_backend_api *api, clf_backend *be, clf_ptr out, float value,
                       size_t n)
{
    const operand list[] = {required("out", out, n)};
    int run;
    clf_status st = ops_check_elementwise(api, be, "fill", api->fill != NULL, list, 1, 0, &run);
    return st != CLF_OK || !run ? st : api->fill(be, out, value, n);
}
