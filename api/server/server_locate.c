/* api/server/server_locate.c — POST /v1/locate: the region of a document page that a
 * description points at (engine/vpe through api/core/locate.h), in the caller's
 * collection only.
 *
 *   {"doc": 3, "page": 2, "description": "the bar chart below the revenue heading",
 *    "threshold": 0.75}
 *   -> {"found": true, "confidence": 0.91, "page": 2, "box": [x0,y0,x1,y1], "kind": "figure",
 *       "ref_id": 17, "ref_type": "image", "why": "...",
 *       "render": "/v1/documents/3/pages/2.png?box=..."}
 *
 * Below the threshold "found" is false; the best guess (when any candidate satisfied the
 * hard constraints) is still reported so a client can show it as such; with no candidate
 * at all (nothing on the asked page) the region fields are absent. */
#include "api/server/server_internal.h"
#include "api/core/locate.h"
#include "index/store.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    int64_t doc, page;
    const char *description;
    double threshold;
} locate_req;

static int parse_locate(json_t *body, locate_req *lq, char *msg, size_t ml) {
    json_t *d = json_object_get(body, "doc");
    if (!d || !json_is_integer(d) || json_integer_value(d) < 1 ||
        json_integer_value(d) > (json_int_t)1 << 53) {
        snprintf(msg, ml, "\"doc\" (a positive integer document id) is required");
        return -1;
    }
    lq->doc = json_integer_value(d);
    lq->threshold = 0.75;
    return srv_json_text(body, "description", &lq->description, msg, ml) ||
                   srv_json_int(body, "page", 1, 1000000, &lq->page, msg, ml) ||
                   srv_json_num(body, "threshold", 0, 1, &lq->threshold, msg, ml)
               ? -1
               : 0;
}

/* The page render URL with the box (left out if rounding makes it empty, since the
 * render route refuses empty boxes). */
static json_t *render_url(int64_t doc, int32_t page, const double b[4]) {
    char url[256];
    if (b[0] < b[2] && b[1] < b[3])
        snprintf(url, sizeof url, "/v1/documents/%lld/pages/%d.png?box=%.4f,%.4f,%.4f,%.4f",
                 (long long)doc, page, b[0], b[1], b[2], b[3]);
    else
        snprintf(url, sizeof url, "/v1/documents/%lld/pages/%d.png", (long long)doc, page);
    return json_string(url);
}

/* A JSON string of t, dropping a UTF-8 sequence cut off by a fixed-size buffer. */
static json_t *json_text(const char *t, size_t cap) {
    size_t n = strnlen(t, cap);
    json_t *j = json_stringn(t, n);
    for (int k = 0; !j && k < 3 && n > 0; k++) j = json_stringn(t, --n);
    return j ? j : json_string("");
}

static json_t *locate_json(const locate_req *lq, const locate_result *lr) {
    const vpe_result *v = &lr->r;
    json_t *o = json_pack("{s:b,s:f,s:I,s:f,s:o}", "found", v->found, "confidence",
                          (double)v->confidence, "doc", (json_int_t)lq->doc, "threshold",
                          lq->threshold, "why", json_text(v->why, sizeof v->why));
    if (!o || v->index < 0) return o;   /* no candidate at all: no region fields */
    double b[4];   /* clamped to the page, 4 decimals: the same box in "box" and "render" */
    for (int i = 0; i < 4; i++) b[i] = round(fmin(1.0, fmax(0.0, v->box[i])) * 1e4) / 1e4;
    json_object_set_new(o, "page", json_integer(v->page));
    json_object_set_new(o, "box", json_pack("[f,f,f,f]", b[0], b[1], b[2], b[3]));
    json_object_set_new(o, "kind", json_string(vpe_kind_name(v->kind)));
    json_object_set_new(o, "ref_id", json_integer(v->ref_id));
    json_object_set_new(o, "ref_type", json_string(lr->is_image ? "image" : "chunk"));
    json_object_set_new(o, "render", render_url(lq->doc, v->page, b));
    return o;
}

enum MHD_Result srv_handle_locate(struct MHD_Connection *c, srv_req *r) {
    enum MHD_Result ret;
    json_t *body = srv_body_object(c, r, &ret);
    if (!body) return ret;
    locate_req lq = {0};
    char msg[256];
    if (parse_locate(body, &lq, msg, sizeof msg)) {
        json_decref(body);
        return srv_reply_error(c, r, 400, "invalid_request", "%s", msg);
    }
    const char *why = NULL;
    vpe *v = srv_query_vpe(r->srv, &why);   /* NULL: answered 503 after the input checks */
    char err[512];
    store *st = srv_coll_acquire(r->coll, err, sizeof err);   /* the key's collection only */
    if (!st) {
        json_decref(body);
        return srv_reply_error(c, r, 500, "store_unavailable", "%s", err);
    }
    vpe_options o;
    vpe_options_default(&o);
    o.page = (int32_t)lq.page;
    o.threshold = (float)lq.threshold;
    locate_result lr;
    int rc = api_locate(st, v, lq.doc, lq.description, &o, &lr, err, sizeof err);
    srv_coll_release(r->coll, st);
    if (rc != LOCATE_OK) {
        json_decref(body);
        if (rc == LOCATE_ERR_NOTFOUND) return srv_reply_error(c, r, 404, "not_found", "no such document");
        if (rc == LOCATE_ERR_ARG) return srv_reply_error(c, r, 400, "invalid_request", "%s", err);
        if (rc == LOCATE_ERR_NOMODEL)
            return srv_reply_error(c, r, 503, "unavailable",
                                   "region localization needs the text model: %s", why);
        return srv_reply_error(c, r, 500, "locate_failed", "%s", err);
    }
    json_t *o_json = locate_json(&lq, &lr);   /* lq.description points into body */
    json_decref(body);
    if (!o_json) return srv_reply_error(c, r, 500, "internal", "out of memory");
    return srv_reply_json(c, r, 200, o_json);
}
