/* Q5_0/Q5_1, K-quant and BF16 kernels: dequantization bit for bit against PyPI gguf's
 * numpy dequantizers ($MMRAG_BUILD/golden/kquants.bin, written by
 * scripts/golden_kquants.py at `make test` time), dot products against a double-precision
 * sum over the dequantized operands, and kern_linear on both of its paths. */
#include <stdint.h>

#include "kernels/kern_internal.h"
#include "tests/test.h"

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint32_t rnd_u32(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}
static float rnd(float lo, float hi) { return lo + (hi - lo) * (float)(rnd_u32() & 0xffffff) / 16777216.0f; }

static int n_paths(const kern_ops *paths[2]) {
    paths[0] = &kern_ops_scalar;
    paths[1] = kern_ops_avx2_table();
    return paths[1] ? 2 : 1;
}

/* the fp16 scale/min fields inside one block (bytes), as in scripts/golden_kquants.py */
static int fp16_fields(kern_type t, int off[2]) {
    switch (t) {
    case KERN_Q5_0: case KERN_Q4_0: case KERN_Q8_0: off[0] = 0; return 1;
    case KERN_Q5_1: case KERN_Q4_1: case KERN_Q4_K: case KERN_Q5_K: off[0] = 0; off[1] = 2; return 2;
    case KERN_Q2_K: off[0] = 80; off[1] = 82; return 2;
    case KERN_Q3_K: off[0] = 108; return 1;
    case KERN_Q6_K: off[0] = 208; return 1;
    default: return 0;
    }
}

/* random blocks: random bytes, finite small fp16 scales */
static void *rnd_blocks(kern_type t, int64_t n) {
    size_t nb = kern_type_row_bytes(t, n), bb = kern_type_row_bytes(t, kern_type_block_elems(t));
    uint8_t *p = malloc(nb);
    for (size_t i = 0; i < nb; i++) p[i] = (uint8_t)rnd_u32();
    int off[2], nf = fp16_fields(t, off);
    for (size_t b = 0; b < nb / bb; b++)
        for (int f = 0; f < nf; f++) {
            uint16_t h = kern_fp32_to_fp16(rnd(-0.05f, 0.05f));
            memcpy(p + b * bb + off[f], &h, 2);
        }
    return p;
}

static const kern_type KQ_TYPES[] = {KERN_Q5_0, KERN_Q5_1, KERN_Q2_K, KERN_Q3_K, KERN_Q4_K, KERN_Q5_K, KERN_Q6_K};
#define N_KQ (int)(sizeof KQ_TYPES / sizeof KQ_TYPES[0])

static void dequant(const kern_ops *ops, kern_type t, const void *src, float *dst, int64_t n) {
    switch (t) {
    case KERN_Q8_0: ops->q8_0_to_f32(src, dst, n); return;
    case KERN_Q4_0: ops->q4_0_to_f32(src, dst, n); return;
    case KERN_Q4_1: ops->q4_1_to_f32(src, dst, n); return;
    case KERN_BF16: for (int64_t i = 0; i < n; i++) dst[i] = kern_bf16_to_fp32(((const uint16_t *)src)[i]); return;
    default: ops->kq_to_f32(t, src, dst, n); return;
    }
}

TEST(dequant_bit_exact_vs_gguf_numpy) {
    char path[512];
    snprintf(path, sizeof path, "%s/golden/kquants.bin", test_env("MMRAG_BUILD", "build"));
    FILE *f = fopen(path, "rb");
    if (!f) SKIP("no golden/kquants.bin (make test writes it with PyPI gguf)");
    const kern_ops *paths[2];
    int np = n_paths(paths), n_types = 0, failed = 0;
    uint32_t hdr[3];
    while (fread(hdr, 4, 3, f) == 3) {
        kern_type t = (kern_type)hdr[0];
        int64_t be = kern_type_block_elems(t), n = (int64_t)hdr[1] * be;
        if (t == KERN_BF16) n = hdr[1];
        CHECK_MSG(be > 0 && (size_t)hdr[2] == kern_type_row_bytes(t, n), "type %u: %u bytes", hdr[0], hdr[2]);
        uint8_t *raw = malloc(hdr[2]);
        float *want = malloc((size_t)n * 4), *got = malloc((size_t)n * 4);
        CHECK(fread(raw, 1, hdr[2], f) == hdr[2] && fread(want, 4, (size_t)n, f) == (size_t)n);
        for (int p = 0; p < np; p++) {
            /* the legacy AVX2 Q4_0/Q4_1 paths compute q·d + m with one FMA (one rounding,
             * and +0 where numpy's d·(q-8) is -0): equal values within 1 ulp */
            int fused = p == 1 && (t == KERN_Q4_1 || t == KERN_Q4_0);
            dequant(paths[p], t, raw, got, n);
            for (int64_t i = 0; i < n; i++) {
                int same = memcmp(&got[i], &want[i], 4) == 0 ||
                           (fused && fabsf(got[i] - want[i]) <= 1.2e-7f * fabsf(want[i]));  /* also -0 == +0 */
                if (!same) {
                    fprintf(stderr, "  %s %s element %ld: %.9g, numpy %.9g\n", paths[p]->name,
                            kern_type_name(t), (long)i, got[i], want[i]);
                    failed = 1;
                    break;
                }
            }
            kern_to_f32(t, raw, got, n); /* the public entry point too */
            if (!fused && p == np - 1 && memcmp(got, want, (size_t)n * 4) != 0) failed = 1;
        }
        free(raw);
        free(want);
        free(got);
        n_types++;
    }
    fclose(f);
    printf("  %d types checked bit for bit against gguf numpy on %d path(s)\n", n_types, np);
    CHECK(!failed && n_types >= 11);
}

TEST(q8_K_quantization_paths_agree) {
    const kern_ops *paths[2];
    if (n_paths(paths) < 2) SKIP("no AVX2");
    int64_t n = 1024;
    float *x = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) x[i] = rnd(-3, 3) * (i % 97 == 0 ? 20.0f : 1.0f);
    kern_block_q8_K a[4], b[4];
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    paths[0]->quantize_q8_K(x, a, n);
    paths[1]->quantize_q8_K(x, b, n);
    CHECK(memcmp(a, b, sizeof a) == 0);
    for (int k = 0; k < 4; k++) /* d = max|x|/127 and round(x/d): every |q| <= 127 */
        for (int j = 0; j < 256; j++) CHECK(fabsf(x[k * 256 + j] - a[k].d * a[k].qs[j]) <= 0.5001f * a[k].d);
    free(x);
}

/* Σ w·x over dequantized weights and the activations as the dot sees them */
static double ref_dot(kern_type t, const void *w, const void *xq, int64_t n, double *mag) {
    float *wd = malloc((size_t)n * 4), *xd = malloc((size_t)n * 4);
    kern_kq_to_f32_ref(t, w, wd, n);
    if (t == KERN_Q5_0 || t == KERN_Q5_1) {
        kern_to_f32(KERN_Q8_0, xq, xd, n);
    } else {
        const kern_block_q8_K *y = xq;
        for (int64_t i = 0; i < n; i++) xd[i] = y[i / 256].d * (float)y[i / 256].qs[i % 256];
    }
    double s = 0;
    *mag = 1e-6;
    for (int64_t i = 0; i < n; i++) {
        s += (double)wd[i] * xd[i];
        *mag += fabs((double)wd[i] * xd[i]);
    }
    free(wd);
    free(xd);
    return s;
}

TEST(dots_vs_dequantized) {
    const kern_ops *paths[2];
    int np = n_paths(paths);
    for (int ti = 0; ti < N_KQ; ti++) {
        kern_type t = KQ_TYPES[ti];
        int legacy = t == KERN_Q5_0 || t == KERN_Q5_1;
        for (int64_t n = legacy ? 32 : 256; n <= 2048; n *= 4) {
            void *w = rnd_blocks(t, n);
            float *x = malloc((size_t)n * 4);
            for (int64_t i = 0; i < n; i++) x[i] = rnd(-2, 2);
            void *xq = malloc(kern_type_row_bytes(legacy ? KERN_Q8_0 : KERN_Q8_K, n));
            if (legacy) kern_ops_scalar.quantize_q8_0(x, xq, n);
            else kern_ops_scalar.quantize_q8_K(x, xq, n);
            double mag, want = ref_dot(t, w, xq, n, &mag);
            for (int p = 0; p < np; p++) {
                float got = legacy ? paths[p]->dot_q5_q8_0(t, n, w, xq) : paths[p]->dot_kq(t, n, w, xq);
                CHECK_MSG(fabs(got - want) <= 2e-6 * mag, "%s %s n=%ld: %g vs %g (mag %g)", paths[p]->name,
                          kern_type_name(t), (long)n, got, want, mag);
            }
            free(w);
            free(x);
            free(xq);
        }
    }
}

/* kern_linear on both paths (int8 dots for few rows, dequantize + sgemm for many)
 * against a double-precision product with the same rounding of X */
static int check_linear(const kern_ops *ops, kern_pool *pool, kern_type t, int64_t n, int64_t in, int64_t out) {
    void *W = rnd_blocks(t, in * out);
    size_t rb = kern_type_row_bytes(t, in);
    float *Wd = malloc((size_t)(in * out) * 4), *X = malloc((size_t)(n * in) * 4);
    float *Xd = malloc((size_t)(n * in) * 4), *Y = malloc((size_t)(n * out) * 4), *bias = malloc((size_t)out * 4);
    for (int64_t o = 0; o < out; o++) {
        kern_kq_to_f32_ref(t, (const uint8_t *)W + rb * (size_t)o, Wd + o * in, in);
        bias[o] = rnd(-1, 1);
    }
    for (int64_t i = 0; i < n * in; i++) X[i] = rnd(-1, 1);
    int legacy = t == KERN_Q5_0 || t == KERN_Q5_1;
    for (int64_t r = 0; r < n; r++) {
        if (n >= kern_linear_dequant_rows(t)) {
            memcpy(Xd + r * in, X + r * in, (size_t)in * 4);
        } else if (legacy) {
            kern_block_q8_0 *q = malloc(kern_type_row_bytes(KERN_Q8_0, in));
            ops->quantize_q8_0(X + r * in, q, in);
            kern_to_f32(KERN_Q8_0, q, Xd + r * in, in);
            free(q);
        } else {
            kern_block_q8_K *q = malloc(kern_type_row_bytes(KERN_Q8_K, in));
            ops->quantize_q8_K(X + r * in, q, in);
            for (int64_t i = 0; i < in; i++) Xd[r * in + i] = q[i / 256].d * (float)q[i / 256].qs[i % 256];
            free(q);
        }
    }
    kern_linear_ops(ops, pool, X, n, in, W, t, bias, out, Y);
    int ok = 1;
    for (int64_t r = 0; r < n && ok; r++)
        for (int64_t o = 0; o < out && ok; o++) {
            double s = bias[o], mag = 1;
            for (int64_t i = 0; i < in; i++) {
                s += (double)Xd[r * in + i] * Wd[o * in + i];
                mag += fabs((double)Xd[r * in + i] * Wd[o * in + i]);
            }
            if (fabs(Y[r * out + o] - s) > 2e-5 * mag) {
                fprintf(stderr, "  linear %s %s n=%ld [%ld,%ld]: %g vs %g\n", ops->name, kern_type_name(t),
                        (long)n, (long)r, (long)o, Y[r * out + o], s);
                ok = 0;
            }
        }
    free(W); free(Wd); free(X); free(Xd); free(Y); free(bias);
    return ok;
}

TEST(linear_new_types_both_paths) {
    const kern_ops *paths[2];
    int np = n_paths(paths);
    kern_pool *pool = kern_pool_create(3);
    for (int p = 0; p < np; p++)
        for (int ti = 0; ti < N_KQ; ti++) {
            CHECK(check_linear(paths[p], pool, KQ_TYPES[ti], 1, 512, 37));
            CHECK(check_linear(paths[p], NULL, KQ_TYPES[ti], 3, 256, 20));
            CHECK(check_linear(paths[p], pool, KQ_TYPES[ti], 20, 512, 45));
        }
    kern_pool_free(pool);
}

TEST(type_table) {
    CHECK(kern_type_row_bytes(KERN_Q4_K, 512) == 288 && kern_type_row_bytes(KERN_Q6_K, 256) == 210);
    CHECK(kern_type_row_bytes(KERN_Q5_K, 256) == 176 && kern_type_row_bytes(KERN_Q3_K, 256) == 110);
    CHECK(kern_type_row_bytes(KERN_Q2_K, 256) == 84 && kern_type_row_bytes(KERN_Q5_0, 64) == 44);
    CHECK(kern_type_row_bytes(KERN_Q5_1, 32) == 24 && kern_type_row_bytes(KERN_Q8_K, 256) == 292);
    CHECK(kern_type_row_bytes(KERN_Q4_K, 576) == 0); /* not a multiple of 256 */
    CHECK(strcmp(kern_type_name(KERN_Q6_K), "q6_K") == 0 && kern_type_block_elems(KERN_Q5_0) == 32);
    CHECK(kern_type_block_elems((kern_type)9) == 0 && strstr(kern_type_supported_list(), "q4_K"));
}
