/* index/store_pg_write.c — the shared store's writers: document transactions spooled in
 * TEMP tables (store_pg.c, design note 2), deletes, vectors and sentence vectors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "index/store_pg_int.h"

char *pg_vec_text(const float *v, int32_t dim) {
    char *t = malloc((size_t)dim * 16 + 3);
    if (!t) return NULL;
    size_t at = 0;
    t[at++] = '[';
    for (int32_t i = 0; i < dim; i++)
        at += (size_t)sprintf(t + at, i ? ",%.9g" : "%.9g", (double)v[i]);
    t[at++] = ']';
    t[at] = 0;
    return t;
}

static uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Hyperplane b has entries +-1 from the bits of splitmix64 words (seeded by b and the
 * word's index): cheap to regenerate, identical everywhere, no table to ship. */
void pg_lsh_code(const float *v, int32_t dim, char out[PG_LSH_BITS + 1]) {
    for (int b = 0; b < PG_LSH_BITS; b++) {
        double dot = 0;
        for (int32_t i0 = 0; i0 < dim; i0 += 64) {
            uint64_t w = splitmix64(((uint64_t)b << 32) ^ (uint64_t)(i0 / 64));
            for (int32_t i = i0; i < dim && i < i0 + 64; i++, w >>= 1)
                dot += (w & 1) ? v[i] : -v[i];
        }
        out[b] = dot > 0 ? '1' : '0';
    }
    out[PG_LSH_BITS] = 0;
}

static int spool_prepare(store *s) {
    return pg_exec(s,
        "CREATE TEMP TABLE IF NOT EXISTS sp_pages(number int PRIMARY KEY, width_pt real,"
        " height_pt real, ocr int);"
        "CREATE TEMP TABLE IF NOT EXISTS sp_images(idx int PRIMARY KEY, page int, kind text,"
        " x0 real, y0 real, x1 real, y1 real, width_px int, height_px int, preview bytea,"
        " phash bigint, caption_ord int);"
        "CREATE TEMP TABLE IF NOT EXISTS sp_chunks(ord int PRIMARY KEY, page int, kind text,"
        " x0 real, y0 real, x1 real, y1 real, image_idx int, text text, lines bytea, section text);"
        "TRUNCATE pg_temp.sp_pages, pg_temp.sp_images, pg_temp.sp_chunks", NULL, "create spool");
}

static void spool_clear(store *s) {
    if (s->pg && PQstatus(s->pg) == CONNECTION_OK)
        PQclear(PQexec(s->pg, "TRUNCATE pg_temp.sp_pages, pg_temp.sp_images, pg_temp.sp_chunks"));
    store_doc_meta_drop(s);
}

/* id of the document with this sha256, or 0. */
static int64_t find_sha(store *s, const char *sha, int *rc) {
    pg_args a = {0};
    pga_text(&a, sha);
    PGresult *r = pg_run(s, "SELECT id FROM documents WHERE sha256=$1", &a, "look up sha256", rc);
    int64_t id = r && PQntuples(r) ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
    PQclear(r);
    return id;
}

int pg_doc_begin(store *s, const store_doc_meta *m, int64_t *existing_id) {
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
    if ((rc = store_doc_meta_keep(s, m))) spool_clear(s);
out:
    STORE_UNLOCK(s);
    return rc;
}

/* Insert one spooled row; a failure aborts the whole document. */
static int spool_row(store *s, const char *sql, const pg_args *a, const char *what) {
    if (!s->doc_open) return store_set_err(s, STORE_ERR_STATE, "no document open on this handle");
    int rc;
    PGresult *r = pg_run(s, sql, a, what, &rc);
    PQclear(r);
    if (rc == STORE_ERR_ARG && strstr(s->err, "duplicate key"))
        rc = store_set_err(s, STORE_ERR_ARG, "%s: duplicate number in this document", what);
    if (rc) spool_clear(s);
    return rc;
}

static void args_box(pg_args *a, store_box b) {
    pga_real(a, b.x0); pga_real(a, b.y0); pga_real(a, b.x1); pga_real(a, b.y1);
}

int pg_page_add(store *s, const store_page *p) {
    if (!p) return STORE_ERR_ARG;
    STORE_LOCK(s);
    pg_args a = {0};
    pga_int(&a, p->number);
    pga_real(&a, p->width_pt);
    pga_real(&a, p->height_pt);
    pga_int(&a, p->ocr);
    int rc = spool_row(s, "INSERT INTO pg_temp.sp_pages VALUES($1,$2,$3,$4)", &a, "add page");
    STORE_UNLOCK(s);
    return rc;
}

int pg_image_add(store *s, const store_image *im) {
    if (!im) return STORE_ERR_ARG;
    STORE_LOCK(s);
    pg_args a = {0};
    pga_int(&a, im->idx);
    pga_int(&a, im->page);
    pga_text(&a, store_image_kind_name(im->kind));
    args_box(&a, im->box);
    pga_int(&a, im->width_px);
    pga_int(&a, im->height_px);
    if (im->png && im->png_len) pga_bin(&a, im->png, im->png_len);
    else pga_text(&a, NULL);
    pga_int(&a, (int64_t)im->phash);
    pga_int(&a, im->caption_ord);
    int rc = spool_row(s, "INSERT INTO pg_temp.sp_images VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,"
                          "$11,$12)", &a, "add image");
    STORE_UNLOCK(s);
    return rc;
}

int pg_chunk_add(store *s, const store_chunk *c) {
    if (!c) return STORE_ERR_ARG;
    STORE_LOCK(s);
    int rc = STORE_OK;
    uint8_t *blob = NULL;
    if (!s->doc_open) { rc = store_set_err(s, STORE_ERR_STATE, "no document open on this handle"); goto out; }
    if (c->kind < 0 || c->kind >= STORE_KIND_COUNT) {
        rc = store_set_err(s, STORE_ERR_ARG, "bad chunk kind %d", c->kind);
        goto out;
    }
    if (c->n_lines < 0 || (c->n_lines && !c->lines) ||
        !store_lines_valid(c->lines, c->n_lines, c->text ? strlen(c->text) : 0)) {
        rc = store_set_err(s, STORE_ERR_ARG, "chunk %d: bad lines (each must lie inside its text,"
                           " in order, with a finite box)", c->ord);
        goto out;
    }
    if (c->n_lines && !(blob = store_lines_encode(c->lines, c->n_lines))) {
        rc = store_set_err(s, STORE_ERR_NOMEM, "out of memory");
        goto out;
    }
    pg_args a = {0};
    pga_int(&a, c->ord);
    pga_int(&a, c->page);
    pga_text(&a, store_chunk_kind_name(c->kind));
    args_box(&a, c->box);
    if (c->image_idx >= 0) pga_int(&a, c->image_idx);
    else pga_text(&a, NULL);
    pga_text(&a, c->text ? c->text : "");
    if (blob) pga_bin(&a, blob, (size_t)c->n_lines * STORE_LINE_BYTES);
    else pga_text(&a, NULL);
    pga_text(&a, c->section ? c->section : "");
    rc = spool_row(s, "INSERT INTO pg_temp.sp_chunks VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)",
                   &a, "add chunk");
out:
    free(blob);
    STORE_UNLOCK(s);
    return rc;
}

void pg_doc_abort(store *s) {
    STORE_LOCK(s);
    if (s->doc_open) spool_clear(s);
    STORE_UNLOCK(s);
}

static int exec_doc(store *s, const char *sql, int64_t doc, const char *what) {
    pg_args a = {0};
    pga_int(&a, doc);
    return pg_exec(s, sql, &a, what);
}

/* Inside the transaction: the commit lock first (store_pg.c, design note 2), then the
 * spool into the main tables. */
static int commit_locked(store *s, int64_t *doc_id, int64_t *replaced_id) {
    int rc;
    if ((rc = pg_bump_generation(s))) return rc;
    int64_t id = find_sha(s, s->doc_sha, &rc);
    if (rc) return rc;
    if (id) { *doc_id = id; return STORE_EXISTS; }
    pg_args a = {0};
    PGresult *r;
    if (s->doc_path[0]) {   /* a changed file at an indexed path replaces its old document */
        pga_text(&a, s->doc_path);
        if (!(r = pg_run(s, "DELETE FROM documents WHERE path=$1 RETURNING id", &a,
                         "replace old document", &rc)))
            return rc;
        if (PQntuples(r)) *replaced_id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        PQclear(r);
    }
    int64_t now = (int64_t)time(NULL);
    a.n = 0;
    pga_text(&a, s->doc_sha);
    pga_text(&a, s->doc_path);
    pga_text(&a, s->doc_title);
    pga_int(&a, s->doc_pages);
    pga_int(&a, s->doc_bytes);
    pga_int(&a, now);
    if (!(r = pg_run(s, "INSERT INTO documents(sha256, path, title, pages, bytes, status, added_at,"
                        " updated_at) VALUES($1,$2,$3,$4,$5,'ready',$6,$6) RETURNING id", &a,
                     "insert document", &rc)))
        return rc;
    id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    if ((rc = exec_doc(s, "INSERT INTO pages SELECT $1, number, width_pt, height_pt, ocr"
                          " FROM pg_temp.sp_pages", id, "insert pages")) ||
        (rc = exec_doc(s, "INSERT INTO images(doc, page, idx, kind, x0, y0, x1, y1, width_px,"
                          " height_px, preview, phash) SELECT $1, page, idx, kind, x0, y0, x1, y1,"
                          " width_px, height_px, preview, phash FROM pg_temp.sp_images ORDER BY idx",
                       id, "insert images")) ||
        (rc = exec_doc(s, "INSERT INTO chunks(doc, page, ord, kind, x0, y0, x1, y1, image_id, text,"
                          " lines, section) SELECT $1, c.page, c.ord, c.kind, c.x0, c.y0, c.x1,"
                          " c.y1, i.id, c.text, c.lines, c.section FROM pg_temp.sp_chunks c"
                          " LEFT JOIN images i ON i.doc=$1 AND i.idx=c.image_idx ORDER BY c.ord",
                       id, "insert chunks")) ||
        (rc = exec_doc(s, "UPDATE chunks SET embedding_key = doc || '_' || id || '_' ||"
                          " coalesce(image_id::text, 'none') WHERE doc=$1", id, "set embedding keys")) ||
        (rc = exec_doc(s, "UPDATE images SET caption_chunk = (SELECT c.id FROM pg_temp.sp_images p"
                          " JOIN chunks c ON c.doc=$1 AND c.ord=p.caption_ord WHERE p.idx=images.idx)"
                          " WHERE doc=$1", id, "link captions")) ||
        (rc = exec_doc(s, "INSERT INTO fts_stats SELECT $1, count(*), coalesce(sum(length(tsv)), 0)"
                          " FROM chunks WHERE doc=$1", id, "keyword statistics")))
        return rc;
    *doc_id = id;
    return STORE_OK;
}

int pg_doc_commit(store *s, int64_t *doc_id, int64_t *replaced_id) {
    STORE_LOCK(s);
    int64_t id = 0, old = 0;
    int rc = STORE_OK;
    if (!s->doc_open) { rc = store_set_err(s, STORE_ERR_STATE, "no document open on this handle"); goto out; }
    if ((rc = pg_tx_begin(s))) goto done;
    rc = commit_locked(s, &id, &old);
    if (rc == STORE_OK) {
        rc = pg_tx_commit(s);
    } else {
        pg_tx_rollback(s);
        if (rc == STORE_ERR_ARG && strstr(s->err, "documents_sha256_key")) {
            /* another writer committed the same file between our check and insert */
            int rc2;
            id = find_sha(s, s->doc_sha, &rc2);
            if (id) rc = STORE_EXISTS;
        }
    }
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

int pg_doc_delete(store *s, int64_t id) {
    STORE_LOCK(s);
    int rc = pg_tx_begin(s);
    if (rc) goto out;
    if ((rc = pg_bump_generation(s))) goto fail;
    pg_args a = {0};
    pga_int(&a, id);
    /* its kept PDF goes too, unless a job is about to ingest the same file again */
    PGresult *r = pg_run(s, "WITH d AS (DELETE FROM documents WHERE id=$1 RETURNING sha256),"
                            " f AS (DELETE FROM files WHERE sha256 IN (SELECT sha256 FROM d)"
                            " AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.sha256 = files.sha256"
                            " AND j.state IN ('queued','running'))) SELECT count(*) FROM d",
                         &a, "delete document", &rc);
    if (!r) goto fail;
    int gone = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    if (!gone) {
        rc = store_set_err(s, STORE_ERR_NOTFOUND, "no document with id %lld", (long long)id);
        goto fail;
    }
    rc = pg_tx_commit(s);
    goto out;
fail:
    pg_tx_rollback(s);
out:
    STORE_UNLOCK(s);
    return rc;
}

/* FNV-1a of the text, for index names. */
static uint32_t fnv(const char *t) {
    uint32_t h = 2166136261u;
    for (; *t; t++) h = (h ^ (uint8_t)*t) * 16777619u;
    return h;
}

/* The HNSW index of (space, model, dim) (store_pg.c, design note 3). */
static int ensure_vec_index(store *s, const char *space, const char *model, int32_t dim) {
    char key[160];
    snprintf(key, sizeof key, "%s|%d|%s", space, dim, model);
    if (!strcmp(key, s->pg_vec_index)) return STORE_OK;
    char *lit = PQescapeLiteral(s->pg, model, strlen(model));
    if (!lit) return store_set_err(s, STORE_ERR_NOMEM, "out of memory");
    char sql[512];
    snprintf(sql, sizeof sql, "CREATE INDEX IF NOT EXISTS vectors_hnsw_%s_%d_%08x ON vectors USING"
             " hnsw ((v::vector(%d)) vector_cosine_ops) WHERE space = '%s' AND model = %s",
             space, dim, fnv(model), dim, space, lit);
    char lsh[512] = "";
    if (!strcmp(space, "image"))
        snprintf(lsh, sizeof lsh, "CREATE INDEX IF NOT EXISTS vectors_lsh_%s_%d_%08x ON vectors"
                 " USING hnsw ((lsh::bit(%d)) bit_hamming_ops) WHERE space = '%s' AND model = %s",
                 space, dim, fnv(model), PG_LSH_BITS, space, lit);
    PQfreemem(lit);
    int rc = pg_tx_begin(s);
    if (!rc) rc = pg_exec(s, "SELECT pg_advisory_xact_lock(hashtext('mmrag-vector-index'))", NULL,
                          "lock vector index");
    if (!rc) rc = pg_exec(s, sql, NULL, "create vector index");
    if (!rc && *lsh) rc = pg_exec(s, lsh, NULL, "create LSH index");
    if (!rc) rc = pg_tx_commit(s);
    else pg_tx_rollback(s);
    if (!rc) snprintf(s->pg_vec_index, sizeof s->pg_vec_index, "%s", key);
    return rc;
}

/* One batch as a statement over unnest()ed arrays: ids, vector texts or LSH codes. */
enum { ARR_IDS, ARR_VECS, ARR_LSH };
static char *array_text(const store_vec *vecs, int32_t n, int32_t kind, int32_t dim, int what) {
    size_t cap = 16, at = 0;
    for (int32_t i = 0; i < n; i++)
        cap += what == ARR_IDS ? 24 : what == ARR_LSH ? PG_LSH_BITS + 4 : (size_t)dim * 16 + 8;
    char *t = malloc(cap);
    if (!t) return NULL;
    t[at++] = '{';
    int first = 1;
    for (int32_t i = 0; i < n; i++) {
        if (vecs[i].owner_kind != kind) continue;
        if (!first) t[at++] = ',';
        first = 0;
        if (what == ARR_IDS) { at += (size_t)sprintf(t + at, "%lld", (long long)vecs[i].owner_id); continue; }
        if (what == ARR_LSH) {
            pg_lsh_code(vecs[i].v, dim, t + at);
            at += PG_LSH_BITS;
            continue;
        }
        char *v = pg_vec_text(vecs[i].v, dim);
        if (!v) { free(t); return NULL; }
        at += (size_t)sprintf(t + at, "\"%s\"", v);
        free(v);
    }
    t[at++] = '}';
    t[at] = 0;
    return t;
}

static int put_kind(store *s, const char *space, const char *model, int32_t dim,
                    const store_vec *vecs, int32_t n, int32_t kind, int32_t *w) {
    int image = !strcmp(space, "image");
    char *ids = array_text(vecs, n, kind, dim, ARR_IDS), *vs = array_text(vecs, n, kind, dim, ARR_VECS);
    char *codes = image ? array_text(vecs, n, kind, dim, ARR_LSH) : NULL;
    int rc = STORE_OK;
    if (!ids || !vs || (image && !codes)) { rc = store_set_err(s, STORE_ERR_NOMEM, "out of memory"); goto out; }
    if (!strcmp(ids, "{}")) goto out;
    char sql[640];
    snprintf(sql, sizeof sql, "INSERT INTO vectors SELECT '%s', o.id, $3, $4, o.doc, $5, x.v::vector,"
             " x.l::bit varying FROM unnest($1::bigint[], $2::text[], $6::text[]) AS x(id, v, l)"
             " JOIN %s o ON o.id = x.id ON CONFLICT(owner_kind, owner_id, space, model) DO UPDATE"
             " SET v = excluded.v, dim = excluded.dim, lsh = excluded.lsh", store_owner_name(kind),
             kind == STORE_OWNER_IMAGE ? "images" : "chunks");
    pg_args a = {0};
    pga_text(&a, ids);
    pga_text(&a, vs);
    pga_text(&a, space);
    pga_text(&a, model);
    pga_int(&a, dim);
    pga_text(&a, codes);   /* NULL: no codes (unnest pads with NULL) */
    PGresult *r = pg_run(s, sql, &a, "write vectors", &rc);
    if (r) *w += atoi(PQcmdTuples(r));
    PQclear(r);
out:
    free(ids);
    free(vs);
    free(codes);
    return rc;
}

int pg_vectors_put(store *s, const char *space, const char *model, int32_t dim,
                   const store_vec *vecs, int32_t n, int32_t *written) {
    STORE_LOCK(s);
    int32_t w = 0;
    int rc = store_check_space(s, space, model);
    if (rc) goto out;
    if (dim <= 0 || dim > 16000 || n < 0 || (n && !vecs)) {
        rc = store_set_err(s, STORE_ERR_ARG, "bad vector batch (dim %d, n %d)", dim, n);
        goto out;
    }
    for (int32_t i = 0; i < n; i++)
        if (!store_owner_name(vecs[i].owner_kind) || !vecs[i].v) {
            rc = store_set_err(s, STORE_ERR_ARG, "vector %d: bad owner kind or NULL data", i);
            goto out;
        }
    if (n == 0) goto out;
    if ((rc = ensure_vec_index(s, space, model, dim)) || (rc = pg_tx_begin(s))) goto out;
    if ((rc = pg_bump_generation(s)) ||
        (rc = put_kind(s, space, model, dim, vecs, n, STORE_OWNER_CHUNK, &w)) ||
        (rc = put_kind(s, space, model, dim, vecs, n, STORE_OWNER_IMAGE, &w))) {
        pg_tx_rollback(s);
        w = 0;
        goto out;
    }
    if ((rc = pg_tx_commit(s))) w = 0;
out:
    if (written) *written = w;
    STORE_UNLOCK(s);
    return rc;
}

/* The emptied partial HNSW/LSH indexes of (space, model) stay: they cost nothing, and a
 * DROP INDEX would wait for every reader of the table. */
int pg_vectors_drop(store *s, const char *space, const char *model, int64_t *deleted) {
    if (deleted) *deleted = 0;
    STORE_LOCK(s);
    int rc = store_check_space(s, space, model);
    if (!rc && !(rc = pg_tx_begin(s))) {
        pg_args a = {0};
        pga_text(&a, space);
        pga_text(&a, model);
        PGresult *r = pg_run(s, "WITH d AS (DELETE FROM vectors WHERE space=$1 AND model=$2 RETURNING 1)"
                                " SELECT count(*) FROM d", &a, "delete vectors", &rc);
        int64_t n = r && PQntuples(r) ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
        PQclear(r);
        if (!rc && n) rc = pg_bump_generation(s);
        if (!rc) rc = pg_tx_commit(s);
        else pg_tx_rollback(s);
        if (!rc && deleted) *deleted = n;
    }
    STORE_UNLOCK(s);
    return rc;
}

int pg_sentvecs_put(store *s, const char *model, int32_t dim, const store_sentvec *rows,
                    int32_t n, int32_t *written) {
    if (written) *written = 0;
    STORE_LOCK(s);
    int32_t w = 0;
    int rc = store_sentvecs_check(s, model, dim, rows, n);
    if (rc) goto out;
    if (n == 0 || (rc = pg_tx_begin(s))) goto out;
    for (int32_t i = 0; i < n && !rc; i++) {
        pg_args a = {0};
        pga_int(&a, rows[i].chunk_id);
        pga_text(&a, model);
        pga_int(&a, dim);
        pga_int(&a, rows[i].n);
        pga_bin(&a, rows[i].v, (size_t)rows[i].n * (size_t)dim * sizeof(float));
        PGresult *r = pg_run(s, "INSERT INTO sentence_vectors SELECT id, $2, doc, $3, $4, $5"
                                " FROM chunks WHERE id=$1 ON CONFLICT(chunk_id, model) DO UPDATE"
                                " SET dim = excluded.dim, n = excluded.n, blob = excluded.blob",
                             &a, "write sentence vectors", &rc);
        if (r) w += atoi(PQcmdTuples(r)) > 0;
        PQclear(r);
    }
    if (rc) { pg_tx_rollback(s); w = 0; goto out; }
    if ((rc = pg_tx_commit(s))) w = 0;
out:
    if (written) *written = w;
    STORE_UNLOCK(s);
    return rc;
}
