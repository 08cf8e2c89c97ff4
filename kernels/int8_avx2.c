/* AVX2 int8 linear steps (see kernels/int8_ref.c for the packed layout and the numerics
 * they must match bit for bit). The tile is 4 X rows × 16 channels: 8 int32 accumulators;
 * per 4 inputs, two 32-byte weight loads and four 4-byte activation broadcasts. CPUs with
 * VNNI sum u8·s8 groups of 4 into int32 with vpdpbusd (kern_i8_tile_vnni: the EVEX form
 * on AVX512-VNNI + VL, else AVX-VNNI's VEX form). Plain AVX2 has vpmaddubsw, whose int16
 * pair sums saturate above 32767: it takes the activation's low and high nibbles
 * separately (pairs <= 2·15·127) and vpmaddwd weighs them by 1 and 16 into int32. */
#include <math.h>
#include <string.h>

#include "kernels/kern_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

#include "kernels/avx2_util.h"

/* x[i..i+8) · m[i..i+8) (m NULL: x itself; times 1 would be the same bits) */
AVX2 static inline __m256 load_xm(const float *x, const float *m, int64_t i) {
    return m ? _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(m + i)) : _mm256_loadu_ps(x + i);
}

AVX2 static inline __m256i quant8(const float *x, const float *m, int64_t i, __m256 inv, __m256 u,
                                  __m256i zp) {
    __m256 v = _mm256_round_ps(_mm256_add_ps(_mm256_mul_ps(load_xm(x, m, i), inv), u),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(v), zp);
    q = _mm256_max_epi32(q, _mm256_setzero_si256());
    return _mm256_min_epi32(q, _mm256_set1_epi32(KERN_I8_AMAX));
}

AVX2 void kern_i8_quantize_row_avx2(const float *x, const float *m, int64_t n, int64_t kp, float u,
                                    uint8_t *q, float *scale, int32_t *zp) {
    __m256 vlo = _mm256_setzero_ps(), vhi = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = load_xm(x, m, i);
        vlo = _mm256_min_ps(vlo, v);
        vhi = _mm256_max_ps(vhi, v);
    }
    float lo[8], hi[8], mn = 0.0f, mx = 0.0f, inv;
    _mm256_storeu_ps(lo, vlo);
    _mm256_storeu_ps(hi, vhi);
    for (int j = 0; j < 8; j++) {
        mn = lo[j] < mn ? lo[j] : mn;
        mx = hi[j] > mx ? hi[j] : mx;
    }
    for (int64_t k = i; k < n; k++) {
        float v = x[k] * (m ? m[k] : 1.0f);
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
    }
    kern_i8_row_params(mn, mx, scale, &inv, zp);
    const __m256 vinv = _mm256_set1_ps(inv);
    const __m256i vzp = _mm256_set1_epi32(*zp);
    const __m256 vu = _mm256_set1_ps(u);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (i = 0; i + 32 <= n; i += 32) {
        __m256i ab = _mm256_packs_epi32(quant8(x, m, i, vinv, vu, vzp), quant8(x, m, i + 8, vinv, vu, vzp));
        __m256i cd = _mm256_packs_epi32(quant8(x, m, i + 16, vinv, vu, vzp), quant8(x, m, i + 24, vinv, vu, vzp));
        __m256i b = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd), order);
        _mm256_storeu_si256((__m256i *)(q + i), b);
    }
    for (; i < n; i++) {
        int32_t v = (int32_t)nearbyintf(x[i] * (m ? m[i] : 1.0f) * inv + u) + *zp;
        q[i] = (uint8_t)(v < 0 ? 0 : v > KERN_I8_AMAX ? KERN_I8_AMAX : v);
    }
    for (; i < kp; i++) q[i] = (uint8_t)*zp;
}

/* acc += 4-byte groups of a (u8) · b (s8), summed per int32 lane, a as two nibbles (the
 * compiler computes the split once per broadcast a) */
#define I8_STEP(acc, a, b)                                                                     \
    acc = _mm256_add_epi32(                                                                 \
        acc, _mm256_add_epi32(                                                              \
                 _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(a, nib), b), ones), \
                 _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(a, 4), nib), b), \
                                   sixteen)))

AVX2 static inline __m256i bcast4(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* the tile's body for one accumulate step STEP(acc, a, b) */
#define I8_TILE_BODY(STEP)                                                                  \
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00;                  \
    __m256i c20 = c00, c21 = c00, c30 = c00, c31 = c00;                                     \
    const uint8_t *a0 = A, *a1 = A + lda, *a2 = A + 2 * lda, *a3 = A + 3 * lda;             \
    for (int64_t k = 0; k < kp; k += 4, B += 64) {                                          \
        __m256i b0 = _mm256_load_si256((const __m256i *)B);                                 \
        __m256i b1 = _mm256_load_si256((const __m256i *)(B + 32));                          \
        __m256i a = bcast4(a0 + k);                                                         \
        STEP(c00, a, b0);                                                                   \
        STEP(c01, a, b1);                                                                   \
        a = bcast4(a1 + k);                                                                 \
        STEP(c10, a, b0);                                                                   \
        STEP(c11, a, b1);                                                                   \
        a = bcast4(a2 + k);                                                                 \
        STEP(c20, a, b0);                                                                   \
        STEP(c21, a, b1);                                                                   \
        a = bcast4(a3 + k);                                                                 \
        STEP(c30, a, b0);                                                                   \
        STEP(c31, a, b1);                                                                   \
    }                                                                                       \
    __m256i *o = (__m256i *)C;                                                              \
    _mm256_storeu_si256(o + 0, c00);                                                        \
    _mm256_storeu_si256(o + 1, c01);                                                        \
    _mm256_storeu_si256(o + 2, c10);                                                        \
    _mm256_storeu_si256(o + 3, c11);                                                        \
    _mm256_storeu_si256(o + 4, c20);                                                        \
    _mm256_storeu_si256(o + 5, c21);                                                        \
    _mm256_storeu_si256(o + 6, c30);                                                        \
    _mm256_storeu_si256(o + 7, c31);

AVX2 void kern_i8_tile_avx2(int64_t kp, const uint8_t *A, int64_t lda, const int8_t *B,
                            int32_t *C) {
    const __m256i ones = _mm256_set1_epi16(1), sixteen = _mm256_set1_epi16(16);
    const __m256i nib = _mm256_set1_epi8(0x0F);
    I8_TILE_BODY(I8_STEP)
}

#define VNNI_EVEX __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512vnni")))
#define VNNI_VEX __attribute__((target("avx2,fma,f16c,avxvnni")))
#define I8_STEP_EVEX(acc, a, b) acc = _mm256_dpbusd_epi32(acc, a, b)
#define I8_STEP_VEX(acc, a, b) acc = _mm256_dpbusd_avx_epi32(acc, a, b)
VNNI_EVEX void kern_i8_tile_vnni(int64_t kp, const uint8_t *A, int64_t lda, const int8_t *B,
                                int32_t *C) {
    I8_TILE_BODY(I8_STEP_EVEX)
}
VNNI_VEX void kern_i8_tile_avxvnni(int64_t kp, const uint8_t *A, int64_t lda, const int8_t *B,
                              int32_t *C) {
    I8_TILE_BODY(I8_STEP_VEX)
}

/* 8 rows × 16 channels with EVEX vpdpbusd: 16 accumulators, which AVX-512VL's 32 ymm
 * registers hold with room for the operands; each weight load then feeds 8 rows instead
 * of 4 (C is [8][16]) */
/* one row of the 8-row tile: its broadcast activations against both weight halves, and
 * its store (token pasting keeps the accumulators named: in an array GCC spills them) */
#define T8_STEP(r)                                                                          \
    a = bcast4(A + r * lda + k);                                                            \
    c##r##0 = _mm256_dpbusd_epi32(c##r##0, a, b0);                                          \
    c##r##1 = _mm256_dpbusd_epi32(c##r##1, a, b1);
#define T8_STORE(r)                                                                         \
    _mm256_storeu_si256((__m256i *)(C + r * KERN_I8_NR), c##r##0);                          \
    _mm256_storeu_si256((__m256i *)(C + r * KERN_I8_NR + 8), c##r##1);
VNNI_EVEX void kern_i8_tile8_vnni(int64_t kp, const uint8_t *A, int64_t lda, const int8_t *B,
                                  int32_t *C) {
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256i c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    __m256i c60 = c00, c61 = c00, c70 = c00, c71 = c00;
    for (int64_t k = 0; k < kp; k += 4, B += 64) {
        __m256i b0 = _mm256_load_si256((const __m256i *)B);
        __m256i b1 = _mm256_load_si256((const __m256i *)(B + 32)), a;
        T8_STEP(0) T8_STEP(1) T8_STEP(2) T8_STEP(3) T8_STEP(4) T8_STEP(5) T8_STEP(6) T8_STEP(7)
    }
    T8_STORE(0) T8_STORE(1) T8_STORE(2) T8_STORE(3) T8_STORE(4) T8_STORE(5) T8_STORE(6) T8_STORE(7)
}

/* 1: AVX512-VNNI with VL (and the OS saving the AVX-512 state), 2: AVX-VNNI, 0: none */
int kern_i8_vnni_kind(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    int evex = (c & (1u << 11)) && (b & (1u << 31)) && (b & (1u << 16));
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if (evex && (lo & 0xE6) == 0xE6) return 1; /* XMM, YMM, opmask, ZMM state enabled */
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)) && (lo & 6) == 6) return 2;
    return 0;
}

AVX2 void kern_i8_dequant_avx2(const int32_t *C, int mr, int nc, const float *sx,
                               const int32_t *zx, const float *ux, const float *sw,
                               const int32_t *wsum, const float *bias, float *Y, int64_t ldy) {
    if (nc != KERN_I8_NR) {
        kern_i8_dequant_ref(C, mr, nc, sx, zx, ux, sw, wsum, bias, Y, ldy);
        return;
    }
    __m256 ws[2], sc[2], b[2];
    for (int h = 0; h < 2; h++) {
        ws[h] = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(wsum + 8 * h)));
        sc[h] = _mm256_loadu_ps(sw + 8 * h);
        b[h] = bias ? _mm256_loadu_ps(bias + 8 * h) : _mm256_setzero_ps();
    }
    for (int r = 0; r < mr; r++) {
        __m256 zu = _mm256_set1_ps(-((float)zx[r] + (ux ? ux[r] : 0.0f))), s = _mm256_set1_ps(sx[r]);
        for (int h = 0; h < 2; h++) {
            __m256 acc = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(C + r * KERN_I8_NR + 8 * h)));
            __m256 a = _mm256_fmadd_ps(zu, ws[h], acc);
            _mm256_storeu_ps(Y + r * ldy + 8 * h, _mm256_fmadd_ps(a, _mm256_mul_ps(s, sc[h]), b[h]));
        }
    }
}
#endif
