/* api/server/server_docs.c — the document routes: list, get, delete (with its kept
 * upload), and page renders with a highlighted box (drawn by api/core/render.c). */
#include "api/core/render.h"
#include "api/server/server_internal.h"
#include "index/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- documents ----------------------------------------------------------------------- */
static json_t *doc_json(const store_doc_row *d) {
    json_t *o = json_pack("{s:I,s:s,s:s,s:i,s:I,s:s,s:I,s:I,s:i,s:i}", "id", (json_int_t)d->id,
                          "sha256", d->sha256, "title", d->title ? d->title : "", "pages",
                          d->pages, "bytes", (json_int_t)d->bytes, "status",
                          d->status ? d->status : "", "added_at", (json_int_t)d->added_at,
                          "updated_at", (json_int_t)d->updated_at, "chunks", d->n_chunks,
                          "images", d->n_images);
    return o;
}

#define STORE_OR_500(st, c, r)                                                           \
    char err_[256];                                                                      \
    store *st = srv_coll_acquire((r)->coll, err_, sizeof err_);                          \
    if (!st) return srv_reply_error(c, r, 500, "store_unavailable", "%s", err_)

/* The document id in /documents/{id}/...: a positive integer, else 400. */
#define DOC_ID_OR_400(id, c, r)                                                          \
    int64_t id = srv_parse_id((r)->segs[2]);                                             \
    if (!id)                                                                             \
        return srv_reply_error(c, r, 400, "invalid_id",                                  \
                               "document id must be a positive integer")

enum MHD_Result srv_handle_doc_list(struct MHD_Connection *c, srv_req *r) {
    STORE_OR_500(st, c, r);
    store_doc_row *rows = NULL;
    int32_t n = 0;
    int rc = store_doc_list(st, &rows, &n);
    if (rc != STORE_OK) {
        enum MHD_Result ret = srv_reply_error(c, r, 500, "store_error", "%s", store_errmsg(st));
        srv_coll_release(r->coll, st);
        return ret;
    }
    srv_coll_release(r->coll, st);
    json_t *arr = json_array();
    for (int32_t i = 0; i < n; i++) json_array_append_new(arr, doc_json(&rows[i]));
    store_docs_free(rows, n);
    return srv_reply_json(c, r, 200, json_pack("{s:o,s:i}", "documents", arr, "count", n));
}

static int query_flag(struct MHD_Connection *c, const char *name) {
    const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
    return v && (!strcmp(v, "1") || !strcmp(v, "true"));
}

enum MHD_Result srv_handle_doc_get(struct MHD_Connection *c, srv_req *r) {
    DOC_ID_OR_400(id, c, r);
    STORE_OR_500(st, c, r);
    store_doc_row d;
    memset(&d, 0, sizeof d);
    int rc = store_doc_get_id(st, id, &d);
    if (rc != STORE_OK) {
        srv_coll_release(r->coll, st);
        store_doc_row_clear(&d);
        if (rc == STORE_ERR_NOTFOUND) return srv_reply_error(c, r, 404, "not_found", "no such document");
        return srv_reply_error(c, r, 500, "store_error", "store error %d", rc);
    }
    json_t *o = doc_json(&d);
    store_doc_row_clear(&d);
    store_page_row *pages = NULL;
    int32_t np = 0;
    if (store_pages_get(st, id, &pages, &np) == STORE_OK) {
        json_t *pa = json_array();
        for (int32_t i = 0; i < np; i++)
            json_array_append_new(pa, json_pack("{s:i,s:f,s:f,s:b}", "number", pages[i].number,
                                                "width_pt", (double)pages[i].width_pt, "height_pt",
                                                (double)pages[i].height_pt, "ocr", pages[i].ocr));
        json_object_set_new(o, "page_list", pa);
        free(pages);
    }
    if (query_flag(c, "chunks")) {
        store_chunk_row *ch = NULL;
        int32_t nc = 0;
        if (store_chunks_get(st, id, 0, &ch, &nc) == STORE_OK) {
            json_t *ca = json_array();
            for (int32_t i = 0; i < nc; i++)
                json_array_append_new(ca, json_pack("{s:I,s:i,s:s,s:o,s:I,s:s}", "id",
                                                    (json_int_t)ch[i].id, "page", ch[i].page,
                                                    "kind", store_chunk_kind_name(ch[i].kind),
                                                    "box", srv_box_json(&ch[i].box), "image_id",
                                                    (json_int_t)ch[i].image_id, "text",
                                                    ch[i].text ? ch[i].text : ""));
            json_object_set_new(o, "chunk_list", ca);
            store_chunks_free(ch, nc);
        }
    }
    srv_coll_release(r->coll, st);
    return srv_reply_json(c, r, 200, o);
}

/* A kept upload lives under DIR/files/; anything else (a CLI-indexed path) is the user's. */
static int is_kept_file(const srv_coll *coll, const char *path) {
    char pre[4200], real_dir[4096];
    snprintf(pre, sizeof pre, "%s/files", coll->dir);
    if (!realpath(pre, real_dir)) return 0;
    size_t l = strlen(real_dir);
    return path && !strncmp(path, real_dir, l) && path[l] == '/';
}

enum MHD_Result srv_handle_doc_delete(struct MHD_Connection *c, srv_req *r) {
    DOC_ID_OR_400(id, c, r);
    STORE_OR_500(st, c, r);
    store_doc_row d;
    memset(&d, 0, sizeof d);
    int rc = store_doc_get_id(st, id, &d);
    if (rc == STORE_OK) rc = store_doc_delete(st, id);
    srv_coll_release(r->coll, st);
    if (rc == STORE_OK && is_kept_file(r->coll, d.path)) srv_remove_kept(d.path);
    store_doc_row_clear(&d);
    if (rc == STORE_ERR_NOTFOUND) return srv_reply_error(c, r, 404, "not_found", "no such document");
    if (rc != STORE_OK) return srv_reply_error(c, r, 500, "store_error", "delete failed (%d)", rc);
    return srv_reply_json(c, r, 200, json_pack("{s:I,s:b}", "id", (json_int_t)id, "deleted", 1));
}

/* ---- page renders (api/core/render.c) -------------------------------------------------- */
static int parse_box(const char *s, float b[4]) {
    double d[4];
    char extra;
    if (sscanf(s, "%lf,%lf,%lf,%lf%c", &d[0], &d[1], &d[2], &d[3], &extra) != 4) return -1;
    for (int i = 0; i < 4; i++) b[i] = (float)d[i];
    /* an empty box would draw nothing: refuse it here, where the caller can fix the URL */
    return render_box_valid(b) == 0 && b[0] < b[2] && b[1] < b[3] ? 0 : -1;
}

enum MHD_Result srv_handle_page_png(struct MHD_Connection *c, srv_req *r) {
    srv_server *s = r->srv;
    DOC_ID_OR_400(id, c, r);
    char num[32];
    const char *pn = r->segs[4];
    size_t pl = strlen(pn);
    if (pl < 5 || pl > 12 || strcmp(pn + pl - 4, ".png"))
        return srv_reply_error(c, r, 404, "not_found", "page path must be /pages/N.png");
    memcpy(num, pn, pl - 4);
    num[pl - 4] = 0;
    int64_t page = srv_parse_id(num);
    if (!page || page > 100000) return srv_reply_error(c, r, 400, "invalid_page", "bad page number");
    float box[4];
    const char *bs = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "box");
    if (bs && parse_box(bs, box))
        return srv_reply_error(c, r, 400, "invalid_box",
                               "box must be x0,y0,x1,y1 in 0..1 with x0<x1 and y0<y1");
    int width = 800;
    const char *ws = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "width");
    if (ws) {
        int64_t v = srv_parse_id(ws);
        if (v < 16 || v > 2400)
            return srv_reply_error(c, r, 400, "invalid_width", "width must be 16..2400 pixels");
        width = (int)v;
    }
    STORE_OR_500(st, c, r);
    store_doc_row d;
    memset(&d, 0, sizeof d);
    int rc = store_doc_get_id(st, id, &d);
    char src[4200], serr[512];
    int have_src = rc == STORE_OK && d.pages >= page &&
                   render_source_pdf(st, d.path, d.sha256, src, sizeof src, serr, sizeof serr) == 0;
    srv_coll_release(r->coll, st);
    if (rc != STORE_OK) {
        store_doc_row_clear(&d);
        return srv_reply_error(c, r, 404, "not_found", "no such document");
    }
    if (page > d.pages) {
        store_doc_row_clear(&d);
        return srv_reply_error(c, r, 404, "not_found", "document has %d pages", d.pages);
    }
    if (!have_src) {
        store_doc_row_clear(&d);
        return srv_reply_error(c, r, 409, "no_source", "the document's PDF is not kept on the server");
    }
    uint8_t *png = NULL;
    size_t len = 0;
    char err[512];
    pthread_mutex_lock(&s->render_mu);
    int rr = render_page_png(src, (int)page, bs ? box : NULL, bs ? 1 : 0, NULL, width, &png,
                             &len, err, sizeof err);
    pthread_mutex_unlock(&s->render_mu);
    store_doc_row_clear(&d);
    if (rr) return srv_reply_error(c, r, 409, "render_failed", "%s", err);
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, png, MHD_RESPMEM_MUST_FREE);
    if (!resp) { free(png); return MHD_NO; }
    MHD_add_response_header(resp, "Content-Type", "image/png");
    return srv_reply_response(c, r, 200, resp);
}
