/* api/core/pipeline.c — ingest → store, one document transaction per PDF. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "api/core/pipeline.h"

/* ingest and store number chunk and image kinds the same way; keep it so. */
_Static_assert((int)INGEST_CHUNK_TEXT == (int)STORE_KIND_TEXT && (int)INGEST_CHUNK_CAPTION == (int)STORE_KIND_CAPTION &&
               (int)INGEST_CHUNK_FIGURE == (int)STORE_KIND_FIGURE && (int)INGEST_CHUNK_TABLE == (int)STORE_KIND_TABLE &&
               (int)INGEST_CHUNK_OCR == (int)STORE_KIND_OCR && (int)INGEST_CHUNK_HEADING == (int)STORE_KIND_HEADING,
               "chunk kinds differ between ingest and store");
_Static_assert((int)INGEST_IMAGE_RASTER == (int)STORE_IMAGE_RASTER && (int)INGEST_IMAGE_VECTOR == (int)STORE_IMAGE_VECTOR,
               "image kinds differ between ingest and store");

void pipeline_options_default(pipeline_options *o) {
    memset(o, 0, sizeof *o);
    ingest_options_default(&o->ingest);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static store_box to_box(ingest_box b) { return (store_box){b.x0, b.y0, b.x1, b.y1}; }

/* A store copy of the chunk's lines (malloc'd), or NULL when it has none. The two line
 * types are distinct, so they are copied rather than cast. Lines are optional (rows of
 * older collections have none and readers handle that), so out of memory here stores
 * the chunk without them instead of failing the document. */
static store_line *to_lines(const ingest_chunk *c) {
    store_line *l = c->n_lines > 0 ? malloc((size_t)c->n_lines * sizeof *l) : NULL;
    for (int32_t i = 0; l && i < c->n_lines; i++)
        l[i] = (store_line){c->lines[i].off, c->lines[i].len, to_box(c->lines[i].box)};
    return l;
}

/* Spool one parsed page into the open document. */
static int spool_page(store *s, const ingest_page *p, pipeline_result *r) {
    store_page pg = {p->number, p->width_pt, p->height_pt, p->ocr};
    int rc = store_page_add(s, &pg);
    for (int32_t i = 0; !rc && i < p->n_images; i++) {
        const ingest_image *im = &p->images[i];
        int32_t cap = im->caption_chunk;
        store_image si = {
            .idx = im->index, .page = im->page, .kind = im->kind, .box = to_box(im->box),
            .width_px = im->width_px, .height_px = im->height_px, .png = im->png,
            .png_len = im->png_len, .phash = im->phash,
            .caption_ord = cap >= 0 && cap < p->n_chunks ? p->chunks[cap].order : -1};
        rc = store_image_add(s, &si);
    }
    for (int32_t i = 0; !rc && i < p->n_chunks; i++) {
        const ingest_chunk *c = &p->chunks[i];
        store_line *lines = to_lines(c);
        store_chunk sc = {.ord = c->order, .page = c->page, .kind = c->kind,
                          .box = to_box(c->box), .image_idx = c->image_index, .text = c->text,
                          .lines = lines, .n_lines = lines ? c->n_lines : 0};
        rc = store_chunk_add(s, &sc);
        free(lines);
    }
    if (!rc) {
        r->pages++;
        r->images += p->n_images;
        r->chunks += p->n_chunks;
        r->ocr_pages += p->ocr != 0;
    }
    return rc;
}

static int store_fail(store *s, const char *name, pipeline_result *r, int rc, char *err, size_t errlen) {
    r->store_rc = rc;
    snprintf(err, errlen, "%s: %s", name, store_errmsg(s));
    return PIPELINE_ERR_STORE;
}

/* Everything after the ingest handle is open. */
static int run(store *s, ingest_doc *d, const char *name, pipeline_progress_cb cb, void *user,
               pipeline_result *r, char *err, size_t errlen) {
    snprintf(r->title, sizeof r->title, "%s", ingest_doc_title(d) ? ingest_doc_title(d) : "");
    int32_t pages = ingest_doc_page_count(d);
    store_doc_meta m = {.sha256 = ingest_doc_sha256(d), .path = ingest_doc_path(d),
                        .title = r->title, .pages = pages, .bytes = ingest_doc_bytes(d)};
    if (!m.path || !m.path[0]) m.path = name;
    int rc = store_doc_begin(s, &m, &r->doc_id);
    if (rc == STORE_EXISTS) return PIPELINE_EXISTS;
    if (rc) return store_fail(s, name, r, rc, err, errlen);
    for (int32_t n = 1; n <= pages; n++) {
        ingest_page *p = NULL;
        char perr[512] = "";
        int irc = ingest_doc_page(d, n, &p, perr, sizeof perr);
        if (irc != INGEST_OK && !(irc == INGEST_ERR_OCR && p)) {
            store_doc_abort(s);
            ingest_page_free(p);
            r->ingest_rc = irc;
            if (strstr(perr, name)) snprintf(err, errlen, "%s", perr);
            else snprintf(err, errlen, "%s: page %d: %s", name, n, perr[0] ? perr : "parse failed");
            return PIPELINE_ERR_INPUT;
        }
        rc = spool_page(s, p, r);
        ingest_page_free(p);
        if (rc) {
            store_doc_abort(s);
            return store_fail(s, name, r, rc, err, errlen);
        }
        if (cb && cb(user, n, pages)) {
            store_doc_abort(s);
            snprintf(err, errlen, "%s: aborted", name);
            return PIPELINE_ABORTED;
        }
    }
    rc = store_doc_commit(s, &r->doc_id, &r->replaced_id);
    if (rc == STORE_EXISTS) return PIPELINE_EXISTS;
    if (rc) return store_fail(s, name, r, rc, err, errlen);
    return PIPELINE_OK;
}

static int index_any(store *s, const char *path, const void *data, size_t len, const char *name,
                     const pipeline_options *o, pipeline_progress_cb cb, void *user,
                     pipeline_result *res, char *err, size_t errlen) {
    pipeline_result local;
    pipeline_result *r = res ? res : &local;
    memset(r, 0, sizeof *r);
    char dummy[8];
    if (!err || !errlen) { err = dummy; errlen = sizeof dummy; }
    err[0] = 0;
    pipeline_options def;
    if (!o) { pipeline_options_default(&def); o = &def; }
    double t0 = now_s();
    ingest_doc *d = NULL;
    int irc = path ? ingest_doc_open(path, &o->ingest, &d, err, errlen)
                   : ingest_doc_open_mem(data, len, name, &o->ingest, &d, err, errlen);
    int rc;
    if (irc != INGEST_OK || !d) {
        r->ingest_rc = irc ? irc : INGEST_ERR_ARG;
        if (!err[0]) snprintf(err, errlen, "%s: cannot open", name);
        rc = PIPELINE_ERR_INPUT;
    } else {
        rc = run(s, d, name, cb, user, r, err, errlen);
    }
    ingest_doc_free(d);
    r->seconds = now_s() - t0;
    return rc;
}

int pipeline_index_file(store *s, const char *path, const pipeline_options *o,
                        pipeline_progress_cb cb, void *user, pipeline_result *res,
                        char *err, size_t errlen) {
    if (!path) path = "";
    return index_any(s, path, NULL, 0, path, o, cb, user, res, err, errlen);
}

int pipeline_index_mem(store *s, const void *data, size_t len, const char *name,
                       const pipeline_options *o, pipeline_progress_cb cb, void *user,
                       pipeline_result *res, char *err, size_t errlen) {
    if (!name) name = "upload";
    return index_any(s, NULL, data, len, name, o, cb, user, res, err, errlen);
}
