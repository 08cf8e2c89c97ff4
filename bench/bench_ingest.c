/* bench_ingest — ingest pages/s of mmrag (text layout, figures, crops, chunks; no
 * embeddings) against `pdftotext -bbox-layout` (spawned) on the same generated files.
 * mmrag is timed twice: with OCR (its default) and without, since pdftotext never OCRs.
 * Output: one row per file and a total row with the ratio mmrag/pdftotext (>1 = faster). */
#include "ingest/ingest.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* seconds to ingest every page, or -1 */
static double run_mmrag(const char *path, int ocr, int *pages) {
    ingest_options o;
    ingest_options_default(&o);
    o.ocr = ocr;
    char err[512];
    ingest_doc *d;
    double t0 = now_s();
    if (ingest_doc_open(path, &o, &d, err, sizeof err)) {
        fprintf(stderr, "bench_ingest: %s\n", err);
        return -1;
    }
    *pages = ingest_doc_page_count(d);
    for (int p = 1; p <= *pages; p++) {
        ingest_page *pg;
        int rc = ingest_doc_page(d, p, &pg, err, sizeof err);
        if (rc && !pg) {
            fprintf(stderr, "bench_ingest: %s\n", err);
            ingest_doc_free(d);
            return -1;
        }
        ingest_page_free(pg);
    }
    ingest_doc_free(d);
    return now_s() - t0;
}

static double run_pdftotext(const char *path) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "pdftotext -q -bbox-layout '%s' /dev/null", path);
    double t0 = now_s();
    if (system(cmd) != 0) return -1;
    return now_s() - t0;
}

int main(void) {
    const char *build = getenv("MMRAG_BUILD") ? getenv("MMRAG_BUILD") : "build";
    const char *tmp = getenv("MMRAG_TMP") ? getenv("MMRAG_TMP") : "/tmp";
    if (system("command -v pdftotext >/dev/null 2>&1") != 0) {
        printf("bench_ingest: pdftotext not found (apt-get install poppler-utils); skipped\n");
        return 0;
    }
    char dir[2048], cmd[8192];
    snprintf(dir, sizeof dir, "%s/bench-ingest", tmp);
    snprintf(cmd, sizeof cmd, "T='%s/tests/tool_gencorpus'; $T corpus '%s' && $T samples '%s' && $T bad '%s'",
             build, dir, dir, dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_ingest: corpus generation failed\n");
        return 1;
    }
    static const char *const files[] = {"corpus.pdf", "northwind-q3-report.pdf", "helios-inverter-manual.pdf",
                                        "sparse-attention-paper.pdf", "big-2000.pdf"};
    printf("%-28s %6s %12s %12s %12s %8s\n", "file", "pages", "mmrag p/s", "mmrag-noOCR", "pdftotext",
           "ratio*");
    double tm = 0, tn = 0, tp = 0;
    int total = 0;
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        int pages = 0, p2 = 0;
        double m = run_mmrag(path, 1, &pages), n = run_mmrag(path, 0, &p2), t = run_pdftotext(path);
        if (m < 0 || n < 0 || t < 0) {
            fprintf(stderr, "bench_ingest: %s failed\n", files[i]);
            return 1;
        }
        printf("%-28s %6d %12.1f %12.1f %12.1f %8.2f\n", files[i], pages, pages / m, pages / n, pages / t,
               t / n);
        tm += m;
        tn += n;
        tp += t;
        total += pages;
    }
    printf("%-28s %6d %12.1f %12.1f %12.1f %8.2f\n", "total", total, total / tm, total / tn, total / tp,
           tp / tn);
    printf("* ratio = mmrag (no OCR) pages/s / pdftotext -bbox-layout pages/s; mmrag also renders "
           "pages with images or captions to find figures, crops PNGs and chunks\n");
    return 0;
}
