/* index/store_lines.c — the chunks.lines blob: each chunk's text lines with their page
 * boxes, packed as fixed 24-byte little-endian records (layout in store.h).
 *
 * Design notes:
 *   1. The byte order is written out by hand, not memcpy'd from the struct, so a
 *      collection moves between machines and a padded or reordered struct cannot leak
 *      into the file.
 *   2. The blob is checked on every read against the chunk's text: a damaged blob reads
 *      as "no lines" (what an old collection gives), never as ranges a caller would use
 *      to index past the end of the text. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "index/store_int.h"

static void put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_f32(uint8_t *p, float f) {
    uint32_t v;
    memcpy(&v, &f, sizeof v);
    put_u32(p, v);
}

static float get_f32(const uint8_t *p) {
    uint32_t v = get_u32(p);
    float f;
    memcpy(&f, &v, sizeof f);
    return f;
}

int store_lines_valid(const store_line *l, int32_t n, size_t text_len) {
    uint64_t end = 0;
    for (int32_t i = 0; i < n; i++) {
        uint64_t off = l[i].off, stop = off + l[i].len;
        if (off < end || stop > text_len) return 0;
        if (!isfinite(l[i].box.x0) || !isfinite(l[i].box.y0) || !isfinite(l[i].box.x1) ||
            !isfinite(l[i].box.y1))
            return 0;
        end = stop;
    }
    return 1;
}

uint8_t *store_lines_encode(const store_line *l, int32_t n) {
    uint8_t *blob = malloc((size_t)(n > 0 ? n : 1) * STORE_LINE_BYTES);
    if (!blob) return NULL;
    for (int32_t i = 0; i < n; i++) {
        uint8_t *p = blob + (size_t)i * STORE_LINE_BYTES;
        put_u32(p, l[i].off);
        put_u32(p + 4, l[i].len);
        put_f32(p + 8, l[i].box.x0);
        put_f32(p + 12, l[i].box.y0);
        put_f32(p + 16, l[i].box.x1);
        put_f32(p + 20, l[i].box.y1);
    }
    return blob;
}

/* A damaged blob reads as no lines: design note 2. */
int store_lines_decode(const uint8_t *blob, size_t bytes, size_t text_len, store_line **out,
                       int32_t *n) {
    if (!blob || !bytes || bytes % STORE_LINE_BYTES || bytes / STORE_LINE_BYTES > INT32_MAX)
        return STORE_OK;
    int32_t cnt = (int32_t)(bytes / STORE_LINE_BYTES);
    store_line *l = malloc((size_t)cnt * sizeof *l);
    if (!l) return STORE_ERR_NOMEM;
    for (int32_t i = 0; i < cnt; i++) {
        const uint8_t *p = blob + (size_t)i * STORE_LINE_BYTES;
        l[i] = (store_line){get_u32(p), get_u32(p + 4),
                            {get_f32(p + 8), get_f32(p + 12), get_f32(p + 16), get_f32(p + 20)}};
    }
    if (!store_lines_valid(l, cnt, text_len)) {
        free(l);
        return STORE_OK;
    }
    *out = l;
    *n = cnt;
    return STORE_OK;
}

int store_chunk_lines(store *s, int64_t chunk_id, store_line **out, int32_t *n) {
    STORE_ROUTE_PG(s, pg_chunk_lines(s, chunk_id, out, n));
    if (!s || !out || !n) return STORE_ERR_ARG;
    *out = NULL;
    *n = 0;
    STORE_LOCK(s);
    sqlite3_stmt *st;
    /* length() of a BLOB counts bytes; of TEXT it would count characters */
    int rc = store_prepare(s, "SELECT lines, length(CAST(text AS BLOB)) FROM chunks WHERE id=?", &st);
    if (rc) goto out;
    sqlite3_bind_int64(st, 1, chunk_id);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        /* only a BLOB holds lines: NULL (an old row) or any other type reads as none */
        const uint8_t *blob = sqlite3_column_type(st, 0) == SQLITE_BLOB ? sqlite3_column_blob(st, 0) : NULL;
        size_t bytes = (size_t)sqlite3_column_bytes(st, 0);
        rc = store_lines_decode(blob, bytes, (size_t)sqlite3_column_int64(st, 1), out, n);
        if (rc) rc = store_set_err(s, rc, "out of memory");
    } else if (step == SQLITE_DONE) {
        rc = store_set_err(s, STORE_ERR_NOTFOUND, "no chunk with id %lld", (long long)chunk_id);
    } else {
        rc = store_sql_err(s, "read chunk lines");
    }
    sqlite3_finalize(st);
out:
    STORE_UNLOCK(s);
    return rc;
}
