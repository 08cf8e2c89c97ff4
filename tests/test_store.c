/* Tests for index/store: schema + migrations, per-document atomicity (abort, killed
 * writer), sha no-op, replace on change, cascade delete, FTS5 hostile queries, BM25,
 * vectors, disk-full and read-only behaviour, parallel writers, chunk text lines (round
 * trip, blob layout, bad and damaged lines, a v1 database migrated to v2).
 *
 * Both backends run these cases: with MMRAG_STORE_URL=postgres://... (tests/test_store_pg.sh
 * sets it from the test run's PostgreSQL) every "directory" is a fresh collection of that
 * database instead, the SQL checks run there, and the cases about SQLite's own file
 * (schema, disk full, read-only files, damaged blobs, old schema versions) are left out
 * (tests/test_store_pg.c has the PostgreSQL ones). */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <libpq-fe.h>
#include "index/store.h"
#include "test.h"

static char g_err[512];

/* PostgreSQL mode (see the header): the database URL, or NULL for SQLite. */
static const char *pg_url(void) {
    const char *u = getenv("MMRAG_STORE_URL");
    return u && *u ? u : NULL;
}

/* Cases about SQLite's own file; not run on PostgreSQL. */
static int sqlite_only(const char *name) {
    static const char *const names[] = {"schema_and_migrations", "disk_full_rolls_back",
        "readonly_database", "chunk_lines_corrupt_blob_is_absent", "chunk_lines_v1_database_migrates", NULL};
    for (int i = 0; names[i]; i++) if (!strcmp(name, names[i])) return 1;
    return 0;
}
static int case_filter(const char *name) { return !(pg_url() && sqlite_only(name)); }
__attribute__((constructor(200))) static void set_filter(void) { test_case_filter = case_filter; }

/* A fresh directory under MMRAG_TMP for one case (a fresh collection in PostgreSQL mode). */
static const char *fresh_dir(const char *name) {
    static char buf[8][512];
    static int slot;
    char *d = buf[slot++ % 8];
    if (pg_url()) {
        char coll[96];
        int k = snprintf(coll, sizeof coll, "t%d_", (int)getpid());
        for (const char *p = name; *p && k < 80; p++)
            coll[k++] = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ? *p : '_';
        coll[k] = 0;
        snprintf(d, 512, "%s%scollection=%s", pg_url(), strchr(pg_url(), '?') ? "&" : "?", coll);
        return d;
    }
    snprintf(d, 512, "%s/store-%d-%s", test_env("MMRAG_TMP", "/tmp"), (int)getpid(), name);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    if (system(cmd) != 0) return NULL;
    return d;
}

static store *open_dir(const char *dir) {
    store *s = NULL;
    if (store_open(dir, NULL, &s, g_err, sizeof g_err) != STORE_OK) {
        fprintf(stderr, "  open %s: %s\n", dir, g_err);
        return NULL;
    }
    return s;
}

static void sha_of(unsigned seed, char out[65]) {
    unsigned long long x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < 4; i++) {
        x ^= x >> 29; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 32;
        snprintf(out + 16 * i, 17, "%016llx", x);
    }
}

/* Add a document with `pages` pages, one image on page 1 (captioned by chunk 1) and
 * `per_page` chunks per page whose text contains `word`. Returns commit's code. */
static int add_doc(store *s, unsigned seed, const char *path, int pages, int per_page,
                   const char *word, int64_t *id, int64_t *replaced) {
    char sha[65];
    sha_of(seed, sha);
    store_doc_meta m = {.sha256 = sha, .path = path, .title = "Test doc", .pages = pages, .bytes = 1234};
    int64_t existing = 0;
    int rc = store_doc_begin(s, &m, &existing);
    if (rc == STORE_EXISTS) { if (id) *id = existing; return rc; }
    if (rc) return rc;
    static const uint8_t png[] = {0x89, 'P', 'N', 'G', 1, 2, 3};
    int ord = 0;
    for (int p = 1; p <= pages; p++) {
        store_page pg = {p, 612, 792, p == pages};
        if ((rc = store_page_add(s, &pg))) return rc;
        if (p == 1) {
            store_image im = {.idx = 0, .page = 1, .kind = STORE_IMAGE_VECTOR,
                              .box = {0.1f, 0.2f, 0.9f, 0.5f}, .width_px = 300, .height_px = 200,
                              .png = png, .png_len = sizeof png, .phash = 0xF00DF00DF00DF00Dull,
                              .caption_ord = 1};
            if ((rc = store_image_add(s, &im))) return rc;
        }
        for (int c = 0; c < per_page; c++, ord++) {
            char text[256];
            snprintf(text, sizeof text, "page %d chunk %d about %s with filler words seed%u",
                     p, c, word, seed);
            store_chunk ch = {.ord = ord, .page = p,
                              .kind = ord == 1 ? STORE_KIND_CAPTION : STORE_KIND_TEXT,
                              .box = {0.1f, 0.05f * (float)c, 0.9f, 0.05f * (float)c + 0.04f},
                              .image_idx = (p == 1 && c < 2) ? 0 : -1, .text = text};
            if ((rc = store_chunk_add(s, &ch))) return rc;
        }
    }
    return store_doc_commit(s, id, replaced);
}

/* A connection to the collection `url` names, its schema first on the search path. */
static PGconn *pg_connect(const char *url) {
    char base[512], coll[96] = "default";
    snprintf(base, sizeof base, "%s", url);
    char *q = strstr(base, "collection=");
    if (q) {
        snprintf(coll, sizeof coll, "%s", q + 11);
        q[-1] = 0;
    }
    PGconn *c = PQconnectdb(base);
    char sql[160];
    snprintf(sql, sizeof sql, "SET search_path TO \"mmrag_%s\", public", coll);
    PQclear(PQexec(c, sql));
    return c;
}

static int64_t count_sql(const char *dir, const char *sql) {
    if (pg_url()) {
        PGconn *c = pg_connect(dir);
        PGresult *r = PQexec(c, sql);
        int64_t n = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : -1;
        if (n < 0) fprintf(stderr, "  pg: %s: %s", sql, PQerrorMessage(c));
        PQclear(r);
        PQfinish(c);
        return n;
    }
    char path[600];
    snprintf(path, sizeof path, "%s/mmrag.db", dir);
    sqlite3 *db;
    int64_t n = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
            n = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return n;
}

static int exec_sql(const char *dir, const char *sql) {
    char path[600];
    snprintf(path, sizeof path, "%s/mmrag.db", dir);
    sqlite3 *db;
    int rc = sqlite3_open(path, &db);
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

/* FTS5 index matches its content table (external-content consistency); on PostgreSQL
 * every chunk's stored tsvector is the one its text and section make. */
static int fts_ok(const char *dir) {
    if (pg_url())
        return count_sql(dir, "SELECT count(*) FROM chunks WHERE tsv IS DISTINCT FROM"
                              " (setweight(to_tsvector('english', section), 'B') ||"
                              " setweight(to_tsvector('english', text), 'A'))") == 0;
    return exec_sql(dir, "INSERT INTO chunks_fts(chunks_fts, rank) VALUES('integrity-check', 1)") == SQLITE_OK &&
           count_sql(dir, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check != 'ok'") == 0;
}

TEST(schema_and_migrations) {
    const char *d = fresh_dir("schema");
    store *s = open_dir(d);
    CHECK(s);
    char v[32];
    CHECK(store_meta_get(s, "schema_version", v, sizeof v) == STORE_OK);
    CHECK(atoi(v) == STORE_SCHEMA_VERSION);
    int64_t gen = -1;
    CHECK(store_generation(s, &gen) == STORE_OK && gen == 0);
    CHECK(store_meta_get(s, "nope", v, sizeof v) == STORE_ERR_NOTFOUND);
    store_close(s);
    /* journal mode is persistent in the file */
    char path[600];
    snprintf(path, sizeof path, "%s/mmrag.db", d);
    sqlite3 *db;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    CHECK(strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    /* reopen: no migration, still fine */
    CHECK((s = open_dir(d)));
    store_close(s);
    /* a newer schema is a clear error, not a crash or a downgrade */
    CHECK(exec_sql(d, "UPDATE meta SET value='999' WHERE key='schema_version'") == SQLITE_OK);
    s = NULL;
    CHECK(store_open(d, NULL, &s, g_err, sizeof g_err) == STORE_ERR_VERSION);
    CHECK(!s);
    CHECK_MSG(strstr(g_err, "v999") && strstr(g_err, "newer"), "%s", g_err);
    /* garbage version */
    CHECK(exec_sql(d, "UPDATE meta SET value='abc' WHERE key='schema_version'") == SQLITE_OK);
    CHECK(store_open(d, NULL, &s, g_err, sizeof g_err) == STORE_ERR_CORRUPT);
    /* a v0 database (someone else's tables, no meta) is migrated to the current version */
    const char *d0 = fresh_dir("schema0");
    mkdir(d0, 0777);
    CHECK(exec_sql(d0, "CREATE TABLE other(x); INSERT INTO other VALUES(42);") == SQLITE_OK);
    CHECK((s = open_dir(d0)));
    CHECK(store_meta_get(s, "schema_version", v, sizeof v) == STORE_OK && atoi(v) == STORE_SCHEMA_VERSION);
    store_close(s);
    CHECK(count_sql(d0, "SELECT x FROM other") == 42);
    /* a file that is not a database */
    const char *dn = fresh_dir("notdb");
    mkdir(dn, 0777);
    char fp[600];
    snprintf(fp, sizeof fp, "%s/mmrag.db", dn);
    FILE *f = fopen(fp, "w");
    CHECK(f);
    for (int i = 0; i < 200; i++) fputs("this is not a database file at all. ", f);
    fclose(f);
    int rc = store_open(dn, NULL, &s, g_err, sizeof g_err);
    CHECK_MSG(rc == STORE_ERR_CORRUPT, "rc %d: %s", rc, g_err);
    CHECK(strstr(g_err, "mmrag.db"));
    /* read-only open of a missing database */
    store_options o;
    store_options_default(&o);
    o.readonly = 1;
    CHECK(store_open(fresh_dir("missing"), &o, &s, g_err, sizeof g_err) == STORE_ERR_NOTFOUND);
}

TEST(document_roundtrip) {
    const char *d = fresh_dir("roundtrip");
    store *s = open_dir(d);
    CHECK(s);
    int64_t id = 0, rep = -1;
    CHECK(add_doc(s, 1, "/data/a.pdf", 3, 4, "zebra", &id, &rep) == STORE_OK);
    CHECK(id > 0 && rep == 0);
    store_doc_row *docs;
    int32_t n;
    CHECK(store_doc_list(s, &docs, &n) == STORE_OK && n == 1);
    CHECK(docs[0].id == id && docs[0].pages == 3 && docs[0].n_chunks == 12 && docs[0].n_images == 1);
    CHECK(strcmp(docs[0].path, "/data/a.pdf") == 0 && strcmp(docs[0].status, "ready") == 0);
    char sha[65];
    sha_of(1, sha);
    CHECK(strcmp(docs[0].sha256, sha) == 0);
    store_docs_free(docs, n);
    /* lookups: id, sha prefix (any case), path */
    store_doc_row r;
    char spec[32];
    snprintf(spec, sizeof spec, "%lld", (long long)id);
    CHECK(store_doc_get(s, spec, &r) == STORE_OK && r.id == id);
    store_doc_row_clear(&r);
    char pre[9];
    memcpy(pre, sha, 8); pre[8] = 0;
    for (int i = 0; i < 8; i++) if (pre[i] >= 'a') pre[i] -= 32;
    CHECK(store_doc_get(s, pre, &r) == STORE_OK && r.id == id);
    store_doc_row_clear(&r);
    CHECK(store_doc_get(s, "/data/a.pdf", &r) == STORE_OK && r.id == id);
    store_doc_row_clear(&r);
    CHECK(store_doc_get(s, "/data/nope.pdf", &r) == STORE_ERR_NOTFOUND);
    CHECK(strstr(store_errmsg(s), "nope.pdf"));
    /* chunks: order, kinds, anchors, embedding keys */
    store_chunk_row *ch;
    CHECK(store_chunks_get(s, id, 0, &ch, &n) == STORE_OK && n == 12);
    store_image_row *im;
    int32_t ni;
    CHECK(store_images_get(s, id, 0, &im, &ni) == STORE_OK && ni == 1);
    CHECK(im[0].kind == STORE_IMAGE_VECTOR && im[0].width_px == 300 && im[0].png_len == 7);
    CHECK(im[0].phash == 0xF00DF00DF00DF00Dull);
    CHECK_NEAR(im[0].box.y1, 0.5, 1e-6);
    CHECK(im[0].caption_chunk == ch[1].id);
    for (int i = 0; i < n; i++) {
        CHECK(ch[i].ord == i && ch[i].doc == id);
        char key[64];
        if (i < 2) snprintf(key, sizeof key, "%lld_%lld_%lld", (long long)id, (long long)ch[i].id,
                            (long long)im[0].id);
        else snprintf(key, sizeof key, "%lld_%lld_none", (long long)id, (long long)ch[i].id);
        CHECK_MSG(strcmp(ch[i].embedding_key, key) == 0, "%s vs %s", ch[i].embedding_key, key);
        CHECK(ch[i].image_id == (i < 2 ? im[0].id : 0));
    }
    CHECK(ch[1].kind == STORE_KIND_CAPTION && ch[0].kind == STORE_KIND_TEXT);
    store_chunk_row one;
    CHECK(store_chunk_get(s, ch[5].id, &one) == STORE_OK && strcmp(one.text, ch[5].text) == 0);
    CHECK(one.page == 2);
    CHECK_NEAR(one.box.y0, 0.05, 1e-6);
    store_chunk_row_clear(&one);
    store_image_row img;
    CHECK(store_image_get(s, im[0].id, &img) == STORE_OK && img.png[1] == 'P');
    store_image_row_clear(&img);
    store_images_free(im, ni);
    store_chunks_free(ch, n);
    CHECK(store_chunks_get(s, id, 2, &ch, &n) == STORE_OK && n == 4 && ch[0].page == 2);
    store_chunks_free(ch, n);
    store_page_row *pg;
    CHECK(store_pages_get(s, id, &pg, &n) == STORE_OK && n == 3 && pg[2].ocr == 1 && pg[0].ocr == 0);
    CHECK_NEAR(pg[0].height_pt, 792, 1e-3);
    free(pg);
    int64_t gen;
    CHECK(store_generation(s, &gen) == STORE_OK && gen == 1);
    store_close(s);
    CHECK(fts_ok(d));
}

TEST(abort_and_state) {
    const char *d = fresh_dir("abort");
    store *s = open_dir(d);
    CHECK(s);
    char sha[65];
    sha_of(7, sha);
    store_doc_meta m = {.sha256 = sha, .path = "/x.pdf", .title = "x", .pages = 1};
    store_chunk ch = {.ord = 0, .page = 1, .text = "aborted words", .image_idx = -1};
    CHECK(store_chunk_add(s, &ch) == STORE_ERR_STATE);       /* no document open */
    CHECK(store_doc_commit(s, NULL, NULL) == STORE_ERR_STATE);
    CHECK(store_doc_begin(s, &m, NULL) == STORE_OK);
    CHECK(store_doc_begin(s, &m, NULL) == STORE_ERR_STATE);  /* one at a time per handle */
    CHECK(store_chunk_add(s, &ch) == STORE_OK);
    CHECK(store_chunk_add(s, &ch) == STORE_ERR_ARG);         /* duplicate ord aborts the doc */
    CHECK(store_doc_commit(s, NULL, NULL) == STORE_ERR_STATE);
    CHECK(store_doc_begin(s, &m, NULL) == STORE_OK);
    CHECK(store_chunk_add(s, &ch) == STORE_OK);
    store_doc_abort(s);
    CHECK(store_doc_commit(s, NULL, NULL) == STORE_ERR_STATE);
    store_doc_meta bad = {.sha256 = "xyz", .path = "/x.pdf"};
    CHECK(store_doc_begin(s, &bad, NULL) == STORE_ERR_ARG);
    store_counts c;
    CHECK(store_counts_get(s, &c) == STORE_OK && c.docs == 0 && c.chunks == 0);
    store_hit *h;
    int32_t n;
    CHECK(store_search_bm25(s, "aborted", NULL, &h, &n) == STORE_OK && n == 0);
    store_close(s);
    CHECK(fts_ok(d));
}

/* A writer process killed mid-document (or mid-commit) leaves whole documents only. */
TEST(killed_writer_leaves_whole_documents) {
    const char *d = fresh_dir("crash");
    store *s = open_dir(d);
    CHECK(s);
    store_close(s);
    /* 1: the child dies with _exit between chunks, before commit */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        store *c = NULL;
        if (store_open(d, NULL, &c, g_err, sizeof g_err)) _exit(3);
        char sha[65];
        sha_of(99, sha);
        store_doc_meta m = {.sha256 = sha, .path = "/crash.pdf", .title = "c", .pages = 2};
        store_doc_begin(c, &m, NULL);
        store_page pg = {1, 612, 792, 0};
        store_page_add(c, &pg);
        store_chunk ch = {.ord = 0, .page = 1, .text = "halfwritten", .image_idx = -1};
        store_chunk_add(c, &ch);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(count_sql(d, "SELECT count(*) FROM documents") == 0);
    CHECK(count_sql(d, "SELECT count(*) FROM chunks") == 0);
    /* 2: SIGKILL at a random moment while the child commits documents in a loop, once it has
     * committed one (on a loaded machine a fixed delay can pass before the child starts) */
    for (int round = 0; round < 3; round++) {
        int64_t before = count_sql(d, "SELECT count(*) FROM documents");
        pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            store *c = NULL;
            if (store_open(d, NULL, &c, g_err, sizeof g_err)) _exit(3);
            for (unsigned i = 0;; i++) add_doc(c, 1000 * (unsigned)(round + 1) + i, "", 5, 40, "kill", NULL, NULL);
        }
        struct timespec poll = {0, 5 * 1000000L};
        for (int t = 0; t < 4000 && count_sql(d, "SELECT count(*) FROM documents") <= before; t++)
            nanosleep(&poll, NULL);   /* at most 20 s */
        struct timespec ts = {0, (long)(40 + 37 * round) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        CHECK(WIFSIGNALED(st));
    }
    int64_t docs = count_sql(d, "SELECT count(*) FROM documents");
    CHECK_MSG(docs > 0, "the child committed nothing before being killed");
    /* every document is whole: 5 pages, 200 chunks, 1 image; nothing orphaned */
    CHECK(count_sql(d, "SELECT count(*) FROM documents WHERE pages != 5 OR"
                       " (SELECT count(*) FROM chunks c WHERE c.doc = documents.id) != 200 OR"
                       " (SELECT count(*) FROM pages p WHERE p.doc = documents.id) != 5 OR"
                       " (SELECT count(*) FROM images i WHERE i.doc = documents.id) != 1") == 0);
    CHECK(count_sql(d, "SELECT count(*) FROM chunks WHERE doc NOT IN (SELECT id FROM documents)") == 0);
    CHECK(count_sql(d, "SELECT count(*) FROM chunks WHERE embedding_key = ''") == 0);
    CHECK(fts_ok(d));
    CHECK((s = open_dir(d)));
    int64_t gen;
    CHECK(store_generation(s, &gen) == STORE_OK && gen == docs);
    store_close(s);
}

TEST(sha_noop_and_replace) {
    const char *d = fresh_dir("replace");
    store *s = open_dir(d);
    CHECK(s);
    int64_t id1, id2, rep;
    CHECK(add_doc(s, 1, "/p/a.pdf", 2, 3, "aardvark", &id1, &rep) == STORE_OK);
    int64_t gen1;
    CHECK(store_generation(s, &gen1) == STORE_OK);
    /* same bytes: no-op, even from another path */
    CHECK(add_doc(s, 1, "/p/a.pdf", 2, 3, "aardvark", &id2, &rep) == STORE_EXISTS && id2 == id1);
    CHECK(add_doc(s, 1, "/p/copy.pdf", 2, 3, "aardvark", &id2, &rep) == STORE_EXISTS && id2 == id1);
    int64_t gen;
    CHECK(store_generation(s, &gen) == STORE_OK && gen == gen1);
    store_chunk_row *ch;
    int32_t n;
    CHECK(store_chunks_get(s, id1, 0, &ch, &n) == STORE_OK && n == 6);
    int64_t max_old = ch[n - 1].id;
    store_chunks_free(ch, n);
    /* changed bytes at the same path: replaces, in one transaction */
    CHECK(add_doc(s, 2, "/p/a.pdf", 1, 2, "platypus", &id2, &rep) == STORE_OK);
    CHECK(id2 != id1 && rep == id1);
    store_doc_row *docs;
    CHECK(store_doc_list(s, &docs, &n) == STORE_OK && n == 1 && docs[0].id == id2);
    store_docs_free(docs, n);
    store_hit *h;
    CHECK(store_search_bm25(s, "aardvark", NULL, &h, &n) == STORE_OK && n == 0);
    CHECK(store_search_bm25(s, "platypus", NULL, &h, &n) == STORE_OK && n == 2);
    store_hits_free(h, n);
    /* ids are never reused (FAISS ids of deleted chunks must not come back) */
    CHECK(store_chunks_get(s, id2, 0, &ch, &n) == STORE_OK && n == 2 && ch[0].id > max_old);
    store_chunks_free(ch, n);
    CHECK(store_doc_delete(s, id2) == STORE_OK);
    int64_t id3;
    CHECK(add_doc(s, 3, "/p/b.pdf", 1, 1, "x", &id3, NULL) == STORE_OK && id3 > id2);
    store_close(s);
    CHECK(fts_ok(d));
}

TEST(cascade_delete) {
    const char *d = fresh_dir("cascade");
    store *s = open_dir(d);
    CHECK(s);
    int64_t a, b;
    CHECK(add_doc(s, 1, "/a.pdf", 2, 3, "walrus", &a, NULL) == STORE_OK);
    CHECK(add_doc(s, 2, "/b.pdf", 2, 3, "walrus", &b, NULL) == STORE_OK);
    store_chunk_row *ch;
    int32_t n;
    CHECK(store_chunks_get(s, a, 0, &ch, &n) == STORE_OK && n == 6);
    float v[4] = {1, 0, 0, 0};
    store_vec vecs[2] = {{STORE_OWNER_CHUNK, ch[0].id, v}, {STORE_OWNER_CHUNK, ch[1].id, v}};
    CHECK(store_vectors_put(s, "text", "m", 4, vecs, 2, NULL) == STORE_OK);
    int64_t gen0, gen1;
    CHECK(store_generation(s, &gen0) == STORE_OK);
    CHECK(store_doc_delete(s, a) == STORE_OK);
    CHECK(store_generation(s, &gen1) == STORE_OK && gen1 == gen0 + 1);
    CHECK(store_doc_delete(s, a) == STORE_ERR_NOTFOUND);
    store_chunk_row r;
    CHECK(store_chunk_get(s, ch[0].id, &r) == STORE_ERR_NOTFOUND);
    store_chunks_free(ch, n);
    store_counts c;
    CHECK(store_counts_get(s, &c) == STORE_OK);
    CHECK(c.docs == 1 && c.chunks == 6 && c.pages == 2 && c.images == 1 && c.vectors == 0);
    store_hit *h;
    CHECK(store_search_bm25(s, "walrus", NULL, &h, &n) == STORE_OK && n == 6);
    for (int i = 0; i < n; i++) CHECK(h[i].doc == b);
    store_hits_free(h, n);
    store_close(s);
    CHECK(fts_ok(d));
    CHECK(count_sql(d, pg_url() ? "SELECT count(*) FROM chunks WHERE tsv @@ to_tsquery('seed1')"
                                : "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'seed1'") == 0);
}

TEST(fts_hostile_queries_never_error) {
    const char *d = fresh_dir("hostile");
    store *s = open_dir(d);
    CHECK(s);
    CHECK(add_doc(s, 1, "/a.pdf", 1, 3, "NEAR AND quoted", NULL, NULL) == STORE_OK);
    static const char *const qs[] = {
        "\"", "\"\"", "*", "**", "AND OR NOT", "AND", "NEAR(", "NEAR(a b", "(((", ")))", "a)",
        "", "   ", "-", "^", ":", "text:", "col:word", "a AND", "NOT a", "\"unbalanced phrase",
        "{a b}", "a + b", "a*b*", "'; DROP TABLE chunks; --", "\xff\xfe", "caf\xc3\xa9 \"",
        "NEAR(\"a\" \"b\", 3)", "a OR OR b", "\\", "%_%", "chunks_fts", "rank:1"};
    for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
        store_hit *h = NULL;
        int32_t n = -1;
        int rc = store_search_bm25(s, qs[i], NULL, &h, &n);
        CHECK_MSG(rc == STORE_OK, "query [%s]: %s", qs[i], store_errmsg(s));
        CHECK(n >= 0);
        store_hits_free(h, n);
    }
    /* operator words are searched as plain words */
    store_hit *h;
    int32_t n;
    CHECK(store_search_bm25(s, "NEAR(", NULL, &h, &n) == STORE_OK && n == 3);
    store_hits_free(h, n);
    CHECK(store_search_bm25(s, "NOT NEAR", NULL, &h, &n) == STORE_OK && n == 3);
    store_hits_free(h, n);
    char buf[128];
    store_fts_query("a \"b c\" NOT *", buf, sizeof buf);
    CHECK_MSG(strcmp(buf, "\"b c\" OR \"NOT\"") == 0, "%s", buf); /* "a": a function word */
    store_fts_query("x\"y", buf, sizeof buf);
    CHECK_MSG(strcmp(buf, "\"x\" OR \"y\"") == 0, "%s", buf);
    /* function words go, unless nothing else is left; quoted phrases keep theirs */
    store_fts_query("How do I put a heading above the Graph?", buf, sizeof buf);
    CHECK_MSG(strcmp(buf, "\"put\" OR \"heading\" OR \"above\" OR \"Graph?\"") == 0, "%s", buf);
    store_fts_query("who is it?", buf, sizeof buf);
    CHECK_MSG(strcmp(buf, "\"who\" OR \"is\" OR \"it?\"") == 0, "%s", buf);
    store_fts_query("\"the end\" of it", buf, sizeof buf);
    CHECK_MSG(strcmp(buf, "\"the end\"") == 0, "%s", buf);
    /* truncation still NUL-terminates and reports the size needed */
    CHECK(store_fts_query("abcdef", buf, 4) == 9 && strlen(buf) == 3);
    store_close(s);
}

TEST(bm25_ranking_and_filters) {
    const char *d = fresh_dir("bm25");
    store *s = open_dir(d);
    CHECK(s);
    char sha[65];
    sha_of(5, sha);
    store_doc_meta m = {.sha256 = sha, .path = "/r.pdf", .title = "Ranking", .pages = 3};
    CHECK(store_doc_begin(s, &m, NULL) == STORE_OK);
    const char *texts[] = {
        "The quarterly revenue of Acme grew to 42 million dollars in 2021.",
        "Unrelated paragraph about gardening and tomatoes.",
        "Revenue revenue revenue: the revenue chart shows growth.",
        "Le café était fermé; the cafe reopened later.",
        "Running experiments in the lab; runners ran."};
    for (int i = 0; i < 5; i++) {
        store_chunk c = {.ord = i, .page = 1 + i % 3, .kind = i == 2 ? STORE_KIND_CAPTION : STORE_KIND_TEXT,
                         .image_idx = -1, .text = texts[i], .box = {0, 0, 1, 1}};
        CHECK(store_chunk_add(s, &c) == STORE_OK);
    }
    int64_t id;
    CHECK(store_doc_commit(s, &id, NULL) == STORE_OK);
    int64_t other;
    CHECK(add_doc(s, 9, "/o.pdf", 1, 2, "revenue", &other, NULL) == STORE_OK);
    store_hit *h;
    int32_t n;
    CHECK(store_search_bm25(s, "revenue", NULL, &h, &n) == STORE_OK && n == 4);
    CHECK_MSG(strstr(h[0].text, "Revenue revenue"), "top: %s", h[0].text);
    for (int i = 1; i < n; i++) CHECK(h[i - 1].score >= h[i].score);
    CHECK(h[0].score > 0 && strstr(h[0].snippet, "[Revenue]") && strcmp(h[0].title, "Ranking") == 0);
    store_hits_free(h, n);
    /* a question: OR semantics, stop words do not block the match */
    CHECK(store_search_bm25(s, "what was Acme's revenue in 2021?", NULL, &h, &n) == STORE_OK && n >= 1);
    CHECK_MSG(strstr(h[0].text, "Acme"), "top: %s", h[0].text);
    store_hits_free(h, n);
    /* porter stemming and diacritics */
    CHECK(store_search_bm25(s, "run", NULL, &h, &n) == STORE_OK && n == 1);
    store_hits_free(h, n);
    CHECK(store_search_bm25(s, "cafe", NULL, &h, &n) == STORE_OK && n == 1);
    store_hits_free(h, n);
    /* filters: document, kind, page range, k */
    store_search_opts o;
    store_search_opts_default(&o);
    o.docs = &other; o.n_docs = 1;
    CHECK(store_search_bm25(s, "revenue", &o, &h, &n) == STORE_OK && n == 2);
    for (int i = 0; i < n; i++) CHECK(h[i].doc == other);
    store_hits_free(h, n);
    store_search_opts_default(&o);
    o.kind = STORE_KIND_CAPTION;
    CHECK(store_search_bm25(s, "revenue", &o, &h, &n) == STORE_OK && n == 2);
    for (int i = 0; i < n; i++) CHECK(h[i].kind == STORE_KIND_CAPTION);
    store_hits_free(h, n);
    o.docs = &id; o.n_docs = 1;
    CHECK(store_search_bm25(s, "revenue", &o, &h, &n) == STORE_OK && n == 1 && h[0].kind == STORE_KIND_CAPTION);
    CHECK(strstr(h[0].text, "chart"));
    store_hits_free(h, n);
    store_search_opts_default(&o);
    o.page_min = 2; o.page_max = 3; o.docs = &id; o.n_docs = 1;
    CHECK(store_search_bm25(s, "revenue", &o, &h, &n) == STORE_OK && n == 1 && h[0].page == 3);
    store_hits_free(h, n);
    store_search_opts_default(&o);
    o.k = 1;
    CHECK(store_search_bm25(s, "revenue", &o, &h, &n) == STORE_OK && n == 1);
    store_hits_free(h, n);
    store_close(s);
}

struct collect { int n; int64_t ids[16]; float first[16]; int32_t dims[16]; };
static int collect_cb(void *u, int32_t kind, int64_t id, int64_t doc, int32_t dim, const float *v) {
    struct collect *c = u;
    (void)kind; (void)doc;
    if (c->n < 16) { c->ids[c->n] = id; c->first[c->n] = v[0]; c->dims[c->n] = dim; }
    c->n++;
    return 0;
}
static int stop_cb(void *u, int32_t kind, int64_t id, int64_t doc, int32_t dim, const float *v) {
    (void)kind; (void)id; (void)doc; (void)dim; (void)v;
    return ++*(int *)u == 2 ? 77 : 0;
}

TEST(vectors) {
    const char *d = fresh_dir("vectors");
    store *s = open_dir(d);
    CHECK(s);
    int64_t a;
    CHECK(add_doc(s, 1, "/a.pdf", 1, 5, "vec", &a, NULL) == STORE_OK);
    store_chunk_row *ch;
    int32_t n;
    CHECK(store_chunks_get(s, a, 0, &ch, &n) == STORE_OK && n == 5);
    /* missing lists, paged by after_id */
    store_todo *t;
    int32_t nt;
    CHECK(store_chunks_without_vector(s, "text", "minilm", 0, 3, &t, &nt) == STORE_OK && nt == 3);
    CHECK(t[0].id == ch[0].id && strstr(t[0].text, "vec") && !t[0].png);
    int64_t last = t[2].id;
    store_todos_free(t, nt);
    CHECK(store_chunks_without_vector(s, "text", "minilm", last, 3, &t, &nt) == STORE_OK && nt == 2);
    store_todos_free(t, nt);
    float v0[3] = {0.5f, 1, 2}, v1[3] = {1.5f, 1, 2}, v2[3] = {2.5f, 1, 2};
    store_vec vecs[3] = {{STORE_OWNER_CHUNK, ch[0].id, v0}, {STORE_OWNER_CHUNK, ch[3].id, v1},
                         {STORE_OWNER_CHUNK, 999999, v2}};
    int32_t w = -1;
    CHECK(store_vectors_put(s, "text", "minilm", 3, vecs, 3, &w) == STORE_OK && w == 2);
    CHECK(store_chunks_without_vector(s, "text", "minilm", 0, 10, &t, &nt) == STORE_OK && nt == 3);
    for (int i = 0; i < nt; i++) CHECK(t[i].id != ch[0].id && t[i].id != ch[3].id);
    store_todos_free(t, nt);
    /* other model: still all missing */
    CHECK(store_chunks_without_vector(s, "text", "other", 0, 10, &t, &nt) == STORE_OK && nt == 5);
    store_todos_free(t, nt);
    /* replace keeps one row */
    vecs[0].v = v2;
    CHECK(store_vectors_put(s, "text", "minilm", 3, vecs, 1, &w) == STORE_OK && w == 1);
    int64_t cnt;
    CHECK(store_vectors_count(s, "text", "minilm", -1, &cnt) == STORE_OK && cnt == 2);
    float buf[8];
    int32_t dim;
    CHECK(store_vector_get(s, STORE_OWNER_CHUNK, ch[0].id, "text", "minilm", buf, 8, &dim) == STORE_OK);
    CHECK(dim == 3 && buf[0] == 2.5f);
    CHECK(store_vector_get(s, STORE_OWNER_CHUNK, ch[0].id, "text", "minilm", buf, 2, &dim) == STORE_ERR_ARG);
    CHECK(store_vector_get(s, STORE_OWNER_CHUNK, ch[1].id, "text", "minilm", buf, 8, &dim) == STORE_ERR_NOTFOUND);
    /* images: todo carries preview and caption + anchored text */
    CHECK(store_images_without_vector(s, "image", "clip", 0, 10, &t, &nt) == STORE_OK && nt == 1);
    CHECK(t[0].png_len == 7 && t[0].width_px == 300);
    CHECK_MSG(strstr(t[0].text, "chunk 1") && strstr(t[0].text, "chunk 0"), "%s", t[0].text);
    CHECK(strstr(t[0].text, "chunk 1") < strstr(t[0].text, "chunk 0"));   /* caption first */
    int64_t img = t[0].id;
    store_todos_free(t, nt);
    float iv[2] = {9, 9};
    store_vec ivec = {STORE_OWNER_IMAGE, img, iv};
    CHECK(store_vectors_put(s, "image", "clip", 2, &ivec, 1, &w) == STORE_OK && w == 1);
    CHECK(store_images_without_vector(s, "image", "clip", 0, 10, &t, &nt) == STORE_OK && nt == 0 && !t);
    /* a replaced encoder's vectors go, only its own: the image is missing one again */
    int64_t dropped = -1;
    CHECK(store_vectors_drop(s, "image", "clip", &dropped) == STORE_OK && dropped == 1);
    CHECK(store_vectors_drop(s, "image", "clip", &dropped) == STORE_OK && dropped == 0);
    CHECK(store_vectors_drop(s, "pixels", "clip", NULL) == STORE_ERR_ARG);
    CHECK(store_images_without_vector(s, "image", "clip", 0, 10, &t, &nt) == STORE_OK && nt == 1);
    store_todos_free(t, nt);
    CHECK(store_vectors_count(s, "text", "minilm", -1, &cnt) == STORE_OK && cnt == 2);
    CHECK(store_vectors_put(s, "image", "clip", 2, &ivec, 1, &w) == STORE_OK && w == 1);
    /* iterate in id order; kind filter; early stop returns the callback's code */
    struct collect c = {0};
    CHECK(store_vectors_foreach(s, "text", "minilm", -1, collect_cb, &c) == STORE_OK);
    CHECK(c.n == 2 && c.ids[0] == ch[0].id && c.ids[1] == ch[3].id && c.first[1] == 1.5f && c.dims[0] == 3);
    memset(&c, 0, sizeof c);
    CHECK(store_vectors_foreach(s, "image", "clip", STORE_OWNER_IMAGE, collect_cb, &c) == STORE_OK);
    CHECK(c.n == 1 && c.ids[0] == img && c.first[0] == 9);
    memset(&c, 0, sizeof c);
    CHECK(store_vectors_foreach(s, "image", "clip", STORE_OWNER_CHUNK, collect_cb, &c) == STORE_OK && c.n == 0);
    int calls = 0;
    CHECK(store_vectors_put(s, "text", "minilm", 3, &vecs[1], 1, &w) == STORE_OK);
    vecs[2].owner_id = ch[4].id;
    CHECK(store_vectors_put(s, "text", "minilm", 3, &vecs[2], 1, &w) == STORE_OK);
    CHECK(store_vectors_foreach(s, "text", "minilm", -1, stop_cb, &calls) == 77 && calls == 2);
    /* bad arguments */
    CHECK(store_vectors_put(s, "audio", "m", 3, vecs, 1, NULL) == STORE_ERR_ARG);
    CHECK(store_vectors_put(s, "text", "", 3, vecs, 1, NULL) == STORE_ERR_ARG);
    CHECK(store_vectors_put(s, "text", "m", 0, vecs, 1, NULL) == STORE_ERR_ARG);
    store_chunks_free(ch, n);
    store_close(s);
}

/* A full disk (simulated with max_page_count) rolls back the document; the store stays
 * intact and usable. */
TEST(disk_full_rolls_back) {
    const char *d = fresh_dir("full");
    store *s = open_dir(d);
    CHECK(s);
    CHECK(add_doc(s, 1, "/small.pdf", 1, 2, "small", NULL, NULL) == STORE_OK);
    store_close(s);
    int64_t pages = count_sql(d, "PRAGMA page_count");
    CHECK(pages > 0);
    store_options o;
    store_options_default(&o);
    o.max_page_count = pages + 4;
    CHECK(store_open(d, &o, &s, g_err, sizeof g_err) == STORE_OK);
    int64_t gen0;
    CHECK(store_generation(s, &gen0) == STORE_OK);
    int rc = add_doc(s, 2, "/big.pdf", 40, 50, "big", NULL, NULL);
    CHECK_MSG(rc == STORE_ERR_FULL, "rc %d: %s", rc, store_errmsg(s));
    CHECK_MSG(strstr(store_errmsg(s), "full"), "%s", store_errmsg(s));
    /* vectors too */
    store_chunk_row *ch;
    int32_t n;
    store_doc_row r;
    CHECK(store_doc_get(s, "/small.pdf", &r) == STORE_OK);
    CHECK(store_chunks_get(s, r.id, 0, &ch, &n) == STORE_OK && n == 2);
    store_doc_row_clear(&r);
    static float big[65536];
    store_vec vv[2] = {{STORE_OWNER_CHUNK, ch[0].id, big}, {STORE_OWNER_CHUNK, ch[1].id, big}};
    rc = store_vectors_put(s, "text", "m", 65536, vv, 2, NULL);
    CHECK_MSG(rc == STORE_ERR_FULL, "rc %d: %s", rc, store_errmsg(s));
    store_chunks_free(ch, n);
    int64_t gen1;
    CHECK(store_generation(s, &gen1) == STORE_OK && gen1 == gen0);
    store_counts c;
    CHECK(store_counts_get(s, &c) == STORE_OK && c.docs == 1 && c.chunks == 2 && c.vectors == 0);
    /* still usable for a small document */
    CHECK(add_doc(s, 3, "/tiny.pdf", 1, 1, "tiny", NULL, NULL) == STORE_OK);
    store_close(s);
    CHECK(fts_ok(d));
    CHECK(count_sql(d, "SELECT count(*) FROM documents") == 2);
}

TEST(readonly_database) {
    const char *d = fresh_dir("ro");
    store *s = open_dir(d);
    CHECK(s);
    CHECK(add_doc(s, 1, "/a.pdf", 1, 2, "ro", NULL, NULL) == STORE_OK);
    store_close(s);
    /* 1: read-only open: reads work, writes fail cleanly */
    store_options o;
    store_options_default(&o);
    o.readonly = 1;
    CHECK(store_open(d, &o, &s, g_err, sizeof g_err) == STORE_OK);
    store_doc_row *docs;
    int32_t n;
    CHECK(store_doc_list(s, &docs, &n) == STORE_OK && n == 1);
    int64_t id = docs[0].id;
    store_docs_free(docs, n);
    int rc = add_doc(s, 2, "/b.pdf", 1, 2, "ro", NULL, NULL);
    CHECK_MSG(rc == STORE_ERR_READONLY, "rc %d: %s", rc, store_errmsg(s));
    CHECK(store_doc_delete(s, id) == STORE_ERR_READONLY);
    store_close(s);
    CHECK(count_sql(d, "SELECT count(*) FROM documents") == 1);
    /* 2: files and directory without write permission (as an unprivileged user) */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "chmod -R a+rX,a-w '%s' && chmod a+x '%s'", d,
                 test_env("MMRAG_TMP", "/tmp"));
        if (system(cmd) != 0) _exit(10);
        if (getuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(11);
        store *c = NULL;
        int orc = store_open(d, NULL, &c, g_err, sizeof g_err);
        if (orc != STORE_OK) {
            /* refusing to open read-write is acceptable if the message says why */
            _exit(orc == STORE_ERR_READONLY && strstr(g_err, "read-only") ? 0 : 12);
        }
        int arc = add_doc(c, 3, "/c.pdf", 1, 2, "ro", NULL, NULL);
        fprintf(stderr, "  (read-only dir: %s)\n", store_errmsg(c));
        _exit(arc == STORE_ERR_READONLY ? 0 : 13);
    }
    int st;
    waitpid(pid, &st, 0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s'", d);
    CHECK(system(cmd) == 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", WEXITSTATUS(st));
    CHECK(count_sql(d, "SELECT count(*) FROM documents") == 1);
    CHECK(fts_ok(d));
}

struct writer_arg { const char *dir; int base; int n; int fails; };
static void *writer_thread(void *p) {
    struct writer_arg *a = p;
    store *s = NULL;
    char err[256];
    if (store_open(a->dir, NULL, &s, err, sizeof err)) { a->fails = a->n; return NULL; }
    for (int i = 0; i < a->n; i++) {
        char path[64];
        snprintf(path, sizeof path, "/w/%d.pdf", a->base + i);
        if (add_doc(s, (unsigned)(a->base + i), path, 3, 10, "parallel", NULL, NULL) != STORE_OK) a->fails++;
    }
    store_close(s);
    return NULL;
}
struct reader_arg { store *s; int errors; int done; };
static void *reader_thread(void *p) {
    struct reader_arg *a = p;
    for (int i = 0; i < 200 && !a->done; i++) {
        store_hit *h;
        int32_t n;
        if (store_search_bm25(a->s, "parallel", NULL, &h, &n) != STORE_OK) a->errors++;
        else store_hits_free(h, n);
        /* a consistent snapshot: every visible document is whole */
        store_doc_row *docs;
        if (store_doc_list(a->s, &docs, &n) != STORE_OK) a->errors++;
        else {
            for (int j = 0; j < n; j++) if (docs[j].n_chunks != 30) a->errors++;
            store_docs_free(docs, n);
        }
    }
    return NULL;
}

TEST(parallel_writers_and_shared_reader) {
    const char *d = fresh_dir("parallel");
    store *s = open_dir(d);
    CHECK(s);
    pthread_t w[3], r[2];
    struct writer_arg wa[3];
    struct reader_arg ra = {s, 0, 0};
    for (int i = 0; i < 3; i++) {
        wa[i] = (struct writer_arg){d, 100 * (i + 1), 15, 0};
        pthread_create(&w[i], NULL, writer_thread, &wa[i]);
    }
    for (int i = 0; i < 2; i++) pthread_create(&r[i], NULL, reader_thread, &ra);  /* one shared handle */
    for (int i = 0; i < 3; i++) pthread_join(w[i], NULL);
    ra.done = 1;
    for (int i = 0; i < 2; i++) pthread_join(r[i], NULL);
    for (int i = 0; i < 3; i++) CHECK_MSG(wa[i].fails == 0, "writer %d: %d failed", i, wa[i].fails);
    CHECK(ra.errors == 0);
    store_counts c;
    CHECK(store_counts_get(s, &c) == STORE_OK && c.docs == 45 && c.chunks == 45 * 30);
    int64_t gen;
    CHECK(store_generation(s, &gen) == STORE_OK && gen == 45);
    store_close(s);
    CHECK(fts_ok(d));
}

/* Several processes creating the same new database at once all succeed (WAL switch and
 * migration are retried/serialized, not reported as "database is locked"). */
TEST(concurrent_create) {
    for (int round = 0; round < 5; round++) {
        char name[32];
        snprintf(name, sizeof name, "create%d", round);
        const char *d = fresh_dir(name);
        pid_t kids[6];
        for (int k = 0; k < 6; k++) {
            kids[k] = fork();
            if (kids[k] == 0) {
                store *c = NULL;
                char err[512];
                if (store_open(d, NULL, &c, err, sizeof err) != STORE_OK) {
                    fprintf(stderr, "  child %d: %s\n", k, err);
                    _exit(1);
                }
                int rc = add_doc(c, (unsigned)(100 * round + k), "", 1, 2, "create", NULL, NULL);
                store_close(c);
                _exit(rc == STORE_OK ? 0 : 2);
            }
        }
        int bad = 0;
        for (int k = 0; k < 6; k++) {
            int st;
            waitpid(kids[k], &st, 0);
            bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
        }
        CHECK_MSG(bad == 0, "round %d: %d of 6 processes failed", round, bad);
        CHECK(count_sql(d, "SELECT count(*) FROM documents") == 6);
    }
}

/* ---- chunk text lines (schema v2) ------------------------------------------------- */

static const char k_lines_text[] = "First line of text\nsecond line | cell\nend.";
static const store_line k_lines[3] = {
    {0, 18, {0.25f, 0.1f, 0.75f, 0.12f}},
    {19, 18, {0.25f, 0.125f, 0.7f, 0.145f}},
    {38, 4, {0.25f, 0.15f, 0.3f, 0.17f}},
};

/* One document of two chunks: ord 0 with k_lines, ord 1 without lines. */
static int add_lines_doc(store *s, unsigned seed, int64_t *id) {
    char sha[65];
    sha_of(seed, sha);
    store_doc_meta m = {.sha256 = sha, .path = "", .title = "Lines", .pages = 1, .bytes = 10};
    int rc = store_doc_begin(s, &m, NULL);
    store_page pg = {1, 612, 792, 0};
    if (rc || (rc = store_page_add(s, &pg))) return rc;
    store_chunk a = {.ord = 0, .page = 1, .kind = STORE_KIND_TEXT, .box = {0.25f, 0.1f, 0.75f, 0.17f},
                     .image_idx = -1, .text = k_lines_text, .lines = k_lines, .n_lines = 3};
    store_chunk b = {.ord = 1, .page = 1, .kind = STORE_KIND_TEXT, .box = {0.1f, 0.5f, 0.9f, 0.6f},
                     .image_idx = -1, .text = "no lines here"};
    if ((rc = store_chunk_add(s, &a)) || (rc = store_chunk_add(s, &b))) return rc;
    return store_doc_commit(s, id, NULL);
}

/* the ids of the document's chunks in order (ids[0], ids[1]) */
static int chunk_ids(store *s, int64_t doc, int64_t ids[2]) {
    store_chunk_row *ch;
    int32_t n;
    if (store_chunks_get(s, doc, 0, &ch, &n) != STORE_OK) return -1;
    int ok = n == 2;
    if (ok) { ids[0] = ch[0].id; ids[1] = ch[1].id; }
    store_chunks_free(ch, n);
    return ok ? 0 : -1;
}

static int lines_equal(const store_line *a, const store_line *b, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (a[i].off != b[i].off || a[i].len != b[i].len || a[i].box.x0 != b[i].box.x0 ||
            a[i].box.y0 != b[i].box.y0 || a[i].box.x1 != b[i].box.x1 || a[i].box.y1 != b[i].box.y1)
            return 0;
    return 1;
}

TEST(chunk_lines_roundtrip) {
    const char *d = fresh_dir("lines");
    store *s = open_dir(d);
    CHECK(s);
    int64_t id = 0, ids[2];
    CHECK(add_lines_doc(s, 700, &id) == STORE_OK && id > 0);
    CHECK(chunk_ids(s, id, ids) == 0);
    store_line *l = NULL;
    int32_t n = -1;
    CHECK(store_chunk_lines(s, ids[0], &l, &n) == STORE_OK && n == 3 && l);
    CHECK(lines_equal(l, k_lines, 3));
    free(l);
    /* a chunk written without lines, and no chunk at all */
    l = (store_line *)1;
    CHECK(store_chunk_lines(s, ids[1], &l, &n) == STORE_OK && n == 0 && l == NULL);
    CHECK(store_chunk_lines(s, ids[1] + 100, &l, &n) == STORE_ERR_NOTFOUND && n == 0 && l == NULL);
    CHECK(store_chunk_lines(s, ids[0], NULL, &n) == STORE_ERR_ARG);
    store_close(s);
    /* the blob layout store.h documents: 24-byte little-endian records */
    CHECK(count_sql(d, "SELECT length(lines) FROM chunks WHERE lines IS NOT NULL") == 72);
    CHECK(count_sql(d, pg_url() ? "SELECT count(*) FROM chunks WHERE lines IS NOT NULL AND upper(encode(substr(lines, 1, 24),"
                          " 'hex')) = '00000000120000000000803ECDCCCC3D0000403F8FC2F53D'" : "SELECT count(*) FROM chunks WHERE lines IS NOT NULL AND"
                       " substr(hex(lines), 1, 48) = '00000000120000000000803ECDCCCC3D0000403F8FC2F53D'") == 1);
    CHECK(count_sql(d, "SELECT count(*) FROM chunks WHERE lines IS NULL") == 1);
    CHECK(fts_ok(d));
}

/* Bad lines are refused at the spool (STORE_ERR_ARG) and the document stays open. */
TEST(chunk_lines_refused_when_bad) {
    const char *d = fresh_dir("linesbad");
    store *s = open_dir(d);
    CHECK(s);
    char sha[65];
    sha_of(701, sha);
    store_doc_meta m = {.sha256 = sha, .path = "", .title = "Bad lines", .pages = 1, .bytes = 10};
    CHECK(store_doc_begin(s, &m, NULL) == STORE_OK);
    store_line past = {40, 5, {0, 0, 1, 1}};                   /* ends past the 42-byte text */
    store_line back[2] = {{10, 5, {0, 0, 1, 1}}, {12, 3, {0, 0, 1, 1}}};   /* overlapping */
    store_line nan = {0, 5, {0, NAN, 1, 1}};
    store_chunk c = {.ord = 0, .page = 1, .kind = STORE_KIND_TEXT, .image_idx = -1, .text = k_lines_text};
    c.lines = &past; c.n_lines = 1;
    CHECK(store_chunk_add(s, &c) == STORE_ERR_ARG && strstr(store_errmsg(s), "lines"));
    c.lines = back; c.n_lines = 2;
    CHECK(store_chunk_add(s, &c) == STORE_ERR_ARG);
    c.lines = &nan; c.n_lines = 1;
    CHECK(store_chunk_add(s, &c) == STORE_ERR_ARG);
    c.lines = NULL; c.n_lines = 2;
    CHECK(store_chunk_add(s, &c) == STORE_ERR_ARG);
    c.lines = k_lines; c.n_lines = -1;
    CHECK(store_chunk_add(s, &c) == STORE_ERR_ARG);
    c.n_lines = 3;
    CHECK(store_chunk_add(s, &c) == STORE_OK);
    int64_t id = 0;
    CHECK(store_doc_commit(s, &id, NULL) == STORE_OK && id > 0);
    store_counts cn;
    CHECK(store_counts_get(s, &cn) == STORE_OK && cn.chunks == 1);
    store_close(s);
}

/* A damaged blob reads as "no lines", never as ranges past the text. */
TEST(chunk_lines_corrupt_blob_is_absent) {
    const char *d = fresh_dir("linescorrupt");
    store *s = open_dir(d);
    CHECK(s);
    int64_t id = 0, ids[2];
    CHECK(add_lines_doc(s, 702, &id) == STORE_OK);
    CHECK(chunk_ids(s, id, ids) == 0);
    store_close(s);
    static const char *const blobs[] = {
        "x'0102'",                                                  /* not a multiple of 24 */
        "x''",                                                      /* empty */
        "'a TEXT value, 24 bytes!!'",                               /* not a blob */
        "x'00000000E803000000000000000000000000000000000000'",   /* off 0, len 1000: past the text */
        "x'0A0000000500000000000000000000000000000000000000"
        "03000000000000000000803F000000000000000000000000'",    /* ranges out of order */
        "x'000000000100000000000000000000000000C07F00000000'",   /* a NaN */
    };
    for (size_t i = 0; i < sizeof blobs / sizeof *blobs; i++) {
        char sql[512];
        snprintf(sql, sizeof sql, "UPDATE chunks SET lines = %s WHERE id = %lld", blobs[i], (long long)ids[0]);
        CHECK_MSG(exec_sql(d, sql) == SQLITE_OK, "%s", sql);
        CHECK((s = open_dir(d)));
        store_line *l = (store_line *)1;
        int32_t n = -1;
        int got = store_chunk_lines(s, ids[0], &l, &n);
        store_close(s);
        CHECK_MSG(got == STORE_OK && n == 0 && l == NULL, "blob %zu: rc %d, %d lines", i, got, n);
    }
    /* the chunk itself still reads */
    CHECK((s = open_dir(d)));
    store_chunk_row r;
    CHECK(store_chunk_get(s, ids[0], &r) == STORE_OK && strcmp(r.text, k_lines_text) == 0);
    store_chunk_row_clear(&r);
    store_close(s);
}

/* A collection written by schema v1 (no chunks.lines column) opens, is migrated in
 * place, reads as before with no lines, and takes new chunks with lines. */
TEST(chunk_lines_v1_database_migrates) {
    const char *d = fresh_dir("linesv1");
    store *s = open_dir(d);
    CHECK(s);
    CHECK(add_doc(s, 710, "/data/old.pdf", 2, 3, "walrus", NULL, NULL) == STORE_OK);
    store_close(s);
    /* back to the v1 shape: no lines (v2), no section, its FTS column and no sentence
     * vectors (v3); the version 1 */
    CHECK(exec_sql(d, "DROP TRIGGER chunks_ai; DROP TRIGGER chunks_ad; DROP TRIGGER chunks_au;"
                      " DROP TABLE chunks_fts; DROP TABLE sentence_vectors;"
                      " ALTER TABLE chunks DROP COLUMN lines; ALTER TABLE chunks DROP COLUMN section;"
                      " CREATE VIRTUAL TABLE chunks_fts USING fts5(text, content='chunks',"
                      " content_rowid='id', tokenize='porter unicode61 remove_diacritics 2');"
                      " CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN"
                      " INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text); END;"
                      " CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN"
                      " INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text); END;"
                      " CREATE TRIGGER chunks_au AFTER UPDATE OF text ON chunks BEGIN"
                      " INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);"
                      " INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text); END;"
                      " INSERT INTO chunks_fts(chunks_fts) VALUES ('rebuild');"
                      " UPDATE meta SET value='1' WHERE key='schema_version'") == SQLITE_OK);
    CHECK(count_sql(d, "SELECT count(*) FROM pragma_table_info('chunks') WHERE name='lines'") == 0);
    CHECK(count_sql(d, "SELECT count(*) FROM pragma_table_info('chunks') WHERE name='section'") == 0);
    CHECK((s = open_dir(d)));
    char v[32];
    CHECK(store_meta_get(s, "schema_version", v, sizeof v) == STORE_OK && atoi(v) == STORE_SCHEMA_VERSION);
    CHECK(STORE_SCHEMA_VERSION >= 2);
    store_doc_row doc;
    CHECK(store_doc_get(s, "/data/old.pdf", &doc) == STORE_OK && doc.n_chunks == 6);
    store_chunk_row *ch;
    int32_t n;
    CHECK(store_chunks_get(s, doc.id, 0, &ch, &n) == STORE_OK && n == 6);
    store_doc_row_clear(&doc);
    for (int32_t i = 0; i < n; i++) {
        store_line *l = (store_line *)1;
        int32_t nl = -1;
        CHECK(store_chunk_lines(s, ch[i].id, &l, &nl) == STORE_OK && nl == 0 && l == NULL);
    }
    store_chunks_free(ch, n);
    store_hit *hits;
    int32_t nh;
    CHECK(store_search_bm25(s, "walrus", NULL, &hits, &nh) == STORE_OK && nh == 6);
    store_hits_free(hits, nh);
    /* new rows carry lines */
    int64_t id = 0, ids[2];
    CHECK(add_lines_doc(s, 711, &id) == STORE_OK && chunk_ids(s, id, ids) == 0);
    store_line *l = NULL;
    int32_t nl = 0;
    CHECK(store_chunk_lines(s, ids[0], &l, &nl) == STORE_OK && nl == 3 && lines_equal(l, k_lines, 3));
    free(l);
    store_close(s);
    CHECK(count_sql(d, "SELECT count(*) FROM pragma_table_info('chunks') WHERE name='lines'") == 1);
    CHECK(count_sql(d, "SELECT count(*) FROM chunks WHERE lines IS NULL") == 7);
    CHECK(fts_ok(d));
}

/* Section paths are stored with their chunk, searched as a second BM25 column whose
 * weight counts (0 = ignored), and read back; sentence vectors score by the best
 * sentence, a chunk without them reads -2, and they go with their document. */
TEST(sections_and_sentence_vectors) {
    const char *d = fresh_dir("sections");
    store *s = open_dir(d);
    CHECK(s);
    char sha[65];
    sha_of(820, sha);
    store_doc_meta m = {.sha256 = sha, .path = "/data/sec.pdf", .title = "Sec", .pages = 1, .bytes = 10};
    int64_t existing = 0, id = 0;
    CHECK(store_doc_begin(s, &m, &existing) == STORE_OK);
    store_page pg = {1, 612, 792, 0};
    CHECK(store_page_add(s, &pg) == STORE_OK);
    store_chunk a = {.ord = 0, .page = 1, .kind = STORE_KIND_TEXT, .box = {0, 0, 1, 0.5f}, .image_idx = -1,
                     .text = "Syntax: set the base of the axis", .section = "Commands > Set > Logscale"};
    store_chunk b = {.ord = 1, .page = 1, .kind = STORE_KIND_TEXT, .box = {0, 0.5f, 1, 1}, .image_idx = -1,
                     .text = "logscale mentioned once in plain text", .section = NULL};
    CHECK(store_chunk_add(s, &a) == STORE_OK && store_chunk_add(s, &b) == STORE_OK);
    CHECK(store_doc_commit(s, &id, NULL) == STORE_OK);
    int64_t ids[2];
    CHECK(chunk_ids(s, id, ids) == 0);
    store_chunk_row r;
    CHECK(store_chunk_get(s, ids[0], &r) == STORE_OK && strcmp(r.section, "Commands > Set > Logscale") == 0);
    store_chunk_row_clear(&r);
    CHECK(store_chunk_get(s, ids[1], &r) == STORE_OK && strcmp(r.section, "") == 0);
    store_chunk_row_clear(&r);
    /* "logscale" is in the text of b and only in the section of a */
    store_search_opts o;
    store_search_opts_default(&o);
    store_hit *h;
    int32_t nh;
    o.section_weight = 0;  /* a matches, but its section does not count */
    CHECK(store_search_bm25(s, "logscale", &o, &h, &nh) == STORE_OK && nh == 2 && h[0].chunk_id == ids[1]);
    store_hits_free(h, nh);
    o.section_weight = 5;
    CHECK(store_search_bm25(s, "logscale", &o, &h, &nh) == STORE_OK && nh == 2 && h[0].chunk_id == ids[0]);
    store_hits_free(h, nh);
    /* sentence vectors: a has two (dim 2), b none yet */
    store_todo *todo;
    int32_t nt;
    CHECK(store_chunks_without_sentvecs(s, "m", 0, 10, &todo, &nt) == STORE_OK && nt == 2 &&
          strcmp(todo[0].section, "Commands > Set > Logscale") == 0);
    store_todos_free(todo, nt);
    const float va[4] = {1, 0, 0.6f, 0.8f};
    store_sentvec rows[2] = {{ids[0], 2, va}, {ids[1], 0, NULL}};
    int32_t w = 0;
    CHECK(store_sentvecs_put(s, "m", 2, rows, 2, &w) == STORE_OK && w == 2);
    CHECK(store_chunks_without_sentvecs(s, "m", 0, 10, &todo, &nt) == STORE_OK && nt == 0);
    store_todos_free(todo, nt);
    const float q[2] = {0, 1};
    float best[2];
    CHECK(store_sentvecs_best(s, "m", q, 2, ids, 2, best) == STORE_OK);
    CHECK(fabsf(best[0] - 0.8f) < 1e-6f && best[1] == -2.0f);
    CHECK(store_sentvecs_best(s, "other", q, 2, ids, 2, best) == STORE_OK && best[0] == -2.0f);
    int64_t cnt = 0;
    CHECK(store_sentvecs_count(s, "m", &cnt) == STORE_OK && cnt == 2);
    /* a bad batch is refused whole */
    store_sentvec bad = {ids[0], -1, va};
    CHECK(store_sentvecs_put(s, "m", 2, &bad, 1, &w) == STORE_ERR_ARG && w == 0);
    CHECK(store_doc_delete(s, id) == STORE_OK);
    CHECK(store_sentvecs_count(s, "m", &cnt) == STORE_OK && cnt == 0);
    store_close(s);
    CHECK(fts_ok(d));
}
