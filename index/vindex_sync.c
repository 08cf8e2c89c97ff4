/* vindex_sync — keeps a derived vector index in step with the store's vectors table
 * (load / rebuild / incremental catch-up by generation). See vindex.h. */
#include "index/store.h"
#include "index/vindex.h"
#include "index/index_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* more than this fraction dead after a catch-up: rebuild instead */
#define DEAD_REBUILD_FRACTION 0.2

int vindex_store_file(store *s, const char *space, int32_t kind, char *buf, size_t len) {
    const char *db = store_path(s);
    if (!db || !space) return -1;
    int n = snprintf(buf, len, "%s.%s.%s", db, space, kind == VINDEX_LSH ? "lsh" : "hnsw");
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

static int owner_for(const char *space) {
    return strcmp(space, "text") == 0 ? STORE_OWNER_CHUNK : STORE_OWNER_IMAGE;
}

/* "figure" is an index of its own (own file) over the store's image-owned vectors of a
 * pixel model: in the store it is the "image" space under another model id. */
static const char *store_space(const char *space) {
    return strcmp(space, "figure") == 0 ? "image" : space;
}

/* vectors collected from one scan of the store */
typedef struct collect {
    const vindex *v;       /* skip ids it already holds (NULL = take all) */
    int32_t dim;           /* 0 = learn from the first vector */
    int64_t *ids; float *vecs; int64_t n, cap, capv;
    int64_t *seen; int64_t nseen, capseen;   /* every id in the store */
    int bad_dim, oom;
    int64_t revive;
} collect;

static int grow(void **p, int64_t *cap, int64_t need, size_t elem) {
    if (need <= *cap) return 0;
    int64_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

static int collect_cb(void *user, int32_t owner_kind, int64_t owner_id, int64_t doc,
                      int32_t dim, const float *vec) {
    collect *c = user;
    (void)owner_kind; (void)doc;
    if (!c->dim) c->dim = dim;
    if (dim != c->dim) { c->bad_dim = 1; return 1; }
    if (grow((void **)&c->seen, &c->capseen, c->nseen + 1, sizeof *c->seen)) goto oom;
    c->seen[c->nseen++] = owner_id;
    if (c->v && vindex_stored(c->v, owner_id)) {
        /* held: nothing to add; held but tombstoned (its vector was removed and put back):
         * a tombstone cannot be lifted, so the caller rebuilds */
        if (!vindex_contains(c->v, owner_id)) c->revive++;
        return 0;
    }
    if (grow((void **)&c->ids, &c->cap, c->n + 1, sizeof *c->ids) ||
        grow((void **)&c->vecs, &c->capv, c->n + 1, (size_t)dim * sizeof *c->vecs))
        goto oom;
    c->ids[c->n] = owner_id;
    memcpy(c->vecs + (size_t)c->n * dim, vec, (size_t)dim * sizeof *vec);
    c->n++;
    return 0;
oom:
    c->oom = 1;
    return 1;
}

static void collect_free(collect *c) {
    free(c->ids);
    free(c->vecs);
    free(c->seen);
}

static int scan(store *s, const char *space, const char *model, collect *c, int64_t *gen,
                char *err, size_t errlen) {
    /* the generation read before the scan: if the store moves meanwhile, the next sync
     * sees a newer generation and catches up */
    if (store_generation(s, gen) != STORE_OK) {
        index_set_err(err, errlen, "vindex: %s", store_errmsg(s));
        return -1;
    }
    int rc = store_vectors_foreach(s, store_space(space), model, owner_for(space), collect_cb, c);
    if (c->bad_dim) {
        index_set_err(err, errlen, "vindex: %s vectors of model %s have mixed or unexpected dims",
                      space, model);
        return -1;
    }
    if (c->oom) { index_set_err(err, errlen, "vindex: out of memory reading vectors"); return -1; }
    if (rc) {
        index_set_err(err, errlen, "vindex: reading vectors: %s", store_errmsg(s));
        return -1;
    }
    return 0;
}

static void save_quiet(vindex *v, store *s, const char *space) {
    char path[4096], e[256];
    if (vindex_store_file(s, space, vindex_get_opts(v)->kind, path, sizeof path)) return;
    /* a read-only collection keeps the index in memory only */
    (void)vindex_save(v, path, (uint64_t)vindex_generation(v), e, sizeof e);
}

static int rebuild_from(vindex *v, store *s, const char *space, const char *model,
                        vindex_sync_info *info, char *err, size_t errlen) {
    collect c = {.dim = vindex_get_opts(v)->dim};
    int64_t gen = 0;
    int rc = scan(s, space, model, &c, &gen, err, errlen);
    if (!rc) rc = vindex_build(v, c.n, c.ids, c.vecs, err, errlen);
    if (!rc) {
        vindex_set_generation(v, gen);
        info->rebuilt = 1;
        info->added = c.n;
        info->generation = gen;
        save_quiet(v, s, space);
    }
    collect_free(&c);
    return rc;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int vindex_sync_store(vindex *v, store *s, const char *space, const char *model,
                      vindex_sync_info *info, char *err, size_t errlen) {
    vindex_sync_info dummy;
    if (!info) info = &dummy;
    memset(info, 0, sizeof *info);
    if (!v || !s || !space || !model) {
        index_set_err(err, errlen, "vindex: bad sync arguments");
        return -1;
    }
    int64_t gen = 0;
    if (store_generation(s, &gen) != STORE_OK) {
        index_set_err(err, errlen, "vindex: %s", store_errmsg(s));
        return -1;
    }
    info->generation = gen;
    if (gen == vindex_generation(v)) return 0;
    if (vindex_is_remote(v)) {   /* the database's own index is always current */
        int64_t n = 0;
        if (store_vectors_count(s, store_space(space), model, owner_for(space), &n) != STORE_OK) {
            index_set_err(err, errlen, "vindex: %s", store_errmsg(s));
            return -1;
        }
        vindex_set_remote_count(v, n);
        vindex_set_generation(v, gen);
        return 0;
    }
    collect c = {.v = v, .dim = vindex_get_opts(v)->dim};
    int rc = scan(s, space, model, &c, &gen, err, errlen);
    if (rc) { collect_free(&c); return -1; }
    /* ids the index holds that the store no longer has: tombstones */
    if (c.nseen) qsort(c.seen, (size_t)c.nseen, sizeof *c.seen, cmp_i64);
    int64_t nid = 0, *ids = vindex_ids(v, &nid), ngone = 0;
    for (int64_t i = 0; ids && i < nid; i++)
        if (!c.nseen || !bsearch(&ids[i], c.seen, (size_t)c.nseen, sizeof *c.seen, cmp_i64))
            ids[ngone++] = ids[i];
    info->removed = vindex_remove(v, ngone, ids);
    free(ids);
    int64_t total = vindex_size(v) + c.n;
    int too_dead = total > 0 && (double)vindex_dead(v) > DEAD_REBUILD_FRACTION * (double)total;
    if (too_dead || c.revive) {
        int64_t revive = c.revive;
        collect_free(&c);
        rc = rebuild_from(v, s, space, model, info, err, errlen);
        if (!rc && too_dead)
            snprintf(info->why, sizeof info->why, "more than %d%% of the vectors were deleted",
                     (int)(DEAD_REBUILD_FRACTION * 100));
        else if (!rc)
            snprintf(info->why, sizeof info->why, "%lld deleted vectors came back", (long long)revive);
        return rc;
    }
    rc = vindex_add(v, c.n, c.ids, c.vecs, err, errlen);
    if (!rc) {
        info->added = c.n;
        info->generation = gen;
        vindex_set_generation(v, gen);
        save_quiet(v, s, space);
    }
    collect_free(&c);
    return rc;
}

int vindex_rebuild_store(vindex *v, store *s, const char *space, const char *model,
                         vindex_sync_info *info, char *err, size_t errlen) {
    vindex_sync_info dummy;
    if (!info) info = &dummy;
    memset(info, 0, sizeof *info);
    if (!v || !s || !space || !model) {
        index_set_err(err, errlen, "vindex: bad rebuild arguments");
        return -1;
    }
    if (vindex_is_remote(v)) return vindex_sync_store(v, s, space, model, info, err, errlen);
    int rc = rebuild_from(v, s, space, model, info, err, errlen);
    if (!rc) snprintf(info->why, sizeof info->why, "compaction requested");
    return rc;
}

/* the store's dimension for (space, model), 0 if it has no vectors */
static int first_dim_cb(void *user, int32_t ok, int64_t oid, int64_t doc, int32_t dim,
                        const float *vec) {
    (void)ok; (void)oid; (void)doc; (void)vec;
    *(int32_t *)user = dim;
    return 1;
}

int vindex_open_store(store *s, const char *space, const char *model, const vindex_opts *o,
                      vindex **out, vindex_sync_info *info, char *err, size_t errlen) {
    vindex_sync_info dummy;
    if (!info) info = &dummy;
    memset(info, 0, sizeof *info);
    if (out) *out = NULL;
    if (!s || !space || !model || !o || !out) {
        index_set_err(err, errlen, "vindex: bad open arguments");
        return -1;
    }
    if (strcmp(space, "text") && strcmp(space, "image") && strcmp(space, "figure")) {
        index_set_err(err, errlen, "vindex: unknown space '%s' (text, image or figure)", space);
        return -1;
    }
    vindex_opts want = *o;
    snprintf(want.model_id, sizeof want.model_id, "%s", model);
    if (want.dim == 0) {
        int32_t d = 0;
        store_vectors_foreach(s, store_space(space), model, owner_for(space), first_dim_cb, &d);
        want.dim = d ? d : 384;
    }
    if (store_is_shared(s)) {
        vindex *r = vindex_create_remote(&want, s, store_space(space), owner_for(space), err, errlen);
        if (!r) return -1;
        if (vindex_sync_store(r, s, space, model, info, err, errlen)) { vindex_free(r); return -1; }
        *out = r;
        return 0;
    }
    char path[4096];
    if (vindex_store_file(s, space, want.kind, path, sizeof path)) {
        index_set_err(err, errlen, "vindex: database path too long");
        return -1;
    }
    char why[256] = "";
    uint64_t gen = 0;
    vindex *v = vindex_load(path, &want, &gen, why, sizeof why);
    if (v) {
        info->loaded = 1;
        int rc = vindex_sync_store(v, s, space, model, info, err, errlen);
        info->loaded = 1;
        if (rc) { vindex_free(v); return -1; }
        *out = v;
        return 0;
    }
    v = vindex_create(&want, err, errlen);
    if (!v) return -1;
    if (rebuild_from(v, s, space, model, info, err, errlen)) { vindex_free(v); return -1; }
    snprintf(info->why, sizeof info->why, "%.190s", why);
    *out = v;
    return 0;
}
