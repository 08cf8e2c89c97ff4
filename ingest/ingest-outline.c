/* ingest-outline — the section a chunk belongs to, as a heading path ("Commands > Set-show >
 * Logscale"). A question is often phrased in the words of the section title, not of the
 * paragraph under it, so the path is embedded and indexed with the chunk (retrieval).
 *
 * The source is the PDF outline (bookmarks: every LaTeX/DocBook manual has one), read once
 * per document: each entry's destination (page, top) orders the entries on the pages, and
 * the chunk's section is the last entry at or above its top. Without an outline, the last
 * heading chunk seen on this or an earlier page (pages pulled in order) stands alone. */
#include "ingest/ingest-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_MAX_LEVELS 3      /* deeper paths keep their last levels: the specific ones */
#define PATH_MAX_BYTES 160
#define OUTLINE_MAX 20000      /* a hostile outline cannot make us walk forever */
#define TOP_SLACK_PT 4.0       /* a destination sits a little above its heading's text */

typedef struct {
    int page;                  /* 1-based */
    double top;                /* PDF units from the page bottom (higher = nearer the top) */
    int order;                 /* position in the outline */
    char *path;
} ing_section;

struct ing_outline {
    ing_section *e;            /* sorted by (page, top descending) */
    int n, cap;
};

static int push(ing_outline *o, int page, double top, const char *path) {
    if (o->n == o->cap) {
        int cap = o->cap ? o->cap * 2 : 64;
        ing_section *n = realloc(o->e, (size_t)cap * sizeof *n);
        if (!n) return -1;
        o->e = n;
        o->cap = cap;
    }
    char *p = strdup(path);
    if (!p) return -1;
    o->e[o->n] = (ing_section){page, top, o->n, p};
    o->n++;
    return 0;
}

/* "a > b > c" from the titles of the open levels, last PATH_MAX_LEVELS of them */
static void join_path(char *const *titles, int depth, char *buf, size_t len) {
    size_t n = 0;
    buf[0] = 0;
    for (int i = depth >= PATH_MAX_LEVELS ? depth - PATH_MAX_LEVELS + 1 : 0; i <= depth; i++) {
        const char *t = titles[i] ? titles[i] : "";
        int w = snprintf(buf + n, len - n, "%s%s", n ? " > " : "", t);
        if (w < 0 || (size_t)w >= len - n) break;
        n += (size_t)w;
    }
    /* titles carry newlines and runs of spaces from the PDF strings */
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\r' || *p == '\t') *p = ' ';
}

/* destination of an outline action: page (1-based) and top (PDF units, origin bottom) */
static int action_dest(PopplerDocument *pd, PopplerAction *a, int *page, double *top) {
    if (!a || a->type != POPPLER_ACTION_GOTO_DEST || !a->goto_dest.dest) return 0;
    PopplerDest *d = a->goto_dest.dest, *named = NULL;
    if (d->type == POPPLER_DEST_NAMED) {
        if (!d->named_dest) return 0;
        d = named = poppler_document_find_dest(pd, d->named_dest);
        if (!d) return 0;
    }
    *page = d->page_num;
    *top = d->change_top ? d->top : 1e9;  /* no top: the whole page from its top */
    if (named) poppler_dest_free(named);
    return *page >= 1;
}

#define MAX_DEPTH 16
static int walk(PopplerDocument *pd, PopplerIndexIter *it, int depth, char **titles,
                ing_outline *o, int *budget) {
    do {
        if (--*budget < 0) return 0;
        PopplerAction *a = poppler_index_iter_get_action(it);
        int page = 0;
        double top = 0;
        int rc = 0;
        if (a && a->type == POPPLER_ACTION_GOTO_DEST) {
            free(titles[depth]);
            titles[depth] = strdup(a->goto_dest.title ? a->goto_dest.title : "");
            if (action_dest(pd, a, &page, &top)) {
                char path[PATH_MAX_BYTES];
                join_path(titles, depth, path, sizeof path);
                rc = push(o, page, top, path);
            }
        }
        if (a) poppler_action_free(a);
        if (rc) return -1;
        PopplerIndexIter *c = depth + 1 < MAX_DEPTH ? poppler_index_iter_get_child(it) : NULL;
        if (c) {
            rc = walk(pd, c, depth + 1, titles, o, budget);
            poppler_index_iter_free(c);
            if (rc) return -1;
        }
    } while (poppler_index_iter_next(it));
    return 0;
}

static int cmp_section(const void *a, const void *b) {
    const ing_section *x = a, *y = b;
    if (x->page != y->page) return x->page < y->page ? -1 : 1;
    if (x->top != y->top) return x->top > y->top ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order); /* qsort is not stable */
}

ing_outline *ingest_outline_load(PopplerDocument *pd) {
    ing_outline *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    PopplerIndexIter *it = poppler_index_iter_new(pd);
    if (!it) return o;  /* no outline: an empty one */
    char *titles[MAX_DEPTH] = {0};
    int budget = OUTLINE_MAX;
    int rc = walk(pd, it, 0, titles, o, &budget);
    for (int i = 0; i < MAX_DEPTH; i++) free(titles[i]);
    poppler_index_iter_free(it);
    if (rc) { ingest_outline_free(o); return NULL; }
    if (o->n > 1) qsort(o->e, (size_t)o->n, sizeof *o->e, cmp_section);
    return o;
}

int ingest_outline_size(const ing_outline *o) { return o ? o->n : 0; }

void ingest_outline_free(ing_outline *o) {
    if (!o) return;
    for (int i = 0; i < o->n; i++) free(o->e[i].path);
    free(o->e);
    free(o);
}

/* the last entry at or above (page, top); top in PDF units from the page bottom */
const char *ingest_outline_section(const ing_outline *o, int page, double top) {
    if (!o || !o->n) return NULL;
    int lo = 0, hi = o->n;  /* first entry after the point */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        const ing_section *e = &o->e[mid];
        int after = e->page > page || (e->page == page && e->top + TOP_SLACK_PT < top);
        if (after) hi = mid; else lo = mid + 1;
    }
    return lo > 0 ? o->e[lo - 1].path : NULL;
}

/* a heading's text on one line, at most PATH_MAX_BYTES (cut at a UTF-8 boundary) */
static char *heading_text(const char *t) {
    size_t n = strlen(t);
    if (n >= PATH_MAX_BYTES) {
        n = PATH_MAX_BYTES - 1;
        while (n > 0 && ((unsigned char)t[n] & 0xC0) == 0x80) n--;
    }
    char *s = strndup(t, n);
    if (!s) return NULL;
    for (char *p = s; *p; p++)
        if (*p == '\n' || *p == '\r' || *p == '\t') *p = ' ';
    return s;
}

int ingest_sections_assign(const ing_outline *o, ingest_page *pg, char **last) {
    int outline = ingest_outline_size(o) > 0;
    for (int32_t i = 0; i < pg->n_chunks; i++) {
        ingest_chunk *c = &pg->chunks[i];
        const char *sec = NULL;
        if (outline) {
            sec = ingest_outline_section(o, pg->number, pg->height_pt * (1.0 - c->box.y0));
        } else {
            if (c->kind == INGEST_CHUNK_HEADING && c->text && *c->text) {
                char *h = heading_text(c->text);
                if (!h) return INGEST_ERR_NOMEM;
                free(*last);
                *last = h;
            }
            sec = *last;
        }
        c->section = strdup(sec ? sec : "");
        if (!c->section) return INGEST_ERR_NOMEM;
    }
    return INGEST_OK;
}
