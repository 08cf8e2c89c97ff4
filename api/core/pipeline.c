/* api/core/pipeline.c — ingest → store, one document transaction per PDF. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
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
    isolate_limits_default(&o->isolate);
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
                          .section = c->section,
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

/* Where pages come from: an ingest handle in this process, or an isolated child. */
typedef struct {
    ingest_doc *doc;
    isolate_doc *iso;
    int iso_rc;
    pipeline_progress_cb cb;
    void *user;
    int32_t done, pages;
    store_doc_meta meta;
} page_source;

static int source_page(page_source *src, int32_t n, ingest_page **p, char *err, size_t errlen) {
    if (src->iso) return isolate_doc_page(src->iso, n, p, &src->iso_rc, err, errlen);
    return ingest_doc_page(src->doc, n, p, err, errlen);
}

/* While waiting on the child: the caller's progress callback decides whether to go on. */
static int on_wait(void *user) {
    page_source *src = user;
    return src->cb ? src->cb(src->user, src->done, src->pages) : 0;
}

static int input_fail(store *s, page_source *src, const char *name, int32_t page, int irc,
                      const char *perr, pipeline_result *r, char *err, size_t errlen) {
    store_doc_abort(s);
    r->ingest_rc = irc;
    r->isolate_rc = src->iso_rc;
    if (strstr(perr, name) || !page) snprintf(err, errlen, "%s", perr);
    else snprintf(err, errlen, "%s: page %d: %s", name, page, perr[0] ? perr : "parse failed");
    return src->iso_rc == ISOLATE_ABORTED ? PIPELINE_ABORTED : PIPELINE_ERR_INPUT;
}

/* Everything after the source is open: one document transaction. */
static int run(store *s, page_source *src, const char *name, pipeline_result *r, char *err,
               size_t errlen) {
    int32_t pages = src->pages;
    int rc = store_doc_begin(s, &src->meta, &r->doc_id);
    if (rc == STORE_EXISTS) return PIPELINE_EXISTS;
    if (rc) return store_fail(s, name, r, rc, err, errlen);
    for (int32_t n = 1; n <= pages; n++) {
        ingest_page *p = NULL;
        char perr[512] = "";
        int irc = source_page(src, n, &p, perr, sizeof perr);
        if (irc != INGEST_OK && !(irc == INGEST_ERR_OCR && p)) {
            ingest_page_free(p);
            return input_fail(s, src, name, n, irc, perr, r, err, errlen);
        }
        rc = spool_page(s, p, r);
        ingest_page_free(p);
        if (rc) {
            store_doc_abort(s);
            return store_fail(s, name, r, rc, err, errlen);
        }
        src->done = n;
        if (src->cb && src->cb(src->user, n, pages)) {
            store_doc_abort(s);
            snprintf(err, errlen, "%s: aborted", name);
            return PIPELINE_ABORTED;
        }
    }
    char perr[512] = "";
    int irc = src->iso ? isolate_doc_finish(src->iso, &src->iso_rc, perr, sizeof perr) : 0;
    if (irc) return input_fail(s, src, name, 0, irc, perr, r, err, errlen);
    rc = store_doc_commit(s, &r->doc_id, &r->replaced_id);
    if (rc == STORE_EXISTS) return PIPELINE_EXISTS;
    if (rc) return store_fail(s, name, r, rc, err, errlen);
    return PIPELINE_OK;
}

/* In this process: ingest opens the document and names it (sha256, canonical path). */
static int open_local(page_source *src, const char *path, const void *data, size_t len,
                      const char *name, const pipeline_options *o, pipeline_result *r,
                      char *err, size_t errlen) {
    int irc = path ? ingest_doc_open(path, &o->ingest, &src->doc, err, errlen)
                   : ingest_doc_open_mem(data, len, name, &o->ingest, &src->doc, err, errlen);
    if (irc != INGEST_OK || !src->doc) {
        r->ingest_rc = irc ? irc : INGEST_ERR_ARG;
        if (!err[0]) snprintf(err, errlen, "%s: cannot open", name);
        return PIPELINE_ERR_INPUT;
    }
    snprintf(r->title, sizeof r->title, "%s", ingest_doc_title(src->doc) ? ingest_doc_title(src->doc) : "");
    src->pages = ingest_doc_page_count(src->doc);
    src->meta = (store_doc_meta){.sha256 = ingest_doc_sha256(src->doc), .path = ingest_doc_path(src->doc),
                                 .title = r->title, .pages = src->pages,
                                 .bytes = ingest_doc_bytes(src->doc)};
    if (!src->meta.path || !src->meta.path[0]) src->meta.path = name;
    return PIPELINE_OK;
}

/* In a child: this process names the document itself (the child's word is not trusted
 * for identity) and skips the child altogether when the bytes are already indexed. */
static int open_isolated(store *s, page_source *src, const char *path, const void *data,
                         size_t len, const char *name, const pipeline_options *o,
                         pipeline_result *r, char sha[65], char real[PATH_MAX], char *err,
                         size_t errlen) {
    struct stat st;
    int irc = path ? ingest_file_sha256(path, sha, err, errlen) : ingest_mem_sha256(data, len, sha);
    if (irc == 0 && path && (!realpath(path, real) || stat(real, &st))) {
        snprintf(err, errlen, "%s: cannot open: %s", name, strerror(errno));
        irc = INGEST_ERR_IO;
    }
    if (irc) {
        r->ingest_rc = irc;
        if (!err[0]) snprintf(err, errlen, "%s: out of memory", name);
        return PIPELINE_ERR_INPUT;
    }
    store_doc_row row;
    memset(&row, 0, sizeof row);
    int found = store_doc_get(s, sha, &row) == STORE_OK && !strcmp(row.sha256, sha);
    if (found) r->doc_id = row.id;
    store_doc_row_clear(&row);
    if (found) return PIPELINE_EXISTS;
    irc = isolate_doc_open(path, data, len, name, &o->ingest, &o->isolate, on_wait, src,
                           &src->iso, &src->iso_rc, err, errlen);
    if (irc != INGEST_OK) {
        r->ingest_rc = irc;
        r->isolate_rc = src->iso_rc;
        return src->iso_rc == ISOLATE_ABORTED ? PIPELINE_ABORTED : PIPELINE_ERR_INPUT;
    }
    snprintf(r->title, sizeof r->title, "%s", isolate_doc_title(src->iso));
    src->pages = isolate_doc_page_count(src->iso);
    src->meta = (store_doc_meta){.sha256 = sha, .path = path ? real : name, .title = r->title,
                                 .pages = src->pages,
                                 .bytes = path ? (int64_t)st.st_size : (int64_t)len};
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
    page_source src = {.cb = cb, .user = user};
    char sha[65], real[PATH_MAX];
    int rc = o->isolate.enabled
                 ? open_isolated(s, &src, path, data, len, name, o, r, sha, real, err, errlen)
                 : open_local(&src, path, data, len, name, o, r, err, errlen);
    if (rc == PIPELINE_OK) rc = run(s, &src, name, r, err, errlen);
    ingest_doc_free(src.doc);
    isolate_doc_free(src.iso);
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
