/* The CPU backend: its lifecycle (open, close, describe, devices), its memory (host buffers:
 * alloc, free, upload, download, copy, discard) and the api table that clf_backend_entry
 * hands the core. The ops are in files named for them:
 *
 *   cpu_gemm.c               F32 gemm through CBLAS (OpenBLAS), bias/relu epilogue
 *   cpu_gemm_i8.c            products against int8 weights (oneDNN, a few-row AVX2 kernel)
 *   cpu_gemm_i8_vnni.c       the few-row int8 kernel with AVX-512 VNNI
 *   cpu_i8_pack.c            int8 weights kept in oneDNN's packed layout, in place
 *   cpu_gemv.c               few-row products against F16/BF16/F32 weights (cpu_gemv_simd.inc)
 *   cpu_isa.c                the kernel level (generic, AVX2, AVX-512) chosen at open
 *   cpu_attention.c          forward attention and the block kernels the backward shares
 *   cpu_attention_avx2.c     decoding's few-query attention with AVX2 and FMA
 *   cpu_attention_backward.c attention's backward
 *   cpu_norm.c               layernorm (both styles, fused residual sum) and add
 *   cpu_embed.c              embedding lookup and positional encoding
 *   cpu_softmax.c            softmax, log-softmax (AVX2 lanes), argmax and topk over rows
 *   cpu_beam.c               beam search's next beams chosen from the topk (ABI 11)
 *   cpu_train.c              the other training ops (ABI 2)
 *   cpu_plugin.c             plugin activations and norms (ABI 3)
 *
 * Everything but the products runs as plain C loops parallelised with OpenMP. This backend
 * is also the reference the OpenCL backend is tested against, so reductions that decide
 * accuracy (layernorm moments, softmax sums) are accumulated in double.
 *
 * Buffers are host memory; ops run synchronously, so synchronize() has nothing to do.
 * Every operand is bounds-checked against its buffer before an op touches it: a bad
 * extent is CLF_ERR_INPUT naming the op and the operand, never an out-of-bounds read. */
#include <cblas.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clformer/backend.h"
#include "cpu_internal.h"

#define CPU_ALIGN 64 /* bytes: a cache line, and the widest vector load */
/* From this size on a buffer is allocated on 2 MiB boundaries with huge pages advised
 * (cpu_alloc): at most 2 MiB of rounding, under a quarter of such a buffer. */
#define CPU_HUGE_MIN ((size_t)8 << 20)

/* ---- lifecycle ---- */

static clf_status cpu_open(const clf_backend_opts *opts, clf_backend **out)
{
    *out = NULL;
    if (opts && opts->device && opts->device[0] && strcmp(opts->device, "0") != 0 &&
        strcmp(opts->device, "cpu") != 0)
        return clf_error(CLF_ERR_INPUT,
                         "cpu: device '%s' does not exist (the cpu backend has "
                         "one device: 0)",
                         opts->device);
    cpu_isa isa;
    int capped, bf16_arith;
    clf_status st = cpu_isa_choose(&isa, &capped);
    if (st != CLF_OK || (st = cpu_bf16_arith_choose(&bf16_arith)) != CLF_OK)
        return st;
    clf_backend *be = calloc(1, sizeof *be);
    if (!be)
        return clf_error(CLF_ERR_NOMEM, "cpu: out of memory");
    int n = opts && opts->threads > 0 ? opts->threads : omp_get_num_procs();
    be->threads = n > 0 ? n : 1;
    be->isa = isa;
    be->read_half = isa != CPU_ISA_GENERIC || capped;
    be->bf16_arith = bf16_arith;
    be->i8_qmax = cpu_i8_choose_qmax();
    if ((st = cpu_dnnl_open(&be->dnnl)) != CLF_OK) {
        free(be);
        return st;
    }
    /* OpenBLAS keeps one process-wide thread pool; size it to what the config asks. So
     * does oneDNN (int8 products), which takes OpenMP's default team size. */
    openblas_set_num_threads(be->threads);
    omp_set_num_threads(be->threads);
    *out = be;
    return CLF_OK;
}

static void cpu_close(clf_backend *be)
{
    if (be) {
        cpu_dnnl_close(be->dnnl);
        free(be->packed);
        free(be->attn_scratch);
        free(be->attn_rows);
    }
    free(be);
}

static clf_status cpu_describe(clf_backend *be, char *buf, size_t size)
{
    /* which OpenBLAS build the loader found: the OpenMP one shares this backend's threads
     * (backends/cpu/CMakeLists.txt) */
    static const char *const blas_threads[] = {"sequential", "pthreads", "OpenMP"};
    const int par = openblas_get_parallel();
    /* int8: oneDNN on weights it reads packed (cpu_i8_pack.c), else the own kernel of a few
     * rows (cpu_gemm_i8.c, cpu_gemm_i8_vnni.c), then oneDNN */
    char i8[80] = "";
    const int packs = cpu_i8_packs(be);
    if (be->i8_qmax == 127 && be->isa == CPU_ISA_AVX512)
        snprintf(i8, sizeof i8, "%sVNNI kernel to %d rows, ",
                 packs ? "oneDNN on packed weights (k a multiple of 64), else " : "",
                 CPU_I8_VNNI_ROWS);
    else if (be->i8_qmax == 64 && be->isa != CPU_ISA_GENERIC)
        snprintf(i8, sizeof i8, "AVX2 kernel to %d rows, ", CPU_I8_FEW_ROWS);
    snprintf(buf, size,
             "CPU: %d threads, %s (%s), F16/BF16 GEMV %s%s, int8 %soneDNN (igemm from %d weight "
             "rows) %d-bit activations%s",
             be->threads, openblas_get_config(),
             par >= 0 && par <= 2 ? blas_threads[par] : "unknown threading", cpu_isa_name(be->isa),
             be->read_half ? "" : " (off: slower than SGEMV)", i8, CPU_I8_IGEMM_MIN_N,
             be->i8_qmax == 127 ? 8 : 7, be->bf16_arith ? ", BF16 arithmetic oneDNN" : "");
    return CLF_OK;
}

/* Host RAM in bytes (what `clformer devices` shows and the largest sane allocation). */
static uint64_t physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : (uint64_t)PTRDIFF_MAX;
}

static clf_status cpu_list_devices(clf_device_fn fn, void *user)
{
    clf_device_info info;
    memset(&info, 0, sizeof info);
    info.index = 0;
    snprintf(info.platform, sizeof info.platform, "clformer cpu");
    snprintf(info.name, sizeof info.name, "host CPU");
    snprintf(info.type, sizeof info.type, "CPU");
    info.compute_units = omp_get_num_procs();
    info.global_mem_bytes = physical_memory();
    info.max_alloc_bytes = info.global_mem_bytes;
    snprintf(info.version, sizeof info.version, "%.63s", openblas_get_config());
    info.fp16 = 0;
    fn(user, &info);
    return CLF_OK;
}

static int cpu_supports(clf_backend *be, clf_op op)
{
    /* every op and capability but F16 arithmetic (products of 8+ rows multiply the F32
     * weights, only the few-row kernels read b_half), queued ops (every op has run when it
     * returns), and so neither capture nor the positions on the device that serve it; BF16
     * arithmetic only on a CPU with AVX512_BF16 (cpu_gemm_bf16.c) */
    if (op == CLF_OP_GEMM_BF16_ARITH)
        return be && be->bf16_arith;
    return (int)op >= 0 && op < CLF_OP_COUNT && op != CLF_OP_GEMM_HALF_ARITH &&
           op != CLF_OP_QUEUED && op != CLF_OP_CAPTURE && op != CLF_OP_DEVICE_POS;
}

static uint64_t cpu_max_alloc(clf_backend *be)
{
    (void)be;
    return physical_memory();
}

/* ---- memory ---- */

static clf_status cpu_alloc(clf_backend *be, size_t bytes, clf_buffer **out)
{
    (void)be;
    *out = NULL;
    clf_buffer *b = calloc(1, sizeof *b);
    size_t rounded = (bytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
    if (!b || rounded < bytes)
        goto fail;
    /* Large buffers (weights, KV caches, arenas) on 2 MiB boundaries, asking the kernel for
     * transparent huge pages: decoding's attention reads a 256-byte piece of each cache row,
     * rows 4 KiB apart, so with 4 KiB pages nearly every row read was a TLB miss and a page
     * walk (the caches of a batch-32 step span over 10,000 pages). Where THP is off the
     * advice does nothing. */
    size_t align = CPU_ALIGN;
    if (rounded >= CPU_HUGE_MIN) {
        align = (size_t)2 << 20;
        rounded = (rounded + align - 1) / align * align;
    }
    b->data = aligned_alloc(align, rounded ? rounded : CPU_ALIGN);
    if (!b->data)
        goto fail;
#ifdef MADV_HUGEPAGE
    if (align > CPU_ALIGN)
        (void)madvise(b->data, rounded, MADV_HUGEPAGE); /* advice only: failure is harmless */
#endif
    b->size = bytes;
    *out = b;
    return CLF_OK;
fail:
    free(b);
    return clf_error(CLF_ERR_NOMEM, "cpu: cannot allocate %zu bytes", bytes);
}

static void cpu_free(clf_backend *be, clf_buffer *buf)
{
    if (buf) {
        cpu_i8_forget(be, buf);
        free(buf->data);
    }
    free(buf);
}

/* The CPU backend's buffers are host memory: any instance may use any of them. */
static clf_status cpu_buffer_size(clf_backend *be, const clf_buffer *buf, size_t *bytes)
{
    (void)be;
    *bytes = buf->size;
    return CLF_OK;
}

/* upload, download, copy: the spans are checked by the core (clformer/ops.h); int8 weights
 * kept packed there are unpacked first (cpu_i8_pack.c) */
static clf_status cpu_upload(clf_backend *be, clf_ptr dst, const void *src, size_t bytes)
{
    clf_status st = cpu_i8_unpack(be, dst.buf, dst.off, bytes);
    if (st == CLF_OK && bytes)
        memcpy(dst.buf->data + dst.off, src, bytes);
    return st;
}

static clf_status cpu_download(clf_backend *be, void *dst, clf_ptr src, size_t bytes)
{
    clf_status st = cpu_i8_unpack(be, src.buf, src.off, bytes);
    if (st == CLF_OK && bytes)
        memcpy(dst, src.buf->data + src.off, bytes);
    return st;
}

static clf_status cpu_copy(clf_backend *be, clf_ptr dst, clf_ptr src, size_t bytes)
{
    clf_status st = cpu_i8_unpack(be, src.buf, src.off, bytes);
    if (st == CLF_OK)
        st = cpu_i8_unpack(be, dst.buf, dst.off, bytes);
    if (st == CLF_OK && bytes)
        memmove(dst.buf->data + dst.off, src.buf->data + src.off, bytes);
    return st;
}

/* Gives the whole pages inside the span back to the system (MADV_DONTNEED: they read as
 * zeros afterwards, and a write faults a fresh page in). The bytes at either end that share
 * a page with live data stay. */
static clf_status cpu_discard(clf_backend *be, clf_ptr p, size_t bytes, size_t *freed)
{
    *freed = 0;
    /* the packed spans it cuts into are unpacked, so that what stays reads as stored */
    const clf_status st = cpu_i8_unpack(be, p.buf, p.off, bytes);
    if (st != CLF_OK)
        return st;
#ifdef MADV_DONTNEED
    const long page_l = sysconf(_SC_PAGESIZE);
    const uintptr_t page = page_l > 0 ? (uintptr_t)page_l : 4096;
    const uintptr_t start = (uintptr_t)(p.buf->data + p.off), end = start + bytes;
    const uintptr_t first = (start + page - 1) / page * page, last = end / page * page;
    if (last > first && madvise((void *)first, last - first, MADV_DONTNEED) == 0)
        *freed = last - first;
#else
    (void)p;
    (void)bytes;
#endif
    return CLF_OK; /* a hint: failing to give memory back is not an error */
}

static clf_status cpu_synchronize(clf_backend *be)
{
    (void)be;
    return CLF_OK;
}

static const clf_backend_api cpu_api = {
    .abi_version = CLF_BACKEND_ABI,
    .name = "cpu",
    .description = "CPU: OpenBLAS SGEMM, OpenMP kernels",
    .open = cpu_open,
    .close = cpu_close,
    .describe = cpu_describe,
    .list_devices = cpu_list_devices,
    .supports = cpu_supports,
    .max_alloc = cpu_max_alloc,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .buffer_size = cpu_buffer_size,
    .upload = cpu_upload,
    .download = cpu_download,
    .copy = cpu_copy,
    .synchronize = cpu_synchronize,
    .discard = cpu_discard,
    .gemm = cpu_gemm,
    .gemm_strided_batched = cpu_gemm_strided_batched,
    .layernorm = cpu_layernorm,
    .attention = cpu_attention,
    .embed = cpu_embed,
    .add = cpu_add,
    .softmax = cpu_softmax,
    .argmax = cpu_argmax,
    .relu_backward = cpu_relu_backward,
    .layernorm_backward = cpu_layernorm_backward,
    .attention_backward = cpu_attention_backward,
    .embed_backward = cpu_embed_backward,
    .dropout = cpu_dropout,
    .cross_entropy = cpu_cross_entropy,
    .adam = cpu_adam,
    .sum_squares = cpu_sum_squares,
    .fill = cpu_fill,
    .plugin_prepare = cpu_plugin_prepare,
    .activation = cpu_plugin_activation,
    .activation_backward = cpu_plugin_activation_backward,
    .norm = cpu_plugin_norm,
    .norm_backward = cpu_plugin_norm_backward,
    .topk = cpu_topk,
    .beam_choose = cpu_beam_choose,
};

__attribute__((visibility("default"))) const clf_backend_api *clf_backend_entry(void)
{
    return &cpu_api;
}
