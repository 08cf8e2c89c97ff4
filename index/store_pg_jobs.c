/* index/store_pg_jobs.c — the shared store's ingest queue (store.h, store_job_*): kept
 * PDFs and jobs that workers on any machine claim with FOR UPDATE SKIP LOCKED and a lease. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "index/store_pg_int.h"

int pg_file_put(store *s, const char *sha256, const void *pdf, size_t len) {
    if (!sha256 || (!pdf && len)) return STORE_ERR_ARG;
    STORE_LOCK(s);
    pg_args a = {0};
    pga_text(&a, sha256);
    pga_bin(&a, pdf, len);
    pga_int(&a, (int64_t)len);
    int rc = pg_exec(s, "INSERT INTO files(sha256, pdf, bytes) VALUES($1, $2, $3)"
                        " ON CONFLICT(sha256) DO NOTHING", &a, "keep file");
    STORE_UNLOCK(s);
    return rc;
}

int pg_file_get(store *s, const char *sha256, uint8_t **pdf, size_t *len) {
    if (!sha256 || !pdf || !len) return STORE_ERR_ARG;
    *pdf = NULL; *len = 0;
    STORE_LOCK(s);
    pg_args a = {0};
    pga_text(&a, sha256);
    int rc;
    PGresult *r = pg_run(s, "SELECT pdf FROM files WHERE sha256=$1", &a, "read file", &rc);
    if (r && PQntuples(r) == 0) rc = store_set_err(s, STORE_ERR_NOTFOUND, "no kept file %.12s", sha256);
    else if (r && !(*pdf = pg_bytea(r, 0, 0, len))) rc = store_set_err(s, STORE_ERR_NOMEM, "out of memory");
    PQclear(r);
    STORE_UNLOCK(s);
    return rc;
}

int pg_job_submit(store *s, const char *sha256, const char *name, int64_t *job_id) {
    if (!sha256 || !name) return STORE_ERR_ARG;
    STORE_LOCK(s);
    pg_args a = {0};
    pga_text(&a, sha256);
    pga_text(&a, name);
    int rc = STORE_OK;
    PGresult *r = NULL;
    /* the partial unique index makes a second submit of a pending file a no-op; when a
     * concurrent submit of the same file committed while this one waited on the index,
     * the statement's snapshot cannot see that job: a new statement can */
    for (int tries = 0; tries < 5; tries++) {
        PQclear(r);
        r = pg_run(s, "WITH ins AS (INSERT INTO jobs(sha256, name) VALUES($1, $2)"
                      " ON CONFLICT(sha256) WHERE state IN ('queued','running') DO NOTHING"
                      " RETURNING id) SELECT id, 1 FROM ins UNION ALL SELECT id, 0 FROM jobs"
                      " WHERE sha256=$1 AND state IN ('queued','running') AND NOT EXISTS"
                      " (SELECT 1 FROM ins)", &a, "submit job", &rc);
        if (!r || PQntuples(r) > 0) break;
    }
    if (r && PQntuples(r) == 0) rc = store_set_err(s, STORE_ERR_BUSY, "submit job: retry");
    else if (r) {
        if (job_id) *job_id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        rc = PQgetvalue(r, 0, 1)[0] == '1' ? STORE_OK : STORE_EXISTS;
    }
    PQclear(r);
    STORE_UNLOCK(s);
    return rc;
}

#define JOB_COLS "id, sha256, name, state, coalesce(worker, ''), attempts, pages, pages_done," \
    " coalesce(doc, 0), extract(epoch from created_at)::bigint," \
    " extract(epoch from updated_at)::bigint, coalesce(error, '')"

static void job_from(const PGresult *r, store_job *j) {
    memset(j, 0, sizeof *j);
    j->id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    snprintf(j->sha256, sizeof j->sha256, "%s", PQgetvalue(r, 0, 1));
    snprintf(j->name, sizeof j->name, "%s", PQgetvalue(r, 0, 2));
    snprintf(j->state, sizeof j->state, "%s", PQgetvalue(r, 0, 3));
    snprintf(j->worker, sizeof j->worker, "%s", PQgetvalue(r, 0, 4));
    j->attempts = atoi(PQgetvalue(r, 0, 5));
    j->pages = atoi(PQgetvalue(r, 0, 6));
    j->pages_done = atoi(PQgetvalue(r, 0, 7));
    j->doc = strtoll(PQgetvalue(r, 0, 8), NULL, 10);
    j->created_at = strtoll(PQgetvalue(r, 0, 9), NULL, 10);
    j->updated_at = strtoll(PQgetvalue(r, 0, 10), NULL, 10);
    snprintf(j->error, sizeof j->error, "%s", PQgetvalue(r, 0, 11));
}

/* Run a job statement returning JOB_COLS; no row = NOTFOUND with `none`. */
static int job_query(store *s, const char *sql, const pg_args *a, const char *what,
                     const char *none, store_job *out) {
    int rc;
    PGresult *r = pg_run(s, sql, a, what, &rc);
    if (r && PQntuples(r) == 0) rc = store_set_err(s, STORE_ERR_NOTFOUND, "%s", none);
    else if (r && out) job_from(r, out);
    PQclear(r);
    return rc;
}

int pg_job_claim(store *s, const char *worker, int32_t lease_s, int64_t only_id, store_job *out) {
    if (!worker || lease_s <= 0) return STORE_ERR_ARG;
    STORE_LOCK(s);
    pg_args a = {0};
    pga_int(&a, STORE_JOB_MAX_ATTEMPTS);
    /* a job whose workers died too often fails instead of killing the next one */
    int rc = pg_exec(s, "UPDATE jobs SET state='failed', updated_at=now(), error='its worker"
                        " stopped (killed or crashed) ' || attempts || ' times; not retried'"
                        " WHERE state='running' AND lease_until < now() AND attempts >= $1",
                     &a, "fail abandoned jobs");
    if (!rc) {
        a.n = 0;
        pga_text(&a, worker);
        pga_int(&a, lease_s);
        pga_int(&a, only_id);
        rc = job_query(s, "UPDATE jobs SET state='running', worker=$1, attempts=attempts+1,"
                          " lease_until=now() + make_interval(secs => $2), updated_at=now(),"
                          " pages_done=0 WHERE id = (SELECT id FROM jobs WHERE (state='queued'"
                          " OR (state='running' AND lease_until < now())) AND ($3 = 0 OR id = $3)"
                          " ORDER BY id"
                          " FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING " JOB_COLS,
                       &a, "claim job", "no job waiting", out);
    }
    STORE_UNLOCK(s);
    return rc;
}

int pg_job_renew(store *s, int64_t id, const char *worker, int32_t lease_s, int32_t pages_done,
                 int32_t pages) {
    if (!worker || lease_s <= 0) return STORE_ERR_ARG;
    STORE_LOCK(s);
    pg_args a = {0};
    pga_int(&a, id);
    pga_text(&a, worker);
    pga_int(&a, lease_s);
    pga_int(&a, pages_done);
    pga_int(&a, pages);
    int rc = job_query(s, "UPDATE jobs SET lease_until=now() + make_interval(secs => $3),"
                          " pages_done=$4, pages=$5, updated_at=now() WHERE id=$1 AND worker=$2"
                          " AND state='running' RETURNING " JOB_COLS, &a, "renew job",
                       "the job is no longer this worker's", NULL);
    STORE_UNLOCK(s);
    return rc;
}

int pg_job_finish(store *s, int64_t id, const char *worker, int64_t doc, const char *error) {
    if (!worker) return STORE_ERR_ARG;
    STORE_LOCK(s);
    pg_args a = {0};
    pga_int(&a, id);
    pga_text(&a, worker);
    pga_text(&a, error ? "failed" : "done");
    pga_int(&a, doc);
    pga_text(&a, error);
    int rc = job_query(s, "UPDATE jobs SET state=$3, doc=nullif($4, 0), error=$5, lease_until=NULL,"
                          " pages_done=CASE WHEN $3 = 'done' THEN pages ELSE pages_done END,"
                          " updated_at=now() WHERE id=$1 AND worker=$2 AND state='running'"
                          " RETURNING " JOB_COLS, &a, "finish job",
                       "the job is no longer this worker's", NULL);
    STORE_UNLOCK(s);
    return rc;
}

int pg_job_get(store *s, int64_t id, store_job *out) {
    if (!out) return STORE_ERR_ARG;
    STORE_LOCK(s);
    pg_args a = {0};
    pga_int(&a, id);
    char none[64];
    snprintf(none, sizeof none, "no job %lld", (long long)id);
    int rc = job_query(s, "SELECT " JOB_COLS " FROM jobs WHERE id=$1", &a, "read job", none, out);
    STORE_UNLOCK(s);
    return rc;
}

int pg_job_counts(store *s, int64_t *queued, int64_t *running) {
    STORE_LOCK(s);
    int rc;
    PGresult *r = pg_run(s, "SELECT count(*) FILTER (WHERE state='queued'), count(*) FILTER"
                            " (WHERE state='running') FROM jobs", NULL, "count jobs", &rc);
    if (r) {
        if (queued) *queued = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        if (running) *running = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
    }
    PQclear(r);
    STORE_UNLOCK(s);
    return rc;
}
