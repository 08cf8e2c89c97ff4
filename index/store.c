/* index/store.c — opening the database, schema + migrations, errors, meta. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "index/store_int.h"

/* migrations[v-1] upgrades schema v-1 to v. Append only; never edit a shipped entry. */
static const char *const migrations[] = {
    /* v1 */
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE documents(id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " sha256 TEXT NOT NULL UNIQUE, path TEXT NOT NULL, title TEXT NOT NULL,"
    " pages INTEGER NOT NULL, bytes INTEGER NOT NULL, status TEXT NOT NULL DEFAULT 'ready',"
    " added_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);"
    "CREATE INDEX documents_path ON documents(path);"
    "CREATE TABLE pages(doc INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,"
    " number INTEGER NOT NULL, width_pt REAL, height_pt REAL, ocr INTEGER NOT NULL DEFAULT 0,"
    " PRIMARY KEY(doc, number)) WITHOUT ROWID;"
    "CREATE TABLE images(id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " doc INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,"
    " page INTEGER NOT NULL, idx INTEGER NOT NULL, kind TEXT NOT NULL,"
    " x0 REAL, y0 REAL, x1 REAL, y1 REAL, width_px INTEGER, height_px INTEGER,"
    " preview BLOB, phash INTEGER, caption_chunk INTEGER, UNIQUE(doc, idx));"
    "CREATE TABLE chunks(id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " doc INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,"
    " page INTEGER NOT NULL, ord INTEGER NOT NULL, kind TEXT NOT NULL,"
    " x0 REAL, y0 REAL, x1 REAL, y1 REAL, image_id INTEGER, text TEXT NOT NULL,"
    " embedding_key TEXT NOT NULL DEFAULT '');"
    "CREATE INDEX chunks_doc ON chunks(doc, page, ord);"
    "CREATE INDEX chunks_image ON chunks(image_id);"
    "CREATE VIRTUAL TABLE chunks_fts USING fts5(text, content='chunks', content_rowid='id',"
    " tokenize='porter unicode61 remove_diacritics 2');"
    "CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN"
    " INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text); END;"
    "CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN"
    " INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text); END;"
    "CREATE TRIGGER chunks_au AFTER UPDATE OF text ON chunks BEGIN"
    " INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);"
    " INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text); END;"
    "CREATE TABLE vectors(owner_kind TEXT NOT NULL CHECK(owner_kind IN ('chunk','image')),"
    " owner_id INTEGER NOT NULL, space TEXT NOT NULL CHECK(space IN ('text','image')),"
    " model TEXT NOT NULL, doc INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,"
    " dim INTEGER NOT NULL, blob BLOB NOT NULL,"
    " PRIMARY KEY(owner_kind, owner_id, space, model));"
    "CREATE INDEX vectors_doc ON vectors(doc);"
    "CREATE INDEX vectors_space ON vectors(space, model, owner_id);"
    "INSERT OR IGNORE INTO meta VALUES('generation', '0');",
    /* v2: each chunk's text lines (store.h, store_line); NULL for rows written before */
    "ALTER TABLE chunks ADD COLUMN lines BLOB;",
    /* v3: each chunk's section path (store_chunk.section), a second FTS column */
    "ALTER TABLE chunks ADD COLUMN section TEXT NOT NULL DEFAULT '';"
    "DROP TRIGGER chunks_ai; DROP TRIGGER chunks_ad; DROP TRIGGER chunks_au;"
    "DROP TABLE chunks_fts;"
    "CREATE VIRTUAL TABLE chunks_fts USING fts5(text, section, content='chunks',"
    " content_rowid='id', tokenize='porter unicode61 remove_diacritics 2');"
    "CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN"
    " INSERT INTO chunks_fts(rowid, text, section) VALUES (new.id, new.text, new.section); END;"
    "CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN"
    " INSERT INTO chunks_fts(chunks_fts, rowid, text, section)"
    " VALUES ('delete', old.id, old.text, old.section); END;"
    "CREATE TRIGGER chunks_au AFTER UPDATE OF text, section ON chunks BEGIN"
    " INSERT INTO chunks_fts(chunks_fts, rowid, text, section)"
    " VALUES ('delete', old.id, old.text, old.section);"
    " INSERT INTO chunks_fts(rowid, text, section) VALUES (new.id, new.text, new.section); END;"
    "INSERT INTO chunks_fts(chunks_fts) VALUES ('rebuild');"
    /* ... and the vectors of its sentences (store_sentvecs_put), n x dim floats a row */
    "CREATE TABLE sentence_vectors(chunk_id INTEGER NOT NULL REFERENCES chunks(id)"
    " ON DELETE CASCADE, model TEXT NOT NULL, doc INTEGER NOT NULL, dim INTEGER NOT NULL,"
    " n INTEGER NOT NULL, blob BLOB NOT NULL, PRIMARY KEY(chunk_id, model)) WITHOUT ROWID;",
};
#define N_MIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))
_Static_assert(N_MIGRATIONS == STORE_SCHEMA_VERSION, "one migration per schema version");

int store_set_err(store *s, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = snprintf(s->err, sizeof s->err, "store: ");
    vsnprintf(s->err + k, sizeof s->err - (size_t)k, fmt, ap);
    va_end(ap);
    return code;
}

int store_map_rc(int rc) {
    switch (rc & 0xff) {
    case SQLITE_OK: case SQLITE_ROW: case SQLITE_DONE: return STORE_OK;
    case SQLITE_BUSY: case SQLITE_LOCKED: return STORE_ERR_BUSY;
    case SQLITE_READONLY: case SQLITE_PERM: case SQLITE_AUTH: return STORE_ERR_READONLY;
    case SQLITE_FULL: return STORE_ERR_FULL;
    case SQLITE_CORRUPT: case SQLITE_NOTADB: return STORE_ERR_CORRUPT;
    case SQLITE_NOMEM: return STORE_ERR_NOMEM;
    case SQLITE_CANTOPEN: case SQLITE_IOERR: return STORE_ERR_IO;
    case SQLITE_CONSTRAINT: case SQLITE_MISUSE: case SQLITE_RANGE: return STORE_ERR_ARG;
    default: return STORE_ERR;
    }
}

int store_sql_err(store *s, const char *what) {
    int rc = sqlite3_extended_errcode(s->db);
    int code = store_map_rc(rc);
    if (code == STORE_OK) code = STORE_ERR;
    const char *hint = "";
    if (code == STORE_ERR_FULL) hint = " (disk full?)";
    else if (code == STORE_ERR_READONLY) hint = " (database or its directory is read-only)";
    else if (code == STORE_ERR_BUSY) hint = " (another writer holds the lock)";
    return store_set_err(s, code, "%s: %s: %s%s", s->path, what, sqlite3_errmsg(s->db), hint);
}

int store_exec(store *s, const char *sql, const char *what) {
    if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK) return store_sql_err(s, what);
    return STORE_OK;
}

int store_prepare(store *s, const char *sql, sqlite3_stmt **st) {
    if (sqlite3_prepare_v2(s->db, sql, -1, st, NULL) != SQLITE_OK) {
        *st = NULL;
        return store_sql_err(s, "prepare");
    }
    return STORE_OK;
}

int store_tx_begin(store *s) { return store_exec(s, "BEGIN IMMEDIATE", "begin write"); }
int store_tx_commit(store *s) {
    int rc = store_exec(s, "COMMIT", "commit");
    if (rc != STORE_OK) store_tx_rollback(s);
    return rc;
}
void store_tx_rollback(store *s) {
    if (!sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

int store_step_batch_row(store *s, sqlite3_stmt *st, const char *what, int32_t *written) {
    if (sqlite3_step(st) != SQLITE_DONE) {
        int rc = store_sql_err(s, what);
        sqlite3_reset(st);
        store_tx_rollback(s);
        *written = 0;
        return rc;
    }
    *written += sqlite3_changes(s->db) > 0;
    sqlite3_reset(st);
    return STORE_OK;
}

int store_bump_generation(store *s) {
    return store_exec(s, "UPDATE meta SET value = CAST(value AS INTEGER) + 1"
                         " WHERE key = 'generation'", "bump generation");
}

char *store_strdup(const char *t) { return strdup(t ? t : ""); }

const char *store_owner_name(int32_t k) {
    return k == STORE_OWNER_CHUNK ? "chunk" : k == STORE_OWNER_IMAGE ? "image" : NULL;
}

int store_check_space(store *s, const char *space, const char *model) {
    if (!space || (strcmp(space, "text") && strcmp(space, "image")))
        return store_set_err(s, STORE_ERR_ARG, "vector space must be 'text' or 'image'");
    if (!model || !*model) return store_set_err(s, STORE_ERR_ARG, "vector model id is empty");
    return STORE_OK;
}

const char *store_status_str(int rc) {
    switch (rc) {
    case STORE_OK: return "ok";
    case STORE_EXISTS: return "already indexed";
    case STORE_ERR_NOTFOUND: return "not found";
    case STORE_ERR_ARG: return "bad argument";
    case STORE_ERR_BUSY: return "database busy";
    case STORE_ERR_READONLY: return "database is read-only";
    case STORE_ERR_FULL: return "disk full";
    case STORE_ERR_CORRUPT: return "database is corrupt";
    case STORE_ERR_VERSION: return "database schema is newer than this mmrag";
    case STORE_ERR_NOMEM: return "out of memory";
    case STORE_ERR_AMBIGUOUS: return "ambiguous document";
    case STORE_ERR_STATE: return "misuse";
    case STORE_ERR_IO: return "I/O error";
    default: return "error";
    }
}

void store_options_default(store_options *o) {
    memset(o, 0, sizeof *o);
    o->create = 1;
    o->busy_timeout_ms = 30000;
}

static int is_sha(const char *h) {
    if (!h || strlen(h) != 64) return 0;
    for (int i = 0; i < 64; i++)
        if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f'))) return 0;
    return 1;
}

int store_doc_begin_check(store *s, const store_doc_meta *m, int64_t *existing_id) {
    if (existing_id) *existing_id = 0;
    if (!m || !is_sha(m->sha256))
        return store_set_err(s, STORE_ERR_ARG, "document needs a lowercase hex sha256");
    if (s->doc_open) return store_set_err(s, STORE_ERR_STATE, "a document is already open on this handle");
    return STORE_OK;
}

int store_doc_meta_keep(store *s, const store_doc_meta *m) {
    memcpy(s->doc_sha, m->sha256, 65);
    s->doc_path = store_strdup(m->path);
    s->doc_title = store_strdup(m->title);
    s->doc_pages = m->pages;
    s->doc_bytes = m->bytes;
    if (!s->doc_path || !s->doc_title) return store_set_err(s, STORE_ERR_NOMEM, "out of memory");
    s->doc_open = 1;
    return STORE_OK;
}

void store_doc_meta_drop(store *s) {
    s->doc_open = 0;
    free(s->doc_path); s->doc_path = NULL;
    free(s->doc_title); s->doc_title = NULL;
}

int store_sentvecs_check(store *s, const char *model, int32_t dim, const store_sentvec *rows, int32_t n) {
    int rc = store_check_space(s, "text", model);
    if (rc) return rc;
    if (dim <= 0 || dim > 65536 || n < 0 || (n && !rows))
        return store_set_err(s, STORE_ERR_ARG, "bad sentence vector batch (dim %d, n %d)", dim, n);
    for (int32_t i = 0; i < n; i++)
        if (rows[i].n < 0 || rows[i].n > 4096 || (rows[i].n && !rows[i].v))
            return store_set_err(s, STORE_ERR_ARG, "sentence vectors %d: bad count or NULL data", i);
    return STORE_OK;
}

void store_doc_spec_kind(const char *spec, int *digits, int *hex) {
    size_t len = strlen(spec);
    *digits = len <= 18;
    *hex = len >= 4 && len <= 64;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)spec[i])) *digits = 0;
        if (!isxdigit((unsigned char)spec[i])) *hex = 0;
    }
}

const char *store_errmsg(store *s) { return s ? s->err : "store: no handle"; }
int store_is_shared(const store *s) { return s && s->pg; }
int store_is_url(const char *db) { return store_is_pg_url(db); }

int store_collection_db(const char *base, const char *name, char *buf, size_t len) {
    int n;
    if (!store_is_pg_url(base)) {
        n = snprintf(buf, len, "%s/%s", base, name);
        return n < 0 || (size_t)n >= len ? -1 : 0;
    }
    size_t l = strlen(name);
    if (l == 0 || l > 48) return -1;
    for (const char *p = name; *p; p++)
        if (!islower((unsigned char)*p) && !isdigit((unsigned char)*p) && *p != '_') return -1;
    n = snprintf(buf, len, "%s%scollection=%s", base, strchr(base, '?') ? "&" : "?", name);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}
int store_collection_of(const char *db, char *buf, size_t len) {
    return store_is_pg_url(db) ? pg_collection_of(db, buf, len) : -1;
}
const char *store_path(const store *s) { return s->path; }

/* mkdir -p for the database directory. */
static int make_dirs(const char *dir, char *err, size_t errlen) {
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) {
        snprintf(err, errlen, "store: %s: path too long", dir);
        return STORE_ERR_ARG;
    }
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
                int e = errno;
                snprintf(err, errlen, "store: cannot create %s: %s", buf, strerror(e));
                return (e == EACCES || e == EROFS || e == EPERM) ? STORE_ERR_READONLY : STORE_ERR_IO;
            }
            *p = c;
            if (!c) break;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "store: %s: not a directory", dir);
        return STORE_ERR_IO;
    }
    return STORE_OK;
}

/* Schema version from meta; 0 for a database without one (fresh). */
static int read_version(store *s, int *version) {
    sqlite3_stmt *st;
    *version = 0;
    int rc = store_prepare(s, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'", &st);
    if (rc) return rc;
    if (sqlite3_step(st) != SQLITE_ROW) {
        rc = store_sql_err(s, "read schema");
        sqlite3_finalize(st);
        return rc;
    }
    int have = sqlite3_column_int(st, 0) > 0;
    sqlite3_finalize(st);
    if (!have) return STORE_OK;
    rc = store_prepare(s, "SELECT value FROM meta WHERE key='schema_version'", &st);
    if (rc) return rc;
    if (sqlite3_step(st) == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(st, 0);
        char *end;
        long n = v ? strtol(v, &end, 10) : -1;
        if (!v || *end || n < 0 || n > 1000000) {
            char bad[32];
            snprintf(bad, sizeof bad, "%s", v ? v : "");
            sqlite3_finalize(st);
            return store_set_err(s, STORE_ERR_CORRUPT, "%s: bad schema_version '%s'", s->path, bad);
        }
        *version = (int)n;
    }
    sqlite3_finalize(st);
    return STORE_OK;
}

static int migrate(store *s) {
    int v, rc = read_version(s, &v);
    if (rc) return rc;
    if (v > STORE_SCHEMA_VERSION)
        return store_set_err(s, STORE_ERR_VERSION,
                             "%s: database schema v%d is newer than this mmrag (v%d); upgrade mmrag",
                             s->path, v, STORE_SCHEMA_VERSION);
    if (v == STORE_SCHEMA_VERSION) return STORE_OK;
    if (s->readonly)
        return store_set_err(s, STORE_ERR_READONLY, "%s: schema v%d needs migrating to v%d, "
                             "which a read-only open cannot do", s->path, v, STORE_SCHEMA_VERSION);
    if ((rc = store_tx_begin(s))) return rc;
    /* re-read inside the write lock: another process may have migrated meanwhile */
    if ((rc = read_version(s, &v))) goto fail;
    for (; v < STORE_SCHEMA_VERSION; v++) {
        char what[32];
        snprintf(what, sizeof what, "migrate to v%d", v + 1);
        if ((rc = store_exec(s, migrations[v], what))) goto fail;
    }
    char sql[128];
    snprintf(sql, sizeof sql, "INSERT OR REPLACE INTO meta VALUES('schema_version', '%d')",
             STORE_SCHEMA_VERSION);
    if ((rc = store_exec(s, sql, "set schema_version"))) goto fail;
    return store_tx_commit(s);
fail:
    store_tx_rollback(s);
    return rc;
}

static int configure(store *s, const store_options *o) {
    sqlite3_busy_timeout(s->db, o->busy_timeout_ms > 0 ? o->busy_timeout_ms : 30000);
    sqlite3_extended_result_codes(s->db, 1);
    int rc;
    if (!s->readonly) {
        sqlite3_stmt *st;
        int step, wal = 0;
        /* Switching a new file to WAL needs an exclusive lock, and SQLite does not run the
         * busy handler for it: processes creating the same database at once retry here. */
        for (int waited = 0;; waited += 10) {
            if ((rc = store_prepare(s, "PRAGMA journal_mode=WAL", &st))) return rc;
            step = sqlite3_step(st);
            const char *mode = step == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
            wal = mode && strcmp(mode, "wal") == 0;
            sqlite3_finalize(st);
            if ((step & 0xff) != SQLITE_BUSY && (step & 0xff) != SQLITE_LOCKED) break;
            if (waited >= (o->busy_timeout_ms > 0 ? o->busy_timeout_ms : 30000)) break;
            sqlite3_sleep(10);
        }
        if (step != SQLITE_ROW) return store_sql_err(s, "enable WAL");
        if (!wal) return store_set_err(s, STORE_ERR_READONLY, "%s: cannot enable WAL mode "
                                       "(directory not writable?)", s->path);
    }
    if ((rc = store_exec(s, "PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL;"
                            "PRAGMA temp.journal_mode=MEMORY", "configure")))
        return rc;
    if (o->max_page_count > 0) {
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA max_page_count=%lld", (long long)o->max_page_count);
        if ((rc = store_exec(s, sql, "max_page_count"))) return rc;
    }
    return STORE_OK;
}

int store_open(const char *dir, const store_options *opt, store **out, char *err, size_t errlen) {
    store_options o;
    if (opt) o = *opt; else store_options_default(&o);
    *out = NULL;
    if (err && errlen) err[0] = 0;
    char dummy[8];
    if (!err || !errlen) { err = dummy; errlen = sizeof dummy; }
    if (!dir || !*dir) {
        snprintf(err, errlen, "store: empty database directory");
        return STORE_ERR_ARG;
    }
    int rc;
    if (store_is_pg_url(dir)) {
        store *s = calloc(1, sizeof *s);
        if (!s) { snprintf(err, errlen, "store: out of memory"); return STORE_ERR_NOMEM; }
        pthread_mutex_init(&s->mu, NULL);
        if ((rc = pg_open(s, dir, &o, err, errlen))) { store_close(s); return rc; }
        *out = s;
        return STORE_OK;
    }
    if (!o.readonly && o.create && (rc = make_dirs(dir, err, errlen))) return rc;
    store *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, errlen, "store: out of memory"); return STORE_ERR_NOMEM; }
    pthread_mutex_init(&s->mu, NULL);
    s->readonly = o.readonly;
    if (snprintf(s->path, sizeof s->path, "%s/mmrag.db", dir) >= (int)sizeof s->path) {
        snprintf(err, errlen, "store: %s: path too long", dir);
        store_close(s);
        return STORE_ERR_ARG;
    }
    struct stat st;
    if ((o.readonly || !o.create) && stat(s->path, &st) != 0) {
        snprintf(err, errlen, "store: no database at %s (run `mmrag index` first)", s->path);
        store_close(s);
        return STORE_ERR_NOTFOUND;
    }
    int flags = SQLITE_OPEN_NOMUTEX | (o.readonly ? SQLITE_OPEN_READONLY
                                                  : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    int src = sqlite3_open_v2(s->path, &s->db, flags, NULL);
    if (src != SQLITE_OK) {
        rc = store_map_rc(src);
        snprintf(err, errlen, "store: cannot open %s: %s", s->path,
                 s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(src));
        store_close(s);
        return rc ? rc : STORE_ERR;
    }
    if (!o.readonly && sqlite3_db_readonly(s->db, "main") == 1) {
        snprintf(err, errlen, "store: %s is read-only", s->path);
        store_close(s);
        return STORE_ERR_READONLY;
    }
    rc = configure(s, &o);
    if (!rc) rc = migrate(s);
    if (rc && o.readonly && rc != STORE_ERR_VERSION && rc != STORE_ERR_CORRUPT) {
        /* A WAL database in a directory we cannot write: SQLite cannot create the -shm
         * file, so read it as immutable (nobody can be writing it through this path). */
        sqlite3_close_v2(s->db);
        s->db = NULL;
        char uri[PATH_MAX * 3 + 32];
        size_t k = (size_t)snprintf(uri, sizeof uri, "file:");
        for (const char *p = s->path; *p && k + 4 < sizeof uri; p++) {
            unsigned char ch = (unsigned char)*p;
            if (isalnum(ch) || strchr("/-._~", ch)) uri[k++] = (char)ch;
            else k += (size_t)snprintf(uri + k, sizeof uri - k, "%%%02X", ch);
        }
        snprintf(uri + k, sizeof uri - k, "?immutable=1");
        if (sqlite3_open_v2(uri, &s->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
                            NULL) == SQLITE_OK) {
            rc = configure(s, &o);
            if (!rc) rc = migrate(s);
        }
    }
    if (rc) {
        if (rc == STORE_ERR_IO || rc == STORE_ERR_CORRUPT) {
            /* e.g. "file is not a database" surfaces at the first statement */
            if (strstr(s->err, "not a database"))
                rc = STORE_ERR_CORRUPT;
        }
        snprintf(err, errlen, "%s", s->err);
        store_close(s);
        return rc;
    }
    *out = s;
    return STORE_OK;
}

void store_close(store *s) {
    if (!s) return;
    if (s->doc_open) store_doc_abort(s);
    pg_close(s);
    sqlite3_finalize(s->sp_page);
    sqlite3_finalize(s->sp_image);
    sqlite3_finalize(s->sp_chunk);
    if (s->db) sqlite3_close_v2(s->db);
    free(s->doc_path);
    free(s->doc_title);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int store_meta_get(store *s, const char *key, char *buf, size_t buflen) {
    STORE_ROUTE_PG(s, pg_meta_get(s, key, buf, buflen));
    if (!s || !key || !buf || !buflen) return STORE_ERR_ARG;
    STORE_LOCK(s);
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT value FROM meta WHERE key=?", &st);
    if (!rc) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        int step = sqlite3_step(st);
        if (step == SQLITE_ROW) snprintf(buf, buflen, "%s", sqlite3_column_text(st, 0));
        else if (step == SQLITE_DONE) rc = store_set_err(s, STORE_ERR_NOTFOUND, "meta key '%s' not set", key);
        else rc = store_sql_err(s, "read meta");
        sqlite3_finalize(st);
    }
    STORE_UNLOCK(s);
    return rc;
}

int store_meta_set(store *s, const char *key, const char *value) {
    STORE_ROUTE_PG(s, pg_meta_set(s, key, value));
    if (!s || !key || !value) return STORE_ERR_ARG;
    STORE_LOCK(s);
    sqlite3_stmt *st;
    int rc = store_prepare(s, "INSERT OR REPLACE INTO meta VALUES(?, ?)", &st);
    if (!rc) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
        if (sqlite3_step(st) != SQLITE_DONE) rc = store_sql_err(s, "write meta");
        sqlite3_finalize(st);
    }
    STORE_UNLOCK(s);
    return rc;
}

int store_generation(store *s, int64_t *gen) {
    char buf[32];
    int rc = store_meta_get(s, "generation", buf, sizeof buf);
    if (rc == STORE_OK) *gen = strtoll(buf, NULL, 10);
    return rc;
}

/* ---- the ingest queue: the shared store's (store_pg_jobs.c) ---- */
static int no_queue(store *s) {
    return store_set_err(s, STORE_ERR_STATE, "the ingest queue needs the shared store"
                         " (--db postgres://...)");
}
int store_file_put(store *s, const char *sha256, const void *pdf, size_t len) {
    if (!s) return STORE_ERR_ARG;
    STORE_ROUTE_PG(s, pg_file_put(s, sha256, pdf, len));
    return no_queue(s);
}
int store_file_get(store *s, const char *sha256, uint8_t **pdf, size_t *len) {
    if (!s) return STORE_ERR_ARG;
    STORE_ROUTE_PG(s, pg_file_get(s, sha256, pdf, len));
    return no_queue(s);
}
int store_job_submit(store *s, const char *sha256, const char *name, int64_t *job_id) {
    if (!s) return STORE_ERR_ARG;
    STORE_ROUTE_PG(s, pg_job_submit(s, sha256, name, job_id));
    return no_queue(s);
}
int store_job_claim(store *s, const char *worker, int32_t lease_s, int64_t only_id,
                    store_job *out) {
    if (!s) return STORE_ERR_ARG;
    STORE_ROUTE_PG(s, pg_job_claim(s, worker, lease_s, only_id, out));
    return no_queue(s);
}
int store_job_renew(store *s, int64_t id, const char *worker, int32_t lease_s,
                    int32_t pages_done, int32_t pages) {
    if (!s) return STORE_ERR_ARG;
    STORE_ROUTE_PG(s, pg_job_renew(s, id, worker, lease_s, pages_done, pages));
    return no_queue(s);
}
int store_job_finish(store *s, int64_t id, const char *worker, int64_t doc, const char *error) {
    if (!s) return STORE_ERR_ARG;
    STORE_ROUTE_PG(s, pg_job_finish(s, id, worker, doc, error));
    return no_queue(s);
}
int store_job_get(store *s, int64_t id, store_job *out) {
    if (!s) return STORE_ERR_ARG;
    STORE_ROUTE_PG(s, pg_job_get(s, id, out));
    return no_queue(s);
}
int store_job_counts(store *s, int64_t *queued, int64_t *running) {
    if (!s) return STORE_ERR_ARG;
    STORE_ROUTE_PG(s, pg_job_counts(s, queued, running));
    return no_queue(s);
}
