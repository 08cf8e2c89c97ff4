// CUDA versions of the kernels ops (built by `make CUDA=1`), behind kernels/cuda_internal.h.
// Host pointers in, host pointers out: each call stages its data through grow-only device
// scratch buffers; weights given to kcu_linear are cached on the device. One mutex
// serializes every call, so the state below is never touched by two threads at once.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cuda_internal.h"
#include "kernels/kernels.h"

namespace {

// ---- device helpers -----------------------------------------------------------------
__device__ __forceinline__ float h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return __uint_as_float(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return __uint_as_float(sign | ((exp + 112) << 23) | (man << 13));
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// block-wide reductions (blockDim a multiple of 32, <= 1024); every thread gets the result
__device__ float block_sum(float v) {
    __shared__ float s[32];
    __shared__ float total;
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) s[w] = v;
    __syncthreads();
    if (w == 0) {
        float t = lane < (int)(blockDim.x >> 5) ? s[lane] : 0.0f;
        t = warp_sum(t);
        if (lane == 0) total = t;
    }
    __syncthreads();
    return total;
}
__device__ float block_max(float v) {
    __shared__ float s[32];
    __shared__ float total;
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) s[w] = v;
    __syncthreads();
    if (w == 0) {
        float t = lane < (int)(blockDim.x >> 5) ? s[lane] : -INFINITY;
        t = warp_max(t);
        if (lane == 0) total = t;
    }
    __syncthreads();
    return total;
}

// element j (0..31) of a quantized block, ggml layouts
__device__ __forceinline__ float deq_q8_0(const kern_block_q8_0 *b, int j) { return (float)b->qs[j] * h2f(b->d); }
__device__ __forceinline__ float deq_q4_0(const kern_block_q4_0 *b, int j) {
    int q = j < 16 ? (b->qs[j] & 0xf) : (b->qs[j - 16] >> 4);
    return (float)(q - 8) * h2f(b->d);
}
__device__ __forceinline__ float deq_q4_1(const kern_block_q4_1 *b, int j) {
    int q = j < 16 ? (b->qs[j] & 0xf) : (b->qs[j - 16] >> 4);
    return (float)q * h2f(b->d) + h2f(b->m);
}

// ---- kernels ------------------------------------------------------------------------
// element i of a row-major [rows][n] matrix of type t (n a multiple of 32 for blocks)
__global__ void k_to_f32(int t, const uint8_t *src, float *dst, int64_t total) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    int64_t b = i / KERN_QK;
    int j = (int)(i % KERN_QK);
    float v;
    switch (t) {
    case KERN_F16: v = h2f(((const uint16_t *)src)[i]); break;
    case KERN_BF16: v = __uint_as_float((uint32_t)((const uint16_t *)src)[i] << 16); break;
    case KERN_Q8_0: v = deq_q8_0((const kern_block_q8_0 *)src + b, j); break;
    case KERN_Q4_0: v = deq_q4_0((const kern_block_q4_0 *)src + b, j); break;
    case KERN_Q4_1: v = deq_q4_1((const kern_block_q4_1 *)src + b, j); break;
    default: v = ((const float *)src)[i]; break;
    }
    dst[i] = v;
}

// quantized matvec: one warp per (output row, X row); lane l takes blocks l, l+32, ...
template <typename B, float (*DEQ)(const B *, int)>
__global__ void k_qmatvec(const B *W, const float *X, const float *bias, float *Y, int64_t n,
                          int64_t in, int64_t out) {
    int64_t o = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    int64_t r = blockIdx.y;
    int lane = threadIdx.x & 31;
    if (o >= out || r >= n) return;
    int64_t nb = in / KERN_QK;
    const B *w = W + o * nb;
    const float *x = X + r * in;
    float acc = 0.0f;
    for (int64_t b = lane; b < nb; b += 32)
        for (int j = 0; j < KERN_QK; j++) acc += DEQ(w + b, j) * x[b * KERN_QK + j];
    acc = warp_sum(acc);
    if (lane == 0) Y[r * out + o] = acc + (bias ? bias[o] : 0.0f);
}

__global__ void k_add_bias(float *Y, const float *bias, int64_t n, int64_t out) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n * out) Y[i] += bias[i % out];
}

__global__ void k_softmax(float *x, int64_t n) {
    float *r = x + (int64_t)blockIdx.x * n;
    float m = -INFINITY;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, r[i]);
    m = block_max(m);
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += (r[i] = expf(r[i] - m));
    s = block_sum(s);
    float inv = 1.0f / s;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) r[i] *= inv;
}

__global__ void k_layernorm(const float *x, float *y, int64_t n, const float *g, const float *b,
                            float eps) {
    const float *xr = x + (int64_t)blockIdx.x * n;
    float *yr = y + (int64_t)blockIdx.x * n;
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += xr[i];
    float mean = block_sum(s) / (float)n;
    float v = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) v += (xr[i] - mean) * (xr[i] - mean);
    float inv = rsqrtf(block_sum(v) / (float)n + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        yr[i] = (xr[i] - mean) * inv * (g ? g[i] : 1.0f) + (b ? b[i] : 0.0f);
}

__global__ void k_rmsnorm(const float *x, float *y, int64_t n, const float *w, float eps) {
    const float *xr = x + (int64_t)blockIdx.x * n;
    float *yr = y + (int64_t)blockIdx.x * n;
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += xr[i] * xr[i];
    float inv = rsqrtf(block_sum(s) / (float)n + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] * inv * (w ? w[i] : 1.0f);
}

__global__ void k_unary(int op, float *x, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    if (op == KCU_GELU) x[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    else if (op == KCU_QUICK_GELU) x[i] = v / (1.0f + expf(-1.702f * v));
    else x[i] = v / (1.0f + expf(-v));
}

__global__ void k_swiglu(const float *g, const float *u, float *y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

__global__ void k_add(float *y, const float *x, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += x[i];
}

// one thread per (token, head, pair); angles in double like the CPU path
__global__ void k_rope(float *x, int n_tokens, int n_heads, int head_dim, int rot_dim,
                       int64_t pos0, float theta, float freq_scale, int neox) {
    int half = rot_dim / 2;
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (int64_t)n_tokens * n_heads * half) return;
    int i = (int)(idx % half);
    int64_t th = idx / half;
    int t = (int)(th / n_heads), h = (int)(th % n_heads);
    double ang = (double)(pos0 + t) * freq_scale * pow((double)theta, -2.0 * i / (double)rot_dim);
    float c = (float)cos(ang), s = (float)sin(ang);
    float *v = x + ((int64_t)t * n_heads + h) * head_dim;
    int a = neox ? i : 2 * i, b = neox ? i + half : a + 1;
    float x0 = v[a], x1 = v[b];
    v[a] = x0 * c - x1 * s;
    v[b] = x0 * s + x1 * c;
}

// attention: one block per (query, head); keys in tiles of blockDim with an online
// softmax (running max m, running sum l, output accumulators rescaled per tile)
#define ATT_MAXD 4 // accumulators per thread: head_dim <= 4 * blockDim
__global__ void k_attention(const float *Q, int q_stride, const float *K, const float *V,
                            int kv_stride, float *out, int out_stride, int n_kv, int n_heads,
                            int group, int hd, int causal, int64_t q_pos0) {
    extern __shared__ float sh[]; // q [hd] then p [blockDim]
    float *qs = sh, *ps = sh + hd;
    int i = blockIdx.x / n_heads, h = blockIdx.x % n_heads, g = h / group;
    const float *q = Q + (int64_t)i * q_stride + (int64_t)h * hd;
    float scale = rsqrtf((float)hd);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) qs[d] = q[d] * scale;
    int64_t lim = n_kv;
    if (causal && q_pos0 + i + 1 < lim) lim = q_pos0 + i + 1;
    float acc[ATT_MAXD] = {0, 0, 0, 0};
    float m = -INFINITY, l = 0.0f;
    __syncthreads();
    for (int64_t j0 = 0; j0 < lim; j0 += blockDim.x) {
        int64_t j = j0 + threadIdx.x;
        float s = -INFINITY;
        if (j < lim) {
            const float *k = K + j * kv_stride + (int64_t)g * hd;
            s = 0.0f;
            for (int d = 0; d < hd; d++) s += qs[d] * k[d];
        }
        float mt = block_max(s), mn = fmaxf(m, mt);
        float p = j < lim ? expf(s - mn) : 0.0f;
        float corr = expf(m - mn); // m = -inf on the first tile: 0
        ps[threadIdx.x] = p;
        l = l * corr + block_sum(p); // block_sum syncs, so ps is complete after it
        int cnt = (int)(lim - j0 < (int64_t)blockDim.x ? lim - j0 : blockDim.x);
        for (int a = 0; a < ATT_MAXD; a++) {
            int d = threadIdx.x + a * blockDim.x;
            if (d >= hd) break;
            float v = acc[a] * corr;
            for (int jj = 0; jj < cnt; jj++) v += ps[jj] * V[(j0 + jj) * kv_stride + (int64_t)g * hd + d];
            acc[a] = v;
        }
        m = mn;
        __syncthreads(); // ps is rewritten by the next tile
    }
    float *o = out + (int64_t)i * out_stride + (int64_t)h * hd;
    for (int a = 0; a < ATT_MAXD; a++) {
        int d = threadIdx.x + a * blockDim.x;
        if (d < hd) o[d] = lim > 0 ? acc[a] / l : 0.0f;
    }
}

// ---- host-side state ----------------------------------------------------------------
pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
cublasHandle_t g_blas;
int g_blas_ok;

struct scratch { void *p; size_t cap; };
scratch g_buf[8]; // slots, grow-only

void *buf(int slot, size_t bytes) {
    scratch &s = g_buf[slot];
    if (bytes == 0) bytes = 4;
    if (s.cap >= bytes) return s.p;
    if (s.p) cudaFree(s.p);
    s.p = nullptr;
    s.cap = 0;
    if (cudaMalloc(&s.p, bytes) != cudaSuccess) { s.p = nullptr; return nullptr; }
    s.cap = bytes;
    return s.p;
}

// weight cache: host address + size + a hash of sampled bytes → device copy
struct wentry { const void *host; size_t bytes; uint64_t hash; void *dev; };
#define WCACHE_MAX 4096
wentry g_w[WCACHE_MAX];
int g_nw;
size_t g_wbytes, g_wbudget;

uint64_t sample_hash(const void *p, size_t n) {
    const uint8_t *b = (const uint8_t *)p;
    uint64_t h = 1469598103934665603ull ^ n;
    auto mix = [&](size_t off) {
        uint64_t v = 0;
        size_t k = n - off < 8 ? n - off : 8;
        memcpy(&v, b + off, k);
        h = (h ^ v) * 1099511628211ull;
    };
    for (size_t i = 0; i < 64 && i * 8 < n; i++) mix(i * 8);           // the head
    for (size_t i = 0; i < 256; i++) mix((size_t)((double)i / 256.0 * (double)n) & ~(size_t)7); // spread
    mix(n > 8 ? n - 8 : 0);                                               // the tail
    return h;
}

const void *cached_weight(const void *host, size_t bytes) {
    uint64_t h = sample_hash(host, bytes);
    for (int i = 0; i < g_nw; i++)
        if (g_w[i].host == host && g_w[i].bytes == bytes) {
            if (g_w[i].hash == h) return g_w[i].dev;
            // same address, new content: refresh in place
            if (cudaMemcpy(g_w[i].dev, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) return nullptr;
            g_w[i].hash = h;
            return g_w[i].dev;
        }
    if (!g_wbudget) {
        size_t fr = 0, tot = 0;
        if (cudaMemGetInfo(&fr, &tot) == cudaSuccess) g_wbudget = fr / 2;
    }
    if (g_nw < WCACHE_MAX && g_wbytes + bytes <= g_wbudget) {
        void *d = nullptr;
        if (cudaMalloc(&d, bytes) == cudaSuccess) {
            if (cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) { cudaFree(d); return nullptr; }
            g_w[g_nw++] = {host, bytes, h, d};
            g_wbytes += bytes;
            return d;
        }
    }
    // over budget: stage through scratch slot 7 (copied every call)
    void *d = buf(7, bytes);
    if (!d || cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) return nullptr;
    return d;
}

int ensure_blas() {
    if (!g_blas_ok && cublasCreate(&g_blas) == CUBLAS_STATUS_SUCCESS) g_blas_ok = 1;
    return g_blas_ok ? 0 : -1;
}

unsigned nblocks(int64_t n, int threads) { return (unsigned)((n + threads - 1) / threads); }

struct lock_guard {
    lock_guard() { pthread_mutex_lock(&g_mu); }
    ~lock_guard() { pthread_mutex_unlock(&g_mu); }
};

#define CK(x) do { if ((x) != cudaSuccess) return -1; } while (0)
#define H2D(dst, src, bytes) CK(cudaMemcpy((dst), (src), (bytes), cudaMemcpyHostToDevice))
#define D2H(dst, src, bytes) CK(cudaMemcpy((dst), (src), (bytes), cudaMemcpyDeviceToHost))
#define LAUNCHED() CK(cudaGetLastError())

// row-major C = alpha·A·op(B) + beta·C on device pointers (cuBLAS is column-major:
// compute Cᵀ = op(B)ᵀ·Aᵀ)
int dev_gemm(int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc) {
    if (ensure_blas()) return -1;
    return cublasSgemm(g_blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha,
                       B, ldb, A, lda, &beta, C, ldc) == CUBLAS_STATUS_SUCCESS ? 0 : -1;
}

size_t span(int rows, int cols, int ld) { return rows > 0 ? ((size_t)(rows - 1) * ld + cols) * sizeof(float) : 0; }

} // namespace

// ---- C interface ----------------------------------------------------------------------
extern "C" int kcu_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); // clear the sticky "no driver" error
        return 0;
    }
    return n;
}

extern "C" void kcu_device_name(char *out, size_t len) {
    cudaDeviceProp p;
    if (len == 0) return;
    if (kcu_device_count() > 0 && cudaGetDeviceProperties(&p, 0) == cudaSuccess)
        snprintf(out, len, "%s (sm_%d%d, %.0f GiB)", p.name, p.major, p.minor,
                 (double)p.totalGlobalMem / (1u << 30));
    else
        snprintf(out, len, "none");
}

extern "C" int kcu_gemm_f32(int trans_b, int M, int N, int K, float alpha, const float *A,
                            int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return 0;
    lock_guard lk;
    size_t sa = span(M, K, lda), sb = trans_b ? span(N, K, ldb) : span(K, N, ldb), sc = span(M, N, ldc);
    float *dA = (float *)buf(0, sa), *dB = (float *)buf(1, sb), *dC = (float *)buf(2, sc);
    if (!dA || !dB || !dC) return -1;
    H2D(dA, A, sa);
    H2D(dB, B, sb);
    if (beta != 0.0f) H2D(dC, C, sc);
    if (dev_gemm(trans_b, M, N, K, alpha, dA, lda, dB, ldb, beta, dC, ldc)) return -1;
    D2H(C, dC, sc);
    return 0;
}

extern "C" int kcu_to_f32(int wtype, const void *src, size_t src_bytes, float *dst, int64_t n) {
    if (n <= 0) return 0;
    lock_guard lk;
    void *dS = buf(0, src_bytes);
    float *dD = (float *)buf(1, (size_t)n * sizeof(float));
    if (!dS || !dD) return -1;
    H2D(dS, src, src_bytes);
    k_to_f32<<<nblocks(n, 256), 256>>>(wtype, (const uint8_t *)dS, dD, n);
    LAUNCHED();
    D2H(dst, dD, (size_t)n * sizeof(float));
    return 0;
}

extern "C" int kcu_linear(const float *X, int64_t n, int64_t in, const void *W, int wtype,
                          size_t wbytes, const float *bias, int64_t out, float *Y) {
    if (n <= 0 || out <= 0) return 0;
    int quant = wtype == KERN_Q8_0 || wtype == KERN_Q4_0 || wtype == KERN_Q4_1;
    if (quant && in % KERN_QK) return -1;
    if (wtype != KERN_F32 && wtype != KERN_F16 && wtype != KERN_BF16 && !quant) return -1;
    lock_guard lk;
    const void *dW = cached_weight(W, wbytes);
    float *dX = (float *)buf(0, (size_t)(n * in) * sizeof(float));
    float *dY = (float *)buf(1, (size_t)(n * out) * sizeof(float));
    float *dBias = bias ? (float *)buf(2, (size_t)out * sizeof(float)) : nullptr;
    if (!dW || !dX || !dY || (bias && !dBias)) return -1;
    H2D(dX, X, (size_t)(n * in) * sizeof(float));
    if (bias) H2D(dBias, bias, (size_t)out * sizeof(float));
    if (quant && n < KERN_QK) { // few rows: dequantize on the fly, one warp per output
        dim3 grid(nblocks(out, 8), (unsigned)n);
        if (wtype == KERN_Q8_0)
            k_qmatvec<kern_block_q8_0, deq_q8_0><<<grid, 256>>>((const kern_block_q8_0 *)dW, dX, dBias, dY, n, in, out);
        else if (wtype == KERN_Q4_0)
            k_qmatvec<kern_block_q4_0, deq_q4_0><<<grid, 256>>>((const kern_block_q4_0 *)dW, dX, dBias, dY, n, in, out);
        else
            k_qmatvec<kern_block_q4_1, deq_q4_1><<<grid, 256>>>((const kern_block_q4_1 *)dW, dX, dBias, dY, n, in, out);
        LAUNCHED();
    } else {
        const float *dWf = (const float *)dW;
        if (wtype != KERN_F32) { // convert to fp32 in scratch, then cuBLAS
            float *tmp = (float *)buf(3, (size_t)(out * in) * sizeof(float));
            if (!tmp) return -1;
            k_to_f32<<<nblocks(out * in, 256), 256>>>(wtype, (const uint8_t *)dW, tmp, out * in);
            LAUNCHED();
            dWf = tmp;
        }
        if (dev_gemm(1, (int)n, (int)out, (int)in, 1.0f, dX, (int)in, dWf, (int)in, 0.0f, dY, (int)out)) return -1;
        if (bias) {
            k_add_bias<<<nblocks(n * out, 256), 256>>>(dY, dBias, n, out);
            LAUNCHED();
        }
    }
    D2H(Y, dY, (size_t)(n * out) * sizeof(float));
    return 0;
}

extern "C" int kcu_softmax_rows(float *x, int64_t rows, int64_t n) {
    if (rows <= 0 || n <= 0) return 0;
    lock_guard lk;
    size_t bytes = (size_t)(rows * n) * sizeof(float);
    float *d = (float *)buf(0, bytes);
    if (!d) return -1;
    H2D(d, x, bytes);
    k_softmax<<<(unsigned)rows, 256>>>(d, n);
    LAUNCHED();
    D2H(x, d, bytes);
    return 0;
}

static int norm_rows(int rms, const float *x, float *y, int64_t rows, int64_t n, const float *g,
                     const float *b, float eps) {
    if (rows <= 0 || n <= 0) return 0;
    lock_guard lk;
    size_t bytes = (size_t)(rows * n) * sizeof(float), pb = (size_t)n * sizeof(float);
    float *dx = (float *)buf(0, bytes), *dg = (float *)buf(1, pb), *db = (float *)buf(2, pb);
    if (!dx || !dg || !db) return -1;
    H2D(dx, x, bytes);
    if (g) H2D(dg, g, pb);
    if (b) H2D(db, b, pb);
    if (rms) k_rmsnorm<<<(unsigned)rows, 256>>>(dx, dx, n, g ? dg : nullptr, eps);
    else k_layernorm<<<(unsigned)rows, 256>>>(dx, dx, n, g ? dg : nullptr, b ? db : nullptr, eps);
    LAUNCHED();
    D2H(y, dx, bytes);
    return 0;
}

extern "C" int kcu_layernorm_rows(const float *x, float *y, int64_t rows, int64_t n,
                                  const float *g, const float *b, float eps) {
    return norm_rows(0, x, y, rows, n, g, b, eps);
}

extern "C" int kcu_rmsnorm_rows(const float *x, float *y, int64_t rows, int64_t n,
                                const float *w, float eps) {
    return norm_rows(1, x, y, rows, n, w, nullptr, eps);
}

extern "C" int kcu_unary(int op, float *x, int64_t n) {
    if (n <= 0) return 0;
    lock_guard lk;
    float *d = (float *)buf(0, (size_t)n * sizeof(float));
    if (!d) return -1;
    H2D(d, x, (size_t)n * sizeof(float));
    k_unary<<<nblocks(n, 256), 256>>>(op, d, n);
    LAUNCHED();
    D2H(x, d, (size_t)n * sizeof(float));
    return 0;
}

extern "C" int kcu_swiglu(const float *g, const float *u, float *y, int64_t n) {
    if (n <= 0) return 0;
    lock_guard lk;
    size_t bytes = (size_t)n * sizeof(float);
    float *dg = (float *)buf(0, bytes), *du = (float *)buf(1, bytes), *dy = (float *)buf(2, bytes);
    if (!dg || !du || !dy) return -1;
    H2D(dg, g, bytes);
    H2D(du, u, bytes);
    k_swiglu<<<nblocks(n, 256), 256>>>(dg, du, dy, n);
    LAUNCHED();
    D2H(y, dy, bytes);
    return 0;
}

extern "C" int kcu_add(float *y, const float *x, int64_t n) {
    if (n <= 0) return 0;
    lock_guard lk;
    size_t bytes = (size_t)n * sizeof(float);
    float *dy = (float *)buf(0, bytes), *dx = (float *)buf(1, bytes);
    if (!dy || !dx) return -1;
    H2D(dy, y, bytes);
    H2D(dx, x, bytes);
    k_add<<<nblocks(n, 256), 256>>>(dy, dx, n);
    LAUNCHED();
    D2H(y, dy, bytes);
    return 0;
}

extern "C" int kcu_rope(float *x, int n_tokens, int n_heads, int head_dim, int rot_dim,
                        int64_t pos0, float theta, float freq_scale, int neox) {
    if (rot_dim > head_dim) rot_dim = head_dim;
    rot_dim &= ~1;
    if (n_tokens <= 0 || n_heads <= 0 || rot_dim <= 0) return 0;
    lock_guard lk;
    size_t bytes = (size_t)n_tokens * n_heads * head_dim * sizeof(float);
    float *d = (float *)buf(0, bytes);
    if (!d) return -1;
    H2D(d, x, bytes);
    int64_t items = (int64_t)n_tokens * n_heads * (rot_dim / 2);
    k_rope<<<nblocks(items, 256), 256>>>(d, n_tokens, n_heads, head_dim, rot_dim, pos0, theta, freq_scale, neox);
    LAUNCHED();
    D2H(x, d, bytes);
    return 0;
}

extern "C" int kcu_attention(const float *Q, int q_stride, const float *K, const float *V,
                             int kv_stride, float *out, int out_stride, int n_q, int n_kv,
                             int n_heads, int n_kv_heads, int head_dim, int causal,
                             int64_t q_pos0) {
    const int threads = 128;
    if (n_q <= 0 || n_heads <= 0 || head_dim <= 0) return 0;
    if (head_dim > ATT_MAXD * threads) return -1;
    if (n_kv_heads <= 0 || n_heads % n_kv_heads) n_kv_heads = n_heads;
    lock_guard lk;
    size_t sq = span(n_q, n_heads * head_dim, q_stride), skv = span(n_kv, n_kv_heads * head_dim, kv_stride);
    size_t so = span(n_q, n_heads * head_dim, out_stride);
    float *dQ = (float *)buf(0, sq), *dK = (float *)buf(1, skv), *dV = (float *)buf(2, skv), *dO = (float *)buf(3, so);
    if (!dQ || !dK || !dV || !dO) return -1;
    H2D(dQ, Q, sq);
    if (skv) { H2D(dK, K, skv); H2D(dV, V, skv); }
    H2D(dO, out, so); // keeps the caller's values between heads when strides have slack
    size_t shmem = (size_t)(head_dim + threads) * sizeof(float);
    k_attention<<<(unsigned)((int64_t)n_q * n_heads), threads, shmem>>>(
        dQ, q_stride, dK, dV, kv_stride, dO, out_stride, n_kv, n_heads, n_heads / n_kv_heads,
        head_dim, causal, q_pos0);
    LAUNCHED();
    D2H(out, dO, so);
    return 0;
}

extern "C" void kcu_cache_clear(void) {
    lock_guard lk;
    for (int i = 0; i < g_nw; i++) cudaFree(g_w[i].dev);
    g_nw = 0;
    g_wbytes = 0;
}
