/* Scalar reference of the int8 linear's three steps: quantize an activation row to u8,
 * one 4×16 integer tile, and its dequantization. kernels/int8_avx2.c must match these
 * bit for bit (integer sums are exact; the fp32 steps are the same operations in the
 * same order, without FMA).
 *
 * Packed weight panel (kernels/linear_i8.c builds it): 16 output channels; for each group
 * g of 4 inputs, 64 bytes: channels 0..7 then 8..15, each as its 4 consecutive weights
 * w[c][4g..4g+3]. So one 32-byte load holds 8 channels × 4 inputs, what vpmaddubsw +
 * vpmaddwd reduce against 4 broadcast activation bytes. */
#include <math.h>

#include "kernels/kern_internal.h"

void kern_i8_quantize_row_ref(const float *x, const float *m, int64_t n, int64_t kp, float u,
                              uint8_t *q, float *scale, int32_t *zp) {
    float lo = 0.0f, hi = 0.0f, inv;
    for (int64_t i = 0; i < n; i++) {
        float v = x[i] * (m ? m[i] : 1.0f); /* times 1 is exact: the same bits as x */
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    kern_i8_row_params(lo, hi, scale, &inv, zp);
    for (int64_t i = 0; i < n; i++) {
        int32_t v = (int32_t)nearbyintf(x[i] * (m ? m[i] : 1.0f) * inv + u) + *zp;
        q[i] = (uint8_t)(v < 0 ? 0 : v > KERN_I8_AMAX ? KERN_I8_AMAX : v);
    }
    for (int64_t i = n; i < kp; i++) q[i] = (uint8_t)*zp; /* the value 0.0 */
}

void kern_i8_tile_ref(int64_t kp, const uint8_t *A, int64_t lda, const int8_t *B, int32_t *C) {
    for (int r = 0; r < KERN_I8_MR; r++)
        for (int c = 0; c < KERN_I8_NR; c++) {
            int32_t acc = 0;
            const int8_t *b = B + (c / 8) * 32 + (c % 8) * 4;
            for (int64_t g = 0; g < kp / 4; g++)
                for (int j = 0; j < 4; j++)
                    acc += (int32_t)A[r * lda + 4 * g + j] * (int32_t)b[g * 64 + j];
            C[r * KERN_I8_NR + c] = acc;
        }
}

void kern_i8_dequant_ref(const int32_t *C, int mr, int nc, const float *sx, const int32_t *zx,
                         const float *ux, const float *sw, const int32_t *wsum, const float *bias,
                         float *Y, int64_t ldy) {
    for (int r = 0; r < mr; r++) {
        /* rounded to fp32 (at most 2^-17 off, ~1e-5 of the dither's range), the same bits in
         * every path */
        float zu = (float)zx[r] + (ux ? ux[r] : 0.0f);
        for (int c = 0; c < nc; c++) {
            float a = fmaf(-zu, (float)wsum[c], (float)C[r * KERN_I8_NR + c]);
            Y[r * ldy + c] = fmaf(a, sx[r] * sw[c], bias ? bias[c] : 0.0f);
        }
    }
}
