/* Image decode and resize through libvips (no hand-written codecs).
 * Pixels leave libvips as 8-bit sRGB (alpha flattened on white) or, for resizing an
 * already-decoded image, as float; the caller always gets interleaved RGB in 0..1. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vips/vips.h>

#include "vision/clip.h"
#include "vision/vision_internal.h"

static pthread_once_t vips_once = PTHREAD_ONCE_INIT;
static int vips_init_rc;

static void vips_start(void) {
    /* VIPS_INIT must run once per process; libvips' own threads are left at default. */
    vips_init_rc = VIPS_INIT("mmrag");
}

/* Copy libvips' (global) error text into the caller's buffer, trimmed to one line. */
static void seterr_vips(char *err, size_t errlen, const char *what) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s", vips_error_buffer());
    vips_error_clear();
    char *nl = strchr(msg, '\n');
    if (nl) *nl = 0;
    vision_set_err(err, errlen, "vision: %s: %s", what, msg[0] ? msg : "libvips error");
}

static int ensure_vips(char *err, size_t errlen) {
    pthread_once(&vips_once, vips_start);
    if (vips_init_rc) {
        vision_set_err(err, errlen, "vision: libvips failed to start");
        return VISION_ERROR;
    }
    return VISION_OK;
}

/* Replace *img by out, dropping the reference to the old image. */
static void swap_in(VipsImage **img, VipsImage *out) {
    g_object_unref(*img);
    *img = out;
}

/* Any decoded image -> 3-band 8-bit sRGB, alpha flattened on white. */
static int to_srgb8(VipsImage **img, char *err, size_t errlen) {
    VipsImage *t = NULL;
    if (vips_colourspace(*img, &t, VIPS_INTERPRETATION_sRGB, NULL)) goto fail;
    swap_in(img, t);
    if ((*img)->BandFmt != VIPS_FORMAT_UCHAR) {
        if (vips_cast_uchar(*img, &t, NULL)) goto fail;
        swap_in(img, t);
    }
    if (vips_image_hasalpha(*img)) {
        VipsArrayDouble *bg = vips_array_double_newv(3, 255.0, 255.0, 255.0);
        int rc = vips_flatten(*img, &t, "background", bg, NULL);
        vips_area_unref(VIPS_AREA(bg));
        if (rc) goto fail;
        swap_in(img, t);
        if ((*img)->BandFmt != VIPS_FORMAT_UCHAR) {
            if (vips_cast_uchar(*img, &t, NULL)) goto fail;
            swap_in(img, t);
        }
    }
    if ((*img)->Bands > 3) {
        if (vips_extract_band(*img, &t, 0, "n", 3, NULL)) goto fail;
        swap_in(img, t);
    } else if ((*img)->Bands < 3) {
        if (vips_bandjoin_const1(*img, &t, 0, NULL)) goto fail; /* not reached: sRGB has 3 */
        swap_in(img, t);
    }
    return VISION_OK;
fail:
    seterr_vips(err, errlen, "colour conversion");
    return VISION_FORMAT;
}

/* Resize to exactly w×h. vips_resize rounds the output size itself, which can be one
 * pixel off the requested size: trim or replicate the edge to land exactly. */
static int resize_exact(VipsImage **img, int32_t w, int32_t h, char *err, size_t errlen) {
    VipsImage *t = NULL;
    if ((*img)->Xsize == w && (*img)->Ysize == h) return VISION_OK;
    double hs = (double)w / (*img)->Xsize, vs = (double)h / (*img)->Ysize;
    if (vips_resize(*img, &t, hs, "vscale", vs, "kernel", VIPS_KERNEL_CUBIC, NULL)) {
        seterr_vips(err, errlen, "resize");
        return VISION_ERROR;
    }
    swap_in(img, t);
    if ((*img)->Xsize != w || (*img)->Ysize != h) {
        int cw = (*img)->Xsize < w ? (*img)->Xsize : w, ch = (*img)->Ysize < h ? (*img)->Ysize : h;
        if (vips_extract_area(*img, &t, 0, 0, cw, ch, NULL)) goto fail;
        swap_in(img, t);
        if (cw != w || ch != h) {
            if (vips_embed(*img, &t, 0, 0, w, h, "extend", VIPS_EXTEND_COPY, NULL)) goto fail;
            swap_in(img, t);
        }
    }
    return VISION_OK;
fail:
    seterr_vips(err, errlen, "resize");
    return VISION_ERROR;
}

/* Materialize a 3-band image into out (uchar scaled by 1/255, or float as is). */
static int to_vision_image(VipsImage *img, vision_image *out, char *err, size_t errlen) {
    size_t n = (size_t)img->Xsize * img->Ysize * 3, sz = 0;
    void *mem = vips_image_write_to_memory(img, &sz);
    if (!mem) {
        seterr_vips(err, errlen, "decode");
        return VISION_FORMAT;
    }
    int is_u8 = img->BandFmt == VIPS_FORMAT_UCHAR;
    if (sz != n * (is_u8 ? 1 : sizeof(float))) {
        g_free(mem);
        vision_set_err(err, errlen, "vision: unexpected pixel buffer size");
        return VISION_ERROR;
    }
    float *px = malloc(n * sizeof(float));
    if (!px) {
        g_free(mem);
        vision_set_err(err, errlen, "vision: out of memory for %dx%d image", img->Xsize, img->Ysize);
        return VISION_NOMEM;
    }
    if (is_u8) {
        const uint8_t *b = mem;
        for (size_t i = 0; i < n; i++) px[i] = b[i] * (1.0f / 255.0f);
    } else {
        memcpy(px, mem, n * sizeof(float));
    }
    g_free(mem);
    out->w = img->Xsize;
    out->h = img->Ysize;
    out->rgb = px;
    return VISION_OK;
}

static int open_image(const char *path, const void *buf, size_t len, VipsImage **img,
                      char *err, size_t errlen) {
    int rc = ensure_vips(err, errlen);
    if (rc) return rc;
    if (path) {
        FILE *f = fopen(path, "rb");
        if (!f) {
            vision_set_err(err, errlen, "vision: cannot open %s", path);
            return VISION_IO;
        }
        fclose(f);
        *img = vips_image_new_from_file(path, NULL);
    } else {
        if (!buf || !len) {
            vision_set_err(err, errlen, "vision: empty image buffer");
            return VISION_FORMAT;
        }
        *img = vips_image_new_from_buffer(buf, len, "", NULL);
    }
    if (!*img) {
        seterr_vips(err, errlen, path ? path : "image buffer");
        return VISION_FORMAT;
    }
    return VISION_OK;
}

static int load_common(const char *path, const void *buf, size_t len, int32_t w, int32_t h,
                       vision_image *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    VipsImage *img = NULL;
    int rc = open_image(path, buf, len, &img, err, errlen);
    if (rc) return rc;
    rc = to_srgb8(&img, err, errlen);
    if (!rc && w > 0 && h > 0) rc = resize_exact(&img, w, h, err, errlen);
    if (!rc) rc = to_vision_image(img, out, err, errlen);
    g_object_unref(img);
    return rc;
}

int vision_image_load_file(const char *path, int32_t w, int32_t h, vision_image *out,
                           char *err, size_t errlen) {
    if (!path || !out) return VISION_MISUSE;
    return load_common(path, NULL, 0, w, h, out, err, errlen);
}

int vision_image_load_buffer(const void *buf, size_t len, int32_t w, int32_t h,
                             vision_image *out, char *err, size_t errlen) {
    if (!out) return VISION_MISUSE;
    return load_common(NULL, buf, len, w, h, out, err, errlen);
}

static int probe(const char *path, const void *buf, size_t len, int32_t *w, int32_t *h,
                 char *err, size_t errlen) {
    VipsImage *img = NULL;
    int rc = open_image(path, buf, len, &img, err, errlen);
    if (rc) return rc;
    *w = img->Xsize;
    *h = img->Ysize;
    g_object_unref(img);
    return VISION_OK;
}

int vision_image_probe_file(const char *path, int32_t *w, int32_t *h, char *err, size_t errlen) {
    if (!path || !w || !h) return VISION_MISUSE;
    return probe(path, NULL, 0, w, h, err, errlen);
}

int vision_image_probe_buffer(const void *buf, size_t len, int32_t *w, int32_t *h,
                              char *err, size_t errlen) {
    if (!w || !h) return VISION_MISUSE;
    return probe(NULL, buf, len, w, h, err, errlen);
}

int vision_image_load_for_patches(const char *path, const void *buf, size_t len,
                                  int32_t max_tokens, int32_t patch, vision_image *out,
                                  char *err, size_t errlen) {
    if (!out) return VISION_MISUSE;
    memset(out, 0, sizeof *out);
    int32_t w = 0, h = 0, gh = 0, gw = 0;
    int rc = probe(path, buf, len, &w, &h, err, errlen);
    if (rc) return rc;
    if (vision_patch_grid(h, w, max_tokens, patch, 0, &gh, &gw)) {
        vision_set_err(err, errlen, "vision: bad patch budget (max_tokens %d, patch %d)", max_tokens,
                       patch);
        return VISION_MISUSE;
    }
    return load_common(path, buf, len, gw * patch, gh * patch, out, err, errlen);
}

int vision_image_resize(const vision_image *in, int32_t w, int32_t h, vision_image *out,
                        char *err, size_t errlen) {
    if (!in || !in->rgb || !out || w <= 0 || h <= 0 || in->w <= 0 || in->h <= 0) {
        vision_set_err(err, errlen, "vision: bad resize arguments");
        return VISION_MISUSE;
    }
    memset(out, 0, sizeof *out);
    int rc = ensure_vips(err, errlen);
    if (rc) return rc;
    VipsImage *img = vips_image_new_from_memory(in->rgb, (size_t)in->w * in->h * 3 * sizeof(float),
                                                in->w, in->h, 3, VIPS_FORMAT_FLOAT);
    if (!img) {
        seterr_vips(err, errlen, "resize");
        return VISION_ERROR;
    }
    rc = resize_exact(&img, w, h, err, errlen);
    if (!rc) rc = to_vision_image(img, out, err, errlen);
    g_object_unref(img);
    return rc;
}

int vision_image_from_rgb8(const uint8_t *rgb8, int32_t w, int32_t h, vision_image *out,
                           char *err, size_t errlen) {
    if (!rgb8 || !out || w <= 0 || h <= 0) {
        vision_set_err(err, errlen, "vision: bad image arguments");
        return VISION_MISUSE;
    }
    size_t n = (size_t)w * h * 3;
    out->rgb = malloc(n * sizeof(float));
    if (!out->rgb) {
        vision_set_err(err, errlen, "vision: out of memory");
        return VISION_NOMEM;
    }
    for (size_t i = 0; i < n; i++) out->rgb[i] = rgb8[i] * (1.0f / 255.0f);
    out->w = w;
    out->h = h;
    return VISION_OK;
}

void vision_image_free(vision_image *img) {
    if (!img) return;
    free(img->rgb);
    memset(img, 0, sizeof *img);
}
