/* Shared by tests/test_clip.c, tests/test_figenc.c and bench/bench_clip.c: the tiny
 * counter-based PRNG that scripts/golden_clip.py also implements (so random CLIP weights
 * and inputs need not be committed), a minimal safetensors (F32) writer and fixture helpers. */
#ifndef MMRAG_TESTS_CLIP_GEN_H
#define MMRAG_TESTS_CLIP_GEN_H
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline uint64_t clipgen_seed(const char *name) {
    uint64_t h = 1469598103934665603ULL;
    for (const unsigned char *s = (const unsigned char *)name; *s; s++) h = (h ^ *s) * 1099511628211ULL;
    return h * 0x9E3779B97F4A7C15ULL;
}

static inline uint64_t clipgen_raw(uint64_t seed, uint64_t i) {
    uint64_t z = seed + (i + 1) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* offset + scale * u, u uniform in [-1, 1), all in float32 like the numpy side. */
static inline void clipgen_fill(const char *name, float *dst, int64_t n, float scale, float offset) {
    uint64_t s = clipgen_seed(name);
    for (int64_t i = 0; i < n; i++) {
        float u = (float)(clipgen_raw(s, (uint64_t)i) >> 40) * (1.0f / 16777216.0f);
        u = u * 2.0f - 1.0f;
        float v = scale * u;
        dst[i] = offset + v;
    }
}

static inline void clipgen_image(const char *name, uint8_t *dst, int64_t n) {
    uint64_t s = clipgen_seed(name);
    for (int64_t i = 0; i < n; i++) dst[i] = (uint8_t)(clipgen_raw(s, (uint64_t)i) >> 56);
}

typedef struct {
    const char *name;
    int n_dims;
    int64_t shape[4];
    const float *data;
} clipgen_tensor;

/* Write F32 tensors as a safetensors file. Returns 0 on success. */
static inline int clipgen_write_safetensors(const char *path, const clipgen_tensor *t, int n) {
    json_t *h = json_object();
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        json_t *e = json_object(), *shape = json_array();
        int64_t cnt = 1;
        for (int d = 0; d < t[i].n_dims; d++) {
            json_array_append_new(shape, json_integer(t[i].shape[d]));
            cnt *= t[i].shape[d];
        }
        json_object_set_new(e, "dtype", json_string("F32"));
        json_object_set_new(e, "shape", shape);
        json_object_set_new(e, "data_offsets",
                            json_pack("[II]", (json_int_t)off, (json_int_t)(off + cnt * 4)));
        json_object_set_new(h, t[i].name, e);
        off += (size_t)cnt * 4;
    }
    char *hs = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    if (!hs) return -1;
    size_t hl = strlen(hs), pad = (8 - hl % 8) % 8;
    FILE *f = fopen(path, "wb");
    if (!f) { free(hs); return -1; }
    uint64_t len = hl + pad;
    int ok = fwrite(&len, 8, 1, f) == 1 && fwrite(hs, 1, hl, f) == hl;
    for (size_t i = 0; i < pad && ok; i++) ok = fputc(' ', f) != EOF;
    for (int i = 0; i < n && ok; i++) {
        int64_t cnt = 1;
        for (int d = 0; d < t[i].n_dims; d++) cnt *= t[i].shape[d];
        ok = fwrite(t[i].data, 4, (size_t)cnt, f) == (size_t)cnt;
    }
    free(hs);
    return (fclose(f) == 0 && ok) ? 0 : -1;
}
/* Largest |a[i] - b[i]|. */
static inline double max_abs_diff(const float *a, const float *b, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        if (d < 0) d = -d;
        if (d > m) m = d;
    }
    return m;
}

/* A JSON array of exactly n numbers into out. Returns 0, or -1 when it is not one. */
static inline int json_floats(json_t *arr, float *out, int n) {
    if (!json_is_array(arr) || (int)json_array_size(arr) != n) return -1;
    for (int i = 0; i < n; i++) out[i] = (float)json_number_value(json_array_get(arr, (size_t)i));
    return 0;
}
#endif
