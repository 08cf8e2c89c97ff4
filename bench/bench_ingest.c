/* bench_ingest — ingest pages/s of mmrag (text layout, figures, crops, chunks; no
 * embeddings) against `pdftotext -bbox-layout` (spawned) on the same files: the generated
 * corpus, then two real PDFs from Debian documentation packages (when they can be fetched).
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

typedef struct { double m, n, p; int pages; } totals; /* seconds: OCR, no OCR, pdftotext */

static void print_row(const char *name, const totals *t) {
    printf("%-28s %6d %12.1f %12.1f %12.1f %8.2f\n", name, t->pages, t->pages / t->m,
           t->pages / t->n, t->pages / t->p, t->p / t->n);
}

/* One row: the file through mmrag with and without OCR, and through pdftotext. */
static int bench_file(const char *path, const char *name, totals *sum) {
    totals t = {0, 0, 0, 0};
    int p2 = 0;
    t.m = run_mmrag(path, 1, &t.pages);
    t.n = run_mmrag(path, 0, &p2);
    t.p = run_pdftotext(path);
    if (t.m < 0 || t.n < 0 || t.p < 0) {
        fprintf(stderr, "bench_ingest: %s failed\n", name);
        return -1;
    }
    print_row(name, &t);
    sum->m += t.m;
    sum->n += t.n;
    sum->p += t.p;
    sum->pages += t.pages;
    return 0;
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
    totals gen = {0, 0, 0, 0}, real = {0, 0, 0, 0};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (bench_file(path, files[i], &gen)) return 1;
    }
    print_row("total (generated)", &gen);
    /* the second corpus: real PDFs from Debian documentation packages */
    char real_dir[2048] = "";
    FILE *f = popen("scripts/fetch-debian-docs.sh 2>/dev/null", "r");
    if (f) {
        if (!fgets(real_dir, sizeof real_dir, f)) real_dir[0] = 0;
        if (pclose(f) != 0) real_dir[0] = 0;
    }
    real_dir[strcspn(real_dir, "\n")] = 0;
    if (real_dir[0]) {
        static const char *const docs[] = {"debian-reference.en.pdf", "gnuplot.pdf"};
        for (size_t i = 0; i < sizeof docs / sizeof *docs; i++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", real_dir, docs[i]);
            if (bench_file(path, docs[i], &real)) return 1;
        }
        print_row("total (Debian docs)", &real);
    } else {
        printf("(Debian documentation PDFs unavailable: scripts/fetch-debian-docs.sh failed)\n");
    }
    printf("* ratio = mmrag (no OCR) pages/s / pdftotext -bbox-layout pages/s; mmrag also renders "
           "pages with images or captions to find figures, crops PNGs and chunks\n");
    return 0;
}
