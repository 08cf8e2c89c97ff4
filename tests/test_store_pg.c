/* Tests for the shared store (index/store_pg*.c) on a real PostgreSQL + pgvector: the
 * server scripts/run-tests.sh starts for the run (MMRAG_TEST_PG); without one every case
 * is skipped and says so. The cases both backends share run from test_store.c
 * (tests/test_store_pg.sh); these are the ones only the shared store has: a database
 * that is down, collections, search in the database (HNSW against exact), writers on
 * several connections committing the same file, schema versions. */
#include <libpq-fe.h>
#include <stdarg.h>
#include <math.h>
#include <pthread.h>
#include <unistd.h>
#include "index/store.h"
#include "test.h"

static char g_err[512];

static const char *url(void) { return getenv("MMRAG_TEST_PG"); }
#define NEED_PG() do { if (!url() || !*url()) SKIP("no PostgreSQL test server (MMRAG_TEST_PG)"); } while (0)

/* URL of a fresh collection for one case. */
static const char *coll(const char *name) {
    static char buf[4][512];
    static int slot;
    char *d = buf[slot++ % 4];
    snprintf(d, 512, "%s%scollection=p%d_%s", url(), strchr(url(), '?') ? "&" : "?", (int)getpid(), name);
    return d;
}

static void sha_of(unsigned seed, char out[65]) {
    unsigned long long x = seed * 0x9E3779B97F4A7C15ull + 7;
    for (int i = 0; i < 4; i++) {
        x ^= x >> 29; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 32;
        snprintf(out + 16 * i, 17, "%016llx", x);
    }
}

/* Run sql on the test server on a connection of its own; the caller clears the result. */
/* Runs one SQL text (printf format: the tests name their pid's schemas) on its own
 * connection. */
static PGresult *vtest_sql(const char *fmt, va_list ap) {
    char sql[1024];
    vsnprintf(sql, sizeof sql, fmt, ap);
    PGconn *c = PQconnectdb(url());
    PGresult *r = PQexec(c, sql);
    PQfinish(c);
    return r;
}

static PGresult *test_sql(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    PGresult *r = vtest_sql(fmt, ap);
    va_end(ap);
    return r;
}

/* test_sql for a statement without rows: 1 when it ran */
static int test_sql_ok(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    PGresult *r = vtest_sql(fmt, ap);
    va_end(ap);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    return ok;
}

/* Spool a one-page document with n chunks (not committed). */
static int spool_doc(store *s, unsigned seed, const char *path, int n, const char *word) {
    char sha[65];
    sha_of(seed, sha);
    store_doc_meta m = {.sha256 = sha, .path = path, .title = "PG doc", .pages = 1, .bytes = 10};
    int rc = store_doc_begin(s, &m, NULL);
    if (rc) return rc;
    store_page p = {1, 612, 792, 0};
    if ((rc = store_page_add(s, &p))) return rc;
    for (int i = 0; i < n; i++) {
        char text[128];
        snprintf(text, sizeof text, "chunk %d of seed %u about %s", i, seed, word);
        store_chunk c = {.ord = i, .page = 1, .kind = STORE_KIND_TEXT, .box = {0, 0, 1, 1},
                         .image_idx = -1, .text = text};
        if ((rc = store_chunk_add(s, &c))) return rc;
    }
    return STORE_OK;
}

TEST(database_down_is_a_clear_error) {
    store *s = NULL;
    /* port 1 on loopback: nothing listens there */
    int rc = store_open("postgres://mmrag@127.0.0.1:1/mmrag", NULL, &s, g_err, sizeof g_err);
    CHECK(rc == STORE_ERR_IO && !s);
    CHECK_MSG(strstr(g_err, "127.0.0.1:1") && strstr(g_err, "cannot connect"), "%s", g_err);
    rc = store_open("postgres://mmrag@db.invalid:5432/mmrag", NULL, &s, g_err, sizeof g_err);
    CHECK(rc == STORE_ERR_IO && !s);
    CHECK_MSG(strstr(g_err, "db.invalid"), "%s", g_err);
    rc = store_open("postgres://u:secret@127.0.0.1:1/mmrag", NULL, &s, g_err, sizeof g_err);
    CHECK_MSG(rc == STORE_ERR_IO && !strstr(g_err, "secret"), "%s", g_err);   /* no password in messages */
}

TEST(collection_names) {
    char b[256];
    CHECK(store_collection_db("postgres://h/db", "docs_1", b, sizeof b) == 0);
    CHECK(!strcmp(b, "postgres://h/db?collection=docs_1"));
    CHECK(store_collection_db("postgres://h/db?sslmode=disable", "a", b, sizeof b) == 0);
    CHECK(!strcmp(b, "postgres://h/db?sslmode=disable&collection=a"));
    CHECK(store_collection_db("postgres://h/db", "Bad-Name", b, sizeof b) == -1);
    CHECK(store_collection_db("/var/lib/mmrag", "Bad-Name", b, sizeof b) == 0);
    CHECK(!strcmp(b, "/var/lib/mmrag/Bad-Name"));
    CHECK(store_is_url("postgresql://x/y") && store_is_url("postgres://x") && !store_is_url("./.mmrag"));
    CHECK(store_collection_of("postgres://h/db?sslmode=disable&collection=abc_1", b, sizeof b) == 0 && !strcmp(b, "abc_1"));
    CHECK(store_collection_of("postgres://h/db", b, sizeof b) == 0 && !strcmp(b, "default"));
    CHECK(store_collection_of("postgres://h/db?collection=Bad", b, sizeof b) == -1);
    CHECK(store_collection_of("/var/lib/mmrag", b, sizeof b) == -1);
    NEED_PG();
    char u[600];
    snprintf(u, sizeof u, "%s%scollection=Robert'); DROP", url(), strchr(url(), '?') ? "&" : "?");
    store *s = NULL;
    CHECK(store_open(u, NULL, &s, g_err, sizeof g_err) == STORE_ERR_ARG && !s);
    CHECK_MSG(strstr(g_err, "collection name"), "%s", g_err);
}

TEST(collections_are_separate) {
    NEED_PG();
    store *a = NULL, *b = NULL;
    CHECK(store_open(coll("sep_a"), NULL, &a, g_err, sizeof g_err) == STORE_OK);
    CHECK(store_open(coll("sep_b"), NULL, &b, g_err, sizeof g_err) == STORE_OK);
    CHECK(store_is_shared(a));
    CHECK(spool_doc(a, 1, "/a.pdf", 3, "aardvark") == STORE_OK);
    int64_t id = 0;
    CHECK(store_doc_commit(a, &id, NULL) == STORE_OK && id > 0);
    store_counts ca, cb;
    CHECK(store_counts_get(a, &ca) == STORE_OK && ca.docs == 1 && ca.chunks == 3);
    CHECK(store_counts_get(b, &cb) == STORE_OK && cb.docs == 0 && cb.chunks == 0);
    store_hit *h;
    int32_t n;
    CHECK(store_search_bm25(b, "aardvark", NULL, &h, &n) == STORE_OK && n == 0);
    CHECK(store_search_bm25(a, "aardvarks", NULL, &h, &n) == STORE_OK && n == 3);   /* stemmed */
    CHECK_MSG(strstr(h[0].snippet, "[aardvark]"), "%s", h[0].snippet);
    store_hits_free(h, n);
    store_close(a);
    store_close(b);
    /* a read-only open of a collection that does not exist says so */
    store_options o;
    store_options_default(&o);
    o.readonly = 1;
    CHECK(store_open(coll("never_made"), &o, &a, g_err, sizeof g_err) == STORE_ERR_NOTFOUND);
}

static float frand(unsigned *x) {
    *x = *x * 1103515245u + 12345u;
    return (float)((*x >> 8) & 0xffff) / 65535.0f - 0.5f;
}

/* Exact top k by cosine of q against n vectors of d floats: cs[i] cosines, best[] rows. */
static void exact_top(const float *q, const float *v, int n, int d, int k, double *cs, int *best) {
    for (int i = 0; i < n; i++) {
        double ab = 0, aa = 0, bb = 0;
        for (int j = 0; j < d; j++) {
            ab += q[j] * v[i * d + j]; aa += v[i * d + j] * v[i * d + j]; bb += q[j] * q[j];
        }
        cs[i] = ab / sqrt(aa * bb);
    }
    for (int r = 0; r < k; r++) {
        int bi = -1;
        for (int i = 0; i < n; i++) {
            int used = 0;
            for (int u = 0; u < r; u++) used |= best[u] == i;
            if (!used && (bi < 0 || cs[i] > cs[bi])) bi = i;
        }
        best[r] = bi;
    }
}

TEST(knn_in_the_database_matches_exact_search) {
    NEED_PG();
    store *s = NULL;
    CHECK(store_open(coll("knn"), NULL, &s, g_err, sizeof g_err) == STORE_OK);
    enum { N = 600, D = 32, Q = 20, K = 10 };
    CHECK(spool_doc(s, 3, "/knn.pdf", N, "vectors") == STORE_OK);
    int64_t doc;
    CHECK(store_doc_commit(s, &doc, NULL) == STORE_OK);
    store_chunk_row *ch;
    int32_t n;
    CHECK(store_chunks_get(s, doc, 0, &ch, &n) == STORE_OK && n == N);
    static float v[N][D];
    store_vec vecs[N];
    unsigned seed = 42;
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < D; j++) v[i][j] = frand(&seed);
        vecs[i] = (store_vec){STORE_OWNER_CHUNK, ch[i].id, v[i]};
    }
    int32_t w;
    CHECK(store_vectors_put(s, "text", "m-knn", D, vecs, N, &w) == STORE_OK && w == N);
    float got[D];
    int32_t dim;
    CHECK(store_vector_get(s, STORE_OWNER_CHUNK, ch[7].id, "text", "m-knn", got, D, &dim) == STORE_OK);
    for (int j = 0; j < D; j++) CHECK(got[j] == v[7][j]);   /* %.9g round-trips floats */
    int hits = 0;
    for (int q = 0; q < Q; q++) {
        float qv[D];
        for (int j = 0; j < D; j++) qv[j] = frand(&seed);
        double cs[N];
        int best[K];
        exact_top(qv, &v[0][0], N, D, K, cs, best);
        store_knn_hit h[K];
        int32_t nh = 0;
        CHECK_MSG(store_vectors_knn(s, "text", "m-knn", STORE_OWNER_CHUNK, qv, D, K, h, &nh) == STORE_OK,
                  "%s", store_errmsg(s));
        CHECK(nh == K);
        for (int k = 0; k < K; k++) {
            CHECK(k == 0 || h[k].score <= h[k - 1].score + 1e-6f);
            for (int u = 0; u < K; u++) hits += ch[best[u]].id == h[k].id;
            if (ch[best[0]].id == h[k].id) CHECK_NEAR(h[k].score, cs[best[0]], 1e-4);
        }
    }
    CHECK_MSG(hits >= Q * K * 9 / 10, "recall@10 %.3f", hits / (double)(Q * K));
    /* the planner uses the HNSW index for it */
    PGresult *r = test_sql("SELECT count(*) FROM pg_indexes WHERE schemaname = 'mmrag_p%d_knn'"
                           " AND indexdef LIKE '%%hnsw%%vector(32)%%'", (int)getpid());
    CHECK(PQresultStatus(r) == PGRES_TUPLES_OK && atoi(PQgetvalue(r, 0, 0)) == 1);
    PQclear(r);
    /* a deleted document's vectors are gone from the search at once */
    CHECK(store_doc_delete(s, doc) == STORE_OK);
    store_knn_hit h[K];
    int32_t nh = -1;
    CHECK(store_vectors_knn(s, "text", "m-knn", -1, v[0], D, K, h, &nh) == STORE_OK && nh == 0);
    store_chunks_free(ch, n);
    store_close(s);
}

/* Image vectors go through the LSH code index (Hamming candidates, re-scored exactly):
 * recall@10 against exact search, exact scores, and the planner uses the bit index. */
TEST(image_search_lsh_candidates_rescored) {
    NEED_PG();
    store *s = NULL;
    CHECK(store_open(coll("lsh"), NULL, &s, g_err, sizeof g_err) == STORE_OK);
    enum { N = 2000, D = 48, Q = 20, K = 10 };
    char sha[65];
    sha_of(77, sha);
    store_doc_meta m = {.sha256 = sha, .path = "/lsh.pdf", .title = "LSH", .pages = 1, .bytes = 1};
    CHECK(store_doc_begin(s, &m, NULL) == STORE_OK);
    store_page p = {1, 612, 792, 0};
    CHECK(store_page_add(s, &p) == STORE_OK);
    for (int i = 0; i < N; i++) {
        store_image im = {.idx = i, .page = 1, .kind = 0, .box = {0, 0, 1, 1}, .width_px = 8,
                          .height_px = 8, .caption_ord = -1};
        CHECK(store_image_add(s, &im) == STORE_OK);
    }
    int64_t doc;
    CHECK_MSG(store_doc_commit(s, &doc, NULL) == STORE_OK, "%s", store_errmsg(s));
    store_image_row *im;
    int32_t n;
    CHECK(store_images_get(s, doc, 0, &im, &n) == STORE_OK && n == N);
    static float v[N][D];
    static store_vec vecs[N];
    unsigned seed = 9;
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < D; j++) v[i][j] = frand(&seed) + (j < 4 ? 0.3f : 0);   /* not centred */
        vecs[i] = (store_vec){STORE_OWNER_IMAGE, im[i].id, v[i]};
    }
    int32_t w;
    CHECK(store_vectors_put(s, "image", "m-img", D, vecs, N, &w) == STORE_OK && w == N);
    int hits = 0;
    for (int q = 0; q < Q; q++) {
        const float *qv = v[(q * 97) % N];   /* a stored image's own vector: it must come first */
        double cs[N];
        int best[K];
        exact_top(qv, &v[0][0], N, D, K, cs, best);
        store_knn_hit h[K];
        int32_t nh = 0;
        CHECK_MSG(store_vectors_knn(s, "image", "m-img", STORE_OWNER_IMAGE, qv, D, K, h, &nh) == STORE_OK,
                  "%s", store_errmsg(s));
        CHECK(nh == K && h[0].id == im[(q * 97) % N].id);
        CHECK_NEAR(h[0].score, 1.0, 1e-4);
        for (int k = 0; k < K; k++) {
            CHECK(k == 0 || h[k].score <= h[k - 1].score + 1e-6f);
            for (int u = 0; u < K; u++) hits += im[best[u]].id == h[k].id;
        }
    }
    CHECK_MSG(hits >= Q * K * 8 / 10, "recall@10 %.3f", hits / (double)(Q * K));
    printf("  image LSH (256 bits, pool 400 of %d): recall@10 %.3f\n", N, hits / (double)(Q * K));
    PGresult *r = test_sql("SET search_path TO mmrag_p%d_lsh, public; EXPLAIN SELECT owner_id FROM"
                           " vectors WHERE space = 'image' AND model = 'm-img' ORDER BY (lsh::bit(256)) <~>"
                           " repeat('1', 256)::bit(256) LIMIT 400", (int)getpid());
    int used = 0;
    for (int i = 0; PQresultStatus(r) == PGRES_TUPLES_OK && i < PQntuples(r); i++)
        used |= strstr(PQgetvalue(r, i, 0), "vectors_lsh_") != NULL;
    CHECK_MSG(used, "the Hamming search does not use the LSH index");
    PQclear(r);
    int64_t dropped = -1, left = -1;   /* a replaced encoder's vectors go */
    CHECK_MSG(store_vectors_drop(s, "image", "m-img", &dropped) == STORE_OK && dropped == N, "%s %lld",
              store_errmsg(s), (long long)dropped);
    CHECK(store_vectors_count(s, "image", "m-img", -1, &left) == STORE_OK && left == 0);
    store_images_free(im, n);
    store_close(s);
}

typedef struct { const char *u; int rc; int64_t id; pthread_barrier_t *bar; } racer;
static void *race_commit(void *p) {
    racer *r = p;
    store *s = NULL;
    char err[256];
    if (store_open(r->u, NULL, &s, err, sizeof err)) { r->rc = -100; pthread_barrier_wait(r->bar); return NULL; }
    r->rc = spool_doc(s, 9, "", 20, "race");
    pthread_barrier_wait(r->bar);
    if (!r->rc) r->rc = store_doc_commit(s, &r->id, NULL);
    store_close(s);
    return NULL;
}

TEST(same_file_from_many_writers_is_one_document) {
    NEED_PG();
    const char *u = coll("race");
    store *s = NULL;
    CHECK(store_open(u, NULL, &s, g_err, sizeof g_err) == STORE_OK);
    enum { W = 4 };
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, W);
    racer rs[W];
    pthread_t th[W];
    for (int i = 0; i < W; i++) {
        rs[i] = (racer){u, 0, 0, &bar};
        pthread_create(&th[i], NULL, race_commit, &rs[i]);
    }
    for (int i = 0; i < W; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    int ok = 0, exists = 0;
    for (int i = 0; i < W; i++) {
        ok += rs[i].rc == STORE_OK;
        exists += rs[i].rc == STORE_EXISTS;
        CHECK(rs[i].id == rs[0].id && rs[i].id > 0);
    }
    CHECK_MSG(ok == 1 && exists == W - 1, "ok %d exists %d", ok, exists);
    store_counts c;
    CHECK(store_counts_get(s, &c) == STORE_OK && c.docs == 1 && c.chunks == 20);
    store_close(s);
}

TEST(newer_schema_is_refused) {
    NEED_PG();
    const char *u = coll("version");
    store *s = NULL;
    CHECK(store_open(u, NULL, &s, g_err, sizeof g_err) == STORE_OK);
    store_close(s);
    CHECK(test_sql_ok("UPDATE \"mmrag_p%d_version\".meta SET value='999' WHERE key='schema_version'",
                      (int)getpid()));
    CHECK(store_open(u, NULL, &s, g_err, sizeof g_err) == STORE_ERR_VERSION);
    CHECK_MSG(strstr(g_err, "newer"), "%s", g_err);
}

/* A collection at schema v1 (no LSH column) is migrated on open; read-only opens refuse. */
TEST(v1_collection_migrates) {
    NEED_PG();
    const char *u = coll("v1");
    store *s = NULL;
    CHECK(store_open(u, NULL, &s, g_err, sizeof g_err) == STORE_OK);
    store_close(s);
    CHECK(test_sql_ok("SET search_path TO mmrag_p%d_v1; ALTER TABLE vectors DROP COLUMN lsh;"
                      " UPDATE meta SET value='1' WHERE key='schema_version'", (int)getpid()));
    store_options o;
    store_options_default(&o);
    o.readonly = 1;
    CHECK(store_open(u, &o, &s, g_err, sizeof g_err) == STORE_ERR_READONLY);
    CHECK(store_open(u, NULL, &s, g_err, sizeof g_err) == STORE_OK);
    store_close(s);
    PGresult *r = test_sql("SELECT (SELECT value FROM mmrag_p%d_v1.meta WHERE key='schema_version') ||"
                           " (SELECT count(*) FROM information_schema.columns WHERE table_schema = 'mmrag_p%d_v1'"
                           " AND table_name = 'vectors' AND column_name = 'lsh')", (int)getpid(), (int)getpid());
    CHECK(PQresultStatus(r) == PGRES_TUPLES_OK && !strcmp(PQgetvalue(r, 0, 0), "21"));
    PQclear(r);
}
