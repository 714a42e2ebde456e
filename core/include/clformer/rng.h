/* clformer/rng.h - a small reproducible PRNG (xoshiro256**, seeded by splitmix64).
 * State is explicit (no global generator), so a checkpoint can store and restore it. */
#ifndef CLFORMER_RNG_H
#define CLFORMER_RNG_H

#include <stdint.h>

#include "clformer/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clf_rng {
    uint64_t s[4];
} clf_rng;

CLF_API void clf_rng_seed(clf_rng *r, uint64_t seed);
/* splitmix64's output for state x (a stateless 64-bit mix: seeds derived from seeds) */
CLF_API uint64_t clf_splitmix64(uint64_t x);
CLF_API uint64_t clf_rng_next(clf_rng *r);
/* uniform in [0, 1) with 24 random bits (exact in float) */
CLF_API float clf_rng_uniform(clf_rng *r);
/* uniform in [lo, hi) */
CLF_API float clf_rng_uniform_range(clf_rng *r, float lo, float hi);

#ifdef __cplusplus
}
#endif
#endif
