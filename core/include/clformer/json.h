/* clformer/json.h - reading a whole JSON file under clformer's rules, for programs that read
 * JSON next to clformer's own files (clformer import marian: config.json).
 *
 * The reader is Jansson with the limits and messages of every JSON file clformer reads
 * (safetensors headers, tokenizer.json, vocab.json; README, "Limits"): strict RFC 8259,
 * duplicate keys refused, nesting deeper than 512 levels and strings of more than 1 MiB
 * refused before Jansson allocates, and one-line errors naming the file, the byte, the line
 * and column, and the reason:
 *   "hf/config.json: invalid JSON at byte 15 (line 1, column 16): ..."
 * The tree is Jansson's: include <jansson.h> to read it, json_decref it when done.
 *
 *     json_t *root;
 *     if ((st = clf_json_parse_file("hf/config.json", 1 << 20, &root)) != CLF_OK) return st;
 *     ... json_object_get(root, "vocab_size") ...
 *     json_decref(root);
 */
#ifndef CLFORMER_JSON_H
#define CLFORMER_JSON_H

#include <stddef.h>

#include "clformer/export.h"
#include "clformer/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Jansson's json_t (its typedef names this struct), declared here so that this header does
 * not need <jansson.h>. */
struct json_t;

/* Reads (clf_fs_read_all: at most max_len bytes, else CLF_ERR_INPUT naming the limit) and
 * parses a whole file. On success *out holds the tree (json_decref it); on failure NULL,
 * with CLF_ERR_IO when the file cannot be read and CLF_ERR_INPUT when it is not valid JSON
 * under the rules above. */
CLF_API clf_status clf_json_parse_file(const char *path, size_t max_len, struct json_t **out);

#ifdef __cplusplus
}
#endif
#endif
