/* A minimal grayscale PNG writer (see png.h): signature, IHDR, one IDAT holding a zlib
 * stream of stored deflate blocks, IEND. */
#include "png.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A stored deflate block holds at most 65535 bytes (its LEN field is 16 bits). */
#define STORED_BLOCK_MAX 65535
/* Adler-32's modulus, and the most bytes that can be summed in 32 bits before reducing
 * (zlib's NMAX). */
#define ADLER_MOD  65521u
#define ADLER_NMAX 5552
/* Largest raw image accepted: keeps the IDAT chunk under PNG's 2^31 - 1 byte limit with
 * room for the block headers. */
#define RAW_MAX ((size_t)1 << 30)

uint32_t png_crc32(uint32_t crc, const uint8_t *p, size_t n)
{
    /* The table costs 2048 shifts: nothing next to the image, and no global state. */
    uint32_t table[256];
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

uint32_t png_adler32(uint32_t adler, const uint8_t *p, size_t n)
{
    uint32_t a = adler & 0xFFFF, b = adler >> 16;
    while (n > 0) {
        size_t chunk = n < ADLER_NMAX ? n : ADLER_NMAX;
        n -= chunk;
        while (chunk--) {
            a += *p++;
            b += a;
        }
        a %= ADLER_MOD;
        b %= ADLER_MOD;
    }
    return (b << 16) | a;
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Writes a chunk (length, type, data, CRC over type and data) at p; returns its size. */
static size_t put_chunk(uint8_t *p, const char type[4], const uint8_t *data, size_t len)
{
    put_be32(p, (uint32_t)len);
    memcpy(p + 4, type, 4);
    if (len)
        memmove(p + 8, data, len);
    put_be32(p + 8 + len, png_crc32(0, p + 4, len + 4));
    return 12 + len;
}

/* The zlib stream of raw[0..n) as stored blocks, at p; returns its size. */
static size_t put_zlib_stored(uint8_t *p, const uint8_t *raw, size_t n)
{
    size_t at = 0;
    p[at++] = 0x78; /* CMF: deflate, 32K window */
    p[at++] = 0x01; /* FLG: no dictionary, fastest; (0x78 << 8 | 0x01) % 31 == 0 */
    size_t done = 0;
    do {
        size_t len = n - done < STORED_BLOCK_MAX ? n - done : STORED_BLOCK_MAX;
        p[at++] = (uint8_t)(done + len == n); /* BFINAL on the last; BTYPE 00 = stored */
        p[at++] = (uint8_t)len;
        p[at++] = (uint8_t)(len >> 8);
        p[at++] = (uint8_t)~len;
        p[at++] = (uint8_t)(~len >> 8);
        memcpy(p + at, raw + done, len);
        at += len;
        done += len;
    } while (done < n);
    put_be32(p + at, png_adler32(1, raw, n));
    return at + 4;
}

/* Writes buf to path via a temporary name, fsync and rename. */
static clf_status write_atomic(const char *path, const uint8_t *buf, size_t n)
{
    clf_status st = CLF_OK;
    size_t tlen = strlen(path) + 32;
    char *tmp = malloc(tlen);
    int fd = -1;
    if (!tmp)
        return clf_error(CLF_ERR_NOMEM, "%s: out of memory", path);
    snprintf(tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        st = clf_error(CLF_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        goto fail;
    }
    for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, buf + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            st = clf_error(CLF_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
            goto fail;
        }
        done += (size_t)w;
    }
    int bad = fsync(fd) != 0;
    bad |= close(fd) != 0;
    fd = -1;
    if (bad) {
        st = clf_error(CLF_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
        goto fail;
    }
    if (rename(tmp, path) != 0) {
        st = clf_error(CLF_ERR_IO, "%s: cannot rename %s to it: %s", path, tmp, strerror(errno));
        goto fail;
    }
    free(tmp);
    return CLF_OK;
fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    free(tmp);
    return st;
}

clf_status png_write_gray8(const char *path, const uint8_t *pixels, int width, int height)
{
    clf_status st = CLF_OK;
    uint8_t *raw = NULL, *file = NULL;
    if (width < 1 || height < 1)
        return clf_error(CLF_ERR_INPUT, "%s: a PNG needs at least 1x1 pixels, not %dx%d", path,
                         width, height);
    size_t row = (size_t)width + 1; /* each scanline starts with its filter byte */
    if ((size_t)height > RAW_MAX / row)
        return clf_error(CLF_ERR_INPUT, "%s: a %dx%d image is too large", path, width, height);
    size_t n_raw = row * (size_t)height;
    size_t n_blocks = (n_raw + STORED_BLOCK_MAX - 1) / STORED_BLOCK_MAX;
    size_t n_zlib = 2 + n_raw + 5 * n_blocks + 4;
    size_t n_file = 8 + (12 + 13) + (12 + n_zlib) + 12;
    raw = malloc(n_raw);
    file = malloc(n_file);
    if (!raw || !file) {
        st = clf_error(CLF_ERR_NOMEM, "%s: out of memory for a %dx%d image", path, width, height);
        goto fail;
    }
    for (int y = 0; y < height; y++) {
        raw[(size_t)y * row] = 0; /* filter type None */
        memcpy(raw + (size_t)y * row + 1, pixels + (size_t)y * width, (size_t)width);
    }
    static const uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    uint8_t ihdr[13];
    put_be32(ihdr, (uint32_t)width);
    put_be32(ihdr + 4, (uint32_t)height);
    ihdr[8] = 8;  /* bit depth */
    ihdr[9] = 0;  /* colour type: grayscale */
    ihdr[10] = 0; /* compression: deflate */
    ihdr[11] = 0; /* filter method 0 */
    ihdr[12] = 0; /* no interlace */
    size_t at = 0;
    memcpy(file, signature, 8);
    at += 8;
    at += put_chunk(file + at, "IHDR", ihdr, 13);
    /* The zlib stream is built in place after the IDAT length and type, then the chunk is
     * completed around it (put_chunk's memmove onto itself is a no-op). */
    size_t z = put_zlib_stored(file + at + 8, raw, n_raw);
    at += put_chunk(file + at, "IDAT", file + at + 8, z);
    at += put_chunk(file + at, "IEND", NULL, 0);
    st = write_atomic(path, file, at);
fail:
    free(raw);
    free(file);
    return st;
}
