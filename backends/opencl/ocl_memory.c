/* ocl_memory.c - the OpenCL backend's buffers: alloc, free, upload, download, copy,
 * synchronize, and the ops' scratch buffer.
 *
 * A clf_buffer is a cl_mem on the backend's context; every command goes to its one
 * in-order queue. The ops (ocl_gemm.c ... ocl_plugin.c) use ocl_scratch from here; the
 * entry point (ocl_backend.c) puts the rest in the api table. */
#include "ocl_internal.h"

#include <stdlib.h>

#include "clformer/fault.h"

/* clCreateBuffer, or (CLF_FAULT=opencl_alloc:N) the failure of a device out of memory. */
static cl_mem create_buffer(clf_backend *be, size_t bytes, cl_int *err)
{
    if (clf_fault_hit(CLF_FAULT_OPENCL_ALLOC)) {
        *err = CL_MEM_OBJECT_ALLOCATION_FAILURE;
        return NULL;
    }
    return clCreateBuffer(be->ctx, CL_MEM_READ_WRITE, bytes, NULL, err);
}

/* A zero-filled buffer of bytes bytes (at least 4 on the device: OpenCL has no empty
 * buffers). Zeroing makes runs deterministic and makes lazy drivers commit the memory
 * now, so an out-of-memory shows up here rather than in a later op. */
clf_status ocl_alloc(clf_backend *be, size_t bytes, clf_buffer **out)
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
    b->mem = create_buffer(be, dev_bytes, &err);
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
        be->scratch = create_buffer(be, bytes, &err);
        if (err != CL_SUCCESS) {
            be->scratch = NULL;
            return ocl_fail(op, "clCreateBuffer", err);
        }
        be->scratch_bytes = bytes;
    }
    *out = be->scratch;
    return CLF_OK;
}

void ocl_free(clf_backend *be, clf_buffer *buf)
{
    (void)be;
    if (!buf)
        return;
    /* OpenCL defers the release until queued commands using it are done */
    clReleaseMemObject(buf->mem);
    free(buf);
}

clf_status ocl_buffer_size(clf_backend *be, const clf_buffer *buf, size_t *bytes)
{
    *bytes = buf->owner == be ? buf->size : 0;
    return buf->owner == be ? CLF_OK : CLF_ERR_INPUT; /* the core names the operand */
}

/* upload, download, copy: the spans and owners are checked by the core (clformer/ops.h) */
clf_status ocl_upload(clf_backend *be, clf_ptr dst, const void *src, size_t bytes)
{
    if (be->recording)
        return ocl_capture_refuse(be, "upload", "an upload");
    if (bytes == 0)
        return CLF_OK;
    /* blocking: the caller may reuse src as soon as we return */
    cl_int err =
        clEnqueueWriteBuffer(be->queue, dst.buf->mem, CL_TRUE, dst.off, bytes, src, 0, NULL, NULL);
    return err == CL_SUCCESS ? CLF_OK : ocl_fail("upload", "clEnqueueWriteBuffer", err);
}

clf_status ocl_download(clf_backend *be, void *dst, clf_ptr src, size_t bytes)
{
    if (be->recording)
        return ocl_capture_refuse(be, "download", "a download");
    if (bytes == 0)
        return CLF_OK;
    cl_int err =
        clEnqueueReadBuffer(be->queue, src.buf->mem, CL_TRUE, src.off, bytes, dst, 0, NULL, NULL);
    return err == CL_SUCCESS ? CLF_OK : ocl_fail("download", "clEnqueueReadBuffer", err);
}

/* dst = src, bytes bytes; overlapping ranges of one buffer behave like memmove (as on the
 * CPU backend): OpenCL refuses them (CL_MEM_COPY_OVERLAP), so they go through a temporary
 * buffer, released at once (OpenCL keeps it until the queued copies are done). */
clf_status ocl_copy(clf_backend *be, clf_ptr dst, clf_ptr src, size_t bytes)
{
    clf_status st = CLF_OK;
    cl_mem tmp = NULL;
    cl_int err;
    if (be->recording)
        return ocl_capture_refuse(be, "copy", "a copy");
    if (bytes == 0 || (dst.buf == src.buf && dst.off == src.off))
        return st;
    if (dst.buf != src.buf || dst.off >= src.off + bytes || src.off >= dst.off + bytes) {
        err = clEnqueueCopyBuffer(be->queue, src.buf->mem, dst.buf->mem, src.off, dst.off, bytes, 0,
                                  NULL, NULL);
        return err == CL_SUCCESS ? CLF_OK : ocl_fail("copy", "clEnqueueCopyBuffer", err);
    }
    tmp = create_buffer(be, bytes, &err);
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

clf_status ocl_synchronize(clf_backend *be)
{
    if (be->recording)
        return ocl_capture_refuse(be, "synchronize", "a wait for the device");
    cl_int err = clFinish(be->queue);
    return err == CL_SUCCESS ? CLF_OK : ocl_fail("synchronize", "clFinish", err);
}
