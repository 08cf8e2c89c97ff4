/* index/store — the store: the source of truth for documents, pages, images,
 * image-anchored chunks, keyword search and embedding vectors. Two backends behind this
 * one contract, chosen by the database string given to store_open():
 *
 *  - a directory: the embedded store, SQLite at DIR/mmrag.db (WAL mode) with FTS5 BM25.
 *    Everything derived (FAISS files) compares store_generation() to know when it is stale.
 *  - postgres://user@host:port/dbname[?collection=NAME] (or postgresql://): the shared
 *    store, PostgreSQL with pgvector (store_pg*.c). A collection is a schema
 *    ("mmrag_NAME", default "default") created and migrated by mmrag; text search is a
 *    tsvector GIN index ranked by ts_rank_cd, vectors live in pgvector columns with HNSW
 *    indexes and are searched in the database (store_vectors_knn), and ingest jobs
 *    queue in a table that any number of workers claim (store_job_*).
 *
 * Walkthrough (writer):
 *   store *s; store_open("./.mmrag", NULL, &s, err, sizeof err);
 *   store_doc_meta m = {.sha256 = sha, .path = abs, .title = t, .pages = n, .bytes = b};
 *   int rc = store_doc_begin(s, &m, &old);        // STORE_EXISTS: unchanged file, done
 *   for each page: store_page_add(), store_image_add()..., store_chunk_add()...
 *   rc = store_doc_commit(s, &doc_id, &replaced); // or store_doc_abort(s)
 *   store_close(s);
 *
 * Document transactions: between begin and commit the rows are spooled into the
 * connection's private TEMP tables (on disk when large, so memory stays flat and no write
 * lock is held while a PDF is parsed). store_doc_commit copies them into the main tables
 * in ONE write transaction (BEGIN IMMEDIATE, waits up to busy_timeout_ms for other
 * writers): a crash or abort leaves either the whole document or nothing. A changed file
 * at an already-indexed path replaces the old document in that same transaction.
 * Chunk/image ids (the FAISS ids) come from AUTOINCREMENT columns: never reused.
 *
 * Threads: a handle is thread-safe (internal mutex); calls on one handle are serialized.
 * A handle holds at most one open document at a time, so parallel writers each open their
 * own handle (the intended scheme: one handle per worker thread or process).
 * Callbacks (store_vectors_foreach) run with the handle locked: they must not call
 * the same handle (use a second handle if needed).
 *
 * Errors: functions return STORE_OK (0), a positive non-error outcome (STORE_EXISTS) or a
 * negative store_status; the message is in store_errmsg(s) ("store: ..."), valid until
 * the next call on the handle from any thread. Failing writes roll back their
 * transaction: the database stays as it was. Strings in rows are owned by the row;
 * free rows with the matching _free function (all accept NULL). */
#ifndef MMRAG_INDEX_STORE_H
#define MMRAG_INDEX_STORE_H
#include <stddef.h>
#include <stdint.h>

#define STORE_SCHEMA_VERSION 3   /* schema this code writes; older ones are migrated */

typedef enum {
    STORE_OK = 0,
    STORE_EXISTS = 1,            /* same sha256 already indexed: nothing written */
    STORE_ERR = -1,              /* generic SQLite error (message says which) */
    STORE_ERR_NOTFOUND = -2,     /* no such document / chunk / image / vector */
    STORE_ERR_ARG = -3,          /* bad argument (NULL, bad dim, bad spec) */
    STORE_ERR_BUSY = -4,         /* another writer held the lock past busy_timeout_ms */
    STORE_ERR_READONLY = -5,     /* database or its directory is not writable */
    STORE_ERR_FULL = -6,         /* disk (or max_page_count) full */
    STORE_ERR_CORRUPT = -7,      /* not a database / malformed */
    STORE_ERR_VERSION = -8,      /* schema newer than this code knows */
    STORE_ERR_NOMEM = -9,
    STORE_ERR_AMBIGUOUS = -10,   /* sha prefix matches several documents */
    STORE_ERR_STATE = -11,       /* misuse: no open document, or one already open */
    STORE_ERR_IO = -12,          /* cannot create/open the directory or file */
} store_status;

/* Chunk kinds: same numbering as ingest_chunk_kind (stored as text in SQL). */
typedef enum {
    STORE_KIND_TEXT = 0, STORE_KIND_CAPTION = 1, STORE_KIND_FIGURE = 2,
    STORE_KIND_TABLE = 3, STORE_KIND_OCR = 4, STORE_KIND_HEADING = 5,
} store_chunk_kind;
#define STORE_KIND_COUNT 6
/* Image kinds: same numbering as ingest_image_kind. */
typedef enum { STORE_IMAGE_RASTER = 0, STORE_IMAGE_VECTOR = 1 } store_image_kind;
/* Vector owners. */
typedef enum { STORE_OWNER_CHUNK = 0, STORE_OWNER_IMAGE = 1 } store_owner_kind;

typedef struct store store;

typedef struct {
    int32_t readonly;          /* 1 = open read-only (no directory creation) */
    int32_t create;            /* 1 = create DIR and the database if missing (default 1) */
    int32_t busy_timeout_ms;   /* wait for other writers; 0 = default 30000 */
    int64_t max_page_count;    /* 0 = unlimited; tests set it low to simulate a full disk */
} store_options;

void store_options_default(store_options *o);

/* Open (and create/migrate) DIR/mmrag.db, or the PostgreSQL collection a postgres:// URL
 * names. o may be NULL (defaults). On error *out is NULL and err holds a one-line message
 * naming the path, or the host and port of a database that is down or refuses us
 * (STORE_ERR_IO).
 * Returns STORE_OK, STORE_ERR_IO, STORE_ERR_READONLY, STORE_ERR_CORRUPT, STORE_ERR_VERSION,
 * STORE_ERR_NOMEM, STORE_ERR. */
int store_open(const char *dir, const store_options *o, store **out, char *err, size_t errlen);
void store_close(store *s);                    /* aborts an open document; NULL ok */
const char *store_errmsg(store *s);            /* valid until the next call on s */
const char *store_status_str(int rc);          /* static text */
const char *store_path(const store *s);        /* DIR/mmrag.db, or the URL without its
                                                * password; owned by s */
/* 1 when db (a --db value) names the shared PostgreSQL store rather than a directory. */
int store_is_url(const char *db);
/* 1 for a handle on the shared store: vectors are searched in the database. */
int store_is_shared(const store *s);
/* The database string of collection `name` under base: "base/name" for a directory,
 * the URL with ?collection=name for PostgreSQL. Returns 0, or -1 when it does not fit
 * or the name is not [a-z0-9_]{1,48} for a URL. */
int store_collection_db(const char *base, const char *name, char *buf, size_t len);
/* The collection a postgres:// URL names ("default" without ?collection=). Returns 0, or
 * -1 when db is not a URL, its collection name is not valid, or it does not fit. */
int store_collection_of(const char *db, char *buf, size_t len);

/* Meta: generation changes whenever documents or vectors change (commit, delete,
 * vectors_put). schema_version is in meta too. */
int store_generation(store *s, int64_t *gen);
int store_meta_get(store *s, const char *key, char *buf, size_t buflen);  /* NOTFOUND if absent */
int store_meta_set(store *s, const char *key, const char *value);

/* ---- writing one document -------------------------------------------------------- */
typedef struct {
    const char *sha256;        /* 64 hex chars of the file bytes (required) */
    const char *path;          /* canonical path ("" for uploads without one) */
    const char *title;
    int32_t pages;
    int64_t bytes;
} store_doc_meta;

typedef struct { float x0, y0, x1, y1; } store_box;   /* normalized 0..1, top-left */

typedef struct {
    int32_t number;            /* 1-based */
    float width_pt, height_pt;
    int32_t ocr;
} store_page;

typedef struct {
    int32_t idx;               /* 0-based, unique within the document */
    int32_t page;
    int32_t kind;              /* store_image_kind */
    store_box box;
    int32_t width_px, height_px;
    const uint8_t *png; size_t png_len;   /* preview (copied); may be NULL */
    uint64_t phash;
    int32_t caption_ord;       /* ord of its caption chunk in this document, or -1 */
} store_image;

/* One text line of a chunk: bytes [off, off+len) of the chunk's text, and where that
 * line is on the page. Stored in chunks.lines (schema v2) as a BLOB of packed 24-byte
 * little-endian records, one per line in text order:
 *   uint32 off | uint32 len | float32 x0 | float32 y0 | float32 x1 | float32 y1
 * (IEEE-754 floats, normalized like every box). NULL for chunks written before v2. */
typedef struct {
    uint32_t off, len;
    store_box box;
} store_line;
#define STORE_LINE_BYTES 24

typedef struct {
    int32_t ord;               /* 0-based order within the document */
    int32_t page;
    int32_t kind;              /* store_chunk_kind */
    store_box box;
    int32_t image_idx;         /* store_image.idx it is anchored to, or -1 */
    const char *text;          /* UTF-8 (copied) */
    const char *section;       /* heading path of its section (copied); NULL = none */
    const store_line *lines;   /* n_lines text lines (copied); NULL/0 = none. Each range
                                * must lie inside text, ascending, not overlapping */
    int32_t n_lines;
} store_chunk;

/* Start a document. If a document with m->sha256 exists: returns STORE_EXISTS, *existing_id
 * is set and no document is open. Otherwise STORE_OK and rows may be added.
 * Returns STORE_OK, STORE_EXISTS, STORE_ERR_STATE, STORE_ERR_ARG, STORE_ERR_FULL, STORE_ERR. */
int store_doc_begin(store *s, const store_doc_meta *m, int64_t *existing_id);
int store_page_add(store *s, const store_page *p);
int store_image_add(store *s, const store_image *img);
/* Returns STORE_ERR_ARG (document stays open) for a bad kind or bad lines. */
int store_chunk_add(store *s, const store_chunk *c);
/* Make the document visible atomically. *doc_id = the new id; *replaced_id = id of the
 * document it replaced at the same path, or 0 (either pointer may be NULL). Returns
 * STORE_EXISTS if another writer committed the same sha256 meanwhile (*doc_id = its id).
 * On error the document is aborted and nothing is written.
 * Returns STORE_OK, STORE_EXISTS, STORE_ERR_STATE, STORE_ERR_BUSY, STORE_ERR_FULL,
 * STORE_ERR_READONLY, STORE_ERR. */
int store_doc_commit(store *s, int64_t *doc_id, int64_t *replaced_id);
void store_doc_abort(store *s);                /* drop the spooled rows; no-op if none */

/* ---- reading ----------------------------------------------------------------------- */
typedef struct {
    int64_t id;
    char sha256[65];
    char *path, *title, *status;
    int32_t pages;
    int64_t bytes;
    int64_t added_at, updated_at;   /* unix seconds */
    int32_t n_chunks, n_images;
} store_doc_row;

typedef struct {
    int64_t id, doc;
    int32_t page, ord, kind;
    store_box box;
    int64_t image_id;          /* 0 = not anchored */
    char *text;
    char *embedding_key;       /* "<doc>_<chunk>_<img>", img "none" when not anchored */
    char *section;             /* heading path, "" when none (or indexed before schema v3) */
} store_chunk_row;

typedef struct {
    int64_t id, doc;
    int32_t page, idx, kind;
    store_box box;
    int32_t width_px, height_px;
    uint8_t *png; size_t png_len;
    uint64_t phash;
    int64_t caption_chunk;     /* chunk id of its caption, 0 if none */
} store_image_row;

typedef struct {
    int32_t number;
    float width_pt, height_pt;
    int32_t ocr;
} store_page_row;

/* All documents ordered by id; caller frees with store_docs_free(rows, n). */
int store_doc_list(store *s, store_doc_row **rows, int32_t *n);
/* Find by decimal id, sha256 prefix (>= 4 hex chars) or path (as given or canonical).
 * Returns STORE_OK, STORE_ERR_NOTFOUND, STORE_ERR_AMBIGUOUS. Free with store_doc_row_clear. */
int store_doc_get(store *s, const char *spec, store_doc_row *out);
int store_doc_get_id(store *s, int64_t id, store_doc_row *out);
/* Delete a document and (cascade) its pages, images, chunks, FTS rows and vectors. */
int store_doc_delete(store *s, int64_t id);
void store_doc_row_clear(store_doc_row *r);
void store_docs_free(store_doc_row *rows, int32_t n);

/* Pages of a document ordered by number; free with free(). */
int store_pages_get(store *s, int64_t doc, store_page_row **rows, int32_t *n);
/* Chunks of a document in order; page 0 = all pages. Free with store_chunks_free. */
int store_chunks_get(store *s, int64_t doc, int32_t page, store_chunk_row **rows, int32_t *n);
int store_chunk_get(store *s, int64_t id, store_chunk_row *out);   /* NOTFOUND if gone */
/* The text lines of chunk `chunk_id`, in text order; caller frees *out with free().
 * A chunk without lines (written before schema v2), or whose blob is damaged (length not
 * a multiple of STORE_LINE_BYTES, a range outside its text, ranges out of order, a
 * non-finite coordinate), gives STORE_OK with *out = NULL and *n = 0.
 * Returns STORE_OK, STORE_ERR_NOTFOUND (no such chunk), STORE_ERR_ARG, STORE_ERR_NOMEM,
 * STORE_ERR. */
int store_chunk_lines(store *s, int64_t chunk_id, store_line **out, int32_t *n);
void store_chunk_row_clear(store_chunk_row *r);
void store_chunks_free(store_chunk_row *rows, int32_t n);
/* Images of a document (page 0 = all), with previews. Free with store_images_free. */
int store_images_get(store *s, int64_t doc, int32_t page, store_image_row **rows, int32_t *n);
int store_image_get(store *s, int64_t id, store_image_row *out);
void store_image_row_clear(store_image_row *r);
void store_images_free(store_image_row *rows, int32_t n);

const char *store_chunk_kind_name(int32_t kind);    /* "text", "caption", ... */
int32_t store_chunk_kind_parse(const char *name);   /* -1 if unknown */
const char *store_image_kind_name(int32_t kind);    /* "raster", "vector" */

/* ---- BM25 keyword search (FTS5) ---------------------------------------------------- */
typedef struct {
    int32_t k;                 /* max hits; 0 = 10 */
    const int64_t *docs;       /* restrict to these documents; NULL/0 = all */
    int32_t n_docs;
    int32_t page_min, page_max;  /* 0 = unbounded */
    int32_t kind;              /* store_chunk_kind, or -1 = any */
    float section_weight;      /* BM25 weight of the section path against the text (1);
                                * 0: a match there still counts as a hit but scores 0 */
} store_search_opts;

typedef struct {
    int64_t chunk_id, doc;
    char *title;
    int32_t page, kind;
    store_box box;
    int64_t image_id;          /* 0 = none */
    char *snippet;             /* matched terms in [brackets], "…" at cuts */
    char *text;                /* full chunk text */
    double score;              /* -bm25(): higher is better */
} store_hit;

void store_search_opts_default(store_search_opts *o);
/* Any user text is accepted: terms are quoted (FTS5 syntax is never interpreted), "..."
 * phrases stay phrases, English function words are dropped (unless that leaves nothing),
 * terms are OR-ed and ranked by BM25. An empty query gives 0 hits.
 * Caller frees with store_hits_free(hits, n). */
int store_search_bm25(store *s, const char *query, const store_search_opts *o,
                      store_hit **hits, int32_t *n);
void store_hits_free(store_hit *hits, int32_t n);
/* The FTS5 MATCH expression built for `query` (for --explain/tests). Returns bytes needed. */
size_t store_fts_query(const char *query, char *buf, size_t buflen);

/* ---- vectors ----------------------------------------------------------------------- */
/* space: "text" or "image"; model: the model id string (e.g. "minilm-l6-v2"). */
typedef struct {
    int32_t owner_kind;        /* store_owner_kind */
    int64_t owner_id;          /* chunk id or image id */
    const float *v;            /* dim floats (copied) */
} store_vec;

/* Write n vectors of one (space, model, dim) in one transaction (replaces existing ones).
 * Owners that no longer exist (deleted meanwhile) are skipped: *written counts the rest
 * (may be NULL). Returns STORE_OK, STORE_ERR_ARG, STORE_ERR_BUSY, STORE_ERR_FULL,
 * STORE_ERR_READONLY, STORE_ERR. */
int store_vectors_put(store *s, const char *space, const char *model, int32_t dim,
                      const store_vec *vecs, int32_t n, int32_t *written);
/* Copy one vector into buf (buflen floats). *dim gets its dimension.
 * Returns STORE_OK, STORE_ERR_NOTFOUND, STORE_ERR_ARG (buffer too small). */
int store_vector_get(store *s, int32_t owner_kind, int64_t owner_id, const char *space,
                     const char *model, float *buf, int32_t buflen, int32_t *dim);
/* Call cb for every vector of (space, model) in owner id order (owner_kind < 0 = both
 * kinds). `v` is valid only during the call. A non-zero return from cb stops the scan
 * and is returned. Runs in one read snapshot. */
typedef int (*store_vec_cb)(void *user, int32_t owner_kind, int64_t owner_id, int64_t doc,
                            int32_t dim, const float *v);
int store_vectors_foreach(store *s, const char *space, const char *model, int32_t owner_kind,
                          store_vec_cb cb, void *user);
/* Delete every vector of (space, model): those of an encoder that was replaced. *deleted
 * (may be NULL) gets how many. Returns STORE_OK, STORE_ERR_ARG, STORE_ERR_BUSY,
 * STORE_ERR_READONLY, STORE_ERR. */
int store_vectors_drop(store *s, const char *space, const char *model, int64_t *deleted);
/* Number of vectors of (space, model); owner_kind < 0 = both kinds. */
int store_vectors_count(store *s, const char *space, const char *model, int32_t owner_kind,
                        int64_t *count);

/* Nearest vectors of (space, model) to q by cosine, best first (shared store only: the
 * embedded store searches through vindex). owner_kind < 0 = both kinds.
 * Returns STORE_OK, STORE_ERR_STATE (embedded store), STORE_ERR_ARG, STORE_ERR. */
typedef struct { int64_t id; float score; } store_knn_hit;
int store_vectors_knn(store *s, const char *space, const char *model, int32_t owner_kind,
                      const float *q, int32_t dim, int32_t k, store_knn_hit *out, int32_t *nout);

/* Work lists for encoders: up to `limit` owners with id > after_id that lack a vector
 * for (space, model), in id order. Loop with after_id = last id returned until n == 0. */
typedef struct {
    int64_t id;                /* chunk id or image id */
    int64_t doc;
    char *text;                /* chunk: its text; image: caption + anchored chunk text */
    char *section;             /* chunk: its section path ("" when none); image: NULL */
    uint8_t *png; size_t png_len;   /* image only: the preview (NULL for chunks) */
    int32_t width_px, height_px;
} store_todo;
int store_chunks_without_vector(store *s, const char *space, const char *model,
                                int64_t after_id, int32_t limit, store_todo **items, int32_t *n);
int store_images_without_vector(store *s, const char *space, const char *model,
                                int64_t after_id, int32_t limit, store_todo **items, int32_t *n);
void store_todos_free(store_todo *items, int32_t n);

/* ---- sentence vectors (retrieval scores a chunk by its best sentence too) ---------------
 * One row per (chunk, model): the chunk's sentences embedded one by one, n x dim floats in
 * sentence order (n may be 0: the chunk was looked at and has no sentence worth a vector).
 * Rows go with their chunk. */
typedef struct { int64_t chunk_id; int32_t n; const float *v; } store_sentvec;
/* Writes n rows in one transaction; a chunk that is gone is skipped. *written may be NULL. */
int store_sentvecs_put(store *s, const char *model, int32_t dim, const store_sentvec *rows,
                       int32_t n, int32_t *written);
/* best[i] = the largest dot product of q (dim floats) with the sentence vectors of chunk
 * ids[i], or -2 when it has none for this model. */
int store_sentvecs_best(store *s, const char *model, const float *q, int32_t dim,
                        const int64_t *ids, int32_t n, float *best);
/* Work list: chunks with id > after_id without a sentence row for model (text, section). */
int store_chunks_without_sentvecs(store *s, const char *model, int64_t after_id, int32_t limit,
                                  store_todo **items, int32_t *n);
int store_sentvecs_count(store *s, const char *model, int64_t *count);

/* ---- the ingest queue (shared store only) ------------------------------------------
 * Any number of processes submit PDFs and claim jobs; a claim is a lease that the worker
 * renews while it works (store_job_renew) and that another worker may take over once it
 * has run out (the worker died): the document transaction means nothing partial was left,
 * and a document committed just before the death is found by its sha256 (EXISTS).
 * A job whose lease ran out STORE_JOB_MAX_ATTEMPTS times fails. On the embedded store
 * these return STORE_ERR_STATE (the server keeps its own queue there). */
#define STORE_JOB_MAX_ATTEMPTS 3
typedef struct {
    int64_t id;
    char sha256[65];
    char name[256];            /* the path or client file name it was submitted under */
    char state[12];            /* "queued", "running", "done", "failed" */
    char worker[64];
    int32_t attempts, pages, pages_done;
    int64_t doc;               /* the document, when done */
    int64_t created_at, updated_at;   /* unix seconds */
    char error[512];
} store_job;
/* Keep the PDF bytes under their sha256 (a no-op when already kept). */
int store_file_put(store *s, const char *sha256, const void *pdf, size_t len);
/* The kept bytes (malloc'd) of sha256; NOTFOUND when none. */
int store_file_get(store *s, const char *sha256, uint8_t **pdf, size_t *len);
/* Queue the kept file sha256 under `name`. A job for the same file already queued or
 * running gives STORE_EXISTS and its id (the file is ingested once). */
int store_job_submit(store *s, const char *sha256, const char *name, int64_t *job_id);
/* Take the oldest queued job (or one whose lease ran out) for `worker` with a lease of
 * lease_s seconds; only_id > 0: that job only. STORE_ERR_NOTFOUND when there is none. */
int store_job_claim(store *s, const char *worker, int32_t lease_s, int64_t only_id,
                    store_job *out);
/* Extend the lease and record progress. STORE_ERR_NOTFOUND when the job is no longer
 * this worker's (its lease ran out and another took it): stop working on it. */
int store_job_renew(store *s, int64_t id, const char *worker, int32_t lease_s,
                    int32_t pages_done, int32_t pages);
/* End a job: done with `doc` (error NULL) or failed with the message. NOTFOUND when it is
 * no longer this worker's. */
int store_job_finish(store *s, int64_t id, const char *worker, int64_t doc, const char *error);
int store_job_get(store *s, int64_t id, store_job *out);
/* Jobs queued and running now. */
int store_job_counts(store *s, int64_t *queued, int64_t *running);

/* Totals for status displays. */
typedef struct { int64_t docs, pages, images, chunks, vectors; } store_counts;
int store_counts_get(store *s, store_counts *c);
#endif
