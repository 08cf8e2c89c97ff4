/* Scalar reference for Q5_0/Q5_1 and the K-quants (Q2_K..Q6_K): dequantization, q8_K
 * activation quantization and dot products. The definition the AVX2 path is tested
 * against, and itself tested bit for bit against PyPI gguf's numpy dequantizers.
 *
 * Design notes
 * 1. Element order inside a 256-element super-block, e = 0..255 (ggml's layouts):
 *    Q4_K/Q5_K: 8 sub-blocks of 32 (sub = e/32) with 6-bit scale and min; nibble byte
 *      qs[(e/64)*32 + e%32], low nibble when (e/32) is even; Q5_K bit 4 is bit (e/32) of
 *      qh[e%32].
 *    Q6_K: 16 sub-blocks of 16 (int8 scales); half h = e/128, quarter k = (e%128)/32,
 *      l = e%32: low 4 bits in ql[h*64 + (k&1)*32 + l] (high nibble when k >= 2), high 2
 *      bits at (qh[h*32 + l] >> 2k) & 3; value q - 32.
 *    Q2_K: 16 sub-blocks of 16, scale byte = 4-bit scale | 4-bit min << 4; 2 bits at
 *      (qs[h*32 + l] >> 2k) & 3.
 *    Q3_K: 16 sub-blocks of 16, 6-bit scales - 32 (low 4 bits: scales[j] or its high
 *      nibble for j >= 8, high 2 bits in scales[8 + j%4] >> 2(j/4)); 2 low bits as Q2_K,
 *      and 4 is subtracted where bit (e/32) of hmask[l] is 0.
 * 2. Dequantization computes (d·sc)·q - (dmin·m) in fp32 with no fused multiply-add:
 *    the same operations, in the same order, as the numpy reference.
 * 3. Dots sum q·y exactly in integers per sub-block; the min terms use the q8_K block's
 *    16-element sums (bsums). */
#include <math.h>
#include <string.h>

#include "kernels/kern_internal.h"

/* ---- scale unpacking ---------------------------------------------------------- */
/* Q4_K/Q5_K: 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes */
static inline void scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Q3_K: signed scale of sub-block j (0..15) */
static inline int scale_q3k(const uint8_t *s, int j) {
    int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

/* ---- per-element quant values (design note 1) ------------------------------------ */
static inline int q4k_at(const kern_block_q4_K *b, int e) {
    uint8_t v = b->qs[(e / 64) * 32 + e % 32];
    return (e / 32) % 2 ? v >> 4 : v & 0xF;
}
static inline int q5k_at(const kern_block_q5_K *b, int e) {
    uint8_t v = b->qs[(e / 64) * 32 + e % 32];
    int lo = (e / 32) % 2 ? v >> 4 : v & 0xF;
    return lo | (((b->qh[e % 32] >> (e / 32)) & 1) << 4);
}
static inline int q6k_at(const kern_block_q6_K *b, int e) {
    int h = e / 128, k = (e % 128) / 32, l = e % 32;
    uint8_t v = b->ql[h * 64 + (k & 1) * 32 + l];
    int lo = k >= 2 ? v >> 4 : v & 0xF;
    return (lo | ((b->qh[h * 32 + l] >> (2 * k)) & 3) << 4) - 32;
}
static inline int q2k_at(const kern_block_q2_K *b, int e) {
    int h = e / 128, k = (e % 128) / 32, l = e % 32;
    return (b->qs[h * 32 + l] >> (2 * k)) & 3;
}
static inline int q3k_at(const kern_block_q3_K *b, int e) {
    int h = e / 128, k = (e % 128) / 32, l = e % 32;
    int lo = (b->qs[h * 32 + l] >> (2 * k)) & 3;
    return lo - (((b->hmask[l] >> (e / 32)) & 1) ? 0 : 4);
}
static inline int q5_at(const uint8_t *qh4, const uint8_t *qs, int j) {
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    int lo = j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4;
    return lo | (int)((qh >> j) & 1) << 4;
}

/* ---- dequantization ------------------------------------------------------------- */
static void q4k_to_f32(const kern_block_q4_K *b, float *y) {
    float d = kern_fp16_to_fp32(b->d), dmin = kern_fp16_to_fp32(b->dmin);
    for (int s = 0; s < 8; s++) {
        uint8_t sc, m;
        scale_min_k4(s, b->scales, &sc, &m);
        float d1 = d * (float)sc, m1 = dmin * (float)m;
        for (int e = 32 * s; e < 32 * s + 32; e++) y[e] = d1 * (float)q4k_at(b, e) - m1;
    }
}

static void q5k_to_f32(const kern_block_q5_K *b, float *y) {
    float d = kern_fp16_to_fp32(b->d), dmin = kern_fp16_to_fp32(b->dmin);
    for (int s = 0; s < 8; s++) {
        uint8_t sc, m;
        scale_min_k4(s, b->scales, &sc, &m);
        float d1 = d * (float)sc, m1 = dmin * (float)m;
        for (int e = 32 * s; e < 32 * s + 32; e++) y[e] = d1 * (float)q5k_at(b, e) - m1;
    }
}

static void q6k_to_f32(const kern_block_q6_K *b, float *y) {
    float d = kern_fp16_to_fp32(b->d);
    for (int s = 0; s < 16; s++) {
        float d1 = d * (float)b->scales[s];
        for (int e = 16 * s; e < 16 * s + 16; e++) y[e] = d1 * (float)q6k_at(b, e);
    }
}

static void q2k_to_f32(const kern_block_q2_K *b, float *y) {
    float d = kern_fp16_to_fp32(b->d), dmin = kern_fp16_to_fp32(b->dmin);
    for (int s = 0; s < 16; s++) {
        float dl = d * (float)(b->scales[s] & 0xF), ml = dmin * (float)(b->scales[s] >> 4);
        for (int e = 16 * s; e < 16 * s + 16; e++) y[e] = dl * (float)q2k_at(b, e) - ml;
    }
}

static void q3k_to_f32(const kern_block_q3_K *b, float *y) {
    float d = kern_fp16_to_fp32(b->d);
    for (int s = 0; s < 16; s++) {
        float dl = d * (float)scale_q3k(b->scales, s);
        for (int e = 16 * s; e < 16 * s + 16; e++) y[e] = dl * (float)q3k_at(b, e);
    }
}

void kern_kq_to_f32_ref(kern_type t, const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    int64_t bs = kern_type_block_elems(t);
    size_t bb = kern_type_row_bytes(t, bs);
    for (int64_t i = 0; i < n / bs; i++, p += bb, dst += bs) {
        switch (t) {
        case KERN_Q5_0: {
            const kern_block_q5_0 *b = (const void *)p;
            float d = kern_fp16_to_fp32(b->d);
            for (int j = 0; j < 32; j++) dst[j] = d * (float)(q5_at(b->qh, b->qs, j) - 16);
            break;
        }
        case KERN_Q5_1: {
            const kern_block_q5_1 *b = (const void *)p;
            float d = kern_fp16_to_fp32(b->d), m = kern_fp16_to_fp32(b->m);
            for (int j = 0; j < 32; j++) dst[j] = d * (float)q5_at(b->qh, b->qs, j) + m;
            break;
        }
        case KERN_Q2_K: q2k_to_f32((const void *)p, dst); break;
        case KERN_Q3_K: q3k_to_f32((const void *)p, dst); break;
        case KERN_Q4_K: q4k_to_f32((const void *)p, dst); break;
        case KERN_Q5_K: q5k_to_f32((const void *)p, dst); break;
        case KERN_Q6_K: q6k_to_f32((const void *)p, dst); break;
        default: memset(dst, 0, (size_t)bs * sizeof *dst); break;
        }
    }
}

/* ---- activations --------------------------------------------------------------- */
void kern_kq_quantize_q8_K_ref(const float *src, kern_block_q8_K *dst, int64_t n) {
    for (int64_t b = 0; b < n / KERN_QK_K; b++, src += KERN_QK_K) {
        float amax = 0;
        for (int j = 0; j < KERN_QK_K; j++) amax = fmaxf(amax, fabsf(src[j]));
        float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
        dst[b].d = d;
        for (int j = 0; j < KERN_QK_K; j++) dst[b].qs[j] = (int8_t)lrintf(src[j] * id);
        for (int g = 0; g < KERN_QK_K / 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += dst[b].qs[16 * g + j];
            dst[b].bsums[g] = (int16_t)s;
        }
    }
}

/* ---- dots ---------------------------------------------------------------------- */
float kern_kq_dot_q5_ref(kern_type t, int64_t n, const void *w, const kern_block_q8_0 *y) {
    float sum = 0;
    for (int64_t b = 0; b < n / KERN_QK; b++) {
        int32_t acc = 0, ysum = 0;
        float dy = kern_fp16_to_fp32(y[b].d);
        if (t == KERN_Q5_0) {
            const kern_block_q5_0 *x = (const kern_block_q5_0 *)w + b;
            for (int j = 0; j < 32; j++) acc += (q5_at(x->qh, x->qs, j) - 16) * y[b].qs[j];
            sum += (float)acc * kern_fp16_to_fp32(x->d) * dy;
        } else {
            const kern_block_q5_1 *x = (const kern_block_q5_1 *)w + b;
            for (int j = 0; j < 32; j++) {
                acc += q5_at(x->qh, x->qs, j) * y[b].qs[j];
                ysum += y[b].qs[j];
            }
            sum += (float)acc * kern_fp16_to_fp32(x->d) * dy + (float)ysum * kern_fp16_to_fp32(x->m) * dy;
        }
    }
    return sum;
}

/* Σ over one super-block of q(e)·y[e] per sub-block of `len` elements */
#define SUB_SUMS(AT, blk, y, len, out)                                              \
    for (int s_ = 0; s_ < KERN_QK_K / (len); s_++) {                               \
        int32_t a_ = 0;                                                            \
        for (int e_ = s_ * (len); e_ < (s_ + 1) * (len); e_++) a_ += AT(blk, e_) * (y)->qs[e_]; \
        (out)[s_] = a_;                                                            \
    }

/* Q4_K and Q5_K share their 6-bit scales and mins: the block's dot from its 8 sub-block
 * integer sums */
static float dot_k45_finish(const uint8_t *scales, uint16_t d, uint16_t dmin, const int32_t sums[8],
                            const kern_block_q8_K *y) {
    int32_t acc = 0, macc = 0;
    for (int s = 0; s < 8; s++) {
        uint8_t sc, m;
        scale_min_k4(s, scales, &sc, &m);
        acc += sc * sums[s];
        macc += m * (y->bsums[2 * s] + y->bsums[2 * s + 1]);
    }
    return y->d * (kern_fp16_to_fp32(d) * (float)acc - kern_fp16_to_fp32(dmin) * (float)macc);
}

static float dot_q4k_blk(const kern_block_q4_K *x, const kern_block_q8_K *y) {
    int32_t sums[8];
    SUB_SUMS(q4k_at, x, y, 32, sums)
    return dot_k45_finish(x->scales, x->d, x->dmin, sums, y);
}

static float dot_q5k_blk(const kern_block_q5_K *x, const kern_block_q8_K *y) {
    int32_t sums[8];
    SUB_SUMS(q5k_at, x, y, 32, sums)
    return dot_k45_finish(x->scales, x->d, x->dmin, sums, y);
}

static float dot_q6k_blk(const kern_block_q6_K *x, const kern_block_q8_K *y) {
    int32_t sums[16], acc = 0;
    SUB_SUMS(q6k_at, x, y, 16, sums)
    for (int s = 0; s < 16; s++) acc += x->scales[s] * sums[s];
    return y->d * kern_fp16_to_fp32(x->d) * (float)acc;
}

static float dot_q2k_blk(const kern_block_q2_K *x, const kern_block_q8_K *y) {
    int32_t sums[16], acc = 0, macc = 0;
    SUB_SUMS(q2k_at, x, y, 16, sums)
    for (int s = 0; s < 16; s++) {
        acc += (x->scales[s] & 0xF) * sums[s];
        macc += (x->scales[s] >> 4) * y->bsums[s];
    }
    return y->d * (kern_fp16_to_fp32(x->d) * (float)acc - kern_fp16_to_fp32(x->dmin) * (float)macc);
}

static float dot_q3k_blk(const kern_block_q3_K *x, const kern_block_q8_K *y) {
    int32_t sums[16], acc = 0;
    SUB_SUMS(q3k_at, x, y, 16, sums)
    for (int s = 0; s < 16; s++) acc += scale_q3k(x->scales, s) * sums[s];
    return y->d * kern_fp16_to_fp32(x->d) * (float)acc;
}

float kern_kq_dot_ref(kern_type t, int64_t n, const void *w, const kern_block_q8_K *y) {
    float sum = 0;
    for (int64_t b = 0; b < n / KERN_QK_K; b++) {
        switch (t) {
        case KERN_Q2_K: sum += dot_q2k_blk((const kern_block_q2_K *)w + b, y + b); break;
        case KERN_Q3_K: sum += dot_q3k_blk((const kern_block_q3_K *)w + b, y + b); break;
        case KERN_Q4_K: sum += dot_q4k_blk((const kern_block_q4_K *)w + b, y + b); break;
        case KERN_Q5_K: sum += dot_q5k_blk((const kern_block_q5_K *)w + b, y + b); break;
        case KERN_Q6_K: sum += dot_q6k_blk((const kern_block_q6_K *)w + b, y + b); break;
        default: return 0;
        }
    }
    return sum;
}
