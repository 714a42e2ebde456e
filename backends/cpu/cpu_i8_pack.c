/* int8 weights kept in oneDNN's packed layout, in place.
 *
 * oneDNN's brgemm matmul reads its weights in a blocked layout of its own (cpu_dnnl.c's
 * CPU_I8_PACKED_TAG); given the rows as the core stores them it copies them into that
 * layout on every call, which in decoding (weights read once per step, from memory) is a
 * large part of its products' time (bench/dnnl_int8_packed.c, bench/RESULTS.md). So the
 * first product over a matrix rewrites its rows in the packed layout where they are (the
 * same bytes when k and the row count are multiples of 64), and the backend keeps the list
 * of such spans: later products read them packed, and anything else that touches their
 * bytes (upload, download, copy, discard) unpacks them first, so that outside the int8
 * products a buffer holds what was put there. The layout is 64-row blocks one after the
 * other, so a product over several matrices packed apart (a [Wq;Wk;Wv] of 64-row
 * multiples) reads them as one. A product whose spans were packed another way has them
 * unpacked and packs its own: always correct, and it happens only where one matrix is read
 * with two shapes. */
#include <stdint.h>
#include <string.h>

#include "cpu_internal.h"

/* The packed layout (oneDNN's BA16a64b4a for W^T [k, n]): 64-row blocks of W one after
 * the other, each of k bytes per row stored as [k/4][64][4]: the 4 bytes of group g of
 * row r at (g * 64 + r) * 4. A block takes the bytes its rows took, so packing is a
 * transpose of 64 x k/4 four-byte values inside each block. */

/* Rewrites rows 64-row blocks of k bytes at w in place: to the packed layout (to_packed 1)
 * or back. */
static clf_status repack(clf_backend *be, unsigned char *w, int rows, int k, int to_packed)
{
    const int g = k / 4, blocks = rows / 64;
    const size_t block = 64 * (size_t)k;
    int bad = 0;
#pragma omp parallel num_threads(be->threads) if (blocks > 1) reduction(| : bad)
    {
        uint32_t *tmp = malloc(block); /* one block as it was */
#pragma omp for schedule(static)
        for (int b = 0; b < blocks; b++) {
            if (!tmp) {
                bad = 1;
                continue;
            }
            unsigned char *blk = w + (size_t)b * block;
            memcpy(tmp, blk, block);
            for (int r = 0; r < 64; r++)
                for (int q = 0; q < g; q++) {
                    const size_t rows_at = (size_t)r * g + q, packed_at = (size_t)q * 64 + r;
                    memcpy(blk + 4 * (to_packed ? packed_at : rows_at),
                           tmp + (to_packed ? rows_at : packed_at), 4);
                }
        }
        free(tmp);
    }
    return bad ? clf_error(CLF_ERR_NOMEM, "cpu: gemm: out of memory repacking int8 weights")
               : CLF_OK;
}

static size_t span_bytes(const cpu_i8_span *s)
{
    return (size_t)s->rows * (size_t)s->k;
}

/* 1 when [off, off + bytes) of buf and span s overlap */
static int overlaps(const cpu_i8_span *s, const clf_buffer *buf, size_t off, size_t bytes)
{
    return s->buf == buf && off < s->off + span_bytes(s) && s->off < off + bytes;
}

clf_status cpu_i8_unpack(clf_backend *be, const clf_buffer *buf, size_t off, size_t bytes)
{
    for (int i = 0; i < be->n_packed;) {
        cpu_i8_span *s = &be->packed[i];
        if (!overlaps(s, buf, off, bytes)) {
            i++;
            continue;
        }
        const clf_status st = repack(be, s->buf->data + s->off, s->rows, s->k, 0);
        if (st != CLF_OK)
            return st;
        *s = be->packed[--be->n_packed];
    }
    return CLF_OK;
}

void cpu_i8_forget(clf_backend *be, const clf_buffer *buf)
{
    for (int i = 0; i < be->n_packed;)
        if (be->packed[i].buf == buf)
            be->packed[i] = be->packed[--be->n_packed];
        else
            i++;
}

/* 1 when rows [off, off + rows k) of buf are packed as 64-row blocks of k starting at off
 * (spans never overlap one another, so a walk from span to span decides it). */
static int covered(const clf_backend *be, const clf_buffer *buf, size_t off, int rows, int k)
{
    const size_t end = off + (size_t)rows * (size_t)k, block = 64 * (size_t)k;
    size_t pos = off;
    while (pos < end) {
        int found = 0;
        for (int i = 0; i < be->n_packed && !found; i++) {
            const cpu_i8_span *s = &be->packed[i];
            if (s->buf == buf && s->k == k && s->off <= pos && pos < s->off + span_bytes(s) &&
                (pos - s->off) % block == 0) {
                pos = s->off + span_bytes(s);
                found = 1;
            }
        }
        if (!found)
            return 0;
    }
    return 1;
}

/* 1 when some span overlaps [off, off + bytes) of buf */
static int any_overlap(const clf_backend *be, const clf_buffer *buf, size_t off, size_t bytes)
{
    for (int i = 0; i < be->n_packed; i++)
        if (overlaps(&be->packed[i], buf, off, bytes))
            return 1;
    return 0;
}

int cpu_i8_packs(clf_backend *be)
{
    return be->i8_qmax == 127 && be->isa == CPU_ISA_AVX512 && cpu_dnnl_i8_packs(be->dnnl);
}

clf_status cpu_i8_packed_rows(clf_backend *be, const clf_gemm_args *a, int *rows)
{
    *rows = 0;
    const clf_buffer *buf = a->b_i8.buf;
    const size_t off = a->b_i8.off, k = (size_t)a->k;
    const size_t all = span2d((size_t)a->n, k, (size_t)a->ldb);
    const int np = a->n / 64 * 64;
    const int packs = a->k % 64 == 0 && (size_t)a->ldb == k && np > 0 && cpu_i8_packs(be);
    if (!packs) /* read as stored: every row must be */
        return cpu_i8_unpack(be, buf, off, all);
    const size_t packed = (size_t)np * k;
    if (covered(be, buf, off, np, a->k) && !any_overlap(be, buf, off + packed, all - packed)) {
        *rows = np;
        return CLF_OK;
    }
    clf_status st = cpu_i8_unpack(be, buf, off, all);
    if (st != CLF_OK)
        return st;
    if (be->n_packed == be->packed_cap) {
        const int cap = be->packed_cap ? 2 * be->packed_cap : 64;
        cpu_i8_span *p = realloc(be->packed, sizeof *p * (size_t)cap);
        if (!p)
            return clf_error(CLF_ERR_NOMEM, "cpu: gemm: out of memory");
        be->packed = p;
        be->packed_cap = cap;
    }
    if ((st = repack(be, buf->data + off, np, a->k, 1)) != CLF_OK)
        return st;
    be->packed[be->n_packed++] = (cpu_i8_span){.buf = buf, .off = off, .rows = np, .k = a->k};
    *rows = np;
    return CLF_OK;
}
