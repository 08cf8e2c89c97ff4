/* api/core/locate — region localization (engine/vpe) over a stored document, shared by
 * `mmrag locate` / `mmrag eval vpe` (api/cli/cli_locate.c), POST /v1/locate
 * (api/server/server_locate.c) and mmrag_locate() (api/lib/lib.c).
 *
 *   locate_result lr;
 *   vpe_options o; vpe_options_default(&o); o.page = 0; o.threshold = 0.75f;
 *   int rc = api_locate(st, v, doc_id, "the revenue chart", &o, &lr, err, sizeof err);
 *   if (rc == LOCATE_OK && lr.r.found) ... lr.r.page, lr.r.box, lr.is_image, lr.r.ref_id ...
 *
 * The engine knows nothing about the store; this file turns a document's images and
 * chunks into vpe_region candidates (with caption and nearby text) and runs vpe_locate.
 * Threads: no state of its own; safe wherever the store handle and the vpe are. */
#ifndef MMRAG_API_LOCATE_H
#define MMRAG_API_LOCATE_H
#include <stddef.h>
#include <stdint.h>
#include "engine/vpe.h"
#include "index/store.h"

/* VPE candidate regions of document doc (page 0 = all) gathered from the store: images
 * (caption + nearby text), figure areas without an image, captions, tables (with their
 * caption), headings, text blocks. r[i].ref_id is an image id when is_image[i], else a
 * chunk id. */
typedef struct locate_cands {
    vpe_region *r;
    uint8_t *is_image;
    int32_t n;
    void *priv;              /* the store rows and built texts r[] points into */
} locate_cands;

/* Returns STORE_OK, or a store status (message in store_errmsg(s)). Caller frees with
 * locate_cands_free() (also after a failure). */
int locate_cands_build(store *s, int64_t doc, int32_t page, locate_cands *out);
void locate_cands_free(locate_cands *c);   /* NULL and zeroed structs are no-ops */

enum {
    LOCATE_OK = 0,
    LOCATE_ERR_ARG = -1,        /* empty description, page beyond the document */
    LOCATE_ERR_NOTFOUND = -2,   /* no such document */
    LOCATE_ERR_STORE = -3,      /* the database failed */
    LOCATE_ERR_VPE = -4,        /* the localizer failed (text encoder) */
    LOCATE_ERR_NOMEM = -5,
    LOCATE_ERR_NOMODEL = -6,    /* v is NULL (no text model); the input was valid */
};

typedef struct {
    vpe_result r;            /* r.found, r.confidence; when r.index >= 0 the best region */
    int32_t is_image;        /* r.ref_id is an image id (1) or a chunk id (0) */
    int32_t doc_pages;       /* pages of the document */
} locate_result;

/* Locate `description` in document doc of s with v (o: page, threshold; NULL = defaults).
 * "Not found" is LOCATE_OK with out->r.found == 0. v may be NULL when the caller has no
 * text model: the request is still checked (document, page) so that bad input reports as
 * such, then LOCATE_ERR_NOMODEL. Returns a LOCATE_* status; on error a one-line message
 * prefixed "locate: " (or the store's/vpe's own) is in err. */
int api_locate(store *s, vpe *v, int64_t doc, const char *description, const vpe_options *o,
               locate_result *out, char *err, size_t errlen);
#endif
