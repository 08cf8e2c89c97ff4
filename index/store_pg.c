/* index/store_pg.c — the shared store on PostgreSQL + pgvector: connecting, the schema of
 * a collection and its migrations, errors, meta, and the write paths (documents, deletes,
 * vectors, sentence vectors). Readers are in store_pg_read.c.
 *
 * Design notes:
 *   1. A collection is a schema ("mmrag_NAME"); the connection's search_path points at it,
 *      so every statement below is the same for every collection. The vector type comes
 *      from the pgvector extension in the database (CREATE EXTENSION on first open).
 *   2. Document transactions mirror the embedded store: rows are spooled into the
 *      session's TEMP tables while the PDF is parsed (no lock held), and store_doc_commit
 *      moves them in ONE transaction. That transaction first takes the row lock on the
 *      generation counter, so committers, deletes and vector writes of one collection
 *      are serialized exactly like SQLite's single writer: the sha256 and path checks
 *      that follow see every earlier commit. A unique violation on sha256 (a writer that
 *      raced past) reads as STORE_EXISTS.
 *   3. Text and image vectors live in one table with a `vector` column of no fixed
 *      dimension; each (space, model, dim) gets its own partial HNSW expression index
 *      ((v::vector(dim)) vector_cosine_ops ... WHERE space=.. AND model=..), created the
 *      first time vectors of that kind are written. Searches repeat the same expression
 *      and predicate literally so the planner can use the index. Image vectors also keep
 *      a sign-random-projection code (`lsh`, bit(256)) with its own HNSW bit_hamming_ops
 *      index: image searches take Hamming candidates and re-score them exactly.
 *   4. A dropped connection (server restart) is reset once and the statement retried,
 *      unless a transaction or a spooled document was open on it (that is lost: the
 *      caller sees an error and the document is not written). */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "index/store_pg_int.h"

int store_is_pg_url(const char *db) {
    return db && (strncmp(db, "postgres://", 11) == 0 || strncmp(db, "postgresql://", 13) == 0);
}

/* ---- arguments and statements ----------------------------------------------------- */
void pga_int(pg_args *a, int64_t v) {
    snprintf(a->num[a->n], sizeof a->num[0], "%lld", (long long)v);
    a->v[a->n] = a->num[a->n]; a->len[a->n] = 0; a->fmt[a->n] = 0; a->n++;
}
void pga_real(pg_args *a, double v) {
    snprintf(a->num[a->n], sizeof a->num[0], "%.9g", v);
    a->v[a->n] = a->num[a->n]; a->len[a->n] = 0; a->fmt[a->n] = 0; a->n++;
}
void pga_text(pg_args *a, const char *t) {
    a->v[a->n] = t; a->len[a->n] = 0; a->fmt[a->n] = 0; a->n++;
}
void pga_bin(pg_args *a, const void *p, size_t n) {
    a->v[a->n] = p ? (const char *)p : ""; a->len[a->n] = (int)n; a->fmt[a->n] = 1; a->n++;
}

/* SQLSTATE classes we tell apart; everything else is STORE_ERR. */
static int map_state(const char *st) {
    if (!st) return STORE_ERR_IO;   /* no result at all: the connection is gone */
    if (!strncmp(st, "08", 2) || !strcmp(st, "57P01") || !strcmp(st, "57P03")) return STORE_ERR_IO;
    if (!strcmp(st, "53100")) return STORE_ERR_FULL;
    if (!strcmp(st, "53200")) return STORE_ERR_NOMEM;
    if (!strcmp(st, "25006") || !strncmp(st, "42501", 5)) return STORE_ERR_READONLY;
    if (!strcmp(st, "40P01") || !strcmp(st, "40001") || !strcmp(st, "55P03")) return STORE_ERR_BUSY;
    if (!strncmp(st, "22", 2) || !strncmp(st, "23", 2)) return STORE_ERR_ARG;
    return STORE_ERR;
}

static void first_line(char *dst, size_t len, const char *m) {
    snprintf(dst, len, "%s", m ? m : "");
    char *nl = strchr(dst, '\n');
    if (nl) *nl = 0;
}

int pg_fail(store *s, PGresult *r, const char *what) {
    const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    char msg[320];
    first_line(msg, sizeof msg, r ? PQresultErrorMessage(r) : PQerrorMessage(s->pg));
    int code = map_state(st);
    const char *hint = code == STORE_ERR_FULL ? " (disk full?)" :
                       code == STORE_ERR_IO ? " (database down or unreachable?)" : "";
    PQclear(r);
    return store_set_err(s, code, "%s: %s: %s%s", s->path, what, msg[0] ? msg : "no answer", hint);
}

PGresult *pg_run(store *s, const char *sql, const pg_args *a, const char *what, int *rc) {
    *rc = STORE_OK;
    for (int attempt = 0;; attempt++) {
        /* without parameters the simple protocol: it takes several statements at once */
        PGresult *r = a ? PQexecParams(s->pg, sql, a->n, NULL, a->v, a->len, a->fmt, 0)
                        : PQexec(s->pg, sql);
        ExecStatusType t = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
        if (t == PGRES_COMMAND_OK || t == PGRES_TUPLES_OK) return r;
        /* design note 4: one reset, only when nothing open was lost with the session */
        if (attempt == 0 && PQstatus(s->pg) == CONNECTION_BAD && !s->pg_tx && !s->doc_open) {
            PQclear(r);
            PQreset(s->pg);
            if (PQstatus(s->pg) == CONNECTION_OK && pg_session_setup(s) == STORE_OK) continue;
            r = NULL;
        }
        if (PQstatus(s->pg) == CONNECTION_BAD) s->pg_tx = 0;
        *rc = pg_fail(s, r, what);
        return NULL;
    }
}

int pg_exec(store *s, const char *sql, const pg_args *a, const char *what) {
    int rc;
    PGresult *r = pg_run(s, sql, a, what, &rc);
    PQclear(r);
    return rc;
}

int pg_tx_begin(store *s) {
    int rc = pg_exec(s, "BEGIN", NULL, "begin");
    if (!rc) s->pg_tx = 1;
    return rc;
}
int pg_tx_commit(store *s) {
    int rc = pg_exec(s, "COMMIT", NULL, "commit");
    s->pg_tx = 0;
    return rc;
}
void pg_tx_rollback(store *s) {
    if (!s->pg_tx) return;
    PQclear(PQexec(s->pg, "ROLLBACK"));
    s->pg_tx = 0;
}

/* The commit lock (design note 2): bumps the generation inside the open transaction. */
int pg_bump_generation(store *s) {
    return pg_exec(s, "UPDATE meta SET value = (value::bigint + 1)::text WHERE key = 'generation'",
                   NULL, "bump generation");
}

/* ---- schema ------------------------------------------------------------------------ */
/* pg_migrations[v-1] upgrades schema v-1 to v. Append only; never edit a shipped entry. */
static const char *const pg_migrations[] = {
    /* v1 */
    "CREATE TABLE meta(key text PRIMARY KEY, value text NOT NULL);"
    "INSERT INTO meta VALUES('generation', '0');"
    "CREATE TABLE documents(id bigserial PRIMARY KEY, sha256 text NOT NULL UNIQUE,"
    " path text NOT NULL, title text NOT NULL, pages int NOT NULL, bytes bigint NOT NULL,"
    " status text NOT NULL DEFAULT 'ready', added_at bigint NOT NULL, updated_at bigint NOT NULL);"
    "CREATE INDEX documents_path ON documents(path);"
    "CREATE TABLE pages(doc bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,"
    " number int NOT NULL, width_pt real, height_pt real, ocr int NOT NULL DEFAULT 0,"
    " PRIMARY KEY(doc, number));"
    "CREATE TABLE images(id bigserial PRIMARY KEY,"
    " doc bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,"
    " page int NOT NULL, idx int NOT NULL, kind text NOT NULL,"
    " x0 real, y0 real, x1 real, y1 real, width_px int, height_px int,"
    " preview bytea, phash bigint, caption_chunk bigint, UNIQUE(doc, idx));"
    "CREATE TABLE chunks(id bigserial PRIMARY KEY,"
    " doc bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,"
    " page int NOT NULL, ord int NOT NULL, kind text NOT NULL,"
    " x0 real, y0 real, x1 real, y1 real, image_id bigint, text text NOT NULL,"
    " embedding_key text NOT NULL DEFAULT '', lines bytea, section text NOT NULL DEFAULT '',"
    " tsv tsvector GENERATED ALWAYS AS (setweight(to_tsvector('english', section), 'B') ||"
    " setweight(to_tsvector('english', text), 'A')) STORED);"
    "CREATE INDEX chunks_doc ON chunks(doc, page, ord);"
    "CREATE INDEX chunks_image ON chunks(image_id);"
    "CREATE INDEX chunks_tsv ON chunks USING gin(tsv);"
    /* BM25's collection statistics, one row per document (goes with it) */
    "CREATE TABLE fts_stats(doc bigint PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,"
    " chunks bigint NOT NULL, lexemes bigint NOT NULL);"
    "CREATE TABLE vectors(owner_kind text NOT NULL CHECK(owner_kind IN ('chunk','image')),"
    " owner_id bigint NOT NULL, space text NOT NULL CHECK(space IN ('text','image')),"
    " model text NOT NULL, doc bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,"
    " dim int NOT NULL, v vector NOT NULL, PRIMARY KEY(owner_kind, owner_id, space, model));"
    "CREATE INDEX vectors_doc ON vectors(doc);"
    "CREATE INDEX vectors_space ON vectors(space, model, owner_id);"
    "CREATE TABLE sentence_vectors(chunk_id bigint NOT NULL REFERENCES chunks(id)"
    " ON DELETE CASCADE, model text NOT NULL, doc bigint NOT NULL, dim int NOT NULL,"
    " n int NOT NULL, blob bytea NOT NULL, PRIMARY KEY(chunk_id, model));"
    /* the original PDFs (uploads and queued files; page renders read them back) */
    "CREATE TABLE files(sha256 text PRIMARY KEY, pdf bytea NOT NULL, bytes bigint NOT NULL,"
    " created_at timestamptz NOT NULL DEFAULT now());"
    /* the ingest queue (store_job_*) */
    "CREATE TABLE jobs(id bigserial PRIMARY KEY, sha256 text NOT NULL REFERENCES files(sha256)"
    " ON DELETE CASCADE,"
    " name text NOT NULL,"
    " state text NOT NULL DEFAULT 'queued' CHECK(state IN ('queued','running','done','failed')),"
    " attempts int NOT NULL DEFAULT 0, worker text, lease_until timestamptz, doc bigint,"
    " pages int NOT NULL DEFAULT 0, pages_done int NOT NULL DEFAULT 0, error text,"
    " created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now());"
    "CREATE UNIQUE INDEX jobs_pending ON jobs(sha256) WHERE state IN ('queued','running');"
    "CREATE INDEX jobs_state ON jobs(state, id);",
    /* v2: image vectors' LSH codes (design note 3); image vectors written at v1 have none
     * and are found again once re-embedded */
    "ALTER TABLE vectors ADD COLUMN IF NOT EXISTS lsh bit varying;",
};
#define PG_N_MIGRATIONS ((int)(sizeof pg_migrations / sizeof pg_migrations[0]))

static int read_version(store *s, int *v) {
    *v = 0;
    int rc;
    /* pg_tables through the statement's snapshot: a catalog cache would miss a schema
     * another process created while we waited for the lock */
    pg_args a = {0};
    char schema[80];
    snprintf(schema, sizeof schema, "%.*s", (int)strlen(s->schema) - 2, s->schema + 1);
    pga_text(&a, schema);
    PGresult *r = pg_run(s, "SELECT count(*) > 0 FROM pg_catalog.pg_tables WHERE schemaname = $1"
                            " AND tablename = 'meta'", &a, "read schema", &rc);
    if (!r) return rc;
    int have = PQgetvalue(r, 0, 0)[0] == 't';
    PQclear(r);
    if (!have) return STORE_OK;
    r = pg_run(s, "SELECT value FROM meta WHERE key='schema_version'", NULL, "read schema", &rc);
    if (!r) return rc;
    if (PQntuples(r) == 1) *v = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return STORE_OK;
}

/* Create or upgrade the collection's schema under an advisory lock (several servers and
 * workers may open a new collection at once). */
static int migrate(store *s, int readonly) {
    int v, rc = read_version(s, &v);
    if (rc) return rc;
    if (v > PG_N_MIGRATIONS)
        return store_set_err(s, STORE_ERR_VERSION, "%s: collection schema v%d is newer than this"
                             " mmrag (v%d); upgrade mmrag", s->path, v, PG_N_MIGRATIONS);
    if (v == PG_N_MIGRATIONS) return STORE_OK;
    if (readonly && !v)
        return store_set_err(s, STORE_ERR_NOTFOUND, "%s: no collection here (run `mmrag index`"
                             " first)", s->path);
    if (readonly)
        return store_set_err(s, STORE_ERR_READONLY, "%s: schema v%d needs migrating, which a"
                             " read-only open cannot do", s->path, v);
    if ((rc = pg_tx_begin(s))) return rc;
    pg_args a = {0};
    pga_text(&a, s->schema);
    if ((rc = pg_exec(s, "SELECT pg_advisory_xact_lock(hashtext('mmrag-schema:' || $1))", &a,
                      "lock schema")))
        goto fail;
    if ((rc = read_version(s, &v))) goto fail;   /* another process may have done it */
    for (; v < PG_N_MIGRATIONS; v++) {
        char what[32];
        snprintf(what, sizeof what, "migrate to v%d", v + 1);
        if ((rc = pg_exec(s, pg_migrations[v], NULL, what))) goto fail;
    }
    char sql[160];
    snprintf(sql, sizeof sql, "INSERT INTO meta VALUES('schema_version', '%d') ON CONFLICT(key)"
             " DO UPDATE SET value = excluded.value", PG_N_MIGRATIONS);
    if ((rc = pg_exec(s, sql, NULL, "set schema_version"))) goto fail;
    return pg_tx_commit(s);
fail:
    pg_tx_rollback(s);
    return rc;
}

/* ---- connecting -------------------------------------------------------------------- */
/* Split ?collection=NAME off the URL (libpq refuses parameters it does not know) and
 * add a connect timeout unless the URL sets one. */
static int split_url(const char *url, char *conn, size_t connlen, char *coll, size_t colllen,
                     char *err, size_t errlen) {
    snprintf(coll, colllen, "default");
    const char *q = strchr(url, '?');
    size_t base = q ? (size_t)(q - url) : strlen(url);
    if (base + 32 >= connlen) { snprintf(err, errlen, "store: database URL too long"); return -1; }
    memcpy(conn, url, base);
    size_t at = base;
    int params = 0, timeout = 0;
    for (const char *p = q; p && *p;) {
        p++;
        const char *e = strchr(p, '&');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 11 && !strncmp(p, "collection=", 11)) {
            size_t n = len - 11;
            if (n == 0 || n > 48 || n >= colllen) goto bad;
            for (size_t i = 0; i < n; i++)
                if (!islower((unsigned char)p[11 + i]) && !isdigit((unsigned char)p[11 + i]) &&
                    p[11 + i] != '_')
                    goto bad;
            memcpy(coll, p + 11, n);
            coll[n] = 0;
        } else if (len) {
            if (at + len + 2 >= connlen) { snprintf(err, errlen, "store: database URL too long"); return -1; }
            conn[at++] = params++ ? '&' : '?';
            memcpy(conn + at, p, len);
            at += len;
            if (!strncmp(p, "connect_timeout=", 16)) timeout = 1;
        }
        p = e;
    }
    conn[at] = 0;
    if (!timeout) snprintf(conn + at, connlen - at, "%cconnect_timeout=5", params ? '&' : '?');
    return 0;
bad:
    snprintf(err, errlen, "store: collection name must be 1-48 of [a-z0-9_] in %s", url);
    return -1;
}

int pg_collection_of(const char *url, char *buf, size_t len) {
    char conn[4096], err[256];
    return split_url(url, conn, sizeof conn, buf, len, err, sizeof err);
}

/* The URL without a password, for messages. */
static void safe_url(const char *url, char *out, size_t len) {
    const char *at = strchr(url, '@'), *scheme = strstr(url, "://");
    const char *colon = scheme ? strchr(scheme + 3, ':') : NULL;
    if (at && colon && colon < at)
        snprintf(out, len, "%.*s:***%s", (int)(colon - url), url, at);
    else
        snprintf(out, len, "%s", url);
}

int pg_session_setup(store *s) {
    char sql[256];
    snprintf(sql, sizeof sql, "SET search_path TO %s, public; SET hnsw.ef_search = 128;"
             " SET client_min_messages = warning", s->schema);
    PGresult *r = PQexec(s->pg, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    s->pg_ef = 128;
    s->pg_tx = 0;
    s->pg_vec_index[0] = 0;
    return ok ? STORE_OK : pg_fail(s, NULL, "set search_path");
}

static void quiet_notice(void *arg, const char *message) { (void)arg; (void)message; }

int pg_open(store *s, const char *url, const store_options *o, char *err, size_t errlen) {
    char conn[2048], coll[64];
    safe_url(url, s->path, sizeof s->path);
    if (split_url(url, conn, sizeof conn, coll, sizeof coll, err, errlen)) return STORE_ERR_ARG;
    snprintf(s->schema, sizeof s->schema, "\"mmrag_%s\"", coll);
    s->readonly = o->readonly;
    s->pg = PQconnectdb(conn);
    if (!s->pg || PQstatus(s->pg) != CONNECTION_OK) {
        char msg[320];
        first_line(msg, sizeof msg, s->pg ? PQerrorMessage(s->pg) : "out of memory");
        const char *host = s->pg ? PQhost(s->pg) : NULL, *port = s->pg ? PQport(s->pg) : NULL;
        snprintf(err, errlen, "store: cannot connect to PostgreSQL at %s:%s (%s): %s",
                 host && *host ? host : "localhost", port && *port ? port : "5432", s->path, msg);
        return STORE_ERR_IO;
    }
    PQsetNoticeProcessor(s->pg, quiet_notice, NULL);   /* "already exists, skipping" */
    int rc = STORE_OK;
    if (!o->readonly) {
        /* one creator at a time: IF NOT EXISTS alone races on the catalog's unique keys */
        char sql[320];
        snprintf(sql, sizeof sql, "BEGIN; SELECT pg_advisory_xact_lock(hashtext('mmrag-create'));"
                 " CREATE EXTENSION IF NOT EXISTS vector; CREATE SCHEMA IF NOT EXISTS %s; COMMIT",
                 s->schema);
        PGresult *r = PQexec(s->pg, sql);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            int missing = strstr(PQresultErrorMessage(r), "control file") ||
                          strstr(PQresultErrorMessage(r), "not available");
            rc = pg_fail(s, r, "create the collection");
            if (missing) {
                size_t l = strlen(s->err);
                snprintf(s->err + l, sizeof s->err - l, " (pgvector is not installed in this"
                         " server: `make deps` builds it)");
            }
            PQclear(PQexec(s->pg, "ROLLBACK"));
        } else {
            PQclear(r);
        }
    }
    if (!rc) rc = pg_session_setup(s);
    if (!rc) rc = migrate(s, o->readonly);
    if (rc) snprintf(err, errlen, "%s", s->err);
    return rc;
}

void pg_close(store *s) {
    if (!s->pg) return;
    PQfinish(s->pg);
    s->pg = NULL;
}

int pg_meta_get(store *s, const char *key, char *buf, size_t buflen) {
    if (!key || !buf || !buflen) return STORE_ERR_ARG;
    STORE_LOCK(s);
    pg_args a = {0};
    pga_text(&a, key);
    int rc;
    PGresult *r = pg_run(s, "SELECT value FROM meta WHERE key=$1", &a, "read meta", &rc);
    if (r && PQntuples(r) == 1) snprintf(buf, buflen, "%s", PQgetvalue(r, 0, 0));
    else if (r) rc = store_set_err(s, STORE_ERR_NOTFOUND, "meta key '%s' not set", key);
    PQclear(r);
    STORE_UNLOCK(s);
    return rc;
}

int pg_meta_set(store *s, const char *key, const char *value) {
    if (!key || !value) return STORE_ERR_ARG;
    STORE_LOCK(s);
    pg_args a = {0};
    pga_text(&a, key);
    pga_text(&a, value);
    int rc = pg_exec(s, "INSERT INTO meta VALUES($1, $2) ON CONFLICT(key) DO UPDATE SET"
                        " value = excluded.value", &a, "write meta");
    STORE_UNLOCK(s);
    return rc;
}
