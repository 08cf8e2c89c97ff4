/* Private to kernels/: what every AVX2 file needs (include inside the x86-64/GCC guard,
 * after <immintrin.h>). Functions carry the target attribute so the rest of the build
 * stays generic; the tables hand them out only when the CPU reports avx2, fma and f16c. */
#ifndef MMRAG_KERNELS_AVX2_UTIL_H
#define MMRAG_KERNELS_AVX2_UTIL_H

#define AVX2 __attribute__((target("avx2,fma,f16c")))

/* sum of the 8 lanes */
AVX2 static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
/* byte j = 0xFF where bit j of x is set */
AVX2 static inline __m256i bits_to_bytes(uint32_t x) {
    const __m256i shuf = _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL,
                                            0x0303030303030303LL);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), shuf);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

AVX2 static inline float hmax8(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* mask of the first r (0..8) lanes, for loads/stores of a tail */
AVX2 static inline __m256i tail_mask(int64_t r) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* expf, |rel err| ~ 2 ulp: x = k·ln2 + r, exp(r) by a degree-6 polynomial, 2^k by the
 * exponent field. Below -87.3 the result is exactly 0 (so -inf masks give 0). */
AVX2 static inline __m256 exp8(__m256 x) {
    const __m256 hi = _mm256_set1_ps(88.3762626647949f), lo = _mm256_set1_ps(-87.33654475f);
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500E-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* 2^k; k in [-126, 128): split so k = 128 (x near hi) cannot overflow the field */
    __m256i ki = _mm256_cvtps_epi32(k);
    __m256i k1 = _mm256_srai_epi32(ki, 1), k2 = _mm256_sub_epi32(ki, k1);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, _mm256_set1_epi32(127)), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, _mm256_set1_epi32(127)), 23));
    p = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    return _mm256_andnot_ps(under, p);
}

#endif
