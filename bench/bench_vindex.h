/* The vector benches' query loops over a vindex and an exact FAISS index (header-only). */
#ifndef MMRAG_BENCH_VINDEX_H
#define MMRAG_BENCH_VINDEX_H
#include "bench/bench_stats.h"
#include "index/index.h"

#include <faiss/c_api/Index_c.h>

/* nq queries of d floats one at a time, k <= 64 hits each: ms[i] its latency in ms,
 * got[i * k + j] the ids (-1 past the hits). */
static inline void bench_vindex_queries(vindex *v, const float *q, int32_t d, int nq, int k,
                                        int64_t *got, double *ms) {
    char err[256];
    for (int i = 0; i < nq; i++) {
        vindex_hit h[64];
        int32_t n = 0;
        double s = now_s();
        vindex_search(v, q + (size_t)i * d, k, h, &n, err, sizeof err);
        ms[i] = (now_s() - s) * 1e3;
        for (int j = 0; j < k; j++) got[i * k + j] = j < n ? h[j].id : -1;
    }
}

/* The same loop over an exact FAISS index: truth[i * k + j] = its label + id_base (-1 past
 * the hits). */
static inline void bench_exact_queries(FaissIndex *flat, const float *q, int32_t d, int nq, int k,
                                       int64_t id_base, int64_t *truth, double *ms) {
    for (int i = 0; i < nq; i++) {
        float dist[64];
        idx_t lab[64];
        double s = now_s();
        faiss_Index_search(flat, 1, q + (size_t)i * d, k, dist, lab);
        ms[i] = (now_s() - s) * 1e3;
        for (int j = 0; j < k; j++) truth[i * k + j] = lab[j] >= 0 ? lab[j] + id_base : -1;
    }
}
#endif
