/* ocl_backend.c - the OpenCL backend's entry point: lifecycle, memory, the api table.
 *
 * open() picks a device (ocl_device.c), creates a context and one in-order queue, and
 * builds or loads the kernel programs (ocl_program.c). Ops are in ocl_gemm.c, ocl_ops.c,
 * ocl_train.c and ocl_attention_backward.c; plugin ops, whose programs are built when an op
 * is first prepared, in ocl_plugin.c. All state hangs off the clf_backend; there is no global
 * mutable state here (CLBlast keeps its own process-wide cache of compiled GEMM kernels). */
#include "ocl_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Grid-stride kernels start at most this many work-groups per compute unit: enough to
 * hide memory latency on a GPU; each work-item loops over the rest. */
#define OCL_GROUPS_PER_CU 64

static void ocl_close(clf_backend *be)
{
    if (!be)
        return;
    if (be->queue)
        clFinish(be->queue); /* nothing may still run on what we release */
    if (be->scratch)
        clReleaseMemObject(be->scratch);
    ocl_plugin_release(be);
    for (int k = 0; k < OCL_K_COUNT; k++)
        if (be->kernels[k])
            clReleaseKernel(be->kernels[k]);
    for (int f = 0; f < OCL_F_COUNT; f++)
        if (be->programs[f])
            clReleaseProgram(be->programs[f]);
    if (be->queue)
        clReleaseCommandQueue(be->queue);
    if (be->ctx)
        clReleaseContext(be->ctx);
    free(be);
}

static clf_status ocl_open(const clf_backend_opts *opts, clf_backend **out)
{
    clf_status st = CLF_OK;
    clf_backend *be = NULL;
    cl_int err;

    if (!out)
        return clf_error(CLF_ERR_INPUT, "opencl: open: no output pointer");
    *out = NULL;
    if (opts && opts->abi_version != CLF_BACKEND_ABI)
        return clf_error(CLF_ERR_INPUT,
                         "opencl: open: options for ABI version %d, this backend "
                         "has version %d",
                         opts->abi_version, CLF_BACKEND_ABI);
    if (!(be = calloc(1, sizeof *be)))
        return clf_error(CLF_ERR_NOMEM, "opencl: open: out of host memory");
    if ((st = ocl_choose_device(opts ? opts->device : NULL, &be->dev)) != CLF_OK)
        goto fail;

    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)be->dev.platform,
                                     0};
    be->ctx = clCreateContext(props, 1, &be->dev.device, NULL, NULL, &err);
    if (err != CL_SUCCESS) {
        be->ctx = NULL;
        st = ocl_fail("open", "clCreateContext", err);
        goto fail;
    }
    /* in order: an op may read what the previous one wrote, with no events */
    be->queue = clCreateCommandQueue(be->ctx, be->dev.device, 0, &err);
    if (err != CL_SUCCESS) {
        be->queue = NULL;
        st = ocl_fail("open", "clCreateCommandQueue", err);
        goto fail;
    }
    if ((st = ocl_query_limits(&be->dev, &be->limits)) != CLF_OK ||
        (st = ocl_local_size_mode(&be->local_size)) != CLF_OK)
        goto fail;
    if (be->limits.c_version < OCL_MIN_C_VERSION) {
        st = clf_error(CLF_ERR_BACKEND,
                       "opencl: open: %s / %s: OpenCL C %d.%d (CL_DEVICE_OPENCL_C_VERSION "
                       "'%s'); the kernels need OpenCL C %d.%d",
                       be->dev.info.platform, be->dev.info.name, be->limits.c_version / 10,
                       be->limits.c_version % 10, be->dev.info.version, OCL_MIN_C_VERSION / 10,
                       OCL_MIN_C_VERSION % 10);
        goto fail;
    }
    be->max_alloc = be->limits.max_alloc;
    be->local_mem = be->limits.local_mem;
    be->max_groups = (size_t)be->limits.compute_units * OCL_GROUPS_PER_CU;
    snprintf(be->description, sizeof be->description, "OpenCL: %s / %s (%s)", be->dev.info.platform,
             be->dev.info.name, be->dev.info.type);

    ocl_cache_dir(opts ? opts->cache_dir : NULL, be->cache_dir, sizeof be->cache_dir);
    if ((st = ocl_build_programs(be, be->cache_dir)) != CLF_OK)
        goto fail;
    *out = be;
    return CLF_OK;
fail:
    ocl_close(be);
    return st;
}

static clf_status ocl_describe(clf_backend *be, char *buf, size_t size)
{
    if (!be || !buf || size == 0)
        return clf_error(CLF_ERR_INPUT, "opencl: describe: no backend or buffer");
    snprintf(buf, size, "%s", be->description);
    return CLF_OK;
}

static int ocl_supports(clf_backend *be, clf_op op)
{
    (void)be;
    return (int)op >= 0 && op < CLF_OP_COUNT;
}

static uint64_t ocl_max_alloc(clf_backend *be)
{
    return be ? be->max_alloc : 0;
}

/* A zero-filled buffer of bytes bytes (at least 4 on the device: OpenCL has no empty
 * buffers). Zeroing makes runs deterministic and makes lazy drivers commit the memory
 * now, so an out-of-memory shows up here rather than in a later op. */
static clf_status ocl_alloc(clf_backend *be, size_t bytes, clf_buffer **out)
{
    clf_status st = CLF_OK;
    clf_buffer *b = NULL;
    cl_int err;
    *out = NULL;
    if (bytes > be->max_alloc)
        return clf_error(CLF_ERR_NOMEM,
                         "opencl: alloc: %zu bytes (%.1f MiB) is more than this device's largest "
                         "allocation, CL_DEVICE_MAX_MEM_ALLOC_SIZE = %llu bytes (%.1f MiB)",
                         bytes, bytes / 1048576.0, (unsigned long long)be->max_alloc,
                         be->max_alloc / 1048576.0);
    if (!(b = calloc(1, sizeof *b)))
        return clf_error(CLF_ERR_NOMEM, "opencl: alloc: out of host memory");
    size_t dev_bytes = bytes < 4 ? 4 : bytes;
    b->mem = clCreateBuffer(be->ctx, CL_MEM_READ_WRITE, dev_bytes, NULL, &err);
    if (err != CL_SUCCESS) {
        b->mem = NULL;
        st = ocl_fail("alloc", "clCreateBuffer", err);
        goto fail;
    }
    const cl_uchar zero = 0;
    err = clEnqueueFillBuffer(be->queue, b->mem, &zero, 1, 0, dev_bytes, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        st = ocl_fail("alloc", "clEnqueueFillBuffer", err);
        goto fail;
    }
    b->size = bytes;
    b->owner = be;
    *out = b;
    return CLF_OK;
fail:
    if (b->mem)
        clReleaseMemObject(b->mem);
    free(b);
    return st;
}

clf_status ocl_scratch(clf_backend *be, const char *op, size_t bytes, cl_mem *out)
{
    cl_int err;
    bytes = bytes < 4 ? 4 : bytes;
    if (be->scratch_bytes < bytes) {
        if (bytes > be->max_alloc)
            return clf_error(CLF_ERR_NOMEM,
                             "opencl: %s: needs %zu bytes of scratch, more than this device's "
                             "largest allocation (%llu bytes)",
                             op, bytes, (unsigned long long)be->max_alloc);
        /* kernels still queued keep the old buffer alive until they are done */
        if (be->scratch)
            clReleaseMemObject(be->scratch);
        be->scratch_bytes = 0;
        be->scratch = clCreateBuffer(be->ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
        if (err != CL_SUCCESS) {
            be->scratch = NULL;
            return ocl_fail(op, "clCreateBuffer", err);
        }
        be->scratch_bytes = bytes;
    }
    *out = be->scratch;
    return CLF_OK;
}

static void ocl_free(clf_backend *be, clf_buffer *buf)
{
    (void)be;
    if (!buf)
        return;
    /* OpenCL defers the release until queued commands using it are done */
    clReleaseMemObject(buf->mem);
    free(buf);
}

static clf_status ocl_upload(clf_backend *be, clf_ptr dst, const void *src, size_t bytes)
{
    clf_status st = ocl_check_range(be, "upload", "dst", dst, bytes, 1, 1);
    if (st != CLF_OK || bytes == 0)
        return st;
    /* blocking: the caller may reuse src as soon as we return */
    cl_int err =
        clEnqueueWriteBuffer(be->queue, dst.buf->mem, CL_TRUE, dst.off, bytes, src, 0, NULL, NULL);
    return err == CL_SUCCESS ? CLF_OK : ocl_fail("upload", "clEnqueueWriteBuffer", err);
}

static clf_status ocl_download(clf_backend *be, void *dst, clf_ptr src, size_t bytes)
{
    clf_status st = ocl_check_range(be, "download", "src", src, bytes, 1, 1);
    if (st != CLF_OK || bytes == 0)
        return st;
    cl_int err =
        clEnqueueReadBuffer(be->queue, src.buf->mem, CL_TRUE, src.off, bytes, dst, 0, NULL, NULL);
    return err == CL_SUCCESS ? CLF_OK : ocl_fail("download", "clEnqueueReadBuffer", err);
}

/* dst = src, bytes bytes; overlapping ranges of one buffer behave like memmove (as on the
 * CPU backend): OpenCL refuses them (CL_MEM_COPY_OVERLAP), so they go through a temporary
 * buffer, released at once (OpenCL keeps it until the queued copies are done). */
static clf_status ocl_copy(clf_backend *be, clf_ptr dst, clf_ptr src, size_t bytes)
{
    clf_status st;
    cl_mem tmp = NULL;
    cl_int err;
    if ((st = ocl_check_range(be, "copy", "dst", dst, bytes, 1, 1)) != CLF_OK ||
        (st = ocl_check_range(be, "copy", "src", src, bytes, 1, 1)) != CLF_OK || bytes == 0 ||
        (dst.buf == src.buf && dst.off == src.off))
        return st;
    if (dst.buf != src.buf || dst.off >= src.off + bytes || src.off >= dst.off + bytes) {
        err = clEnqueueCopyBuffer(be->queue, src.buf->mem, dst.buf->mem, src.off, dst.off, bytes, 0,
                                  NULL, NULL);
        return err == CL_SUCCESS ? CLF_OK : ocl_fail("copy", "clEnqueueCopyBuffer", err);
    }
    tmp = clCreateBuffer(be->ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS) {
        tmp = NULL;
        st = ocl_fail("copy", "clCreateBuffer", err);
        goto fail;
    }
    if ((err = clEnqueueCopyBuffer(be->queue, src.buf->mem, tmp, src.off, 0, bytes, 0, NULL,
                                   NULL)) != CL_SUCCESS ||
        (err = clEnqueueCopyBuffer(be->queue, tmp, dst.buf->mem, 0, dst.off, bytes, 0, NULL,
                                   NULL)) != CL_SUCCESS) {
        st = ocl_fail("copy", "clEnqueueCopyBuffer", err);
        goto fail;
    }
fail:
    if (tmp)
        clReleaseMemObject(tmp);
    return st;
}

static clf_status ocl_synchronize(clf_backend *be)
{
    cl_int err = clFinish(be->queue);
    return err == CL_SUCCESS ? CLF_OK : ocl_fail("synchronize", "clFinish", err);
}

static const clf_backend_api ocl_api = {
    .abi_version = CLF_BACKEND_ABI,
    .name = "opencl",
    .description =
        "OpenCL: CLBlast GEMM and fused attention/layernorm kernels, inference and training "
        "(GPUs; PoCL on CPUs)",
    .open = ocl_open,
    .close = ocl_close,
    .describe = ocl_describe,
    .list_devices = ocl_list_devices,
    .supports = ocl_supports,
    .max_alloc = ocl_max_alloc,
    .alloc = ocl_alloc,
    .free = ocl_free,
    .upload = ocl_upload,
    .download = ocl_download,
    .copy = ocl_copy,
    .synchronize = ocl_synchronize,
    .gemm = ocl_gemm,
    .gemm_strided_batched = ocl_gemm_strided_batched,
    .layernorm = ocl_layernorm,
    .attention = ocl_attention,
    .embed = ocl_embed,
    .add = ocl_add,
    .softmax = ocl_softmax,
    .argmax = ocl_argmax,
    .relu_backward = ocl_relu_backward,
    .layernorm_backward = ocl_layernorm_backward,
    .attention_backward = ocl_attention_backward,
    .embed_backward = ocl_embed_backward,
    .dropout = ocl_dropout,
    .cross_entropy = ocl_cross_entropy,
    .adam = ocl_adam,
    .sum_squares = ocl_sum_squares,
    .fill = ocl_fill,
    .plugin_prepare = ocl_plugin_prepare,
    .activation = ocl_plugin_activation,
    .activation_backward = ocl_plugin_activation_backward,
    .norm = ocl_plugin_norm,
    .norm_backward = ocl_plugin_norm_backward,
};

__attribute__((visibility("default"))) const clf_backend_api *clf_backend_entry(void)
{
    return &ocl_api;
}
