/* Padding-free patchifier: grid geometry over many sizes and budgets, patch layout,
 * no padding, libvips decode/resize, and the bicubic position-embedding resampler vs
 * torch's F.interpolate(mode='bicubic', align_corners=False, size=...) (fixture made by
 * scripts/golden_clip.py, source grid from the shared PRNG in tests/clip_gen.h). */
#include <jansson.h>
#include <zlib.h>

#include "tests/clip_gen.h"
#include "tests/test.h"
#include "vision/clip.h"

static double aspect_err(int gh, int gw, int h, int w) {
    return fabs(((double)gw / gh) / ((double)w / h) - 1.0);
}

TEST(grid_geometry_many_sizes) {
    static const int sizes[][2] = {
        {384, 512}, {720, 1280}, {1280, 720}, {224, 224}, {1080, 1920}, {1, 4000}, {4000, 1},
        {1, 1}, {3, 3}, {7, 5}, {31, 33}, {100, 7000}, {2000, 2000}, {333, 777}, {600, 800},
        {50, 60}, {4096, 4096}, {17, 1000},
    };
    static const int budgets[] = {1, 2, 16, 49, 196, 256, 576, 1024};
    static const int patches[] = {8, 14, 16, 32};
    int n = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (size_t b = 0; b < sizeof budgets / sizeof *budgets; b++)
            for (size_t q = 0; q < sizeof patches / sizeof *patches; q++) {
                int h = sizes[s][0], w = sizes[s][1], mt = budgets[b], p = patches[q];
                int32_t gh = 0, gw = 0;
                CHECK(vision_patch_grid(h, w, mt, p, 0, &gh, &gw) == 0);
                CHECK_MSG(gh >= 1 && gw >= 1 && gh * gw <= mt, "%dx%d budget %d p %d -> %dx%d", h,
                          w, mt, p, gh, gw);
                /* shrink only: never more patches along a side than the side can hold,
                 * rounded to nearest (at least one) */
                CHECK_MSG(gh <= (h + p / 2) / p + 1 && gw <= (w + p / 2) / p + 1,
                          "%dx%d p %d grew to %dx%d", h, w, p, gh, gw);
                /* shape: where the budget lets both sides have >= 4 patches and the image is
                 * big enough, the aspect ratio is kept within the rounding error */
                double need = (double)h * w / ((double)p * p);
                if (gh >= 4 && gw >= 4 && need >= mt)
                    CHECK_MSG(aspect_err(gh, gw, h, w) <= 1.0 / (gh < gw ? gh : gw) + 1e-9,
                              "%dx%d budget %d p %d -> %dx%d aspect err %.3f", h, w, mt, p, gh, gw,
                              aspect_err(gh, gw, h, w));
                /* budget use: a large image uses most of its budget (small budgets trade some
                 * tokens for shape, e.g. 333x777 in 16 -> 2x5) */
                if (need >= 4.0 * mt && h * 4 >= w && w * 4 >= h && mt >= 16)
                    CHECK_MSG(gh * gw >= 0.6 * mt, "%dx%d budget %d -> only %d tokens", h, w, mt,
                              gh * gw);
                n++;
            }
    int32_t gh, gw;
    CHECK(vision_patch_grid(0, 10, 49, 32, 0, &gh, &gw) == VISION_MISUSE);
    CHECK(vision_patch_grid(10, 10, 0, 32, 0, &gh, &gw) == VISION_MISUSE);
    CHECK(vision_patch_grid(10, 10, 49, 0, 0, &gh, &gw) == VISION_MISUSE);
    /* upscaling on request: a small image fills the budget */
    CHECK(vision_patch_grid(64, 64, 49, 32, 1, &gh, &gw) == 0 && gh == 7 && gw == 7);
    CHECK(vision_patch_grid(64, 64, 49, 32, 0, &gh, &gw) == 0 && gh == 2 && gw == 2);
    printf("  %d size/budget/patch combinations\n", n);
}

/* A flat grey image: every patch value must be the normalized grey — a padded pixel
 * would show up as (0 - mean) / std. Reports the numbers for the closing note. */
static int flat_case(int h, int w, int mt, int p, int *failed) {
    uint8_t *px = malloc((size_t)h * w * 3);
    if (!px) return -1;
    memset(px, 128, (size_t)h * w * 3);
    vision_image img;
    char err[256] = "";
    int rc = vision_image_from_rgb8(px, w, h, &img, err, sizeof err);
    free(px);
    if (rc) return rc;
    vision_patches pt;
    rc = vision_adaptive_patchify(&img, mt, p, 0, NULL, NULL, &pt, err, sizeof err);
    vision_image_free(&img);
    if (rc) { fprintf(stderr, "  %s\n", err); return rc; }
    size_t per = 3 * (size_t)p * p, total = (size_t)pt.gh * pt.gw * per, off = 0;
    for (size_t i = 0; i < total; i++) {
        int c = (int)((i % per) / ((size_t)p * p));
        float want = (128.0f / 255.0f - vision_clip_mean[c]) / vision_clip_std[c];
        if (fabsf(pt.data[i] - want) > 2e-3f) off++;
    }
    double ar_in = (double)w / h, ar_out = (double)pt.gw / pt.gh;
    printf("  %4dx%-4d budget %4d p %2d -> grid %2dx%-2d = %4d tokens (%.0f%% of budget), "
           "resized %dx%d, padded pixels 0 (%zu off-value), aspect %.4f vs %.4f (%.1f%%)\n",
           h, w, mt, p, pt.gh, pt.gw, pt.gh * pt.gw, 100.0 * pt.gh * pt.gw / mt, pt.gh * p,
           pt.gw * p, off, ar_out, ar_in, 100 * fabs(ar_out / ar_in - 1));
    int bad = off != 0 || pt.gh * pt.gw > mt;
    vision_patches_free(&pt);
    if (bad) *failed = 1;
    return bad;
}

TEST(no_padding_report) {
    int f = 0;
    CHECK(flat_case(384, 512, 49, 32, &f) == 0);
    CHECK(flat_case(720, 1280, 49, 32, &f) == 0);
    CHECK(flat_case(384, 512, 196, 16, &f) == 0);
    CHECK(flat_case(720, 1280, 196, 16, &f) == 0);
    CHECK(flat_case(720, 1280, 576, 14, &f) == 0);
    CHECK(flat_case(1, 4000, 49, 32, &f) == 0);
    CHECK(flat_case(5, 3, 49, 32, &f) == 0);
    CHECK(!f);
}

TEST(patch_layout_c_ky_kx) {
    /* 16x24 image, patch 8, budget 6: no resize; pixel value encodes (x, y, c). */
    int h = 16, w = 24, p = 8;
    uint8_t px[16 * 24 * 3];
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) px[(y * w + x) * 3 + c] = (uint8_t)(x * 10 + y + c * 3);
    vision_image img;
    CHECK(vision_image_from_rgb8(px, w, h, &img, NULL, 0) == 0);
    vision_patches pt;
    float mean[3] = {0, 0, 0}, std[3] = {1, 1, 1};
    CHECK(vision_adaptive_patchify(&img, 6, p, 0, mean, std, &pt, NULL, 0) == 0);
    vision_image_free(&img);
    CHECK(pt.gh == 2 && pt.gw == 3 && pt.src_h == 16 && pt.src_w == 24);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int c = 0; c < 3; c++)
                for (int ky = 0; ky < p; ky++)
                    for (int kx = 0; kx < p; kx++) {
                        float v = pt.data[((size_t)(i * 3 + j) * 3 + c) * p * p + ky * p + kx];
                        int x = j * p + kx, y = i * p + ky;
                        CHECK_NEAR(v * 255.0f, x * 10 + y + c * 3, 1e-3);
                    }
    vision_patches_free(&pt);
}

TEST(posemb_bicubic_vs_torch) {
    json_error_t e;
    json_t *fx = json_load_file("tests/data/golden/clip_tiny.json", 0, &e);
    CHECK_MSG(fx, "%s", e.text);
    size_t i;
    json_t *c;
    int cases = 0;
    json_array_foreach(json_object_get(fx, "posemb"), i, c) {
        int sh = (int)json_integer_value(json_object_get(c, "sh"));
        int sw = (int)json_integer_value(json_object_get(c, "sw"));
        int dh = (int)json_integer_value(json_object_get(c, "dh"));
        int dw = (int)json_integer_value(json_object_get(c, "dw"));
        int dim = (int)json_integer_value(json_object_get(c, "dim"));
        json_t *want = json_object_get(c, "expected");
        float *src = malloc((size_t)sh * sw * dim * sizeof *src);
        float *dst = malloc((size_t)dh * dw * dim * sizeof *dst);
        CHECK(src && dst && (int)json_array_size(want) == dh * dw * dim);
        clipgen_fill(json_string_value(json_object_get(c, "src")), src, (int64_t)sh * sw * dim, 1, 0);
        vision_pos_embed_interp(src, sh, sw, dim, dst, dh, dw);
        double worst = 0;
        for (int k = 0; k < dh * dw * dim; k++) {
            double d = fabs(dst[k] - json_number_value(json_array_get(want, (size_t)k)));
            if (d > worst) worst = d;
        }
        free(src);
        free(dst);
        CHECK_MSG(worst < 1e-5, "%dx%d -> %dx%d: max diff %g", sh, sw, dh, dw, worst);
        cases++;
    }
    json_decref(fx);
    CHECK(cases >= 5);
}

/* ---- libvips decode/resize ------------------------------------------------------ */
static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

/* Minimal PNG encoder (zlib): 8-bit RGB or RGBA, filter 0. Returns malloc'd bytes. */
static uint8_t *png_encode(const uint8_t *px, int w, int h, int ch, size_t *len) {
    size_t raw_n = (size_t)h * (1 + (size_t)w * ch);
    uint8_t *raw = malloc(raw_n);
    uLongf zn = compressBound((uLong)raw_n);
    uint8_t *z = malloc(zn), *out = malloc(zn + 64);
    if (!raw || !z || !out) { free(raw); free(z); free(out); return NULL; }
    for (int y = 0; y < h; y++) {
        raw[y * (1 + (size_t)w * ch)] = 0;
        memcpy(raw + y * (1 + (size_t)w * ch) + 1, px + (size_t)y * w * ch, (size_t)w * ch);
    }
    compress(z, &zn, raw, (uLong)raw_n);
    size_t o = 0;
    memcpy(out, "\x89PNG\r\n\x1a\n", 8);
    o = 8;
    uint8_t ihdr[13];
    put32(ihdr, (uint32_t)w);
    put32(ihdr + 4, (uint32_t)h);
    ihdr[8] = 8; ihdr[9] = ch == 4 ? 6 : 2; ihdr[10] = ihdr[11] = ihdr[12] = 0;
    const char *types[3] = {"IHDR", "IDAT", "IEND"};
    const uint8_t *data[3] = {ihdr, z, NULL};
    size_t sizes[3] = {13, zn, 0};
    for (int k = 0; k < 3; k++) {
        put32(out + o, (uint32_t)sizes[k]);
        memcpy(out + o + 4, types[k], 4);
        if (sizes[k]) memcpy(out + o + 8, data[k], sizes[k]);
        put32(out + o + 8 + sizes[k], (uint32_t)crc32(0, out + o + 4, (uInt)(4 + sizes[k])));
        o += 12 + sizes[k];
    }
    free(raw);
    free(z);
    *len = o;
    return out;
}

TEST(vips_decode_png_file_and_buffer) {
    int w = 37, h = 23;
    uint8_t px[37 * 23 * 3];
    clipgen_image("pngtest", px, sizeof px);
    size_t len = 0;
    uint8_t *png = png_encode(px, w, h, 3, &len);
    CHECK(png);
    char path[512], err[256] = "";
    snprintf(path, sizeof path, "%s/clip_test.png", test_env("MMRAG_TMP", "/tmp"));
    FILE *f = fopen(path, "wb");
    CHECK(f);
    fwrite(png, 1, len, f);
    fclose(f);
    int32_t pw = 0, ph = 0;
    CHECK(vision_image_probe_file(path, &pw, &ph, err, sizeof err) == 0 && pw == w && ph == h);
    vision_image a, b;
    CHECK_MSG(vision_image_load_file(path, 0, 0, &a, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(vision_image_load_buffer(png, len, 0, 0, &b, err, sizeof err) == 0, "%s", err);
    free(png);
    CHECK(a.w == w && a.h == h && b.w == w && b.h == h);
    for (int i = 0; i < w * h * 3; i++) {
        CHECK_NEAR(a.rgb[i] * 255.0f, px[i], 1e-3);
        CHECK(a.rgb[i] == b.rgb[i]);
    }
    vision_image_free(&a);
    vision_image_free(&b);
    /* decode straight to an exact size, and to the patch grid */
    CHECK(vision_image_load_file(path, 16, 8, &a, err, sizeof err) == 0 && a.w == 16 && a.h == 8);
    vision_image_free(&a);
    CHECK(vision_image_load_for_patches(path, NULL, 0, 4, 8, &a, err, sizeof err) == 0);
    CHECK_MSG(a.w % 8 == 0 && a.h % 8 == 0 && (a.w / 8) * (a.h / 8) <= 4, "%dx%d", a.w, a.h);
    vision_image_free(&a);
    /* errors: missing file, garbage, empty buffer */
    CHECK(vision_image_load_file("/nonexistent/x.png", 0, 0, &a, err, sizeof err) == VISION_IO);
    f = fopen(path, "wb");
    fputs("this is not an image at all", f);
    fclose(f);
    CHECK(vision_image_load_file(path, 0, 0, &a, err, sizeof err) == VISION_FORMAT);
    CHECK_MSG(strstr(err, "vision:"), "%s", err);
    CHECK(vision_image_load_buffer("xx", 2, 0, 0, &a, err, sizeof err) == VISION_FORMAT);
    CHECK(vision_image_load_buffer(NULL, 0, 0, 0, &a, err, sizeof err) == VISION_FORMAT);
}

TEST(vips_alpha_flattened_on_white) {
    uint8_t px[4 * 2 * 4];
    for (int i = 0; i < 8; i++) {
        px[i * 4 + 0] = 10; px[i * 4 + 1] = 20; px[i * 4 + 2] = 30;
        px[i * 4 + 3] = i < 4 ? 0 : 255;
    }
    size_t len;
    uint8_t *png = png_encode(px, 4, 2, 4, &len);
    CHECK(png);
    vision_image a;
    char err[256] = "";
    int rc = vision_image_load_buffer(png, len, 0, 0, &a, err, sizeof err);
    free(png);
    CHECK_MSG(rc == 0, "%s", err);
    CHECK(a.w == 4 && a.h == 2);
    CHECK_NEAR(a.rgb[0], 1.0, 1e-3);              /* transparent -> white */
    CHECK_NEAR(a.rgb[4 * 3 + 2] * 255, 30, 1e-2); /* opaque row keeps its colour */
    vision_image_free(&a);
}

TEST(vips_resize_exact_sizes) {
    static const int cases[][4] = {{23, 37, 8, 16}, {1, 4000, 32, 1568}, {4000, 1, 1568, 32},
                                   {5, 3, 32, 32}, {720, 1280, 160, 288}, {100, 100, 99, 101}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        int h = cases[k][0], w = cases[k][1], oh = cases[k][2], ow = cases[k][3];
        float *rgb = malloc((size_t)h * w * 3 * sizeof *rgb);
        CHECK(rgb);
        for (int i = 0; i < h * w * 3; i++) rgb[i] = 0.25f;
        vision_image in = {w, h, rgb}, out;
        char err[256] = "";
        int rc = vision_image_resize(&in, ow, oh, &out, err, sizeof err);
        free(rgb);
        CHECK_MSG(rc == 0, "%s", err);
        CHECK_MSG(out.w == ow && out.h == oh, "%dx%d -> %dx%d, want %dx%d", h, w, out.h, out.w, oh, ow);
        double worst = 0;
        for (int i = 0; i < ow * oh * 3; i++) worst = fmax(worst, fabs(out.rgb[i] - 0.25));
        vision_image_free(&out);
        CHECK_MSG(worst < 1e-3, "flat image changed by %g after resize", worst);
    }
}
