/* Sampling: repetition penalty, greedy, temperature, top-k, top-p, with a private PRNG
 * (splitmix64) so a seed reproduces the output; and latency percentiles. */
#include "engine/engine_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double rng_uniform(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

typedef struct {
    float logit;
    int32_t id;
} cand;

static int cmp_cand(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id - y->id; /* ties by id: deterministic */
}

int32_t mmrag_sample(float *logits, int32_t n_vocab, const struct mmrag_sampling *p,
                     const int32_t *history, int32_t n_history, uint64_t *rng_state) {
    if (p->repeat_penalty > 0 && p->repeat_penalty != 1.0f && history) {
        int32_t last = p->repeat_last_n > 0 ? p->repeat_last_n : 64;
        int32_t from = n_history > last ? n_history - last : 0;
        /* each distinct token is penalized once */
        for (int32_t i = from; i < n_history; i++) {
            int32_t t = history[i], seen = 0;
            if (t < 0 || t >= n_vocab) continue;
            for (int32_t j = from; j < i && !seen; j++) seen = history[j] == t;
            if (seen) continue;
            logits[t] = logits[t] > 0 ? logits[t] / p->repeat_penalty : logits[t] * p->repeat_penalty;
        }
    }
    int32_t best = 0;
    for (int32_t i = 1; i < n_vocab; i++)
        if (logits[i] > logits[best]) best = i;
    if (p->temperature <= 0 || !isfinite(logits[best])) return best;
    /* candidates: finite logits, sorted when top-k/top-p need an order */
    cand *c = malloc((size_t)n_vocab * sizeof *c);
    if (!c) return best;
    int32_t n = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        if (isfinite(logits[i])) c[n++] = (cand){logits[i], i};
    qsort(c, (size_t)n, sizeof *c, cmp_cand);
    if (p->top_k > 0 && p->top_k < n) n = p->top_k;
    double sum = 0;
    double *pr = malloc((size_t)n * sizeof *pr);
    if (!pr) { free(c); return best; }
    for (int32_t i = 0; i < n; i++) {
        pr[i] = exp((double)(c[i].logit - c[0].logit) / p->temperature);
        sum += pr[i];
    }
    if (p->top_p > 0 && p->top_p < 1) {
        double cum = 0;
        for (int32_t i = 0; i < n; i++) {
            cum += pr[i] / sum;
            if (cum >= p->top_p) { n = i + 1; break; }
        }
        sum = 0;
        for (int32_t i = 0; i < n; i++) sum += pr[i];
    }
    double r = rng_uniform(rng_state) * sum, acc = 0;
    int32_t pick = c[n - 1].id;
    for (int32_t i = 0; i < n; i++) {
        acc += pr[i];
        if (r < acc) { pick = c[i].id; break; }
    }
    free(pr);
    free(c);
    return pick;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double mmrag_percentile(const double *v, int32_t n, double pct) {
    if (n <= 0) return 0;
    double *t = malloc((size_t)n * sizeof *t);
    if (!t) return 0;
    memcpy(t, v, (size_t)n * sizeof *t);
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    double pos = pct / 100.0 * (n - 1);
    if (pos < 0) pos = 0;
    if (pos > n - 1) pos = n - 1;
    int32_t i = (int32_t)pos;
    double f = pos - i, r = i + 1 < n ? t[i] * (1 - f) + t[i + 1] * f : t[i];
    free(t);
    return r;
}
