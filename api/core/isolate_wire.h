/* api/core/isolate_wire — the byte format an ingest worker (child process) uses to send a
 * parsed document back to its parent (api/core/isolate.c).
 *
 * The stream is a sequence of records, each an 8-byte header then its payload:
 *   u32 type, u32 length (payload bytes, at most WIRE_MAX_RECORD), payload.
 * Integers and floats are in host byte order (parent and child are the same binary on the
 * same machine). Strings and blobs are a u32 length then the bytes (no NUL).
 *
 *   WIRE_HELLO  u32 magic WIRE_MAGIC, u32 version WIRE_VERSION       (first record)
 *   WIRE_DOC    i32 pages, str title                                  (after a good open)
 *   WIRE_PAGE   one page (below), pages in order 1..pages
 *   WIRE_FAIL   i32 ingest_status, str message                        (open or page failed)
 *   WIRE_END    empty: every page was sent; the child exits 0 next
 *
 * A page: i32 number, f32 width_pt, f32 height_pt, i32 ocr, i32 n_images, i32 n_chunks,
 *   then n_images x (i32 index, i32 page, i32 kind, box, i32 width_px, i32 height_px,
 *                    u64 phash, i32 caption_chunk, blob png),
 *   then n_chunks x (i32 order, i32 page, i32 kind, box, i32 image_index, str text,
 *                    i32 n_lines, n_lines x (u32 off, u32 len, box));
 *   a box is four f32 (x0, y0, x1, y1).
 *
 * The parent treats every byte as hostile: wire_page_decode checks each count against the
 * bytes left, each kind and index against its range, boxes for finite values (clamped to 0..1),
 * line ranges against the text, the text for UTF-8 without NUL bytes, the page number,
 * chunk order and image index against what came before, and the PNG signature. */
#ifndef MMRAG_API_ISOLATE_WIRE_H
#define MMRAG_API_ISOLATE_WIRE_H
#include <stddef.h>
#include <stdint.h>
#include "ingest/ingest.h"

enum { WIRE_HELLO = 1, WIRE_DOC = 2, WIRE_PAGE = 3, WIRE_FAIL = 4, WIRE_END = 5 };
#define WIRE_MAGIC 0x4d4d5257u          /* "WRMM" read little-endian */
#define WIRE_VERSION 1u
#define WIRE_MAX_RECORD (256u << 20)    /* one page's record; larger is a protocol error */
#define WIRE_MAX_SECTION 1024u          /* a chunk's section path (ingest keeps them short) */
#define WIRE_MAX_TITLE 255

/* A growable output buffer (the child's side). */
typedef struct { uint8_t *p; size_t len, cap; int oom; } wire_buf;
void wire_buf_free(wire_buf *b);
/* Append a record header + payload start; returns the header offset for wire_end_record. */
size_t wire_begin_record(wire_buf *b, uint32_t type);
void wire_end_record(wire_buf *b, size_t at);
void wire_put_i32(wire_buf *b, int32_t v);
void wire_put_u32(wire_buf *b, uint32_t v);
void wire_put_str(wire_buf *b, const void *s, size_t n);
/* The whole page as one WIRE_PAGE record. */
void wire_page_encode(wire_buf *b, const ingest_page *p);

/* A reader over one record's payload (the parent's side). `bad` sticks once set. */
typedef struct { const uint8_t *p; size_t left; int bad; } wire_cur;
int32_t wire_get_i32(wire_cur *c);
uint32_t wire_get_u32(wire_cur *c);
/* A string of at most max bytes, valid UTF-8 without NUL, copied into a malloc'd
 * NUL-terminated buffer (caller frees); NULL and c->bad on any violation. */
char *wire_get_str(wire_cur *c, size_t max);

/* What the parent expects next: the page number, the next chunk order and image index
 * (both document-wide, advanced by a successful decode). */
typedef struct { int32_t page, next_order, next_image; } wire_expect;

/* Decode a WIRE_PAGE payload into *out (caller frees with ingest_page_free). Returns 0, or
 * -1 with the first violation in why. */
int wire_page_decode(const uint8_t *payload, size_t len, wire_expect *ex, ingest_page **out,
                     char *why, size_t whylen);
#endif
