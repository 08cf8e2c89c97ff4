/* The int8 text encoder's accuracy gate on real text: embeds every line of a file with
 * TEXTENC_FP32 and TEXTENC_INT8 and prints the cosine between the two vectors of each
 * line (min, p1, p5, mean) and both speeds (chunks/s, same pool).
 * Usage: tool_precision TEXTS.txt [THREADS]   (env MMRAG_MODELS)
 * The gate (README "Text encoder precision"): min over >= 10,000 real chunks >= 0.995. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vision/textenc.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static char **read_lines(const char *path, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char **v = NULL, *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int cnt = 0, vcap = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        if (len > 0 && line[len - 1] == '\n') line[len - 1] = 0;
        if (cnt == vcap) {
            vcap = vcap ? 2 * vcap : 1024;
            v = realloc(v, (size_t)vcap * sizeof *v);
        }
        v[cnt++] = strdup(line);
    }
    free(line);
    fclose(f);
    *n = cnt;
    return v;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double embed_all(textenc_precision p, kern_pool *pool, char **t, int n, float *out) {
    textenc *te;
    char err[512];
    textenc_opts o = {p};
    if (textenc_create_opts(NULL, pool, &o, &te, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    double t0 = now();
    if (textenc_embed(te, (const char *const *)t, n, out, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    double dt = now() - t0;
    textenc_free(te);
    return dt;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: tool_precision TEXTS.txt [THREADS]\n");
        return 2;
    }
    int n = 0;
    char **t = read_lines(argv[1], &n);
    if (!t || n == 0) return 1;
    kern_pool *pool = kern_pool_create(argc > 2 ? atoi(argv[2]) : 0);
    float *a = malloc((size_t)n * 384 * sizeof *a), *b = malloc((size_t)n * 384 * sizeof *b);
    double *cs = malloc((size_t)n * sizeof *cs), sum = 0;
    double ta = embed_all(TEXTENC_FP32, pool, t, n, a);
    double tb = embed_all(TEXTENC_INT8, pool, t, n, b);
    for (int i = 0; i < n; i++) {
        double d = 0, na = 0, nb = 0;
        for (int j = 0; j < 384; j++) {
            d += (double)a[i * 384 + j] * b[i * 384 + j];
            na += (double)a[i * 384 + j] * a[i * 384 + j];
            nb += (double)b[i * 384 + j] * b[i * 384 + j];
        }
        cs[i] = na > 0 && nb > 0 ? d / sqrt(na * nb) : (na == nb ? 1 : 0);
        sum += cs[i];
        if (getenv("PRECISION_WORST") && cs[i] < atof(getenv("PRECISION_WORST")))
            printf("  %.5f [%.70s]\n", cs[i], t[i]);
    }
    qsort(cs, (size_t)n, sizeof *cs, cmp_d);
    printf("chunks=%d threads=%d cosine(int8, fp32): min=%.5f p1=%.5f p5=%.5f mean=%.5f\n", n,
           kern_pool_size(pool), cs[0], cs[n / 100], cs[n / 20], sum / n);
    printf("fp32 %.1f chunks/s, int8 %.1f chunks/s (x%.2f)\n", n / ta, n / tb, ta / tb);
    return 0;
}
