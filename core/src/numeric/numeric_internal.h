/* numeric/numeric_internal.h - what the core's other layers use of numeric/ beyond
 * clformer/numeric.h: the words and the message for a value a type cannot hold. */
#ifndef CLFORMER_NUMERIC_INTERNAL_H
#define CLFORMER_NUMERIC_INTERNAL_H

#include "clformer/numeric.h"

/* "NaN", "Inf" or "-Inf" for a non-finite x; NULL for a finite one. */
const char *clf_nonfinite_name(float x);

/* The error for x, element `index` of tensor `name`, which dt (CLF_F16, CLF_BF16 or
 * CLF_I8) cannot hold, naming the cause: a non-finite value in the source (the weights
 * are broken; no type would hold it), or a finite value beyond dt's range (F32 holds it).
 * The message starts "<file>: tensor '<name>'", or "weights: '<name>'" when file is NULL.
 * Returns CLF_ERR_INPUT. */
clf_status clf_unfit_error(const char *file, const char *name, int64_t index, float x,
                           clf_dtype dt);

#endif
