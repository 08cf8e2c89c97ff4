/* Padding-free ViT patchifier: pick a patch grid that fits the token budget and keeps
 * the aspect ratio, resize the image to exactly that grid (no padding, no crop), cut
 * patches in conv-weight order; plus the bicubic position-embedding resampler. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vision/clip.h"
#include "vision/vision_internal.h"

const float vision_clip_mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
const float vision_clip_std[3] = {0.26862954f, 0.26130258f, 0.27577711f};

/* |log| of the grid's aspect ratio relative to the image's: 0 = same shape. */
static double aspect_err(int64_t gh, int64_t gw, double h, double w) {
    return fabs(log(((double)gw / (double)gh) / (w / h)));
}

/* When rounding both sides overflows the budget, search every grid under the budget
 * (and under the no-upscale limits) for the best trade of tokens used against shape
 * kept: score = log(tokens / budget) - 2 |log(aspect ratio error)|. */
static void best_grid(double h, double w, int64_t max_tokens, int64_t hmax, int64_t wmax,
                      int64_t *gh, int64_t *gw) {
    double best = -1e300;
    for (int64_t a = 1; a <= hmax && a <= max_tokens; a++) {
        int64_t lim = max_tokens / a < wmax ? max_tokens / a : wmax;
        int64_t c0 = (int64_t)floor(a * w / h), cand[2] = {c0, c0 + 1};
        for (int k = 0; k < 2; k++) {
            int64_t b = cand[k] < 1 ? 1 : cand[k] > lim ? lim : cand[k];
            double sc = log((double)(a * b) / (double)max_tokens) - 2 * aspect_err(a, b, h, w);
            if (sc > best) { best = sc; *gh = a; *gw = b; }
        }
    }
}

int vision_patch_grid(int32_t h, int32_t w, int32_t max_tokens, int32_t patch,
                      int allow_upscale, int32_t *gh, int32_t *gw) {
    if (h <= 0 || w <= 0 || max_tokens < 1 || patch < 1 || !gh || !gw) return VISION_MISUSE;
    double s = sqrt((double)h * w / ((double)max_tokens * patch * patch));
    if (s < 1.0 && !allow_upscale) s = 1.0;
    int64_t a = llround(h / s / patch), b = llround(w / s / patch);
    if (a < 1) a = 1;
    if (b < 1) b = 1;
    if (a * b > max_tokens) {
        /* limits: no side grows past its own rounding (shrink only unless asked) */
        int64_t hmax = allow_upscale ? max_tokens : a, wmax = allow_upscale ? max_tokens : b;
        best_grid(h, w, max_tokens, hmax, wmax, &a, &b);
    }
    *gh = (int32_t)a;
    *gw = (int32_t)b;
    return VISION_OK;
}

int vision_adaptive_patchify(const vision_image *img, int32_t max_tokens, int32_t patch,
                             int allow_upscale, const float mean[3], const float std[3],
                             vision_patches *out, char *err, size_t errlen) {
    if (!out) return VISION_MISUSE;
    memset(out, 0, sizeof *out);
    if (!img || !img->rgb || img->w <= 0 || img->h <= 0) {
        vision_set_err(err, errlen, "vision: empty image");
        return VISION_MISUSE;
    }
    int32_t gh, gw;
    if (vision_patch_grid(img->h, img->w, max_tokens, patch, allow_upscale, &gh, &gw)) {
        vision_set_err(err, errlen, "vision: bad patch budget (max_tokens %d, patch %d)", max_tokens,
                       patch);
        return VISION_MISUSE;
    }
    if (!mean) mean = vision_clip_mean;
    if (!std) std = vision_clip_std;
    int32_t H = gh * patch, W = gw * patch;
    vision_image tmp = {0};
    const vision_image *src = img;
    if (img->w != W || img->h != H) {
        int rc = vision_image_resize(img, W, H, &tmp, err, errlen);
        if (rc) return rc;
        src = &tmp;
    }
    size_t pp = (size_t)patch * patch, per = 3 * pp;
    out->data = malloc((size_t)gh * gw * per * sizeof(float));
    if (!out->data) {
        vision_image_free(&tmp);
        vision_set_err(err, errlen, "vision: out of memory for %dx%d patches", gh, gw);
        return VISION_NOMEM;
    }
    float inv[3] = {1.0f / std[0], 1.0f / std[1], 1.0f / std[2]};
    for (int32_t i = 0; i < gh; i++)
        for (int32_t j = 0; j < gw; j++) {
            float *dst = out->data + ((size_t)i * gw + j) * per;
            for (int32_t ky = 0; ky < patch; ky++) {
                const float *row = src->rgb + ((size_t)(i * patch + ky) * W + (size_t)j * patch) * 3;
                for (int32_t kx = 0; kx < patch; kx++)
                    for (int c = 0; c < 3; c++)
                        dst[c * pp + (size_t)ky * patch + kx] = (row[kx * 3 + c] - mean[c]) * inv[c];
            }
        }
    vision_image_free(&tmp);
    out->gh = gh;
    out->gw = gw;
    out->patch = patch;
    out->src_h = img->h;
    out->src_w = img->w;
    return VISION_OK;
}

void vision_patches_free(vision_patches *p) {
    if (!p) return;
    free(p->data);
    memset(p, 0, sizeof *p);
}

/* ---- bicubic position-embedding interpolation (torch's upsample_bicubic2d) ------ */
#define CUBIC_A (-0.75f)

static float cc1(float x) { return ((CUBIC_A + 2) * x - (CUBIC_A + 3)) * x * x + 1; }
static float cc2(float x) { return ((CUBIC_A * x - 5 * CUBIC_A) * x + 8 * CUBIC_A) * x - 4 * CUBIC_A; }

/* Source index base and the 4 weights for output index o (align_corners=False; the
 * cubic path does not clamp a negative source position to 0, the taps are clamped). */
static void cubic_taps(int32_t in, int32_t out_n, int32_t o, int32_t *base, float w[4]) {
    float scale = (float)in / (float)out_n;
    float real = scale * ((float)o + 0.5f) - 0.5f;
    float fl = floorf(real);
    float t = real - fl;
    *base = (int32_t)fl;
    w[0] = cc2(t + 1);
    w[1] = cc1(t);
    w[2] = cc1(1 - t);
    w[3] = cc2(2 - t);
}

static int32_t clampi(int32_t v, int32_t n) { return v < 0 ? 0 : v >= n ? n - 1 : v; }

void vision_pos_embed_interp(const float *src, int32_t sh, int32_t sw, int32_t dim,
                             float *dst, int32_t dh, int32_t dw) {
    if (sh == dh && sw == dw) { /* identity (the cubic taps are 0,1,0,0) */
        memcpy(dst, src, (size_t)sh * sw * dim * sizeof(float));
        return;
    }
    for (int32_t oy = 0; oy < dh; oy++) {
        int32_t by;
        float wy[4];
        cubic_taps(sh, dh, oy, &by, wy);
        for (int32_t ox = 0; ox < dw; ox++) {
            int32_t bx;
            float wx[4];
            cubic_taps(sw, dw, ox, &bx, wx);
            float *o = dst + ((size_t)oy * dw + ox) * dim;
            for (int32_t d = 0; d < dim; d++) {
                float acc = 0;
                for (int k = 0; k < 4; k++) {
                    const float *r = src + (size_t)clampi(by - 1 + k, sh) * sw * dim + d;
                    float row = 0;
                    for (int l = 0; l < 4; l++) row += wx[l] * r[(size_t)clampi(bx - 1 + l, sw) * dim];
                    acc += wy[k] * row;
                }
                o[d] = acc;
            }
        }
    }
}
