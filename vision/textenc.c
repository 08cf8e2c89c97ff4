/* all-MiniLM-L6-v2 text encoder: weights from safetensors, BERT forward pass, mean pooling.
 *
 * Padding-free batching: the tokens of many texts are laid end to end in one [T][h]
 * matrix, so every linear layer is one GEMM over all T tokens; only attention looks at
 * text boundaries (each text attends to its own tokens). Scratch memory belongs to each
 * call, so the handle stays read-only; a mutex makes concurrent calls take turns on the
 * pool (kern_pool_run is one caller at a time). */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vision/textenc.h"
#include "vision/textenc_internal.h"
#include "vision/vision_internal.h"

/* tokens per forward pass: scratch ~16 MB (MiniLM-L6), so a pass's activations stay nearer
 * the caches; against 4096, R-intro embedded ~6% faster (median of 3) at 44 MB less peak RSS.
 * At int8 one text's worth (~4 MB, the activations mostly in L2): the passes are compute
 * bound at the tile's peak and the elementwise steps gain from the cache, 300 real chunks
 * +6-8% over 1024 at 1 and 2 threads; fp32 (OpenBLAS) is ~7% slower there */
#define TE_TOKEN_BUDGET 1024
#define TE_TOKEN_BUDGET_I8 TEXTENC_MAX_TOKENS
#define TE_TOKENIZE_GROUP 128 /* texts tokenized (in parallel) per step */

typedef struct {
    const float *qkv_w, *qkv_b; /* [3h][h], [3h]: query, key, value stacked (owned copies) */
    const float *ao_w, *ao_b;   /* attention output dense [h][h] */
    const float *ln1_g, *ln1_b;
    const float *in_w, *in_b;   /* intermediate [inter][h] */
    const float *out_w, *out_b; /* output dense [h][inter] */
    const float *ln2_g, *ln2_b;
    const float *qkv_part[3];   /* query, key, value [h][h] (mapped or owned): the residuals
                                   restack them once the stacked copy is freed */
    kern_i8_weight *q[4];       /* int8 copies of qkv, ao, in, out (TEXTENC_INT8 only) */
    float *smooth[4];           /* their smoothing factors, kept for the residuals */
    kern_i8_weight *r[4];       /* their residuals (te_repetitive texts), made on first use */
} te_layer;

/* One forward pass's buffers (~16 MB at the token budget): kept between calls, because
 * fresh ones each call cost page faults and zeroed pages (10% of indexing's CPU time was
 * the kernel's). */
typedef struct {
    int32_t *tok, *lens, *ids, *start, *order;
    float *x, *qkv, *ctx, *tmp, *mid, *dith;
    kern_i8_work *i8;
} te_scratch;

static void scratch_free(te_scratch *s) {
    if (!s) return;
    free(s->tok); free(s->lens); free(s->ids); free(s->start); free(s->order);
    free(s->x); free(s->qkv); free(s->ctx); free(s->tmp); free(s->mid); free(s->dith);
    kern_i8_work_free(s->i8);
    free(s);
}

/* Weights point into the read-only mapping of model.safetensors when they are aligned
 * F32 (no copy); others (F16/BF16, unaligned, the stacked QKV) are malloc'd copies kept
 * in `owned`. The file must not be modified while the encoder is loaded. */
struct textenc {
    int32_t h, heads, n_layers, inter, max_pos, vocab;
    float eps;
    const float *word, *pos, *type0, *eln_g, *eln_b;
    te_layer *layers;
    mf_safetensors *file;
    void **owned;
    int n_owned, cap_owned;
    vision_wp *wp;
    kern_pool *pool;
    int own_pool;
    textenc_precision prec;
    float *calib;      /* while calibrating: [n_layers][4][calib_width] max |x| per column */
    int64_t calib_width;
    pthread_mutex_t mu;
    te_scratch *scr;   /* run_batches' buffers, made on first use, kept (under mu) */
    int has_res;       /* the residuals are made (under mu) */
};

/* ---- loading -------------------------------------------------------------------- */

/* config.json: optional; MiniLM-L6 values when absent. Only "gelu" is supported. */
static int read_config(textenc *te, const char *dir, char *err, size_t errlen) {
    te->h = 384;
    te->heads = 12;
    te->n_layers = 6;
    te->inter = 1536;
    te->max_pos = 512;
    te->eps = 1e-12f;
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (access(path, F_OK) != 0) return 0;
    json_error_t je;
    json_t *c = json_load_file(path, 0, &je);
    if (!json_is_object(c)) {
        vision_set_err(err, errlen, "textenc: %s: %s", path, c ? "not a JSON object" : je.text);
        json_decref(c);
        return -1;
    }
    struct { const char *key; int32_t *dst; } ints[] = {
        {"hidden_size", &te->h}, {"num_attention_heads", &te->heads},
        {"num_hidden_layers", &te->n_layers}, {"intermediate_size", &te->inter},
        {"max_position_embeddings", &te->max_pos},
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        json_t *v = json_object_get(c, ints[i].key);
        if (!v) continue;
        if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > 65536) {
            vision_set_err(err, errlen, "textenc: %s: bad %s", path, ints[i].key);
            rc = -1;
        } else {
            *ints[i].dst = (int32_t)json_integer_value(v);
        }
    }
    json_t *eps = json_object_get(c, "layer_norm_eps");
    if (json_is_number(eps)) te->eps = (float)json_number_value(eps);
    json_t *act = json_object_get(c, "hidden_act");
    if (act && (!json_is_string(act) || strcmp(json_string_value(act), "gelu") != 0)) {
        vision_set_err(err, errlen, "textenc: %s: hidden_act must be \"gelu\"", path);
        rc = -1;
    }
    if (rc == 0 && (te->h % te->heads != 0 || te->max_pos < 2)) {
        vision_set_err(err, errlen, "textenc: %s: hidden_size %d not divisible by %d heads", path,
                       te->h, te->heads);
        rc = -1;
    }
    json_decref(c);
    return rc;
}

typedef struct {
    textenc *te;
    const char *prefix; /* "" or "bert." */
    const char *path;
    char *err;
    size_t errlen;
    int failed;
} loader;

static int keep(loader *L, void *p) {
    textenc *te = L->te;
    if (!p) return -1;
    if (te->n_owned == te->cap_owned) {
        int cap = te->cap_owned ? 2 * te->cap_owned : 64;
        void **o = realloc(te->owned, (size_t)cap * sizeof *o);
        if (!o) {
            free(p);
            return -1;
        }
        te->owned = o;
        te->cap_owned = cap;
    }
    te->owned[te->n_owned++] = p;
    return 0;
}

static const float *load(loader *L, const char *name, int64_t count) {
    if (L->failed) return NULL;
    char full[256], e[512];
    snprintf(full, sizeof full, "%s%s", L->prefix, name);
    const mf_tensor *t = mf_safetensors_find(L->te->file, full);
    if (t && t->type == KERN_F32 && (uintptr_t)t->data % sizeof(float) == 0 &&
        (count < 0 || t->nbytes == (size_t)count * sizeof(float)))
        return t->data;
    float *x = mf_safetensors_load_f32(L->te->file, full, count, e, sizeof e);
    if (!x || keep(L, x) != 0) {
        vision_set_err(L->err, L->errlen, "textenc: %s: %s", L->path, x ? "out of memory" : e);
        L->failed = 1;
        return NULL;
    }
    return x;
}

static const float *load_layer(loader *L, int i, const char *name, int64_t count) {
    char full[200];
    snprintf(full, sizeof full, "encoder.layer.%d.%s", i, name);
    return load(L, full, count);
}

/* dst = the n parts of `each` floats, end to end */
static void stack_into(float *dst, const float *const *parts, int n, int64_t each) {
    for (int i = 0; i < n; i++) memcpy(dst + i * each, parts[i], (size_t)each * sizeof *dst);
}

/* Stack n parts of `each` floats into one owned buffer. */
static const float *stack(loader *L, const float *const *parts, int n, int64_t each) {
    if (L->failed) return NULL;
    float *o = malloc((size_t)(n * each) * sizeof *o);
    if (!o || keep(L, o) != 0) {
        vision_set_err(L->err, L->errlen, "textenc: %s: out of memory", L->path);
        L->failed = 1;
        return NULL;
    }
    stack_into(o, parts, n, each);
    return o;
}

static int load_weights(textenc *te, const char *path, char *err, size_t errlen) {
    if (mf_safetensors_open(path, &te->file, err, errlen) != 0) return -1;
    const mf_safetensors *f = te->file;
    loader L = {te, "", path, err, errlen, 0};
    if (!mf_safetensors_find(f, "embeddings.word_embeddings.weight") &&
        mf_safetensors_find(f, "bert.embeddings.word_embeddings.weight"))
        L.prefix = "bert.";
    char name[128];
    snprintf(name, sizeof name, "%sembeddings.word_embeddings.weight", L.prefix);
    const mf_tensor *we = mf_safetensors_find(f, name);
    if (!we || we->n_dims != 2 || we->shape[1] != te->h || we->shape[0] < 1 ||
        we->shape[0] > (1 << 24)) {
        vision_set_err(err, errlen, "textenc: %s: no embeddings.word_embeddings.weight of width %d",
                       path, te->h);
        return -1;
    }
    snprintf(name, sizeof name, "%sembeddings.token_type_embeddings.weight", L.prefix);
    const mf_tensor *tt = mf_safetensors_find(f, name);
    if (!tt || tt->n_dims != 2 || tt->shape[1] != te->h || tt->shape[0] < 1) {
        vision_set_err(err, errlen, "textenc: %s: no token_type_embeddings of width %d", path, te->h);
        return -1;
    }
    int64_t h = te->h, in = te->inter;
    te->vocab = (int32_t)we->shape[0];
    te->word = load(&L, "embeddings.word_embeddings.weight", te->vocab * h);
    te->pos = load(&L, "embeddings.position_embeddings.weight", te->max_pos * h);
    te->type0 = load(&L, "embeddings.token_type_embeddings.weight", tt->shape[0] * h);
    te->eln_g = load(&L, "embeddings.LayerNorm.weight", h);
    te->eln_b = load(&L, "embeddings.LayerNorm.bias", h);
    te->layers = calloc((size_t)te->n_layers, sizeof *te->layers);
    if (!te->layers) L.failed = 1;
    for (int i = 0; i < te->n_layers && !L.failed; i++) {
        te_layer *ly = &te->layers[i];
        const float *w[3] = {load_layer(&L, i, "attention.self.query.weight", h * h),
                             load_layer(&L, i, "attention.self.key.weight", h * h),
                             load_layer(&L, i, "attention.self.value.weight", h * h)};
        const float *b[3] = {load_layer(&L, i, "attention.self.query.bias", h),
                             load_layer(&L, i, "attention.self.key.bias", h),
                             load_layer(&L, i, "attention.self.value.bias", h)};
        for (int k = 0; k < 3; k++) ly->qkv_part[k] = w[k];
        ly->qkv_w = stack(&L, w, 3, h * h);
        ly->qkv_b = stack(&L, b, 3, h);
        ly->ao_w = load_layer(&L, i, "attention.output.dense.weight", h * h);
        ly->ao_b = load_layer(&L, i, "attention.output.dense.bias", h);
        ly->ln1_g = load_layer(&L, i, "attention.output.LayerNorm.weight", h);
        ly->ln1_b = load_layer(&L, i, "attention.output.LayerNorm.bias", h);
        ly->in_w = load_layer(&L, i, "intermediate.dense.weight", in * h);
        ly->in_b = load_layer(&L, i, "intermediate.dense.bias", in);
        ly->out_w = load_layer(&L, i, "output.dense.weight", h * in);
        ly->out_b = load_layer(&L, i, "output.dense.bias", h);
        ly->ln2_g = load_layer(&L, i, "output.LayerNorm.weight", h);
        ly->ln2_b = load_layer(&L, i, "output.LayerNorm.bias", h);
    }
    if (L.failed && err && errlen && !err[0])
        vision_set_err(err, errlen, "textenc: %s: out of memory", path);
    return L.failed ? -1 : 0;
}

textenc_opts textenc_default_opts(void) { return (textenc_opts){TEXTENC_PRECISION_DEFAULT}; }

int textenc_precision_parse(const char *s, textenc_precision *out) {
    if (s && strcmp(s, "fp32") == 0) *out = TEXTENC_FP32;
    else if (s && strcmp(s, "int8") == 0) *out = TEXTENC_INT8;
    else return -1;
    return 0;
}

const char *textenc_precision_name(textenc_precision p) {
    return p == TEXTENC_FP32 ? "fp32" : p == TEXTENC_INT8 ? "int8" : "default";
}

textenc_precision textenc_precision_of(const textenc *te) { return te ? te->prec : TEXTENC_FP32; }

textenc_precision textenc_precision_auto(void) {
    if (kern_cuda_available()) return TEXTENC_FP32; /* the fp32 linears and attention run on the GPU */
    return strstr(kern_cpu_path(), "vnni") ? TEXTENC_INT8 : TEXTENC_FP32;
}

/* opts → the precision to use: explicit, else $MMRAG_PRECISION, else textenc_precision_auto.
 * int8 passed its gate (README "Text encoder precision"): cosine to fp32 >= 0.995 on every
 * one of 23,445 real texts, and retrieval within 0.01 of fp32 on the four evaluation sets.
 * It is the default only where the int8 tile has VNNI and no GPU answers (CUDA builds run
 * fp32 there): on VNNI the encoder runs x2.8-x3.0 of fp32 (with bf16 attention);
 * plain AVX2 takes each activation byte as two nibbles and ran x0.92-0.95 of fp32 (2 cores,
 * OpenBLAS Haswell or Cooperlake kernels), and the scalar path is slower still. */
static int pick_precision(const textenc_opts *opts, textenc_precision *p, char *err,
                          size_t errlen) {
    *p = opts ? opts->precision : TEXTENC_PRECISION_DEFAULT;
    if (*p == TEXTENC_FP32 || *p == TEXTENC_INT8) return 0;
    const char *e = getenv("MMRAG_PRECISION");
    *p = textenc_precision_auto();
    if (!e || !*e || textenc_precision_parse(e, p) == 0) return 0;
    vision_set_err(err, errlen, "textenc: MMRAG_PRECISION=%s: expected fp32 or int8", e);
    return -1;
}

/* Calibration text for the int8 smoothing factors: the activation outliers of BERT sit
 * in fixed channels whatever the text, so a few varied lines find them; these mix prose,
 * headings, a dot-leader contents line, code, numbers and a table row, like PDF chunks. */
static const char *const calib_texts[] = {
    "Introduction ......................................................... 1",
    "3.2 Installing the package from source",
    "The quarterly revenue grew by 12% in the cloud services region, driven by new customers.",
    "for (i = 0; i < n; i++) { sum += x[i] * y[i]; } return sum;",
    "Table 4: latency (ms) p50 12.1 p99 48.0 throughput 1,204 req/s",
    ("R is an integrated suite of software facilities for data manipulation, calculation and "
     "graphical display."),   /* one line: clang's -Wstring-concatenation wants the parentheses */
    "set logscale y; plot 'data.dat' using 1:2 with lines title \"measured\"",
    "Figure 7. The encoder maps each chunk of text to a 384-dimensional vector.",
    "See also: cmsCreateTransform(), cmsDeleteTransform() | 0x58595A20 'XYZ '",
    "Valgrind reports an invalid read of size 4 at address 0x1002 in main (test.c:17).",
    "apt-get install --no-install-recommends pkg-config libvips-dev",
    "Returns: 0 on success, -1 on error (the message names the file).",
};

/* sqrt(max|X_j| / max_o |W[o][j]|) per input column j (SmoothQuant, alpha 0.5): moves half
 * of the activation spread into the weights; 1 where either side is 0 */
static void smooth_factors(const float *absx, const float *W, int64_t out, int64_t in,
                           float *s) {
    for (int64_t j = 0; j < in; j++) s[j] = 0.0f; /* first max |W| per column, row by row */
    for (int64_t o = 0; o < out; o++)
        for (int64_t j = 0; j < in; j++) s[j] = fabsf(W[o * in + j]) > s[j] ? fabsf(W[o * in + j]) : s[j];
    for (int64_t j = 0; j < in; j++) {
        float wm = s[j], v = absx[j] > 0.0f && wm > 0.0f ? sqrtf(absx[j] / wm) : 1.0f;
        s[j] = v < 1e-3f ? 1e-3f : v > 1e3f ? 1e3f : v;
    }
}

/* fp32 forward over calib_texts, recording each linear's column max |x| */
static int calibrate(textenc *te, char *err, size_t errlen) {
    te->calib_width = te->inter > te->h ? te->inter : te->h;
    te->calib = calloc((size_t)(te->n_layers * 4 * te->calib_width), sizeof *te->calib);
    int32_t n = (int32_t)(sizeof calib_texts / sizeof calib_texts[0]);
    float *out = malloc((size_t)(n * te->h) * sizeof *out);
    textenc_precision p = te->prec;
    te->prec = TEXTENC_FP32;
    int rc = te->calib && out ? textenc_embed(te, calib_texts, n, out, err, errlen) : -1;
    te->prec = p;
    scratch_free(te->scr); /* sized for fp32's passes */
    te->scr = NULL;
    free(out);
    if (rc != 0 && err && errlen && !err[0])
        vision_set_err(err, errlen, "textenc: out of memory (calibration)");
    return rc;
}

/* At int8 every pass runs the int8 copies, so the stacked fp32 query/key/value copies
 * (10.6 MB for MiniLM-L6) are freed; the other fp32 weights are the file's mapping. */
static void drop_fp32_qkv(textenc *te) {
    for (int i = 0; i < te->n_layers; i++)
        for (int j = 0; j < te->n_owned; j++)
            if (te->owned[j] == te->layers[i].qkv_w) {
                free(te->owned[j]);
                te->owned[j] = NULL;
                te->layers[i].qkv_w = NULL;
                break;
            }
}

/* layer i's linear k: W, its shape */
static const float *te_linear_w(const textenc *te, int i, int k, int64_t *out, int64_t *in) {
    const te_layer *ly = &te->layers[i];
    int64_t h = te->h;
    *out = k == 0 ? 3 * h : k == 2 ? te->inter : h;
    *in = k == 3 ? te->inter : h;
    return k == 0 ? ly->qkv_w : k == 1 ? ly->ao_w : k == 2 ? ly->in_w : ly->out_w;
}

/* pool task: the int8 copy (what 0) or the residual (what 1) of linear it % 4 of layer
 * it / 4; a failure leaves it NULL */
typedef struct {
    textenc *te;
    int what;
} quant_ctx;

static void quant_items(void *c_, int64_t b, int64_t e, int thread) {
    quant_ctx *c = c_;
    textenc *te = c->te;
    for (int64_t it = b; it < e; it++) {
        int i = (int)(it / 4), k = (int)(it % 4);
        te_layer *ly = &te->layers[i];
        int64_t out, in;
        const float *W = te_linear_w(te, i, k, &out, &in);
        if (c->what == 0) {
            ly->smooth[k] = malloc((size_t)in * sizeof *ly->smooth[k]);
            if (!ly->smooth[k]) continue;
            smooth_factors(te->calib + (i * 4 + k) * te->calib_width, W, out, in, ly->smooth[k]);
            ly->q[k] = kern_i8_weight_create_smooth(W, out, in, ly->smooth[k]);
            continue;
        }
        float *stacked = NULL;
        if (!W) { /* qkv after drop_fp32_qkv: restack the three parts for this call */
            stacked = malloc((size_t)(out * in) * sizeof *stacked);
            if (stacked) stack_into(stacked, ly->qkv_part, 3, in * in);
            W = stacked;
        }
        if (W) ly->r[k] = kern_i8_weight_create_residual(ly->q[k], W, ly->smooth[k]);
        free(stacked);
    }
}

/* int8 copies of all four linear layers of every layer, smoothed with the calibration,
 * over the pool (the fp32 weights stay mapped); the residuals wait for the first
 * te_repetitive text (te_make_residuals): a query or a page of prose never needs them.
 * The FFN output's input, the GELU output, is heavy-tailed: with 7-bit activation rows it
 * cost the most accuracy and stayed fp32 (1,514 real texts, all four in int8: min cosine
 * 0.9940); with 8-bit rows (kernels/kern_internal.h) all four give min 0.9979, p1 0.9989,
 * and the encoder x1.71 of fp32 instead of x1.37. */
static int quantize_layers(textenc *te, char *err, size_t errlen) {
    if (calibrate(te, err, errlen) != 0) return -1;
    quant_ctx c = {te, 0};
    kern_pool_run(te->pool, te->n_layers * 4, 1, quant_items, &c);
    free(te->calib);
    te->calib = NULL;
    for (int i = 0; i < te->n_layers; i++)
        for (int k = 0; k < 4; k++)
            if (!te->layers[i].q[k]) {
                vision_set_err(err, errlen, "textenc: out of memory (int8 weights)");
                return -1;
            }
    drop_fp32_qkv(te);
    return 0;
}

/* Layers [0, this) have residuals. A repeated token's weight rounding matters most early:
 * on the 870 te_repetitive texts of the 23,445 of the gate, min cosine to fp32 0.99727
 * with residuals in all 6 layers, 0.99691 in the first 3, 0.99603 in the first 2, 0.98972
 * in the last 3; half the layers halve their cost (R-admin's contents: 13% of its tokens). */
static int te_res_layers(const textenc *te) { return (te->n_layers + 1) / 2; }

/* the residuals of the first te_res_layers layers' int8 linears (under te->mu), once */
static int te_make_residuals(textenc *te, char *err, size_t errlen) {
    if (te->has_res) return 0;
    quant_ctx c = {te, 1};
    kern_pool_run(te->pool, te_res_layers(te) * 4, 1, quant_items, &c);
    for (int i = 0; i < te_res_layers(te); i++)
        for (int k = 0; k < 4; k++)
            if (!te->layers[i].r[k]) {
                vision_set_err(err, errlen, "textenc: out of memory (int8 residual weights)");
                return -1;
            }
    te->has_res = 1;
    return 0;
}

int textenc_create(const char *model_dir, kern_pool *pool, textenc **out, char *err,
                   size_t errlen) {
    return textenc_create_opts(model_dir, pool, NULL, out, err, errlen);
}

int textenc_create_opts(const char *model_dir, kern_pool *pool, const textenc_opts *opts,
                        textenc **out, char *err, size_t errlen) {
    *out = NULL;
    if (err && errlen) err[0] = 0;
    char dir[2048], path[4096];
    if (model_dir) {
        snprintf(dir, sizeof dir, "%s", model_dir);
    } else {
        const char *m = getenv("MMRAG_MODELS");
        snprintf(dir, sizeof dir, "%s/minilm", m && *m ? m : "models");
    }
    textenc *te = calloc(1, sizeof *te);
    if (!te) {
        vision_set_err(err, errlen, "textenc: out of memory");
        return -1;
    }
    pthread_mutex_init(&te->mu, NULL);
    if (pick_precision(opts, &te->prec, err, errlen) != 0) goto fail;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (access(path, R_OK) != 0) {
        vision_set_err(err, errlen, "textenc: model file %s not found (run `make models` or point "
                       "the text encoder at a MiniLM directory)", path);
        goto fail;
    }
    if (read_config(te, dir, err, errlen) != 0) goto fail;
    if (load_weights(te, path, err, errlen) != 0) goto fail;
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    if (vision_wp_load(path, &te->wp, err, errlen) != 0) goto fail;
    if (vision_wp_size(te->wp) > te->vocab) {
        vision_set_err(err, errlen, "textenc: %s has %d entries, the model only %d", path,
                       vision_wp_size(te->wp), te->vocab);
        goto fail;
    }
    te->pool = pool;
    if (!pool) {
        te->pool = kern_pool_create(0);
        te->own_pool = 1;
        if (!te->pool) {
            vision_set_err(err, errlen, "textenc: cannot create the thread pool");
            goto fail;
        }
    }
    if (te->prec == TEXTENC_INT8 && quantize_layers(te, err, errlen) != 0) goto fail;
    *out = te;
    return 0;
fail:
    textenc_free(te);
    return -1;
}

void textenc_free(textenc *te) {
    if (!te) return;
    for (int i = 0; i < te->n_owned; i++) free(te->owned[i]);
    free(te->owned);
    for (int i = 0; te->layers && i < te->n_layers; i++)
        for (int k = 0; k < 4; k++) {
            kern_i8_weight_free(te->layers[i].q[k]);
            kern_i8_weight_free(te->layers[i].r[k]);
            free(te->layers[i].smooth[k]);
        }
    free(te->layers);
    mf_safetensors_close(te->file);
    vision_wp_free(te->wp);
    scratch_free(te->scr);
    if (te->own_pool) kern_pool_free(te->pool);
    pthread_mutex_destroy(&te->mu);
    free(te);
}

int32_t textenc_dim(const textenc *te) { return te ? te->h : 0; }
/* One id for both precisions: the id decides whether stored vectors must be recomputed,
 * and int8 vectors are meant to be interchangeable with fp32 ones (cosine >= 0.995 to
 * the fp32 vector of the same text, retrieval metrics within 0.01: the gate int8 had to
 * pass to become the default). A new id would make every existing index re-embed on the
 * first run after an upgrade, for a difference smaller than the one between two chunkings
 * of the same page. A vector stored at one precision and queried at the other scores
 * within that same bound. */
const char *textenc_model_id(const textenc *te) { return "all-MiniLM-L6-v2"; }

int32_t textenc_tokenize(const textenc *te, const char *text, int32_t *ids, int32_t max) {
    int32_t tmp[TEXTENC_MAX_TOKENS];
    int32_t limit = TEXTENC_MAX_TOKENS < te->max_pos ? TEXTENC_MAX_TOKENS : te->max_pos;
    int32_t n = vision_wp_tokenize(te->wp, text, tmp, limit);
    int32_t w = n < max ? n : (max > 0 ? max : 0);
    if (ids && w > 0) memcpy(ids, tmp, (size_t)w * sizeof *ids);
    return n <= max ? n : -n;
}

/* ---- forward pass ------------------------------------------------------------------ */

typedef struct {
    const textenc *te;
    int32_t n_texts;
    const int32_t *ids;     /* all tokens, texts end to end */
    const int32_t *start;   /* per text: first token; start[n_texts] = T */
    float *x, *qkv, *ctx, *tmp, *mid;
    float *out;             /* the call's output rows, [n][h] */
    const int32_t *rows;    /* per text of the pass: its index in the call (its out row) */
    const te_layer *ly;
    int failed;             /* an int8 linear ran out of memory */
    const float *dither;    /* per token: int8 rounding dither (te_dither of its position) */
    int int8;               /* this pass runs the int8 linears */
    int res;                /* ... with their residuals (te_repetitive texts) */
} fwd;

/* int8 activations are rounded with a dither that depends on the token's position in its
 * text (a golden-ratio sequence in [-0.5, 0.5)): a text of one repeated token (dot
 * leaders, ". . . . 190") otherwise repeats one rounding error in every token, and the
 * mean pooling keeps it whole instead of averaging it out. By position, not by row in the
 * batch, so a text's vector does not depend on its batch. */
static float te_dither(int32_t pos) {
    double f = (double)(pos + 1) * 0.6180339887498949;
    return (float)(f - floor(f)) - 0.5f;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* 1 when one token fills half or more of a text's (8 or more) word pieces: contents and
 * index lines of dot leaders. Their int8 vectors stay furthest from fp32 even with the
 * dither (cosine down to 0.989 where other texts keep >= 0.997): the weights' rounding
 * error is the same in every repeated token and the mean keeps it. At int8 they run with
 * the weights' residuals too in the first layers (~15-bit weights there: te_res_layers),
 * which costs less than fp32 and they are a fifth of the tokens of a manual with an index
 * (R-intro). */
static int te_repetitive(const int32_t *ids, int32_t len) {
    int32_t n = len - 2, s[TEXTENC_MAX_TOKENS], run = 1, best = 1; /* without [CLS] [SEP] */
    if (n < 8) return 0;
    memcpy(s, ids + 1, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_i32);
    for (int32_t i = 1; i < n; i++) {
        run = s[i] == s[i - 1] ? run + 1 : 1;
        best = run > best ? run : best;
    }
    return 2 * best >= n;
}

static void embed_rows(void *c_, int64_t b, int64_t e, int thread) {
    fwd *c = c_;
    const textenc *te = c->te;
    int64_t h = te->h;
    int32_t t = 0;
    for (int64_t k = b; k < e; k++) {
        while (c->start[t + 1] <= k) t++; /* the text holding token k */
        float *x = c->x + k * h;
        const float *w = te->word + (int64_t)c->ids[k] * h;
        const float *p = te->pos + (k - c->start[t]) * h;
        for (int64_t j = 0; j < h; j++) x[j] = w[j] + p[j] + te->type0[j];
        kern_layernorm(x, x, h, te->eln_g, te->eln_b, te->eps);
    }
}

/* x = LayerNorm(x + tmp) per token. */
static void residual_ln(const fwd *c, int64_t b, int64_t e, const float *g, const float *bb) {
    int64_t h = c->te->h;
    for (int64_t k = b; k < e; k++) {
        float *x = c->x + k * h;
        kern_add(x, c->tmp + k * h, h);
        kern_layernorm(x, x, h, g, bb, c->te->eps);
    }
}
static void res_ln1_rows(void *c_, int64_t b, int64_t e, int thread) {
    fwd *c = c_;
    residual_ln(c, b, e, c->ly->ln1_g, c->ly->ln1_b);
}
static void res_ln2_rows(void *c_, int64_t b, int64_t e, int thread) {
    fwd *c = c_;
    residual_ln(c, b, e, c->ly->ln2_g, c->ly->ln2_b);
}
static void gelu_rows(void *c_, int64_t b, int64_t e, int thread) {
    fwd *c = c_;
    kern_gelu(c->mid + b * c->te->inter, (e - b) * c->te->inter);
}

/* Attention of text t, heads [h0, h1) */
static void attend_text(const fwd *c, int32_t t, int h0, int h1) {
    int64_t h = c->te->h, d = h / c->te->heads;
    int32_t s = c->start[t], L = c->start[t + 1] - s;
    const float *q = c->qkv + (int64_t)s * 3 * h + h0 * d;
    /* at int8 the attention products run in bf16 too (where the CPU has it): the int8
     * linears' rounding is already larger. Not for te_repetitive texts in the first layer:
     * a repeated token's bf16 rounding there is the same in every position, like the
     * weights' (870 such texts: min cosine 0.9885 with bf16 in every layer; fp32 in layer 0
     * 0.99697, in layers 0-2 0.99693, in all 0.99691) */
    int bf16 = c->int8 && (!c->res || c->ly != c->te->layers);
    (bf16 ? kern_attention_bf16 : kern_attention)(NULL, q, (int)(3 * h), q + h, q + 2 * h, (int)(3 * h),
                                                  c->ctx + (int64_t)s * h + h0 * d, (int)h, L, L,
                                                  h1 - h0, h1 - h0, (int)d, 0, 0);
}
/* items are (text, head) pairs: a pass of one long text and one of many short ones split
 * over the pool alike, and the lengths (attention grows with their square) even out */
static void attend_heads(void *c_, int64_t b, int64_t e, int thread) {
    const fwd *c = c_;
    int heads = c->te->heads;
    for (int64_t i = b; i < e;) {
        int32_t t = (int32_t)(i / heads);
        int h0 = (int)(i % heads), h1 = (int)(e - i + h0 < heads ? e - i + h0 : heads);
        attend_text(c, t, h0, h1);
        i += h1 - h0;
    }
}

/* Mean over each text's tokens, then L2 normalize. */
static void pool_texts(void *c_, int64_t b, int64_t e, int thread) {
    fwd *c = c_;
    int64_t h = c->te->h;
    for (int64_t t = b; t < e; t++) {
        float *o = c->out + (int64_t)c->rows[t] * h;
        int32_t s = c->start[t], L = c->start[t + 1] - s;
        memset(o, 0, (size_t)h * sizeof *o);
        for (int32_t k = 0; k < L; k++) kern_add(o, c->x + (int64_t)(s + k) * h, h);
        double norm = 0;
        for (int64_t j = 0; j < h; j++) norm += (double)o[j] * o[j];
        norm = sqrt(norm); /* the 1/L of the mean cancels in the normalization */
        float inv = (float)(1.0 / (norm > 1e-12 ? norm : 1e-12));
        for (int64_t j = 0; j < h; j++) o[j] *= inv;
    }
}

/* calibration: the running max |x| of each input column of linear k of this layer */
static void record_absmax(textenc *te, const fwd *c, int k, const float *X, int64_t T,
                          int64_t in) {
    float *m = te->calib + ((c->ly - te->layers) * 4 + k) * te->calib_width;
    for (int64_t r = 0; r < T; r++)
        for (int64_t j = 0; j < in; j++) {
            float v = fabsf(X[r * in + j]);
            m[j] = v > m[j] ? v : m[j];
        }
}

/* Y = X·Wᵀ + b for linear k (0 qkv, 1 ao, 2 in, 3 out) of the current layer, at the
 * encoder's precision; linear 2 (FFN in) then GELU */
static void linear(textenc *te, fwd *c, int k, const float *X, int64_t T, int64_t in,
                   const float *W, const float *b, int64_t out, float *Y) {
    if (te->calib) record_absmax(te, c, k, X, T, in);
    /* every linear has its int8 copy (quantize_layers), the first te_res_layers layers a
     * residual too; GELU in the tiles */
    if (c->int8) {
        if (kern_linear_i8_res(te->pool, X, T, c->ly->q[k], c->res ? c->ly->r[k] : NULL, b,
                               k == 2 ? KERN_ACT_GELU : KERN_ACT_NONE, c->dither, te->scr->i8, Y) != 0)
            c->failed = 1;
        return;
    }
    kern_linear(te->pool, X, T, in, W, KERN_F32, b, out, Y);
    if (k == 2) kern_pool_run(te->pool, T, 8, gelu_rows, c);
}

static void forward(textenc *te, fwd *c) {
    kern_pool *p = te->pool;
    int64_t T = c->start[c->n_texts], h = te->h;
    kern_pool_run(p, T, 16, embed_rows, c);
    for (int i = 0; i < te->n_layers; i++) {
        const te_layer *ly = &te->layers[i];
        c->ly = ly;
        linear(te, c, 0, c->x, T, h, ly->qkv_w, ly->qkv_b, 3 * h, c->qkv);
        kern_pool_run(p, (int64_t)c->n_texts * te->heads, 1, attend_heads, c);
        linear(te, c, 1, c->ctx, T, h, ly->ao_w, ly->ao_b, h, c->tmp);
        kern_pool_run(p, T, 16, res_ln1_rows, c);
        linear(te, c, 2, c->x, T, h, ly->in_w, ly->in_b, te->inter, c->mid);
        linear(te, c, 3, c->mid, T, te->inter, ly->out_w, ly->out_b, h, c->tmp);
        kern_pool_run(p, T, 16, res_ln2_rows, c);
    }
    kern_pool_run(p, c->n_texts, 1, pool_texts, c);
}

/* How a batch gets its tokens, and what happens after each forward pass. */
typedef struct batch_src {
    /* token ids of texts [b, e) of the call into ids + (i - g0) * TEXTENC_MAX_TOKENS */
    void (*tokenize)(struct batch_src *src, int64_t b, int64_t e, int64_t g0, int32_t *ids,
                     int32_t *lens);
    /* texts c->rows[0 .. c->n_texts) just ran; their final token states are in c->x */
    void (*after)(struct batch_src *src, const fwd *c);
} batch_src;

typedef struct {
    const textenc *te;
    batch_src *src;
    int64_t g0;
    int32_t *ids;   /* [group][TEXTENC_MAX_TOKENS] */
    int32_t *lens;
} tok_ctx;

static void tokenize_group(void *c_, int64_t b, int64_t e, int thread) {
    tok_ctx *c = c_;
    c->src->tokenize(c->src, c->g0 + b, c->g0 + e, c->g0, c->ids, c->lens);
}

/* At int8, the texts te_repetitive picks run in passes of their own (with the residuals):
 * the group's texts in pass order, the others first, so that each kind fills whole passes
 * (in text order they alternate, and R-intro's index pages cut its passes to ~5 texts). */
static void pass_order(const textenc *te, const int32_t *tok, const int32_t *lens, int32_t gn,
                       int32_t g0, int32_t *order, int32_t *n_first) {
    int32_t k = 0;
    for (int kind = 0; kind < 2; kind++) {
        if (kind == 1) *n_first = k;
        for (int32_t i = 0; i < gn; i++) {
            int rep = te->prec == TEXTENC_INT8 && te_repetitive(tok + (int64_t)i * TEXTENC_MAX_TOKENS, lens[i]);
            if (rep == kind) order[k++] = g0 + i;
        }
    }
}

static int64_t te_budget(const textenc *te) {
    return te->prec == TEXTENC_INT8 ? TE_TOKEN_BUDGET_I8 : TE_TOKEN_BUDGET;
}

static te_scratch *scratch_create(const textenc *te) {
    int64_t h = te->h, B = te_budget(te);
    te_scratch *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->tok = malloc((size_t)TE_TOKENIZE_GROUP * TEXTENC_MAX_TOKENS * sizeof *s->tok);
    s->lens = malloc(TE_TOKENIZE_GROUP * sizeof *s->lens);
    s->ids = malloc((size_t)B * sizeof *s->ids);
    s->start = malloc((TE_TOKENIZE_GROUP + 1) * sizeof *s->start);
    s->order = malloc(TE_TOKENIZE_GROUP * sizeof *s->order);
    s->x = malloc((size_t)(B * h) * sizeof *s->x);
    s->qkv = malloc((size_t)(B * 3 * h) * sizeof *s->x);
    s->ctx = malloc((size_t)(B * h) * sizeof *s->x);
    s->tmp = malloc((size_t)(B * h) * sizeof *s->x);
    s->mid = malloc((size_t)(B * te->inter) * sizeof *s->x);
    s->dith = malloc((size_t)B * sizeof *s->x);
    s->i8 = kern_i8_work_create();
    if (!s->i8 || !s->tok || !s->lens || !s->ids || !s->start || !s->order || !s->x || !s->qkv || !s->ctx ||
        !s->tmp || !s->mid || !s->dith) {
        scratch_free(s);
        return NULL;
    }
    return s;
}

/* Texts in token-budgeted forward passes of whole texts, tokenized a group at a time. */
static int run_batches(textenc *te, int32_t n, batch_src *src, float *out, char *err,
                       size_t errlen) {
    int64_t B = te_budget(te);
    int rc = 0;
    pthread_mutex_lock(&te->mu);
    if (!te->scr) te->scr = scratch_create(te);
    te_scratch *S = te->scr;
    if (!S) {
        pthread_mutex_unlock(&te->mu);
        vision_set_err(err, errlen, "textenc: out of memory");
        return -1;
    }
    int32_t *tok = S->tok, *lens = S->lens, *ids = S->ids, *start = S->start, *order = S->order;
    float *dith = S->dith;
    for (int32_t g0 = 0; g0 < n; g0 += TE_TOKENIZE_GROUP) {
        int32_t gn = n - g0 < TE_TOKENIZE_GROUP ? n - g0 : TE_TOKENIZE_GROUP, n_int8 = 0;
        tok_ctx tc = {te, src, g0, tok, lens};
        kern_pool_run(te->pool, gn, 4, tokenize_group, &tc);
        pass_order(te, tok, lens, gn, g0, order, &n_int8);
        /* forward passes over runs of whole texts within the token budget, one kind each */
        for (int32_t a = 0; a < gn;) {
            int32_t m = 0, T = 0, end = a < n_int8 ? n_int8 : gn;
            start[0] = 0;
            while (a + m < end && T + lens[order[a + m] - g0] <= B) {
                int32_t i = order[a + m] - g0;
                memcpy(ids + T, tok + (int64_t)i * TEXTENC_MAX_TOKENS, (size_t)lens[i] * sizeof *ids);
                for (int32_t k = 0; k < lens[i]; k++) dith[T + k] = te_dither(k);
                T += lens[i];
                start[++m] = T;
            }
            fwd c = {te, m, ids, start, S->x, S->qkv, S->ctx, S->tmp, S->mid, out, order + a, NULL, 0, dith,
                     te->prec == TEXTENC_INT8, a >= n_int8};
            if (c.res && te_make_residuals(te, err, errlen) != 0) { /* these texts fail, the rest go on */
                rc = -1;
                a += m;
                continue;
            }
            forward(te, &c);
            if (c.failed && rc == 0) {
                vision_set_err(err, errlen, "textenc: out of memory");
                rc = -1;
            }
            if (!c.failed && src->after) src->after(src, &c);
            a += m;
        }
    }
    pthread_mutex_unlock(&te->mu);
    return rc;
}

static int check_args(const textenc *te, const char *const *texts, int32_t n, const float *out,
                      char *err, size_t errlen) {
    if (!te || n < 0 || (n > 0 && (!texts || !out))) {
        vision_set_err(err, errlen, "textenc: bad arguments");
        return -1;
    }
    return 0;
}

/* ---- whole texts -------------------------------------------------------------------- */
typedef struct { batch_src base; const textenc *te; const char *const *texts; } plain_src;

static void plain_tokenize(batch_src *s, int64_t b, int64_t e, int64_t g0, int32_t *ids,
                           int32_t *lens) {
    plain_src *p = (plain_src *)s;
    for (int64_t i = b; i < e; i++)
        lens[i - g0] = textenc_tokenize(p->te, p->texts[i], ids + (i - g0) * TEXTENC_MAX_TOKENS,
                                        TEXTENC_MAX_TOKENS);
}

int textenc_embed(textenc *te, const char *const *texts, int32_t n, float *out, char *err,
                  size_t errlen) {
    if (check_args(te, texts, n, out, err, errlen)) return -1;
    if (n == 0) return 0;
    plain_src src = {{plain_tokenize, NULL}, te, texts};
    return run_batches(te, n, &src.base, out, err, errlen);
}

/* ---- spans pooled in context (late chunking) ------------------------------------------ */
typedef struct {
    batch_src base;
    const textenc *te;
    const char *const *texts;
    const textenc_span *spans;
    const int32_t *n_spans;
    const int64_t *first;     /* per text: index of its first span */
    int32_t *lo, *hi;         /* per span: its tokens [lo, hi) within its text */
    float *span_out;
} span_src;

/* Appends the word pieces of text[a, b) at ids + *n, below limit. */
static void add_piece(const textenc *te, const char *text, uint32_t a, uint32_t b, int32_t *ids,
                      int32_t *n, int32_t limit) {
    if (b <= a || *n >= limit) return;
    char *piece = strndup(text + a, b - a);
    int32_t tmp[TEXTENC_MAX_TOKENS];
    int32_t m = piece ? vision_wp_tokenize(te->wp, piece, tmp, TEXTENC_MAX_TOKENS) : 0;
    free(piece);
    for (int32_t k = 1; k + 1 < m && *n < limit; k++) ids[(*n)++] = tmp[k];   /* no [CLS]/[SEP] */
}

static void span_tokenize(batch_src *s, int64_t b, int64_t e, int64_t g0, int32_t *ids,
                          int32_t *lens) {
    span_src *p = (span_src *)s;
    const textenc *te = p->te;
    int32_t limit = (TEXTENC_MAX_TOKENS < te->max_pos ? TEXTENC_MAX_TOKENS : te->max_pos) - 1;
    int32_t cs[2];   /* [CLS] and [SEP]: the tokens of "" */
    vision_wp_tokenize(te->wp, "", cs, 2);
    for (int64_t i = b; i < e; i++) {
        const char *t = p->texts[i] ? p->texts[i] : "";
        uint32_t len = (uint32_t)strlen(t), at = 0;
        int32_t *o = ids + (i - g0) * TEXTENC_MAX_TOKENS, n = 0;
        o[n++] = cs[0];
        for (int32_t j = 0; j < p->n_spans[i]; j++) {
            int64_t k = p->first[i] + j;
            uint32_t s0 = p->spans[k].off < len ? p->spans[k].off : len;
            uint32_t s1 = p->spans[k].len < len - s0 ? s0 + p->spans[k].len : len;
            add_piece(te, t, at, s0, o, &n, limit);
            p->lo[k] = n;
            add_piece(te, t, s0, s1, o, &n, limit);
            p->hi[k] = n;
            at = s1 > at ? s1 : at;
        }
        add_piece(te, t, at, len, o, &n, limit);
        o[n++] = cs[1];
        lens[i - g0] = n;
    }
}

static void span_after(batch_src *s, const fwd *c) {
    span_src *p = (span_src *)s;
    int64_t h = c->te->h;
    for (int32_t t = 0; t < c->n_texts; t++)
        for (int32_t j = 0; j < p->n_spans[c->rows[t]]; j++) {
            int64_t k = p->first[c->rows[t]] + j;
            float *o = p->span_out + k * h;
            memset(o, 0, (size_t)h * sizeof *o);
            for (int32_t q = p->lo[k]; q < p->hi[k]; q++)
                kern_add(o, c->x + (int64_t)(c->start[t] + q) * h, h);
            double norm = 0;
            for (int64_t d = 0; d < h; d++) norm += (double)o[d] * o[d];
            if (norm <= 0) continue;   /* outside the window: a zero row */
            float inv = (float)(1.0 / sqrt(norm));
            for (int64_t d = 0; d < h; d++) o[d] *= inv;
        }
}

int textenc_embed_spans(textenc *te, const char *const *texts, int32_t n,
                        const textenc_span *spans, const int32_t *n_spans, float *out,
                        float *span_out, char *err, size_t errlen) {
    if (check_args(te, texts, n, out, err, errlen)) return -1;
    if (n > 0 && !n_spans) { vision_set_err(err, errlen, "textenc: bad arguments"); return -1; }
    if (n == 0) return 0;
    int64_t total = 0;
    int64_t *first = malloc((size_t)n * sizeof *first);
    if (!first) { vision_set_err(err, errlen, "textenc: out of memory"); return -1; }
    for (int32_t i = 0; i < n; i++) { first[i] = total; total += n_spans[i] > 0 ? n_spans[i] : 0; }
    int32_t *lo = malloc((size_t)(total + 1) * sizeof *lo), *hi = malloc((size_t)(total + 1) * sizeof *hi);
    int rc = -1;
    if (!lo || !hi || (total && (!spans || !span_out))) {
        vision_set_err(err, errlen, lo && hi ? "textenc: bad arguments" : "textenc: out of memory");
    } else {
        span_src src = {{span_tokenize, span_after}, te, texts, spans, n_spans, first, lo, hi, span_out};
        rc = run_batches(te, n, &src.base, out, err, errlen);
    }
    free(first); free(lo); free(hi);
    return rc;
}
