/* api/core/isolate_wire.c — encode a parsed page for the pipe (child) and decode it with
 * every field checked (parent); the format is described in isolate_wire.h.
 *
 * Design notes:
 *  1. The encoder never fails half-way: allocation failure sets wire_buf.oom and the child
 *     reports it instead of sending a truncated record.
 *  2. The decoder allocates only after a count has been checked against the bytes left in
 *     the record, so a lying count cannot make the parent allocate more than the child
 *     actually sent. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "api/core/isolate_wire.h"

/* ---- encoding ------------------------------------------------------------------------ */
void wire_buf_free(wire_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

static void put(wire_buf *b, const void *v, size_t n) {
    if (b->oom) return;
    if (b->len + n > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < b->len + n) nc *= 2;
        uint8_t *np = realloc(b->p, nc);
        if (!np) { b->oom = 1; return; }
        b->p = np;
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->len, v, n);
    b->len += n;
}

void wire_put_i32(wire_buf *b, int32_t v) { put(b, &v, 4); }
void wire_put_u32(wire_buf *b, uint32_t v) { put(b, &v, 4); }
static void put_f32(wire_buf *b, float v) { put(b, &v, 4); }
static void put_u64(wire_buf *b, uint64_t v) { put(b, &v, 8); }

void wire_put_str(wire_buf *b, const void *s, size_t n) {
    wire_put_u32(b, (uint32_t)n);
    put(b, s, n);
}

static void put_box(wire_buf *b, ingest_box x) {
    put_f32(b, x.x0);
    put_f32(b, x.y0);
    put_f32(b, x.x1);
    put_f32(b, x.y1);
}

size_t wire_begin_record(wire_buf *b, uint32_t type) {
    size_t at = b->len;
    wire_put_u32(b, type);
    wire_put_u32(b, 0);   /* length, patched by wire_end_record */
    return at;
}

void wire_end_record(wire_buf *b, size_t at) {
    if (b->oom) return;
    uint32_t n = (uint32_t)(b->len - at - 8);
    memcpy(b->p + at + 4, &n, 4);
}

void wire_page_encode(wire_buf *b, const ingest_page *p) {
    size_t at = wire_begin_record(b, WIRE_PAGE);
    wire_put_i32(b, p->number);
    put_f32(b, p->width_pt);
    put_f32(b, p->height_pt);
    wire_put_i32(b, p->ocr);
    wire_put_i32(b, p->n_images);
    wire_put_i32(b, p->n_chunks);
    for (int32_t i = 0; i < p->n_images; i++) {
        const ingest_image *im = &p->images[i];
        wire_put_i32(b, im->index);
        wire_put_i32(b, im->page);
        wire_put_i32(b, im->kind);
        put_box(b, im->box);
        wire_put_i32(b, im->width_px);
        wire_put_i32(b, im->height_px);
        put_u64(b, im->phash);
        wire_put_i32(b, im->caption_chunk);
        wire_put_str(b, im->png, im->png ? im->png_len : 0);
    }
    for (int32_t i = 0; i < p->n_chunks; i++) {
        const ingest_chunk *c = &p->chunks[i];
        wire_put_i32(b, c->order);
        wire_put_i32(b, c->page);
        wire_put_i32(b, c->kind);
        put_box(b, c->box);
        wire_put_i32(b, c->image_index);
        wire_put_str(b, c->text, c->text ? strlen(c->text) : 0);
        wire_put_i32(b, c->n_lines);
        for (int32_t k = 0; k < c->n_lines; k++) {
            wire_put_u32(b, c->lines[k].off);
            wire_put_u32(b, c->lines[k].len);
            put_box(b, c->lines[k].box);
        }
        wire_put_str(b, c->section, c->section ? strlen(c->section) : 0);
    }
    wire_end_record(b, at);
}

/* ---- decoding ------------------------------------------------------------------------ */
static const uint8_t *take(wire_cur *c, size_t n) {
    if (c->bad || c->left < n) { c->bad = 1; return NULL; }
    const uint8_t *p = c->p;
    c->p += n;
    c->left -= n;
    return p;
}

int32_t wire_get_i32(wire_cur *c) {
    int32_t v = 0;
    const uint8_t *p = take(c, 4);
    if (p) memcpy(&v, p, 4);
    return v;
}

uint32_t wire_get_u32(wire_cur *c) {
    uint32_t v = 0;
    const uint8_t *p = take(c, 4);
    if (p) memcpy(&v, p, 4);
    return v;
}

static float get_f32(wire_cur *c) {
    float v = 0;
    const uint8_t *p = take(c, 4);
    if (p) memcpy(&v, p, 4);
    return v;
}

static uint64_t get_u64(wire_cur *c) {
    uint64_t v = 0;
    const uint8_t *p = take(c, 8);
    if (p) memcpy(&v, p, 8);
    return v;
}

/* 1 when s[0..n) is well-formed UTF-8 (no overlongs, surrogates or values past U+10FFFF)
 * without NUL bytes. */
static int utf8_ok(const uint8_t *s, size_t n) {
    static const uint32_t min_cp[4] = {0, 0x80, 0x800, 0x10000};
    for (size_t i = 0; i < n;) {
        uint8_t b = s[i];
        if (b == 0) return 0;
        if (b < 0x80) { i++; continue; }
        size_t k = (b & 0xe0) == 0xc0 ? 1 : (b & 0xf0) == 0xe0 ? 2 : (b & 0xf8) == 0xf0 ? 3 : 0;
        if (!k || k >= n - i) return 0;   /* a bad lead byte, or cut short */
        uint32_t cp = b & (0x3fu >> k);
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3fu);
        }
        if (cp < min_cp[k] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
        i += k + 1;
    }
    return 1;
}

char *wire_get_str(wire_cur *c, size_t max) {
    uint32_t n = wire_get_u32(c);
    if (c->bad || n > max || n > c->left) { c->bad = 1; return NULL; }
    const uint8_t *p = take(c, n);
    if (!p || !utf8_ok(p, n)) { c->bad = 1; return NULL; }
    char *s = malloc((size_t)n + 1);
    if (!s) { c->bad = 1; return NULL; }
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

/* Boxes must be finite; values a rounding step outside 0..1 are clamped (the in-process
 * path stores ingest's boxes as they are, and they may touch the page edge). */
static float clamp01(float v) { return v < 0 ? 0 : v > 1 ? 1 : v; }

static ingest_box get_box(wire_cur *c) {
    ingest_box b;
    b.x0 = get_f32(c);
    b.y0 = get_f32(c);
    b.x1 = get_f32(c);
    b.y1 = get_f32(c);
    if (!(isfinite(b.x0) && isfinite(b.y0) && isfinite(b.x1) && isfinite(b.y1))) c->bad = 1;
    return (ingest_box){clamp01(b.x0), clamp01(b.y0), clamp01(b.x1), clamp01(b.y1)};
}

#define FAIL(...) do { snprintf(why, whylen, __VA_ARGS__); return -1; } while (0)

/* Smallest encodings, to bound counts by the bytes actually present. */
enum { IMAGE_MIN = 4 * 3 + 16 + 4 * 2 + 8 + 4 + 4, CHUNK_MIN = 4 * 3 + 16 + 4 + 4 + 4 + 4,
       LINE_SIZE = 8 + 16 };

static int decode_image(wire_cur *c, const ingest_page *pg, int32_t n_chunks, wire_expect *ex,
                        ingest_image *im, char *why, size_t whylen) {
    im->index = wire_get_i32(c);
    im->page = wire_get_i32(c);
    im->kind = wire_get_i32(c);
    im->box = get_box(c);
    im->width_px = wire_get_i32(c);
    im->height_px = wire_get_i32(c);
    im->phash = get_u64(c);
    im->caption_chunk = wire_get_i32(c);
    uint32_t n = wire_get_u32(c);
    if (c->bad) FAIL("image record truncated or a box not finite");
    if (im->index != ex->next_image) FAIL("image index %d, expected %d", im->index, ex->next_image);
    if (im->page != pg->number) FAIL("image on page %d inside page %d", im->page, pg->number);
    if (im->kind != INGEST_IMAGE_RASTER && im->kind != INGEST_IMAGE_VECTOR) FAIL("image kind %d", im->kind);
    if (im->width_px < 0 || im->width_px > 100000 || im->height_px < 0 || im->height_px > 100000)
        FAIL("image size %dx%d", im->width_px, im->height_px);
    if (im->caption_chunk < -1 || im->caption_chunk >= n_chunks) FAIL("caption chunk %d", im->caption_chunk);
    if (n > c->left) FAIL("image PNG of %u bytes past the record", n);
    const uint8_t *png = take(c, n);
    if (n && (n < 8 || memcmp(png, "\x89PNG\r\n\x1a\n", 8))) FAIL("image %d is not a PNG", im->index);
    if (n) {
        if (!(im->png = malloc(n))) FAIL("out of memory");
        memcpy(im->png, png, n);
        im->png_len = n;
    }
    ex->next_image++;
    return 0;
}

static int decode_lines(wire_cur *c, ingest_chunk *ch, size_t text_len, char *why, size_t whylen) {
    int32_t n = wire_get_i32(c);
    if (c->bad || n < 0 || (size_t)n > c->left / LINE_SIZE) FAIL("line count %d", n);
    if (n && !(ch->lines = calloc((size_t)n, sizeof *ch->lines))) FAIL("out of memory");
    ch->n_lines = n;
    uint64_t end = 0;
    for (int32_t k = 0; k < n; k++) {
        ingest_line *l = &ch->lines[k];
        l->off = wire_get_u32(c);
        l->len = wire_get_u32(c);
        l->box = get_box(c);
        if (c->bad) FAIL("line record truncated or a box not finite");
        if (l->off < end || (uint64_t)l->off + l->len > text_len) FAIL("line %d range %u+%u", k, l->off, l->len);
        end = (uint64_t)l->off + l->len;
    }
    return 0;
}

static int decode_chunk(wire_cur *c, const ingest_page *pg, wire_expect *ex, ingest_chunk *ch,
                        char *why, size_t whylen) {
    ch->order = wire_get_i32(c);
    ch->page = wire_get_i32(c);
    ch->kind = wire_get_i32(c);
    ch->box = get_box(c);
    ch->image_index = wire_get_i32(c);
    if (c->bad) FAIL("chunk record truncated or a box not finite");
    if (ch->order != ex->next_order) FAIL("chunk order %d, expected %d", ch->order, ex->next_order);
    if (ch->page != pg->number) FAIL("chunk on page %d inside page %d", ch->page, pg->number);
    if (ch->kind < INGEST_CHUNK_TEXT || ch->kind > INGEST_CHUNK_HEADING) FAIL("chunk kind %d", ch->kind);
    if (ch->image_index < -1 || ch->image_index >= ex->next_image) FAIL("chunk anchored to image %d", ch->image_index);
    ch->text = wire_get_str(c, WIRE_MAX_RECORD);
    if (!ch->text) FAIL("chunk %d text truncated or not UTF-8", ch->order);
    if (decode_lines(c, ch, strlen(ch->text), why, whylen)) return -1;
    ch->section = wire_get_str(c, WIRE_MAX_SECTION);
    if (!ch->section) FAIL("chunk %d section truncated, too long or not UTF-8", ch->order);
    ex->next_order++;
    return 0;
}

static int decode_body(wire_cur *c, ingest_page *pg, wire_expect *ex, char *why, size_t whylen) {
    pg->number = wire_get_i32(c);
    pg->width_pt = get_f32(c);
    pg->height_pt = get_f32(c);
    pg->ocr = wire_get_i32(c);
    int32_t ni = wire_get_i32(c), nc = wire_get_i32(c);
    if (c->bad) FAIL("page header truncated");
    if (pg->number != ex->page) FAIL("page %d, expected %d", pg->number, ex->page);
    if (!(pg->width_pt > 0 && pg->width_pt <= 1e6f && pg->height_pt > 0 && pg->height_pt <= 1e6f))
        FAIL("page size %gx%g pt", (double)pg->width_pt, (double)pg->height_pt);
    if (pg->ocr != 0 && pg->ocr != 1) FAIL("ocr flag %d", pg->ocr);
    if (ni < 0 || (size_t)ni > c->left / IMAGE_MIN) FAIL("image count %d", ni);
    if (nc < 0 || (size_t)nc > (c->left - (size_t)ni * IMAGE_MIN) / CHUNK_MIN) FAIL("chunk count %d", nc);
    if (ni && !(pg->images = calloc((size_t)ni, sizeof *pg->images))) FAIL("out of memory");
    for (int32_t i = 0; i < ni; i++) {
        pg->n_images = i + 1;
        if (decode_image(c, pg, nc, ex, &pg->images[i], why, whylen)) return -1;
    }
    if (nc && !(pg->chunks = calloc((size_t)nc, sizeof *pg->chunks))) FAIL("out of memory");
    for (int32_t i = 0; i < nc; i++) {
        pg->n_chunks = i + 1;
        if (decode_chunk(c, pg, ex, &pg->chunks[i], why, whylen)) return -1;
    }
    if (c->left) FAIL("%zu stray bytes after the page", c->left);
    return 0;
}

int wire_page_decode(const uint8_t *payload, size_t len, wire_expect *ex, ingest_page **out,
                     char *why, size_t whylen) {
    *out = NULL;
    ingest_page *pg = calloc(1, sizeof *pg);
    if (!pg) { snprintf(why, whylen, "out of memory"); return -1; }
    wire_cur c = {payload, len, 0};
    wire_expect saved = *ex;
    if (decode_body(&c, pg, ex, why, whylen)) {
        *ex = saved;
        ingest_page_free(pg);
        return -1;
    }
    ex->page++;
    *out = pg;
    return 0;
}
