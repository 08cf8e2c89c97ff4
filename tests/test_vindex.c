/* Tests for index/vindex: HNSW recall against exact search (FAISS Flat IP) on real
 * MiniLM embeddings, LSH candidate + re-score, tombstones, persistence (round trip,
 * missing / corrupt / truncated / other-config files) and the store glue (rebuild,
 * catch-up by generation, deletes). */
#include "index/index.h"
#include "tests/test.h"
#include "tests/vecs_util.h"

#include <faiss/c_api/IndexFlat_c.h>
#include <faiss/c_api/Index_c.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

/* exact top-k ids by FAISS IndexFlatIP (independent of the code under test) */
static idx_t *exact_topk(const float *base, const int64_t *ids, int64_t n, int32_t d,
                         const float *q, int64_t nq, int32_t k) {
    FaissIndexFlatIP *flat = NULL;
    if (faiss_IndexFlatIP_new_with(&flat, d)) return NULL;
    idx_t *lab = malloc((size_t)nq * k * sizeof *lab);
    float *dist = malloc((size_t)nq * k * sizeof *dist);
    if (faiss_Index_add((FaissIndex *)flat, n, base) ||
        faiss_Index_search((FaissIndex *)flat, nq, q, k, dist, lab)) {
        free(lab);
        lab = NULL;
    }
    for (int64_t i = 0; lab && i < nq * k; i++) lab[i] = lab[i] >= 0 ? ids[lab[i]] : -1;
    faiss_Index_free((FaissIndex *)flat);
    free(dist);
    return lab;
}

static double recall_at(vindex *v, const float *q, int64_t nq, int32_t d, const idx_t *truth,
                        int32_t k, int candidates_only) {
    vindex_hit hits[64];
    int64_t found = 0;
    char err[256];
    for (int64_t i = 0; i < nq; i++) {
        int32_t n = 0;
        int rc = candidates_only ? vindex_search_candidates(v, q + i * d, k, hits, &n, err, sizeof err)
                                 : vindex_search(v, q + i * d, k, hits, &n, err, sizeof err);
        if (rc) return -1;
        for (int32_t a = 0; a < n; a++)
            for (int32_t b = 0; b < k; b++)
                if (hits[a].id == truth[i * k + b]) { found++; break; }
    }
    return (double)found / (double)(nq * k);
}

TEST(hnsw_recall_real_embeddings) {
    vecs_set vs;
    char why[512];
    if (vecs_load_real(&vs, why, sizeof why)) {
        CHECK_MSG(0, "real embeddings unavailable: %s", why);
    }
    int32_t d = vs.dim;
    int64_t nb = vs.n - 200, nq = 200;  /* the last 200 texts are held out as queries */
    CHECK(nb >= 10000);
    int64_t *ids = malloc((size_t)nb * sizeof *ids);
    for (int64_t i = 0; i < nb; i++) ids[i] = 1000 + i * 3;  /* sparse ids like chunk ids */
    const float *q = vs.v + (size_t)nb * d;
    idx_t *truth = exact_topk(vs.v, ids, nb, d, q, nq, 10);
    CHECK(truth);
    vindex_opts o;
    vindex_opts_default(&o, VINDEX_HNSW, d);
    char err[256];
    vindex *v = vindex_create(&o, err, sizeof err);
    CHECK_MSG(v, "%s", err);
    CHECK_MSG(vindex_build(v, nb, ids, vs.v, err, sizeof err) == 0, "%s", err);
    double r = recall_at(v, q, nq, d, truth, 10, 0);
    printf("  HNSW32 efSearch=%d: recall@10 = %.4f on %lld real MiniLM vectors, %lld queries\n",
           o.ef_search, r, (long long)nb, (long long)nq);
    CHECK_MSG(r >= 0.98, "recall@10 %.4f < 0.98", r);
    /* a tiny beam must do worse: the parameter really reaches FAISS */
    CHECK(vindex_set_ef_search(v, 10) == 0);
    double r_low = recall_at(v, q, nq, d, truth, 10, 0);
    CHECK_MSG(r_low < r, "efSearch 10 recall %.4f not below %.4f", r_low, r);
    vindex_free(v);
    free(truth);
    free(ids);
    vecs_free(&vs);
}

TEST(lsh_candidates_and_rescore) {
    vecs_set vs;
    char why[512];
    if (vecs_load_real(&vs, why, sizeof why)) CHECK_MSG(0, "real embeddings unavailable: %s", why);
    int32_t d = vs.dim;
    int64_t nb = 5000, nq = 100;
    int64_t *ids = malloc((size_t)nb * sizeof *ids);
    for (int64_t i = 0; i < nb; i++) ids[i] = i + 1;
    const float *q = vs.v + (size_t)(vs.n - nq) * d;
    idx_t *truth = exact_topk(vs.v, ids, nb, d, q, nq, 10);
    CHECK(truth);
    double cand[3];
    int bits[3] = {64, 128, 256};
    for (int b = 0; b < 3; b++) {
        vindex_opts o;
        vindex_opts_default(&o, VINDEX_LSH, d);
        o.lsh_bits = bits[b];
        char err[256];
        vindex *v = vindex_create(&o, err, sizeof err);
        CHECK_MSG(v, "%s", err);
        CHECK_MSG(vindex_build(v, nb, ids, vs.v, err, sizeof err) == 0, "%s", err);
        cand[b] = recall_at(v, q, nq, d, truth, 10, 1);
        double full = recall_at(v, q, nq, d, truth, 10, 0);
        printf("  LSH %3d bits: candidate recall@10 %.3f, after re-scoring %d candidates %.3f\n",
               bits[b], cand[b], o.lsh_pool, full);
        /* re-scoring is exact: it can only improve on the Hamming order */
        CHECK(full >= cand[b]);
        if (bits[b] == 256) CHECK_MSG(full >= 0.85, "re-scored recall %.3f", full);
        vindex_free(v);
    }
    /* more bits, better candidates (trained thresholds: not the all-equal codes of plain LSH) */
    CHECK(cand[2] > cand[0]);
    CHECK(cand[0] > 0.1);
    free(truth);
    free(ids);
    vecs_free(&vs);
}

static vindex *small_index(int32_t kind, int64_t n, int32_t d, float **vecs_out, int64_t **ids_out) {
    float *x = synth_vectors(n, d, 7);
    int64_t *ids = malloc((size_t)n * sizeof *ids);
    for (int64_t i = 0; i < n; i++) ids[i] = 100 + i;
    vindex_opts o;
    vindex_opts_default(&o, kind, d);
    o.lsh_bits = 64;
    o.lsh_pool = 40;
    snprintf(o.model_id, sizeof o.model_id, "test-model");
    char err[256];
    vindex *v = vindex_create(&o, err, sizeof err);
    if (v && vindex_build(v, n, ids, x, err, sizeof err)) { vindex_free(v); v = NULL; }
    *vecs_out = x;
    *ids_out = ids;
    return v;
}

static int same_results(vindex *a, vindex *b, const float *q, int32_t d, int nq) {
    vindex_hit ha[10], hb[10];
    int32_t na, nb;
    for (int i = 0; i < nq; i++) {
        if (vindex_search(a, q + (size_t)i * d, 10, ha, &na, NULL, 0) ||
            vindex_search(b, q + (size_t)i * d, 10, hb, &nb, NULL, 0) || na != nb)
            return 0;
        for (int j = 0; j < na; j++)
            if (ha[j].id != hb[j].id || fabsf(ha[j].score - hb[j].score) > 1e-6f) return 0;
    }
    return 1;
}

static void tmp_path(char *buf, size_t len, const char *name) {
    const char *t = test_env("MMRAG_TMP", "/tmp");
    mkdir(t, 0755);
    snprintf(buf, len, "%s/vindex-%d-%s", t, (int)getpid(), name);
}

static void persist_case(int32_t kind, int *test_failed_) {
    float *x;
    int64_t *ids;
    int32_t d = 48;
    vindex *v = small_index(kind, 3000, d, &x, &ids);
    CHECK(v);
    int64_t dead[3] = {100, 150, 2999 + 100};
    CHECK(vindex_remove(v, 3, dead) == 3);
    char path[512], err[256];
    tmp_path(path, sizeof path, kind == VINDEX_HNSW ? "p.hnsw" : "p.lsh");
    CHECK_MSG(vindex_save(v, path, 42, err, sizeof err) == 0, "%s", err);
    uint64_t gen = 0;
    vindex *w = vindex_load(path, vindex_get_opts(v), &gen, err, sizeof err);
    CHECK_MSG(w, "%s", err);
    CHECK(gen == 42 && vindex_generation(w) == 42);
    CHECK(vindex_size(w) == 3000 && vindex_dead(w) == 3);
    CHECK(!vindex_contains(w, 150) && vindex_contains(w, 151));
    CHECK(same_results(v, w, x, d, 50));
    vindex_free(w);

    /* other configuration: refused with a reason */
    vindex_opts o2 = *vindex_get_opts(v);
    snprintf(o2.model_id, sizeof o2.model_id, "another-model");
    CHECK(vindex_load(path, &o2, NULL, err, sizeof err) == NULL && strstr(err, "configuration"));
    o2 = *vindex_get_opts(v);
    o2.dim = 64;
    CHECK(vindex_load(path, &o2, NULL, err, sizeof err) == NULL);

    /* one flipped byte anywhere in the payload: checksum refuses it */
    FILE *f = fopen(path, "r+b");
    CHECK(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size / 2, SEEK_SET);
    int c = fgetc(f);
    fseek(f, size / 2, SEEK_SET);
    fputc(c ^ 0x5a, f);
    fclose(f);
    CHECK(vindex_load(path, vindex_get_opts(v), NULL, err, sizeof err) == NULL);
    CHECK_MSG(strstr(err, "checksum"), "%s", err);
    /* truncated */
    CHECK(vindex_save(v, path, 1, err, sizeof err) == 0);
    CHECK(truncate(path, size - 100) == 0);
    CHECK(vindex_load(path, vindex_get_opts(v), NULL, err, sizeof err) == NULL);
    /* garbage / empty / missing */
    f = fopen(path, "wb");
    fputs("definitely not an index", f);
    fclose(f);
    CHECK(vindex_load(path, vindex_get_opts(v), NULL, err, sizeof err) == NULL);
    unlink(path);
    CHECK(vindex_load(path, vindex_get_opts(v), NULL, err, sizeof err) == NULL);
    CHECK(strstr(err, "No such file"));
    vindex_free(v);
    free(x);
    free(ids);
}

TEST(persist_round_trip_hnsw) { persist_case(VINDEX_HNSW, test_failed_); }
TEST(persist_round_trip_lsh) { persist_case(VINDEX_LSH, test_failed_); }

static void tombstone_case(int32_t kind, int *test_failed_) {
    float *x;
    int64_t *ids;
    int32_t d = 32, n = 2000;
    vindex *v = small_index(kind, n, d, &x, &ids);
    CHECK(v);
    /* kill the exact top-20 neighbours of query 0 (its own vector is id 100) */
    vindex_hit h[40];
    int32_t nh = 0;
    CHECK(vindex_search(v, x, 20, h, &nh, NULL, 0) == 0 && nh == 20);
    CHECK(h[0].id == 100);
    int64_t kill[20];
    for (int i = 0; i < 20; i++) kill[i] = h[i].id;
    CHECK(vindex_remove(v, 20, kill) == 20);
    CHECK(vindex_remove(v, 20, kill) == 0);     /* idempotent */
    int64_t unknown = 999999;
    CHECK(vindex_remove(v, 1, &unknown) == 0);
    vindex_hit g[10];
    int32_t ng = 0;
    CHECK(vindex_search(v, x, 10, g, &ng, NULL, 0) == 0);
    CHECK_MSG(ng == 10, "got %d hits after deletes", ng);  /* over-fetch keeps k */
    for (int i = 0; i < ng; i++)
        for (int j = 0; j < 20; j++) CHECK_MSG(g[i].id != kill[j], "ghost %lld", (long long)kill[j]);
    /* compaction drops them for good and keeps the others' results */
    char err[256];
    CHECK_MSG(vindex_compact(v, err, sizeof err) == 0, "%s", err);
    CHECK(vindex_dead(v) == 0 && vindex_size(v) == n - 20);
    vindex_hit c[10];
    int32_t nc = 0;
    CHECK(vindex_search(v, x, 10, c, &nc, NULL, 0) == 0 && nc == 10);
    int overlap = 0;
    for (int i = 0; i < 10; i++)
        for (int j = 0; j < 10; j++) overlap += c[i].id == g[j].id;
    CHECK_MSG(overlap >= 9, "overlap %d", overlap);
    for (int i = 0; i < nc; i++) CHECK(!(c[i].id >= 100 && c[i].id == kill[0]));
    vindex_free(v);
    free(x);
    free(ids);
}
TEST(tombstones_hnsw) { tombstone_case(VINDEX_HNSW, test_failed_); }
TEST(tombstones_lsh) { tombstone_case(VINDEX_LSH, test_failed_); }

TEST(bad_input) {
    char err[256];
    vindex_opts o;
    vindex_opts_default(&o, VINDEX_HNSW, 0);
    CHECK(vindex_create(&o, err, sizeof err) == NULL && strstr(err, "dim"));
    vindex_opts_default(&o, 7, 16);
    CHECK(vindex_create(&o, err, sizeof err) == NULL);
    vindex_opts_default(&o, VINDEX_LSH, 16);
    o.lsh_bits = 12;
    CHECK(vindex_create(&o, err, sizeof err) == NULL);
    vindex_opts_default(&o, VINDEX_HNSW, 4);
    vindex *v = vindex_create(&o, err, sizeof err);
    CHECK(v);
    float bad[8] = {1, 0, 0, NAN, 0, 1, 0, 0};
    int64_t ids[2] = {1, 2};
    CHECK(vindex_add(v, 2, ids, bad, err, sizeof err) != 0 && strstr(err, "NaN"));
    bad[3] = 0;
    CHECK(vindex_add(v, 2, ids, bad, err, sizeof err) == 0);
    CHECK(vindex_add(v, 1, ids, bad, err, sizeof err) != 0);  /* duplicate id */
    vindex_hit h[4];
    int32_t n = -1;
    CHECK(vindex_search(v, bad, 0, h, &n, err, sizeof err) == 0 && n == 0);
    CHECK(vindex_search(v, bad, 4, h, &n, err, sizeof err) == 0 && n == 2 && h[0].id == 1);
    float qn[4] = {INFINITY, 0, 0, 0};
    CHECK(vindex_search(v, qn, 4, h, &n, err, sizeof err) != 0);
    float zero[4] = {0};
    CHECK(vindex_search(v, zero, 4, h, &n, err, sizeof err) == 0);  /* no crash, some order */
    CHECK(vindex_search_candidates(v, bad, 2, h, &n, err, sizeof err) != 0);
    vindex_free(v);
    /* empty indexes answer nothing */
    vindex_opts_default(&o, VINDEX_LSH, 4);
    v = vindex_create(&o, err, sizeof err);
    CHECK(v && vindex_search(v, bad, 3, h, &n, err, sizeof err) == 0 && n == 0);
    vindex_free(v);
}

/* several searching threads while one thread adds and deletes */
typedef struct { vindex *v; const float *q; int32_t d; int bad; } th_arg;
static void *searcher(void *p) {
    th_arg *a = p;
    vindex_hit h[10];
    int32_t n;
    for (int i = 0; i < 300; i++)
        if (vindex_search(a->v, a->q + (size_t)(i % 100) * a->d, 10, h, &n, NULL, 0) || n != 10)
            a->bad++;
    return NULL;
}
TEST(concurrent_search_and_update) {
    float *x;
    int64_t *ids;
    int32_t d = 32;
    vindex *v = small_index(VINDEX_HNSW, 1000, d, &x, &ids);
    CHECK(v);
    th_arg args[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        args[i] = (th_arg){v, x, d, 0};
        pthread_create(&th[i], NULL, searcher, &args[i]);
    }
    float *more = synth_vectors(500, d, 99);
    int64_t mids[500];
    for (int i = 0; i < 500; i++) mids[i] = 50000 + i;
    char err[256];
    int rc = 0;
    for (int i = 0; i < 5 && !rc; i++) {
        rc = vindex_add(v, 100, mids + i * 100, more + (size_t)i * 100 * d, err, sizeof err);
        vindex_remove(v, 10, ids + i * 10);
    }
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    CHECK_MSG(rc == 0, "%s", err);
    for (int i = 0; i < 3; i++) CHECK(args[i].bad == 0);
    CHECK(vindex_size(v) == 1500 && vindex_dead(v) == 50);
    vindex_free(v);
    free(more);
    free(x);
    free(ids);
}
