/* GEMM / linear / attention throughput, side by side in one run:
 *   kern_gemm_f32 (sgemm split over the pool) vs cblas_sgemm on OpenBLAS's own threads
 *   (as many, same OPENBLAS_CORETYPE),
 *   kern_linear with Q4_1 / Q8_0 weights vs dequantize + sgemm (the obvious baseline),
 *   the quantized matvec inner loop on one thread, AVX2 vs scalar,
 *   attention AVX2 vs scalar path; then peak RSS. Each pair is timed in alternating
 *   rounds (best of 5) so both sides see the same load on a shared machine.
 * Usage: bench_gemm [--quick] */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "kernels/kern_internal.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double min_time = 0.06;
#define ROUNDS 5

/* seconds per call: best of ROUNDS rounds of >= min_time each (the machine is shared,
 * so the minimum is the least disturbed estimate) */
#define TIME_ONE(best, STMT)                                               \
    do {                                                                   \
        int reps_ = 0;                                                     \
        double t0_ = now(), el_;                                           \
        do { STMT; reps_++; } while ((el_ = now() - t0_) < min_time);      \
        if (el_ / reps_ < (best)) (best) = el_ / reps_;                    \
    } while (0)
/* two contenders timed in alternating rounds so both see the same load */
#define TIME_PAIR(ta, A, tb, B)                                            \
    do {                                                                   \
        (ta) = (tb) = 1e30;                                                \
        A; B; /* warm-up */                                                \
        for (int r_ = 0; r_ < ROUNDS; r_++) { TIME_ONE(ta, A); TIME_ONE(tb, B); } \
    } while (0)

static float *rnd_vec(int64_t n) {
    float *v = malloc((size_t)n * sizeof *v);
    uint32_t s = 12345;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        v[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
    }
    return v;
}

/* q4_0 / q4_1 / q8_0 weights from floats (reference rounding; quality does not matter here) */
static void *quantize_w(kern_type t, const float *W, int64_t out, int64_t in) {
    size_t rb = kern_type_row_bytes(t, in);
    uint8_t *q = malloc(rb * (size_t)out);
    for (int64_t o = 0; o < out; o++) {
        if (t == KERN_Q8_0) { kern_quantize_q8_0(W + o * in, (kern_block_q8_0 *)(q + rb * o), in); continue; }
        if (t == KERN_Q4_0) {
            kern_block_q4_0 *b = (kern_block_q4_0 *)(q + rb * o);
            for (int64_t k = 0; k < in / 32; k++) {
                const float *s = W + o * in + k * 32;
                float amax = 0;
                for (int j = 0; j < 32; j++) amax = fabsf(s[j]) > amax ? fabsf(s[j]) : amax;
                float d = amax / 8, id = d ? 1 / d : 0;
                b[k].d = kern_fp32_to_fp16(d);
                for (int j = 0; j < 16; j++) {
                    int lo = (int)(s[j] * id + 8.5f), hi = (int)(s[j + 16] * id + 8.5f);
                    lo = lo < 0 ? 0 : lo > 15 ? 15 : lo;
                    hi = hi < 0 ? 0 : hi > 15 ? 15 : hi;
                    b[k].qs[j] = (uint8_t)(lo | (hi << 4));
                }
            }
            continue;
        }
        kern_block_q4_1 *b = (kern_block_q4_1 *)(q + rb * o);
        for (int64_t k = 0; k < in / 32; k++) {
            const float *s = W + o * in + k * 32;
            float mn = s[0], mx = s[0];
            for (int j = 1; j < 32; j++) { mn = s[j] < mn ? s[j] : mn; mx = s[j] > mx ? s[j] : mx; }
            float d = (mx - mn) / 15, id = d ? 1 / d : 0;
            b[k].d = kern_fp32_to_fp16(d);
            b[k].m = kern_fp32_to_fp16(mn);
            for (int j = 0; j < 16; j++) {
                int lo = (int)((s[j] - mn) * id + 0.5f), hi = (int)((s[j + 16] - mn) * id + 0.5f);
                b[k].qs[j] = (uint8_t)((lo > 15 ? 15 : lo) | ((hi > 15 ? 15 : hi) << 4));
            }
        }
    }
    return q;
}

/* the baseline: one sgemm on OpenBLAS's threads (the pool keeps OpenBLAS at 1) */
static void blas_threaded(int threads, int M, int N, int K, const float *A, const float *B, float *C) {
    openblas_set_num_threads(threads);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, A, K, B, K, 0, C, N);
    openblas_set_num_threads(1);
}

static void bench_gemm(kern_pool *pool) {
    const int sz[][3] = {{256, 1536, 384}, {512, 1536, 576}, {64, 576, 576}};
    printf("fp32 GEMM (C[M][N] = A[M][K]·B[N][K]^T)      kern_gemm_f32   cblas_sgemm   ratio\n");
    for (int s = 0; s < 3; s++) {
        int M = sz[s][0], N = sz[s][1], K = sz[s][2];
        float *A = rnd_vec((int64_t)M * K), *B = rnd_vec((int64_t)N * K), *C = malloc(sizeof(float) * M * N);
        double tk, tb, fl = 2.0 * M * N * K;
        TIME_PAIR(tk, kern_gemm_f32(pool, 1, M, N, K, 1, A, K, B, K, 0, C, N),
                  tb, blas_threaded(kern_pool_size(pool), M, N, K, A, B, C));
        printf("  M=%-4d N=%-5d K=%-4d                      %7.1f GF/s   %7.1f GF/s   %.2f\n", M, N, K,
               fl / tk * 1e-9, fl / tb * 1e-9, tb / tk);
        free(A); free(B); free(C);
    }
}

static void bench_linear(kern_pool *pool) {
    const kern_type types[] = {KERN_Q4_1, KERN_Q8_0};
    const int ns[] = {1, 16, 128};
    const int64_t in = 576, out = 1536;
    printf("kern_linear, W %ldx%ld quantized          kern_linear      deq+sgemm      ratio   (sgemm only)\n",
           (long)out, (long)in);
    float *Wf = rnd_vec(out * in), *Wd = malloc(sizeof(float) * out * in);
    for (int t = 0; t < 2; t++) {
        void *Wq = quantize_w(types[t], Wf, out, in);
        for (int k = 0; k < 3; k++) {
            int n = ns[k];
            float *X = rnd_vec(n * in), *Y = malloc(sizeof(float) * n * out);
            double tk, tb, ts, fl = 2.0 * n * in * out;
            TIME_PAIR(tk, kern_linear(pool, X, n, in, Wq, types[t], NULL, out, Y),
                      tb, (kern_to_f32(types[t], Wq, Wd, out * in),
                           kern_gemm_f32(pool, 1, n, (int)out, (int)in, 1, X, (int)in, Wd, (int)in, 0, Y, (int)out)));
            ts = 1e30;
            for (int r = 0; r < ROUNDS; r++)
                TIME_ONE(ts, kern_gemm_f32(pool, 1, n, (int)out, (int)in, 1, X, (int)in, Wd, (int)in, 0, Y, (int)out));
            printf("  %-5s n=%-4d                            %7.2f GF/s   %7.2f GF/s   %5.2f   (%.2f GF/s)\n",
                   kern_type_name(types[t]), n, fl / tk * 1e-9, fl / tb * 1e-9, tb / tk, fl / ts * 1e-9);
            free(X); free(Y);
        }
        free(Wq);
    }
    free(Wf); free(Wd);
}

/* one thread, the matvec inner loop: every weight row dotted with one q8_0 row */
typedef struct { const kern_ops *ops; kern_type t; const uint8_t *W; size_t rb; const kern_block_q8_0 *x; const float *xs; int64_t in, out; float *y; } mv_args;
static void matvec(const mv_args *a) {
    for (int64_t o = 0; o < a->out; o++) {
        const void *w = a->W + a->rb * (size_t)o;
        a->y[o] = a->t == KERN_Q8_0 ? a->ops->dot_q8_0_q8_0(a->in, w, a->x)
                : a->t == KERN_Q4_0 ? a->ops->dot_q4_0_q8_0(a->in, w, a->x)
                                    : a->ops->dot_q4_1_q8_0s(a->in, w, a->x, a->xs);
    }
}

static void bench_dots(void) {
    const kern_ops *avx = kern_ops_avx2_table();
    if (!avx) avx = &kern_ops_scalar;
    const int64_t in = 576, out = 1536;
    const kern_type types[] = {KERN_Q8_0, KERN_Q4_0, KERN_Q4_1};
    float *Wf = rnd_vec(out * in), *X = rnd_vec(in), *y = malloc(sizeof(float) * out);
    kern_block_q8_0 *xq = malloc(sizeof *xq * (size_t)(in / 32));
    float xs[576 / 32];
    kern_quantize_q8_0(X, xq, in);
    kern_q8_0_block_sums(xq, in, xs);
    printf("quantized dot, 1 thread, 1536 rows x 576      avx2             scalar         ratio\n");
    for (int t = 0; t < 3; t++) {
        void *Wq = quantize_w(types[t], Wf, out, in);
        size_t rb = kern_type_row_bytes(types[t], in);
        mv_args a = {avx, types[t], Wq, rb, xq, xs, in, out, y}, b = a;
        b.ops = &kern_ops_scalar;
        double ta, tb, fl = 2.0 * in * out;
        TIME_PAIR(ta, matvec(&a), tb, matvec(&b));
        printf("  %-5s                                     %7.2f GF/s   %7.2f GF/s   %5.2f\n",
               kern_type_name(types[t]), fl / ta * 1e-9, fl / tb * 1e-9, tb / ta);
        free(Wq);
    }
    free(Wf); free(X); free(y); free(xq);
}

/* Decode-sized kern_linear (n = 1) over 64+ MiB of Q4_1 weights, as a decoder streams
 * them per token (no cache reuse): the rows-per-pass kernel with prefetch
 * (ops->qdot_rows) vs the same table without it (row-by-row dots, the earlier path). */
static void linear_pass(const kern_ops *ops, kern_pool *pool, const float *X, uint8_t *const *Wm,
                        int nm, int64_t in, int64_t out, float *Y) {
    for (int m = 0; m < nm; m++) kern_linear_ops(ops, pool, X, 1, in, Wm[m], KERN_Q4_1, NULL, out, Y);
}

static void bench_stream(kern_pool *pool) {
    const kern_ops *avx = kern_ops_avx2_table();
    if (!avx || !avx->qdot_rows) return;
    kern_ops rowwise = *avx;
    rowwise.qdot_rows = NULL;
    enum { NM = 120 }; /* 120 x 1536x576 q4_1 = 66 MB, the SmolLM2-135M layer weights */
    const int64_t in = 576, out = 1536;
    float *Wf = rnd_vec(out * in), *X = rnd_vec(in), *Y = malloc(sizeof(float) * out);
    void *Wq = quantize_w(KERN_Q4_1, Wf, out, in);
    size_t bytes = kern_type_row_bytes(KERN_Q4_1, in) * (size_t)out;
    uint8_t *Wm[NM];
    for (int m = 0; m < NM; m++) { Wm[m] = malloc(bytes); memcpy(Wm[m], Wq, bytes); }
    double ta, tb, fl = 2.0 * in * out * NM;
    TIME_PAIR(ta, linear_pass(avx, pool, X, Wm, NM, in, out, Y),
              tb, linear_pass(&rowwise, pool, X, Wm, NM, in, out, Y));
    printf("kern_linear q4_1 n=1 streaming %.0f MB (%d threads)  rows+prefetch    row by row     ratio\n",
           NM * bytes / 1e6, kern_pool_size(pool));
    printf("                                           %7.2f GF/s   %7.2f GF/s   %5.2f   (%.1f vs %.1f GB/s of weights)\n",
           fl / ta * 1e-9, fl / tb * 1e-9, tb / ta, NM * bytes / ta * 1e-9, NM * bytes / tb * 1e-9);
    for (int m = 0; m < NM; m++) free(Wm[m]);
    free(Wq); free(Wf); free(X); free(Y);
}

static void bench_attention(kern_pool *pool) {
    const kern_ops *avx = kern_ops_avx2_table();
    /* SmolLM2-135M shape: 9 heads, 3 kv heads, head_dim 64 */
    const int cfg[][3] = {{256, 256, 1}, {1, 1024, 1}}; /* n_q, n_kv, causal */
    printf("attention (9 heads, 3 kv heads, d=64)        avx2             scalar         ratio\n");
    for (int c = 0; c < 2; c++) {
        int nq = cfg[c][0], nkv = cfg[c][1];
        float *Q = rnd_vec((int64_t)nq * 576), *K = rnd_vec((int64_t)nkv * 192), *V = rnd_vec((int64_t)nkv * 192);
        float *O = malloc(sizeof(float) * nq * 576);
        int64_t pos0 = nkv - nq;
        double pairs = 0;
        for (int i = 0; i < nq; i++) pairs += (double)(pos0 + i + 1);
        double fl = pairs * 9 * 64 * 4, ta, ts;
        if (!avx) avx = &kern_ops_scalar;
        TIME_PAIR(ta, kern_attention_ops(avx, pool, Q, 576, K, V, 192, O, 576, nq, nkv, 9, 3, 64, 1, pos0),
                  ts, kern_attention_ops(&kern_ops_scalar, pool, Q, 576, K, V, 192, O, 576, nq, nkv, 9, 3, 64, 1, pos0));
        printf("  n_q=%-4d n_kv=%-5d causal                 %7.2f GF/s   %7.2f GF/s   %5.2f\n", nq, nkv,
               fl / ta * 1e-9, fl / ts * 1e-9, ts / ta);
        free(Q); free(K); free(V); free(O);
    }
}

/* int8 linear (kern_linear_i8) vs fp32 kern_linear (OpenBLAS) on the text encoder's four
 * shapes at T = 2048 tokens, with 1 and 2 pool threads (fp32 products split over the pool) */
static void bench_linear_i8(void) {
    const int64_t shapes[][2] = {{1152, 384}, {384, 384}, {1536, 384}, {384, 1536}};
    const int64_t n = 2048;
    printf("int8 linear (MiniLM shapes, %ld rows)  threads   fp32 kern_linear   int8    ratio\n", (long)n);
    for (int th = 1; th <= 2; th++) {
        kern_pool *p = kern_pool_create(th);
        for (int s = 0; s < 4; s++) {
            int64_t out = shapes[s][0], in = shapes[s][1];
            float *W = rnd_vec(out * in), *X = rnd_vec(n * in), *b = rnd_vec(out);
            float *Y = malloc(sizeof(float) * n * out);
            kern_i8_weight *q = kern_i8_weight_create(W, out, in);
            double tf, ti, fl = 2.0 * n * in * out;
            TIME_PAIR(tf, kern_linear(p, X, n, in, W, KERN_F32, b, out, Y),
                      ti, kern_linear_i8(p, X, n, q, b, NULL, Y));
            printf("  out=%-5ld in=%-5ld                    %d   %8.1f GF/s   %6.1f GF/s   %.2f\n",
                   (long)out, (long)in, th, fl / tf * 1e-9, fl / ti * 1e-9, tf / ti);
            kern_i8_weight_free(q);
            free(W); free(X); free(b); free(Y);
        }
        kern_pool_free(p);
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--quick") == 0) min_time = 0.01;
    if (argc > 1 && strcmp(argv[argc - 1], "--i8") == 0) { /* this section alone */
        bench_linear_i8();
        return 0;
    }
    kern_pool *pool = kern_pool_create(0);
    const char *ct = getenv("OPENBLAS_CORETYPE");
    printf("bench_gemm: threads=%d cpu path=%s OPENBLAS_CORETYPE=%s cuda=%s\n", kern_pool_size(pool),
           kern_cpu_path(), ct ? ct : "(unset)", kern_cuda_device_name());
    bench_gemm(pool);
    bench_linear(pool);
    bench_dots();
    bench_stream(pool);
    bench_attention(pool);
    bench_linear_i8();
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("peak RSS: %.1f MiB\n", ru.ru_maxrss / 1024.0);
    kern_pool_free(pool);
    return 0;
}
