/* png: a minimal writer of 8-bit grayscale PNG images, for attention heatmaps.
 *
 * No compression library: the image data is one zlib stream of stored (uncompressed)
 * deflate blocks, so the file is about width * height bytes. The checksums PNG and zlib
 * need (CRC-32 of each chunk, Adler-32 of the raw data) are computed here. */
#ifndef CLF_PNG_H
#define CLF_PNG_H

#include <stddef.h>
#include <stdint.h>

#include "clformer/status.h"

/* CRC-32 (ISO 3309, reflected polynomial 0xEDB88320) of p[0..n), continuing from crc
 * (0 to start): png_crc32(0, "123456789", 9) == 0xCBF43926. */
uint32_t png_crc32(uint32_t crc, const uint8_t *p, size_t n);

/* Adler-32 (RFC 1950) of p[0..n), continuing from adler (1 to start):
 * png_adler32(1, "Wikipedia", 9) == 0x11E60398. */
uint32_t png_adler32(uint32_t adler, const uint8_t *p, size_t n);

/* Writes pixels [height, width] (row-major, 0 black .. 255 white) as a grayscale PNG to
 * path, through path.tmp.<pid> and rename: never a half-written file under path.
 * CLF_ERR_INPUT for empty or too large images, CLF_ERR_IO naming the path otherwise. */
clf_status png_write_gray8(const char *path, const uint8_t *pixels, int width, int height);

#endif
