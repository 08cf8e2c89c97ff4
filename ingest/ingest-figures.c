/* Images and figures of a page.
 * Raster images come from poppler_page_get_image_mapping. Vector figures (charts drawn
 * as paths) are invisible to that call, so they are found on a page render: text
 * character boxes and raster images are blanked out, the remaining ink is gathered on a
 * coarse grid (2 pt cells), connected cells and close neighbours are merged, and a region
 * is kept when it is large and a caption line ("Figure N", "Chart N", "Table N")
 * sits right above or below it, or, for a figure caption still alone, up to CAPTION_FAR_PT
 * under it with no heading between (notes or code inside the figure). Captionless pieces
 * next to a captioned figure join it (sub-figures, symbols set apart). A caption still
 * alone under a stack of rules of one width takes the block they bound (a figure set as a
 * ruled table or listing, whose text is not ink). A figure caption set beside a picture
 * takes it. A figure caption ("Figure N:", not a sentence "Figure N shows") still alone
 * then takes the block of ink right above it, text included, up to the running text: a
 * listing, a typeset sample, symbols smaller than a figure with their labels, the rows of
 * a grid of drawings; a block of body-size text alone, with nothing drawn, is left out (a
 * list or a quote). On 80 texlive PDFs, 256 figure captions alone before, 188 after: 21
 * new figures, checked by eye 19 whole and 2 wrong (a line of code, a tree with the listing
 * beside it), the rest side captions; on the R vignettes one figure more is found.
 * A line set mostly in a typewriter face is never running text, whatever its size, so such
 * a listing or program output over its caption is a figure of text too, even when its last
 * line ("}") ends left of the caption; a caption label that does not start its line is a
 * heading ("3.3.4  Diagram 9: OMT") and takes no block. On the captioned texlive dev set
 * (vision/train/captioned_figures.json, boxed by eye) 97 -> 100 of 137 captioned figures
 * found (text 3 -> 6 of 15), extra boxes on its pages 31 -> 31; on the 195 texlive documents
 * with figure captions 45 pages changed, seen by eye mostly listings their captions name
 * ("Figure 1: Small graph" over dot source), 11 whole-page boxes of margin labels and
 * headings gone, 2 of a layout test's list pages boxed wrongly; manuals 164 -> 165 of 192
 * (their labels leave captioned listings out: 12 boxes more not in them), R the same.
 * A big glyph alone ("P" in a circle) is no heading (ingest-layout.c), so it no longer stops
 * a caption's block (it still parts pieces of ink: parting_text): on the texlive documents
 * with figure captions 4 pages changed, all right (3 figures found: mathsPIC, textopo); on
 * the 703 others, R, manuals and more the same boxes.
 * A region without a caption is kept when
 * it is a graphic by itself: big, inked inside its outline, little text, and not only text
 * between thin rules (a plot, a map, a diagram; not a code frame, a ruled table or an
 * equation). Panels side by side or stacked (tick labels between) become one figure; twin
 * panels side by side (the same height, widths alike) are measured again once their labels
 * are in their boxes (a colour key's scale between them): on the R vignettes boxed by eye
 * (both splits) 281 -> 286 of 309 found, on the manuals 163 -> 164 of 192, the other dev sets
 * the same. On ~1,000 dev PDFs (898 texlive documents, 99 R vignettes, Debian manuals) 29
 * pages changed, seen by eye: mostly the panels of one figure ("(a)" and "(b)", two plots
 * under one caption); on four pages of a catalogue of named drawings (featpost's Exemplifier)
 * neighbours now pair, as join_panels already paired others there.
 * Short text lines hugging a figure (axis ticks, legends) are absorbed into its box.
 * On 868 texlive documentation PDFs the far captions and the joined pieces took captioned
 * figures from 661 to 755 (a sample of each, checked by eye, mostly whole figures). On 276
 * pages of R vignettes boxed by eye (vision/train/r_figures.json, 312 figures), the
 * captionless graphics and the panels took the figures found (IoU >= 0.5) from 142 to
 * 278, with 78.5% of the images on those pages right (70.6% before).
 * A chart of samples (colour swatches, marker symbols, line styles: each under a figure's
 * size, named beside it, in columns) is a figure too, caption or not, where no other figure
 * lies: on the manuals dev set (vision/train/manual_figures.json) 158 -> 163 of 192 found;
 * on 1,018 dev PDFs (898 texlive documents, 99 R vignettes, 21 Debian manuals) 18 images
 * more, all charts of samples but one dependency graph; none lost or moved.
 * A text page (no image, no caption line) is rendered in full only when its layout leaves
 * room for a graphic and a coarse render shows big enough ink beyond the text (the probe).
 * On nine Debian manuals (1,209 pages) ingest takes ~1.5x as long, most of it rendering the
 * figures now found (asymptote.pdf: 7 -> 68 images); on gnuplot.pdf, none found, +1.6 ms a
 * page. */
#include "ingest/ingest-internal.h"
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define CELL_PT 2.0        /* grid cell size */
#define MERGE_GAP_PT 10.0f /* ink closer than this belongs to one region */
#define MIN_FIG_PT 30.0f   /* smallest figure side */
#define CAPTION_GAP_PT 40.0f
#define CAPTION_FAR_PT 200.0f /* a figure's notes or code may sit between it and its caption */
#define PART_GAP_PT 30.0f     /* captionless pieces this close to a captioned figure are its parts */
#define INK_LEVEL 235      /* a channel below this is ink */
#define RULE_MIN_PT 72.0f  /* a horizontal rule at least this wide may bound a ruled figure */
#define RULED_MAX_PT 500.0f /* the rules of one ruled figure lie within this height */
#define GRAPHIC_W_PT 72.0f  /* a captionless graphic is at least this wide */
#define GRAPHIC_H_PT 48.0f  /* and this high */
#define FRAME_W_PT 200.0f   /* an empty outline this wide is a listing's frame (a column's) */
#define FRAME_H_PT 12.0f    /* ... and this high (a line of text) */
#define GRAPHIC_INSET_PT 4.0f
#define LINE_PT 8.0f           /* a straight run this long is a rule, a bar or a border */
#define RULED_TEXT_MIN 0.05f   /* with more text than this share, */
#define GRAPHIC_DRAWN_MIN 0.02f /* less ink than this share off straight lines is a table */
#define GRAPHIC_TEXT_MAX 0.15f /* share of its area under characters: more is a table or text */
#define GRAPHIC_INK_MIN 0.003f /* share of ink pixels inside the outline: less is a frame */
#define PROBE_DPI 36.0      /* the coarse render of a text page that may hold a graphic */
#define PROBE_SHARE 0.75f   /* a coarse box this share of a graphic's size may be one */
#define GRAPHIC_LINE_SHARE 0.25f /* a text line wider than this share of the page's widest is not a graphic's */
#define ROOM_PT 72.0f       /* line to line, the room a graphic needs (its height and margins) */
#define PANEL_GAP_PT 60.0f  /* panels of one figure lie this close (their tick labels between) */
#define PIECE_RATIO 3.0f    /* a piece joins a figure this many times its area */

static int add_region(ing_pagectx *pc, ing_region r) {
    if (pc->n_regions == pc->cap_regions) {
        int cap = pc->cap_regions ? pc->cap_regions * 2 : 8;
        ing_region *nr = realloc(pc->regions, (size_t)cap * sizeof *nr);
        if (!nr) return INGEST_ERR_NOMEM;
        pc->regions = nr;
        pc->cap_regions = cap;
    }
    pc->regions[pc->n_regions++] = r;
    return 0;
}

static ingest_box clamp_box(ingest_box b, double w, double h) {
    b.x0 = ing_maxf(0, b.x0);
    b.y0 = ing_maxf(0, b.y0);
    b.x1 = ing_minf((float)w, b.x1);
    b.y1 = ing_minf((float)h, b.y1);
    return b;
}

static ingest_box mapped_box(const ing_pagectx *pc, const PopplerImageMapping *m) {
    return clamp_box((ingest_box){(float)m->area.x1, (float)m->area.y1, (float)m->area.x2, (float)m->area.y2},
                     pc->w, pc->h);
}

/* bullets, rules and logos are not figures */
static int big_enough(ingest_box b) { return b.x1 - b.x0 >= 16 && b.y1 - b.y0 >= 16; }

int ingest_figures_map(ing_pagectx *pc) {
    if (!pc->img_map_done) pc->img_map = poppler_page_get_image_mapping(pc->pp); /* NULL = none */
    pc->img_map_done = 1;
    for (GList *l = pc->img_map; l; l = l->next) {
        ingest_box b = mapped_box(pc, l->data);
        /* a page-sized image is likely a scan: OCR renders that page its own way */
        if (big_enough(b) && (b.x1 - b.x0) * (b.y1 - b.y0) <= 0.7 * pc->w * pc->h) return 1;
    }
    return 0;
}

int ingest_figures_raster(ing_pagectx *pc, int ocr_page) {
    ingest_figures_map(pc);
    int rc = 0;
    for (GList *l = pc->img_map; l && rc == 0; l = l->next) {
        ingest_box b = mapped_box(pc, l->data);
        float bw = b.x1 - b.x0, bh = b.y1 - b.y0;
        if (!big_enough(b)) continue;
        if (ocr_page && bw * bh > 0.7 * pc->w * pc->h) continue; /* the scan itself */
        int dup = 0;
        for (int i = 0; i < pc->n_regions; i++)
            if (fabsf(pc->regions[i].b.x0 - b.x0) < 1 && fabsf(pc->regions[i].b.y0 - b.y0) < 1 &&
                fabsf(pc->regions[i].b.x1 - b.x1) < 1 && fabsf(pc->regions[i].b.y1 - b.y1) < 1)
                dup = 1;
        if (!dup) rc = add_region(pc, (ing_region){b, 0, 1, -1, -1, 0, 0, 0});
    }
    return rc;
}

int ingest_figures_need_render(const ing_pagectx *pc) {
    if (pc->n_regions) return 1;
    for (int i = 0; i < pc->n_frags; i++)
        if (pc->frags[i].caption_kind) return 1;
    return 0;
}

/* A render stays within these (ARGB: 256 MB); a bigger page renders at a lower dpi. */
#define RENDER_MAX_SIDE 16384.0
#define RENDER_MAX_PIXELS (64.0 * 1024 * 1024)

double ingest_render_dpi(double w, double h, double dpi) {
    if (!(w > 0) || !(h > 0)) return dpi;
    double side = (w > h ? w : h) * dpi / 72.0;
    if (side > RENDER_MAX_SIDE) dpi *= RENDER_MAX_SIDE / side;
    double px = (w * dpi / 72.0) * (h * dpi / 72.0);
    if (px > RENDER_MAX_PIXELS) dpi *= sqrt(RENDER_MAX_PIXELS / px);
    return dpi;
}

cairo_surface_t *ingest_render(PopplerPage *pp, double w, double h, double dpi) {
    dpi = ingest_render_dpi(w, h, dpi);
    int pw = (int)ceil(w * dpi / 72.0), ph = (int)ceil(h * dpi / 72.0);
    if (pw < 1 || ph < 1 || pw > RENDER_MAX_SIDE || ph > RENDER_MAX_SIDE) return NULL;
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, pw, ph);
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(s);
        return NULL;
    }
    cairo_t *cr = cairo_create(s);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_scale(cr, dpi / 72.0, dpi / 72.0);
    poppler_page_render(pp, cr);
    cairo_destroy(cr);
    cairo_surface_flush(s);
    return s;
}

/* Clear a box (padded, in points) in the per-pixel ink map: text and known images are
 * not vector ink. */
static void clear_box(unsigned char *ink, int pw, int ph, ingest_box b, double scale, float pad) {
    int x0 = (int)floor((b.x0 - pad) * scale), y0 = (int)floor((b.y0 - pad) * scale);
    int x1 = (int)ceil((b.x1 + pad) * scale), y1 = (int)ceil((b.y1 + pad) * scale);
    if (x0 < 0) x0 = 0;
    if (y0 < 0) y0 = 0;
    if (x1 > pw) x1 = pw;
    if (y1 > ph) y1 = ph;
    if (x1 <= x0) return;
    for (int y = y0; y < y1; y++) memset(ink + (size_t)y * pw + x0, 0, (size_t)(x1 - x0));
}

/* 1 where a pixel is ink: any of B, G, R below INK_LEVEL (on a tinted page, off its paper
 * colour by more than white's margin). SSE2 takes 16 pixels a step;
 * the scalar rest works four bytes at a time: with x = the inverted colour bytes, a byte
 * is ink when it exceeds 255 - INK_LEVEL, which the add-and-test flags in its high bit
 * (bytes >= 128 are flagged by `| x`; a carry out of such a byte can only add flags to a
 * pixel that is ink anyway). */
static void ink_row(unsigned char *dst, const unsigned char *row, int pw, uint32_t paper) {
    int x = 0;
    if (paper) {   /* a tinted page: ink is what differs from its paper */
        for (; x < pw; x++) {
            uint32_t v;
            memcpy(&v, row + 4 * x, 4);
            int ink = 0;
            for (int k = 0; k < 24 && !ink; k += 8)
                ink = abs((int)((v >> k) & 0xFF) - (int)((paper >> k) & 0xFF)) > 255 - INK_LEVEL;
            dst[x] = (unsigned char)ink;
        }
        return;
    }
#ifdef __SSE2__
    const __m128i level = _mm_set1_epi8((char)INK_LEVEL), alpha = _mm_set1_epi32((int)0xFF000000u);
    const __m128i ones = _mm_set1_epi32(-1), one = _mm_set1_epi8(1);
    for (; x + 16 <= pw; x += 16) {
        __m128i w[4];
        for (int k = 0; k < 4; k++) {
            __m128i v = _mm_loadu_si128((const __m128i *)(row + 4 * (x + 4 * k)));
            /* 0xFF where a byte is >= INK_LEVEL (not ink), alpha forced to 0xFF */
            __m128i paper = _mm_or_si128(_mm_cmpeq_epi8(_mm_max_epu8(v, level), v), alpha);
            w[k] = _mm_cmpeq_epi32(paper, ones); /* -1: the pixel is paper */
        }
        __m128i p16 = _mm_packs_epi16(_mm_packs_epi32(w[0], w[1]), _mm_packs_epi32(w[2], w[3]));
        _mm_storeu_si128((__m128i *)(dst + x), _mm_andnot_si128(p16, one));
    }
#endif
    const uint32_t lim = 127 - (255 - INK_LEVEL);
    const uint32_t add = lim * 0x010101u;
    for (; x < pw; x++) {
        uint32_t v;
        memcpy(&v, row + 4 * x, 4);
        uint32_t inv = ~v & 0x00FFFFFFu; /* B, G, R inverted (ARGB32 is a native 0xAARRGGBB) */
        dst[x] = (((inv + add) | inv) & 0x00808080u) != 0;
    }
}

#define PAPER_EDGE_SHARE 0.9 /* a tint on this share of the page's edge is its paper */

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The paper colour of a tinted page (0xFFRRGGBB): one colour, not white, on most of the
 * render's edge (a coloured page, a slide's background); 0 for white paper. Ornaments in
 * the corners or a figure bleeding off one side leave the rest of the edge to the paper. */
static uint32_t page_paper(const unsigned char *px, int pw, int ph, int stride) {
    int step = 4, n = 0, cap = 2 * (pw + ph) / step + 8;
    if (pw < 8 || ph < 8) return 0;
    uint32_t *v = malloc((size_t)cap * sizeof *v);
    if (!v) return 0;   /* white: detection as on any page */
    /* 2 pixels in: the last row and column may be partly paper, partly the white under it */
    for (int x = 0; x < pw && n + 2 <= cap; x += step) {
        memcpy(&v[n++], px + 2 * (size_t)stride + 4 * (size_t)x, 4);
        memcpy(&v[n++], px + (size_t)(ph - 3) * stride + 4 * (size_t)x, 4);
    }
    for (int y = 0; y < ph && n + 2 <= cap; y += step) {
        memcpy(&v[n++], px + (size_t)y * stride + 8, 4);
        memcpy(&v[n++], px + (size_t)y * stride + 4 * (size_t)(pw - 3), 4);
    }
    for (int i = 0; i < n; i++) v[i] |= 0xFF000000u;
    qsort(v, (size_t)n, sizeof *v, cmp_u32);
    uint32_t best = 0;
    int run = 0, most = 0;
    for (int i = 0; i < n; i++) {
        run = i && v[i] == v[i - 1] ? run + 1 : 1;
        if (run > most) most = run, best = v[i];
    }
    free(v);
    int white = 1;
    for (int k = 0; k < 24; k += 8) white &= ((best >> k) & 0xFF) >= INK_LEVEL;
    return !white && most >= PAPER_EDGE_SHARE * n ? best : 0;
}

/* Connected ink cells → boxes (points). Returns the count; *out is malloc'd. */
static int ink_components(const unsigned char *ink, int gw, int gh, double cell_pt, ingest_box **out) {
    int *stack = malloc((size_t)gw * gh * sizeof *stack);
    unsigned char *seen = calloc((size_t)gw * gh, 1);
    int n = 0, cap = 16;
    ingest_box *boxes = malloc((size_t)cap * sizeof *boxes);
    if (!stack || !seen || !boxes) {
        free(stack);
        free(seen);
        free(boxes);
        *out = NULL;
        return -1;
    }
    for (int s = 0; s < gw * gh; s++) {
        if (!ink[s] || seen[s]) continue;
        int sp = 0, x0 = s % gw, x1 = x0, y0 = s / gw, y1 = y0;
        stack[sp++] = s;
        seen[s] = 1;
        while (sp) {
            int c = stack[--sp], cx = c % gw, cy = c / gw;
            if (cx < x0) x0 = cx;
            if (cx > x1) x1 = cx;
            if (cy < y0) y0 = cy;
            if (cy > y1) y1 = cy;
            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++) {
                    int nx = cx + dx, ny = cy + dy;
                    if (nx < 0 || ny < 0 || nx >= gw || ny >= gh) continue;
                    int nc = ny * gw + nx;
                    if (ink[nc] && !seen[nc]) { seen[nc] = 1; stack[sp++] = nc; }
                }
        }
        if (n == cap) {
            cap *= 2;
            ingest_box *nb = realloc(boxes, (size_t)cap * sizeof *nb);
            if (!nb) break;
            boxes = nb;
        }
        boxes[n++] = (ingest_box){(float)(x0 * cell_pt), (float)(y0 * cell_pt),
                                  (float)((x1 + 1) * cell_pt), (float)((y1 + 1) * cell_pt)};
    }
    free(stack);
    free(seen);
    *out = boxes;
    return n;
}

/* Tighten a grid box to the real ink pixels inside it (sub-cell accuracy). */
static ingest_box tighten(ingest_box b, const unsigned char *ink, int pw, int ph, double scale) {
    int x0 = (int)(b.x0 * scale), y0 = (int)(b.y0 * scale);
    int x1 = (int)ceil(b.x1 * scale), y1 = (int)ceil(b.y1 * scale);
    if (x1 > pw) x1 = pw;
    if (y1 > ph) y1 = ph;
    int mx0 = x1, my0 = y1, mx1 = x0 - 1, my1 = y0 - 1;
    for (int y = y0; y < y1; y++) {
        const unsigned char *row = ink + (size_t)y * pw;
        int l = x0, r = x1 - 1;
        while (l < x1 && !row[l]) l++;
        if (l == x1) continue;
        while (r > l && !row[r]) r--;
        if (l < mx0) mx0 = l;
        if (r > mx1) mx1 = r;
        if (y < my0) my0 = y;
        my1 = y;
    }
    if (mx1 < mx0) return b;
    return (ingest_box){(float)(mx0 / scale), (float)(my0 / scale), (float)((mx1 + 1) / scale),
                        (float)((my1 + 1) / scale)};
}

/* Cells of cpx x cpx pixels holding any ink. Most of a page is blank: skip 8 bytes at once. */
static void ink_cells(const unsigned char *ink, int pw, int ph, int cpx, unsigned char *grid, int gw) {
    for (int y = 0; y < ph; y++) {
        const unsigned char *row = ink + (size_t)y * pw;
        unsigned char *grow = grid + (size_t)(y / cpx) * gw;
        int x = 0;
        while (x < pw) {
            if (x + 8 <= pw) {
                uint64_t v;
                memcpy(&v, row + x, 8);
                if (!v) { x += 8; continue; }
            }
            if (row[x]) {
                int c = x / cpx;
                grow[c] = 1;
                x = (c + 1) * cpx; /* the rest of this cell cannot change it */
            } else {
                x++;
            }
        }
    }
}

/* area shared by a and b (points squared), 0 when apart */
static float overlap_area(ingest_box a, ingest_box b) {
    float ix = ing_minf(a.x1, b.x1) - ing_maxf(a.x0, b.x0);
    float iy = ing_minf(a.y1, b.y1) - ing_maxf(a.y0, b.y0);
    return ix > 0 && iy > 0 ? ix * iy : 0;
}

static float area(ingest_box b) { return (b.x1 - b.x0) * (b.y1 - b.y0); }

static int holds(ingest_box b, float x, float y) { return x > b.x0 && x < b.x1 && y > b.y0 && y < b.y1; }

/* share of b's area covered by character boxes */
static float text_share(const ing_pagectx *pc, ingest_box b) {
    double a = 0;
    for (int i = 0; i < pc->n_chars; i++) a += overlap_area(pc->chars[i], b);
    return (float)(a / ((double)(b.x1 - b.x0) * (b.y1 - b.y0)));
}

/* b inset by `inset` points as pixel bounds [x0, x1) x [y0, y1) clipped to the render;
 * 0 when nothing is left */
static int pixel_rect(ingest_box b, float inset, double scale, int pw, int ph, int r[4]) {
    r[0] = (int)ceil((b.x0 + inset) * scale);
    r[1] = (int)ceil((b.y0 + inset) * scale);
    r[2] = (int)floor((b.x1 - inset) * scale);
    r[3] = (int)floor((b.y1 - inset) * scale);
    if (r[0] < 0) r[0] = 0;
    if (r[1] < 0) r[1] = 0;
    if (r[2] > pw) r[2] = pw;
    if (r[3] > ph) r[3] = ph;
    return r[2] > r[0] && r[3] > r[1];
}

/* share of ink pixels inside b inset by GRAPHIC_INSET_PT (text already blanked) */
static float inner_ink(ingest_box b, const unsigned char *pix, int pw, int ph, double scale) {
    int r[4];
    if (!pixel_rect(b, GRAPHIC_INSET_PT, scale, pw, ph, r)) return 0;
    size_t n = 0;
    for (int y = r[1]; y < r[3]; y++) {
        const unsigned char *row = pix + (size_t)y * pw;
        for (int x = r[0]; x < r[2]; x++) n += row[x];
    }
    return (float)((double)n / ((double)(r[2] - r[0]) * (r[3] - r[1])));
}

/* 1 when pixel (x, y) lies on a thin straight line of at least len pixels, horizontal
 * (dx 1) or vertical (dx 0): a rule, a fraction bar or a cell border, not a drawing */
static int on_line(const unsigned char *pix, int pw, int ph, int x, int y, int len, int horiz) {
    int dx = horiz, dy = !horiz, a = 0, b = 0;
    while (a < len) {
        int nx = x - (a + 1) * dx, ny = y - (a + 1) * dy;
        if (nx < 0 || ny < 0 || !pix[(size_t)ny * pw + nx]) break;
        a++;
    }
    while (a + b + 1 < len) {
        int nx = x + (b + 1) * dx, ny = y + (b + 1) * dy;
        if (nx >= pw || ny >= ph || !pix[(size_t)ny * pw + nx]) break;
        b++;
    }
    if (a + b + 1 < len) return 0;
    int t = 3; /* thin: paper this far across the line on both sides */
    int ox = dy * t, oy = dx * t;
    int x1 = x - ox, y1 = y - oy, x2 = x + ox, y2 = y + oy;
    int p1 = x1 >= 0 && y1 >= 0 && pix[(size_t)y1 * pw + x1];
    int p2 = x2 < pw && y2 < ph && pix[(size_t)y2 * pw + x2];
    return !p1 || !p2;
}

/* share of the ink inside b that is not on thin straight lines */
static float drawn_ink(ingest_box b, const unsigned char *pix, int pw, int ph, double scale) {
    int r[4], len = (int)lround(LINE_PT * scale);
    if (!pixel_rect(b, 0, scale, pw, ph, r)) return 0;
    size_t ink = 0, drawn = 0;
    for (int y = r[1]; y < r[3]; y++)
        for (int x = r[0]; x < r[2]; x++) {
            if (!pix[(size_t)y * pw + x]) continue;
            ink++;
            drawn += !on_line(pix, pw, ph, x, y, len, 1) && !on_line(pix, pw, ph, x, y, len, 0);
        }
    return ink ? (float)((double)drawn / ink) : 0;
}

/* 1 when b is a wide outline, a line high at least, with no ink inside once the text is
 * blanked: the frame of a listing or a note, never part of a drawing next to it (a rule is
 * no frame) */
static int text_frame(ingest_box b, const unsigned char *pix, int pw, int ph, double scale) {
    return b.x1 - b.x0 >= FRAME_W_PT && b.y1 - b.y0 >= FRAME_H_PT &&
           inner_ink(b, pix, pw, ph, scale) <= GRAPHIC_INK_MIN;
}

/* A captionless vector region is a picture by itself (a plot, a map, a diagram) when it is
 * big, holds ink inside its outline (a frame around code or a note holds none once the
 * text is blanked) and is mostly not text (a ruled table is). */
static int graphic(const ing_pagectx *pc, ingest_box b, const unsigned char *pix, int pw, int ph,
                   double scale) {
    if (b.x1 - b.x0 < GRAPHIC_W_PT || b.y1 - b.y0 < GRAPHIC_H_PT) return 0;
    float t = text_share(pc, b);
    if (t >= GRAPHIC_TEXT_MAX || inner_ink(b, pix, pw, ph, scale) <= GRAPHIC_INK_MIN) return 0;
    /* text between thin rules and bars is a ruled table or an equation */
    return t <= RULED_TEXT_MIN || drawn_ink(b, pix, pw, ph, scale) >= GRAPHIC_DRAWN_MIN;
}

/* 1 when fr is a line of running text by its face and length (body size, several words) */
static int wordy(const ing_pagectx *pc, const ing_frag *fr) {
    if (fr->kind != FRAG_TEXT || fabsf(fr->size - pc->body_size) > 0.6f) return 0;
    int words = 0, letters = 0;   /* words of two letters or more: a row of "(a)" labels has none */
    for (const char *q = fr->text;; q++) {
        if (!*q || *q == ' ') {
            words += letters >= 2;
            letters = 0;
            if (!*q) break;
        } else {
            letters += isalpha((unsigned char)*q) || (unsigned char)*q >= 0x80;
        }
    }
    return words >= 6;
}

/* ---------- charts of samples ---------- */

#define SAMPLE_MIN_PT 4.0f  /* a sample (a swatch, a marker, a line style) is at least this big */
#define SAMPLE_DRAWN 0.5f   /* ... and mostly ink off straight lines (no rule, no bar) */
#define SAMPLE_GAP_PT 18.0f /* a sample and its name lie this close */
#define SAMPLE_NAMES 6      /* a chart names at least this many samples */
#define SAMPLE_COLS_PT 72.0f /* columns of named samples side by side lie this close */

static int sample_sized(ingest_box b) {
    return b.x1 - b.x0 >= SAMPLE_MIN_PT && b.y1 - b.y0 >= SAMPLE_MIN_PT;
}

/* 1 when ink box b, too small for a figure, may be a sample of a chart */
static int sample_like(ingest_box b, const unsigned char *pix, int pw, int ph, double scale) {
    return sample_sized(b) && drawn_ink(b, pix, pw, ph, scale) >= SAMPLE_DRAWN;
}

/* 1 when fr may name a sample: a short line of text with a word and no digit (no caption,
 * no running text, no index entry or formula) */
static int sample_name(const ing_pagectx *pc, const ing_frag *fr) {
    if (fr->kind != FRAG_TEXT || fr->caption_kind || wordy(pc, fr))
        return 0;
    int run = 0, word = 0;
    for (const char *q = fr->text; *q; q++) {
        if (isdigit((unsigned char)*q)) return 0;
        run = isalpha((unsigned char)*q) ? run + 1 : 0;
        word |= run >= 3;
    }
    return word;
}

static int root_of(int *up, int i) {
    while (up[i] != i) i = up[i] = up[up[i]];
    return i;
}

/* the height a and b share (negative when they lie apart) */
static float shared_height(ingest_box a, ingest_box b) {
    return ing_minf(a.y1, b.y1) - ing_maxf(a.y0, b.y0);
}

/* 1 when line t may name sample b: beside it (most of its height level with b), at most
 * SAMPLE_GAP_PT away */
static int names(ingest_box b, ingest_box t) {
    return shared_height(b, t) >= 0.5f * (t.y1 - t.y0) && ing_box_dist(b, t) <= SAMPLE_GAP_PT;
}

/* 1 when a and b stand side by side: most of the shorter one's height beside the other,
 * at most SAMPLE_COLS_PT apart */
static int side_by_side(ingest_box a, ingest_box b) {
    return shared_height(a, b) >= 0.5f * ing_minf(a.y1 - a.y0, b.y1 - b.y0) &&
           ing_box_dist(a, b) <= SAMPLE_COLS_PT;
}

/* Joins the sets of i and j, the lower root staying the root: the root that joined it, or
 * -1 when they were one set already. */
static int unite(int *up, int i, int j) {
    int a = root_of(up, i), b = root_of(up, j);
    if (a == b) return -1;
    if (b < a) { int t = a; a = b; b = t; }
    up[b] = a;
    return b;
}

/* Joins the sets of i and j; returns 1 when they were apart. */
static int join_roots(int *up, ingest_box *u, int *n_smp, int *n_name, int i, int j) {
    int b = unite(up, i, j);
    if (b < 0) return 0;
    int a = up[b];
    u[a] = ing_box_union(u[a], u[b]);
    n_smp[a] += n_smp[b];
    n_name[a] += n_name[b];
    return 1;
}

/* Charts of samples (colour swatches, marker symbols, line styles), each drawn under the
 * size of a figure with its name beside it: samples, the samples within SAMPLE_GAP_PT and
 * the names beside them (names join only through samples), then such columns side by side,
 * form one figure when it has at least SAMPLE_NAMES names and two samples, the size of a
 * graphic and no running text. The boxes go to out (room for ns); returns their count, or
 * -1 when out of memory. */
static int sample_charts(const ing_pagectx *pc, const ingest_box *smp, int ns, ingest_box *out) {
    int nn = ns + pc->n_frags, k = 0;
    int *up = malloc(sizeof *up * (size_t)nn * 3);
    if (!up) return -1;
    int *n_smp = up + nn, *n_name = n_smp + nn;
    ingest_box *u = calloc((size_t)nn, sizeof *u);
    if (!u) { free(up); return -1; }
    for (int i = 0; i < nn; i++) {
        up[i] = i;
        n_smp[i] = i < ns;
        n_name[i] = i >= ns && sample_name(pc, &pc->frags[i - ns]);
        u[i] = i < ns ? smp[i] : pc->frags[i - ns].b;
    }
    for (int i = 0; i < ns; i++)
        for (int j = i + 1; j < nn; j++)
            if (j < ns ? ing_box_dist(smp[i], u[j]) <= SAMPLE_GAP_PT
                       : n_name[j] && names(smp[i], u[j]))
                join_roots(up, u, n_smp, n_name, i, j);
    /* then columns of named samples side by side (a chart's columns, wider than a gap) */
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < ns; i++)
            for (int j = i + 1; j < ns; j++)
                if (up[i] == i && up[j] == j && n_name[i] >= 2 && n_name[j] >= 2 &&
                    side_by_side(u[i], u[j]))
                    changed = join_roots(up, u, n_smp, n_name, i, j);
    }
    for (int i = 0; i < ns; i++) {
        ingest_box b = u[i];
        if (up[i] != i || n_smp[i] < 2 || n_name[i] < SAMPLE_NAMES ||
            b.x1 - b.x0 < GRAPHIC_W_PT || b.y1 - b.y0 < GRAPHIC_H_PT)
            continue;
        /* no running text inside, and mostly names (not a formula's or a table's cells) */
        int prose = 0, lines = 0;
        for (int f = 0; f < pc->n_frags && !prose; f++) {
            const ing_frag *fr = &pc->frags[f];
            if (!holds(b, (fr->b.x0 + fr->b.x1) / 2, (fr->b.y0 + fr->b.y1) / 2)) continue;
            prose = wordy(pc, fr) || fr->caption_kind;
            lines++;
        }
        if (!prose && 3 * n_name[i] >= 2 * lines) out[k++] = b;
    }
    free(u);
    free(up);
    return k;
}

/* The ink of a render that is neither text nor a known image, as merged boxes (points).
 * pix receives the per-pixel ink map. Returns the count (*out malloc'd) or -1. */
static int ink_regions(const ing_pagectx *pc, unsigned char *pix, const unsigned char *px, int pw, int ph,
                       int stride, double scale, ingest_box **out) {
    int cpx = (int)lround(CELL_PT * scale);
    if (cpx < 1) cpx = 1;
    int gw = (pw + cpx - 1) / cpx, gh = (ph + cpx - 1) / cpx;
    unsigned char *ink = calloc((size_t)gw * gh, 1); /* per-cell ink */
    if (!ink) return -1;
    for (int y = 0; y < ph; y++) ink_row(pix + (size_t)y * pw, px + (size_t)y * stride, pw, pc->paper);
    for (int i = 0; i < pc->n_chars; i++) clear_box(pix, pw, ph, pc->chars[i], scale, 1.0f);
    for (int i = 0; i < pc->n_regions; i++) clear_box(pix, pw, ph, pc->regions[i].b, scale, 1.0f);
    ink_cells(pix, pw, ph, cpx, ink, gw);
    ingest_box *boxes = NULL;
    int n = ink_components(ink, gw, gh, cpx / scale, &boxes);
    free(ink);
    if (n < 0) return -1;
    unsigned char *frame = calloc((size_t)n + 1, 1);
    if (!frame) { free(boxes); return -1; }
    for (int i = 0; i < n; i++) frame[i] = text_frame(boxes[i], pix, pw, ph, scale);
    /* merge neighbours until nothing changes; a listing's frame right over a drawing stays
     * apart from it (nested in it, or beside another frame, it joins) */
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++)
                if (ing_box_dist(boxes[i], boxes[j]) <= MERGE_GAP_PT &&
                    (frame[i] == frame[j] || overlap_area(boxes[i], boxes[j]) > 0)) {
                    boxes[i] = ing_box_union(boxes[i], boxes[j]);
                    frame[i] &= frame[j];   /* a frame holding a drawing is none */
                    frame[j] = frame[n - 1];
                    boxes[j--] = boxes[--n];
                    changed = 1;
                }
    }
    free(frame);
    *out = boxes;
    return n;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* 1 when some band of the page, ROOM_PT high, holds no line of text wider than
 * GRAPHIC_LINE_SHARE of the widest (a graphic's own text is tick labels, legends and short
 * titles). Running text, code, lists and headings with their spacing leave no such band. The
 * band may reach the first or the last line of the page (floats); running heads are gone. */
static int room_for_graphic(const ing_pagectx *pc) {
    float widest = 0, top = (float)pc->h, bottom = 0;
    for (int i = 0; i < pc->n_frags; i++) {
        ingest_box b = pc->frags[i].b;
        widest = ing_maxf(widest, b.x1 - b.x0);
        top = ing_minf(top, b.y0);
        bottom = ing_maxf(bottom, b.y1);
    }
    if (!pc->n_frags) return 1; /* no text at all: only the render can tell */
    float *ys = malloc(((size_t)pc->n_frags + 2) * sizeof *ys);
    if (!ys) return 1;
    int n = 0;
    ys[n++] = top;
    ys[n++] = bottom;
    for (int i = 0; i < pc->n_frags; i++) {
        ingest_box b = pc->frags[i].b;
        if (b.x1 - b.x0 > GRAPHIC_LINE_SHARE * widest) ys[n++] = (b.y0 + b.y1) / 2;
    }
    qsort(ys, (size_t)n, sizeof *ys, cmp_float);
    int room = 0;
    for (int i = 1; i < n && !room; i++) room = ys[i] - ys[i - 1] >= ROOM_PT;
    free(ys);
    return room;
}

/* A page with no image and no caption line is rendered in full only when its layout leaves
 * room for a graphic and a coarse render (PROBE_DPI) shows ink beyond the text big enough
 * to be one: most text pages skip both renders. */
int ingest_figures_probe(ing_pagectx *pc) {
    if (!room_for_graphic(pc)) return 0;
    cairo_surface_t *coarse = ingest_render(pc->pp, pc->w, pc->h, PROBE_DPI);
    if (!coarse) return 1; /* cannot tell: render in full */
    double scale = ingest_render_dpi(pc->w, pc->h, PROBE_DPI) / 72.0;
    int pw = cairo_image_surface_get_width(coarse), ph = cairo_image_surface_get_height(coarse);
    pc->paper = page_paper(cairo_image_surface_get_data(coarse), pw, ph, cairo_image_surface_get_stride(coarse));
    unsigned char *pix = ingest_scratch(pc->scratch, (size_t)pw * ph);
    ingest_box *boxes = NULL;
    int n = pix ? ink_regions(pc, pix, cairo_image_surface_get_data(coarse), pw, ph,
                              cairo_image_surface_get_stride(coarse), scale, &boxes)
                : -1;
    int big = n < 0; /* out of memory: render in full, which fails cleanly */
    for (int i = 0; i < n && !big; i++)
        big = boxes[i].x1 - boxes[i].x0 >= PROBE_SHARE * GRAPHIC_W_PT &&
              boxes[i].y1 - boxes[i].y0 >= PROBE_SHARE * GRAPHIC_H_PT;
    int ns = 0;   /* or a chart of samples (too coarse to tell a bar from a swatch here) */
    for (int i = 0; i < n && !big; i++)
        if (sample_sized(boxes[i])) boxes[ns++] = boxes[i];
    if (!big && ns > 1) {
        ingest_box *ch = malloc(sizeof *ch * (size_t)ns);
        big = !ch || sample_charts(pc, boxes, ns, ch) != 0;
        free(ch);
    }
    free(boxes);
    cairo_surface_destroy(coarse);
    return big;
}

/* share of the render's pixels inside b that are ink (text too); row: pw bytes of scratch */
static float render_ink(const ing_pagectx *pc, ingest_box b, const unsigned char *px, int pw, int ph,
                        int stride, double scale, unsigned char *row) {
    int r[4];
    if (!pixel_rect(b, 0, scale, pw, ph, r)) return 0;
    size_t n = 0;
    for (int y = r[1]; y < r[3]; y++) {
        ink_row(row, px + (size_t)y * stride, pw, pc->paper);
        for (int x = r[0]; x < r[2]; x++) n += row[x];
    }
    return (float)((double)n / ((double)(r[2] - r[0]) * (r[3] - r[1])));
}

#define TURN_BLANK 0.1f /* a bitmap's mapped box with less ink than this may be misplaced, */
#define TURN_TEXT 0.2f  /* or with this share of it under text (it lies on running text), */
#define TURN_FULL 0.5f  /* when a turned box at its corner is this full */
#define TURN_CLEAR 0.05f /* and has at most this share under text */

/* The fullest of the four quarter-turned boxes at region i's corner (inside the page, no
 * text, not another region's) with at least TURN_FULL ink: 1 and *out, else 0. *twin: one of
 * them is another bitmap's box (the bitmap is mapped twice, an image and its mask). */
static int turned_box(const ing_pagectx *pc, int i, const unsigned char *px, int pw, int ph, int stride,
                      double scale, unsigned char *row, ingest_box *out, int *twin) {
    ingest_box b = pc->regions[i].b;
    float w = b.x1 - b.x0, h = b.y1 - b.y0, best = TURN_FULL;
    int found = 0;
    *twin = 0;
    for (int k = 0; k < 4; k++) {
        float x0 = k & 1 ? b.x0 - h : b.x0, y0 = k & 2 ? b.y0 - w : b.y0;
        ingest_box c = {x0, y0, x0 + h, y0 + w};
        if (c.x0 < 0 || c.y0 < 0 || c.x1 > pc->w || c.y1 > pc->h || text_share(pc, c) > TURN_CLEAR)
            continue;
        int taken = 0;
        for (int j = 0; j < pc->n_regions; j++) {
            float o = j != i ? overlap_area(pc->regions[j].b, c) : 0;
            taken |= o > 0.5f * w * h;
            *twin |= pc->regions[j].raster && o > 0.9f * w * h && o > 0.9f * area(pc->regions[j].b);
        }
        float ink = taken ? 0 : render_ink(pc, c, px, pw, ph, stride, scale, row);
        if (ink >= best) best = ink, *out = c, found = 1;
    }
    return found;
}

/* Poppler maps a bitmap drawn with a quarter turn in its matrix to the wrong box: it reads
 * only the matrix's diagonal, so the box keeps the unturned size and is off by a side (the
 * Asymptote manual's images sit one height under their box, over code). Such a box shows
 * paper or text; one of the four turned boxes at its corner shows the bitmap, solid ink. */
static void fix_turned_rasters(ing_pagectx *pc, const unsigned char *px, int pw, int ph, int stride,
                               double scale) {
    unsigned char *row = malloc((size_t)pw);
    if (!row) return;
    for (int i = 0; i < pc->n_regions; i++) {
        ingest_box b = pc->regions[i].b, turned;
        if (!pc->regions[i].raster) continue;
        if (text_share(pc, b) < TURN_TEXT && render_ink(pc, b, px, pw, ph, stride, scale, row) >= TURN_BLANK)
            continue;
        int twin;
        if (turned_box(pc, i, px, pw, ph, stride, scale, row, &turned, &twin))
            pc->regions[i].b = turned;
        else if (twin) /* its twin was moved already */
            pc->regions[i--] = pc->regions[--pc->n_regions];
    }
    free(row);
}

/* 1 when b overlaps any region of the page */
static int touches_region(const ing_pagectx *pc, ingest_box b) {
    for (int r = 0; r < pc->n_regions; r++)
        if (overlap_area(pc->regions[r].b, b) > 0) return 1;
    return 0;
}

/* Keeps the charts of samples smp[0..ns) form (see sample_charts) that hold no bigger ink
 * (a bitmap, a drawing, a rule or a shaded band: then the samples are part of something
 * else) for the end of the caption pairing, which adds those that no figure overlaps. */
static int find_sample_charts(ing_pagectx *pc, const ingest_box *smp, int ns) {
    free(pc->charts);
    pc->n_charts = 0;
    pc->charts = malloc(sizeof *pc->charts * (size_t)ns);
    int n = pc->charts ? sample_charts(pc, smp, ns, pc->charts) : -1;
    if (n < 0) return INGEST_ERR_NOMEM;
    for (int c = 0; c < n; c++)
        if (!touches_region(pc, pc->charts[c])) pc->charts[pc->n_charts++] = pc->charts[c];
    return 0;
}

int ingest_figures_detect(ing_pagectx *pc, const unsigned char *px, int pw, int ph, int stride,
                          double scale) {
    pc->paper = page_paper(px, pw, ph, stride);
    fix_turned_rasters(pc, px, pw, ph, stride, scale);
    unsigned char *pix = ingest_scratch(pc->scratch, (size_t)pw * ph); /* per-pixel ink */
    ingest_box *boxes = NULL;
    int n = pix ? ink_regions(pc, pix, px, pw, ph, stride, scale, &boxes) : -1;
    if (n < 0) return INGEST_ERR_NOMEM;
    int rc = 0, ns = 0;
    int n_raster = pc->n_regions;
    for (int i = 0; i < n && rc == 0; i++) {
        ingest_box b = tighten(boxes[i], pix, pw, ph, scale);
        b = clamp_box(b, pc->w, pc->h);
        float bw = b.x1 - b.x0, bh = b.y1 - b.y0;
        int rule = bh < MIN_FIG_PT && bw >= RULE_MIN_PT && bw >= 6 * bh;
        if (!rule && (bw < MIN_FIG_PT || bh < MIN_FIG_PT)) {
            if (sample_like(b, pix, pw, ph, scale)) boxes[ns++] = b;   /* i >= ns: kept apart */
            continue;
        }
        int inside_raster = 0;
        for (int r = 0; r < n_raster; r++)
            if (overlap_area(pc->regions[r].b, b) > 0.5f * bw * bh) inside_raster = 1;
        if (inside_raster) continue;
        ing_region r = {b, 0, 0, -1, -1, rule, 0, 0};
        r.graphic = !rule && graphic(pc, b, pix, pw, ph, scale);
        r.frame = !rule && text_frame(b, pix, pw, ph, scale);
        rc = add_region(pc, r);
    }
    if (rc == 0 && ns > 1) rc = find_sample_charts(pc, boxes, ns);
    free(boxes);
    return rc;
}

typedef struct { float d; int region, frag; } pair_cand;

static int cmp_pair(const void *a, const void *b) {
    float x = ((const pair_cand *)a)->d, y = ((const pair_cand *)b)->d;
    return (x > y) - (x < y);
}

/* 1 when a and b share no column of the page: a caption cannot belong to such a region */
static int apart_x(ingest_box a, ingest_box b) { return a.x0 >= b.x1 || a.x1 <= b.x0; }

#define CAPTION_ABOVE_COST 0.5f /* a caption over a region is this much farther (a tie goes under) */
#define FIG_ABOVE_COST 40.0f  /* a figure caption over a region: one under it wins */

/* distance from a region to a caption line right above or below it (plus above_cost when
 * the caption is over the region), or -1 */
static float caption_distance(ingest_box r, ingest_box c, float above_cost) {
    if (apart_x(c, r)) return -1;
    if (c.y0 >= r.y1 - 4 && c.y0 - r.y1 <= CAPTION_GAP_PT) return ing_maxf(0, c.y0 - r.y1);
    if (r.y0 >= c.y1 - 4 && r.y0 - c.y1 <= CAPTION_GAP_PT) return ing_maxf(0, r.y0 - c.y1) + above_cost;
    return -1;
}

/* 1 when fr is a heading, or a glyph set as big as one (a drawing's "A", a drop cap): text
 * that parts two pieces of ink. Not a heading, yet it keeps drawings of a catalogue (featpost's
 * Exemplifier) or a stack of diagrams (diagmactest) apart: without it 19 pages of 703 texlive
 * documents joined more, most wrongly. */
static int parting_text(const ing_pagectx *pc, const ing_frag *fr) {
    return fr->kind == FRAG_HEADING || (fr->kind == FRAG_TEXT && ingest_layout_big_glyph(pc, fr));
}

/* 1 when a heading or another caption lies between region r (above) and caption line c:
 * then they belong to different parts of the page */
static int parted(const ing_pagectx *pc, ingest_box r, ingest_box c) {
    for (int f = 0; f < pc->n_frags; f++) {
        const ing_frag *fr = &pc->frags[f];
        if (!parting_text(pc, fr) && fr->kind != FRAG_CAPTION) continue;
        float yc = (fr->b.y0 + fr->b.y1) / 2;
        if (yc > r.y1 && yc < c.y0 && fr->b.x0 < r.x1 && fr->b.x1 > r.x0) return 1;
    }
    return 0;
}

/* Each figure caption still alone takes the nearest region by dist (a distance from -4 pt,
 * or NO_PAIR when the region cannot be the caption's), within max; ties go to the later. */
#define NO_PAIR (-1000.0f)
#define PANEL_LABEL_GAP_PT 20.0f /* a panel's "(a)" lies this close under it */
typedef float (*pair_dist)(const ing_pagectx *pc, const ing_region *r, ingest_box cap);

/* 1 when fragment f is a figure caption still alone that may take what lies above or under
 * it, or beside it when beside: a turned one (a sideways figure's) reads beside its figure
 * only. */
static int lone_caption(const ing_pagectx *pc, const unsigned char *used, int f, int beside) {
    return pc->frags[f].caption_kind == 1 && !used[f] && (beside || !pc->frags[f].turned);
}

/* Pairs each figure caption still alone with its nearest captionless region by dist, up to
 * max; a turned caption only when side (it reads beside its figure, not above or under). */
static void pair_nearest(ing_pagectx *pc, unsigned char *used, pair_dist dist, float max, int side) {
    for (int f = 0; f < pc->n_frags && used; f++) {
        const ing_frag *cf = &pc->frags[f];
        if (!lone_caption(pc, used, f, side)) continue;
        int best = -1;
        float bd = max;
        for (int r = 0; r < pc->n_regions; r++) {
            if (pc->regions[r].caption_frag >= 0 || pc->regions[r].rule) continue;
            float d = dist(pc, &pc->regions[r], cf->b);
            if (d <= NO_PAIR || d > bd) continue;
            best = r;
            bd = d;
        }
        if (best < 0) continue;
        pc->regions[best].caption_frag = f;
        used[f] = 1;
    }
}

/* Far captions (pair_nearest within CAPTION_FAR_PT): a region above the caption, when no
 * heading or caption parts them: a figure's notes, legend text or code listing often sit
 * between the drawing and its caption. */
static float far_dist(const ing_pagectx *pc, const ing_region *r, ingest_box cap) {
    float d = cap.y0 - r->b.y1;
    return apart_x(cap, r->b) || d < -4 || parted(pc, r->b, cap) ? NO_PAIR : d;
}

/* Side captions (pair_nearest within CAPTION_GAP_PT): a bitmap or a graphic whose height
 * holds the caption's top, the caption at its left or right. */
static float side_dist(const ing_pagectx *pc, const ing_region *r, ingest_box cap) {
    (void)pc;
    if (!(r->raster || r->graphic) || cap.y0 < r->b.y0 - 4 || cap.y0 > r->b.y1) return NO_PAIR;
    float d = cap.x0 >= r->b.x1 - 4 ? cap.x0 - r->b.x1 : r->b.x0 - cap.x1;
    return d < -4 ? NO_PAIR : d;
}

/* 1 when rule o lines up with rule r (same left and right ends) */
static int same_span(ingest_box r, ingest_box o) {
    return fabsf(r.x0 - o.x0) <= 6 && fabsf(r.x1 - o.x1) <= 6;
}

/* A figure caption still alone under a stack of horizontal rules of one width takes the
 * block from the top rule to the bottom one: a figure set as a ruled table or listing has
 * no other ink (its text is not ink). Rules above and below it must both be there. */
static void pair_ruled(ing_pagectx *pc, unsigned char *used) {
    for (int f = 0; f < pc->n_frags && used; f++) {
        const ing_frag *cf = &pc->frags[f];
        if (!lone_caption(pc, used, f, 0)) continue;
        int bottom = -1;
        for (int r = 0; r < pc->n_regions; r++) {
            ingest_box b = pc->regions[r].b;
            if (!pc->regions[r].rule || apart_x(cf->b, b)) continue;
            float d = cf->b.y0 - b.y1;
            if (d < -2 || d > CAPTION_GAP_PT) continue;
            if (bottom < 0 || b.y1 > pc->regions[bottom].b.y1) bottom = r;
        }
        if (bottom < 0) continue;
        ingest_box rb = pc->regions[bottom].b, u = rb;
        for (int r = 0; r < pc->n_regions; r++) {
            ingest_box b = pc->regions[r].b;
            if (r == bottom || !pc->regions[r].rule || !same_span(rb, b)) continue;
            if (b.y1 > rb.y0 || rb.y1 - b.y0 > RULED_MAX_PT || parted(pc, b, rb)) continue;
            if (b.y0 < u.y0) u = ing_box_union(u, b);
        }
        if (u.y0 >= rb.y0 - MIN_FIG_PT / 2) continue;   /* one rule: a line, not a block */
        if (add_region(pc, (ing_region){u, 0, 0, f, -1, 0, 0, 0})) return;   /* out of memory: fewer figures */
        used[f] = 1;
    }
}

/* ---------- a caption's figure set as text or small pieces ---------- */

#define BLOCK_GAP_PT 18.0f   /* blank rows inside one figure are fewer than this */
#define BLOCK_MIN_H_PT 20.0f /* a lone caption's block: at least this high */
#define BLOCK_EDGE 0.09f     /* running heads live above this share of the page (furniture) */
#define BLOCK_DRAWN_MIN 40.0f /* drawn ink (square points) that makes a block of text a figure */
#define BLOCK_ROWS_PT 40.0f  /* the rows of a grid of drawings lie at most this far apart */
#define CAPTION_APART_PT 6.0f /* a caption over its figure lies this far below the text above */
#define RULE_THIN_PT 4.0f     /* a rule over a caption (a ruled float's top) is no thicker */
#define CAPTION_INK_PT 3.0f  /* a caption's glyphs reach this far above its text box */

/* The page render the lone-caption passes read: its pixels, size, points-to-pixels scale and
 * one row of scratch for ink_row. */
typedef struct {
    const unsigned char *px;
    int pw, ph, stride;
    double scale;
    unsigned char *row;
    uint32_t paper;
} ink_page;

/* 1 when fr is a line of running text: body size, most of the column wide, several words.
 * A figure's own text (labels, a listing in a smaller face, a short demo line) is not. */
static int body_line(const ing_pagectx *pc, const ing_frag *fr, float colw) {
    if (fr->kind == FRAG_HEADING || fr->kind == FRAG_CAPTION) return 1;
    return !fr->mono && wordy(pc, fr) && fr->b.x1 - fr->b.x0 >= 0.6f * colw;
}

/* 1 when a caption line is a label ("Figure 3:", "Fig. 2.6.", "Figure 7" alone, a bold
 * "Figure 1 The code"), not a sentence that starts with one ("Figure 3 shows ..."), which
 * has no figure right above. */
static int label_caption(const ing_frag *fr) {
    if (fr->lead_bold) return 1;
    const char *t = fr->text;
    while (*t && !isdigit((unsigned char)*t)) t++;
    while (isdigit((unsigned char)*t) || (*t == '.' && isdigit((unsigned char)t[1]))) t++;
    return *t == 0 || *t == ':' || *t == '.' || *t == '-' || (unsigned char)*t == 0xE2;   /* – — */
}

/* 1 when fragment f starts its line: a caption does; "3.3.4  Diagram 9: OMT" is a heading */
static int starts_line(const ing_pagectx *pc, int f) {
    const ing_frag *c = &pc->frags[f];
    for (int g = 0; g < pc->n_frags; g++) {
        const ing_frag *o = &pc->frags[g];
        float yc = (o->b.y0 + o->b.y1) / 2;
        if (g != f && yc > c->b.y0 && yc < c->b.y1 && o->b.x1 <= c->b.x0 + 1 && c->b.x0 - o->b.x1 < 40)
            return 0;
    }
    return 1;
}

/* Ink pixels of b in the render that no character covers: a drawing, a frame or rules. */
static long drawn_pixels(const ing_pagectx *pc, ingest_box b, const ink_page *ip) {
    int r[4];
    double scale = ip->scale;
    unsigned char *row = ip->row;
    if (!pixel_rect(b, 0, scale, ip->pw, ip->ph, r)) return 0;
    long n = 0;
    for (int y = r[1]; y < r[3]; y++) {
        ink_row(row, ip->px + (size_t)y * ip->stride, ip->pw, ip->paper);
        float yp = (float)((y + 0.5) / scale);
        for (int c = 0; c < pc->n_chars; c++) {   /* blank the characters on this row */
            ingest_box cb = pc->chars[c];
            if (yp < cb.y0 - 1 || yp > cb.y1 + 1) continue;
            int a = (int)floor((cb.x0 - 1) * scale), z = (int)ceil((cb.x1 + 1) * scale);
            a = a < r[0] ? r[0] : a;
            z = z > r[2] ? r[2] : z;
            if (z > a) memset(row + a, 0, (size_t)(z - a));
        }
        for (int x = r[0]; x < r[2]; x++) n += row[x];
    }
    return n;
}

/* 1 when most of the text of b, by characters, is set smaller than the body (a listing, a
 * figure's labels; unless typewriter_only: footnotes are small too) or in a typewriter face
 * (a listing, a program's output; its comments may be set apart in a roman face) */
static int listing_text(const ing_pagectx *pc, ingest_box b, int typewriter_only) {
    size_t small = 0, all = 0;
    for (int f = 0; f < pc->n_frags; f++) {
        const ing_frag *fr = &pc->frags[f];
        if (!holds(b, (fr->b.x0 + fr->b.x1) / 2, (fr->b.y0 + fr->b.y1) / 2)) continue;
        size_t n = strlen(fr->text);
        all += n;
        if ((!typewriter_only && fr->size < 0.92f * pc->body_size) || fr->mono) small += n;
    }
    return all > 0 && 2 * small > all;
}

/* 1 when a line of running text lies in b: then b is a passage, not a figure */
static int holds_body(const ing_pagectx *pc, ingest_box b, float colw) {
    for (int f = 0; f < pc->n_frags; f++) {
        const ing_frag *fr = &pc->frags[f];
        if (holds(b, (fr->b.x0 + fr->b.x1) / 2, (fr->b.y0 + fr->b.y1) / 2) && body_line(pc, fr, colw))
            return 1;
    }
    return 0;
}

/* 1 when b overlaps a bitmap or a captioned figure found already (a bitmap beside its
 * caption); captionless vector pieces inside b are parts of the block's figure */
static int overlaps_region(const ing_pagectx *pc, ingest_box b) {
    for (int r = 0; r < pc->n_regions; r++) {
        const ing_region *o = &pc->regions[r];
        if (o->rule || !(o->raster || o->caption_frag >= 0)) continue;
        if (overlap_area(o->b, b) > 0.2f * area(b)) return 1;
    }
    return 0;
}

/* Captionless vector regions that overlap region k join it (removed from the list). */
static void absorb_overlapping(ing_pagectx *pc, int k) {
    for (int r = 0; r < pc->n_regions; r++) {
        ing_region *o = &pc->regions[r];
        if (r == k || o->rule || o->raster || o->caption_frag >= 0) continue;
        if (overlap_area(o->b, pc->regions[k].b) <= 0) continue;
        pc->regions[k].b = ing_box_union(pc->regions[k].b, o->b);
        pc->regions[k].graphic |= o->graphic;
        *o = pc->regions[--pc->n_regions];
        if (k == pc->n_regions) k = r;   /* k moved into r's slot */
        r = -1;   /* rescan with the grown box */
    }
}

/* A captionless region (not a bitmap) whose bottom lies within BLOCK_GAP_PT over b's top:
 * b is the rest of it (an axis title under a plot), or -1. */
static int region_on_top(const ing_pagectx *pc, ingest_box b) {
    for (int r = 0; r < pc->n_regions; r++) {
        const ing_region *o = &pc->regions[r];
        if (o->rule || o->raster || o->caption_frag >= 0 || apart_x(o->b, b)) continue;
        if (b.y0 - o->b.y1 >= -4 && b.y0 - o->b.y1 <= BLOCK_GAP_PT) return r;
    }
    return -1;
}

/* The edge of a text column wholly left (right) of x: where at least three lines of running
 * text end (start) within 12 pt of the outermost; -1 when there is none (one column). */
static float column_edge(const ing_pagectx *pc, float x, int left) {
    float e = -1;
    for (int pass = 0; pass < 2; pass++) {
        int n = 0;
        for (int f = 0; f < pc->n_frags; f++) {
            const ing_frag *fr = &pc->frags[f];
            float v = left ? fr->b.x1 : fr->b.x0;
            if (!wordy(pc, fr) || (left ? fr->b.x1 >= x : fr->b.x0 <= x)) continue;
            if (!pass) e = e < 0 ? v : left ? ing_maxf(e, v) : ing_minf(e, v);
            else n += fabsf(v - e) <= 12;
        }
        if (pass && n < 3) return -1;
    }
    return e;
}

/* The text column of caption c: the page's text span, cut at a column of running text
 * wholly left or right of c (two columns; a caption across both keeps the page's span). */
static void column_at(const ing_pagectx *pc, ingest_box c, float *x0, float *x1) {
    float a = (float)pc->w, b = 0, x = (c.x0 + c.x1) / 2;
    for (int f = 0; f < pc->n_frags; f++) {
        a = ing_minf(a, pc->frags[f].b.x0);
        b = ing_maxf(b, pc->frags[f].b.x1);
    }
    float l = column_edge(pc, x, 1), r = column_edge(pc, x, 0);
    *x0 = l >= 0 && l < c.x0 ? ing_maxf(a, l + 1) : a;
    *x1 = r >= 0 && r > c.x1 ? ing_minf(b, r - 1) : b;
}

/* Rows y0..y1 (pixels) of the render between columns x0..x1 that hold ink, text included:
 * the ink box (*out, points) reached from the bottom row up (from the top row down when
 * down), stopping at a blank band of BLOCK_GAP_PT. Returns 0 when no ink, or when the block
 * misses columns c0..c1 (the caption's); *off is 1 when its ink nearest the caption misses
 * them. What sits right above (below) a caption is its figure; ink beside it is something
 * else, unless it is a listing, whose last line may be short ("}") and off to one side. */
static int ink_scan(const ink_page *ip, int x0, int x1, int y0, int y1, int down, int c0, int c1,
                    ingest_box *out, int *off) {
    int near = -1, far = -1, lx = x1, rx = x0 - 1, blank = 0, gap = (int)(BLOCK_GAP_PT * ip->scale);
    unsigned char *row = ip->row;
    for (int y = down ? y0 : y1 - 1; y >= y0 && y < y1 && blank < gap; y += down ? 1 : -1) {
        ink_row(row, ip->px + (size_t)y * ip->stride, ip->pw, ip->paper);
        int l = x0, r = x1 - 1;
        while (l < x1 && !row[l]) l++;
        if (l == x1) { blank += near >= 0; continue; }
        while (r > l && !row[r]) r--;
        if (near < 0) *off = r < c0 || l >= c1, near = y;
        far = y;
        blank = 0;
        lx = l < lx ? l : lx;
        rx = r > rx ? r : rx;
    }
    if (near < 0 || rx < c0 || lx >= c1) return 0;
    double s = ip->scale;
    int top = down ? near : far, bottom = down ? far : near;
    *out = (ingest_box){(float)(lx / s), (float)(top / s), (float)((rx + 1) / s), (float)((bottom + 1) / s)};
    return 1;
}

/* A grid of drawings (rows of symbols, each with its labels) is set apart more than
 * BLOCK_GAP_PT: the bands of ink above block u, up to BLOCK_ROWS_PT apart, join it while
 * each holds drawn ink and no running text (a listing or a sentence above stops it). */
static ingest_box grid_rows(const ing_pagectx *pc, const ink_page *ip, ingest_box u, int y0,
                            int x0, int x1) {
    double scale = ip->scale;
    ingest_box v;
    int off;
    while (ink_scan(ip, x0, x1, y0, (int)floor(u.y0 * scale) - 1, 0, (int)(u.x0 * scale),
                    (int)ceil(u.x1 * scale), &v, &off)) {
        if (off || u.y0 - v.y1 > BLOCK_ROWS_PT || holds_body(pc, v, x1 / (float)scale - x0 / (float)scale) ||
            drawn_pixels(pc, v, ip) < BLOCK_DRAWN_MIN * scale * scale)
            break;
        u = ing_box_union(u, v);
    }
    return u;
}

/* 1 when a region is a figure by itself (a bitmap, a graphic, or captioned) */
static int figure_like(const ing_region *r) { return r->raster || r->graphic || r->caption_frag >= 0; }

/* How far the block of caption cf may reach, in points: up to (down to) the nearest line
 * of running text, heading or region above (below) it in its column x0..x1, at most to the
 * running heads (feet) at BLOCK_EDGE of the page. Below, a region that is no figure by
 * itself (a listing's frame, a piece) is part of the block. */
static float block_limit(const ing_pagectx *pc, int f, float x0, float x1, int down) {
    const ing_frag *cf = &pc->frags[f];
    float lim = down ? (1 - BLOCK_EDGE) * (float)pc->h : BLOCK_EDGE * (float)pc->h;
    for (int g = 0; g < pc->n_frags; g++) {
        const ing_frag *o = &pc->frags[g];
        if (g == f || o->b.x1 < x0 || o->b.x0 > x1 || !body_line(pc, o, x1 - x0)) continue;
        if (!down && o->b.y1 <= cf->b.y0 + 1) lim = ing_maxf(lim, o->b.y1);
        if (down && o->b.y0 >= cf->b.y1 - 1) lim = ing_minf(lim, o->b.y0);
    }
    for (int r = 0; r < pc->n_regions; r++) {
        ingest_box b = pc->regions[r].b;
        if (apart_x(b, (ingest_box){x0, 0, x1, 0}) || (down && !figure_like(&pc->regions[r]))) continue;
        if (!down && b.y1 <= cf->b.y0 + 1) lim = ing_maxf(lim, b.y1);
        if (down && b.y0 >= cf->b.y1 - 1) lim = ing_minf(lim, b.y0);
    }
    return lim;
}

/* 1 when caption f may head the figure below it: it is set apart from the text above (a
 * "Fig. 3:" that ends a line of a paragraph is none), no region but a thin rule ends right
 * above it, and nothing is drawn there (a drawing found as no region, or only as its rule). */
static int heads_block(const ing_pagectx *pc, const ink_page *ip, int f, float x0, float x1) {
    ingest_box c = pc->frags[f].b;
    ingest_box above = {x0, ing_maxf(0, c.y0 - CAPTION_GAP_PT), x1, c.y0 - CAPTION_INK_PT};
    if (drawn_pixels(pc, above, ip) >= BLOCK_DRAWN_MIN * ip->scale * ip->scale) return 0;
    for (int g = 0; g < pc->n_frags; g++) {
        ingest_box o = pc->frags[g].b;
        if (g != f && o.x1 >= x0 && o.x0 <= x1 && o.y1 <= c.y0 + 1 && c.y0 - o.y1 < CAPTION_APART_PT)
            return 0;
    }
    for (int r = 0; r < pc->n_regions; r++) {
        ingest_box b = pc->regions[r].b;
        if (b.y1 - b.y0 > RULE_THIN_PT && !apart_x(b, c) && b.y1 <= c.y0 + 1 && c.y0 - b.y1 <= CAPTION_GAP_PT)
            return 0;
    }
    return 1;
}

/* The block of ink right above (below) caption f, in its column cx0..cx1, that can be its
 * figure, into *u: it starts within CAPTION_GAP_PT of the caption, is a figure's size, holds
 * no running text nor a figure found already, and is a listing or holds drawn ink. Returns 1
 * when there is one, -1 when the ink there is none of these, 0 when there is no ink that near. */
static int caption_block(const ing_pagectx *pc, const ink_page *ip, int f, float cx0, float cx1,
                         int down, ingest_box *u) {
    const ing_frag *cf = &pc->frags[f];
    double scale = ip->scale;
    if (down && !heads_block(pc, ip, f, cx0, cx1)) return 0;
    float lim = block_limit(pc, f, cx0, cx1, down);
    int x0 = (int)floor(cx0 * scale), x1 = (int)ceil(cx1 * scale), y0, y1;
    if (down) {
        y0 = (int)ceil((cf->b.y1 + 1) * scale), y1 = (int)floor(lim * scale) - 1;
    } else {
        y0 = (int)ceil(lim * scale) + 1, y1 = (int)floor((cf->b.y0 - CAPTION_INK_PT) * scale);
    }
    x0 = x0 < 0 ? 0 : x0;
    x1 = x1 > ip->pw ? ip->pw : x1;
    y1 = y1 > ip->ph ? ip->ph : y1;
    int off;
    if (x1 <= x0 || y1 <= y0 ||
        !ink_scan(ip, x0, x1, y0, y1, down, (int)(cf->b.x0 * scale), (int)ceil(cf->b.x1 * scale), u, &off))
        return 0;
    if ((down ? u->y0 - cf->b.y1 : cf->b.y0 - u->y1) > CAPTION_GAP_PT) return 0;
    int listing = listing_text(pc, *u, down);
    if ((off && !listing) || u->y1 - u->y0 < BLOCK_MIN_H_PT || u->x1 - u->x0 < MIN_FIG_PT ||
        holds_body(pc, *u, cx1 - cx0) || overlaps_region(pc, *u))
        return -1;
    /* text alone at body size is a passage (a list, a quote) more often than a figure */
    if (drawn_pixels(pc, *u, ip) < BLOCK_DRAWN_MIN * scale * scale && !listing) return -1;
    if (!down) *u = grid_rows(pc, ip, *u, y0, x0, x1);
    return 1;
}

/* A figure caption still alone takes the block right above it, else, when nothing is drawn
 * or written right above it, the one right below it (a caption set over its figure), up to
 * the running text, a heading or another figure: a figure of text (a listing, a typeset
 * sample), of small symbols with labels, or of pieces under the size of a figure is none of
 * the regions found, yet its caption says it is there. The block is the ink of the render,
 * text included, reached from the caption. */
static void pair_block(ing_pagectx *pc, unsigned char *used, const unsigned char *px, int pw,
                       int ph, int stride, double scale) {
    ink_page ip = {px, pw, ph, stride, scale, px ? malloc((size_t)pw + 16) : NULL, pc->paper};
    for (int f = 0; f < pc->n_frags && ip.row && used; f++) {
        const ing_frag *cf = &pc->frags[f];
        if (!lone_caption(pc, used, f, 0) || !label_caption(cf) || !starts_line(pc, f)) continue;
        ingest_box u;
        float cx0, cx1;
        column_at(pc, cf->b, &cx0, &cx1);
        int down = 0, above = caption_block(pc, &ip, f, cx0, cx1, 0, &u);
        if (above < 0 || (!above && caption_block(pc, &ip, f, cx0, cx1, down = 1, &u) != 1)) continue;
        used[f] = 1;
        int k = down ? -1 : region_on_top(pc, u);
        if (k >= 0) {   /* the rest of a figure found without its caption: join them */
            pc->regions[k].b = ing_box_union(pc->regions[k].b, u);
            pc->regions[k].caption_frag = f;
        } else if (add_region(pc, (ing_region){u, 0, 0, f, -1, 0, 0, 0})) {
            break;   /* out of memory: fewer figures */
        } else {
            k = pc->n_regions - 1;
        }
        absorb_overlapping(pc, k);
    }
    free(ip.row);
}

/* A figure of several pieces (sub-figures in a row, symbols with gaps wider than
 * MERGE_GAP_PT) was found as several regions, of which one took the caption: the others
 * nearby, on the same side of the caption and not parted from it, join it. */
static void absorb_parts(ing_pagectx *pc) {
    for (int changed = 1; changed;) {
        changed = 0;
        for (int r = 0; r < pc->n_regions; r++) {
            ing_region *rg = &pc->regions[r];
            if (rg->raster || rg->rule || rg->caption_frag < 0 || rg->is_table) continue;
            ingest_box cap = pc->frags[rg->caption_frag].b;
            int below = cap.y0 >= rg->b.y1 - 4; /* the caption is under the figure */
            for (int q = 0; q < pc->n_regions; q++) {
                ing_region *o = &pc->regions[q];
                if (q == r || o->raster || o->rule || o->frame || o->caption_frag >= 0) continue;
                if (ing_box_dist(rg->b, o->b) > PART_GAP_PT) continue;
                if (below ? o->b.y1 > cap.y0 + 4 : o->b.y0 < cap.y1 - 4) continue;
                ingest_box u = ing_box_union(rg->b, o->b);
                if (below && parted(pc, u, cap)) continue;
                rg->b = u;
                *o = pc->regions[--pc->n_regions];
                if (r == pc->n_regions) r = q; /* rg moved into q's slot */
                rg = &pc->regions[r];
                q = -1; /* rescan with the grown box */
                changed = 1;
            }
        }
    }
}

/* 1 when a and b sit side by side (or one above the other, vertical) like panels: of
 * like height (width), sharing most of it, at most PANEL_GAP_PT apart */
static int aligned(ingest_box a, ingest_box b, int vertical) {
    float a0 = vertical ? a.x0 : a.y0, a1 = vertical ? a.x1 : a.y1;
    float b0 = vertical ? b.x0 : b.y0, b1 = vertical ? b.x1 : b.y1;
    float shared = ing_minf(a1, b1) - ing_maxf(a0, b0), small = ing_minf(a1 - a0, b1 - b0);
    float gap = vertical ? ing_maxf(a.y0 - b.y1, b.y0 - a.y1) : ing_maxf(a.x0 - b.x1, b.x0 - a.x1);
    return shared >= 0.6f * small && small >= 0.5f * ing_maxf(a1 - a0, b1 - b0) && gap <= PANEL_GAP_PT;
}

/* 1 when a and b, side by side, both figure-sized, share the caption one of them holds: it is
 * centred under (or over) the pair, not under its own region. Screenshots "(a)" and "(b)"
 * over one "Figure 1.3" are one figure; a row of icons or pictures with their own captions
 * is not. */
static int shared_caption(const ing_pagectx *pc, const ing_region *a, const ing_region *b) {
    const ing_region *c = a->caption_frag >= 0 ? a : b;
    if (c->caption_frag < 0 || !aligned(a->b, b->b, 0)) return 0;
    if (ing_minf(a->b.x1 - a->b.x0, b->b.x1 - b->b.x0) < GRAPHIC_W_PT ||
        ing_minf(a->b.y1 - a->b.y0, b->b.y1 - b->b.y0) < GRAPHIC_H_PT)
        return 0;
    ingest_box f = pc->frags[c->caption_frag].b, u = ing_box_union(a->b, b->b);
    float mid = (f.x0 + f.x1) / 2;
    return fabsf(mid - (u.x0 + u.x1) / 2) < fabsf(mid - (c->b.x0 + c->b.x1) / 2);
}

/* 1 when a and b may be panels of one figure: two drawn figures, or a small piece (a colour
 * key, a legend box) beside a figure at least PIECE_RATIO times its size. A bitmap is whole
 * by itself: it takes pieces only (a column of icons stays apart), or a bitmap beside it under
 * their shared caption. A frame around code next to a drawing is neither. */
static int panel_pair(const ing_pagectx *pc, const ing_region *a, const ing_region *b) {
    int fa = figure_like(a), fb = figure_like(b);
    if (fa && fb) return (!a->raster && !b->raster) || shared_caption(pc, a, b);
    if (fa) return area(a->b) >= PIECE_RATIO * area(b->b);
    if (fb) return area(b->b) >= PIECE_RATIO * area(a->b);
    return 0;
}

/* 1 when a caption, a heading or a line of body text (wide) lies in the gap between a and b */
static int text_between(const ing_pagectx *pc, ingest_box a, ingest_box b) {
    ingest_box u = ing_box_union(a, b);
    for (int f = 0; f < pc->n_frags; f++) {
        const ing_frag *fr = &pc->frags[f];
        float xc = (fr->b.x0 + fr->b.x1) / 2, yc = (fr->b.y0 + fr->b.y1) / 2;
        if (xc < u.x0 || xc > u.x1 || yc < u.y0 || yc > u.y1) continue;
        if (holds(a, xc, yc) || holds(b, xc, yc)) continue;   /* a panel's own labels */
        if (parting_text(pc, fr) || fr->kind == FRAG_CAPTION) return 1;
        if (fr->b.x1 - fr->b.x0 > 0.7f * (u.x1 - u.x0)) return 1;
    }
    return 0;
}

/* Panels of one figure (plots side by side or stacked, their tick labels and titles blanked
 * as text; a bitmap and its drawn colour key) were found as several regions: join them when
 * at most one holds a caption. */
static void join_panels(ing_pagectx *pc) {
    for (int changed = 1; changed;) {
        changed = 0;
        for (int r = 0; r < pc->n_regions && !changed; r++)
            for (int q = r + 1; q < pc->n_regions && !changed; q++) {
                ing_region *a = &pc->regions[r], *b = &pc->regions[q];
                if (a->rule || b->rule || a->is_table || b->is_table) continue;
                if ((a->caption_frag >= 0 && b->caption_frag >= 0) || !panel_pair(pc, a, b)) continue;
                if (!aligned(a->b, b->b, 0) && !aligned(a->b, b->b, 1)) continue;
                if (text_between(pc, a->b, b->b)) continue;
                a->b = ing_box_union(a->b, b->b);
                if (a->caption_frag < 0) a->caption_frag = b->caption_frag;
                a->graphic = a->graphic || b->graphic || a->raster || b->raster;
                a->raster = a->raster && b->raster; /* a bitmap with its drawn axes is cropped whole */
                *b = pc->regions[--pc->n_regions];
                changed = 1;
            }
    }
}

/* 1 when a and b are twin panels side by side: drawn (no bitmap), figures, the same height
 * and level, widths alike, at most PANEL_GAP_PT apart, nothing but their labels between */
static int twins(const ing_pagectx *pc, const ing_region *a, const ing_region *b) {
    float ha = a->b.y1 - a->b.y0, hb = b->b.y1 - b->b.y0, wa = a->b.x1 - a->b.x0, wb = b->b.x1 - b->b.x0;
    float gap = ing_maxf(a->b.x0 - b->b.x1, b->b.x0 - a->b.x1);
    if (a->rule || b->rule || a->is_table || b->is_table || a->raster || b->raster) return 0;
    return figure_like(a) && figure_like(b) && gap >= 0 && gap <= PANEL_GAP_PT &&
           shared_height(a->b, b->b) >= 0.85f * ing_maxf(ha, hb) &&
           ing_minf(wa, wb) >= 0.7f * ing_maxf(wa, wb) && !text_between(pc, a->b, b->b);
}

/* Twin panels side by side (two plots of one figure, "(a)" and "(b)") are one figure:
 * join_panels measured their gap before their labels were in their boxes (the tick labels
 * and a colour key's scale between them). A row of twins joins whole, unless two of them
 * hold captions (then each is a figure of its own). */
static void join_twins(ing_pagectx *pc) {
    int n = pc->n_regions, k = 0;
    int *up = malloc(2 * (size_t)n * sizeof *up + 1);
    if (!up) return;   /* out of memory: the panels stay apart */
    int *caps = up + n;
    for (int i = 0; i < n; i++) up[i] = i, caps[i] = 0;
    for (int r = 0; r < n; r++)
        for (int q = r + 1; q < n; q++)
            if (root_of(up, r) != root_of(up, q) && twins(pc, &pc->regions[r], &pc->regions[q]))
                unite(up, r, q);
    for (int i = 0; i < n; i++) caps[root_of(up, i)] += pc->regions[i].caption_frag >= 0;
    for (int i = 0; i < n; i++) {   /* the lowest index of a row (its root) takes the others */
        int a = root_of(up, i);
        ing_region *ra = &pc->regions[a], *ri = &pc->regions[i];
        if (a == i || caps[a] > 1) continue;
        ra->b = ing_box_union(ra->b, ri->b);
        if (ra->caption_frag < 0) ra->caption_frag = ri->caption_frag;
        ra->graphic = 1;
    }
    for (int i = 0; i < n; i++)
        if (root_of(up, i) == i || caps[root_of(up, i)] > 1) pc->regions[k++] = pc->regions[i];
    pc->n_regions = k;
    free(up);
}

#define LABEL_GAP_X_PT 14.0f /* a figure's label lines lie this close beside it */
#define LABEL_GAP_Y_PT 10.0f /* ... or above and below it (their near edge) */
#define LABEL_SIDE_PT 20.0f  /* a rotated label (a y axis's ticks, its title) lies this close */
#define LABEL_H_PT 12.0f     /* a label line is no thicker (tick labels, axis titles, legends) */

/* Short text lines hugging a vector figure (tick labels, axis titles, legends) join its box.
 * The near edge counts, not the whole line: tick labels of 8.5 pt set 2 pt under a plot's
 * frame end 10.5 pt under it; R sets a y axis's tick labels and title rotated, 7 and 17 pt
 * out, and may turn the tick labels under a bar chart (turned: they run down from the frame
 * as far as they are long). A box cut at the frame loses the scale. */
static int hugs_label(ingest_box e, ingest_box b, int turned) {
    int over = b.x0 >= e.x0 - LABEL_GAP_X_PT && b.x1 <= e.x1 + LABEL_GAP_X_PT;
    int level = b.y0 >= e.y0 - LABEL_GAP_Y_PT && b.y1 <= e.y1 + LABEL_GAP_Y_PT;
    if (over && level) return 1;
    if (over && (turned || b.y1 - b.y0 <= LABEL_H_PT))   /* above or below */
        return b.y0 <= e.y1 + LABEL_GAP_Y_PT && b.y1 >= e.y0 - LABEL_GAP_Y_PT;
    if (level && b.x1 - b.x0 <= LABEL_H_PT)  /* beside, rotated */
        return b.x0 <= e.x1 + LABEL_SIDE_PT && b.x1 >= e.x0 - LABEL_SIDE_PT;
    return 0;
}

/* 1 when a region other than r lies nearer to b (the labels between two panels are each
 * panel's own) */
static int nearer_region(const ing_pagectx *pc, int r, ingest_box b) {
    float d = ing_box_dist(pc->regions[r].b, b);
    for (int o = 0; o < pc->n_regions; o++)
        if (o != r && !pc->regions[o].rule && ing_box_dist(pc->regions[o].b, b) < d) return 1;
    return 0;
}

/* 1 when fragment f is the last line of a block of text (code, a paragraph): another line
 * starts right above it at the same left edge (a plot's title over its top tick labels does not) */
static int line_above(const ing_pagectx *pc, int f) {
    ingest_box b = pc->frags[f].b;
    for (int g = 0; g < pc->n_frags; g++) {
        ingest_box a = pc->frags[g].b;
        if (g == f || pc->frags[g].kind != FRAG_TEXT || fabsf(a.x0 - b.x0) > 2) continue;
        if (a.y1 <= b.y0 + 1 && b.y0 - a.y1 < 0.6f * (b.y1 - b.y0)) return 1;
    }
    return 0;
}

/* share of b's width under its characters: a row of tick labels is mostly gaps */
static float ink_share(const ing_pagectx *pc, ingest_box b) {
    float w = 0;
    for (int i = 0; i < pc->n_chars; i++) {
        ingest_box c = pc->chars[i];
        if (holds(b, (c.x0 + c.x1) / 2, (c.y0 + c.y1) / 2)) w += c.x1 - c.x0;
    }
    return b.x1 > b.x0 ? w / (b.x1 - b.x0) : 1;
}

/* One pass of label absorption over every vector figure (two passes reach an axis title
 * beyond its tick labels). */
static void absorb_labels(ing_pagectx *pc) {
    for (int r = 0; r < pc->n_regions; r++) {
        ing_region *rg = &pc->regions[r];
        if (rg->raster || rg->is_table) continue;
        for (int f = 0; f < pc->n_frags; f++) {
            ingest_box b = pc->frags[f].b;
            int k = pc->frags[f].kind;   /* labels set larger than the body read as headings */
            if (k != FRAG_TEXT && k != FRAG_HEADING) continue;
            if (!hugs_label(rg->b, b, pc->frags[f].turned) || nearer_region(pc, r, b)) continue;
            if (b.x1 - b.x0 > 0.6f * (rg->b.x1 - rg->b.x0) && ink_share(pc, b) > 0.7f)
                continue;   /* a line of text, not a sparse row of tick labels */
            if (b.y1 <= rg->b.y0 + 1 && !apart_x(b, rg->b) && line_above(pc, f))
                continue;   /* the last line of code over a plot */
            rg->b = ing_box_union(rg->b, b);
        }
    }
}

/* The charts of samples no figure took become figures, each with the figure caption left
 * right above or under it, if any. */
static void add_sample_charts(ing_pagectx *pc) {
    for (int c = 0; c < pc->n_charts; c++) {
        ingest_box b = pc->charts[c];
        int cap = -1;
        if (touches_region(pc, b)) continue;
        float best = CAPTION_GAP_PT + 1;
        for (int f = 0; f < pc->n_frags; f++) {
            float d = pc->frags[f].caption_kind == 1 ? caption_distance(b, pc->frags[f].b, CAPTION_ABOVE_COST) : -1;
            for (int r = 0; r < pc->n_regions && d >= 0; r++)
                if (pc->regions[r].caption_frag == f) d = -1;   /* another figure's */
            if (d >= 0 && d < best) { best = d; cap = f; }
        }
        if (add_region(pc, (ing_region){b, 0, 0, cap, -1, 0, 1, 0})) return;
    }
}

/* 1 when fr is a panel's label: "(a)", "(b) Women", a letter or number in parentheses. */
static int panel_label(const ing_frag *fr) {
    const unsigned char *t = (const unsigned char *)fr->text;
    return t[0] == '(' && isalnum(t[1]) && (t[2] == ')' || (isalnum(t[2]) && t[3] == ')')) &&
           fr->b.y1 - fr->b.y0 <= LABEL_H_PT;
}

/* A panel's label under it ("(a)") is part of it: taken before the captions are paired, so
 * that the caption under a row of labelled panels is as near to them as to what is below. */
static void take_panel_labels(ing_pagectx *pc) {
    for (int r = 0; r < pc->n_regions; r++) {
        ing_region *rg = &pc->regions[r];
        if (rg->rule || rg->raster) continue;
        for (int f = 0; f < pc->n_frags; f++) {
            const ing_frag *fr = &pc->frags[f];
            float xc = (fr->b.x0 + fr->b.x1) / 2, gap = fr->b.y0 - rg->b.y1;
            if (panel_label(fr) && xc > rg->b.x0 && xc < rg->b.x1 && gap >= -2 && gap <= PANEL_LABEL_GAP_PT)
                rg->b = ing_box_union(rg->b, fr->b);
        }
    }
}

/* Pair regions with caption lines (closest first, once each panel has taken its "(a)"),
 * join panels, drop vector regions that have no caption and are no graphic by themselves,
 * absorb figure labels, and mark the fragments inside each region. */
void ingest_figures_pair_captions(ing_pagectx *pc, const unsigned char *px, int pw, int ph,
                                  int stride, double scale) {
    int nc = 0;
    take_panel_labels(pc);
    pair_cand *c = malloc(((size_t)pc->n_regions * pc->n_frags + 1) * sizeof *c);
    if (!c) return;
    for (int r = 0; r < pc->n_regions; r++)
        for (int f = 0; f < pc->n_frags; f++) {
            int ck = pc->frags[f].caption_kind;   /* a turned caption reads beside its figure */
            if (!ck || pc->frags[f].turned || pc->regions[r].rule || (pc->regions[r].raster && ck == 2)) continue;
            /* a figure's caption goes under it, a table's over it: a figure caption between
             * two rows of panels is the upper row's */
            float d = caption_distance(pc->regions[r].b, pc->frags[f].b, ck == 1 ? FIG_ABOVE_COST : CAPTION_ABOVE_COST);
            if (d >= 0) c[nc++] = (pair_cand){d, r, f};
        }
    if (nc > 1) qsort(c, (size_t)nc, sizeof *c, cmp_pair);
    unsigned char *used = calloc((size_t)pc->n_frags + 1, 1);
    for (int i = 0; i < nc && used; i++) {
        ing_region *r = &pc->regions[c[i].region];
        if (r->caption_frag >= 0 || used[c[i].frag]) continue;
        r->caption_frag = c[i].frag;
        r->is_table = pc->frags[c[i].frag].caption_kind == 2;
        used[c[i].frag] = 1;
    }
    pair_nearest(pc, used, far_dist, CAPTION_FAR_PT, 0);
    pair_nearest(pc, used, side_dist, CAPTION_GAP_PT, 1);
    pair_ruled(pc, used);
    pair_block(pc, used, px, pw, ph, stride, scale);
    free(used);
    free(c);
    absorb_parts(pc);
    join_panels(pc);
    /* vector regions must have a caption or be a graphic by themselves */
    int k = 0;
    for (int r = 0; r < pc->n_regions; r++)
        if (pc->regions[r].raster || pc->regions[r].caption_frag >= 0 || pc->regions[r].graphic)
            pc->regions[k++] = pc->regions[r];
    pc->n_regions = k;
    add_sample_charts(pc);
    for (int pass = 0; pass < 2; pass++) absorb_labels(pc);
    join_twins(pc);
    for (int r = 0; r < pc->n_regions; r++) {
        ingest_box b = pc->regions[r].b;
        for (int f = 0; f < pc->n_frags; f++) {
            ing_frag *fr = &pc->frags[f];
            if (fr->kind == FRAG_CAPTION || fr->region >= 0) continue;
            float xc = (fr->b.x0 + fr->b.x1) / 2, yc = (fr->b.y0 + fr->b.y1) / 2;
            if (xc < b.x0 || xc > b.x1 || yc < b.y0 || yc > b.y1) continue;
            fr->region = r;
            fr->kind = pc->regions[r].is_table ? FRAG_TABLE : FRAG_FIGURE;
        }
    }
}

/* ---------- crops, PNG, perceptual hash ---------- */

/* 64-bit DCT hash: 32x32 grey thumbnail, 2-D DCT-II, the 8x8 lowest frequencies
 * compared with their median (DC excluded from the median). */
uint64_t ingest_phash(const unsigned char *px, int w, int h, int stride) {
    double g[32][32], d[8][32], coef[64];
    if (w < 1 || h < 1) return 0;
    for (int ty = 0; ty < 32; ty++)
        for (int tx = 0; tx < 32; tx++) {
            int x0 = tx * w / 32, x1 = (tx + 1) * w / 32, y0 = ty * h / 32, y1 = (ty + 1) * h / 32;
            if (x1 <= x0) x1 = x0 + 1;
            if (y1 <= y0) y1 = y0 + 1;
            /* grey x 1000 in integers: exact, and several times faster than doubles */
            int64_t s = 0;
            int n = 0;
            for (int y = y0; y < y1 && y < h; y++) {
                const unsigned char *p = px + (size_t)y * stride + 4 * x0;
                for (int x = x0; x < x1 && x < w; x++, p += 4) {
                    s += 114 * p[0] + 587 * p[1] + 299 * p[2]; /* BGRA in memory */
                    n++;
                }
            }
            g[ty][tx] = n ? (double)s / (1000.0 * n) : 255;
        }
    double cs[8][32];
    for (int u = 0; u < 8; u++)
        for (int x = 0; x < 32; x++) cs[u][x] = cos((2 * x + 1) * u * M_PI / 64.0);
    for (int u = 0; u < 8; u++) /* rows: frequency u along y */
        for (int x = 0; x < 32; x++) {
            double s = 0;
            for (int y = 0; y < 32; y++) s += cs[u][y] * g[y][x];
            d[u][x] = s;
        }
    for (int u = 0; u < 8; u++)
        for (int v = 0; v < 8; v++) {
            double s = 0;
            for (int x = 0; x < 32; x++) s += cs[v][x] * d[u][x];
            coef[u * 8 + v] = s;
        }
    double sorted[63];
    memcpy(sorted, coef + 1, sizeof sorted);
    for (int i = 1; i < 63; i++) /* insertion sort, 63 values */
        for (int j = i; j > 0 && sorted[j] < sorted[j - 1]; j--) {
            double t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    double med = sorted[31];
    uint64_t hsh = 0;
    for (int i = 0; i < 64; i++)
        if (coef[i] > med) hsh |= (uint64_t)1 << i;
    return hsh;
}

int ingest_figures_export(ing_pagectx *pc, const unsigned char *px, int pw, int ph, int stride,
                          double scale, ingest_page *out) {
    int n = 0;
    for (int r = 0; r < pc->n_regions; r++) n += !pc->regions[r].is_table;
    if (!n) return 0;
    out->images = calloc((size_t)n, sizeof *out->images);
    if (!out->images) return INGEST_ERR_NOMEM;
    for (int r = 0; r < pc->n_regions; r++) {
        ing_region *rg = &pc->regions[r];
        if (rg->is_table) continue;
        ingest_image *im = &out->images[out->n_images];
        rg->image = out->n_images++;
        im->page = out->number;
        im->kind = rg->raster ? INGEST_IMAGE_RASTER : INGEST_IMAGE_VECTOR;
        im->box = (ingest_box){(float)(rg->b.x0 / pc->w), (float)(rg->b.y0 / pc->h),
                               (float)(rg->b.x1 / pc->w), (float)(rg->b.y1 / pc->h)};
        im->caption_chunk = -1;
        if (!px) continue;
        int x0 = (int)floor(rg->b.x0 * scale), y0 = (int)floor(rg->b.y0 * scale);
        int x1 = (int)ceil(rg->b.x1 * scale), y1 = (int)ceil(rg->b.y1 * scale);
        if (x0 < 0) x0 = 0;
        if (y0 < 0) y0 = 0;
        if (x1 > pw) x1 = pw;
        if (y1 > ph) y1 = ph;
        if (x1 <= x0 || y1 <= y0) continue;
        const unsigned char *origin = px + (size_t)y0 * stride + 4 * x0;
        im->width_px = x1 - x0;
        im->height_px = y1 - y0;
        im->phash = ingest_phash(origin, x1 - x0, y1 - y0, stride);
        int rc = ingest_png_encode(origin, x1 - x0, y1 - y0, stride, &im->png, &im->png_len);
        if (rc) return rc;
    }
    return 0;
}
