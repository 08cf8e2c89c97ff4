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

#endif
