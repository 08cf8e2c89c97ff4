/* bench_index — mmrag's vector indexes side by side with exact search (FAISS Flat IP)
 * and hnswlib (C++ shim), same vectors, same queries, same process:
 *   build time, query latency p50/p99 (one query at a time, with and without encoding
 *   the query with MiniLM), recall@10 against exact search, memory per vector;
 *   the LSH code-length curve (candidate recall@10 vs bits) for the image index;
 *   OpenMP threads inside searches with several caller threads (1 vs all).
 * 10k = real MiniLM embeddings of varied English text (tests/vecs_util.h).
 * 100k = synthesized from those: each a real vector plus gaussian noise (relative norm
 * 0.5, renormalized), so 100k has ~10 noisy copies around each real text; queries are
 * the 200 held-out real vectors. Env BENCH_QUICK=1 skips the 100k size. */
#include "bench/bench_vindex.h"
#include "index/index.h"
#include "tests/vecs_util.h"
#include "vision/vision.h"

#include <faiss/c_api/IndexFlat_c.h>
#include <faiss/c_api/Index_c.h>
#include <omp.h>
#include <pthread.h>
#include <time.h>

typedef struct hnsw_shim hnsw_shim;
hnsw_shim *hnsw_shim_create(int dim, size_t max_elements, int m, int ef_construction);
void hnsw_shim_free(hnsw_shim *s);
int hnsw_shim_add(hnsw_shim *s, const float *v, int64_t label);
void hnsw_shim_set_ef(hnsw_shim *s, int ef);
int hnsw_shim_search(hnsw_shim *s, const float *q, int k, int64_t *labels, float *sims);

#define NQ 200
#define K 10

static double rss_mb(void) {
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
        fclose(f);
    }
    return rss * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
}

typedef struct row { const char *name; double build_s, p50, p99, enc_p50, enc_p99, recall, bytes_per_vec; } row;

static void print_row(const row *r, const row *base) {
    printf("  %-22s build %7.2f s   p50 %7.3f ms  p99 %7.3f ms   +encode p50 %6.2f ms p99 %6.2f ms"
           "   recall@10 %.4f   %6.0f B/vec   (p50 %5.2fx vs %s)\n",
           r->name, r->build_s, r->p50, r->p99, r->enc_p50, r->enc_p99, r->recall, r->bytes_per_vec,
           base->p50 / r->p50, base->name);
}

/* encode each query text and time it (the encoder cost is the same for every index) */
static double *encode_times(textenc *te, char **texts, int nq) {
    double *ms = malloc(NQ * sizeof *ms);
    float v[1024];
    char err[256];
    for (int i = 0; i < nq; i++) {
        double t0 = now_s();
        const char *t[1] = {texts[i]};
        if (textenc_embed(te, t, 1, v, err, sizeof err)) ms[i] = 0;
        else ms[i] = (now_s() - t0) * 1e3;
    }
    return ms;
}

static void with_encode(row *r, const double *search_ms, const double *enc_ms, int nq) {
    double *t = malloc((size_t)nq * sizeof *t);
    for (int i = 0; i < nq; i++) t[i] = search_ms[i] + enc_ms[i];
    pct(t, nq, &r->enc_p50, &r->enc_p99);
    free(t);
}

typedef struct targ { vindex *v; const float *q; int32_t d; } targ;
static void *search_thread(void *p) {
    targ *a = p;
    vindex_hit h[K];
    int32_t n;
    for (int i = 0; i < NQ; i++) vindex_search(a->v, a->q + (size_t)i * a->d, K, h, &n, NULL, 0);
    return NULL;
}

/* LSH (image index): candidate recall@10 vs code length, and after exact re-scoring */
static void lsh_curve(const float *base, int64_t nb, const float *q, int32_t d) {
    printf("\nLSH code length (image index; %lld real MiniLM vectors, %d queries; rotation + trained thresholds):\n",
           (long long)nb, NQ);
    int64_t *ids = malloc((size_t)nb * sizeof *ids);
    for (int64_t i = 0; i < nb; i++) ids[i] = i + 1;
    int64_t truth[NQ * K], got[NQ * K];
    FaissIndexFlatIP *flat = NULL;
    faiss_IndexFlatIP_new_with(&flat, d);
    faiss_Index_add((FaissIndex *)flat, nb, base);
    for (int i = 0; i < NQ; i++) {
        float dist[K];
        idx_t lab[K];
        faiss_Index_search((FaissIndex *)flat, 1, q + (size_t)i * d, K, dist, lab);
        for (int j = 0; j < K; j++) truth[i * K + j] = lab[j] + 1;
    }
    faiss_Index_free((FaissIndex *)flat);
    int bits[] = {64, 128, 256, 384};
    char err[256];
    for (int b = 0; b < 4; b++) {
        vindex_opts o;
        vindex_opts_default(&o, VINDEX_LSH, d);
        o.lsh_bits = bits[b];
        vindex *v = vindex_create(&o, err, sizeof err);
        if (!v || vindex_build(v, nb, ids, base, err, sizeof err)) { printf("  %s\n", err); break; }
        for (int i = 0; i < NQ; i++) {
            vindex_hit h[K];
            int32_t n = 0;
            vindex_search_candidates(v, q + (size_t)i * d, K, h, &n, err, sizeof err);
            for (int j = 0; j < K; j++) got[i * K + j] = j < n ? h[j].id : -1;
        }
        printf("  %3d bits (%2d B/code): candidate recall@10 %.3f", bits[b], bits[b] / 8, bench_recall(got, truth, NQ, K));
        int pools[] = {100, 200, 400};
        for (int p = 0; p < 3; p++) {
            vindex_set_lsh_pool(v, pools[p]);
            double ms[NQ];
            bench_vindex_queries(v, q, d, NQ, K, got, ms);
            double p50, p99;
            pct(ms, NQ, &p50, &p99);
            printf(" | re-scored pool %d: %.3f (p50 %.3f ms)", pools[p], bench_recall(got, truth, NQ, K), p50);
        }
        printf("\n");
        vindex_free(v);
    }
    free(ids);
}

static void run_size(const char *label, const float *base, int64_t nb, const float *q, int32_t d,
                     const double *enc_ms) {
    printf("\n%s: %lld vectors x %d dims, %d queries, k=%d, one query at a time, 1 thread\n", label,
           (long long)nb, d, NQ, K);
    int64_t *ids = malloc((size_t)nb * sizeof *ids);
    for (int64_t i = 0; i < nb; i++) ids[i] = i + 1;
    int64_t truth[NQ * K], got[NQ * K];
    double ms[NQ];
    char err[256];
    row rows[3];
    memset(rows, 0, sizeof rows);

    /* exact: FAISS IndexFlatIP */
    omp_set_num_threads(1);
    double m0 = rss_mb(), t0 = now_s();
    FaissIndexFlatIP *flat = NULL;
    faiss_IndexFlatIP_new_with(&flat, d);
    faiss_Index_add((FaissIndex *)flat, nb, base);
    rows[0] = (row){.name = "exact (FAISS Flat)", .build_s = now_s() - t0};
    rows[0].bytes_per_vec = (rss_mb() - m0) * 1048576.0 / nb;
    bench_exact_queries((FaissIndex *)flat, q, d, NQ, K, 1, truth, ms);   /* ids are rows + 1 */
    pct(ms, NQ, &rows[0].p50, &rows[0].p99);
    with_encode(&rows[0], ms, enc_ms, NQ);
    rows[0].recall = 1.0;
    faiss_Index_free((FaissIndex *)flat);

    /* mmrag: vindex HNSW (FAISS IDMap,HNSW32,Flat), build with all cores like ingest */
    omp_set_num_threads(omp_get_num_procs());
    vindex_opts o;
    vindex_opts_default(&o, VINDEX_HNSW, d);
    m0 = rss_mb();
    t0 = now_s();
    vindex *v = vindex_create(&o, err, sizeof err);
    if (!v || vindex_build(v, nb, ids, base, err, sizeof err)) { printf("  mmrag: %s\n", err); return; }
    rows[1] = (row){.name = "mmrag HNSW32 ef128", .build_s = now_s() - t0};
    rows[1].bytes_per_vec = (rss_mb() - m0) * 1048576.0 / nb;
    bench_vindex_queries(v, q, d, NQ, K, got, ms);
    pct(ms, NQ, &rows[1].p50, &rows[1].p99);
    with_encode(&rows[1], ms, enc_ms, NQ);
    rows[1].recall = bench_recall(got, truth, NQ, K);
    printf("  (mmrag estimated index bytes/vector: %.0f)\n", vindex_memory(v) / (double)nb);

    /* hnswlib, same M / efConstruction / efSearch */
    m0 = rss_mb();
    t0 = now_s();
    hnsw_shim *h = hnsw_shim_create(d, (size_t)nb, o.hnsw_m, o.ef_construction);
    for (int64_t i = 0; h && i < nb; i++) hnsw_shim_add(h, base + (size_t)i * d, ids[i]);
    rows[2] = (row){.name = "hnswlib M32 ef128", .build_s = now_s() - t0};
    rows[2].bytes_per_vec = (rss_mb() - m0) * 1048576.0 / nb;
    if (h) {
        hnsw_shim_set_ef(h, o.ef_search);
        for (int i = 0; i < NQ; i++) {
            int64_t lab[K];
            float sims[K];
            double s = now_s();
            int n = hnsw_shim_search(h, q + (size_t)i * d, K, lab, sims);
            ms[i] = (now_s() - s) * 1e3;
            for (int j = 0; j < K; j++) got[i * K + j] = j < n ? lab[j] : -1;
        }
        pct(ms, NQ, &rows[2].p50, &rows[2].p99);
        with_encode(&rows[2], ms, enc_ms, NQ);
        rows[2].recall = bench_recall(got, truth, NQ, K);
        hnsw_shim_free(h);
    }
    printf("  note: hnswlib builds single-threaded here (its addPoint loop), mmrag/FAISS with %d OpenMP threads\n",
           omp_get_num_procs());
    for (int i = 0; i < 3; i++) print_row(&rows[i], &rows[0]);

    /* efSearch sweep: the speed/recall knob */
    printf("  mmrag efSearch sweep:");
    int efs[] = {16, 32, 64, 96, 128, 256};
    for (int e = 0; e < 6; e++) {
        vindex_set_ef_search(v, efs[e]);
        bench_vindex_queries(v, q, d, NQ, K, got, ms);
        double p50, p99;
        pct(ms, NQ, &p50, &p99);
        printf("  ef%d: R %.3f p50 %.3fms |", efs[e], bench_recall(got, truth, NQ, K), p50);
    }
    printf("\n");
    vindex_set_ef_search(v, o.ef_search);

    /* OpenMP inside searches with 4 caller threads: 1 thread per search vs all cores */
    if (nb <= 20000) {
        double wall[2];
        for (int mode = 0; mode < 2; mode++) {
            vindex_set_search_threads(v, mode ? omp_get_num_procs() : 1);
            pthread_t th[4];
            targ ta[4];
            double s = now_s();
            for (int t = 0; t < 4; t++) {
                ta[t] = (targ){v, q, d};
                pthread_create(&th[t], NULL, search_thread, &ta[t]);
            }
            for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
            wall[mode] = now_s() - s;
        }
        vindex_set_search_threads(v, 1);
        printf("  4 caller threads x %d searches: omp 1 thread/search %.3f s, omp %d threads/search %.3f s (%.2fx)\n",
               NQ, wall[0], omp_get_num_procs(), wall[1], wall[1] / wall[0]);
    }
    vindex_free(v);
    free(ids);
}

int main(void) {
    vecs_set vs;
    char why[512];
    if (vecs_load_real(&vs, why, sizeof why)) {
        printf("bench_index: real embeddings unavailable: %s\n", why);
        return 1;
    }
    int32_t d = vs.dim;
    int64_t nb = vs.n - NQ;
    const float *q = vs.v + (size_t)nb * d;
    vecs_texts T;
    vecs_corpus(&T, VECS_REAL_N);
    textenc *te = NULL;
    char err[512];
    double *enc = NULL;
    if (textenc_create(NULL, NULL, &te, err, sizeof err) == 0) {
        enc = encode_times(te, T.t + nb, NQ);
        textenc_free(te);
    } else {
        printf("(no text encoder: %s; encode columns are 0)\n", err);
        enc = calloc(NQ, sizeof *enc);
    }
    double e50, e99, tmp[NQ];
    memcpy(tmp, enc, sizeof tmp);
    pct(tmp, NQ, &e50, &e99);
    printf("query encoding (MiniLM, textenc_embed, 1 query): p50 %.2f ms  p99 %.2f ms\n", e50, e99);
    run_size("10k (real MiniLM embeddings)", vs.v, nb, q, d, enc);
    lsh_curve(vs.v, nb, q, d);
    if (!getenv("BENCH_QUICK")) {
        int64_t nbig = 100000;
        float *big = perturb_vectors(vs.v, nb, d, nbig, 0.5f, 1);
        run_size("100k (synthesized: real + noise)", big, nbig, q, d, enc);
        free(big);
    }
    free(enc);
    vecs_texts_free(&T);
    vecs_free(&vs);
    return 0;
}
