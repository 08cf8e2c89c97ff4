/* vindex — FAISS HNSW (text) and LSH + exact re-scoring (image) indexes with
 * tombstones and checksummed persistence. See vindex.h for the contract. */
#include "index/store.h"
#include "index/vindex.h"
#include "index/index_internal.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <faiss/c_api/AutoTune_c.h>
#include <faiss/c_api/IndexLSH_c.h>
#include <faiss/c_api/Index_c.h>
#include <faiss/c_api/MetaIndexes_c.h>
#include <faiss/c_api/error_c.h>
#include <faiss/c_api/index_factory_c.h>
#include <faiss/c_api/index_io_c.h>

#define VX_MAGIC "MMRAGVIX"
#define VX_VERSION 1u
#define VX_HDR 128

/* ---- a small open-addressing set of int64 ids (no removal needed) ---- */
typedef struct idset { int64_t *slot; size_t cap, n; } idset;
#define IDSET_EMPTY INT64_MIN

static size_t idset_hash(int64_t k, size_t cap) {
    uint64_t x = (uint64_t)k * 0x9E3779B97F4A7C15ull;
    return (size_t)(x ^ (x >> 29)) & (cap - 1);
}
static int idset_has(const idset *s, int64_t k) {
    if (!s->cap) return 0;
    for (size_t i = idset_hash(k, s->cap);; i = (i + 1) & (s->cap - 1)) {
        if (s->slot[i] == k) return 1;
        if (s->slot[i] == IDSET_EMPTY) return 0;
    }
}
static int idset_grow(idset *s, size_t want) {
    size_t cap = s->cap ? s->cap : 64;
    while (cap < want * 2) cap *= 2;
    if (cap == s->cap) return 0;
    int64_t *ns = malloc(cap * sizeof *ns);
    if (!ns) return -1;
    for (size_t i = 0; i < cap; i++) ns[i] = IDSET_EMPTY;
    for (size_t i = 0; i < s->cap; i++) {
        if (s->slot[i] == IDSET_EMPTY) continue;
        size_t j = idset_hash(s->slot[i], cap);
        while (ns[j] != IDSET_EMPTY) j = (j + 1) & (cap - 1);
        ns[j] = s->slot[i];
    }
    free(s->slot);
    s->slot = ns;
    s->cap = cap;
    return 0;
}
/* 1 = inserted, 0 = present, -1 = out of memory */
static int idset_add(idset *s, int64_t k) {
    if (k == IDSET_EMPTY) return 0;
    if ((s->n + 1) * 2 > s->cap && idset_grow(s, s->n + 1)) return -1;
    size_t i = idset_hash(k, s->cap);
    while (s->slot[i] != IDSET_EMPTY) {
        if (s->slot[i] == k) return 0;
        i = (i + 1) & (s->cap - 1);
    }
    s->slot[i] = k;
    s->n++;
    return 1;
}
static void idset_clear(idset *s) { free(s->slot); memset(s, 0, sizeof *s); }

/* ---- the handle ---- */
struct vindex {
    vindex_opts o;
    pthread_rwlock_t lock;
    FaissIndex *fx;   /* HNSW: IDMap owning HNSWFlat; LSH: IndexLSH (rows = positions) */
    idset all, dead;  /* every stored id; tombstones */
    /* LSH only: row -> id and the float vectors for exact re-scoring */
    int64_t *ids;
    float *vecs;
    int64_t n, cap;
    int64_t gen;      /* store generation reflected (-1 = none) */
    /* an index in the shared store (vindex_open_store on PostgreSQL): searches go there */
    struct store *remote;
    char rspace[8];   /* the store's space ("text" or "image") */
    int32_t rowner;   /* owner kind the space indexes */
    int64_t rcount;   /* vectors there at the last sync */
};

static void fxerr(char *err, size_t errlen, const char *what) {
    const char *m = faiss_get_last_error();
    index_set_err(err, errlen, "%s: %s", what, m ? m : "faiss error");
}

void vindex_opts_default(vindex_opts *o, int32_t kind, int32_t dim) {
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->dim = dim;
    o->hnsw_m = 32;
    o->ef_construction = 64;
    o->ef_search = 128;
    o->lsh_bits = 256;
    o->lsh_pool = 400;
    o->search_threads = 1;
}

static int set_param(FaissIndex *fx, const char *name, double val) {
    FaissParameterSpace *ps = NULL;
    if (faiss_ParameterSpace_new(&ps)) return -1;
    int rc = faiss_ParameterSpace_set_index_parameter(ps, fx, name, val);
    faiss_ParameterSpace_free(ps);
    return rc;
}

/* a fresh, empty FAISS index for the options */
static int make_faiss(const vindex_opts *o, FaissIndex **out, char *err, size_t errlen) {
    *out = NULL;
    if (o->kind == VINDEX_HNSW) {
        char desc[64];
        snprintf(desc, sizeof desc, "IDMap,HNSW%d,Flat", (int)o->hnsw_m);
        if (faiss_index_factory(out, o->dim, desc, METRIC_INNER_PRODUCT)) {
            fxerr(err, errlen, "faiss index_factory");
            return -1;
        }
        if (set_param(*out, "efConstruction", o->ef_construction) ||
            set_param(*out, "efSearch", o->ef_search)) {
            fxerr(err, errlen, "faiss set HNSW parameters");
            faiss_Index_free(*out);
            *out = NULL;
            return -1;
        }
        return 0;
    }
    FaissIndexLSH *l = NULL;
    if (faiss_IndexLSH_new_with_options(&l, o->dim, o->lsh_bits, 1, 1)) {
        fxerr(err, errlen, "faiss IndexLSH");
        return -1;
    }
    *out = (FaissIndex *)l;
    return 0;
}

static int check_opts(const vindex_opts *o, char *err, size_t errlen) {
    if (!o) { index_set_err(err, errlen, "vindex: no options"); return -1; }
    if (o->kind != VINDEX_HNSW && o->kind != VINDEX_LSH) {
        index_set_err(err, errlen, "vindex: unknown kind %d", (int)o->kind);
        return -1;
    }
    if (o->dim < 1 || o->dim > 65536) {
        index_set_err(err, errlen, "vindex: bad dim %d", (int)o->dim);
        return -1;
    }
    if (o->kind == VINDEX_HNSW && (o->hnsw_m < 4 || o->hnsw_m > 256 || o->ef_search < 1 ||
                                   o->ef_construction < 1)) {
        index_set_err(err, errlen, "vindex: bad HNSW parameters (M %d, efSearch %d)", (int)o->hnsw_m,
                      (int)o->ef_search);
        return -1;
    }
    if (o->kind == VINDEX_LSH && (o->lsh_bits < 8 || o->lsh_bits > 4096 || o->lsh_bits % 8)) {
        index_set_err(err, errlen, "vindex: LSH bits must be a multiple of 8 in 8..4096, got %d",
                      (int)o->lsh_bits);
        return -1;
    }
    if (memchr(o->model_id, 0, sizeof o->model_id) == NULL) {
        index_set_err(err, errlen, "vindex: model id not terminated");
        return -1;
    }
    return 0;
}

vindex *vindex_create(const vindex_opts *o, char *err, size_t errlen) {
    if (check_opts(o, err, errlen)) return NULL;
    vindex *v = calloc(1, sizeof *v);
    if (!v) { index_set_err(err, errlen, "vindex: out of memory"); return NULL; }
    v->o = *o;
    if (v->o.lsh_pool < 1) v->o.lsh_pool = 200;
    if (v->o.search_threads < 1) v->o.search_threads = 1;
    if (make_faiss(&v->o, &v->fx, err, errlen)) { free(v); return NULL; }
    pthread_rwlock_init(&v->lock, NULL);
    v->gen = -1;
    return v;
}

void vindex_free(vindex *v) {
    if (!v) return;
    if (v->fx) faiss_Index_free(v->fx);
    idset_clear(&v->all);
    idset_clear(&v->dead);
    free(v->ids);
    free(v->vecs);
    pthread_rwlock_destroy(&v->lock);
    free(v);
}

static void normalize(float *x, int32_t d) {
    double s = 0;
    for (int32_t i = 0; i < d; i++) s += (double)x[i] * x[i];
    if (s <= 0) return;
    float inv = (float)(1.0 / sqrt(s));
    for (int32_t i = 0; i < d; i++) x[i] *= inv;
}

static float *normalized_copy(const float *x, int64_t n, int32_t d) {
    float *c = malloc((size_t)n * d * sizeof *c + 1);
    if (!c) return NULL;
    memcpy(c, x, (size_t)n * d * sizeof *c);
    for (int64_t i = 0; i < n; i++) normalize(c + (size_t)i * d, d);
    return c;
}

static int finite_all(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* add under the write lock; vectors already normalized */
static int add_locked(vindex *v, int64_t n, const int64_t *ids, const float *x, char *err,
                      size_t errlen) {
    if (n <= 0) return 0;
    for (int64_t i = 0; i < n; i++)
        if (idset_has(&v->all, ids[i]) || ids[i] == IDSET_EMPTY) {
            index_set_err(err, errlen, "vindex: id %lld already stored", (long long)ids[i]);
            return -1;
        }
    if (v->o.kind == VINDEX_HNSW) {
        if (faiss_Index_add_with_ids(v->fx, n, x, (const idx_t *)ids)) {
            fxerr(err, errlen, "faiss add");
            return -1;
        }
    } else {
        if (!faiss_Index_is_trained(v->fx) && faiss_Index_train(v->fx, n, x)) {
            fxerr(err, errlen, "faiss LSH train");
            return -1;
        }
        if (v->n + n > v->cap) {
            int64_t cap = v->cap ? v->cap : 256;
            while (cap < v->n + n) cap *= 2;
            int64_t *ni = realloc(v->ids, (size_t)cap * sizeof *ni);
            if (!ni) { index_set_err(err, errlen, "vindex: out of memory"); return -1; }
            v->ids = ni;
            float *nv = realloc(v->vecs, (size_t)cap * v->o.dim * sizeof *nv);
            if (!nv) { index_set_err(err, errlen, "vindex: out of memory"); return -1; }
            v->vecs = nv;
            v->cap = cap;
        }
        if (faiss_Index_add(v->fx, n, x)) {
            fxerr(err, errlen, "faiss LSH add");
            return -1;
        }
        memcpy(v->ids + v->n, ids, (size_t)n * sizeof *ids);
        memcpy(v->vecs + (size_t)v->n * v->o.dim, x, (size_t)n * v->o.dim * sizeof *x);
        v->n += n;
    }
    for (int64_t i = 0; i < n; i++)
        if (idset_add(&v->all, ids[i]) < 0) {
            index_set_err(err, errlen, "vindex: out of memory");
            return -1;
        }
    return 0;
}

static int check_input(const vindex *v, int64_t n, const int64_t *ids, const float *vecs,
                       char *err, size_t errlen) {
    if (n < 0 || (n > 0 && (!ids || !vecs))) {
        index_set_err(err, errlen, "vindex: bad arguments");
        return -1;
    }
    if (!finite_all(vecs, (size_t)n * v->o.dim)) {
        index_set_err(err, errlen, "vindex: vector with NaN or infinity");
        return -1;
    }
    return 0;
}

int vindex_add(vindex *v, int64_t n, const int64_t *ids, const float *vecs, char *err,
               size_t errlen) {
    if (!v || check_input(v, n, ids, vecs, err, errlen)) return -1;
    if (n == 0) return 0;
    float *x = normalized_copy(vecs, n, v->o.dim);
    if (!x) { index_set_err(err, errlen, "vindex: out of memory"); return -1; }
    pthread_rwlock_wrlock(&v->lock);
    int rc = add_locked(v, n, ids, x, err, errlen);
    pthread_rwlock_unlock(&v->lock);
    free(x);
    return rc;
}

/* drop everything (write lock held) */
static int reset_locked(vindex *v, char *err, size_t errlen) {
    FaissIndex *fx = NULL;
    if (make_faiss(&v->o, &fx, err, errlen)) return -1;
    faiss_Index_free(v->fx);
    v->fx = fx;
    idset_clear(&v->all);
    idset_clear(&v->dead);
    v->n = 0;
    return 0;
}

int vindex_build(vindex *v, int64_t n, const int64_t *ids, const float *vecs, char *err,
                 size_t errlen) {
    if (!v || check_input(v, n, ids, vecs, err, errlen)) return -1;
    float *x = n ? normalized_copy(vecs, n, v->o.dim) : NULL;
    if (n && !x) { index_set_err(err, errlen, "vindex: out of memory"); return -1; }
    pthread_rwlock_wrlock(&v->lock);
    int rc = reset_locked(v, err, errlen);
    if (!rc) rc = add_locked(v, n, ids, x, err, errlen);
    pthread_rwlock_unlock(&v->lock);
    free(x);
    return rc;
}

int64_t vindex_remove(vindex *v, int64_t n, const int64_t *ids) {
    if (!v || n <= 0 || !ids) return 0;
    int64_t added = 0;
    pthread_rwlock_wrlock(&v->lock);
    for (int64_t i = 0; i < n; i++)
        if (idset_has(&v->all, ids[i]) && idset_add(&v->dead, ids[i]) == 1) added++;
    pthread_rwlock_unlock(&v->lock);
    return added;
}

/* copy out the live vectors and ids (read side of compaction) */
static int live_vectors(vindex *v, int64_t **ids_out, float **vecs_out, int64_t *n_out,
                        char *err, size_t errlen) {
    int64_t n = 0;
    const int64_t *ids = NULL;
    const float *src = NULL;
    float *hnsw_buf = NULL;
    if (v->o.kind == VINDEX_HNSW) {
        idx_t *map = NULL;
        size_t sz = 0;
        faiss_IndexIDMap_id_map((FaissIndexIDMap *)v->fx, &map, &sz);
        n = (int64_t)sz;
        ids = (const int64_t *)map;
        if (n) {
            hnsw_buf = malloc((size_t)n * v->o.dim * sizeof *hnsw_buf);
            if (!hnsw_buf) { index_set_err(err, errlen, "vindex: out of memory"); return -1; }
            FaissIndex *sub = faiss_IndexIDMap_sub_index((FaissIndexIDMap *)v->fx);
            if (faiss_Index_reconstruct_n(sub, 0, n, hnsw_buf)) {
                fxerr(err, errlen, "faiss reconstruct");
                free(hnsw_buf);
                return -1;
            }
        }
        src = hnsw_buf;
    } else {
        n = v->n;
        ids = v->ids;
        src = v->vecs;
    }
    int64_t *oi = malloc((size_t)(n ? n : 1) * sizeof *oi);
    float *ov = malloc((size_t)(n ? n : 1) * v->o.dim * sizeof *ov);
    if (!oi || !ov) {
        free(oi); free(ov); free(hnsw_buf);
        index_set_err(err, errlen, "vindex: out of memory");
        return -1;
    }
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        if (idset_has(&v->dead, ids[i])) continue;
        oi[m] = ids[i];
        memcpy(ov + (size_t)m * v->o.dim, src + (size_t)i * v->o.dim, v->o.dim * sizeof *ov);
        m++;
    }
    free(hnsw_buf);
    *ids_out = oi;
    *vecs_out = ov;
    *n_out = m;
    return 0;
}

int vindex_compact(vindex *v, char *err, size_t errlen) {
    if (!v) return -1;
    pthread_rwlock_wrlock(&v->lock);
    int64_t *ids = NULL, n = 0;
    float *x = NULL;
    int rc = live_vectors(v, &ids, &x, &n, err, errlen);
    if (!rc) rc = reset_locked(v, err, errlen);
    if (!rc) rc = add_locked(v, n, ids, x, err, errlen);
    pthread_rwlock_unlock(&v->lock);
    free(ids);
    free(x);
    return rc;
}

/* ---- search ---- */
static int cmp_hit(const void *a, const void *b) {
    const vindex_hit *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

static int hnsw_search(vindex *v, const float *q, int32_t k, vindex_hit *out, int32_t *nout,
                       char *err, size_t errlen) {
    idx_t total = faiss_Index_ntotal(v->fx);
    /* over-fetch by the tombstone count: at most that many of the top results are dead */
    idx_t fetch = (idx_t)k + (idx_t)v->dead.n;
    if (fetch > total) fetch = total;
    *nout = 0;
    if (fetch <= 0) return 0;
    float *dist = malloc((size_t)fetch * sizeof *dist);
    idx_t *lab = malloc((size_t)fetch * sizeof *lab);
    if (!dist || !lab) {
        free(dist); free(lab);
        index_set_err(err, errlen, "vindex: out of memory");
        return -1;
    }
    int rc = 0;
    if (faiss_Index_search(v->fx, 1, q, fetch, dist, lab)) {
        fxerr(err, errlen, "faiss search");
        rc = -1;
    } else {
        for (idx_t i = 0; i < fetch && *nout < k; i++) {
            if (lab[i] < 0 || idset_has(&v->dead, lab[i])) continue;
            out[*nout].id = lab[i];
            out[*nout].score = dist[i];
            (*nout)++;
        }
    }
    free(dist);
    free(lab);
    return rc;
}

static float dot(const float *a, const float *b, int32_t d) {
    float s = 0;
    for (int32_t i = 0; i < d; i++) s += a[i] * b[i];
    return s;
}

/* keep the best k of n scored hits in out (sorted) */
static void topk(vindex_hit *all, int64_t n, int32_t k, vindex_hit *out, int32_t *nout) {
    qsort(all, (size_t)n, sizeof *all, cmp_hit);
    *nout = (int32_t)(n < k ? n : k);
    memcpy(out, all, (size_t)*nout * sizeof *out);
}

static int lsh_search(vindex *v, const float *q, int32_t k, int rescore, vindex_hit *out,
                      int32_t *nout, char *err, size_t errlen) {
    *nout = 0;
    int64_t n = v->n;
    if (n == 0) return 0;
    int64_t pool = v->o.lsh_pool;
    if (pool < 10 * (int64_t)k) pool = 10 * (int64_t)k;
    pool += (int64_t)v->dead.n;
    vindex_hit *cand = malloc((size_t)(pool < n ? pool : n) * sizeof *cand);
    if (!cand) { index_set_err(err, errlen, "vindex: out of memory"); return -1; }
    int64_t m = 0;
    if (rescore && pool >= n) {
        /* the pool would be everything: an exact scan is cheaper than hashing */
        for (int64_t i = 0; i < n; i++) {
            if (idset_has(&v->dead, v->ids[i])) continue;
            cand[m].id = v->ids[i];
            cand[m++].score = dot(q, v->vecs + (size_t)i * v->o.dim, v->o.dim);
        }
        topk(cand, m, k, out, nout);
        free(cand);
        return 0;
    }
    if (pool > n) pool = n;
    float *dist = malloc((size_t)pool * sizeof *dist);
    idx_t *lab = malloc((size_t)pool * sizeof *lab);
    if (!dist || !lab) {
        free(dist); free(lab); free(cand);
        index_set_err(err, errlen, "vindex: out of memory");
        return -1;
    }
    int rc = 0;
    idx_t fetch = rescore ? pool : (idx_t)(k + v->dead.n < (size_t)n ? k + (int64_t)v->dead.n : n);
    if (faiss_Index_search(v->fx, 1, q, fetch, dist, lab)) {
        fxerr(err, errlen, "faiss LSH search");
        rc = -1;
    } else {
        for (idx_t i = 0; i < fetch; i++) {
            if (lab[i] < 0 || lab[i] >= n) continue;
            int64_t id = v->ids[lab[i]];
            if (idset_has(&v->dead, id)) continue;
            cand[m].id = id;
            /* candidate-only mode reports -hamming so the order stays "higher is better" */
            cand[m++].score = rescore ? dot(q, v->vecs + (size_t)lab[i] * v->o.dim, v->o.dim)
                                      : -dist[i];
        }
        if (rescore) {
            topk(cand, m, k, out, nout);
        } else {
            *nout = (int32_t)(m < k ? m : k);
            memcpy(out, cand, (size_t)*nout * sizeof *out);
        }
    }
    free(dist);
    free(lab);
    free(cand);
    return rc;
}

static int search_common(vindex *v, const float *query, int32_t k, int rescore,
                         vindex_hit *out, int32_t *nout, char *err, size_t errlen) {
    if (nout) *nout = 0;
    if (!v || !query || !out || !nout || k < 0) {
        index_set_err(err, errlen, "vindex: bad search arguments");
        return -1;
    }
    if (k == 0) return 0;
    float *q = normalized_copy(query, 1, v->o.dim);
    if (!q) { index_set_err(err, errlen, "vindex: out of memory"); return -1; }
    if (!finite_all(q, (size_t)v->o.dim)) {
        free(q);
        index_set_err(err, errlen, "vindex: query with NaN or infinity");
        return -1;
    }
    /* one OpenMP thread per caller: FAISS would otherwise open a team per query and
     * several callers oversubscribe the cores (PITFALLS: 0.69 s -> 0.45 s) */
    int saved = omp_get_max_threads();
    omp_set_num_threads(v->o.search_threads);
    pthread_rwlock_rdlock(&v->lock);
    int rc = v->o.kind == VINDEX_HNSW ? hnsw_search(v, q, k, out, nout, err, errlen)
                                      : lsh_search(v, q, k, rescore, out, nout, err, errlen);
    pthread_rwlock_unlock(&v->lock);
    omp_set_num_threads(saved);
    free(q);
    return rc;
}

/* The shared store searches with its own HNSW index (pgvector); the store's handle
 * serializes calls, so the read lock only guards against a concurrent free. */
static int remote_search(vindex *v, const float *query, int32_t k, vindex_hit *out,
                         int32_t *nout, char *err, size_t errlen) {
    store_knn_hit *h = malloc((size_t)(k > 0 ? k : 1) * sizeof *h);
    if (!h) { index_set_err(err, errlen, "vindex: out of memory"); return -1; }
    int32_t n = 0;
    int rc = store_vectors_knn(v->remote, v->rspace, v->o.model_id, v->rowner, query, v->o.dim,
                               k, h, &n);
    if (rc) index_set_err(err, errlen, "vindex: %s", store_errmsg(v->remote));
    for (int32_t i = 0; !rc && i < n; i++) out[i] = (vindex_hit){h[i].id, h[i].score};
    if (!rc) *nout = n;
    free(h);
    return rc ? -1 : 0;
}

int vindex_search(vindex *v, const float *query, int32_t k, vindex_hit *out, int32_t *nout,
                  char *err, size_t errlen) {
    if (v && v->remote && query && out && nout && k >= 0) {
        *nout = 0;
        return k ? remote_search(v, query, k, out, nout, err, errlen) : 0;
    }
    return search_common(v, query, k, 1, out, nout, err, errlen);
}

vindex *vindex_create_remote(const vindex_opts *o, struct store *s, const char *space,
                             int32_t owner_kind, char *err, size_t errlen) {
    vindex *v = calloc(1, sizeof *v);
    if (!v) { index_set_err(err, errlen, "vindex: out of memory"); return NULL; }
    v->o = *o;
    v->remote = s;
    snprintf(v->rspace, sizeof v->rspace, "%s", space);
    v->rowner = owner_kind;
    pthread_rwlock_init(&v->lock, NULL);
    v->gen = -1;
    return v;
}

int vindex_is_remote(const vindex *v) { return v && v->remote; }
void vindex_set_remote_count(vindex *v, int64_t n) { if (v) v->rcount = n; }

int vindex_search_candidates(vindex *v, const float *query, int32_t k, vindex_hit *out,
                             int32_t *nout, char *err, size_t errlen) {
    if (v && v->o.kind != VINDEX_LSH) {
        index_set_err(err, errlen, "vindex: candidate search is for LSH indexes");
        return -1;
    }
    return search_common(v, query, k, 0, out, nout, err, errlen);
}

int vindex_set_ef_search(vindex *v, int32_t ef) {
    if (!v || ef < 1 || v->o.kind != VINDEX_HNSW) return -1;
    pthread_rwlock_wrlock(&v->lock);
    int rc = set_param(v->fx, "efSearch", ef);
    if (!rc) v->o.ef_search = ef;
    pthread_rwlock_unlock(&v->lock);
    return rc ? -1 : 0;
}

int vindex_set_lsh_pool(vindex *v, int32_t pool) {
    if (!v || pool < 1) return -1;
    pthread_rwlock_wrlock(&v->lock);
    v->o.lsh_pool = pool;
    pthread_rwlock_unlock(&v->lock);
    return 0;
}

int vindex_set_search_threads(vindex *v, int32_t threads) {
    if (!v || threads < 1) return -1;
    pthread_rwlock_wrlock(&v->lock);
    v->o.search_threads = threads;
    pthread_rwlock_unlock(&v->lock);
    return 0;
}

int64_t vindex_size(const vindex *v) {
    return !v ? 0 : v->remote ? v->rcount : (int64_t)v->all.n;
}
int64_t vindex_dead(const vindex *v) { return v ? (int64_t)v->dead.n : 0; }
const vindex_opts *vindex_get_opts(const vindex *v) { return v ? &v->o : NULL; }

int vindex_contains(const vindex *v, int64_t id) {
    if (!v) return 0;
    pthread_rwlock_rdlock((pthread_rwlock_t *)&v->lock);
    int r = idset_has(&v->all, id) && !idset_has(&v->dead, id);
    pthread_rwlock_unlock((pthread_rwlock_t *)&v->lock);
    return r;
}

int vindex_stored(const vindex *v, int64_t id) {
    if (!v) return 0;
    pthread_rwlock_rdlock((pthread_rwlock_t *)&v->lock);
    int r = idset_has(&v->all, id);
    pthread_rwlock_unlock((pthread_rwlock_t *)&v->lock);
    return r;
}

int64_t *vindex_ids(const vindex *v, int64_t *n) {
    *n = 0;
    if (!v) return NULL;
    vindex *w = (vindex *)v;
    pthread_rwlock_rdlock(&w->lock);
    int64_t cnt = 0;
    const int64_t *src = NULL;
    if (v->o.kind == VINDEX_HNSW) {
        idx_t *map = NULL;
        size_t sz = 0;
        faiss_IndexIDMap_id_map((FaissIndexIDMap *)v->fx, &map, &sz);
        src = (const int64_t *)map;
        cnt = (int64_t)sz;
    } else {
        src = v->ids;
        cnt = v->n;
    }
    int64_t *r = malloc((size_t)(cnt ? cnt : 1) * sizeof *r);
    if (r) {
        if (cnt) memcpy(r, src, (size_t)cnt * sizeof *r);
        *n = cnt;
    }
    pthread_rwlock_unlock(&w->lock);
    return r;
}

int64_t vindex_generation(const vindex *v) { return v ? v->gen : -1; }
void vindex_set_generation(vindex *v, int64_t gen) { if (v) v->gen = gen; }

size_t vindex_memory(const vindex *v) {
    if (!v) return 0;
    size_t n = v->all.n, d = (size_t)v->o.dim;
    size_t sets = (v->all.cap + v->dead.cap) * sizeof(int64_t);
    if (v->o.kind == VINDEX_HNSW) /* vectors + level-0 links (2M) + upper levels (~M/(M-1)... small) + id map */
        return n * (d * 4 + (size_t)v->o.hnsw_m * 2 * 4 + (size_t)v->o.hnsw_m * 4 / 8 + 8 + 8) + sets;
    return (size_t)v->cap * (d * 4 + 8) + n * ((size_t)v->o.lsh_bits / 8) + sets;
}

/* ---- persistence ---- */
typedef struct vx_header {
    char magic[8];
    uint32_t version, kind, dim, bits;
    uint64_t generation, count, ndead, payload_len;
    uint32_t crc, m;
    char model_id[64];
} vx_header; /* serialized field by field into VX_HDR bytes */

static void hdr_pack(const vx_header *h, unsigned char *b) {
    memset(b, 0, VX_HDR);
    size_t o = 0;
#define PUT(x) do { memcpy(b + o, &(x), sizeof(x)); o += sizeof(x); } while (0)
    PUT(h->magic); PUT(h->version); PUT(h->kind); PUT(h->dim); PUT(h->bits);
    PUT(h->generation); PUT(h->count); PUT(h->ndead); PUT(h->payload_len);
    PUT(h->crc); PUT(h->m); PUT(h->model_id);
#undef PUT
}
static void hdr_unpack(vx_header *h, const unsigned char *b) {
    size_t o = 0;
#define GET(x) do { memcpy(&(x), b + o, sizeof(x)); o += sizeof(x); } while (0)
    GET(h->magic); GET(h->version); GET(h->kind); GET(h->dim); GET(h->bits);
    GET(h->generation); GET(h->count); GET(h->ndead); GET(h->payload_len);
    GET(h->crc); GET(h->m); GET(h->model_id);
#undef GET
    h->model_id[sizeof h->model_id - 1] = 0;
}

/* CRC32 of bytes [from, from+len) of f */
static int file_crc(FILE *f, long from, uint64_t len, uint32_t *crc) {
    if (fseek(f, from, SEEK_SET)) return -1;
    unsigned char buf[1 << 16];
    uLong c = crc32(0L, Z_NULL, 0);
    while (len) {
        size_t want = len < sizeof buf ? (size_t)len : sizeof buf;
        size_t got = fread(buf, 1, want, f);
        if (got != want) return -1;
        c = crc32(c, buf, (uInt)got);
        len -= got;
    }
    *crc = (uint32_t)c;
    return 0;
}

static int write_payload(vindex *v, FILE *f, char *err, size_t errlen) {
    /* tombstones first, then (LSH) ids + vectors, then the FAISS index */
    int64_t *dead = malloc((v->dead.n ? v->dead.n : 1) * sizeof *dead);
    if (!dead) { index_set_err(err, errlen, "vindex: out of memory"); return -1; }
    size_t m = 0;
    for (size_t i = 0; i < v->dead.cap; i++)
        if (v->dead.slot[i] != IDSET_EMPTY) dead[m++] = v->dead.slot[i];
    int ok = fwrite(dead, sizeof *dead, m, f) == m;
    free(dead);
    if (ok && v->o.kind == VINDEX_LSH) {
        uint8_t trained = (uint8_t)faiss_Index_is_trained(v->fx);
        /* an empty index has no arrays yet (NULL): write nothing for them */
        ok = fwrite(&trained, 1, 1, f) == 1 &&
             (v->n == 0 ||
              (fwrite(v->ids, sizeof *v->ids, (size_t)v->n, f) == (size_t)v->n &&
               fwrite(v->vecs, sizeof(float) * v->o.dim, (size_t)v->n, f) == (size_t)v->n));
    }
    if (!ok) { index_set_err(err, errlen, "vindex: write: %s", strerror(errno)); return -1; }
    if (faiss_write_index(v->fx, f)) { fxerr(err, errlen, "faiss write_index"); return -1; }
    return 0;
}

int vindex_save(vindex *v, const char *path, uint64_t generation, char *err, size_t errlen) {
    if (!v || !path) { index_set_err(err, errlen, "vindex: bad save arguments"); return -1; }
    size_t plen = strlen(path) + 32;
    char *tmp = malloc(plen);
    if (!tmp) { index_set_err(err, errlen, "vindex: out of memory"); return -1; }
    snprintf(tmp, plen, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w+b");
    if (!f) {
        index_set_err(err, errlen, "vindex: cannot write %s: %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    unsigned char hb[VX_HDR] = {0};
    int rc = -1;
    pthread_rwlock_rdlock(&v->lock);
    vx_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, VX_MAGIC, 8);
    h.version = VX_VERSION;
    h.kind = (uint32_t)v->o.kind;
    h.dim = (uint32_t)v->o.dim;
    h.bits = (uint32_t)v->o.lsh_bits;
    h.m = (uint32_t)v->o.hnsw_m;
    h.generation = generation;
    h.count = v->all.n;
    h.ndead = v->dead.n;
    memcpy(h.model_id, v->o.model_id, sizeof h.model_id);
    if (fwrite(hb, 1, VX_HDR, f) == VX_HDR && !write_payload(v, f, err, errlen)) rc = 0;
    pthread_rwlock_unlock(&v->lock);
    if (!rc) {
        rc = -1;
        long end = (fflush(f) == 0) ? ftell(f) : -1;
        if (end >= VX_HDR) {
            h.payload_len = (uint64_t)(end - VX_HDR);
            if (!file_crc(f, VX_HDR, h.payload_len, &h.crc)) {
                hdr_pack(&h, hb);
                if (!fseek(f, 0, SEEK_SET) && fwrite(hb, 1, VX_HDR, f) == VX_HDR &&
                    !fflush(f) && !fsync(fileno(f)))
                    rc = 0;
            }
        }
        if (rc) index_set_err(err, errlen, "vindex: write %s: %s", tmp, strerror(errno));
    }
    if (fclose(f) && !rc) { index_set_err(err, errlen, "vindex: close: %s", strerror(errno)); rc = -1; }
    if (!rc && rename(tmp, path)) {
        index_set_err(err, errlen, "vindex: rename to %s: %s", path, strerror(errno));
        rc = -1;
    }
    if (rc) unlink(tmp);
    free(tmp);
    return rc;
}

static int read_payload(vindex *v, FILE *f, const vx_header *h, char *err, size_t errlen) {
    for (uint64_t i = 0; i < h->ndead; i++) {
        int64_t id;
        if (fread(&id, sizeof id, 1, f) != 1 || idset_add(&v->dead, id) < 0) goto trunc;
    }
    uint8_t trained = 1;
    if (v->o.kind == VINDEX_LSH) {
        if (fread(&trained, 1, 1, f) != 1) goto trunc;
        v->n = v->cap = (int64_t)h->count;
        v->ids = malloc((size_t)(v->n ? v->n : 1) * sizeof *v->ids);
        v->vecs = malloc((size_t)(v->n ? v->n : 1) * v->o.dim * sizeof *v->vecs);
        if (!v->ids || !v->vecs) { index_set_err(err, errlen, "vindex: out of memory"); return -1; }
        if (fread(v->ids, sizeof *v->ids, (size_t)v->n, f) != (size_t)v->n ||
            fread(v->vecs, sizeof(float) * v->o.dim, (size_t)v->n, f) != (size_t)v->n)
            goto trunc;
        for (int64_t i = 0; i < v->n; i++)
            if (idset_add(&v->all, v->ids[i]) < 0) {
                index_set_err(err, errlen, "vindex: out of memory");
                return -1;
            }
    }
    FaissIndex *fx = NULL;
    if (faiss_read_index(f, 0, &fx)) { fxerr(err, errlen, "faiss read_index"); return -1; }
    faiss_Index_free(v->fx);
    v->fx = fx;
    /* the file's FAISS object must be what the header says */
    int good = faiss_Index_d(fx) == v->o.dim && faiss_Index_ntotal(fx) == (idx_t)h->count;
    if (v->o.kind == VINDEX_HNSW) {
        good = good && faiss_IndexIDMap_cast(fx) != NULL;
        if (good) {
            idx_t *map = NULL;
            size_t sz = 0;
            faiss_IndexIDMap_id_map((FaissIndexIDMap *)fx, &map, &sz);
            good = sz == h->count;
            for (size_t i = 0; good && i < sz; i++)
                if (idset_add(&v->all, map[i]) < 0) good = 0;
            good = good && set_param(fx, "efSearch", v->o.ef_search) == 0;
        }
    } else {
        good = good && faiss_IndexLSH_cast(fx) != NULL &&
               faiss_IndexLSH_nbits((FaissIndexLSH *)fx) == v->o.lsh_bits &&
               faiss_Index_is_trained(fx) == trained;
    }
    if (!good || v->all.n != h->count) {
        index_set_err(err, errlen, "vindex: index file contents do not match its header");
        return -1;
    }
    return 0;
trunc:
    index_set_err(err, errlen, "vindex: index file truncated");
    return -1;
}

vindex *vindex_load(const char *path, const vindex_opts *expect, uint64_t *generation,
                    char *err, size_t errlen) {
    if (!path || check_opts(expect, err, errlen)) return NULL;
    FILE *f = fopen(path, "rb");
    if (!f) { index_set_err(err, errlen, "vindex: %s: %s", path, strerror(errno)); return NULL; }
    unsigned char hb[VX_HDR];
    vx_header h;
    struct stat st;
    vindex *v = NULL;
    uint32_t crc = 0;
    if (fread(hb, 1, VX_HDR, f) != VX_HDR || fstat(fileno(f), &st)) {
        index_set_err(err, errlen, "vindex: %s: too short", path);
        goto out;
    }
    hdr_unpack(&h, hb);
    if (memcmp(h.magic, VX_MAGIC, 8) || h.version != VX_VERSION) {
        index_set_err(err, errlen, "vindex: %s: not an mmrag index file (or another version)", path);
        goto out;
    }
    if ((uint64_t)st.st_size != VX_HDR + h.payload_len ||
        file_crc(f, VX_HDR, h.payload_len, &crc) || crc != h.crc) {
        index_set_err(err, errlen, "vindex: %s: checksum mismatch (corrupt or truncated)", path);
        goto out;
    }
    if ((int32_t)h.kind != expect->kind || (int32_t)h.dim != expect->dim ||
        (expect->kind == VINDEX_LSH && (int32_t)h.bits != expect->lsh_bits) ||
        (expect->kind == VINDEX_HNSW && (int32_t)h.m != expect->hnsw_m) ||
        (expect->model_id[0] && strcmp(h.model_id, expect->model_id))) {
        index_set_err(err, errlen,
                      "vindex: %s: built for another configuration (kind %u dim %u model '%s')",
                      path, h.kind, h.dim, h.model_id);
        goto out;
    }
    vindex_opts o = *expect;
    memcpy(o.model_id, h.model_id, sizeof o.model_id);
    v = vindex_create(&o, err, errlen);
    if (!v) goto out;
    if (fseek(f, VX_HDR, SEEK_SET) || read_payload(v, f, &h, err, errlen)) {
        vindex_free(v);
        v = NULL;
        goto out;
    }
    if (generation) *generation = h.generation;
    v->gen = (int64_t)h.generation;
out:
    fclose(f);
    return v;
}
