/* CLIP forward passes: image tower (patch embedding, class token, resampled position
 * embeddings, pre-LN, pre-norm transformer, post-LN, projection) and causal text tower
 * (pooled at the highest token id, i.e. <|endoftext|>). Scratch is per call: one model
 * serves several threads (each with its own pool or NULL). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vision/clip_internal.h"
#include "vision/vision_internal.h"

static void l2_normalize(float *v, int32_t n) {
    double s = 0;
    for (int32_t i = 0; i < n; i++) s += (double)v[i] * v[i];
    float inv = s > 0 ? (float)(1.0 / sqrt(s)) : 0.0f;
    for (int32_t i = 0; i < n; i++) v[i] *= inv;
}

/* x [n][D] through every block of t, in place. Returns VISION_NOMEM on allocation
 * failure. */
static int run_tower(const clip_tower *t, kern_pool *pool, float *x, int32_t n, int causal) {
    int64_t D = t->width, F = t->mlp;
    float *h = malloc((size_t)n * D * sizeof *h);
    float *qkv = malloc((size_t)n * 3 * D * sizeof *qkv);
    float *att = malloc((size_t)n * D * sizeof *att);
    float *f = malloc((size_t)n * F * sizeof *f);
    if (!h || !qkv || !att || !f) {
        free(h); free(qkv); free(att); free(f);
        return VISION_NOMEM;
    }
    int hd = (int)(D / t->heads);
    for (int32_t l = 0; l < t->layers; l++) {
        const clip_layer *L = &t->L[l];
        for (int32_t i = 0; i < n; i++) kern_layernorm(x + i * D, h + i * D, D, L->ln1_w, L->ln1_b, t->eps);
        kern_linear(pool, h, n, D, L->qkv_w, KERN_F32, L->qkv_b, 3 * D, qkv);
        kern_attention(pool, qkv, (int)(3 * D), qkv + D, qkv + 2 * D, (int)(3 * D), att, (int)D,
                       n, n, t->heads, t->heads, hd, causal, 0);
        kern_linear(pool, att, n, D, L->o_w, KERN_F32, L->o_b, D, h);
        kern_add(x, h, (int64_t)n * D);
        for (int32_t i = 0; i < n; i++) kern_layernorm(x + i * D, h + i * D, D, L->ln2_w, L->ln2_b, t->eps);
        kern_linear(pool, h, n, D, L->fc1_w, KERN_F32, L->fc1_b, F, f);
        if (t->act == CLIP_ACT_GELU) kern_gelu(f, (int64_t)n * F);
        else kern_quick_gelu(f, (int64_t)n * F);
        kern_linear(pool, f, n, F, L->fc2_w, KERN_F32, L->fc2_b, D, h);
        kern_add(x, h, (int64_t)n * D);
    }
    free(h); free(qkv); free(att); free(f);
    return VISION_OK;
}

/* Image tower on cut patches; out (may be NULL) = pooled embedding, *tokens (may be
 * NULL) = per-patch embeddings [gh*gw][E]. */
static int image_forward(const clip_model *m, kern_pool *pool, const vision_patches *p,
                         float *out, float **tokens, char *err, size_t errlen) {
    if (!m || !p || !p->data || p->gh <= 0 || p->gw <= 0) {
        vision_set_err(err, errlen, "clip: empty patches");
        return VISION_MISUSE;
    }
    if (p->patch != m->patch) {
        vision_set_err(err, errlen, "clip: patches are %dpx, the model wants %dpx", p->patch, m->patch);
        return VISION_MISUSE;
    }
    int64_t D = m->vis.width, E = m->proj_dim, T = (int64_t)p->gh * p->gw, n = T + 1;
    int64_t K = 3 * (int64_t)m->patch * m->patch;
    float *x = malloc((size_t)n * D * sizeof *x);
    float *pos = malloc((size_t)T * D * sizeof *pos);
    float *tok = tokens ? malloc((size_t)T * E * sizeof *tok) : NULL;
    int rc = VISION_OK;
    if (!x || !pos || (tokens && !tok)) { rc = VISION_NOMEM; goto done; }
    kern_linear(pool, p->data, T, K, m->patch_w, KERN_F32, NULL, D, x + D);
    vision_pos_embed_interp(m->pos_emb + D, m->grid, m->grid, (int32_t)D, pos, p->gh, p->gw);
    for (int64_t d = 0; d < D; d++) x[d] = m->class_emb[d] + m->pos_emb[d];
    kern_add(x + D, pos, T * D);
    for (int64_t i = 0; i < n; i++)
        kern_layernorm(x + i * D, x + i * D, D, m->pre_ln_w, m->pre_ln_b, m->vis.eps);
    rc = run_tower(&m->vis, pool, x, (int32_t)n, 0);
    if (rc) goto done;
    int64_t rows = tokens ? n : 1; /* post-LN of the patch rows only when asked for */
    for (int64_t i = 0; i < rows; i++)
        kern_layernorm(x + i * D, x + i * D, D, m->post_ln_w, m->post_ln_b, m->vis.eps);
    if (out) {
        kern_linear(pool, x, 1, D, m->vproj, KERN_F32, NULL, E, out);
        l2_normalize(out, (int32_t)E);
    }
    if (tokens) {
        kern_linear(pool, x + D, T, D, m->vproj, KERN_F32, NULL, E, tok);
        for (int64_t i = 0; i < T; i++) l2_normalize(tok + i * E, (int32_t)E);
        *tokens = tok;
        tok = NULL;
    }
done:
    if (rc == VISION_NOMEM)
        vision_set_err(err, errlen, "clip: out of memory for %lld tokens", (long long)n);
    free(x); free(pos); free(tok);
    return rc;
}

int clip_embed_patches(const clip_model *m, kern_pool *pool, const vision_patches *p,
                       float *out, char *err, size_t errlen) {
    if (!out) return VISION_MISUSE;
    return image_forward(m, pool, p, out, NULL, err, errlen);
}

int clip_patch_tokens_from_patches(const clip_model *m, kern_pool *pool,
                                   const vision_patches *p, float *out, float **tokens,
                                   char *err, size_t errlen) {
    if (!tokens) return VISION_MISUSE;
    *tokens = NULL;
    return image_forward(m, pool, p, out, tokens, err, errlen);
}

static int image_common(const clip_model *m, kern_pool *pool, const vision_image *img,
                        int32_t max_tokens, float *out, float **tokens, int32_t *gh,
                        int32_t *gw, char *err, size_t errlen) {
    if (!m || !img) return VISION_MISUSE;
    if (max_tokens <= 0) max_tokens = clip_default_max_tokens(m);
    vision_patches p;
    int rc = vision_adaptive_patchify(img, max_tokens, m->patch, 0, NULL, NULL, &p, err, errlen);
    if (rc) return rc;
    rc = image_forward(m, pool, &p, out, tokens, err, errlen);
    if (gh) *gh = p.gh;
    if (gw) *gw = p.gw;
    vision_patches_free(&p);
    return rc;
}

int clip_embed_image(const clip_model *m, const vision_image *img, int32_t max_tokens,
                     float *out, char *err, size_t errlen) {
    if (!m || !out) return VISION_MISUSE;
    return image_common(m, m->pool, img, max_tokens, out, NULL, NULL, NULL, err, errlen);
}

int clip_embed_image_with_pool(const clip_model *m, kern_pool *pool, const vision_image *img,
                               int32_t max_tokens, float *out, char *err, size_t errlen) {
    if (!out) return VISION_MISUSE;
    return image_common(m, pool, img, max_tokens, out, NULL, NULL, NULL, err, errlen);
}

int clip_patch_tokens(const clip_model *m, const vision_image *img, int32_t max_tokens,
                      float *out, float **tokens, int32_t *gh, int32_t *gw, char *err,
                      size_t errlen) {
    if (!m || !tokens) return VISION_MISUSE;
    *tokens = NULL;
    return image_common(m, m->pool, img, max_tokens, out, tokens, gh, gw, err, errlen);
}

/* ---- text ------------------------------------------------------------------------ */
int clip_embed_tokens(const clip_model *m, kern_pool *pool, const int32_t *ids, int32_t n,
                      float *out, char *err, size_t errlen) {
    if (!m || !ids || !out) return VISION_MISUSE;
    if (!m->has_text) {
        vision_set_err(err, errlen, "clip: this checkpoint has no text tower");
        return VISION_MISUSE;
    }
    if (n < 1 || n > m->ctx) {
        vision_set_err(err, errlen, "clip: %d tokens (1..%d allowed)", n, m->ctx);
        return VISION_MISUSE;
    }
    int32_t eot = 0;
    for (int32_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= m->vocab) {
            vision_set_err(err, errlen, "clip: token id %d out of range", ids[i]);
            return VISION_MISUSE;
        }
        if (ids[i] > ids[eot]) eot = i;
    }
    /* Causal attention: tokens after the pooled one cannot change it, so stop there. */
    int32_t len = eot + 1;
    int64_t D = m->txt.width;
    float *x = malloc((size_t)len * D * sizeof *x);
    if (!x) {
        vision_set_err(err, errlen, "clip: out of memory");
        return VISION_NOMEM;
    }
    for (int32_t i = 0; i < len; i++)
        for (int64_t d = 0; d < D; d++)
            x[i * D + d] = m->tok_emb[(int64_t)ids[i] * D + d] + m->tpos_emb[i * D + d];
    int rc = run_tower(&m->txt, pool, x, len, 1);
    if (!rc) {
        float *r = x + (int64_t)eot * D;
        kern_layernorm(r, r, D, m->final_ln_w, m->final_ln_b, m->txt.eps);
        kern_linear(pool, r, 1, D, m->tproj, KERN_F32, NULL, m->proj_dim, out);
        l2_normalize(out, m->proj_dim);
    } else {
        vision_set_err(err, errlen, "clip: out of memory");
    }
    free(x);
    return rc;
}

int clip_embed_text(const clip_model *m, const char *text, float *out, char *err, size_t errlen) {
    if (!m || !text || !out) return VISION_MISUSE;
    if (!m->bpe) {
        vision_set_err(err, errlen, "clip: no BPE merges found (bpe_simple_vocab_16e6.txt.gz)");
        return VISION_IO;
    }
    int32_t ids[CLIP_CTX];
    int n = clip_bpe_encode(m->bpe, text, ids, m->ctx);
    if (n < 0) {
        vision_set_err(err, errlen, "clip: tokenizer failed (%d)", n);
        return n;
    }
    return clip_embed_tokens(m, m->pool, ids, n, out, err, errlen);
}
