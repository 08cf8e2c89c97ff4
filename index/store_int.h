/* Private to index/store_*.c: the handle and shared helpers. */
#ifndef MMRAG_INDEX_STORE_INT_H
#define MMRAG_INDEX_STORE_INT_H
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include "index/store.h"

struct store {
    sqlite3 *db;
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
#define STORE_UNLOCK(s) pthread_mutex_unlock(&(s)->mu)

/* Set s->err ("store: " + text) and return code. */
int store_set_err(store *s, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
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
#endif
