/* Dense products: fp32 GEMM through OpenBLAS, and kern_linear for every weight type.
 * Few X rows with quantized weights: X rows are quantized to q8_0 once, then each weight
 * row is dotted against a tile of X rows while it sits in L1 (weights stream once per
 * tile). Many rows: tiles of W are converted to fp32 and sgemm does the product, which
 * wins once the conversion is shared by enough rows (kern_linear_dequant_rows). */
#include <cblas.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/kern_internal.h"

/* OpenBLAS (0.3.21) stops its thread pool in a pthread_atfork handler: a fork() while
 * another thread is inside sgemm leaves that sgemm waiting forever for threads that are
 * gone, and two forks at once deadlock in the handler. BLAS calls hold this lock shared,
 * kern_fork holds it exclusive. Process-wide, like fork() and OpenBLAS's pool. */
static pthread_rwlock_t blas_fork_lock = PTHREAD_RWLOCK_INITIALIZER;

pid_t kern_fork(void) {
    pthread_rwlock_wrlock(&blas_fork_lock);
    pid_t pid = fork();
    int e = errno;
    pthread_rwlock_unlock(&blas_fork_lock);   /* the child's copy too: it is the owner */
    errno = e;
    return pid;
}

const char *kern_blas_core(void) {
    const char *c = openblas_get_corename();
    return c ? c : "unknown";
}

const char *kern_blas_core_pick(const char *chosen, int avx2_fma, int avx512) {
    if (!chosen || strcmp(chosen, "Prescott") != 0 || !avx2_fma) return NULL;
    return avx512 ? "SkylakeX" : "Haswell";
}

const char *kern_blas_core_better(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    return kern_blas_core_pick(kern_blas_core(), avx2, avx512);
#else
    return NULL; /* Prescott is an x86 name: elsewhere OpenBLAS's choice stands */
#endif
}

static void blas_sgemm(int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc) {
    pthread_rwlock_rdlock(&blas_fork_lock);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K,
                alpha, A, lda, B, ldb, beta, C, ldc);
    pthread_rwlock_unlock(&blas_fork_lock);
}

static void blas_sgemv(int out, int in, const float *W, const float *X, float *Y) {
    pthread_rwlock_rdlock(&blas_fork_lock);
    cblas_sgemv(CblasRowMajor, CblasNoTrans, out, in, 1.0f, W, in, X, 1, 0.0f, Y, 1);
    pthread_rwlock_unlock(&blas_fork_lock);
}

/* OpenBLAS runs on one thread (kern_pool_create sets it) and the pool splits the product:
 * OpenBLAS's own workers spin in sched_yield between calls, on the cores the pool needs
 * for the int8 and attention work in between (measured: 15% of the text encoder's
 * samples, and 1.2x faster indexing without it). Split by rows of C, or by its columns
 * when it has few rows; each part is one single-threaded sgemm. */
typedef struct {
    int trans_b, M, N, K, lda, ldb, ldc, by_rows;
    float alpha, beta;
    const float *A, *B;
    float *C;
} gemm_part_ctx;

static void gemm_part(void *ctx, int64_t b, int64_t e, int thread) {
    const gemm_part_ctx *g = ctx;
    int cnt = (int)(e - b);
    if (g->by_rows)
        blas_sgemm(g->trans_b, cnt, g->N, g->K, g->alpha, g->A + b * g->lda, g->lda, g->B, g->ldb,
                   g->beta, g->C + b * g->ldc, g->ldc);
    else
        blas_sgemm(g->trans_b, g->M, cnt, g->K, g->alpha, g->A, g->lda,
                   g->B + (g->trans_b ? b * g->ldb : b), g->ldb, g->beta, g->C + b, g->ldc);
}

#define GEMM_SPLIT_MIN 32 /* rows (or columns) per part below which one call does it all */

void kern_gemm_f32(kern_pool *p, int trans_b, int M, int N, int K, float alpha, const float *A,
                   int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (kern_cuda_available() &&
        kern_cuda_try_gemm(trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) == 0)
        return;
    int parts = kern_pool_size(p);
    int by_rows = M >= N || M >= GEMM_SPLIT_MIN * parts;
    int len = by_rows ? M : N;
    if (parts == 1 || len < GEMM_SPLIT_MIN * parts) {
        blas_sgemm(trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    gemm_part_ctx g = {trans_b, M, N, K, lda, ldb, ldc, by_rows, alpha, beta, A, B, C};
    /* one part per thread: each part packs its own copy of the other operand */
    kern_pool_run(p, len, (len + parts - 1) / parts, gemm_part, &g);
}

/* y = W·x for one row, split over the pool by rows of W */
typedef struct { const float *W, *X; float *Y; int in; } gemv_part_ctx;
static void gemv_part(void *ctx, int64_t b, int64_t e, int thread) {
    const gemv_part_ctx *g = ctx;
    blas_sgemv((int)(e - b), g->in, g->W + b * g->in, g->X, g->Y + b);
}

static void add_bias(float *Y, int64_t n, int64_t out, const float *bias) {
    if (!bias) return;
    for (int64_t r = 0; r < n; r++) kern_add(Y + r * out, bias, out);
}

/* ---- quantized weights ------------------------------------------------------ */
#define XTILE 16  /* X rows per weight pass: tile of q8_0 rows stays in L2 */

typedef struct {
    const kern_ops *ops;
    const uint8_t *W;
    kern_type wtype;
    size_t wrow;                 /* bytes per weight row */
    const kern_block_q8_0 *Xq;   /* n rows of in/32 blocks */
    const float *Xs;             /* their block sums (q4_1 only) */
    const float *Xds;            /* per block {d, d·Σqs} (ops->qdot_rows) */
    int64_t n, in, out;
    const float *bias;
    float *Y;
} qlin_ctx;

static float qdot(const qlin_ctx *c, const void *w, const kern_block_q8_0 *x, const float *xs) {
    switch (c->wtype) {
    case KERN_Q8_0: return c->ops->dot_q8_0_q8_0(c->in, w, x);
    case KERN_Q4_0: return c->ops->dot_q4_0_q8_0(c->in, w, x);
    default: return c->ops->dot_q4_1_q8_0s(c->in, w, x, xs);
    }
}

/* Decoding (n < 4): groups of 4 weight rows against each X row; the group is read from
 * DRAM once (later X rows find it in L1) and the kernel prefetches the rows ahead, up to
 * the end of this range (the other threads' ranges are theirs to fetch). */
static void qlin_rows(const qlin_ctx *c, int64_t b, int64_t e) {
    int64_t nb = c->in / KERN_QK;
    const uint8_t *wend = c->W + (size_t)e * c->wrow;
    float y4[4];
    for (int64_t o = b; o < e; o += 4) {
        int nr = e - o < 4 ? (int)(e - o) : 4;
        const uint8_t *w = c->W + (size_t)o * c->wrow;
        for (int64_t r = 0; r < c->n; r++) {
            c->ops->qdot_rows(c->wtype, c->in, w, c->wrow, nr, c->Xq + r * nb, c->Xds + 2 * r * nb,
                              r == 0 ? (int64_t)(wend - w) : 0, y4);
            for (int k = 0; k < nr; k++)
                c->Y[r * c->out + o + k] = y4[k] + (c->bias ? c->bias[o + k] : 0.0f);
        }
    }
}

static void qlin_range(void *ctx, int64_t b, int64_t e, int thread) {
    const qlin_ctx *c = ctx;
    if (c->ops->qdot_rows && c->n < 4) {
        qlin_rows(c, b, e);
        return;
    }
    int64_t nb = c->in / KERN_QK;
    for (int64_t r0 = 0; r0 < c->n; r0 += XTILE) {
        int64_t r1 = r0 + XTILE < c->n ? r0 + XTILE : c->n;
        for (int64_t o = b; o < e; o++) {
            const void *w = c->W + (size_t)o * c->wrow;
            float bo = c->bias ? c->bias[o] : 0.0f, y4[4];
            int64_t r = r0;
            for (; r + 4 <= r1; r += 4) { /* unpack the weight block once per 4 rows */
                c->ops->qdot4(c->wtype, c->in, w, c->Xq + r * nb, nb, c->Xs + r * nb, y4);
                for (int k = 0; k < 4; k++) c->Y[(r + k) * c->out + o] = y4[k] + bo;
            }
            for (; r < r1; r++)
                c->Y[r * c->out + o] = qdot(c, w, c->Xq + r * nb, c->Xs + r * nb) + bo;
        }
    }
}

typedef struct { const kern_ops *ops; const float *X; kern_block_q8_0 *Xq; float *Xs, *Xds; int64_t in; } qx_ctx;
static void quant_rows(void *ctx, int64_t b, int64_t e, int thread) {
    const qx_ctx *c = ctx;
    int64_t nb = c->in / KERN_QK;
    for (int64_t r = b; r < e; r++) {
        c->ops->quantize_q8_0(c->X + r * c->in, c->Xq + r * nb, c->in);
        kern_q8_0_block_sums(c->Xq + r * nb, c->in, c->Xs + r * nb);
        for (int64_t k = 0; k < nb; k++) {
            c->Xds[2 * (r * nb + k)] = kern_fp16_to_fp32(c->Xq[r * nb + k].d);
            c->Xds[2 * (r * nb + k) + 1] = c->Xs[r * nb + k];
        }
    }
}

/* Large n: dequantize a tile of weight rows to fp32 (in the pool), then let sgemm do
 * the tile. Past a few rows this beats int8 dots: BLAS runs near the FMA peak and the
 * dequantization is paid once per tile for all n rows. */
typedef struct { const kern_ops *ops; const uint8_t *W; kern_type t; size_t wrow; int64_t in, o0; float *buf; } dq_ctx;
static void dq_rows(void *ctx, int64_t b, int64_t e, int thread) {
    const dq_ctx *c = ctx;
    for (int64_t r = b; r < e; r++) {
        const void *src = c->W + (size_t)(c->o0 + r) * c->wrow;
        float *dst = c->buf + r * c->in;
        if (c->t == KERN_Q8_0) c->ops->q8_0_to_f32(src, dst, c->in);
        else if (c->t == KERN_Q4_0) c->ops->q4_0_to_f32(src, dst, c->in);
        else if (c->t == KERN_Q4_1) c->ops->q4_1_to_f32(src, dst, c->in);
        else c->ops->kq_to_f32(c->t, src, dst, c->in);
    }
}

static int linear_dequant(const kern_ops *ops, kern_pool *p, const float *X, int64_t n,
                          int64_t in, const void *W, kern_type wtype, const float *bias,
                          int64_t out, float *Y) {
    /* tile: ~4 MiB of fp32 weights (fewer, wider sgemm calls), at least 16 rows */
    int64_t tile = (1 << 20) / in;
    if (tile < 16) tile = 16;
    if (tile > out) tile = out;
    float *buf = malloc((size_t)(tile * in) * sizeof *buf);
    if (!buf) return -1;
    for (int64_t o0 = 0; o0 < out; o0 += tile) {
        int64_t cnt = out - o0 < tile ? out - o0 : tile;
        dq_ctx dc = {ops, W, wtype, kern_type_row_bytes(wtype, in), in, o0, buf};
        kern_pool_run(p, cnt, 4, dq_rows, &dc);
        kern_gemm_f32(p, 1, (int)n, (int)cnt, (int)in, 1.0f, X, (int)in, buf, (int)in, 0.0f, Y + o0,
                      (int)out);
    }
    free(buf);
    add_bias(Y, n, out, bias);
    return 0;
}

static void linear_quant(const kern_ops *ops, kern_pool *p, const float *X, int64_t n,
                         int64_t in, const void *W, kern_type wtype, const float *bias,
                         int64_t out, float *Y) {
    if (n >= kern_linear_dequant_rows(wtype) && linear_dequant(ops, p, X, n, in, W, wtype, bias, out, Y) == 0) return;
    int64_t nb = in / KERN_QK;
    kern_block_q8_0 *Xq = malloc((size_t)(n * nb) * sizeof *Xq);
    float *Xs = malloc((size_t)(n * nb) * 3 * sizeof *Xs); /* sums, then {d, sum} pairs */
    if (!Xq || !Xs) {
        free(Xq);
        free(Xs);
        memset(Y, 0, (size_t)(n * out) * sizeof *Y);
        return;
    }
    float *Xds = Xs + n * nb;
    qx_ctx qc = {ops, X, Xq, Xs, Xds, in};
    kern_pool_run(p, n, 4, quant_rows, &qc);
    qlin_ctx c = {ops, W, wtype, kern_type_row_bytes(wtype, in), Xq, Xs, Xds, n, in, out, bias, Y};
    /* grain: enough rows that a range is worth a wake-up */
    kern_pool_run(p, out, 8, qlin_range, &c);
    free(Xq);
    free(Xs);
}

/* ---- Q5_0/Q5_1 and K-quant weights ---------------------------------------------
 * Few rows: X rows are quantized once (q8_0 for Q5_0/Q5_1, q8_K for the K-quants) and
 * every weight row is dotted against each of them while it sits in L1. */
typedef struct {
    const kern_ops *ops;
    const uint8_t *W;
    kern_type t;
    size_t wrow, xrow;           /* bytes per weight row / per quantized X row */
    const uint8_t *Xq;
    int64_t n, in, out;
    const float *bias;
    float *Y;
} kq_ctx;

static void kq_range(void *ctx, int64_t b, int64_t e, int thread) {
    const kq_ctx *c = ctx;
    int legacy = c->t == KERN_Q5_0 || c->t == KERN_Q5_1;
    for (int64_t o = b; o < e; o++) {
        const uint8_t *w = c->W + (size_t)o * c->wrow;
        float bo = c->bias ? c->bias[o] : 0.0f;
        for (int64_t r = 0; r < c->n; r++) {
            const void *x = c->Xq + (size_t)r * c->xrow;
            float v = legacy ? c->ops->dot_q5_q8_0(c->t, c->in, w, x) : c->ops->dot_kq(c->t, c->in, w, x);
            c->Y[r * c->out + o] = v + bo;
        }
    }
}

typedef struct { const kern_ops *ops; const float *X; uint8_t *Xq; size_t xrow; int64_t in; int k; } kqx_ctx;
static void kq_quant_rows(void *ctx, int64_t b, int64_t e, int thread) {
    const kqx_ctx *c = ctx;
    for (int64_t r = b; r < e; r++) {
        void *dst = c->Xq + (size_t)r * c->xrow;
        if (c->k) c->ops->quantize_q8_K(c->X + r * c->in, dst, c->in);
        else c->ops->quantize_q8_0(c->X + r * c->in, dst, c->in);
    }
}

static void linear_kq(const kern_ops *ops, kern_pool *p, const float *X, int64_t n, int64_t in,
                      const void *W, kern_type wtype, const float *bias, int64_t out, float *Y) {
    if (n >= kern_linear_dequant_rows(wtype) && linear_dequant(ops, p, X, n, in, W, wtype, bias, out, Y) == 0) return;
    int k = !(wtype == KERN_Q5_0 || wtype == KERN_Q5_1);
    size_t xrow = kern_type_row_bytes(k ? KERN_Q8_K : KERN_Q8_0, in);
    uint8_t *Xq = malloc(xrow * (size_t)n);
    if (!Xq) {
        memset(Y, 0, (size_t)(n * out) * sizeof *Y);
        return;
    }
    kqx_ctx qc = {ops, X, Xq, xrow, in, k};
    kern_pool_run(p, n, 1, kq_quant_rows, &qc);
    kq_ctx c = {ops, W, wtype, kern_type_row_bytes(wtype, in), xrow, Xq, n, in, out, bias, Y};
    kern_pool_run(p, out, 8, kq_range, &c);
    free(Xq);
}

/* ---- fp16 / bf16 weights: convert a tile of rows, then sgemm on it ----------- */
#define HTILE 128

typedef struct { const uint8_t *W; kern_type t; int64_t in, o0; float *buf; } conv_ctx;
static void conv_rows(void *ctx, int64_t b, int64_t e, int thread) {
    const conv_ctx *c = ctx;
    for (int64_t r = b; r < e; r++)
        kern_to_f32(c->t, c->W + (size_t)(c->o0 + r) * (size_t)c->in * 2, c->buf + r * c->in, c->in);
}

/* few rows: dot each weight row against every X row, converting on the fly (a whole
 * conversion per decoded token would cost more than the product) */
typedef struct {
    const kern_ops *ops; const uint16_t *W; kern_type t; const float *X, *bias; float *Y;
    int64_t n, in, out;
} hdot_ctx;
static void hdot_range(void *ctx, int64_t b, int64_t e, int thread) {
    const hdot_ctx *c = ctx;
    for (int64_t o = b; o < e; o++) {
        const uint16_t *w = c->W + o * c->in;
        for (int64_t r = 0; r < c->n; r++) {
            const float *x = c->X + r * c->in;
            float v = c->t == KERN_F16 ? c->ops->dot_f16_f32(c->in, w, x) : c->ops->dot_bf16_f32(c->in, w, x);
            c->Y[r * c->out + o] = v + (c->bias ? c->bias[o] : 0.0f);
        }
    }
}

static void linear_half(const kern_ops *ops, kern_pool *p, const float *X, int64_t n, int64_t in,
                        const void *W, kern_type wtype, const float *bias, int64_t out, float *Y) {
    if (n < kern_linear_dequant_rows(wtype)) {
        hdot_ctx hc = {ops, W, wtype, X, bias, Y, n, in, out};
        kern_pool_run(p, out, 8, hdot_range, &hc);
        return;
    }
    float *buf = malloc((size_t)(HTILE * in) * sizeof *buf);
    if (!buf) { memset(Y, 0, (size_t)(n * out) * sizeof *Y); return; }
    for (int64_t o0 = 0; o0 < out; o0 += HTILE) {
        int64_t cnt = out - o0 < HTILE ? out - o0 : HTILE;
        conv_ctx cc = {W, wtype, in, o0, buf};
        kern_pool_run(p, cnt, 8, conv_rows, &cc);
        kern_gemm_f32(p, 1, (int)n, (int)cnt, (int)in, 1.0f, X, (int)in, buf, (int)in, 0.0f, Y + o0,
                      (int)out);
    }
    free(buf);
    add_bias(Y, n, out, bias);
}

void kern_linear_ops(const kern_ops *ops, kern_pool *p, const float *X, int64_t n, int64_t in,
                     const void *W, kern_type wtype, const float *bias, int64_t out, float *Y) {
    if (n <= 0 || out <= 0) return;
    switch (wtype) {
    case KERN_F32:
        if (n == 1) {
            gemv_part_ctx g = {W, X, Y, (int)in};
            kern_pool_run(p, out, 64, gemv_part, &g);
            add_bias(Y, n, out, bias);
        } else {
            /* Y starts as the bias rows and sgemm adds into it (beta 1): with beta 0
             * OpenBLAS first zeroes Y in a pass of its own (sgemm_beta, ~5% of the text
             * encoder's time) and the bias took one more */
            for (int64_t r = 0; bias && r < n; r++) memcpy(Y + r * out, bias, (size_t)out * sizeof *Y);
            kern_gemm_f32(p, 1, (int)n, (int)out, (int)in, 1.0f, X, (int)in, W, (int)in,
                          bias ? 1.0f : 0.0f, Y, (int)out);
        }
        return;
    case KERN_F16:
    case KERN_BF16:
        linear_half(ops, p, X, n, in, W, wtype, bias, out, Y);
        return;
    case KERN_Q8_0:
    case KERN_Q4_0:
    case KERN_Q4_1:
        if (in % KERN_QK == 0) {
            linear_quant(ops, p, X, n, in, W, wtype, bias, out, Y);
            return;
        }
        break;
    case KERN_Q5_0: case KERN_Q5_1:
        /* decoding: the row-group kernel (q8_0 X, as the Q5 dots take it) when the path has one */
        if (n < 4 && ops->qdot_rows && in % KERN_QK == 0) {
            linear_quant(ops, p, X, n, in, W, wtype, bias, out, Y);
            return;
        }
        /* fall through */
    case KERN_Q2_K: case KERN_Q3_K: case KERN_Q4_K:
    case KERN_Q5_K: case KERN_Q6_K:
        if (in % kern_type_block_elems(wtype) == 0) {
            linear_kq(ops, p, X, n, in, W, wtype, bias, out, Y);
            return;
        }
        break;
    case KERN_Q8_K:
        break;
    }
    memset(Y, 0, (size_t)(n * out) * sizeof *Y); /* unsupported: defined output */
}

void kern_linear(kern_pool *p, const float *X, int64_t n, int64_t in, const void *W,
                 kern_type wtype, const float *bias, int64_t out, float *Y) {
    if (kern_cuda_available() && kern_cuda_try_linear(X, n, in, W, wtype, bias, out, Y) == 0)
        return;
    kern_linear_ops(kern_ops_get(), p, X, n, in, W, wtype, bias, out, Y);
}
