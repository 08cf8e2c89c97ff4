/* api/server/server_metrics.c — request counters and latency histograms in Prometheus text. */
#include "api/server/server_internal.h"

#include <stdarg.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Seconds; fits both 1 ms API calls and multi-second generations. */
static const double bucket_le[SRV_NBUCKETS] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
};

void srv_metrics_init(srv_metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
}

static void hist_add(srv_hist *h, double v) {
    int b = 0;
    while (b < SRV_NBUCKETS && v > bucket_le[b]) b++;
    h->count[b]++;
    h->sum += v;
    h->n++;
}

void srv_metrics_request(srv_metrics *m, int route, int status, double seconds) {
    if (route < 0 || route >= R_COUNT) route = R_NONE;
    int cls = status / 100;
    if (cls < 1 || cls > 5) cls = 5;
    pthread_mutex_lock(&m->mu);
    m->req[route][cls]++;
    hist_add(&m->lat[route], seconds);
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_observe(srv_metrics *m, srv_hist *h, double seconds) {
    pthread_mutex_lock(&m->mu);
    hist_add(h, seconds);
    pthread_mutex_unlock(&m->mu);
}

typedef struct { char *p; size_t len, cap; int oom; } sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) { b->oom = 1; return; }
        if ((size_t)n < b->cap - b->len) { b->len += (size_t)n; return; }
        size_t nc = b->cap * 2 + (size_t)n;
        char *np = realloc(b->p, nc);
        if (!np) { b->oom = 1; return; }
        b->p = np;
        b->cap = nc;
    }
}

static void hist_print(sbuf *b, const char *name, const char *labels, const srv_hist *h) {
    uint64_t cum = 0;
    const char *sep = *labels ? "," : "";
    for (int i = 0; i < SRV_NBUCKETS; i++) {
        cum += h->count[i];
        sb_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, bucket_le[i],
                  (unsigned long long)cum);
    }
    cum += h->count[SRV_NBUCKETS];
    sb_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep, (unsigned long long)cum);
    sb_printf(b, "%s_sum{%s} %.6f\n", name, labels, h->sum);
    sb_printf(b, "%s_count{%s} %llu\n", name, labels, (unsigned long long)h->n);
}

/* The allocator's view beside the kernel's RSS: heap bytes in use growing means memory is
 * held; RSS growing with flat in-use bytes means free memory kept by malloc's arenas. */
static void heap_print(sbuf *b) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
    struct mallinfo2 mi = mallinfo2();
    sb_printf(b, "# HELP mmrag_heap_bytes Heap bytes by state (glibc malloc).\n"
                 "# TYPE mmrag_heap_bytes gauge\n"
                 "mmrag_heap_bytes{state=\"in_use\"} %zu\n"
                 "mmrag_heap_bytes{state=\"mapped\"} %zu\n"
                 "mmrag_heap_bytes{state=\"free\"} %zu\n",
              mi.uordblks + mi.hblkhd, mi.hblkhd, mi.fordblks);
#else
    (void)b;
#endif
}

char *srv_metrics_render(srv_metrics *m, int inflight, int queued, int gen_waiting) {
    sbuf b = {malloc(8192), 0, 8192, 0};
    if (!b.p) return NULL;
    b.p[0] = 0;
    pthread_mutex_lock(&m->mu);
    sb_printf(&b, "# HELP mmrag_http_requests_total HTTP requests by route and status class.\n"
                  "# TYPE mmrag_http_requests_total counter\n");
    for (int r = 1; r < R_COUNT; r++)
        for (int c = 1; c <= 5; c++)
            if (m->req[r][c])
                sb_printf(&b, "mmrag_http_requests_total{route=\"%s\",code=\"%dxx\"} %llu\n",
                          srv_route_name(r), c, (unsigned long long)m->req[r][c]);
    sb_printf(&b, "# HELP mmrag_http_request_duration_seconds Request latency by route.\n"
                  "# TYPE mmrag_http_request_duration_seconds histogram\n");
    for (int r = 1; r < R_COUNT; r++) {
        if (!m->lat[r].n) continue;
        char lab[64];
        snprintf(lab, sizeof lab, "route=\"%s\"", srv_route_name(r));
        hist_print(&b, "mmrag_http_request_duration_seconds", lab, &m->lat[r]);
    }
    sb_printf(&b, "# HELP mmrag_ttft_seconds Time to first generated token.\n"
                  "# TYPE mmrag_ttft_seconds histogram\n");
    hist_print(&b, "mmrag_ttft_seconds", "", &m->ttft);
    sb_printf(&b, "# HELP mmrag_inter_token_seconds Time between generated tokens.\n"
                  "# TYPE mmrag_inter_token_seconds histogram\n");
    hist_print(&b, "mmrag_inter_token_seconds", "", &m->itl);
    sb_printf(&b, "# HELP mmrag_ingest_pages_total Pages ingested.\n"
                  "# TYPE mmrag_ingest_pages_total counter\nmmrag_ingest_pages_total %llu\n",
              (unsigned long long)m->ingest_pages);
    sb_printf(&b, "# HELP mmrag_ingest_documents_total Ingest jobs by result.\n"
                  "# TYPE mmrag_ingest_documents_total counter\n"
                  "mmrag_ingest_documents_total{result=\"ok\"} %llu\n"
                  "mmrag_ingest_documents_total{result=\"failed\"} %llu\n",
              (unsigned long long)m->ingest_docs, (unsigned long long)m->ingest_failed);
    sb_printf(&b, "# HELP mmrag_rejected_total Requests refused by a limit.\n"
                  "# TYPE mmrag_rejected_total counter\n"
                  "mmrag_rejected_total{reason=\"busy\"} %llu\n"
                  "mmrag_rejected_total{reason=\"size\"} %llu\n",
              (unsigned long long)m->rejected_busy, (unsigned long long)m->rejected_size);
    pthread_mutex_unlock(&m->mu);
    sb_printf(&b, "# HELP mmrag_inflight_requests Requests being served.\n"
                  "# TYPE mmrag_inflight_requests gauge\nmmrag_inflight_requests %d\n", inflight);
    sb_printf(&b, "# HELP mmrag_ingest_queue_length Queued ingest jobs.\n"
                  "# TYPE mmrag_ingest_queue_length gauge\nmmrag_ingest_queue_length %d\n", queued);
    sb_printf(&b, "# HELP mmrag_generation_waiting Answers waiting for the language model.\n"
                  "# TYPE mmrag_generation_waiting gauge\nmmrag_generation_waiting %d\n", gen_waiting);
    heap_print(&b);
    if (b.oom) { free(b.p); return NULL; }
    return b.p;
}
