/* The CPU backend's embedding lookup: rows of the table by token id, times a scale, plus
 * the positional encoding's rows where one is given. The backward is in cpu_train.c. */
#include <stdint.h>

#include "clformer/backend.h"
#include "cpu_internal.h"

clf_status cpu_embed(clf_backend *be, const clf_embed_args *a)
{
    CPU_REQUIRE_ARGS("embed", a);
    /* shape and operands: checked by the core (clformer/ops.h) */
    size_t dim = (size_t)a->dim;
    const int32_t *ids = iptr(a->ids);
    const float *table = fptr(a->table), *pe = a->pe.buf ? fptr(a->pe) : NULL;
    float *out = fptr(a->out);
#pragma omp parallel for num_threads(be->threads) schedule(static) if (a->rows * dim > 65536)
    for (int r = 0; r < a->rows; r++) {
        int id = ids[r] < 0 ? 0 : ids[r] >= a->vocab ? a->vocab - 1 : ids[r];
        const float *e = table + (size_t)id * dim;
        float *o = out + (size_t)r * dim;
        if (pe) {
            const float *p = pe + ((size_t)a->pos0 + (size_t)(r % a->seq_len)) * dim;
            for (size_t c = 0; c < dim; c++)
                o[c] = e[c] * a->scale + p[c];
        } else {
            for (size_t c = 0; c < dim; c++)
                o[c] = e[c] * a->scale;
        }
    }
    return CLF_OK;
}
