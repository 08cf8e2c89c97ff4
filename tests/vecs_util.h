/* Vectors for index tests and the index bench (header-only, static helpers).
 *
 * vecs_load_real(): >= 10,400 real MiniLM (all-MiniLM-L6-v2) embeddings of varied English
 * text, made by this repo's text encoder (vision/textenc.h) over sentences taken from
 * files every Debian machine of this kind has (Python's standard library comments and
 * docstrings, /usr/share/common-licenses), deduplicated. Encoding them takes a while, so
 * they are cached once in $MMRAG_MODELS/cache/minilm-corpus-<hash>.f32 (the hash covers
 * the texts, so a different corpus gives a different file).
 * synth_vectors(): clustered, mostly-positive random unit vectors (for logic tests).
 * perturb_vectors(): more vectors from real ones (v + noise, renormalized), for scale. */
#ifndef MMRAG_TESTS_VECS_UTIL_H
#define MMRAG_TESTS_VECS_UTIL_H
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vision/textenc.h"

#define VECS_REAL_N 10400

typedef struct { float *v; int64_t n; int32_t dim; } vecs_set;
static inline void vecs_free(vecs_set *s) { free(s->v); s->v = NULL; s->n = 0; }

static inline uint64_t vecs_rng(uint64_t *s) {
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return *s;
}
static inline float vecs_gauss(uint64_t *s) {
    double u = ((vecs_rng(s) >> 11) + 0.5) / 9007199254740992.0;
    double w = ((vecs_rng(s) >> 11) + 0.5) / 9007199254740992.0;
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * w));
}
static inline void vecs_norm(float *x, int32_t d) {
    double s = 0;
    for (int32_t i = 0; i < d; i++) s += (double)x[i] * x[i];
    float inv = s > 0 ? (float)(1 / sqrt(s)) : 0;
    for (int32_t i = 0; i < d; i++) x[i] *= inv;
}

/* n unit vectors around 20 centres with a common positive offset */
static inline float *synth_vectors(int64_t n, int32_t d, uint64_t seed) {
    uint64_t s = seed * 2654435761u + 1;
    float *c = malloc((size_t)20 * d * sizeof *c), *x = malloc((size_t)n * d * sizeof *x);
    for (int64_t i = 0; i < 20 * d; i++) c[i] = vecs_gauss(&s) + 0.8f;
    for (int64_t i = 0; i < n; i++) {
        const float *ci = c + (size_t)(vecs_rng(&s) % 20) * d;
        for (int32_t j = 0; j < d; j++) x[(size_t)i * d + j] = ci[j] + 0.9f * vecs_gauss(&s);
        vecs_norm(x + (size_t)i * d, d);
    }
    free(c);
    return x;
}

/* n vectors: each a real one plus gaussian noise of relative size `noise` */
static inline float *perturb_vectors(const float *real, int64_t nreal, int32_t d, int64_t n,
                                     float noise, uint64_t seed) {
    uint64_t s = seed * 2654435761u + 3;
    float *x = malloc((size_t)n * d * sizeof *x);
    float sd = noise / sqrtf((float)d);
    for (int64_t i = 0; i < n; i++) {
        const float *r = real + (size_t)(i % nreal) * d;
        for (int32_t j = 0; j < d; j++) x[(size_t)i * d + j] = r[j] + sd * vecs_gauss(&s);
        vecs_norm(x + (size_t)i * d, d);
    }
    return x;
}

/* ---- the real-text corpus ---- */
typedef struct { char **t; int64_t n, cap; uint64_t *seen; size_t seencap; uint64_t hash; } vecs_texts;

static inline uint64_t vecs_fnv(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char)p[i]; h *= 1099511628211ull; }
    return h;
}
static inline int vecs_texts_add(vecs_texts *T, const char *s, size_t len) {
    uint64_t h = vecs_fnv(s, len) | 1;
    size_t i = h & (T->seencap - 1);
    while (T->seen[i]) {
        if (T->seen[i] == h) return 0;  /* duplicate */
        i = (i + 1) & (T->seencap - 1);
    }
    T->seen[i] = h;
    if (T->n == T->cap) {
        T->cap = T->cap ? T->cap * 2 : 1024;
        T->t = realloc(T->t, (size_t)T->cap * sizeof *T->t);
    }
    T->t[T->n] = strndup(s, len);
    T->hash = (T->hash ^ h) * 1099511628211ull;
    T->n++;
    return 1;
}

/* sentences of prose from one file: comment/docstring/prose lines joined into texts of
 * 8..40 words */
static inline void vecs_texts_file(vecs_texts *T, const char *path, int64_t want) {
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[1024], buf[600];
    size_t bl = 0;
    int words = 0, target = 12;
    uint64_t r = vecs_fnv(path, strlen(path)) | 1;
    while (T->n < want && fgets(line, sizeof line, f)) {
        char *p = line;
        while (*p == ' ' || *p == '\t' || *p == '#' || *p == '"' || *p == '\'') p++;
        size_t len = strcspn(p, "\r\n");
        p[len] = 0;
        int w = 0, alpha = 0, code = 0;
        for (char *q = p; *q; q++) {
            if ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z')) alpha++;
            if (*q == ' ' && q > p && q[-1] != ' ') w++;
            if (strchr("=(){}[];<>_\\", *q)) code++;
        }
        if (w < 3 || code > 1 || alpha * 10 < (int)len * 7 || bl + len + 2 >= sizeof buf) {
            if (words >= 8) vecs_texts_add(T, buf, bl);
            bl = 0, words = 0;
            if (w < 3 || code > 1 || alpha * 10 < (int)len * 7) continue;
        }
        if (bl) buf[bl++] = ' ';
        memcpy(buf + bl, p, len);
        bl += len;
        buf[bl] = 0;
        words += w + 1;
        if (words >= target) {
            vecs_texts_add(T, buf, bl);
            bl = 0, words = 0;
            target = 8 + (int)(vecs_rng(&r) % 33);
        }
    }
    fclose(f);
}

static inline int vecs_cmpstr(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static inline void vecs_texts_dir(vecs_texts *T, const char *dir, const char *suffix, int64_t want) {
    DIR *d = opendir(dir);
    if (!d) return;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name), sl = strlen(suffix);
        if (e->d_name[0] == '.' || l < sl || strcmp(e->d_name + l - sl, suffix)) continue;
        if (n == cap) names = realloc(names, (cap = cap ? cap * 2 : 256) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, vecs_cmpstr);  /* same order on every machine */
    for (size_t i = 0; i < n; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        vecs_texts_file(T, p, want);
        free(names[i]);
    }
    free(names);
}

static inline void vecs_texts_free(vecs_texts *T) {
    for (int64_t i = 0; i < T->n; i++) free(T->t[i]);
    free(T->t);
    free(T->seen);
}

/* the corpus texts (deterministic for a given set of files) */
static inline int vecs_corpus(vecs_texts *T, int64_t want) {
    memset(T, 0, sizeof *T);
    T->seencap = 1 << 16;
    T->seen = calloc(T->seencap, sizeof *T->seen);
    vecs_texts_dir(T, "/usr/share/common-licenses", "", want);
    vecs_texts_dir(T, "/usr/lib/python3.11", ".py", want);
    vecs_texts_dir(T, "/usr/lib/python3.11/email", ".py", want);
    vecs_texts_dir(T, "/usr/lib/python3.11/asyncio", ".py", want);
    vecs_texts_dir(T, "/usr/lib/python3.11/unittest", ".py", want);
    vecs_texts_dir(T, "/usr/lib/python3.11/multiprocessing", ".py", want);
    return T->n >= want ? 0 : -1;
}

static inline int vecs_load_real_n(vecs_set *out, int64_t want, char *why, size_t whylen) {
    memset(out, 0, sizeof *out);
    vecs_texts T;
    if (vecs_corpus(&T, want)) {
        snprintf(why, whylen, "only %lld corpus texts found (want %lld)", (long long)T.n,
                 (long long)want);
        vecs_texts_free(&T);
        return -1;
    }
    const char *models = getenv("MMRAG_MODELS");
    if (!models || !*models) models = "models";
    char dir[1024], path[1200];
    snprintf(dir, sizeof dir, "%s/cache", models);
    snprintf(path, sizeof path, "%s/minilm-corpus-%016llx-%lld.f32", dir,
             (unsigned long long)T.hash, (long long)want);
    FILE *f = fopen(path, "rb");
    if (f) {
        int32_t hdr[2];
        if (fread(hdr, sizeof hdr, 1, f) == 1 && hdr[0] == (int32_t)want && hdr[1] > 0 &&
            hdr[1] <= 4096) {
            out->dim = hdr[1];
            out->n = want;
            out->v = malloc((size_t)want * out->dim * sizeof(float));
            if (fread(out->v, sizeof(float) * out->dim, (size_t)want, f) == (size_t)want) {
                fclose(f);
                vecs_texts_free(&T);
                return 0;
            }
            vecs_free(out);
        }
        fclose(f);
    }
    /* encode once with the real text encoder and cache */
    textenc *te = NULL;
    char err[512];
    if (textenc_create(NULL, NULL, &te, err, sizeof err)) {
        snprintf(why, whylen, "%s", err);
        vecs_texts_free(&T);
        return -1;
    }
    fprintf(stderr, "  encoding %lld corpus texts with MiniLM once (cache: %s)\n",
            (long long)want, path);
    out->dim = textenc_dim(te);
    out->n = want;
    out->v = malloc((size_t)want * out->dim * sizeof(float));
    int rc = 0;
    for (int64_t i = 0; i < want && !rc; i += 64) {
        int64_t m = want - i < 64 ? want - i : 64;
        rc = textenc_embed(te, (const char **)T.t + i, (int32_t)m,
                           out->v + (size_t)i * out->dim, err, sizeof err);
    }
    textenc_free(te);
    vecs_texts_free(&T);
    if (rc) {
        snprintf(why, whylen, "%s", err);
        vecs_free(out);
        return -1;
    }
    mkdir(models, 0755);
    mkdir(dir, 0755);
    char tmp[1300];
    snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
    f = fopen(tmp, "wb");
    if (f) {
        int32_t hdr[2] = {(int32_t)want, out->dim};
        int ok = fwrite(hdr, sizeof hdr, 1, f) == 1 &&
                 fwrite(out->v, sizeof(float) * out->dim, (size_t)want, f) == (size_t)want;
        if (fclose(f) == 0 && ok) rename(tmp, path);
        else remove(tmp);
    }
    return 0;
}

static inline int vecs_load_real(vecs_set *out, char *why, size_t whylen) {
    return vecs_load_real_n(out, VECS_REAL_N, why, whylen);
}
#endif
