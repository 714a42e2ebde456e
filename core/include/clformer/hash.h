/* clformer/hash.h - the one non-cryptographic hash of clformer: 64-bit FNV-1a.
 *
 * Used for in-memory hash tables (tokenizer vocabulary, BLEU n-grams) and for what is
 * persisted: the OpenCL backend's program-cache file names and payload checksums. The
 * function takes the running value, so that a hash can be continued over several pieces:
 *
 *     uint64_t h = clf_hash_fnv1a64(CLF_FNV1A64_OFFSET, a, na);
 *     h = clf_hash_fnv1a64(h, b, nb);   // == the hash of a and b concatenated
 */
#ifndef CLFORMER_HASH_H
#define CLFORMER_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "clformer/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* FNV-1a's 64-bit offset basis: the value to start a hash from. */
#define CLF_FNV1A64_OFFSET 0xcbf29ce484222325ULL

/* Continues the FNV-1a 64 hash h over data[0..n): for each byte, h = (h ^ byte) * prime
 * with prime 0x100000001b3. clf_hash_fnv1a64(CLF_FNV1A64_OFFSET, "a", 1) is
 * 0xaf63dc4c8601ec8c (the published test vector). */
CLF_API uint64_t clf_hash_fnv1a64(uint64_t h, const void *data, size_t n);

#ifdef __cplusplus
}
#endif
#endif
