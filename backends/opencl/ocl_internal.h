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
    OCL_K_COUNT
} ocl_kernel_id;

typedef enum ocl_family_id {
    OCL_F_ATTENTION = 0,
    OCL_F_LAYERNORM,
    OCL_F_SOFTMAX,
    OCL_F_EMBED,
    OCL_F_ELEMENTWISE,
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
    char description[512];
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
/* The cache directory from opts->cache_dir, $CLF_CACHE_DIR, $XDG_CACHE_HOME/clformer,
 * ~/.cache/clformer; "" in dir when the cache is off ("off") or no home is known. */
void ocl_cache_dir(const char *opt, char *dir, size_t size);

/* ---- ocl_launch.c ---- */

/* A kernel argument: size and value pointer (value NULL with size > 0: __local scratch). */
typedef struct ocl_arg {
    size_t size;
    const void *value;
} ocl_arg;

/* Sets args and enqueues kernel id on the queue. global and local have dims entries. */
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
/* Elements spanned by `rows` rows of `cols` elements, `ld` apart, repeated `batch` times
 * `stride` apart; 0 when anything is empty; UINT64_MAX on overflow. */
uint64_t ocl_extent(uint64_t rows, uint64_t cols, uint64_t ld, uint64_t batch, uint64_t stride);

/* The cl_mem of an optional operand (NULL when absent) and its offset in elements. */
static inline cl_mem ocl_mem(clf_ptr p)
{
    return p.buf ? p.buf->mem : NULL;
}
static inline cl_ulong ocl_elems(clf_ptr p)
{
    return (cl_ulong)(p.off / 4);
}

/* ---- ops (ocl_gemm.c, ocl_ops.c) ---- */
clf_status ocl_gemm(clf_backend *be, const clf_gemm_args *a);
clf_status ocl_gemm_strided_batched(clf_backend *be, const clf_gemm_args *a);
clf_status ocl_layernorm(clf_backend *be, const clf_layernorm_args *a);
clf_status ocl_attention(clf_backend *be, const clf_attention_args *a);
clf_status ocl_embed(clf_backend *be, const clf_embed_args *a);
clf_status ocl_add(clf_backend *be, clf_ptr out, clf_ptr a, clf_ptr b, size_t n);
clf_status ocl_softmax(clf_backend *be, clf_ptr out, clf_ptr x, int rows, int cols, int log);
clf_status ocl_argmax(clf_backend *be, clf_ptr out, clf_ptr x, int rows, int cols);

#endif
