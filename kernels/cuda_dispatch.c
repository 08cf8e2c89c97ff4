/* CUDA=1 builds: decide once whether a device answers (and MMRAG_CUDA is not "0"), and
 * route the big dense ops to it. Elementwise ops stay on the CPU: with host-resident
 * tensors their cost is the PCIe copy, which AVX2 beats. Any CUDA error falls back. */
#ifdef MMRAG_CUDA
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda_internal.h"
#include "kernels/kern_internal.h"

static int g_avail;                 /* written once under pthread_once, then read-only */
static char g_name[160] = "none";
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void cuda_init(void) {
    const char *e = getenv("MMRAG_CUDA");
    if (e && strcmp(e, "0") == 0) return;
    if (kcu_device_count() > 0) {
        g_avail = 1;
        kcu_device_name(g_name, sizeof g_name);
    }
}

int kern_cuda_available(void) {
    pthread_once(&g_once, cuda_init);
    return g_avail;
}

const char *kern_cuda_device_name(void) {
    pthread_once(&g_once, cuda_init);
    return g_name;
}

/* Worth the transfer: enough multiply-adds per byte moved. */
int kern_cuda_try_linear(const float *X, int64_t n, int64_t in, const void *W, kern_type wtype,
                         const float *bias, int64_t out, float *Y) {
    if ((double)n * (double)in * (double)out < 4e6) return -1;
    size_t wb = kern_type_row_bytes(wtype, in) * (size_t)out;
    if (wb == 0) return -1;
    return kcu_linear(X, n, in, W, (int)wtype, wb, bias, out, Y);
}

int kern_cuda_try_gemm(int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc) {
    if ((double)M * N * K < 3.2e7) return -1;
    return kcu_gemm_f32(trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

int kern_cuda_try_attention(const float *Q, int q_stride, const float *K, const float *V,
                            int kv_stride, float *out, int out_stride, int n_q, int n_kv,
                            int n_heads, int n_kv_heads, int head_dim, int causal,
                            int64_t q_pos0) {
    /* decode (few queries) stays on the CPU: copying the whole KV cache per token loses */
    if (n_q < 16 || (double)n_q * n_kv * n_heads * head_dim < 1.6e7) return -1;
    return kcu_attention(Q, q_stride, K, V, kv_stride, out, out_stride, n_q, n_kv, n_heads,
                         n_kv_heads, head_dim, causal, q_pos0);
}
#else
typedef int kern_cuda_dispatch_unused; /* ISO C forbids an empty translation unit */
#endif
