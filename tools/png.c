/* Grayscale PNG writing through libspng (see png.h). */
#include "png.h"

#include <spng.h>
#include <stddef.h>

#include "clformer/fs.h"

/* Largest image accepted (1 GiB of pixels): far beyond any heatmap, and within what PNG
 * (2^31 - 1 pixels a side) and spng's size arithmetic allow. */
#define PIXELS_MAX ((size_t)1 << 30)

typedef struct gray_image {
    const char *path;
    const uint8_t *pixels;
    int width, height;
} gray_image;

static clf_status encode_png(FILE *f, void *ctx)
{
    const gray_image *im = ctx;
    spng_ctx *enc = spng_ctx_new(SPNG_CTX_ENCODER);
    if (!enc)
        return clf_error(CLF_ERR_NOMEM, "%s: out of memory for the PNG encoder", im->path);
    struct spng_ihdr ihdr = {
        .width = (uint32_t)im->width,
        .height = (uint32_t)im->height,
        .bit_depth = 8,
        .color_type = SPNG_COLOR_TYPE_GRAYSCALE,
    };
    int err = spng_set_png_file(enc, f);
    if (!err)
        err = spng_set_ihdr(enc, &ihdr);
    if (!err)
        err = spng_encode_image(enc, im->pixels, (size_t)im->width * (size_t)im->height,
                                SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
    spng_ctx_free(enc);
    /* a failed write is reported by clf_fs_write_atomic, with errno */
    if (err && !ferror(f))
        return clf_error(CLF_ERR_IO, "%s: cannot encode the PNG: %s", im->path, spng_strerror(err));
    return CLF_OK;
}

clf_status png_write_gray8(const char *path, const uint8_t *pixels, int width, int height)
{
    if (width < 1 || height < 1)
        return clf_error(CLF_ERR_INPUT, "%s: a PNG needs at least 1x1 pixels, not %dx%d", path,
                         width, height);
    if ((size_t)height > PIXELS_MAX / (size_t)width)
        return clf_error(CLF_ERR_INPUT, "%s: a %dx%d image is too large", path, width, height);
    gray_image im = {path, pixels, width, height};
    return clf_fs_write_atomic(path, encode_png, &im);
}
