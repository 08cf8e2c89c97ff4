/* Text encoder throughput: mmrag vs the PyTorch reference on the same chunk texts and
 * the same thread count, side by side, plus peak RSS of each.
 * The reference is scripts/golden_minilm.py --bench (Debian's torch 1.13, batches of 32
 * sorted by length and padded, as sentence-transformers encodes). Both sides include
 * tokenization. Env: MMRAG_MODELS, MMRAG_TMP, MMRAG_THREADS, BENCH_TEXTS (default 200). */
#include <cblas.h>
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

int main(void) {
    const char *models = getenv("MMRAG_MODELS") ? getenv("MMRAG_MODELS") : "models";
    const char *tmp = getenv("MMRAG_TMP") ? getenv("MMRAG_TMP") : "/tmp";
    int n = getenv("BENCH_TEXTS") ? atoi(getenv("BENCH_TEXTS")) : 200;
    if (n <= 0) n = 200;
    kern_pool *pool = kern_pool_create(0);
    int threads = kern_pool_size(pool);
    openblas_set_num_threads(threads); /* same thread count for our GEMMs as the reference */
    char dir[1024], err[1024];
    snprintf(dir, sizeof dir, "%s/minilm", models);
    textenc *te = NULL;
    if (textenc_create(dir, pool, &te, err, sizeof err) != 0) {
        printf("text encoder: skipped (%s)\n", err);
        kern_pool_free(pool);
        return 0;
    }
    char **texts = make_texts(n);
    if (!texts) return 1;
    long tokens = 0;
    for (int i = 0; i < n; i++) tokens += textenc_tokenize(te, texts[i], NULL, 0) * -1;
    float *out = malloc((size_t)n * 384 * sizeof *out);
    textenc_embed(te, (const char *const *)texts, n < 8 ? n : 8, out, NULL, 0); /* warm-up */
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now();
        if (textenc_embed(te, (const char *const *)texts, n, out, err, sizeof err) != 0) {
            printf("text encoder: %s\n", err);
            return 1;
        }
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long our_rss = ru.ru_maxrss;

    /* the reference, on the same texts */
    char path[1200], cmd[4096], line[512];
    snprintf(path, sizeof path, "%s/bench_textenc_%d.txt", tmp, (int)getpid());
    FILE *fp = fopen(path, "w");
    if (!fp) return 1;
    for (int i = 0; i < n; i++) fprintf(fp, "%s\n", texts[i]);
    fclose(fp);
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 scripts/golden_minilm.py --models '%s' --bench %d --threads %d "
             "--texts '%s' 2>&1", models, n, threads, path);
    double ref = -1, ref_fwd = -1;
    FILE *pp = popen(cmd, "r");
    while (pp && fgets(line, sizeof line, pp)) {
        char *p = strstr(line, "chunks_per_s=");
        if (p) ref = atof(p + 13);
        p = strstr(line, "forward_only_per_s=");
        if (p) ref_fwd = atof(p + 19);
        if (!strstr(line, "chunks_per_s=")) fputs(line, stdout);
    }
    if (pp) pclose(pp);
    unlink(path);
    getrusage(RUSAGE_CHILDREN, &ru);
    long ref_rss = ru.ru_maxrss;

    double ours = n / best;
    printf("text encoder (all-MiniLM-L6-v2), %d chunks, %ld tokens, %d threads, cpu path %s\n",
           n, tokens, threads, kern_cpu_path());
    printf("  %-28s %12s %14s\n", "", "chunks/s", "peak RSS MiB");
    printf("  %-28s %12.1f %14.1f\n", "mmrag", ours, our_rss / 1024.0);
    if (ref > 0) {
        printf("  %-28s %12.1f %14.1f\n", "pytorch reference", ref, ref_rss / 1024.0);
        printf("  %-28s %12.1f\n", "pytorch (forward only)", ref_fwd);
        printf("  ratio mmrag / pytorch: %.2fx (vs forward only: %.2fx)\n", ours / ref,
               ours / ref_fwd);
    } else {
        printf("  pytorch reference: unavailable (needs /usr/bin/python3 with torch)\n");
    }
    for (int i = 0; i < n; i++) free(texts[i]);
    free(texts);
    free(out);
    textenc_free(te);
    kern_pool_free(pool);
    return 0;
}
