/* Image-anchored chunking of one page.
 * Blocks arrive in reading order. Headings and captions are boundaries and become their
 * own chunks; a caption chunk is anchored to its figure (never split from it). Text inside
 * a figure becomes one FIGURE chunk, text inside a table one TABLE chunk. Running text is
 * gathered into spans that share the same nearest image (distance to the figure together
 * with its caption) and cut into windows of `chunk_tokens` words overlapping by
 * `overlap_tokens`. A chunk's box is the union of the lines its words came from; the
 * chunk keeps those lines too (byte ranges of its text with their boxes), so a later
 * layer can box a sentence rather than the whole chunk. */
#include "ingest/ingest-internal.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *w;
    int len;
    int frag;
    int sep; /* separator before it: 0 space, 1 newline, 2 " | " (table cell) */
} word;

typedef struct {
    ing_pagectx *pc;
    ingest_page *out;
    const ingest_options *o;
    int32_t *next_order;
    int cap;
    word *words;
    int n_words, cap_words;
    int rc;
} chunker;

/* Points → the page's normalized box, clamped to the page. */
static ingest_box norm_box(const ing_pagectx *pc, ingest_box b) {
    double pw = pc->w, ph = pc->h;
    return (ingest_box){(float)fmax(0, b.x0 / pw), (float)fmax(0, b.y0 / ph),
                        (float)fmin(1, b.x1 / pw), (float)fmin(1, b.y1 / ph)};
}

/* Does word `w` continue the text line of the word before it? Fragments of one block
 * that share a row (table cells, labels split by a wide gap) are one line; they must
 * overlap by half the shorter height, since the boxes of two lines of a paragraph set
 * with tight leading may touch. Fragments of different blocks never join, so a line
 * never spans a column gutter. A " | " cell separator always stays inside a line, so
 * every non-whitespace byte of the text belongs to some line. */
static int same_line(const ing_pagectx *pc, const word *prev, const word *w) {
    if (w->frag == prev->frag || w->sep == 2) return 1;
    const ing_frag *a = &pc->frags[prev->frag], *b = &pc->frags[w->frag];
    if (a->block != b->block) return 0;
    float overlap = ing_minf(a->b.y1, b->b.y1) - ing_maxf(a->b.y0, b->b.y0);
    return overlap > 0.5f * ing_minf(a->b.y1 - a->b.y0, b->b.y1 - b->b.y0);
}

/* Join words w[0..n) into t with their separators; record the lines (byte ranges of t,
 * boxes in points) and the union box. Returns the number of lines (>= 1). */
static int32_t join_words(const ing_pagectx *pc, const word *w, int n, char *t,
                          ingest_line *lines, ingest_box *box) {
    char *p = t;
    int32_t nl = 0;
    for (int i = 0; i < n; i++) {
        if (i) {
            const char *sep = w[i].sep == 1 ? "\n" : w[i].sep == 2 ? " | " : " ";
            size_t sl = strlen(sep);
            memcpy(p, sep, sl);
            p += sl;
        }
        ingest_box fb = pc->frags[w[i].frag].b;
        if (!i || !same_line(pc, &w[i - 1], &w[i])) {
            lines[nl++] = (ingest_line){(uint32_t)(p - t), 0, fb};
        } else if (w[i].frag != w[i - 1].frag) {
            lines[nl - 1].box = ing_box_union(lines[nl - 1].box, fb);
        }
        memcpy(p, w[i].w, (size_t)w[i].len);
        p += w[i].len;
        lines[nl - 1].len = (uint32_t)(p - t) - lines[nl - 1].off;
        *box = i ? ing_box_union(*box, fb) : fb;
    }
    *p = 0;
    return nl;
}

static int push_chunk(chunker *c, int kind, int image, const word *w, int n) {
    if (!n) return 0;
    ingest_page *out = c->out;
    if (out->n_chunks == c->cap) {
        int cap = c->cap ? c->cap * 2 : 16;
        ingest_chunk *nc = realloc(out->chunks, (size_t)cap * sizeof *nc);
        if (!nc) return INGEST_ERR_NOMEM;
        out->chunks = nc;
        c->cap = cap;
    }
    size_t len = 1;
    for (int i = 0; i < n; i++) len += (size_t)w[i].len + 3;
    char *t = malloc(len);
    ingest_line *lines = malloc((size_t)n * sizeof *lines); /* at most one line per word */
    if (!t || !lines) {
        free(t);
        free(lines);
        return INGEST_ERR_NOMEM;
    }
    ingest_box b;
    int32_t nl = join_words(c->pc, w, n, t, lines, &b);
    for (int32_t i = 0; i < nl; i++) lines[i].box = norm_box(c->pc, lines[i].box);
    ingest_line *shrunk = realloc(lines, (size_t)nl * sizeof *lines);
    if (shrunk) lines = shrunk;   /* a failed shrink keeps the larger block */
    ingest_chunk *ch = &out->chunks[out->n_chunks++];
    ch->order = (*c->next_order)++;
    ch->page = out->number;
    ch->kind = kind;
    ch->box = norm_box(c->pc, b);
    ch->image_index = image >= 0 ? out->images[image].index : -1;
    ch->text = t;
    ch->lines = lines;
    ch->n_lines = nl;
    ch->section = NULL;  /* ingest_sections_assign fills it once the page is chunked */
    return 0;
}

/* Append the words of block `bi` to the span. */
static int add_block_words(chunker *c, int bi) {
    const ing_block *bl = &c->pc->blocks[bi];
    for (int f = bl->first; f < bl->first + bl->n; f++) {
        const ing_frag *fr = &c->pc->frags[f];
        int first = 1;
        for (const char *p = fr->text; *p;) {
            while (*p == ' ' || *p == '\t') p++;
            if (!*p) break;
            const char *q = p;
            while (*q && *q != ' ' && *q != '\t') q++;
            if (c->n_words == c->cap_words) {
                int cap = c->cap_words ? c->cap_words * 2 : 256;
                word *nw = realloc(c->words, (size_t)cap * sizeof *nw);
                if (!nw) return INGEST_ERR_NOMEM;
                c->words = nw;
                c->cap_words = cap;
            }
            int sep = 0;
            if (first && c->n_words) {
                const ing_frag *prev = &c->pc->frags[c->words[c->n_words - 1].frag];
                int same_row = fr->b.y0 < prev->b.y1 && fr->b.y1 > prev->b.y0;
                if (f == bl->first) sep = 1;
                else if (fr->kind == FRAG_TABLE) sep = same_row ? 2 : 1;
                else if (same_row && fr->b.x0 - prev->b.x1 > fr->size) sep = 2;
            }
            c->words[c->n_words++] = (word){p, (int)(q - p), f, sep};
            first = 0;
            p = q;
        }
    }
    return 0;
}

/* Emit the span as windows of the token budget; whole = 1 never splits it. */
static int flush_span(chunker *c, int kind, int image, int whole) {
    int n = c->n_words, budget = c->o->chunk_tokens, rc = 0;
    int step = budget - c->o->overlap_tokens;
    if (step < 1) step = 1;
    if (whole || n <= budget) {
        rc = push_chunk(c, kind, image, c->words, n);
    } else {
        for (int s = 0; rc == 0; s += step) {
            int e = s + budget < n ? s + budget : n;
            rc = push_chunk(c, kind, image, c->words + s, e - s);
            if (e == n) break;
        }
    }
    c->n_words = 0;
    return rc;
}

/* Page-local image whose box (with its caption) is nearest to `b`, or -1. */
static int nearest_image(const ing_pagectx *pc, ingest_box b) {
    int best = -1;
    double bd = 1e30, bc = 1e30;
    for (int r = 0; r < pc->n_regions; r++) {
        const ing_region *rg = &pc->regions[r];
        if (rg->image < 0) continue;
        ingest_box u = rg->b;
        if (rg->caption_frag >= 0) u = ing_box_union(u, pc->frags[rg->caption_frag].b);
        double dx = fmax(0, fmax(u.x0 - b.x1, b.x0 - u.x1));
        double dy = fmax(0, fmax(u.y0 - b.y1, b.y0 - u.y1));
        double d = sqrt(dx * dx + dy * dy);
        double cx = (u.x0 + u.x1 - b.x0 - b.x1) / 2, cy = (u.y0 + u.y1 - b.y0 - b.y1) / 2;
        double cd = cx * cx + cy * cy;
        if (d < bd - 1e-3 || (d < bd + 1e-3 && cd < bc)) {
            best = rg->image;
            bd = d;
            bc = cd;
        }
    }
    return best;
}

static int region_of_caption_block(const ing_pagectx *pc, int bi) {
    for (int r = 0; r < pc->n_regions; r++) {
        int f = pc->regions[r].caption_frag;
        if (f >= 0 && pc->frags[f].block == bi) return r;
    }
    return -1;
}

int ingest_chunk_page(ing_pagectx *pc, const ingest_options *o, int ocr_page, int32_t *next_order,
                      ingest_page *out) {
    chunker c = {pc, out, o, next_order, 0, NULL, 0, 0, 0};
    unsigned char *done = calloc((size_t)pc->n_regions + 1, 1);
    if (!done) return INGEST_ERR_NOMEM;
    int rc = 0, span_anchor = -2;
    for (int bi = 0; bi < pc->n_blocks && rc == 0; bi++) {
        ing_block *bl = &pc->blocks[bi];
        int kind = bl->kind;
        if (kind == FRAG_TEXT && !ocr_page) {
            int a = nearest_image(pc, bl->b);
            if (c.n_words && a != span_anchor) rc = flush_span(&c, INGEST_CHUNK_TEXT, span_anchor, 0);
            span_anchor = a;
            if (rc == 0) rc = add_block_words(&c, bi);
            continue;
        }
        if (kind == FRAG_TEXT || (ocr_page && kind != FRAG_HEADING)) { /* OCR text */
            if (rc == 0) rc = add_block_words(&c, bi);
            span_anchor = -1;
            continue;
        }
        /* a boundary: close the running span first */
        if (c.n_words)
            rc = flush_span(&c, ocr_page ? INGEST_CHUNK_OCR : INGEST_CHUNK_TEXT, span_anchor, 0);
        if (rc) break;
        if (kind == FRAG_HEADING) {
            if ((rc = add_block_words(&c, bi)) == 0)
                rc = flush_span(&c, ocr_page ? INGEST_CHUNK_OCR : INGEST_CHUNK_HEADING,
                                nearest_image(pc, bl->b), 1);
        } else if (kind == FRAG_CAPTION) {
            int r = region_of_caption_block(pc, bi);
            int img = r >= 0 && pc->regions[r].image >= 0 ? pc->regions[r].image : nearest_image(pc, bl->b);
            if ((rc = add_block_words(&c, bi)) == 0) {
                rc = flush_span(&c, INGEST_CHUNK_CAPTION, img, 1);
                if (rc == 0 && r >= 0 && pc->regions[r].image >= 0)
                    out->images[pc->regions[r].image].caption_chunk = out->n_chunks - 1;
            }
        } else if (bl->region >= 0 && !done[bl->region]) {
            /* all text of one figure/table region, wherever its blocks fall in the order */
            done[bl->region] = 1;
            const ing_region *rg = &pc->regions[bl->region];
            for (int bj = bi; bj < pc->n_blocks && rc == 0; bj++)
                if (pc->blocks[bj].region == bl->region && pc->blocks[bj].kind == kind)
                    rc = add_block_words(&c, bj);
            int img = rg->image >= 0 ? rg->image : nearest_image(pc, rg->b);
            if (rc == 0)
                rc = flush_span(&c, kind == FRAG_TABLE ? INGEST_CHUNK_TABLE : INGEST_CHUNK_FIGURE, img,
                                0);
        }
        span_anchor = -2;
    }
    if (rc == 0 && c.n_words)
        rc = flush_span(&c, ocr_page ? INGEST_CHUNK_OCR : INGEST_CHUNK_TEXT, ocr_page ? -1 : span_anchor, 0);
    free(c.words);
    free(done);
    return rc;
}
