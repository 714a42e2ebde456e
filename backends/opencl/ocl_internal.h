/* ocl_internal.h - the OpenCL backend's private types, shared by its .c files.
 *
 * One backend = one device, one context, one in-order command queue, the programs of the
 * kernel families (kernels/<family>.cl) and their kernels. A clf_buffer is a cl_mem plus its
 * size; operands are (buffer, byte offset) and reach CLBlast and the kernels as element
 * offsets, never as sub-buffers (whose offsets must meet CL_DEVICE_MEM_BASE_ADDR_ALIGN). */
#ifndef CLF_OCL_INTERNAL_H
#define CLF_OCL_INTERNAL_H

#include <CL/cl.h>
#include <CL/cl_ext.h>
#include <stddef.h>
#include <stdint.h>

#include "clformer/backend.h"

/* The kernels, by family (one program per kernels/<family>.cl). */
typedef enum ocl_kernel_id {
    OCL_K_ATTENTION = 0,
    OCL_K_ATTENTION_PROBS,
    OCL_K_LAYERNORM,
    OCL_K_SOFTMAX,
    OCL_K_ARGMAX,
    OCL_K_TOPK,
    OCL_K_BEAM_CHOOSE,
    OCL_K_EMBED,
    OCL_K_ADD,
    OCL_K_BIAS_RELU,
    OCL_K_GEMM_ROWS_HALF,
    OCL_K_GEMM_ROWS_FLOAT,
    OCL_K_GEMM_ROWS_HALF_LN,
    OCL_K_GEMM_ROWS_FLOAT_LN,
    OCL_K_HALF_PACK,
    OCL_K_HALF_UNPACK,
    /* training (ABI 2) */
    OCL_K_ATTENTION_BACKWARD_QUERY,
    OCL_K_ATTENTION_BACKWARD_KEY,
    OCL_K_LAYERNORM_BACKWARD,
    OCL_K_LAYERNORM_BACKWARD_PARAMS,
    OCL_K_RELU_BACKWARD,
    OCL_K_DROPOUT,
    OCL_K_EMBED_BACKWARD,
    OCL_K_CROSS_ENTROPY,
    OCL_K_ADAM,
    OCL_K_SUM_SQUARES_PARTIAL,
    OCL_K_SUM_SQUARES_FINAL,
    OCL_K_COUNT
} ocl_kernel_id;

typedef enum ocl_family_id {
    OCL_F_ATTENTION = 0,
    OCL_F_LAYERNORM,
    OCL_F_SOFTMAX,
    OCL_F_EMBED,
    OCL_F_ELEMENTWISE,
    OCL_F_GEMM,
    OCL_F_ATTENTION_BACKWARD,
    OCL_F_LAYERNORM_BACKWARD,
    OCL_F_TRAIN,
    OCL_F_OPTIM,
    OCL_F_COUNT
} ocl_family_id;

/* One OpenCL device as found on the system (flat index over all platforms). */
typedef struct ocl_device {
    cl_platform_id platform;
    cl_device_id device;
    clf_device_info info;
    cl_device_type type;
} ocl_device;

/* What the device allows, from clGetDeviceInfo (never assumed), each capped by the
 * test-only $CLF_OPENCL_LIMITS ("max_alloc=1048576,local_mem=8192,max_wg=64,fp16=0,
 * c_version=1.1,compute_units=1": a cap only lowers a limit, see ocl_query_limits). */
typedef struct ocl_limits {
    uint64_t max_alloc;    /* CL_DEVICE_MAX_MEM_ALLOC_SIZE, bytes */
    uint64_t local_mem;    /* CL_DEVICE_LOCAL_MEM_SIZE, bytes */
    size_t max_wg;         /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
    int fp16;              /* cl_khr_fp16 among CL_DEVICE_EXTENSIONS */
    int c_version;         /* CL_DEVICE_OPENCL_C_VERSION as 10 * major + minor (12: 1.2) */
    cl_uint compute_units; /* CL_DEVICE_MAX_COMPUTE_UNITS */
} ocl_limits;

/* The kernels' OpenCL C: 1.2 (and clEnqueueFillBuffer is an OpenCL 1.2 call). */
#define OCL_MIN_C_VERSION 12

/* Work-group sizes of our own kernels ($CLF_OPENCL_LOCAL_SIZE): auto (the default) picks
 * the largest power of two within the device's and the kernel's limits and a per-kernel
 * cap (256 for the row kernels); min forces 1; max forces the largest power of two the
 * device, the kernel and the local memory allow (no cap), as GPUs run (64 to 1024). */
typedef enum ocl_local_size { OCL_LOCAL_AUTO = 0, OCL_LOCAL_MIN, OCL_LOCAL_MAX } ocl_local_size;

/* How a capture records ($CLF_OPENCL_CAPTURE: auto, the default, picks CMDBUF where the
 * device has cl_khr_command_buffer with simultaneous use, else LIST; list; off: no
 * capture, supports(CLF_OP_CAPTURE) says no). */
typedef enum ocl_capture_kind {
    OCL_CAPTURE_CMDBUF = 0,
    OCL_CAPTURE_LIST,
    OCL_CAPTURE_OFF
} ocl_capture_kind;

/* cl_khr_command_buffer's entry points, from clGetExtensionFunctionAddressForPlatform */
typedef struct ocl_cmdbuf_fns {
    clCreateCommandBufferKHR_fn create;
    clFinalizeCommandBufferKHR_fn finalize;
    clReleaseCommandBufferKHR_fn release;
    clEnqueueCommandBufferKHR_fn enqueue;
    clCommandNDRangeKernelKHR_fn ndrange;
} ocl_cmdbuf_fns;

struct clf_backend {
    ocl_device dev;
    ocl_limits limits;
    ocl_local_size local_size;
    cl_context ctx;
    cl_command_queue queue;
    cl_program programs[OCL_F_COUNT];
    cl_kernel kernels[OCL_K_COUNT];
    size_t wg[OCL_K_COUNT]; /* work-group size used for each kernel (ocl_pick_wg) */
    uint64_t max_alloc;     /* limits.max_alloc */
    uint64_t local_mem;     /* limits.local_mem */
    size_t max_groups;      /* cap on work-groups of grid-stride kernels */
    int cache_hits;         /* programs loaded from the disk cache by open() */
    int half_arith;         /* F16 products of 8+ rows in HGEMM (ocl_half_arith_mode) */
    cl_mem scratch;         /* ops' internal scratch (ocl_scratch), grown on demand */
    size_t scratch_bytes;
    char description[512];
    char cache_dir[4096]; /* program cache ("" = none), for programs built after open */
    /* plugin ops compiled here (ocl_plugin.c), keyed by op pointer; released by close */
    struct ocl_plugin_prog *plugin_progs;
    int n_plugin_progs;
    /* capture and replay (ocl_capture.c): the mode, the command-buffer entry points where
     * the mode is OCL_CAPTURE_CMDBUF, the capture open now (NULL: none) */
    ocl_capture_kind capture_mode;
    ocl_cmdbuf_fns cb;
    clf_capture *recording;
};

struct clf_buffer {
    cl_mem mem;
    size_t size;        /* bytes the caller asked for */
    clf_backend *owner; /* operands from another backend are refused */
};

/* ---- ocl_errors.c ---- */

/* "CL_INVALID_VALUE" etc.; "CL_UNKNOWN_ERROR" for codes outside the standard lists. */
const char *ocl_error_name(cl_int err);
/* CLBlast status names; codes shared with OpenCL get their CL_ name. */
const char *ocl_clblast_name(int status);
/* Records "opencl: <op>: <call> failed: CL_<NAME> (<code>)" and returns CLF_ERR_BACKEND
 * (CLF_ERR_NOMEM for the out-of-memory codes). */
clf_status ocl_fail(const char *op, const char *call, cl_int err);
clf_status ocl_fail_clblast(const char *op, const char *call, int status);

/* ---- ocl_device.c ---- */

/* All devices of all platforms, in the flat order list_devices reports (*out malloc'd). */
clf_status ocl_enumerate(ocl_device **out, int *count);
/* Picks a device: spec NULL/"" = first GPU else first device; digits = flat index; else a
 * case-insensitive substring of "platform / device". $CLF_OPENCL_DEVICE overrides spec. */
clf_status ocl_choose_device(const char *spec, ocl_device *out);
clf_status ocl_list_devices(clf_device_fn fn, void *user);
/* The limits of device d, each lowered to its cap in $CLF_OPENCL_LIMITS when set (a test
 * hook: a large device behaves like a small one). A malformed $CLF_OPENCL_LIMITS is
 * CLF_ERR_INPUT naming it; a failed query is CLF_ERR_BACKEND. */
clf_status ocl_query_limits(const ocl_device *d, ocl_limits *out);
/* $CLF_OPENCL_LIMITS's caps applied to list_devices' fields (max_alloc_bytes, fp16); a
 * malformed value is left for open() to report. */
void ocl_cap_device_info(clf_device_info *info);
/* Whether gemm multiplies F16 weights' products of 8+ rows in CLBlast's HGEMM, from
 * $CLF_OPENCL_HGEMM: auto (unset or "") on a GPU with cl_khr_fp16 (not on a CPU device,
 * where HGEMM is slower than SGEMM: bench/RESULTS.md), on wherever the device has
 * cl_khr_fp16, off never; another value is CLF_ERR_INPUT naming it. */
clf_status ocl_half_arith_mode(const ocl_device *d, const ocl_limits *l, int *out);
/* The work-group policy from $CLF_OPENCL_LOCAL_SIZE (unset or "" = auto); another value
 * is CLF_ERR_INPUT naming it. */
clf_status ocl_local_size_mode(ocl_local_size *out);

/* ---- ocl_program.c ---- */

/* Builds (or loads from the disk cache under cache_dir; NULL or "" = no cache) the
 * program of every kernel family and creates the kernels in be->kernels. */
clf_status ocl_build_programs(clf_backend *be, const char *cache_dir);
/* Builds a program from the nsrc source pieces srcs (or loads it from the disk cache under
 * be->cache_dir, file <cache_name>-<key>.clbin, key over the pieces, the options and the
 * device) and creates its kernels names[0..nk) into kernels[]. A build error is
 * CLF_ERR_BACKEND naming op, what was built (what) and the build log. */
clf_status ocl_build_program(clf_backend *be, const char *op, const char *what,
                             const char *cache_name, const char *const *srcs, const size_t *lens,
                             int nsrc, const char *const *names, cl_kernel *kernels, int nk,
                             cl_program *out);
/* The cache directory from opts->cache_dir, $CLF_CACHE_DIR, $XDG_CACHE_HOME/clformer,
 * ~/.cache/clformer; "" in dir when the cache is off ("off") or no home is known. */
void ocl_cache_dir(const char *opt, char *dir, size_t size);

/* ---- ocl_memory.c (the api's memory entries and the ops' scratch buffer) ---- */

clf_status ocl_alloc(clf_backend *be, size_t bytes, clf_buffer **out);
void ocl_free(clf_backend *be, clf_buffer *buf);
clf_status ocl_buffer_size(clf_backend *be, const clf_buffer *buf, size_t *bytes);
clf_status ocl_upload(clf_backend *be, clf_ptr dst, const void *src, size_t bytes);
clf_status ocl_download(clf_backend *be, void *dst, clf_ptr src, size_t bytes);
clf_status ocl_copy(clf_backend *be, clf_ptr dst, clf_ptr src, size_t bytes);
clf_status ocl_synchronize(clf_backend *be);
/* The backend's scratch buffer, at least bytes long (grown on demand, released by close).
 * Ops use it between their own kernels only: the in-order queue runs the next op's
 * kernels after this op's, so one buffer serves them all. */
clf_status ocl_scratch(clf_backend *be, const char *op, size_t bytes, cl_mem *out);

/* ---- ocl_launch.c ---- */

/* A kernel argument held by value, so that an op lists its arguments as one initializer of
 * expressions (OCL_KBUF(a->x), ocl_kint(a->cols), ocl_klocal(bytes)) instead of a variable
 * and a {size, &variable} pair for each. size is that of the OpenCL type the kernel
 * declares; with local set, size bytes of __local scratch and no value; is_mem: v.mem is a
 * buffer (a capture holds it). */
typedef struct ocl_kval {
    size_t size;
    int local;
    union {
        cl_mem mem;
        cl_ulong ul;
        cl_int i;
        cl_uint u;
        cl_float f;
    } v;
    int is_mem;
} ocl_kval;

/* An argument of each OpenCL type the kernels' parameters have. */
static inline ocl_kval ocl_kmem(cl_mem m)
{
    return (ocl_kval){sizeof m, 0, {.mem = m}, 1};
}
static inline ocl_kval ocl_kulong(cl_ulong x)
{
    return (ocl_kval){sizeof x, 0, {.ul = x}, 0};
}
static inline ocl_kval ocl_kint(cl_int x)
{
    return (ocl_kval){sizeof x, 0, {.i = x}, 0};
}
static inline ocl_kval ocl_kuint(cl_uint x)
{
    return (ocl_kval){sizeof x, 0, {.u = x}, 0};
}
static inline ocl_kval ocl_kfloat(cl_float x)
{
    return (ocl_kval){sizeof x, 0, {.f = x}, 0};
}
static inline ocl_kval ocl_klocal(size_t bytes)
{
    return (ocl_kval){bytes, 1, {.ul = 0}, 0};
}
/* __local scratch of n floats. */
static inline ocl_kval ocl_kfloats(size_t n)
{
    return ocl_klocal(n * sizeof(cl_float));
}
/* The int flag of a condition (has_mask, causal, accumulate ...): 1 or 0. */
static inline ocl_kval ocl_kbool(int cond)
{
    return ocl_kint(cond != 0);
}
/* The has_<name> flag of an optional operand: whether it is given. */
static inline ocl_kval ocl_khas(clf_ptr p)
{
    return ocl_kbool(p.buf != NULL);
}
/* The style argument of the layernorm kernels: 1 standard, 0 tutorial. */
static inline ocl_kval ocl_kln_style(clf_ln_style style)
{
    return ocl_kbool(style == CLF_LN_STANDARD);
}
/* An operand as the kernels take it, two arguments: its cl_mem (NULL when absent) and its
 * offset in elements (ocl_mem, ocl_elems below). */
#define OCL_KBUF(p) ocl_kmem(ocl_mem(p)), ocl_kulong(ocl_elems(p))
/* The number of entries of an array (of kernel arguments, of operands). */
#define OCL_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The work-group size of kernel k (of op) under be->local_size: a power of two within
 * CL_KERNEL_WORK_GROUP_SIZE, limits.max_wg and, given local_per_item bytes of __local
 * scratch per work-item, half the local memory left beside the kernel's own
 * (CL_KERNEL_LOCAL_MEM_SIZE; the other half is for per-op vectors such as attention's
 * head_dim); in auto mode also at most auto_cap and, where those allow, at least the
 * kernel's CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE. */
clf_status ocl_pick_wg(clf_backend *be, const char *op, cl_kernel k, size_t local_per_item,
                       size_t auto_cap, size_t *wg);
/* Sets kernel k's arguments head[0..nhead) then tail[0..ntail) (tail may be NULL with ntail
 * 0: a head several kernels share, then each one's own). */
clf_status ocl_set_args(const char *op, cl_kernel k, const ocl_kval *head, int nhead,
                        const ocl_kval *tail, int ntail);
/* ocl_set_args, then enqueues kernel k (or, while a capture is open, records the launch).
 * global and local have dims entries. */
clf_status ocl_run(clf_backend *be, const char *op, cl_kernel k, const ocl_kval *head, int nhead,
                   const ocl_kval *tail, int ntail, cl_uint dims, const size_t *global,
                   const size_t *local);
/* One work-group of wg work-items per row, rows rows (the row kernels). */
clf_status ocl_run_rows(clf_backend *be, const char *op, cl_kernel k, size_t wg,
                        const ocl_kval *args, int nargs, int rows);
/* Grid-stride launch of an elementwise kernel (work-groups of wg) over n items. */
clf_status ocl_run_elementwise(clf_backend *be, const char *op, cl_kernel k, size_t wg,
                               const ocl_kval *args, int nargs, uint64_t n);
/* Columns per work-group of the dalpha/dbeta column sums: 32 neighbouring floats are one
 * 128-byte line (coalesced loads); the rest of the work-group splits the rows. */
#define OCL_PARAMS_COLS 32
/* The dalpha/dbeta column sums of a norm's backward (layernorm_backward_params,
 * clf_plugin_norm_params): kernel k, work-groups of wg, cols columns. head holds the
 * kernel's arguments before dalpha (dy and what the rows' normalised x is read from); the
 * ones after it, the same in both kernels, come from dalpha, dbeta (either optional), rows
 * and cols. */
clf_status ocl_run_param_grads(clf_backend *be, const char *op, cl_kernel k, size_t wg,
                               const ocl_kval *head, int nhead, clf_ptr dalpha, clf_ptr dbeta,
                               int rows, int cols);

/* An operand that a path of the backend's own reads (gemm's b_half, which the core does not
 * check): its name in messages, elements, required, and the bytes of one element, which its
 * offset must be a multiple of. */
typedef struct ocl_operand {
    const char *name;
    clf_ptr p;
    uint64_t elems;
    int required;
    unsigned elem_bytes;
} ocl_operand;
/* An optional operand of F16 elements (gemm's b_half). */
static inline ocl_operand ocl_optional_half(const char *name, clf_ptr p, uint64_t elems)
{
    return (ocl_operand){name, p, elems, 0, 2};
}
/* Each of list[0..n) in order, the first error, else CLF_OK: present if required, a buffer
 * of be, its offset a multiple of its element, inside its buffer. Errors are CLF_ERR_INPUT
 * naming the op and the operand. */
clf_status ocl_check_operands(clf_backend *be, const char *op, const ocl_operand *list, int n);

/* The cl_mem of an optional operand (NULL when absent) and its offset in elements. */
static inline cl_mem ocl_mem(clf_ptr p)
{
    return p.buf ? p.buf->mem : NULL;
}
static inline cl_ulong ocl_elems(clf_ptr p)
{
    return (cl_ulong)(p.off / 4);
}

/* ---- ocl_capture.c (capture and replay, ABI 10) ---- */

/* be->capture_mode from $CLF_OPENCL_CAPTURE and the device (see ocl_capture_kind); another
 * value is CLF_ERR_INPUT naming it. */
clf_status ocl_capture_mode(clf_backend *be);
clf_status ocl_capture_begin(clf_backend *be);
clf_status ocl_capture_end(clf_backend *be, clf_capture **out);
clf_status ocl_replay(clf_backend *be, clf_capture *c);
void ocl_capture_free(clf_backend *be, clf_capture *c);
/* ocl_run's launch while a capture is open: recorded, not queued. */
clf_status ocl_capture_record(clf_backend *be, const char *op, cl_kernel k, const ocl_kval *head,
                              int nhead, const ocl_kval *tail, int ntail, cl_uint dims,
                              const size_t *global, const size_t *local);
/* What op would queue other than through ocl_run and a gemm (what: "a copy"), while a
 * capture is open: CLF_ERR_UNSUPPORTED, and the capture fails at its end. */
clf_status ocl_capture_refuse(clf_backend *be, const char *op, const char *what);
/* A product that CLBlast runs, while a capture is open: the call fn(be, g) recorded, made
 * again at each replay. */
clf_status ocl_capture_gemm(clf_backend *be, const char *op, const clf_gemm_args *g,
                            clf_status (*fn)(clf_backend *be, const clf_gemm_args *a));

/* ---- inference ops (ocl_gemm.c, ocl_ops.c) ---- */

/* gemm runs our own kernels (gemm_rows_half reading b_half, else gemm_rows_float) for
 * products of a Linear layer's weight B [n, k] with at most this many rows: a decoding step
 * at batch 1 or a beam up to 7, bound by reading B once. The kernels keep a partial sum per
 * row in registers and read A again for every column; from 8 rows on, CLBlast's tiles
 * (which reuse A) take over, as on the CPU backend (README). */
#define OCL_GEMM_FEW_ROWS 7
clf_status ocl_gemm(clf_backend *be, const clf_gemm_args *a);
clf_status ocl_gemm_strided_batched(clf_backend *be, const clf_gemm_args *a);
clf_status ocl_layernorm(clf_backend *be, const clf_layernorm_args *a);
clf_status ocl_attention(clf_backend *be, const clf_attention_args *a);
/* CLF_ERR_INPUT unless the local memory of an attention kernel, vectors floats [head_dim]
 * and tiles [wg], fits the device's. */
clf_status ocl_check_attention_local(clf_backend *be, const char *op, int head_dim, int vectors,
                                     size_t wg, int tiles);
/* Launches attention kernel k with work-groups of wg: first the parameters every attention
 * kernel starts with (q, k, v and out, for the backward dout, with their strides, the key
 * mask, the length of the other axis, head_dim, causal, q_pos0, scale, the dropout's seed,
 * threshold and scale), then tail[0..ntail). One work-group per query, head and batch; with
 * by_key, per key (the backward's key pass). */
clf_status ocl_run_attention(clf_backend *be, const char *op, cl_kernel k, size_t wg,
                             const clf_attention_args *f, clf_ptr out, int by_key,
                             const ocl_kval *tail, int ntail);
clf_status ocl_embed(clf_backend *be, const clf_embed_args *a);
clf_status ocl_add(clf_backend *be, clf_ptr out, clf_ptr a, clf_ptr b, size_t n);
clf_status ocl_softmax(clf_backend *be, clf_ptr out, clf_ptr x, int rows, int cols, int log);
clf_status ocl_argmax(clf_backend *be, clf_ptr out, clf_ptr x, int rows, int cols);
clf_status ocl_topk(clf_backend *be, const clf_topk_args *a);
clf_status ocl_beam_choose(clf_backend *be, const clf_beam_args *a);

/* ---- training ops (ocl_train.c, ocl_attention_backward.c) ---- */
clf_status ocl_relu_backward(clf_backend *be, clf_ptr dx, clf_ptr dy, clf_ptr y, size_t n);
clf_status ocl_layernorm_backward(clf_backend *be, const clf_layernorm_backward_args *a);
clf_status ocl_attention_backward(clf_backend *be, const clf_attention_backward_args *a);
clf_status ocl_embed_backward(clf_backend *be, const clf_embed_backward_args *a);
clf_status ocl_dropout(clf_backend *be, const clf_dropout_args *a);
clf_status ocl_cross_entropy(clf_backend *be, const clf_cross_entropy_args *a);
clf_status ocl_adam(clf_backend *be, const clf_adam_args *a);
clf_status ocl_sum_squares(clf_backend *be, clf_ptr out, clf_ptr x, size_t n);
clf_status ocl_fill(clf_backend *be, clf_ptr out, float value, size_t n);

/* ---- plugin ops (ABI 3, ocl_plugin.c) ---- */
clf_status ocl_plugin_prepare(clf_backend *be, const clf_plugin_op *op);
clf_status ocl_plugin_activation(clf_backend *be, const clf_activation_args *a);
clf_status ocl_plugin_activation_backward(clf_backend *be, const clf_activation_backward_args *a);
clf_status ocl_plugin_norm(clf_backend *be, const clf_norm_args *a);
clf_status ocl_plugin_norm_backward(clf_backend *be, const clf_norm_backward_args *a);
/* Releases the plugin ops' programs and kernels (close; the queue is finished). */
void ocl_plugin_release(clf_backend *be);

#endif
