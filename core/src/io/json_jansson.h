/* json_jansson.h - reading JSON with Jansson under clformer's rules and error messages.
 * Internal to libclformer (but clf_json_parse_file, clformer/json.h): safetensors headers and
 * tokenizers-library files. Writers build a json_t and call json_dumps themselves; Jansson
 * does the escaping.
 *
 * clf_json_parse loads with JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, so
 * Jansson's strict RFC 8259 applies: no comments, trailing commas, NaN/Infinity, control
 * characters or invalid UTF-8 in strings, lone surrogates, duplicate keys in one object.
 * Where Jansson 2.14 differs from the rules clformer's own parser had, the old rule is kept:
 *   - a leading UTF-8 byte order mark is skipped (RFC 8259 lets parsers ignore it; Jansson
 *     refuses it);
 *   - nesting deeper than CLF_JSON_MAX_DEPTH levels is refused (Jansson allows 2048), and so
 *     is a string (key or value) of more than CLF_JSON_STRING_MAX bytes as written: both
 *     found by one scan of the text before Jansson allocates anything;
 *   - an integer outside int64 is read as a real (Jansson refuses it as "too big integer";
 *     each costs Jansson one more parse, so the 17th in one document is refused as out of
 *     range): json_is_integer() holds exactly for numbers written without fraction or
 *     exponent that fit int64;
 *   - a string may hold "\u0000": json_string_length() is its exact length.
 *   - a raw NUL byte is refused wherever it is (Jansson 2.14 skips one after a number).
 * One rule could not be kept: an object key holding "\u0000" is refused (Jansson's parser
 * does not take it); clformer's parser read it. No file clformer reads needs one.
 *
 * Errors (CLF_ERR_INPUT through clf_error) read as they did:
 *   "<name>: invalid JSON at byte 17 (line 2, column 5): expected ':' after an object key,
 *    found character '1'"
 * (line and column 1-based, the column in bytes), the byte being where the offending token
 * starts. Nesting too deep and a string too long name where the container or the string
 * starts ("<name>: invalid JSON at byte 512 (line 1, column 513): nesting deeper than 512
 * levels").
 *
 *     json_t *root;
 *     if ((st = clf_json_parse(text, len, path, &root)) != CLF_OK) return st;
 *     json_t *model = json_object_get(root, "model");
 *     ...
 *     json_decref(root);
 */
#ifndef CLF_JSON_JANSSON_H
#define CLF_JSON_JANSSON_H

#include <jansson.h>
#include <stddef.h>

#include "clformer/json.h"
#include "clformer/status.h"

/* The JSON reader's limits (README, "Limits"). Containers nested deeper than this are
 * refused (real files nest fewer than 10). */
#define CLF_JSON_MAX_DEPTH 512
/* A string longer than this (bytes between its quotes, escapes as written) is refused: the
 * longest a clformer file holds is a config in safetensors metadata, a few KB. */
#define CLF_JSON_STRING_MAX (1 << 20)

/* Parses text[0..len) (no NUL needed). name prefixes error messages (a path, or
 * "<path>: header"). On success *out holds the tree (json_decref it); on failure NULL. */
clf_status clf_json_parse(const char *text, size_t len, const char *name, json_t **out);
/* clf_json_parse_file (clformer/json.h, public: the CLI reads Marian's config.json with it)
 * reads a whole file (clf_fs_read_all) and parses it with clf_json_parse. */
/* "null", "boolean", "number", "string", "array", "object", for messages
 * (NULL, an absent member: "null"). */
const char *clf_json_type_name(const json_t *v);

#endif
