/* CLIP tokenizer and dual encoder vs golden fixtures from scripts/golden_clip.py.
 *
 * tests/data/golden/clip_tiny.json holds what torch (an independent implementation: conv2d
 * patch embedding, F.interpolate bicubic position embeddings, full 77-token causal text
 * context) produced on small random weights, plus the recipe for those weights: every
 * tensor is drawn from the shared PRNG in tests/clip_gen.h, written here as a safetensors
 * file and loaded through clip_create. Tolerance: cosine >= 0.9999 per embedding.
 * Tokenizer ids come from the script's own Python BPE (exact Unicode classes). */
#include <jansson.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/clip_gen.h"
#include "tests/test.h"
#include "vision/clip.h"

#define FIXTURE "tests/data/golden/clip_tiny.json"

static json_t *fixture(void) {
    static json_t *fx;
    if (!fx) {
        json_error_t e;
        fx = json_load_file(FIXTURE, 0, &e);
        if (!fx) fprintf(stderr, "  cannot read %s: %s (line %d)\n", FIXTURE, e.text, e.line);
    }
    return fx;
}

static const char *merges_path(void) {
    static char p[1024];
    snprintf(p, sizeof p, "%s/clip-tokenizer/bpe_simple_vocab_16e6.txt.gz",
             test_env("MMRAG_MODELS", "models"));
    struct stat st;
    if (stat(p, &st)) snprintf(p, sizeof p, "vision/data/bpe_simple_vocab_16e6.txt.gz");
    return p;
}

static clip_bpe *bpe(void) {
    static clip_bpe *t;
    char err[256];
    if (!t && clip_bpe_create(merges_path(), &t, err, sizeof err))
        fprintf(stderr, "  %s\n", err);
    return t;
}

/* ---- tokenizer ------------------------------------------------------------------ */
TEST(bpe_test_vector) {
    clip_bpe *t = bpe();
    CHECK(t);
    int32_t ids[CLIP_CTX];
    int n = clip_bpe_encode(t, "Hello World!", ids, CLIP_CTX);
    int32_t want[] = {49406, 3306, 1002, 256, 49407};
    CHECK_MSG(n == 5, "n=%d", n);
    for (int i = 0; i < 5; i++) CHECK_MSG(ids[i] == want[i], "ids[%d]=%d", i, ids[i]);
    CHECK(clip_bpe_vocab_size(t) == 49408);
    CHECK(!strcmp(clip_bpe_token(t, 3306), "hello</w>"));
    CHECK(!strcmp(clip_bpe_token(t, 49407), "<|endoftext|>"));
    CHECK(clip_bpe_token(t, 49408) == NULL);
}

TEST(bpe_vs_python_reference) {
    clip_bpe *t = bpe();
    json_t *fx = fixture();
    CHECK(t && fx);
    json_t *cases = json_object_get(fx, "tokenizer");
    CHECK(json_array_size(cases) >= 10);
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c) {
        const char *text = json_string_value(json_object_get(c, "text"));
        json_t *want = json_object_get(c, "ids");
        int32_t ids[CLIP_CTX];
        int n = clip_bpe_encode(t, text, ids, CLIP_CTX);
        CHECK_MSG(n == (int)json_array_size(want), "\"%s\": %d tokens, want %d", text, n,
                  (int)json_array_size(want));
        for (int k = 0; k < n; k++) {
            int w = (int)json_integer_value(json_array_get(want, (size_t)k));
            CHECK_MSG(ids[k] == w, "\"%s\": token %d = %d (%s), want %d (%s)", text, k, ids[k],
                      clip_bpe_token(t, ids[k]), w, clip_bpe_token(t, w));
        }
    }
}

TEST(bpe_edge_cases) {
    clip_bpe *t = bpe();
    CHECK(t);
    int32_t ids[CLIP_CTX];
    /* truncation keeps max_len tokens and ends with <|endoftext|> */
    CHECK(clip_bpe_encode(t, "one two three four five six", ids, 4) == 4);
    CHECK(ids[0] == CLIP_SOT && ids[3] == CLIP_EOT);
    /* invalid UTF-8 and a huge word neither crash nor overflow */
    CHECK(clip_bpe_encode(t, "\xff\xfe bad \xc3", ids, CLIP_CTX) > 2);
    char *big = malloc(100001);
    CHECK(big);
    memset(big, 'z', 100000);
    big[100000] = 0;
    int n = clip_bpe_encode(t, big, ids, CLIP_CTX);
    free(big);
    CHECK(n == CLIP_CTX && ids[n - 1] == CLIP_EOT);
    CHECK(clip_bpe_encode(t, "x", ids, 1) < 0);
    char err[256] = "";
    clip_bpe *bad = NULL;
    CHECK(clip_bpe_create("/nonexistent/merges.gz", &bad, err, sizeof err) == VISION_IO && !bad);
    CHECK(strstr(err, "clip:"));
}

TEST(bpe_rejects_bad_merges) {
    const char *tmp = test_env("MMRAG_TMP", "/tmp");
    char p[512], err[256] = "";
    snprintf(p, sizeof p, "%s/clip_bad_merges.txt", tmp);
    FILE *f = fopen(p, "w");
    CHECK(f);
    fputs("#version: 0.2\ni n\nthis line is broken\n", f);
    fclose(f);
    clip_bpe *t = NULL;
    CHECK(clip_bpe_create(p, &t, err, sizeof err) == VISION_FORMAT && !t);
    f = fopen(p, "w");
    fputs("#version: 0.2\ni n\nt h\n", f); /* too short */
    fclose(f);
    CHECK(clip_bpe_create(p, &t, err, sizeof err) == VISION_FORMAT && !t);
    CHECK_MSG(strstr(err, "48894"), "%s", err);
}

/* ---- model ------------------------------------------------------------------------ */
typedef struct {
    clipgen_tensor *t;
    float **bufs;
    int n;
} weights;

static void weights_free(weights *w) {
    for (int i = 0; i < w->n; i++) free(w->bufs[i]);
    free(w->bufs);
    free(w->t);
    memset(w, 0, sizeof *w);
}

/* Generate the fixture's tensors; check them against the script's sums. */
static int gen_weights(json_t *fx, weights *w) {
    json_t *specs = json_object_get(fx, "tensors"), *sums = json_object_get(fx, "weight_sums");
    w->n = (int)json_array_size(specs);
    w->t = calloc((size_t)w->n, sizeof *w->t);
    w->bufs = calloc((size_t)w->n, sizeof *w->bufs);
    if (!w->t || !w->bufs || !w->n) return -1;
    for (int i = 0; i < w->n; i++) {
        json_t *s = json_array_get(specs, (size_t)i), *shape = json_object_get(s, "shape");
        clipgen_tensor *t = &w->t[i];
        t->name = json_string_value(json_object_get(s, "name"));
        t->n_dims = (int)json_array_size(shape);
        int64_t cnt = 1;
        for (int d = 0; d < t->n_dims; d++) {
            t->shape[d] = json_integer_value(json_array_get(shape, (size_t)d));
            cnt *= t->shape[d];
        }
        w->bufs[i] = malloc((size_t)cnt * sizeof(float));
        if (!w->bufs[i]) return -1;
        clipgen_fill(t->name, w->bufs[i], cnt, (float)json_number_value(json_object_get(s, "scale")),
                     (float)json_number_value(json_object_get(s, "offset")));
        t->data = w->bufs[i];
        double sum = 0;
        for (int64_t k = 0; k < cnt; k++) sum += w->bufs[i][k];
        double want = json_number_value(json_object_get(sums, t->name));
        if (fabs(sum - want) > 1e-6 * (1 + fabs(want))) {
            fprintf(stderr, "  PRNG mismatch on %s: sum %.9g vs %.9g\n", t->name, sum, want);
            return -1;
        }
    }
    return 0;
}

static int write_model(const char *dir, const clipgen_tensor *t, int n, json_t *config) {
    char p[600];
    mkdir(dir, 0755);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if (clipgen_write_safetensors(p, t, n)) return -1;
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (config && json_dump_file(config, p, 0)) return -1;
    return 0;
}

static clip_model *tiny_model(void) {
    static clip_model *m;
    static int tried;
    if (tried) return m;
    tried = 1;
    json_t *fx = fixture();
    weights w = {0};
    if (!fx || gen_weights(fx, &w)) { weights_free(&w); return NULL; }
    char dir[512], p[600], err[256] = "";
    snprintf(dir, sizeof dir, "%s/clip_tiny", test_env("MMRAG_TMP", "/tmp"));
    if (write_model(dir, w.t, w.n, json_object_get(fx, "config_json"))) {
        fprintf(stderr, "  cannot write %s\n", dir);
        weights_free(&w);
        return NULL;
    }
    weights_free(&w);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if (clip_create(p, NULL, &m, err, sizeof err)) fprintf(stderr, "  %s\n", err);
    return m;
}

static int fixture_image(json_t *c, vision_image *img) {
    int h = (int)json_integer_value(json_object_get(c, "h"));
    int w = (int)json_integer_value(json_object_get(c, "w"));
    uint8_t *px = malloc((size_t)h * w * 3);
    if (!px) return -1;
    clipgen_image(json_string_value(json_object_get(c, "name")), px, (int64_t)h * w * 3);
    int rc = vision_image_from_rgb8(px, w, h, img, NULL, 0);
    free(px);
    return rc;
}

TEST(model_shapes_from_config) {
    clip_model *m = tiny_model();
    CHECK(m);
    CHECK(clip_dim(m) == 32);
    CHECK(clip_patch_size(m) == 8);
    CHECK(clip_image_size(m) == 32);
    CHECK(clip_default_max_tokens(m) == 16);
    CHECK(clip_tokenizer(m) != NULL);
}

TEST(image_embeddings_vs_torch) {
    clip_model *m = tiny_model();
    json_t *fx = fixture();
    CHECK(m && fx);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(fx, "images"), i, c) {
        vision_image img;
        CHECK(fixture_image(c, &img) == 0);
        float want[64], got[64], *tok = NULL;
        int32_t gh = 0, gw = 0;
        char err[256] = "";
        int mt = (int)json_integer_value(json_object_get(c, "max_tokens"));
        int rc = clip_patch_tokens(m, &img, mt, got, &tok, &gh, &gw, err, sizeof err);
        vision_image_free(&img);
        CHECK_MSG(rc == 0, "%s", err);
        json_t *grid = json_object_get(c, "grid");
        CHECK(gh == json_integer_value(json_array_get(grid, 0)));
        CHECK(gw == json_integer_value(json_array_get(grid, 1)));
        CHECK(json_floats(json_object_get(c, "embedding"), want, 32) == 0);
        double cs = test_cosine(got, want, 32), md = max_abs_diff(got, want, 32);
        printf("  image %zu (%dx%d grid %dx%d): cosine %.7f (1-cos %.1e, max |diff| %.1e)\n", i,
               (int)json_integer_value(json_object_get(c, "h")),
               (int)json_integer_value(json_object_get(c, "w")), gh, gw, cs, 1 - cs, md);
        if (cs < 0.9999 || md > 1e-4) free(tok);
        /* contract: cosine >= 0.9999; fp32 vs fp32 should also agree per component */
        CHECK_MSG(cs >= 0.9999 && md <= 1e-4, "image %zu cosine %.7f max diff %.1e", i, cs, md);
        json_t *pt = json_object_get(c, "patch_tokens");
        if (pt) {
            int n = gh * gw;
            float *wt = malloc((size_t)n * 32 * sizeof *wt);
            int ok = wt && json_floats(pt, wt, n * 32) == 0;
            double worst = 1, md = 0;
            for (int k = 0; ok && k < n; k++) {
                double ck = test_cosine(tok + k * 32, wt + k * 32, 32);
                if (ck < worst) worst = ck;
                md = fmax(md, max_abs_diff(tok + k * 32, wt + k * 32, 32));
            }
            free(wt);
            free(tok);
            printf("  image %zu patch tokens: worst cosine %.7f (max |diff| %.1e)\n", i, worst, md);
            CHECK(ok);
            CHECK_MSG(worst >= 0.9999 && md <= 1e-4, "patch token cosine %.7f, diff %.1e", worst, md);
        } else {
            free(tok);
        }
    }
}

TEST(text_embeddings_vs_torch) {
    clip_model *m = tiny_model();
    json_t *fx = fixture();
    CHECK(m && fx);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(fx, "texts"), i, c) {
        const char *text = json_string_value(json_object_get(c, "text"));
        float want[64], got[64], got2[64];
        char err[256] = "";
        CHECK(json_floats(json_object_get(c, "embedding"), want, 32) == 0);
        CHECK_MSG(clip_embed_text(m, text, got, err, sizeof err) == 0, "%s", err);
        json_t *ja = json_object_get(c, "ids");
        int32_t ids[CLIP_CTX];
        int n = (int)json_array_size(ja);
        for (int k = 0; k < n; k++) ids[k] = (int32_t)json_integer_value(json_array_get(ja, (size_t)k));
        CHECK(clip_embed_tokens(m, NULL, ids, n, got2, err, sizeof err) == 0);
        double cs = test_cosine(got, want, 32), cs2 = test_cosine(got2, want, 32), md = max_abs_diff(got, want, 32);
        printf("  text %zu (%d tokens): cosine %.7f (1-cos %.1e, max |diff| %.1e)\n", i, n, cs, 1 - cs, md);
        CHECK_MSG(cs >= 0.9999 && cs2 >= 0.9999 && md <= 1e-4, "\"%.40s\" cosine %.7f / %.7f",
                  text, cs, cs2);
    }
}

/* Same weights under OpenCLIP names (fused in_proj, projections as x @ P) must give the
 * same embeddings as the Hugging Face names. */
TEST(openclip_names_match_hf) {
    clip_model *m = tiny_model();
    json_t *fx = fixture();
    CHECK(m && fx);
    weights w = {0};
    CHECK(gen_weights(fx, &w) == 0);
    clipgen_tensor *o = calloc((size_t)w.n, sizeof *o);
    char (*names)[160] = calloc((size_t)w.n, sizeof *names);
    float **extra = calloc((size_t)w.n, sizeof *extra);
    CHECK(o && names && extra);
    int n = 0;
    for (int i = 0; i < w.n; i++) {
        const clipgen_tensor *t = &w.t[i];
        const char *nm = t->name;
        char *dst = names[n];
        int layer;
        char rest[128];
        o[n] = *t;
        o[n].name = dst;
        if (sscanf(nm, "vision_model.encoder.layers.%d.%127s", &layer, rest) == 2 ||
            sscanf(nm, "text_model.encoder.layers.%d.%127s", &layer, rest) == 2) {
            const char *pre = nm[0] == 'v' ? "visual.transformer.resblocks" : "transformer.resblocks";
            const char *map[][2] = {{"layer_norm1", "ln_1"}, {"layer_norm2", "ln_2"},
                                    {"self_attn.out_proj", "attn.out_proj"},
                                    {"mlp.fc1", "mlp.c_fc"}, {"mlp.fc2", "mlp.c_proj"}};
            int done = 0;
            if (!strncmp(rest, "self_attn.q_proj.", 17)) { /* fuse q, k, v (next two specs) */
                int isw = !strcmp(rest + 17, "weight");
                int64_t D = t->shape[0], cnt = isw ? D * D : D;
                float *f = malloc((size_t)cnt * 3 * sizeof *f);
                CHECK(f);
                for (int k = 0; k < 3; k++) {
                    char want[160];
                    snprintf(want, sizeof want, "%.*s%c_proj.%s", (int)(strstr(nm, "q_proj") - nm),
                             nm, "qkv"[k], isw ? "weight" : "bias");
                    for (int j = 0; j < w.n; j++)
                        if (!strcmp(w.t[j].name, want)) memcpy(f + k * cnt, w.t[j].data, (size_t)cnt * 4);
                }
                snprintf(dst, 160, "%s.%d.attn.in_proj_%s", pre, layer, isw ? "weight" : "bias");
                o[n].shape[0] = 3 * D;
                o[n].data = extra[n] = f;
                done = 1;
            } else if (!strncmp(rest, "self_attn.k_proj", 16) || !strncmp(rest, "self_attn.v_proj", 16)) {
                continue;
            }
            for (size_t k = 0; k < 5 && !done; k++) {
                size_t l = strlen(map[k][0]);
                if (!strncmp(rest, map[k][0], l)) {
                    snprintf(dst, 160, "%s.%d.%s%s", pre, layer, map[k][1], rest + l);
                    done = 1;
                }
            }
            CHECK_MSG(done, "unmapped %s", nm);
        } else if (!strcmp(nm, "visual_projection.weight") || !strcmp(nm, "text_projection.weight")) {
            int64_t E = t->shape[0], D = t->shape[1];
            float *f = malloc((size_t)E * D * sizeof *f);
            CHECK(f);
            for (int64_t r = 0; r < E; r++)
                for (int64_t cc = 0; cc < D; cc++) f[cc * E + r] = t->data[r * D + cc];
            snprintf(dst, 160, "%s", nm[0] == 'v' ? "visual.proj" : "text_projection");
            o[n].shape[0] = D;
            o[n].shape[1] = E;
            o[n].data = extra[n] = f;
        } else {
            const char *map[][2] = {
                {"vision_model.embeddings.patch_embedding.weight", "visual.conv1.weight"},
                {"vision_model.embeddings.class_embedding", "visual.class_embedding"},
                {"vision_model.embeddings.position_embedding.weight", "visual.positional_embedding"},
                {"vision_model.pre_layrnorm.", "visual.ln_pre."},
                {"vision_model.post_layernorm.", "visual.ln_post."},
                {"text_model.embeddings.token_embedding.weight", "token_embedding.weight"},
                {"text_model.embeddings.position_embedding.weight", "positional_embedding"},
                {"text_model.final_layer_norm.", "ln_final."}};
            int done = 0;
            for (size_t k = 0; k < 8 && !done; k++) {
                size_t l = strlen(map[k][0]);
                if (!strncmp(nm, map[k][0], l)) {
                    snprintf(dst, 160, "%s%s", map[k][1], nm + l);
                    done = 1;
                }
            }
            CHECK_MSG(done, "unmapped %s", nm);
        }
        n++;
    }
    char dir[512], p[600], err[256] = "";
    snprintf(dir, sizeof dir, "%s/clip_openclip", test_env("MMRAG_TMP", "/tmp"));
    /* OpenCLIP config: text heads 4, vision head width 16, gelu text tower is not
     * expressible there (one quick_gelu flag), so compare with HF config.json semantics. */
    int wrc = write_model(dir, o, n, json_object_get(fx, "config_json"));
    for (int i = 0; i < w.n; i++) free(extra[i]);
    free(extra);
    free(o);
    free(names);
    weights_free(&w);
    CHECK(wrc == 0);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    clip_model *oc = NULL;
    CHECK_MSG(clip_create(p, NULL, &oc, err, sizeof err) == 0, "%s", err);
    json_t *c = json_array_get(json_object_get(fx, "images"), 1);
    vision_image img;
    CHECK(fixture_image(c, &img) == 0);
    float a[64], b[64], ta[64], tb[64];
    int r1 = clip_embed_image(m, &img, 16, a, err, sizeof err);
    int r2 = clip_embed_image(oc, &img, 16, b, err, sizeof err);
    vision_image_free(&img);
    int r3 = clip_embed_text(m, "a diagram of the pipeline", ta, err, sizeof err);
    int r4 = clip_embed_text(oc, "a diagram of the pipeline", tb, err, sizeof err);
    clip_free(oc);
    CHECK(!r1 && !r2 && !r3 && !r4);
    CHECK_MSG(test_cosine(a, b, 32) > 0.999999, "image %.7f", test_cosine(a, b, 32));
    CHECK_MSG(test_cosine(ta, tb, 32) > 0.999999, "text %.7f", test_cosine(ta, tb, 32));
}

TEST(bad_weights_are_errors) {
    json_t *fx = fixture();
    CHECK(fx);
    char err[256] = "", dir[512], p[600];
    clip_model *m = NULL;
    CHECK(clip_create("/nonexistent/clip.safetensors", NULL, &m, err, sizeof err) == VISION_IO);
    CHECK(!m && strstr(err, "clip:"));
    weights w = {0};
    CHECK(gen_weights(fx, &w) == 0);
    snprintf(dir, sizeof dir, "%s/clip_bad", test_env("MMRAG_TMP", "/tmp"));
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    /* a missing layer tensor */
    int drop = -1;
    for (int i = 0; i < w.n; i++)
        if (!strcmp(w.t[i].name, "vision_model.encoder.layers.1.mlp.fc2.bias")) drop = i;
    CHECK(drop >= 0);
    clipgen_tensor keep = w.t[drop];
    w.t[drop] = w.t[w.n - 1];
    int rc = write_model(dir, w.t, w.n - 1, NULL);
    w.t[drop] = keep;
    CHECK(rc == 0);
    err[0] = 0;
    CHECK(clip_create(p, NULL, &m, err, sizeof err) == VISION_FORMAT && !m);
    CHECK_MSG(strstr(err, "layers.1.mlp.fc2.bias"), "%s", err);
    /* a wrong shape: projection width differs between towers */
    for (int i = 0; i < w.n; i++)
        if (!strcmp(w.t[i].name, "text_projection.weight")) w.t[i].shape[0] = 16;
    CHECK(write_model(dir, w.t, w.n, NULL) == 0);
    CHECK(clip_create(p, NULL, &m, err, sizeof err) == VISION_FORMAT && !m);
    weights_free(&w);
    /* truncated file */
    FILE *f = fopen(p, "r+b");
    CHECK(f);
    CHECK(ftruncate(fileno(f), 5000) == 0);
    fclose(f);
    CHECK(clip_create(p, NULL, &m, err, sizeof err) < 0 && !m);
    /* not a safetensors file at all */
    f = fopen(p, "wb");
    fputs("definitely not weights", f);
    fclose(f);
    CHECK(clip_create(p, NULL, &m, err, sizeof err) == VISION_FORMAT && !m);
}

TEST(bad_inputs_are_errors) {
    clip_model *m = tiny_model();
    CHECK(m);
    char err[256] = "";
    float out[64];
    int32_t ids[3] = {CLIP_SOT, 99999, CLIP_EOT};
    CHECK(clip_embed_tokens(m, NULL, ids, 3, out, err, sizeof err) == VISION_MISUSE);
    CHECK(clip_embed_tokens(m, NULL, ids, 0, out, err, sizeof err) == VISION_MISUSE);
    vision_image empty = {0};
    CHECK(clip_embed_image(m, &empty, 0, out, err, sizeof err) < 0);
    vision_patches p = {.gh = 1, .gw = 1, .patch = 16, .data = out};
    CHECK(clip_embed_patches(m, NULL, &p, out, err, sizeof err) == VISION_MISUSE);
    clip_free(NULL);
}

/* Images that need resizing go through libvips and still give unit vectors; the
 * aspect-preserving grid differs from the square training grid. */
TEST(resized_images_embed) {
    clip_model *m = tiny_model();
    CHECK(m);
    static const int sizes[][2] = {{100, 60}, {5, 3}, {720, 1280}, {1, 400}};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        int h = sizes[k][0], w = sizes[k][1];
        uint8_t *px = malloc((size_t)h * w * 3);
        CHECK(px);
        clipgen_image("resize", px, (int64_t)h * w * 3);
        vision_image img;
        CHECK(vision_image_from_rgb8(px, w, h, &img, NULL, 0) == 0);
        free(px);
        float out[64], *tok = NULL;
        int32_t gh = 0, gw = 0;
        char err[256] = "";
        int rc = clip_patch_tokens(m, &img, 0, out, &tok, &gh, &gw, err, sizeof err);
        vision_image_free(&img);
        CHECK_MSG(rc == 0, "%dx%d: %s", h, w, err);
        double n2 = 0;
        for (int i = 0; i < 32; i++) n2 += (double)out[i] * out[i];
        free(tok);
        CHECK_NEAR(n2, 1.0, 1e-4);
        CHECK(gh * gw <= 16 && gh >= 1 && gw >= 1);
    }
}

typedef struct { clip_model *m; vision_image *img; float out[64]; int rc; } job;
static void *run_job(void *arg) {
    job *j = arg;
    for (int r = 0; r < 5 && !j->rc; r++) j->rc = clip_embed_image_with_pool(j->m, NULL, j->img, 16, j->out, NULL, 0);
    return NULL;
}

/* One model, several threads, each with its own (NULL) pool: same answers. */
TEST(concurrent_embeds_agree) {
    clip_model *m = tiny_model();
    json_t *fx = fixture();
    CHECK(m && fx);
    vision_image img;
    CHECK(fixture_image(json_array_get(json_object_get(fx, "images"), 1), &img) == 0);
    job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (job){.m = m, .img = &img};
        CHECK(pthread_create(&th[i], NULL, run_job, &jobs[i]) == 0);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    vision_image_free(&img);
    for (int i = 0; i < 4; i++) {
        CHECK(jobs[i].rc == 0);
        CHECK(memcmp(jobs[i].out, jobs[0].out, 32 * sizeof(float)) == 0);
    }
}
