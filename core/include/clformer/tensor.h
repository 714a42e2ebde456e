/* clformer/tensor.h - safetensors files (read by mmap, written atomically: temporary name,
 * fsync, rename). The host tensor, its dtypes and their conversions are clformer/numeric.h,
 * included here. */
#ifndef CLFORMER_TENSOR_H
#define CLFORMER_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "clformer/export.h"
#include "clformer/numeric.h"
#include "clformer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- reading ---- */
typedef struct clf_safetensors clf_safetensors;

/* The reader's limits (README, "Limits"): a file that claims more is refused with one line
 * naming the file and the limit, before anything is allocated for it. Rank: CLF_MAX_DIMS;
 * every tensor's bytes (shape x dtype) must equal its data offsets' span, inside the file.
 * The header's JSON: CLF_JSON_MAX_DEPTH / CLF_JSON_STRING_MAX (512 levels, 1 MiB). */
#define CLF_SAFETENSORS_HEADER_MAX  ((uint64_t)16 << 20) /* header bytes (real: < 1 MiB) */
#define CLF_SAFETENSORS_TENSORS_MAX 65536                /* tensors in one file */
#define CLF_SAFETENSORS_DIM_MAX     INT32_MAX            /* each dimension */

/* Maps the file and parses its header. Errors name the file and what is wrong with it
 * (not safetensors, header truncated, offsets out of range, unknown dtype, ...). */
CLF_API clf_status clf_safetensors_open(const char *path, clf_safetensors **out);
CLF_API void clf_safetensors_close(clf_safetensors *f); /* NULL is fine */
CLF_API int clf_safetensors_count(const clf_safetensors *f);
CLF_API const clf_tensor *clf_safetensors_at(const clf_safetensors *f, int i);
CLF_API const clf_tensor *clf_safetensors_find(const clf_safetensors *f, const char *name);
/* value of a __metadata__ string entry, or NULL */
CLF_API const char *clf_safetensors_meta(const clf_safetensors *f, const char *key);
CLF_API const char *clf_safetensors_path(const clf_safetensors *f);

/* ---- writing ---- */
/* Writes n tensors (in the given order; offsets follow it) and optional metadata pairs
 * meta[2*i] = key, meta[2*i+1] = value, to path via path.tmp.<pid> + rename. */
CLF_API clf_status clf_safetensors_write(const char *path, const clf_tensor *tensors, int n,
                                         const char *const *meta, int n_meta);

#ifdef __cplusplus
}
#endif
#endif
