/* CUDA kernels vs the CPU path, op by op. Runs when the binary was built with CUDA=1 and
 * a device answers; otherwise every case prints "skip" (and counts as passed). */
#include <cblas.h>
#include <stdint.h>

#include "kernels/kern_internal.h"
#include "tests/test.h"
#ifdef MMRAG_CUDA
#include "kernels/cuda_internal.h"
#endif

#ifdef MMRAG_CUDA
#define NEED_GPU() do { if (!kern_cuda_available()) SKIP("no CUDA device (CPU fallback in use)"); } while (0)
#else
#define NEED_GPU() SKIP("built without CUDA=1")
#endif

static uint32_t rng = 2463534242u;
static float rnd(float lo, float hi) {
    rng ^= rng << 13; rng ^= rng >> 17; rng ^= rng << 5;
    return lo + (hi - lo) * (float)(rng >> 8) / 16777216.0f;
}
__attribute__((unused)) static float *rnd_vec(int64_t n, float lo, float hi) {
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = rnd(lo, hi);
    return v;
}
__attribute__((unused)) static float *copy_vec(const float *x, int64_t n) {
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    memcpy(v, x, (size_t)n * sizeof *v);
    return v;
}
/* largest |a-b| / (1 + |b|) */
__attribute__((unused)) static double max_rel(const float *a, const float *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (1 + fabs((double)b[i]));
        if (d > m || d != d) m = d != d ? INFINITY : d;
    }
    return m;
}

TEST(device_report) {
    printf("  cuda available: %d, device: %s, cpu path: %s\n", kern_cuda_available(),
           kern_cuda_device_name(), kern_cpu_path());
    CHECK(kern_cuda_device_name() != NULL);
    if (!kern_cuda_available()) CHECK(strcmp(kern_cuda_device_name(), "none") == 0);
}

#ifdef MMRAG_CUDA
/* quantize rows of floats into type t (simple reference rounding) */
static void *make_weights(kern_type t, const float *Wf, int64_t out, int64_t in) {
    size_t rb = kern_type_row_bytes(t, in);
    uint8_t *W = malloc(rb * (size_t)out);
    for (int64_t o = 0; o < out; o++) {
        uint8_t *row = W + rb * (size_t)o;
        const float *s = Wf + o * in;
        if (t == KERN_F32) memcpy(row, s, rb);
        else if (t == KERN_F16 || t == KERN_BF16)
            for (int64_t i = 0; i < in; i++) {
                uint32_t u;
                memcpy(&u, &s[i], 4);
                ((uint16_t *)row)[i] = t == KERN_F16 ? kern_fp32_to_fp16(s[i]) : (uint16_t)(u >> 16);
            }
        else if (t == KERN_Q8_0) kern_quantize_q8_0(s, (kern_block_q8_0 *)row, in);
        else
            for (int64_t b = 0; b < in / 32; b++) {
                const float *x = s + b * 32;
                float mn = x[0], mx = x[0];
                for (int j = 1; j < 32; j++) { mn = fminf(mn, x[j]); mx = fmaxf(mx, x[j]); }
                if (t == KERN_Q4_0) { mx = fmaxf(fabsf(mn), fabsf(mx)); mn = -mx; }
                float d = (mx - mn) / 15, id = d ? 1 / d : 0;
                uint8_t *qs;
                if (t == KERN_Q4_0) {
                    kern_block_q4_0 *o4 = (kern_block_q4_0 *)row + b;
                    o4->d = kern_fp32_to_fp16(d);
                    qs = o4->qs;
                } else {
                    kern_block_q4_1 *o4 = (kern_block_q4_1 *)row + b;
                    o4->d = kern_fp32_to_fp16(d);
                    o4->m = kern_fp32_to_fp16(mn);
                    qs = o4->qs;
                }
                for (int j = 0; j < 16; j++) {
                    int lo = (int)fminf(15, (x[j] - mn) * id + 0.5f), hi = (int)fminf(15, (x[j + 16] - mn) * id + 0.5f);
                    qs[j] = (uint8_t)(lo | (hi << 4));
                }
            }
    }
    return W;
}
#endif

TEST(cuda_gemm) {
    NEED_GPU();
#ifdef MMRAG_CUDA
    const int dims[][3] = {{1, 1, 1}, {7, 13, 5}, {64, 96, 130}, {300, 257, 129}};
    for (int d = 0; d < 4; d++)
        for (int tb = 0; tb < 2; tb++) {
            int M = dims[d][0], N = dims[d][1], K = dims[d][2];
            float *A = rnd_vec((int64_t)M * K, -1, 1), *B = rnd_vec((int64_t)N * K, -1, 1);
            float *C = rnd_vec((int64_t)M * N, -1, 1), *C2 = copy_vec(C, (int64_t)M * N);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 0.5f, A, K, B,
                        tb ? K : N, 1.5f, C, N);
            CHECK(kcu_gemm_f32(tb, M, N, K, 0.5f, A, K, B, tb ? K : N, 1.5f, C2, N) == 0);
            CHECK_MSG(max_rel(C2, C, (int64_t)M * N) < 1e-4, "M=%d N=%d K=%d tb=%d", M, N, K, tb);
            free(A); free(B); free(C); free(C2);
        }
#endif
}

TEST(cuda_linear_all_types) {
    NEED_GPU();
#ifdef MMRAG_CUDA
    const kern_type types[] = {KERN_F32, KERN_F16, KERN_BF16, KERN_Q8_0, KERN_Q4_0, KERN_Q4_1};
    const int64_t shapes[][3] = {{1, 64, 33}, {5, 256, 300}, {40, 96, 70}, {1, 2048, 1000}};
    for (int t = 0; t < 6; t++)
        for (int s = 0; s < 4; s++) {
            int64_t n = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
            float *Wf = rnd_vec(out * in, -0.5f, 0.5f), *X = rnd_vec(n * in, -1, 1), *bias = rnd_vec(out, -1, 1);
            void *W = make_weights(types[t], Wf, out, in);
            float *Wd = malloc((size_t)(out * in) * 4), *Yg = malloc((size_t)(n * out) * 4);
            kern_to_f32(types[t], W, Wd, out * in);
            CHECK(kcu_linear(X, n, in, W, types[t], kern_type_row_bytes(types[t], in) * (size_t)out,
                             s % 2 ? bias : NULL, out, Yg) == 0);
            /* reference: fp32 X against the dequantized weights, in double */
            for (int64_t r = 0; r < n; r++)
                for (int64_t o = 0; o < out; o++) {
                    double acc = s % 2 ? bias[o] : 0, mag = 1;
                    for (int64_t i = 0; i < in; i++) {
                        acc += (double)X[r * in + i] * Wd[o * in + i];
                        mag += fabs((double)X[r * in + i] * Wd[o * in + i]);
                    }
                    CHECK_MSG(fabs(Yg[r * out + o] - acc) <= 1e-5 * mag, "%s n=%ld [%ld,%ld] %g vs %g",
                              kern_type_name(types[t]), (long)n, (long)r, (long)o, Yg[r * out + o], acc);
                }
            free(Wf); free(X); free(bias); free(W); free(Wd); free(Yg);
        }
#endif
}

TEST(cuda_weight_cache_sees_new_content) {
    NEED_GPU();
#ifdef MMRAG_CUDA
    int64_t in = 128, out = 64;
    float *W = rnd_vec(out * in, -1, 1), *X = rnd_vec(in, -1, 1), y1[64], y2[64], yc[64];
    CHECK(kcu_linear(X, 1, in, W, KERN_F32, (size_t)(out * in) * 4, NULL, out, y1) == 0);
    for (int64_t i = 0; i < out * in; i++) W[i] = -W[i]; /* same address, new values */
    CHECK(kcu_linear(X, 1, in, W, KERN_F32, (size_t)(out * in) * 4, NULL, out, y2) == 0);
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)out, (int)in, 1, W, (int)in, X, 1, 0, yc, 1);
    CHECK(max_rel(y2, yc, out) < 1e-5);
    for (int i = 0; i < out; i++) CHECK_NEAR(y1[i], -y2[i], 1e-4);
    kcu_cache_clear();
    free(W); free(X);
#endif
}

TEST(cuda_to_f32) {
    NEED_GPU();
#ifdef MMRAG_CUDA
    const kern_type types[] = {KERN_F16, KERN_BF16, KERN_Q8_0, KERN_Q4_0, KERN_Q4_1};
    int64_t n = 32 * 41;
    float *src = rnd_vec(n, -4, 4), *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
    for (int t = 0; t < 5; t++) {
        void *W = make_weights(types[t], src, 1, n);
        kern_to_f32(types[t], W, a, n);
        CHECK(kcu_to_f32(types[t], W, kern_type_row_bytes(types[t], n), b, n) == 0);
        CHECK_MSG(max_rel(b, a, n) <= 1e-6, "%s", kern_type_name(types[t]));
        free(W);
    }
    uint16_t special[4] = {0x7c00, 0xfc00, 0x0001, 0x8000};
    float out[4];
    CHECK(kcu_to_f32(KERN_F16, special, sizeof special, out, 4) == 0);
    for (int i = 0; i < 4; i++) { float r = kern_fp16_to_fp32(special[i]); CHECK(memcmp(&out[i], &r, 4) == 0); }
    free(src); free(a); free(b);
#endif
}

TEST(cuda_softmax_norms) {
    NEED_GPU();
#ifdef MMRAG_CUDA
    const int64_t ns[] = {1, 7, 33, 384, 1001, 5000};
    for (int k = 0; k < 6; k++) {
        int64_t n = ns[k], rows = 3;
        float *x = rnd_vec(rows * n, -20, 20), *g = rnd_vec(n, 0.5f, 1.5f), *b = rnd_vec(n, -1, 1);
        float *c = copy_vec(x, rows * n), *gy = malloc((size_t)(rows * n) * 4), *cy = malloc((size_t)(rows * n) * 4);
        for (int64_t r = 0; r < rows; r++) kern_softmax(c + r * n, n);
        float *gx = copy_vec(x, rows * n);
        CHECK(kcu_softmax_rows(gx, rows, n) == 0);
        CHECK_MSG(max_rel(gx, c, rows * n) < 1e-5, "softmax n=%ld", (long)n);
        for (int64_t r = 0; r < rows; r++) kern_layernorm(x + r * n, cy + r * n, n, g, b, 1e-5f);
        CHECK(kcu_layernorm_rows(x, gy, rows, n, g, b, 1e-5f) == 0);
        CHECK_MSG(max_rel(gy, cy, rows * n) < 1e-4, "layernorm n=%ld", (long)n);
        for (int64_t r = 0; r < rows; r++) kern_layernorm(x + r * n, cy + r * n, n, NULL, NULL, 1e-5f);
        CHECK(kcu_layernorm_rows(x, gy, rows, n, NULL, NULL, 1e-5f) == 0);
        CHECK(max_rel(gy, cy, rows * n) < 1e-4);
        for (int64_t r = 0; r < rows; r++) kern_rmsnorm(x + r * n, cy + r * n, n, g, 1e-6f);
        CHECK(kcu_rmsnorm_rows(x, gy, rows, n, g, 1e-6f) == 0);
        CHECK_MSG(max_rel(gy, cy, rows * n) < 1e-4, "rmsnorm n=%ld", (long)n);
        free(x); free(g); free(b); free(c); free(gy); free(cy); free(gx);
    }
#endif
}

TEST(cuda_activations) {
    NEED_GPU();
#ifdef MMRAG_CUDA
    int64_t n = 10007;
    float *x = rnd_vec(n, -12, 12), *u = rnd_vec(n, -3, 3);
    void (*cpu[3])(float *, int64_t) = {kern_gelu, kern_quick_gelu, kern_silu};
    const int ops[3] = {KCU_GELU, KCU_QUICK_GELU, KCU_SILU};
    for (int k = 0; k < 3; k++) {
        float *a = copy_vec(x, n), *b = copy_vec(x, n);
        cpu[k](a, n);
        CHECK(kcu_unary(ops[k], b, n) == 0);
        CHECK_MSG(max_rel(b, a, n) < 1e-5, "op %d", k);
        free(a); free(b);
    }
    float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
    kern_swiglu(x, u, a, n);
    CHECK(kcu_swiglu(x, u, b, n) == 0);
    CHECK(max_rel(b, a, n) < 1e-5);
    memcpy(b, a, (size_t)n * 4);
    kern_add(a, u, n);
    CHECK(kcu_add(b, u, n) == 0);
    CHECK(max_rel(b, a, n) == 0);
    free(x); free(u); free(a); free(b);
#endif
}

TEST(cuda_rope) {
    NEED_GPU();
#ifdef MMRAG_CUDA
    const int nt = 5, nh = 3, hd = 64;
    for (int neox = 0; neox < 2; neox++)
        for (int rot = 32; rot <= 64; rot += 32) {
            float *x = rnd_vec(nt * nh * hd, -1, 1), *c = copy_vec(x, nt * nh * hd);
            for (int t = 0; t < nt; t++) kern_rope(c + t * nh * hd, nh, hd, rot, 4090 + t, 10000.0f, 1.0f, neox);
            CHECK(kcu_rope(x, nt, nh, hd, rot, 4090, 10000.0f, 1.0f, neox) == 0);
            CHECK_MSG(max_rel(x, c, nt * nh * hd) < 1e-5, "neox=%d rot=%d", neox, rot);
            free(x); free(c);
        }
#endif
}

TEST(cuda_attention) {
    NEED_GPU();
#ifdef MMRAG_CUDA
    /* n_q, n_kv, heads, kv heads, head_dim, causal, pos0 */
    const int cfg[][7] = {{1, 1, 1, 1, 8, 0, 0},     {5, 5, 4, 4, 16, 1, 0},   {7, 300, 6, 2, 24, 1, 293},
                          {9, 9, 9, 3, 64, 0, 0},    {1, 1000, 8, 1, 33, 1, 999}, {64, 64, 9, 3, 64, 1, 0},
                          {3, 30, 4, 2, 200, 0, 0}};
    for (int c = 0; c < 7; c++) {
        int nq = cfg[c][0], nkv = cfg[c][1], nh = cfg[c][2], nkvh = cfg[c][3], hd = cfg[c][4];
        int qs = nh * hd + 3, kvs = nkvh * hd + 5, os = nh * hd + 1;
        float *Q = rnd_vec((int64_t)nq * qs, -2, 2), *K = rnd_vec((int64_t)nkv * kvs, -2, 2);
        float *V = rnd_vec((int64_t)nkv * kvs, -1, 1), *O = rnd_vec((int64_t)nq * os, 5, 6);
        float *G = copy_vec(O, (int64_t)nq * os);
        kern_attention_ops(&kern_ops_scalar, NULL, Q, qs, K, V, kvs, O, os, nq, nkv, nh, nkvh, hd, cfg[c][5], cfg[c][6]);
        CHECK(kcu_attention(Q, qs, K, V, kvs, G, os, nq, nkv, nh, nkvh, hd, cfg[c][5], cfg[c][6]) == 0);
        CHECK_MSG(max_rel(G, O, (int64_t)nq * os) < 1e-5, "cfg %d", c);
        free(Q); free(K); free(V); free(O); free(G);
    }
#endif
}

TEST(cuda_public_dispatch_matches_cpu) {
    NEED_GPU();
#ifdef MMRAG_CUDA
    /* big enough that kern_linear / kern_attention route to the GPU */
    int64_t n = 64, in = 576, out = 1536;
    float *Wf = rnd_vec(out * in, -0.5f, 0.5f), *X = rnd_vec(n * in, -1, 1);
    void *W = make_weights(KERN_Q4_1, Wf, out, in);
    float *Yg = malloc((size_t)(n * out) * 4), *Yc = malloc((size_t)(n * out) * 4);
    kern_linear(NULL, X, n, in, W, KERN_Q4_1, NULL, out, Yg);
    kern_linear_ops(kern_ops_get(), NULL, X, n, in, W, KERN_Q4_1, NULL, out, Yc); /* n=64: fp32 X path */
    CHECK(max_rel(Yg, Yc, n * out) < 1e-4);
    free(Wf); free(X); free(W); free(Yg); free(Yc);
#endif
}
