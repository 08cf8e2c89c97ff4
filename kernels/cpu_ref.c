/* Scalar reference implementations: the definition of every CPU op, used when the CPU
 * lacks AVX2/FMA or MMRAG_SIMD=scalar, and as the yardstick for the SIMD path in tests. */
#include <math.h>

#include "kernels/kern_internal.h"

static float ref_dot_q8_0_q8_0(int64_t n, const kern_block_q8_0 *x, const kern_block_q8_0 *y) {
    float sum = 0;
    for (int64_t b = 0; b < n / KERN_QK; b++) {
        int32_t acc = 0;
        for (int j = 0; j < KERN_QK; j++) acc += (int32_t)x[b].qs[j] * y[b].qs[j];
        sum += (float)acc * kern_fp16_to_fp32(x[b].d) * kern_fp16_to_fp32(y[b].d);
    }
    return sum;
}

static float ref_dot_q4_0_q8_0(int64_t n, const kern_block_q4_0 *x, const kern_block_q8_0 *y) {
    float sum = 0;
    for (int64_t b = 0; b < n / KERN_QK; b++) {
        int32_t acc = 0;
        for (int j = 0; j < KERN_QK / 2; j++) {
            acc += ((x[b].qs[j] & 0xf) - 8) * y[b].qs[j];
            acc += ((x[b].qs[j] >> 4) - 8) * y[b].qs[j + 16];
        }
        sum += (float)acc * kern_fp16_to_fp32(x[b].d) * kern_fp16_to_fp32(y[b].d);
    }
    return sum;
}

/* q4_1: Σ (q·d + m)·(y·dy) = d·dy·Σ q·y + m·dy·Σ y */
static float ref_dot_q4_1_q8_0(int64_t n, const kern_block_q4_1 *x, const kern_block_q8_0 *y) {
    float sum = 0;
    for (int64_t b = 0; b < n / KERN_QK; b++) {
        int32_t acc = 0, ysum = 0;
        for (int j = 0; j < KERN_QK / 2; j++) {
            acc += (x[b].qs[j] & 0xf) * y[b].qs[j];
            acc += (x[b].qs[j] >> 4) * y[b].qs[j + 16];
            ysum += y[b].qs[j] + y[b].qs[j + 16];
        }
        float dy = kern_fp16_to_fp32(y[b].d);
        sum += (float)acc * kern_fp16_to_fp32(x[b].d) * dy +
               (float)ysum * kern_fp16_to_fp32(x[b].m) * dy;
    }
    return sum;
}

static float ref_dot_q4_1_q8_0s(int64_t n, const kern_block_q4_1 *x, const kern_block_q8_0 *y,
                                const float *ys) {
    float sum = 0;
    for (int64_t b = 0; b < n / KERN_QK; b++) {
        int32_t acc = 0;
        for (int j = 0; j < KERN_QK / 2; j++) {
            acc += (x[b].qs[j] & 0xf) * y[b].qs[j];
            acc += (x[b].qs[j] >> 4) * y[b].qs[j + 16];
        }
        sum += (float)acc * kern_fp16_to_fp32(x[b].d) * kern_fp16_to_fp32(y[b].d) +
               kern_fp16_to_fp32(x[b].m) * ys[b];
    }
    return sum;
}

static void ref_qdot4(kern_type t, int64_t n, const void *x, const kern_block_q8_0 *y,
                      int64_t ystride, const float *ys, float out[4]) {
    for (int k = 0; k < 4; k++) {
        const kern_block_q8_0 *yk = y + k * ystride;
        out[k] = t == KERN_Q8_0   ? ref_dot_q8_0_q8_0(n, x, yk)
                 : t == KERN_Q4_0 ? ref_dot_q4_0_q8_0(n, x, yk)
                                  : ref_dot_q4_1_q8_0s(n, x, yk, ys + k * ystride);
    }
}

static float ref_dot_f32(int64_t n, const float *x, const float *y) {
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i] * y[i];
    return s;
}

static float ref_dot_f16_f32(int64_t n, const uint16_t *w, const float *x) {
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += kern_fp16_to_fp32(w[i]) * x[i];
    return s;
}

static float ref_dot_bf16_f32(int64_t n, const uint16_t *w, const float *x) {
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += kern_bf16_to_fp32(w[i]) * x[i];
    return s;
}

static void ref_quantize_q8_0(const float *src, kern_block_q8_0 *dst, int64_t n) {
    for (int64_t b = 0; b < n / KERN_QK; b++, src += KERN_QK) {
        float amax = 0;
        for (int j = 0; j < KERN_QK; j++) amax = fmaxf(amax, fabsf(src[j]));
        float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
        dst[b].d = kern_fp32_to_fp16(d);
        for (int j = 0; j < KERN_QK; j++) dst[b].qs[j] = (int8_t)lrintf(src[j] * id);
    }
}

static void ref_fp16_to_f32(const uint16_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = kern_fp16_to_fp32(src[i]);
}

static void ref_q4_0_to_f32(const kern_block_q4_0 *b, float *dst, int64_t n) {
    for (int64_t i = 0; i < n / KERN_QK; i++, dst += KERN_QK) {
        float d = kern_fp16_to_fp32(b[i].d);
        for (int j = 0; j < KERN_QK / 2; j++) {
            dst[j] = (float)((b[i].qs[j] & 0xf) - 8) * d;
            dst[j + 16] = (float)((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static void ref_q4_1_to_f32(const kern_block_q4_1 *b, float *dst, int64_t n) {
    for (int64_t i = 0; i < n / KERN_QK; i++, dst += KERN_QK) {
        float d = kern_fp16_to_fp32(b[i].d), m = kern_fp16_to_fp32(b[i].m);
        for (int j = 0; j < KERN_QK / 2; j++) {
            dst[j] = (float)(b[i].qs[j] & 0xf) * d + m;
            dst[j + 16] = (float)(b[i].qs[j] >> 4) * d + m;
        }
    }
}

static void ref_q8_0_to_f32(const kern_block_q8_0 *b, float *dst, int64_t n) {
    for (int64_t i = 0; i < n / KERN_QK; i++, dst += KERN_QK) {
        float d = kern_fp16_to_fp32(b[i].d);
        for (int j = 0; j < KERN_QK; j++) dst[j] = (float)b[i].qs[j] * d;
    }
}

static void ref_softmax(float *x, int64_t n) {
    if (n <= 0) return;
    float mx = x[0];
    for (int64_t i = 1; i < n; i++) mx = fmaxf(mx, x[i]);
    float sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (x[i] = expf(x[i] - mx));
    float inv = 1.0f / sum;
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

static void ref_layernorm(const float *x, float *y, int64_t n, const float *g, const float *b,
                          float eps) {
    float mean = 0, var = 0;
    for (int64_t i = 0; i < n; i++) mean += x[i];
    mean /= (float)n;
    for (int64_t i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
    float inv = 1.0f / sqrtf(var / (float)n + eps);
    for (int64_t i = 0; i < n; i++) {
        float v = (x[i] - mean) * inv;
        y[i] = v * (g ? g[i] : 1.0f) + (b ? b[i] : 0.0f);
    }
}

static void ref_rmsnorm(const float *x, float *y, int64_t n, const float *w, float eps) {
    float ss = 0;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * inv * (w ? w[i] : 1.0f);
}

static void ref_gelu(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

static void ref_quick_gelu(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = x[i] / (1.0f + expf(-1.702f * x[i]));
}

static void ref_silu(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = x[i] / (1.0f + expf(-x[i]));
}

static void ref_swiglu(const float *g, const float *u, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void ref_geglu(const float *g, const float *u, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float v = g[i];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v))) * u[i];
    }
}

static void ref_add(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

static void ref_axpy(float *y, float a, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

static void ref_scale(float *y, float a, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] *= a;
}

static void ref_dot_rows(const float *q, const float *K, int64_t stride, int64_t n, int64_t d,
                         float scale, float *out) {
    for (int64_t j = 0; j < n; j++) out[j] = ref_dot_f32(d, q, K + j * stride) * scale;
}

static void ref_wsum_rows(const float *p, const float *V, int64_t stride, int64_t n, int64_t d,
                          float *out) {
    for (int64_t i = 0; i < d; i++) out[i] = 0;
    for (int64_t j = 0; j < n; j++) ref_axpy(out, p[j], V + j * stride, d);
}

static void ref_qk_tile(const float *Q, int64_t q_stride, int nr, const float *KT, int64_t ldk,
                        int64_t n, int64_t d, float scale, float *S, int64_t s_stride) {
    for (int r = 0; r < nr; r++)
        for (int64_t j = 0; j < n; j++) {
            float a = 0;
            for (int64_t k = 0; k < d; k++) a += Q[r * q_stride + k] * KT[k * ldk + j];
            S[r * s_stride + j] = a * scale;
        }
}

static void ref_pv_tile(const float *P, int64_t p_stride, int nr, const float *Vp, int64_t n,
                        int64_t d, float *O, int64_t o_stride) {
    for (int r = 0; r < nr; r++) {
        float *o = O + r * o_stride;
        for (int64_t i = 0; i < d; i++) o[i] = 0;
        for (int64_t j = 0; j < n; j++) ref_axpy(o, P[r * p_stride + j], Vp + j * d, d);
    }
}

static float ref_softmax_step(float *x, int64_t n, float *m) {
    float mx = *m;
    for (int64_t i = 0; i < n; i++) mx = fmaxf(mx, x[i]);
    float sum = 0;
    if (mx == -INFINITY) {
        for (int64_t i = 0; i < n; i++) x[i] = 0;
        return 0;
    }
    for (int64_t i = 0; i < n; i++) sum += (x[i] = expf(x[i] - mx));
    *m = mx;
    return sum;
}

static void ref_wsum_acc(const float *p, const float *V, int64_t stride, int64_t n, int64_t d,
                         float corr, float *out) {
    for (int64_t i = 0; i < d; i++) out[i] = corr == 0.0f ? 0.0f : out[i] * corr;
    for (int64_t j = 0; j < n; j++) ref_axpy(out, p[j], V + j * stride, d);
}

const kern_ops kern_ops_scalar = {
    .name = "scalar",
    .dot_q8_0_q8_0 = ref_dot_q8_0_q8_0,
    .dot_q4_0_q8_0 = ref_dot_q4_0_q8_0,
    .dot_q4_1_q8_0 = ref_dot_q4_1_q8_0,
    .dot_q4_1_q8_0s = ref_dot_q4_1_q8_0s,
    .qdot4 = ref_qdot4,
    .dot_f32 = ref_dot_f32,
    .dot_f16_f32 = ref_dot_f16_f32,
    .dot_bf16_f32 = ref_dot_bf16_f32,
    .quantize_q8_0 = ref_quantize_q8_0,
    .fp16_to_f32 = ref_fp16_to_f32,
    .q8_0_to_f32 = ref_q8_0_to_f32,
    .q4_0_to_f32 = ref_q4_0_to_f32,
    .q4_1_to_f32 = ref_q4_1_to_f32,
    .quantize_q8_K = kern_kq_quantize_q8_K_ref,
    .dot_q5_q8_0 = kern_kq_dot_q5_ref,
    .dot_kq = kern_kq_dot_ref,
    .kq_to_f32 = kern_kq_to_f32_ref,
    .softmax = ref_softmax,
    .layernorm = ref_layernorm,
    .rmsnorm = ref_rmsnorm,
    .gelu = ref_gelu,
    .quick_gelu = ref_quick_gelu,
    .silu = ref_silu,
    .swiglu = ref_swiglu,
    .geglu = ref_geglu,
    .add = ref_add,
    .axpy = ref_axpy,
    .scale = ref_scale,
    .dot_rows = ref_dot_rows,
    .wsum_rows = ref_wsum_rows,
    .softmax_step = ref_softmax_step,
    .qk_tile = ref_qk_tile,
    .pv_tile = ref_pv_tile,
    .wsum_acc = ref_wsum_acc,
    .i8_quantize_row = kern_i8_quantize_row_ref,
    .i8_tile = kern_i8_tile_ref,
    .i8_dequant = kern_i8_dequant_ref,
};
