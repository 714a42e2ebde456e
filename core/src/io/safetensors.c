/* safetensors files: read by mmap with every header field checked, written atomically.
 *
 * Layout: 8-byte little-endian header length N, N bytes of JSON header (padded with
 * spaces), then the data section. The header maps each tensor name to
 *   {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
 * with offsets relative to the data section, plus an optional "__metadata__" object of
 * string values. Tensor data in a mapping may be unaligned: read it with memcpy (as
 * clf_tensor_to_f32 / clf_tensor_to_i32 do, numeric/convert.c). This file reads and writes
 * the format only; the numbers in it are numeric/'s. */
#include "clformer/tensor.h"
#include "clformer/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/json_jansson.h"
#include "io/safetensors_internal.h"

/* The writer pads the header so that the data section starts 8-byte aligned. */
#define HEADER_ALIGN 8

/* Bytes that shape/dtype need, or -1 when that overflows. */
static int64_t shape_bytes(const int64_t *shape, int ndim, clf_dtype dt)
{
    int64_t n = (int64_t)clf_dtype_size(dt);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return -1;
        if (shape[i] != 0 && n > INT64_MAX / shape[i])
            return -1;
        n *= shape[i];
    }
    return n;
}

/* ---- reading ---- */

struct clf_safetensors {
    char *path;
    void *map;
    size_t map_size;
    json_t *header;
    int count;
    clf_tensor *tensors;
    json_t *meta; /* the __metadata__ object, or NULL */
};

static int dtype_from_name(const char *s, clf_dtype *out)
{
    for (int i = 0; i < CLF_DTYPE_COUNT; i++)
        if (strcmp(s, clf_dtype_name((clf_dtype)i)) == 0) {
            *out = (clf_dtype)i;
            return 1;
        }
    return 0;
}

/* Reads a non-negative JSON integer. */
static int json_uint(const json_t *v, int64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return 0;
    *out = json_integer_value(v);
    return 1;
}

/* Checks one header entry and fills t (data still relative: begin in t->data's place). */
static clf_status parse_entry(const char *path, const char *name, size_t name_len, json_t *v,
                              uint64_t data_size, clf_tensor *t, uint64_t *begin_out)
{
    /* A name cannot hold a NUL: the JSON reader refuses such keys. */
    if (name_len >= CLF_TENSOR_NAME_MAX)
        return clf_error(CLF_ERR_INPUT, "%s: tensor name '%.64s...' is longer than %d bytes", path,
                         name, CLF_TENSOR_NAME_MAX - 1);
    memcpy(t->name, name, name_len + 1);
    if (!json_is_object(v))
        return clf_error(CLF_ERR_INPUT,
                         "%s: tensor '%s': header entry must be an object with dtype, shape "
                         "and data_offsets, not %s",
                         path, name, clf_json_type_name(v));
    for (void *it = json_object_iter(v); it; it = json_object_iter_next(v, it)) {
        const char *key = json_object_iter_key(it);
        if (strcmp(key, "dtype") != 0 && strcmp(key, "shape") != 0 &&
            strcmp(key, "data_offsets") != 0)
            return clf_error(CLF_ERR_INPUT,
                             "%s: tensor '%s': unknown header field '%s' (expected dtype, "
                             "shape, data_offsets)",
                             path, name, key);
    }
    const json_t *dt = json_object_get(v, "dtype");
    const json_t *shape = json_object_get(v, "shape");
    const json_t *offs = json_object_get(v, "data_offsets");
    if (!dt || !shape || !offs)
        return clf_error(CLF_ERR_INPUT, "%s: tensor '%s': header entry lacks '%s'", path, name,
                         !dt      ? "dtype"
                         : !shape ? "shape"
                                  : "data_offsets");
    if (!json_is_string(dt))
        return clf_error(CLF_ERR_INPUT, "%s: tensor '%s': dtype must be a string, not %s", path,
                         name, clf_json_type_name(dt));
    if (!dtype_from_name(json_string_value(dt), &t->dtype))
        return clf_error(CLF_ERR_INPUT,
                         "%s: tensor '%s' has dtype '%.32s', which clformer does not read "
                         "(F32, F16, BF16, I32, I64, U8, I8)",
                         path, name, json_string_value(dt));
    if (!json_is_array(shape))
        return clf_error(CLF_ERR_INPUT, "%s: tensor '%s': shape must be an array, not %s", path,
                         name, clf_json_type_name(shape));
    if (json_array_size(shape) > CLF_MAX_DIMS)
        return clf_error(CLF_ERR_INPUT, "%s: tensor '%s' has %zu dimensions, at most %d allowed",
                         path, name, json_array_size(shape), CLF_MAX_DIMS);
    t->ndim = (int)json_array_size(shape);
    for (int i = 0; i < t->ndim; i++) {
        if (!json_uint(json_array_get(shape, (size_t)i), &t->shape[i]))
            return clf_error(CLF_ERR_INPUT,
                             "%s: tensor '%s': shape entry %d is not a non-negative integer", path,
                             name, i);
        if (t->shape[i] > CLF_SAFETENSORS_DIM_MAX)
            return clf_error(CLF_ERR_INPUT,
                             "%s: tensor '%s': dimension %d is %lld, more than the limit of %d",
                             path, name, i, (long long)t->shape[i], CLF_SAFETENSORS_DIM_MAX);
    }
    int64_t begin, end;
    if (!json_is_array(offs) || json_array_size(offs) != 2 ||
        !json_uint(json_array_get(offs, 0), &begin) || !json_uint(json_array_get(offs, 1), &end))
        return clf_error(CLF_ERR_INPUT,
                         "%s: tensor '%s': data_offsets must be [begin, end], two non-negative "
                         "integers",
                         path, name);
    char sbuf[160];
    clf_shape_str(t->shape, t->ndim, sbuf, sizeof sbuf);
    if (end < begin)
        return clf_error(CLF_ERR_INPUT, "%s: tensor '%s' has data offsets [%lld,%lld), end < begin",
                         path, name, (long long)begin, (long long)end);
    if ((uint64_t)end > data_size)
        return clf_error(CLF_ERR_INPUT,
                         "%s: tensor '%s' has data offsets [%lld,%lld) beyond the data section "
                         "(%llu bytes): the file is truncated or corrupt",
                         path, name, (long long)begin, (long long)end,
                         (unsigned long long)data_size);
    int64_t need = shape_bytes(t->shape, t->ndim, t->dtype);
    if (need < 0)
        return clf_error(CLF_ERR_INPUT, "%s: tensor '%s' has shape %s, too large to address", path,
                         name, sbuf);
    if (need != end - begin)
        return clf_error(CLF_ERR_INPUT,
                         "%s: tensor '%s' has data offsets [%lld,%lld) but shape %s %s needs "
                         "%lld bytes",
                         path, name, (long long)begin, (long long)end, sbuf,
                         clf_dtype_name(t->dtype), (long long)need);
    t->nbytes = (size_t)need;
    *begin_out = (uint64_t)begin;
    return CLF_OK;
}

static clf_status check_metadata(const char *path, json_t *meta)
{
    if (!json_is_object(meta))
        return clf_error(CLF_ERR_INPUT, "%s: __metadata__ must be an object of strings, not %s",
                         path, clf_json_type_name(meta));
    for (void *it = json_object_iter(meta); it; it = json_object_iter_next(meta, it)) {
        const json_t *v = json_object_iter_value(it);
        if (!json_is_string(v))
            return clf_error(CLF_ERR_INPUT, "%s: __metadata__ entry '%s' must be a string, not %s",
                             path, json_object_iter_key(it), clf_json_type_name(v));
    }
    return CLF_OK;
}

typedef struct span {
    uint64_t begin, end;
    int index;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Refuses tensors whose byte ranges overlap (empty tensors overlap nothing). */
static clf_status check_overlap(const clf_safetensors *f, span *spans, int n)
{
    qsort(spans, (size_t)n, sizeof *spans, span_cmp);
    int prev = -1;
    for (int i = 0; i < n; i++) {
        if (spans[i].begin == spans[i].end)
            continue;
        if (prev >= 0 && spans[i].begin < spans[prev].end)
            return clf_error(
                CLF_ERR_INPUT, "%s: tensors '%s' [%llu,%llu) and '%s' [%llu,%llu) overlap", f->path,
                f->tensors[spans[prev].index].name, (unsigned long long)spans[prev].begin,
                (unsigned long long)spans[prev].end, f->tensors[spans[i].index].name,
                (unsigned long long)spans[i].begin, (unsigned long long)spans[i].end);
        prev = i;
    }
    return CLF_OK;
}

static clf_status parse_header(clf_safetensors *f, const unsigned char *hdr, uint64_t hlen,
                               uint64_t data_size)
{
    clf_status st;
    size_t name_size = strlen(f->path) + sizeof ": header";
    char *name = malloc(name_size);
    if (!name)
        return clf_error(CLF_ERR_NOMEM, "%s: out of memory reading the header", f->path);
    snprintf(name, name_size, "%s: header", f->path);
    st = clf_json_parse((const char *)hdr, (size_t)hlen, name, &f->header);
    free(name);
    if (st != CLF_OK)
        return st;
    json_t *root = f->header;
    if (!json_is_object(root))
        return clf_error(CLF_ERR_INPUT, "%s: the header must be a JSON object, not %s", f->path,
                         clf_json_type_name(root));
    const size_t n_entries =
        json_object_size(root) - (json_object_get(root, "__metadata__") != NULL);
    if (n_entries > CLF_SAFETENSORS_TENSORS_MAX)
        return clf_error(CLF_ERR_INPUT, "%s: %zu tensors, more than the limit of %d", f->path,
                         n_entries, CLF_SAFETENSORS_TENSORS_MAX);
    const int n = (int)n_entries;
    f->tensors = calloc(n ? (size_t)n : 1, sizeof *f->tensors);
    span *spans = calloc(n ? (size_t)n : 1, sizeof *spans);
    if (!f->tensors || !spans) {
        free(spans);
        return clf_error(CLF_ERR_NOMEM, "%s: out of memory reading the header", f->path);
    }
    const unsigned char *data = hdr + hlen;
    for (void *it = json_object_iter(root); it; it = json_object_iter_next(root, it)) {
        const char *key = json_object_iter_key(it);
        json_t *v = json_object_iter_value(it);
        if (strcmp(key, "__metadata__") == 0) {
            f->meta = v;
            if ((st = check_metadata(f->path, f->meta)) != CLF_OK)
                goto done;
            continue;
        }
        clf_tensor *t = &f->tensors[f->count];
        uint64_t begin = 0;
        if ((st = parse_entry(f->path, key, json_object_iter_key_len(it), v, data_size, t,
                              &begin)) != CLF_OK)
            goto done;
        t->data = (void *)(data + begin);
        spans[f->count] = (span){begin, begin + t->nbytes, f->count};
        f->count++;
    }
    st = check_overlap(f, spans, f->count);
done:
    free(spans);
    return st;
}

clf_status clf_safetensors_open(const char *path, clf_safetensors **out)
{
    clf_status st = CLF_OK;
    *out = NULL;
    clf_safetensors *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return clf_error(CLF_ERR_NOMEM, "%s: out of memory", path);
    }
    /* a FIFO, a device or a directory is refused before anything is read (or waited for) */
    int fd;
    uint64_t size;
    if ((st = clf_fs_open_regular(path, SIZE_MAX, &fd, &size)) != CLF_OK)
        goto fail;
    if (size < 8) {
        st = clf_error(CLF_ERR_INPUT,
                       "%s: not a safetensors file (%lld bytes, shorter than the 8-byte header "
                       "length)",
                       path, (long long)size);
        close(fd);
        goto fail;
    }
    f->map_size = (size_t)size;
    f->map = mmap(NULL, f->map_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        st = clf_error(CLF_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
        goto fail;
    }
    const unsigned char *b = f->map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | b[i];
    uint64_t rest = (uint64_t)f->map_size - 8;
    if (hlen > CLF_SAFETENSORS_HEADER_MAX) {
        st = clf_error(CLF_ERR_INPUT, "%s: header length %llu, more than the limit of %llu bytes",
                       path, (unsigned long long)hlen,
                       (unsigned long long)CLF_SAFETENSORS_HEADER_MAX);
        goto fail;
    }
    if (hlen > rest) {
        st = clf_error(CLF_ERR_INPUT,
                       "%s: header length %llu is beyond the end of the file (%llu bytes): "
                       "truncated or not a safetensors file",
                       path, (unsigned long long)hlen, (unsigned long long)f->map_size);
        goto fail;
    }
    if (hlen == 0 || b[8] != '{') {
        st = clf_error(CLF_ERR_INPUT,
                       "%s: not a safetensors file (the header does not start with '{')", path);
        goto fail;
    }
    if ((st = parse_header(f, b + 8, hlen, rest - hlen)) != CLF_OK)
        goto fail;
    *out = f;
    return CLF_OK;
fail:
    clf_safetensors_close(f);
    return st;
}

void clf_safetensors_close(clf_safetensors *f)
{
    if (!f)
        return;
    if (f->map)
        munmap(f->map, f->map_size);
    json_decref(f->header);
    free(f->tensors);
    free(f->path);
    free(f);
}

int clf_safetensors_count(const clf_safetensors *f)
{
    return f->count;
}

const clf_tensor *clf_safetensors_at(const clf_safetensors *f, int i)
{
    if (i < 0 || i >= f->count)
        return NULL;
    return &f->tensors[i];
}

const clf_tensor *clf_safetensors_find(const clf_safetensors *f, const char *name)
{
    for (int i = 0; i < f->count; i++)
        if (strcmp(f->tensors[i].name, name) == 0)
            return &f->tensors[i];
    return NULL;
}

const char *clf_safetensors_meta(const clf_safetensors *f, const char *key)
{
    return json_string_value(json_object_get(f->meta, key));
}

const char *clf_safetensors_path(const clf_safetensors *f)
{
    return f->path;
}

/* ---- writing ---- */

static clf_status check_tensors(const char *path, const clf_tensor *ts, int n)
{
    for (int i = 0; i < n; i++) {
        const clf_tensor *t = &ts[i];
        if (memchr(t->name, '\0', CLF_TENSOR_NAME_MAX) == NULL)
            return clf_error(CLF_ERR_INPUT, "%s: tensor %d: name not NUL-terminated", path, i);
        if (strcmp(t->name, "__metadata__") == 0)
            return clf_error(CLF_ERR_INPUT, "%s: '__metadata__' is not a valid tensor name", path);
        if ((int)t->dtype < 0 || t->dtype >= CLF_DTYPE_COUNT)
            return clf_error(CLF_ERR_INPUT, "%s: tensor '%s' has an invalid dtype %d", path,
                             t->name, (int)t->dtype);
        if (t->ndim < 0 || t->ndim > CLF_MAX_DIMS)
            return clf_error(CLF_ERR_INPUT, "%s: tensor '%s' has %d dimensions (0 to %d allowed)",
                             path, t->name, t->ndim, CLF_MAX_DIMS);
        int64_t need = shape_bytes(t->shape, t->ndim, t->dtype);
        if (need < 0 || (uint64_t)need != (uint64_t)t->nbytes) {
            char sbuf[160];
            clf_shape_str(t->shape, t->ndim, sbuf, sizeof sbuf);
            return clf_error(CLF_ERR_INPUT,
                             "%s: tensor '%s' has %zu bytes but shape %s %s needs %lld", path,
                             t->name, t->nbytes, sbuf, clf_dtype_name(t->dtype), (long long)need);
        }
        if (t->nbytes && !t->data)
            return clf_error(CLF_ERR_INPUT, "%s: tensor '%s' has no data", path, t->name);
        for (int j = 0; j < i; j++)
            if (strcmp(ts[j].name, t->name) == 0)
                return clf_error(CLF_ERR_INPUT, "%s: tensor name '%s' appears twice", path,
                                 t->name);
    }
    return CLF_OK;
}

/* The JSON header, padded with spaces so that 8 + len is a multiple of HEADER_ALIGN. */
typedef struct header_text {
    char *data; /* malloc'd */
    size_t len;
} header_text;

/* Adds key: value to obj (value NULL: it could not be made). Refuses a key given twice,
 * which Jansson would silently replace, and text that is not UTF-8, which Jansson refuses. */
static clf_status put_member(const char *path, const char *what, json_t *obj, const char *key,
                             json_t *value)
{
    if (json_object_get(obj, key)) {
        json_decref(value);
        return clf_error(CLF_ERR_INPUT, "%s: %s '%s' is given twice", path, what, key);
    }
    if (!value || json_object_set_new(obj, key, value) != 0) /* set_new frees value */
        return clf_error(CLF_ERR_INPUT,
                         "%s: %s '%.64s': it or its value is not valid UTF-8 (or memory ran out)",
                         path, what, key);
    return CLF_OK;
}

static json_t *tensor_entry(const clf_tensor *t, uint64_t off)
{
    json_t *shape = json_array();
    for (int d = 0; d < t->ndim; d++)
        json_array_append_new(shape, json_integer(t->shape[d]));
    json_t *offsets = json_array();
    json_array_append_new(offsets, json_integer((json_int_t)off));
    json_array_append_new(offsets, json_integer((json_int_t)(off + t->nbytes)));
    json_t *e = json_object();
    int bad = !shape || !offsets || !e || json_array_size(shape) != (size_t)t->ndim ||
              json_array_size(offsets) != 2;
    bad |= json_object_set_new(e, "dtype", json_string(clf_dtype_name(t->dtype)));
    bad |= json_object_set_new(e, "shape", shape);
    bad |= json_object_set_new(e, "data_offsets", offsets);
    if (bad) {
        json_decref(e);
        return NULL;
    }
    return e;
}

static clf_status build_header(const char *path, const clf_tensor *ts, int n,
                               const char *const *meta, int n_meta, header_text *out)
{
    clf_status st = CLF_OK;
    json_t *root = json_object(), *m = n_meta > 0 ? json_object() : NULL;
    if (!root || (n_meta > 0 && !m)) {
        json_decref(m);
        st = clf_error(CLF_ERR_NOMEM, "%s: out of memory building the header", path);
        goto done;
    }
    for (int i = 0; i < n_meta && st == CLF_OK; i++)
        st = put_member(path, "metadata key", m, meta[2 * i],
                        json_string(meta[2 * i + 1] ? meta[2 * i + 1] : ""));
    if (m && st == CLF_OK)
        st = put_member(path, "metadata", root, "__metadata__", json_incref(m));
    json_decref(m);
    uint64_t off = 0;
    for (int i = 0; i < n && st == CLF_OK; i++) {
        st = put_member(path, "tensor name", root, ts[i].name, tensor_entry(&ts[i], off));
        off += ts[i].nbytes;
    }
    if (st != CLF_OK)
        goto done;
    char *text = json_dumps(root, JSON_COMPACT);
    size_t len = text ? strlen(text) : 0;
    size_t padded = (len + 8 + HEADER_ALIGN - 1) / HEADER_ALIGN * HEADER_ALIGN - 8;
    char *grown = text ? realloc(text, padded + 1) : NULL;
    if (!grown) {
        free(text);
        st = clf_error(CLF_ERR_NOMEM, "%s: out of memory building the header", path);
        goto done;
    }
    memset(grown + len, ' ', padded - len);
    grown[padded] = '\0';
    out->data = grown;
    out->len = padded;
done:
    json_decref(root);
    return st;
}

/* What clf_safetensors_write puts in the file: the header's length (8 bytes, little
 * endian), the header, then each tensor's bytes in order. */
typedef struct file_parts {
    const char *header;
    size_t header_len;
    const clf_tensor *tensors;
    int n;
} file_parts;

static clf_status write_parts(FILE *f, void *ctx)
{
    const file_parts *p = ctx;
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)p->header_len >> (8 * i));
    fwrite(len8, 1, 8, f);
    fwrite(p->header, 1, p->header_len, f);
    for (int i = 0; i < p->n && !ferror(f); i++)
        if (p->tensors[i].nbytes)
            fwrite(p->tensors[i].data, 1, p->tensors[i].nbytes, f);
    return CLF_OK; /* stdio errors are checked by clf_fs_write_atomic */
}

clf_status clf_safetensors_write(const char *path, const clf_tensor *tensors, int n,
                                 const char *const *meta, int n_meta)
{
    clf_status st;
    if (n < 0 || n_meta < 0 || (n > 0 && !tensors) || (n_meta > 0 && !meta))
        return clf_error(CLF_ERR_INPUT, "%s: invalid arguments to write", path);
    for (int i = 0; i < n_meta; i++)
        if (!meta[2 * i])
            return clf_error(CLF_ERR_INPUT, "%s: metadata key %d is NULL", path, i);
    if ((st = check_tensors(path, tensors, n)) != CLF_OK)
        return st;

    header_text hdr = {0};
    if ((st = build_header(path, tensors, n, meta, n_meta, &hdr)) != CLF_OK)
        return st;
    file_parts parts = {hdr.data, hdr.len, tensors, n};
    st = clf_fs_write_atomic(path, write_parts, &parts);
    free(hdr.data);
    return st;
}

void clf_safetensors_drop_pages(const clf_safetensors *f, const clf_tensor *t)
{
#ifdef MADV_DONTNEED
    const long page_l = sysconf(_SC_PAGESIZE);
    const uintptr_t page = page_l > 0 ? (uintptr_t)page_l : 4096;
    const uintptr_t map = (uintptr_t)f->map, start = (uintptr_t)t->data;
    if (!f->map || start < map || t->nbytes > f->map_size - (start - map))
        return; /* not a tensor of this mapping */
    const uintptr_t first = (start + page - 1) / page * page;
    const uintptr_t last = (start + t->nbytes) / page * page;
    if (last > first)
        (void)madvise((void *)first, last - first, MADV_DONTNEED); /* a hint: may fail */
#else
    (void)f;
    (void)t;
#endif
}
