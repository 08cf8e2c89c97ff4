/* kernels — the tensor math shared by vision and engine.
 *
 * CPU: a thread pool, fp32 GEMM through OpenBLAS, AVX2/FMA kernels chosen at run time
 * (scalar reference path when the CPU lacks AVX2, or when MMRAG_SIMD=scalar).
 * CUDA (built with `make CUDA=1`): the same operations on the GPU; every entry point
 * falls back to the CPU when no device is present (kern_cuda_available() == 0).
 * Model files (safetensors, GGUF) are read by kernels/modelfile.h, included below.
 *
 * Layout conventions: row-major; a weight matrix W is [out][in] (torch nn.Linear),
 * so Y[n][out] = X[n][in] · Wᵀ (+ bias). Quantized blocks follow ggml's layouts. */
#ifndef MMRAG_KERNELS_H
#define MMRAG_KERNELS_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- element types ---------------------------------------------------------- */
typedef enum {
    KERN_F32 = 0, KERN_F16 = 1, KERN_Q4_0 = 2, KERN_Q4_1 = 3, KERN_Q5_0 = 6, KERN_Q5_1 = 7,
    KERN_Q8_0 = 8, KERN_Q2_K = 10, KERN_Q3_K = 11, KERN_Q4_K = 12, KERN_Q5_K = 13,
    KERN_Q6_K = 14, KERN_Q8_K = 15, KERN_BF16 = 30,
} kern_type;           /* values equal ggml_type ids so GGUF tensors map directly */

#define KERN_QK 32     /* elements per quantized block (legacy types) */
typedef struct { uint16_t d; int8_t qs[KERN_QK]; } kern_block_q8_0;           /* 34 B */
typedef struct { uint16_t d; uint8_t qs[KERN_QK / 2]; } kern_block_q4_0;       /* 18 B */
typedef struct { uint16_t d, m; uint8_t qs[KERN_QK / 2]; } kern_block_q4_1;    /* 20 B */
/* q5: low nibbles as q4, bit 4 of element j in bit j of qh (little-endian u32) */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[KERN_QK / 2]; } kern_block_q5_0;  /* 22 B */
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[KERN_QK / 2]; } kern_block_q5_1; /* 24 B */

/* K-quants: super-blocks of 256 with 6- or 8-bit sub-block scales (ggml's layouts; the
 * element order is documented in kernels/kquant_ref.c). Q8_K is the activation type
 * their dot products take: fp32 scale, and the sums of each 16 quants (for the mins). */
#define KERN_QK_K 256
typedef struct { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; } kern_block_q2_K;          /* 84 B */
typedef struct { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; } kern_block_q3_K; /* 110 B */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; } kern_block_q4_K;         /* 144 B */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } kern_block_q5_K; /* 176 B */
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; } kern_block_q6_K; /* 210 B */
typedef struct { float d; int8_t qs[KERN_QK_K]; int16_t bsums[KERN_QK_K / 16]; } kern_block_q8_K; /* 292 B */

/* Bytes for n elements of type t (n a multiple of the block size), 0 if unsupported. */
size_t kern_type_row_bytes(kern_type t, int64_t n);
/* Elements per block of t (1 for f32/f16/bf16), 0 if t is not a supported type. */
int64_t kern_type_block_elems(kern_type t);
/* "f32, f16, bf16, q8_0, ...": every weight type the kernels read (static text). */
const char *kern_type_supported_list(void);
const char *kern_type_name(kern_type t);
float kern_fp16_to_fp32(uint16_t h);
uint16_t kern_fp32_to_fp16(float f);
float kern_bf16_to_fp32(uint16_t h);
/* Dequantize / convert n elements of type t at src into fp32 dst. */
void kern_to_f32(kern_type t, const void *src, float *dst, int64_t n);
/* Quantize n fp32 values (n % 32 == 0) into q8_0 blocks. */
void kern_quantize_q8_0(const float *src, kern_block_q8_0 *dst, int64_t n);
/* Quantize n fp32 values (n % 256 == 0) into q8_K blocks: d = max|x|/127, q = round(x/d). */
void kern_quantize_q8_K(const float *src, kern_block_q8_K *dst, int64_t n);

/* ---- thread pool ------------------------------------------------------------ */
typedef struct kern_pool kern_pool;
/* n_threads <= 0: $MMRAG_THREADS if set, else the number of online CPUs. Also sets
 * OpenBLAS's (process-wide) thread count to 1: fp32 products are split over the pool
 * (kern_gemm_f32), so a 1-thread pool's sgemm calls use one core. */
kern_pool *kern_pool_create(int n_threads);
void kern_pool_free(kern_pool *p);
int kern_pool_size(const kern_pool *p);
/* Run fn over [0, n) split into ranges of at least `grain` (the last may be shorter);
 * blocks until all are done. `thread` is in [0, kern_pool_size(p)) and unique among the
 * ranges of one call running at the same time (index per-call scratch with it).
 * p may be NULL (runs inline). Any thread may call: a call made while the pool is busy
 * (from another thread, or nested inside fn) runs inline on the calling thread. */
typedef void (*kern_range_fn)(void *ctx, int64_t begin, int64_t end, int thread);
void kern_pool_run(kern_pool *p, int64_t n, int64_t grain, kern_range_fn fn, void *ctx);

/* fork() for code that links these kernels: waits until no kernel BLAS call is running and
 * holds new ones off while it forks (OpenBLAS's atfork handler stops its thread pool under
 * a running sgemm, and deadlocks when two threads fork at once). Returns as fork(). */
pid_t kern_fork(void);

/* ---- dense math ------------------------------------------------------------- */
/* C[M][N] = alpha · A[M][K] · op(B) + beta · C; op(B) = Bᵀ when trans_b (B is [N][K]).
 * Uses the pool over rows of C (or its columns when it has few rows); p may be NULL. */
void kern_gemm_f32(kern_pool *p, int trans_b, int M, int N, int K, float alpha, const float *A,
                   int lda, const float *B, int ldb, float beta, float *C, int ldc);
/* Y[n][out] = X[n][in] · Wᵀ + bias (bias may be NULL); W of any kern_type, rows of `in`.
 * Quantized W, few rows (decoding; n < 16 for q4, < 32 for q8_0): X is quantized to q8_0
 * per row and dotted block by block (no full dequantization). More rows (prefill,
 * encoders): tiles of W are dequantized to fp32 and multiplied by sgemm, X stays fp32.
 * Uses the pool across output rows / tiles. */
void kern_linear(kern_pool *p, const float *X, int64_t n, int64_t in, const void *W,
                 kern_type wtype, const float *bias, int64_t out, float *Y);

/* int8 linear with dynamic activation quantization (encoders: many rows, weights reused).
 * kern_i8_weight_create quantizes W[out][in] (fp32) per output row, symmetric: s = max|w|/127,
 * q = round(w/s), and packs it for the GEMM kernel (returns NULL when out of memory).
 * kern_linear_i8: Y[n][out] = X·Wᵀ + bias where each X row is quantized on the fly to u8
 * with its own scale and zero point (8 bits: see kern_internal.h), products summed in
 * int32 (exact), then scaled back to fp32. AVX2 and scalar paths give identical results.
 * dither (NULL: none): per X row, u in [-0.5, 0.5] added before rounding and taken back
 * out after the product (subtractive dither). Rows that quantize alike (an encoder's
 * repeated tokens) then round differently, so their errors do not add up in a mean.
 * Uses the pool over row blocks and weight panels. Returns 0, or -1 when out of memory. */
typedef struct kern_i8_weight kern_i8_weight;
kern_i8_weight *kern_i8_weight_create(const float *W, int64_t out, int64_t in);
/* the same with per-input-channel smoothing (SmoothQuant): column j of W is multiplied by
 * smooth[j] (> 0) before quantization, and kern_linear_i8 divides X's column j by it, so
 * the result is X·Wᵀ still; a good smooth[j] is sqrt(max|X_j| / max|W_j|) from
 * calibration data. smooth NULL: none. */
kern_i8_weight *kern_i8_weight_create_smooth(const float *W, int64_t out, int64_t in,
                                             const float *smooth);
/* W's quantization error left by q (made from W with the same smooth), quantized again:
 * kern_linear_i8_res adds its product, the same activation bytes, so the weights act at
 * ~15 bits (for inputs whose rows repeat). NULL when out of memory. */
kern_i8_weight *kern_i8_weight_create_residual(const kern_i8_weight *q, const float *W,
                                               const float *smooth);
void kern_i8_weight_free(kern_i8_weight *w); /* NULL is a no-op */
int64_t kern_i8_weight_out(const kern_i8_weight *w);
int64_t kern_i8_weight_in(const kern_i8_weight *w);
/* the dequantized weights, row o (tests measure the weight error) */
void kern_i8_weight_row_f32(const kern_i8_weight *w, int64_t o, float *dst);
int kern_linear_i8(kern_pool *p, const float *X, int64_t n, const kern_i8_weight *W,
                   const float *bias, const float *dither, float *Y);
/* Scratch for kern_linear_i8_res (the quantized activation rows), grown as needed and kept:
 * a caller that runs many products reuses it instead of mapping fresh pages per call. One
 * call at a time per work (callers lock). */
typedef struct kern_i8_work kern_i8_work;
kern_i8_work *kern_i8_work_create(void);
void kern_i8_work_free(kern_i8_work *w); /* NULL is a no-op */
/* an activation applied to the outputs where they are made (in cache), not in a pass of
 * its own: the same values as kern_gelu over Y afterwards */
typedef enum { KERN_ACT_NONE = 0, KERN_ACT_GELU = 1 } kern_act;
/* kern_linear_i8 plus the product with W's residual Wr (kern_i8_weight_create_residual;
 * NULL: none), then act, in work's memory (NULL: allocated per call); -1 when Wr's shape
 * is not W's or out of memory */
int kern_linear_i8_res(kern_pool *p, const float *X, int64_t n, const kern_i8_weight *W,
                       const kern_i8_weight *Wr, const float *bias, kern_act act,
                       const float *dither, kern_i8_work *work, float *Y);

/* Dot products of one row of n elements (n % 32 == 0) against a q8_0 row. */
float kern_dot_q8_0_q8_0(int64_t n, const kern_block_q8_0 *x, const kern_block_q8_0 *y);
float kern_dot_q4_0_q8_0(int64_t n, const kern_block_q4_0 *x, const kern_block_q8_0 *y);
float kern_dot_q4_1_q8_0(int64_t n, const kern_block_q4_1 *x, const kern_block_q8_0 *y);
float kern_dot_f32(int64_t n, const float *x, const float *y);
/* One weight row of type t (Q2_K..Q6_K) against a q8_K row (n % 256 == 0), or of type
 * Q5_0/Q5_1 against a q8_0 row (n % 32 == 0). */
float kern_dot_kq(kern_type t, int64_t n, const void *w, const kern_block_q8_K *y);
float kern_dot_q5_q8_0(kern_type t, int64_t n, const void *w, const kern_block_q8_0 *y);

void kern_softmax(float *x, int64_t n);                       /* in place, max-subtracted */
void kern_layernorm(const float *x, float *y, int64_t n, const float *gamma,
                    const float *beta, float eps);             /* y may alias x */
void kern_rmsnorm(const float *x, float *y, int64_t n, const float *w, float eps);
void kern_gelu(float *x, int64_t n);        /* exact, erf-based (BERT, HF CLIP "gelu") */
void kern_quick_gelu(float *x, int64_t n);  /* x·σ(1.702x) (OpenAI CLIP) */
void kern_silu(float *x, int64_t n);
/* GELU, tanh approximation (Gemma's FFN): 0.5x(1 + tanh(√(2/π)(x + 0.044715x³))) */
void kern_geglu(const float *gate, const float *up, float *y, int64_t n); /* gelu_tanh(g)·u */
void kern_swiglu(const float *gate, const float *up, float *y, int64_t n); /* silu(g)·u */
void kern_add(float *y, const float *x, int64_t n);                       /* y += x */

/* Rotary embedding on one token's heads, in place. x is [n_heads][head_dim].
 * neox=0: interleaved pairs (x[2i], x[2i+1]) (GGUF/Meta layout);
 * neox=1: rotate-half pairs (x[i], x[i+d/2]) (Hugging Face layout).
 * Angle for pair i: pos · freq_scale · theta^(-2i/rot_dim). */
void kern_rope(float *x, int n_heads, int head_dim, int rot_dim, int64_t pos,
               float theta, float freq_scale, int neox);
/* kern_rope in two steps, for callers that rotate many vectors at one position (every
 * layer's q and k): kern_rope_angles fills cs/sn[0..rot_dim/2) (rot_dim <= head_dim,
 * computed exactly as kern_rope does), kern_rope_apply rotates with them; together they
 * give kern_rope's result bit for bit. */
void kern_rope_angles(int rot_dim, int64_t pos, float theta, float freq_scale, float *cs,
                      float *sn);
/* the same with per-pair frequency divisors (Llama 3.1's rope_freqs; NULL = none): the
 * angle of pair i is divided by factors[i] */
void kern_rope_angles_ff(int rot_dim, int64_t pos, float theta, float freq_scale,
                         const float *factors, float *cs, float *sn);
void kern_rope_apply(float *x, int n_heads, int head_dim, int rot_dim, const float *cs,
                     const float *sn, int neox);

/* Multi-head attention, fp32. Q is [n_q][q_stride] with head h at offset h*head_dim,
 * K and V are [n_kv][kv_stride] with kv head g at offset g*head_dim; grouped-query:
 * query head h reads kv head h / (n_heads / n_kv_heads). causal=1: query i (absolute
 * position q_pos0 + i) sees keys 0..q_pos0+i. Output [n_q][out_stride]. Scale 1/sqrt(d). */
void kern_attention(kern_pool *p, const float *Q, int q_stride, const float *K,
                    const float *V, int kv_stride, float *out, int out_stride, int n_q,
                    int n_kv, int n_heads, int n_kv_heads, int head_dim, int causal,
                    int64_t q_pos0);

/* The same with the products QK and PV in bfloat16 (8-bit mantissa, fp32 sums) where the
 * CPU has AVX512_BF16 and head_dim is a multiple of 32: about twice the fp32 rate; else
 * exactly kern_attention. For encoders whose token states are pooled (the text encoder
 * at int8), not for decoding. */
void kern_attention_bf16(kern_pool *p, const float *Q, int q_stride, const float *K,
                         const float *V, int kv_stride, float *out, int out_stride, int n_q,
                         int n_kv, int n_heads, int n_kv_heads, int head_dim, int causal,
                         int64_t q_pos0);

/* Blocked attention with an online softmax (flash-attention style), for callers that
 * keep their own KV layout (the engine's block cache). Per query row r the running state
 * is m[r] (max score so far, start -INFINITY), l[r] (softmax normalizer, start 0) and
 * acc[r][0..d) (unnormalized Σ p·V, start 0); after the last block the output row is
 * acc[r] / l[r] (0 where l[r] == 0: nothing visible).
 * kern_attn_scores: S[r][t] = scale · Q[r]·K[t] for R rows of Q and kn rows of K.
 * kern_attn_update: folds one block in: entries of S equal to -INFINITY are masked keys;
 * S is overwritten with the block's exp(S - m_new); acc and l are rescaled by
 * exp(m_old - m_new) and V's rows added with those weights. Both read K/V rows with
 * stride kv_stride (floats), so a head's slice of an interleaved cache is read in place.
 * kern_attn_merge: combines n_part partial states of the same R rows computed over
 * disjoint key sets (part k at m + k·R, l + k·R, acc + k·R·acc_stride) and writes the
 * normalized rows to out[r·out_stride]. */
void kern_attn_scores(const float *Q, int q_stride, int R, const float *K, int kv_stride, int kn,
                      int d, float scale, float *S, int s_stride);
void kern_attn_update(float *S, int s_stride, int R, int kn, const float *V, int kv_stride, int d,
                      float *m, float *l, float *acc, int acc_stride);
void kern_attn_merge(int n_part, int R, int d, const float *m, const float *l, const float *acc,
                     int acc_stride, float *out, int out_stride);

/* ---- dispatch and CUDA ------------------------------------------------------ */
/* "avx2" or "scalar": the CPU path in use (MMRAG_SIMD=scalar forces the reference). */
const char *kern_cpu_path(void);
/* The kernels OpenBLAS chose when it loaded ("Haswell", "SkylakeX", "Prescott"...). */
const char *kern_blas_core(void);
/* OpenBLAS picks its kernels from the CPU's model number when it loads, and falls back to its
 * SSE3 ones ("Prescott") on a model it does not know (0.3.21 on a 2024 Xeon: sgemm ~2.4x
 * slower). Only $OPENBLAS_CORETYPE, set before it loads, changes that. Returns the kernels
 * to set it to when OpenBLAS fell back although the CPU has AVX2 and FMA (AVX-512 F, BW,
 * DQ and VL: "SkylakeX"; else "Haswell"), NULL otherwise. kern_blas_core_pick is the
 * decision alone, for tests. */
const char *kern_blas_core_better(void);
const char *kern_blas_core_pick(const char *chosen, int avx2_fma, int avx512);
/* 1 when built with CUDA=1, a device answers and $MMRAG_CUDA is not "0"; 0 otherwise
 * (then all ops use the CPU). With a device, kern_linear, kern_gemm_f32 and prefill-sized
 * kern_attention run on it above a size threshold (weights given to kern_linear are
 * cached on the device); elementwise ops stay on the CPU, where host-resident data is. */
int kern_cuda_available(void);
/* Human-readable name of the device, or "none". */
const char *kern_cuda_device_name(void);

#include "kernels/modelfile.h"
#endif
