/* Attention products in bfloat16 (AVX512_BF16's vdpbf16ps: two products per fp32 lane,
 * twice the fp32 FMA rate). Inputs are rounded to bf16 (8-bit mantissa, fp32 range),
 * sums stay fp32. Layouts, built by kern_bf16_pack_kv for one kv head:
 *   KT2[p][j]  = (K[j][2p], K[j][2p+1])   one dword per (dim pair, key)
 *   V2[jp][t]  = (V[2jp][t], V[2jp+1][t]) one dword per (key pair, dim)
 * so the QK tile broadcasts a query's dim pair against 8 keys and the PV tile a row's
 * probability pair against 8 dims. Used by kern_attention_bf16 (attention.c). */
#include <pthread.h>
#include <string.h>

#include "kernels/kern_internal.h"

/* round to nearest even; the inputs are finite */
static inline uint32_t f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

#include "kernels/avx2_util.h"

#define BF16 __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512bf16")))

static int g_bf16; /* written once under pthread_once (CPUID traps in VMs: not per call) */
static pthread_once_t g_bf16_once = PTHREAD_ONCE_INIT;

/* CPUID.(7,1):EAX bit 5, on top of the EVEX VNNI table (AVX-512 state enabled) */
static void bf16_init(void) {
    unsigned a, b, c, d;
    g_bf16 = strcmp(kern_ops_get()->name, "avx2+vnni") == 0 &&
             __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
}

int kern_bf16_available(void) {
    pthread_once(&g_bf16_once, bf16_init);
    return g_bf16;
}

/* 8 dwords of 8 rows, transposed in registers */
BF16 static inline void transpose8(__m256i r[8]) {
    __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
    __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
    __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
    __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
    r[0] = _mm256_permute2x128_si256(u0, u4, 0x20), r[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
    r[1] = _mm256_permute2x128_si256(u1, u5, 0x20), r[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
    r[2] = _mm256_permute2x128_si256(u2, u6, 0x20), r[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
    r[3] = _mm256_permute2x128_si256(u3, u7, 0x20), r[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

/* 16 floats as 8 bf16 pairs (round to nearest even) */
BF16 static inline __m256i pairs16(const float *x) {
    return (__m256i)_mm256_cvtne2ps_pbh(_mm256_loadu_ps(x + 8), _mm256_loadu_ps(x));
}

/* d a multiple of 32 (kern_attention_bf16 checks) */
BF16 void kern_bf16_pack_kv(const float *K, const float *V, int64_t stride, int64_t n, int64_t d,
                            int64_t npad, uint32_t *KT2, uint32_t *V2) {
    int64_t n8 = n & ~(int64_t)7;
    for (int64_t j = 0; j < n8; j += 8) /* 8 keys × 8 dim pairs at a time, transposed */
        for (int64_t p = 0; p < d / 2; p += 8) {
            __m256i r[8];
            for (int k = 0; k < 8; k++) r[k] = pairs16(K + (j + k) * stride + 2 * p);
            transpose8(r);
            for (int k = 0; k < 8; k++) _mm256_storeu_si256((__m256i *)(KT2 + (p + k) * npad + j), r[k]);
        }
    for (int64_t p = 0; p < d / 2; p++) /* the keys past the last 8, and zeros to npad */
        for (int64_t j = n8; j < npad; j++)
            KT2[p * npad + j] = j < n ? f2bf(K[j * stride + 2 * p]) | f2bf(K[j * stride + 2 * p + 1]) << 16 : 0;
    for (int64_t j = 0; j < npad; j += 2) {
        uint32_t *vr = V2 + (j / 2) * d;
        for (int64_t t = 0; t < d; t += 8) {
            __m128i a = j < n ? (__m128i)_mm256_cvtneps_pbh(_mm256_loadu_ps(V + j * stride + t)) : _mm_setzero_si128();
            __m128i b = j + 1 < n ? (__m128i)_mm256_cvtneps_pbh(_mm256_loadu_ps(V + (j + 1) * stride + t))
                                  : _mm_setzero_si128();
            _mm_storeu_si128((__m128i *)(vr + t), _mm_unpacklo_epi16(a, b));
            _mm_storeu_si128((__m128i *)(vr + t + 4), _mm_unpackhi_epi16(a, b));
        }
    }
}

BF16 void kern_bf16_pack_q(const float *Q, int64_t stride, int nr, int64_t d, uint32_t *q2) {
    for (int r = 0; r < nr; r++)
        for (int64_t p = 0; p < d / 2; p += 8)
            _mm256_storeu_si256((__m256i *)(q2 + r * (d / 2) + p), pairs16(Q + r * stride + 2 * p));
}

#define BF(x) ((__m256bh)(x))
#define LD(p) _mm256_loadu_si256((const __m256i *)(p))

/* row R of the QK tile: 32 keys (four ymm) against one query dim pair */
#define QK_ROW(R)                                                                            \
    if (nr > R) {                                                                            \
        __m256i q = _mm256_set1_epi32((int)q2[R * hp + p]);                                  \
        a##R##0 = _mm256_dpbf16_ps(a##R##0, BF(q), BF(k0));                                  \
        a##R##1 = _mm256_dpbf16_ps(a##R##1, BF(q), BF(k1));                                  \
        a##R##2 = _mm256_dpbf16_ps(a##R##2, BF(q), BF(k2));                                  \
        a##R##3 = _mm256_dpbf16_ps(a##R##3, BF(q), BF(k3));                                  \
    }
#define QK_STORE(R)                                                                          \
    if (nr > R) {                                                                            \
        float *s = S + R * s_stride + j;                                                     \
        _mm256_storeu_ps(s, _mm256_mul_ps(a##R##0, sv));                                     \
        _mm256_storeu_ps(s + 8, _mm256_mul_ps(a##R##1, sv));                                 \
        _mm256_storeu_ps(s + 16, _mm256_mul_ps(a##R##2, sv));                                \
        _mm256_storeu_ps(s + 24, _mm256_mul_ps(a##R##3, sv));                                \
    }

/* S[r][j] = scale · q_r·k_j for nr (1..4) packed query rows and keys [0, nk), nk a
 * multiple of 32 */
BF16 void kern_bf16_qk_tile(const uint32_t *q2, int nr, const uint32_t *KT2, int64_t npad,
                            int64_t nk, int64_t d, float scale, float *S, int64_t s_stride) {
    const __m256 sv = _mm256_set1_ps(scale);
    int64_t hp = d / 2;
    for (int64_t j = 0; j < nk; j += 32) {
        __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00,
               a12 = a00, a13 = a00, a20 = a00, a21 = a00, a22 = a00, a23 = a00, a30 = a00,
               a31 = a00, a32 = a00, a33 = a00;
        for (int64_t p = 0; p < hp; p++) {
            const uint32_t *k = KT2 + p * npad + j;
            __m256i k0 = LD(k), k1 = LD(k + 8), k2 = LD(k + 16), k3 = LD(k + 24);
            QK_ROW(0) QK_ROW(1) QK_ROW(2) QK_ROW(3)
        }
        QK_STORE(0) QK_STORE(1) QK_STORE(2) QK_STORE(3)
    }
}

/* exp(x) for x <= 0, relative error ~2.4e-6 (the result is rounded to bf16, 2^-9): degree-5
 * Taylor on |r| <= ln2/2 and vscalefps for 2^k; below -87 it gives ~1e-38, not 0. (Degree
 * 4, 4e-5, moved the R manuals' R@5 by a question: kept at 5.) */
BF16 static inline __m256 exp_le0(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    __m256 k = _mm256_roundscale_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693147181f), x);
    __m256 p = _mm256_set1_ps(1.0f / 120);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    return _mm256_scalef_ps(p, k);
}

/* x[0..lim) = exp(x - max), written as bf16 to P (zeros in [lim, nk), nk a multiple of
 * 8); returns 1/sum */
BF16 float kern_bf16_softmax_row(const float *x, int64_t lim, int64_t nk, uint16_t *P) {
    __m256 mv = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= lim; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + i));
    float mx = hmax8(mv);
    for (; i < lim; i++) mx = x[i] > mx ? x[i] : mx;
    const __m256 vm = _mm256_set1_ps(mx);
    __m256 s0 = _mm256_setzero_ps(), s1 = s0; /* two sums: half the add chain */
    for (i = 0; i + 16 <= lim; i += 16) {
        __m256 e0 = exp_le0(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        __m256 e1 = exp_le0(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm));
        s0 = _mm256_add_ps(s0, e0), s1 = _mm256_add_ps(s1, e1);
        _mm256_storeu_si256((__m256i *)(P + i), (__m256i)_mm256_cvtne2ps_pbh(e1, e0));
    }
    for (; i < nk; i += 8) { /* the tail by mask, then zeros */
        __m256i m = tail_mask(lim - i < 0 ? 0 : lim - i < 8 ? lim - i : 8);
        __m256 e = exp_le0(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), vm));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(m));
        s0 = _mm256_add_ps(s0, e);
        _mm_storeu_si128((__m128i *)(P + i), (__m128i)_mm256_cvtneps_pbh(e));
    }
    float s = hsum8(_mm256_add_ps(s0, s1));
    return s > 0 ? 1.0f / s : 0.0f;
}

/* row R of the PV tile: one probability pair against 32 dims */
#define PV_ROW(R)                                                                            \
    if (nr > R) {                                                                            \
        __m256i pp = _mm256_set1_epi32((int)p32[R * ps + jp]);                               \
        o##R##0 = _mm256_dpbf16_ps(o##R##0, BF(pp), BF(v0));                                 \
        o##R##1 = _mm256_dpbf16_ps(o##R##1, BF(pp), BF(v1));                                 \
        o##R##2 = _mm256_dpbf16_ps(o##R##2, BF(pp), BF(v2));                                 \
        o##R##3 = _mm256_dpbf16_ps(o##R##3, BF(pp), BF(v3));                                 \
    }
#define PV_STORE(R)                                                                          \
    if (nr > R) {                                                                            \
        __m256 w = _mm256_set1_ps(inv[R]);                                                   \
        float *o = O + R * o_stride + dc;                                                    \
        _mm256_storeu_ps(o, _mm256_mul_ps(o##R##0, w));                                      \
        _mm256_storeu_ps(o + 8, _mm256_mul_ps(o##R##1, w));                                  \
        _mm256_storeu_ps(o + 16, _mm256_mul_ps(o##R##2, w));                                 \
        _mm256_storeu_ps(o + 24, _mm256_mul_ps(o##R##3, w));                                 \
    }

/* O[r] = inv[r] · Σ_j P[r][j] V[j] for nr (1..4) rows of P (row stride p_stride
 * entries, even), keys [0, nk) (even), d a multiple of 32 */
BF16 void kern_bf16_pv_tile(const uint16_t *P, int64_t p_stride, int nr, const uint32_t *V2,
                            int64_t nk, int64_t d, const float *inv, float *O, int64_t o_stride) {
    const uint32_t *p32 = (const uint32_t *)(const void *)P;
    int64_t ps = p_stride / 2;
    for (int64_t dc = 0; dc < d; dc += 32) {
        __m256 o00 = _mm256_setzero_ps(), o01 = o00, o02 = o00, o03 = o00, o10 = o00, o11 = o00,
               o12 = o00, o13 = o00, o20 = o00, o21 = o00, o22 = o00, o23 = o00, o30 = o00,
               o31 = o00, o32 = o00, o33 = o00;
        for (int64_t jp = 0; jp < nk / 2; jp++) {
            const uint32_t *v = V2 + jp * d + dc;
            __m256i v0 = LD(v), v1 = LD(v + 8), v2 = LD(v + 16), v3 = LD(v + 24);
            PV_ROW(0) PV_ROW(1) PV_ROW(2) PV_ROW(3)
        }
        PV_STORE(0) PV_STORE(1) PV_STORE(2) PV_STORE(3)
    }
}
#else
int kern_bf16_available(void) { return 0; }
void kern_bf16_pack_kv(const float *K, const float *V, int64_t stride, int64_t n, int64_t d,
                       int64_t npad, uint32_t *KT2, uint32_t *V2) {}
void kern_bf16_pack_q(const float *Q, int64_t stride, int nr, int64_t d, uint32_t *q2) {}
void kern_bf16_qk_tile(const uint32_t *q2, int nr, const uint32_t *KT2, int64_t npad, int64_t nk,
                       int64_t d, float scale, float *S, int64_t s_stride) {}
float kern_bf16_softmax_row(const float *x, int64_t lim, int64_t nk, uint16_t *P) { return 0; }
void kern_bf16_pv_tile(const uint16_t *P, int64_t p_stride, int nr, const uint32_t *V2, int64_t nk,
                       int64_t d, const float *inv, float *O, int64_t o_stride) {}
#endif
