/* CPU attention. Few queries (decoding): one work item per (query, head) on the pool:
 * scores by dot products (four keys per pass), softmax, weighted sum of V rows with
 * register accumulators. Many queries (encoders, prompts): one item per (head, block of
 * ATT_QB queries); the head's K is packed transposed and its V contiguous once per item
 * range, and register tiles compute 4 queries × 16 keys and 2 queries × 32 values at a
 * time (each K/V load serves several queries). Grouped-query heads share K/V rows.
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
    int n_q; /* tiled schedule only */
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
                  n_heads / n_kv_heads, head_dim, causal, q_pos0, n_q};
    int64_t items = (int64_t)n_q * n_heads;
    /* grain: aim for ~64k multiply-adds per range */
    int64_t work = (int64_t)(n_kv > 0 ? n_kv : 1) * head_dim * 2;
    int64_t grain = work >= 65536 ? 1 : 65536 / work;
    kern_pool_run(p, items, grain, attn_range, &c);
}

#define ATT_QB 32 /* queries per tiled work item */

/* keys visible to query i: all of them, or (causal) those at positions <= q_pos0 + i */
static int64_t att_lim(const attn_ctx *c, int64_t i) {
    int64_t lim = c->n_kv;
    if (c->causal && c->q_pos0 + i + 1 < lim) lim = c->q_pos0 + i + 1;
    return lim < 0 ? 0 : lim;
}

/* KT[k][j] = K[j][k] and Vp[j] = V[j] for kv head g, zero past n_kv up to npad */
static void att_pack(const attn_ctx *c, int g, int64_t npad, float *KT, float *Vp) {
    int64_t d = c->head_dim;
    memset(KT, 0, (size_t)(d * npad) * sizeof *KT);
    memset(Vp + c->n_kv * d, 0, (size_t)((npad - c->n_kv) * d) * sizeof *Vp);
    for (int64_t j = 0; j < c->n_kv; j++) {
        const float *k = c->K + j * c->kv_stride + g * d, *v = c->V + j * c->kv_stride + g * d;
        for (int64_t t = 0; t < d; t++) KT[t * npad + j] = k[t];
        memcpy(Vp + j * d, v, (size_t)d * sizeof *Vp);
    }
}

/* one tiled schedule over the pool: items (head, block of ATT_QB queries), ordered
 * head-major so a range packs each head once; fn is the fp32 or the bf16 range */
static void attn_run_tiled(const kern_ops *ops, kern_pool *p, const float *Q, int q_stride,
                           const float *K, const float *V, int kv_stride, float *out,
                           int out_stride, int n_q, int n_kv, int n_heads, int n_kv_heads,
                           int head_dim, int causal, int64_t q_pos0, kern_range_fn fn) {
    if (n_kv_heads <= 0 || n_heads % n_kv_heads) n_kv_heads = n_heads; /* invalid: no GQA */
    attn_ctx c = {ops, Q, K, V, out, q_stride, kv_stride, out_stride, n_kv, n_heads,
                  n_heads / n_kv_heads, head_dim, causal, q_pos0, n_q};
    kern_pool_run(p, (int64_t)n_heads * ((n_q + ATT_QB - 1) / ATT_QB), 1, fn, &c);
}

static void attn_tiled_range(void *ctx, int64_t b, int64_t e, int thread) {
    const attn_ctx *c = ctx;
    int64_t d = c->head_dim, npad = (c->n_kv + 7) & ~7, nqb = (c->n_q + ATT_QB - 1) / ATT_QB;
    float *KT = malloc((size_t)((2 * d + ATT_QB) * npad) * sizeof *KT);
    if (!KT) { /* out of memory: these items through the row schedule (a score row each) */
        for (int64_t it = b; it < e; it++) {
            int64_t h = it / nqb, q0 = (it % nqb) * ATT_QB, q1 = q0 + ATT_QB < c->n_q ? q0 + ATT_QB : c->n_q;
            for (int64_t i = q0; i < q1; i++)
                attn_range((void *)c, i * c->n_heads + h, i * c->n_heads + h + 1, thread);
        }
        return;
    }
    float *Vp = KT + d * npad, *S = Vp + d * npad, scale = 1.0f / sqrtf((float)d);
    int packed = -1;
    for (int64_t it = b; it < e; it++) {
        int h = (int)(it / nqb), g = h / c->group;
        int64_t q0 = (it % nqb) * ATT_QB, q1 = q0 + ATT_QB < c->n_q ? q0 + ATT_QB : c->n_q;
        if (g != packed) att_pack(c, g, npad, KT, Vp), packed = g;
        int64_t nk = (att_lim(c, q1 - 1) + 7) & ~7; /* the block's widest row, padded */
        const float *Q = c->Q + q0 * c->q_stride + (int64_t)h * d;
        for (int64_t r = 0; r < q1 - q0; r += 4) {
            int nr = q1 - q0 - r < 4 ? (int)(q1 - q0 - r) : 4;
            if (nk) c->ops->qk_tile(Q + r * c->q_stride, c->q_stride, nr, KT, npad, nk, d, scale, S + r * npad, npad);
        }
        for (int64_t i = q0; i < q1; i++) { /* softmax over the visible keys, zeros after */
            float *row = S + (i - q0) * npad;
            int64_t lim = att_lim(c, i);
            if (lim > 0) c->ops->softmax(row, lim);
            if (nk > lim) memset(row + lim, 0, (size_t)(nk - lim) * sizeof *row);
        }
        float *O = c->out + q0 * c->out_stride + (int64_t)h * d;
        for (int64_t r = 0; r < q1 - q0; r += 2) {
            int nr = q1 - q0 - r < 2 ? (int)(q1 - q0 - r) : 2;
            c->ops->pv_tile(S + r * npad, npad, nr, Vp, nk, d, O + r * c->out_stride, c->out_stride);
        }
    }
    free(KT);
}

void kern_attention_ops(const kern_ops *ops, kern_pool *p, const float *Q, int q_stride,
                        const float *K, const float *V, int kv_stride, float *out,
                        int out_stride, int n_q, int n_kv, int n_heads, int n_kv_heads,
                        int head_dim, int causal, int64_t q_pos0) {
    if (n_q < 8 || n_kv < 8 || head_dim % 8 || n_heads <= 0 || !ops->qk_tile) {
        kern_attention_rows_ops(ops, p, Q, q_stride, K, V, kv_stride, out, out_stride, n_q, n_kv,
                                n_heads, n_kv_heads, head_dim, causal, q_pos0);
        return;
    }
    attn_run_tiled(ops, p, Q, q_stride, K, V, kv_stride, out, out_stride, n_q, n_kv, n_heads, n_kv_heads,
                   head_dim, causal, q_pos0, attn_tiled_range);
}

/* the tiled schedule with bf16 products (kernels/attention_bf16.c): K and V packed per kv
 * head, 4 query rows × 32 keys in QK, 4 rows × 32 dims in PV; softmax writes bf16
 * probabilities and PV scales by 1/sum at the store */
static void attn_bf16_range(void *ctx, int64_t b, int64_t e, int thread) {
    const attn_ctx *c = ctx;
    int64_t d = c->head_dim, npad = (c->n_kv + 31) & ~31, nqb = (c->n_q + ATT_QB - 1) / ATT_QB;
    uint32_t *KT2 = malloc((size_t)(d * npad + 2 * d) * sizeof *KT2), *V2 = KT2 ? KT2 + d / 2 * npad : NULL;
    float *S = malloc((size_t)(ATT_QB * npad) * sizeof *S);
    uint16_t *P = malloc((size_t)(ATT_QB * npad) * sizeof *P);
    if (!KT2 || !S || !P) { /* out of memory: the fp32 schedule */
        free(KT2), free(S), free(P);
        attn_tiled_range(ctx, b, e, thread);
        return;
    }
    uint32_t *q2 = V2 + npad / 2 * d; /* 4 packed query rows */
    float inv[ATT_QB], scale = 1.0f / sqrtf((float)d);
    int packed = -1;
    for (int64_t it = b; it < e; it++) {
        int h = (int)(it / nqb), g = h / c->group;
        int64_t q0 = (it % nqb) * ATT_QB, q1 = q0 + ATT_QB < c->n_q ? q0 + ATT_QB : c->n_q;
        if (g != packed)
            kern_bf16_pack_kv(c->K + (int64_t)g * d, c->V + (int64_t)g * d, c->kv_stride, c->n_kv, d, npad, KT2, V2),
                packed = g;
        int64_t nk = (att_lim(c, q1 - 1) + 31) & ~31; /* the block's widest row, padded */
        const float *Q = c->Q + q0 * c->q_stride + (int64_t)h * d;
        for (int64_t r = 0; r < q1 - q0; r += 4) {
            int nr = q1 - q0 - r < 4 ? (int)(q1 - q0 - r) : 4;
            kern_bf16_pack_q(Q + r * c->q_stride, c->q_stride, nr, d, q2);
            kern_bf16_qk_tile(q2, nr, KT2, npad, nk, d, scale, S + r * npad, npad);
        }
        for (int64_t i = q0; i < q1; i++)
            inv[i - q0] = kern_bf16_softmax_row(S + (i - q0) * npad, att_lim(c, i), nk, P + (i - q0) * npad);
        float *O = c->out + q0 * c->out_stride + (int64_t)h * d;
        for (int64_t r = 0; r < q1 - q0; r += 4) {
            int nr = q1 - q0 - r < 4 ? (int)(q1 - q0 - r) : 4;
            kern_bf16_pv_tile(P + r * npad, npad, nr, V2, nk, d, inv + r, O + r * c->out_stride, c->out_stride);
        }
    }
    free(KT2), free(S), free(P);
}

void kern_attention_bf16(kern_pool *p, const float *Q, int q_stride, const float *K, const float *V,
                         int kv_stride, float *out, int out_stride, int n_q, int n_kv, int n_heads,
                         int n_kv_heads, int head_dim, int causal, int64_t q_pos0) {
    if (kern_cuda_available() || n_q < 8 || n_kv < 8 || head_dim % 32 || n_heads <= 0 ||
        !kern_bf16_available()) {
        kern_attention(p, Q, q_stride, K, V, kv_stride, out, out_stride, n_q, n_kv, n_heads,
                       n_kv_heads, head_dim, causal, q_pos0);
        return;
    }
    attn_run_tiled(kern_ops_get(), p, Q, q_stride, K, V, kv_stride, out, out_stride, n_q, n_kv, n_heads,
                   n_kv_heads, head_dim, causal, q_pos0, attn_bf16_range);
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
