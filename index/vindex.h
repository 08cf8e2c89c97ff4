/* vindex — derived vector indexes (the store's `vectors` table is the truth).
 *
 * Two kinds, one handle type:
 *  - VINDEX_HNSW: FAISS "IDMap + HNSW32,Flat", inner product on L2-normalized vectors,
 *    ids = chunk ids. Used for the text space.
 *  - VINDEX_LSH: FAISS LSH binary codes (random rotation + trained per-bit thresholds,
 *    i.e. "LSHrt": FAISS' plain "LSH" thresholds at 0, which gives near-identical codes
 *    on all-positive-ish embeddings) pick a candidate pool; candidates are re-scored by
 *    exact cosine against the float vectors the index keeps. Used for the image space.
 *
 * Deletion: vindex_remove() tombstones ids; searches over-fetch and drop them, so a
 * delete takes effect at once. vindex_compact() (or a rebuild) drops them for good.
 *
 * Persistence: one file per index, written atomically (temp + rename) with a header
 * (magic, version, kind, dim, bits, store generation, model id, CRC32 of the payload).
 * vindex_load() refuses a missing, corrupt or mismatching file with a message, and the
 * caller rebuilds from the store (vindex_open_store() does all of that).
 *
 * Threads: a handle is safe to share. Searches take a read lock and run with one
 * OpenMP thread in the calling thread (many callers otherwise oversubscribe the cores);
 * add/remove/build/compact take the write lock. */
#ifndef MMRAG_INDEX_VINDEX_H
#define MMRAG_INDEX_VINDEX_H
#include <stddef.h>
#include <stdint.h>

enum { VINDEX_HNSW = 1, VINDEX_LSH = 2 };

typedef struct vindex_opts {
    int32_t kind;            /* VINDEX_HNSW or VINDEX_LSH */
    int32_t dim;             /* vector dimension (384 MiniLM, 512 CLIP) */
    int32_t hnsw_m;          /* HNSW graph degree (32) */
    int32_t ef_construction; /* HNSW build beam (64) */
    int32_t ef_search;       /* HNSW query beam (128: recall@10 0.99 at 100k, bench) */
    int32_t lsh_bits;        /* LSH code length (256: measured, see bench/bench_index.c) */
    int32_t lsh_pool;        /* LSH candidates re-scored per query: max(lsh_pool, 10*k) (400) */
    int32_t search_threads;  /* OpenMP threads inside one search (1) */
    char model_id[64];       /* encoder that made the vectors; a different one = rebuild */
} vindex_opts;

typedef struct vindex_hit {
    int64_t id;    /* chunk id (text space) or owner id (image space) */
    float score;   /* cosine similarity (inner product of normalized vectors) */
} vindex_hit;

typedef struct vindex vindex;

/* Defaults for a kind and dimension. */
void vindex_opts_default(vindex_opts *o, int32_t kind, int32_t dim);

/* An empty index. NULL + message on bad options. */
vindex *vindex_create(const vindex_opts *o, char *err, size_t errlen);
void vindex_free(vindex *v);

/* Replace the whole content by n vectors (row-major n x dim; normalized inside).
 * LSH trains its rotation and thresholds here. Tombstones are cleared. */
int vindex_build(vindex *v, int64_t n, const int64_t *ids, const float *vecs,
                 char *err, size_t errlen);
/* Append vectors (an untrained LSH trains on this first batch). An id that is
 * tombstoned is revived only by a later build/compact: ids must not be reused. */
int vindex_add(vindex *v, int64_t n, const int64_t *ids, const float *vecs,
               char *err, size_t errlen);
/* Tombstone ids (unknown ids are ignored). Returns the number newly tombstoned. */
int64_t vindex_remove(vindex *v, int64_t n, const int64_t *ids);
/* Rebuild without the tombstoned vectors (reads them back from the index itself). */
int vindex_compact(vindex *v, char *err, size_t errlen);

/* Top-k live hits for one query vector (normalized inside), best first.
 * Writes *nout <= k hits. Returns 0, or -1 with a message. */
int vindex_search(vindex *v, const float *query, int32_t k, vindex_hit *out,
                  int32_t *nout, char *err, size_t errlen);
/* LSH only: the candidate stage alone (Hamming order, no re-scoring); for measuring. */
int vindex_search_candidates(vindex *v, const float *query, int32_t k, vindex_hit *out,
                             int32_t *nout, char *err, size_t errlen);

int vindex_set_ef_search(vindex *v, int32_t ef);
int vindex_set_lsh_pool(vindex *v, int32_t pool);
int vindex_set_search_threads(vindex *v, int32_t threads);

int64_t vindex_size(const vindex *v);      /* vectors stored, dead included */
int64_t vindex_dead(const vindex *v);      /* tombstones */
int vindex_contains(const vindex *v, int64_t id); /* stored and not tombstoned */
int vindex_stored(const vindex *v, int64_t id);   /* stored, tombstoned or not */
/* All stored ids (dead included) into a malloc'd array; *n gets the count. */
int64_t *vindex_ids(const vindex *v, int64_t *n);
const vindex_opts *vindex_get_opts(const vindex *v);
/* Approximate heap bytes held by the index (for the bench's bytes/vector). */
size_t vindex_memory(const vindex *v);

/* Atomic save with the store generation it reflects. */
int vindex_save(vindex *v, const char *path, uint64_t generation, char *err, size_t errlen);
/* Load and verify. Fails (NULL + message) when the file is missing, corrupt, or its
 * kind/dim/model id differ from `expect` (model_id "" = accept any). */
vindex *vindex_load(const char *path, const vindex_opts *expect, uint64_t *generation,
                    char *err, size_t errlen);


/* ---- glue with the store (index/store.h): the vectors table is the truth ---- */
struct store;

typedef struct vindex_sync_info {
    int32_t loaded;     /* 1 = the file was usable */
    int32_t rebuilt;    /* 1 = built from scratch (missing/corrupt/other config/too many dead) */
    int64_t added;      /* vectors added since the file's generation */
    int64_t removed;    /* ids tombstoned since the file's generation */
    int64_t generation; /* store generation the index now reflects */
    char why[192];      /* why it was rebuilt ("" if not) */
} vindex_sync_info;

/* Path of the index file of `space` beside the database: "<db>.<space>.hnsw|.lsh".
 * Writes into buf; returns 0, or -1 if it does not fit. */
int vindex_store_file(struct store *s, const char *space, int32_t kind, char *buf, size_t len);

/* Open the derived index for (space, model) of the store: load its file, rebuild it from
 * the vectors table when missing, corrupt or built for another configuration, bring it up
 * to the store's generation (new vectors added, vanished ids tombstoned; a rebuild when
 * more than a fifth would be dead) and save it back when anything changed (a read-only
 * directory is not an error: the index then lives in memory only).
 * Text space indexes chunk vectors, image space image vectors; "figure" is a second index
 * over image-owned vectors (the store's image space under a pixel model's id), in a file
 * of its own. o->dim 0 = take the
 * store's. `info` may be NULL. */
int vindex_open_store(struct store *s, const char *space, const char *model,
                      const vindex_opts *o, vindex **out, vindex_sync_info *info,
                      char *err, size_t errlen);
/* Bring an open index up to the store's generation (cheap when it is unchanged). */
int vindex_sync_store(vindex *v, struct store *s, const char *space, const char *model,
                      vindex_sync_info *info, char *err, size_t errlen);
/* Rebuild from the store without any dead ids, and save (`mmrag compact`). */
int vindex_rebuild_store(vindex *v, struct store *s, const char *space, const char *model,
                         vindex_sync_info *info, char *err, size_t errlen);
/* Store generation the index reflects (-1 = never synced). */
int64_t vindex_generation(const vindex *v);
void vindex_set_generation(vindex *v, int64_t gen);

#endif
