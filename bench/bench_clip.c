/* CLIP image-encoder throughput, mmrag vs the PyTorch reference (scripts/golden_clip.py
 * --bench) on the same weights, inputs and thread count, side by side.
 * Weights: random, ViT-B/32-shaped image tower (width 768, 12 layers, 12 heads, patch 32,
 * 224x224, projection 512; `--tiny` = the golden fixture's tiny shape), generated with the
 * shared PRNG (tests/clip_gen.h) and written as safetensors under $MMRAG_TMP. No real CLIP
 * weights are available (see the closing note), so this measures speed only.
 * --figenc: mmrag's own figure encoder (vision/data/figenc) instead, on random 320x320
 * images (bigger than its grid, as a figure cropped at 144 dpi is, so the resize counts) read
 * at its budget (config.json's mmrag.max_tokens: 196); no PyTorch column (its training code
 * is the reference).
 * Usage: bench_clip [--tiny | --figenc] [--images N] [--no-ref] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/clip_gen.h"
#include "vision/clip.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct { int D, layers, heads, mlp, patch, image, proj; } shape;

/* Write the image tower (HF names) + config.json into dir. */
static int write_weights(const char *dir, shape s) {
    int g = s.image / s.patch, cap = 8 + 16 * s.layers, n = 0;
    clipgen_tensor *t = calloc((size_t)cap, sizeof *t);
    char (*names)[128] = calloc((size_t)cap, sizeof *names);
    if (!t || !names) return -1;
    int rc = 0;
#define ADD(nm, sc, off, nd, ...)                                                    \
    do {                                                                             \
        if (n >= cap) { rc = -1; break; }                                        \
        int64_t sh_[] = {__VA_ARGS__}, cnt_ = 1;                                     \
        snprintf(names[n], sizeof names[n], "%s", nm);                               \
        t[n].name = names[n];                                                        \
        t[n].n_dims = nd;                                                            \
        for (int d_ = 0; d_ < nd; d_++) cnt_ *= (t[n].shape[d_] = sh_[d_]);          \
        float *b_ = malloc((size_t)cnt_ * sizeof *b_);                               \
        if (!b_) { rc = -1; break; }                                                 \
        clipgen_fill(nm, b_, cnt_, sc, off);                                         \
        t[n++].data = b_;                                                            \
    } while (0)
    char nm[128];
    ADD("vision_model.embeddings.patch_embedding.weight", 0.03f, 0, 4, s.D, 3, s.patch, s.patch);
    ADD("vision_model.embeddings.class_embedding", 0.5f, 0, 1, s.D);
    ADD("vision_model.embeddings.position_embedding.weight", 0.2f, 0, 2, g * g + 1, s.D);
    ADD("vision_model.pre_layrnorm.weight", 0.1f, 1, 1, s.D);
    ADD("vision_model.pre_layrnorm.bias", 0.1f, 0, 1, s.D);
    ADD("vision_model.post_layernorm.weight", 0.1f, 1, 1, s.D);
    ADD("vision_model.post_layernorm.bias", 0.1f, 0, 1, s.D);
    ADD("visual_projection.weight", 0.05f, 0, 2, s.proj, s.D);
    for (int l = 0; l < s.layers && !rc; l++) {
        const char *lin[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                             "self_attn.out_proj", "mlp.fc1", "mlp.fc2"};
        for (int k = 0; k < 6 && !rc; k++) {
            int out = k == 4 ? s.mlp : s.D, in = k == 5 ? s.mlp : s.D;
            snprintf(nm, sizeof nm, "vision_model.encoder.layers.%d.%s.weight", l, lin[k]);
            ADD(nm, 1.7f / sqrtf((float)in), 0, 2, out, in);
            snprintf(nm, sizeof nm, "vision_model.encoder.layers.%d.%s.bias", l, lin[k]);
            ADD(nm, 0.02f, 0, 1, out);
        }
        for (int k = 1; k <= 2; k++) {
            snprintf(nm, sizeof nm, "vision_model.encoder.layers.%d.layer_norm%d.weight", l, k);
            ADD(nm, 0.1f, 1, 1, s.D);
            snprintf(nm, sizeof nm, "vision_model.encoder.layers.%d.layer_norm%d.bias", l, k);
            ADD(nm, 0.1f, 0, 1, s.D);
        }
    }
#undef ADD
    char p[600];
    mkdir(dir, 0755);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if (!rc) rc = clipgen_write_safetensors(p, t, n);
    for (int i = 0; i < n; i++) free((void *)t[i].data);
    free(t);
    free(names);
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = rc ? NULL : fopen(p, "w");
    if (!f) return -1;
    fprintf(f, "{\"vision_config\": {\"num_attention_heads\": %d, \"hidden_act\": \"quick_gelu\", "
               "\"layer_norm_eps\": 1e-05}}\n", s.heads);
    return fclose(f);
}

int main(int argc, char **argv) {
    shape s = {768, 12, 12, 3072, 32, 224, 512};
    const char *label = "ViT-B/32 shape";
    int n = 8, no_ref = 0, figenc = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tiny")) { s = (shape){64, 2, 4, 256, 8, 32, 32}; label = "tiny"; }
        else if (!strcmp(argv[i], "--figenc")) { figenc = no_ref = 1; s.image = 320; label = "mmrag figure encoder"; }
        else if (!strcmp(argv[i], "--images") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-ref")) no_ref = 1;
    }
    if (n < 1) n = 1;
    const char *tmp = getenv("MMRAG_TMP");
    char dir[512], path[600], err[256] = "";
    snprintf(dir, sizeof dir, "%s/bench_clip_%d", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    if (figenc) {
        snprintf(path, sizeof path, "vision/data/figenc/model.safetensors");
    } else if (write_weights(dir, s)) {
        printf("clip image encoder: cannot write weights under %s\n", dir);
        return 1;
    } else {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
    }
    kern_pool *pool = kern_pool_create(0);
    int threads = kern_pool_size(pool);
    kern_pool_free(pool);
    vision_image *imgs = calloc((size_t)n, sizeof *imgs);
    uint8_t *px = malloc((size_t)s.image * s.image * 3);
    for (int i = 0; imgs && px && i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "bench%d", i);
        clipgen_image(name, px, (int64_t)s.image * s.image * 3);
        vision_image_from_rgb8(px, s.image, s.image, &imgs[i], NULL, 0);
    }
    free(px);
    double ours = 0, ours1 = 0;
    int mt = 0;
    for (int pass = 0; pass < 2; pass++) { /* all threads, then one thread */
        int th = pass ? 1 : threads;
        if (pass && threads == 1) break;
        pool = kern_pool_create(th);
        clip_model *m = NULL;
        if (clip_create(path, pool, &m, err, sizeof err)) {
            printf("clip image encoder: %s\n", err);
            kern_pool_free(pool);
            return 1;
        }
        float out[CLIP_MAX_DIM];
        int rc = 0;
        mt = clip_default_max_tokens(m);
        rc |= clip_embed_image(m, &imgs[0], mt, out, err, sizeof err); /* warm-up */
        double t0 = now();
        for (int i = 0; i < n; i++) rc |= clip_embed_image(m, &imgs[i], mt, out, err, sizeof err);
        *(pass ? &ours1 : &ours) = n / (now() - t0);
        clip_free(m);
        kern_pool_free(pool);
        if (rc) { printf("clip image encoder: %s\n", err); return 1; }
    }
    for (int i = 0; i < n; i++) vision_image_free(&imgs[i]);
    free(imgs);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long our_rss = ru.ru_maxrss;

    char cmd[1200], line[256];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 scripts/golden_clip.py --bench '%s' --images %d "
             "--threads %d --size %dx%d 2>&1", path, n, threads, s.image, s.image);
    double ref = 0, ref1 = 0;
    FILE *pp = no_ref ? NULL : popen(cmd, "r");
    while (pp && fgets(line, sizeof line, pp)) {
        sscanf(line, "torch_images_per_s %lf", &ref);
        sscanf(line, "torch_images_per_s_1t %lf", &ref1);
    }
    if (pp) pclose(pp);
    getrusage(RUSAGE_CHILDREN, &ru);
    long ref_rss = ru.ru_maxrss;
    if (!figenc) {
        unlink(path);
        snprintf(path, sizeof path, "%s/config.json", dir);
        unlink(path);
        rmdir(dir);
    }

    printf("clip image encoder (%s, %s weights, %dx%d -> %d tokens), %d images, %d threads, "
           "cpu path %s\n", label, figenc ? "trained" : "random", s.image, s.image, mt, n, threads,
           kern_cpu_path());
    printf("  %-28s %12s %14s\n", "", "images/s", "peak RSS MiB");
    printf("  %-28s %12.2f %14.1f\n", "mmrag", ours, our_rss / 1024.0);
    if (ours1 > 0) printf("  %-28s %12.2f\n", "mmrag, 1 thread", ours1);
    if (ref > 0) {
        printf("  %-28s %12.2f %14.1f\n", "pytorch reference", ref, ref_rss / 1024.0);
        if (ref1 > 0) printf("  %-28s %12.2f\n", "pytorch reference, 1 thread", ref1);
        printf("  ratio mmrag / pytorch: %.2fx (same threads)", ours / ref);
        if (ref1 > 0 && ours1 > 0) printf(", %.2fx (1 thread each)", ours1 / ref1);
        printf("\n");
    } else {
        printf("  pytorch reference: unavailable (needs /usr/bin/python3 with torch)\n");
    }
    return 0;
}
