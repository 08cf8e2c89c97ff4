/* tool_gencorpus — writes PDFs with known ground truth for the ingest tests, demo samples
 * and bad inputs.
 *   tool_gencorpus corpus DIR   corpus.pdf + truth.json (boxes, captions, facts, OCR text)
 *   tool_gencorpus samples DIR  realistic sample PDFs for `make demo`
 *   tool_gencorpus bad DIR      not-a-pdf, truncated, encrypted, zero-pages, big-2000
 *   tool_gencorpus faq DIR      a FAQ: question headings answered in the paragraph below,
 *                               a later page that points back at one of them, a
 *                               sentence that refers back to the one before it, and one
 *                               that announces a long instruction ("as follows.")
 * Everything is drawn with cairo's PDF surface: text as real text, photos as embedded
 * image XObjects, charts and tables as paths. Boxes in truth.json are normalized to the
 * page, [x0,y0,x1,y1], origin top-left, and are the exact extents of what was drawn. */
#include <cairo-pdf.h>
#include <cairo.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PAGE_W 612.0
#define PAGE_H 792.0
#define BODY_FONT "DejaVu Serif"
#define SANS_FONT "DejaVu Sans"

typedef struct { double x0, y0, x1, y1; } box;

typedef struct {
    cairo_t *cr;
    json_t *pages;   /* array of page truth objects of the current document */
    json_t *page;    /* truth of the current page */
    int number;
} gen;

/* ---------- small helpers ---------- */

static void bbox_add(box *b, double x0, double y0, double x1, double y1) {
    if (x0 < b->x0) b->x0 = x0;
    if (y0 < b->y0) b->y0 = y0;
    if (x1 > b->x1) b->x1 = x1;
    if (y1 > b->y1) b->y1 = y1;
}

static box bbox_empty(void) { return (box){1e9, 1e9, -1e9, -1e9}; }

static json_t *jbox(box b, double w, double h) {
    return json_pack("[ffff]", b.x0 / w, b.y0 / h, b.x1 / w, b.y1 / h);
}

static void font(cairo_t *cr, const char *face, int bold, double size) {
    cairo_select_font_face(cr, face, CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
}

/* Draw `s` with its baseline at (x, y); extend `b` (if given) by its ink extents. */
static void text_at(cairo_t *cr, double x, double y, const char *s, box *b) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    cairo_move_to(cr, x, y);
    cairo_show_text(cr, s);
    if (b) bbox_add(b, x + e.x_bearing, y + e.y_bearing, x + e.x_bearing + e.width,
                    y + e.y_bearing + e.height);
}

static double text_width(cairo_t *cr, const char *s) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    return e.x_advance;
}

/* Word-wrapped paragraph in [x, x+w] starting with its first line's top at y.
 * Returns the y below the paragraph. */
static double paragraph(cairo_t *cr, double x, double y, double w, double size, const char *text) {
    font(cr, BODY_FONT, 0, size);
    cairo_set_source_rgb(cr, 0, 0, 0);
    double lh = size * 1.35;
    char line[1024] = "", cand[1024];
    const char *p = text;
    double base = y + size;
    while (*p) {
        while (*p == ' ') p++;
        const char *q = p;
        while (*q && *q != ' ') q++;
        if (q == p) break;
        int wl = (int)(q - p) < 200 ? (int)(q - p) : 200; /* words are short; keep bounds explicit */
        if (snprintf(cand, sizeof cand, "%s%s%.*s", line, line[0] ? " " : "", wl, p) >= (int)sizeof cand)
            cand[0] = 0;
        if (line[0] && (!cand[0] || text_width(cr, cand) > w)) {
            text_at(cr, x, base, line, NULL);
            base += lh;
            if (snprintf(line, sizeof line, "%.*s", wl, p) < 0) line[0] = 0;
        } else {
            memcpy(line, cand, sizeof line);
        }
        p = q;
    }
    if (line[0]) { text_at(cr, x, base, line, NULL); base += lh; }
    return base - size + size * 0.6;
}

static double heading(gen *g, double x, double y, const char *text) {
    font(g->cr, SANS_FONT, 1, 16);
    cairo_set_source_rgb(g->cr, 0, 0, 0);
    text_at(g->cr, x, y + 16, text, NULL);
    if (g->page) json_array_append_new(json_object_get(g->page, "headings"), json_string(text));
    return y + 30;
}

static void fact(gen *g, const char *f) {
    json_array_append_new(json_object_get(g->page, "facts"), json_string(f));
}

static void page_begin(gen *g) {
    g->number++;
    g->page = json_pack("{s:i,s:f,s:f,s:b,s:[],s:[],s:[],s:[]}", "page", g->number, "width", PAGE_W,
                        "height", PAGE_H, "ocr", 0, "images", "facts", "headings", "tables");
    json_array_append_new(g->pages, g->page);
}

static void page_end(gen *g) { cairo_show_page(g->cr); }

static void truth_image(gen *g, const char *kind, box b, const char *caption) {
    json_array_append_new(json_object_get(g->page, "images"),
                          json_pack("{s:s,s:o,s:s}", "kind", kind, "box", jbox(b, PAGE_W, PAGE_H),
                                    "caption", caption));
}

/* Caption in 9.5pt sans, top at y. */
static double caption(cairo_t *cr, double x, double y, const char *text) {
    font(cr, SANS_FONT, 0, 9.5);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, x, y + 9.5, text, NULL);
    return y + 16;
}

/* ---------- pictures ---------- */

/* A synthetic landscape photo (sky gradient, sun, hills, building) painted as an
 * embedded bitmap at 2x the PDF resolution. */
static void photo(cairo_t *cr, box b, unsigned seed) {
    int w = (int)((b.x1 - b.x0) * 2), h = (int)((b.y1 - b.y0) * 2);
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    cairo_t *c = cairo_create(img);
    cairo_pattern_t *sky = cairo_pattern_create_linear(0, 0, 0, h);
    cairo_pattern_add_color_stop_rgb(sky, 0, 0.35, 0.55, 0.9);
    cairo_pattern_add_color_stop_rgb(sky, 1, 0.8, 0.9, 1.0);
    cairo_set_source(c, sky);
    cairo_paint(c);
    cairo_pattern_destroy(sky);
    cairo_set_source_rgb(c, 1.0, 0.85, 0.2);
    cairo_arc(c, w * 0.78, h * 0.22, h * 0.1, 0, 2 * M_PI);
    cairo_fill(c);
    cairo_set_source_rgb(c, 0.25, 0.55, 0.25);
    cairo_move_to(c, 0, h * 0.7);
    for (int i = 0; i <= 20; i++)
        cairo_line_to(c, w * i / 20.0, h * (0.62 + 0.08 * sin(i * 0.9 + seed)));
    cairo_line_to(c, w, h);
    cairo_line_to(c, 0, h);
    cairo_close_path(c);
    cairo_fill(c);
    cairo_set_source_rgb(c, 0.55, 0.55, 0.6);
    cairo_rectangle(c, w * 0.2, h * 0.4, w * 0.25, h * 0.35);
    cairo_fill(c);
    cairo_set_source_rgb(c, 0.4, 0.4, 0.45);
    cairo_rectangle(c, w * 0.3, h * 0.18, w * 0.05, h * 0.25);
    cairo_fill(c);
    /* film grain so it is a photo-like bitmap, not flat colours */
    cairo_surface_flush(img);
    unsigned char *px = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    unsigned s = seed * 2654435761u + 1;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            s = s * 1103515245u + 12345u;
            int d = (int)((s >> 16) % 17) - 8;
            for (int k = 0; k < 3; k++) {
                int v = px[y * stride + x * 4 + k] + d;
                px[y * stride + x * 4 + k] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
    cairo_surface_mark_dirty(img);
    cairo_destroy(c);
    cairo_save(cr);
    cairo_translate(cr, b.x0, b.y0);
    cairo_scale(cr, 0.5, 0.5);
    cairo_set_source_surface(cr, img, 0, 0);
    cairo_paint(cr);
    cairo_restore(cr);
    cairo_surface_destroy(img);
}

static void stroke_line(cairo_t *cr, double x0, double y0, double x1, double y1, box *b) {
    cairo_move_to(cr, x0, y0);
    cairo_line_to(cr, x1, y1);
    double lw = cairo_get_line_width(cr) / 2;
    cairo_stroke(cr);
    bbox_add(b, fmin(x0, x1) - lw, fmin(y0, y1) - lw, fmax(x0, x1) + lw, fmax(y0, y1) + lw);
}

/* Bar chart inside the area `a`; returns the exact ink box (bars, axes, labels). */
static box bar_chart(cairo_t *cr, box a, const double *vals, const char *const *labels, int n,
                     double vmax) {
    box b = bbox_empty();
    double left = a.x0 + 30, bottom = a.y1 - 14, top = a.y0 + 4, right = a.x1 - 4;
    cairo_set_line_width(cr, 1.0);
    cairo_set_source_rgb(cr, 0, 0, 0);
    stroke_line(cr, left, top, left, bottom, &b);
    stroke_line(cr, left, bottom, right, bottom, &b);
    font(cr, SANS_FONT, 0, 7);
    for (int t = 0; t <= 4; t++) {
        double y = bottom - (bottom - top) * t / 4.0;
        char lab[32];
        snprintf(lab, sizeof lab, "%g", vmax * t / 4.0);
        stroke_line(cr, left - 3, y, left, y, &b);
        text_at(cr, left - 5 - text_width(cr, lab), y + 2.5, lab, &b);
    }
    double slot = (right - left) / n;
    for (int i = 0; i < n; i++) {
        double hgt = (bottom - top - 6) * vals[i] / vmax;
        double x = left + slot * i + slot * 0.2;
        cairo_set_source_rgb(cr, 0.2 + 0.15 * (i % 3), 0.4, 0.75 - 0.1 * (i % 4));
        cairo_rectangle(cr, x, bottom - hgt, slot * 0.6, hgt);
        cairo_fill(cr);
        bbox_add(&b, x, bottom - hgt, x + slot * 0.6, bottom);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text_at(cr, x + slot * 0.3 - text_width(cr, labels[i]) / 2, bottom + 10, labels[i], &b);
    }
    return b;
}

/* Line chart with light grid, two series and a legend inside the area `a`. */
static box line_chart(cairo_t *cr, box a, const double *s1, const double *s2, int n, double vmax,
                      const char *name1, const char *name2) {
    box b = bbox_empty();
    double left = a.x0 + 30, bottom = a.y1 - 14, top = a.y0 + 4, right = a.x1 - 4;
    cairo_set_line_width(cr, 0.5);
    cairo_set_source_rgb(cr, 0.8, 0.8, 0.8);
    for (int t = 1; t <= 4; t++) {
        double y = bottom - (bottom - top) * t / 4.0;
        stroke_line(cr, left, y, right, y, &b);
    }
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 1.0);
    stroke_line(cr, left, top, left, bottom, &b);
    stroke_line(cr, left, bottom, right, bottom, &b);
    font(cr, SANS_FONT, 0, 7);
    for (int t = 0; t <= 4; t++) {
        double y = bottom - (bottom - top) * t / 4.0;
        char lab[32];
        snprintf(lab, sizeof lab, "%g", vmax * t / 4.0);
        text_at(cr, left - 5 - text_width(cr, lab), y + 2.5, lab, &b);
    }
    for (int i = 0; i < n; i++) {
        char lab[16];
        snprintf(lab, sizeof lab, "%d", i + 1);
        double x = left + 10 + (right - left - 20) * i / (n - 1);
        text_at(cr, x - text_width(cr, lab) / 2, bottom + 10, lab, &b);
    }
    const double *ser[2] = {s1, s2};
    for (int k = 0; k < 2; k++) {
        cairo_set_source_rgb(cr, k ? 0.85 : 0.1, k ? 0.3 : 0.35, k ? 0.1 : 0.8);
        cairo_set_line_width(cr, 1.5);
        for (int i = 0; i < n; i++) {
            double x = left + 10 + (right - left - 20) * i / (n - 1);
            double y = bottom - (bottom - top - 6) * ser[k][i] / vmax;
            if (i) cairo_line_to(cr, x, y); else cairo_move_to(cr, x, y);
        }
        cairo_stroke(cr);
        for (int i = 0; i < n; i++) {
            double x = left + 10 + (right - left - 20) * i / (n - 1);
            double y = bottom - (bottom - top - 6) * ser[k][i] / vmax;
            cairo_arc(cr, x, y, 2, 0, 2 * M_PI);
            cairo_fill(cr);
        }
    }
    /* legend, top right inside the plot */
    const char *names[2] = {name1, name2};
    for (int k = 0; k < 2; k++) {
        double y = top + 8 + 10 * k;
        cairo_set_source_rgb(cr, k ? 0.85 : 0.1, k ? 0.3 : 0.35, k ? 0.1 : 0.8);
        cairo_rectangle(cr, right - 70, y - 5, 8, 6);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text_at(cr, right - 58, y, names[k], NULL);
    }
    return b;
}

/* Table with a ruled grid; returns its box. */
static box table(cairo_t *cr, double x, double y, const double *colw, int ncol, int nrow,
                 const char *const *cells) {
    double rh = 16, w = 0;
    for (int c = 0; c < ncol; c++) w += colw[c];
    box b = bbox_empty();
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 0.8);
    for (int r = 0; r <= nrow; r++) stroke_line(cr, x, y + r * rh, x + w, y + r * rh, &b);
    double cx = x;
    for (int c = 0; c <= ncol; c++) {
        stroke_line(cr, cx, y, cx, y + nrow * rh, &b);
        if (c < ncol) cx += colw[c];
    }
    for (int r = 0; r < nrow; r++) {
        font(cr, SANS_FONT, r == 0, 8.5);
        cx = x;
        for (int c = 0; c < ncol; c++) {
            text_at(cr, cx + 4, y + r * rh + 11.5, cells[r * ncol + c], NULL);
            cx += colw[c];
        }
    }
    return b;
}

/* ---------- the test corpus ---------- */

static void corpus_page1(gen *g) {
    cairo_t *cr = g->cr;
    page_begin(g);
    double y = heading(g, 72, 60, "1 Introduction to the Zorblax plant");
    const char *f1 = "The Zorblax reactor produces 42 megawatts";
    y = paragraph(cr, 72, y, 468, 10.5,
                  "This report describes the pilot plant built near the northern lakes. "
                  "The Zorblax reactor produces 42 megawatts of continuous power, enough for "
                  "a small town. The plant was commissioned after three years of design work "
                  "and a long public consultation with the neighbouring villages.");
    fact(g, f1);
    y += 14;
    box ph = {72, y, 372, y + 200};
    photo(cr, ph, 7);
    const char *cap = "Figure 1: Aerial photo of the Zorblax plant at dawn.";
    y = caption(cr, 72, ph.y1 + 6, cap);
    truth_image(g, "raster", ph, cap);
    y += 10;
    y = paragraph(cr, 72, y, 468, 10.5,
                  "The photo above shows the reactor hall on the left and the cooling "
                  "tower. The hall is painted grey so that it blends with the hills. Visitors "
                  "reach the site by a gravel road from the harbour.");
    const char *f2 = "The plant employs 317 engineers";
    y = paragraph(cr, 72, y + 8, 468, 10.5,
                  "Staffing is modest for a site of this size. The plant employs 317 engineers "
                  "working in four shifts, supported by a small team of technicians.");
    fact(g, f2);
    page_end(g);
}

static void corpus_page2(gen *g) {
    cairo_t *cr = g->cr;
    page_begin(g);
    double y = heading(g, 72, 60, "2 Output and turbines");
    y = paragraph(cr, 72, y, 468, 10.5,
                  "Output grew steadily through the first year of operation. The Quibble "
                  "turbine spins at 3600 rpm at full load and drives the main generator.");
    fact(g, "The Quibble turbine spins at 3600 rpm");
    y += 12;
    static const double q[4] = {31, 36, 40, 42};
    static const char *const ql[4] = {"Q1", "Q2", "Q3", "Q4"};
    box ba = bar_chart(cr, (box){100, y, 420, y + 190}, q, ql, 4, 50);
    const char *c2 = "Figure 2: Quarterly output of the Zorblax reactor in megawatts.";
    y = caption(cr, 100, ba.y1 + 8, c2);
    truth_image(g, "vector", ba, c2);
    y += 8;
    y = paragraph(cr, 72, y, 468, 10.5,
                  "The bar chart shows the fourth quarter reaching the design output. "
                  "Efficiency is plotted below against the older Grendel unit.");
    y += 26;
    static const double e1[6] = {61, 64, 70, 72, 75, 78}, e2[6] = {55, 56, 58, 57, 59, 60};
    box la = line_chart(cr, (box){100, y, 440, y + 170}, e1, e2, 6, 100, "Zorblax", "Grendel");
    const char *c3 = "Figure 3: Efficiency in percent over six months.";
    y = caption(cr, 100, la.y1 + 8, c3);
    truth_image(g, "vector", la, c3);
    y = paragraph(cr, 72, y + 8, 468, 10.5,
                  "Monthly efficiency of the Zorblax unit peaked at 78 percent in month six.");
    fact(g, "peaked at 78 percent in month six");
    page_end(g);
}

static void corpus_page3(gen *g) {
    cairo_t *cr = g->cr;
    page_begin(g);
    double y = heading(g, 72, 60, "3 Maintenance");
    y = paragraph(cr, 72, y, 468, 10.5,
                  "Maintenance follows a fixed calendar. The coolant filter is replaced every "
                  "90 days, and the table lists the other tasks with their intervals.");
    fact(g, "The coolant filter is replaced every 90 days");
    y += 10;
    const char *tc = "Table 1: Maintenance schedule of the Zorblax plant.";
    y = caption(cr, 72, y, tc);
    static const double cw[3] = {160, 110, 150};
    static const char *const cells[] = {"Task", "Interval", "Crew",
                                        "Coolant filter", "90 days", "Two technicians",
                                        "Turbine inspection", "180 days", "Four engineers",
                                        "Control software audit", "365 days", "One auditor"};
    box tb = table(cr, 72, y, cw, 3, 4, cells);
    json_array_append_new(json_object_get(g->page, "tables"),
                          json_pack("{s:o,s:s}", "box", jbox(tb, PAGE_W, PAGE_H), "caption", tc));
    y = tb.y1 + 18;
    paragraph(cr, 72, y, 468, 10.5,
              "Unplanned stops are rare. In the first year the plant stopped only twice, "
              "both times because of a faulty pressure sensor on the secondary loop.");
    fact(g, "the plant stopped only twice");
    page_end(g);
}

/* Two columns; the paragraphs carry markers whose reading order is known. */
static void corpus_page4(gen *g) {
    cairo_t *cr = g->cr;
    page_begin(g);
    double y0 = heading(g, 72, 60, "4 Two column notes");
    static const char *const L[3] = {
        "Marker LEFTONE begins the left column. The harbour crane lifts twelve tonnes and "
        "moves the fuel casks from the ships to the storage yard beside the road.",
        "Marker LEFTTWO continues below it. The storage yard holds forty casks in four rows "
        "and is watched by cameras day and night from the control room.",
        "Marker LEFTTHREE ends the left column. Each cask is weighed twice before it leaves "
        "the harbour and the weights are written into the site logbook."};
    static const char *const R[3] = {
        "Marker RIGHTONE opens the right column. The Vantor valve opens at 12 bar and "
        "releases steam into the condenser when the pressure climbs too fast.",
        "Marker RIGHTTWO follows. The condenser is cooled by lake water that returns to the "
        "lake a few degrees warmer, within the limits set by the permit.",
        "Marker RIGHTTHREE closes the page. The permit is renewed every five years after an "
        "independent review of the water temperature records."};
    double yl = y0, yr = y0;
    for (int i = 0; i < 3; i++) yl = paragraph(cr, 72, yl, 220, 10, L[i]) + 10;
    for (int i = 0; i < 3; i++) yr = paragraph(cr, 320, yr, 220, 10, R[i]) + 10;
    fact(g, "The Vantor valve opens at 12 bar");
    json_object_set_new(g->page, "order", json_pack("[ssssss]", "LEFTONE", "LEFTTWO", "LEFTTHREE",
                                                     "RIGHTONE", "RIGHTTWO", "RIGHTTHREE"));
    double y = fmax(yl, yr) + 10;
    paragraph(cr, 72, y, 468, 10,
              "This closing line spans both columns and is read after them: SPANEND.");
    page_end(g);
}

/* A page whose text exists only inside a bitmap (no text layer), like a scan. */
static const char *const scan_lines[] = {
    "Scanned maintenance record",
    "The Vortigan pump was serviced on March 3.",
    "Pressure readings stayed below 80 psi.",
    "Replacement seals were ordered from Kestrel Works.",
    "Inspector signature is on file in the archive.",
};

static void corpus_page5(gen *g) {
    cairo_t *cr = g->cr;
    page_begin(g);
    json_object_set_new(g->page, "ocr", json_true());
    const double dpi = 150, k = dpi / 72.0;
    int w = (int)(PAGE_W * k), h = (int)(PAGE_H * k);
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    cairo_t *c = cairo_create(img);
    cairo_set_source_rgb(c, 0.97, 0.96, 0.93);
    cairo_paint(c);
    cairo_set_source_rgb(c, 0.08, 0.08, 0.1);
    cairo_scale(c, k, k);
    double y = 90;
    size_t n = sizeof scan_lines / sizeof *scan_lines;
    char all[2048] = "";
    for (size_t i = 0; i < n; i++) {
        font(c, SANS_FONT, i == 0, i == 0 ? 18 : 13);
        text_at(c, 80, y, scan_lines[i], NULL);
        y += i == 0 ? 40 : 24;
        strcat(all, scan_lines[i]);
        strcat(all, "\n");
    }
    cairo_destroy(c);
    /* paper speckle so it looks scanned */
    cairo_surface_flush(img);
    unsigned char *px = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    unsigned s = 99;
    for (int i = 0; i < w * h / 400; i++) {
        s = s * 1103515245u + 12345u;
        int x = (int)((s >> 8) % (unsigned)w);
        s = s * 1103515245u + 12345u;
        int yy = (int)((s >> 8) % (unsigned)h);
        for (int kk = 0; kk < 3; kk++) px[yy * stride + x * 4 + kk] = 200;
    }
    cairo_surface_mark_dirty(img);
    cairo_save(cr);
    cairo_scale(cr, 1 / k, 1 / k);
    cairo_set_source_surface(cr, img, 0, 0);
    cairo_paint(cr);
    cairo_restore(cr);
    cairo_surface_destroy(img);
    json_object_set_new(g->page, "ocr_text", json_string(all));
    page_end(g);
}

static int write_corpus(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/corpus.pdf", dir);
    cairo_surface_t *s = cairo_pdf_surface_create(path, PAGE_W, PAGE_H);
    gen g = {cairo_create(s), json_array(), NULL, 0};
    corpus_page1(&g);
    corpus_page2(&g);
    corpus_page3(&g);
    corpus_page4(&g);
    corpus_page5(&g);
    cairo_destroy(g.cr);
    cairo_surface_finish(s);
    int bad = cairo_surface_status(s) != CAIRO_STATUS_SUCCESS;
    cairo_surface_destroy(s);
    if (bad) { fprintf(stderr, "gencorpus: cairo failed writing %s\n", path); return 1; }
    json_t *root = json_pack("{s:[{s:s,s:o}]}", "docs", "file", "corpus.pdf", "pages", g.pages);
    snprintf(path, sizeof path, "%s/truth.json", dir);
    int rc = json_dump_file(root, path, JSON_INDENT(1) | JSON_REAL_PRECISION(6));
    json_decref(root);
    if (rc) { fprintf(stderr, "gencorpus: cannot write %s\n", path); return 1; }
    return 0;
}

/* ---------- demo samples ---------- */

static cairo_surface_t *doc_begin(const char *dir, const char *name, const char *title, gen *g) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    cairo_surface_t *s = cairo_pdf_surface_create(path, PAGE_W, PAGE_H);
    cairo_pdf_surface_set_metadata(s, CAIRO_PDF_METADATA_TITLE, title);
    *g = (gen){cairo_create(s), NULL, NULL, 0};
    return s;
}

/* doc_begin, then the title line every sample starts its first page with */
static cairo_surface_t *doc_titled(const char *dir, const char *name, const char *meta,
                                   const char *title, double size, gen *g) {
    cairo_surface_t *s = doc_begin(dir, name, meta, g);
    font(g->cr, SANS_FONT, 1, size);
    text_at(g->cr, 72, 80, title, NULL);
    return s;
}

static int doc_end(cairo_surface_t *s, gen *g, const char *name) {
    cairo_destroy(g->cr);
    cairo_surface_finish(s);
    int bad = cairo_surface_status(s) != CAIRO_STATUS_SUCCESS;
    cairo_surface_destroy(s);
    if (bad) fprintf(stderr, "gencorpus: cairo failed writing %s\n", name);
    return bad;
}

static int sample_report(const char *dir) {
    gen g;
    cairo_surface_t *s = doc_titled(dir, "northwind-q3-report.pdf", "Northwind Energy Q3 2024 report",
                                    "Northwind Energy - Quarterly Report Q3 2024", 18, &g);
    cairo_t *cr = g.cr;
    double y = heading(&g, 72, 100, "Highlights");
    y = paragraph(cr, 72, y, 468, 10.5,
                  "Revenue for the third quarter reached 48.2 million euros, up 17 percent on "
                  "the same quarter last year. Growth came mostly from the new wind farm at "
                  "Hollum, which delivered its first full quarter of power. Operating margin "
                  "improved to 21 percent as maintenance costs fell.");
    y = paragraph(cr, 72, y + 6, 468, 10.5,
                  "The board approved a dividend of 0.35 euros per share, payable in November. "
                  "Net debt decreased to 112 million euros.");
    y += 12;
    static const double rev[4] = {38.5, 41.0, 48.2, 0};
    static const char *const ql[4] = {"Q1", "Q2", "Q3", "Q4 (est.)"};
    double rv[4] = {rev[0], rev[1], rev[2], 50.0};
    box b = bar_chart(cr, (box){110, y, 430, y + 200}, rv, ql, 4, 60);
    y = caption(cr, 110, b.y1 + 8, "Figure 1: Revenue by quarter in million euros (Q4 is the forecast).");
    y = heading(&g, 72, y + 16, "Outlook");
    paragraph(cr, 72, y, 468, 10.5,
              "For the fourth quarter we expect revenue of about 50 million euros. The main "
              "risk is low wind speed in December; the main opportunity is the grid "
              "connection of the Westerland solar park, planned for mid-November.");
    page_end(&g);
    y = heading(&g, 72, 60, "Segment results");
    static const double cw[4] = {150, 100, 100, 110};
    static const char *const cells[] = {"Segment", "Revenue", "Margin", "Capacity",
                                        "Wind", "31.4 M EUR", "24 %", "410 MW",
                                        "Solar", "11.9 M EUR", "18 %", "160 MW",
                                        "Storage", "4.9 M EUR", "9 %", "60 MWh"};
    y = caption(cr, 72, y, "Table 1: Revenue, margin and installed capacity by segment, Q3 2024.");
    box t = table(cr, 72, y, cw, 4, 4, cells);
    paragraph(cr, 72, t.y1 + 18, 468, 10.5,
              "Wind remains the largest segment with 65 percent of revenue. Storage is still "
              "small but doubled its revenue compared with the second quarter.");
    page_end(&g);
    return doc_end(s, &g, "northwind-q3-report.pdf");
}

static box wiring_diagram(cairo_t *cr, box a) {
    box b = bbox_empty();
    const char *names[4] = {"PV array", "Inverter", "Meter", "Grid"};
    double bw = 70, gap = (a.x1 - a.x0 - 4 * bw) / 3, cy = (a.y0 + a.y1) / 2;
    cairo_set_line_width(cr, 1.2);
    font(cr, SANS_FONT, 0, 8);
    for (int i = 0; i < 4; i++) {
        double x = a.x0 + i * (bw + gap);
        cairo_set_source_rgb(cr, 0.9, 0.93, 1.0);
        cairo_rectangle(cr, x, cy - 22, bw, 44);
        cairo_fill_preserve(cr);
        cairo_set_source_rgb(cr, 0.1, 0.2, 0.5);
        cairo_stroke(cr);
        bbox_add(&b, x - 0.6, cy - 22.6, x + bw + 0.6, cy + 22.6);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text_at(cr, x + bw / 2 - text_width(cr, names[i]) / 2, cy + 3, names[i], NULL);
        if (i < 3) {
            double x0 = x + bw, x1 = x + bw + gap;
            stroke_line(cr, x0, cy, x1 - 6, cy, &b);
            cairo_move_to(cr, x1, cy);
            cairo_line_to(cr, x1 - 7, cy - 4);
            cairo_line_to(cr, x1 - 7, cy + 4);
            cairo_close_path(cr);
            cairo_fill(cr);
            text_at(cr, x0 + 4, cy - 8, i == 0 ? "DC 600 V" : i == 1 ? "AC 230 V" : "AC", &b);
        }
    }
    return b;
}

static int sample_manual(const char *dir) {
    gen g;
    cairo_surface_t *s = doc_titled(dir, "helios-inverter-manual.pdf", "Helios SI-5000 inverter manual",
                                    "Helios SI-5000 Solar Inverter - Installation Manual", 17, &g);
    cairo_t *cr = g.cr;
    double y = heading(&g, 72, 100, "1 Safety");
    y = paragraph(cr, 72, y, 468, 10.5,
                  "Only qualified electricians may install the SI-5000. Disconnect the PV array "
                  "with the DC isolator before opening the housing, and wait five minutes for "
                  "the capacitors to discharge. The housing must never be opened while the red "
                  "FAULT lamp is blinking.");
    y = heading(&g, 72, y + 10, "2 Wiring");
    y = paragraph(cr, 72, y, 468, 10.5,
                  "Connect the array to the DC terminals, the inverter output to the meter and "
                  "the meter to the grid as shown in the diagram. Use copper cable of at least "
                  "6 square millimetres for the AC side.");
    box d = wiring_diagram(cr, (box){90, y + 14, 520, y + 94});
    y = caption(cr, 90, d.y1 + 8, "Figure 1: Wiring diagram from the PV array to the grid.");
    y = heading(&g, 72, y + 14, "3 Technical data");
    y = caption(cr, 72, y, "Table 1: SI-5000 technical data.");
    static const double cw[2] = {200, 160};
    static const char *const cells[] = {"Parameter", "Value",
                                        "Rated AC power", "5000 W",
                                        "Maximum DC input voltage", "1000 V",
                                        "MPPT voltage range", "160 - 850 V",
                                        "Maximum efficiency", "97.8 %",
                                        "Operating temperature", "-25 to 60 C",
                                        "Weight", "16.5 kg"};
    box t = table(cr, 72, y, cw, 2, 7, cells);
    y = heading(&g, 72, t.y1 + 16, "4 Fault codes");
    paragraph(cr, 72, y, 468, 10.5,
              "Error E07 means the grid voltage is out of range: check the AC breaker and "
              "the grid connection. Error E12 means the insulation resistance of the PV "
              "array is too low: inspect the DC cables for damage. Error E21 means the "
              "internal temperature exceeded 85 degrees; clean the cooling fins.");
    page_end(&g);
    return doc_end(s, &g, "helios-inverter-manual.pdf");
}

static int sample_paper(const char *dir) {
    gen g;
    cairo_surface_t *s = doc_titled(dir, "sparse-attention-paper.pdf",
                                    "Local-global sparse attention for long documents",
                                    "Local-Global Sparse Attention for Long Documents", 17, &g);
    cairo_t *cr = g.cr;
    font(cr, BODY_FONT, 0, 10);
    text_at(cr, 72, 98, "A. Researcher and B. Student, Institute of Imaginary Sciences", NULL);
    double yl = heading(&g, 72, 118, "Abstract");
    yl = paragraph(cr, 72, yl, 220, 9.5,
                   "We study a sparse attention pattern that combines a sliding window of 512 "
                   "tokens with 16 global tokens. On a long-document benchmark it reaches 91.3 "
                   "percent of dense accuracy while using 6.2 times less memory at a context of "
                   "32768 tokens.");
    yl = heading(&g, 72, yl + 8, "1 Method");
    yl = paragraph(cr, 72, yl, 220, 9.5,
                   "Each token attends to its local window and to the global tokens; global "
                   "tokens attend to everything. The cost grows linearly with the sequence "
                   "length instead of quadratically.");
    double yr = heading(&g, 320, 118, "2 Results");
    yr = paragraph(cr, 320, yr, 220, 9.5,
                   "Validation loss converges within 20 thousand steps for both models. The "
                   "sparse model ends 0.04 nats above the dense one, a gap we consider small.");
    yr = paragraph(cr, 320, yr + 6, 220, 9.5,
                   "Throughput on an A100 GPU was 2.8 times higher for the sparse model at the "
                   "longest context.");
    double y = fmax(yl, yr) + 14;
    static const double dn[6] = {3.1, 2.5, 2.2, 2.05, 1.98, 1.95}, sp[6] = {3.2, 2.6, 2.3, 2.1, 2.03, 1.99};
    box b = line_chart(cr, (box){120, y, 480, y + 180}, dn, sp, 6, 4, "dense", "sparse");
    y = caption(cr, 120, b.y1 + 8, "Figure 1: Validation loss per 5k training steps, dense vs sparse.");
    paragraph(cr, 72, y + 10, 468, 9.5,
              "In conclusion, local-global sparse attention is a practical default for long "
              "documents when memory is the binding constraint.");
    page_end(&g);
    return doc_end(s, &g, "sparse-attention-paper.pdf");
}

/* ---------- bad inputs ---------- */

typedef struct { char *buf; size_t len, cap; } membuf;

static cairo_status_t membuf_write(void *closure, const unsigned char *data, unsigned int len) {
    membuf *m = closure;
    if (m->len + len > m->cap) {
        size_t cap = (m->cap + len) * 2;
        char *nb = realloc(m->buf, cap);
        if (!nb) return CAIRO_STATUS_NO_MEMORY;
        m->buf = nb;
        m->cap = cap;
    }
    memcpy(m->buf + m->len, data, len);
    m->len += len;
    return CAIRO_STATUS_SUCCESS;
}

static void mb_printf(membuf *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void mb_printf(membuf *m, const char *fmt, ...) {
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) membuf_write(m, (const unsigned char *)tmp, (unsigned)n);
}

static int write_file(const char *dir, const char *name, const void *data, size_t len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f)) {
        fprintf(stderr, "gencorpus: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

/* Hand-written PDF: objects given as strings, xref offsets computed. */
static int write_raw_pdf(const char *dir, const char *name, const char *const *objs, int n,
                         const char *trailer_extra) {
    membuf m = {0};
    long off[32];
    mb_printf(&m, "%%PDF-1.4\n");
    for (int i = 0; i < n; i++) {
        off[i] = (long)m.len;
        mb_printf(&m, "%d 0 obj\n%s\nendobj\n", i + 1, objs[i]);
    }
    long xref = (long)m.len;
    mb_printf(&m, "xref\n0 %d\n0000000000 65535 f \n", n + 1);
    for (int i = 0; i < n; i++) mb_printf(&m, "%010ld 00000 n \n", off[i]);
    mb_printf(&m, "trailer\n<< /Size %d /Root 1 0 R %s>>\nstartxref\n%ld\n%%%%EOF\n", n + 1,
              trailer_extra, xref);
    int rc = write_file(dir, name, m.buf, m.len);
    free(m.buf);
    return rc;
}

static int write_bad(const char *dir) {
    int rc = 0;
    const char *txt = "This is a plain text file that only pretends to be a PDF.\n";
    rc |= write_file(dir, "not-a-pdf.pdf", txt, strlen(txt));

    /* a valid two-page PDF, cut in half */
    membuf m = {0};
    cairo_surface_t *s = cairo_pdf_surface_create_for_stream(membuf_write, &m, PAGE_W, PAGE_H);
    gen g = {cairo_create(s), NULL, NULL, 0};
    for (int p = 0; p < 2; p++) {
        heading(&g, 72, 60, "A document that will be truncated");
        paragraph(g.cr, 72, 100, 468, 10.5, "Some text that nobody will ever read because "
                                             "the file ends in the middle of its objects.");
        page_end(&g);
    }
    cairo_destroy(g.cr);
    cairo_surface_finish(s);
    cairo_surface_destroy(s);
    rc |= write_file(dir, "truncated.pdf", m.buf, m.len / 2);
    free(m.buf);

    /* Standard security handler whose /U does not match the empty user password, so a
     * reader must ask for a password (Poppler: POPPLER_ERROR_ENCRYPTED). */
    static const char *const enc[] = {
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
        "<< /Length 16 >>\nstream\n0123456789abcdef\nendstream",
        "<< /Filter /Standard /V 1 /R 2 /P -3904\n"
        "/O <8f3a1c5e77d2b9a0c4e6f1d3b5a79e2c0d4f6a8b1c3e5d7f9a0b2c4d6e8f0a1b>\n"
        "/U <1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809> >>",
    };
    rc |= write_raw_pdf(dir, "encrypted.pdf", enc, 5,
                        "/Encrypt 5 0 R /ID [<0123456789abcdef0123456789abcdef>"
                        "<0123456789abcdef0123456789abcdef>] ");

    static const char *const zero[] = {
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [] /Count 0 >>",
    };
    rc |= write_raw_pdf(dir, "zero-pages.pdf", zero, 2, "");

    /* 2,000 small text pages */
    char path[4096];
    snprintf(path, sizeof path, "%s/big-2000.pdf", dir);
    s = cairo_pdf_surface_create(path, 300, 200);
    cairo_t *cr = cairo_create(s);
    for (int p = 1; p <= 2000; p++) {
        char line[128];
        font(cr, BODY_FONT, 0, 10);
        snprintf(line, sizeof line, "Page %d of the long document.", p);
        text_at(cr, 20, 40, line, NULL);
        snprintf(line, sizeof line, "Serial number %d is stored in bay %d.", p * 7919 % 100000, p % 37);
        text_at(cr, 20, 60, line, NULL);
        /* every page has a small captioned chart so the render/figure path runs too */
        static const double v[3] = {3, 5, 4};
        static const char *const lab[3] = {"a", "b", "c"};
        double vv[3] = {v[0], v[1] + p % 3, v[2]};
        box b = bar_chart(cr, (box){40, 75, 200, 165}, vv, lab, 3, 8);
        font(cr, SANS_FONT, 0, 8);
        snprintf(line, sizeof line, "Figure %d: Bay load.", p);
        text_at(cr, 40, b.y1 + 14, line, NULL);
        cairo_show_page(cr);
    }
    cairo_destroy(cr);
    cairo_surface_finish(s);
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) rc = 1;
    cairo_surface_destroy(s);
    return rc;
}

/* Texinfo FAQs (the R FAQ) title each section with the question and answer it below; a
 * later section points back with "See Section 1.1 [...], page 1". */
static int sample_faq(const char *dir) {
    gen g;
    cairo_surface_t *s = doc_titled(dir, "aquadry-faq.pdf", "AquaDry D20 dehumidifier FAQ",
                                    "AquaDry D20 Dehumidifier FAQ", 17, &g);
    cairo_t *cr = g.cr;
    double y = heading(&g, 72, 100, "1 Operation");
    y = heading(&g, 72, y + 4, "1.1 Why does the unit stop after a few minutes?");
    y = paragraph(cr, 72, y, 468, 10.5,
                  "The compressor pauses whenever the coil temperature drops below 2 degrees, "
                  "so that no ice can build up on the fins. It restarts by itself after a "
                  "defrost cycle of eight minutes. Nothing needs to be done.");
    y = heading(&g, 72, y + 12, "1.2 How often must the filter be changed?");
    y = paragraph(cr, 72, y, 468, 10.5,
                  "Replace the carbon filter every 400 operating hours, or sooner in dusty "
                  "rooms. The filter lamp blinks when the hours are up. To reset the filter "
                  "counter after a change, proceed as follows. Hold the FAN and MODE buttons "
                  "together for five seconds until the filter lamp goes out, then release both "
                  "buttons, wait until the display shows the room humidity again, and press "
                  "MODE once more to store the new count of zero operating hours in the memory "
                  "of the unit.");
    page_end(&g);
    y = heading(&g, 72, 60, "2 Troubleshooting");
    y = paragraph(cr, 72, y, 468, 10.5,
              "A unit that stops after a few minutes of running is not faulty. See Section 1.1 "
              "[Why does the unit stop after a few minutes?], page 1, for more details. A unit "
              "that does not start at all usually has its water tank out of place. The outlet "
              "nozzle sits behind the lower rear grille. Fit this nozzle with a 12 mm garden "
              "hose for continuous drainage into a floor drain.");
    paragraph(cr, 72, y + 12, 468, 10.5,
              "To maximize drying in a cold basement, run the fan at its top speed and keep "
              "the doors closed.");
    page_end(&g);
    return doc_end(s, &g, "aquadry-faq.pdf");
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[1], "corpus") && strcmp(argv[1], "samples") && strcmp(argv[1], "bad") &&
                      strcmp(argv[1], "faq"))) {
        fprintf(stderr, "usage: tool_gencorpus corpus|samples|bad|faq DIR\n");
        return 2;
    }
    const char *dir = argv[2];
    if (mkdir(dir, 0755) && errno != EEXIST) {
        fprintf(stderr, "gencorpus: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    if (!strcmp(argv[1], "corpus")) return write_corpus(dir);
    if (!strcmp(argv[1], "samples"))
        return sample_report(dir) | sample_manual(dir) | sample_paper(dir);
    if (!strcmp(argv[1], "faq")) return sample_faq(dir);
    return write_bad(dir);
}
