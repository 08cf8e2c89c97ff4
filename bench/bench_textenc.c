/* Text encoder throughput, side by side on the same chunk texts at 1 and 2 threads:
 * mmrag fp32 (OpenBLAS) and int8 (kernels/linear_i8.c), timed in alternating rounds;
 * PyTorch (scripts/golden_minilm.py --bench: Debian's torch 1.13); ONNX Runtime fp32 and
 * dynamic-quantized int8 (scripts/bench-ort.sh: pinned onnxruntime in a cached venv, the
 * same weights exported with torch.onnx). The baselines encode like sentence-transformers
 * (batches of 32 sorted by length, padded); every side includes tokenization.
 * Env: MMRAG_MODELS, MMRAG_TMP, BENCH_TEXTS (default 200), BENCH_TEXTS_FILE (one text a
 * line, e.g. real chunks; default: generated chunk-like texts), BENCH_THREADS ("1 2"),
 * BENCH_BASELINES=0 (mmrag only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "vision/textenc.h"

static const char *words[] = {
    "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with",
    "be", "by", "on", "not", "this", "are", "or", "from", "at", "which", "but", "have",
    "they", "were", "there", "been", "one", "all", "their", "has", "would", "when", "will",
    "more", "can", "other", "into", "time", "new", "some", "could", "these", "two", "first",
    "then", "like", "over", "such", "made", "after", "also", "many", "before", "through",
    "years", "where", "much", "should", "because", "each", "people", "state", "good",
    "world", "still", "work", "life", "under", "never", "same", "another", "while", "last",
    "great", "year", "since", "against", "right", "used", "revenue", "chart", "figure",
    "table", "model", "encoder", "vector", "index", "retrieval", "document", "page",
    "image", "caption", "quarterly", "growth", "region", "cloud", "service", "Figure",
    "3.2:", "(see", "below)", "measured", "latency,", "throughput;", "data-centre",
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Deterministic chunk-like texts of 60..200 words. */
static char **make_texts(int n) {
    char **t = calloc((size_t)n, sizeof *t);
    uint32_t s = 12345;
    size_t nw_all = sizeof words / sizeof words[0];
    for (int i = 0; t && i < n; i++) {
        s = s * 1103515245u + 12345u;
        int nw = 60 + (int)((s >> 8) % 141);
        t[i] = calloc((size_t)nw * 16 + 2, 1);
        if (!t[i]) return NULL;
        for (int k = 0; k < nw; k++) {
            s = s * 1103515245u + 12345u;
            if (k) strcat(t[i], " ");
            strcat(t[i], words[(s >> 8) % nw_all]);
        }
        strcat(t[i], ".");
    }
    return t;
}

static double time_embed(textenc *te, char **texts, int n, float *out) {
    double t0 = now();
    char err[512];
    if (textenc_embed(te, (const char *const *)texts, n, out, err, sizeof err) != 0) {
        printf("text encoder: %s\n", err);
        exit(1);
    }
    return now() - t0;
}

static char **read_texts(const char *path, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char **t = calloc((size_t)*n, sizeof *t), *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int k = 0;
    while (k < *n && (len = getline(&line, &cap, f)) >= 0) {
        if (len > 0 && line[len - 1] == '\n') line[len - 1] = 0;
        t[k++] = strdup(line);
    }
    free(line);
    fclose(f);
    *n = k;
    return t;
}

/* runs cmd and prints "  name  chunks/s" for each "NAME chunks_per_s=X ..." line */
static void run_baseline(const char *cmd, const char *label, double ours_int8) {
    char line[1024];
    FILE *pp = popen(cmd, "r");
    int got = 0;
    while (pp && fgets(line, sizeof line, pp)) {
        char *p = strstr(line, "chunks_per_s="), name[64] = "";
        if (!p) continue;
        if (sscanf(line, "%63s", name) != 1 || strncmp(name, "chunks_per_s", 12) == 0)
            snprintf(name, sizeof name, "%s", label);
        double v = atof(p + 13);
        char *c = strstr(line, "min_cos_vs_fp32=");
        printf("  %-24s %10.1f   (mmrag int8 / this: %.2fx)%s%.*s\n", name, v, ours_int8 / v,
               c ? "  " : "", c ? (int)strcspn(c, "\n") : 0, c ? c : "");
        got = 1;
    }
    if (pp) pclose(pp);
    if (!got) printf("  %-24s unavailable\n", label);
}

static int cmp_int(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

/* the share of pad tokens in batches of 32 padded to their longest text */
static double pad_share(const int *lens, int n) {
    long real = 0, padded = 0;
    for (int b = 0; b < n; b += 32) {
        int e = b + 32 < n ? b + 32 : n, mx = 0;
        for (int i = b; i < e; i++) {
            real += lens[i];
            mx = lens[i] > mx ? lens[i] : mx;
        }
        padded += (long)mx * (e - b);
    }
    return padded ? 100.0 * (double)(padded - real) / (double)padded : 0.0;
}

/* issue 14: the padding a padded batcher spends on these texts (in their order, and
 * sorted by length as sentence-transformers and the baselines here do); mmrag lays each
 * pass's texts end to end and attends within each text, so it has none */
static void print_padding(int *lens, int n) {
    double in_order = pad_share(lens, n);
    qsort(lens, (size_t)n, sizeof *lens, cmp_int);
    printf("  pad tokens: mmrag 0%% (padding-free passes); batches of 32 padded: %.1f%% in text "
           "order, %.1f%% sorted by length\n", in_order, pad_share(lens, n));
}

static void bench_threads(const char *models, const char *tmp, char **texts, int n, int threads,
                          const char *path) {
    kern_pool *pool = kern_pool_create(threads); /* also sets OpenBLAS to this many */
    char dir[1024], err[1024];
    snprintf(dir, sizeof dir, "%s/minilm", models);
    textenc *te[2] = {NULL, NULL};
    textenc_opts o[2] = {{TEXTENC_FP32}, {TEXTENC_INT8}};
    for (int k = 0; k < 2; k++)
        if (textenc_create_opts(dir, pool, &o[k], &te[k], err, sizeof err) != 0) {
            printf("text encoder: skipped (%s)\n", err);
            exit(0);
        }
    long tokens = 0;
    int *lens = malloc((size_t)(n ? n : 1) * sizeof *lens);
    if (!lens) exit(1);
    for (int i = 0; i < n; i++) tokens += lens[i] = -textenc_tokenize(te[0], texts[i], NULL, 0);
    float *out = malloc((size_t)n * 384 * sizeof *out);
    double best[2] = {1e30, 1e30};
    for (int k = 0; k < 2; k++) time_embed(te[k], texts, n < 8 ? n : 8, out); /* warm-up */
    for (int rep = 0; rep < 3; rep++) /* alternating: both see the same machine load */
        for (int k = 0; k < 2; k++) {
            double dt = time_embed(te[k], texts, n, out);
            best[k] = dt < best[k] ? dt : best[k];
        }
    printf("text encoder (all-MiniLM-L6-v2), %d chunks, %ld tokens, %d thread%s, cpu path %s\n", n,
           tokens, threads, threads > 1 ? "s" : "", kern_cpu_path());
    print_padding(lens, n); /* sorts lens */
    free(lens);
    printf("  %-24s %10s\n", "", "chunks/s");
    printf("  %-24s %10.1f   (%.0f tokens/s)\n", "mmrag fp32", n / best[0], tokens / best[0]);
    printf("  %-24s %10.1f   (%.0f tokens/s; x%.2f fp32)\n", "mmrag int8", n / best[1],
           tokens / best[1], best[0] / best[1]);
    const char *bl = getenv("BENCH_BASELINES");
    if (!bl || strcmp(bl, "0") != 0) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd,
                 "/usr/bin/python3 scripts/golden_minilm.py --models '%s' --bench %d --threads %d "
                 "--texts '%s' 2>/dev/null", models, n, threads, path);
        run_baseline(cmd, "pytorch", n / best[1]);
        snprintf(cmd, sizeof cmd, "scripts/bench-ort.sh '%s' '%s' %d 2>/dev/null", models, path,
                 threads);
        run_baseline(cmd, "onnxruntime", n / best[1]);
    }
    free(out);
    for (int k = 0; k < 2; k++) textenc_free(te[k]);
    kern_pool_free(pool);
    (void)tmp;
}

int main(void) {
    const char *models = getenv("MMRAG_MODELS") ? getenv("MMRAG_MODELS") : "models";
    const char *tmp = getenv("MMRAG_TMP") ? getenv("MMRAG_TMP") : "/tmp";
    const char *file = getenv("BENCH_TEXTS_FILE");
    int n = getenv("BENCH_TEXTS") ? atoi(getenv("BENCH_TEXTS")) : 200;
    if (n <= 0) n = 200;
    char **texts = file ? read_texts(file, &n) : make_texts(n);
    if (!texts || n == 0) return 1;
    /* the baselines read the same texts from a file */
    char path[1200];
    snprintf(path, sizeof path, "%s/bench_textenc_%d.txt", tmp, (int)getpid());
    FILE *fp = fopen(path, "w");
    if (!fp) return 1;
    for (int i = 0; i < n; i++) fprintf(fp, "%s\n", texts[i]);
    fclose(fp);
    const char *th = getenv("BENCH_THREADS") ? getenv("BENCH_THREADS") : "1 2";
    for (const char *p = th; *p;) {
        char *end;
        long t = strtol(p, &end, 10);
        if (end == p) break;
        if (t > 0) bench_threads(models, tmp, texts, n, (int)t, path);
        p = end;
    }
    unlink(path);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("  peak RSS mmrag: %.1f MiB\n", ru.ru_maxrss / 1024.0);
    for (int i = 0; i < n; i++) free(texts[i]);
    free(texts);
    return 0;
}
