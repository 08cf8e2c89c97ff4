/* api/core/render — one PDF page as a PNG with highlighted boxes: the page image behind
 * GET /v1/documents/{id}/pages/{n}.png (api/server/server_docs.c), `mmrag ask --show` and
 * `mmrag locate --show` (api/cli/cli_ask.c, api/cli/cli_locate.c).
 *
 *   float box[4] = {0.1f, 0.2f, 0.6f, 0.4f};            // x0,y0,x1,y1 in 0..1, top-left origin
 *   uint8_t *png; size_t len; char err[512];
 *   if (render_page_png("a.pdf", 2, box, 1, 800, &png, &len, err, sizeof err)) puts(err);
 *   else { ...; free(png); }
 *
 * A box is drawn as a translucent yellow fill (RENDER_FILL_*) under an opaque red border
 * RENDER_EDGE_PX wide (RENDER_EDGE_*), both centred on the box edges; a box of zero area
 * draws nothing. A call opens the PDF and keeps no state of its own; Poppler does not
 * promise thread safety, so the server serializes renders (render_mu) and other
 * multi-threaded callers should too. */
#ifndef MMRAG_API_RENDER_H
#define MMRAG_API_RENDER_H
#include <stddef.h>
#include <stdint.h>

#define RENDER_WIDTH_MIN 16
#define RENDER_WIDTH_MAX 4000
#define RENDER_HEIGHT_MAX 4000   /* taller pages are scaled down to this height */
#define RENDER_EDGE_PX 3
/* border colour as 8-bit RGB (what the PNG holds on a border pixel) */
#define RENDER_EDGE_R 230
#define RENDER_EDGE_G 26
#define RENDER_EDGE_B 26

/* Check one box: finite, inside 0..1, x0 <= x1 and y0 <= y1. Returns 0 or -1. */
int render_box_valid(const float box[4]);

/* Render page `page` (1-based) of the PDF at pdf_path, width_px pixels wide
 * (RENDER_WIDTH_MIN..RENDER_WIDTH_MAX), with n_boxes boxes (4 floats each; boxes may be
 * NULL when n_boxes is 0). labels, when not NULL, holds n_boxes strings (NULL entries
 * allowed) drawn at each box's top-left corner, e.g. "[2]". On success *png is a malloc'd
 * PNG of *len bytes and the return is 0; on failure -1 with a one-line message in err
 * (not a PDF, no such page, a bad box, out of memory). */
int render_page_png(const char *pdf_path, int page, const float *boxes, int n_boxes,
                    const char *const *labels, int width_px, uint8_t **png, size_t *len,
                    char *err, size_t errlen);

/* The same, written to out_path (replaced atomically: a temporary file in the same folder,
 * then rename). Returns 0 or -1 with the message in err. */
int render_page_png_file(const char *pdf_path, int page, const float *boxes, int n_boxes,
                         const char *const *labels, int width_px, const char *out_path,
                         char *err, size_t errlen);
/* A local path to the PDF of document d for rendering: its own path when readable here,
 * else (a shared collection indexed on another machine, or an upload) the bytes the store
 * keeps, written once to $XDG_CACHE_HOME/mmrag/files/<sha256>.pdf. Returns 0 with the path
 * in buf, or -1 with a message. */
struct store;
int render_source_pdf(struct store *s, const char *doc_path, const char *sha256, char *buf,
                      size_t len, char *err, size_t errlen);
#endif
