/* index/store_sentvecs.c — sentence vectors: each chunk's sentences embedded one by one,
 * one row per (chunk, model) holding n x dim floats (store.h). Retrieval asks only for the
 * best dot product of a query with the sentences of its candidates, so the scoring runs
 * here next to the rows instead of copying every blob out. */
#include <stdlib.h>
#include <string.h>
#include "index/store_int.h"

int store_sentvecs_put(store *s, const char *model, int32_t dim, const store_sentvec *rows,
                       int32_t n, int32_t *written) {
    STORE_ROUTE_PG(s, pg_sentvecs_put(s, model, dim, rows, n, written));
    if (written) *written = 0;
    if (!s) return STORE_ERR_ARG;
    STORE_LOCK(s);
    sqlite3_stmt *st = NULL;
    int32_t w = 0;
    int rc = store_sentvecs_check(s, model, dim, rows, n);
    if (rc) goto out;
    if (n == 0) goto out;
    if ((rc = store_prepare(s, "INSERT OR REPLACE INTO sentence_vectors SELECT id, ?2, doc, ?3, ?4, ?5"
                               " FROM chunks WHERE id=?1", &st)) ||
        (rc = store_tx_begin(s)))
        goto out;
    for (int32_t i = 0; i < n; i++) {
        sqlite3_bind_int64(st, 1, rows[i].chunk_id);
        sqlite3_bind_text(st, 2, model, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 3, dim);
        sqlite3_bind_int(st, 4, rows[i].n);
        /* a zero-length blob is still a blob (not NULL): "looked at, nothing to embed" */
        sqlite3_bind_blob(st, 5, rows[i].n ? (const void *)rows[i].v : "", rows[i].n * dim * (int)sizeof(float),
                          SQLITE_STATIC);
        if ((rc = store_step_batch_row(s, st, "write sentence vectors", &w))) goto out;
    }
    rc = store_tx_commit(s);
    if (rc) w = 0;
out:
    sqlite3_finalize(st);
    if (written) *written = w;
    STORE_UNLOCK(s);
    return rc;
}

float store_best_dot(const float *q, const float *v, int32_t dim, int32_t n) {
    float best = -2.0f;
    for (int32_t j = 0; j < n; j++) {
        float d = 0;
        for (int32_t k = 0; k < dim; k++) d += q[k] * v[(size_t)j * (size_t)dim + (size_t)k];
        if (d > best) best = d;
    }
    return best;
}

int store_sentvecs_best(store *s, const char *model, const float *q, int32_t dim,
                        const int64_t *ids, int32_t n, float *best) {
    STORE_ROUTE_PG(s, pg_sentvecs_best(s, model, q, dim, ids, n, best));
    if (!s || (n > 0 && (!ids || !best || !q))) return STORE_ERR_ARG;
    for (int32_t i = 0; i < n; i++) best[i] = -2.0f;
    STORE_LOCK(s);
    sqlite3_stmt *st = NULL;
    float *buf = NULL;
    size_t cap = 0;
    int rc = store_check_space(s, "text", model);
    if (rc || n == 0) goto out;
    if ((rc = store_prepare(s, "SELECT dim, n, blob FROM sentence_vectors WHERE chunk_id=?1"
                               " AND model=?2", &st)))
        goto out;
    for (int32_t i = 0; i < n; i++) {
        sqlite3_bind_int64(st, 1, ids[i]);
        sqlite3_bind_text(st, 2, model, -1, SQLITE_STATIC);
        int step = sqlite3_step(st);
        if (step == SQLITE_ROW) {
            int32_t d = sqlite3_column_int(st, 0), k = sqlite3_column_int(st, 1);
            const void *b = sqlite3_column_blob(st, 2);
            int bytes = sqlite3_column_bytes(st, 2);
            /* a row that does not add up is read as "no sentences", never past its blob */
            if (d == dim && k > 0 && b && (int64_t)bytes == (int64_t)k * d * (int64_t)sizeof(float)) {
                if ((size_t)bytes > cap) {  /* a blob may sit unaligned in SQLite's page */
                    float *nb = realloc(buf, (size_t)bytes);
                    if (!nb) { rc = store_set_err(s, STORE_ERR_NOMEM, "out of memory"); sqlite3_reset(st); goto out; }
                    buf = nb;
                    cap = (size_t)bytes;
                }
                memcpy(buf, b, (size_t)bytes);
                best[i] = store_best_dot(q, buf, dim, k);
            }
        } else if (step != SQLITE_DONE) {
            rc = store_sql_err(s, "read sentence vectors");
            sqlite3_reset(st);
            goto out;
        }
        sqlite3_reset(st);
    }
out:
    sqlite3_finalize(st);
    free(buf);
    STORE_UNLOCK(s);
    return rc;
}

int store_sentvecs_count(store *s, const char *model, int64_t *count) {
    STORE_ROUTE_PG(s, pg_sentvecs_count(s, model, count));
    if (!s || !count) return STORE_ERR_ARG;
    *count = 0;
    STORE_LOCK(s);
    sqlite3_stmt *st = NULL;
    int rc = store_check_space(s, "text", model);
    if (!rc && !(rc = store_prepare(s, "SELECT count(*) FROM sentence_vectors WHERE model=?1", &st))) {
        sqlite3_bind_text(st, 1, model, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) *count = sqlite3_column_int64(st, 0);
        else rc = store_sql_err(s, "count sentence vectors");
    }
    sqlite3_finalize(st);
    STORE_UNLOCK(s);
    return rc;
}
