/* Private to ingest/: the per-page working set shared by the layout, figure, OCR and
 * chunking passes. Boxes here are in points, origin top-left (Poppler's text layout). */
#ifndef MMRAG_INGEST_INTERNAL_H
#define MMRAG_INGEST_INTERNAL_H
#include "ingest/ingest.h"
#include <poppler.h>

/* what a line fragment is, decided by the layout and figure passes */
enum {
    FRAG_TEXT = 0,
    FRAG_HEADING,
    FRAG_CAPTION,   /* starts with "Figure N" / "Fig. N" / "Chart N" / "Table N" ... */
    FRAG_FIGURE,    /* inside (or a label of) a figure region */
    FRAG_TABLE,     /* inside a ruled table region */
};

typedef struct {
    ingest_box b;       /* points */
    float size;         /* font size (max over its characters) */
    char *text;         /* UTF-8, owned by the fragment list */
    int kind;           /* FRAG_* */
    int caption_kind;   /* 0 none, 1 figure-like caption, 2 table caption */
    int region;         /* index into page regions (figure/table) or -1 */
    int col;            /* reading-order group: 2*section (+column) */
    int block;          /* block index after blocking */
    int mono;           /* 1 when most of its characters are set in a typewriter face */
    int lead_bold;      /* 1 when its first character is set in a bold face ("Figure 1" as a label) */
    int turned;         /* 1 when its characters run up or down the page (text turned a quarter) */
} ing_frag;

typedef struct {
    ingest_box b;       /* points */
    int kind;           /* FRAG_* of its fragments */
    int first, n;       /* fragments [first, first+n) in reading order */
    int region;         /* figure/table region or -1 */
    int anchor;         /* page-local image index or -1 */
} ing_block;

/* a figure or table region found on the page; figures become ingest_images */
typedef struct {
    ingest_box b;       /* points */
    int is_table;
    int raster;         /* 1 = embedded bitmap, 0 = vector region */
    int caption_frag;   /* fragment index of its caption line, or -1 */
    int image;          /* page-local image index, or -1 for tables */
    int rule;           /* a horizontal rule: bounds a ruled figure, never one itself */
    int graphic;        /* vector ink that is a picture by itself: kept without a caption */
    int frame;          /* a wide outline with nothing but text inside (a listing's frame) */
} ing_region;

/* a buffer kept by the document and reused page after page (one thread at a time) */
typedef struct {
    unsigned char *p;
    size_t cap;
} ing_scratch;
unsigned char *ingest_scratch(ing_scratch *s, size_t n); /* at least n bytes, or NULL */

typedef struct {
    PopplerPage *pp;
    ing_scratch *scratch;        /* per-pixel work map for figure detection */
    GList *img_map;              /* poppler_page_get_image_mapping, fetched once */
    int img_map_done;
    double w, h;                 /* points */
    ing_frag *frags;
    int n_frags, cap_frags;
    ingest_box *chars;           /* non-space character boxes (for masking) */
    int n_chars;
    ing_region *regions;
    int n_regions, cap_regions;
    ingest_box *charts;          /* charts of samples, kept where no figure lies (ingest-figures.c) */
    int n_charts;
    ing_block *blocks;
    int n_blocks;
    float body_size;
    uint32_t paper;              /* the render's paper colour, 0xFFRRGGBB, on a tinted page; 0: white */
} ing_pagectx;

/* ingest-furniture.c: running headers/footers and page numbers, across pages */
#define ING_FURNITURE_MAX 64
typedef struct { uint64_t sig; int ybucket, page, pages; } ing_furniture_line; /* last page, count */
typedef struct { ing_furniture_line e[ING_FURNITURE_MAX]; int n; } ing_furniture;
/* drops the page's furniture fragments (call right after ingest_layout_extract) */
void ingest_furniture_strip(ing_furniture *t, ing_pagectx *pc, int page);

/* ingest-layout.c */
int ingest_layout_extract(ing_pagectx *pc);          /* fragments from the text layer */
int ingest_layout_add_frag(ing_pagectx *pc, ingest_box b, float size, const char *text, int len);
void ingest_layout_classify(ing_pagectx *pc);        /* body size, headings, captions */
/* 1 when f is set at a heading's size yet holds fewer than two letters or digits (a drop cap,
 * a drawing's "P" in a circle): no heading, though it parts pieces of ink like one */
int ingest_layout_big_glyph(const ing_pagectx *pc, const ing_frag *f);
int ingest_layout_order(ing_pagectx *pc);            /* reading order + blocks */
void ingest_pagectx_clear(ing_pagectx *pc);
int ingest_caption_kind(const char *text);

/* ingest-figures.c */
/* fetch the image map; 1 if it holds a figure-sized image that is not a page-sized scan */
int ingest_figures_map(ing_pagectx *pc);
int ingest_figures_raster(ing_pagectx *pc, int ocr_page);
int ingest_figures_need_render(const ing_pagectx *pc);
int ingest_figures_probe(ing_pagectx *pc);   /* 1: a text page may hold a graphic */
int ingest_figures_detect(ing_pagectx *pc, const unsigned char *px, int pw, int ph, int stride,
                          double scale);
/* px: the page render (NULL when none or an OCR page): a lone caption's block is read from it */
void ingest_figures_pair_captions(ing_pagectx *pc, const unsigned char *px, int pw, int ph,
                                  int stride, double scale);
int ingest_figures_export(ing_pagectx *pc, const unsigned char *px, int pw, int ph, int stride,
                          double scale, ingest_page *out);
uint64_t ingest_phash(const unsigned char *px, int w, int h, int stride);
/* Render a page of w x h points at dpi, or at the lower ingest_render_dpi() when the page
 * is too large for that (posters, drawings); NULL when cairo fails. */
cairo_surface_t *ingest_render(PopplerPage *pp, double w, double h, double dpi);
double ingest_render_dpi(double w, double h, double dpi);

/* ingest-png.c: 8-bit RGB PNG of a BGRA area; *out is malloc'd */
int ingest_png_encode(const unsigned char *bgra, int w, int h, int stride, uint8_t **out, size_t *len);

/* ingest-ocr.c: the engine is created lazily once per document */
typedef struct ing_ocr ing_ocr;
int ingest_ocr_page(ing_ocr **eng, const char *tessdata, ing_pagectx *pc, char *err, size_t errlen);
void ingest_ocr_free(ing_ocr *eng);

/* ingest-chunk.c */
int ingest_chunk_page(ing_pagectx *pc, const ingest_options *o, int ocr_page, int32_t *next_order,
                      ingest_page *out);

/* ingest-outline.c: the document outline as heading paths by position */
typedef struct ing_outline ing_outline;
ing_outline *ingest_outline_load(PopplerDocument *pd);   /* NULL = out of memory */
void ingest_outline_free(ing_outline *o);
int ingest_outline_size(const ing_outline *o);
const char *ingest_outline_section(const ing_outline *o, int page, double top);
/* the outline's, else the last heading seen (*last, carried across pages in order) */
int ingest_sections_assign(const ing_outline *o, ingest_page *pg, char **last);

/* helpers */
static inline float ing_maxf(float a, float b) { return a > b ? a : b; }
static inline float ing_minf(float a, float b) { return a < b ? a : b; }
static inline ingest_box ing_box_union(ingest_box a, ingest_box b) {
    return (ingest_box){ing_minf(a.x0, b.x0), ing_minf(a.y0, b.y0), ing_maxf(a.x1, b.x1),
                        ing_maxf(a.y1, b.y1)};
}
/* gap between two boxes (0 when they overlap) */
static inline float ing_box_dist(ingest_box a, ingest_box b) {
    float dx = ing_maxf(0, ing_maxf(a.x0 - b.x1, b.x0 - a.x1));
    float dy = ing_maxf(0, ing_maxf(a.y0 - b.y1, b.y0 - a.y1));
    return dx > dy ? dx : dy;
}
#endif
