/* Non-CUDA builds: no device, every op runs on the CPU. */
#ifndef MMRAG_CUDA
#include "kernels/kern_internal.h"

int kern_cuda_available(void) { return 0; }
const char *kern_cuda_device_name(void) { return "none"; }
int kern_cuda_try_linear(const float *X, int64_t n, int64_t in, const void *W, kern_type wtype,
                         const float *bias, int64_t out, float *Y) {
    return -1;
}
int kern_cuda_try_gemm(int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc) {
    return -1;
}
int kern_cuda_try_attention(const float *Q, int q_stride, const float *K, const float *V,
                            int kv_stride, float *out, int out_stride, int n_q, int n_kv,
                            int n_heads, int n_kv_heads, int head_dim, int causal,
                            int64_t q_pos0) {
    return -1;
}
#else
typedef int kern_cuda_stub_unused; /* ISO C forbids an empty translation unit */
#endif
