/* mmrag's own figure encoder (vision/data/figenc, trained by vision/train/train_figenc.py)
 * through vision/clip.c:
 * - golden: tests/data/golden/figenc.json holds the training code's PyTorch forward pass
 *   (scripts/golden_figenc.py) on patches drawn from the shared PRNG (tests/clip_gen.h),
 *   at the training grid and at two resampled grids; cosine >= 0.9999 per vector.
 * - behaviour: six figures rendered by vision/train/figdata.py from a seed the training
 *   stream never draws (tests/data/figures) are each found first by a plain query for
 *   their kind, embedded by the locked MiniLM text tower (the LiT contract).
 * - a corrupt or truncated encoder file is an error, not a crash. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/clip_gen.h"
#include "tests/test.h"
#include "vision/clip.h"
#include "vision/textenc.h"

#define MODEL "vision/data/figenc/model.safetensors"
#define FIXTURE "tests/data/golden/figenc.json"

static clip_model *model(void) {
    static clip_model *m;
    char err[256] = "";
    if (!m && clip_create(MODEL, NULL, &m, err, sizeof err)) fprintf(stderr, "  %s\n", err);
    return m;
}

TEST(loads_as_clip_vision_tower) {
    clip_model *m = model();
    CHECK(m != NULL);
    CHECK(clip_dim(m) == 384);  /* MiniLM's space */
    CHECK(clip_patch_size(m) == 16);
    CHECK(clip_image_size(m) == 224);           /* trained on 14x14 */
    CHECK(clip_default_max_tokens(m) == 196);   /* config.json's budget: the trained one */
    CHECK(clip_tokenizer(m) == NULL);  /* image tower only: text goes through MiniLM */
}

static double worst_cosine(const float *got, json_t *want_arr, int n, double *md) {
    float *want = malloc((size_t)n * sizeof *want);
    double cs = -1;
    if (want && json_floats(want_arr, want, n) == 0) {
        cs = test_cosine(got, want, n);
        *md = max_abs_diff(got, want, n);
    }
    free(want);
    return cs;
}

TEST(matches_training_forward_pass) {
    clip_model *m = model();
    json_error_t je;
    json_t *fx = json_load_file(FIXTURE, 0, &je);
    CHECK_MSG(m && fx, "fixture %s: %s", FIXTURE, fx ? "" : je.text);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(fx, "cases"), i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        int gh = (int)json_integer_value(json_object_get(c, "gh"));
        int gw = (int)json_integer_value(json_object_get(c, "gw"));
        int64_t n = (int64_t)gh * gw * 3 * 16 * 16;
        vision_patches p = {.gh = gh, .gw = gw, .patch = 16, .src_h = gh * 16, .src_w = gw * 16};
        p.data = malloc((size_t)n * sizeof *p.data);
        CHECK(p.data != NULL);
        clipgen_fill(name, p.data, n, (float)json_real_value(json_object_get(c, "scale")), 0.0f);
        float emb[384], *tok = NULL;
        char err[256] = "";
        int rc = clip_patch_tokens_from_patches(m, NULL, &p, emb, &tok, err, sizeof err);
        vision_patches_free(&p);
        CHECK_MSG(rc == 0, "%s", err);
        double md = 0, tmd = 0, cs = worst_cosine(emb, json_object_get(c, "embedding"), 384, &md);
        double tw = 1;
        for (int k = 0; k < 4; k++) {
            double d = 0, ck = worst_cosine(tok + k * 384, json_array_get(json_object_get(c, "tokens"), k), 384, &d);
            tw = fmin(tw, ck);
            tmd = fmax(tmd, d);
        }
        free(tok);
        printf("  grid %dx%d: embedding cosine %.7f (max |diff| %.1e), patch tokens worst %.7f (%.1e)\n",
               gh, gw, cs, md, tw, tmd);
        CHECK_MSG(cs >= 0.9999 && tw >= 0.9999, "%s: cosine %.7f, tokens %.7f", name, cs, tw);
    }
    json_decref(fx);
}

TEST(figures_found_by_their_kind) {
    static const char *kinds[] = {"pie", "hbar", "line", "scatter", "table", "flow"};
    static const char *queries[] = {"a pie chart", "a horizontal bar chart", "a line plot",
                                    "a scatter plot", "a table", "a flow diagram with boxes and arrows"};
    enum { K = 6 };
    clip_model *m = model();
    char dir[1024], err[256] = "";
    snprintf(dir, sizeof dir, "%s/minilm", test_env("MMRAG_MODELS", "models"));
    textenc *te = NULL;
    CHECK_MSG(m && textenc_create(dir, NULL, &te, err, sizeof err) == 0, "%s", err);
    float img[K][384], q[K][384];
    for (int i = 0; i < K; i++) {
        char path[256];
        snprintf(path, sizeof path, "tests/data/figures/%s.png", kinds[i]);
        vision_image im;
        CHECK_MSG(vision_image_load_file(path, 0, 0, &im, err, sizeof err) == 0, "%s", err);
        int rc = clip_embed_image(m, &im, 0, img[i], err, sizeof err);
        vision_image_free(&im);
        CHECK_MSG(rc == 0, "%s", err);
    }
    CHECK_MSG(textenc_embed(te, queries, K, &q[0][0], err, sizeof err) == 0, "%s", err);
    textenc_free(te);
    int right = 0;
    for (int i = 0; i < K; i++) {
        int best = 0;
        for (int j = 1; j < K; j++)
            if (test_cosine(q[i], img[j], 384) > test_cosine(q[i], img[best], 384)) best = j;
        printf("  \"%s\" -> %s.png (%.3f)%s\n", queries[i], kinds[best],
               test_cosine(q[i], img[best], 384), best == i ? "" : "  WRONG");
        right += best == i;
    }
    CHECK_MSG(right == K, "%d of %d kinds found first", right, K);
}

TEST(corrupt_encoder_file_is_an_error) {
    char tmp[] = "/tmp/mmrag-figenc-XXXXXX";
    int fd = mkstemp(tmp);
    CHECK(fd >= 0);
    FILE *in = fopen(MODEL, "rb");
    CHECK(in != NULL);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, in);  /* header + the first tensors only */
    fclose(in);
    CHECK(write(fd, buf, n) == (ssize_t)n);
    close(fd);
    clip_model *m = NULL;
    char err[256] = "";
    int rc = clip_create(tmp, NULL, &m, err, sizeof err);
    unlink(tmp);
    printf("  truncated file: rc %d, \"%s\"\n", rc, err);
    CHECK(rc != 0 && m == NULL && err[0]);
}

/* The budget comes from config.json's mmrag.max_tokens; none, or one out of range, leaves the
 * training grid's. The weights are linked into a temporary folder beside each config. */
static int32_t budget_with(const char *config) {
    char dir[] = "/tmp/mmrag-figenc-XXXXXX", st[64], cf[64], abs[4096];
    if (!mkdtemp(dir) || !realpath(MODEL, abs)) return -1;
    snprintf(st, sizeof st, "%s/model.safetensors", dir);
    snprintf(cf, sizeof cf, "%s/config.json", dir);
    FILE *f = fopen(cf, "w");
    int32_t got = -1;
    if (f && symlink(abs, st) == 0) {
        fputs(config, f);
        fclose(f);
        f = NULL;
        clip_model *m = NULL;
        char err[256];
        if (clip_create(st, NULL, &m, err, sizeof err) == 0) got = clip_default_max_tokens(m);
        clip_free(m);
    }
    if (f) fclose(f);
    unlink(st);
    unlink(cf);
    rmdir(dir);
    return got;
}

TEST(token_budget_from_config) {
    const char *vc = "\"vision_config\": {\"num_attention_heads\": 4, \"hidden_act\": \"gelu\"}";
    char c[512];
    snprintf(c, sizeof c, "{%s, \"mmrag\": {\"max_tokens\": 324}}", vc);
    CHECK(budget_with(c) == 324);
    snprintf(c, sizeof c, "{%s}", vc);
    CHECK(budget_with(c) == 196);
    snprintf(c, sizeof c, "{%s, \"mmrag\": {\"max_tokens\": 0}}", vc);
    CHECK(budget_with(c) == 196);
    snprintf(c, sizeof c, "{%s, \"mmrag\": {\"max_tokens\": 100000}}", vc);
    CHECK(budget_with(c) == 196);
}

TEST(zz_cleanup) { clip_free(model()); }
