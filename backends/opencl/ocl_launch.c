/* ocl_launch.c - operand checks and kernel launches shared by the ops. */
#include "ocl_internal.h"

#include <inttypes.h>

uint64_t ocl_extent(uint64_t rows, uint64_t cols, uint64_t ld, uint64_t batch, uint64_t stride)
{
    uint64_t one, all;
    if (rows == 0 || cols == 0 || batch == 0)
        return 0;
    /* one matrix: (rows - 1) * ld + cols; then (batch - 1) * stride more */
    if (__builtin_mul_overflow(rows - 1, ld, &one) || __builtin_add_overflow(one, cols, &one) ||
        __builtin_mul_overflow(batch - 1, stride, &all) || __builtin_add_overflow(all, one, &all))
        return UINT64_MAX;
    return all;
}

clf_status ocl_check_range(clf_backend *be, const char *op, const char *name, clf_ptr p,
                           uint64_t bytes, int aligned, int required)
{
    if (!p.buf)
        return required ? clf_error(CLF_ERR_INPUT, "opencl: %s: operand '%s' is missing", op, name)
                        : CLF_OK;
    if (p.buf->owner != be)
        return clf_error(CLF_ERR_INPUT,
                         "opencl: %s: operand '%s' is a buffer of another backend instance", op,
                         name);
    if (aligned && p.off % 4 != 0)
        return clf_error(CLF_ERR_INPUT,
                         "opencl: %s: operand '%s' has offset %zu bytes, not a multiple of 4", op,
                         name, p.off);
    if (p.off > p.buf->size || bytes > p.buf->size - p.off)
        return clf_error(CLF_ERR_INPUT,
                         "opencl: %s: operand '%s' out of bounds: needs %" PRIu64
                         " bytes at offset %zu, its buffer holds %zu bytes",
                         op, name, bytes, p.off, p.buf->size);
    return CLF_OK;
}

clf_status ocl_check_operand(clf_backend *be, const char *op, const char *name, clf_ptr p,
                             uint64_t elems, int required)
{
    /* an overflowing size saturates and so fails the bounds check */
    uint64_t bytes = elems > UINT64_MAX / 4 ? UINT64_MAX : elems * 4;
    return ocl_check_range(be, op, name, p, bytes, 1, required);
}

clf_status ocl_launch(clf_backend *be, const char *op, ocl_kernel_id id, const ocl_arg *args,
                      int nargs, cl_uint dims, const size_t *global, const size_t *local)
{
    return ocl_launch_kernel(be, op, be->kernels[id], args, nargs, dims, global, local);
}

clf_status ocl_launch_kernel(clf_backend *be, const char *op, cl_kernel k, const ocl_arg *args,
                             int nargs, cl_uint dims, const size_t *global, const size_t *local)
{
    for (int i = 0; i < nargs; i++) {
        cl_int err = clSetKernelArg(k, (cl_uint)i, args[i].size, args[i].value);
        if (err != CL_SUCCESS)
            return ocl_fail(op, "clSetKernelArg", err);
    }
    cl_int err = clEnqueueNDRangeKernel(be->queue, k, dims, NULL, global, local, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return ocl_fail(op, "clEnqueueNDRangeKernel", err);
    return CLF_OK;
}

clf_status ocl_launch_elementwise(clf_backend *be, const char *op, ocl_kernel_id id,
                                  const ocl_arg *args, int nargs, uint64_t n)
{
    size_t wg = be->wg[id];
    uint64_t groups = (n + wg - 1) / wg;
    if (groups > be->max_groups)
        groups = be->max_groups;
    size_t global = (size_t)groups * wg, local = wg;
    return ocl_launch(be, op, id, args, nargs, 1, &global, &local);
}
