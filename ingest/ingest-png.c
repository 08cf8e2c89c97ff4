/* PNG encoder for figure crops (8-bit RGB, no interlace), written straight from the
 * BGRA render with zlib. cairo_surface_write_to_png goes through libpng's adaptive
 * filtering at zlib's default level, which was ~45% of all ingest time on chart pages;
 * crops are flat-coloured charts and photos, so one cheap filter per row and a fast
 * deflate level give files of similar size several times faster. */
#include "ingest/ingest-internal.h"
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* Levels 1–3 cost about the same, a third of level 6; files are 0–25% larger than
 * cairo's. Z_RLE was a bit faster and smaller on charts but 38% larger on photos. */
#define PNG_ZLEVEL 3

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* chunk length and type at p, data already at p + 8; appends the CRC; returns total size */
static size_t finish_chunk(uint8_t *p, const char type[4], size_t n) {
    put32(p, (uint32_t)n);
    memcpy(p + 4, type, 4);
    put32(p + 8 + n, (uint32_t)crc32(crc32(0L, Z_NULL, 0), p + 4, (uInt)(n + 4)));
    return n + 12;
}

/* One row, filtered: Up when the row above is mostly the same (flat areas, vertical
 * structure), else Sub (horizontal runs, gradients). The choice is a cheap sum of
 * absolute residuals over a sample of the row, like libpng's heuristic but on 2 of 5
 * filters. */
static void filter_row(uint8_t *dst, const uint8_t *cur, const uint8_t *prev, int n) {
    if (!prev) {
        dst[0] = 1; /* Sub */
        memcpy(dst + 1, cur, 3);
        for (int i = 3; i < n; i++) dst[1 + i] = (uint8_t)(cur[i] - cur[i - 3]);
        return;
    }
    unsigned su = 0, ss = 0;
    for (int i = 3; i < n; i += 7) {
        su += (unsigned)abs((int8_t)(uint8_t)(cur[i] - prev[i]));
        ss += (unsigned)abs((int8_t)(uint8_t)(cur[i] - cur[i - 3]));
    }
    if (su <= ss) {
        dst[0] = 2; /* Up */
        for (int i = 0; i < n; i++) dst[1 + i] = (uint8_t)(cur[i] - prev[i]);
    } else {
        dst[0] = 1;
        memcpy(dst + 1, cur, 3);
        for (int i = 3; i < n; i++) dst[1 + i] = (uint8_t)(cur[i] - cur[i - 3]);
    }
}

int ingest_png_encode(const unsigned char *bgra, int w, int h, int stride, uint8_t **out, size_t *len) {
    *out = NULL;
    *len = 0;
    if (w < 1 || h < 1) return INGEST_ERR_ARG;
    size_t rowlen = (size_t)w * 3;
    z_stream z = {0};
    if (deflateInit(&z, PNG_ZLEVEL) != Z_OK) return INGEST_ERR_NOMEM;
    size_t bound = deflateBound(&z, (uLong)((rowlen + 1) * (size_t)h));
    /* signature, IHDR (25), IDAT header + CRC (12), IEND (12) */
    size_t cap = 8 + 25 + 12 + bound + 12;
    uint8_t *buf = malloc(cap);
    uint8_t *rows = malloc(2 * rowlen + rowlen + 1); /* current RGB, previous RGB, filtered */
    if (!buf || !rows) {
        deflateEnd(&z);
        free(buf);
        free(rows);
        return INGEST_ERR_NOMEM;
    }
    uint8_t *cur = rows, *prev = rows + rowlen, *filt = rows + 2 * rowlen;
    memcpy(buf, "\x89PNG\r\n\x1a\n", 8);
    size_t pos = 8;
    uint8_t *ih = buf + pos + 8;
    put32(ih, (uint32_t)w);
    put32(ih + 4, (uint32_t)h);
    ih[8] = 8;  /* bit depth */
    ih[9] = 2;  /* RGB */
    ih[10] = 0; /* deflate */
    ih[11] = 0; /* adaptive filtering */
    ih[12] = 0; /* no interlace */
    pos += finish_chunk(buf + pos, "IHDR", 13);
    size_t idat = pos;
    z.next_out = buf + idat + 8;
    z.avail_out = (uInt)bound;
    int zrc = Z_OK;
    for (int y = 0; y < h && zrc == Z_OK; y++) {
        const unsigned char *s = bgra + (size_t)y * stride;
        for (int x = 0; x < w; x++) { /* BGRA in memory (opaque render) → RGB */
            cur[3 * x] = s[4 * x + 2];
            cur[3 * x + 1] = s[4 * x + 1];
            cur[3 * x + 2] = s[4 * x];
        }
        filter_row(filt, cur, y ? prev : NULL, (int)rowlen);
        z.next_in = filt;
        z.avail_in = (uInt)(rowlen + 1);
        zrc = deflate(&z, y == h - 1 ? Z_FINISH : Z_NO_FLUSH);
        if (zrc == Z_STREAM_END) break;
        uint8_t *t = cur;
        cur = prev;
        prev = t;
    }
    size_t zlen = z.total_out;
    deflateEnd(&z);
    free(rows);
    if (zrc != Z_STREAM_END) { /* cannot happen with deflateBound room; fail cleanly */
        free(buf);
        return INGEST_ERR_NOMEM;
    }
    pos += finish_chunk(buf + idat, "IDAT", zlen);
    pos += finish_chunk(buf + pos, "IEND", 0);
    uint8_t *shrunk = realloc(buf, pos);
    *out = shrunk ? shrunk : buf;
    *len = pos;
    return 0;
}
