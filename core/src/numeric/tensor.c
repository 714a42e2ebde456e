/* What a host tensor is: the dtypes' safetensors names and sizes, element counts, shapes
 * as text (clformer/numeric.h). */
#include "clformer/numeric.h"

#include <stdio.h>

static const char *const dtype_names[CLF_DTYPE_COUNT] = {"F32", "F16", "BF16", "I32",
                                                         "I64", "U8",  "I8"};
static const size_t dtype_sizes[CLF_DTYPE_COUNT] = {4, 2, 2, 4, 8, 1, 1};

const char *clf_dtype_name(clf_dtype dt)
{
    if ((int)dt < 0 || dt >= CLF_DTYPE_COUNT)
        return "?";
    return dtype_names[dt];
}

size_t clf_dtype_size(clf_dtype dt)
{
    if ((int)dt < 0 || dt >= CLF_DTYPE_COUNT)
        return 0;
    return dtype_sizes[dt];
}

int64_t clf_tensor_numel(const clf_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

const char *clf_shape_str(const int64_t *shape, int ndim, char *buf, size_t size)
{
    if (size == 0)
        return buf;
    size_t len = 0;
    buf[0] = '\0';
    for (int i = -1; i <= ndim && len < size; i++) {
        int n;
        if (i < 0)
            n = snprintf(buf, size, "[");
        else if (i == ndim)
            n = snprintf(buf + len, size - len, "]");
        else
            n = snprintf(buf + len, size - len, "%s%lld", i ? "," : "", (long long)shape[i]);
        if (n < 0)
            break;
        len += (size_t)n;
    }
    return buf;
}
