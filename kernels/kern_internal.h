/* Private to kernels/: the per-path (scalar / AVX2) operation table and helpers. */
#ifndef MMRAG_KERN_INTERNAL_H
#define MMRAG_KERN_INTERNAL_H
#include <math.h>

#include "kernels/kernels.h"

/* One CPU implementation of every elementwise / dot operation. The scalar table is the
 * reference; the AVX2 table is chosen at run time when the CPU supports it. */
typedef struct {
    const char *name;
    float (*dot_q8_0_q8_0)(int64_t n, const kern_block_q8_0 *x, const kern_block_q8_0 *y);
    float (*dot_q4_0_q8_0)(int64_t n, const kern_block_q4_0 *x, const kern_block_q8_0 *y);
    float (*dot_q4_1_q8_0)(int64_t n, const kern_block_q4_1 *x, const kern_block_q8_0 *y);
    /* q4_1 with the q8_0 side's block sums precomputed: ys[b] = d_y·Σ y.qs (the m term
     * needs them; a matvec computes them once per X row instead of once per weight row) */
    float (*dot_q4_1_q8_0s)(int64_t n, const kern_block_q4_1 *x, const kern_block_q8_0 *y,
                            const float *ys);
    /* one quantized weight row (type t: Q8_0, Q4_0 or Q4_1) against 4 q8_0 rows y[k] =
     * y + k·ystride blocks (ys likewise, Q4_1 only): the weight block is unpacked once
     * for all four (few-row kern_linear) */
    void (*qdot4)(kern_type t, int64_t n, const void *x, const kern_block_q8_0 *y,
                  int64_t ystride, const float *ys, float out[4]);
    /* optional (NULL: kern_linear dots row by row): nr (1..4) consecutive weight rows of
     * type t (Q8_0, Q4_0, Q4_1, Q5_0 or Q5_1; row stride wrow bytes) against one q8_0 row y, with
     * yds[2b] = d_y and yds[2b+1] = d_y·Σ y.qs per block; the weight bytes that follow
     * the rows (pf_bytes of them) are prefetched: decoding streams W from DRAM */
    void (*qdot_rows)(kern_type t, int64_t n, const void *w, size_t wrow, int nr,
                      const kern_block_q8_0 *y, const float *yds, int64_t pf_bytes, float *out);
    float (*dot_f32)(int64_t n, const float *x, const float *y);
    /* fp16 / bf16 weight row · fp32 row, converted on the fly */
    float (*dot_f16_f32)(int64_t n, const uint16_t *w, const float *x);
    float (*dot_bf16_f32)(int64_t n, const uint16_t *w, const float *x);
    void (*quantize_q8_0)(const float *src, kern_block_q8_0 *dst, int64_t n);
    void (*fp16_to_f32)(const uint16_t *src, float *dst, int64_t n);
    /* n elements (n % 32 == 0) of quantized blocks to fp32 */
    void (*q8_0_to_f32)(const kern_block_q8_0 *src, float *dst, int64_t n);
    void (*q4_0_to_f32)(const kern_block_q4_0 *src, float *dst, int64_t n);
    void (*q4_1_to_f32)(const kern_block_q4_1 *src, float *dst, int64_t n);
    /* the types added for real-world GGUFs (kernels/kquant_*.c): Q5_0/Q5_1 against q8_0,
     * Q2_K..Q6_K against q8_K; dequantization of all of them (n a multiple of the block) */
    void (*quantize_q8_K)(const float *src, kern_block_q8_K *dst, int64_t n);
    float (*dot_q5_q8_0)(kern_type t, int64_t n, const void *w, const kern_block_q8_0 *y);
    float (*dot_kq)(kern_type t, int64_t n, const void *w, const kern_block_q8_K *y);
    void (*kq_to_f32)(kern_type t, const void *src, float *dst, int64_t n);
    void (*softmax)(float *x, int64_t n);
    void (*layernorm)(const float *x, float *y, int64_t n, const float *g, const float *b,
                      float eps);
    void (*rmsnorm)(const float *x, float *y, int64_t n, const float *w, float eps);
    void (*gelu)(float *x, int64_t n);
    void (*quick_gelu)(float *x, int64_t n);
    void (*silu)(float *x, int64_t n);
    void (*swiglu)(const float *g, const float *u, float *y, int64_t n);
    /* y = gelu_tanh(g)·u (Gemma's FFN) */
    void (*geglu)(const float *g, const float *u, float *y, int64_t n);
    void (*add)(float *y, const float *x, int64_t n);
    /* y += a * x (attention's weighted V sum) */
    void (*axpy)(float *y, float a, const float *x, int64_t n);
    void (*scale)(float *y, float a, int64_t n);
    /* attention helpers: out[j] = scale · q·K[j] for n rows of K (row stride `stride`),
     * and out[0..d) = Σ_j p[j]·V[j] (overwrites out) */
    void (*dot_rows)(const float *q, const float *K, int64_t stride, int64_t n, int64_t d,
                     float scale, float *out);
    void (*wsum_rows)(const float *p, const float *V, int64_t stride, int64_t n, int64_t d,
                      float *out);
    /* tiled attention (many queries, kernels/attention.c): S[r][0..n) = scale · q_r·Kᵀ for
     * nr (1..4) query rows Q + r·q_stride against K packed transposed, KT[k·ldk + j]
     * (n % 8 == 0); and O[r][0..d) = Σ_j P[r][j]·Vp[j·d ..] for nr (1..2) rows of P
     * against V packed row by row (d % 8 == 0) */
    void (*qk_tile)(const float *Q, int64_t q_stride, int nr, const float *KT, int64_t ldk,
                    int64_t n, int64_t d, float scale, float *S, int64_t s_stride);
    void (*pv_tile)(const float *P, int64_t p_stride, int nr, const float *Vp, int64_t n,
                    int64_t d, float *O, int64_t o_stride);
    /* online softmax over one block: m_new = max(*m, max x); x[i] = exp(x[i] - m_new)
     * (-inf entries give 0); *m = m_new; returns Σ x. All -inf (and *m == -inf): x is
     * zeroed, *m stays, returns 0. */
    float (*softmax_step)(float *x, int64_t n, float *m);
    /* out[0..d) = corr · out + Σ_j p[j]·V[j] (corr == 0: out is overwritten, never read) */
    void (*wsum_acc)(const float *p, const float *V, int64_t stride, int64_t n, int64_t d,
                     float corr, float *out);
    /* int8 linear (kernels/int8_*.c, driven by kernels/linear_i8.c): one X row of n floats,
     * times m elementwise (the smoothing; NULL: 1), to u8 with a zero point (asymmetric,
     * 0..KERN_I8_AMAX), zero-filled to kp bytes; q = round(x·m/scale + u) + zp, u in
     * [-0.5, 0.5] the row's dither (i8_dequant takes it back out) */
    void (*i8_quantize_row)(const float *x, const float *m, int64_t n, int64_t kp, float u,
                            uint8_t *q, float *scale, int32_t *zp);
    /* C[4][16] = A[4][kp] (u8, row stride lda) · one packed 16-channel weight panel (s8),
     * int32 sums: exact, so every path gives the same integers */
    void (*i8_tile)(int64_t kp, const uint8_t *A, int64_t lda, const int8_t *B, int32_t *C);
    /* optional (NULL: i8_tile twice): the same for 8 rows, C[8][16] */
    void (*i8_tile8)(int64_t kp, const uint8_t *A, int64_t lda, const int8_t *B, int32_t *C);
    /* Y[r][o] = fma(fma(-(zx[r] + ux[r]), wsum[o], C[r][o]), sx[r]·sw[o], bias[o]) in fp32
     * for r < mr, o < nc (ux, the rows' dithers, and bias may be NULL: 0); the same fp32
     * operations in every path (bit exact). C as float rounds above 2^24: ~1e-7 of the
     * zero point's term, far below the activations' rounding */
    void (*i8_dequant)(const int32_t *C, int mr, int nc, const float *sx, const int32_t *zx,
                       const float *ux, const float *sw, const int32_t *wsum, const float *bias,
                       float *Y, int64_t ldy);
} kern_ops;

extern const kern_ops kern_ops_scalar;
/* NULL when the compiler cannot build the AVX2 path (or the CPU lacks it). On CPUs with
 * AVX512-VNNI (+VL) or AVX-VNNI the table's int8 tile uses vpdpbusd ("avx2+vnni"), unless
 * $MMRAG_SIMD is "avx2"; the plain table is the AVX2 one regardless (tests compare both). */
const kern_ops *kern_ops_avx2_table(void);
const kern_ops *kern_ops_avx2_plain_table(void);
/* The table in use (decided once: CPU features and $MMRAG_SIMD). */
const kern_ops *kern_ops_get(void);

/* ys[b] = d·Σ qs for each of the n/32 q8_0 blocks (for dot_q4_1_q8_0s) */
void kern_q8_0_block_sums(const kern_block_q8_0 *y, int64_t n, float *ys);

/* 1 for the types of kernels/kquant_*.c (Q5_0, Q5_1, Q2_K..Q6_K) */
static inline int kern_type_is_kq(kern_type t) {
    return t == KERN_Q5_0 || t == KERN_Q5_1 || (t >= KERN_Q2_K && t <= KERN_Q6_K);
}
/* the scalar tables of kernels/kquant_ref.c (the AVX2 table falls back to them) */
void kern_kq_quantize_q8_K_ref(const float *src, kern_block_q8_K *dst, int64_t n);
float kern_kq_dot_q5_ref(kern_type t, int64_t n, const void *w, const kern_block_q8_0 *y);
float kern_kq_dot_ref(kern_type t, int64_t n, const void *w, const kern_block_q8_K *y);
void kern_kq_to_f32_ref(kern_type t, const void *src, float *dst, int64_t n);
/* kernels/kquant_avx2.c (x86-64 only; called through the AVX2 table alone) */
void kern_kq_quantize_q8_K_avx2(const float *src, kern_block_q8_K *dst, int64_t n);
float kern_kq_dot_q5_avx2(kern_type t, int64_t n, const void *w, const kern_block_q8_0 *y);
float kern_kq_dot_avx2(kern_type t, int64_t n, const void *w, const kern_block_q8_K *y);
void kern_kq_to_f32_avx2(kern_type t, const void *src, float *dst, int64_t n);

/* int8 linear: activations u8 in [0, KERN_I8_AMAX], weights s8 in [-KERN_I8_WMAX,
 * KERN_I8_WMAX], both with their full 8 bits. vpdpbusd (VNNI) sums u8·s8 products into
 * int32 exactly; plain AVX2's vpmaddubsw would saturate its int16 pairs (2·255·127 >
 * 32767), so that path splits each activation byte into nibbles (kernels/int8_avx2.c).
 * Every path gives the exact integer sums of the reference. (7-bit activations, which
 * vpmaddubsw alone allows, cost the text encoder's FFN output projection the most accuracy;
 * see vision/textenc.c.) */
#define KERN_I8_AMAX 255
#define KERN_I8_WMAX 127
#define KERN_I8_NR 16 /* output channels per packed weight panel */
#define KERN_I8_MR 4  /* X rows per tile */
/* Scale and zero point of an activation row with range [lo, hi] (lo <= 0 <= hi) onto
 * 0..AMAX, so 0.0 is exact (padding stays zero). Shared by both paths: same numbers. */
static inline void kern_i8_row_params(float lo, float hi, float *scale, float *inv, int32_t *zp) {
    float s = (hi - lo) / (float)KERN_I8_AMAX;
    if (!(s > 0.0f)) s = 1.0f; /* all zeros */
    *scale = s;
    *inv = 1.0f / s;
    float z = nearbyintf(-lo * *inv);
    *zp = z < 0 ? 0 : z > KERN_I8_AMAX ? KERN_I8_AMAX : (int32_t)z;
}
void kern_i8_quantize_row_ref(const float *x, const float *m, int64_t n, int64_t kp, float u, uint8_t *q,
                              float *scale, int32_t *zp);
void kern_i8_tile_ref(int64_t kp, const uint8_t *A, int64_t lda, const int8_t *B, int32_t *C);
void kern_i8_dequant_ref(const int32_t *C, int mr, int nc, const float *sx, const int32_t *zx,
                         const float *ux, const float *sw, const int32_t *wsum, const float *bias,
                         float *Y, int64_t ldy);
void kern_i8_quantize_row_avx2(const float *x, const float *m, int64_t n, int64_t kp, float u, uint8_t *q,
                               float *scale, int32_t *zp);
void kern_i8_tile_avx2(int64_t kp, const uint8_t *A, int64_t lda, const int8_t *B, int32_t *C);
/* the same tile with vpdpbusd, EVEX (AVX512-VNNI + VL) or VEX (AVX-VNNI) encoded: the
 * sums are exact either way, so the same integers; kern_i8_vnni_kind says which the CPU
 * runs (1 EVEX, 2 VEX, 0 neither) */
void kern_i8_tile_vnni(int64_t kp, const uint8_t *A, int64_t lda, const int8_t *B, int32_t *C);
void kern_i8_tile_avxvnni(int64_t kp, const uint8_t *A, int64_t lda, const int8_t *B, int32_t *C);
void kern_i8_tile8_vnni(int64_t kp, const uint8_t *A, int64_t lda, const int8_t *B, int32_t *C);
int kern_i8_vnni_kind(void);
void kern_i8_dequant_avx2(const int32_t *C, int mr, int nc, const float *sx, const int32_t *zx,
                          const float *ux, const float *sw, const int32_t *wsum, const float *bias,
                          float *Y, int64_t ldy);
/* kern_linear_i8 with an explicit table (tests compare paths) */
int kern_linear_i8_ops(const kern_ops *ops, kern_pool *p, const float *X, int64_t n,
                       const kern_i8_weight *W, const kern_i8_weight *Wr, const float *bias,
                       kern_act act, const float *dither, kern_i8_work *work, float *Y);

/* kern_linear with 16-bit or quantized weights and at least this many X rows converts
 * tiles of W to fp32 and uses sgemm (X stays fp32); below it, rows are dotted directly
 * (quantized W: X is quantized to q8_0 for int8 dots). Crossovers measured with
 * bench_gemm-like runs on 2 AVX2 cores: q8_0 int8 dots ~80 GF/s flat, dequant+sgemm
 * 32/67/90/143 GF/s at n = 8/16/32/64; q4 int8 dots are ~30% slower than q8_0. */
static inline int64_t kern_linear_dequant_rows(kern_type t) {
    return t == KERN_Q8_0 ? 32 : t == KERN_Q4_0 || t == KERN_Q4_1 ? 16 : kern_type_is_kq(t) ? 16 : 8;
}

/* Attention and linear with an explicit table (tests and benches compare paths). */
void kern_attention_ops(const kern_ops *ops, kern_pool *p, const float *Q, int q_stride,
                        const float *K, const float *V, int kv_stride, float *out,
                        int out_stride, int n_q, int n_kv, int n_heads, int n_kv_heads,
                        int head_dim, int causal, int64_t q_pos0);
/* the per-(query, head) schedule behind kern_attention_ops */
void kern_attention_rows_ops(const kern_ops *ops, kern_pool *p, const float *Q, int q_stride,
                             const float *K, const float *V, int kv_stride, float *out,
                             int out_stride, int n_q, int n_kv, int n_heads, int n_kv_heads,
                             int head_dim, int causal, int64_t q_pos0);
/* bf16 attention products (kernels/attention_bf16.c; layouts there). Only where
 * kern_bf16_available(): CPUs with AVX512_BF16 under the EVEX VNNI table (elsewhere these
 * are empty stubs). */
int kern_bf16_available(void);
void kern_bf16_pack_kv(const float *K, const float *V, int64_t stride, int64_t n, int64_t d,
                       int64_t npad, uint32_t *KT2, uint32_t *V2);
void kern_bf16_pack_q(const float *Q, int64_t stride, int nr, int64_t d, uint32_t *q2);
void kern_bf16_qk_tile(const uint32_t *q2, int nr, const uint32_t *KT2, int64_t npad,
                       int64_t nk, int64_t d, float scale, float *S, int64_t s_stride);
float kern_bf16_softmax_row(const float *x, int64_t lim, int64_t nk, uint16_t *P);
void kern_bf16_pv_tile(const uint16_t *P, int64_t p_stride, int nr, const uint32_t *V2,
                       int64_t nk, int64_t d, const float *inv, float *O, int64_t o_stride);
/* kern_attn_scores / kern_attn_update with an explicit table */
void kern_attn_scores_ops(const kern_ops *ops, const float *Q, int q_stride, int R, const float *K,
                          int kv_stride, int kn, int d, float scale, float *S, int s_stride);
void kern_attn_update_ops(const kern_ops *ops, float *S, int s_stride, int R, int kn,
                          const float *V, int kv_stride, int d, float *m, float *l, float *acc,
                          int acc_stride);
void kern_linear_ops(const kern_ops *ops, kern_pool *p, const float *X, int64_t n, int64_t in,
                     const void *W, kern_type wtype, const float *bias, int64_t out, float *Y);

/* CUDA routing (kernels/cuda_dispatch.c; kernels/cuda_stub.c without CUDA): each returns
 * 0 when the GPU did the work, nonzero when the caller must use the CPU (no device, too
 * small to pay for the copies, or any CUDA error). Call only when kern_cuda_available(). */
int kern_cuda_try_linear(const float *X, int64_t n, int64_t in, const void *W,
                         kern_type wtype, const float *bias, int64_t out, float *Y);
int kern_cuda_try_gemm(int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc);
int kern_cuda_try_attention(const float *Q, int q_stride, const float *K, const float *V,
                            int kv_stride, float *out, int out_stride, int n_q, int n_kv,
                            int n_heads, int n_kv_heads, int head_dim, int causal,
                            int64_t q_pos0);
#endif
