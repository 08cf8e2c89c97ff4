/* Isolated ingest, white-box: the wire format round-trips every field of real parsed
 * pages, and the decoder refuses hostile records (every truncation, lying counts, bad
 * kinds, indexes and line ranges, invalid UTF-8, NaN boxes, a fake PNG) without crashing;
 * a forked child (the library's mode) gives the same pages as an in-process parse and a
 * child that is not a PDF reports the ingest status. The end-to-end cases (crash, hang,
 * OOM, a real stall, the server) are in tests/test_isolate.sh. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>

#include "test.h"
#include "api/core/isolate.h"
#include "api/core/isolate_wire.h"
#include "kernels/kernels.h"

static char sample_dir[2048];

static const char *sample_pdf(void) {
    static char path[4096];
    if (path[0]) return path;
    snprintf(sample_dir, sizeof sample_dir, "%s/isolate-samples", test_env("MMRAG_TMP", "/tmp"));
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s/tests/tool_gencorpus' samples '%s' >/dev/null 2>&1",
             test_env("MMRAG_BUILD", "build"), sample_dir);
    if (system(cmd) != 0) return NULL;
    snprintf(path, sizeof path, "%s/northwind-q3-report.pdf", sample_dir);
    return path;
}

static int same_box(ingest_box a, ingest_box b) {
    return a.x0 == b.x0 && a.y0 == b.y0 && a.x1 == b.x1 && a.y1 == b.y1;
}

/* 1 when two pages carry the same content, field by field. */
static int same_page(const ingest_page *a, const ingest_page *b) {
    if (a->number != b->number || a->width_pt != b->width_pt || a->height_pt != b->height_pt ||
        a->ocr != b->ocr || a->n_images != b->n_images || a->n_chunks != b->n_chunks)
        return 0;
    for (int i = 0; i < a->n_images; i++) {
        const ingest_image *x = &a->images[i], *y = &b->images[i];
        if (x->index != y->index || x->page != y->page || x->kind != y->kind ||
            !same_box(x->box, y->box) || x->width_px != y->width_px ||
            x->height_px != y->height_px || x->phash != y->phash ||
            x->caption_chunk != y->caption_chunk || x->png_len != y->png_len ||
            (x->png_len && memcmp(x->png, y->png, x->png_len)))
            return 0;
    }
    for (int i = 0; i < a->n_chunks; i++) {
        const ingest_chunk *x = &a->chunks[i], *y = &b->chunks[i];
        if (x->order != y->order || x->page != y->page || x->kind != y->kind ||
            !same_box(x->box, y->box) || x->image_index != y->image_index ||
            strcmp(x->text, y->text) || x->n_lines != y->n_lines ||
            strcmp(x->section ? x->section : "", y->section ? y->section : ""))
            return 0;
        for (int k = 0; k < x->n_lines; k++)
            if (x->lines[k].off != y->lines[k].off || x->lines[k].len != y->lines[k].len ||
                !same_box(x->lines[k].box, y->lines[k].box))
                return 0;
    }
    return 1;
}

/* Page 1 of the sample, parsed in this process. */
static ingest_page *first_page(void) {
    const char *path = sample_pdf();
    if (!path) return NULL;
    ingest_doc *d = NULL;
    ingest_page *p = NULL;
    char err[512];
    if (ingest_doc_open(path, NULL, &d, err, sizeof err) == 0)
        ingest_doc_page(d, 1, &p, err, sizeof err);
    ingest_doc_free(d);
    return p;
}

TEST(wire_round_trip) {
    ingest_page *p = first_page();
    CHECK_MSG(p, "the sample PDF did not parse");
    CHECK(p->n_images >= 1 && p->n_chunks >= 2);
    wire_buf b = {0};
    wire_page_encode(&b, p);
    CHECK(!b.oom && b.len > 8);
    uint32_t type, len;
    memcpy(&type, b.p, 4);
    memcpy(&len, b.p + 4, 4);
    CHECK(type == WIRE_PAGE && len == b.len - 8);
    wire_expect ex = {1, 0, 0};
    ingest_page *q = NULL;
    char why[200];
    int rc = wire_page_decode(b.p + 8, len, &ex, &q, why, sizeof why);
    int same = rc == 0 && same_page(p, q);
    wire_buf_free(&b);
    ingest_page_free(p);
    ingest_page_free(q);
    CHECK_MSG(rc == 0, "%s", why);
    CHECK(same);
    CHECK(ex.page == 2 && ex.next_order > 0 && ex.next_image > 0);
}

/* Decode a payload; 1 when it is refused. */
static int refused(const uint8_t *p, size_t n) {
    wire_expect ex = {1, 0, 0};
    ingest_page *q = NULL;
    char why[200];
    int rc = wire_page_decode(p, n, &ex, &q, why, sizeof why);
    ingest_page_free(q);
    return rc != 0 && !q && ex.page == 1 && ex.next_order == 0 && ex.next_image == 0;
}

TEST(wire_refuses_every_truncation) {
    ingest_page *p = first_page();
    CHECK(p);
    wire_buf b = {0};
    wire_page_encode(&b, p);
    ingest_page_free(p);
    int all = 1;
    for (size_t n = 0; n < b.len - 8; n++)
        if (!refused(b.p + 8, n)) { all = 0; fprintf(stderr, "  accepted %zu bytes\n", n); break; }
    wire_buf_free(&b);
    CHECK(all);
}

/* A one-image, one-chunk page built by hand, with one field overridden by `bad`. */
typedef enum { OK, BAD_PAGE, BAD_COUNT, BAD_KIND, BAD_ORDER, BAD_ANCHOR, BAD_LINE, BAD_UTF8,
               BAD_NAN, BAD_PNG, BAD_CAPTION, BAD_NUL, BAD_SECTION, STRAY } fault;

static void put_f(wire_buf *b, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    wire_put_u32(b, u);
}

static void build(wire_buf *b, fault bad) {
    static const uint8_t png[] = "\x89PNG\r\n\x1a\nrest";
    const char *text = bad == BAD_UTF8 ? "caf\xc3 x" : bad == BAD_NUL ? "a\0b" : "Figure 1: caf\xc3\xa9";
    size_t tl = bad == BAD_NUL ? 3 : strlen(text);
    float nan = NAN, one = 1;
    wire_put_i32(b, bad == BAD_PAGE ? 2 : 1);
    put_f(b, 612);
    put_f(b, 792);
    wire_put_i32(b, 0);
    wire_put_i32(b, bad == BAD_COUNT ? 1000000 : 1);
    wire_put_i32(b, 1);
    /* image */
    wire_put_i32(b, 0); wire_put_i32(b, 1); wire_put_i32(b, bad == BAD_KIND ? 7 : 0);
    for (int i = 0; i < 4; i++) put_f(b, bad == BAD_NAN ? nan : one);
    wire_put_i32(b, 10); wire_put_i32(b, 10);
    wire_put_u32(b, 0); wire_put_u32(b, 0);   /* phash */
    wire_put_i32(b, bad == BAD_CAPTION ? 1 : 0);
    wire_put_str(b, bad == BAD_PNG ? (const uint8_t *)"GIF89a123456" : png, sizeof png - 1);
    /* chunk */
    wire_put_i32(b, bad == BAD_ORDER ? 5 : 0); wire_put_i32(b, 1); wire_put_i32(b, 1);
    for (int i = 0; i < 4; i++) put_f(b, one);
    wire_put_i32(b, bad == BAD_ANCHOR ? 1 : 0);
    wire_put_str(b, text, tl);
    wire_put_i32(b, 1);
    wire_put_u32(b, 0);
    wire_put_u32(b, bad == BAD_LINE ? (uint32_t)tl + 1 : (uint32_t)tl);
    for (int i = 0; i < 4; i++) put_f(b, one);
    static char long_section[WIRE_MAX_SECTION + 1];
    memset(long_section, 'a', sizeof long_section);
    if (bad == BAD_SECTION) wire_put_str(b, long_section, sizeof long_section);  /* over the limit */
    else wire_put_str(b, "Part > Section", 14);
    if (bad == STRAY) wire_put_i32(b, 0);
}

TEST(wire_refuses_lies) {
    wire_buf b = {0};
    build(&b, OK);
    wire_expect ex = {1, 0, 0};
    ingest_page *q = NULL;
    char why[200];
    int rc = wire_page_decode(b.p, b.len, &ex, &q, why, sizeof why);
    ingest_page_free(q);
    wire_buf_free(&b);
    CHECK_MSG(rc == 0, "the well-formed page was refused: %s", why);
    static const char *const names[] = {"", "page", "count", "kind", "order", "anchor", "line",
                                        "utf8", "nan", "png", "caption", "nul", "section", "stray"};
    for (int f = BAD_PAGE; f <= STRAY; f++) {
        build(&b, (fault)f);
        int r = refused(b.p, b.len);
        wire_buf_free(&b);
        CHECK_MSG(r, "a page with a bad %s was accepted", names[f]);
    }
}

TEST(forked_child_matches_in_process) {
    const char *path = sample_pdf();
    CHECK(path);
    ingest_options o;
    ingest_options_default(&o);
    isolate_limits l;
    isolate_limits_default(&l);
    l.timeout_s = 60;
    isolate_doc *iso = NULL;
    ingest_doc *d = NULL;
    char err[512] = "";
    int iso_rc = 0;
    CHECK_MSG(isolate_doc_open(path, NULL, 0, NULL, &o, &l, NULL, NULL, &iso, &iso_rc, err, sizeof err) == 0,
              "%s (%d)", err, iso_rc);
    CHECK(ingest_doc_open(path, &o, &d, err, sizeof err) == 0);
    int ok = isolate_doc_page_count(iso) == ingest_doc_page_count(d) &&
             !strcmp(isolate_doc_title(iso), ingest_doc_title(d));
    for (int32_t n = 1; ok && n <= ingest_doc_page_count(d); n++) {
        ingest_page *a = NULL, *b = NULL;
        ok = isolate_doc_page(iso, n, &a, &iso_rc, err, sizeof err) == 0 &&
             ingest_doc_page(d, n, &b, err, sizeof err) == 0 && same_page(a, b);
        ingest_page_free(a);
        ingest_page_free(b);
    }
    int fin = ok ? isolate_doc_finish(iso, &iso_rc, err, sizeof err) : -1;
    isolate_doc_free(iso);
    ingest_doc_free(d);
    CHECK_MSG(ok, "pages differ: %s", err);
    CHECK_MSG(fin == 0, "finish: %s", err);
}

TEST(child_reports_bad_pdf_and_memory_input) {
    ingest_options o;
    ingest_options_default(&o);
    isolate_limits l;
    isolate_limits_default(&l);
    isolate_doc *iso = NULL;
    char err[512] = "";
    int iso_rc = -99;
    int rc = isolate_doc_open(NULL, "hello, not a pdf", 16, "note.pdf", &o, &l, NULL, NULL,
                              &iso, &iso_rc, err, sizeof err);
    CHECK_MSG(rc == INGEST_ERR_NOT_PDF && iso_rc == 0 && !iso, "rc %d iso %d: %s", rc, iso_rc, err);
    CHECK_MSG(strstr(err, "note.pdf"), "%s", err);
}

static int abort_now(void *user) { (void)user; return 1; }

TEST(abort_callback_stops_the_child) {
    const char *path = sample_pdf();
    CHECK(path);
    isolate_limits l;
    isolate_limits_default(&l);
    isolate_doc *iso = NULL;
    char err[512] = "";
    int iso_rc = 0;
    int rc = isolate_doc_open(path, NULL, 0, NULL, NULL, &l, abort_now, NULL, &iso, &iso_rc,
                              err, sizeof err);
    isolate_doc_free(iso);
    /* the child may answer before the first wait: either it was aborted or it opened */
    CHECK_MSG((rc == INGEST_ERR_ARG && iso_rc == ISOLATE_ABORTED) || rc == 0, "rc %d iso %d", rc, iso_rc);
}

/* Several threads starting children at once, with OpenBLAS's thread pool running: its
 * pthread_atfork handler deadlocked two concurrent fork() calls (the server hung with two
 * uploads ingesting and never shut down). Exec children start by vfork (no handlers),
 * fork-only ones one at a time. alarm() turns a deadlock into a failure. */
typedef struct { const char *path, *exe; int ok; char err[512]; } spawn_job;

static void *spawn_many(void *arg) {
    spawn_job *j = arg;
    j->ok = 1;
    for (int i = 0; i < 3 && j->ok; i++) {
        isolate_limits l;
        isolate_limits_default(&l);
        l.timeout_s = 120;
        l.worker_exe = (i + (j->exe != NULL)) % 2 ? j->exe : NULL;
        isolate_doc *iso = NULL;
        int iso_rc = 0;
        j->ok = isolate_doc_open(j->path, NULL, 0, NULL, NULL, &l, NULL, NULL, &iso, &iso_rc,
                                 j->err, sizeof j->err) == 0;
        for (int32_t n = 1; j->ok && n <= isolate_doc_page_count(iso); n++) {
            ingest_page *p = NULL;
            j->ok = isolate_doc_page(iso, n, &p, &iso_rc, j->err, sizeof j->err) == 0;
            ingest_page_free(p);
        }
        if (j->ok) j->ok = isolate_doc_finish(iso, &iso_rc, j->err, sizeof j->err) == 0;
        isolate_doc_free(iso);
    }
    return NULL;
}

TEST(concurrent_children_with_blas_threads) {
    const char *path = sample_pdf();
    CHECK(path);
    char exe[2048];
    snprintf(exe, sizeof exe, "%s/mmrag", test_env("MMRAG_BUILD", "build"));
    /* OpenBLAS's own threads at work (mmrag keeps it at 1 and splits over its pool, but a
     * program linking libmmrag may not): the case kern_fork's lock is for */
    openblas_set_num_threads(2);
    enum { N = 96 };
    float *a = calloc(N * N, sizeof *a), *c = calloc(N * N, sizeof *c);
    CHECK(a && c);
    for (int i = 0; i < N * N; i++) a[i] = (float)(i % 7) - 3.0f;
    kern_gemm_f32(NULL, 1, N, N, N, 1.0f, a, N, a, N, 0.0f, c, N);   /* wakes its threads */
    unsigned prev = alarm(240);
    spawn_job jobs[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (spawn_job){path, i % 2 ? exe : NULL, 0, ""};
        CHECK(pthread_create(&t[i], NULL, spawn_many, &jobs[i]) == 0);
    }
    for (int r = 0; r < 20; r++) kern_gemm_f32(NULL, 1, N, N, N, 1.0f, a, N, a, N, 0.0f, c, N);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    alarm(prev);
    free(a);
    free(c);
    openblas_set_num_threads(1);
    for (int i = 0; i < 4; i++) CHECK_MSG(jobs[i].ok, "thread %d: %s", i, jobs[i].err);
}
