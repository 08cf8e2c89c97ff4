/* Private to index/store_*.c: the handle and shared helpers. */
#ifndef MMRAG_INDEX_STORE_INT_H
#define MMRAG_INDEX_STORE_INT_H
#include <limits.h>
#include <pthread.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include "index/store.h"

struct store {
    sqlite3 *db;               /* the embedded backend, or NULL */
    PGconn *pg;                /* the shared backend (store_pg*.c), or NULL */
    char schema[80];           /* pg: the collection's schema, quoted ("mmrag_NAME") */
    int pg_tx;                 /* pg: a transaction is open on the connection */
    int32_t pg_ef;             /* pg: hnsw.ef_search set on the session */
    char pg_vec_index[160];    /* pg: the last (space, model, dim) whose index exists */
    pthread_mutex_t mu;
    int readonly;
    char path[PATH_MAX];
    char err[512];
    /* the open document (between store_doc_begin and commit/abort) */
    int doc_open;
    char doc_sha[65];
    char *doc_path, *doc_title;
    int32_t doc_pages;
    int64_t doc_bytes;
    sqlite3_stmt *sp_page, *sp_image, *sp_chunk;   /* spool inserts */
};

#define STORE_LOCK(s) pthread_mutex_lock(&(s)->mu)
/* Each public function routes a PostgreSQL handle to its pg_ twin (store_pg*.c). */
#define STORE_ROUTE_PG(s, call) do { if ((s) && (s)->pg) return call; } while (0)
#define STORE_UNLOCK(s) pthread_mutex_unlock(&(s)->mu)

/* Set s->err ("store: " + text) and return code. */
int store_set_err(store *s, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* store_doc_begin's checks before either backend looks for the sha256 (lock held):
 * a lowercase hex sha256 and no document open; clears *existing_id. */
int store_doc_begin_check(store *s, const store_doc_meta *m, int64_t *existing_id);
/* Keep m on the handle for the commit and mark the document open (the caller clears its
 * spool on failure). */
int store_doc_meta_keep(store *s, const store_doc_meta *m);
void store_doc_meta_drop(store *s);   /* and the document is no longer open */
/* store_sentvecs_put's checks of the model and the batch (lock held). */
int store_sentvecs_check(store *s, const char *model, int32_t dim, const store_sentvec *rows, int32_t n);
/* How store_doc_get reads a spec: *digits = could be an id, *hex = a sha256 prefix. */
void store_doc_spec_kind(const char *spec, int *digits, int *hex);
/* Map the connection's last SQLite error to a store_status and message "store: what: msg". */
int store_sql_err(store *s, const char *what);
/* Map a SQLite result code to a store_status. */
int store_map_rc(int rc);
/* Run SQL without results; on error sets the message. */
int store_exec(store *s, const char *sql, const char *what);
/* Prepare; on error sets the message and returns the status. */
int store_prepare(store *s, const char *sql, sqlite3_stmt **st);
/* Start a write transaction (BEGIN IMMEDIATE) / commit / rollback. */
int store_tx_begin(store *s);
int store_tx_commit(store *s);
void store_tx_rollback(store *s);
int store_bump_generation(store *s);
/* One row of a batch written inside an open transaction: steps the bound statement, adds
 * a changed row to *written and resets it; on an error rolls the transaction back, sets
 * *written to 0 and returns the error ("write <what>"). */
int store_step_batch_row(store *s, sqlite3_stmt *st, const char *what, int32_t *written);
char *store_strdup(const char *t);   /* NULL-safe, "" for NULL */
const char *store_owner_name(int32_t owner_kind);
/* 0, or STORE_ERR_ARG + message unless space is "text"/"image" and model is non-empty. */
int store_check_space(store *s, const char *space, const char *model);
/* store_lines.c: the chunks.lines blob (layout in store.h). */
/* 1 if the n lines lie inside a text of text_len bytes, ascending and not overlapping,
 * with finite coordinates (n == 0 is valid). */
int store_lines_valid(const store_line *lines, int32_t n, size_t text_len);
/* n * STORE_LINE_BYTES bytes (malloc'd), or NULL out of memory. */
uint8_t *store_lines_encode(const store_line *lines, int32_t n);
/* Decode a blob for a text of text_len bytes; a damaged blob gives *out = NULL, *n = 0.
 * Returns STORE_OK or STORE_ERR_NOMEM. */
int store_lines_decode(const uint8_t *blob, size_t bytes, size_t text_len, store_line **out,
                       int32_t *n);
/* The largest dot product of q with the n rows (n x dim) of v; -2 when n is 0. */
float store_best_dot(const float *q, const float *v, int32_t dim, int32_t n);
/* store_search.c: the query's searchable pieces ("..." phrases whole, other words at
 * whitespace, English function words dropped unless nothing else is left), in order. */
typedef void (*store_piece_fn)(void *ctx, const char *p, size_t n, int quoted);
void store_query_pieces(const char *query, store_piece_fn fn, void *ctx);

/* ---- the PostgreSQL backend (store_pg.c, store_pg_read.c) ---- */
int store_is_pg_url(const char *db);
int pg_collection_of(const char *url, char *buf, size_t len);
int pg_open(store *s, const char *url, const store_options *o, char *err, size_t errlen);
void pg_close(store *s);
int pg_meta_get(store *s, const char *key, char *buf, size_t buflen);
int pg_meta_set(store *s, const char *key, const char *value);
int pg_doc_begin(store *s, const store_doc_meta *m, int64_t *existing_id);
int pg_page_add(store *s, const store_page *p);
int pg_image_add(store *s, const store_image *img);
int pg_chunk_add(store *s, const store_chunk *c);
int pg_doc_commit(store *s, int64_t *doc_id, int64_t *replaced_id);
void pg_doc_abort(store *s);
int pg_doc_delete(store *s, int64_t id);
int pg_doc_list(store *s, store_doc_row **rows, int32_t *n);
int pg_doc_get(store *s, const char *spec, store_doc_row *out);
int pg_doc_get_id(store *s, int64_t id, store_doc_row *out);
int pg_pages_get(store *s, int64_t doc, store_page_row **rows, int32_t *n);
int pg_chunks_get(store *s, int64_t doc, int32_t page, store_chunk_row **rows, int32_t *n);
int pg_chunk_get(store *s, int64_t id, store_chunk_row *out);
int pg_chunk_lines(store *s, int64_t chunk_id, store_line **out, int32_t *n);
int pg_images_get(store *s, int64_t doc, int32_t page, store_image_row **rows, int32_t *n);
int pg_image_get(store *s, int64_t id, store_image_row *out);
int pg_search_text(store *s, const char *query, const store_search_opts *o, store_hit **hits,
                   int32_t *n);
int pg_vectors_put(store *s, const char *space, const char *model, int32_t dim,
                   const store_vec *vecs, int32_t n, int32_t *written);
int pg_vector_get(store *s, int32_t owner_kind, int64_t owner_id, const char *space,
                  const char *model, float *buf, int32_t buflen, int32_t *dim);
int pg_vectors_foreach(store *s, const char *space, const char *model, int32_t owner_kind,
                       store_vec_cb cb, void *user);
int pg_vectors_drop(store *s, const char *space, const char *model, int64_t *deleted);
int pg_vectors_count(store *s, const char *space, const char *model, int32_t owner_kind,
                     int64_t *count);
int pg_vectors_knn(store *s, const char *space, const char *model, int32_t owner_kind,
                   const float *q, int32_t dim, int32_t k, store_knn_hit *out, int32_t *nout);
int pg_todo_list(store *s, int what, const char *space, const char *model, int64_t after,
                 int32_t limit, store_todo **items, int32_t *n);
int pg_sentvecs_put(store *s, const char *model, int32_t dim, const store_sentvec *rows,
                    int32_t n, int32_t *written);
int pg_sentvecs_best(store *s, const char *model, const float *q, int32_t dim,
                     const int64_t *ids, int32_t n, float *best);
int pg_sentvecs_count(store *s, const char *model, int64_t *count);
int pg_counts_get(store *s, store_counts *c);
int pg_file_put(store *s, const char *sha256, const void *pdf, size_t len);
int pg_file_get(store *s, const char *sha256, uint8_t **pdf, size_t *len);
int pg_job_submit(store *s, const char *sha256, const char *name, int64_t *job_id);
int pg_job_claim(store *s, const char *worker, int32_t lease_s, int64_t only_id, store_job *out);
int pg_job_renew(store *s, int64_t id, const char *worker, int32_t lease_s, int32_t pages_done,
                 int32_t pages);
int pg_job_finish(store *s, int64_t id, const char *worker, int64_t doc, const char *error);
int pg_job_get(store *s, int64_t id, store_job *out);
int pg_job_counts(store *s, int64_t *queued, int64_t *running);
enum { STORE_TODO_CHUNKS, STORE_TODO_IMAGES, STORE_TODO_SENTENCES };
#endif
