/* The JSON reader (Jansson under clformer's rules, io/json_jansson.h) and safetensors files: round
 * trips of every dtype and of 0-d and empty tensors, hand-built F16 bytes, hand-built corrupt files
 * each refused with the message that names the file and the fault, and the atomic writer. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clformer/tensor.h"
#include "io/json_jansson.h"
#include "io/safetensors_internal.h"
#include "text/tokenizer_kinds.h"
#include "testutil.h"

/* ---- helpers ---- */

/* A safetensors file from a header string and raw data (header length as given). */
static void write_st(const char *path, uint64_t hlen, const char *header, const void *data,
                     size_t n)
{
    size_t h = strlen(header);
    unsigned char *buf = malloc(8 + h + n + 1);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(hlen >> (8 * i));
    memcpy(buf + 8, header, h);
    if (n)
        memcpy(buf + 8 + h, data, n);
    clf_test_write_file(path, buf, 8 + h + n);
    free(buf);
}

static json_t *parse_ok(const char *text)
{
    json_t *doc = NULL;
    CLF_ASSERT_OK(clf_json_parse(text, strlen(text), "t.json", &doc));
    return doc;
}

/* ---- JSON ---- */

START_TEST(test_json_values)
{
    json_t *r = parse_ok(" {\"a\": 1, \"b\": [true, false, null], \"c\": \"x\", \"d\": -1.5e3,\n"
                         "  \"e\": {}, \"f\": [], \"g\": {\"h\": [1, [2]]}} ");
    ck_assert(json_is_object(r));
    ck_assert_uint_eq(json_object_size(r), 7);
    void *it = json_object_iter(r); /* members keep the order of the text */
    for (int i = 0; i < 3; i++)
        it = json_object_iter_next(r, it);
    ck_assert_str_eq(json_object_iter_key(it), "d");
    const json_t *a = json_object_get(r, "a");
    ck_assert(json_is_integer(a) && json_integer_value(a) == 1 && json_number_value(a) == 1.0);
    const json_t *b = json_object_get(r, "b");
    ck_assert_uint_eq(json_array_size(b), 3);
    ck_assert(json_is_true(json_array_get(b, 0)));
    ck_assert(json_is_false(json_array_get(b, 1)));
    ck_assert(json_is_null(json_array_get(b, 2)));
    ck_assert_ptr_null(json_array_get(b, 3));
    ck_assert_str_eq(json_string_value(json_object_get(r, "c")), "x");
    const json_t *d = json_object_get(r, "d");
    ck_assert(!json_is_integer(d) && json_number_value(d) == -1500.0);
    ck_assert_uint_eq(json_object_size(json_object_get(r, "e")), 0);
    ck_assert(json_is_array(json_object_get(r, "f")));
    const json_t *h = json_object_get(json_object_get(r, "g"), "h");
    ck_assert_int_eq(json_integer_value(json_array_get(json_array_get(h, 1), 0)), 2);
    ck_assert_ptr_null(json_object_get(r, "zz"));
    ck_assert_ptr_null(json_object_get(b, "a")); /* not an object */
    ck_assert_str_eq(clf_json_type_name(r), "object");
    ck_assert_str_eq(clf_json_type_name(d), "number");
    ck_assert_str_eq(clf_json_type_name(json_array_get(b, 0)), "boolean");
    ck_assert_str_eq(clf_json_type_name(NULL), "null");
    json_decref(r);

    /* scalars at the top level, and a byte order mark (which Jansson alone refuses) */
    r = parse_ok("\xEF\xBB\xBF \"top\" ");
    ck_assert_str_eq(json_string_value(r), "top");
    json_decref(r);
}
END_TEST

START_TEST(test_json_strings_and_unicode)
{
    json_t *r = NULL;
    const char *text = "[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\", \"\\u00e9\\u20AC\", "
                       "\"\\uD83D\\uDE00\", \"a\\u0000b\", \"caf\xC3\xA9 \xF0\x9F\x98\x80\"]";
    CLF_ASSERT_OK(clf_json_parse(text, strlen(text), "t.json", &r));
    ck_assert_str_eq(json_string_value(json_array_get(r, 0)), "\"\\/\b\f\n\r\t");
    ck_assert_str_eq(json_string_value(json_array_get(r, 1)), "\xC3\xA9\xE2\x82\xAC");
    ck_assert_str_eq(json_string_value(json_array_get(r, 2)), "\xF0\x9F\x98\x80");
    ck_assert_uint_eq(json_string_length(json_array_get(r, 3)), 3);
    ck_assert_int_eq(memcmp(json_string_value(json_array_get(r, 3)), "a\0b", 4), 0);
    ck_assert_str_eq(json_string_value(json_array_get(r, 4)), "caf\xC3\xA9 \xF0\x9F\x98\x80");
    json_decref(r);

    /* keys are decoded too, and lookups use the decoded form */
    r = parse_ok("{\"\\u00e9t\\u00e9\": 2}");
    ck_assert_int_eq(json_integer_value(json_object_get(r, "\xC3\xA9t\xC3\xA9")), 2);
    json_decref(r);
}
END_TEST

/* Sixteen integers beyond int64, the most one document may hold. */
#define BIG4                                                                                       \
    "99999999999999999999, 99999999999999999999, 99999999999999999999, -99999999999999999999, "
#define BIG16 BIG4 BIG4 BIG4 BIG4

START_TEST(test_json_numbers)
{
    json_t *r = parse_ok("[0, -0, 123456789012345678, 9223372036854775807, "
                         "-9223372036854775808, 9223372036854775808, 1.0, 0.5, 1E+2, "
                         "2e-3, 1e-400, -99999999999999999999, 7]");
    const json_t *v[13];
    for (size_t i = 0; i < 13; i++)
        v[i] = json_array_get(r, i);
    ck_assert(json_is_integer(v[0]) && json_integer_value(v[0]) == 0);
    ck_assert(json_is_integer(v[1]) && json_integer_value(v[1]) == 0);
    ck_assert(json_is_integer(v[2]) && json_integer_value(v[2]) == 123456789012345678LL);
    ck_assert(json_is_integer(v[3]) && json_integer_value(v[3]) == INT64_MAX);
    ck_assert(json_is_integer(v[4]) && json_integer_value(v[4]) == INT64_MIN);
    /* beyond int64: a real, as clformer's own parser read it (Jansson alone refuses it) */
    ck_assert(!json_is_integer(v[5]) && json_number_value(v[5]) == 9223372036854775808.0);
    ck_assert(!json_is_integer(v[6]) && json_number_value(v[6]) == 1.0);
    ck_assert(json_number_value(v[7]) == 0.5);
    ck_assert(!json_is_integer(v[8]) && json_number_value(v[8]) == 100.0);
    ck_assert(json_number_value(v[9]) == 2e-3);
    ck_assert(json_number_value(v[10]) == 0.0); /* underflow to zero is fine */
    ck_assert(!json_is_integer(v[11]) && json_number_value(v[11]) == -1e20);
    ck_assert(json_is_integer(v[12]) && json_integer_value(v[12]) == 7);
    json_decref(r);

    /* sixteen of them in one document are all read */
    r = parse_ok("[" BIG16 "0]");
    ck_assert_uint_eq(json_array_size(r), 17);
    ck_assert(json_number_value(json_array_get(r, 15)) == -1e20);
    json_decref(r);
}
END_TEST

typedef struct bad_json {
    const char *text;
    const char *want; /* a substring of the message */
} bad_json;

static const bad_json bad_cases[] = {
    {"", "at byte 0 (line 1, column 1): unexpected end of input"},
    {"   ", "at byte 3"},
    {"{\"a\":1,}", "at byte 7 (line 1, column 8): trailing comma before '}'"},
    {"[1,]", "trailing comma before ']'"},
    {"[1 2]", "at byte 3 (line 1, column 4): expected ',' or ']' in array, found character '2'"},
    {"{\"a\" 1}", "expected ':' after an object key"},
    {"{a:1}", "at byte 1 (line 1, column 2): expected a string key in object"},
    {"{\"a\":1 \"b\":2}", "expected ',' or '}' in object"},
    {"\"abc", "at byte 0 (line 1, column 1): string not terminated"},
    {"\"\\x\"", "invalid escape in string: '\\' followed by character 'x'"},
    {"\"\\uD800\"", "high surrogate \\uD800 not followed by a low one"},
    {"\"\\uD800\\u0041\"", "high surrogate \\uD800 followed by \\u0041"},
    {"\"\\uDC00\"", "lone low surrogate \\uDC00"},
    {"\"\\u12G4\"", "\\u must be followed by 4 hex digits"},
    {"\"\\u00\"", "\\u must be followed by 4 hex digits"},
    {"01", "leading zeros are not allowed"},
    {"1.", "expected a digit after the decimal point"},
    {"1e", "expected a digit in the exponent"},
    {"-", "expected a digit in number"},
    {"+1", "unexpected character '+', expected a value"},
    {".5", "unexpected character '.'"},
    {"tru", "unexpected character 't', expected a value"},
    {"NaN", "unexpected character 'N'"},
    {"Infinity", "unexpected character 'I'"},
    {"[1] x", "at byte 4 (line 1, column 5): unexpected character 'x' after the value"},
    {"{\"a\":1}\n\n  x", "at byte 11 (line 3, column 3)"},
    {"\"a\tb\"", "control character 0x09 in string"},
    {"\"\xff\"", "invalid UTF-8 byte 0xFF in string"},
    {"\"\xC0\xAF\"", "invalid UTF-8 byte 0xC0"},         /* overlong '/' */
    {"\"\xED\xA0\x80\"", "invalid UTF-8 byte 0xED"},     /* an encoded surrogate */
    {"\"\xF4\x90\x80\x80\"", "invalid UTF-8 byte 0xF4"}, /* > U+10FFFF */
    {"\"\xE2\x82\"", "invalid UTF-8 byte 0xE2"},         /* truncated sequence */
    {"{\"a\":1,\"b\":2,\"a\":3}", "at byte 13 (line 1, column 14): duplicate key \"a\""},
    {"1e400", "number 1e400 is out of range"},
    {"[1] // comment", "unexpected character '/' after the value"},
    {"\x01", "unexpected byte 0x01"},
    /* tokens of more than 20 bytes, which Jansson does not quote back: still the start */
    {"{\"a key of twenty-two b\":1,\"a key of twenty-two b\":2}",
     "at byte 27 (line 1, column 28): duplicate key \"a key of twenty-two b\""},
    {"[1, \"a string longer than twenty bytes", "at byte 4 (line 1, column 5): string not "
                                                "terminated"},
    {"[\"a string longer than twenty bytes\\q\"]", "at byte 35 (line 1, column 36): invalid "
                                                   "escape in string: '\\' followed by "
                                                   "character 'q'"},
    /* offsets count the byte order mark, and not the ".0" read after a big integer */
    {"\xEF\xBB\xBF[1 2]", "at byte 6 (line 1, column 7): expected ',' or ']'"},
    {"[99999999999999999999, 1 2]", "at byte 25 (line 1, column 26): expected ',' or ']'"},
    /* each integer beyond int64 costs one more parse: the 17th is refused */
    {"[" BIG16 "99999999999999999999]",
     "at byte 357 (line 1, column 358): number 99999999999999999999 is out of range"},
    /* the one rule Jansson changed: a key may not hold \u0000 */
    {"{\"a\\u0000b\":1}", "at byte 1 (line 1, column 2): object key \"a\" contains a NUL "
                          "character"},
};

START_TEST(test_json_errors)
{
    const bad_json *c = &bad_cases[_i];
    json_t *doc = (json_t *)1;
    clf_status st = clf_json_parse(c->text, strlen(c->text), "bad.json", &doc);
    ck_assert_msg(st == CLF_ERR_INPUT, "'%s' was accepted", c->text);
    ck_assert_ptr_null(doc);
    ck_assert_msg(strncmp(clf_last_error(), "bad.json: invalid JSON at byte ", 31) == 0, "%s",
                  clf_last_error());
    ck_assert_msg(strstr(clf_last_error(), c->want), "'%s': got \"%s\", want \"%s\"", c->text,
                  clf_last_error(), c->want);
}
END_TEST

/* A NUL byte, which Jansson 2.14 skips after a number. */
START_TEST(test_json_nul_byte)
{
    json_t *doc = (json_t *)1;
    ck_assert_int_eq(clf_json_parse("[1, 2\0]", 7, "bad.json", &doc), CLF_ERR_INPUT);
    ck_assert_ptr_null(doc);
    ck_assert_msg(strstr(clf_last_error(), "bad.json: invalid JSON at byte 5 (line 1, column 6): "
                                           "unexpected byte 0x00"),
                  "%s", clf_last_error());
}
END_TEST

START_TEST(test_json_big_object_and_depth)
{
    /* many keys: lookups work and a late duplicate is found */
    size_t cap = 100000, len = 0;
    char *text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    len += (size_t)snprintf(text + len, cap - len, "{");
    for (int i = 0; i < 5000; i++)
        len += (size_t)snprintf(text + len, cap - len, "%s\"w%d\":%d", i ? "," : "", i, i);
    len += (size_t)snprintf(text + len, cap - len, "}");
    ck_assert_uint_lt(len, cap - 16);
    json_t *doc = NULL;
    CLF_ASSERT_OK(clf_json_parse(text, len, "vocab.json", &doc));
    ck_assert_uint_eq(json_object_size(doc), 5000);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "w4321")), 4321);
    json_decref(doc);
    len -= 1;
    len += (size_t)snprintf(text + len, cap - len, ",\"w17\":0}");
    ck_assert_int_eq(clf_json_parse(text, len, "vocab.json", &doc), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "duplicate key \"w17\""), "%s", clf_last_error());
    free(text);

    /* nesting: 512 levels parse, 513 and 600 are refused (Jansson alone takes 2048), and so
     * are 3000 (Jansson's own limit, no stack overflow) */
    static char deep[6000];
    const int levels[] = {500, 512, 513, 600, 3000};
    for (int k = 0; k < 5; k++) {
        int n = levels[k];
        memset(deep, '[', (size_t)n);
        memset(deep + n, ']', (size_t)n);
        clf_status st = clf_json_parse(deep, 2 * (size_t)n, "deep.json", &doc);
        if (n <= 512) {
            CLF_ASSERT_OK(st);
            json_decref(doc);
        } else {
            ck_assert_int_eq(st, CLF_ERR_INPUT);
            ck_assert_msg(strstr(clf_last_error(), "deep.json: invalid JSON") &&
                              strstr(clf_last_error(), "nesting deeper than 512"),
                          "%s", clf_last_error());
        }
    }
}
END_TEST

/* CLF_JSON_STRING_MAX: a string (value or key) of that many bytes parses, one more byte is
 * refused at the string's first byte, before Jansson allocates it. */
START_TEST(test_json_string_limit)
{
    const size_t max = CLF_JSON_STRING_MAX;
    char *text = malloc(max + 16);
    ck_assert_ptr_nonnull(text);
    for (int key = 0; key <= 1; key++)
        for (size_t n = max; n <= max + 1; n++) {
            size_t at = 0;
            text[at++] = key ? '{' : '[';
            text[at++] = '"';
            memset(text + at, 'a', n);
            at += n;
            text[at++] = '"';
            if (key) {
                memcpy(text + at, ":1", 2);
                at += 2;
            }
            text[at++] = key ? '}' : ']';
            json_t *doc = NULL;
            clf_status st = clf_json_parse(text, at, "long.json", &doc);
            if (n == max) {
                CLF_ASSERT_OK(st);
                json_decref(doc);
                continue;
            }
            ck_assert_int_eq(st, CLF_ERR_INPUT);
            ck_assert_msg(strstr(clf_last_error(), "long.json: invalid JSON at byte 1 ") &&
                              strstr(clf_last_error(), "a string of 1048577 bytes, more than the "
                                                       "limit of 1048576"),
                          "%s", clf_last_error());
        }
    free(text);
}
END_TEST

/* CLF_SAFETENSORS_TENSORS_MAX: a header of one more entry is refused before the tensor
 * table is allocated (the entries need not even be valid: the count comes first). */
START_TEST(test_tensor_count_limit)
{
    clf_test_make_tmpdir("clf-st");
    const char *p = clf_test_tmp_path("many.safetensors");
    const int n = CLF_SAFETENSORS_TENSORS_MAX + 1;
    size_t cap = (size_t)n * 16 + 16, len = 0;
    char *h = malloc(cap);
    ck_assert_ptr_nonnull(h);
    h[len++] = '{';
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(h + len, cap - len, "%s\"t%d\":0", i ? "," : "", i);
    h[len++] = '}';
    write_st(p, len, h, NULL, 0);
    free(h);
    clf_safetensors *f = NULL;
    ck_assert_int_eq(clf_safetensors_open(p, &f), CLF_ERR_INPUT);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(clf_last_error(), "many.safetensors: 65537 tensors, more than the limit "
                                           "of 65536"),
                  "%s", clf_last_error());
    clf_test_remove_tmpdir();
}
END_TEST

/* CLF_TOKENIZER_VOCAB_MAX, the one check both tokenizer kinds make once they know their
 * size (a file at the limit is 2^24 entries, ~200 MB of JSON: too big to write in a test,
 * so the check itself is tested here, where the suite reaches internals). */
START_TEST(test_vocab_size_limit)
{
    CLF_ASSERT_OK(clf_tok_check_vocab_size("v.json", CLF_TOKENIZER_VOCAB_MAX));
    ck_assert_int_eq(clf_tok_check_vocab_size("v.json", (size_t)CLF_TOKENIZER_VOCAB_MAX + 1),
                     CLF_ERR_INPUT);
    ck_assert_str_eq(clf_last_error(), "v.json: 16777217 words, more than the limit of 16777216");
}
END_TEST

START_TEST(test_json_writer)
{
    /* What Jansson writes (the writers of safetensors.c, tokenizer.c and bench use it),
     * clf_json_parse reads back byte for byte, "\u0000" included. */
    const char raw[] = "a\"b\\c\n\x01\x1f\t caf\xC3\xA9 /\0z";
    size_t n = sizeof raw - 1;
    json_t *s = json_stringn(raw, n);
    ck_assert_ptr_nonnull(s);
    char *text = json_dumps(s, JSON_ENCODE_ANY);
    json_decref(s);
    ck_assert_ptr_nonnull(text);
    ck_assert_str_eq(text, "\"a\\\"b\\\\c\\n\\u0001\\u001F\\t caf\xC3\xA9 /\\u0000z\"");
    json_t *doc = NULL;
    CLF_ASSERT_OK(clf_json_parse(text, strlen(text), "w.json", &doc));
    ck_assert_uint_eq(json_string_length(doc), n);
    ck_assert_int_eq(memcmp(json_string_value(doc), raw, n), 0);
    json_decref(doc);
    free(text);
}
END_TEST

START_TEST(test_json_parse_file)
{
    clf_test_make_tmpdir("clf-st");
    const char *p = clf_test_tmp_path("v.json");
    clf_test_write_file(p, "{\"x\": [1,2,3]}\n", 15);
    json_t *doc = NULL;
    CLF_ASSERT_OK(clf_json_parse_file(p, 15, &doc));
    ck_assert_uint_eq(json_array_size(json_object_get(doc, "x")), 3);
    json_decref(doc);
    clf_test_write_file(p, "{\"x\": [1,2,3}\n", 14);
    ck_assert_int_eq(clf_json_parse_file(p, 14, &doc), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "v.json: invalid JSON at byte 12"), "%s",
                  clf_last_error());
    /* the caller's limit on the file's size, checked before it is read */
    ck_assert_int_eq(clf_json_parse_file(p, 13, &doc), CLF_ERR_INPUT);
    ck_assert_ptr_null(doc);
    ck_assert_msg(strstr(clf_last_error(), "v.json: 14 bytes, more than the limit of 13"), "%s",
                  clf_last_error());
    ck_assert_int_eq(clf_json_parse_file(clf_test_tmp_path("none.json"), 99, &doc), CLF_ERR_IO);
    ck_assert_msg(strstr(clf_last_error(), "none.json: cannot open"), "%s", clf_last_error());
    clf_test_remove_tmpdir();
}
END_TEST

/* ---- safetensors ---- */

START_TEST(test_dtype_and_shape_helpers)
{
    ck_assert_str_eq(clf_dtype_name(CLF_F32), "F32");
    ck_assert_str_eq(clf_dtype_name(CLF_BF16), "BF16");
    ck_assert_str_eq(clf_dtype_name(CLF_U8), "U8");
    ck_assert_uint_eq(clf_dtype_size(CLF_F16), 2);
    ck_assert_uint_eq(clf_dtype_size(CLF_I64), 8);
    ck_assert_uint_eq(clf_dtype_size(CLF_DTYPE_COUNT), 0);
    int64_t shape[3] = {2, 3, 4};
    char buf[32];
    ck_assert_str_eq(clf_shape_str(shape, 3, buf, sizeof buf), "[2,3,4]");
    ck_assert_str_eq(clf_shape_str(shape, 0, buf, sizeof buf), "[]");
    ck_assert_str_eq(clf_shape_str(shape, 3, buf, 5), "[2,3"); /* truncated, terminated */
    clf_tensor t = {.ndim = 3, .shape = {2, 3, 4}};
    ck_assert_int_eq(clf_tensor_numel(&t), 24);
    t.ndim = 0;
    ck_assert_int_eq(clf_tensor_numel(&t), 1);
}
END_TEST

static clf_tensor mk(const char *name, clf_dtype dt, int ndim, const int64_t *shape, void *data)
{
    clf_tensor t = {0};
    snprintf(t.name, sizeof t.name, "%s", name);
    t.dtype = dt;
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t.shape[i] = shape[i];
    t.data = data;
    t.nbytes = (size_t)clf_tensor_numel(&t) * clf_dtype_size(dt);
    return t;
}

START_TEST(test_round_trip)
{
    clf_test_make_tmpdir("clf-st");
    float f32[6] = {1.5f, -2.0f, 0.0f, 3.25f, 1e-30f, -7.0f};
    uint16_t f16[4] = {0x3C00, 0xC000, 0x7BFF, 0x0001};
    uint16_t bf16[4] = {0x3F80, 0xC000, 0x4049, 0x0000};
    int32_t i32[3] = {-5, 0, 2147483647};
    int64_t i64[2] = {-3, 4000000000LL};
    uint8_t u8[5] = {0, 1, 127, 128, 255};
    float scalar = 42.0f;
    const int64_t s23[2] = {2, 3}, s4[1] = {4}, s22[2] = {2, 2}, s3[1] = {3}, s21[2] = {2, 1},
                  s5[1] = {5}, s03[2] = {0, 3}, s1[1] = {1};
    clf_tensor ts[] = {
        mk("f32", CLF_F32, 2, s23, f32),
        mk("half", CLF_F16, 1, s4, f16),
        mk("brain", CLF_BF16, 2, s22, bf16),
        mk("ints", CLF_I32, 1, s3, i32),
        mk("longs", CLF_I64, 2, s21, i64),
        mk("bytes", CLF_U8, 1, s5, u8),
        mk("scalar", CLF_F32, 0, NULL, &scalar),
        mk("empty", CLF_F32, 2, s03, NULL),
        mk("odd \"name\" \xC3\xA9", CLF_U8, 1, s1, u8),
    };
    int n = (int)(sizeof ts / sizeof ts[0]);
    const char *meta[] = {"format", "pt", "note", "tab\there \"quoted\" \xC3\xA9"};
    const char *p = clf_test_tmp_path("rt.safetensors");
    CLF_ASSERT_OK(clf_safetensors_write(p, ts, n, meta, 2));

    /* the header length keeps the data section 8-byte aligned */
    FILE *fp = fopen(p, "rb");
    unsigned char len8[8];
    ck_assert_uint_eq(fread(len8, 1, 8, fp), 8);
    fclose(fp);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | len8[i];
    ck_assert_uint_eq(hlen % 8, 0);

    clf_safetensors *f = NULL;
    CLF_ASSERT_OK(clf_safetensors_open(p, &f));
    ck_assert_str_eq(clf_safetensors_path(f), p);
    ck_assert_int_eq(clf_safetensors_count(f), n);
    for (int i = 0; i < n; i++) {
        const clf_tensor *g = clf_safetensors_at(f, i);
        ck_assert_str_eq(g->name, ts[i].name); /* the order given */
        ck_assert_int_eq(g->dtype, ts[i].dtype);
        ck_assert_int_eq(g->ndim, ts[i].ndim);
        for (int d = 0; d < g->ndim; d++)
            ck_assert_int_eq(g->shape[d], ts[i].shape[d]);
        ck_assert_uint_eq(g->nbytes, ts[i].nbytes);
        if (g->nbytes)
            ck_assert_int_eq(memcmp(g->data, ts[i].data, g->nbytes), 0);
        ck_assert_ptr_eq(clf_safetensors_find(f, ts[i].name), g);
    }
    ck_assert_ptr_null(clf_safetensors_at(f, n));
    ck_assert_ptr_null(clf_safetensors_find(f, "nope"));
    ck_assert_str_eq(clf_safetensors_meta(f, "format"), "pt");
    ck_assert_str_eq(clf_safetensors_meta(f, "note"), meta[3]);
    ck_assert_ptr_null(clf_safetensors_meta(f, "absent"));

    /* conversions */
    float out[6];
    CLF_ASSERT_OK(clf_tensor_to_f32(clf_safetensors_find(f, "f32"), out));
    ck_assert_int_eq(memcmp(out, f32, sizeof f32), 0);
    CLF_ASSERT_OK(clf_tensor_to_f32(clf_safetensors_find(f, "brain"), out));
    ck_assert(out[0] == 1.0f && out[1] == -2.0f && out[2] == 3.140625f && out[3] == 0.0f);
    CLF_ASSERT_OK(clf_tensor_to_f32(clf_safetensors_find(f, "scalar"), out));
    ck_assert(out[0] == 42.0f);
    CLF_ASSERT_OK(clf_tensor_to_f32(clf_safetensors_find(f, "empty"), out));
    int32_t iv[5];
    CLF_ASSERT_OK(clf_tensor_to_i32(clf_safetensors_find(f, "ints"), iv));
    ck_assert(iv[0] == -5 && iv[1] == 0 && iv[2] == 2147483647);
    CLF_ASSERT_OK(clf_tensor_to_i32(clf_safetensors_find(f, "bytes"), iv));
    ck_assert(iv[0] == 0 && iv[3] == 128 && iv[4] == 255);
    ck_assert_int_eq(clf_tensor_to_i32(clf_safetensors_find(f, "longs"), iv), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(),
                         "tensor 'longs': element 1 is 4000000000, outside the int32 range"),
                  "%s", clf_last_error());
    ck_assert_int_eq(clf_tensor_to_f32(clf_safetensors_find(f, "ints"), out), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "tensor 'ints' has dtype I32, expected F32"), "%s",
                  clf_last_error());
    ck_assert_int_eq(clf_tensor_to_i32(clf_safetensors_find(f, "f32"), iv), CLF_ERR_INPUT);
    clf_safetensors_close(f);

    int64_t small[2] = {-3, 4};
    clf_tensor l = mk("l", CLF_I64, 1, (int64_t[]){2}, small);
    CLF_ASSERT_OK(clf_tensor_to_i32(&l, iv));
    ck_assert(iv[0] == -3 && iv[1] == 4);

    /* no tensors at all, no metadata */
    CLF_ASSERT_OK(clf_safetensors_write(clf_test_tmp_path("none.safetensors"), NULL, 0, NULL, 0));
    CLF_ASSERT_OK(clf_safetensors_open(clf_test_tmp_path("none.safetensors"), &f));
    ck_assert_int_eq(clf_safetensors_count(f), 0);
    clf_safetensors_close(f);
    clf_test_remove_tmpdir();
}
END_TEST

static uint32_t bits_of(float x)
{
    uint32_t b;
    memcpy(&b, &x, 4);
    return b;
}

START_TEST(test_f16_hand_written)
{
    clf_test_make_tmpdir("clf-st");
    /* known halves, little-endian, after an unpadded header (so the data is unaligned) */
    const uint16_t h[] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x03FF, 0x0400,
                          0x7C00, 0xFC00, 0x8000, 0x3555, 0x7E00};
    const float want[] = {1.0f,
                          -2.0f,
                          65504.0f,
                          5.9604644775390625e-08f, /* 2^-24, smallest subnormal */
                          6.0975551605224609e-05f, /* 1023 * 2^-24, largest subnormal */
                          6.103515625e-05f,        /* 2^-14, smallest normal */
                          INFINITY,
                          -INFINITY,
                          -0.0f,
                          0.333251953125f};
    unsigned char data[sizeof h];
    for (size_t i = 0; i < sizeof h / 2; i++) {
        data[2 * i] = (unsigned char)(h[i] & 0xFF);
        data[2 * i + 1] = (unsigned char)(h[i] >> 8);
    }
    const char *hdr = "{\"h\":{\"dtype\":\"F16\",\"shape\":[11],\"data_offsets\":[0,22]}}";
    const char *p = clf_test_tmp_path("h.safetensors");
    write_st(p, strlen(hdr), hdr, data, sizeof data);
    clf_safetensors *f = NULL;
    CLF_ASSERT_OK(clf_safetensors_open(p, &f));
    float out[11];
    CLF_ASSERT_OK(clf_tensor_to_f32(clf_safetensors_find(f, "h"), out));
    for (int i = 0; i < 10; i++)
        ck_assert_msg(bits_of(out[i]) == bits_of(want[i]), "half 0x%04X -> %.9g, want %.9g", h[i],
                      (double)out[i], (double)want[i]);
    ck_assert(isnan(out[10]));
    ck_assert(bits_of(clf_half_to_float(0x3C00)) == bits_of(1.0f));
    clf_safetensors_close(f);

    /* every half converts to the value its fields define */
    for (unsigned v = 0; v < 65536; v++) {
        unsigned e = (v >> 10) & 31, m = v & 1023;
        float got = clf_half_to_float((uint16_t)v);
        if (e == 31) {
            ck_assert(m ? isnan(got) : isinf(got));
            continue;
        }
        double mag = e ? ldexp(1024 + m, (int)e - 25) : ldexp(m, -24);
        ck_assert_msg((double)got == ((v & 0x8000) ? -mag : mag), "0x%04X", v);
    }
    clf_test_remove_tmpdir();
}
END_TEST

/* float -> half rounds to nearest, ties to even, exactly as IEEE says: checked against the
 * compiler's own binary16 conversion (GCC's _Float16, done in software where the CPU has
 * no F16C) on every 251st float bit pattern from 2^-27 to 2^16 (the magnitudes where the
 * rounding happens) and every 65521st elsewhere, and against hand-made ties and edges. */
START_TEST(test_float_to_half)
{
    /* every half survives a round trip */
    for (unsigned v = 0; v < 65536; v++) {
        float f = clf_half_to_float((uint16_t)v);
        if (isnan(f))
            ck_assert(isnan(clf_half_to_float(clf_float_to_half(f))));
        else
            ck_assert_msg(clf_float_to_half(f) == v, "0x%04X -> %.9g -> 0x%04X", v, (double)f,
                          clf_float_to_half(f));
    }
    /* ties: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10 and goes to the even 1;
     * 1 + 3 * 2^-11 goes up to the even 1 + 2^-9 */
    ck_assert_uint_eq(clf_float_to_half(1.0f + 0x1p-11f), 0x3C00);
    ck_assert_uint_eq(clf_float_to_half(1.0f + 0x3p-11f), 0x3C02);
    ck_assert_uint_eq(clf_float_to_half(0x1p-25f), 0x0000);        /* half the smallest subnormal */
    ck_assert_uint_eq(clf_float_to_half(0x1.000002p-25f), 0x0001); /* just above it */
    ck_assert_uint_eq(clf_float_to_half(0x3p-25f), 0x0002);        /* 1.5 units: to even 2 */
    ck_assert_uint_eq(clf_float_to_half(65504.0f), 0x7BFF);
    ck_assert_uint_eq(clf_float_to_half(65519.99f), 0x7BFF);
    ck_assert_uint_eq(clf_float_to_half(65520.0f), 0x7C00);
    ck_assert_uint_eq(clf_float_to_half(-INFINITY), 0xFC00);
    ck_assert(clf_float_fits_half(-65519.99f) && !clf_float_fits_half(65520.0f));
    ck_assert(!clf_float_fits_half(NAN) && !clf_float_fits_half(INFINITY));
#if defined(__FLT16_MAX__)
    for (uint64_t bits = 0; bits <= 0xFFFFFFFFu;) {
        uint32_t b32 = (uint32_t)bits, mag = b32 & 0x7FFFFFFFu;
        bits += mag >= 0x32000000u && mag < 0x47800000u ? 251 : 65521;
        float f;
        memcpy(&f, &b32, sizeof f);
        if (isnan(f))
            continue;
        _Float16 ref = (_Float16)f;
        uint16_t want;
        memcpy(&want, &ref, sizeof want);
        ck_assert_msg(clf_float_to_half(f) == want, "%a -> 0x%04X, want 0x%04X", (double)f,
                      clf_float_to_half(f), want);
    }
#endif
}
END_TEST

typedef struct corrupt_case {
    const char *what;
    const char *header; /* NULL: raw bytes below */
    int64_t hlen;       /* -1: the header's length */
    size_t data_len;
    const char *want;
} corrupt_case;

static const corrupt_case corrupt[] = {
    {"bad JSON", "{\"x\":{\"dtype\":\"F32\",", -1, 0,
     "c.safetensors: header: invalid JSON at byte"},
    {"not an object", "[1,2]", -1, 0, "not a safetensors file (the header does not start with"},
    {"header length beyond file", "{}", 1000, 0,
     "c.safetensors: header length 1000 is beyond the end of the file (10 bytes)"},
    {"bad dtype", "{\"x\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", -1, 8,
     "c.safetensors: tensor 'x' has dtype 'F64', which clformer does not read"},
    {"dtype not a string", "{\"x\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 4,
     "tensor 'x': dtype must be a string, not number"},
    {"offsets beyond data", "{\"x\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}",
     -1, 12,
     "c.safetensors: tensor 'x' has data offsets [0,24) beyond the data section (12 bytes)"},
    {"size mismatch", "{\"x\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,12]}}", -1, 24,
     "c.safetensors: tensor 'x' has data offsets [0,12) but shape [2,3] F32 needs 24 bytes"},
    {"end before begin", "{\"x\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,2]}}", -1, 8,
     "tensor 'x' has data offsets [4,2), end < begin"},
    {"negative offset", "{\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[-1,0]}}", -1, 8,
     "tensor 'x': data_offsets must be [begin, end]"},
    {"three offsets", "{\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}", -1, 8,
     "tensor 'x': data_offsets must be [begin, end]"},
    {"negative dim", "{\"x\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", -1, 8,
     "tensor 'x': shape entry 0 is not a non-negative integer"},
    {"fractional dim", "{\"x\":{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,1]}}", -1, 8,
     "tensor 'x': shape entry 0 is not a non-negative integer"},
    {"too many dims",
     "{\"x\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", -1, 8,
     "tensor 'x' has 9 dimensions, at most 8 allowed"},
    {"huge shape",
     "{\"x\":{\"dtype\":\"F32\",\"shape\":[2147483647,2147483647,2147483647],"
     "\"data_offsets\":[0,0]}}",
     -1, 0, "tensor 'x' has shape [2147483647,2147483647,2147483647], too large to address"},
    /* the limits (README, "Limits") */
    {"dim over the limit",
     "{\"x\":{\"dtype\":\"U8\",\"shape\":[0,2147483648],\"data_offsets\":[0,0]}}", -1, 0,
     "tensor 'x': dimension 1 is 2147483648, more than the limit of 2147483647"},
    {"header over the limit", "{}", (int64_t)CLF_SAFETENSORS_HEADER_MAX + 1, 0,
     "c.safetensors: header length 16777217, more than the limit of 16777216 bytes"},
    {"missing field", "{\"x\":{\"dtype\":\"U8\",\"shape\":[1]}}", -1, 8,
     "tensor 'x': header entry lacks 'data_offsets'"},
    {"unknown field",
     "{\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"strides\":[1]}}", -1, 8,
     "tensor 'x': unknown header field 'strides'"},
    {"entry not an object", "{\"x\":[1]}", -1, 0,
     "tensor 'x': header entry must be an object with dtype, shape and data_offsets, not array"},
    {"overlap",
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
     -1, 16, "tensors 'a' [0,8) and 'b' [4,12) overlap"},
    {"duplicate name",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
     "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
     -1, 8, "duplicate key \"a\""},
    {"metadata not strings", "{\"__metadata__\":{\"step\":5}}", -1, 0,
     "c.safetensors: __metadata__ entry 'step' must be a string, not number"},
    {"metadata not an object", "{\"__metadata__\":[]}", -1, 0,
     "__metadata__ must be an object of strings, not array"},
    {"NUL in name", "{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", -1,
     8, "object key \"a\" contains a NUL character"},
};

START_TEST(test_corrupt_files)
{
    const corrupt_case *c = &corrupt[_i];
    clf_test_make_tmpdir("clf-st");
    const char *p = clf_test_tmp_path("c.safetensors");
    unsigned char zeros[64] = {0};
    write_st(p, c->hlen < 0 ? strlen(c->header) : (uint64_t)c->hlen, c->header, zeros, c->data_len);
    clf_safetensors *f = (clf_safetensors *)1;
    clf_status st = clf_safetensors_open(p, &f);
    ck_assert_msg(st == CLF_ERR_INPUT, "%s: accepted (%d)", c->what, (int)st);
    ck_assert_ptr_null(f);
    ck_assert_msg(strncmp(clf_last_error(), p, strlen(p)) == 0, "%s: message lacks the path: %s",
                  c->what, clf_last_error());
    ck_assert_msg(strstr(clf_last_error(), c->want), "%s: got \"%s\", want \"%s\"", c->what,
                  clf_last_error(), c->want);
    clf_test_remove_tmpdir();
}
END_TEST

START_TEST(test_truncated_files)
{
    clf_test_make_tmpdir("clf-st");
    const char *p = clf_test_tmp_path("t.safetensors");
    clf_safetensors *f = NULL;
    clf_test_write_file(p, "abc", 3);
    ck_assert_int_eq(clf_safetensors_open(p, &f), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "t.safetensors: not a safetensors file (3 bytes"), "%s",
                  clf_last_error());
    clf_test_write_file(p, "", 0);
    ck_assert_int_eq(clf_safetensors_open(p, &f), CLF_ERR_INPUT);

    /* a good file cut short inside its data: offsets now run past the end */
    float x[6] = {1, 2, 3, 4, 5, 6};
    clf_tensor t = mk("x", CLF_F32, 2, (int64_t[]){2, 3}, x);
    CLF_ASSERT_OK(clf_safetensors_write(p, &t, 1, NULL, 0));
    struct stat sb;
    ck_assert_int_eq(stat(p, &sb), 0);
    ck_assert_int_eq(truncate(p, sb.st_size - 4), 0);
    ck_assert_int_eq(clf_safetensors_open(p, &f), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "tensor 'x' has data offsets [0,24) beyond the data "
                                           "section (20 bytes)"),
                  "%s", clf_last_error());
    /* ... and cut inside its header */
    ck_assert_int_eq(truncate(p, 20), 0);
    ck_assert_int_eq(clf_safetensors_open(p, &f), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "is beyond the end of the file (20 bytes)"), "%s",
                  clf_last_error());

    /* missing file and directory: I/O errors */
    ck_assert_int_eq(clf_safetensors_open(clf_test_tmp_path("absent.safetensors"), &f), CLF_ERR_IO);
    ck_assert_msg(strstr(clf_last_error(), "absent.safetensors: cannot open: No such file"), "%s",
                  clf_last_error());
    ck_assert_int_eq(clf_safetensors_open(clf_test_tmpdir(), &f), CLF_ERR_IO);
    ck_assert_ptr_null(f);
    clf_test_remove_tmpdir();
}
END_TEST

START_TEST(test_write_refuses_bad_tensors)
{
    clf_test_make_tmpdir("clf-st");
    const char *p = clf_test_tmp_path("w.safetensors");
    float x[6] = {0};
    clf_tensor t[2] = {mk("x", CLF_F32, 2, (int64_t[]){2, 3}, x),
                       mk("x", CLF_F32, 1, (int64_t[]){6}, x)};
    t[0].nbytes = 20;
    ck_assert_int_eq(clf_safetensors_write(p, t, 1, NULL, 0), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "tensor 'x' has 20 bytes but shape [2,3] F32 needs 24"),
                  "%s", clf_last_error());
    t[0].nbytes = 24;
    ck_assert_int_eq(clf_safetensors_write(p, t, 2, NULL, 0), CLF_ERR_INPUT);
    ck_assert_msg(strstr(clf_last_error(), "tensor name 'x' appears twice"), "%s",
                  clf_last_error());
    snprintf(t[1].name, sizeof t[1].name, "__metadata__");
    ck_assert_int_eq(clf_safetensors_write(p, t, 2, NULL, 0), CLF_ERR_INPUT);
    ck_assert_int_eq(clf_test_tmpdir_entries(), 0); /* nothing written */
    clf_test_remove_tmpdir();
}
END_TEST

static void read_first_float(const char *p, float *v)
{
    clf_safetensors *f = NULL;
    CLF_ASSERT_OK(clf_safetensors_open(p, &f));
    CLF_ASSERT_OK(clf_tensor_to_f32(clf_safetensors_at(f, 0), v));
    clf_safetensors_close(f);
}

struct big_write {
    const char *path;
    const clf_tensor *tensor;
};

static clf_status write_big(void *arg)
{
    const struct big_write *bw = arg;
    return clf_safetensors_write(bw->path, bw->tensor, 1, NULL, 0);
}

START_TEST(test_atomic_write)
{
    clf_test_make_tmpdir("clf-st");
    const char *p = clf_test_tmp_path("w.safetensors");
    char path[512];
    snprintf(path, sizeof path, "%s", p);
    float one[1] = {1.0f}, two[1] = {2.0f}, v;
    float big[4096] = {0};
    clf_tensor t1 = mk("v", CLF_F32, 1, (int64_t[]){1}, one);
    clf_tensor t2 = mk("v", CLF_F32, 1, (int64_t[]){1}, two);
    clf_tensor tb = mk("v", CLF_F32, 1, (int64_t[]){4096}, big);

    CLF_ASSERT_OK(clf_safetensors_write(path, &t1, 1, NULL, 0));
    ck_assert_int_eq(clf_test_tmpdir_entries(), 1); /* no temporary file left behind */
    CLF_ASSERT_OK(clf_safetensors_write(path, &t2, 1, NULL, 0));
    ck_assert_int_eq(clf_test_tmpdir_entries(), 1);
    read_first_float(path, &v);
    ck_assert(v == 2.0f);

    /* a write into a directory that does not exist fails and creates nothing */
    char nodir[600];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir/w.safetensors", clf_test_tmpdir());
    ck_assert_int_eq(clf_safetensors_write(nodir, &t1, 1, NULL, 0), CLF_ERR_IO);
    ck_assert_msg(strstr(clf_last_error(), "cannot create"), "%s", clf_last_error());

    /* the temporary file cannot be created: the old file stays as it was */
    char tmpname[600];
    snprintf(tmpname, sizeof tmpname, "%s.tmp.%ld", path, (long)getpid());
    ck_assert_int_eq(mkdir(tmpname, 0700), 0);
    ck_assert_int_eq(clf_safetensors_write(path, &t1, 1, NULL, 0), CLF_ERR_IO);
    ck_assert_msg(strstr(clf_last_error(), path), "%s", clf_last_error());
    ck_assert_int_eq(rmdir(tmpname), 0);
    read_first_float(path, &v);
    ck_assert(v == 2.0f);

    /* a write that fails halfway (file size limit): the old file stays, the partial
     * temporary file is removed. No check assertion runs under the limit: Check's own
     * message file is subject to it too. */
    struct big_write bw = {path, &tb};
    ck_assert_int_eq(clf_test_write_under_size_limit(write_big, &bw), CLF_ERR_IO);
    ck_assert_msg(strstr(clf_last_error(), "cannot write"), "%s", clf_last_error());
    ck_assert_int_eq(clf_test_tmpdir_entries(), 1);
    read_first_float(path, &v);
    ck_assert(v == 2.0f);
    clf_test_remove_tmpdir();
}
END_TEST

static long resident_pages(void)
{
    long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fscanf(f, "%ld %ld", &size, &resident), 2);
    fclose(f);
    return resident;
}

/* clf_safetensors_drop_pages: a tensor's pages leave the resident set, and reading it again
 * gives the same values (the pages come back from the file). Its neighbours, which share
 * its first and last pages, are untouched. */
START_TEST(test_drop_pages)
{
    clf_test_make_tmpdir("clf-st");
    const char *p = clf_test_tmp_path("d.safetensors");
    enum { N = 1 << 20 }; /* 4 MiB: a thousand pages, far above the counters' slack */
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *got = malloc(N * sizeof *got);
    for (int i = 0; i < N; i++) {
        a[i] = (float)i * 0.5f - 7.0f;
        b[i] = -(float)i;
    }
    float small[3] = {1.5f, 2.5f, 3.5f};
    clf_tensor ts[3] = {mk("a", CLF_F32, 1, (int64_t[]){N}, a),
                        mk("s", CLF_F32, 1, (int64_t[]){3}, small),
                        mk("b", CLF_F32, 1, (int64_t[]){N}, b)};
    CLF_ASSERT_OK(clf_safetensors_write(p, ts, 3, NULL, 0));
    clf_safetensors *f = NULL;
    CLF_ASSERT_OK(clf_safetensors_open(p, &f));
    const clf_tensor *ta = clf_safetensors_find(f, "a"), *tb = clf_safetensors_find(f, "b");
    const clf_tensor *tsm = clf_safetensors_find(f, "s");
    for (int round = 0; round < 2; round++) {
        CLF_ASSERT_OK(clf_tensor_to_f32(ta, got));
        ck_assert(memcmp(got, a, N * sizeof *a) == 0);
        const long before = resident_pages();
        clf_safetensors_drop_pages(f, ta);
        const long after = resident_pages();
        /* the kernel's RSS counters are batched per thread (up to 64 events behind) */
        const long pages = (long)(N * sizeof *a / (size_t)sysconf(_SC_PAGESIZE));
        ck_assert_msg(before - after >= pages - 2 - 128, "resident pages %ld -> %ld, %ld dropped",
                      before, after, pages);
        CLF_ASSERT_OK(clf_tensor_to_f32(tsm, got));
        ck_assert(memcmp(got, small, sizeof small) == 0);
        clf_safetensors_drop_pages(f, tsm); /* within one page: nothing to drop */
        CLF_ASSERT_OK(clf_tensor_to_f32(tb, got));
        ck_assert(memcmp(got, b, N * sizeof *b) == 0);
        clf_safetensors_drop_pages(f, tb);
    }
    clf_tensor other = mk("x", CLF_F32, 1, (int64_t[]){N}, a); /* not in the mapping: ignored */
    clf_safetensors_drop_pages(f, &other);
    ck_assert(a[N - 1] == (float)(N - 1) * 0.5f - 7.0f);
    clf_safetensors_close(f);
    free(a);
    free(b);
    free(got);
    clf_test_remove_tmpdir();
}
END_TEST

CLF_TEST_SUITE_MAIN("safetensors",
                    CLF_TCASE("json", 0, {test_json_values}, {test_json_strings_and_unicode},
                              {test_json_numbers}, {test_json_errors, CLF_LOOPS(bad_cases)},
                              {test_json_big_object_and_depth}, {test_json_nul_byte},
                              {test_json_writer}, {test_json_parse_file}, {test_json_string_limit},
                              {test_vocab_size_limit}),
                    CLF_TCASE("safetensors", 0, {test_dtype_and_shape_helpers}, {test_round_trip},
                              {test_f16_hand_written}, {test_float_to_half},
                              {test_corrupt_files, CLF_LOOPS(corrupt)}, {test_truncated_files},
                              {test_tensor_count_limit}, {test_write_refuses_bad_tensors},
                              {test_atomic_write}, {test_drop_pages}))
