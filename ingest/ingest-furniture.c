/* Running headers and footers ("Debian Reference | 22 / 233", "gnuplot 5.4 | 219").
 * A line near the top or bottom edge whose exact text stood at the same height on two
 * earlier pages of the document is page furniture, and so is a bare page number there
 * ("17", "- 17 -", "22 / 233", "Page 3 of 9", "xiv"; not "9.4", a section number). Both
 * are dropped before chunking: as chunks they are noise for search (14% of
 * debian-reference's chunks were its header) and as text they glue a title onto the
 * first paragraph of each page. A repeated line goes from its third page on (the first
 * may be the title; a heading may stand at one height twice), and only when nothing kept
 * stands between it and the edge and a gap sets it apart from the body. Memory: a fixed
 * table of lines. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ingest/ingest-internal.h"

#define EDGE 0.09f     /* top and bottom zones, as a fraction of the page height (gnuplot's
                          header sits at 0.07-0.08; a table's header row below it stays) */
#define YBUCKETS 400   /* line positions compared in 1/400ths of the page height */

/* front-matter page numbers: i .. xx */
static int is_roman(const char *s) {
    static const char *const r[] = {"i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix", "x",
                                    "xi", "xii", "xiii", "xiv", "xv", "xvi", "xvii", "xviii",
                                    "xix", "xx", NULL};
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) n--;
    for (int i = 0; r[i]; i++)
        if (strlen(r[i]) == n && strncasecmp(s, r[i], n) == 0) return 1;
    return 0;
}

/* FNV-1a of the exact text, whitespace runs as one space (digits count: "Chapter 3" and
 * "Chapter 4" headings at the same height are not a running header). Also counts the
 * digit runs and words for the page-number test. */
static uint64_t line_sig(const char *t, int *only_number) {
    uint64_t h = 1469598103934665603ull;
    int prev = ' ', words = 0, numbers = 0, page_word = 0;
    for (const unsigned char *p = (const unsigned char *)t; *p; p++) {
        int c = isspace(*p) ? ' ' : *p;
        if (c == ' ' && prev == ' ') continue;
        if (isdigit(c) && !isdigit(prev)) numbers++;
        if (c != ' ' && prev == ' ') words++;
        prev = c;
        h = (h ^ (uint64_t)c) * 1099511628211ull;
    }
    /* "17", "- 17 -", "22 / 233", "page 3", "page 3 of 9", "iv" are page numbers */
    const char *s = t;
    while (*s && isspace((unsigned char)*s)) s++;
    if (strncasecmp(s, "page", 4) == 0) page_word = 1;
    int letters = 0;
    for (const char *p = t; *p; p++) letters += isalpha((unsigned char)*p) != 0;
    int slash = strchr(t, '/') != NULL, dot = strchr(t, '.') != NULL;
    *only_number = (letters == 0 && words <= 3 && !dot && (numbers == 1 || (numbers == 2 && slash))) ||
                   (page_word && numbers >= 1 && letters <= 6) || is_roman(s);
    return h;
}

static int ybucket(const ing_pagectx *pc, const ing_frag *f) {
    return (int)(f->b.y0 / pc->h * YBUCKETS + 0.5f);
}

/* The line's entry (same text at about the same height), or NULL. */
static ing_furniture_line *find_line(ing_furniture *t, uint64_t sig, int yb) {
    for (int i = 0; i < t->n; i++)
        if (t->e[i].sig == sig && abs(t->e[i].ybucket - yb) <= 1) return &t->e[i];
    return NULL;
}

/* Counts the page the line is on; returns on how many earlier pages it stood. */
static int remember(ing_furniture *t, uint64_t sig, int yb, int page) {
    ing_furniture_line *l = find_line(t, sig, yb);
    if (!l) {
        int slot = t->n;
        if (t->n < ING_FURNITURE_MAX) {
            t->n++;
        } else { /* full: the line seen on the fewest pages, longest ago, makes room */
            slot = 0;
            for (int i = 1; i < t->n; i++)
                if (t->e[i].pages < t->e[slot].pages ||
                    (t->e[i].pages == t->e[slot].pages && t->e[i].page < t->e[slot].page))
                    slot = i;
        }
        l = &t->e[slot];
        *l = (ing_furniture_line){sig, yb, 0, 0};
    }
    if (l->page != page) {
        l->page = page;
        l->pages++;
    }
    return l->pages - 1;
}

/* zone fragments, nearest the edge first */
typedef struct { int i; float dist; } zone_item;
static int cmp_dist(const void *a, const void *b) {
    float x = ((const zone_item *)a)->dist, y = ((const zone_item *)b)->dist;
    return (x > y) - (x < y);
}

/* Is a kept fragment of the same zone between f and the edge? A running line stands
 * between the edge and the body, so a repeated line with kept text above it (below it,
 * at the foot) belongs to the body. */
static int blocked(const ing_pagectx *pc, const zone_item *z, int upto, const char *drop, int top) {
    const ing_frag *f = &pc->frags[z[upto].i];
    for (int k = 0; k < upto; k++) {
        const ing_frag *g = &pc->frags[z[k].i];
        int outside = top ? g->b.y1 <= f->b.y0 : g->b.y0 >= f->b.y1;
        if (outside && !drop[z[k].i]) return 1;
    }
    return 0;
}

/* Does f keep its distance from the body? The nearest kept line on the inner side is more
 * than 1.2 of f's line heights away: headers and footers stand apart, while a page's last
 * body line that happens to read the same page after page ("Syntax:") does not. */
static int apart(const ing_pagectx *pc, int fi, const char *drop, int top) {
    const ing_frag *f = &pc->frags[fi];
    float gap = pc->h;
    for (int i = 0; i < pc->n_frags; i++) {
        const ing_frag *g = &pc->frags[i];
        if (i == fi || drop[i]) continue;
        float d = top ? g->b.y0 - f->b.y1 : f->b.y0 - g->b.y1;
        if (d >= 0 && d < gap) gap = d;
    }
    return gap > 1.2f * (f->b.y1 - f->b.y0);
}

void ingest_furniture_strip(ing_furniture *t, ing_pagectx *pc, int page) {
    char *drop = calloc((size_t)pc->n_frags + 1, 1);
    zone_item *z = malloc(((size_t)pc->n_frags + 1) * sizeof *z);
    if (!drop || !z) { free(drop); free(z); return; } /* out of memory: keep everything */
    for (int top = 1; top >= 0; top--) {
        int nz = 0;
        for (int i = 0; i < pc->n_frags; i++) {
            const ing_frag *f = &pc->frags[i];
            if (top ? f->b.y1 <= EDGE * pc->h : f->b.y0 >= (1.0f - EDGE) * pc->h)
                z[nz++] = (zone_item){i, top ? f->b.y0 : pc->h - f->b.y1};
        }
        if (nz > 1) qsort(z, (size_t)nz, sizeof *z, cmp_dist);
        for (int k = 0; k < nz; k++) {
            const ing_frag *f = &pc->frags[z[k].i];
            int number;
            uint64_t sig = line_sig(f->text, &number);
            /* a third page with the same line: a heading repeats at one height on two
             * pages now and then ("Examples"), a running header on every page */
            int earlier = remember(t, sig, ybucket(pc, f), page);
            drop[z[k].i] = number || (earlier >= 2 && !blocked(pc, z, k, drop, top) &&
                                      apart(pc, z[k].i, drop, top));
        }
    }
    int kept = 0;
    for (int i = 0; i < pc->n_frags; i++) {
        if (drop[i]) free(pc->frags[i].text);
        else pc->frags[kept++] = pc->frags[i];
    }
    pc->n_frags = kept;
    free(drop);
    free(z);
}
