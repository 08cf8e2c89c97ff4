/* OCR for pages without a text layer: render at 300 dpi, hand the grey image to
 * Tesseract (C API), read text lines with their boxes and feed them to the same layout
 * path as text-layer fragments. One engine per document, created on the first OCR page.
 * Tesseract runs OpenMP inside; callers running parallel workers set OMP_THREAD_LIMIT=1. */
#include "ingest/ingest-internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tesseract/capi.h>

#define OCR_DPI 300.0

struct ing_ocr {
    TessBaseAPI *api;
    int failed;
};

void ingest_ocr_free(ing_ocr *e) {
    if (!e) return;
    if (e->api) {
        TessBaseAPIEnd(e->api);
        TessBaseAPIDelete(e->api);
    }
    free(e);
}

static int ocr_start(ing_ocr **eng, const char *tessdata, char *err, size_t errlen) {
    if (*eng) return (*eng)->failed ? INGEST_ERR_OCR : 0;
    ing_ocr *e = calloc(1, sizeof *e);
    if (!e) return INGEST_ERR_NOMEM;
    *eng = e;
    e->api = TessBaseAPICreate();
    if (!e->api || TessBaseAPIInit3(e->api, tessdata, "eng") != 0) {
        e->failed = 1;
        snprintf(err, errlen, "tesseract could not load 'eng' from %s",
                 tessdata ? tessdata : "its default tessdata");
        return INGEST_ERR_OCR;
    }
    return 0;
}

int ingest_ocr_page(ing_ocr **eng, const char *tessdata, ing_pagectx *pc, char *err, size_t errlen) {
    int rc = ocr_start(eng, tessdata, err, errlen);
    if (rc) return rc;
    TessBaseAPI *api = (*eng)->api;
    const double dpi = ingest_render_dpi(pc->w, pc->h, OCR_DPI);   /* lower for huge pages */
    cairo_surface_t *s = ingest_render(pc->pp, pc->w, pc->h, dpi);
    if (!s) return INGEST_ERR_NOMEM;
    int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
    int stride = cairo_image_surface_get_stride(s);
    const unsigned char *px = cairo_image_surface_get_data(s);
    unsigned char *grey = malloc((size_t)w * h);
    if (!grey) {
        cairo_surface_destroy(s);
        return INGEST_ERR_NOMEM;
    }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const unsigned char *p = px + (size_t)y * stride + 4 * x;
            grey[(size_t)y * w + x] = (unsigned char)((29 * p[0] + 150 * p[1] + 77 * p[2]) >> 8);
        }
    cairo_surface_destroy(s);
    TessBaseAPISetImage(api, grey, w, h, 1, w);
    TessBaseAPISetSourceResolution(api, (int)dpi);
    if (TessBaseAPIRecognize(api, NULL) != 0) {
        TessBaseAPIClear(api);
        free(grey);
        snprintf(err, errlen, "tesseract failed to recognize page %d", poppler_page_get_index(pc->pp) + 1);
        return INGEST_ERR_OCR;
    }
    TessResultIterator *it = TessBaseAPIGetIterator(api);
    const double k = 72.0 / dpi;
    if (it) {
        TessPageIterator *pit = TessResultIteratorGetPageIterator(it);
        do {
            int l, t, r, b;
            if (!TessPageIteratorBoundingBox(pit, RIL_TEXTLINE, &l, &t, &r, &b)) continue;
            char *text = TessResultIteratorGetUTF8Text(it, RIL_TEXTLINE);
            if (!text) continue;
            size_t n = strlen(text);
            while (n && (text[n - 1] == '\n' || text[n - 1] == ' ')) text[--n] = 0;
            ingest_box bx = {(float)(l * k), (float)(t * k), (float)(r * k), (float)(b * k)};
            /* a line box spans ascenders to descenders: about 1.2 font sizes */
            float size = (bx.y1 - bx.y0) / 1.2f;
            if (n) rc = ingest_layout_add_frag(pc, bx, size, text, (int)n);
            TessDeleteText(text);
        } while (rc == 0 && TessPageIteratorNext(pit, RIL_TEXTLINE));
        TessResultIteratorDelete(it);
    }
    TessBaseAPIClear(api);
    free(grey);
    return rc;
}
