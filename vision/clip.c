/* CLIP-style dual encoder: ViT image tower (fed by the padding-free patchifier, position
 * embeddings resampled bicubically to the actual grid) and a causal text tower; both end
 * in a projection and L2 normalization. Loads Hugging Face or OpenCLIP safetensors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "vision/clip_internal.h"
#include "vision/vision_internal.h"

/* ---- loading ------------------------------------------------------------------- */
typedef struct {
    const mf_safetensors *f;
    int openclip;
    char *err;
    size_t errlen;
    int rc;
} loader;

static const mf_tensor *find(loader *ld, const char *name) {
    return mf_safetensors_find(ld->f, name);
}

/* Load `name` as fp32 with `expect` elements; the first failure sticks in ld->rc. */
static float *load(loader *ld, const char *name, int64_t expect) {
    if (ld->rc) return NULL;
    char e[256] = "";
    if (!find(ld, name)) {
        vision_set_err(ld->err, ld->errlen, "clip: tensor %s missing", name);
        ld->rc = VISION_FORMAT;
        return NULL;
    }
    float *p = mf_safetensors_load_f32(ld->f, name, expect, e, sizeof e);
    if (!p) {
        vision_set_err(ld->err, ld->errlen, "clip: %s: %s", name, e);
        ld->rc = VISION_FORMAT;
    }
    return p;
}

/* [rows][cols] -> [cols][rows] (OpenCLIP stores projections as x @ P). */
static float *transpose(loader *ld, float *p, int64_t rows, int64_t cols) {
    if (!p) return NULL;
    float *t = malloc((size_t)rows * cols * sizeof *t);
    if (!t) {
        free(p);
        vision_set_err(ld->err, ld->errlen, "clip: out of memory");
        ld->rc = VISION_NOMEM;
        return NULL;
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) t[c * rows + r] = p[r * cols + c];
    free(p);
    return t;
}

static float *concat3(loader *ld, float *a, float *b, float *c, int64_t n) {
    float *o = NULL;
    if (a && b && c && (o = malloc((size_t)n * 3 * sizeof *o))) {
        memcpy(o, a, (size_t)n * sizeof *o);
        memcpy(o + n, b, (size_t)n * sizeof *o);
        memcpy(o + 2 * n, c, (size_t)n * sizeof *o);
    } else if (a && b && c) {
        vision_set_err(ld->err, ld->errlen, "clip: out of memory");
        ld->rc = VISION_NOMEM;
    }
    free(a);
    free(b);
    free(c);
    return o;
}

static int64_t dim_of(loader *ld, const char *name, int axis) {
    const mf_tensor *t = find(ld, name);
    if (!t || axis >= t->n_dims) return -1;
    return t->shape[axis];
}

/* Layer i of a tower; prefix is e.g. "vision_model.encoder.layers" or
 * "visual.transformer.resblocks". */
static void load_layer(loader *ld, const char *prefix, int i, int64_t D, int64_t F, clip_layer *L) {
    char n[256], n2[256], n3[256];
#define NAME(buf, suffix) snprintf(buf, sizeof buf, "%s.%d.%s", prefix, i, suffix)
    if (ld->openclip) {
        NAME(n, "ln_1.weight"); L->ln1_w = load(ld, n, D);
        NAME(n, "ln_1.bias"); L->ln1_b = load(ld, n, D);
        NAME(n, "attn.in_proj_weight"); L->qkv_w = load(ld, n, 3 * D * D);
        NAME(n, "attn.in_proj_bias"); L->qkv_b = load(ld, n, 3 * D);
        NAME(n, "attn.out_proj.weight"); L->o_w = load(ld, n, D * D);
        NAME(n, "attn.out_proj.bias"); L->o_b = load(ld, n, D);
        NAME(n, "ln_2.weight"); L->ln2_w = load(ld, n, D);
        NAME(n, "ln_2.bias"); L->ln2_b = load(ld, n, D);
        NAME(n, "mlp.c_fc.weight"); L->fc1_w = load(ld, n, F * D);
        NAME(n, "mlp.c_fc.bias"); L->fc1_b = load(ld, n, F);
        NAME(n, "mlp.c_proj.weight"); L->fc2_w = load(ld, n, D * F);
        NAME(n, "mlp.c_proj.bias"); L->fc2_b = load(ld, n, D);
    } else {
        NAME(n, "layer_norm1.weight"); L->ln1_w = load(ld, n, D);
        NAME(n, "layer_norm1.bias"); L->ln1_b = load(ld, n, D);
        NAME(n, "self_attn.q_proj.weight"); NAME(n2, "self_attn.k_proj.weight");
        NAME(n3, "self_attn.v_proj.weight");
        L->qkv_w = concat3(ld, load(ld, n, D * D), load(ld, n2, D * D), load(ld, n3, D * D), D * D);
        NAME(n, "self_attn.q_proj.bias"); NAME(n2, "self_attn.k_proj.bias");
        NAME(n3, "self_attn.v_proj.bias");
        L->qkv_b = concat3(ld, load(ld, n, D), load(ld, n2, D), load(ld, n3, D), D);
        NAME(n, "self_attn.out_proj.weight"); L->o_w = load(ld, n, D * D);
        NAME(n, "self_attn.out_proj.bias"); L->o_b = load(ld, n, D);
        NAME(n, "layer_norm2.weight"); L->ln2_w = load(ld, n, D);
        NAME(n, "layer_norm2.bias"); L->ln2_b = load(ld, n, D);
        NAME(n, "mlp.fc1.weight"); L->fc1_w = load(ld, n, F * D);
        NAME(n, "mlp.fc1.bias"); L->fc1_b = load(ld, n, F);
        NAME(n, "mlp.fc2.weight"); L->fc2_w = load(ld, n, D * F);
        NAME(n, "mlp.fc2.bias"); L->fc2_b = load(ld, n, D);
    }
#undef NAME
}

static void free_tower(clip_tower *t) {
    for (int i = 0; t->L && i < t->layers; i++) {
        clip_layer *L = &t->L[i];
        float *ps[] = {L->ln1_w, L->ln1_b, L->qkv_w, L->qkv_b, L->o_w, L->o_b,
                       L->ln2_w, L->ln2_b, L->fc1_w, L->fc1_b, L->fc2_w, L->fc2_b};
        for (size_t k = 0; k < sizeof ps / sizeof *ps; k++) free(ps[k]);
    }
    free(t->L);
    t->L = NULL;
}

/* Count layers and read sizes of one tower from the tensor names and shapes. */
static void load_tower(loader *ld, const char *prefix, int64_t D, clip_tower *t) {
    if (ld->rc) return;
    char n[256];
    const char *probe = ld->openclip ? "ln_1.weight" : "layer_norm1.weight";
    int layers = 0;
    for (;; layers++) {
        snprintf(n, sizeof n, "%s.%d.%s", prefix, layers, probe);
        if (!find(ld, n) || layers >= 1000) break;
    }
    snprintf(n, sizeof n, "%s.0.%s", prefix, ld->openclip ? "mlp.c_fc.weight" : "mlp.fc1.weight");
    int64_t F = dim_of(ld, n, 0);
    if (layers == 0 || F <= 0) {
        vision_set_err(ld->err, ld->errlen, "clip: no transformer layers under %s", prefix);
        ld->rc = VISION_FORMAT;
        return;
    }
    t->width = (int32_t)D;
    t->mlp = (int32_t)F;
    t->L = calloc((size_t)layers, sizeof *t->L);
    if (!t->L) {
        vision_set_err(ld->err, ld->errlen, "clip: out of memory");
        ld->rc = VISION_NOMEM;
        return;
    }
    t->layers = layers;
    for (int i = 0; i < layers && !ld->rc; i++) load_layer(ld, prefix, i, D, F, &t->L[i]);
}

/* Heads, activation and eps from config.json beside the weights (HF or OpenCLIP). */
static void read_config(const char *path, clip_model *m) {
    m->vis.heads = m->vis.width / 64;
    m->txt.heads = m->txt.width / 64;
    m->vis.act = m->txt.act = CLIP_ACT_QUICK_GELU;
    m->vis.eps = m->txt.eps = 1e-5f;
    char cfg[4096];
    const char *slash = strrchr(path, '/');
    int dirlen = slash ? (int)(slash - path + 1) : 0;
    const char *names[] = {"config.json", "open_clip_config.json"};
    for (int k = 0; k < 2; k++) {
        snprintf(cfg, sizeof cfg, "%.*s%s", dirlen, path, names[k]);
        json_t *root = json_load_file(cfg, 0, NULL);
        if (!root) continue;
        json_t *mc = json_object_get(root, "model_cfg");
        if (mc) { /* OpenCLIP */
            json_t *v = json_object_get(mc, "vision_cfg"), *tx = json_object_get(mc, "text_cfg");
            json_t *hw = json_object_get(v, "head_width"), *th = json_object_get(tx, "heads");
            if (json_is_integer(hw) && json_integer_value(hw) > 0)
                m->vis.heads = m->vis.width / (int32_t)json_integer_value(hw);
            if (json_is_integer(th)) m->txt.heads = (int32_t)json_integer_value(th);
            int qg = json_is_true(json_object_get(mc, "quick_gelu"));
            m->vis.act = m->txt.act = qg ? CLIP_ACT_QUICK_GELU : CLIP_ACT_GELU;
        }
        const char *sub[2] = {"vision_config", "text_config"};
        clip_tower *tw[2] = {&m->vis, &m->txt};
        for (int s = 0; s < 2; s++) { /* Hugging Face */
            json_t *c = json_object_get(root, sub[s]);
            if (!c) continue;
            json_t *h = json_object_get(c, "num_attention_heads");
            json_t *a = json_object_get(c, "hidden_act");
            json_t *e = json_object_get(c, "layer_norm_eps");
            if (json_is_integer(h)) tw[s]->heads = (int32_t)json_integer_value(h);
            if (json_is_string(a))
                tw[s]->act = strcmp(json_string_value(a), "quick_gelu") ? CLIP_ACT_GELU
                                                                       : CLIP_ACT_QUICK_GELU;
            if (json_is_number(e)) tw[s]->eps = (float)json_number_value(e);
        }
        json_t *b = json_object_get(json_object_get(root, "mmrag"), "max_tokens");
        if (json_is_integer(b) && json_integer_value(b) > 0 && json_integer_value(b) <= CLIP_MAX_BUDGET)
            m->budget = (int32_t)json_integer_value(b);
        json_decref(root);
        break;
    }
}

static void find_bpe(const char *path, clip_model *m) {
    const char *slash = strrchr(path, '/');
    int dirlen = slash ? (int)(slash - path + 1) : 0;
    const char *env = getenv("MMRAG_MODELS");
    char cand[3][4096];
    snprintf(cand[0], sizeof cand[0], "%.*sbpe_simple_vocab_16e6.txt.gz", dirlen, path);
    snprintf(cand[1], sizeof cand[1], "%.4000s/clip-tokenizer/bpe_simple_vocab_16e6.txt.gz",
             env && *env ? env : "models");
    snprintf(cand[2], sizeof cand[2], "models/clip-tokenizer/bpe_simple_vocab_16e6.txt.gz");
    for (int i = 0; i < 3 && !m->bpe; i++) {
        char e[256];
        if (clip_bpe_create(cand[i], &m->bpe, e, sizeof e)) m->bpe = NULL;
    }
}

void clip_free(clip_model *m) {
    if (!m) return;
    free_tower(&m->vis);
    free_tower(&m->txt);
    float *ps[] = {m->patch_w, m->class_emb, m->pos_emb, m->pre_ln_w, m->pre_ln_b, m->post_ln_w,
                   m->post_ln_b, m->vproj, m->tok_emb, m->tpos_emb, m->final_ln_w,
                   m->final_ln_b, m->tproj};
    for (size_t k = 0; k < sizeof ps / sizeof *ps; k++) free(ps[k]);
    clip_bpe_free(m->bpe);
    free(m);
}

static void load_vision(loader *ld, clip_model *m) {
    int oc = ld->openclip;
    const char *cls = oc ? "visual.class_embedding" : "vision_model.embeddings.class_embedding";
    const char *pw = oc ? "visual.conv1.weight" : "vision_model.embeddings.patch_embedding.weight";
    const char *pos = oc ? "visual.positional_embedding" : "vision_model.embeddings.position_embedding.weight";
    const char *proj = oc ? "visual.proj" : "visual_projection.weight";
    const mf_tensor *tc = find(ld, cls), *tp = find(ld, pw), *tq = find(ld, pos), *tj = find(ld, proj);
    if (!tc || !tp || !tq || !tj || tp->n_dims != 4 || tq->n_dims != 2 || tj->n_dims != 2 ||
        tp->shape[1] != 3 || tp->shape[2] != tp->shape[3]) {
        vision_set_err(ld->err, ld->errlen,
                       "clip: image tower tensors missing or misshapen (%s, %s, %s, %s)", cls, pw,
                       pos, proj);
        ld->rc = VISION_FORMAT;
        return;
    }
    int64_t D = tp->shape[0], p = tp->shape[2], N = tq->shape[0];
    int64_t g = (int64_t)llround(sqrt((double)(N - 1)));
    int64_t E = oc ? tj->shape[1] : tj->shape[0];
    if (N < 2 || g * g != N - 1 || tq->shape[1] != D || (oc ? tj->shape[0] : tj->shape[1]) != D ||
        D <= 0 || p <= 0 || E <= 0 || E > CLIP_MAX_DIM) {
        vision_set_err(ld->err, ld->errlen, "clip: inconsistent image tower shapes (width %lld, "
                       "patch %lld, positions %lld)", (long long)D, (long long)p, (long long)N);
        ld->rc = VISION_FORMAT;
        return;
    }
    m->patch = (int32_t)p;
    m->grid = (int32_t)g;
    m->proj_dim = (int32_t)E;
    m->patch_w = load(ld, pw, D * 3 * p * p);
    m->class_emb = load(ld, cls, D);
    m->pos_emb = load(ld, pos, N * D);
    m->pre_ln_w = load(ld, oc ? "visual.ln_pre.weight" : "vision_model.pre_layrnorm.weight", D);
    m->pre_ln_b = load(ld, oc ? "visual.ln_pre.bias" : "vision_model.pre_layrnorm.bias", D);
    m->post_ln_w = load(ld, oc ? "visual.ln_post.weight" : "vision_model.post_layernorm.weight", D);
    m->post_ln_b = load(ld, oc ? "visual.ln_post.bias" : "vision_model.post_layernorm.bias", D);
    m->vproj = load(ld, proj, E * D);
    if (oc) m->vproj = transpose(ld, m->vproj, D, E);
    load_tower(ld, oc ? "visual.transformer.resblocks" : "vision_model.encoder.layers", D, &m->vis);
}

/* The text tower is optional (image-only checkpoints still embed images). */
static void load_text(loader *ld, clip_model *m) {
    int oc = ld->openclip;
    const char *tok = oc ? "token_embedding.weight" : "text_model.embeddings.token_embedding.weight";
    const char *pos = oc ? "positional_embedding" : "text_model.embeddings.position_embedding.weight";
    const char *proj = oc ? "text_projection" : "text_projection.weight";
    const mf_tensor *tt = find(ld, tok), *tq = find(ld, pos), *tj = find(ld, proj);
    if (!tt) return;
    if (!tq || !tj || tt->n_dims != 2 || tq->n_dims != 2 || tj->n_dims != 2) {
        vision_set_err(ld->err, ld->errlen, "clip: text tower tensors missing or misshapen");
        ld->rc = VISION_FORMAT;
        return;
    }
    int64_t V = tt->shape[0], D = tt->shape[1], ctx = tq->shape[0];
    int64_t E = oc ? tj->shape[1] : tj->shape[0], Din = oc ? tj->shape[0] : tj->shape[1];
    if (V < CLIP_EOT + 1 || tq->shape[1] != D || Din != D || E != m->proj_dim || ctx < 2) {
        vision_set_err(ld->err, ld->errlen, "clip: inconsistent text tower shapes (vocab %lld, width "
                       "%lld, projection %lld vs image %d)", (long long)V, (long long)D, (long long)E,
                       m->proj_dim);
        ld->rc = VISION_FORMAT;
        return;
    }
    m->vocab = (int32_t)V;
    m->ctx = (int32_t)(ctx < CLIP_CTX ? ctx : CLIP_CTX);
    m->ctx_train = (int32_t)ctx;
    m->tok_emb = load(ld, tok, V * D);
    m->tpos_emb = load(ld, pos, ctx * D);
    m->final_ln_w = load(ld, oc ? "ln_final.weight" : "text_model.final_layer_norm.weight", D);
    m->final_ln_b = load(ld, oc ? "ln_final.bias" : "text_model.final_layer_norm.bias", D);
    m->tproj = load(ld, proj, E * D);
    if (oc) m->tproj = transpose(ld, m->tproj, D, E);
    load_tower(ld, oc ? "transformer.resblocks" : "text_model.encoder.layers", D, &m->txt);
    m->has_text = !ld->rc;
}

static int check_heads(const clip_tower *t, const char *which, char *err, size_t errlen) {
    if (t->heads <= 0 || t->width % t->heads || t->eps <= 0) {
        vision_set_err(err, errlen, "clip: %s tower: width %d not divisible by %d heads", which,
                       t->width, t->heads);
        return VISION_FORMAT;
    }
    return VISION_OK;
}

int clip_create(const char *path, kern_pool *pool, clip_model **out, char *err, size_t errlen) {
    if (!out || !path) return VISION_MISUSE;
    *out = NULL;
    mf_safetensors *f = NULL;
    char e[256] = "";
    if (mf_safetensors_open(path, &f, e, sizeof e)) {
        FILE *fp = fopen(path, "rb");
        int io = !fp;
        if (fp) fclose(fp);
        vision_set_err(err, errlen, "clip: %s: %s", path, e);
        return io ? VISION_IO : VISION_FORMAT;
    }
    clip_model *m = calloc(1, sizeof *m);
    if (!m) {
        mf_safetensors_close(f);
        vision_set_err(err, errlen, "clip: out of memory");
        return VISION_NOMEM;
    }
    m->pool = pool;
    loader ld = {f, 0, err, errlen, 0};
    ld.openclip = mf_safetensors_find(f, "visual.conv1.weight") != NULL;
    load_vision(&ld, m);
    if (!ld.rc) load_text(&ld, m);
    mf_safetensors_close(f);
    if (!ld.rc) {
        read_config(path, m);
        ld.rc = check_heads(&m->vis, "image", err, errlen);
        if (!ld.rc && m->has_text) ld.rc = check_heads(&m->txt, "text", err, errlen);
    }
    if (ld.rc) {
        clip_free(m);
        return ld.rc;
    }
    if (m->has_text) find_bpe(path, m);
    *out = m;
    return VISION_OK;
}

/* ---- getters --------------------------------------------------------------------- */
int32_t clip_dim(const clip_model *m) { return m ? m->proj_dim : 0; }
int32_t clip_patch_size(const clip_model *m) { return m ? m->patch : 0; }
int32_t clip_image_size(const clip_model *m) { return m ? m->patch * m->grid : 0; }
int32_t clip_default_max_tokens(const clip_model *m) {
    return !m ? 0 : m->budget > 0 ? m->budget : m->grid * m->grid;
}
const clip_bpe *clip_tokenizer(const clip_model *m) { return m ? m->bpe : NULL; }
