/* Fuzz target: one PDF through our ingest (ingest/: Poppler parse, layout, chunking,
 * figures, outline sections), in process, from memory. Property: a document opens or
 * gives a message; its first pages (at most 2) parse or give a message, and a parsed page
 * is consistent (its number, finite boxes, chunk text present, anchors in range). OCR is
 * off: Tesseract's own code is not ours to fuzz and costs seconds per page. */
#include <math.h>
#include "tests/fuzz/fuzz.h"
#include "ingest/ingest.h"

static int finite_box(ingest_box b) {
    return isfinite(b.x0) && isfinite(b.y0) && isfinite(b.x1) && isfinite(b.y1);
}

static void check_page(const ingest_page *p, int32_t n) {
    FUZZ_ASSERT(p->number == n, "page %d numbered %d", n, p->number);
    for (int32_t i = 0; i < p->n_chunks; i++) {
        const ingest_chunk *c = &p->chunks[i];
        FUZZ_ASSERT(c->text && c->page == n, "chunk %d", i);
        FUZZ_ASSERT(finite_box(c->box), "chunk %d box", i);
        FUZZ_ASSERT(c->image_index < 0 || c->image_index < 1 << 20, "anchor %d", c->image_index);
    }
    for (int32_t i = 0; i < p->n_images; i++) {
        FUZZ_ASSERT(finite_box(p->images[i].box), "image %d box", i);
        FUZZ_ASSERT(p->images[i].caption_chunk < p->n_chunks, "image %d caption", i);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ingest_options o;
    ingest_options_default(&o);
    o.ocr = 0;
    o.render_dpi = 36;   /* figure detection still runs; rendering stays cheap */
    ingest_doc *d = NULL;
    char err[512] = "";
    if (ingest_doc_open_mem(data, size, "fuzz.pdf", &o, &d, err, sizeof err)) {
        FUZZ_ASSERT(!d && err[0], "a refused document needs a message");
        return 0;
    }
    int32_t pages = ingest_doc_page_count(d);
    for (int32_t n = 1; n <= pages && n <= 2; n++) {
        ingest_page *p = NULL;
        err[0] = 0;
        if (ingest_doc_page(d, n, &p, err, sizeof err) == 0) {
            FUZZ_ASSERT(p != NULL, "page %d", n);
            check_page(p, n);
        } else {
            FUZZ_ASSERT(!p && err[0], "a refused page needs a message");
        }
        ingest_page_free(p);
    }
    ingest_doc_free(d);
    return 0;
}
