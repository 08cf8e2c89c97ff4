/* Element types: sizes, names, fp16/bf16 conversion, dequantization, q8_0 quantization. */
#include <math.h>
#include <string.h>

#include "kernels/kern_internal.h"

int64_t kern_type_block_elems(kern_type t) {
    switch (t) {
    case KERN_F32: case KERN_F16: case KERN_BF16: return 1;
    case KERN_Q4_0: case KERN_Q4_1: case KERN_Q5_0: case KERN_Q5_1: case KERN_Q8_0: return KERN_QK;
    case KERN_Q2_K: case KERN_Q3_K: case KERN_Q4_K: case KERN_Q5_K: case KERN_Q6_K: case KERN_Q8_K:
        return KERN_QK_K;
    }
    return 0;
}

static size_t block_bytes(kern_type t) {
    switch (t) {
    case KERN_F32: return 4;
    case KERN_F16: case KERN_BF16: return 2;
    case KERN_Q4_0: return sizeof(kern_block_q4_0);
    case KERN_Q4_1: return sizeof(kern_block_q4_1);
    case KERN_Q5_0: return sizeof(kern_block_q5_0);
    case KERN_Q5_1: return sizeof(kern_block_q5_1);
    case KERN_Q8_0: return sizeof(kern_block_q8_0);
    case KERN_Q2_K: return sizeof(kern_block_q2_K);
    case KERN_Q3_K: return sizeof(kern_block_q3_K);
    case KERN_Q4_K: return sizeof(kern_block_q4_K);
    case KERN_Q5_K: return sizeof(kern_block_q5_K);
    case KERN_Q6_K: return sizeof(kern_block_q6_K);
    case KERN_Q8_K: return sizeof(kern_block_q8_K);
    }
    return 0;
}

size_t kern_type_row_bytes(kern_type t, int64_t n) {
    int64_t be = kern_type_block_elems(t);
    if (n < 0 || be == 0 || n % be) return 0;
    return (size_t)(n / be) * block_bytes(t);
}

const char *kern_type_name(kern_type t) {
    switch (t) {
    case KERN_F32: return "f32";
    case KERN_F16: return "f16";
    case KERN_BF16: return "bf16";
    case KERN_Q8_0: return "q8_0";
    case KERN_Q4_0: return "q4_0";
    case KERN_Q4_1: return "q4_1";
    case KERN_Q5_0: return "q5_0";
    case KERN_Q5_1: return "q5_1";
    case KERN_Q2_K: return "q2_K";
    case KERN_Q3_K: return "q3_K";
    case KERN_Q4_K: return "q4_K";
    case KERN_Q5_K: return "q5_K";
    case KERN_Q6_K: return "q6_K";
    case KERN_Q8_K: return "q8_K";
    }
    return "unknown";
}

const char *kern_type_supported_list(void) {
    return "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K";
}

static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float kern_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13)); /* inf / nan */
    if (exp == 0) {
        if (man == 0) return bits_f32(sign);
        /* subnormal: man * 2^-24, exact in fp32 */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

/* Round to nearest even, with overflow to inf, subnormals and nan preserved. */
uint16_t kern_fp32_to_fp16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) /* inf or nan (keep a quiet nan payload bit) */
        return sign | 0x7c00 | (a > 0x7f800000u ? 0x200 | ((a >> 13) & 0x3ff) : 0);
    if (a >= 0x477ff000u) return sign | 0x7c00; /* rounds to >= 65520: inf */
    if (a < 0x38800000u) {                      /* below 2^-14: fp16 subnormal or zero */
        if (a < 0x33000000u) return sign;       /* < 2^-25: rounds to 0 */
        uint32_t e = a >> 23, m = (a & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e;               /* 14 + 113 - 1 - e + ... */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return sign | (uint16_t)q;
    }
    uint32_t r = a - 0x38000000u;               /* rebias 127 -> 15 */
    uint32_t q = r >> 13, rem = r & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (q & 1))) q++;
    return sign | (uint16_t)q;
}

float kern_bf16_to_fp32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

void kern_to_f32(kern_type t, const void *src, float *dst, int64_t n) {
    const kern_ops *ops = kern_ops_get();
    switch (t) {
    case KERN_F32: memmove(dst, src, (size_t)n * 4); return;
    case KERN_F16: ops->fp16_to_f32(src, dst, n); return;
    case KERN_BF16: {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++) dst[i] = kern_bf16_to_fp32(s[i]);
        return;
    }
    case KERN_Q8_0: ops->q8_0_to_f32(src, dst, n); return;
    case KERN_Q4_0: ops->q4_0_to_f32(src, dst, n); return;
    case KERN_Q4_1: ops->q4_1_to_f32(src, dst, n); return;
    case KERN_Q5_0: case KERN_Q5_1: case KERN_Q2_K: case KERN_Q3_K: case KERN_Q4_K:
    case KERN_Q5_K: case KERN_Q6_K:
        ops->kq_to_f32(t, src, dst, n);
        return;
    case KERN_Q8_K: break; /* activations only: never a weight */
    }
    memset(dst, 0, (size_t)n * 4); /* unsupported type: defined output, never garbage */
}

void kern_quantize_q8_0(const float *src, kern_block_q8_0 *dst, int64_t n) {
    kern_ops_get()->quantize_q8_0(src, dst, n);
}

void kern_quantize_q8_K(const float *src, kern_block_q8_K *dst, int64_t n) {
    kern_ops_get()->quantize_q8_K(src, dst, n);
}

void kern_q8_0_block_sums(const kern_block_q8_0 *y, int64_t n, float *ys) {
    for (int64_t b = 0; b < n / KERN_QK; b++) {
        int32_t s = 0;
        for (int j = 0; j < KERN_QK; j++) s += y[b].qs[j];
        ys[b] = (float)s * kern_fp16_to_fp32(y[b].d);
    }
}
