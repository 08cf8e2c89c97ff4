/* AVX2/FMA/F16C implementations. Each function carries a target attribute so the rest
 * of the build stays generic; kern_ops_avx2_table() hands them out only when the CPU
 * reports avx2, fma and f16c. Numerics follow cpu_ref.c (the reference). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

#include "kernels/avx2_util.h"

/* ---- helpers ---------------------------------------------------------------- */

/* erf(x) with |abs err| < 1.5e-7 (Abramowitz & Stegun 7.1.26), odd-symmetric. */
AVX2 static inline __m256 erf8(__m256 x) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 s = _mm256_and_ps(x, sign), a = _mm256_andnot_ps(sign, x);
    __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), a, _mm256_set1_ps(1.0f)));
    __m256 p = _mm256_set1_ps(1.061405429f);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
    p = _mm256_mul_ps(p, t);
    __m256 e = exp8(_mm256_mul_ps(_mm256_mul_ps(a, a), _mm256_set1_ps(-1.0f)));
    __m256 y = _mm256_fnmadd_ps(p, e, _mm256_set1_ps(1.0f));
    return _mm256_or_ps(y, s);
}

/* ---- dots ------------------------------------------------------------------- */
/* Σ x·y over 32 signed bytes as 8 int32 lanes: maddubs needs an unsigned operand, so
 * move x's sign onto y. */
AVX2 static inline __m256 dot32_i8(__m256i x, __m256i y) {
    __m256i ax = _mm256_sign_epi8(x, x), sy = _mm256_sign_epi8(y, x);
    __m256i s16 = _mm256_maddubs_epi16(ax, sy);
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)));
}

/* 16 bytes of nibbles → 32 unsigned bytes: low nibbles first (elements 0..15), then high */
AVX2 static inline __m256i unpack_nibbles(const uint8_t *qs) {
    __m128i b = _mm_loadu_si128((const __m128i *)qs);
    __m128i m = _mm_set1_epi8(0xf);
    __m128i lo = _mm_and_si128(b, m), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

AVX2 static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

/* Two blocks per iteration into separate accumulators: the FMA chain would otherwise
 * wait on its own latency every block. */
AVX2 static inline __m256 blk_q8_0(const kern_block_q8_0 *x, const kern_block_q8_0 *y, __m256 acc) {
    __m256i qx = _mm256_loadu_si256((const __m256i *)x->qs);
    __m256i qy = _mm256_loadu_si256((const __m256i *)y->qs);
    return _mm256_fmadd_ps(_mm256_set1_ps(h2f(x->d) * h2f(y->d)), dot32_i8(qx, qy), acc);
}

AVX2 static float avx_dot_q8_0_q8_0(int64_t n, const kern_block_q8_0 *x, const kern_block_q8_0 *y) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    int64_t nb = n / KERN_QK, b = 0;
    for (; b + 2 <= nb; b += 2) {
        a0 = blk_q8_0(x + b, y + b, a0);
        a1 = blk_q8_0(x + b + 1, y + b + 1, a1);
    }
    if (b < nb) a0 = blk_q8_0(x + b, y + b, a0);
    return hsum8(_mm256_add_ps(a0, a1));
}

AVX2 static inline __m256 blk_q4_0(const kern_block_q4_0 *x, const kern_block_q8_0 *y, __m256 acc) {
    __m256i qx = _mm256_sub_epi8(unpack_nibbles(x->qs), _mm256_set1_epi8(8));
    __m256i qy = _mm256_loadu_si256((const __m256i *)y->qs);
    return _mm256_fmadd_ps(_mm256_set1_ps(h2f(x->d) * h2f(y->d)), dot32_i8(qx, qy), acc);
}

AVX2 static float avx_dot_q4_0_q8_0(int64_t n, const kern_block_q4_0 *x, const kern_block_q8_0 *y) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    int64_t nb = n / KERN_QK, b = 0;
    for (; b + 2 <= nb; b += 2) {
        a0 = blk_q4_0(x + b, y + b, a0);
        a1 = blk_q4_0(x + b + 1, y + b + 1, a1);
    }
    if (b < nb) a0 = blk_q4_0(x + b, y + b, a0);
    return hsum8(_mm256_add_ps(a0, a1));
}

/* q4_1: d·dy·Σq·y + m·dy·Σy; q is unsigned 0..15, so maddubs takes it directly */
AVX2 static inline __m256 blk_q4_1(const kern_block_q4_1 *x, const kern_block_q8_0 *y, __m256 acc) {
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    __m256i qx = unpack_nibbles(x->qs);
    __m256i qy = _mm256_loadu_si256((const __m256i *)y->qs);
    __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(qx, qy), ones16);
    __m256i ys = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, qy), ones16);
    float dy = h2f(y->d);
    __m256 t = _mm256_mul_ps(_mm256_set1_ps(h2f(x->m) * dy), _mm256_cvtepi32_ps(ys));
    return _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(h2f(x->d) * dy), _mm256_cvtepi32_ps(s), t), acc);
}

AVX2 static float avx_dot_q4_1_q8_0(int64_t n, const kern_block_q4_1 *x, const kern_block_q8_0 *y) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    int64_t nb = n / KERN_QK, b = 0;
    for (; b + 2 <= nb; b += 2) {
        a0 = blk_q4_1(x + b, y + b, a0);
        a1 = blk_q4_1(x + b + 1, y + b + 1, a1);
    }
    if (b < nb) a0 = blk_q4_1(x + b, y + b, a0);
    return hsum8(_mm256_add_ps(a0, a1));
}

AVX2 static inline __m256 blk_q4_1s(const kern_block_q4_1 *x, const kern_block_q8_0 *y, __m256 acc) {
    __m256i qx = unpack_nibbles(x->qs);
    __m256i qy = _mm256_loadu_si256((const __m256i *)y->qs);
    __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(qx, qy), _mm256_set1_epi16(1));
    return _mm256_fmadd_ps(_mm256_set1_ps(h2f(x->d) * h2f(y->d)), _mm256_cvtepi32_ps(s), acc);
}

AVX2 static float avx_dot_q4_1_q8_0s(int64_t n, const kern_block_q4_1 *x, const kern_block_q8_0 *y,
                                     const float *ys) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    float m0 = 0, m1 = 0;
    int64_t nb = n / KERN_QK, b = 0;
    for (; b + 2 <= nb; b += 2) {
        a0 = blk_q4_1s(x + b, y + b, a0);
        a1 = blk_q4_1s(x + b + 1, y + b + 1, a1);
        m0 += h2f(x[b].m) * ys[b];
        m1 += h2f(x[b + 1].m) * ys[b + 1];
    }
    if (b < nb) {
        a0 = blk_q4_1s(x + b, y + b, a0);
        m0 += h2f(x[b].m) * ys[b];
    }
    return hsum8(_mm256_add_ps(a0, a1)) + m0 + m1;
}

/* Σ over 32 bytes of u·y as 8 float lanes, u unsigned (0..15 nibbles or |x|) */
AVX2 static inline __m256 udot32(__m256i u, __m256i y) {
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(u, y), _mm256_set1_epi16(1)));
}

AVX2 static void avx_qdot4(kern_type t, int64_t n, const void *xv, const kern_block_q8_0 *y,
                           int64_t ys_, const float *ys, float out[4]) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    float msum[4] = {0, 0, 0, 0};
    int64_t nb = n / KERN_QK;
    for (int64_t b = 0; b < nb; b++) {
        __m256i u, sgn = _mm256_set1_epi8(1);
        float dx, mx = 0;
        if (t == KERN_Q8_0) {
            const kern_block_q8_0 *x = (const kern_block_q8_0 *)xv + b;
            __m256i q = _mm256_loadu_si256((const __m256i *)x->qs);
            u = _mm256_sign_epi8(q, q);  /* |x|; x's sign moves onto y below */
            sgn = q;
            dx = h2f(x->d);
        } else if (t == KERN_Q4_0) {
            const kern_block_q4_0 *x = (const kern_block_q4_0 *)xv + b;
            __m256i q = _mm256_sub_epi8(unpack_nibbles(x->qs), _mm256_set1_epi8(8));
            u = _mm256_sign_epi8(q, q);
            sgn = q;
            dx = h2f(x->d);
        } else {
            const kern_block_q4_1 *x = (const kern_block_q4_1 *)xv + b;
            u = unpack_nibbles(x->qs);
            dx = h2f(x->d);
            mx = h2f(x->m);
        }
        for (int k = 0; k < 4; k++) {
            const kern_block_q8_0 *yk = y + k * ys_ + b;
            __m256i qy = _mm256_loadu_si256((const __m256i *)yk->qs);
            if (t != KERN_Q4_1) qy = _mm256_sign_epi8(qy, sgn);
            acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(dx * h2f(yk->d)), udot32(u, qy), acc[k]);
            if (t == KERN_Q4_1) msum[k] += mx * ys[k * ys_ + b];
        }
    }
    for (int k = 0; k < 4; k++) out[k] = hsum8(acc[k]) + msum[k];
}

/* ---- decode matvec: several weight rows per pass over one q8_0 row ------------- */
/* 16 bytes of nibbles → 32 unsigned bytes (low nibbles, then high) with one broadcast
 * load, one variable shift and one and */
AVX2 static inline __m256i nib32(const uint8_t *qs) {
    __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    v = _mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4));
    return _mm256_and_si256(v, _mm256_set1_epi8(0xf));
}

/* [d, m, 0, 0] of a block starting with fp16 d (and m for q4_1) */
AVX2 static inline __m128 blk_dm(const uint8_t *blk, int with_m) {
    uint32_t v = blk[0] | (uint32_t)blk[1] << 8;
    if (with_m) v |= (uint32_t)blk[2] << 16 | (uint32_t)blk[3] << 24;
    return _mm_cvtph_ps(_mm_cvtsi32_si128((int)v));
}

/* bytes ahead of the rows being dotted that are prefetched: a few row groups, enough to
 * cover DRAM latency at decode speed (measured 2-8 KiB flat, 1 KiB worse). They go to
 * L2 (T1): decode tg128 +8% over T0 at 1 thread (T0 crowds L1's fill buffers with
 * lines needed only later; NTA is 30% slower, no prefetch 40%). */
#ifndef QROWS_PF_AHEAD
#define QROWS_PF_AHEAD 4096
#endif

/* NR rows of type T; both are constants after inlining, so the type branches fold */
AVX2 static inline __attribute__((always_inline)) void
qrows_impl(kern_type T, int NR, int64_t n, const uint8_t *w, size_t wrow,
           const kern_block_q8_0 *y, const float *yds, int64_t pf_bytes, float *out) {
    const size_t bs = T == KERN_Q8_0 ? sizeof(kern_block_q8_0) : T == KERN_Q4_0 ? sizeof(kern_block_q4_0)
                    : T == KERN_Q4_1 ? sizeof(kern_block_q4_1) : T == KERN_Q5_0 ? sizeof(kern_block_q5_0)
                    : sizeof(kern_block_q5_1);
    const int with_m = T == KERN_Q4_1 || T == KERN_Q5_1; /* unsigned quants plus a min */
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256 acc[4];
    __m128 macc[4];
    for (int r = 0; r < NR; r++) { acc[r] = _mm256_setzero_ps(); macc[r] = _mm_setzero_ps(); }
    int64_t nb = n / KERN_QK;
    int64_t span = (int64_t)wrow * NR;
    const char *pf = (const char *)w + QROWS_PF_AHEAD;
    const char *pf_end = (const char *)w + (pf_bytes < QROWS_PF_AHEAD + span ? pf_bytes : QROWS_PF_AHEAD + span);
    int64_t step = (int64_t)(NR * bs); /* span / nb (wrow is nb blocks), without a divide */
    const char *pf_goal = pf;
    for (int64_t b = 0; b < nb; b++) {
        pf_goal += step;
        for (; pf < pf_goal && pf < pf_end; pf += 64) _mm_prefetch(pf, _MM_HINT_T1);
        __m256i qy = _mm256_loadu_si256((const __m256i *)y[b].qs);
        /* [dy, ys]: two floats at 4-byte alignment, so an unaligned 8-byte integer load */
        __m128 ydm = _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)(const void *)(yds + 2 * b)));
#pragma GCC unroll 4 /* acc[]/macc[] in registers, not spilled per block */
        for (int r = 0; r < NR; r++) {
            const uint8_t *blk = w + (size_t)r * wrow + (size_t)b * bs;
            __m256i s, q;
            if (T == KERN_Q5_0 || T == KERN_Q5_1) { /* 5th bits: 4 bytes after d (and m) */
                uint32_t qh;
                memcpy(&qh, blk + 2 + 2 * with_m, 4);
                q = _mm256_or_si256(nib32(blk + 6 + 2 * with_m),
                                    _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10)));
                if (T == KERN_Q5_0) q = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
            } else if (T == KERN_Q4_1) {
                q = nib32(blk + 4);
            } else {
                q = T == KERN_Q8_0 ? _mm256_loadu_si256((const __m256i *)(blk + 2))
                                   : _mm256_sub_epi8(nib32(blk + 2), _mm256_set1_epi8(8));
            }
            if (with_m) {
                s = _mm256_madd_epi16(_mm256_maddubs_epi16(q, qy), ones16);
            } else {
                /* maddubs needs an unsigned operand: |q|, and q's sign moved onto y */
                s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(q, q),
                                                           _mm256_sign_epi8(qy, q)), ones16);
            }
            __m128 p = _mm_mul_ps(blk_dm(blk, with_m), ydm); /* [d·dy, m·ys] */
            acc[r] = _mm256_fmadd_ps(_mm256_broadcastss_ps(p), _mm256_cvtepi32_ps(s), acc[r]);
            if (with_m) macc[r] = _mm_add_ps(macc[r], p);
        }
    }
    for (int r = 0; r < NR; r++)
        out[r] = hsum8(acc[r]) + (with_m ? _mm_cvtss_f32(_mm_movehdup_ps(macc[r])) : 0.0f);
}

#define QROWS_FN(name, T)                                                                    \
    AVX2 static void name(int nr, int64_t n, const uint8_t *w, size_t wrow,                \
                          const kern_block_q8_0 *y, const float *yds, int64_t pf, float *out) { \
        if (nr == 4) qrows_impl(T, 4, n, w, wrow, y, yds, pf, out);                          \
        else for (int r = 0; r < nr; r++)                                                    \
            qrows_impl(T, 1, n, w + (size_t)r * wrow, wrow, y, yds, pf - (int64_t)(r * wrow), out + r); \
    }
QROWS_FN(qrows_q8_0, KERN_Q8_0)
QROWS_FN(qrows_q4_0, KERN_Q4_0)
QROWS_FN(qrows_q4_1, KERN_Q4_1)
QROWS_FN(qrows_q5_0, KERN_Q5_0)
QROWS_FN(qrows_q5_1, KERN_Q5_1)

AVX2 static void avx_qdot_rows(kern_type t, int64_t n, const void *w, size_t wrow, int nr,
                               const kern_block_q8_0 *y, const float *yds, int64_t pf_bytes,
                               float *out) {
    if (t == KERN_Q8_0) qrows_q8_0(nr, n, w, wrow, y, yds, pf_bytes, out);
    else if (t == KERN_Q4_0) qrows_q4_0(nr, n, w, wrow, y, yds, pf_bytes, out);
    else if (t == KERN_Q4_1) qrows_q4_1(nr, n, w, wrow, y, yds, pf_bytes, out);
    else if (t == KERN_Q5_0) qrows_q5_0(nr, n, w, wrow, y, yds, pf_bytes, out);
    else qrows_q5_1(nr, n, w, wrow, y, yds, pf_bytes, out);
}

AVX2 static float avx_dot_f32(int64_t n, const float *x, const float *y) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    if (i < n) {
        __m256i m = tail_mask(n - i);
        a1 = _mm256_fmadd_ps(_mm256_maskload_ps(x + i, m), _mm256_maskload_ps(y + i, m), a1);
    }
    return hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

AVX2 static inline __m256 load_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
AVX2 static inline __m256 load_bf16(const uint16_t *p) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

AVX2 static float avx_dot_f16_f32(int64_t n, const uint16_t *w, const float *x) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(load_f16(w + i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(load_f16(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load_f16(w + i), _mm256_loadu_ps(x + i), a0);
    float s = hsum8(_mm256_add_ps(a0, a1));
    for (; i < n; i++) s += kern_fp16_to_fp32(w[i]) * x[i];
    return s;
}

AVX2 static float avx_dot_bf16_f32(int64_t n, const uint16_t *w, const float *x) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(load_bf16(w + i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(load_bf16(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load_bf16(w + i), _mm256_loadu_ps(x + i), a0);
    float s = hsum8(_mm256_add_ps(a0, a1));
    for (; i < n; i++) s += kern_bf16_to_fp32(w[i]) * x[i];
    return s;
}

AVX2 static void avx_quantize_q8_0(const float *src, kern_block_q8_0 *dst, int64_t n) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t b = 0; b < n / KERN_QK; b++, src += KERN_QK) {
        __m256 v[4], mx = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(src + 8 * k);
            mx = _mm256_max_ps(mx, _mm256_and_ps(v[k], absmask));
        }
        float amax = hmax8(mx), d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
        dst[b].d = kern_fp32_to_fp16(d);
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], _mm256_set1_ps(id)),
                                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        /* packs interleave 128-bit lanes; the permute restores element order */
        __m256i p16a = _mm256_packs_epi32(q[0], q[1]), p16b = _mm256_packs_epi32(q[2], q[3]);
        __m256i p8 = _mm256_packs_epi16(p16a, p16b);
        p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)dst[b].qs, p8);
    }
}

AVX2 static void avx_fp16_to_f32(const uint16_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = kern_fp16_to_fp32(src[i]);
}

AVX2 static void avx_q8_0_to_f32(const kern_block_q8_0 *b, float *dst, int64_t n) {
    for (int64_t i = 0; i < n / KERN_QK; i++, dst += KERN_QK) {
        __m256 d = _mm256_set1_ps(h2f(b[i].d));
        for (int k = 0; k < 4; k++) {
            __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b[i].qs + 8 * k)));
            _mm256_storeu_ps(dst + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(v), d));
        }
    }
}

/* 32 unpacked bytes (already ordered) → 4×8 floats as q·d + m */
AVX2 static inline void store_q4(__m256i q, __m256 d, __m256 m, float *dst) {
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int k = 0; k < 4; k++)
        _mm256_storeu_ps(dst + 8 * k, _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[k])), d, m));
}

AVX2 static void avx_q4_0_to_f32(const kern_block_q4_0 *b, float *dst, int64_t n) {
    for (int64_t i = 0; i < n / KERN_QK; i++, dst += KERN_QK) {
        float d = h2f(b[i].d);
        store_q4(unpack_nibbles(b[i].qs), _mm256_set1_ps(d), _mm256_set1_ps(-8.0f * d), dst);
    }
}

AVX2 static void avx_q4_1_to_f32(const kern_block_q4_1 *b, float *dst, int64_t n) {
    for (int64_t i = 0; i < n / KERN_QK; i++, dst += KERN_QK)
        store_q4(unpack_nibbles(b[i].qs), _mm256_set1_ps(h2f(b[i].d)), _mm256_set1_ps(h2f(b[i].m)), dst);
}

/* ---- elementwise ------------------------------------------------------------ */
/* Apply an 8-wide map to x in place; the tail goes through a masked load/store. */
#define MAP_INPLACE(x, n, EXPR)                                                  \
    do {                                                                         \
        int64_t i_ = 0;                                                          \
        for (; i_ + 8 <= (n); i_ += 8) {                                         \
            __m256 v = _mm256_loadu_ps((x) + i_);                                \
            _mm256_storeu_ps((x) + i_, (EXPR));                                  \
        }                                                                        \
        if (i_ < (n)) {                                                          \
            __m256i m_ = tail_mask((n) - i_);                                    \
            __m256 v = _mm256_maskload_ps((x) + i_, m_);                         \
            _mm256_maskstore_ps((x) + i_, m_, (EXPR));                           \
        }                                                                        \
    } while (0)

AVX2 static inline __m256 sigmoid_mul8(__m256 v, __m256 k) { /* v / (1 + exp(-k v)) */
    __m256 e = exp8(_mm256_mul_ps(v, _mm256_sub_ps(_mm256_setzero_ps(), k)));
    return _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

AVX2 static void avx_gelu(float *x, int64_t n) {
    const __m256 h = _mm256_set1_ps(0.5f), r2 = _mm256_set1_ps(0.70710678118654752f), one = _mm256_set1_ps(1.0f);
    MAP_INPLACE(x, n, _mm256_mul_ps(_mm256_mul_ps(h, v), _mm256_add_ps(one, erf8(_mm256_mul_ps(v, r2)))));
}

AVX2 static void avx_quick_gelu(float *x, int64_t n) {
    const __m256 k = _mm256_set1_ps(1.702f);
    MAP_INPLACE(x, n, sigmoid_mul8(v, k));
}

AVX2 static void avx_silu(float *x, int64_t n) {
    const __m256 k = _mm256_set1_ps(1.0f);
    MAP_INPLACE(x, n, sigmoid_mul8(v, k));
}

AVX2 static void avx_swiglu(const float *g, const float *u, float *y, int64_t n) {
    const __m256 k = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(sigmoid_mul8(_mm256_loadu_ps(g + i), k), _mm256_loadu_ps(u + i)));
    if (i < n) {
        __m256i m = tail_mask(n - i);
        __m256 v = _mm256_mul_ps(sigmoid_mul8(_mm256_maskload_ps(g + i, m), k), _mm256_maskload_ps(u + i, m));
        _mm256_maskstore_ps(y + i, m, v);
    }
}

/* gelu_tanh(v) = 0.5·v·(1 + tanh(t)) = v / (1 + exp(-2t)), t = √(2/π)·(v + 0.044715·v³) */
AVX2 static inline __m256 geglu8(__m256 v, __m256 u) {
    const __m256 k = _mm256_set1_ps(-2.0f * 0.7978845608028654f), c = _mm256_set1_ps(0.044715f);
    __m256 t = _mm256_fmadd_ps(_mm256_mul_ps(c, v), _mm256_mul_ps(v, v), v);
    __m256 e = exp8(_mm256_mul_ps(k, t));
    return _mm256_mul_ps(_mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

AVX2 static void avx_geglu(const float *g, const float *u, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, geglu8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
    if (i < n) {
        __m256i m = tail_mask(n - i);
        _mm256_maskstore_ps(y + i, m, geglu8(_mm256_maskload_ps(g + i, m), _mm256_maskload_ps(u + i, m)));
    }
}

AVX2 static void avx_axpy(float *y, float a, const float *x, int64_t n) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

AVX2 static void avx_add(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
    for (; i < n; i++) y[i] += x[i];
}

AVX2 static void avx_scale(float *y, float a, int64_t n) {
    const __m256 va = _mm256_set1_ps(a);
    MAP_INPLACE(y, n, _mm256_mul_ps(v, va));
}

AVX2 static void avx_softmax(float *x, int64_t n) {
    if (n <= 0) return;
    __m256 mv = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + i));
    float mx = hmax8(mv);
    for (; i < n; i++) mx = fmaxf(mx, x[i]);
    const __m256 vm = _mm256_set1_ps(mx);
    __m256 sv = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        sv = _mm256_add_ps(sv, e);
        _mm256_storeu_ps(x + i, e);
    }
    if (i < n) {
        __m256i m = tail_mask(n - i);
        __m256 e = exp8(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), vm));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(m));
        sv = _mm256_add_ps(sv, e);
        _mm256_maskstore_ps(x + i, m, e);
    }
    avx_scale(x, 1.0f / hsum8(sv), n);
}

AVX2 static float sum_f32(const float *x, int64_t n) {
    __m256 a = _mm256_setzero_ps(), b = a;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a = _mm256_add_ps(a, _mm256_loadu_ps(x + i));
        b = _mm256_add_ps(b, _mm256_loadu_ps(x + i + 8));
    }
    for (; i + 8 <= n; i += 8) a = _mm256_add_ps(a, _mm256_loadu_ps(x + i));
    if (i < n) b = _mm256_add_ps(b, _mm256_maskload_ps(x + i, tail_mask(n - i)));
    return hsum8(_mm256_add_ps(a, b));
}

/* y = (x - mean) * inv * g + b, with g/b optional */
AVX2 static void norm_apply(const float *x, float *y, int64_t n, float mean, float inv,
                            const float *g, const float *b) {
    const __m256 vm = _mm256_set1_ps(mean), vi = _mm256_set1_ps(inv), one = _mm256_set1_ps(1.0f);
    const __m256 zero = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), vi);
        v = _mm256_fmadd_ps(v, g ? _mm256_loadu_ps(g + i) : one, b ? _mm256_loadu_ps(b + i) : zero);
        _mm256_storeu_ps(y + i, v);
    }
    for (; i < n; i++) y[i] = (x[i] - mean) * inv * (g ? g[i] : 1.0f) + (b ? b[i] : 0.0f);
}

AVX2 static void avx_layernorm(const float *x, float *y, int64_t n, const float *g, const float *b,
                               float eps) {
    float mean = sum_f32(x, n) / (float)n;
    const __m256 vm = _mm256_set1_ps(mean);
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
        acc = _mm256_fmadd_ps(d, d, acc);
    }
    float var = hsum8(acc);
    for (; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
    norm_apply(x, y, n, mean, 1.0f / sqrtf(var / (float)n + eps), g, b);
}

AVX2 static void avx_rmsnorm(const float *x, float *y, int64_t n, const float *w, float eps) {
    float ss = avx_dot_f32(n, x, x);
    norm_apply(x, y, n, 0.0f, 1.0f / sqrtf(ss / (float)n + eps), w, NULL);
}

/* four keys per pass: q is loaded once per 4 dot products, and the four horizontal
 * sums share one hadd tree */
AVX2 static void avx_dot_rows(const float *q, const float *K, int64_t stride, int64_t n, int64_t d,
                              float scale, float *out) {
    int64_t j = 0;
    if ((d & 7) == 0) {
        for (; j + 4 <= n; j += 4) {
            const float *k0 = K + j * stride, *k1 = k0 + stride, *k2 = k1 + stride, *k3 = k2 + stride;
            /* (one accumulator per key: the summation order SmolLM2's golden decode was
             * validated with; two interleaved sets were measured to flip a greedy token
             * through q8_0 activation rounding, for no measurable speed) */
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int64_t i = 0; i < d; i += 8) {
                __m256 qv = _mm256_loadu_ps(q + i);
                a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + i), a0);
                a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k1 + i), a1);
                a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k2 + i), a2);
                a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k3 + i), a3);
            }
            __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
            __m128 r = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
            _mm_storeu_ps(out + j, _mm_mul_ps(r, _mm_set1_ps(scale)));
        }
    }
    for (; j < n; j++) out[j] = avx_dot_f32(d, q, K + j * stride) * scale;
}

AVX2 static void avx_wsum_acc(const float *p, const float *V, int64_t stride, int64_t n, int64_t d,
                              float corr, float *out);
AVX2 static void avx_wsum_rows(const float *p, const float *V, int64_t stride, int64_t n, int64_t d,
                               float *out) {
    avx_wsum_acc(p, V, stride, n, d, 0.0f, out);
}

/* up to 4 query rows (NR) × 16 keys from column j, or 8 when W is 8; accumulators named
 * one by one (with arrays GCC -O2 kept them in memory) */
#define QK_STEP(q, a, b)                                                                     \
    do {                                                                                     \
        a = _mm256_fmadd_ps(q, k0, a);                                                       \
        if (W == 16) b = _mm256_fmadd_ps(q, k1, b);                                          \
    } while (0)
#define QK_STORE(r, a, b)                                                                    \
    do {                                                                                     \
        _mm256_storeu_ps(S + (r) * s_stride + j, _mm256_mul_ps(a, scale));                   \
        if (W == 16) _mm256_storeu_ps(S + (r) * s_stride + j + 8, _mm256_mul_ps(b, scale));  \
    } while (0)
AVX2 static inline __attribute__((always_inline)) void
qk_impl(int NR, int W, const float *Q, int64_t q_stride, const float *KT, int64_t ldk, int64_t j,
        int64_t d, __m256 scale, float *S, int64_t s_stride) {
    __m256 a0 = _mm256_setzero_ps(), b0 = a0, a1 = a0, b1 = a0, a2 = a0, b2 = a0, a3 = a0, b3 = a0;
    const float *q0 = Q, *q1 = Q + q_stride, *q2 = q1 + q_stride, *q3 = q2 + q_stride;
    for (int64_t k = 0; k < d; k++) {
        const float *kt = KT + k * ldk + j;
        __m256 k0 = _mm256_loadu_ps(kt), k1 = W == 16 ? _mm256_loadu_ps(kt + 8) : k0;
        QK_STEP(_mm256_broadcast_ss(q0 + k), a0, b0);
        if (NR > 1) QK_STEP(_mm256_broadcast_ss(q1 + k), a1, b1);
        if (NR > 2) QK_STEP(_mm256_broadcast_ss(q2 + k), a2, b2);
        if (NR > 3) QK_STEP(_mm256_broadcast_ss(q3 + k), a3, b3);
    }
    QK_STORE(0, a0, b0);
    if (NR > 1) QK_STORE(1, a1, b1);
    if (NR > 2) QK_STORE(2, a2, b2);
    if (NR > 3) QK_STORE(3, a3, b3);
}
#undef QK_STEP
#undef QK_STORE

#define QK_ROWS(NR)                                                                          \
    do {                                                                                     \
        int64_t j = 0;                                                                       \
        for (; j + 16 <= n; j += 16) qk_impl(NR, 16, Q, q_stride, KT, ldk, j, d, sv, S, s_stride); \
        for (; j < n; j += 8) qk_impl(NR, 8, Q, q_stride, KT, ldk, j, d, sv, S, s_stride);   \
    } while (0)

AVX2 static void avx_qk_tile(const float *Q, int64_t q_stride, int nr, const float *KT,
                             int64_t ldk, int64_t n, int64_t d, float scale, float *S,
                             int64_t s_stride) {
    __m256 sv = _mm256_set1_ps(scale);
    switch (nr) {
    case 4: QK_ROWS(4); break;
    case 3: QK_ROWS(3); break;
    case 2: QK_ROWS(2); break;
    default: QK_ROWS(1); break;
    }
}
#undef QK_ROWS

/* rows r0 (and r1 when two) of P × 32 output columns (dc..) of V; accumulators named one
 * by one: with arrays GCC -O2 kept them in memory */
AVX2 static inline __attribute__((always_inline)) void
pv_32(int two, const float *p0, const float *p1, const float *Vp, int64_t n, int64_t d, int64_t dc,
      float *o0, float *o1) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int64_t j = 0; j < n; j++) {
        const float *vr = Vp + j * d + dc;
        __m256 v0 = _mm256_loadu_ps(vr), v1 = _mm256_loadu_ps(vr + 8);
        __m256 v2 = _mm256_loadu_ps(vr + 16), v3 = _mm256_loadu_ps(vr + 24);
        __m256 x = _mm256_broadcast_ss(p0 + j);
        a0 = _mm256_fmadd_ps(x, v0, a0), a1 = _mm256_fmadd_ps(x, v1, a1);
        a2 = _mm256_fmadd_ps(x, v2, a2), a3 = _mm256_fmadd_ps(x, v3, a3);
        if (two) {
            __m256 y = _mm256_broadcast_ss(p1 + j);
            b0 = _mm256_fmadd_ps(y, v0, b0), b1 = _mm256_fmadd_ps(y, v1, b1);
            b2 = _mm256_fmadd_ps(y, v2, b2), b3 = _mm256_fmadd_ps(y, v3, b3);
        }
    }
    _mm256_storeu_ps(o0 + dc, a0), _mm256_storeu_ps(o0 + dc + 8, a1);
    _mm256_storeu_ps(o0 + dc + 16, a2), _mm256_storeu_ps(o0 + dc + 24, a3);
    if (two) {
        _mm256_storeu_ps(o1 + dc, b0), _mm256_storeu_ps(o1 + dc + 8, b1);
        _mm256_storeu_ps(o1 + dc + 16, b2), _mm256_storeu_ps(o1 + dc + 24, b3);
    }
}

/* the same for 8 columns */
AVX2 static inline __attribute__((always_inline)) void
pv_8(int two, const float *p0, const float *p1, const float *Vp, int64_t n, int64_t d, int64_t dc,
     float *o0, float *o1) {
    __m256 a = _mm256_setzero_ps(), b = a;
    for (int64_t j = 0; j < n; j++) {
        __m256 v = _mm256_loadu_ps(Vp + j * d + dc);
        a = _mm256_fmadd_ps(_mm256_broadcast_ss(p0 + j), v, a);
        if (two) b = _mm256_fmadd_ps(_mm256_broadcast_ss(p1 + j), v, b);
    }
    _mm256_storeu_ps(o0 + dc, a);
    if (two) _mm256_storeu_ps(o1 + dc, b);
}

AVX2 static void avx_pv_tile(const float *P, int64_t p_stride, int nr, const float *Vp, int64_t n,
                             int64_t d, float *O, int64_t o_stride) {
    const float *p1 = P + p_stride;
    float *o1 = O + o_stride;
    int64_t dc = 0;
    for (; dc + 32 <= d; dc += 32) {
        if (nr == 2) pv_32(1, P, p1, Vp, n, d, dc, O, o1);
        else pv_32(0, P, P, Vp, n, d, dc, O, O);
    }
    for (; dc < d; dc += 8) {
        if (nr == 2) pv_8(1, P, p1, Vp, n, d, dc, O, o1);
        else pv_8(0, P, P, Vp, n, d, dc, O, O);
    }
}

AVX2 static float avx_softmax_step(float *x, int64_t n, float *m) {
    __m256 mv = _mm256_set1_ps(*m);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + i));
    float mx = hmax8(mv);
    for (; i < n; i++) mx = fmaxf(mx, x[i]);
    if (mx == -INFINITY) {
        for (i = 0; i < n; i++) x[i] = 0;
        return 0;
    }
    *m = mx;
    const __m256 vm = _mm256_set1_ps(mx);
    __m256 sv = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        sv = _mm256_add_ps(sv, e);
        _mm256_storeu_ps(x + i, e);
    }
    if (i < n) {
        __m256i k = tail_mask(n - i);
        __m256 e = exp8(_mm256_sub_ps(_mm256_maskload_ps(x + i, k), vm));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(k));
        sv = _mm256_add_ps(sv, e);
        _mm256_maskstore_ps(x + i, k, e);
    }
    return hsum8(sv);
}

/* One slab of K·8 columns: out = corr·out + Σ_j p[j]·V[j], the K accumulators in
 * registers (the unroll pragmas matter: as a memory array, every FMA would wait on a
 * store-forward) and each V row loaded once. K is a constant after inlining. */
AVX2 static inline __attribute__((always_inline)) void
wsum_slab(int K, const float *p, const float *V, int64_t stride, int64_t n, float corr,
          float *out) {
    const __m256 vc = _mm256_set1_ps(corr);
    __m256 a[8];
#pragma GCC unroll 8
    for (int k = 0; k < K; k++)
        a[k] = corr == 0.0f ? _mm256_setzero_ps() : _mm256_mul_ps(vc, _mm256_loadu_ps(out + 8 * k));
    for (int64_t j = 0; j < n; j++) {
        __m256 pj = _mm256_set1_ps(p[j]);
        const float *v = V + j * stride;
#pragma GCC unroll 8
        for (int k = 0; k < K; k++) a[k] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 8 * k), a[k]);
    }
#pragma GCC unroll 8
    for (int k = 0; k < K; k++) _mm256_storeu_ps(out + 8 * k, a[k]);
}

/* out = corr·out + Σ_j p[j]·V[j]: slabs of 64, then 32 (MiniLM's head_dim), then 8
 * columns; a per-row axpy for the rest (it used to take all of a 32-wide head: 18% of
 * text-encoder time in calls and stores). */
AVX2 static void avx_wsum_acc(const float *p, const float *V, int64_t stride, int64_t n, int64_t d,
                              float corr, float *out) {
    int64_t d0 = 0;
    for (; d0 + 64 <= d; d0 += 64) wsum_slab(8, p, V + d0, stride, n, corr, out + d0);
    for (; d0 + 32 <= d; d0 += 32) wsum_slab(4, p, V + d0, stride, n, corr, out + d0);
    for (; d0 + 8 <= d; d0 += 8) wsum_slab(1, p, V + d0, stride, n, corr, out + d0);
    if (d0 < d) {
        for (int64_t i = d0; i < d; i++) out[i] = corr == 0.0f ? 0.0f : out[i] * corr;
        for (int64_t j = 0; j < n; j++) avx_axpy(out + d0, p[j], V + j * stride + d0, d - d0);
    }
}

/* the AVX2 table; CPUs with VNNI get vpdpbusd in the int8 tile (the same integers) */
#define OPS_AVX2(name_, tile_, tile8_)                                                      \
    {                                                                                      \
    .name = name_,                                                                         \
    .dot_q8_0_q8_0 = avx_dot_q8_0_q8_0,                                                    \
    .dot_q4_0_q8_0 = avx_dot_q4_0_q8_0,                                                    \
    .dot_q4_1_q8_0 = avx_dot_q4_1_q8_0,                                                    \
    .dot_q4_1_q8_0s = avx_dot_q4_1_q8_0s,                                                  \
    .qdot4 = avx_qdot4,                                                                    \
    .qdot_rows = avx_qdot_rows,                                                            \
    .dot_f32 = avx_dot_f32,                                                                \
    .dot_f16_f32 = avx_dot_f16_f32,                                                        \
    .dot_bf16_f32 = avx_dot_bf16_f32,                                                      \
    .quantize_q8_0 = avx_quantize_q8_0,                                                    \
    .fp16_to_f32 = avx_fp16_to_f32,                                                        \
    .q8_0_to_f32 = avx_q8_0_to_f32,                                                        \
    .q4_0_to_f32 = avx_q4_0_to_f32,                                                        \
    .q4_1_to_f32 = avx_q4_1_to_f32,                                                        \
    .quantize_q8_K = kern_kq_quantize_q8_K_avx2,                                           \
    .dot_q5_q8_0 = kern_kq_dot_q5_avx2,                                                    \
    .dot_kq = kern_kq_dot_avx2,                                                            \
    .kq_to_f32 = kern_kq_to_f32_avx2,                                                      \
    .softmax = avx_softmax,                                                                \
    .layernorm = avx_layernorm,                                                            \
    .rmsnorm = avx_rmsnorm,                                                                \
    .gelu = avx_gelu,                                                                      \
    .quick_gelu = avx_quick_gelu,                                                          \
    .silu = avx_silu,                                                                      \
    .swiglu = avx_swiglu,                                                                  \
    .geglu = avx_geglu,                                                                    \
    .add = avx_add,                                                                        \
    .axpy = avx_axpy,                                                                      \
    .scale = avx_scale,                                                                    \
    .dot_rows = avx_dot_rows,                                                              \
    .qk_tile = avx_qk_tile,                                                                \
    .pv_tile = avx_pv_tile,                                                                \
    .wsum_rows = avx_wsum_rows,                                                            \
    .softmax_step = avx_softmax_step,                                                      \
    .wsum_acc = avx_wsum_acc,                                                              \
    .i8_quantize_row = kern_i8_quantize_row_avx2,                                          \
    .i8_tile = tile_,                                                                      \
    .i8_tile8 = tile8_,                                                                    \
    .i8_dequant = kern_i8_dequant_avx2,                                                    \
    }
static const kern_ops ops_avx2 = OPS_AVX2("avx2", kern_i8_tile_avx2, NULL);
static const kern_ops ops_avx2_vnni = OPS_AVX2("avx2+vnni", kern_i8_tile_vnni, kern_i8_tile8_vnni);
static const kern_ops ops_avx2_avxvnni = OPS_AVX2("avx2+avxvnni", kern_i8_tile_avxvnni, NULL);
#undef OPS_AVX2

/* F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports has no "f16c". */
static int has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

static int avx2_ok(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
}

const kern_ops *kern_ops_avx2_table(void) {
    const char *e = getenv("MMRAG_SIMD");
    if (!avx2_ok()) return NULL;
    if (e && strcmp(e, "avx2") == 0) return &ops_avx2;
    int v = kern_i8_vnni_kind();
    return v == 1 ? &ops_avx2_vnni : v == 2 ? &ops_avx2_avxvnni : &ops_avx2;
}

const kern_ops *kern_ops_avx2_plain_table(void) { return avx2_ok() ? &ops_avx2 : NULL; }
#else
const kern_ops *kern_ops_avx2_table(void) { return NULL; }
const kern_ops *kern_ops_avx2_plain_table(void) { return NULL; }
#endif
