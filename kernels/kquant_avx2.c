/* AVX2 paths for Q5_0/Q5_1 and the K-quants: q8_K quantization, dot products against q8
 * activations, dequantization. Numerics follow kernels/kquant_ref.c: integer sums are
 * exact, dequantization uses the same fp32 multiply then subtract (no FMA), so it is bit
 * exact with the reference. Q2_K/Q3_K have no SIMD dots here (rare in real files): the
 * table hands out the scalar ones. */
#include <math.h>
#include <string.h>

#include "kernels/kern_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "kernels/avx2_util.h"

AVX2 static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

/* 16 bytes of nibbles → 32 bytes: low nibbles (elements 0..15), then high (16..31) */
AVX2 static inline __m256i nibbles32(const uint8_t *qs) {
    __m128i b = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(0xf);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(b, m)),
                                   _mm_and_si128(_mm_srli_epi16(b, 4), m), 1);
}

/* Σ of 32 u8·s8 products as 8 int32 lanes */
AVX2 static inline __m256i udot(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* ---- q8_K activations ---------------------------------------------------------- */
AVX2 void kern_kq_quantize_q8_K_avx2(const float *src, kern_block_q8_K *dst, int64_t n) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t b = 0; b < n / KERN_QK_K; b++, src += KERN_QK_K) {
        __m256 mx = _mm256_setzero_ps();
        for (int k = 0; k < KERN_QK_K; k += 8)
            mx = _mm256_max_ps(mx, _mm256_and_ps(_mm256_loadu_ps(src + k), absmask));
        __m128 s = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        s = _mm_max_ps(s, _mm_movehl_ps(s, s));
        s = _mm_max_ss(s, _mm_movehdup_ps(s));
        float d = _mm_cvtss_f32(s) / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
        dst[b].d = d;
        const __m256 vid = _mm256_set1_ps(id);
        for (int k = 0; k < KERN_QK_K; k += 32) {
            __m256i q[4];
            for (int i = 0; i < 4; i++)
                q[i] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(src + k + 8 * i), vid),
                                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            __m256i p8 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(dst[b].qs + k), p8);
            /* 16-element sums: bytes → int16 pairs → int32 quads, then per half */
            __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), p8);
            __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
            int32_t t[8];
            _mm256_storeu_si256((__m256i *)t, s32);
            dst[b].bsums[k / 16] = (int16_t)(t[0] + t[1] + t[2] + t[3]);
            dst[b].bsums[k / 16 + 1] = (int16_t)(t[4] + t[5] + t[6] + t[7]);
        }
    }
}

/* ---- Q5_0 / Q5_1 against q8_0 ---------------------------------------------------- */
AVX2 float kern_kq_dot_q5_avx2(kern_type t, int64_t n, const void *w, const kern_block_q8_0 *y) {
    __m256 acc = _mm256_setzero_ps();
    const __m256i h16 = _mm256_set1_epi8(0x10);
    for (int64_t b = 0; b < n / KERN_QK; b++) {
        __m256i qy = _mm256_loadu_si256((const __m256i *)y[b].qs);
        float dy = h2f(y[b].d);
        uint32_t qh;
        if (t == KERN_Q5_0) {
            const kern_block_q5_0 *x = (const kern_block_q5_0 *)w + b;
            memcpy(&qh, x->qh, 4);
            __m256i q = _mm256_or_si256(nibbles32(x->qs), _mm256_and_si256(bits_to_bytes(qh), h16));
            q = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
            __m256i s = udot(_mm256_sign_epi8(q, q), _mm256_sign_epi8(qy, q));
            acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x->d) * dy), _mm256_cvtepi32_ps(s), acc);
        } else {
            const kern_block_q5_1 *x = (const kern_block_q5_1 *)w + b;
            memcpy(&qh, x->qh, 4);
            __m256i q = _mm256_or_si256(nibbles32(x->qs), _mm256_and_si256(bits_to_bytes(qh), h16));
            __m256i s = udot(q, qy), ys = udot(_mm256_set1_epi8(1), qy);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x->d) * dy), _mm256_cvtepi32_ps(s), acc);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x->m) * dy), _mm256_cvtepi32_ps(ys), acc);
        }
    }
    return hsum8(acc);
}

/* ---- K-quants against q8_K --------------------------------------------------------- */
static inline void scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Q4_K (with_h 0) and Q5_K (with_h 1) share the layout of scales, mins and nibbles */
AVX2 static inline float dot_q45k(int with_h, int64_t n, const void *w, const kern_block_q8_K *y) {
    __m256 acc = _mm256_setzero_ps();
    float macc = 0;
    const __m256i m4 = _mm256_set1_epi8(0xF), h16 = _mm256_set1_epi8(0x10);
    size_t bs = with_h ? sizeof(kern_block_q5_K) : sizeof(kern_block_q4_K);
    for (int64_t b = 0; b < n / KERN_QK_K; b++) {
        const uint8_t *blk = (const uint8_t *)w + (size_t)b * bs;
        const kern_block_q4_K *x4 = (const void *)blk;
        const kern_block_q5_K *x5 = (const void *)blk;
        const uint8_t *qs = with_h ? x5->qs : x4->qs;
        uint8_t sc[8], mn[8];
        for (int s = 0; s < 8; s++) scale_min_k4(s, x4->scales, &sc[s], &mn[s]);
        int32_t msum = 0;
        for (int s = 0; s < 8; s++) msum += mn[s] * (y[b].bsums[2 * s] + y[b].bsums[2 * s + 1]);
        __m256i qh = with_h ? _mm256_loadu_si256((const __m256i *)x5->qh) : _mm256_setzero_si256();
        __m256i isum = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (with_h) {
                __m256i b0 = _mm256_set1_epi8((char)(1 << (2 * j))), b1 = _mm256_set1_epi8((char)(1 << (2 * j + 1)));
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b0), b0), h16));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1), h16));
            }
            __m256i y0 = _mm256_loadu_si256((const __m256i *)(y[b].qs + 64 * j));
            __m256i y1 = _mm256_loadu_si256((const __m256i *)(y[b].qs + 64 * j + 32));
            __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0), _mm256_set1_epi16(sc[2 * j]));
            __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y1), _mm256_set1_epi16(sc[2 * j + 1]));
            isum = _mm256_add_epi32(isum, _mm256_add_epi32(p0, p1));
        }
        float d = y[b].d * h2f(x4->d);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
        macc += y[b].d * h2f(x4->dmin) * (float)msum;
    }
    return hsum8(acc) - macc;
}

/* the k-th 32 unsigned 6-bit values (0..63) of one 128-element half of a Q6_K block:
 * low nibbles of ql0/ql1 for k 0/1, high nibbles for k 2/3, two bits of qh on top */
AVX2 static inline __m256i q6k_unpack(__m256i ql0, __m256i ql1, __m256i qh, int k) {
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3);
    __m256i l = k & 1 ? ql1 : ql0;
    l = k >= 2 ? _mm256_and_si256(_mm256_srli_epi16(l, 4), m4) : _mm256_and_si256(l, m4);
    return _mm256_or_si256(l, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), m3), 4));
}

AVX2 static float dot_q6k(int64_t n, const kern_block_q6_K *x, const kern_block_q8_K *y) {
    __m256 acc = _mm256_setzero_ps();
    const __m256i c32 = _mm256_set1_epi8(32);
    for (int64_t b = 0; b < n / KERN_QK_K; b++) {
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i ql0 = _mm256_loadu_si256((const __m256i *)(x[b].ql + 64 * h));
            __m256i ql1 = _mm256_loadu_si256((const __m256i *)(x[b].ql + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(x[b].qh + 32 * h));
            for (int k = 0; k < 4; k++) {
                __m256i q = q6k_unpack(ql0, ql1, qh, k);
                __m256i yy = _mm256_loadu_si256((const __m256i *)(y[b].qs + 128 * h + 32 * k));
                __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, yy), _mm256_maddubs_epi16(c32, yy));
                int si = 8 * h + 2 * k;
                __m256i scv = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(x[b].scales[si])),
                                                      _mm_set1_epi16(x[b].scales[si + 1]), 1);
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, scv));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[b].d * h2f(x[b].d)), _mm256_cvtepi32_ps(isum), acc);
    }
    return hsum8(acc);
}

AVX2 float kern_kq_dot_avx2(kern_type t, int64_t n, const void *w, const kern_block_q8_K *y) {
    switch (t) {
    case KERN_Q4_K: return dot_q45k(0, n, w, y);
    case KERN_Q5_K: return dot_q45k(1, n, w, y);
    case KERN_Q6_K: return dot_q6k(n, w, y);
    default: return kern_kq_dot_ref(t, n, w, y);
    }
}

/* ---- dequantization ------------------------------------------------------------ */
/* 32 unsigned bytes → 32 floats d·q - m (multiply, then subtract: bit exact) */
AVX2 static inline void store_dm(__m256i q, __m256 d, __m256 m, float *dst) {
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int k = 0; k < 4; k++) {
        __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(parts[k]));
        _mm256_storeu_ps(dst + 8 * k, _mm256_sub_ps(_mm256_mul_ps(d, v), m));
    }
}

AVX2 static void q45k_to_f32(int with_h, const void *src, float *dst, int64_t n) {
    const __m256i m4 = _mm256_set1_epi8(0xF), h16 = _mm256_set1_epi8(0x10);
    size_t bs = with_h ? sizeof(kern_block_q5_K) : sizeof(kern_block_q4_K);
    for (int64_t b = 0; b < n / KERN_QK_K; b++, dst += KERN_QK_K) {
        const uint8_t *blk = (const uint8_t *)src + (size_t)b * bs;
        const kern_block_q4_K *x4 = (const void *)blk;
        const kern_block_q5_K *x5 = (const void *)blk;
        const uint8_t *qs = with_h ? x5->qs : x4->qs;
        float d = h2f(x4->d), dmin = h2f(x4->dmin);
        __m256i qh = with_h ? _mm256_loadu_si256((const __m256i *)x5->qh) : _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            uint8_t sc0, m0, sc1, m1;
            scale_min_k4(2 * j, x4->scales, &sc0, &m0);
            scale_min_k4(2 * j + 1, x4->scales, &sc1, &m1);
            __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (with_h) {
                __m256i b0 = _mm256_set1_epi8((char)(1 << (2 * j))), b1 = _mm256_set1_epi8((char)(1 << (2 * j + 1)));
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b0), b0), h16));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1), h16));
            }
            store_dm(lo, _mm256_set1_ps(d * (float)sc0), _mm256_set1_ps(dmin * (float)m0), dst + 64 * j);
            store_dm(hi, _mm256_set1_ps(d * (float)sc1), _mm256_set1_ps(dmin * (float)m1), dst + 64 * j + 32);
        }
    }
}

AVX2 static void q6k_to_f32(const kern_block_q6_K *x, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / KERN_QK_K; b++, dst += KERN_QK_K) {
        float d = h2f(x[b].d);
        for (int h = 0; h < 2; h++) {
            __m256i ql0 = _mm256_loadu_si256((const __m256i *)(x[b].ql + 64 * h));
            __m256i ql1 = _mm256_loadu_si256((const __m256i *)(x[b].ql + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(x[b].qh + 32 * h));
            for (int k = 0; k < 4; k++) {
                __m256i q = q6k_unpack(ql0, ql1, qh, k);
                q = _mm256_sub_epi8(q, _mm256_set1_epi8(32));
                int si = 8 * h + 2 * k;
                float *o = dst + 128 * h + 32 * k;
                __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
                __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
                for (int p = 0; p < 4; p++) {
                    __m256 dv = _mm256_set1_ps(d * (float)x[b].scales[si + p / 2]);
                    _mm256_storeu_ps(o + 8 * p, _mm256_mul_ps(dv, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[p]))));
                }
            }
        }
    }
}

/* Q5_0: d·(q - 16); Q5_1: d·q + m (multiply, then add: bit exact with the reference) */
AVX2 static void q5_to_f32(int one, const void *src, float *dst, int64_t n) {
    const __m256i h16 = _mm256_set1_epi8(0x10);
    for (int64_t b = 0; b < n / KERN_QK; b++, dst += KERN_QK) {
        const uint8_t *qh4, *qs;
        float d, m = 0;
        if (one) {
            const kern_block_q5_1 *x = (const kern_block_q5_1 *)src + b;
            qh4 = x->qh, qs = x->qs, d = h2f(x->d), m = h2f(x->m);
        } else {
            const kern_block_q5_0 *x = (const kern_block_q5_0 *)src + b;
            qh4 = x->qh, qs = x->qs, d = h2f(x->d);
        }
        uint32_t qh;
        memcpy(&qh, qh4, 4);
        __m256i q = _mm256_or_si256(nibbles32(qs), _mm256_and_si256(bits_to_bytes(qh), h16));
        if (!one) q = _mm256_sub_epi8(q, h16);
        __m256 dv = _mm256_set1_ps(d), mv = _mm256_set1_ps(m);
        __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
        __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
        for (int p = 0; p < 4; p++) {
            __m256 v = _mm256_mul_ps(dv, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[p])));
            _mm256_storeu_ps(dst + 8 * p, one ? _mm256_add_ps(v, mv) : v);
        }
    }
}

AVX2 void kern_kq_to_f32_avx2(kern_type t, const void *src, float *dst, int64_t n) {
    switch (t) {
    case KERN_Q5_0: q5_to_f32(0, src, dst, n); return;
    case KERN_Q5_1: q5_to_f32(1, src, dst, n); return;
    case KERN_Q4_K: q45k_to_f32(0, src, dst, n); return;
    case KERN_Q5_K: q45k_to_f32(1, src, dst, n); return;
    case KERN_Q6_K: q6k_to_f32(src, dst, n); return;
    default: kern_kq_to_f32_ref(t, src, dst, n); return;
    }
}

#else
typedef int kern_kquant_avx2_unused; /* ISO C forbids an empty translation unit */
#endif
