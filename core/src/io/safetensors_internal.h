/* io/safetensors_internal.h - what io/ itself needs of a safetensors mapping beyond
 * clformer/tensor.h. */
#ifndef CLFORMER_IO_SAFETENSORS_INTERNAL_H
#define CLFORMER_IO_SAFETENSORS_INTERNAL_H

#include "clformer/tensor.h"

/* The reader is done with t's bytes for now: the whole pages of the mapping that hold only
 * them leave this process's resident set (MADV_DONTNEED on a private, read-only file
 * mapping). They stay in the page cache, and a later read of t maps them in again with the
 * same contents. clf_weights_load calls it after converting each tensor, so that loading
 * a model never holds the file's pages and the converted copy whole at once. */
void clf_safetensors_drop_pages(const clf_safetensors *f, const clf_tensor *t);

#endif
