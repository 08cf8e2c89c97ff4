/* CPU attention: one work item per (query, head) on the pool: scores by dot products
 * (four keys per pass), softmax, weighted sum of V rows with register accumulators.
 * Grouped-query heads share K/V rows.
 * (A schedule with two sgemm calls per head block was measured too: ~1.5x faster on one
 * quiet core, but OpenBLAS's own threads collide with the pool's and it fell to 0.2x
 * under load, so the pool-only schedule stays.) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_internal.h"

typedef struct {
    const kern_ops *ops;
    const float *Q, *K, *V;
    float *out;
    int q_stride, kv_stride, out_stride, n_kv, n_heads, group, head_dim, causal;
    int64_t q_pos0;
} attn_ctx;

static void attn_range(void *ctx, int64_t b, int64_t e, int thread) {
    const attn_ctx *c = ctx;
    float *sc = malloc((size_t)(c->n_kv > 0 ? c->n_kv : 1) * sizeof *sc);
    float scale = 1.0f / sqrtf((float)c->head_dim);
    for (int64_t it = b; it < e; it++) {
        int64_t i = it / c->n_heads;
        int h = (int)(it % c->n_heads), g = h / c->group;
        const float *q = c->Q + i * c->q_stride + (int64_t)h * c->head_dim;
        float *o = c->out + i * c->out_stride + (int64_t)h * c->head_dim;
        int64_t lim = c->n_kv;
        if (c->causal && c->q_pos0 + i + 1 < lim) lim = c->q_pos0 + i + 1;
        if (lim <= 0 || !sc) {
            memset(o, 0, (size_t)c->head_dim * sizeof *o);
            continue;
        }
        c->ops->dot_rows(q, c->K + (int64_t)g * c->head_dim, c->kv_stride, lim, c->head_dim, scale, sc);
        c->ops->softmax(sc, lim);
        c->ops->wsum_rows(sc, c->V + (int64_t)g * c->head_dim, c->kv_stride, lim, c->head_dim, o);
    }
    free(sc);
}

void kern_attention_rows_ops(const kern_ops *ops, kern_pool *p, const float *Q, int q_stride,
                             const float *K, const float *V, int kv_stride, float *out,
                             int out_stride, int n_q, int n_kv, int n_heads, int n_kv_heads,
                             int head_dim, int causal, int64_t q_pos0) {
    if (n_q <= 0 || n_heads <= 0 || head_dim <= 0) return;
    if (n_kv_heads <= 0 || n_heads % n_kv_heads) n_kv_heads = n_heads; /* invalid: no GQA */
    attn_ctx c = {ops, Q, K, V, out, q_stride, kv_stride, out_stride, n_kv, n_heads,
                  n_heads / n_kv_heads, head_dim, causal, q_pos0};
    int64_t items = (int64_t)n_q * n_heads;
    /* grain: aim for ~64k multiply-adds per range */
    int64_t work = (int64_t)(n_kv > 0 ? n_kv : 1) * head_dim * 2;
    int64_t grain = work >= 65536 ? 1 : 65536 / work;
    kern_pool_run(p, items, grain, attn_range, &c);
}

void kern_attention_ops(const kern_ops *ops, kern_pool *p, const float *Q, int q_stride,
                        const float *K, const float *V, int kv_stride, float *out,
                        int out_stride, int n_q, int n_kv, int n_heads, int n_kv_heads,
                        int head_dim, int causal, int64_t q_pos0) {
    kern_attention_rows_ops(ops, p, Q, q_stride, K, V, kv_stride, out, out_stride, n_q, n_kv,
                            n_heads, n_kv_heads, head_dim, causal, q_pos0);
}

void kern_attention(kern_pool *p, const float *Q, int q_stride, const float *K, const float *V,
                    int kv_stride, float *out, int out_stride, int n_q, int n_kv, int n_heads,
                    int n_kv_heads, int head_dim, int causal, int64_t q_pos0) {
    if (kern_cuda_available() &&
        kern_cuda_try_attention(Q, q_stride, K, V, kv_stride, out, out_stride, n_q, n_kv, n_heads,
                                n_kv_heads, head_dim, causal, q_pos0) == 0)
        return;
    kern_attention_ops(kern_ops_get(), p, Q, q_stride, K, V, kv_stride, out, out_stride, n_q,
                       n_kv, n_heads, n_kv_heads, head_dim, causal, q_pos0);
}

/* ---- blocked attention steps (online softmax) ---------------------------------- */
void kern_attn_scores_ops(const kern_ops *ops, const float *Q, int q_stride, int R, const float *K,
                          int kv_stride, int kn, int d, float scale, float *S, int s_stride) {
    if (kn <= 0 || d <= 0) return;
    for (int r = 0; r < R; r++)
        ops->dot_rows(Q + (int64_t)r * q_stride, K, kv_stride, kn, d, scale, S + (int64_t)r * s_stride);
}

void kern_attn_update_ops(const kern_ops *ops, float *S, int s_stride, int R, int kn,
                          const float *V, int kv_stride, int d, float *m, float *l, float *acc,
                          int acc_stride) {
    if (kn <= 0) return;
    for (int r = 0; r < R; r++) {
        float *row = S + (int64_t)r * s_stride, old = m[r];
        float z = ops->softmax_step(row, kn, &m[r]);
        if (m[r] == -INFINITY) continue; /* nothing visible yet: state unchanged */
        float corr = old == -INFINITY ? 0.0f : expf(old - m[r]);
        l[r] = l[r] * corr + z;
        ops->wsum_acc(row, V, kv_stride, kn, d, corr, acc + (int64_t)r * acc_stride);
    }
}

void kern_attn_scores(const float *Q, int q_stride, int R, const float *K, int kv_stride, int kn,
                      int d, float scale, float *S, int s_stride) {
    kern_attn_scores_ops(kern_ops_get(), Q, q_stride, R, K, kv_stride, kn, d, scale, S, s_stride);
}

void kern_attn_update(float *S, int s_stride, int R, int kn, const float *V, int kv_stride, int d,
                      float *m, float *l, float *acc, int acc_stride) {
    kern_attn_update_ops(kern_ops_get(), S, s_stride, R, kn, V, kv_stride, d, m, l, acc, acc_stride);
}

void kern_attn_merge(int n_part, int R, int d, const float *m, const float *l, const float *acc,
                     int acc_stride, float *out, int out_stride) {
    for (int r = 0; r < R; r++) {
        float M = -INFINITY, L = 0;
        for (int k = 0; k < n_part; k++) M = fmaxf(M, m[k * R + r]);
        float *o = out + (int64_t)r * out_stride;
        for (int i = 0; i < d; i++) o[i] = 0;
        if (M == -INFINITY) continue;
        for (int k = 0; k < n_part; k++) {
            if (m[k * R + r] == -INFINITY) continue;
            float w = expf(m[k * R + r] - M);
            L += w * l[k * R + r];
            const float *a = acc + ((int64_t)k * R + r) * acc_stride;
            for (int i = 0; i < d; i++) o[i] += w * a[i];
        }
        float inv = L > 0 ? 1.0f / L : 0.0f;
        for (int i = 0; i < d; i++) o[i] *= inv;
    }
}
