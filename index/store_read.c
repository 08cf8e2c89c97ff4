/* index/store_read.c — readers: documents, pages, chunks, images, counts. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "index/store_int.h"

/* Growable array helper: ensure room for one more element. */
static int grow(void **arr, int32_t n, int32_t *cap, size_t elem) {
    if (n < *cap) return 0;
    int32_t nc = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p) return -1;
    memset((char *)p + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
    *arr = p;
    *cap = nc;
    return 0;
}

static char *col_str(sqlite3_stmt *st, int i) {
    return store_strdup((const char *)sqlite3_column_text(st, i));
}

static store_box col_box(sqlite3_stmt *st, int i) {
    return (store_box){(float)sqlite3_column_double(st, i), (float)sqlite3_column_double(st, i + 1),
                       (float)sqlite3_column_double(st, i + 2), (float)sqlite3_column_double(st, i + 3)};
}

/* A row type the readers below fill: its size, how to read one from a statement row
 * (0, or -1 out of memory; a partly read row is still cleared) and how to clear one. */
typedef struct {
    size_t size;
    int (*from_row)(sqlite3_stmt *st, void *row);
    void (*clear)(void *row);   /* NULL: nothing to free */
    const char *noun;           /* "no <noun> with id N", "read <noun>" */
} row_type;

static void free_rows(const row_type *t, void *rows, int32_t n) {
    for (int32_t i = 0; t->clear && rows && i < n; i++) t->clear((char *)rows + (size_t)i * t->size);
    free(rows);
}

/* Step st (prepared and bound) to the end, one row each; finalizes st. On success the
 * array (NULL when empty) and its length; on error what failed ("store: what: ..."). */
static int read_rows(store *s, sqlite3_stmt *st, const row_type *t, const char *what,
                     void **rows, int32_t *n) {
    void *arr = NULL;
    int32_t cnt = 0, cap = 0;
    int rc = STORE_OK, step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        if (grow(&arr, cnt, &cap, t->size) || t->from_row(st, (char *)arr + (size_t)cnt++ * t->size)) {
            rc = store_set_err(s, STORE_ERR_NOMEM, "out of memory");
            break;
        }
    }
    if (!rc && step != SQLITE_DONE) rc = store_sql_err(s, what);
    sqlite3_finalize(st);
    if (rc) { free_rows(t, arr, cnt); return rc; }
    *rows = arr; *n = cnt;
    return rc;
}

/* The one row `sql` (a "... WHERE id=?" query) finds for id, into out (zeroed first). */
static int read_one(store *s, const char *sql, const row_type *t, int64_t id, void *out) {
    memset(out, 0, t->size);
    STORE_LOCK(s);
    sqlite3_stmt *st;
    int rc = store_prepare(s, sql, &st);
    if (rc) goto out;
    sqlite3_bind_int64(st, 1, id);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        if (t->from_row(st, out)) {
            if (t->clear) t->clear(out);
            rc = store_set_err(s, STORE_ERR_NOMEM, "out of memory");
        }
    } else if (step == SQLITE_DONE) {
        rc = store_set_err(s, STORE_ERR_NOTFOUND, "no %s with id %lld", t->noun, (long long)id);
    } else {
        char what[64];
        snprintf(what, sizeof what, "read %s", t->noun);
        rc = store_sql_err(s, what);
    }
    sqlite3_finalize(st);
out:
    STORE_UNLOCK(s);
    return rc;
}

/* ---- documents -------------------------------------------------------------------- */
#define DOC_COLS "d.id, d.sha256, d.path, d.title, d.status, d.pages, d.bytes, d.added_at," \
    " d.updated_at, (SELECT count(*) FROM chunks c WHERE c.doc=d.id)," \
    " (SELECT count(*) FROM images i WHERE i.doc=d.id) FROM documents d"

static int doc_from_row(sqlite3_stmt *st, void *row) {
    store_doc_row *r = row;
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(st, 0);
    snprintf(r->sha256, sizeof r->sha256, "%s", sqlite3_column_text(st, 1));
    r->path = col_str(st, 2);
    r->title = col_str(st, 3);
    r->status = col_str(st, 4);
    r->pages = sqlite3_column_int(st, 5);
    r->bytes = sqlite3_column_int64(st, 6);
    r->added_at = sqlite3_column_int64(st, 7);
    r->updated_at = sqlite3_column_int64(st, 8);
    r->n_chunks = sqlite3_column_int(st, 9);
    r->n_images = sqlite3_column_int(st, 10);
    return r->path && r->title && r->status ? 0 : -1;
}

void store_doc_row_clear(store_doc_row *r) {
    if (!r) return;
    free(r->path); free(r->title); free(r->status);
    memset(r, 0, sizeof *r);
}

static void doc_clear(void *row) { store_doc_row_clear(row); }
static const row_type doc_type = {sizeof(store_doc_row), doc_from_row, doc_clear, "document"};

void store_docs_free(store_doc_row *rows, int32_t n) { free_rows(&doc_type, rows, n); }

int store_doc_list(store *s, store_doc_row **rows, int32_t *n) {
    STORE_ROUTE_PG(s, pg_doc_list(s, rows, n));
    if (!s || !rows || !n) return STORE_ERR_ARG;
    *rows = NULL; *n = 0;
    STORE_LOCK(s);
    sqlite3_stmt *st;
    void *arr = NULL;
    int rc = store_prepare(s, "SELECT " DOC_COLS " ORDER BY d.id", &st);
    if (!rc && !(rc = read_rows(s, st, &doc_type, "list documents", &arr, n))) *rows = arr;
    STORE_UNLOCK(s);
    return rc;
}

/* Run a document query with one text or int bind; 0 rows → NOTFOUND, >1 → AMBIGUOUS. */
static int doc_query(store *s, const char *where, const char *text, int64_t num,
                     store_doc_row *out, int *count) {
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT " DOC_COLS " WHERE %s ORDER BY d.id LIMIT 2", where);
    sqlite3_stmt *st;
    int rc = store_prepare(s, sql, &st);
    if (rc) return rc;
    if (text) sqlite3_bind_text(st, 1, text, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_int64(st, 1, num);
    *count = 0;
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        if (++*count == 1 && doc_from_row(st, out)) rc = store_set_err(s, STORE_ERR_NOMEM, "out of memory");
    }
    if (!rc && step != SQLITE_DONE) rc = store_sql_err(s, "find document");
    sqlite3_finalize(st);
    if (rc || *count > 1) store_doc_row_clear(out);
    return rc;
}

int store_doc_get_id(store *s, int64_t id, store_doc_row *out) {
    STORE_ROUTE_PG(s, pg_doc_get_id(s, id, out));
    if (!s || !out) return STORE_ERR_ARG;
    memset(out, 0, sizeof *out);
    STORE_LOCK(s);
    int cnt;
    int rc = doc_query(s, "d.id=?1", NULL, id, out, &cnt);
    if (!rc && cnt == 0) rc = store_set_err(s, STORE_ERR_NOTFOUND, "no document with id %lld", (long long)id);
    STORE_UNLOCK(s);
    return rc;
}

int store_doc_get(store *s, const char *spec, store_doc_row *out) {
    STORE_ROUTE_PG(s, pg_doc_get(s, spec, out));
    if (!s || !out) return STORE_ERR_ARG;
    memset(out, 0, sizeof *out);
    if (!spec || !*spec) return store_set_err(s, STORE_ERR_ARG, "empty document name");
    STORE_LOCK(s);
    int rc = STORE_OK, cnt = 0;
    int digits, hex;
    store_doc_spec_kind(spec, &digits, &hex);
    if (digits && (rc = doc_query(s, "d.id=?1", NULL, strtoll(spec, NULL, 10), out, &cnt))) goto out;
    if (!cnt && hex) {
        char pat[80];
        size_t i;
        for (i = 0; spec[i]; i++) pat[i] = (char)tolower((unsigned char)spec[i]);
        pat[i++] = '%'; pat[i] = 0;
        if ((rc = doc_query(s, "d.sha256 LIKE ?1", pat, 0, out, &cnt))) goto out;
        if (cnt > 1) {
            rc = store_set_err(s, STORE_ERR_AMBIGUOUS, "'%s' matches several documents; give more"
                               " of the sha256 or the id", spec);
            goto out;
        }
    }
    if (!cnt && (rc = doc_query(s, "d.path=?1", spec, 0, out, &cnt))) goto out;
    if (!cnt) {
        char abs[PATH_MAX];
        if (realpath(spec, abs) && (rc = doc_query(s, "d.path=?1", abs, 0, out, &cnt))) goto out;
    }
    if (!cnt) rc = store_set_err(s, STORE_ERR_NOTFOUND, "no document '%s' (give an id, a sha256"
                                 " prefix or a path; see `mmrag ls`)", spec);
out:
    STORE_UNLOCK(s);
    return rc;
}

/* ---- pages, chunks, images ----------------------------------------------------------- */
static int page_from_row(sqlite3_stmt *st, void *row) {
    *(store_page_row *)row = (store_page_row){sqlite3_column_int(st, 0),
                                              (float)sqlite3_column_double(st, 1),
                                              (float)sqlite3_column_double(st, 2),
                                              sqlite3_column_int(st, 3)};
    return 0;
}
static const row_type page_type = {sizeof(store_page_row), page_from_row, NULL, "page"};

int store_pages_get(store *s, int64_t doc, store_page_row **rows, int32_t *n) {
    STORE_ROUTE_PG(s, pg_pages_get(s, doc, rows, n));
    if (!s || !rows || !n) return STORE_ERR_ARG;
    *rows = NULL; *n = 0;
    STORE_LOCK(s);
    sqlite3_stmt *st;
    void *arr = NULL;
    int rc = store_prepare(s, "SELECT number, width_pt, height_pt, ocr FROM pages WHERE doc=?"
                              " ORDER BY number", &st);
    if (!rc) {
        sqlite3_bind_int64(st, 1, doc);
        if (!(rc = read_rows(s, st, &page_type, "read pages", &arr, n))) *rows = arr;
    }
    STORE_UNLOCK(s);
    return rc;
}

#define CHUNK_COLS "id, doc, page, ord, kind, x0, y0, x1, y1, image_id, text, embedding_key, section FROM chunks"

static int chunk_from_row(sqlite3_stmt *st, void *row) {
    store_chunk_row *r = row;
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(st, 0);
    r->doc = sqlite3_column_int64(st, 1);
    r->page = sqlite3_column_int(st, 2);
    r->ord = sqlite3_column_int(st, 3);
    r->kind = store_chunk_kind_parse((const char *)sqlite3_column_text(st, 4));
    r->box = col_box(st, 5);
    r->image_id = sqlite3_column_int64(st, 9);
    r->text = col_str(st, 10);
    r->embedding_key = col_str(st, 11);
    r->section = col_str(st, 12);
    return r->text && r->embedding_key && r->section ? 0 : -1;
}

void store_chunk_row_clear(store_chunk_row *r) {
    if (!r) return;
    free(r->text); free(r->embedding_key); free(r->section);
    memset(r, 0, sizeof *r);
}

static void chunk_clear(void *row) { store_chunk_row_clear(row); }
static const row_type chunk_type = {sizeof(store_chunk_row), chunk_from_row, chunk_clear, "chunk"};

void store_chunks_free(store_chunk_row *rows, int32_t n) { free_rows(&chunk_type, rows, n); }

int store_chunks_get(store *s, int64_t doc, int32_t page, store_chunk_row **rows, int32_t *n) {
    STORE_ROUTE_PG(s, pg_chunks_get(s, doc, page, rows, n));
    if (!s || !rows || !n) return STORE_ERR_ARG;
    *rows = NULL; *n = 0;
    STORE_LOCK(s);
    sqlite3_stmt *st;
    void *arr = NULL;
    int rc = store_prepare(s, "SELECT " CHUNK_COLS " WHERE doc=?1 AND (?2=0 OR page=?2)"
                              " ORDER BY ord", &st);
    if (!rc) {
        sqlite3_bind_int64(st, 1, doc);
        sqlite3_bind_int(st, 2, page);
        if (!(rc = read_rows(s, st, &chunk_type, "read chunks", &arr, n))) *rows = arr;
    }
    STORE_UNLOCK(s);
    return rc;
}

int store_chunk_get(store *s, int64_t id, store_chunk_row *out) {
    STORE_ROUTE_PG(s, pg_chunk_get(s, id, out));
    if (!s || !out) return STORE_ERR_ARG;
    return read_one(s, "SELECT " CHUNK_COLS " WHERE id=?", &chunk_type, id, out);
}

#define IMAGE_COLS "id, doc, page, idx, kind, x0, y0, x1, y1, width_px, height_px, preview," \
    " phash, caption_chunk FROM images"

static int image_from_row(sqlite3_stmt *st, void *row) {
    store_image_row *r = row;
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(st, 0);
    r->doc = sqlite3_column_int64(st, 1);
    r->page = sqlite3_column_int(st, 2);
    r->idx = sqlite3_column_int(st, 3);
    const char *k = (const char *)sqlite3_column_text(st, 4);
    r->kind = k && strcmp(k, "vector") == 0 ? STORE_IMAGE_VECTOR : STORE_IMAGE_RASTER;
    r->box = col_box(st, 5);
    r->width_px = sqlite3_column_int(st, 9);
    r->height_px = sqlite3_column_int(st, 10);
    const void *b = sqlite3_column_blob(st, 11);
    int len = sqlite3_column_bytes(st, 11);
    if (b && len > 0) {
        if (!(r->png = malloc((size_t)len))) return -1;
        memcpy(r->png, b, (size_t)len);
        r->png_len = (size_t)len;
    }
    r->phash = (uint64_t)sqlite3_column_int64(st, 12);
    r->caption_chunk = sqlite3_column_int64(st, 13);
    return 0;
}

void store_image_row_clear(store_image_row *r) {
    if (!r) return;
    free(r->png);
    memset(r, 0, sizeof *r);
}

static void image_clear(void *row) { store_image_row_clear(row); }
static const row_type image_type = {sizeof(store_image_row), image_from_row, image_clear, "image"};

void store_images_free(store_image_row *rows, int32_t n) { free_rows(&image_type, rows, n); }

int store_images_get(store *s, int64_t doc, int32_t page, store_image_row **rows, int32_t *n) {
    STORE_ROUTE_PG(s, pg_images_get(s, doc, page, rows, n));
    if (!s || !rows || !n) return STORE_ERR_ARG;
    *rows = NULL; *n = 0;
    STORE_LOCK(s);
    sqlite3_stmt *st;
    void *arr = NULL;
    int rc = store_prepare(s, "SELECT " IMAGE_COLS " WHERE doc=?1 AND (?2=0 OR page=?2)"
                              " ORDER BY idx", &st);
    if (!rc) {
        sqlite3_bind_int64(st, 1, doc);
        sqlite3_bind_int(st, 2, page);
        if (!(rc = read_rows(s, st, &image_type, "read images", &arr, n))) *rows = arr;
    }
    STORE_UNLOCK(s);
    return rc;
}

int store_image_get(store *s, int64_t id, store_image_row *out) {
    STORE_ROUTE_PG(s, pg_image_get(s, id, out));
    if (!s || !out) return STORE_ERR_ARG;
    return read_one(s, "SELECT " IMAGE_COLS " WHERE id=?", &image_type, id, out);
}

int store_counts_get(store *s, store_counts *c) {
    STORE_ROUTE_PG(s, pg_counts_get(s, c));
    if (!s || !c) return STORE_ERR_ARG;
    memset(c, 0, sizeof *c);
    STORE_LOCK(s);
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM pages),"
                              " (SELECT count(*) FROM images), (SELECT count(*) FROM chunks),"
                              " (SELECT count(*) FROM vectors)", &st);
    if (rc) goto out;
    if (sqlite3_step(st) == SQLITE_ROW) {
        c->docs = sqlite3_column_int64(st, 0);
        c->pages = sqlite3_column_int64(st, 1);
        c->images = sqlite3_column_int64(st, 2);
        c->chunks = sqlite3_column_int64(st, 3);
        c->vectors = sqlite3_column_int64(st, 4);
    } else {
        rc = store_sql_err(s, "count");
    }
    sqlite3_finalize(st);
out:
    STORE_UNLOCK(s);
    return rc;
}
