/* Tests of clformer/hash.h: 64-bit FNV-1a against the published test vectors (Fowler, Noll
 * and Vo's reference test suite), continued over pieces, and from the OpenCL program
 * cache's start value (whose outputs name the cache files on disk). */
#include <check.h>
#include <string.h>

#include "clformer/hash.h"
#include "testutil.h"

static uint64_t fnv(const char *s)
{
    return clf_hash_fnv1a64(CLF_FNV1A64_OFFSET, s, strlen(s));
}

START_TEST(test_reference_vectors)
{
    ck_assert_uint_eq(fnv(""), 0xcbf29ce484222325ULL);
    ck_assert_uint_eq(fnv("a"), 0xaf63dc4c8601ec8cULL);
    ck_assert_uint_eq(fnv("foobar"), 0x85944171f73967e8ULL);
    /* bytes >= 0x80 are hashed unsigned */
    static const unsigned char hi[] = {0xff};
    ck_assert_uint_eq(clf_hash_fnv1a64(CLF_FNV1A64_OFFSET, hi, 1),
                      (CLF_FNV1A64_OFFSET ^ 0xffULL) * 0x100000001b3ULL);
}
END_TEST

START_TEST(test_continues_over_pieces)
{
    uint64_t h = clf_hash_fnv1a64(CLF_FNV1A64_OFFSET, "foo", 3);
    ck_assert_uint_eq(clf_hash_fnv1a64(h, "bar", 3), fnv("foobar"));
    ck_assert_uint_eq(clf_hash_fnv1a64(h, NULL, 0), h);
}
END_TEST

/* The OpenCL program cache hashes from 1469598103934665603 (not the offset basis): its
 * first step, the magic string with its NUL, gives what the backend's former FNV-1a loop
 * gave (computed apart, in Python), so cache files written before the hash was shared
 * still match their keys. */
START_TEST(test_program_cache_start_value)
{
    ck_assert_uint_eq(clf_hash_fnv1a64(1469598103934665603ULL, "CLFOCLB1", 9),
                      0xb2355ac560be3863ULL);
}
END_TEST

CLF_TEST_MAIN(clf_test_run, "hash", "fnv1a64", test_reference_vectors, test_continues_over_pieces,
              test_program_cache_start_value)
