/* Timing and quality helpers shared by the vector benches (header-only, static helpers):
 * a monotonic clock, p50/p99 of latencies, recall@k of result ids against exact ones. */
#ifndef MMRAG_BENCH_STATS_H
#define MMRAG_BENCH_STATS_H
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* sorts ms in place */
static inline void pct(double *ms, int n, double *p50, double *p99) {
    qsort(ms, (size_t)n, sizeof *ms, cmp_d);
    *p50 = ms[n / 2];
    *p99 = ms[(int)(n * 0.99) < n ? (int)(n * 0.99) : n - 1];
}

/* got and truth: nq rows of k ids; a negative id in got is no hit */
static inline double bench_recall(const int64_t *got, const int64_t *truth, int nq, int k) {
    int hit = 0;
    for (int i = 0; i < nq; i++)
        for (int a = 0; a < k; a++)
            for (int b = 0; b < k; b++)
                if (got[i * k + a] >= 0 && got[i * k + a] == truth[i * k + b]) { hit++; break; }
    return hit / (double)(nq * k);
}
#endif
