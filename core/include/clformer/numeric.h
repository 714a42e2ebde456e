/* clformer/numeric.h - host tensors and their numbers: the dtypes, the clf_tensor type,
 * F16/BF16 <-> F32 conversion, the finite check, row-wise int8 quantization. Nothing here
 * reads or writes a file (that is clformer/tensor.h, which includes this header). */
#ifndef CLFORMER_NUMERIC_H
#define CLFORMER_NUMERIC_H

#include <stddef.h>
#include <stdint.h>

#include "clformer/export.h"
#include "clformer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CLF_MAX_DIMS        8
#define CLF_TENSOR_NAME_MAX 256

typedef enum clf_dtype {
    CLF_F32 = 0,
    CLF_F16,
    CLF_BF16,
    CLF_I32,
    CLF_I64,
    CLF_U8,
    CLF_I8,
    CLF_DTYPE_COUNT
} clf_dtype;

CLF_API const char *clf_dtype_name(clf_dtype dt); /* safetensors spelling: "F32", "I32", ... */
CLF_API size_t clf_dtype_size(clf_dtype dt);

/* A named host tensor. For a tensor read from a file, data points into the mapping. */
typedef struct clf_tensor {
    char name[CLF_TENSOR_NAME_MAX];
    clf_dtype dtype;
    int ndim;
    int64_t shape[CLF_MAX_DIMS];
    void *data;
    size_t nbytes;
} clf_tensor;

CLF_API int64_t clf_tensor_numel(const clf_tensor *t);
/* "[2,3,4]" into buf */
CLF_API const char *clf_shape_str(const int64_t *shape, int ndim, char *buf, size_t size);

/* ---- conversion ---- */

/* Copies t into dst as F32 (F32, F16, BF16 sources). CLF_ERR_INPUT for other dtypes. */
CLF_API clf_status clf_tensor_to_f32(const clf_tensor *t, float *dst);
/* As clf_tensor_to_f32, checking in the same pass that every value is finite (each block
 * checked while it is in cache): *first_nonfinite is the flat index of the first NaN or
 * infinity, or -1. When there is one, dst is written only up to the end of its block. */
CLF_API clf_status clf_tensor_to_f32_finite(const clf_tensor *t, float *dst,
                                            int64_t *first_nonfinite);
/* The flat index of the first NaN or infinity of x[0..n), or -1 when all are finite. */
CLF_API int64_t clf_first_nonfinite(const float *x, size_t n);
/* One IEEE half (binary16, as stored in F16 tensors) as float, exactly. */
CLF_API float clf_half_to_float(uint16_t h);
/* f as the nearest IEEE half (ties to even; NaN stays NaN). Magnitudes past 65504 round
 * to infinity: callers that need finite halves check with clf_float_fits_half first. */
CLF_API uint16_t clf_float_to_half(float f);
/* 1 when f is finite and rounds to a finite half (|f| < 65520), 0 otherwise. */
CLF_API int clf_float_fits_half(float f);
/* f as the nearest bfloat16 (the float's high 16 bits, rounded to nearest even; NaN stays
 * NaN), and back (exact). Magnitudes that round past the largest bfloat16 become infinity:
 * clf_float_fits_bf16 says 0 for them (and for NaN and infinities). */
CLF_API uint16_t clf_float_to_bf16(float f);
CLF_API float clf_bf16_to_float(uint16_t h);
CLF_API int clf_float_fits_bf16(float f);
/* Copies t into dst as I32 (I32, I64 in int32 range, U8 sources). */
CLF_API clf_status clf_tensor_to_i32(const clf_tensor *t, int32_t *dst);

/* ---- int8 ---- */

/* Symmetric per-row int8 quantization of w [rows, k]: scale[r] = max |w[r,:]| / 127
 * (nudged by an ulp or so so that q * scale quantizes back to q and the same scale),
 * q[r,p] = round(w[r,p] / scale[r]) in [-127, 127]; a zero row gets scale 0. Returns -1,
 * or the index of the first element that is not finite (nothing after it is written). */
CLF_API int64_t clf_quantize_rows_i8(const float *w, int64_t rows, int64_t k, int8_t *q,
                                     float *scale);

#ifdef __cplusplus
}
#endif
#endif
