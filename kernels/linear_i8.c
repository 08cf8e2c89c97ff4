/* int8 linear: weights quantized per output channel at load, activations per row on each
 * call, int32 GEMM through the table's 4×16 tile, fp32 out.
 *
 * Design notes:
 * 1. Weights: s = max|w[o]|/WMAX, q = round(w/s); 16-channel panels (layout in
 *    kernels/int8_ref.c), inputs padded to a multiple of 4 with zeros, channels to 16 with
 *    zero rows (scale 0). wsum[o] = Σ q[o] carries the activation zero point:
 *    Σ (a - zp)·q = Σ a·q - zp·wsum.
 * 2. Cache blocking: a task owns a block of I8_RB X rows (≤ 96 KiB of u8 at in = 1536:
 *    L2) and a run of panels; it walks panels outer, 4-row tiles inner, so one panel
 *    (kp·16 bytes, 6-24 KiB: L1) is reused by every tile of the block.
 * 3. Smoothing (SmoothQuant): a few input channels of an encoder's activations run 10x
 *    the others (BERT's LayerNorm outputs, GELU outputs), and per-row quantization then
 *    spends the row's range on them. With smooth[j] = s_j, W's column j is multiplied by
 *    s_j before quantization and X's column j divided by it on the fly: the product is
 *    unchanged, the activation range flatter, the weights take some of the spread.
 * 4. Threads: tasks are (row block, panel run) pairs, at least 4 per pool thread when the
 *    rows allow, so both cores stay busy on short batches too.
 * 5. Residual (kern_i8_weight_create_residual): W's quantization error quantized again, a
 *    second panel set with the same smoothing, so the same activation bytes; each tile adds
 *    its product. The weight error a repeated token meets is the same in every token and
 *    a mean keeps it whole; with ~15-bit weights it shrinks ~100x. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_internal.h"

#define I8_RB 64 /* X rows per task block */

struct kern_i8_weight {
    int64_t out, in, kp, npanel;
    int8_t *q;      /* npanel × kp × 16, 32-byte aligned */
    float *scale;   /* npanel × 16 */
    int32_t *wsum;  /* npanel × 16 */
    float *inv_smooth; /* [in]: X's column j is multiplied by it before quantization; NULL: none */
};

static int8_t quant_w(float w, float inv) {
    /* round half to even by the 1.5·2^23 trick (|w·inv| <= 127 + rounding): nearbyintf's
     * result without its libm call, a third of the load time of the int8 encoder */
    float v = (w * inv + 12582912.0f) - 12582912.0f;
    return (int8_t)(v < -KERN_I8_WMAX ? -KERN_I8_WMAX : v > KERN_I8_WMAX ? KERN_I8_WMAX : v);
}

/* channel o's weights into its panel slots */
static void pack_row(kern_i8_weight *w, const float *row, int64_t o) {
    float mx = 0.0f;
    for (int64_t k = 0; k < w->in; k++) mx = fabsf(row[k]) > mx ? fabsf(row[k]) : mx;
    float s = mx / (float)KERN_I8_WMAX, inv = s > 0.0f ? 1.0f / s : 0.0f;
    int8_t *panel = w->q + (o / KERN_I8_NR) * w->kp * KERN_I8_NR;
    int64_t c = o % KERN_I8_NR, off = (c / 8) * 32 + (c % 8) * 4;
    int32_t sum = 0;
    for (int64_t k = 0; k < w->in; k++) {
        int8_t q = quant_w(row[k], inv);
        panel[(k / 4) * 64 + off + k % 4] = q;
        sum += q;
    }
    w->scale[o] = s;
    w->wsum[o] = sum;
}

kern_i8_weight *kern_i8_weight_create(const float *W, int64_t out, int64_t in) {
    return kern_i8_weight_create_smooth(W, out, in, NULL);
}

/* W·diag(smooth), row o, into dst */
static void smooth_row(const float *w, const float *smooth, int64_t in, float *dst) {
    for (int64_t k = 0; k < in; k++) dst[k] = w[k] * smooth[k];
}

kern_i8_weight *kern_i8_weight_create_smooth(const float *W, int64_t out, int64_t in,
                                             const float *smooth) {
    if (out <= 0 || in <= 0) return NULL;
    kern_i8_weight *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->out = out;
    w->in = in;
    w->kp = (in + 3) / 4 * 4;
    w->npanel = (out + KERN_I8_NR - 1) / KERN_I8_NR;
    size_t qbytes = (size_t)(w->npanel * w->kp * KERN_I8_NR);
    w->q = aligned_alloc(32, qbytes);
    w->scale = calloc((size_t)(w->npanel * KERN_I8_NR), sizeof *w->scale);
    w->wsum = calloc((size_t)(w->npanel * KERN_I8_NR), sizeof *w->wsum);
    float *row = smooth ? malloc((size_t)in * sizeof *row) : NULL;
    w->inv_smooth = smooth ? malloc((size_t)in * sizeof *w->inv_smooth) : NULL;
    if (!w->q || !w->scale || !w->wsum || (smooth && (!row || !w->inv_smooth))) {
        free(row);
        kern_i8_weight_free(w);
        return NULL;
    }
    memset(w->q, 0, qbytes);
    for (int64_t k = 0; smooth && k < in; k++) w->inv_smooth[k] = 1.0f / smooth[k];
    for (int64_t o = 0; o < out; o++) {
        if (smooth) smooth_row(W + o * in, smooth, in, row);
        pack_row(w, smooth ? row : W + o * in, o);
    }
    free(row);
    return w;
}

kern_i8_weight *kern_i8_weight_create_residual(const kern_i8_weight *q, const float *W,
                                               const float *smooth) {
    int64_t out = q->out, in = q->in;
    float *R = malloc((size_t)(out * in) * sizeof *R);
    if (!R) return NULL;
    for (int64_t o = 0; o < out; o++) {
        kern_i8_weight_row_f32(q, o, R + o * in);
        for (int64_t k = 0; k < in; k++) R[o * in + k] = W[o * in + k] - R[o * in + k];
    }
    kern_i8_weight *r = kern_i8_weight_create_smooth(R, out, in, smooth);
    free(R);
    return r;
}

void kern_i8_weight_free(kern_i8_weight *w) {
    if (!w) return;
    free(w->q);
    free(w->scale);
    free(w->wsum);
    free(w->inv_smooth);
    free(w);
}

int64_t kern_i8_weight_out(const kern_i8_weight *w) { return w ? w->out : 0; }
int64_t kern_i8_weight_in(const kern_i8_weight *w) { return w ? w->in : 0; }

void kern_i8_weight_row_f32(const kern_i8_weight *w, int64_t o, float *dst) {
    const int8_t *panel = w->q + (o / KERN_I8_NR) * w->kp * KERN_I8_NR;
    int64_t c = o % KERN_I8_NR, off = (c / 8) * 32 + (c % 8) * 4;
    for (int64_t k = 0; k < w->in; k++) {
        dst[k] = panel[(k / 4) * 64 + off + k % 4] * w->scale[o];
        if (w->inv_smooth) dst[k] *= w->inv_smooth[k];
    }
}

typedef struct {
    const kern_ops *ops;
    const kern_i8_weight *W, *Wr; /* Wr: W's residual, or NULL */
    const float *X, *bias, *dither;
    kern_act act;
    int64_t n;
    uint8_t *A;       /* n rounded up to 4 rows of kp bytes */
    float *sx;
    int32_t *zx;
    float *Y;
    int64_t n_rb, panels_per_task, n_pt;
} i8_ctx;

/* each X row to u8, smoothed on the fly (the same products in both paths) */
static void quant_rows(void *ctx, int64_t b, int64_t e, int thread) {
    i8_ctx *c = ctx;
    int64_t in = c->W->in, kp = c->W->kp;
    for (int64_t r = b; r < e; r++)
        c->ops->i8_quantize_row(c->X + r * in, c->W->inv_smooth, in, kp, c->dither ? c->dither[r] : 0.0f,
                                c->A + r * kp, &c->sx[r], &c->zx[r]);
}

/* Y tile (mr × nc at Y, row stride ldy) = the product of A's rows r.. with panel j of W;
 * with rows8, 8 full rows (mr 8) through the 8-row tile */
static void tile_out(const i8_ctx *c, const kern_i8_weight *W, int64_t j, int64_t r, int mr,
                     int rows8, const float *bias, float *Y, int64_t ldy) {
    int32_t C[2 * KERN_I8_MR * KERN_I8_NR];
    int64_t o = j * KERN_I8_NR;
    int nc = (int)(W->out - o < KERN_I8_NR ? W->out - o : KERN_I8_NR);
    const int8_t *B = W->q + j * W->kp * KERN_I8_NR;
    if (rows8) c->ops->i8_tile8(W->kp, c->A + r * W->kp, W->kp, B, C);
    else c->ops->i8_tile(W->kp, c->A + r * W->kp, W->kp, B, C);
    c->ops->i8_dequant(C, mr, nc, c->sx + r, c->zx + r, c->dither ? c->dither + r : NULL, W->scale + o,
                       W->wsum + o, bias ? bias + o : NULL, Y, ldy); /* C's rows are contiguous */
}

static void gemm_tasks(void *ctx, int64_t b, int64_t e, int thread) {
    const i8_ctx *c = ctx;
    const kern_i8_weight *W = c->W;
    float R[2 * KERN_I8_MR * KERN_I8_NR];
    for (int64_t t = b; t < e; t++) {
        int64_t r0 = (t / c->n_pt) * I8_RB, r1 = r0 + I8_RB < c->n ? r0 + I8_RB : c->n;
        int64_t p0 = (t % c->n_pt) * c->panels_per_task;
        int64_t p1 = p0 + c->panels_per_task < W->npanel ? p0 + c->panels_per_task : W->npanel;
        for (int64_t j = p0; j < p1; j++) {
            int64_t o = j * KERN_I8_NR;
            int nc = (int)(W->out - o < KERN_I8_NR ? W->out - o : KERN_I8_NR);
            for (int64_t r = r0; r < r1;) {
                int rows8 = c->ops->i8_tile8 && r1 - r >= 2 * KERN_I8_MR;
                int mr = rows8 ? 2 * KERN_I8_MR : (int)(r1 - r < KERN_I8_MR ? r1 - r : KERN_I8_MR);
                float *Y = c->Y + r * W->out + o;
                tile_out(c, W, j, r, mr, rows8, c->bias, Y, W->out);
                if (c->Wr) {
                    tile_out(c, c->Wr, j, r, mr, rows8, NULL, R, KERN_I8_NR);
                    for (int i = 0; i < mr; i++)
                        for (int k = 0; k < nc; k++) Y[i * W->out + k] += R[i * KERN_I8_NR + k];
                }
                r += mr;
            }
        }
        /* the activation over the task's block while it is in L2 (per 16-column tile it
         * ran 2x slower: too few independent vectors to hide erf's latency) */
        int64_t o0 = p0 * KERN_I8_NR, o1 = p1 * KERN_I8_NR < W->out ? p1 * KERN_I8_NR : W->out;
        if (c->act == KERN_ACT_GELU)
            for (int64_t r = r0; r < r1; r++) c->ops->gelu(c->Y + r * W->out + o0, o1 - o0);
    }
}

struct kern_i8_work {
    void *buf;
    size_t cap;
};

kern_i8_work *kern_i8_work_create(void) { return calloc(1, sizeof(kern_i8_work)); }

void kern_i8_work_free(kern_i8_work *w) {
    if (!w) return;
    free(w->buf);
    free(w);
}

#define I8_ALIGN(x) (((x) + 63) & ~(size_t)63)

int kern_linear_i8_ops(const kern_ops *ops, kern_pool *p, const float *X, int64_t n,
                       const kern_i8_weight *W, const kern_i8_weight *Wr, const float *bias,
                       kern_act act, const float *dither, kern_i8_work *work, float *Y) {
    if (n <= 0) return 0;
    if (Wr && (Wr->out != W->out || Wr->in != W->in)) return -1;
    int64_t n4 = (n + KERN_I8_MR - 1) / KERN_I8_MR * KERN_I8_MR;
    size_t a_sz = I8_ALIGN((size_t)(n4 * W->kp)), s_sz = I8_ALIGN((size_t)n4 * sizeof(float));
    size_t z_sz = I8_ALIGN((size_t)n4 * sizeof(int32_t));
    size_t need = a_sz + s_sz + z_sz;
    void *buf = work ? work->buf : NULL;
    if (!work || work->cap < need) {
        buf = aligned_alloc(64, I8_ALIGN(need));
        if (!buf) return -1;
        if (work) {
            free(work->buf);
            work->buf = buf;
            work->cap = I8_ALIGN(need);
        }
    }
    uint8_t *b = buf;
    i8_ctx c = {ops, W, Wr, X, bias, dither, act, n, b, (float *)(void *)(b + a_sz),
                (int32_t *)(void *)(b + a_sz + s_sz), Y, 0, 0, 0};
    memset(c.A + n * W->kp, 0, (size_t)((n4 - n) * W->kp)); /* tile rows past n: unused */
    for (int64_t r = n; r < n4; r++) c.sx[r] = 0.0f, c.zx[r] = 0;
    kern_pool_run(p, n, 16, quant_rows, &c);
    c.n_rb = (n + I8_RB - 1) / I8_RB;
    int64_t want = 4 * (int64_t)kern_pool_size(p), n_pt = 1;
    while (c.n_rb * n_pt < want && n_pt < W->npanel) n_pt *= 2;
    c.n_pt = n_pt < W->npanel ? n_pt : W->npanel;
    c.panels_per_task = (W->npanel + c.n_pt - 1) / c.n_pt;
    c.n_pt = (W->npanel + c.panels_per_task - 1) / c.panels_per_task;
    kern_pool_run(p, c.n_rb * c.n_pt, 1, gemm_tasks, &c);
    if (!work) free(buf);
    return 0;
}

int kern_linear_i8(kern_pool *p, const float *X, int64_t n, const kern_i8_weight *W,
                   const float *bias, const float *dither, float *Y) {
    return kern_linear_i8_ops(kern_ops_get(), p, X, n, W, NULL, bias, KERN_ACT_NONE, dither, NULL, Y);
}

int kern_linear_i8_res(kern_pool *p, const float *X, int64_t n, const kern_i8_weight *W,
                       const kern_i8_weight *Wr, const float *bias, kern_act act,
                       const float *dither, kern_i8_work *work, float *Y) {
    return kern_linear_i8_ops(kern_ops_get(), p, X, n, W, Wr, bias, act, dither, work, Y);
}
