/* Private C interface to the CUDA kernels (kernels/cuda_ops.cu), CUDA=1 builds only.
 * Every function takes HOST pointers, copies what it needs, runs on the one device, and
 * returns 0 on success or nonzero on any CUDA/cuBLAS error (the caller then uses the
 * CPU). Calls are serialized by a mutex inside, so any thread may call. */
#ifndef MMRAG_CUDA_INTERNAL_H
#define MMRAG_CUDA_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

enum { KCU_GELU = 0, KCU_QUICK_GELU = 1, KCU_SILU = 2 };

int kcu_device_count(void);                 /* 0 when no driver/device */
void kcu_device_name(char *buf, size_t len);
/* row-major C[M][N] = alpha·A·op(B) + beta·C, same contract as kern_gemm_f32 */
int kcu_gemm_f32(int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc);
/* Y[n][out] = X·Wᵀ + bias; wtype a kern_type value; W is cached on the device by
 * (address, size, sampled content), so repeated calls with model weights copy once. */
int kcu_linear(const float *X, int64_t n, int64_t in, const void *W, int wtype, size_t wbytes,
               const float *bias, int64_t out, float *Y);
int kcu_to_f32(int wtype, const void *src, size_t src_bytes, float *dst, int64_t n);
int kcu_softmax_rows(float *x, int64_t rows, int64_t n);
int kcu_layernorm_rows(const float *x, float *y, int64_t rows, int64_t n, const float *g,
                       const float *b, float eps);
int kcu_rmsnorm_rows(const float *x, float *y, int64_t rows, int64_t n, const float *w,
                     float eps);
int kcu_unary(int op, float *x, int64_t n);
int kcu_swiglu(const float *g, const float *u, float *y, int64_t n);
int kcu_add(float *y, const float *x, int64_t n);
/* n_tokens consecutive tokens of [n_heads][head_dim], token t at position pos0 + t */
int kcu_rope(float *x, int n_tokens, int n_heads, int head_dim, int rot_dim, int64_t pos0,
             float theta, float freq_scale, int neox);
int kcu_attention(const float *Q, int q_stride, const float *K, const float *V, int kv_stride,
                  float *out, int out_stride, int n_q, int n_kv, int n_heads, int n_kv_heads,
                  int head_dim, int causal, int64_t q_pos0);
/* drop every cached weight (tests; or before freeing many models) */
void kcu_cache_clear(void);

#ifdef __cplusplus
}
#endif
#endif
