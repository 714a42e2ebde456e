/* xoshiro256** (Blackman & Vigna), seeded by splitmix64: fast, good, reproducible. */
#include "clformer/rng.h"

uint64_t clf_splitmix64(uint64_t x)
{
    uint64_t z = x + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* one step of the splitmix64 generator: advance the state, mix it */
static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = clf_splitmix64(*x);
    *x += 0x9e3779b97f4a7c15ULL;
    return z;
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void clf_rng_seed(clf_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

uint64_t clf_rng_next(clf_rng *r)
{
    uint64_t *s = r->s;
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float clf_rng_uniform(clf_rng *r)
{
    return (float)(clf_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

float clf_rng_uniform_range(clf_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * clf_rng_uniform(r);
}
