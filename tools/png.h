/* png: 8-bit grayscale PNG images for attention heatmaps, encoded by libspng and written
 * atomically (clformer/fs.h). */
#ifndef CLF_PNG_H
#define CLF_PNG_H

#include <stdint.h>

#include "clformer/status.h"

/* Writes pixels [height, width] (row-major, 0 black .. 255 white) as a grayscale PNG to
 * path, through a temporary file and rename: never a half-written file under path.
 * CLF_ERR_INPUT for empty or too large images, CLF_ERR_IO naming the path otherwise. */
clf_status png_write_gray8(const char *path, const uint8_t *pixels, int width, int height);

#endif
