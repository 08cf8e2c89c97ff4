/* ingest tests on the generated corpus (tests/tool_gencorpus.c writes the PDFs and a
 * truth.json with the exact boxes it drew, the captions, the planted facts and the text
 * of the scanned page). Checks: facts on the right page, image/figure boxes IoU >= 0.9,
 * caption pairing, chunk anchoring, two-column reading order, OCR, token budget, the
 * text lines of each chunk (cover its text, boxes inside its box, one per drawn line),
 * bad inputs, and flat peak RSS over a 2,000-page PDF (in a child process, so the
 * peak is not inherited from the other tests). */
#include "ingest/ingest.h"
#include "tests/test.h"
#include <cairo.h>
#include <cairo-pdf.h>
#include <ctype.h>
#include <jansson.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NPAGES_MAX 16

static char corpus_dir[1024], bad_dir[1024];
static json_t *truth;            /* docs[0] of truth.json */
static ingest_page *pages[NPAGES_MAX + 1];
static int n_pages;
static ingest_doc *doc;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int gen(const char *what, char *dir, size_t dirlen) {
    const char *tmp = test_env("MMRAG_TMP", "/tmp");
    const char *build = test_env("MMRAG_BUILD", "build");
    snprintf(dir, dirlen, "%s/ingest-%s", tmp, what);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s/tests/tool_gencorpus' %s '%s'", build, what, dir);
    return system(cmd);
}

/* Generate and ingest the corpus once; later tests reuse the parsed pages. */
static int load_corpus(void) {
    if (doc) return 0;
    if (gen("corpus", corpus_dir, sizeof corpus_dir)) return -1;
    char path[2048], err[512];
    snprintf(path, sizeof path, "%s/truth.json", corpus_dir);
    json_t *root = json_load_file(path, 0, NULL);
    if (!root) return -1;
    truth = json_incref(json_array_get(json_object_get(root, "docs"), 0));
    json_decref(root);
    snprintf(path, sizeof path, "%s/corpus.pdf", corpus_dir);
    ingest_options o;
    ingest_options_default(&o);
    if (ingest_doc_open(path, &o, &doc, err, sizeof err)) {
        fprintf(stderr, "  open: %s\n", err);
        return -1;
    }
    n_pages = ingest_doc_page_count(doc);
    if (n_pages > NPAGES_MAX) return -1;
    double t0 = now_s();
    for (int p = 1; p <= n_pages; p++) {
        int rc = ingest_doc_page(doc, p, &pages[p], err, sizeof err);
        if (rc) fprintf(stderr, "  page %d: %s\n", p, err);
        if (!pages[p]) return -1;
    }
    printf("  corpus: %d pages in %.2f s\n", n_pages, now_s() - t0);
    return 0;
}

/* cairo PNG reader over a memory buffer: an independent decoder for the crops */
typedef struct { const uint8_t *p; size_t n, at; } png_src;
static cairo_status_t png_read(void *closure, unsigned char *data, unsigned int len) {
    png_src *s = closure;
    if (s->at + len > s->n) return CAIRO_STATUS_READ_ERROR;
    memcpy(data, s->p + s->at, len);
    s->at += len;
    return CAIRO_STATUS_SUCCESS;
}

static json_t *truth_page(int p) { return json_array_get(json_object_get(truth, "pages"), (size_t)p - 1); }

/* all chunk text of a page, whitespace collapsed to single spaces */
static char *page_text(const ingest_page *pg) {
    size_t n = 1;
    for (int i = 0; i < pg->n_chunks; i++) n += strlen(pg->chunks[i].text) + 1;
    char *s = malloc(n), *q = s;
    for (int i = 0; i < pg->n_chunks; i++) {
        for (const char *t = pg->chunks[i].text; *t; t++) *q++ = (*t == '\n' || *t == '\t') ? ' ' : *t;
        *q++ = ' ';
    }
    *q = 0;
    return s;
}

static double iou(ingest_box a, const json_t *b) {
    double bx0 = json_real_value(json_array_get(b, 0)), by0 = json_real_value(json_array_get(b, 1));
    double bx1 = json_real_value(json_array_get(b, 2)), by1 = json_real_value(json_array_get(b, 3));
    double ix = fmin(a.x1, bx1) - fmax(a.x0, bx0), iy = fmin(a.y1, by1) - fmax(a.y0, by0);
    if (ix <= 0 || iy <= 0) return 0;
    double in = ix * iy;
    return in / ((a.x1 - a.x0) * (a.y1 - a.y0) + (bx1 - bx0) * (by1 - by0) - in);
}

/* first chunk (in document order) containing `needle`, of `kind` (-1 = any) */
static const ingest_chunk *find_chunk_kind(const char *needle, int kind, int *page) {
    for (int p = 1; p <= n_pages; p++)
        for (int i = 0; i < pages[p]->n_chunks; i++)
            if ((kind < 0 || pages[p]->chunks[i].kind == kind) && strstr(pages[p]->chunks[i].text, needle)) {
                if (page) *page = p;
                return &pages[p]->chunks[i];
            }
    return NULL;
}

static const ingest_chunk *find_chunk(const char *needle, int *page) { return find_chunk_kind(needle, -1, page); }

TEST(planted_facts_on_right_page) {
    CHECK(load_corpus() == 0);
    int checked = 0;
    for (int p = 1; p <= n_pages; p++) {
        json_t *facts = json_object_get(truth_page(p), "facts");
        size_t i;
        json_t *f;
        json_array_foreach(facts, i, f) {
            const char *fact = json_string_value(f);
            for (int q = 1; q <= n_pages; q++) {
                char *t = page_text(pages[q]);
                int found = strstr(t, fact) != NULL;
                free(t);
                CHECK_MSG(found == (q == p), "fact '%s' (page %d) %s on page %d", fact, p,
                          found ? "found" : "missing", q);
            }
            checked++;
        }
    }
    CHECK(checked >= 6);
}

TEST(headings_are_heading_chunks) {
    CHECK(load_corpus() == 0);
    for (int p = 1; p <= n_pages; p++) {
        size_t i;
        json_t *h;
        json_array_foreach(json_object_get(truth_page(p), "headings"), i, h) {
            int ok = 0;
            for (int c = 0; c < pages[p]->n_chunks; c++)
                ok |= pages[p]->chunks[c].kind == INGEST_CHUNK_HEADING &&
                      !strcmp(pages[p]->chunks[c].text, json_string_value(h));
            CHECK_MSG(ok, "heading '%s' on page %d", json_string_value(h), p);
        }
    }
}

TEST(image_boxes_iou_and_captions) {
    CHECK(load_corpus() == 0);
    int n_truth = 0, n_found = 0;
    for (int p = 1; p <= n_pages; p++) {
        json_t *imgs = json_object_get(truth_page(p), "images");
        const ingest_page *pg = pages[p];
        n_found += pg->n_images;
        size_t i;
        json_t *t;
        json_array_foreach(imgs, i, t) {
            n_truth++;
            int kind = strcmp(json_string_value(json_object_get(t, "kind")), "raster") ? INGEST_IMAGE_VECTOR
                                                                                        : INGEST_IMAGE_RASTER;
            double best = 0;
            const ingest_image *bi = NULL;
            for (int k = 0; k < pg->n_images; k++) {
                double v = iou(pg->images[k].box, json_object_get(t, "box"));
                if (v > best) { best = v; bi = &pg->images[k]; }
            }
            printf("  page %d %s figure: IoU %.3f\n", p, kind ? "vector" : "raster", best);
            CHECK_MSG(bi && best >= 0.9, "page %d image %zu IoU %.3f", p, i, best);
            CHECK(bi->kind == kind);
            CHECK(bi->page == p);
            /* caption pairing: the image's caption chunk is the truth caption, anchored back */
            CHECK_MSG(bi->caption_chunk >= 0 && bi->caption_chunk < pg->n_chunks, "page %d no caption", p);
            const ingest_chunk *cc = &pg->chunks[bi->caption_chunk];
            CHECK(cc->kind == INGEST_CHUNK_CAPTION);
            CHECK_MSG(!strcmp(cc->text, json_string_value(json_object_get(t, "caption"))), "caption '%s'",
                      cc->text);
            CHECK(cc->image_index == bi->index);
            /* a real PNG crop of about the box size at 144 dpi, and a hash */
            CHECK(bi->png_len > 8 && !memcmp(bi->png, "\x89PNG\r\n\x1a\n", 8));
            CHECK_NEAR(bi->width_px, (bi->box.x1 - bi->box.x0) * pg->width_pt * 2, 3);
            /* the crop decodes to its stated size and holds ink (not a blank or cut image) */
            png_src src = {bi->png, bi->png_len, 0};
            cairo_surface_t *dec = cairo_image_surface_create_from_png_stream(png_read, &src);
            CHECK(cairo_surface_status(dec) == CAIRO_STATUS_SUCCESS);
            if (cairo_surface_status(dec) == CAIRO_STATUS_SUCCESS) {
                int dw = cairo_image_surface_get_width(dec), dh = cairo_image_surface_get_height(dec);
                CHECK(dw == bi->width_px && dh == bi->height_px);
                const unsigned char *d = cairo_image_surface_get_data(dec);
                int ds = cairo_image_surface_get_stride(dec), dark = 0;
                for (int y = 0; y < dh; y++)
                    for (int x = 0; x < dw; x++) dark += d[(size_t)y * ds + 4 * x + 1] < 128;
                CHECK_MSG(dark > dw * dh / 200, "page %d crop has %d dark pixels", p, dark);
            }
            cairo_surface_destroy(dec);
            CHECK(bi->phash != 0);
        }
    }
    CHECK_MSG(n_found == n_truth, "%d images found, truth has %d", n_found, n_truth);
    /* image indexes are unique across the document; hashes of different figures differ */
    int seen = 0;
    uint64_t hashes[32];
    for (int p = 1; p <= n_pages; p++)
        for (int k = 0; k < pages[p]->n_images; k++) {
            CHECK(pages[p]->images[k].index == seen);
            for (int j = 0; j < seen; j++) CHECK(hashes[j] != pages[p]->images[k].phash);
            if (seen < 32) hashes[seen] = pages[p]->images[k].phash;
            seen++;
        }
}

TEST(tables_are_table_chunks_not_images) {
    CHECK(load_corpus() == 0);
    int p;
    const ingest_chunk *c = find_chunk("Turbine inspection", &p);
    CHECK(c);
    CHECK(c->kind == INGEST_CHUNK_TABLE);
    CHECK(strstr(c->text, "Turbine inspection | 180 days | Four engineers"));
    json_t *tb = json_array_get(json_object_get(truth_page(p), "tables"), 0);
    CHECK(tb);
    /* the chunk box is the union of the cell text: inside the ruled table box */
    double v = iou(c->box, json_object_get(tb, "box"));
    CHECK_MSG(v > 0.5, "table text box IoU %.3f", v);
    CHECK(pages[p]->n_images == 0);
}

static int image_of_caption(const char *caption_prefix) {
    const ingest_chunk *c = find_chunk(caption_prefix, NULL);
    return c && c->kind == INGEST_CHUNK_CAPTION ? c->image_index : -2;
}

TEST(chunk_anchoring) {
    CHECK(load_corpus() == 0);
    int fig1 = image_of_caption("Figure 1:"), fig2 = image_of_caption("Figure 2:"),
        fig3 = image_of_caption("Figure 3:");
    CHECK(fig1 >= 0 && fig2 >= 0 && fig3 >= 0 && fig2 != fig3);
    struct { const char *text; int image; int kind; } want[] = {
        {"The photo above shows", fig1, INGEST_CHUNK_TEXT},
        {"The Quibble turbine spins", fig2, INGEST_CHUNK_TEXT},
        {"The bar chart shows", fig2, INGEST_CHUNK_TEXT},
        {"peaked at 78 percent", fig3, INGEST_CHUNK_TEXT},
        {"Q4", fig2, INGEST_CHUNK_FIGURE},       /* axis labels inside the bar chart */
        {"Grendel", fig3, INGEST_CHUNK_FIGURE},  /* legend inside the line chart */
        {"the plant stopped only twice", -1, INGEST_CHUNK_TEXT}, /* page without images */
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const ingest_chunk *c = find_chunk_kind(want[i].text, want[i].kind, NULL);
        CHECK_MSG(c, "no %s chunk with '%s'", ingest_chunk_kind_name(want[i].kind), want[i].text);
        CHECK_MSG(c->image_index == want[i].image, "'%s': anchored to %d, want %d", want[i].text,
                  c->image_index, want[i].image);
    }
}

TEST(chunk_order_and_boxes) {
    CHECK(load_corpus() == 0);
    int last = -1;
    for (int p = 1; p <= n_pages; p++)
        for (int i = 0; i < pages[p]->n_chunks; i++) {
            const ingest_chunk *c = &pages[p]->chunks[i];
            CHECK(c->order == last + 1);
            last = c->order;
            CHECK(c->page == p);
            CHECK(c->box.x0 >= 0 && c->box.y0 >= 0 && c->box.x1 <= 1 && c->box.y1 <= 1);
            CHECK(c->box.x0 < c->box.x1 && c->box.y0 < c->box.y1);
        }
    int p;
    const ingest_chunk *c = find_chunk("Zorblax reactor produces 42", &p);
    CHECK(c && p == 1);
    /* that paragraph is the first below the heading: top part of page 1 */
    CHECK(c->box.y0 > 0.1 && c->box.y1 < 0.2);
}

TEST(two_column_reading_order) {
    CHECK(load_corpus() == 0);
    json_t *tp = NULL;
    int p = 0;
    for (int q = 1; q <= n_pages && !tp; q++)
        if (json_object_get(truth_page(q), "order")) { tp = truth_page(q); p = q; }
    CHECK(tp);
    char *t = page_text(pages[p]);
    const char *prev = t;
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(tp, "order"), i, m) {
        const char *at = strstr(t, json_string_value(m));
        CHECK_MSG(at && at >= prev, "marker %s out of order", json_string_value(m));
        prev = at;
    }
    const char *end = strstr(t, "SPANEND");
    CHECK(end && end > prev);
    free(t);
}

static void words_lower(const char *s, char out[][32], int *n, int max) {
    *n = 0;
    while (*s && *n < max) {
        while (*s && !isalnum((unsigned char)*s)) s++;
        int k = 0;
        while (*s && isalnum((unsigned char)*s)) {
            if (k < 31) out[*n][k++] = (char)tolower((unsigned char)*s);
            s++;
        }
        if (k) { out[*n][k] = 0; (*n)++; }
    }
}

TEST(ocr_scanned_page) {
    CHECK(load_corpus() == 0);
    int p = 0;
    for (int q = 1; q <= n_pages; q++)
        if (json_is_true(json_object_get(truth_page(q), "ocr"))) p = q;
    CHECK(p > 0);
    CHECK(pages[p]->ocr == 1);
    CHECK(pages[p]->n_chunks > 0);
    for (int i = 0; i < pages[p]->n_chunks; i++) CHECK(pages[p]->chunks[i].kind == INGEST_CHUNK_OCR);
    for (int q = 1; q <= n_pages; q++) CHECK(q == p || pages[q]->ocr == 0);
    static char want[200][32], got[400][32];
    int nw, ng;
    char *t = page_text(pages[p]);
    words_lower(json_string_value(json_object_get(truth_page(p), "ocr_text")), want, &nw, 200);
    words_lower(t, got, &ng, 400);
    free(t);
    int hit = 0;
    for (int i = 0; i < nw; i++)
        for (int j = 0; j < ng; j++)
            if (!strcmp(want[i], got[j])) { hit++; break; }
    printf("  OCR word recall: %d/%d (%.1f%%), %d words read\n", hit, nw, 100.0 * hit / nw, ng);
    CHECK(nw > 20);
    CHECK_MSG(hit >= nw * 9 / 10, "OCR recall %d/%d", hit, nw);
    CHECK(find_chunk("Vortigan", NULL) && find_chunk("Kestrel", NULL));
}

TEST(token_budget_overlap_and_whole_captions) {
    CHECK(load_corpus() == 0);
    char path[2048], err[512];
    snprintf(path, sizeof path, "%s/corpus.pdf", corpus_dir);
    ingest_options o;
    ingest_options_default(&o);
    o.chunk_tokens = 8;
    o.overlap_tokens = 3;
    o.ocr = 0;
    ingest_doc *d;
    CHECK(ingest_doc_open(path, &o, &d, err, sizeof err) == 0);
    int overlaps = 0, captions = 0;
    for (int p = 1; p <= 2; p++) {
        ingest_page *pg;
        CHECK(ingest_doc_page(d, p, &pg, err, sizeof err) == 0);
        for (int i = 0; i < pg->n_chunks; i++) {
            const ingest_chunk *c = &pg->chunks[i];
            static char w[64][32], w2[64][32];
            int n, n2;
            words_lower(c->text, w, &n, 64);
            if (c->kind == INGEST_CHUNK_CAPTION) {
                CHECK(n >= 8); /* captions reach or pass the budget and stay whole */
                CHECK(!strncmp(c->text, "Figure ", 7) && c->text[strlen(c->text) - 1] == '.');
                captions++;
                continue;
            }
            if (c->kind != INGEST_CHUNK_TEXT) continue;
            CHECK_MSG(n <= 8, "chunk of %d words", n);
            if (i + 1 < pg->n_chunks && pg->chunks[i + 1].kind == INGEST_CHUNK_TEXT && n == 8) {
                words_lower(pg->chunks[i + 1].text, w2, &n2, 64);
                if (n2 >= 3 && !strcmp(w[5], w2[0]) && !strcmp(w[6], w2[1]) && !strcmp(w[7], w2[2]))
                    overlaps++;
            }
        }
        ingest_page_free(pg);
    }
    ingest_doc_free(d);
    CHECK(captions == 3);
    CHECK_MSG(overlaps >= 10, "%d overlapping chunk pairs", overlaps);
}

/* ---------- text lines of a chunk ---------- */

/* NULL when the chunk's lines hold: at least one, ranges inside the text, ascending and
 * not overlapping, every non-whitespace byte in exactly one line, each box inside the
 * chunk box (float slack); else what is wrong, in msg. */
static const char *lines_problem(const ingest_chunk *c, char *msg, size_t len) {
    size_t n = strlen(c->text), end = 0;
    const float tol = 1e-4f;
    if (c->n_lines < 1 || !c->lines) return "no lines";
    for (int32_t i = 0; i < c->n_lines; i++) {
        const ingest_line *l = &c->lines[i];
        const ingest_box b = l->box;
        if (l->len == 0 || l->off < end || (size_t)l->off + l->len > n) {
            snprintf(msg, len, "line %d [%u,+%u) after %zu, text %zu bytes", i, l->off, l->len, end, n);
            return msg;
        }
        for (size_t k = end; k < l->off; k++) /* gaps between lines hold only separators */
            if (!isspace((unsigned char)c->text[k])) {
                snprintf(msg, len, "byte %zu '%c' before line %d is in no line", k, c->text[k], i);
                return msg;
            }
        if (b.x0 > b.x1 || b.y0 > b.y1 || b.x0 < c->box.x0 - tol || b.y0 < c->box.y0 - tol ||
            b.x1 > c->box.x1 + tol || b.y1 > c->box.y1 + tol) {
            snprintf(msg, len, "line %d box %.4f,%.4f,%.4f,%.4f outside chunk %.4f,%.4f,%.4f,%.4f", i,
                     b.x0, b.y0, b.x1, b.y1, c->box.x0, c->box.y0, c->box.x1, c->box.y1);
            return msg;
        }
        end = l->off + l->len;
    }
    for (size_t k = end; k < n; k++)
        if (!isspace((unsigned char)c->text[k])) return "text after the last line is in no line";
    return NULL;
}

TEST(chunk_lines_cover_text) {
    CHECK(load_corpus() == 0);
    int multi = 0, ocr_lines = 0, table_rows = 0;
    for (int p = 1; p <= n_pages; p++)
        for (int i = 0; i < pages[p]->n_chunks; i++) {
            const ingest_chunk *c = &pages[p]->chunks[i];
            char msg[256];
            const char *bad = lines_problem(c, msg, sizeof msg);
            CHECK_MSG(!bad, "page %d chunk %d (%s): %s", p, i, ingest_chunk_kind_name(c->kind), bad);
            multi += c->n_lines > 1;
            if (c->kind == INGEST_CHUNK_OCR) ocr_lines += c->n_lines;
            if (c->kind == INGEST_CHUNK_TABLE) { /* a table row, cells and " | " included, is one line */
                const char *row = "Turbine inspection | 180 days | Four engineers";
                for (int32_t k = 0; k < c->n_lines; k++)
                    table_rows += c->lines[k].len == strlen(row) &&
                                  !strncmp(c->text + c->lines[k].off, row, strlen(row));
            }
        }
    CHECK(multi >= 5);
    CHECK_MSG(ocr_lines >= 4, "OCR chunks have %d lines", ocr_lines); /* Tesseract's text lines */
    CHECK(table_rows == 1);
}

TEST(chunk_lines_of_overlapping_windows) {
    CHECK(load_corpus() == 0);
    char path[2048], err[512];
    snprintf(path, sizeof path, "%s/corpus.pdf", corpus_dir);
    ingest_options o;
    ingest_options_default(&o);
    o.chunk_tokens = 8;
    o.overlap_tokens = 3;
    o.ocr = 0;
    ingest_doc *d;
    CHECK(ingest_doc_open(path, &o, &d, err, sizeof err) == 0);
    int checked = 0;
    for (int p = 1; p <= 4; p++) {
        ingest_page *pg;
        CHECK(ingest_doc_page(d, p, &pg, err, sizeof err) == 0);
        for (int i = 0; i < pg->n_chunks; i++) {
            char msg[256];
            const char *bad = lines_problem(&pg->chunks[i], msg, sizeof msg);
            if (bad) fprintf(stderr, "  page %d chunk %d '%s': %s\n", p, i, pg->chunks[i].text, bad);
            checked += !bad;
            CHECK(!bad);
        }
        ingest_page_free(pg);
    }
    ingest_doc_free(d);
    CHECK(checked > 40);
}

/* A US-letter PDF fixture at path, DejaVu Sans selected. The context holds the only
 * reference to its surface: cairo_destroy(cr) writes the file. */
static cairo_t *letter_pdf(const char *path) {
    cairo_surface_t *sf = cairo_pdf_surface_create(path, 612, 792);
    cairo_t *cr = cairo_create(sf);
    cairo_surface_destroy(sf);
    cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    return cr;
}

/* A paragraph of four lines drawn at known baselines gives one chunk of four lines, each
 * exactly one drawn line, top to bottom, at the drawn height. */
TEST(multiline_paragraph_lines) {
    static const char *const rows[] = {
        "Gearbox oil must be changed after the first five hundred hours",
        "of service, and then once every two thousand hours or every year,",
        "whichever comes first. Use only the grade printed on the plate",
        "beside the filler cap; a wrong grade voids the warranty.",
    };
    const int nrows = 4;
    char path[2048];
    snprintf(path, sizeof path, "%s/lines-%d.pdf", test_env("MMRAG_TMP", "/tmp"), (int)getpid());
    cairo_t *cr = letter_pdf(path);
    cairo_set_font_size(cr, 11);
    for (int i = 0; i < nrows; i++) {
        cairo_move_to(cr, 72, 200 + 15 * i);
        cairo_show_text(cr, rows[i]);
    }
    cairo_destroy(cr);   /* the last reference: the PDF is written */
    ingest_doc *d = NULL;
    ingest_page *pg = NULL;
    char err[512];
    CHECK_MSG(ingest_doc_open(path, NULL, &d, err, sizeof err) == 0, "%s", err);
    CHECK(ingest_doc_page(d, 1, &pg, err, sizeof err) == 0 && pg);
    unlink(path);
    CHECK_MSG(pg->n_chunks == 1, "%d chunks", pg->n_chunks);
    const ingest_chunk *c = &pg->chunks[0];
    char msg[256];
    const char *bad = lines_problem(c, msg, sizeof msg);
    CHECK_MSG(!bad, "%s", bad);
    CHECK_MSG(c->n_lines == nrows, "%d lines in '%s'", c->n_lines, c->text);
    for (int i = 0; i < nrows; i++) {
        const ingest_line *l = &c->lines[i];
        CHECK_MSG(l->len == strlen(rows[i]) && !strncmp(c->text + l->off, rows[i], l->len),
                  "line %d is '%.*s'", i, (int)l->len, c->text + l->off);
        float base = (200.0f + 15.0f * i) / 792.0f;   /* the baseline lies inside the box */
        CHECK_MSG(l->box.y0 < base && l->box.y1 > base - 0.002f, "line %d y %.4f..%.4f, baseline %.4f", i,
                  l->box.y0, l->box.y1, base);
        CHECK_NEAR(l->box.x0, 72.0 / 612, 0.005);
        if (i) CHECK(l->box.y0 > c->lines[i - 1].box.y0 && l->box.y1 > c->lines[i - 1].box.y1);
    }
    ingest_page_free(pg);
    ingest_doc_free(d);
}

/* Two pages: headings in a larger font, paragraphs under them; with an outline
 * (cairo_pdf_surface_add_outline) or without. */
static void write_sections_pdf(const char *path, int outline) {
    cairo_t *cr = letter_pdf(path);
    static const struct { int page; double y; double size; const char *text; } items[] = {
        {1, 100, 20, "Alpha Heading"}, {1, 130, 11, "The alpha paragraph explains the first part."},
        {1, 400, 20, "Beta Heading"}, {1, 430, 11, "The beta paragraph explains the second part."},
        {2, 100, 11, "The beta paragraph goes on at the top of page two."},
        {2, 300, 20, "Gamma Heading"}, {2, 330, 11, "The gamma paragraph sits in a subsection."},
    };
    int page = 1, beta = 0;
    for (size_t i = 0; i < sizeof items / sizeof *items; i++) {
        if (items[i].page != page) { cairo_show_page(cr); page = items[i].page; }
        cairo_set_font_size(cr, items[i].size);
        cairo_move_to(cr, 72, items[i].y);
        cairo_show_text(cr, items[i].text);
        if (!outline || items[i].size < 20) continue;
        char link[64];
        snprintf(link, sizeof link, "page=%d pos=[72 %.0f]", page, items[i].y - 22);
        int parent = strncmp(items[i].text, "Gamma", 5) ? CAIRO_PDF_OUTLINE_ROOT : beta;
        int id = cairo_pdf_surface_add_outline(cairo_get_target(cr), parent, items[i].text, link, 0);
        if (!strncmp(items[i].text, "Beta", 4)) beta = id;
    }
    cairo_destroy(cr);   /* the last reference: the PDF is written */
}

/* the section of the chunk holding `needle` on page `page` */
static const char *section_of(ingest_page *const pg[3], int page, const char *needle) {
    for (int i = 0; i < pg[page]->n_chunks; i++)
        if (strstr(pg[page]->chunks[i].text, needle)) return pg[page]->chunks[i].section;
    return "(no chunk)";
}

/* Every chunk knows its section: from the outline (a path, across the page break), or
 * without one from the last heading seen. */
TEST(sections_from_outline_or_headings) {
    for (int outline = 1; outline >= 0; outline--) {
        char path[2048], err[512];
        snprintf(path, sizeof path, "%s/sections-%d-%d.pdf", test_env("MMRAG_TMP", "/tmp"), outline, (int)getpid());
        write_sections_pdf(path, outline);
        ingest_doc *d = NULL;
        ingest_page *pg[3] = {NULL, NULL, NULL};
        CHECK_MSG(ingest_doc_open(path, NULL, &d, err, sizeof err) == 0, "%s", err);
        for (int p = 1; p <= 2; p++) CHECK(ingest_doc_page(d, p, &pg[p], err, sizeof err) == 0 && pg[p]);
        unlink(path);
        const char *want[4][2] = {{"Alpha Heading", "Alpha Heading"}, {"Beta Heading", "Beta Heading"},
                                  {"Beta Heading", "Beta Heading"}, {"Gamma Heading", "Beta Heading > Gamma Heading"}};
        const char *got[4] = {section_of(pg, 1, "alpha paragraph"), section_of(pg, 1, "beta paragraph explains"),
                              section_of(pg, 2, "goes on"), section_of(pg, 2, "gamma paragraph")};
        for (int i = 0; i < 4; i++)
            CHECK_MSG(got[i] && !strcmp(got[i], want[i][outline]), "outline %d, chunk %d: section '%s', want '%s'",
                      outline, i, got[i] ? got[i] : "(null)", want[i][outline]);
        for (int p = 1; p <= 2; p++) ingest_page_free(pg[p]);
        ingest_doc_free(d);
    }
}

/* Writes a fixture PDF with `write` under MMRAG_TMP, opens it into *d (NULL on failure)
 * and removes the file. */
static void open_fixture(int *test_failed_, const char *name, void (*write)(const char *), ingest_doc **d) {
    char path[2048], err[512];
    snprintf(path, sizeof path, "%s/%s-%d.pdf", test_env("MMRAG_TMP", "/tmp"), name, (int)getpid());
    write(path);
    *d = NULL;
    int rc = ingest_doc_open(path, NULL, d, err, sizeof err);
    unlink(path);
    CHECK_MSG(rc == 0, "%s", err);
}

/* One page: a figure drawn in three pieces 25 pt apart (wider than the ink merge), two
 * lines of notes under it, then its caption 90 pt below the drawing; lower down, a lone
 * drawing, a heading, then a caption: the heading parts them. */
static void write_far_caption_pdf(const char *path) {
    cairo_t *cr = letter_pdf(path);
    cairo_set_line_width(cr, 1.5);
    for (int k = 0; k < 3; k++) {           /* 100..450 x 100..200 */
        cairo_rectangle(cr, 100 + 125 * k, 100, 100, 100);
        cairo_move_to(cr, 100 + 125 * k, 100);
        cairo_line_to(cr, 200 + 125 * k, 200);
    }
    cairo_stroke(cr);
    cairo_set_font_size(cr, 10);
    const char *notes[] = {"Notes: the solid boxes are the stages of the pipeline.",
                           "A diagonal marks a stage that runs on the accelerator."};
    for (int i = 0; i < 2; i++) { cairo_move_to(cr, 100, 230 + 14 * i); cairo_show_text(cr, notes[i]); }
    cairo_move_to(cr, 180, 290);
    cairo_show_text(cr, "Figure 1: The three stages with their notes.");
    cairo_rectangle(cr, 200, 400, 150, 120);  /* the lone drawing */
    cairo_arc(cr, 275, 460, 50, 0, 2 * M_PI);
    cairo_stroke(cr);
    cairo_set_font_size(cr, 20);
    cairo_move_to(cr, 100, 580);
    cairo_show_text(cr, "Another Section");
    cairo_set_font_size(cr, 10);
    cairo_move_to(cr, 180, 620);
    cairo_show_text(cr, "Figure 2: A caption whose figure is text only.");
    cairo_destroy(cr);   /* the last reference: the PDF is written */
}

/* The page holds one image, its box (points on a 612 x 792 page) within tol of want and,
 * unless caption is NULL, captioned by a chunk that starts with `caption`. */
static void check_one_figure(int *test_failed_, const ingest_page *pg, ingest_box want,
                             double tol, const char *caption) {
    CHECK_MSG(pg->n_images == 1, "page %d: %d images", (int)pg->number, (int)pg->n_images);
    if (pg->n_images < 1) return;
    ingest_box b = pg->images[0].box;
    printf("  page %d: box %.0f %.0f %.0f %.0f pt\n", (int)pg->number, b.x0 * 612, b.y0 * 792,
           b.x1 * 612, b.y1 * 792);
    CHECK_NEAR(b.x0, want.x0 / 612, tol);
    CHECK_NEAR(b.x1, want.x1 / 612, tol);
    CHECK_NEAR(b.y0, want.y0 / 792, tol);
    CHECK_NEAR(b.y1, want.y1 / 792, tol);
    if (!caption) return;
    int cc = pg->images[0].caption_chunk;
    CHECK(cc >= 0 && cc < pg->n_chunks &&
          !strncmp(pg->chunks[cc].text, caption, strlen(caption)));
}

/* Page `page` of d holds one image, as check_one_figure says. */
static void check_page_figure(int *test_failed_, ingest_doc *d, int page, ingest_box want, double tol,
                              const char *caption) {
    char err[512];
    ingest_page *pg = NULL;
    CHECK(d && ingest_doc_page(d, page, &pg, err, sizeof err) == 0 && pg);
    if (pg) check_one_figure(test_failed_, pg, want, tol, caption);
    ingest_page_free(pg);
}

/* Page `page` of d holds no image (`what` says what it holds instead). */
static void check_page_no_figure(int *test_failed_, ingest_doc *d, int page, const char *what) {
    char err[512];
    ingest_page *pg = NULL;
    CHECK(d && ingest_doc_page(d, page, &pg, err, sizeof err) == 0 && pg);
    if (pg) CHECK_MSG(pg->n_images == 0, "page %d: %d images in %s", page, (int)pg->n_images, what);
    ingest_page_free(pg);
}

/* Page 1 of fixture `name` (write draws it) into *pg, its document into *d (NULL when
 * unread); the caller frees both. */
static void fixture_page1(int *test_failed_, const char *name, void (*write)(const char *),
                          ingest_doc **d, ingest_page **pg) {
    char err[512] = "";
    *pg = NULL;
    open_fixture(test_failed_, name, write, d);
    CHECK_MSG(*d && ingest_doc_page(*d, 1, pg, err, sizeof err) == 0 && *pg, "%s", err);
}

/* The text of image i's caption chunk on pg, or "" when it has none. */
static const char *caption_of(const ingest_page *pg, int i) {
    int cc = pg->images[i].caption_chunk;
    return cc >= 0 && cc < pg->n_chunks ? pg->chunks[cc].text : "";
}

/* A caption far under its figure (notes between) still finds it, and the figure's pieces
 * become one image; a heading between a drawing and a caption keeps them apart: the lone
 * drawing is an image of its own, without that caption. */
TEST(far_caption_and_figure_parts) {
    ingest_doc *d = NULL;
    ingest_page *pg = NULL;
    fixture_page1(test_failed_, "farcap", write_far_caption_pdf, &d, &pg);
    if (pg) {
        CHECK_MSG(pg->n_images == 2, "%d images", (int)pg->n_images);
        for (int i = 0; i < pg->n_images; i++) {
            const ingest_image *im = &pg->images[i];
            const char *cap = caption_of(pg, i);
            if (im->box.y0 < 0.3f) {   /* the three pieces, 100..450 x 100..200 */
                CHECK_NEAR(im->box.x0, 100.0 / 612, 0.01);
                CHECK_NEAR(im->box.x1, 450.0 / 612, 0.01);
                CHECK_NEAR(im->box.y1, 200.0 / 792, 0.01);
                CHECK_MSG(!strncmp(cap, "Figure 1:", 9), "caption '%.30s'", cap);
            } else {                   /* the lone drawing, 200..350 x 400..520 */
                CHECK_NEAR(im->box.x0, 200.0 / 612, 0.01);
                CHECK_NEAR(im->box.y1, 520.0 / 792, 0.01);
                CHECK_MSG(strncmp(cap, "Figure 2:", 9) != 0, "the heading should part '%.30s'", cap);
            }
        }
    }
    ingest_page_free(pg);
    ingest_doc_free(d);
}

/* Page 1: a plot without a caption (axes, a curve, tick labels). Page 2: two such plots
 * side by side, 45 pt apart with tick labels between, under one caption. Page 3: a frame
 * around lines of code, and a ruled table of numbers: text, not pictures. Page 4: a plot as
 * R draws it: 9 pt tick labels set 2 pt under its frame (their line ends 12 pt under it),
 * an axis title under them, running text further down. Page 5: twin plots under one
 * caption, their frames 70 pt apart with the left one's key scale and the right one's tick
 * labels between. */
static void draw_plot(cairo_t *cr, double x, double y, double w, double h) {
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, x, y, w, h);
    cairo_stroke(cr);
    for (int i = 0; i <= 40; i++) {
        double t = i / 40.0;
        double py = y + h / 2 - 0.4 * h * sin(6.28 * t) * (1 - t);
        if (i) cairo_line_to(cr, x + t * w, py);
        else cairo_move_to(cr, x, py);
    }
    cairo_stroke(cr);
    cairo_set_font_size(cr, 7);
    for (int i = 0; i < 4; i++) {
        char lab[8];
        snprintf(lab, sizeof lab, "%d", i * 5);
        cairo_move_to(cr, x - 12, y + h - i * h / 3 + 3);
        cairo_show_text(cr, lab);
        cairo_move_to(cr, x + i * w / 3 - 3, y + h + 10);
        cairo_show_text(cr, lab);
    }
}

/* Pages 1 and 6 of write_graphics_pdf: a plot between two lines of text, no caption. */
static void draw_lone_plot(cairo_t *cr) {
    cairo_set_font_size(cr, 10);
    cairo_move_to(cr, 100, 90);
    cairo_show_text(cr, "The response falls off after the first swing, as the plot below shows.");
    draw_plot(cr, 150, 120, 250, 160);
    cairo_set_font_size(cr, 10);
    cairo_move_to(cr, 100, 320);
    cairo_show_text(cr, "No caption names it, yet it is a picture.");
}

static void write_graphics_pdf(const char *path) {
    cairo_t *cr = letter_pdf(path);
    draw_lone_plot(cr);
    cairo_show_page(cr);
    draw_plot(cr, 100, 120, 180, 140);
    draw_plot(cr, 325, 120, 180, 140);
    cairo_set_font_size(cr, 10);
    cairo_move_to(cr, 200, 300);
    cairo_show_text(cr, "Figure 5: Left, the first run; right, the second.");
    cairo_show_page(cr);
    cairo_set_line_width(cr, 0.8);
    cairo_rectangle(cr, 90, 100, 420, 110);
    cairo_stroke(cr);
    for (int i = 0; i < 6; i++) {
        cairo_move_to(cr, 100, 120 + 16 * i);
        cairo_show_text(cr, "for (int i = 0; i < n; i++) total += weight[i] * value[i];");
    }
    for (int r = 0; r <= 8; r++) { cairo_move_to(cr, 100, 300 + 18 * r); cairo_line_to(cr, 500, 300 + 18 * r); }
    for (int c = 0; c <= 4; c++) { cairo_move_to(cr, 100 + 100 * c, 300); cairo_line_to(cr, 100 + 100 * c, 444); }
    cairo_stroke(cr);
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 4; c++) {
            cairo_move_to(cr, 110 + 100 * c, 313 + 18 * r);
            cairo_show_text(cr, "0.0412  1.93");
        }
    cairo_show_page(cr);
    draw_plot(cr, 150, 150, 300, 200);          /* frame 150..450 x 150..350 */
    cairo_set_font_size(cr, 9);
    for (int i = 0; i < 4; i++) {
        char lab[8];
        snprintf(lab, sizeof lab, "%d", i * 10);
        cairo_move_to(cr, 150 + i * 100 - 4, 360);
        cairo_show_text(cr, lab);
    }
    cairo_move_to(cr, 280, 376);
    cairo_show_text(cr, "time (days)");
    cairo_set_font_size(cr, 10);
    cairo_move_to(cr, 72, 430);
    cairo_show_text(cr, "The response falls off after the first swing, and the text goes on below the plot.");
    cairo_show_page(cr);
    draw_plot(cr, 90, 120, 150, 140);           /* frames 90..240 and 310..460, 70 pt apart */
    draw_plot(cr, 310, 120, 150, 140);
    cairo_set_font_size(cr, 7);
    for (int i = 0; i < 5; i++) {               /* the left plot's colour key scale */
        char lab[8];
        snprintf(lab, sizeof lab, "%.2f", i * 0.25);
        cairo_move_to(cr, 246, 258 - 34 * i);
        cairo_show_text(cr, lab);
    }
    cairo_set_font_size(cr, 10);
    cairo_move_to(cr, 170, 300);
    cairo_show_text(cr, "Figure 6: Left, shading by cut-off points; right, continuous shading.");
    cairo_show_page(cr);
    cairo_set_source_rgb(cr, 1, 0.996, 0.9);   /* page 6: page 1 on a cream page */
    cairo_paint(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    draw_lone_plot(cr);
    cairo_destroy(cr);   /* the last reference: the PDF is written */
}

/* A plot is found without a caption, side-by-side panels are one image (also when only their
 * labels close the gap between them), and a frame around
 * code or a ruled table of numbers is no image. A plot's box takes its tick labels and axis
 * title (part of the picture a reader sees), not the running text under it. On a tinted page
 * the paper is no ink: the plot is found, not the whole page. */
TEST(graphics_without_captions) {
    ingest_doc *d = NULL;
    open_fixture(test_failed_, "graphics", write_graphics_pdf, &d);
    static const ingest_box want[6] = {{138, 120, 400, 290}, {88, 120, 505, 270}, {0, 0, 0, 0},
                                       {138, 147, 457, 378}, {78, 120, 465, 270}, {138, 120, 400, 290}};
    static const double tol[6] = {0.02, 0.02, 0, 0.006, 0.02, 0.02};
    for (int p = 1; p <= 6 && d; p++)
        if (p != 3) check_page_figure(test_failed_, d, p, want[p - 1], tol[p - 1], NULL);
    check_page_no_figure(test_failed_, d, 3, "a code frame and a ruled table");
    ingest_doc_free(d);
}

/* Page 1: a figure set as a ruled table (three rules of one width, text between, no other
 * ink) above its caption. Page 2: one rule above a caption is a line, not a figure. */
static void write_ruled_pdf(const char *path) {
    cairo_t *cr = letter_pdf(path);
    cairo_set_font_size(cr, 10);
    cairo_set_line_width(cr, 0.8);
    const float rules[3] = {150, 172, 300};
    for (int i = 0; i < 3; i++) { cairo_move_to(cr, 100, rules[i]); cairo_line_to(cr, 500, rules[i]); }
    cairo_stroke(cr);
    cairo_move_to(cr, 110, 165);
    cairo_show_text(cr, "Syntax                Action");
    for (int i = 0; i < 8; i++) {
        cairo_move_to(cr, 110, 188 + 14 * i);
        cairo_show_text(cr, "<rule> -> <object> <modifier>        typeset the object");
    }
    cairo_move_to(cr, 250, 325);
    cairo_show_text(cr, "Figure 3: The grammar of arrows.");
    cairo_show_page(cr);
    cairo_move_to(cr, 100, 300);
    cairo_line_to(cr, 500, 300);
    cairo_stroke(cr);
    cairo_move_to(cr, 250, 325);
    cairo_show_text(cr, "Figure 4: A caption under a single rule.");
    cairo_destroy(cr);   /* the last reference: the PDF is written */
}

TEST(ruled_figure) {
    ingest_doc *d = NULL;
    open_fixture(test_failed_, "ruled", write_ruled_pdf, &d);
    check_page_figure(test_failed_, d, 1, (ingest_box){100, 150, 500, 300}, 0.01, "Figure 3:");
    check_page_no_figure(test_failed_, d, 2, "a page with a caption under a single rule");
    ingest_doc_free(d);
}

/* Page 4 of write_text_figure_pdf: three rows of four small circles (16 pt, under a
 * figure's size) with 8 pt labels, the rows 50 pt apart (20 pt blank between a row's
 * labels and the next row), over "Figure 7:". */
static void draw_symbol_grid(cairo_t *cr) {
    cairo_set_line_width(cr, 1);
    cairo_set_font_size(cr, 8);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 4; c++) {
            double x = 140 + 90 * c, y = 200 + 50 * r;
            cairo_new_sub_path(cr);
            cairo_arc(cr, x, y, 8, 0, 2 * M_PI);
            cairo_stroke(cr);
            cairo_move_to(cr, x - 12, y + 20);
            cairo_show_text(cr, "node");
        }
    cairo_set_font_size(cr, 10);
    cairo_move_to(cr, 200, 350);
    cairo_show_text(cr, "Figure 7: A grid of symbols.");
}

/* A w x h bitmap (1 pixel per point), a colour gradient, painted with its top-left corner
 * at (x, y) after turning the page a quarter when `turn` (it then covers h x w). */
static void paint_bitmap(cairo_t *cr, int w, int h, double x, double y, int turn) {
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    unsigned char *px = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    for (int r = 0; r < h; r++)
        for (int c = 0; c < w; c++) {
            uint32_t v = (uint32_t)((c * 255 / w) << 16 | (r * 255 / h) << 8 | 0x40);
            memcpy(px + r * stride + 4 * c, &v, 4);
        }
    cairo_surface_mark_dirty(img);
    cairo_save(cr);
    cairo_translate(cr, turn ? x + h : x, y);
    if (turn) cairo_rotate(cr, M_PI / 2);
    cairo_set_source_surface(cr, img, 0, 0);
    cairo_paint(cr);
    cairo_restore(cr);
    cairo_surface_destroy(img);
}

/* Page 5 of write_text_figure_pdf: a bitmap (150 x 100 pt at 100, 300) with its caption
 * set beside it, to its right. */
static void draw_side_caption(cairo_t *cr) {
    paint_bitmap(cr, 150, 100, 100, 300, 0);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_font_size(cr, 10);
    cairo_move_to(cr, 270, 320);
    cairo_show_text(cr, "Figure 8: A caption set beside its picture.");
}

/* Four lines of running text (10 pt, x from 100, baselines 100..142): a manual's paragraph. */
static const char *const BODY_LINE = "The running text of the manual goes on here in its usual size and width.";
static void body_paragraph(cairo_t *cr) {
    cairo_set_font_size(cr, 10);
    for (int i = 0; i < 4; i++) { cairo_move_to(cr, 100, 100 + 14 * i); cairo_show_text(cr, BODY_LINE); }
}

/* One page: two rows of four plots (70 x 50 pt, at y 180 and 294), each plot labelled
 * "(a)".."(h)" 24 pt under its frame (under its tick labels), each row's caption 52 pt under
 * its frames: 44 pt from them, and only 9 pt over the next row. */
static void write_panel_rows_pdf(const char *path) {
    cairo_t *cr = letter_pdf(path);
    body_paragraph(cr);
    for (int row = 0; row < 2; row++) {
        double y = 180 + 114 * row;
        for (int i = 0; i < 4; i++) {
            char lab[8];
            draw_plot(cr, 100 + 100 * i, y, 70, 50);
            snprintf(lab, sizeof lab, "(%c)", 'a' + 4 * row + i);
            cairo_set_font_size(cr, 9);
            cairo_move_to(cr, 128 + 100 * i, y + 74);
            cairo_show_text(cr, lab);
        }
        cairo_set_font_size(cr, 10);
        cairo_move_to(cr, 220, y + 102);
        cairo_show_text(cr, row ? "Figure 2: The bottom row of plots." : "Figure 1: The top row of plots.");
    }
    cairo_destroy(cr);   /* the last reference: the PDF is written */
}

/* Panels labelled "(a)".."(d)" under them are one figure with their caption under the
 * labels, though the caption lies nearer the next row's top: a figure's caption goes under
 * it. Before, "Figure 1:" took the lower row and the upper row was lost. */
TEST(caption_under_labelled_panels) {
    ingest_doc *d = NULL;
    ingest_page *pg = NULL;
    fixture_page1(test_failed_, "panelrows", write_panel_rows_pdf, &d, &pg);
    if (pg) {
        CHECK_MSG(pg->n_images == 2, "%d images", (int)pg->n_images);
        for (int i = 0; i < pg->n_images; i++) {
            const ingest_image *im = &pg->images[i];
            int top = im->box.y0 < 250.0f / 792;
            const char *cap = caption_of(pg, i);
            printf("  box %.0f %.0f %.0f %.0f pt: %.20s\n", im->box.x0 * 612, im->box.y0 * 792,
                   im->box.x1 * 612, im->box.y1 * 792, cap);
            CHECK_NEAR(im->box.y0, (top ? 180.0 : 294.0) / 792, 0.015);
            CHECK_NEAR(im->box.x1, 470.0 / 612, 0.015);
            CHECK_MSG(!strncmp(cap, top ? "Figure 1:" : "Figure 2:", 9), "caption '%.30s'", cap);
        }
    }
    ingest_page_free(pg);
    ingest_doc_free(d);
}

/* Page 6 of write_text_figure_pdf: a paragraph, then a listing at the body's size (10 pt) in a
 * typewriter face, its lines as long and as wordy as the paragraph's but the last, "}", left
 * of the caption (baselines 180..252, x from 100), then "Figure 12:" under it. */
static void draw_mono_listing(cairo_t *cr) {
    const char *code[] = {"for (int i = 0; i < n_boxes; i++) draw(page, box[i]);",
                          "if (page->dirty && n_boxes > 0) flush(page, out, 1);",
                          "while (next(&it, &box) == 0) total += area(box) * k;",
                          "return total > 0 ? write(out, page, total) : -1;  /**/", "}"};
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    body_paragraph(cr);
    cairo_select_font_face(cr, "DejaVu Sans Mono", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    for (int i = 0; i < 5; i++) { cairo_move_to(cr, 100, 180 + 18 * i); cairo_show_text(cr, code[i]); }
    cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_move_to(cr, 150, 280);
    cairo_show_text(cr, "Figure 12: A program set in a typewriter face.");
}

/* Pages 7 to 9 of write_text_figure_pdf: a paragraph (baselines 100..142), "Figure 13:"
 * (page 7: set apart, at 166; page 8: "Figure 14:" in the paragraph's spacing, at 156; page 9:
 * "Figure 15:" at 166 under a rule, 200..350 x 150, as a drawing found only by its baseline
 * leaves), then the code of draw_mono_listing under it (baselines 190..262, x from 100), then
 * a paragraph at 300. */
static void draw_caption_over_listing(cairo_t *cr, int apart, int rule) {
    const char *code[] = {"for (int i = 0; i < n_boxes; i++) draw(page, box[i]);",
                          "if (page->dirty && n_boxes > 0) flush(page, out, 1);",
                          "while (next(&it, &box) == 0) total += area(box) * k;",
                          "return total > 0 ? write(out, page, total) : -1;  /**/", "}"};
    cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    body_paragraph(cr);
    if (rule) {
        cairo_set_line_width(cr, 1);
        cairo_move_to(cr, 200, 150);
        cairo_line_to(cr, 350, 150);
        cairo_stroke(cr);
    }
    cairo_move_to(cr, 150, apart ? 166 : 156);
    cairo_show_text(cr, rule ? "Figure 15: A drawing over its caption." : apart ? "Figure 13: A program under its caption."
                                                                              : "Figure 14: A caption in the paragraph.");
    cairo_select_font_face(cr, "DejaVu Sans Mono", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    for (int i = 0; i < 5; i++) { cairo_move_to(cr, 100, 190 + 18 * i); cairo_show_text(cr, code[i]); }
    cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    for (int i = 0; i < 4; i++) { cairo_move_to(cr, 100, 300 + 14 * i); cairo_show_text(cr, BODY_LINE); }
}

/* A paragraph of running text (10 pt), then a listing set in 8 pt (x from 120, baselines
 * 190..223); the font size is 10 pt again after it. */
static void draw_small_listing(cairo_t *cr) {
    const char *code[] = {"def render(page):", "    for box in page.boxes():", "        draw(box)",
                          "    return page"};
    body_paragraph(cr);
    cairo_set_font_size(cr, 8);
    for (int i = 0; i < 4; i++) { cairo_move_to(cr, 120, 190 + 11 * i); cairo_show_text(cr, code[i]); }
    cairo_set_font_size(cr, 10);
}

/* Eleven pages, each a paragraph of running text (10 pt) above something captioned.
 * Page 1: a listing set in 8 pt between the paragraph and "Figure 5:": a figure of text,
 * with no drawn ink. Page 2: the same listing, then a sentence that starts with "Figure 5
 * shows": no label, no figure. Page 3: the paragraph right above "Figure 6:": no figure.
 * Pages 4 to 6: draw_symbol_grid, draw_side_caption, draw_mono_listing; pages 7 to 9:
 * draw_caption_over_listing; pages 10 and 11: page 1's listing over "Figure 16" without a
 * colon, a label by its bold face on page 10, a sentence's start on page 11. */
static void write_text_figure_pdf(const char *path) {
    cairo_t *cr = letter_pdf(path);
    for (int pg = 0; pg < 3; pg++) {
        if (pg < 2) draw_small_listing(cr);
        else body_paragraph(cr);
        cairo_move_to(cr, 150, pg == 2 ? 162 : 250);
        cairo_show_text(cr, pg == 0 ? "Figure 5: A listing set in a smaller face."
                          : pg == 1 ? "Figure 5 shows the listing above, set small."
                                    : "Figure 6: A caption with running text above it.");
        cairo_show_page(cr);
    }
    body_paragraph(cr);
    draw_symbol_grid(cr);
    cairo_show_page(cr);
    draw_side_caption(cr);
    cairo_show_page(cr);
    draw_mono_listing(cr);
    for (int k = 0; k < 3; k++) {
        cairo_show_page(cr);
        draw_caption_over_listing(cr, k != 1, k == 2);
    }
    for (int bold = 1; bold >= 0; bold--) {   /* pages 10 and 11: a label without a colon */
        cairo_show_page(cr);
        draw_small_listing(cr);
        cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL,
                               bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
        cairo_move_to(cr, 150, 250);
        cairo_show_text(cr, "Figure 16 ");
        cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
        cairo_show_text(cr, "The listing above, its label set apart by its face alone.");
    }
    cairo_destroy(cr);   /* the last reference: the PDF is written */
}

/* A caption whose figure is text (a listing) gets the block above it; a sentence that
 * starts with "Figure N" and a caption under running text get none; a grid of symbols too
 * small to be figures is one figure, all its rows (20 pt apart); a caption beside a bitmap
 * takes it; a listing in a typewriter face at the body's size is a figure of text too, and so
 * is one under its caption when the caption is set apart from the paragraph above it (not
 * when it sits in the paragraph's line spacing, like a "Figure 14:" that ends a line, nor
 * when something is drawn right above it: its figure is there). */
TEST(caption_over_text_figure) {
    char err[512];
    ingest_doc *d = NULL;
    open_fixture(test_failed_, "textfig", write_text_figure_pdf, &d);
    for (int p = 1; p <= 11 && d; p++) {
        ingest_page *pg = NULL;
        CHECK(ingest_doc_page(d, p, &pg, err, sizeof err) == 0 && pg);
        if (pg && (p == 1 || p == 10)) {   /* the listing: x from 120 to ~225 (its widest line), baselines 190..223 */
            check_one_figure(test_failed_, pg, (ingest_box){120, 184, 225, 226}, 0.012, p == 1 ? "Figure 5:" : "Figure 16");
        } else if (pg && p == 4) {   /* circles from 132 x 192, labels from 128 to ~418 x ~322 */
            check_one_figure(test_failed_, pg, (ingest_box){128, 192, 418, 322}, 0.02, "Figure 7:");
        } else if (pg && p == 5) {
            check_one_figure(test_failed_, pg, (ingest_box){100, 300, 250, 400}, 0.01, "Figure 8:");
        } else if (pg && p == 6) {   /* the listing: x 100 to ~425, baselines 180..252 */
            check_one_figure(test_failed_, pg, (ingest_box){100, 172, 425, 256}, 0.012, "Figure 12:");
        } else if (pg && p == 7) {   /* the listing under its caption: baselines 190..262 */
            check_one_figure(test_failed_, pg, (ingest_box){100, 182, 425, 266}, 0.012, "Figure 13:");
        } else if (pg) {
            CHECK_MSG(pg->n_images == 0, "page %d: %d images", p, (int)pg->n_images);
        }
        ingest_page_free(pg);
    }
    ingest_doc_free(d);
}

/* One page: a paragraph (10 pt), a heading (14 pt), then a paragraph opened by a drop cap:
 * a "T" of 30 pt beside its first two lines. */
static void write_drop_cap_pdf(const char *path) {
    cairo_t *cr = letter_pdf(path);
    body_paragraph(cr);
    cairo_set_font_size(cr, 14);
    cairo_move_to(cr, 100, 190);
    cairo_show_text(cr, "Results overview");
    cairo_set_font_size(cr, 30);
    cairo_move_to(cr, 100, 236);
    cairo_show_text(cr, "T");
    cairo_set_font_size(cr, 10);
    for (int i = 0; i < 5; i++) {
        cairo_move_to(cr, i < 2 ? 126 : 100, 222 + 14 * i);
        cairo_show_text(cr, i ? BODY_LINE : "he paragraph under the heading starts with a drop cap.");
    }
    cairo_destroy(cr);   /* the last reference: the PDF is written */
}

/* A heading set larger than the body is a heading chunk; a big letter alone (a drop cap, a
 * drawing's label) is not one, nor does it open a section. */
TEST(big_letter_is_no_heading) {
    ingest_doc *d = NULL;
    ingest_page *pg = NULL;
    fixture_page1(test_failed_, "dropcap", write_drop_cap_pdf, &d, &pg);
    int headings = 0;
    for (int c = 0; pg && c < pg->n_chunks; c++) {
        const ingest_chunk *ch = &pg->chunks[c];
        if (ch->kind == INGEST_CHUNK_HEADING) {
            headings++;
            CHECK_MSG(!strcmp(ch->text, "Results overview"), "heading chunk '%s'", ch->text);
        }
        CHECK_MSG(strcmp(ch->section, "T"), "section '%s'", ch->section);
    }
    CHECK_MSG(headings == 1, "%d heading chunks", headings);
    ingest_page_free(pg);
    ingest_doc_free(d);
}

/* Page 1: two bitmaps side by side (150 x 100 pt at 100 and 270, 300), "(a)" and "(b)"
 * under them, one caption centred under the pair; lower, two bitmaps each captioned
 * under itself. Page 2: a 150 x 100 bitmap turned a quarter, covering 200..300 x 300..450,
 * over code lines under it. */
static void write_bitmap_pairs_pdf(const char *path) {
    cairo_t *cr = letter_pdf(path);
    cairo_set_font_size(cr, 10);
    for (int k = 0; k < 2; k++) {
        paint_bitmap(cr, 150, 100, 100 + 170 * k, 300, 0);
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_move_to(cr, 168 + 170 * k, 415);
        cairo_show_text(cr, k ? "(b)" : "(a)");
        paint_bitmap(cr, 150, 100, 100 + 170 * k, 520, 0);
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_move_to(cr, 110 + 170 * k, 640);
        cairo_show_text(cr, k ? "Figure 11: The second view." : "Figure 10: The first view.");
    }
    cairo_move_to(cr, 190, 440);
    cairo_show_text(cr, "Figure 9: The page before and after.");
    cairo_show_page(cr);
    paint_bitmap(cr, 150, 100, 200, 300, 1);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_font_size(cr, 9);
    for (int i = 0; i < 12; i++) {
        cairo_move_to(cr, 200, 470 + 12 * i);
        cairo_show_text(cr, "image(f, palette, (0, 0), (1, 1));  // a colour map");
    }
    cairo_destroy(cr);   /* the last reference: the PDF is written */
}

/* Bitmaps side by side under one caption centred under the pair are one figure (two
 * screenshots "(a)" and "(b)"); bitmaps captioned each under itself stay two. A bitmap
 * turned a quarter is boxed where it is drawn, not where poppler's image map puts it (a side
 * away). */
TEST(bitmap_pairs_and_turned_bitmap) {
    char err[512];
    ingest_doc *d = NULL;
    open_fixture(test_failed_, "bitmaps", write_bitmap_pairs_pdf, &d);
    check_page_figure(test_failed_, d, 2, (ingest_box){200, 300, 300, 450}, 0.005, NULL);
    ingest_page *pg = NULL;
    CHECK(d && ingest_doc_page(d, 1, &pg, err, sizeof err) == 0 && pg);
    for (int i = 0; pg && i < pg->n_images; i++) {
        ingest_box b = pg->images[i].box;
        printf("  page 1: box %.0f %.0f %.0f %.0f pt\n", b.x0 * 612, b.y0 * 792, b.x1 * 612, b.y1 * 792);
    }
    CHECK_MSG(pg && pg->n_images == 3, "%d images", pg ? (int)pg->n_images : -1);
    int pair = 0, single = 0;
    for (int i = 0; pg && i < pg->n_images; i++) {
        ingest_box b = pg->images[i].box;
        if (fabsf(b.y0 - 300.0f / 792) < 0.01f && fabsf(b.x0 - 100.0f / 612) < 0.01f &&
            fabsf(b.x1 - 420.0f / 612) < 0.01f)
            pair++;
        single += fabsf(b.y0 - 520.0f / 792) < 0.01f && b.x1 - b.x0 < 160.0f / 612;
    }
    CHECK_MSG(pair == 1 && single == 2, "pair %d, single %d", pair, single);
    ingest_page_free(pg);
    ingest_doc_free(d);
}

/* A listing in a frame across the column (72..540 x 100..190, its lines in 8 pt), a drawing
 * 8 pt under it (a circle cut by a line, 220..390 x 198..338), the caption under that. */
static void write_listing_frame_pdf(const char *path) {
    cairo_t *cr = letter_pdf(path);
    cairo_set_line_width(cr, 0.8);
    cairo_rectangle(cr, 72, 100, 468, 90);
    cairo_stroke(cr);
    cairo_set_font_size(cr, 8);
    const char *code[] = {"c = canvas.canvas()", "circle = path.circle(0, 0, 2)",
                          "line = path.line(-3, 1, 3, 2)", "c.stroke(circle, [style.linewidth.Thick])",
                          "c.stroke(line, [style.linewidth.Thick])", "c.writePDFfile()"};
    for (int i = 0; i < 6; i++) { cairo_move_to(cr, 80, 115 + 12 * i); cairo_show_text(cr, code[i]); }
    cairo_set_line_width(cr, 1.5);
    cairo_new_path(cr);   /* the text left a current point: no line from it to the arc */
    cairo_arc(cr, 305, 268, 70, 0, 2 * M_PI);
    cairo_move_to(cr, 220, 300);
    cairo_line_to(cr, 390, 236);
    cairo_stroke(cr);
    cairo_set_font_size(cr, 10);
    cairo_move_to(cr, 200, 360);
    cairo_show_text(cr, "Fig. 1: Intersection of a circle with a line.");
    cairo_destroy(cr);   /* the last reference: the PDF is written */
}

/* A listing's frame right over a drawing is not part of it (its ink is 8 pt from the
 * circle: closer than the merge gap, and under the parts gap): the figure is the drawing. */
TEST(listing_frame_over_drawing) {
    ingest_doc *d = NULL;
    open_fixture(test_failed_, "listingframe", write_listing_frame_pdf, &d);
    check_page_figure(test_failed_, d, 1, (ingest_box){220, 198, 390, 338}, 0.006, "Fig. 1:");
    ingest_doc_free(d);
}

/* Page 1: a paragraph, a plot whose y-axis title and tick labels are turned a quarter (as
 * R sets them), bars' names turned under it, then its caption "Figure 2: ..." turned beside
 * it, as a sideways figure's; body text under all. Page 2: paragraphs, and an arXiv-style
 * stamp turned in the left margin at 20 pt. */
static void write_turned_text_pdf(const char *path) {
    cairo_t *cr = letter_pdf(path);
    cairo_set_font_size(cr, 10);
    cairo_move_to(cr, 72, 90);
    cairo_show_text(cr, "The curves below fall the same way in both groups, as the text says at length.");
    draw_plot(cr, 150, 120, 250, 160);   /* frame 150..400 x 120..280 */
    cairo_set_font_size(cr, 9);
    static const char *const turned[] = {"Survival probability", "0.25", "0.75", "placebo", "treated"};
    static const double at[][2] = {{118, 260}, {132, 262}, {132, 162}, {200, 330}, {330, 330}};
    for (int i = 0; i < 5; i++) {   /* reading upwards */
        cairo_save(cr);
        cairo_move_to(cr, at[i][0], at[i][1]);
        cairo_rotate(cr, -M_PI / 2);
        cairo_show_text(cr, turned[i]);
        cairo_restore(cr);
    }
    cairo_set_font_size(cr, 10);
    cairo_save(cr);
    cairo_move_to(cr, 430, 130);   /* reading downwards, right of the plot */
    cairo_rotate(cr, M_PI / 2);
    cairo_show_text(cr, "Figure 2: Survival by group.");
    cairo_restore(cr);
    cairo_move_to(cr, 72, 400);
    cairo_show_text(cr, "Both groups were followed for five years, and none of them was lost to the study.");
    cairo_show_page(cr);   /* page 2: paragraphs beside a stamp turned in the margin, at 20 pt */
    for (int i = 0; i < 30; i++) {
        cairo_move_to(cr, 72, 100 + 14 * i);
        cairo_show_text(cr, "The study followed both groups for five years and lost none of them.");
    }
    cairo_set_font_size(cr, 20);
    cairo_move_to(cr, 40, 500);
    cairo_rotate(cr, -M_PI / 2);
    cairo_show_text(cr, "arXiv:2101.00001v1");
    cairo_destroy(cr);   /* the last reference: the PDF is written */
}

/* Text turned a quarter reads as words, not as a column of letters: the y-axis title and the
 * turned tick labels are the figure's text, the turned caption is its caption, and the
 * figure takes the names turned under it; a large stamp turned in the margin is no heading. */
TEST(turned_text) {
    ingest_doc *d = NULL;
    ingest_page *pg = NULL;
    char err[512];
    fixture_page1(test_failed_, "turned", write_turned_text_pdf, &d, &pg);
    int title = 0, ticks = 0, caption = 0;
    for (int i = 0; pg && i < pg->n_chunks; i++) {
        const ingest_chunk *c = &pg->chunks[i];
        printf("  %d: %.70s\n", (int)c->kind, c->text);
        title |= c->kind == INGEST_CHUNK_FIGURE && strstr(c->text, "Survival probability") != NULL;
        ticks |= c->kind == INGEST_CHUNK_FIGURE && strstr(c->text, "0.75") && strstr(c->text, "placebo");
        caption |= c->kind == INGEST_CHUNK_CAPTION && strstr(c->text, "Figure 2: Survival by group.") != NULL;
    }
    CHECK(title && ticks && caption);
    ingest_page *p2 = NULL;   /* a turned stamp reads as one word and heads no section */
    CHECK(d && ingest_doc_page(d, 2, &p2, err, sizeof err) == 0 && p2);
    int stamp = 0, heading = 0;
    for (int i = 0; p2 && i < p2->n_chunks; i++) {
        stamp |= strstr(p2->chunks[i].text, "arXiv:2101.00001v1") != NULL;
        heading |= p2->chunks[i].kind == INGEST_CHUNK_HEADING;
    }
    CHECK(stamp && !heading);
    ingest_page_free(p2);
    CHECK_MSG(pg && pg->n_images == 1, "%d images", pg ? (int)pg->n_images : -1);
    if (pg && pg->n_images == 1) {   /* the turned names end near y 330 + 9 pt */
        ingest_box b = pg->images[0].box;
        printf("  box %.0f %.0f %.0f %.0f pt\n", b.x0 * 612, b.y0 * 792, b.x1 * 612, b.y1 * 792);
        CHECK(b.y1 * 792 >= 325);
        CHECK(pg->images[0].caption_chunk >= 0);
    }
    ingest_page_free(pg);
    ingest_doc_free(d);
}

/* Body text above and below a chart of named colours: three columns of eight swatches
 * (10 x 9 pt, stacked), each with its name beside it, no caption (page 1); the same
 * swatches where each name holds a digit, as a formula's or an index's cells do (page 2);
 * the chart of page 1 over a caption (page 3). */
static void write_sample_chart_pdf(const char *path) {
    static const char *const hue[8] = {"red", "orange", "yellow", "green", "cyan", "blue", "purple", "brown"};
    static const char *const tone[3] = {"light", "medium", "dark"};
    cairo_t *cr = letter_pdf(path);
    for (int page = 0; page < 3; page++) {
        cairo_set_font_size(cr, 10);
        cairo_move_to(cr, 72, 100);
        cairo_show_text(cr, "These named colours are defined in the module, and each of them takes a pen.");
        cairo_set_font_size(cr, 8);
        for (int c = 0; c < 3; c++)
            for (int r = 0; r < 8; r++) {
                double x = 120 + 120 * c, y = 140 + 9 * r, k = 0.35 + 0.25 * c;
                cairo_set_source_rgb(cr, k * (r % 3 == 0), k * (r % 3 == 1), k * (r % 3 == 2) + 0.1 * c);
                cairo_rectangle(cr, x, y, 10, 9);
                cairo_fill(cr);
                cairo_set_source_rgb(cr, 0, 0, 0);
                char name[32];
                if (page == 1) snprintf(name, sizeof name, "%s %d", tone[c], r + 1);
                else snprintf(name, sizeof name, "%s%s", tone[c], hue[r]);
                cairo_move_to(cr, x + 14, y + 7.5);
                cairo_show_text(cr, name);
            }
        cairo_set_font_size(cr, 10);
        if (page == 2) {
            cairo_move_to(cr, 200, 232);
            cairo_show_text(cr, "Figure 2: The named colours.");
        }
        cairo_move_to(cr, 72, 270);
        cairo_show_text(cr, "The structure pen defines the basic pen of every drawing made in the module.");
        cairo_show_page(cr);
    }
    cairo_destroy(cr);   /* the last reference: the PDF is written */
}

/* A chart of samples under the size of a figure, named beside them, is one figure with its
 * names, caption or not (a caption under it is its caption); the same layout with numbers
 * for names is none. */
TEST(chart_of_samples) {
    ingest_doc *d = NULL;
    open_fixture(test_failed_, "samples", write_sample_chart_pdf, &d);
    check_page_figure(test_failed_, d, 1, (ingest_box){120, 140, 420, 212}, 0.006, NULL);
    check_page_no_figure(test_failed_, d, 2, "swatches named with numbers");
    check_page_figure(test_failed_, d, 3, (ingest_box){120, 140, 420, 212}, 0.006, "Figure 2:");
    ingest_doc_free(d);
}

static void expect_bad(int *test_failed_, const char *file, int want) {
    char path[2048], err[512];
    snprintf(path, sizeof path, "%s/%s", bad_dir, file);
    ingest_doc *d = (ingest_doc *)1;
    int rc = ingest_doc_open(path, NULL, &d, err, sizeof err);
    printf("  %s -> %d \"%s\"\n", file, rc, err);
    CHECK_MSG(rc == want, "%s: rc %d want %d (%s)", file, rc, want, err);
    CHECK(d == NULL);
    CHECK_MSG(strstr(err, file) != NULL, "message '%s' does not name the file", err);
    CHECK(strchr(err, '\n') == NULL);
}

TEST(bad_inputs) {
    CHECK(gen("bad", bad_dir, sizeof bad_dir) == 0);
    expect_bad(test_failed_, "not-a-pdf.pdf", INGEST_ERR_NOT_PDF);
    if (*test_failed_) return;
    expect_bad(test_failed_, "truncated.pdf", INGEST_ERR_NOT_PDF);
    if (*test_failed_) return;
    expect_bad(test_failed_, "encrypted.pdf", INGEST_ERR_ENCRYPTED);
    if (*test_failed_) return;
    expect_bad(test_failed_, "zero-pages.pdf", INGEST_ERR_EMPTY);
    if (*test_failed_) return;
    expect_bad(test_failed_, "does-not-exist.pdf", INGEST_ERR_IO);
    if (*test_failed_) return;
    char sub[2048];
    snprintf(sub, sizeof sub, "%s/a-directory.pdf", bad_dir);
    mkdir(sub, 0755);
    expect_bad(test_failed_, "a-directory.pdf", INGEST_ERR_IO);
    if (*test_failed_) return;
    char err[512];
    ingest_doc *d;
    CHECK(ingest_doc_open("", NULL, &d, err, sizeof err) == INGEST_ERR_ARG);
    CHECK(ingest_doc_open_mem("hello", 5, "mem.pdf", NULL, &d, err, sizeof err) == INGEST_ERR_NOT_PDF);
    CHECK(strstr(err, "mem.pdf"));
    /* the same bytes from memory: truncated is still refused */
    snprintf(sub, sizeof sub, "%s/truncated.pdf", bad_dir);
    FILE *f = fopen(sub, "rb");
    CHECK(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    CHECK(ingest_doc_open_mem(buf, n, "cut.pdf", NULL, &d, err, sizeof err) == INGEST_ERR_NOT_PDF);
    CHECK(d == NULL);
}

TEST(relative_path_memory_and_sha256) {
    CHECK(load_corpus() == 0);
    char cwd[2048], err[512];
    CHECK(getcwd(cwd, sizeof cwd));
    CHECK(chdir(corpus_dir) == 0);
    ingest_doc *d = NULL;
    int rc = ingest_doc_open("./corpus.pdf", NULL, &d, err, sizeof err);
    CHECK(chdir(cwd) == 0);
    CHECK_MSG(rc == 0, "%s", err);
    CHECK(ingest_doc_path(d)[0] == '/');
    CHECK(!strcmp(ingest_doc_title(d), "corpus"));
    /* sha256 against the coreutils tool */
    char cmd[4096], line[256] = "";
    snprintf(cmd, sizeof cmd, "sha256sum '%s/corpus.pdf'", corpus_dir);
    FILE *pp = popen(cmd, "r");
    CHECK(pp);
    CHECK(fgets(line, sizeof line, pp));
    pclose(pp);
    CHECK(!strncmp(line, ingest_doc_sha256(d), 64));
    char hex[65];
    snprintf(cmd, sizeof cmd, "%s/corpus.pdf", corpus_dir);
    CHECK(ingest_file_sha256(cmd, hex, err, sizeof err) == 0 && !strcmp(hex, ingest_doc_sha256(d)));
    /* memory open gives the same document */
    FILE *f = fopen(cmd, "rb");
    CHECK(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n);
    CHECK(fread(buf, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    ingest_doc *m = NULL;
    CHECK(ingest_doc_open_mem(buf, (size_t)n, "upload.pdf", NULL, &m, err, sizeof err) == 0);
    CHECK(!strcmp(ingest_doc_sha256(m), ingest_doc_sha256(d)));
    CHECK(ingest_doc_page_count(m) == ingest_doc_page_count(d));
    ingest_page *pg = NULL;
    CHECK(ingest_doc_page(m, 2, &pg, err, sizeof err) == 0);
    CHECK(pg->n_images == 2);
    ingest_page_free(pg);
    CHECK(ingest_doc_page(m, 99, &pg, err, sizeof err) == INGEST_ERR_ARG && pg == NULL);
    CHECK(strstr(err, "upload.pdf"));
    ingest_doc_free(m);
    ingest_doc_free(d);
    free(buf);
    char key[64];
    ingest_embedding_key(key, sizeof key, 3, 17, 2);
    CHECK(!strcmp(key, "3_17_2"));
    ingest_embedding_key(key, sizeof key, 3, 18, -1);
    CHECK(!strcmp(key, "3_18_none"));
}

/* ---------- flat memory: measured in a child process ---------- */

static long maxrss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* Child mode: ingest the big PDF, print "rss50 rss2000 seconds chunks" and exit. */
__attribute__((constructor)) static void memchild(void) {
    const char *path = getenv("MMRAG_INGEST_MEMCHILD");
    if (!path) return;
    char err[512];
    ingest_doc *d;
    if (ingest_doc_open(path, NULL, &d, err, sizeof err)) {
        printf("error %s\n", err);
        _exit(1);
    }
    long r50 = 0, chunks = 0;
    double t0 = now_s();
    int n = ingest_doc_page_count(d);
    for (int p = 1; p <= n; p++) {
        ingest_page *pg;
        if (ingest_doc_page(d, p, &pg, err, sizeof err)) {
            printf("error %s\n", err);
            _exit(1);
        }
        chunks += pg->n_chunks;
        ingest_page_free(pg);
        if (p == 50) r50 = maxrss_kb();
    }
    double dt = now_s() - t0;
    ingest_doc_free(d);
    printf("%ld %ld %.3f %ld %d\n", r50, maxrss_kb(), dt, chunks, n);
    fflush(stdout);
    _exit(0);
}

TEST(flat_memory_2000_pages) {
    if (!bad_dir[0]) CHECK(gen("bad", bad_dir, sizeof bad_dir) == 0);
    char exe[2048], cmd[8192];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    CHECK(n > 0);
    exe[n] = 0;
#ifdef __SANITIZE_ADDRESS__
    /* ASan keeps freed blocks in a quarantine (256 MB by default): turn it off so peak
     * RSS measures what is live */
    const char *asan = "ASAN_OPTIONS=\"$ASAN_OPTIONS:quarantine_size_mb=0:detect_leaks=0\" ";
#else
    const char *asan = "";
#endif
    snprintf(cmd, sizeof cmd, "%sMMRAG_INGEST_MEMCHILD='%s/big-2000.pdf' '%s'", asan, bad_dir, exe);
    FILE *pp = popen(cmd, "r");
    CHECK(pp);
    long r50 = 0, r2000 = 0, chunks = 0;
    double dt = 0;
    int pagesn = 0;
    int got = fscanf(pp, "%ld %ld %lf %ld %d", &r50, &r2000, &dt, &chunks, &pagesn);
    pclose(pp);
    CHECK_MSG(got == 5, "child printed %d fields", got);
    printf("  2000 pages: %.2f s (%.0f pages/s), peak RSS after 50 pages %ld KB, after 2000 %ld KB "
           "(+%ld KB)\n", dt, pagesn / dt, r50, r2000, r2000 - r50);
    CHECK(pagesn == 2000);
    CHECK(chunks >= 2000);
    /* Margin: 16 MB. Every page carries a captioned chart, so each page is rendered
     * (~0.4 MB) and cropped; Poppler's page-tree cache costs ~2.4 KB per page reached
     * (content-independent, not ours). A leaked render or crop per page would add
     * hundreds of MB. */
    CHECK_MSG(r2000 - r50 <= 16 * 1024, "peak RSS grew by %ld KB", r2000 - r50);
}

/* Running header, footer and page numbers: dropped from the third page on (the header)
 * and on every page (the numbers); body text, a heading at the top, a different line in
 * the header zone and a repeated last body line in the footer zone stay. The PDF is
 * drawn here with cairo, truth by construction. */
TEST(running_headers_and_page_numbers_dropped) {
    char path[2048];
    snprintf(path, sizeof path, "%s/furniture.pdf", test_env("MMRAG_TMP", "/tmp"));
    cairo_t *cr = letter_pdf(path);
    for (int p = 1; p <= 5; p++) {
        char line[128];
        cairo_set_font_size(cr, 9);
        cairo_move_to(cr, 72, 40);
        cairo_show_text(cr, "Acme Gearbox Service Manual");
        snprintf(line, sizeof line, "%d", p);
        cairo_move_to(cr, 530, 40);
        cairo_show_text(cr, line);
        snprintf(line, sizeof line, "Page %d of 5", p);
        cairo_move_to(cr, 280, 770);
        cairo_show_text(cr, line);
        cairo_set_font_size(cr, 16);
        cairo_move_to(cr, 72, 100);
        cairo_show_text(cr, p == 4 ? "Chapter 2 Lubrication" : "Overview of the gear train");
        cairo_set_font_size(cr, 11);
        snprintf(line, sizeof line, "Body paragraph %d explains torque on shaft number %d.", p, p * 7);
        cairo_move_to(cr, 72, 140);
        cairo_show_text(cr, line);
        /* the body runs into the bottom zone and its last line reads the same on every
         * page, close under the line above it: body text, not a footer */
        snprintf(line, sizeof line, "Clearances for gear stage %d are listed below.", p);
        cairo_move_to(cr, 72, 722);
        cairo_show_text(cr, line);
        cairo_move_to(cr, 72, 735);
        cairo_show_text(cr, "Syntax: torque <value>");
        cairo_show_page(cr);
    }
    cairo_destroy(cr);   /* the last reference: the PDF is written */
    ingest_options o;
    ingest_options_default(&o);
    ingest_doc *d = NULL;
    char err[512];
    CHECK_MSG(ingest_doc_open(path, &o, &d, err, sizeof err) == 0, "%s", err);
    for (int p = 1; p <= 5; p++) {
        ingest_page *pg = NULL;
        CHECK(ingest_doc_page(d, p, &pg, err, sizeof err) == 0 && pg);
        char *t = page_text(pg), want[128];
        snprintf(want, sizeof want, "Body paragraph %d explains torque on shaft number %d.", p, p * 7);
        CHECK_MSG(strstr(t, want) != NULL, "page %d: %s", p, t);
        CHECK_MSG(strstr(t, p == 4 ? "Chapter 2 Lubrication" : "Overview of the gear train"), "page %d: %s", p, t);
        CHECK_MSG((strstr(t, "Acme Gearbox Service Manual") != NULL) == (p <= 2), "page %d: %s", p, t);
        CHECK_MSG(!strstr(t, "of 5"), "page %d kept its footer: %s", p, t);
        CHECK_MSG(strstr(t, "Syntax: torque <value>"), "page %d lost its last body line: %s", p, t);
        /* the bare page number: no chunk is just the digit */
        for (int i = 0; i < pg->n_chunks; i++) {
            snprintf(want, sizeof want, "%d", p);
            CHECK_MSG(strcmp(pg->chunks[i].text, want) != 0, "page %d number kept", p);
        }
        free(t);
        ingest_page_free(pg);
    }
    ingest_doc_free(d);
    /* off by option: everything stays */
    o.strip_furniture = 0;
    CHECK(ingest_doc_open(path, &o, &d, err, sizeof err) == 0);
    ingest_page *pg = NULL;
    CHECK(ingest_doc_page(d, 5, &pg, err, sizeof err) == 0 && pg);
    char *t = page_text(pg);
    CHECK_MSG(strstr(t, "Acme Gearbox Service Manual") && strstr(t, "Page 5 of 5"), "%s", t);
    free(t);
    ingest_page_free(pg);
    ingest_doc_free(d);
    unlink(path);
}

TEST(zz_cleanup) {
    for (int p = 1; p <= n_pages; p++) ingest_page_free(pages[p]);
    n_pages = 0;
    ingest_doc_free(doc);
    doc = NULL;
    json_decref(truth);
    truth = NULL;
}
