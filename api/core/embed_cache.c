/* api/core/embed_cache.c — identical texts are embedded once.
 *
 * Consecutive chunks share 40 tokens of overlap, so the sentences in that overlap get a
 * sentence vector twice; running heads, legal lines and repeated captions come back on
 * every page and in every document of a series. Within one call duplicates are found by
 * a hash table over the call's texts; across calls a direct-mapped table keeps the most
 * recent texts with their vectors (compared by the whole text, never by hash alone, so a
 * hit is always the vector of exactly that text). */
#include "api/core/embed_cache.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char *text; float *vec; } cache_slot;

struct embed_cache {
    pthread_mutex_t mu;
    int32_t dim, n_slots;    /* n_slots: a power of two */
    cache_slot *slots;
    float *vecs;             /* n_slots x dim */
    int64_t hits, dups, misses;
};

static uint64_t text_hash(const char *s) {   /* FNV-1a */
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

embed_cache *embed_cache_create(int32_t dim, int32_t n_slots) {
    int32_t n = 1;
    while (n < n_slots && n < (1 << 20)) n <<= 1;
    embed_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->dim = dim;
    c->n_slots = n_slots > 0 ? n : 0;
    if (c->n_slots) {
        c->slots = calloc((size_t)n, sizeof *c->slots);
        c->vecs = malloc((size_t)n * (size_t)dim * sizeof *c->vecs);
        if (!c->slots || !c->vecs) { free(c->slots); free(c->vecs); free(c); return NULL; }
        for (int32_t i = 0; i < n; i++) c->slots[i].vec = c->vecs + (size_t)i * (size_t)dim;
    }
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

void embed_cache_free(embed_cache *c) {
    if (!c) return;
    for (int32_t i = 0; i < c->n_slots; i++) free(c->slots[i].text);
    free(c->slots);
    free(c->vecs);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void embed_cache_stats(embed_cache *c, int64_t *hits, int64_t *dups, int64_t *misses) {
    pthread_mutex_lock(&c->mu);
    *hits = c->hits;
    *dups = c->dups;
    *misses = c->misses;
    pthread_mutex_unlock(&c->mu);
}

/* Under c->mu: copies a cached vector of text into out; 1 on a hit. */
static int cache_get(embed_cache *c, const char *text, uint64_t h, float *out) {
    if (!c->n_slots) return 0;
    cache_slot *s = &c->slots[h & (uint64_t)(c->n_slots - 1)];
    if (!s->text || strcmp(s->text, text)) return 0;
    memcpy(out, s->vec, (size_t)c->dim * sizeof *out);
    return 1;
}

static void cache_put(embed_cache *c, const char *text, uint64_t h, const float *vec) {
    if (!c->n_slots) return;
    cache_slot *s = &c->slots[h & (uint64_t)(c->n_slots - 1)];
    char *t = strdup(text);
    if (!t) return;   /* only a cache: a failed copy leaves the slot as it was */
    free(s->text);
    s->text = t;
    memcpy(s->vec, vec, (size_t)c->dim * sizeof *vec);
}

/* The first index with the same text as texts[i] among those before it, or i. */
typedef struct { int32_t *tab; int32_t mask; } first_map;

static int first_map_init(first_map *m, int32_t n) {
    int32_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    m->mask = cap - 1;
    m->tab = malloc((size_t)cap * sizeof *m->tab);
    if (!m->tab) return -1;
    memset(m->tab, 0xff, (size_t)cap * sizeof *m->tab);
    return 0;
}

static int32_t first_of(first_map *m, const char *const *texts, const uint64_t *h, int32_t i) {
    for (uint64_t k = h[i];; k++) {
        int32_t *slot = &m->tab[k & (uint64_t)m->mask];
        if (*slot < 0) { *slot = i; return i; }
        if (h[*slot] == h[i] && strcmp(texts[*slot], texts[i]) == 0) return *slot;
    }
}

int embed_cache_run(embed_cache *c, const char *const *texts, int32_t n, float *out,
                    embed_cache_fn encode, void *user, char *err, size_t errlen) {
    if (n <= 0) return 0;
    size_t dim = (size_t)c->dim;
    uint64_t *h = malloc((size_t)n * sizeof *h);
    int32_t *src = malloc((size_t)n * sizeof *src);    /* the first index with the same text */
    int32_t *todo = malloc((size_t)n * sizeof *todo);  /* indexes to encode */
    const char **tt = malloc((size_t)n * sizeof *tt);
    first_map m = {0};
    float *tmp = NULL;
    int rc = -1;
    if (!h || !src || !todo || !tt || first_map_init(&m, n)) { snprintf(err, errlen, "out of memory"); goto out; }
    int32_t nt = 0, hit = 0, dup = 0;
    for (int32_t i = 0; i < n; i++) {   /* duplicates within the call: no lock needed */
        tt[i] = texts[i] ? texts[i] : "";
        h[i] = text_hash(tt[i]);
        src[i] = first_of(&m, tt, h, i);
        dup += src[i] != i;
    }
    pthread_mutex_lock(&c->mu);
    for (int32_t i = 0; i < n; i++) {
        if (src[i] != i) continue;
        if (cache_get(c, tt[i], h[i], out + (size_t)i * dim)) hit++;
        else todo[nt++] = i;
    }
    pthread_mutex_unlock(&c->mu);
    if (nt) {
        const char **batch = malloc((size_t)nt * sizeof *batch);
        tmp = malloc((size_t)nt * dim * sizeof *tmp);
        if (!batch || !tmp) { free(batch); snprintf(err, errlen, "out of memory"); goto out; }
        for (int32_t k = 0; k < nt; k++) batch[k] = tt[todo[k]];
        int erc = encode(user, batch, nt, tmp, err, errlen);
        free(batch);
        if (erc) goto out;
        for (int32_t k = 0; k < nt; k++) memcpy(out + (size_t)todo[k] * dim, tmp + (size_t)k * dim, dim * sizeof *tmp);
    }
    for (int32_t i = 0; i < n; i++)
        if (src[i] != i) memcpy(out + (size_t)i * dim, out + (size_t)src[i] * dim, dim * sizeof *out);
    pthread_mutex_lock(&c->mu);
    for (int32_t k = 0; k < nt; k++) cache_put(c, tt[todo[k]], h[todo[k]], out + (size_t)todo[k] * dim);
    c->hits += hit;
    c->dups += dup;
    c->misses += nt;
    pthread_mutex_unlock(&c->mu);
    rc = 0;
out:
    free(h); free(src); free(todo); free(tt); free(m.tab); free(tmp);
    return rc;
}
