/* ocl_backend.c - the OpenCL backend's entry point: lifecycle and the api table.
 *
 * open() picks a device (ocl_device.c), creates a context and one in-order queue, and
 * builds or loads the kernel programs (ocl_program.c). Buffers are in ocl_memory.c; ops in
 * ocl_gemm.c, ocl_ops.c, ocl_train.c and ocl_attention_backward.c; plugin ops, whose
 * programs are built when an op is first prepared, in ocl_plugin.c. Calls go one way:
 * this file uses the others, which never call back into it. All state hangs off the clf_backend;
 * there is no global mutable state here (CLBlast keeps its own process-wide cache of compiled GEMM
 * kernels, which close() clears). */
#include "ocl_internal.h"

#include <clblast_c.h>
#include <stdio.h>
#include <stdlib.h>

/* Grid-stride kernels start at most this many work-groups per compute unit: enough to
 * hide memory latency on a GPU; each work-item loops over the rest. */
#define OCL_GROUPS_PER_CU 64

static void ocl_close(clf_backend *be)
{
    if (!be)
        return;
    if (be->recording) /* a capture left open */
        ocl_capture_free(be, be->recording);
    if (be->queue)
        clFinish(be->queue); /* nothing may still run on what we release */
    /* CLBlast keeps the GEMM programs it compiled in a process-wide cache keyed by context
     * and device, released only at exit: after this context is gone, a driver frees those
     * programs' memory twice at exit (Oclgrind aborts), and a new context at the same
     * address would be served a dead one's programs. The cache has no per-context entry
     * point, so this drops every instance's entries; the others recompile at their next
     * GEMM. */
    if (be->ctx)
        CLBlastClearCache();
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
        (st = ocl_local_size_mode(&be->local_size)) != CLF_OK ||
        (st = ocl_half_arith_mode(&be->dev, &be->limits, &be->half_arith)) != CLF_OK ||
        (st = ocl_capture_mode(be)) != CLF_OK)
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
    /* products of 8+ rows read b_half through CLBlast's HGEMM on a GPU with cl_khr_fp16,
     * unless $CLF_OPENCL_HGEMM says otherwise (ocl_gemm.c, ocl_half_arith_mode) */
    if (op == CLF_OP_GEMM_HALF_ARITH)
        return be && be->half_arith;
    if (op == CLF_OP_CAPTURE) /* unless $CLF_OPENCL_CAPTURE=off (ocl_capture.c) */
        return be && be->capture_mode != OCL_CAPTURE_OFF;
    /* no kernels read BF16 or int8 weights: a model refuses those weight types here */
    return (int)op >= 0 && op < CLF_OP_COUNT && op != CLF_OP_GEMM_BF16 && op != CLF_OP_GEMM_I8 &&
           op != CLF_OP_GEMM_BF16_ARITH;
}

static uint64_t ocl_max_alloc(clf_backend *be)
{
    return be ? be->max_alloc : 0;
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
    .buffer_size = ocl_buffer_size,
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
    .topk = ocl_topk,
    .capture_begin = ocl_capture_begin,
    .capture_end = ocl_capture_end,
    .replay = ocl_replay,
    .capture_free = ocl_capture_free,
    .beam_choose = ocl_beam_choose,
};

__attribute__((visibility("default"))) const clf_backend_api *clf_backend_entry(void)
{
    return &ocl_api;
}
