/* Kernel tests: every CPU op on every available path (scalar reference, AVX2) against a
 * naive double-precision reference written here, on random data with odd sizes. */
#include <stdatomic.h>
#include <stdint.h>

#include "kernels/kern_internal.h"
#include "tests/test.h"

/* ---- helpers ---------------------------------------------------------------- */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}
static float rnd(float lo, float hi) { return lo + (hi - lo) * (float)(rnd_u32() & 0xffffff) / 16777216.0f; }
static float *rnd_vec(int64_t n, float lo, float hi) {
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = rnd(lo, hi);
    return v;
}
static float max_abs_diff(const float *a, const double *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > m || d != d) m = d != d ? INFINITY : d;
    }
    return (float)m;
}

/* the paths under test: scalar always, AVX2 when the CPU has it */
/* the scalar reference, the table in use, and the plain AVX2 table where the one in use
 * is its VNNI variant */
static int n_paths(const kern_ops *paths[3]) {
    paths[0] = &kern_ops_scalar;
    paths[1] = kern_ops_avx2_table();
    if (!paths[1]) return 1;
    paths[2] = kern_ops_avx2_plain_table();
    return paths[2] != paths[1] ? 3 : 2;
}

static const int64_t SIZES[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 384, 1001};
#define NSIZES (int)(sizeof SIZES / sizeof SIZES[0])

/* quantize a weight matrix (rows of `in`) into type t using the reference formulas */
static void quantize_row(kern_type t, const float *x, void *dst, int64_t n) {
    for (int64_t b = 0; b < n / KERN_QK; b++) {
        const float *s = x + b * KERN_QK;
        if (t == KERN_Q8_0) {
            kern_quantize_q8_0(s, (kern_block_q8_0 *)dst + b, KERN_QK);
        } else if (t == KERN_Q4_0) {
            kern_block_q4_0 *o = (kern_block_q4_0 *)dst + b;
            float amax = 0, mx = 0;
            for (int j = 0; j < KERN_QK; j++) if (fabsf(s[j]) > amax) { amax = fabsf(s[j]); mx = s[j]; }
            float d = mx / -8.0f, id = d ? 1.0f / d : 0;
            o->d = kern_fp32_to_fp16(d);
            for (int j = 0; j < 16; j++) {
                int a = (int)fminf(15, s[j] * id + 8.5f), c = (int)fminf(15, s[j + 16] * id + 8.5f);
                o->qs[j] = (uint8_t)(a | (c << 4));
            }
        } else if (t == KERN_Q4_1) {
            kern_block_q4_1 *o = (kern_block_q4_1 *)dst + b;
            float mn = s[0], mx = s[0];
            for (int j = 1; j < KERN_QK; j++) { mn = fminf(mn, s[j]); mx = fmaxf(mx, s[j]); }
            float d = (mx - mn) / 15.0f, id = d ? 1.0f / d : 0;
            o->d = kern_fp32_to_fp16(d);
            o->m = kern_fp32_to_fp16(mn);
            for (int j = 0; j < 16; j++) {
                int a = (int)fminf(15, (s[j] - mn) * id + 0.5f), c = (int)fminf(15, (s[j + 16] - mn) * id + 0.5f);
                o->qs[j] = (uint8_t)(a | (c << 4));
            }
        }
    }
}

/* ---- fp16 ------------------------------------------------------------------- */
TEST(fp16_edge_cases) {
    CHECK(isinf(kern_fp16_to_fp32(0x7c00)) && kern_fp16_to_fp32(0x7c00) > 0);
    CHECK(isinf(kern_fp16_to_fp32(0xfc00)) && kern_fp16_to_fp32(0xfc00) < 0);
    CHECK(isnan(kern_fp16_to_fp32(0x7e00)));
    CHECK(kern_fp16_to_fp32(0x0001) == ldexpf(1, -24));       /* smallest subnormal */
    CHECK(kern_fp16_to_fp32(0x03ff) == ldexpf(1023, -24));    /* largest subnormal */
    CHECK(kern_fp16_to_fp32(0x0400) == ldexpf(1, -14));       /* smallest normal */
    CHECK(kern_fp16_to_fp32(0x7bff) == 65504.0f);
    CHECK(kern_fp16_to_fp32(0x3c00) == 1.0f && kern_fp16_to_fp32(0xc000) == -2.0f);
    CHECK(signbit(kern_fp16_to_fp32(0x8000)) && kern_fp16_to_fp32(0x8000) == 0);
    CHECK(kern_fp32_to_fp16(INFINITY) == 0x7c00 && kern_fp32_to_fp16(-INFINITY) == 0xfc00);
    uint16_t hn = kern_fp32_to_fp16(NAN);
    CHECK((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff) != 0);
    CHECK(kern_fp32_to_fp16(65504.0f) == 0x7bff);
    CHECK(kern_fp32_to_fp16(65519.0f) == 0x7bff);               /* below the midpoint */
    CHECK(kern_fp32_to_fp16(65520.0f) == 0x7c00);               /* midpoint ties to inf */
    CHECK(kern_fp32_to_fp16(1e9f) == 0x7c00);
    CHECK(kern_fp32_to_fp16(ldexpf(1, -24)) == 0x0001);
    CHECK(kern_fp32_to_fp16(ldexpf(1, -25)) == 0x0000);         /* tie to even: 0 */
    CHECK(kern_fp32_to_fp16(ldexpf(1.5f, -25)) == 0x0001);
    CHECK(kern_fp32_to_fp16(ldexpf(3, -25)) == 0x0002);         /* 1.5 ulp: tie to even 2 */
    CHECK(kern_fp32_to_fp16(1.0f + ldexpf(1, -11)) == 0x3c00);  /* tie to even down */
    CHECK(kern_fp32_to_fp16(1.0f + ldexpf(3, -11)) == 0x3c02);  /* tie to even up */
    CHECK(kern_fp32_to_fp16(-0.0f) == 0x8000);
    CHECK(kern_bf16_to_fp32(0x3f80) == 1.0f && kern_bf16_to_fp32(0xc040) == -3.0f);
}

TEST(fp16_all_values_round_trip) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = kern_fp16_to_fp32((uint16_t)h);
        if (isnan(f)) {
            CHECK((h & 0x7c00) == 0x7c00 && (h & 0x3ff));
            continue;
        }
        CHECK_MSG(kern_fp32_to_fp16(f) == h, "h=%04x f=%g back=%04x", h, f, kern_fp32_to_fp16(f));
    }
}

TEST(fp16_rounding_is_nearest) {
    for (int i = 0; i < 200000; i++) {
        float f = ldexpf(rnd(-1, 1), (int)(rnd_u32() % 44) - 28);
        uint16_t h = kern_fp32_to_fp16(f);
        double v = kern_fp16_to_fp32(h), err = fabs(v - f);
        /* neighbours must not be closer */
        uint16_t up = (uint16_t)(h + 1), dn = (uint16_t)(h - 1);
        if ((up & 0x7c00) != 0x7c00) CHECK_MSG(fabs((double)kern_fp16_to_fp32(up) - f) >= err, "%g", f);
        if ((h & 0x7fff) != 0) CHECK_MSG(fabs((double)kern_fp16_to_fp32(dn) - f) >= err, "%g", f);
    }
}

TEST(fp16_bulk_paths_agree) {
    const kern_ops *paths[3];
    int np = n_paths(paths);
    uint16_t *src = malloc(65536 * 2);
    float *dst = malloc(65536 * 4);
    for (uint32_t h = 0; h < 65536; h++) src[h] = (uint16_t)h;
    for (int p = 0; p < np; p++) {
        for (int64_t off = 0; off < 3; off++) {
            paths[p]->fp16_to_f32(src + off, dst, 65536 - off);
            for (uint32_t h = (uint32_t)off; h < 65536; h++) {
                float a = dst[h - off], b = kern_fp16_to_fp32((uint16_t)h);
                CHECK_MSG(memcmp(&a, &b, 4) == 0 || (isnan(a) && isnan(b)), "%s h=%04x", paths[p]->name, h);
            }
        }
    }
    free(src);
    free(dst);
}

/* ---- quantization and dots -------------------------------------------------- */
TEST(quantize_q8_0_round_trip) {
    const kern_ops *paths[3];
    int np = n_paths(paths);
    int64_t n = 32 * 37;
    float *x = rnd_vec(n, -3, 3), *y = malloc((size_t)n * 4);
    x[5] = 0; for (int j = 64; j < 96; j++) x[j] = 0; /* an all-zero block */
    kern_block_q8_0 *q = malloc((size_t)(n / 32) * sizeof *q), *q2 = malloc((size_t)(n / 32) * sizeof *q2);
    paths[0]->quantize_q8_0(x, q, n);
    for (int p = 1; p < np; p++) {
        paths[p]->quantize_q8_0(x, q2, n);
        for (int64_t b = 0; b < n / 32; b++) {
            CHECK(q[b].d == q2[b].d);
            for (int j = 0; j < 32; j++) CHECK_MSG(abs(q[b].qs[j] - q2[b].qs[j]) <= 1, "b=%ld j=%d", (long)b, j);
        }
    }
    kern_to_f32(KERN_Q8_0, q, y, n);
    for (int64_t b = 0; b < n / 32; b++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[b * 32 + j]));
        for (int j = 0; j < 32; j++) CHECK_NEAR(y[b * 32 + j], x[b * 32 + j], amax / 127 * 0.51 + 1e-3 * amax);
    }
    for (int j = 64; j < 96; j++) CHECK(y[j] == 0);
    free(x); free(y); free(q); free(q2);
}

TEST(dequantize_q4_layouts) {
    /* hand-built blocks check ggml's nibble order: element j<16 low nibble of qs[j],
     * element j>=16 high nibble of qs[j-16] */
    kern_block_q4_0 b0;
    kern_block_q4_1 b1;
    b0.d = kern_fp32_to_fp16(0.5f);
    b1.d = kern_fp32_to_fp16(0.25f);
    b1.m = kern_fp32_to_fp16(-1.0f);
    for (int j = 0; j < 16; j++) b0.qs[j] = b1.qs[j] = (uint8_t)((j & 0xf) | ((15 - j) << 4));
    float y0[32], y1[32];
    kern_to_f32(KERN_Q4_0, &b0, y0, 32);
    kern_to_f32(KERN_Q4_1, &b1, y1, 32);
    for (int j = 0; j < 16; j++) {
        CHECK(y0[j] == (j - 8) * 0.5f && y0[j + 16] == (15 - j - 8) * 0.5f);
        CHECK(y1[j] == j * 0.25f - 1 && y1[j + 16] == (15 - j) * 0.25f - 1);
    }
    CHECK(kern_type_row_bytes(KERN_Q4_0, 64) == 36 && kern_type_row_bytes(KERN_Q4_1, 64) == 40);
    CHECK(kern_type_row_bytes(KERN_Q8_0, 64) == 68 && kern_type_row_bytes(KERN_Q8_0, 33) == 0);
    CHECK(kern_type_row_bytes(KERN_F16, 5) == 10 && strcmp(kern_type_name(KERN_Q4_1), "q4_1") == 0);
}

TEST(dequantize_paths_agree) {
    const kern_ops *paths[3];
    int np = n_paths(paths);
    int64_t n = 32 * 23;
    float *w = rnd_vec(n, -2, 3), *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
    uint8_t q[23 * 34];
    const kern_type types[] = {KERN_Q8_0, KERN_Q4_0, KERN_Q4_1};
    for (int t = 0; t < 3; t++) {
        quantize_row(types[t], w, q, n);
        double tol = 0;
        for (int64_t i = 0; i < n; i++) tol = fmax(tol, fabs(w[i]) * 2e-7);
        for (int p = 0; p < np; p++) {
            if (types[t] == KERN_Q8_0) paths[p]->q8_0_to_f32((void *)q, p ? b : a, n);
            if (types[t] == KERN_Q4_0) paths[p]->q4_0_to_f32((void *)q, p ? b : a, n);
            if (types[t] == KERN_Q4_1) paths[p]->q4_1_to_f32((void *)q, p ? b : a, n);
        }
        for (int64_t i = 0; np > 1 && i < n; i++) CHECK_NEAR(a[i], b[i], tol);
        /* and the dequantized row is close to what was quantized */
        for (int64_t i = 0; i < n; i++) CHECK_NEAR(a[i], w[i], types[t] == KERN_Q8_0 ? 3.0 / 127 : 5.0 / 15);
    }
    free(w); free(a); free(b);
}

TEST(quantized_dots_vs_dequantized) {
    const kern_ops *paths[3];
    int np = n_paths(paths);
    const kern_type types[] = {KERN_Q8_0, KERN_Q4_0, KERN_Q4_1};
    for (int ni = 1; ni <= 40; ni += 3) {
        int64_t n = 32 * ni;
        float *w = rnd_vec(n, -1, 1.5f), *x = rnd_vec(n, -2, 2), *wd = malloc((size_t)n * 4), *xd = malloc((size_t)n * 4);
        kern_block_q8_0 *xq = malloc((size_t)ni * sizeof *xq);
        kern_quantize_q8_0(x, xq, n);
        kern_to_f32(KERN_Q8_0, xq, xd, n);
        for (int t = 0; t < 3; t++) {
            uint8_t wq[40 * 34];
            quantize_row(types[t], w, wq, n);
            kern_to_f32(types[t], wq, wd, n);
            double ref = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) { ref += (double)wd[i] * xd[i]; mag += fabs((double)wd[i] * xd[i]); }
            double exact = 0;
            for (int64_t i = 0; i < n; i++) exact += (double)w[i] * x[i];
            float ys[40];
            kern_q8_0_block_sums(xq, n, ys);
            for (int p = 0; p < np; p++) {
                if (types[t] == KERN_Q4_1) {
                    float g2 = paths[p]->dot_q4_1_q8_0s(n, (void *)wq, xq, ys);
                    CHECK_MSG(fabs(g2 - ref) <= 1e-5 * mag + 1e-6, "%s q4_1s n=%ld", paths[p]->name, (long)n);
                }
                float got = types[t] == KERN_Q8_0 ? paths[p]->dot_q8_0_q8_0(n, (void *)wq, xq)
                          : types[t] == KERN_Q4_0 ? paths[p]->dot_q4_0_q8_0(n, (void *)wq, xq)
                                                  : paths[p]->dot_q4_1_q8_0(n, (void *)wq, xq);
                CHECK_MSG(fabs(got - ref) <= 1e-5 * mag + 1e-6, "%s %s n=%ld got %g ref %g",
                          paths[p]->name, kern_type_name(types[t]), (long)n, got, ref);
                /* and the quantized dot stays close to the exact fp32 dot */
                CHECK_MSG(fabs(got - exact) <= (types[t] == KERN_Q8_0 ? 0.02 : 0.1) * mag + 1e-3,
                          "%s n=%ld got %g exact %g", kern_type_name(types[t]), (long)n, got, exact);
            }
        }
        free(w); free(x); free(wd); free(xd); free(xq);
    }
}

TEST(qdot4_matches_single_dots) {
    const kern_ops *paths[3];
    int np = n_paths(paths);
    const kern_type types[] = {KERN_Q8_0, KERN_Q4_0, KERN_Q4_1};
    for (int ni = 1; ni <= 19; ni += 6) {
        int64_t n = 32 * ni;
        float *w = rnd_vec(n, -1, 1), *x = rnd_vec(4 * n, -2, 2), ys[4 * 19];
        kern_block_q8_0 xq[4 * 19];
        for (int k = 0; k < 4; k++) {
            kern_quantize_q8_0(x + k * n, xq + k * ni, n);
            kern_q8_0_block_sums(xq + k * ni, n, ys + k * ni);
        }
        for (int t = 0; t < 3; t++) {
            uint8_t wq[19 * 34];
            quantize_row(types[t], w, wq, n);
            for (int p = 0; p < np; p++) {
                float out[4];
                paths[p]->qdot4(types[t], n, wq, xq, ni, ys, out);
                for (int k = 0; k < 4; k++) {
                    float one = types[t] == KERN_Q8_0 ? kern_ops_scalar.dot_q8_0_q8_0(n, (void *)wq, xq + k * ni)
                              : types[t] == KERN_Q4_0 ? kern_ops_scalar.dot_q4_0_q8_0(n, (void *)wq, xq + k * ni)
                                                      : kern_ops_scalar.dot_q4_1_q8_0(n, (void *)wq, xq + k * ni);
                    CHECK_MSG(fabs(out[k] - one) <= 1e-5 * (1 + fabs(one)) * ni, "%s %s n=%ld k=%d %g vs %g",
                              paths[p]->name, kern_type_name(types[t]), (long)n, k, out[k], one);
                }
            }
        }
        free(w); free(x);
    }
}

TEST(dot_f32) {
    const kern_ops *paths[3];
    int np = n_paths(paths);
    for (int s = 0; s < NSIZES; s++) {
        int64_t n = SIZES[s];
        float *x = rnd_vec(n, -1, 1), *y = rnd_vec(n, -1, 1);
        double ref = 0;
        for (int64_t i = 0; i < n; i++) ref += (double)x[i] * y[i];
        uint16_t *h = malloc((size_t)n * 2), *bf = malloc((size_t)n * 2);
        double rh = 0, rb = 0;
        for (int64_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &x[i], 4);
            h[i] = kern_fp32_to_fp16(x[i]);
            bf[i] = (uint16_t)(u >> 16);
            rh += (double)kern_fp16_to_fp32(h[i]) * y[i];
            rb += (double)kern_bf16_to_fp32(bf[i]) * y[i];
        }
        for (int p = 0; p < np; p++) {
            CHECK_NEAR(paths[p]->dot_f32(n, x, y), ref, 1e-5 * (double)n);
            CHECK_NEAR(paths[p]->dot_f16_f32(n, h, y), rh, 1e-5 * (double)n);
            CHECK_NEAR(paths[p]->dot_bf16_f32(n, bf, y), rb, 1e-5 * (double)n);
        }
        free(h); free(bf);
        CHECK_NEAR(kern_dot_f32(n, x, y), ref, 1e-5 * (double)n);
        free(x); free(y);
    }
}

/* ---- elementwise ------------------------------------------------------------ */
typedef void (*unary_fn)(float *, int64_t);
static double ref_gelu(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }
static double ref_qgelu(double x) { return x / (1 + exp(-1.702 * x)); }
static double ref_silu(double x) { return x / (1 + exp(-x)); }
static double ref_gelu_tanh(double x) {
    return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

static int check_unary(const char *name, unary_fn f, double (*ref)(double), float lo, float hi) {
    for (int s = 0; s < NSIZES; s++) {
        int64_t n = SIZES[s];
        float *x = rnd_vec(n, lo, hi);
        double *r = malloc((size_t)n * sizeof *r);
        for (int64_t i = 0; i < n; i++) r[i] = ref(x[i]);
        f(x, n);
        for (int64_t i = 0; i < n; i++) {
            if (fabs(x[i] - r[i]) > 2e-6 * (1 + fabs(r[i]))) {
                fprintf(stderr, "  %s n=%ld i=%ld got %.9g ref %.9g\n", name, (long)n, (long)i, x[i], r[i]);
                free(x); free(r);
                return 0;
            }
        }
        free(x); free(r);
    }
    return 1;
}

TEST(activations) {
    const kern_ops *paths[3];
    int np = n_paths(paths);
    for (int p = 0; p < np; p++) {
        CHECK(check_unary("gelu", paths[p]->gelu, ref_gelu, -8, 8));
        CHECK(check_unary("quick_gelu", paths[p]->quick_gelu, ref_qgelu, -12, 12));
        CHECK(check_unary("silu", paths[p]->silu, ref_silu, -20, 20));
        CHECK(check_unary("silu_far", paths[p]->silu, ref_silu, -100, 100));
        CHECK(check_unary("gelu_far", paths[p]->gelu, ref_gelu, -50, 50));
    }
    CHECK(check_unary("kern_gelu", kern_gelu, ref_gelu, -6, 6));
    CHECK(check_unary("kern_quick_gelu", kern_quick_gelu, ref_qgelu, -6, 6));
    CHECK(check_unary("kern_silu", kern_silu, ref_silu, -6, 6));
}

TEST(swiglu_add) {
    const kern_ops *paths[3];
    int np = n_paths(paths);
    for (int p = 0; p < np; p++) {
        for (int s = 0; s < NSIZES; s++) {
            int64_t n = SIZES[s];
            float *g = rnd_vec(n, -10, 10), *u = rnd_vec(n, -3, 3), *y = malloc((size_t)n * 4);
            double *r = malloc((size_t)n * 8);
            for (int64_t i = 0; i < n; i++) r[i] = ref_silu(g[i]) * u[i];
            paths[p]->swiglu(g, u, y, n);
            CHECK(max_abs_diff(y, r, n) <= 1e-5);
            for (int64_t i = 0; i < n; i++) r[i] = ref_gelu_tanh(g[i]) * u[i];
            paths[p]->geglu(g, u, y, n);
            CHECK(max_abs_diff(y, r, n) <= 1e-5);
            float *g2 = rnd_vec(n, -60, 60); /* far tails: exact 0 / identity, never NaN */
            for (int64_t i = 0; i < n; i++) r[i] = ref_gelu_tanh(g2[i]) * u[i];
            paths[p]->geglu(g2, u, y, n);
            CHECK(max_abs_diff(y, r, n) <= 1e-4);
            free(g2);
            for (int64_t i = 0; i < n; i++) r[i] = (float)(y[i] + u[i]);
            paths[p]->add(y, u, n);
            CHECK(max_abs_diff(y, r, n) == 0);
            free(g); free(u); free(y); free(r);
        }
    }
}

TEST(softmax) {
    const kern_ops *paths[3];
    int np = n_paths(paths);
    for (int p = 0; p < np; p++) {
        for (int s = 0; s < NSIZES; s++) {
            int64_t n = SIZES[s];
            float *x = rnd_vec(n, -30, 30);
            x[n / 2] = 80; /* large values must not overflow */
            double *r = malloc((size_t)n * 8), mx = -INFINITY, sum = 0;
            for (int64_t i = 0; i < n; i++) mx = fmax(mx, x[i]);
            for (int64_t i = 0; i < n; i++) sum += (r[i] = exp(x[i] - mx));
            for (int64_t i = 0; i < n; i++) r[i] /= sum;
            paths[p]->softmax(x, n);
            CHECK_MSG(max_abs_diff(x, r, n) <= 1e-6, "%s n=%ld", paths[p]->name, (long)n);
            free(x); free(r);
        }
        float m[5] = {-INFINITY, 0, -INFINITY, 0, -INFINITY}; /* masked entries */
        paths[p]->softmax(m, 5);
        CHECK(m[0] == 0 && m[1] == 0.5f && m[3] == 0.5f);
    }
}

TEST(norms) {
    const kern_ops *paths[3];
    int np = n_paths(paths);
    for (int p = 0; p < np; p++) {
        for (int s = 0; s < NSIZES; s++) {
            int64_t n = SIZES[s];
            float *x = rnd_vec(n, -2, 5), *g = rnd_vec(n, 0.5f, 1.5f), *b = rnd_vec(n, -1, 1);
            float *y = malloc((size_t)n * 4);
            double *r = malloc((size_t)n * 8), mean = 0, var = 0, ss = 0;
            for (int64_t i = 0; i < n; i++) mean += x[i];
            mean /= (double)n;
            for (int64_t i = 0; i < n; i++) { var += (x[i] - mean) * (x[i] - mean); ss += (double)x[i] * x[i]; }
            var /= (double)n;
            for (int64_t i = 0; i < n; i++) r[i] = (x[i] - mean) / sqrt(var + 1e-5) * g[i] + b[i];
            paths[p]->layernorm(x, y, n, g, b, 1e-5f);
            CHECK_MSG(max_abs_diff(y, r, n) <= 2e-5, "layernorm %s n=%ld", paths[p]->name, (long)n);
            for (int64_t i = 0; i < n; i++) r[i] = (x[i] - mean) / sqrt(var + 1e-5);
            memcpy(y, x, (size_t)n * 4);
            paths[p]->layernorm(y, y, n, NULL, NULL, 1e-5f); /* in place */
            CHECK(max_abs_diff(y, r, n) <= 2e-5);
            for (int64_t i = 0; i < n; i++) r[i] = x[i] / sqrt(ss / (double)n + 1e-6) * g[i];
            paths[p]->rmsnorm(x, y, n, g, 1e-6f);
            CHECK_MSG(max_abs_diff(y, r, n) <= 2e-5, "rmsnorm %s n=%ld", paths[p]->name, (long)n);
            /* in place */
            memcpy(y, x, (size_t)n * 4);
            paths[p]->rmsnorm(y, y, n, g, 1e-6f);
            CHECK(max_abs_diff(y, r, n) <= 2e-5);
            free(x); free(g); free(b); free(y); free(r);
        }
    }
}

/* ---- rope ------------------------------------------------------------------- */
TEST(rope_both_layouts) {
    const int hd = 64, nh = 3;
    const int rots[] = {64, 32};
    const int64_t poss[] = {0, 1, 17, 4095};
    for (int neox = 0; neox < 2; neox++)
        for (int ri = 0; ri < 2; ri++)
            for (int pi = 0; pi < 4; pi++) {
                int rot = rots[ri];
                float *x = rnd_vec(nh * hd, -1, 1);
                double *r = malloc(sizeof(double) * nh * hd);
                for (int i = 0; i < nh * hd; i++) r[i] = x[i];
                for (int h = 0; h < nh; h++)
                    for (int i = 0; i < rot / 2; i++) {
                        double ang = poss[pi] * 0.5 * pow(10000.0, -2.0 * i / rot);
                        int a = neox ? i : 2 * i, b = neox ? i + rot / 2 : 2 * i + 1;
                        double x0 = x[h * hd + a], x1 = x[h * hd + b];
                        r[h * hd + a] = x0 * cos(ang) - x1 * sin(ang);
                        r[h * hd + b] = x0 * sin(ang) + x1 * cos(ang);
                    }
                /* the two-step form (angles once, applied per vector) must match bit for bit */
                float *x2 = malloc(sizeof(float) * nh * hd), cs[32], sn[32];
                memcpy(x2, x, sizeof(float) * nh * hd);
                kern_rope_angles(rot, poss[pi], 10000.0f, 0.5f, cs, sn);
                kern_rope_apply(x2, nh, hd, rot, cs, sn, neox);
                kern_rope(x, nh, hd, rot, poss[pi], 10000.0f, 0.5f, neox);
                CHECK_MSG(max_abs_diff(x, r, nh * hd) <= 2e-6, "neox=%d rot=%d pos=%ld", neox, rot, (long)poss[pi]);
                CHECK_MSG(memcmp(x, x2, sizeof(float) * nh * hd) == 0, "two-step rope differs: neox=%d rot=%d", neox, rot);
                free(x); free(x2); free(r);
            }
}

/* ---- GEMM and linear -------------------------------------------------------- */
/* one call, and split over a pool of 3 by rows (M 130) and by columns (M 7, N 200) */
TEST(gemm_vs_naive) {
    const int dims[][3] = {{1, 1, 1}, {5, 7, 3}, {17, 33, 65}, {64, 48, 100}, {130, 20, 37}, {7, 200, 19}};
    kern_pool *pool = kern_pool_create(3);
    for (int d = 0; d < 6; d++)
        for (int tb = 0; tb < 4; tb++) {
            int M = dims[d][0], N = dims[d][1], K = dims[d][2];
            float *A = rnd_vec((int64_t)M * K, -1, 1), *B = rnd_vec((int64_t)N * K, -1, 1);
            float *C = rnd_vec((int64_t)M * N, -1, 1);
            double *r = malloc(sizeof(double) * M * N);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double s = 0;
                    for (int k = 0; k < K; k++) s += (double)A[i * K + k] * (tb & 1 ? B[j * K + k] : B[k * N + j]);
                    r[i * N + j] = 0.5 * s + 2.0 * C[i * N + j];
                }
            kern_gemm_f32(tb & 2 ? pool : NULL, tb & 1, M, N, K, 0.5f, A, K, B, tb & 1 ? K : N, 2.0f, C, N);
            CHECK_MSG(max_abs_diff(C, r, (int64_t)M * N) <= 1e-4, "M=%d N=%d K=%d tb=%d pool=%d", M, N, K,
                      tb & 1, tb >> 1);
            free(A); free(B); free(C); free(r);
        }
    kern_pool_free(pool);
}

static int check_linear(const kern_ops *ops, kern_pool *pool, kern_type t, int64_t n, int64_t in,
                        int64_t out, int use_bias) {
    float *X = rnd_vec(n * in, -1, 1), *Wf = rnd_vec(out * in, -0.5f, 0.5f);
    float *bias = use_bias ? rnd_vec(out, -1, 1) : NULL;
    float *Y = malloc((size_t)(n * out) * 4), *Wd = malloc((size_t)(out * in) * 4), *Xd = malloc((size_t)(n * in) * 4);
    size_t rb = kern_type_row_bytes(t, in);
    uint8_t *W = malloc(rb * (size_t)out);
    for (int64_t o = 0; o < out; o++) {
        void *row = W + rb * (size_t)o;
        if (t == KERN_F32) memcpy(row, Wf + o * in, rb);
        else if (t == KERN_F16) for (int64_t i = 0; i < in; i++) ((uint16_t *)row)[i] = kern_fp32_to_fp16(Wf[o * in + i]);
        else if (t == KERN_BF16) for (int64_t i = 0; i < in; i++) { uint32_t u; memcpy(&u, &Wf[o * in + i], 4); ((uint16_t *)row)[i] = (uint16_t)(u >> 16); }
        else quantize_row(t, Wf + o * in, row, in);
        kern_to_f32(t, row, Wd + o * in, in);
    }
    int quant = t == KERN_Q8_0 || t == KERN_Q4_0 || t == KERN_Q4_1;
    for (int64_t r = 0; r < n; r++) {
        if (quant && n < kern_linear_dequant_rows(t)) { /* int8 path: X is quantized too */
            kern_block_q8_0 *q = malloc((size_t)(in / 32) * sizeof *q);
            kern_quantize_q8_0(X + r * in, q, in);
            kern_to_f32(KERN_Q8_0, q, Xd + r * in, in);
            free(q);
        } else {
            memcpy(Xd + r * in, X + r * in, (size_t)in * 4);
        }
    }
    if (ops) kern_linear_ops(ops, pool, X, n, in, W, t, bias, out, Y);
    else kern_linear(pool, X, n, in, W, t, bias, out, Y);
    int ok = 1;
    for (int64_t r = 0; r < n && ok; r++)
        for (int64_t o = 0; o < out; o++) {
            double s = bias ? bias[o] : 0, mag = 1;
            for (int64_t i = 0; i < in; i++) { s += (double)Xd[r * in + i] * Wd[o * in + i]; mag += fabs((double)Xd[r * in + i] * Wd[o * in + i]); }
            if (fabs(Y[r * out + o] - s) > 2e-5 * mag) {
                fprintf(stderr, "  linear %s %s n=%ld in=%ld out=%ld [%ld,%ld] got %g ref %g\n",
                        ops ? ops->name : "default", kern_type_name(t), (long)n, (long)in, (long)out,
                        (long)r, (long)o, Y[r * out + o], s);
                ok = 0;
                break;
            }
        }
    free(X); free(Wf); free(bias); free(Y); free(Wd); free(Xd); free(W);
    return ok;
}

TEST(linear_all_types) {
    const kern_ops *paths[3];
    int np = n_paths(paths);
    kern_pool *pool = kern_pool_create(3);
    const kern_type types[] = {KERN_F32, KERN_F16, KERN_BF16, KERN_Q8_0, KERN_Q4_0, KERN_Q4_1};
    const int64_t shapes[][3] = {{1, 64, 7}, {3, 96, 33}, {17, 128, 129}, {40, 32, 300},
                                 {5, 256, 200}, {8, 64, 20}, {16, 64, 9}, {15, 64, 9}, {31, 64, 5}, {32, 64, 5}};
    for (int p = 0; p < np; p++)
        for (int t = 0; t < 6; t++)
            for (int s = 0; s < 10; s++)
                CHECK(check_linear(paths[p], s % 2 ? pool : NULL, types[t], shapes[s][0], shapes[s][1], shapes[s][2], s != 2));
    for (int p = 0; p < np; p++) /* odd row lengths for the unquantized types */
        for (int t = 0; t < 3; t++) {
            CHECK(check_linear(paths[p], pool, types[t], 3, 37, 11, 1));
            CHECK(check_linear(paths[p], pool, types[t], 9, 37, 11, 0));
        }
    CHECK(check_linear(NULL, pool, KERN_Q4_1, 9, 64, 50, 1));
    CHECK(check_linear(NULL, pool, KERN_Q8_0, 2, 64, 50, 1));
    CHECK(check_linear(NULL, pool, KERN_Q4_0, 300, 4096, 150, 1)); /* 3 tiles of <= 64 rows */
    kern_pool_free(pool);
}

/* ---- int8 linear ------------------------------------------------------------ */
/* packed panel of 16 channels × kp inputs (the layout of kernels/int8_ref.c) */
static void pack_panel(const int8_t *w, int64_t kp, int8_t *B) {
    for (int c = 0; c < 16; c++)
        for (int64_t k = 0; k < kp; k++) B[(k / 4) * 64 + (c / 8) * 32 + (c % 8) * 4 + k % 4] = w[c * kp + k];
}

/* the tile: every path's int32 sums equal the naive sums exactly, at the extremes of the
 * ranges too (plain AVX2 splits activations into nibbles so vpmaddubsw never saturates) */
TEST(int8_tile_exact) {
    const kern_ops *paths[3];
    int np = n_paths(paths);
    const int64_t kps[] = {4, 8, 32, 384, 1536};
    for (int extreme = 0; extreme < 2; extreme++)
        for (int s = 0; s < 5; s++) {
            int64_t kp = kps[s];
            uint8_t *A = malloc((size_t)(8 * kp)); /* 8 rows for the 8-row tile */
            int8_t *w = malloc((size_t)(16 * kp)), *B = aligned_alloc(32, (size_t)(16 * kp));
            for (int64_t i = 0; i < 8 * kp; i++)
                A[i] = (uint8_t)(extreme ? KERN_I8_AMAX : rnd_u32() % (KERN_I8_AMAX + 1));
            for (int64_t i = 0; i < 16 * kp; i++)
                w[i] = (int8_t)(extreme ? (i % 3 ? -KERN_I8_WMAX : KERN_I8_WMAX)
                                        : (int)(rnd_u32() % (2 * KERN_I8_WMAX + 1)) - KERN_I8_WMAX);
            pack_panel(w, kp, B);
            for (int p = 0; p < np * 2; p++) { /* each path's 4-row tile, then its 8-row one */
                int32_t C[128];
                int rows = p < np ? 4 : 8;
                const kern_ops *o = paths[p % np];
                if (rows == 8 && !o->i8_tile8) continue;
                if (rows == 8) o->i8_tile8(kp, A, kp, B, C);
                else o->i8_tile(kp, A, kp, B, C);
                for (int r = 0; r < rows; r++)
                    for (int c = 0; c < 16; c++) {
                        int64_t want = 0;
                        for (int64_t k = 0; k < kp; k++) want += (int64_t)A[r * kp + k] * w[c * kp + k];
                        CHECK_MSG(C[r * 16 + c] == want, "%s (%d rows) kp=%ld r=%d c=%d: %d vs %ld", o->name,
                                  rows, (long)kp, r, c, C[r * 16 + c], (long)want);
                    }
            }
            free(A); free(w); free(B);
        }
}

/* kern_linear_i8 on odd shapes (rows not a multiple of 4, channels of 16, inputs of 4):
 * AVX2 output identical to the scalar path bit for bit; both close to the fp32 product
 * (normalized error, as test-backend-ops measures quantized types: 8-bit rows of uniform
 * data give ~1e-4, random smoothing up to ~2e-3; a layout bug gives ~1) */
static int check_linear_i8(kern_pool *pool, kern_i8_work *work, int64_t n, int64_t in, int64_t out,
                           int smooth, int dither, int res) {
    const kern_ops *paths[3];
    int np = n_paths(paths), ok = 1;
    float *dv = malloc(sizeof(float) * (size_t)n); /* a golden-ratio sequence in [-0.5, 0.5) */
    for (int64_t r = 0; r < n; r++) dv[r] = (float)fmod((double)(r + 1) * 0.6180339887498949, 1.0) - 0.5f;
    float *X = rnd_vec(n * in, -1, 1), *W = rnd_vec(out * in, -0.5f, 0.5f), *b = rnd_vec(out, -1, 1);
    float *sm = rnd_vec(in, 0.25f, 4.0f);
    kern_i8_weight *q = kern_i8_weight_create_smooth(W, out, in, smooth ? sm : NULL);
    kern_i8_weight *qr = res ? kern_i8_weight_create_residual(q, W, smooth ? sm : NULL) : NULL;
    float *Y[3] = {malloc(sizeof(float) * (size_t)(n * out)), malloc(sizeof(float) * (size_t)(n * out)),
                   malloc(sizeof(float) * (size_t)(n * out))};
    double err = 0, ref2 = 0;
    if (!q || kern_i8_weight_in(q) != in || kern_i8_weight_out(q) != out || (res && !qr)) ok = 0;
    for (int p = 0; ok && p < np; p++) ok = kern_linear_i8_ops(paths[p], pool, X, n, q, qr, b, KERN_ACT_NONE, dither ? dv : NULL, p == 1 ? work : NULL, Y[p]) == 0;
    /* GELU in the tile: the same values as the path's gelu over the finished outputs */
    float *G = malloc(sizeof(float) * (size_t)(n * out)), *H = malloc(sizeof(float) * (size_t)(n * out));
    for (int p = 0; ok && p < np; p++) {
        memcpy(H, Y[p], sizeof(float) * (size_t)(n * out));
        paths[p]->gelu(H, n * out);
        ok = kern_linear_i8_ops(paths[p], pool, X, n, q, qr, b, KERN_ACT_GELU, dither ? dv : NULL, work, G) == 0 &&
             memcmp(G, H, sizeof(float) * (size_t)(n * out)) == 0;
        if (!ok) fprintf(stderr, "  int8 linear + gelu n=%ld in=%ld out=%ld: %s differs\n", (long)n, (long)in, (long)out, paths[p]->name);
    }
    free(G), free(H);
    for (int p = 1; ok && p < np; p++)
        if (memcmp(Y[0], Y[p], sizeof(float) * (size_t)(n * out)) != 0) {
            fprintf(stderr, "  int8 linear n=%ld in=%ld out=%ld: %s != scalar\n", (long)n, (long)in,
                    (long)out, paths[p]->name);
            ok = 0;
        }
    for (int64_t r = 0; ok && r < n; r++)
        for (int64_t o = 0; o < out; o++) {
            double ref = b[o];
            for (int64_t k = 0; k < in; k++) ref += (double)X[r * in + k] * W[o * in + k];
            err += (Y[0][r * out + o] - ref) * (Y[0][r * out + o] - ref);
            ref2 += ref * ref;
        }
    /* with the residual the weights act at ~15 bits: less error than without it (from 64
     * inputs on: with 4, the activations' rounding dominates either way) */
    double err1 = err;
    if (ok && res && kern_linear_i8_ops(paths[0], pool, X, n, q, NULL, b, KERN_ACT_NONE, dither ? dv : NULL, work, Y[1]) == 0) {
        err1 = 0;
        for (int64_t r = 0; r < n; r++)
            for (int64_t o = 0; o < out; o++) {
                double ref = b[o];
                for (int64_t k = 0; k < in; k++) ref += (double)X[r * in + k] * W[o * in + k];
                err1 += (Y[1][r * out + o] - ref) * (Y[1][r * out + o] - ref);
            }
    }
    if (ok && (!(err / ref2 < 5e-3) || (res && in >= 64 && !(err < err1)))) {
        fprintf(stderr, "  int8 linear n=%ld in=%ld out=%ld res=%d: nmse %.2e (without the residual %.2e)\n",
                (long)n, (long)in, (long)out, res, err / ref2, err1 / ref2);
        ok = 0;
    }
    kern_i8_weight_free(q);
    kern_i8_weight_free(qr);
    free(X); free(W); free(b); free(sm); free(dv); free(Y[0]); free(Y[1]); free(Y[2]);
    return ok;
}

TEST(int8_linear_paths_agree) {
    kern_pool *pool = kern_pool_create(3);
    kern_i8_work *work = kern_i8_work_create(); /* reused across calls: grows, and is reused smaller */
    const int64_t shapes[][3] = {{1, 4, 16}, {3, 30, 21}, {7, 64, 33}, {65, 384, 100}, {130, 96, 48}, {9, 1536, 40}};
    for (int s = 0; s < 6; s++)
        for (int sm = 0; sm < 2; sm++)
            for (int d = 0; d < 4; d++)
                CHECK(check_linear_i8(s % 2 ? pool : NULL, work, shapes[s][0], shapes[s][1], shapes[s][2], sm, d & 1,
                                      d >> 1));
    CHECK(kern_i8_weight_create(NULL, 0, 4) == NULL);
    kern_i8_weight_free(NULL);
    kern_i8_work_free(work);
    kern_i8_work_free(NULL);
    kern_pool_free(pool);
}

/* the quantizer: per-channel weight error within half a step; activation rows round-trip
 * within half a step, zero exactly (padding), both paths identical */
TEST(int8_quantizers) {
    const kern_ops *paths[3];
    int np = n_paths(paths);
    float *W = rnd_vec(5 * 37, -2, 2), row[37];
    kern_i8_weight *q = kern_i8_weight_create(W, 5, 37);
    CHECK(q);
    for (int o = 0; o < 5; o++) {
        float mx = 0;
        for (int k = 0; k < 37; k++) mx = fmaxf(mx, fabsf(W[o * 37 + k]));
        kern_i8_weight_row_f32(q, o, row);
        for (int k = 0; k < 37; k++) CHECK(fabsf(row[k] - W[o * 37 + k]) <= 0.5f * mx / KERN_I8_WMAX * 1.001f);
    }
    kern_i8_weight_free(q);
    free(W);
    for (int64_t n = 1; n < 80; n += 13) {
        float *x = rnd_vec(n, -3, 1.5f);
        x[0] = 0;
        uint8_t qa[3][96];
        float sc[3];
        int32_t zp[3];
        for (int p = 0; p < np; p++) paths[p]->i8_quantize_row(x, NULL, n, 96, 0.0f, qa[p], &sc[p], &zp[p]);
        for (int p = 1; p < np; p++) CHECK(memcmp(qa[0], qa[p], 96) == 0 && sc[0] == sc[p] && zp[0] == zp[p]);
        CHECK(qa[0][0] == zp[0] && qa[0][95] == zp[0]);
        for (int64_t i = 0; i < n; i++) CHECK(fabsf((qa[0][i] - zp[0]) * sc[0] - x[i]) <= 0.5f * sc[0] * 1.001f);
        /* with smoothing factors m: the same bytes as the row multiplied beforehand */
        float *m = rnd_vec(n, 0.2f, 5), *xm = malloc(sizeof(float) * n);
        for (int64_t i = 0; i < n; i++) xm[i] = x[i] * m[i];
        paths[0]->i8_quantize_row(xm, NULL, n, 96, 0.25f, qa[0], &sc[0], &zp[0]);
        for (int p = 0; p < np; p++) {
            uint8_t qm[96];
            float s1;
            int32_t z1;
            paths[p]->i8_quantize_row(x, m, n, 96, 0.25f, qm, &s1, &z1);
            CHECK_MSG(memcmp(qa[0], qm, 96) == 0 && s1 == sc[0] && z1 == zp[0], "%s smoothed n=%ld",
                      paths[p]->name, (long)n);
        }
        free(m), free(xm);
        free(x);
    }
}

/* ---- attention -------------------------------------------------------------- */
static void naive_attention(const float *Q, int qs, const float *K, const float *V, int kvs, double *out,
                            int os, int n_q, int n_kv, int nh, int nkvh, int hd, int causal, int64_t pos0) {
    double *sc = malloc(sizeof(double) * (n_kv + 1));
    for (int i = 0; i < n_q; i++)
        for (int h = 0; h < nh; h++) {
            int g = h / (nh / nkvh);
            int64_t lim = causal ? (pos0 + i + 1 < n_kv ? pos0 + i + 1 : n_kv) : n_kv;
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < lim; j++) {
                double s = 0;
                for (int d = 0; d < hd; d++) s += (double)Q[i * qs + h * hd + d] * K[j * kvs + g * hd + d];
                sc[j] = s / sqrt(hd);
                mx = fmax(mx, sc[j]);
            }
            for (int j = 0; j < lim; j++) sum += (sc[j] = exp(sc[j] - mx));
            for (int d = 0; d < hd; d++) {
                double a = 0;
                for (int j = 0; j < lim; j++) a += sc[j] / sum * V[j * kvs + g * hd + d];
                out[i * os + h * hd + d] = a;
            }
        }
    free(sc);
}

/* One attention problem from {n_q, n_kv, heads, kv heads, head_dim, causal, pos0}, with
 * slack in every stride: random Q, K, V; O prefilled with 5..6 (its slack columns must
 * stay); R the naive double reference (slack copied from O). */
typedef struct {
    int nq, nkv, nh, nkvh, hd, causal, pos0, qs, kvs, os;
    float *Q, *K, *V, *O;
    double *R;
} att_case;

static att_case att_case_make(const int cfg[7]) {
    att_case a = {cfg[0], cfg[1], cfg[2], cfg[3], cfg[4], cfg[5], cfg[6], 0, 0, 0, NULL, NULL, NULL, NULL, NULL};
    a.qs = a.nh * a.hd + 3, a.kvs = a.nkvh * a.hd + 5, a.os = a.nh * a.hd + 1;
    a.Q = rnd_vec((int64_t)a.nq * a.qs, -2, 2), a.K = rnd_vec((int64_t)a.nkv * a.kvs, -2, 2);
    a.V = rnd_vec((int64_t)a.nkv * a.kvs, -1, 1), a.O = rnd_vec((int64_t)a.nq * a.os, 5, 6);
    a.R = malloc(sizeof(double) * a.nq * a.os);
    for (int i = 0; i < a.nq * a.os; i++) a.R[i] = a.O[i];
    naive_attention(a.Q, a.qs, a.K, a.V, a.kvs, a.R, a.os, a.nq, a.nkv, a.nh, a.nkvh, a.hd, a.causal, a.pos0);
    return a;
}

static void att_case_free(att_case *a) {
    free(a->Q), free(a->K), free(a->V), free(a->O), free(a->R);
}

TEST(attention_vs_naive) {
    const kern_ops *paths[3];
    int np = n_paths(paths);
    kern_pool *pool = kern_pool_create(4);
    /* n_q, n_kv, heads, kv heads, head_dim, causal, pos0 */
    const int cfg[][7] = {{1, 1, 1, 1, 8, 0, 0},   {5, 5, 4, 4, 16, 1, 0},  {7, 13, 6, 2, 24, 1, 6},
                          {9, 9, 9, 3, 64, 0, 0},  {1, 40, 8, 1, 33, 1, 39}, {12, 12, 2, 2, 64, 1, 0},
                          {3, 30, 4, 2, 7, 0, 0},  {70, 70, 4, 2, 16, 1, 0}, {130, 150, 3, 1, 32, 1, 20},
                          {65, 10, 2, 2, 8, 0, 0},  {4, 37, 2, 1, 128, 1, 33}, {6, 21, 3, 3, 72, 0, 0}};
    for (int p = 0; p < np; p++)
        for (int c = 0; c < 12; c++)
            for (int usepool = 0; usepool < 2; usepool++) {
                att_case a = att_case_make(cfg[c]);
                kern_attention_ops(paths[p], usepool ? pool : NULL, a.Q, a.qs, a.K, a.V, a.kvs, a.O, a.os, a.nq,
                                   a.nkv, a.nh, a.nkvh, a.hd, a.causal, a.pos0);
                CHECK_MSG(max_abs_diff(a.O, a.R, (int64_t)a.nq * a.os) <= 1e-5, "%s cfg %d", paths[p]->name, c);
                att_case_free(&a);
            }
    /* public entry point, causal prefill, one shared kv head (kv_stride = head_dim) */
    float *Q = rnd_vec(4 * 32, -1, 1), *K = rnd_vec(4 * 16, -1, 1), *V = rnd_vec(4 * 16, -1, 1), O[128];
    double R[128];
    naive_attention(Q, 32, K, V, 16, R, 32, 4, 4, 2, 1, 16, 1, 0);
    kern_attention(pool, Q, 32, K, V, 16, O, 32, 4, 4, 2, 1, 16, 1, 0);
    CHECK(max_abs_diff(O, R, 128) <= 1e-5);
    free(Q); free(K); free(V);
    kern_pool_free(pool);
}

/* bf16 round to nearest even, as the packers do */
static float bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    memcpy(&f, &u, 4);
    return f;
}

/* kern_attention_bf16: against naive double attention on the bf16-rounded Q, K, V (what
 * the products see: only the probabilities' rounding is left, 2^-9) and on the exact
 * inputs; head dims that are not multiples of 32 take kern_attention's path exactly. */
TEST(attention_bf16) {
    if (!kern_bf16_available()) SKIP("no AVX512_BF16 on this CPU");
    kern_pool *pool = kern_pool_create(2);
    /* n_q, n_kv, heads, kv heads, head_dim, causal, pos0 */
    const int cfg[][7] = {{200, 200, 12, 12, 32, 0, 0}, {33, 47, 4, 2, 64, 1, 14},
                          {9, 9, 3, 3, 32, 0, 0},        {70, 70, 2, 1, 96, 1, 0},
                          {40, 40, 4, 4, 16, 0, 0}};
    for (int c = 0; c < 5; c++) {
        att_case a = att_case_make(cfg[c]), r = a; /* r: the same problem on bf16-rounded inputs */
        int64_t no = (int64_t)a.nq * a.os;
        r.Q = malloc(sizeof(float) * a.nq * a.qs), r.K = malloc(sizeof(float) * a.nkv * a.kvs);
        r.V = malloc(sizeof(float) * a.nkv * a.kvs), r.R = malloc(sizeof(double) * no);
        float *F = malloc(sizeof(float) * no);
        for (int i = 0; i < a.nq * a.qs; i++) r.Q[i] = bf16_round(a.Q[i]);
        for (int i = 0; i < a.nkv * a.kvs; i++) r.K[i] = bf16_round(a.K[i]), r.V[i] = bf16_round(a.V[i]);
        for (int64_t i = 0; i < no; i++) r.R[i] = F[i] = a.O[i];
        naive_attention(r.Q, a.qs, r.K, r.V, a.kvs, r.R, a.os, a.nq, a.nkv, a.nh, a.nkvh, a.hd, a.causal, a.pos0);
        kern_attention_bf16(pool, a.Q, a.qs, a.K, a.V, a.kvs, a.O, a.os, a.nq, a.nkv, a.nh, a.nkvh, a.hd, a.causal, a.pos0);
        kern_attention(pool, a.Q, a.qs, a.K, a.V, a.kvs, F, a.os, a.nq, a.nkv, a.nh, a.nkvh, a.hd, a.causal, a.pos0);
        double d_r = max_abs_diff(a.O, r.R, no), d_x = max_abs_diff(a.O, a.R, no);
        if (a.hd % 32 == 0)
            CHECK_MSG(d_r <= 4e-3 && d_x <= 0.05 && max_abs_diff(F, a.R, no) < d_x,
                      "cfg %d: vs bf16 inputs %g, vs exact %g", c, d_r, d_x);
        else
            CHECK_MSG(memcmp(a.O, F, sizeof(float) * no) == 0, "cfg %d: not kern_attention's path", c);
        r.O = F;
        att_case_free(&a), att_case_free(&r);
    }
    kern_pool_free(pool);
}

/* Online-softmax pieces against double: one block step (max, exp, sum; masked -inf
 * entries; an all-masked block leaves the state alone), then the weighted V sum with
 * the rescale of the running accumulator. */
TEST(softmax_step_and_wsum_acc) {
    const kern_ops *paths[3];
    int np = n_paths(paths);
    for (int p = 0; p < np; p++)
        for (int c = 0; c < 8; c++) { /* d: every slab width (64, 32, 8) and a ragged tail */
            int64_t n = (int64_t[]){1, 7, 8, 33, 64, 100, 50, 9}[c];
            int64_t d = (int64_t[]){8, 16, 64, 72, 128, 3, 32, 107}[c];
            int64_t st = d + 5;
            float *x = rnd_vec(n, -20, 20), *V = rnd_vec(n * st, -1, 1), *acc = rnd_vec(d, -1, 1);
            if (n > 2) x[1] = -INFINITY;
            double *rx = malloc((size_t)n * 8), *ra = malloc((size_t)d * 8);
            float m = 3.0f; /* state from earlier blocks */
            double mx = 3.0, sum = 0;
            for (int64_t i = 0; i < n; i++) mx = fmax(mx, x[i]);
            for (int64_t i = 0; i < n; i++) sum += (rx[i] = exp((double)x[i] - mx));
            float z = paths[p]->softmax_step(x, n, &m);
            CHECK_MSG(m == (float)mx && fabs(z - sum) <= 1e-5 * sum && max_abs_diff(x, rx, n) <= 1e-6,
                      "%s step n=%ld", paths[p]->name, (long)n);
            float corr = expf(3.0f - m);
            for (int64_t i = 0; i < d; i++) {
                double a = (double)acc[i] * corr;
                for (int64_t j = 0; j < n; j++) a += rx[j] * V[j * st + i];
                ra[i] = a;
            }
            paths[p]->wsum_acc(x, V, st, n, d, corr, acc);
            CHECK_MSG(max_abs_diff(acc, ra, d) <= 1e-4, "%s wsum_acc n=%ld d=%ld", paths[p]->name, (long)n, (long)d);
            for (int64_t i = 0; i < d; i++) { /* corr 0: acc is overwritten, never read */
                acc[i] = NAN;
                ra[i] = 0;
                for (int64_t j = 0; j < n; j++) ra[i] += rx[j] * V[j * st + i];
            }
            paths[p]->wsum_acc(x, V, st, n, d, 0.0f, acc);
            CHECK_MSG(max_abs_diff(acc, ra, d) <= 1e-4, "%s wsum_acc corr 0", paths[p]->name);
            float mm[3] = {-INFINITY, -INFINITY, -INFINITY}, m0 = -INFINITY;
            CHECK(paths[p]->softmax_step(mm, 3, &m0) == 0 && m0 == -INFINITY && mm[0] == 0 && mm[2] == 0);
            free(x); free(V); free(acc); free(rx); free(ra);
        }
}

/* Blocked attention (kern_attn_scores / kern_attn_update over key blocks, causal masks
 * by -inf, key ranges split and merged with kern_attn_merge) against naive double
 * attention, on both paths; grouped heads read their kv head's slice in place. */
TEST(blocked_attention_vs_naive) {
    const kern_ops *paths[3];
    int np = n_paths(paths);
    /* n_q, n_kv (the queries are the last n_q positions), heads, kv heads, head_dim, block, splits */
    const int cfg[][7] = {{1, 200, 9, 3, 64, 64, 3}, {5, 70, 4, 2, 16, 16, 2}, {16, 40, 2, 1, 72, 8, 1},
                          {1, 1, 3, 3, 8, 64, 1},    {3, 130, 6, 2, 32, 32, 4}};
    for (int p = 0; p < np; p++)
        for (int c = 0; c < 5; c++) {
            int nq = cfg[c][0], nkv = cfg[c][1], nh = cfg[c][2], nkvh = cfg[c][3], hd = cfg[c][4];
            int B = cfg[c][5], nsplit = cfg[c][6], group = nh / nkvh, pos0 = nkv - nq;
            int qs = nh * hd, kvs = nkvh * hd, R = nq * group;
            float *Q = rnd_vec((int64_t)nq * qs, -2, 2), *K = rnd_vec((int64_t)nkv * kvs, -2, 2);
            float *V = rnd_vec((int64_t)nkv * kvs, -1, 1), *O = malloc(sizeof(float) * nq * qs);
            double *Rf = malloc(sizeof(double) * nq * qs);
            naive_attention(Q, qs, K, V, kvs, Rf, qs, nq, nkv, nh, nkvh, hd, 1, pos0);
            float *qg = malloc(sizeof(float) * R * hd), *S = malloc(sizeof(float) * R * B);
            float *m = malloc(sizeof(float) * nsplit * R), *l = malloc(sizeof(float) * nsplit * R);
            float *acc = malloc(sizeof(float) * nsplit * R * hd), *og = malloc(sizeof(float) * R * hd);
            int nb = (nkv + B - 1) / B;
            for (int g = 0; g < nkvh; g++) {
                for (int i = 0; i < nq; i++) /* rows: query x head of the group */
                    memcpy(qg + (size_t)i * group * hd, Q + (size_t)i * qs + (size_t)g * group * hd,
                           sizeof(float) * group * hd);
                for (int sp = 0; sp < nsplit; sp++) {
                    float *ms = m + sp * R, *ls = l + sp * R, *as = acc + (size_t)sp * R * hd;
                    for (int r = 0; r < R; r++) { ms[r] = -INFINITY; ls[r] = 0; }
                    memset(as, 0, sizeof(float) * R * hd);
                    for (int b = nb * sp / nsplit; b < nb * (sp + 1) / nsplit; b++) {
                        int k0 = b * B, kn = nkv - k0 < B ? nkv - k0 : B;
                        kern_attn_scores_ops(paths[p], qg, hd, R, K + (size_t)k0 * kvs + g * hd, kvs, kn, hd,
                                             1.0f / sqrtf((float)hd), S, B);
                        for (int r = 0; r < R; r++)
                            for (int t = 0; t < kn; t++)
                                if (k0 + t > pos0 + r / group) S[r * B + t] = -INFINITY;
                        kern_attn_update_ops(paths[p], S, B, R, kn, V + (size_t)k0 * kvs + g * hd, kvs, hd, ms,
                                             ls, as, hd);
                    }
                }
                kern_attn_merge(nsplit, R, hd, m, l, acc, hd, og, hd);
                for (int i = 0; i < nq; i++)
                    memcpy(O + (size_t)i * qs + (size_t)g * group * hd, og + (size_t)i * group * hd,
                           sizeof(float) * group * hd);
            }
            CHECK_MSG(max_abs_diff(O, Rf, (int64_t)nq * qs) <= 1e-5, "%s cfg %d", paths[p]->name, c);
            free(Q); free(K); free(V); free(O); free(Rf); free(qg); free(S); free(m); free(l); free(acc); free(og);
        }
    /* public entry points agree with the table in use */
    float q[16], k[4 * 16], v[4 * 16], s1[4], s2[4], m1 = -INFINITY, l1 = 0, a1[16] = {0}, o[16];
    for (int i = 0; i < 64; i++) k[i] = sinf((float)i), v[i] = cosf((float)i);
    for (int i = 0; i < 16; i++) q[i] = 0.1f * (float)i;
    kern_attn_scores(q, 16, 1, k, 16, 4, 16, 0.25f, s1, 4);
    kern_attn_scores_ops(kern_ops_get(), q, 16, 1, k, 16, 4, 16, 0.25f, s2, 4);
    CHECK(memcmp(s1, s2, sizeof s1) == 0);
    kern_attn_update(s1, 4, 1, 4, v, 16, 16, &m1, &l1, a1, 16);
    kern_attn_merge(1, 1, 16, &m1, &l1, a1, 16, o, 16);
    double ref[16] = {0}, z = 0, e[4], mx = -INFINITY;
    for (int t = 0; t < 4; t++) mx = fmax(mx, s2[t]);
    for (int t = 0; t < 4; t++) z += (e[t] = exp((double)s2[t] - mx));
    for (int i = 0; i < 16; i++)
        for (int t = 0; t < 4; t++) ref[i] += e[t] / z * v[t * 16 + i];
    CHECK(max_abs_diff(o, ref, 16) <= 1e-6);
}

/* ---- thread pool ------------------------------------------------------------ */
typedef struct { _Atomic int *hits; int64_t grain, n; _Atomic int bad; int size; } cov_ctx;
static void cov_fn(void *ctx, int64_t b, int64_t e, int thread) {
    cov_ctx *c = ctx;
    if (e - b < c->grain && e != c->n) atomic_store(&c->bad, 1);
    if (thread < 0 || thread >= c->size || b < 0 || e > c->n || b >= e) atomic_store(&c->bad, 1);
    for (int64_t i = b; i < e; i++) atomic_fetch_add(&c->hits[i], 1);
}

TEST(pool_coverage) {
    for (int th = 1; th <= 5; th += 2) {
        kern_pool *p = kern_pool_create(th);
        CHECK(p && kern_pool_size(p) == th);
        const int64_t ns[] = {0, 1, 2, 7, 31, 100, 1000, 4097};
        const int64_t grains[] = {0, 1, 3, 64, 5000};
        for (int a = 0; a < 8; a++)
            for (int g = 0; g < 5; g++)
                for (int rep = 0; rep < 3; rep++) {
                    int64_t n = ns[a];
                    _Atomic int *hits = calloc((size_t)(n + 1), sizeof *hits);
                    cov_ctx c = {hits, grains[g] < 1 ? 1 : grains[g], n, 0, kern_pool_size(p)};
                    kern_pool_run(rep == 2 ? NULL : p, n, grains[g], cov_fn, &c);
                    CHECK(!atomic_load(&c.bad));
                    for (int64_t i = 0; i < n; i++) CHECK_MSG(hits[i] == 1, "th=%d n=%ld grain=%ld i=%ld hits=%d", th, (long)n, (long)grains[g], (long)i, (int)hits[i]);
                    free((void *)hits);
                }
        kern_pool_free(p);
    }
    kern_pool_free(NULL);
    CHECK(kern_pool_size(NULL) == 1);
}

typedef struct { kern_pool *p; _Atomic int64_t sum; } nest_ctx;
static void inner_fn(void *ctx, int64_t b, int64_t e, int thread) {
    nest_ctx *c = ctx;
    for (int64_t i = b; i < e; i++) atomic_fetch_add(&c->sum, i);
}
static void outer_fn(void *ctx, int64_t b, int64_t e, int thread) {
    nest_ctx *c = ctx;
    for (int64_t i = b; i < e; i++) kern_pool_run(c->p, 100, 1, inner_fn, c); /* runs inline */
}
TEST(pool_nested_runs_inline) {
    nest_ctx c = {kern_pool_create(3), 0};
    kern_pool_run(c.p, 10, 1, outer_fn, &c);
    CHECK(atomic_load(&c.sum) == 10 * 4950);
    kern_pool_free(c.p);
}

/* two threads share one pool: a caller that finds it busy runs inline, never corrupts */
#include <pthread.h>
typedef struct { kern_pool *p; int ok; } share_arg;
static void *share_thread(void *arg) {
    share_arg *a = arg;
    a->ok = 1;
    for (int rep = 0; rep < 200 && a->ok; rep++) {
        int64_t n = 1 + rep * 7;
        _Atomic int *hits = calloc((size_t)n, sizeof *hits);
        cov_ctx c = {hits, 1, n, 0, kern_pool_size(a->p)};
        kern_pool_run(a->p, n, 1, cov_fn, &c);
        for (int64_t i = 0; i < n; i++) if (hits[i] != 1) a->ok = 0;
        if (atomic_load(&c.bad)) a->ok = 0;
        free((void *)hits);
    }
    return NULL;
}
TEST(pool_shared_by_threads) {
    kern_pool *p = kern_pool_create(3);
    pthread_t th[3];
    share_arg a[3];
    for (int i = 0; i < 3; i++) { a[i].p = p; pthread_create(&th[i], NULL, share_thread, &a[i]); }
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 3; i++) CHECK(a[i].ok);
    kern_pool_free(p);
}

TEST(dispatch_reports_path) {
    const char *e = getenv("MMRAG_SIMD");
    const char *path = kern_cpu_path();
    if (e && strcmp(e, "scalar") == 0) CHECK(strcmp(path, "scalar") == 0);
    else CHECK(strcmp(path, kern_ops_avx2_table() ? kern_ops_avx2_table()->name : "scalar") == 0);
    CHECK(!kern_ops_avx2_table() || strncmp(path, "avx2", 4) == 0 || strcmp(path, "scalar") == 0);
    printf("  cpu path: %s, cuda: %s (%s)\n", path, kern_cuda_available() ? "yes" : "no", kern_cuda_device_name());
}

/* kern_blas_core_better's decision: only OpenBLAS's SSE3 fallback on a CPU with AVX2 and FMA
 * is replaced, by its AVX-512 kernels where the CPU has them */
TEST(blas_core_pick) {
    CHECK(kern_blas_core_pick("Haswell", 1, 0) == NULL);
    CHECK(kern_blas_core_pick("SkylakeX", 1, 1) == NULL);
    CHECK(kern_blas_core_pick("Prescott", 0, 0) == NULL);
    CHECK(strcmp(kern_blas_core_pick("Prescott", 1, 0), "Haswell") == 0);
    CHECK(strcmp(kern_blas_core_pick("Prescott", 1, 1), "SkylakeX") == 0);
    CHECK(kern_blas_core_pick(NULL, 1, 1) == NULL);
    printf("  OpenBLAS kernels: %s\n", kern_blas_core());
}
