/* hash.c - 64-bit FNV-1a (see clformer/hash.h). */
#include "clformer/hash.h"

#define FNV1A64_PRIME 0x100000001b3ULL

uint64_t clf_hash_fnv1a64(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= FNV1A64_PRIME;
    }
    return h;
}
