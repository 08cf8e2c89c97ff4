/* api/core/render.c — a PDF page rendered with Poppler onto a cairo image, boxes drawn on
 * top, encoded as PNG in memory or to a file. See api/core/render.h. */
#include "api/core/render.h"
#include "index/store.h"

#include <cairo.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <poppler.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int render_box_valid(const float b[4]) {
    for (int i = 0; i < 4; i++)
        if (!(b[i] >= 0.0f && b[i] <= 1.0f)) return -1;   /* also rejects NaN */
    return b[0] <= b[2] && b[1] <= b[3] ? 0 : -1;
}

typedef struct { uint8_t *p; size_t len, cap; } membuf;

static cairo_status_t png_write(void *cls, const unsigned char *data, unsigned int len) {
    membuf *m = cls;
    if (m->len + len > m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 65536;
        while (nc < m->len + len) nc *= 2;
        uint8_t *np = realloc(m->p, nc);
        if (!np) return CAIRO_STATUS_NO_MEMORY;
        m->p = np;
        m->cap = nc;
    }
    memcpy(m->p + m->len, data, len);
    m->len += len;
    return CAIRO_STATUS_SUCCESS;
}

static PopplerDocument *open_pdf(const char *path, char *err, size_t errlen) {
    GError *ge = NULL;
    char *uri = g_filename_to_uri(path, NULL, &ge);
    if (!uri) {
        snprintf(err, errlen, "bad PDF path: %s", ge ? ge->message : "?");
        if (ge) g_error_free(ge);
        return NULL;
    }
    PopplerDocument *doc = poppler_document_new_from_file(uri, NULL, &ge);
    g_free(uri);
    if (!doc) {
        snprintf(err, errlen, "cannot open the PDF: %s", ge ? ge->message : "?");
        if (ge) g_error_free(ge);
    }
    return doc;
}

/* Fill, then border, then the label in a small red tab at the top-left corner. */
static void draw_box(cairo_t *cr, const float b[4], const char *label, int w, int h) {
    double x = b[0] * w, y = b[1] * h, bw = (b[2] - b[0]) * w, bh = (b[3] - b[1]) * h;
    if (bw <= 0 || bh <= 0) return;
    const double er = RENDER_EDGE_R / 255.0, eg = RENDER_EDGE_G / 255.0, eb = RENDER_EDGE_B / 255.0;
    cairo_set_source_rgba(cr, 1, 0.85, 0, 0.25);
    cairo_rectangle(cr, x, y, bw, bh);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, er, eg, eb);
    cairo_set_line_width(cr, RENDER_EDGE_PX);
    cairo_rectangle(cr, x, y, bw, bh);
    cairo_stroke(cr);
    if (!label || !*label) return;
    double fs = w / 60.0 < 12 ? 12 : w / 60.0;
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
    cairo_set_font_size(cr, fs);
    cairo_text_extents_t te;
    cairo_text_extents(cr, label, &te);
    double tw = te.x_advance + 6, th = fs + 4;
    double ty = y - th >= 0 ? y - th : y;     /* above the box when there is room */
    cairo_rectangle(cr, x, ty, tw, th);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_move_to(cr, x + 3, ty + fs);
    cairo_show_text(cr, label);
}

int render_page_png(const char *pdf_path, int page, const float *boxes, int n_boxes,
                    const char *const *labels, int width_px, uint8_t **png, size_t *len,
                    char *err, size_t errlen) {
    *png = NULL;
    *len = 0;
    if (!pdf_path || !*pdf_path) { snprintf(err, errlen, "no PDF path"); return -1; }
    if (width_px < RENDER_WIDTH_MIN || width_px > RENDER_WIDTH_MAX) {
        snprintf(err, errlen, "width must be %d..%d pixels (got %d)", RENDER_WIDTH_MIN,
                 RENDER_WIDTH_MAX, width_px);
        return -1;
    }
    if (n_boxes < 0 || (n_boxes > 0 && !boxes)) { snprintf(err, errlen, "no boxes given"); return -1; }
    for (int i = 0; i < n_boxes; i++)
        if (render_box_valid(boxes + 4 * i)) {
            snprintf(err, errlen, "box %d must be x0,y0,x1,y1 in 0..1 with x0<=x1, y0<=y1", i + 1);
            return -1;
        }
    PopplerDocument *doc = open_pdf(pdf_path, err, errlen);
    if (!doc) return -1;
    int rc = -1, n_pages = poppler_document_get_n_pages(doc);
    PopplerPage *pg = page >= 1 && page <= n_pages ? poppler_document_get_page(doc, page - 1) : NULL;
    cairo_surface_t *surf = NULL;
    if (!pg) {
        snprintf(err, errlen, "page %d not in the PDF (%d pages)", page, n_pages);
        goto done;
    }
    double pw, ph;
    poppler_page_get_size(pg, &pw, &ph);
    if (!(pw > 0 && ph > 0)) { snprintf(err, errlen, "page %d has no size", page); goto done; }
    double scale = width_px / pw;
    int w = width_px, h = (int)(ph * scale + 0.5);
    if (h < 1) h = 1;
    if (h > RENDER_HEIGHT_MAX) {
        scale = RENDER_HEIGHT_MAX / ph;
        h = RENDER_HEIGHT_MAX;
        w = (int)(pw * scale + 0.5);
        if (w < 1) w = 1;
    }
    surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    if (cairo_surface_status(surf) != CAIRO_STATUS_SUCCESS) {
        snprintf(err, errlen, "cannot allocate a %dx%d image", w, h);
        goto done;
    }
    cairo_t *cr = cairo_create(surf);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_save(cr);
    cairo_scale(cr, scale, scale);
    poppler_page_render(pg, cr);
    cairo_restore(cr);
    for (int i = 0; i < n_boxes; i++) draw_box(cr, boxes + 4 * i, labels ? labels[i] : NULL, w, h);
    cairo_destroy(cr);
    membuf m = {0};
    if (cairo_surface_write_to_png_stream(surf, png_write, &m) == CAIRO_STATUS_SUCCESS) {
        *png = m.p;
        *len = m.len;
        rc = 0;
    } else {
        free(m.p);
        snprintf(err, errlen, "PNG encoding failed");
    }
done:
    if (surf) cairo_surface_destroy(surf);
    if (pg) g_object_unref(pg);
    g_object_unref(doc);
    return rc;
}

static int write_all(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int render_page_png_file(const char *pdf_path, int page, const float *boxes, int n_boxes,
                         const char *const *labels, int width_px, const char *out_path,
                         char *err, size_t errlen) {
    if (!out_path || !*out_path) { snprintf(err, errlen, "no output path"); return -1; }
    uint8_t *png;
    size_t len;
    if (render_page_png(pdf_path, page, boxes, n_boxes, labels, width_px, &png, &len, err, errlen))
        return -1;
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp%ld", out_path, (long)getpid()) >= (int)sizeof tmp) {
        snprintf(err, errlen, "output path too long");
        free(png);
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        snprintf(err, errlen, "cannot write %s: %s", out_path, strerror(errno));
        free(png);
        return -1;
    }
    int bad = write_all(fd, png, len);
    int e = errno;
    if (close(fd) && !bad) { bad = 1; e = errno; }
    free(png);
    if (!bad && rename(tmp, out_path)) { bad = 1; e = errno; }
    if (bad) {
        unlink(tmp);
        snprintf(err, errlen, "cannot write %s: %s", out_path, strerror(e));
        return -1;
    }
    return 0;
}

int render_source_pdf(store *s, const char *doc_path, const char *sha256, char *buf, size_t len,
                      char *err, size_t errlen) {
    if (doc_path && doc_path[0] == '/' && access(doc_path, R_OK) == 0) {
        snprintf(buf, len, "%s", doc_path);
        return 0;
    }
    if (!store_is_shared(s)) {
        snprintf(err, errlen, "the document's PDF is not here (%s)", doc_path ? doc_path : "no path");
        return -1;
    }
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char dir[1024];
    if (xdg && *xdg) snprintf(dir, sizeof dir, "%s/mmrag/files", xdg);
    else snprintf(dir, sizeof dir, "%s/.cache/mmrag/files", home && *home ? home : "/tmp");
    if (snprintf(buf, len, "%s/%s.pdf", dir, sha256) >= (int)len) {
        snprintf(err, errlen, "cache path too long");
        return -1;
    }
    if (access(buf, R_OK) == 0) return 0;
    uint8_t *pdf = NULL;
    size_t n = 0;
    if (store_file_get(s, sha256, &pdf, &n) != STORE_OK) {
        snprintf(err, errlen, "the document's PDF is not kept: %s", store_errmsg(s));
        return -1;
    }
    /* mkdir -p of the cache, then temp + rename: readers never see half a file */
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') { *p = 0; mkdir(dir, 0700); *p = '/'; }
    mkdir(dir, 0700);
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", buf, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int bad = fd < 0 || write_all(fd, pdf, n);
    if (fd >= 0 && close(fd)) bad = 1;
    free(pdf);
    if (bad || rename(tmp, buf)) {
        unlink(tmp);
        snprintf(err, errlen, "cannot write %s: %s", buf, strerror(errno));
        return -1;
    }
    return 0;
}
