/* ingest: open a PDF (file or memory), check it, hash it, and parse it page by page.
 * Every page result is built from a per-page working set that is freed before return,
 * and the Poppler page object is released, so memory does not grow with page count. */
#include "ingest/ingest-internal.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct ingest_doc {
    PopplerDocument *pd;
    GBytes *bytes;         /* memory documents */
    char *path;            /* canonical path, "" for memory */
    char *name;            /* used in messages */
    char *title;
    char sha[65];
    int64_t n_bytes;
    int32_t n_pages;
    int32_t next_order;    /* chunk order across the document */
    int32_t next_image;    /* image index across the document */
    ingest_options o;
    char *tessdata;
    ing_ocr *ocr;
    ing_scratch scratch;   /* figure detection's pixel map, reused across pages */
    int render_streak;     /* pages in a row that needed a render (see render_first) */
    ing_furniture furniture; /* header/footer lines seen on earlier pages */
    ing_outline *outline;  /* section paths (ingest-outline.c) */
    char *last_heading;    /* without an outline: the last heading of the pages pulled */
    int32_t last_page;     /* the page pulled before, for last_heading */
};

unsigned char *ingest_scratch(ing_scratch *s, size_t n) {
    if (n > s->cap) {
        unsigned char *p = realloc(s->p, n);
        if (!p) return NULL;
        s->p = p;
        s->cap = n;
    }
    return s->p;
}

/* Memory note: Poppler's catalog keeps the page object of every page up to the highest
 * one requested (Catalog::cachePageTree, ~2.5 KB a page, content-independent). Reopening
 * does not help because reaching page N caches pages 1..N again; everything ingest
 * allocates per page is freed before ingest_doc_page returns. */

void ingest_options_default(ingest_options *o) {
    *o = (ingest_options){.chunk_tokens = 200, .overlap_tokens = 40, .ocr = 1, .render_dpi = 144,
                          .strip_furniture = 1, .tessdata = NULL};
}

const char *ingest_chunk_kind_name(int32_t kind) {
    static const char *const names[] = {"text", "caption", "figure", "table", "ocr", "heading"};
    return kind >= 0 && kind < 6 ? names[kind] : "unknown";
}

int ingest_embedding_key(char *buf, size_t len, int64_t doc_id, int64_t chunk_id, int64_t image_id) {
    int n = image_id < 0
                ? snprintf(buf, len, "%lld_%lld_none", (long long)doc_id, (long long)chunk_id)
                : snprintf(buf, len, "%lld_%lld_%lld", (long long)doc_id, (long long)chunk_id,
                           (long long)image_id);
    return n;
}

/* ---------- checks and hashing ---------- */

static int has_pdf_magic(const unsigned char *p, size_t n) {
    for (size_t i = 0; i + 5 <= n && i < 1024; i++)
        if (!memcmp(p + i, "%PDF-", 5)) return 1;
    return 0;
}

static int has_eof_marker(const unsigned char *p, size_t n) {
    size_t from = n > 1024 ? n - 1024 : 0;
    for (size_t i = from; i + 5 <= n; i++)
        if (!memcmp(p + i, "%%EOF", 5)) return 1;
    return 0;
}

/* sha256 of a file plus its head (magic) and tail (%%EOF) checks in one read */
typedef struct { unsigned char head[1024], tail[1024]; size_t head_n, tail_n; int64_t bytes; } file_scan;

static int scan_file(const char *path, char hex[65], file_scan *fs, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return INGEST_ERR_IO;
    }
    GChecksum *ck = g_checksum_new(G_CHECKSUM_SHA256);
    unsigned char *buf = malloc(1 << 16);
    if (!ck || !buf) {
        close(fd);
        free(buf);
        if (ck) g_checksum_free(ck);
        snprintf(err, errlen, "%s: out of memory", path);
        return INGEST_ERR_NOMEM;
    }
    memset(fs, 0, sizeof *fs);
    int rc = 0;
    for (;;) {
        ssize_t n = read(fd, buf, 1 << 16);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
            rc = INGEST_ERR_IO;
            break;
        }
        if (n == 0) break;
        g_checksum_update(ck, buf, (gssize)n);
        if (fs->head_n < sizeof fs->head) {
            size_t k = sizeof fs->head - fs->head_n;
            if (k > (size_t)n) k = (size_t)n;
            memcpy(fs->head + fs->head_n, buf, k);
            fs->head_n += k;
        }
        /* keep the last 1024 bytes */
        if ((size_t)n >= sizeof fs->tail) {
            memcpy(fs->tail, buf + n - sizeof fs->tail, sizeof fs->tail);
            fs->tail_n = sizeof fs->tail;
        } else {
            size_t keep = fs->tail_n + (size_t)n > sizeof fs->tail ? sizeof fs->tail - (size_t)n : fs->tail_n;
            memmove(fs->tail, fs->tail + fs->tail_n - keep, keep);
            memcpy(fs->tail + keep, buf, (size_t)n);
            fs->tail_n = keep + (size_t)n;
        }
        fs->bytes += n;
    }
    close(fd);
    free(buf);
    if (rc == 0 && hex) {
        snprintf(hex, 65, "%s", g_checksum_get_string(ck));
    }
    g_checksum_free(ck);
    return rc;
}

int ingest_file_sha256(const char *path, char hex[65], char *err, size_t errlen) {
    file_scan *fs = malloc(sizeof *fs);
    if (!fs) return INGEST_ERR_NOMEM;
    int rc = scan_file(path, hex, fs, err, errlen);
    free(fs);
    return rc;
}

int ingest_mem_sha256(const void *data, size_t len, char hex[65]) {
    char *h = g_compute_checksum_for_data(G_CHECKSUM_SHA256, data, len);
    if (!h) return INGEST_ERR_NOMEM;
    snprintf(hex, 65, "%s", h);
    g_free(h);
    return 0;
}

/* ---------- open ---------- */

static char *stem_of(const char *name) {
    const char *b = strrchr(name, '/');
    b = b ? b + 1 : name;
    size_t n = strlen(b);
    if (n > 4 && !strcasecmp(b + n - 4, ".pdf")) n -= 4;
    return g_strndup(b, n);
}

/* Shared tail of both open paths: Poppler errors → status, page count, title. */
static int finish_open(ingest_doc *d, PopplerDocument *pd, GError *gerr, int eof_ok, char *err,
                       size_t errlen) {
    if (!pd) {
        int enc = gerr && gerr->domain == POPPLER_ERROR && gerr->code == POPPLER_ERROR_ENCRYPTED;
        if (enc)
            snprintf(err, errlen, "%s: encrypted PDF (needs a password)", d->name);
        else if (!eof_ok)
            snprintf(err, errlen, "%s: truncated PDF (no %%%%EOF at the end): %s", d->name,
                     gerr ? gerr->message : "cannot be parsed");
        else
            snprintf(err, errlen, "%s: damaged PDF: %s", d->name, gerr ? gerr->message : "cannot be parsed");
        if (gerr) g_error_free(gerr);
        return enc ? INGEST_ERR_ENCRYPTED : INGEST_ERR_NOT_PDF;
    }
    d->pd = pd;
    if (!eof_ok) {
        /* Poppler can reconstruct a cut file, but its missing part is lost: reject it */
        snprintf(err, errlen, "%s: truncated PDF (no %%%%EOF at the end)", d->name);
        return INGEST_ERR_NOT_PDF;
    }
    d->n_pages = poppler_document_get_n_pages(pd);
    if (d->n_pages <= 0) {
        snprintf(err, errlen, "%s: PDF has no pages", d->name);
        return INGEST_ERR_EMPTY;
    }
    d->outline = ingest_outline_load(pd);
    if (!d->outline) {
        snprintf(err, errlen, "%s: out of memory", d->name);
        return INGEST_ERR_NOMEM;
    }
    char *t = poppler_document_get_title(pd);
    if (t && *t) d->title = t;
    else {
        g_free(t);
        d->title = stem_of(d->name);
    }
    return 0;
}

static ingest_doc *doc_new(const ingest_options *o) {
    ingest_doc *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    if (o) d->o = *o;
    else ingest_options_default(&d->o);
    ingest_options def;
    ingest_options_default(&def);
    if (d->o.chunk_tokens <= 0) d->o.chunk_tokens = def.chunk_tokens;
    if (d->o.overlap_tokens < 0 || d->o.overlap_tokens >= d->o.chunk_tokens)
        d->o.overlap_tokens = d->o.chunk_tokens / 5;
    if (d->o.render_dpi < 36 || d->o.render_dpi > 600) d->o.render_dpi = def.render_dpi;
    if (d->o.tessdata) d->tessdata = g_strdup(d->o.tessdata);
    d->o.tessdata = d->tessdata;
    return d;
}

int ingest_doc_open(const char *path, const ingest_options *o, ingest_doc **out, char *err,
                    size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!out) return INGEST_ERR_ARG;
    *out = NULL;
    if (!path || !*path) {
        snprintf(err, errlen, "(empty path): no file given");
        return INGEST_ERR_ARG;
    }
    char real[PATH_MAX];
    if (!realpath(path, real)) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return INGEST_ERR_IO;
    }
    struct stat st;
    if (stat(real, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        return INGEST_ERR_IO;
    }
    ingest_doc *d = doc_new(o);
    file_scan *fs = malloc(sizeof *fs);
    if (!d || !fs) {
        free(d);
        free(fs);
        snprintf(err, errlen, "%s: out of memory", path);
        return INGEST_ERR_NOMEM;
    }
    d->path = g_strdup(real);
    d->name = g_strdup(path);
    int rc = scan_file(real, d->sha, fs, err, errlen);
    if (rc == 0 && !has_pdf_magic(fs->head, fs->head_n)) {
        snprintf(err, errlen, "%s: not a PDF (no %%PDF- header)", path);
        rc = INGEST_ERR_NOT_PDF;
    }
    if (rc == 0) {
        d->n_bytes = fs->bytes;
        int eof_ok = has_eof_marker(fs->tail, fs->tail_n);
        GError *gerr = NULL;
        char *uri = g_filename_to_uri(real, NULL, &gerr);
        if (!uri) {
            snprintf(err, errlen, "%s: cannot make a file URI: %s", path, gerr ? gerr->message : "?");
            if (gerr) g_error_free(gerr);
            rc = INGEST_ERR_IO;
        } else {
            PopplerDocument *pd = poppler_document_new_from_file(uri, NULL, &gerr);
            g_free(uri);
            rc = finish_open(d, pd, gerr, eof_ok, err, errlen);
        }
    }
    free(fs);
    if (rc) {
        ingest_doc_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

int ingest_doc_open_mem(const void *data, size_t len, const char *name, const ingest_options *o,
                        ingest_doc **out, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!out) return INGEST_ERR_ARG;
    *out = NULL;
    if (!name || !*name) name = "(memory)";
    if (!data || !len) {
        snprintf(err, errlen, "%s: empty buffer", name);
        return INGEST_ERR_ARG;
    }
    if (!has_pdf_magic(data, len)) {
        snprintf(err, errlen, "%s: not a PDF (no %%PDF- header)", name);
        return INGEST_ERR_NOT_PDF;
    }
    ingest_doc *d = doc_new(o);
    if (!d) {
        snprintf(err, errlen, "%s: out of memory", name);
        return INGEST_ERR_NOMEM;
    }
    d->path = g_strdup("");
    d->name = g_strdup(name);
    d->n_bytes = (int64_t)len;
    char *hex = g_compute_checksum_for_data(G_CHECKSUM_SHA256, data, len);
    snprintf(d->sha, sizeof d->sha, "%s", hex ? hex : "");
    g_free(hex);
    d->bytes = g_bytes_new_static(data, len);
    GError *gerr = NULL;
    PopplerDocument *pd = poppler_document_new_from_bytes(d->bytes, NULL, &gerr);
    int rc = finish_open(d, pd, gerr, has_eof_marker(data, len), err, errlen);
    if (rc) {
        ingest_doc_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

void ingest_doc_free(ingest_doc *d) {
    if (!d) return;
    if (d->pd) g_object_unref(d->pd);
    if (d->bytes) g_bytes_unref(d->bytes);
    ingest_ocr_free(d->ocr);
    ingest_outline_free(d->outline);
    free(d->last_heading);
    free(d->scratch.p);
    g_free(d->path);
    g_free(d->name);
    g_free(d->title);
    g_free(d->tessdata);
    free(d);
}

int32_t ingest_doc_page_count(const ingest_doc *d) { return d ? d->n_pages : 0; }
const char *ingest_doc_title(const ingest_doc *d) { return d && d->title ? d->title : ""; }
const char *ingest_doc_path(const ingest_doc *d) { return d && d->path ? d->path : ""; }
const char *ingest_doc_sha256(const ingest_doc *d) { return d ? d->sha : ""; }
int64_t ingest_doc_bytes(const ingest_doc *d) { return d ? d->n_bytes : 0; }

/* ---------- pages ---------- */

void ingest_page_free(ingest_page *p) {
    if (!p) return;
    for (int i = 0; i < p->n_images; i++) free(p->images[i].png);
    for (int i = 0; i < p->n_chunks; i++) {
        free(p->chunks[i].text);
        free(p->chunks[i].lines);
        free(p->chunks[i].section);
    }
    free(p->images);
    free(p->chunks);
    free(p);
}

/* figures: raster list, render when something may be a figure (unless the page was
 * rendered up front, see render_first; a text page when its coarse render shows a graphic),
 * detect, crop */
static int page_figures(ingest_doc *d, ing_pagectx *pc, int ocr_page, cairo_surface_t **s,
                        ingest_page *pg) {
    int rc = ingest_figures_raster(pc, ocr_page);
    if (rc) return rc;
    const unsigned char *px = NULL;
    int pw = 0, ph = 0, stride = 0;
    double scale = ingest_render_dpi(pc->w, pc->h, d->o.render_dpi) / 72.0;
    int need = ingest_figures_need_render(pc) || *s || (!ocr_page && ingest_figures_probe(pc));
    d->render_streak = need ? d->render_streak + 1 : 0;
    if (need) {
        if (!*s) *s = ingest_render(pc->pp, pc->w, pc->h, d->o.render_dpi);
        if (!*s) return INGEST_ERR_NOMEM;
        px = cairo_image_surface_get_data(*s);
        pw = cairo_image_surface_get_width(*s);
        ph = cairo_image_surface_get_height(*s);
        stride = cairo_image_surface_get_stride(*s);
        if (!ocr_page) rc = ingest_figures_detect(pc, px, pw, ph, stride, scale);
    }
    if (rc == 0) {
        ingest_figures_pair_captions(pc, ocr_page ? NULL : px, pw, ph, stride, scale);
        rc = ingest_figures_export(pc, px, pw, ph, stride, scale, pg);
    }
    for (int i = 0; i < pg->n_images; i++) pg->images[i].index = d->next_image++;
    return rc;
}

/* Poppler fills a page's text layer as a side effect of rendering it, so a page that
 * will be rendered anyway gets its text for free when the render comes first (the text
 * pass alone costs ~40% of a render on chart pages). Render first when the image map
 * shows a figure-sized image (such a page is always rendered), or when the last
 * RENDER_STREAK pages all needed a render (a figure on every page). A wrong guess costs
 * a render minus a text pass and resets the streak; the result is the same either way. */
#define RENDER_STREAK 4

static int render_first(ingest_doc *d, ing_pagectx *pc, cairo_surface_t **s) {
    if (!ingest_figures_map(pc) && d->render_streak < RENDER_STREAK) return 0;
    *s = ingest_render(pc->pp, pc->w, pc->h, d->o.render_dpi);
    return *s ? 0 : INGEST_ERR_NOMEM;
}

int ingest_doc_page(ingest_doc *d, int32_t number, ingest_page **out, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!out) return INGEST_ERR_ARG;
    *out = NULL;
    if (!d || number < 1 || number > d->n_pages) {
        snprintf(err, errlen, "%s: no page %d", d ? d->name : "(null)", number);
        return INGEST_ERR_ARG;
    }
    PopplerPage *pp = poppler_document_get_page(d->pd, number - 1);
    if (!pp) {
        snprintf(err, errlen, "%s: page %d cannot be read", d->name, number);
        return INGEST_ERR_NOT_PDF;
    }
    ingest_page *pg = calloc(1, sizeof *pg);
    ing_pagectx pc = {0};
    if (!pg) {
        g_object_unref(pp);
        snprintf(err, errlen, "%s: out of memory", d->name);
        return INGEST_ERR_NOMEM;
    }
    pc.pp = pp;
    pc.scratch = &d->scratch;
    poppler_page_get_size(pp, &pc.w, &pc.h);
    pg->number = number;
    pg->width_pt = (float)pc.w;
    pg->height_pt = (float)pc.h;
    cairo_surface_t *render = NULL;
    int rc = render_first(d, &pc, &render), ocr_rc = 0;
    if (rc == 0) rc = ingest_layout_extract(&pc);
    if (rc == 0 && pc.n_chars > 0 && d->o.strip_furniture) ingest_furniture_strip(&d->furniture, &pc, number);
    if (rc == 0 && pc.n_chars == 0 && d->o.ocr) {
        char oerr[256] = "";
        ocr_rc = ingest_ocr_page(&d->ocr, d->o.tessdata, &pc, oerr, sizeof oerr);
        pg->ocr = ocr_rc == 0;
        if (ocr_rc == INGEST_ERR_OCR) snprintf(err, errlen, "%s: page %d: %s", d->name, number, oerr);
        else if (ocr_rc) rc = ocr_rc;
    }
    if (rc == 0) {
        ingest_layout_classify(&pc);
        rc = page_figures(d, &pc, pg->ocr, &render, pg);
    }
    if (rc == 0) rc = ingest_layout_order(&pc);
    if (rc == 0) rc = ingest_chunk_page(&pc, &d->o, pg->ocr, &d->next_order, pg);
    if (rc == 0) {
        if (number != d->last_page + 1) { free(d->last_heading); d->last_heading = NULL; }
        d->last_page = number;
        rc = ingest_sections_assign(d->outline, pg, &d->last_heading);
    }
    if (render) cairo_surface_destroy(render);
    ingest_pagectx_clear(&pc);
    g_object_unref(pp);
    if (rc) {
        ingest_page_free(pg);
        snprintf(err, errlen, "%s: page %d: out of memory", d->name, number);
        return rc;
    }
    *out = pg;
    return ocr_rc == INGEST_ERR_OCR ? INGEST_ERR_OCR : 0;
}
