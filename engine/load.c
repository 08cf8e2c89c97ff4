/* Model loading: reads a GGUF's hyper-parameters for one of the supported architectures
 * (llama, qwen2, qwen3, gemma3; see engine_internal.h for what sets them apart), checks
 * every tensor's shape and type, copies the small vectors (norms, biases) to fp32 and
 * leaves the matrices in the mapping. Anything unsupported is refused with its name and
 * the list of what is supported. */
#include "engine/engine_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct mmrag_engine_params mmrag_engine_default_params(void) {
    struct mmrag_engine_params p;
    memset(&p, 0, sizeof p);
    return p;
}

static const struct { const char *name; engine_arch arch; } ARCHS[] = {
    {"llama", ENGINE_ARCH_LLAMA}, {"qwen2", ENGINE_ARCH_QWEN2},
    {"qwen3", ENGINE_ARCH_QWEN3}, {"gemma3", ENGINE_ARCH_GEMMA3},
};
#define ARCH_LIST "llama, qwen2, qwen3, gemma3"

/* gemma3: five local (sliding-window) layers, then one global, repeating */
int engine_arch_is_local(const struct mmrag_engine *e, int layer) {
    return e->layers[layer].local;
}

/* ---- tensors ------------------------------------------------------------------- */
static const mf_tensor *need_tensor(const mf_gguf *f, const char *name, int64_t ne0, int64_t ne1,
                                    char *err, size_t errlen) {
    const mf_tensor *t = mf_gguf_find(f, name);
    if (!t) {
        snprintf(err, errlen, "engine: tensor %s missing", name);
        return NULL;
    }
    int64_t e1 = t->n_dims > 1 ? t->shape[1] : 1;
    if (t->shape[0] != ne0 || e1 != ne1 || t->shape[2] != 1 || t->shape[3] != 1) {
        snprintf(err, errlen, "engine: tensor %s has shape [%lld, %lld], expected [%lld, %lld]",
                 name, (long long)t->shape[0], (long long)e1, (long long)ne0, (long long)ne1);
        return NULL;
    }
    if (t->type == KERN_Q8_K || kern_type_block_elems((kern_type)t->type) == 0) {
        snprintf(err, errlen, "engine: tensor %s has unsupported type %d (supported: %s)", name,
                 (int)t->type, kern_type_supported_list());
        return NULL;
    }
    return t;
}

static float *copy_f32(const mf_tensor *t, int64_t n) {
    float *w = malloc((size_t)n * sizeof *w);
    if (w) kern_to_f32((kern_type)t->type, t->data, w, n);
    return w;
}

/* A vector tensor of n elements as fp32: *out = NULL when absent and optional. */
static int load_vec(const mf_gguf *f, const char *name, int64_t n, int required, float **out,
                    char *err, size_t errlen) {
    *out = NULL;
    if (!required && !mf_gguf_find(f, name)) return 0;
    const mf_tensor *t = need_tensor(f, name, n, 1, err, errlen);
    if (!t) return -1;
    if (!(*out = copy_f32(t, n))) {
        snprintf(err, errlen, "engine: out of memory");
        return -1;
    }
    return 0;
}

/* ---- hyper-parameters ---------------------------------------------------------- */
static int get_u32(const mf_gguf *f, const char *arch, const char *key, int32_t *out, int required,
                   char *err, size_t errlen) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    uint32_t v;
    if (mf_gguf_get_u32(f, k, &v) == 0 && v > 0 && v < (1u << 30)) {
        *out = (int32_t)v;
        return 0;
    }
    if (!required) return 0;
    snprintf(err, errlen, "engine: metadata %s missing or invalid", k);
    return -1;
}

static void get_f32(const mf_gguf *f, const char *arch, const char *key, float *out) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    mf_gguf_get_f32(f, k, out);
}

static int read_arch(struct mmrag_engine *e, const char *path, const char **arch, char *err,
                     size_t errlen) {
    if (mf_gguf_get_str(e->gguf, "general.architecture", arch, NULL)) {
        snprintf(err, errlen, "engine: %s: general.architecture missing", path);
        return -1;
    }
    for (size_t i = 0; i < sizeof ARCHS / sizeof *ARCHS; i++)
        if (strcmp(*arch, ARCHS[i].name) == 0) {
            e->arch = ARCHS[i].arch;
            return 0;
        }
    snprintf(err, errlen, "engine: %s: unsupported architecture \"%s\" (supported: " ARCH_LIST ")",
             path, *arch);
    return -1;
}

static int read_hparams(struct mmrag_engine *e, const char *a, char *err, size_t errlen) {
    const mf_gguf *f = e->gguf;
    e->n_ctx_train = 2048;
    if (get_u32(f, a, "embedding_length", &e->n_embd, 1, err, errlen) ||
        get_u32(f, a, "block_count", &e->n_layer, 1, err, errlen) ||
        get_u32(f, a, "feed_forward_length", &e->n_ff, 1, err, errlen) ||
        get_u32(f, a, "attention.head_count", &e->n_head, 1, err, errlen) ||
        get_u32(f, a, "context_length", &e->n_ctx_train, 0, err, errlen))
        return -1;
    e->n_kv_head = e->n_head;
    get_u32(f, a, "attention.head_count_kv", &e->n_kv_head, 0, err, errlen);
    e->head_dim = e->n_embd % e->n_head ? 0 : e->n_embd / e->n_head;
    get_u32(f, a, "attention.key_length", &e->head_dim, 0, err, errlen);
    int32_t vlen = e->head_dim;
    get_u32(f, a, "attention.value_length", &vlen, 0, err, errlen);
    if (e->head_dim <= 0 || e->head_dim % 2 || vlen != e->head_dim || e->n_head % e->n_kv_head ||
        e->n_layer > 1024 || e->head_dim > 1024) {
        snprintf(err, errlen, "engine: inconsistent hyper-parameters (embd %d, heads %d/%d, head dim %d/%d)",
                 e->n_embd, e->n_head, e->n_kv_head, e->head_dim, vlen);
        return -1;
    }
    e->q_dim = e->n_head * e->head_dim;
    e->n_rot = e->head_dim;
    get_u32(f, a, "rope.dimension_count", &e->n_rot, 0, err, errlen);
    if (e->n_rot > e->head_dim || e->n_rot % 2) {
        snprintf(err, errlen, "engine: rope.dimension_count %d invalid", e->n_rot);
        return -1;
    }
    e->eps = e->arch == ENGINE_ARCH_GEMMA3 ? 1e-6f : 1e-5f;
    get_f32(f, a, "attention.layer_norm_rms_epsilon", &e->eps);
    e->rope_base = 10000.0f;
    get_f32(f, a, "rope.freq_base", &e->rope_base);
    e->rope_base_local = 10000.0f; /* gemma3's local layers (fixed in its reference code) */
    e->rope_freq_scale = 1.0f;
    char k[128];
    const char *rs_type;
    float rs_factor = 0;
    snprintf(k, sizeof k, "%s.rope.scaling.type", a);
    get_f32(f, a, "rope.scaling.factor", &rs_factor);
    /* a factor without a type is linear (llama.cpp reads it so); other types (yarn,
     * longrope) are not implemented and their factor is ignored */
    if (rs_factor > 0 && (mf_gguf_get_str(f, k, &rs_type, NULL) || strcmp(rs_type, "linear") == 0))
        e->rope_freq_scale = 1.0f / rs_factor;
    e->rope_neox = e->arch != ENGINE_ARCH_LLAMA;
    if (e->arch == ENGINE_ARCH_GEMMA3) {
        e->ffn_gelu = 1;
        e->embd_scale = sqrtf((float)e->n_embd);
        e->swa_window = 512;
        get_u32(f, a, "attention.sliding_window", &e->swa_window, 0, err, errlen);
        /* query_pre_attn_scalar is not in the GGUF: 27B (62 layers) scales by
         * 1/sqrt(d/heads), the others by 1/sqrt(head_dim) (gemma_pytorch config, as
         * llama.cpp does) */
        if (e->n_layer == 62) e->attn_scale = 1.0f / sqrtf((float)e->n_embd / (float)e->n_head);
    }
    if (e->attn_scale <= 0) e->attn_scale = 1.0f / sqrtf((float)e->head_dim);
    return 0;
}

/* ---- tensors of a layer ---------------------------------------------------------- */
static int load_layer(struct mmrag_engine *e, int i, int swa_pattern, char *err, size_t errlen) {
    const mf_gguf *f = e->gguf;
    engine_layer *L = &e->layers[i];
    int64_t D = e->n_embd, KV = (int64_t)e->n_kv_head * e->head_dim, Q = e->q_dim, hd = e->head_dim;
    char nm[96];
#define T(field, suffix, a, b)                                                  \
    snprintf(nm, sizeof nm, "blk.%d." suffix ".weight", i);                     \
    if (!(L->field = need_tensor(f, nm, a, b, err, errlen))) return -1;
    T(attn_norm, "attn_norm", D, 1)
    T(wq, "attn_q", D, Q)
    T(wk, "attn_k", D, KV)
    T(wv, "attn_v", D, KV)
    T(wo, "attn_output", Q, D)
    T(ffn_norm, "ffn_norm", D, 1)
    T(w_gate, "ffn_gate", D, e->n_ff)
    T(w_up, "ffn_up", D, e->n_ff)
    T(w_down, "ffn_down", e->n_ff, D)
#undef T
#define V(field, name, n, req)                                                  \
    snprintf(nm, sizeof nm, "blk.%d." name, i);                                 \
    if (load_vec(f, nm, n, req, &L->field, err, errlen)) return -1;
    int qwen2 = e->arch == ENGINE_ARCH_QWEN2, gemma = e->arch == ENGINE_ARCH_GEMMA3;
    int qk_norm = e->arch == ENGINE_ARCH_QWEN3 || gemma;
    V(bq, "attn_q.bias", Q, qwen2)
    V(bk, "attn_k.bias", KV, qwen2)
    V(bv, "attn_v.bias", KV, qwen2)
    V(q_norm, "attn_q_norm.weight", hd, qk_norm)
    V(k_norm, "attn_k_norm.weight", hd, qk_norm)
    V(post_attn_norm, "post_attention_norm.weight", D, gemma)
    V(post_ffn_norm, "post_ffw_norm.weight", D, gemma)
#undef V
    L->local = gemma && e->swa_window > 0 && i % swa_pattern < swa_pattern - 1;
    return 0;
}

static int load_tensors(struct mmrag_engine *e, const char *a, char *err, size_t errlen) {
    const mf_gguf *f = e->gguf;
    int64_t D = e->n_embd;
    if (!(e->tok_embd = need_tensor(f, "token_embd.weight", D, e->n_vocab, err, errlen)) ||
        !(e->out_norm = need_tensor(f, "output_norm.weight", D, 1, err, errlen)))
        return -1;
    e->output = mf_gguf_find(f, "output.weight") ?
        need_tensor(f, "output.weight", D, e->n_vocab, err, errlen) : e->tok_embd;
    if (!e->output) return -1;
    if (e->arch == ENGINE_ARCH_LLAMA &&
        load_vec(f, "rope_freqs.weight", e->n_rot / 2, 0, &e->rope_freqs, err, errlen))
        return -1;
    int32_t pattern = 6;
    get_u32(f, a, "attention.sliding_window_pattern", &pattern, 0, err, errlen);
    e->layers = calloc((size_t)e->n_layer, sizeof *e->layers);
    e->norm_w = calloc((size_t)e->n_layer * 2 + 1, sizeof *e->norm_w);
    if (!e->layers || !e->norm_w) goto nomem;
    for (int i = 0; i < e->n_layer; i++) {
        if (load_layer(e, i, pattern, err, errlen)) return -1;
        if (!(e->norm_w[2 * i] = copy_f32(e->layers[i].attn_norm, D)) ||
            !(e->norm_w[2 * i + 1] = copy_f32(e->layers[i].ffn_norm, D)))
            goto nomem;
    }
    if (!(e->norm_w[2 * e->n_layer] = copy_f32(e->out_norm, D))) goto nomem;
    return 0;
nomem:
    snprintf(err, errlen, "engine: out of memory");
    return -1;
}

/* ---- run-time parameters ----------------------------------------------------------- */
static int apply_params(struct mmrag_engine *e, char *err, size_t errlen) {
    if (e->p.n_ctx <= 0) e->p.n_ctx = e->n_ctx_train < 8192 ? e->n_ctx_train : 8192;
    if (e->p.n_batch <= 0) e->p.n_batch = 512;
    if (e->p.kv_block <= 0) e->p.kv_block = 64;
    if (e->p.window <= 0) e->p.window = 1024;
    if (e->p.n_global <= 0) e->p.n_global = 64;
    if (e->p.sparse_random < 0 || e->p.sparse_random > 1) e->p.sparse_random = 0;
    if (e->p.kv_type < 0 || e->p.kv_type > MMRAG_KV_INT4_CH || e->p.attn_mode < 0 ||
        e->p.attn_mode > MMRAG_ATTN_SPARSE || e->p.n_ctx > (1 << 22)) {
        snprintf(err, errlen, "engine: invalid parameters (kv_type %d, attn_mode %d, n_ctx %d)",
                 e->p.kv_type, e->p.attn_mode, e->p.n_ctx);
        return -1;
    }
    if (e->p.n_ctx > e->n_ctx_train && e->p.rope_scaling != MMRAG_ROPE_NONE) {
        float fac = e->p.rope_factor > 0 ? e->p.rope_factor : (float)e->p.n_ctx / (float)e->n_ctx_train;
        if (e->p.rope_scaling == MMRAG_ROPE_LINEAR) e->rope_freq_scale /= fac;
        else e->rope_base *= powf(fac, (float)e->n_rot / (float)(e->n_rot - 2)); /* NTK-aware */
    }
    return 0;
}

struct mmrag_engine *mmrag_engine_init_from_file(const char *path, struct mmrag_engine_params p,
                                                 char *err, size_t errlen) {
    struct mmrag_engine *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, errlen, "engine: out of memory");
        return NULL;
    }
    e->p = p;
    const char *arch;
    if (mf_gguf_open(path, &e->gguf, err, errlen) || read_arch(e, path, &arch, err, errlen) ||
        read_hparams(e, arch, err, errlen) || engine_vocab_load(&e->vocab, e->gguf, err, errlen))
        goto fail;
    e->n_vocab = e->vocab.n_vocab;
    if (load_tensors(e, arch, err, errlen) || apply_params(e, err, errlen)) goto fail;
    engine_chat_detect(e);
    snprintf(e->desc, sizeof e->desc, "%s %dL d%d %dh/%dkv ff%d vocab %d ctx %d (train %d) chat %s%s",
             arch, e->n_layer, e->n_embd, e->n_head, e->n_kv_head, e->n_ff, e->n_vocab, e->p.n_ctx,
             e->n_ctx_train, mmrag_engine_chat_template(e, NULL), e->chat_recognized ? "" : " (fallback)");
    return e;
fail:
    mmrag_engine_free(e);
    return NULL;
}

void mmrag_engine_free(struct mmrag_engine *e) {
    if (!e) return;
    if (e->norm_w)
        for (int i = 0; i <= 2 * e->n_layer; i++) free(e->norm_w[i]);
    free(e->norm_w);
    if (e->layers)
        for (int i = 0; i < e->n_layer; i++) {
            engine_layer *L = &e->layers[i];
            free(L->bq); free(L->bk); free(L->bv); free(L->q_norm); free(L->k_norm);
            free(L->post_attn_norm); free(L->post_ffn_norm);
        }
    free(e->layers);
    free(e->rope_freqs);
    engine_vocab_free(&e->vocab);
    mf_gguf_close(e->gguf);
    free(e);
}

int32_t mmrag_engine_n_vocab(const struct mmrag_engine *e) { return e->n_vocab; }
int32_t mmrag_engine_n_ctx(const struct mmrag_engine *e) { return e->p.n_ctx; }
int32_t mmrag_engine_n_ctx_train(const struct mmrag_engine *e) { return e->n_ctx_train; }
int32_t mmrag_engine_eos(const struct mmrag_engine *e) { return e->vocab.eos; }
const char *mmrag_engine_desc(const struct mmrag_engine *e) { return e->desc; }

/* ---- probing a file for listings ---------------------------------------------------- */
/* llama.cpp's names for general.file_type (enum llama_ftype) */
static const char *ftype_name(uint32_t t) {
    static const char *const names[] = {
        [0] = "F32", [1] = "F16", [2] = "Q4_0", [3] = "Q4_1", [7] = "Q8_0", [8] = "Q5_0",
        [9] = "Q5_1", [10] = "Q2_K", [11] = "Q3_K_S", [12] = "Q3_K_M", [13] = "Q3_K_L",
        [14] = "Q4_K_S", [15] = "Q4_K_M", [16] = "Q5_K_S", [17] = "Q5_K_M", [18] = "Q6_K",
        [19] = "IQ2_XXS", [20] = "IQ2_XS", [21] = "Q2_K_S", [22] = "IQ3_XS", [23] = "IQ3_XXS",
        [24] = "IQ1_S", [25] = "IQ4_NL", [26] = "IQ3_S", [27] = "IQ3_M", [28] = "IQ2_S",
        [29] = "IQ2_M", [30] = "IQ4_XS", [31] = "IQ1_M", [32] = "BF16", [36] = "TQ1_0",
        [37] = "TQ2_0",
    };
    return t < sizeof names / sizeof *names && names[t] ? names[t] : NULL;
}

int mmrag_engine_probe(const char *path, struct mmrag_model_info *info) {
    memset(info, 0, sizeof *info);
    struct stat st;
    if (stat(path, &st) == 0) info->bytes = (int64_t)st.st_size;
    mf_gguf *f = NULL;
    if (mf_gguf_open(path, &f, info->why, sizeof info->why)) return -1;
    const char *s;
    size_t len;
    if (mf_gguf_get_str(f, "general.architecture", &s, &len) == 0)
        snprintf(info->arch, sizeof info->arch, "%.*s", (int)len, s);
    if (mf_gguf_get_str(f, "general.name", &s, &len) == 0)
        snprintf(info->name, sizeof info->name, "%.*s", (int)len, s);
    uint32_t u;
    const char *ft = mf_gguf_get_u32(f, "general.file_type", &u) == 0 ? ftype_name(u) : NULL;
    if (ft) snprintf(info->file_type, sizeof info->file_type, "%s", ft);
    char k[96];
    snprintf(k, sizeof k, "%s.context_length", info->arch);
    if (info->arch[0] && mf_gguf_get_u32(f, k, &u) == 0) info->n_ctx_train = (int32_t)u;
    snprintf(k, sizeof k, "%s.block_count", info->arch);
    if (info->arch[0] && mf_gguf_get_u32(f, k, &u) == 0) info->n_layer = (int32_t)u;
    /* bytes per type over the layers' weights (embeddings and output are often kept at a
     * higher precision than the file's type says) */
    enum { NT = 64 };
    uint64_t by_type[NT] = {0};
    for (int i = 0; i < mf_gguf_tensor_count(f); i++) {
        const mf_tensor *t = mf_gguf_tensor_at(f, i);
        int64_t ne = 1;
        for (int d = 0; d < t->n_dims; d++) ne *= t->shape[d];
        info->n_params += ne;
        if (strncmp(t->name, "blk.", 4) == 0 && t->n_dims >= 2 && t->type >= 0 && t->type < NT)
            by_type[t->type] += t->nbytes;
    }
    int best = -1;
    for (int t = 0; t < NT; t++)
        if (by_type[t] && (best < 0 || by_type[t] > by_type[best])) best = t;
    if (best >= 0) {
        const char *tn = kern_type_name((kern_type)best);
        if (strcmp(tn, "unknown") != 0) snprintf(info->dominant, sizeof info->dominant, "%s", tn);
        else snprintf(info->dominant, sizeof info->dominant, "type %d", best);
    }
    mf_gguf_close(f);
    struct mmrag_engine_params p = mmrag_engine_default_params();
    p.n_ctx = 256;
    p.n_threads = 1;
    struct mmrag_engine *e = mmrag_engine_init_from_file(path, p, info->why, sizeof info->why);
    info->loads = e != NULL;
    mmrag_engine_free(e);
    return 0;
}
