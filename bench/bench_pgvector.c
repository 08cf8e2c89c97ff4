/* bench_pgvector — the shared store's vector search side by side with the embedded one,
 * same vectors, same queries, same machine:
 *   exact (FAISS Flat IP), mmrag's FAISS HNSW (vindex, HNSW32 efC64 ef128) and pgvector
 *   HNSW (the index the shared store creates: m16 efC64, ef_search 128) through
 *   store_vectors_put / store_vectors_knn exactly as mmrag uses them (one query per
 *   round trip on loopback): build time, p50/p99 latency, recall@10, bytes per vector;
 *   then end-to-end POST /v1/search throughput with 1, 2 and 4 `mmrag serve` processes on
 *   one PostgreSQL collection (and 1 on SQLite as the reference).
 * Vectors as bench_index: 10k real MiniLM embeddings (tests/vecs_util.h) synthesized up to
 * BENCH_PG_N (100000; 1000000 for the large run) as real + noise; 200 held-out queries.
 * Env: MMRAG_BENCH_PG (a PostgreSQL URL with pgvector; scripts/run-bench.sh starts one),
 * BENCH_PG_N, BENCH_SECONDS (8), BENCH_CLIENTS (16), MMRAG_BUILD, MMRAG_MODELS, MMRAG_TMP. */
#include "bench/bench_http.h"
#include "bench/bench_vindex.h"
#include "index/index.h"
#include "index/store.h"
#include "tests/vecs_util.h"

#include <faiss/c_api/IndexFlat_c.h>
#include <faiss/c_api/Index_c.h>
#include <libpq-fe.h>
#include <omp.h>
#include <signal.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

extern char **environ;

#define NQ 200
#define K 10

typedef struct { const char *name; double build_s, p50, p99, recall, bytes_per_vec; } row;

static void print_row(const row *r) {
    printf("  %-30s build %8.2f s   p50 %7.3f ms   p99 %7.3f ms   recall@10 %.4f   %6.0f B/vec\n",
           r->name, r->build_s, r->p50, r->p99, r->recall, r->bytes_per_vec);
}

static int64_t sql_int(PGconn *c, const char *sql) {
    PGresult *r = PQexec(c, sql);
    int64_t v = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : -1;
    if (v < 0) fprintf(stderr, "  sql: %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return v;
}

static void exact_truth(const float *base, int64_t nb, const float *q, int32_t d, int64_t *truth, row *r) {
    FaissIndexFlatIP *flat = NULL;
    double t0 = now_s(), ms[NQ];
    faiss_IndexFlatIP_new_with(&flat, d);
    faiss_Index_add((FaissIndex *)flat, nb, base);
    *r = (row){.name = "exact (FAISS Flat IP)", .build_s = now_s() - t0, .recall = 1, .bytes_per_vec = 4.0 * d};
    bench_exact_queries((FaissIndex *)flat, q, d, NQ, K, 0, truth, ms);   /* row numbers */
    pct(ms, NQ, &r->p50, &r->p99);
    faiss_Index_free((FaissIndex *)flat);
}

static void faiss_hnsw(const float *base, int64_t nb, const float *q, int32_t d, const int64_t *truth, row *r) {
    vindex_opts o;
    vindex_opts_default(&o, VINDEX_HNSW, d);
    int64_t *ids = malloc((size_t)nb * sizeof *ids), got[NQ * K];
    for (int64_t i = 0; i < nb; i++) ids[i] = i;
    char err[256];
    double t0 = now_s(), ms[NQ];
    vindex *v = vindex_create(&o, err, sizeof err);
    if (!v || vindex_build(v, nb, ids, base, err, sizeof err)) { printf("  vindex: %s\n", err); exit(1); }
    *r = (row){.name = "mmrag FAISS HNSW32 ef128", .build_s = now_s() - t0};
    r->bytes_per_vec = vindex_memory(v) / (double)nb;
    bench_vindex_queries(v, q, d, NQ, K, got, ms);
    pct(ms, NQ, &r->p50, &r->p99);
    r->recall = bench_recall(got, truth, NQ, K);
    vindex_free(v);
    free(ids);
}

/* Documents of up to 10k one-line chunks own the vectors (as chunks do in mmrag);
 * ids[i] = the chunk id of vector i. */
static int make_owners(store *s, int64_t nb, int64_t *ids) {
    for (int64_t at = 0, docno = 0; at < nb; docno++) {
        char sha[65];
        snprintf(sha, sizeof sha, "%064llx", (unsigned long long)(docno + 1));
        store_doc_meta m = {.sha256 = sha, .path = "/bench.pdf", .title = "bench", .pages = 1, .bytes = 1};
        char path[64];
        snprintf(path, sizeof path, "/bench-%lld.pdf", (long long)docno);
        m.path = path;
        if (store_doc_begin(s, &m, NULL)) return -1;
        store_page p = {1, 612, 792, 0};
        if (store_page_add(s, &p)) return -1;
        int64_t n = nb - at < 10000 ? nb - at : 10000;
        for (int64_t i = 0; i < n; i++) {
            char text[48];
            snprintf(text, sizeof text, "vector %lld", (long long)(at + i));
            store_chunk c = {.ord = (int32_t)i, .page = 1, .kind = STORE_KIND_TEXT, .box = {0, 0, 1, 1},
                             .image_idx = -1, .text = text};
            if (store_chunk_add(s, &c)) return -1;
        }
        int64_t doc;
        if (store_doc_commit(s, &doc, NULL)) return -1;
        store_chunk_row *ch;
        int32_t got;
        if (store_chunks_get(s, doc, 0, &ch, &got) || got != n) return -1;
        for (int32_t i = 0; i < got; i++) ids[at + i] = ch[i].id;
        store_chunks_free(ch, got);
        at += n;
    }
    return 0;
}

typedef struct { int64_t id, row; } idrow;
static int cmp_idrow(const void *a, const void *b) {
    int64_t x = ((const idrow *)a)->id, y = ((const idrow *)b)->id;
    return (x > y) - (x < y);
}

/* *bulk_s: the same index rebuilt in bulk (REINDEX), for comparison with the live inserts */
static void pgvector_hnsw(const char *url, const float *base, int64_t nb, const float *q, int32_t d,
                          const int64_t *truth, row *r, double *bulk_s) {
    char coll[1024], err[512];
    snprintf(coll, sizeof coll, "%s%scollection=bench_vec_%d", url, strchr(url, '?') ? "&" : "?", (int)getpid());
    store *s = NULL;
    if (store_open(coll, NULL, &s, err, sizeof err)) { printf("  pgvector: %s\n", err); exit(1); }
    int64_t *ids = malloc((size_t)nb * sizeof *ids), got[NQ * K];
    double t0 = now_s();
    if (make_owners(s, nb, ids)) { printf("  pgvector owners: %s\n", store_errmsg(s)); exit(1); }
    printf("  (pgvector: %lld chunk rows to own the vectors written in %.1f s, not counted)\n",
           (long long)nb, now_s() - t0);
    /* vectors in batches of 1000, as mmrag's embedder writes them, the index live */
    store_vec *vb = malloc(1000 * sizeof *vb);
    t0 = now_s();
    for (int64_t at = 0; at < nb; at += 1000) {
        int32_t n = (int32_t)(nb - at < 1000 ? nb - at : 1000), w = 0;
        for (int32_t i = 0; i < n; i++) vb[i] = (store_vec){STORE_OWNER_CHUNK, ids[at + i], base + (size_t)(at + i) * d};
        if (store_vectors_put(s, "text", "bench", d, vb, n, &w) || w != n) {
            printf("  pgvector put: %s\n", store_errmsg(s));
            exit(1);
        }
    }
    *r = (row){.name = "pgvector HNSW m16 ef128", .build_s = now_s() - t0};
    idrow *map = malloc((size_t)nb * sizeof *map);
    for (int64_t i = 0; i < nb; i++) map[i] = (idrow){ids[i], i};
    qsort(map, (size_t)nb, sizeof *map, cmp_idrow);
    double ms[NQ];
    for (int i = 0; i < NQ; i++) {
        store_knn_hit h[K];
        int32_t n = 0;
        double st = now_s();
        if (store_vectors_knn(s, "text", "bench", STORE_OWNER_CHUNK, q + (size_t)i * d, d, K, h, &n)) {
            printf("  pgvector knn: %s\n", store_errmsg(s));
            exit(1);
        }
        ms[i] = (now_s() - st) * 1e3;
        for (int j = 0; j < K; j++) {
            idrow key = {j < n ? h[j].id : -1, 0}, *f = j < n ? bsearch(&key, map, (size_t)nb, sizeof *map, cmp_idrow) : NULL;
            got[i * K + j] = f ? f->row : -1;
        }
    }
    pct(ms, NQ, &r->p50, &r->p99);
    r->recall = bench_recall(got, truth, NQ, K);
    store_close(s);

    /* sizes from the catalog; then the same index built in bulk (REINDEX) for comparison */
    PGconn *c = PQconnectdb(url);
    char sql[512], schema[128];
    snprintf(schema, sizeof schema, "mmrag_bench_vec_%d", (int)getpid());
    snprintf(sql, sizeof sql, "SELECT sum(pg_relation_size(format('%%I.%%I', schemaname, indexname)::regclass))"
             " FROM pg_indexes WHERE schemaname = '%s' AND indexdef LIKE '%%hnsw%%'", schema);
    int64_t idx_bytes = sql_int(c, sql);
    snprintf(sql, sizeof sql, "SELECT pg_table_size('%s.vectors')", schema);
    int64_t heap_bytes = sql_int(c, sql);
    r->bytes_per_vec = (double)(idx_bytes + heap_bytes) / nb;
    printf("  (pgvector bytes/vector: HNSW index %.0f + table rows %.0f)\n", idx_bytes / (double)nb,
           heap_bytes / (double)nb);
    snprintf(sql, sizeof sql, "SET maintenance_work_mem = '2GB'; SET search_path TO %s, public;"
             " REINDEX TABLE vectors", schema);
    t0 = now_s();
    PGresult *res = PQexec(c, sql);
    *bulk_s = PQresultStatus(res) == PGRES_COMMAND_OK ? now_s() - t0 : -1;
    PQclear(res);
    snprintf(sql, sizeof sql, "SET client_min_messages = warning; DROP SCHEMA %s CASCADE", schema);
    PQclear(PQexec(c, sql));
    PQfinish(c);
    free(map);
    free(vb);
    free(ids);
}

/* ---- end to end: N server processes on one collection --------------------------- */
static uint16_t free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    uint16_t p = 0;
    if (fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof sa) && !getsockname(fd, (struct sockaddr *)&sa, &len))
        p = ntohs(sa.sin_port);
    if (fd >= 0) close(fd);
    return p;
}

static pid_t spawn_server(const char *mmrag, const char *db, uint16_t port) {
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%u", port);
    char *argv[] = {(char *)mmrag, "serve", "--db", (char *)db, "--listen", listen, "--quiet", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    if (posix_spawn(&pid, mmrag, &fa, NULL, argv, environ)) pid = -1;
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; pid > 0 && i < 300; i++) {   /* up when /healthz answers */
        int fd = -1;
        if (http_post(&fd, port, "/healthz", NULL, 0) == 200) return pid;
        usleep(100000);
    }
    return -1;
}

static void e2e(const char *url, const char *b, const char *tmp) {
    int clients = getenv("BENCH_CLIENTS") ? atoi(getenv("BENCH_CLIENTS")) : 16;
    double secs = getenv("BENCH_SECONDS") ? atof(getenv("BENCH_SECONDS")) : 8;
    char mmrag[1024], samples[1024], cmd[12288], pgdb[1024], sqdb[1024];
    snprintf(mmrag, sizeof mmrag, "%s/mmrag", b);
    snprintf(samples, sizeof samples, "%s/bench-pg-samples", tmp);
    snprintf(sqdb, sizeof sqdb, "%s/bench-pg-sqlite", tmp);
    snprintf(pgdb, sizeof pgdb, "%s%scollection=bench_e2e_%d", url, strchr(url, '?') ? "&" : "?", (int)getpid());
    snprintf(cmd, sizeof cmd, "rm -rf %s %s && %s/tests/tool_gencorpus samples %s >/dev/null 2>&1 && "
             "%s index --db '%s' %s >/dev/null 2>&1 && %s index --db %s %s >/dev/null 2>&1",
             samples, sqdb, b, samples, mmrag, pgdb, samples, mmrag, sqdb, samples);
    if (system(cmd)) { printf("  e2e: indexing the samples failed (%s)\n", cmd); return; }
    const char *q = "{\"query\":\"maximum efficiency of the inverter\",\"k\":5}";
    printf("\nend to end: POST /v1/search (query encoded by each server), %d keep-alive clients spread"
           " over the servers, %.0f s each, loopback, %d cores\n", clients, secs, omp_get_num_procs());
    printf("  %-34s %10s %9s %9s %8s %7s\n", "servers", "req/s", "p50 ms", "p99 ms", "requests", "errors");
    int ns[] = {0, 1, 2, 4};
    for (int c = 0; c < 4; c++) {
        int n = ns[c] ? ns[c] : 1;
        uint16_t ports[4];
        pid_t pids[4];
        int up = 0;
        for (int i = 0; i < n; i++) {
            ports[i] = free_port();
            pids[i] = spawn_server(mmrag, ns[c] ? pgdb : sqdb, ports[i]);
            up += pids[i] > 0;
        }
        if (up == n) {
            run_load_on(ports, n, n * 2, 1.0, "/v1/search", q, 5, 1);   /* warm: models, connections */
            result r = run_load_on(ports, n, clients, secs, "/v1/search", q, 0, 1);
            char name[64];
            snprintf(name, sizeof name, ns[c] ? "%d x mmrag serve, PostgreSQL" : "1 x mmrag serve, SQLite (reference)", n);
            printf("  %-34s %10.1f %9.2f %9.2f %8d %7d\n", name, r.rps, r.p50, r.p99, r.n, r.errors);
        } else {
            printf("  %d servers: a server did not start\n", n);
        }
        for (int i = 0; i < n; i++)
            if (pids[i] > 0) { kill(pids[i], SIGTERM); waitpid(pids[i], NULL, 0); }
    }
}

int main(void) {
    const char *url = getenv("MMRAG_BENCH_PG");
    if (!url || !*url) {
        printf("bench_pgvector: no PostgreSQL (set MMRAG_BENCH_PG, or run it through make bench)\n");
        return 0;
    }
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *b = getenv("MMRAG_BUILD") ? getenv("MMRAG_BUILD") : "build";
    const char *tmp = getenv("MMRAG_TMP") ? getenv("MMRAG_TMP") : "/tmp";
    vecs_set vs;
    char why[512];
    if (vecs_load_real(&vs, why, sizeof why)) { printf("bench_pgvector: real embeddings unavailable: %s\n", why); return 1; }
    int32_t d = vs.dim;
    int64_t nreal = vs.n - NQ, nb = getenv("BENCH_PG_N") ? atoll(getenv("BENCH_PG_N")) : 100000;
    const float *q = vs.v + (size_t)nreal * d;
    float *base = nb > nreal ? perturb_vectors(vs.v, nreal, d, nb, 0.5f, 1) : vs.v;
    if (nb > nreal) printf("vectors: %lld (10k real MiniLM + synthesized: real + noise) x %d dims, %d real held-out"
                           " queries, k=%d, one query at a time\n", (long long)nb, d, NQ, K);
    else nb = nreal;
    omp_set_num_threads(omp_get_num_procs());
    int64_t *truth = malloc(NQ * K * sizeof *truth);
    row rows[3];
    double bulk_s;
    exact_truth(base, nb, q, d, truth, &rows[0]);
    faiss_hnsw(base, nb, q, d, truth, &rows[1]);
    pgvector_hnsw(url, base, nb, q, d, truth, &rows[2], &bulk_s);
    for (int i = 0; i < 3; i++) print_row(&rows[i]);
    printf("  (build: FAISS in one call with %d threads; pgvector as mmrag writes it, 1000 vectors per"
           " statement into the live index; the same index rebuilt in bulk by REINDEX: %.2f s)\n",
           omp_get_num_procs(), bulk_s);
    printf("  pgvector / FAISS HNSW: build %.2fx, p50 %.2fx, p99 %.2fx (times slower; loopback round trip included)\n",
           rows[2].build_s / rows[1].build_s, rows[2].p50 / rows[1].p50, rows[2].p99 / rows[1].p99);
    if (base != vs.v) free(base);
    free(truth);
    vecs_free(&vs);
    e2e(url, b, tmp);
    return 0;
}
