/* ocl_launch.c - operand checks and kernel launches shared by the ops. */
#include "ocl_internal.h"

#include <inttypes.h>

#include "clformer/fault.h"

static clf_status ocl_check_range(clf_backend *be, const char *op, const char *name, clf_ptr p,
                                  uint64_t bytes, unsigned align, int required)
{
    if (!p.buf)
        return required ? clf_error(CLF_ERR_INPUT, "opencl: %s: operand '%s' is missing", op, name)
                        : CLF_OK;
    if (p.buf->owner != be)
        return clf_error(CLF_ERR_INPUT,
                         "opencl: %s: operand '%s' is a buffer of another backend instance", op,
                         name);
    if (align > 1 && p.off % align != 0)
        return clf_error(CLF_ERR_INPUT,
                         "opencl: %s: operand '%s' has offset %zu bytes, not a multiple of %u", op,
                         name, p.off, align);
    if (p.off > p.buf->size || bytes > p.buf->size - p.off)
        return clf_error(CLF_ERR_INPUT,
                         "opencl: %s: operand '%s' out of bounds: needs %" PRIu64
                         " bytes at offset %zu, its buffer holds %zu bytes",
                         op, name, bytes, p.off, p.buf->size);
    return CLF_OK;
}

clf_status ocl_check_operands(clf_backend *be, const char *op, const ocl_operand *list, int n)
{
    clf_status st = CLF_OK;
    for (int i = 0; i < n && st == CLF_OK; i++) {
        const ocl_operand *o = &list[i];
        /* an overflowing size saturates and so fails the bounds check */
        uint64_t bytes =
            o->elems > UINT64_MAX / o->elem_bytes ? UINT64_MAX : o->elems * o->elem_bytes;
        st = ocl_check_range(be, op, o->name, o->p, bytes, o->elem_bytes, o->required);
    }
    return st;
}

clf_status ocl_pick_wg(clf_backend *be, const char *op, cl_kernel k, size_t local_per_item,
                       size_t auto_cap, size_t *wg)
{
    size_t kernel_wg = 0, multiple = 1;
    cl_ulong kernel_local = 0;
    cl_int err;
    if ((err = clGetKernelWorkGroupInfo(k, be->dev.device, CL_KERNEL_WORK_GROUP_SIZE,
                                        sizeof kernel_wg, &kernel_wg, NULL)) != CL_SUCCESS ||
        (err = clGetKernelWorkGroupInfo(k, be->dev.device,
                                        CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                                        sizeof multiple, &multiple, NULL)) != CL_SUCCESS ||
        (err = clGetKernelWorkGroupInfo(k, be->dev.device, CL_KERNEL_LOCAL_MEM_SIZE,
                                        sizeof kernel_local, &kernel_local, NULL)) != CL_SUCCESS)
        return ocl_fail(op, "clGetKernelWorkGroupInfo", err);
    size_t cap = kernel_wg < be->limits.max_wg ? kernel_wg : be->limits.max_wg;
    if (local_per_item > 0) {
        uint64_t room = be->limits.local_mem > kernel_local
                            ? (be->limits.local_mem - kernel_local) / 2 / local_per_item
                            : 0;
        if (room < cap)
            cap = (size_t)room;
    }
    if (cap == 0)
        return clf_error(CLF_ERR_BACKEND,
                         "opencl: %s: no work-group fits: CL_KERNEL_WORK_GROUP_SIZE %zu, "
                         "CL_DEVICE_MAX_WORK_GROUP_SIZE %zu, CL_DEVICE_LOCAL_MEM_SIZE %llu bytes "
                         "(%zu bytes per work-item, %llu the kernel's own)",
                         op, kernel_wg, be->limits.max_wg, (unsigned long long)be->limits.local_mem,
                         local_per_item, (unsigned long long)kernel_local);
    size_t limit = cap; /* what the device allows */
    if (be->local_size == OCL_LOCAL_MIN)
        cap = 1;
    else if (be->local_size == OCL_LOCAL_AUTO && cap > auto_cap)
        cap = auto_cap;
    size_t w = 1; /* the reductions need a power of two */
    while (w * 2 <= cap)
        w *= 2;
    /* auto: a whole SIMD width (warp, wavefront) where the device allows it */
    while (be->local_size == OCL_LOCAL_AUTO && w < multiple && w * 2 <= limit)
        w *= 2;
    *wg = w;
    return CLF_OK;
}

/* The global size of a grid-stride launch over n items: enough work-groups of wg for n,
 * at most be->max_groups of them (each work-item then loops). */
static size_t grid_stride_global(const clf_backend *be, size_t wg, uint64_t n)
{
    uint64_t groups = (n + wg - 1) / wg;
    if (groups > be->max_groups)
        groups = be->max_groups;
    return (size_t)groups * wg;
}

clf_status ocl_set_args(const char *op, cl_kernel k, const ocl_kval *head, int nhead,
                        const ocl_kval *tail, int ntail)
{
    for (int i = 0; i < nhead + ntail; i++) {
        const ocl_kval *v = i < nhead ? &head[i] : &tail[i - nhead];
        cl_int err = clSetKernelArg(k, (cl_uint)i, v->size, v->local ? NULL : (const void *)&v->v);
        if (err != CL_SUCCESS)
            return ocl_fail(op, "clSetKernelArg", err);
    }
    return CLF_OK;
}

clf_status ocl_run(clf_backend *be, const char *op, cl_kernel k, const ocl_kval *head, int nhead,
                   const ocl_kval *tail, int ntail, cl_uint dims, const size_t *global,
                   const size_t *local)
{
    if (be->recording)
        return ocl_capture_record(be, op, k, head, nhead, tail, ntail, dims, global, local);
    clf_status st = ocl_set_args(op, k, head, nhead, tail, ntail);
    if (st != CLF_OK)
        return st;
    /* CLF_FAULT=opencl_enqueue:N: the launch fails as a device out of resources would */
    cl_int err =
        clf_fault_hit(CLF_FAULT_OPENCL_ENQUEUE)
            ? CL_OUT_OF_RESOURCES
            : clEnqueueNDRangeKernel(be->queue, k, dims, NULL, global, local, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return ocl_fail(op, "clEnqueueNDRangeKernel", err);
    return CLF_OK;
}

clf_status ocl_run_rows(clf_backend *be, const char *op, cl_kernel k, size_t wg,
                        const ocl_kval *args, int nargs, int rows)
{
    size_t global = (size_t)rows * wg;
    return ocl_run(be, op, k, args, nargs, NULL, 0, 1, &global, &wg);
}

clf_status ocl_run_elementwise(clf_backend *be, const char *op, cl_kernel k, size_t wg,
                               const ocl_kval *args, int nargs, uint64_t n)
{
    size_t global = grid_stride_global(be, wg, n);
    return ocl_run(be, op, k, args, nargs, NULL, 0, 1, &global, &wg);
}

clf_status ocl_run_param_grads(clf_backend *be, const char *op, cl_kernel k, size_t wg,
                               const ocl_kval *head, int nhead, clf_ptr dalpha, clf_ptr dbeta,
                               int rows, int cols)
{
    /* ..., dalpha, dalpha_off, has_dalpha, dbeta, dbeta_off, has_dbeta, rows, cols, reda, redb */
    const ocl_kval tail[] = {OCL_KBUF(dalpha), ocl_khas(dalpha), OCL_KBUF(dbeta), ocl_khas(dbeta),
                             ocl_kint(rows),   ocl_kint(cols),   ocl_kfloats(wg), ocl_kfloats(wg)};
    size_t lx = wg < OCL_PARAMS_COLS ? wg : OCL_PARAMS_COLS, ly = wg / lx;
    size_t global[2] = {((size_t)cols + lx - 1) / lx * lx, ly}, local[2] = {lx, ly};
    return ocl_run(be, op, k, head, nhead, tail, OCL_COUNT(tail), 2, global, local);
}
