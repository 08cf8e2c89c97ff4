/* index/store_write.c — document transactions (spooled in TEMP tables, committed in one
 * write transaction), deletion, vector writes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "index/store_int.h"

static const char *const chunk_kinds[STORE_KIND_COUNT] = {
    "text", "caption", "figure", "table", "ocr", "heading"};

const char *store_chunk_kind_name(int32_t k) {
    return k >= 0 && k < STORE_KIND_COUNT ? chunk_kinds[k] : "unknown";
}
int32_t store_chunk_kind_parse(const char *name) {
    for (int32_t k = 0; name && k < STORE_KIND_COUNT; k++)
        if (strcmp(name, chunk_kinds[k]) == 0) return k;
    return -1;
}
const char *store_image_kind_name(int32_t k) {
    return k == STORE_IMAGE_VECTOR ? "vector" : "raster";
}

static int spool_prepare(store *s) {
    if (s->sp_chunk) return STORE_OK;
    int rc = store_exec(s,
        "CREATE TEMP TABLE IF NOT EXISTS sp_pages(number INTEGER PRIMARY KEY, width_pt REAL,"
        " height_pt REAL, ocr INTEGER);"
        "CREATE TEMP TABLE IF NOT EXISTS sp_images(idx INTEGER PRIMARY KEY, page INTEGER,"
        " kind TEXT, x0 REAL, y0 REAL, x1 REAL, y1 REAL, width_px INTEGER, height_px INTEGER,"
        " preview BLOB, phash INTEGER, caption_ord INTEGER);"
        "CREATE TEMP TABLE IF NOT EXISTS sp_chunks(ord INTEGER PRIMARY KEY, page INTEGER,"
        " kind TEXT, x0 REAL, y0 REAL, x1 REAL, y1 REAL, image_idx INTEGER, text TEXT, lines BLOB,"
        " section TEXT);",
        "create spool");
    if (rc) return rc;
    if ((rc = store_prepare(s, "INSERT INTO temp.sp_pages VALUES(?,?,?,?)", &s->sp_page)) ||
        (rc = store_prepare(s, "INSERT INTO temp.sp_images VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
                            &s->sp_image)) ||
        (rc = store_prepare(s, "INSERT INTO temp.sp_chunks VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                            &s->sp_chunk)))
        return rc;
    return STORE_OK;
}

static void spool_clear(store *s) {
    sqlite3_exec(s->db, "DELETE FROM temp.sp_pages; DELETE FROM temp.sp_images;"
                        " DELETE FROM temp.sp_chunks;", NULL, NULL, NULL);
    store_doc_meta_drop(s);
}

/* id of the document with this sha256, or 0. */
static int64_t find_sha(store *s, const char *sha, int *rc) {
    sqlite3_stmt *st;
    int64_t id = 0;
    if ((*rc = store_prepare(s, "SELECT id FROM documents WHERE sha256=?", &st))) return 0;
    sqlite3_bind_text(st, 1, sha, -1, SQLITE_STATIC);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) id = sqlite3_column_int64(st, 0);
    else if (step != SQLITE_DONE) *rc = store_sql_err(s, "look up sha256");
    sqlite3_finalize(st);
    return id;
}

int store_doc_begin(store *s, const store_doc_meta *m, int64_t *existing_id) {
    STORE_ROUTE_PG(s, pg_doc_begin(s, m, existing_id));
    if (!s) return STORE_ERR_ARG;
    STORE_LOCK(s);
    int rc = store_doc_begin_check(s, m, existing_id);
    if (rc) goto out;
    int64_t id = find_sha(s, m->sha256, &rc);
    if (rc) goto out;
    if (id) {
        if (existing_id) *existing_id = id;
        rc = STORE_EXISTS;
        goto out;
    }
    if ((rc = spool_prepare(s))) goto out;
    spool_clear(s);
    if ((rc = store_doc_meta_keep(s, m))) spool_clear(s);
out:
    STORE_UNLOCK(s);
    return rc;
}

/* Step a spool insert; a failure aborts the whole document. */
static int spool_step(store *s, sqlite3_stmt *st, const char *what) {
    int step = sqlite3_step(st);
    int rc = STORE_OK;
    if (step != SQLITE_DONE) {
        rc = store_sql_err(s, what);
        if ((sqlite3_extended_errcode(s->db) & 0xff) == SQLITE_CONSTRAINT)
            rc = store_set_err(s, STORE_ERR_ARG, "%s: duplicate number in this document", what);
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc) spool_clear(s);
    return rc;
}

static void bind_box(sqlite3_stmt *st, int col, store_box b) {
    sqlite3_bind_double(st, col, b.x0);
    sqlite3_bind_double(st, col + 1, b.y0);
    sqlite3_bind_double(st, col + 2, b.x1);
    sqlite3_bind_double(st, col + 3, b.y1);
}

#define NEED_OPEN(s)                                                                 \
    do {                                                                             \
        if (!(s)->doc_open) {                                                        \
            rc = store_set_err(s, STORE_ERR_STATE, "no document open on this handle"); \
            goto out;                                                                \
        }                                                                            \
    } while (0)

int store_page_add(store *s, const store_page *p) {
    STORE_ROUTE_PG(s, pg_page_add(s, p));
    if (!s || !p) return STORE_ERR_ARG;
    STORE_LOCK(s);
    int rc = STORE_OK;
    NEED_OPEN(s);
    sqlite3_stmt *st = s->sp_page;
    sqlite3_bind_int(st, 1, p->number);
    sqlite3_bind_double(st, 2, p->width_pt);
    sqlite3_bind_double(st, 3, p->height_pt);
    sqlite3_bind_int(st, 4, p->ocr);
    rc = spool_step(s, st, "add page");
out:
    STORE_UNLOCK(s);
    return rc;
}

int store_image_add(store *s, const store_image *im) {
    STORE_ROUTE_PG(s, pg_image_add(s, im));
    if (!s || !im) return STORE_ERR_ARG;
    STORE_LOCK(s);
    int rc = STORE_OK;
    NEED_OPEN(s);
    sqlite3_stmt *st = s->sp_image;
    sqlite3_bind_int(st, 1, im->idx);
    sqlite3_bind_int(st, 2, im->page);
    sqlite3_bind_text(st, 3, store_image_kind_name(im->kind), -1, SQLITE_STATIC);
    bind_box(st, 4, im->box);
    sqlite3_bind_int(st, 8, im->width_px);
    sqlite3_bind_int(st, 9, im->height_px);
    if (im->png && im->png_len) sqlite3_bind_blob64(st, 10, im->png, im->png_len, SQLITE_STATIC);
    else sqlite3_bind_null(st, 10);
    sqlite3_bind_int64(st, 11, (sqlite3_int64)im->phash);
    sqlite3_bind_int(st, 12, im->caption_ord);
    rc = spool_step(s, st, "add image");
out:
    STORE_UNLOCK(s);
    return rc;
}

/* Bind the chunk's lines as their blob (NULL when it has none). */
static int bind_lines(store *s, sqlite3_stmt *st, int col, const store_chunk *c) {
    int brc;
    if (!c->n_lines) {
        brc = sqlite3_bind_null(st, col);
    } else {
        uint8_t *blob = store_lines_encode(c->lines, c->n_lines);
        if (!blob) return store_set_err(s, STORE_ERR_NOMEM, "out of memory");
        /* SQLite frees the blob, also when binding fails */
        brc = sqlite3_bind_blob64(st, col, blob, (sqlite3_uint64)c->n_lines * STORE_LINE_BYTES, free);
    }
    return brc == SQLITE_OK ? STORE_OK : store_sql_err(s, "bind lines");
}

/* STORE_OK, or STORE_ERR_ARG + message for a chunk the spool must not take. */
static int check_chunk(store *s, const store_chunk *c) {
    if (c->kind < 0 || c->kind >= STORE_KIND_COUNT)
        return store_set_err(s, STORE_ERR_ARG, "bad chunk kind %d", c->kind);
    if (c->n_lines < 0 || (c->n_lines && !c->lines) ||
        !store_lines_valid(c->lines, c->n_lines, c->text ? strlen(c->text) : 0))
        return store_set_err(s, STORE_ERR_ARG, "chunk %d: bad lines (each must lie inside its text,"
                             " in order, with a finite box)", c->ord);
    return STORE_OK;
}

int store_chunk_add(store *s, const store_chunk *c) {
    STORE_ROUTE_PG(s, pg_chunk_add(s, c));
    if (!s || !c) return STORE_ERR_ARG;
    STORE_LOCK(s);
    int rc = STORE_OK;
    NEED_OPEN(s);
    if ((rc = check_chunk(s, c))) goto out;
    sqlite3_stmt *st = s->sp_chunk;
    sqlite3_bind_int(st, 1, c->ord);
    sqlite3_bind_int(st, 2, c->page);
    sqlite3_bind_text(st, 3, chunk_kinds[c->kind], -1, SQLITE_STATIC);
    bind_box(st, 4, c->box);
    if (c->image_idx >= 0) sqlite3_bind_int(st, 8, c->image_idx);
    else sqlite3_bind_null(st, 8);
    sqlite3_bind_text(st, 9, c->text ? c->text : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 11, c->section ? c->section : "", -1, SQLITE_STATIC);
    if ((rc = bind_lines(s, st, 10, c))) {
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        goto out;
    }
    rc = spool_step(s, st, "add chunk");
out:
    STORE_UNLOCK(s);
    return rc;
}

void store_doc_abort(store *s) {
    if (!s) return;
    if (s->pg) { pg_doc_abort(s); return; }
    STORE_LOCK(s);
    if (s->doc_open) spool_clear(s);
    STORE_UNLOCK(s);
}

/* Run a statement bound with ?1 = doc id. */
static int exec_doc(store *s, const char *sql, int64_t doc, const char *what) {
    sqlite3_stmt *st;
    int rc = store_prepare(s, sql, &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, doc);
    if (sqlite3_step(st) != SQLITE_DONE) rc = store_sql_err(s, what);
    sqlite3_finalize(st);
    return rc;
}

/* Inside the write transaction: move the spool into the main tables. */
static int commit_locked(store *s, int64_t *doc_id, int64_t *replaced_id) {
    int rc;
    int64_t id = find_sha(s, s->doc_sha, &rc);
    if (rc) return rc;
    if (id) { *doc_id = id; return STORE_EXISTS; }
    sqlite3_stmt *st;
    if (s->doc_path[0]) {   /* a changed file at an indexed path replaces its old document */
        if ((rc = store_prepare(s, "SELECT id FROM documents WHERE path=?", &st))) return rc;
        sqlite3_bind_text(st, 1, s->doc_path, -1, SQLITE_STATIC);
        int step;
        while ((step = sqlite3_step(st)) == SQLITE_ROW) {
            if (!*replaced_id) *replaced_id = sqlite3_column_int64(st, 0);
        }
        if (step != SQLITE_DONE) rc = store_sql_err(s, "look up path");
        sqlite3_finalize(st);
        if (rc) return rc;
        if (*replaced_id && (rc = exec_doc(s, "DELETE FROM documents WHERE path=(SELECT path FROM"
                                              " documents WHERE id=?1)", *replaced_id, "replace old document")))
            return rc;
    }
    if ((rc = store_prepare(s, "INSERT INTO documents(sha256, path, title, pages, bytes, status,"
                               " added_at, updated_at) VALUES(?,?,?,?,?,'ready',?,?)", &st)))
        return rc;
    int64_t now = (int64_t)time(NULL);
    sqlite3_bind_text(st, 1, s->doc_sha, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, s->doc_path, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, s->doc_title, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 4, s->doc_pages);
    sqlite3_bind_int64(st, 5, s->doc_bytes);
    sqlite3_bind_int64(st, 6, now);
    sqlite3_bind_int64(st, 7, now);
    if (sqlite3_step(st) != SQLITE_DONE) rc = store_sql_err(s, "insert document");
    sqlite3_finalize(st);
    if (rc) return rc;
    id = sqlite3_last_insert_rowid(s->db);
    if ((rc = exec_doc(s, "INSERT INTO pages SELECT ?1, number, width_pt, height_pt, ocr"
                          " FROM temp.sp_pages", id, "insert pages")) ||
        (rc = exec_doc(s, "INSERT INTO images(doc, page, idx, kind, x0, y0, x1, y1, width_px,"
                          " height_px, preview, phash) SELECT ?1, page, idx, kind, x0, y0, x1, y1,"
                          " width_px, height_px, preview, phash FROM temp.sp_images ORDER BY idx",
                       id, "insert images")) ||
        (rc = exec_doc(s, "INSERT INTO chunks(doc, page, ord, kind, x0, y0, x1, y1, image_id, text,"
                          " lines, section) SELECT ?1, c.page, c.ord, c.kind, c.x0, c.y0, c.x1,"
                          " c.y1, i.id, c.text, c.lines, c.section"
                          " FROM temp.sp_chunks c LEFT JOIN images i ON i.doc=?1 AND i.idx=c.image_idx"
                          " ORDER BY c.ord", id, "insert chunks")) ||
        (rc = exec_doc(s, "UPDATE chunks SET embedding_key = doc || '_' || id || '_' ||"
                          " coalesce(image_id, 'none') WHERE doc=?1", id, "set embedding keys")) ||
        (rc = exec_doc(s, "UPDATE images SET caption_chunk = (SELECT c.id FROM temp.sp_images p"
                          " JOIN chunks c ON c.doc=?1 AND c.ord=p.caption_ord WHERE p.idx=images.idx)"
                          " WHERE doc=?1", id, "link captions")) ||
        (rc = store_bump_generation(s)))
        return rc;
    *doc_id = id;
    return STORE_OK;
}

int store_doc_commit(store *s, int64_t *doc_id, int64_t *replaced_id) {
    STORE_ROUTE_PG(s, pg_doc_commit(s, doc_id, replaced_id));
    if (!s) return STORE_ERR_ARG;
    STORE_LOCK(s);
    int64_t id = 0, old = 0;
    int rc = STORE_OK;
    NEED_OPEN(s);
    if ((rc = store_tx_begin(s))) goto done;
    rc = commit_locked(s, &id, &old);
    if (rc == STORE_OK) rc = store_tx_commit(s);
    else store_tx_rollback(s);
    if (rc != STORE_OK && rc != STORE_EXISTS) id = old = 0;
    if (rc == STORE_EXISTS) old = 0;
done:
    spool_clear(s);
out:
    if (doc_id) *doc_id = id;
    if (replaced_id) *replaced_id = old;
    STORE_UNLOCK(s);
    return rc;
}

int store_doc_delete(store *s, int64_t id) {
    STORE_ROUTE_PG(s, pg_doc_delete(s, id));
    if (!s) return STORE_ERR_ARG;
    STORE_LOCK(s);
    int rc = store_tx_begin(s);
    if (rc) goto out;
    if ((rc = exec_doc(s, "DELETE FROM documents WHERE id=?1", id, "delete document"))) goto fail;
    if (sqlite3_changes(s->db) == 0) {
        rc = store_set_err(s, STORE_ERR_NOTFOUND, "no document with id %lld", (long long)id);
        goto fail;
    }
    if ((rc = store_bump_generation(s))) goto fail;
    rc = store_tx_commit(s);
    goto out;
fail:
    store_tx_rollback(s);
out:
    STORE_UNLOCK(s);
    return rc;
}

int store_vectors_put(store *s, const char *space, const char *model, int32_t dim,
                      const store_vec *vecs, int32_t n, int32_t *written) {
    STORE_ROUTE_PG(s, pg_vectors_put(s, space, model, dim, vecs, n, written));
    if (!s) return STORE_ERR_ARG;
    STORE_LOCK(s);
    int32_t w = 0;
    sqlite3_stmt *st[2] = {NULL, NULL};
    int rc = store_check_space(s, space, model);
    if (rc) goto out;
    if (dim <= 0 || dim > 65536 || n < 0 || (n && !vecs)) {
        rc = store_set_err(s, STORE_ERR_ARG, "bad vector batch (dim %d, n %d)", dim, n);
        goto out;
    }
    for (int32_t i = 0; i < n; i++)
        if (!store_owner_name(vecs[i].owner_kind) || !vecs[i].v) {
            rc = store_set_err(s, STORE_ERR_ARG, "vector %d: bad owner kind or NULL data", i);
            goto out;
        }
    if (n == 0) goto out;
    static const char *const sql[2] = {
        "INSERT OR REPLACE INTO vectors SELECT 'chunk', id, ?2, ?3, doc, ?4, ?5 FROM chunks WHERE id=?1",
        "INSERT OR REPLACE INTO vectors SELECT 'image', id, ?2, ?3, doc, ?4, ?5 FROM images WHERE id=?1"};
    if ((rc = store_prepare(s, sql[0], &st[0])) || (rc = store_prepare(s, sql[1], &st[1]))) goto out;
    if ((rc = store_tx_begin(s))) goto out;
    for (int32_t i = 0; i < n; i++) {
        sqlite3_stmt *q = st[vecs[i].owner_kind];
        sqlite3_bind_int64(q, 1, vecs[i].owner_id);
        sqlite3_bind_text(q, 2, space, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 3, model, -1, SQLITE_STATIC);
        sqlite3_bind_int(q, 4, dim);
        sqlite3_bind_blob(q, 5, vecs[i].v, dim * (int)sizeof(float), SQLITE_STATIC);
        if ((rc = store_step_batch_row(s, q, "write vector", &w))) goto out;
    }
    if (w && (rc = store_bump_generation(s))) { store_tx_rollback(s); w = 0; goto out; }
    rc = store_tx_commit(s);
    if (rc) w = 0;
out:
    sqlite3_finalize(st[0]);
    sqlite3_finalize(st[1]);
    if (written) *written = w;
    STORE_UNLOCK(s);
    return rc;
}

int store_vectors_drop(store *s, const char *space, const char *model, int64_t *deleted) {
    STORE_ROUTE_PG(s, pg_vectors_drop(s, space, model, deleted));
    if (!s) return STORE_ERR_ARG;
    if (deleted) *deleted = 0;
    STORE_LOCK(s);
    sqlite3_stmt *st = NULL;
    int rc = store_check_space(s, space, model);
    if (rc || (rc = store_prepare(s, "DELETE FROM vectors WHERE space=?1 AND model=?2", &st)) ||
        (rc = store_tx_begin(s)))
        goto out;
    sqlite3_bind_text(st, 1, space, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, model, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE) rc = store_sql_err(s, "delete vectors");
    int64_t n = sqlite3_changes(s->db);
    if (!rc && n && (rc = store_bump_generation(s))) n = 0;
    if (rc) { store_tx_rollback(s); goto out; }
    if ((rc = store_tx_commit(s))) goto out;
    if (deleted) *deleted = n;
out:
    sqlite3_finalize(st);
    STORE_UNLOCK(s);
    return rc;
}
