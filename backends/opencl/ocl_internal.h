/* ocl_internal.h - the OpenCL backend's private types, shared by its .c files.
 *
 * One backend = one device, one context, one in-order command queue, the programs of the
 * kernel families (kernels/<family>.cl) and their kernels. A clf_buffer is a cl_mem plus its
 * size; operands are (buffer, byte offset) and reach CLBlast and the kernels as element
 * offsets, never as sub-buffers (whose offsets must meet CL_DEVICE_MEM_BASE_ADDR_ALIGN). */
#ifndef CLF_OCL_INTERNAL_H
#define CLF_OCL_INTERNAL_H

#include <CL/cl.h>
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
    OCL_K_EMBED,
    OCL_K_ADD,
    OCL_K_BIAS_RELU,
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

struct clf_backend {
    ocl_device dev;
    cl_context ctx;
    cl_command_queue queue;
    cl_program programs[OCL_F_COUNT];
    cl_kernel kernels[OCL_K_COUNT];
    size_t wg[OCL_K_COUNT]; /* work-group size used for each kernel */
    uint64_t max_alloc;     /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
    uint64_t local_mem;     /* CL_DEVICE_LOCAL_MEM_SIZE */
    size_t max_groups;      /* cap on work-groups of grid-stride kernels */
    int cache_hits;         /* programs loaded from the disk cache by open() */
    cl_mem scratch;         /* ops' internal scratch (ocl_scratch), grown on demand */
    size_t scratch_bytes;
    char description[512];
    char cache_dir[4096]; /* program cache ("" = none), for programs built after open */
    /* plugin ops compiled here (ocl_plugin.c), keyed by op pointer; released by close */
    struct ocl_plugin_prog *plugin_progs;
    int n_plugin_progs;
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

/* ---- ocl_backend.c ---- */

/* The backend's scratch buffer, at least bytes long (grown on demand, released by close).
 * Ops use it between their own kernels only: the in-order queue runs the next op's
 * kernels after this op's, so one buffer serves them all. */
clf_status ocl_scratch(clf_backend *be, const char *op, size_t bytes, cl_mem *out);

/* ---- ocl_launch.c ---- */

/* A kernel argument: size and value pointer (value NULL with size > 0: __local scratch). */
typedef struct ocl_arg {
    size_t size;
    const void *value;
} ocl_arg;

/* Sets args and enqueues kernel k on the queue. global and local have dims entries. */
clf_status ocl_launch_kernel(clf_backend *be, const char *op, cl_kernel k, const ocl_arg *args,
                             int nargs, cl_uint dims, const size_t *global, const size_t *local);
/* The same for the kernel of a family, by id. */
clf_status ocl_launch(clf_backend *be, const char *op, ocl_kernel_id id, const ocl_arg *args,
                      int nargs, cl_uint dims, const size_t *global, const size_t *local);
/* Grid-stride launch of an elementwise kernel over n items. */
clf_status ocl_launch_elementwise(clf_backend *be, const char *op, ocl_kernel_id id,
                                  const ocl_arg *args, int nargs, uint64_t n);
/* Checks that operand p (called name) of op holds bytes bytes from its offset, that it
 * belongs to be and (aligned) that its offset is a multiple of 4. required = 0 lets p.buf
 * be NULL. Errors are CLF_ERR_INPUT naming the op and the operand. */
clf_status ocl_check_range(clf_backend *be, const char *op, const char *name, clf_ptr p,
                           uint64_t bytes, int aligned, int required);
/* The same for elems 4-byte elements (F32 or I32), always aligned. */
clf_status ocl_check_operand(clf_backend *be, const char *op, const char *name, clf_ptr p,
                             uint64_t elems, int required);
/* The shape rules layernorm and its backward share: rows >= 0, cols >= 1, a known style,
 * and cols >= 2 for the tutorial style (its std is the unbiased one). */
clf_status ocl_check_ln_shape(const char *op, int rows, int cols, clf_ln_style style);
/* Elements spanned by `rows` rows of `cols` elements, `ld` apart, repeated `batch` times
 * `stride` apart; 0 when anything is empty; UINT64_MAX on overflow. */
uint64_t ocl_extent(uint64_t rows, uint64_t cols, uint64_t ld, uint64_t batch, uint64_t stride);

/* Whether [a.off, a.off + abytes) and [b.off, b.off + bbytes) share a byte of one buffer
 * (the CPU backend's rule; the ops refuse what it refuses). */
static inline int ocl_overlap(clf_ptr a, uint64_t abytes, clf_ptr b, uint64_t bbytes)
{
    return a.buf && a.buf == b.buf && abytes && bbytes && a.off < b.off + bbytes &&
           b.off < a.off + abytes;
}
/* Elementwise ops may run in place (the same span) but not on partly overlapping spans. */
static inline int ocl_partial_overlap(clf_ptr a, clf_ptr b, uint64_t bytes)
{
    return ocl_overlap(a, bytes, b, bytes) && a.off != b.off;
}

/* The cl_mem of an optional operand (NULL when absent) and its offset in elements. */
static inline cl_mem ocl_mem(clf_ptr p)
{
    return p.buf ? p.buf->mem : NULL;
}
static inline cl_ulong ocl_elems(clf_ptr p)
{
    return (cl_ulong)(p.off / 4);
}

/* ---- inference ops (ocl_gemm.c, ocl_ops.c) ---- */
clf_status ocl_gemm(clf_backend *be, const clf_gemm_args *a);
clf_status ocl_gemm_strided_batched(clf_backend *be, const clf_gemm_args *a);
clf_status ocl_layernorm(clf_backend *be, const clf_layernorm_args *a);
clf_status ocl_attention(clf_backend *be, const clf_attention_args *a);
/* Attention dropout as the kernels take it: the seed, threshold = clf_dropout_threshold(p)
 * (0 = off: every element kept) and scale = 1.0f / (1.0f - p) (1.0f when off). */
typedef struct ocl_attn_dropout {
    cl_ulong seed;
    cl_uint threshold;
    cl_float scale;
} ocl_attn_dropout;
ocl_attn_dropout ocl_attention_dropout(const clf_attention_args *a);
/* CLF_ERR_INPUT naming op unless 0 <= a->dropout_p < 1. */
clf_status ocl_check_attention_dropout(const char *op, const clf_attention_args *a);
clf_status ocl_embed(clf_backend *be, const clf_embed_args *a);
clf_status ocl_add(clf_backend *be, clf_ptr out, clf_ptr a, clf_ptr b, size_t n);
clf_status ocl_softmax(clf_backend *be, clf_ptr out, clf_ptr x, int rows, int cols, int log);
clf_status ocl_argmax(clf_backend *be, clf_ptr out, clf_ptr x, int rows, int cols);

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
