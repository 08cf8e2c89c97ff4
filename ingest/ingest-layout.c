/* Text layer → line fragments → reading order → blocks.
 * Poppler gives one rectangle per UTF-8 character of poppler_page_get_text (points, origin
 * top-left) and font sizes as character ranges. A fragment is a run of characters on one
 * line without a wide horizontal gap (so table cells and columns stay apart). Reading
 * order: a vertical white gutter splits two columns; fragments that cross it (titles,
 * full-width lines) separate sections, read top to bottom, each section left column first. */
#include "ingest/ingest-internal.h"
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int ingest_layout_add_frag(ing_pagectx *pc, ingest_box b, float size, const char *text, int len) {
    while (len > 0 && (text[len - 1] == ' ' || text[len - 1] == '\t')) len--;
    while (len > 0 && (*text == ' ' || *text == '\t')) { text++; len--; }
    if (len <= 0) return 0;
    if (pc->n_frags == pc->cap_frags) {
        int cap = pc->cap_frags ? pc->cap_frags * 2 : 64;
        ing_frag *nf = realloc(pc->frags, (size_t)cap * sizeof *nf);
        if (!nf) return INGEST_ERR_NOMEM;
        pc->frags = nf;
        pc->cap_frags = cap;
    }
    char *t = malloc((size_t)len + 1);
    if (!t) return INGEST_ERR_NOMEM;
    memcpy(t, text, (size_t)len);
    t[len] = 0;
    pc->frags[pc->n_frags++] = (ing_frag){b, size, t, FRAG_TEXT, 0, -1, 0, -1, 0, 0, 0};
    return 0;
}

/* 1 when font name contains one of marks (lower case) */
static int font_has(const char *name, const char *const *marks, size_t n_marks) {
    char low[64];
    size_t n = 0;
    for (; name && name[n] && n < sizeof low - 1; n++) low[n] = (char)tolower((unsigned char)name[n]);
    low[n] = 0;
    for (size_t k = 0; k < n_marks; k++)
        if (strstr(low, marks[k])) return 1;
    return 0;
}

/* 1 for a typewriter face (a listing's, a program's output): "CMTT10", "LMMono10-Regular",
 * "NimbusMonL-Regu", "Courier", "SourceCodePro-Regular" */
static int mono_font(const char *name) {
    static const char *const marks[] = {"mono", "courier", "cmtt", "cmsltt", "sftt", "txtt",
                                        "nimbusmon", "code", "consol", "menlo", "typewriter"};
    return font_has(name, marks, sizeof marks / sizeof *marks);
}

/* 1 for a bold face: "CMBX10", "SFBX1000", "LMRoman10-Bold", "NimbusRomNo9L-Medi",
 * "Helvetica-Black", "SourceSansPro-Semibold" */
static int bold_font(const char *name) {
    static const char *const marks[] = {"bold", "cmbx", "sfbx", "ecbx", "lmbx", "-bd", "black",
                                        "heavy", "demi", "medi"};
    return font_has(name, marks, sizeof marks / sizeof *marks);
}

static int is_space_char(gunichar c) { return c == ' ' || c == '\t' || c == 0xA0 || c == '\r'; }

/* 1 when character b follows a in a column: text turned a quarter (a plot's y-axis title and
 * tick labels), whose characters poppler gives in reading order, each on its own baseline.
 * Turned glyphs share one box across (the line's height) and abut along the column, or lie
 * a space apart (spaced); glyphs stacked in a formula (a fraction) rarely do both. */
static int stacked(ingest_box a, ingest_box b, int spaced, float size) {
    if (fabsf(a.x0 - b.x0) > 0.5f || fabsf(a.x1 - b.x1) > 0.5f) return 0;
    float gap = b.y0 >= a.y1 - 0.5f ? b.y0 - a.y1 : a.y0 >= b.y1 - 0.5f ? a.y0 - b.y1 : -1;
    return gap >= -0.5f && gap <= (spaced ? 0.6f : 0.15f) * size;
}

/* the fragment being read: its text so far, box, font size and the marks of its characters */
typedef struct {
    const char *start, *end;   /* UTF-8 bytes of its text; start NULL when none is open */
    ingest_box b, last;        /* its box, its last character's */
    float size;
    int n_mono, n_all;         /* its characters in a typewriter face, all of them */
    int bold;                  /* its first character is bold */
    int column;                /* it runs up or down the page: turned text */
} open_frag;

/* Adds the open fragment, if any, to the page and closes it. */
static int frag_close(ing_pagectx *pc, open_frag *o) {
    if (!o->start) return 0;
    int n = pc->n_frags, rc = ingest_layout_add_frag(pc, o->b, o->size, o->start, (int)(o->end - o->start));
    if (rc == 0 && pc->n_frags > n) {
        pc->frags[n].mono = 2 * o->n_mono > o->n_all;
        pc->frags[n].lead_bold = o->bold;
        pc->frags[n].turned = o->column;
    }
    o->start = NULL;
    return rc;
}

/* How character cb (size sz; spaced: after a space) goes on from the open fragment: 2 next
 * in its column of turned text, 1 on its baseline without a wide gap or a jump back, 0 not. */
static int frag_continues(const open_frag *o, ingest_box cb, float sz, int spaced) {
    float size = ing_maxf(o->size, sz), limit = 1.5f * size, gap = cb.x0 - o->last.x1;
    float yc = (cb.y0 + cb.y1) / 2;
    if ((o->column || o->n_all == 1) && stacked(o->last, cb, spaced, size)) return 2;
    return !o->column && gap <= limit && gap >= -limit && yc >= o->b.y0 && yc <= o->b.y1;
}

/* Character cb at p (mark m: bit 0 typewriter, bit 1 bold) joins the open fragment, the
 * next in its column when column, or opens one. */
static void frag_add(open_frag *o, const char *p, ingest_box cb, float sz, unsigned char m, int column) {
    if (!o->start) {
        *o = (open_frag){p, p, cb, cb, sz, 0, 0, m >> 1, 0};
    } else {
        o->column |= column;
        o->b = ing_box_union(o->b, cb);
        o->size = ing_maxf(o->size, sz);
    }
    o->last = cb;
    o->n_mono += m & 1;
    o->n_all++;
    o->end = g_utf8_next_char(p);
}

int ingest_layout_extract(ing_pagectx *pc) {
    char *text = poppler_page_get_text(pc->pp);
    PopplerRectangle *rects = NULL;
    guint n_rects = 0;
    if (!text) return 0;
    if (!poppler_page_get_text_layout(pc->pp, &rects, &n_rects) || !n_rects) {
        g_free(text);
        g_free(rects);
        return 0;
    }
    float *sizes = calloc(n_rects, sizeof *sizes);
    unsigned char *mono = calloc(n_rects, 1); /* bit 0: typewriter face, bit 1: bold */
    pc->chars = malloc(n_rects * sizeof *pc->chars);
    if (!sizes || !mono || !pc->chars) {
        free(sizes);
        free(mono);
        g_free(text);
        g_free(rects);
        return INGEST_ERR_NOMEM;
    }
    GList *attrs = poppler_page_get_text_attributes(pc->pp);
    for (GList *l = attrs; l; l = l->next) {
        PopplerTextAttributes *a = l->data;
        int m = mono_font(a->font_name) | bold_font(a->font_name) << 1;
        for (int i = a->start_index; i <= a->end_index && i < (int)n_rects; i++)
            if (i >= 0) sizes[i] = (float)a->font_size, mono[i] = (unsigned char)m;
    }
    poppler_page_free_text_attributes(attrs);

    int rc = 0, spaced = 0;   /* spaced: a space came after the last character */
    const char *p = text;
    open_frag o = {0};
    for (guint i = 0; i < n_rects && *p && rc == 0; i++, p = g_utf8_next_char(p)) {
        gunichar c = g_utf8_get_char(p);
        PopplerRectangle r = rects[i];
        ingest_box cb = {(float)r.x1, (float)r.y1, (float)r.x2, (float)r.y2};
        float sz = sizes[i] > 0 ? sizes[i] : cb.y1 - cb.y0;
        if (c == '\n' || is_space_char(c)) {
            if (c == '\n') rc = frag_close(pc, &o);
            spaced = 1;
            continue;
        }
        pc->chars[pc->n_chars++] = cb;
        int step = o.start ? frag_continues(&o, cb, sz, spaced) : 0;
        if (o.start && !step) rc = frag_close(pc, &o);
        frag_add(&o, p, cb, sz, mono[i], step == 2);
        spaced = 0;
    }
    if (rc == 0) rc = frag_close(pc, &o);
    free(sizes);
    free(mono);
    g_free(text);
    g_free(rects);
    return rc;
}

/* "Figure 2: ...", "Fig. 3", "Chart 1", "Plate 4", "Photo 1" → 1; "Table 1" → 2; else 0 */
int ingest_caption_kind(const char *t) {
    static const struct { const char *w; int kind; } words[] = {
        {"figure", 1}, {"fig.", 1}, {"fig", 1}, {"chart", 1}, {"plate", 1}, {"photo", 1},
        {"diagram", 1}, {"graph", 1}, {"table", 2}, {"tab.", 2},
    };
    for (size_t k = 0; k < sizeof words / sizeof *words; k++) {
        size_t n = strlen(words[k].w);
        if (strncasecmp(t, words[k].w, n)) continue;
        const char *q = t + n;
        while (*q == ' ') q++;
        if (!isdigit((unsigned char)*q)) continue;
        while (isdigit((unsigned char)*q) || *q == '.') q++;
        if (*q == 0 || *q == ':' || *q == ' ' || *q == '-' || *q == ')' || (unsigned char)*q >= 0x80)
            return words[k].kind;
    }
    return 0;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* 1 when f is set at a heading's size, or bigger */
static int display_size(const ing_pagectx *pc, const ing_frag *f) { return f->size >= 1.2f * pc->body_size; }

int ingest_layout_big_glyph(const ing_pagectx *pc, const ing_frag *f) {
    int alnum = 0;
    for (const char *q = f->text; *q && alnum < 2; q++) alnum += isalnum((unsigned char)*q) != 0;
    return display_size(pc, f) && alnum < 2;
}

void ingest_layout_classify(ing_pagectx *pc) {
    if (!pc->n_frags) return;
    /* body size: median over fragments weighted by their length */
    size_t total = 0;
    for (int i = 0; i < pc->n_frags; i++) total += strlen(pc->frags[i].text);
    float *s = malloc(total * sizeof *s);
    if (s) {
        size_t k = 0;
        for (int i = 0; i < pc->n_frags; i++)
            for (size_t j = strlen(pc->frags[i].text); j > 0; j--) s[k++] = pc->frags[i].size;
        qsort(s, k, sizeof *s, cmp_float);
        pc->body_size = s[k / 2];
        free(s);
    } else {
        pc->body_size = pc->frags[0].size;
    }
    for (int i = 0; i < pc->n_frags; i++) {
        ing_frag *f = &pc->frags[i];
        f->caption_kind = ingest_caption_kind(f->text);
        if (f->caption_kind) {
            f->kind = FRAG_CAPTION;
            continue;
        }
        int words = 1;
        for (const char *q = f->text; *q; q++) words += *q == ' ';
        /* turned text (a sideways label, an arXiv margin stamp) heads no section */
        if (display_size(pc, f) && words <= 20 && !f->turned && !ingest_layout_big_glyph(pc, f))
            f->kind = FRAG_HEADING;
    }
}

/* ---------- reading order ---------- */

static int cmp_frag_y(const void *a, const void *b) {
    const ing_frag *x = a, *y = b;
    if (x->col != y->col) return x->col - y->col;
    float d = x->b.y0 - y->b.y0;
    if (d != 0) return d < 0 ? -1 : 1;
    return (x->b.x0 > y->b.x0) - (x->b.x0 < y->b.x0);
}

/* Find a column gutter: a vertical band in the middle half of the text area that no
 * narrow text line touches, with at least three real text lines on each side.
 * Returns 1 and the band [*g0, *g1] in points. */
static int find_gutter(const ing_pagectx *pc, float *g0, float *g1) {
    ingest_box all = {1e9f, 1e9f, -1e9f, -1e9f};
    int n = 0;
    for (int i = 0; i < pc->n_frags; i++)
        if (pc->frags[i].region < 0) { all = ing_box_union(all, pc->frags[i].b); n++; }
    float width = all.x1 - all.x0;
    if (n < 6 || width < 100) return 0;
    int bins = (int)width + 1;
    unsigned char *cov = calloc((size_t)bins, 1);
    if (!cov) return 0;
    for (int i = 0; i < pc->n_frags; i++) {
        const ing_frag *f = &pc->frags[i];
        if (f->region >= 0 || f->b.x1 - f->b.x0 > 0.6f * width) continue;
        int a = (int)(f->b.x0 - all.x0), b = (int)(f->b.x1 - all.x0) + 1;
        for (int x = a < 0 ? 0 : a; x < b && x < bins; x++) cov[x] = 1;
    }
    int best0 = -1, best_len = 0;
    int lo = (int)(width * 0.25f), hi = (int)(width * 0.75f);
    for (int x = lo; x < hi;) {
        if (cov[x]) { x++; continue; }
        int e = x;
        while (e < bins && !cov[e]) e++;
        if (e - x > best_len) { best_len = e - x; best0 = x; }
        x = e;
    }
    free(cov);
    if (best_len < 8) return 0;
    *g0 = all.x0 + (float)best0;
    *g1 = *g0 + (float)best_len;
    int left = 0, right = 0;
    for (int i = 0; i < pc->n_frags; i++) {
        const ing_frag *f = &pc->frags[i];
        if (f->region >= 0 || f->b.x1 - f->b.x0 < 0.25f * width) continue;
        if (f->b.x1 <= *g0) left++;
        else if (f->b.x0 >= *g1) right++;
    }
    return left >= 3 && right >= 3;
}

/* Sort fragments into reading order (sets ->col as the sort group). */
static void order_fragments(ing_pagectx *pc) {
    float g0, g1;
    int two = find_gutter(pc, &g0, &g1);
    for (int i = 0; i < pc->n_frags; i++) pc->frags[i].col = 0;
    if (two) {
        /* walk top to bottom: a run of spanning fragments (crossing the gutter) is one
         * section, the two-column stretch between such runs is the next */
        if (pc->n_frags > 1) qsort(pc->frags, (size_t)pc->n_frags, sizeof *pc->frags, cmp_frag_y);
        int sec = 0, mode = -1; /* 1 = spanning run, 0 = columns */
        for (int i = 0; i < pc->n_frags; i++) {
            ing_frag *f = &pc->frags[i];
            ingest_box fb = f->region >= 0 ? pc->regions[f->region].b : f->b; /* figure labels go with their figure */
            int spanning = fb.x0 < g1 && fb.x1 > g0;
            if (spanning != mode) { if (mode >= 0) sec++; mode = spanning; }
            f->col = 2 * sec + (!spanning && fb.x0 >= g1 ? 1 : 0);
        }
    }
    /* no fragments = no array (qsort on NULL is undefined: found by the pdf fuzz target) */
    if (pc->n_frags > 1) qsort(pc->frags, (size_t)pc->n_frags, sizeof *pc->frags, cmp_frag_y);
    /* within a group, fragments on the same row (table cells) read left to right */
    for (int i = 0; i < pc->n_frags;) {
        int j = i + 1;
        float h = pc->frags[i].b.y1 - pc->frags[i].b.y0;
        while (j < pc->n_frags && pc->frags[j].col == pc->frags[i].col &&
               pc->frags[j].b.y0 < pc->frags[i].b.y0 + 0.5f * h)
            j++;
        for (int a = i + 1; a < j; a++) /* insertion sort by x: rows are short */
            for (int b = a; b > i && pc->frags[b].b.x0 < pc->frags[b - 1].b.x0; b--) {
                ing_frag t = pc->frags[b];
                pc->frags[b] = pc->frags[b - 1];
                pc->frags[b - 1] = t;
            }
        i = j;
    }
}

/* Group ordered fragments into blocks: a new block starts at a change of kind, region or
 * column group, a vertical gap wider than half a line, or a caption/heading start. */
int ingest_layout_order(ing_pagectx *pc) {
    /* sorting moves fragments: remember where each came from to fix region captions */
    for (int i = 0; i < pc->n_frags; i++) pc->frags[i].block = i;
    order_fragments(pc);
    int *where = malloc(((size_t)pc->n_frags + 1) * sizeof *where);
    if (!where) return INGEST_ERR_NOMEM;
    for (int i = 0; i < pc->n_frags; i++) where[pc->frags[i].block] = i;
    for (int r = 0; r < pc->n_regions; r++)
        if (pc->regions[r].caption_frag >= 0) pc->regions[r].caption_frag = where[pc->regions[r].caption_frag];
    free(where);
    free(pc->blocks);
    pc->blocks = calloc((size_t)pc->n_frags + 1, sizeof *pc->blocks);
    pc->n_blocks = 0;
    if (!pc->blocks) return INGEST_ERR_NOMEM;
    ing_block *cur = NULL;
    for (int i = 0; i < pc->n_frags; i++) {
        ing_frag *f = &pc->frags[i];
        int fresh = !cur;
        if (cur) {
            const ing_frag *prev = &pc->frags[i - 1];
            float gap = f->b.y0 - prev->b.y1;
            int same_row = f->b.y0 < prev->b.y1 && f->b.y1 > prev->b.y0;
            fresh = f->kind != cur->kind || f->region != cur->region || f->col != prev->col ||
                    (f->kind == FRAG_CAPTION && f->caption_kind && cur->n > 0 &&
                     !same_row) ||
                    (!same_row && gap > 0.5f * ing_maxf(f->size, prev->size)) ||
                    (f->kind != FRAG_TABLE && f->kind != FRAG_FIGURE &&
                     (f->size > prev->size * 1.15f || prev->size > f->size * 1.15f));
            /* a caption's continuation lines: same size, close, no new "Figure N" */
            if (cur->kind == FRAG_CAPTION && f->kind == FRAG_TEXT && !f->caption_kind &&
                gap >= 0 && gap < 0.5f * f->size && f->col == prev->col &&
                f->size < prev->size * 1.05f && f->size > prev->size * 0.95f) {
                f->kind = FRAG_CAPTION;
                fresh = 0;
            }
        }
        if (fresh) {
            cur = &pc->blocks[pc->n_blocks++];
            *cur = (ing_block){f->b, f->kind, i, 0, f->region, -1};
        }
        cur->b = ing_box_union(cur->b, f->b);
        cur->n++;
        f->block = pc->n_blocks - 1;
    }
    return 0;
}

void ingest_pagectx_clear(ing_pagectx *pc) {
    for (int i = 0; i < pc->n_frags; i++) free(pc->frags[i].text);
    free(pc->frags);
    free(pc->chars);
    free(pc->regions);
    free(pc->charts);
    free(pc->blocks);
    if (pc->img_map) poppler_page_free_image_mapping(pc->img_map);
    memset(pc, 0, sizeof *pc);
}
