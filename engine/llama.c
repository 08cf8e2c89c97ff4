/* Decoder forward pass over GGUF weights (llama, qwen2, qwen3, gemma3; loaded by
 * engine/load.c): the blocked KV cache (fp32 / fp16 / int4), attention with
 * sliding-window and local+global patterns (per layer for gemma3), chunked prefill and
 * single-token decode, all on the shared kernels. */
#include "engine/engine_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int set_err(struct mmrag_session *s, int rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    return rc;
}


static size_t block_bytes(const struct mmrag_engine *e, int kv_type, int B) {
    size_t n = (size_t)B * (size_t)e->n_kv_head * (size_t)e->head_dim;
    return kv_type == MMRAG_KV_F32 ? n * 4 : kv_type == MMRAG_KV_F16 ? n * 2 : n / 2;
}

/* int4 scales per (block, kv head): K uses index 0, V index 1 */
static int scales_per_head(const struct mmrag_session *s, int v) {
    if (s->e->p.kv_type == MMRAG_KV_INT4) return 1;
    if (s->e->p.kv_type != MMRAG_KV_INT4_CH) return 0;
    return v ? s->B : s->e->head_dim;
}

double mmrag_engine_kv_bytes_per_token(const struct mmrag_engine *e, int32_t kv_type) {
    int B = e->p.kv_block;
    double per_block = (double)block_bytes(e, kv_type, B);
    if (kv_type == MMRAG_KV_INT4) per_block += 4.0 * e->n_kv_head; /* fp32 scales */
    if (kv_type == MMRAG_KV_INT4_CH) per_block += 2.0 * (e->head_dim + B) * e->n_kv_head; /* fp32 scales: K hd + V B, halved as ×2 below */
    return 2.0 * e->n_layer * per_block / B;
}

/* ---- sessions ------------------------------------------------------------------- */
struct mmrag_session *mmrag_session_create(struct mmrag_engine *e, char *err, size_t errlen) {
    struct mmrag_session *s = calloc(1, sizeof *s);
    if (!s) goto nomem;
    s->e = e;
    s->n_ctx = e->p.n_ctx;
    s->B = e->p.kv_block;
    s->n_batch = e->p.n_batch;
    s->n_blocks = (s->n_ctx + s->B - 1) / s->B;
    s->kv_dim = e->n_kv_head * e->head_dim;
    s->block_bytes = block_bytes(e, e->p.kv_type, s->B);
    s->scale_stride = e->head_dim > s->B ? e->head_dim : s->B;
    s->pool = kern_pool_create(e->p.n_threads);
    if (!s->pool) goto nomem;
    s->n_threads = kern_pool_size(s->pool);
    size_t nb = (size_t)s->n_batch;
    s->x = malloc(nb * e->n_embd * sizeof(float));
    s->h = malloc(nb * e->n_embd * sizeof(float));
    s->q = malloc(nb * e->q_dim * sizeof(float));
    s->att = malloc(nb * e->q_dim * sizeof(float));
    s->k = malloc(nb * s->kv_dim * sizeof(float));
    s->v = malloc(nb * s->kv_dim * sizeof(float));
    s->gate = malloc(nb * e->n_ff * sizeof(float));
    s->up = malloc(nb * e->n_ff * sizeof(float));
    /* two angle tables: global layers, then gemma3's local layers (their own base) */
    s->rope = malloc(2 * nb * (size_t)(e->n_rot > 1 ? e->n_rot : 2) * sizeof(float));
    s->logits = calloc((size_t)e->n_vocab, sizeof(float));
    int group = e->n_head / e->n_kv_head;
    size_t rmax = (size_t)16 * group; /* ATT_QT query rows x heads per group */
    s->scratch_per_thread = (size_t)2 * s->B * e->head_dim + rmax * (2 * e->head_dim + s->B + 2);
    s->scratch = malloc((size_t)s->n_threads * s->scratch_per_thread * sizeof(float));
    s->part = malloc((size_t)e->n_kv_head * ENGINE_ATT_SPLIT * group * (e->head_dim + 2) * sizeof(float));
    s->kv = calloc((size_t)e->n_layer, sizeof *s->kv);
    if (!s->x || !s->h || !s->q || !s->att || !s->k || !s->v || !s->gate || !s->up || !s->rope ||
        !s->logits || !s->scratch || !s->part || !s->kv)
        goto nomem;
    for (int l = 0; l < e->n_layer; l++) {
        kv_layer *L = &s->kv[l];
        L->k = calloc((size_t)s->n_blocks, sizeof *L->k);
        L->v = calloc((size_t)s->n_blocks, sizeof *L->v);
        L->ks = calloc((size_t)s->n_blocks * e->n_kv_head * s->scale_stride, sizeof *L->ks);
        L->vs = calloc((size_t)s->n_blocks * e->n_kv_head * s->scale_stride, sizeof *L->vs);
        L->kstage = malloc((size_t)s->B * s->kv_dim * sizeof(float));
        L->vstage = malloc((size_t)s->B * s->kv_dim * sizeof(float));
        if (!L->k || !L->v || !L->ks || !L->vs || !L->kstage || !L->vstage) goto nomem;
    }
    return s;
nomem:
    snprintf(err, errlen, "engine: out of memory creating a session");
    mmrag_session_free(s);
    return NULL;
}

void mmrag_session_reset(struct mmrag_session *s) {
    for (int l = 0; l < s->e->n_layer; l++)
        for (int b = 0; b < s->n_blocks; b++) {
            free(s->kv[l].k[b]);
            free(s->kv[l].v[b]);
            s->kv[l].k[b] = s->kv[l].v[b] = NULL;
        }
    s->n_past = s->n_evicted = 0;
}

void mmrag_session_free(struct mmrag_session *s) {
    if (!s) return;
    if (s->kv) {
        mmrag_session_reset(s);
        for (int l = 0; l < s->e->n_layer; l++) {
            kv_layer *L = &s->kv[l];
            free(L->k); free(L->v); free(L->ks); free(L->vs); free(L->kstage); free(L->vstage);
        }
        free(s->kv);
    }
    free(s->x); free(s->h); free(s->q); free(s->att); free(s->k); free(s->v);
    free(s->gate); free(s->up); free(s->rope); free(s->logits); free(s->scratch); free(s->part);
    kern_pool_free(s->pool);
    free(s);
}

const char *mmrag_session_errmsg(const struct mmrag_session *s) { return s->err; }
int32_t mmrag_session_n_past(const struct mmrag_session *s) { return s->n_past; }
const float *mmrag_session_logits(const struct mmrag_session *s) { return s->logits; }

size_t mmrag_session_kv_bytes(const struct mmrag_session *s) {
    size_t full = (size_t)(s->n_past / s->B - s->n_evicted);
    size_t per = 2 * s->block_bytes +
                 4u * s->e->n_kv_head * (size_t)(scales_per_head(s, 0) + scales_per_head(s, 1));
    return (size_t)s->e->n_layer * (full * per + 2 * (size_t)s->B * s->kv_dim * sizeof(float));
}

/* Converts the full stage block b of layer L to the cache type. */
static int finalize_block(struct mmrag_session *s, kv_layer *L, int b) {
    const struct mmrag_engine *e = s->e;
    for (int w = 0; w < 2; w++) {
        const float *src = w ? L->vstage : L->kstage;
        void *dst = malloc(s->block_bytes);
        if (!dst) return -1;
        int hd = e->head_dim;
        if (e->p.kv_type == MMRAG_KV_F32 || e->p.kv_type == MMRAG_KV_F16) {
            /* head-major [g][t][hd]: attention streams one head's block contiguously (the
             * stage's [t][g][hd] order made decoding read 256-byte pieces at a 768-byte
             * stride, ~40% under the DRAM bandwidth) */
            for (int g = 0; g < e->n_kv_head; g++)
                for (int t = 0; t < s->B; t++) {
                    const float *x = src + (size_t)t * s->kv_dim + (size_t)g * hd;
                    size_t o = ((size_t)g * s->B + t) * hd;
                    if (e->p.kv_type == MMRAG_KV_F32) {
                        memcpy((float *)dst + o, x, (size_t)hd * sizeof(float));
                    } else {
                        uint16_t *d = (uint16_t *)dst + o;
                        for (int i = 0; i < hd; i++) d[i] = kern_fp32_to_fp16(x[i]);
                    }
                }
        } else {
            /* int4, symmetric: q = clip(round(x/s), -8, 7), s = max|x|/7 over the group that
             * shares a scale: the whole block of a head (INT4), or per channel for K and per
             * token for V within the block of a head (INT4_CH) */
            int fine = e->p.kv_type == MMRAG_KV_INT4_CH;
            int hd = e->head_dim, ns = scales_per_head(s, w);
            uint8_t *d = dst;
            for (int g = 0; g < e->n_kv_head; g++) {
                float *scale = (w ? L->vs : L->ks) + ((size_t)b * e->n_kv_head + g) * s->scale_stride;
                for (int k = 0; k < ns; k++) scale[k] = 0;
                for (int t = 0; t < s->B; t++)
                    for (int i = 0; i < hd; i++) {
                        float a = fabsf(src[(size_t)t * s->kv_dim + g * hd + i]);
                        int k = !fine ? 0 : w ? t : i;
                        if (a > scale[k]) scale[k] = a;
                    }
                for (int k = 0; k < ns; k++) scale[k] /= 7.0f;
                /* packed per head: [g][t][hd/2] so a head's block is contiguous */
                uint8_t *o = d + ((size_t)g * s->B * hd) / 2;
                for (int t = 0; t < s->B; t++)
                    for (int i = 0; i < hd; i += 2) {
                        const float *x = src + (size_t)t * s->kv_dim + g * hd + i;
                        float s0 = scale[!fine ? 0 : w ? t : i], s1 = scale[!fine ? 0 : w ? t : i + 1];
                        int q0 = s0 > 0 ? (int)lrintf(x[0] / s0) : 0;
                        int q1 = s1 > 0 ? (int)lrintf(x[1] / s1) : 0;
                        q0 = q0 < -8 ? -8 : q0 > 7 ? 7 : q0;
                        q1 = q1 < -8 ? -8 : q1 > 7 ? 7 : q1;
                        o[((size_t)t * hd + i) / 2] = (uint8_t)((q0 + 8) | ((q1 + 8) << 4));
                    }
            }
        }
        if (w) L->v[b] = dst; else L->k[b] = dst;
    }
    return 0;
}

/* Fills kd/vd [B][hd] (fp32) with kv head g of completed block b; returns pointers and
 * the row stride to read them with (f32 blocks are read in place). */
static void load_block(const struct mmrag_session *s, const kv_layer *L, int b, int g, float *kd,
                       float *vd, const float **kp, const float **vp, int *stride) {
    const struct mmrag_engine *e = s->e;
    int hd = e->head_dim, B = s->B;
    int kvt = e->p.kv_type;
    if (kvt == MMRAG_KV_F32) { /* head-major blocks, see finalize_block */
        *kp = (const float *)L->k[b] + (size_t)g * B * hd;
        *vp = (const float *)L->v[b] + (size_t)g * B * hd;
        *stride = hd;
        return;
    }
    *stride = hd;
    *kp = kd;
    *vp = vd;
    if (kvt == MMRAG_KV_F16) {
        kern_to_f32(KERN_F16, (const uint16_t *)L->k[b] + (size_t)g * B * hd, kd, (int64_t)B * hd);
        kern_to_f32(KERN_F16, (const uint16_t *)L->v[b] + (size_t)g * B * hd, vd, (int64_t)B * hd);
        return;
    }
    int fine = kvt == MMRAG_KV_INT4_CH;
    const float *ksc = L->ks + ((size_t)b * e->n_kv_head + g) * s->scale_stride;
    const float *vsc = L->vs + ((size_t)b * e->n_kv_head + g) * s->scale_stride;
    const uint8_t *kq = (const uint8_t *)L->k[b] + ((size_t)g * B * hd) / 2;
    const uint8_t *vq = (const uint8_t *)L->v[b] + ((size_t)g * B * hd) / 2;
    for (int t = 0; t < B; t++)
        for (int i = 0; i < hd; i += 2) {
            int j = (t * hd + i) / 2;
            float k0 = ksc[fine ? i : 0], k1 = ksc[fine ? i + 1 : 0], v = vsc[fine ? t : 0];
            kd[t * hd + i] = (float)((kq[j] & 15) - 8) * k0;
            kd[t * hd + i + 1] = (float)((kq[j] >> 4) - 8) * k1;
            vd[t * hd + i] = (float)((vq[j] & 15) - 8) * v;
            vd[t * hd + i + 1] = (float)((vq[j] >> 4) - 8) * v;
        }
}

/* Deterministic pick of random (query block, key block) pairs for the sparse pattern. */
static int random_block(const struct mmrag_engine *e, int64_t kp, int64_t qp) {
    uint64_t z = ((uint64_t)e->p.sparse_seed << 40) ^ ((uint64_t)(qp / e->p.kv_block) << 20) ^
                 (uint64_t)(kp / e->p.kv_block);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53 < e->p.sparse_random;
}

/* The attention pattern of one layer: the session's (e->p), except gemma3's local layers,
 * which slide over their own window (or the session's, when it slides over fewer). */
typedef struct { int mode, window; } attn_pat;
static attn_pat layer_pattern(const struct mmrag_engine *e, int l) {
    attn_pat p = {e->p.attn_mode, e->p.window};
    if (!engine_arch_is_local(e, l)) return p;
    p.mode = MMRAG_ATTN_SLIDING;
    p.window = e->p.attn_mode == MMRAG_ATTN_SLIDING && e->p.window < e->swa_window ? e->p.window
                                                                                  : e->swa_window;
    return p;
}

static int key_visible(const struct mmrag_engine *e, attn_pat pat, int64_t kp, int64_t qp) {
    if (kp > qp) return 0;
    if (pat.mode == MMRAG_ATTN_FULL) return 1;
    if (kp > qp - pat.window) return 1;
    if (pat.mode != MMRAG_ATTN_SPARSE) return 0;
    return kp < e->p.n_global || (e->p.sparse_random > 0 && random_block(e, kp, qp));
}

typedef struct {
    struct mmrag_session *s;
    const kv_layer *L;
    int64_t p0;
    int n, nsplit;
    attn_pat pat;
} attn_ctx;

#define ATT_QT 16 /* queries per attention task */

/* Keys of block [k0, k0+kn) that some row of the tile (positions qfirst..) cannot see:
 * then scores are masked element by element. Full attention masks only the causal
 * diagonal; the other patterns mask wherever a key is not plainly visible to all. */
static int block_needs_mask(attn_pat pat, int64_t k0, int kn, int64_t qfirst) {
    if (k0 + kn - 1 > qfirst) return 1;
    if (pat.mode == MMRAG_ATTN_FULL) return 0;
    return k0 <= qfirst + ATT_QT - pat.window; /* may fall out of some row's window */
}

/* Running online-softmax state of R rows: m, l [R], acc [R][hd]. */
typedef struct { float *m, *l, *acc; } attn_state;

/* Folds key block b (kv head g) into the state of the tile's R rows (queries at qfirst..,
 * rows ordered query x head of g's group, queries qg [R][hd]); a block no row can see is
 * skipped. kd/vd: scratch for a dequantized block, sc: scores [R][B]. */
static void attn_block(const attn_ctx *c, int b, int g, const float *qg, int R, int64_t qfirst,
                       int64_t qlast, float *kd, float *vd, float *sc, attn_state st) {
    struct mmrag_session *s = c->s;
    const struct mmrag_engine *e = s->e;
    int hd = e->head_dim, group = e->n_head / e->n_kv_head, B = s->B;
    int64_t k0 = (int64_t)b * B;
    int kn = (int)(k0 + B - 1 < qlast ? B : qlast - k0 + 1);
    /* skip blocks no query of the tile can see */
    if (c->pat.mode != MMRAG_ATTN_FULL &&
        !(c->pat.mode == MMRAG_ATTN_SPARSE && (k0 < e->p.n_global || e->p.sparse_random > 0)) &&
        k0 + kn - 1 <= qfirst - c->pat.window)
        return;
    const float *kp, *vp;
    int stride;
    if (b < (int)((c->p0 + c->n) / B)) {
        if (!c->L->k[b]) return; /* evicted: out of every window from here on */
        load_block(s, c->L, b, g, kd, vd, &kp, &vp, &stride);
    } else {
        kp = c->L->kstage + g * hd;
        vp = c->L->vstage + g * hd;
        stride = s->kv_dim;
    }
    kern_attn_scores(qg, hd, R, kp, stride, kn, hd, e->attn_scale, sc, B);
    if (block_needs_mask(c->pat, k0, kn, qfirst))
        for (int r = 0; r < R; r++) {
            int64_t qp = qfirst + r / group;
            float *row = sc + (size_t)r * B;
            for (int t = 0; t < kn; t++)
                if (!key_visible(e, c->pat, k0 + t, qp)) row[t] = -INFINITY;
        }
    kern_attn_update(sc, B, R, kn, vp, stride, hd, st.m, st.l, st.acc, hd);
}

/* Prefill: one task = (kv head g, tile of up to ATT_QT queries), flash-attention style
 * over the visible KV blocks for all query heads of g's group, normalized into s->att. */
static void attn_task(void *vctx, int64_t begin, int64_t end, int thread) {
    attn_ctx *c = vctx;
    struct mmrag_session *s = c->s;
    const struct mmrag_engine *e = s->e;
    int hd = e->head_dim, group = e->n_head / e->n_kv_head, B = s->B;
    int ntile = (c->n + ATT_QT - 1) / ATT_QT, RMAX = ATT_QT * group;
    float *kd = s->scratch + (size_t)thread * s->scratch_per_thread;
    float *vd = kd + (size_t)B * hd;
    float *qg = vd + (size_t)B * hd;          /* [R][hd] */
    float *acc = qg + (size_t)RMAX * hd;      /* [R][hd] */
    float *sc = acc + (size_t)RMAX * hd;      /* [R][B] */
    float *mx = sc + (size_t)RMAX * B, *sum = mx + RMAX;
    for (int64_t task = begin; task < end; task++) {
        int g = (int)(task / ntile), i0 = (int)(task % ntile) * ATT_QT;
        int nq = c->n - i0 < ATT_QT ? c->n - i0 : ATT_QT, R = nq * group;
        int64_t qlast = c->p0 + i0 + nq - 1, qfirst = c->p0 + i0;
        for (int i = 0; i < nq; i++)
            memcpy(qg + (size_t)i * group * hd, s->q + (size_t)(i0 + i) * e->q_dim + (size_t)g * group * hd,
                   (size_t)group * hd * sizeof *qg);
        for (int r = 0; r < R; r++) { mx[r] = -INFINITY; sum[r] = 0; }
        memset(acc, 0, (size_t)R * hd * sizeof *acc);
        attn_state st = {mx, sum, acc};
        for (int b = 0; b <= (int)(qlast / B); b++)
            attn_block(c, b, g, qg, R, qfirst, qlast, kd, vd, sc, st);
        for (int i = 0; i < nq; i++) {
            float *out = s->att + (size_t)(i0 + i) * e->q_dim + (size_t)g * group * hd;
            for (int h = 0; h < group; h++) {
                int r = i * group + h;
                float inv = sum[r] > 0 ? 1.0f / sum[r] : 0.0f;
                for (int d = 0; d < hd; d++) out[h * hd + d] = acc[(size_t)r * hd + d] * inv;
            }
        }
    }
}

/* Decoding (one query): one task = a contiguous range of key blocks (split sp of
 * nsplit) for every kv head, so each block is streamed from memory once and whole; the
 * partial states go to s->part ([g] → acc [ENGINE_ATT_SPLIT][group][hd], m, l) and are
 * merged after the run. */
static void attn_task_decode(void *vctx, int64_t begin, int64_t end, int thread) {
    attn_ctx *c = vctx;
    struct mmrag_session *s = c->s;
    const struct mmrag_engine *e = s->e;
    int hd = e->head_dim, group = e->n_head / e->n_kv_head, B = s->B;
    float *kd = s->scratch + (size_t)thread * s->scratch_per_thread;
    float *vd = kd + (size_t)B * hd, *sc = vd + (size_t)B * hd; /* sc [group][B] */
    int64_t qp = c->p0;
    int nb = (int)(qp / B) + 1;
    for (int64_t sp = begin; sp < end; sp++) {
        int b0 = (int)(nb * sp / c->nsplit), b1 = (int)(nb * (sp + 1) / c->nsplit);
        attn_state st[ENGINE_ATT_MAXKV];
        for (int g = 0; g < e->n_kv_head; g++) {
            float *pp = s->part + (size_t)g * ENGINE_ATT_SPLIT * group * (hd + 2);
            st[g].acc = pp + (size_t)sp * group * hd;
            st[g].m = pp + (size_t)ENGINE_ATT_SPLIT * group * hd + (size_t)sp * group;
            st[g].l = st[g].m + (size_t)ENGINE_ATT_SPLIT * group;
            for (int r = 0; r < group; r++) { st[g].m[r] = -INFINITY; st[g].l[r] = 0; }
            memset(st[g].acc, 0, (size_t)group * hd * sizeof(float));
        }
        for (int b = b0; b < b1; b++)
            for (int g = 0; g < e->n_kv_head; g++)
                attn_block(c, b, g, s->q + (size_t)g * group * hd, group, qp, qp, kd, vd, sc, st[g]);
    }
}

/* Attention of the chunk's n queries (s->q) into s->att. */
static void attention(struct mmrag_session *s, const kv_layer *L, attn_pat pat, int64_t p0, int n) {
    const struct mmrag_engine *e = s->e;
    int group = e->n_head / e->n_kv_head, hd = e->head_dim;
    if (n > 1 || e->n_kv_head > ENGINE_ATT_MAXKV) {
        attn_ctx ac = {s, L, p0, n, 1, pat};
        kern_pool_run(s->pool, (int64_t)e->n_kv_head * ((n + ATT_QT - 1) / ATT_QT), 1, attn_task, &ac);
        return;
    }
    /* splits: a few per thread for balance, each covering a few blocks */
    int nb = (int)(p0 / s->B) + 1, nsplit = 4 * s->n_threads;
    if (nsplit > nb / 2) nsplit = nb / 2;
    if (s->n_threads == 1 || nsplit < 1) nsplit = 1;
    if (nsplit > ENGINE_ATT_SPLIT) nsplit = ENGINE_ATT_SPLIT;
    attn_ctx ac = {s, L, p0, 1, nsplit, pat};
    kern_pool_run(s->pool, nsplit, 1, attn_task_decode, &ac);
    for (int g = 0; g < e->n_kv_head; g++) {
        const float *pp = s->part + (size_t)g * ENGINE_ATT_SPLIT * group * (hd + 2);
        const float *m = pp + (size_t)ENGINE_ATT_SPLIT * group * hd, *l = m + ENGINE_ATT_SPLIT * group;
        kern_attn_merge(nsplit, group, hd, m, l, pp, hd, s->att + (size_t)g * group * hd, hd);
    }
}

/* Token embeddings of the chunk into s->x (gemma3: scaled by sqrt(n_embd)). */
static void embed(struct mmrag_session *s, const int32_t *ids, int n) {
    const struct mmrag_engine *e = s->e;
    int D = e->n_embd;
    size_t erow = kern_type_row_bytes((kern_type)e->tok_embd->type, D);
    for (int i = 0; i < n; i++) {
        float *x = s->x + (size_t)i * D;
        kern_to_f32((kern_type)e->tok_embd->type, (const char *)e->tok_embd->data + erow * ids[i], x, D);
        if (e->embd_scale > 0)
            for (int d = 0; d < D; d++) x[d] *= e->embd_scale;
    }
}

/* Rotary angles once per position, shared by every layer's q and k: rows [0, n) of
 * s->rope for global layers, rows [n_batch, n_batch + n) for gemma3's local layers. */
static void rope_tables(struct mmrag_session *s, int n, int nrot) {
    const struct mmrag_engine *e = s->e;
    int half = nrot / 2;
    for (int i = 0; i < n; i++) {
        float *g = s->rope + (size_t)i * nrot;
        kern_rope_angles_ff(nrot, s->n_past + i, e->rope_base, e->rope_freq_scale, e->rope_freqs, g, g + half);
        if (e->swa_window > 0) {
            float *lc = s->rope + (size_t)(s->n_batch + i) * nrot;
            kern_rope_angles(nrot, s->n_past + i, e->rope_base_local, 1.0f, lc, lc + half);
        }
    }
}

/* RMSNorm of every head (hd values) of n rows of `heads` heads (row stride heads·hd) */
static void head_norm(float *x, int n, int heads, int hd, const float *w, float eps) {
    for (int64_t r = 0; r < (int64_t)n * heads; r++) kern_rmsnorm(x + r * hd, x + r * hd, hd, w, eps);
}

static void linear(struct mmrag_session *s, const float *X, int n, int64_t in, const mf_tensor *W,
                   const float *bias, int64_t out, float *Y) {
    kern_linear(s->pool, X, n, in, W->data, (kern_type)W->type, bias, out, Y);
}

/* Attention block of layer l for the chunk's n rows: x += [post-norm](wo · attn(q, k, v)). */
static int attn_layer(struct mmrag_session *s, int l, int n, int nrot) {
    const struct mmrag_engine *e = s->e;
    const engine_layer *W = &e->layers[l];
    kv_layer *L = &s->kv[l];
    int D = e->n_embd, KV = s->kv_dim, Q = e->q_dim, hd = e->head_dim, half = nrot / 2;
    int64_t p0 = s->n_past;
    for (int i = 0; i < n; i++)
        kern_rmsnorm(s->x + (size_t)i * D, s->h + (size_t)i * D, D, e->norm_w[2 * l], e->eps);
    linear(s, s->h, n, D, W->wq, W->bq, Q, s->q);
    linear(s, s->h, n, D, W->wk, W->bk, KV, s->k);
    linear(s, s->h, n, D, W->wv, W->bv, KV, s->v);
    if (W->q_norm) head_norm(s->q, n, e->n_head, hd, W->q_norm, e->eps);
    if (W->k_norm) head_norm(s->k, n, e->n_kv_head, hd, W->k_norm, e->eps);
    const float *rope = s->rope + (W->local ? (size_t)s->n_batch * nrot : 0);
    for (int i = 0; i < n; i++) {
        int64_t pos = p0 + i;
        const float *cs = rope + (size_t)i * nrot;
        kern_rope_apply(s->q + (size_t)i * Q, e->n_head, hd, nrot, cs, cs + half, e->rope_neox);
        kern_rope_apply(s->k + (size_t)i * KV, e->n_kv_head, hd, nrot, cs, cs + half, e->rope_neox);
        int slot = (int)(pos % s->B);
        memcpy(L->kstage + (size_t)slot * KV, s->k + (size_t)i * KV, KV * sizeof(float));
        memcpy(L->vstage + (size_t)slot * KV, s->v + (size_t)i * KV, KV * sizeof(float));
        if (slot == s->B - 1 && finalize_block(s, L, (int)(pos / s->B)))
            return set_err(s, MMRAG_ENGINE_NOMEM, "engine: out of memory for the KV cache");
    }
    /* attention reads completed blocks from the cache, the rest from the stage; a
     * chunk that crossed a block boundary has its earlier tokens in completed blocks */
    attention(s, L, layer_pattern(e, l), p0, n);
    linear(s, s->att, n, Q, W->wo, NULL, D, s->h);
    if (W->post_attn_norm)
        for (int i = 0; i < n; i++)
            kern_rmsnorm(s->h + (size_t)i * D, s->h + (size_t)i * D, D, W->post_attn_norm, e->eps);
    kern_add(s->x, s->h, (int64_t)n * D);
    return 0;
}

/* gate = act(gate) ⊙ up for a range of rows (a pool task: in a prompt the activation
 * covers n·n_ff values, too many for one thread while the other waits) */
typedef struct { float *gate; const float *up; int64_t ff; int gelu; } glu_ctx;
static void glu_rows(void *ctx, int64_t b, int64_t e, int thread) {
    const glu_ctx *c = ctx;
    (void)thread;
    float *g = c->gate + b * c->ff;
    const float *u = c->up + b * c->ff;
    if (c->gelu) kern_geglu(g, u, g, (e - b) * c->ff);
    else kern_swiglu(g, u, g, (e - b) * c->ff);
}

/* Feed-forward block of layer l: x += [post-norm](down · act(gate) ⊙ up). */
static void ffn_layer(struct mmrag_session *s, int l, int n) {
    const struct mmrag_engine *e = s->e;
    const engine_layer *W = &e->layers[l];
    int D = e->n_embd, FF = e->n_ff;
    for (int i = 0; i < n; i++)
        kern_rmsnorm(s->x + (size_t)i * D, s->h + (size_t)i * D, D, e->norm_w[2 * l + 1], e->eps);
    linear(s, s->h, n, D, W->w_gate, NULL, FF, s->gate);
    linear(s, s->h, n, D, W->w_up, NULL, FF, s->up);
    glu_ctx gc = {s->gate, s->up, FF, e->ffn_gelu};
    kern_pool_run(s->pool, n, 1, glu_rows, &gc);
    linear(s, s->gate, n, FF, W->w_down, NULL, D, s->h);
    if (W->post_ffn_norm)
        for (int i = 0; i < n; i++)
            kern_rmsnorm(s->h + (size_t)i * D, s->h + (size_t)i * D, D, W->post_ffn_norm, e->eps);
    kern_add(s->x, s->h, (int64_t)n * D);
}

/* Runs n tokens (n <= n_batch) at positions n_past.. through the model. out_logits:
 * NULL = logits of the last token into s->logits; else all rows [n][vocab]. */
static int forward_chunk(struct mmrag_session *s, const int32_t *ids, int n, float *all) {
    const struct mmrag_engine *e = s->e;
    int D = e->n_embd;
    int nrot = (e->n_rot < e->head_dim ? e->n_rot : e->head_dim) & ~1;
    embed(s, ids, n);
    rope_tables(s, n, nrot);
    for (int l = 0; l < e->n_layer; l++) {
        int rc = attn_layer(s, l, n, nrot);
        if (rc) return rc;
        ffn_layer(s, l, n);
    }
    int first = all ? 0 : n - 1;
    for (int i = first; i < n; i++)
        kern_rmsnorm(s->x + (size_t)i * D, s->h + (size_t)(i - first) * D, D,
                     e->norm_w[2 * e->n_layer], e->eps);
    float *dst = all ? all : s->logits;
    kern_linear(s->pool, s->h, n - first, D, e->output->data, (kern_type)e->output->type, NULL,
                e->n_vocab, dst);
    if (all) memcpy(s->logits, all + (size_t)(n - 1) * e->n_vocab, e->n_vocab * sizeof(float));
    s->n_past += n;
    return 0;
}

/* Sliding window: a block whose last key is at or before n_past - window is invisible to
 * every later query, so its memory goes back now and a long session holds ~window tokens
 * of KV. (attn_block skips such blocks before it would look at them.) */
static void evict_out_of_window(struct mmrag_session *s) {
    const struct mmrag_engine *e = s->e;
    if (e->p.attn_mode != MMRAG_ATTN_SLIDING) return;
    int64_t last_dead = (int64_t)s->n_past - e->p.window; /* keys <= this are dead */
    while ((int64_t)(s->n_evicted + 1) * s->B - 1 <= last_dead &&
           s->n_evicted < s->n_past / s->B) {
        for (int l = 0; l < e->n_layer; l++) {
            free(s->kv[l].k[s->n_evicted]);
            free(s->kv[l].v[s->n_evicted]);
            s->kv[l].k[s->n_evicted] = s->kv[l].v[s->n_evicted] = NULL;
        }
        s->n_evicted++;
    }
}

int mmrag_session_eval_all(struct mmrag_session *s, const int32_t *ids, int32_t n,
                           float *all_logits) {
    s->err[0] = 0;
    if (n <= 0) return set_err(s, MMRAG_ENGINE_ERROR, "engine: nothing to evaluate");
    if ((int64_t)s->n_past + n > s->n_ctx)
        return set_err(s, MMRAG_ENGINE_CONTEXT_FULL,
                       "engine: %d tokens after %d do not fit the context of %d tokens", n,
                       s->n_past, s->n_ctx);
    for (int32_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= s->e->n_vocab)
            return set_err(s, MMRAG_ENGINE_ERROR, "engine: token id %d out of range", ids[i]);
    for (int32_t i = 0; i < n; i += s->n_batch) {
        int m = n - i < s->n_batch ? n - i : s->n_batch;
        int rc = forward_chunk(s, ids + i, m,
                               all_logits ? all_logits + (size_t)i * s->e->n_vocab : NULL);
        if (rc) return rc;
        evict_out_of_window(s);
    }
    return 0;
}

int mmrag_session_eval(struct mmrag_session *s, const int32_t *ids, int32_t n) {
    return mmrag_session_eval_all(s, ids, n, NULL);
}
