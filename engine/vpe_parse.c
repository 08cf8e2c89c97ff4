/* engine/vpe_parse.c — turn a region description into constraints (engine/vpe_internal.h).
 * Plain word lists, no grammar: kind nouns (parts of a picture when the description says
 * how it looks), "figure N" labels, "page N", ordinals that precede a kind noun,
 * top/bottom/left/right of the page, and a relation word followed by a determiner
 * ("below the ...") whose following words name the anchor region. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include "engine/vpe.h"
#include "engine/vpe_internal.h"
#include "vision/colour.h"

#define MAXW 64
#define WLEN 32
#define BIT(k) (1u << (k))

static int in_list(const char *w, const char *const *list) {
    for (; *list; list++)
        if (!strcmp(w, *list)) return 1;
    return 0;
}

static const char *const stopwords[] = {
    "the", "a", "an", "of", "on", "in", "at", "to", "for", "with", "and", "or", "that",
    "which", "is", "are", "this", "these", "those", "its", "it", "from", "by", "about",
    "showing", "shows", "show", "shown", "displaying", "depicting", "find", "locate",
    "where", "me", "please", "region", "part", "area", "side", "corner", "one", "located",
    "there", "some", "has", "have", "half", "end", "what", "see", "can", "you", "i", "my",
    "give", "highlight", "point", "out", NULL};
/* chart-type words: describe the kind, not the content */
static const char *const modifiers[] = {"bar", "line", "pie", "scatter", "column", "stacked",
                                        "flow", "block", "data", NULL};
static const char *const rel_strong[] = {"above", "below", "under", "beneath", "underneath",
                                         NULL};
static const char *const rel_weak[] = {"over", "after", "before", "following", "preceding",
                                       NULL};
static const char *const determiners[] = {"the", "a", "an", "this", "that", "heading",
                                          "title", "section", "caption", "table", "figure",
                                          NULL};
static const char *const ordinals[] = {"first", "second", "third", "fourth", "fifth", "sixth",
                                       "seventh", "eighth", "ninth", "tenth", NULL};
static const char *const numwords[] = {"one", "two", "three", "four", "five", "six", "seven",
                                       "eight", "nine", "ten", NULL};

int vpe_kind_word(const char *w, uint32_t *primary, uint32_t *secondary) {
    static const char *const fig[] = {"figure", "fig", "figures", "figs", NULL};
    static const char *const chart[] = {"chart", "charts", "graph", "graphs", "plot", "plots",
                                        "diagram", "diagrams", "drawing", "drawings",
                                        "illustration", "illustrations", "schematic",
                                        "schematics", "histogram", "histograms", "curve",
                                        "curves", "graphic",
                                        "visualization", "visualisation", NULL};
    static const char *const photo[] = {"photo", "photos", "photograph", "photographs",
                                        "picture", "pictures", "image", "images", "pic",
                                        "snapshot", "shot", NULL};
    static const char *const table[] = {"table", "tables", "tabular", "grid", NULL};
    static const char *const head[] = {"heading", "headings", "title", "titles", "headline",
                                       "header", NULL};
    static const char *const text[] = {"paragraph", "paragraphs", "text", "passage", "block",
                                       "sentence", "body", NULL};
    static const char *const cap[] = {"caption", "captions", "legend", NULL};
    uint32_t p = 0, s = 0;
    if (in_list(w, fig)) p = BIT(VPE_KIND_RASTER) | BIT(VPE_KIND_FIGURE);
    else if (in_list(w, chart)) { p = BIT(VPE_KIND_FIGURE); s = BIT(VPE_KIND_RASTER); }
    else if (in_list(w, photo)) { p = BIT(VPE_KIND_RASTER); s = BIT(VPE_KIND_FIGURE); }
    else if (in_list(w, table)) p = BIT(VPE_KIND_TABLE);
    else if (in_list(w, head)) p = BIT(VPE_KIND_HEADING);
    else if (in_list(w, text)) p = BIT(VPE_KIND_TEXT);
    else if (in_list(w, cap)) p = BIT(VPE_KIND_CAPTION);
    if (primary) *primary = p;
    if (secondary) *secondary = s;
    return p != 0;
}

/* Words that name a kind of region but, in a description of how a picture looks, name a
 * part of it: "a plot with a legend and a title", "red text labels on a grid". Read as
 * kinds, they sent 76 of the 503 descriptions of our four dev sets' figures to text,
 * headings, captions or tables (6 now). On the three dev sets with the page (manuals, R,
 * texlive: 440 figures): VPE hits 302 -> 338, right answers 152 -> 172, wrong 10 -> 11,
 * absent descriptions found 21 -> 23. Then, from the captioned texlive dev set ("column
 * headings above", "the indented body" of a listing, "sub-captions beneath"): headers,
 * headings, body and captions as parts, boxes, rectangles, outlines, frames and braces as
 * drawn things, "drawings" and other plurals as kinds; there, with the page (148 figures):
 * VPE hits 80 -> 86, right answers 36 -> 40, absent found 0 -> 0; the other three sets
 * unchanged. */
static const char *const picture_parts[] = {"legend", "grid", "title", "titles", "text",
                                            "header", "headers", "headings", "block", "blocks",
                                            "body", "captions", NULL};
/* Nouns of what pictures are drawn with: a description that uses one (or names a colour)
 * describes a picture's look. */
static const char *const drawn[] = {"axis", "axes", "tick", "ticks", "bar", "bars", "curve",
                                    "curves", "marker", "markers", "dot",
                                    "dots", "arrow", "arrows", "node", "nodes", "circle",
                                    "circles", "ellipse", "square", "squares", "disc",
                                    "shape", "shapes", "screenshot", "window", "windows",
                                    "panel", "panels", "framed", "filled", "shaded", "box",
                                    "boxes", "rectangle", "rectangles", "outline", "outlines",
                                    "frame", "frames", "brace", "braces", NULL};

static int split_words(const char *s, char w[MAXW][WLEN]) {
    int n = 0;
    while (*s && n < MAXW) {
        while (*s && !isalnum((unsigned char)*s) && !((unsigned char)*s & 0x80)) s++;
        if (!*s) break;
        int len = 0;
        while (*s && (isalnum((unsigned char)*s) || ((unsigned char)*s & 0x80))) {
            if (len < WLEN - 1) w[n][len++] = (char)tolower((unsigned char)*s);
            s++;
        }
        w[n][len] = 0;
        n++;
    }
    return n;
}

/* 1-based number from "3", "three", "3rd"; 0 if not a number. */
static int number_of(const char *w) {
    if (isdigit((unsigned char)w[0])) {
        char *end;
        long v = strtol(w, &end, 10);
        if (v <= 0 || v > 100000) return 0;
        if (*end && strcmp(end, "st") && strcmp(end, "nd") && strcmp(end, "rd") && strcmp(end, "th"))
            return 0;
        return (int)v;
    }
    for (int i = 0; numwords[i]; i++)
        if (!strcmp(w, numwords[i])) return i + 1;
    return 0;
}

static int ordinal_of(const char *w) {
    for (int i = 0; ordinals[i]; i++)
        if (!strcmp(w, ordinals[i])) return i + 1;
    if (!strcmp(w, "last") || !strcmp(w, "final")) return -1;
    if (isdigit((unsigned char)w[0])) {
        size_t l = strlen(w);
        if (l > 2 && (!strcmp(w + l - 2, "st") || !strcmp(w + l - 2, "nd") ||
                      !strcmp(w + l - 2, "rd") || !strcmp(w + l - 2, "th")))
            return number_of(w);
    }
    return 0;
}

static int is_content(const char *w) {
    return !in_list(w, stopwords) && !in_list(w, modifiers) && !vpe_kind_word(w, NULL, NULL);
}

static void append(char *dst, const char *w) {
    size_t l = strlen(dst);
    if (l + strlen(w) + 2 >= VPE_PHRASE) return;
    if (l) dst[l++] = ' ';
    strcpy(dst + l, w);
}

/* A place phrase names the region's place on the page where it follows the description's
 * head (its kind noun: "the plot at the top", "the photo on the left", "the chart located
 * at the bottom") or opens it; after another word it places a part inside the region
 * ("legend at right", "legend lower left", "labels along the top", "rising steeply to the
 * right"). Naming the page always means the page ("... at the bottom of the page"). */
static int part_place(char w[][WLEN], int n, int i) {
    static const char *const skip[] = {"the", "top", "bottom", "upper", "lower", "far", "very",
                                       "left", "right", "from", NULL};
    for (int m = i + 1; m < n && m <= i + 3; m++)
        if (!strcmp(w[m], "page")) return 0;
    int j = i - 1;
    while (j >= 0 && (in_list(w[j], skip) || in_list(w[j], stopwords))) j--;
    if (j < 0) return 0;
    int head = 0;   /* the first kind noun that no other one follows ("block diagram") */
    while (head < n && !(vpe_kind_word(w[head], NULL, NULL) &&
                         !(head + 1 < n && vpe_kind_word(w[head + 1], NULL, NULL))))
        head++;
    return j != head;
}

/* left/right/top/bottom name the region's place on the page only after "the", "at", "on",
 * "in" or another place word, or before a kind noun ("the left figure", "at the top",
 * "right chart"); elsewhere they describe the region's inside ("pointing right", "rising
 * to the right", "left to right") */
static int positional(char w[][WLEN], int n, int i) {
    static const char *const before[] = {"the", "at", "on", "in", "top", "bottom", "upper",
                                         "lower", "far", "very", NULL};
    if (i == 0 || in_list(w[i - 1], before)) return !part_place(w, n, i);
    return i + 1 < n && vpe_kind_word(w[i + 1], NULL, NULL);
}

/* a word for a place on the page: sets q's vertical (-1 top, 1 bottom) or horizontal (-1
 * left, 1 right) position; 0 when w is none */
static int place_word(const char *w, vpe_query *q) {
    static const struct { const char *w; int8_t v, h; } places[] = {
        {"top", -1, 0}, {"upper", -1, 0}, {"topmost", -1, 0}, {"bottom", 1, 0}, {"lower", 1, 0},
        {"bottommost", 1, 0}, {"left", 0, -1}, {"leftmost", 0, -1}, {"right", 0, 1},
        {"rightmost", 0, 1}};
    for (size_t k = 0; k < sizeof places / sizeof *places; k++) {
        if (strcmp(w, places[k].w)) continue;
        if (places[k].v) q->pos_v = places[k].v;
        if (places[k].h) q->pos_h = places[k].h;
        return 1;
    }
    return 0;
}

static int is_fig_label_word(const char *w) {
    return !strcmp(w, "figure") || !strcmp(w, "fig") || !strcmp(w, "chart") ||
           !strcmp(w, "plate") || !strcmp(w, "exhibit");
}

void vpe_query_parse(const char *desc, vpe_query *q) {
    memset(q, 0, sizeof *q);
    char w[MAXW][WLEN];
    int n = split_words(desc ? desc : "", w);
    uint8_t used[MAXW] = {0};   /* 1 = structural, not content */
    int rel_at = -1;

    /* page N, figure/table N */
    for (int i = 0; i + 1 < n; i++) {
        int num = number_of(w[i + 1]);
        if (!num) continue;
        if (!strcmp(w[i], "page") || !strcmp(w[i], "p") || !strcmp(w[i], "pg")) {
            if (!q->page) q->page = num;
            used[i] = used[i + 1] = 1;
        } else if (is_fig_label_word(w[i]) || !strcmp(w[i], "table") || !strcmp(w[i], "tab")) {
            /* label words count as the kind noun too (left unused for that) */
            used[i + 1] = 2;  /* mark the number; attached to target or anchor below */
        }
    }
    /* relation: first relation word followed by a determiner / anchor kind noun;
     * "left of the X" / "right of the X" unless X is the page */
    for (int i = 0; i + 1 < n && rel_at < 0; i++) {
        if (used[i]) continue;
        int strong = in_list(w[i], rel_strong), weak = in_list(w[i], rel_weak);
        if ((strong || weak) && in_list(w[i + 1], determiners)) {
            rel_at = i;
            q->rel = (!strcmp(w[i], "above") || !strcmp(w[i], "over") ||
                      !strcmp(w[i], "before") || !strcmp(w[i], "preceding"))
                         ? VPE_REL_ABOVE : VPE_REL_BELOW;
            q->rel_weak = weak;
        } else if ((!strcmp(w[i], "left") || !strcmp(w[i], "right")) && !strcmp(w[i + 1], "of") &&
                   i + 2 < n) {
            int j = i + 2;
            while (j < n && in_list(w[j], determiners) && !vpe_kind_word(w[j], NULL, NULL)) j++;
            if (j < n && strcmp(w[j], "page")) {
                rel_at = i;
                q->rel = w[i][0] == 'l' ? VPE_REL_LEFT : VPE_REL_RIGHT;
                if (i > 0 && !strcmp(w[i - 1], "to")) used[i - 1] = 1;
                used[i + 1] = 1;
            }
        }
    }
    if (rel_at >= 0) used[rel_at] = 1;
    int target_end = rel_at >= 0 ? rel_at : n;
    /* ordinals, positions: only in the target part */
    for (int i = 0; i < target_end; i++) {
        if (used[i]) continue;
        int o = ordinal_of(w[i]);
        if (o) {
            for (int j = i + 1; j < target_end && j <= i + 3; j++)
                if (vpe_kind_word(w[j], NULL, NULL)) { q->ordinal = o; used[i] = 1; break; }
            continue;
        }
        if (positional(w, n, i) && place_word(w[i], q)) {
            used[i] = 1;
        } else if (!strcmp(w[i], "page") || !strcmp(w[i], "middle") || !strcmp(w[i], "center") ||
                   !strcmp(w[i], "centre")) {
            used[i] = 1;
        }
    }
    /* target: kind nouns, label, content words */
    int looks = vision_colour_words(desc) != 0;
    for (int i = 0; i < n && !looks; i++) looks = in_list(w[i], drawn);
    for (int i = 0; i < target_end; i++) {
        if (used[i] == 1) continue;
        uint32_t p, s;
        /* a kind word before another one modifies it: "block diagram", "photo caption" */
        int modifier = i + 1 < target_end && vpe_kind_word(w[i + 1], NULL, NULL);
        if (!(looks && in_list(w[i], picture_parts)) && vpe_kind_word(w[i], &p, &s)) {
            if (!modifier) {
                q->kind_primary |= p;
                q->kind_secondary |= s;
            }
            if (i + 1 < n && used[i + 1] == 2) {
                q->label_num = number_of(w[i + 1]);
                q->label_table = !strcmp(w[i], "table") || !strcmp(w[i], "tab");
            }
        }
        if (used[i] == 2) continue;
        append(q->target, w[i]);
        append(q->target_all, w[i]);
        if (is_content(w[i])) {
            q->n_content++;
            q->all_n_content++;
            append(q->target_words, w[i]);
            append(q->all_words, w[i]);
        }
    }
    q->kind_secondary &= ~q->kind_primary;
    /* anchor */
    for (int i = target_end + 1; i < n; i++) {
        if (used[i] == 1) continue;
        uint32_t p, s;
        if (vpe_kind_word(w[i], &p, &s)) {
            q->anchor_primary |= p;
            q->anchor_secondary |= s;
            if (i + 1 < n && used[i + 1] == 2) {
                q->anchor_label_num = number_of(w[i + 1]);
                q->anchor_label_table = !strcmp(w[i], "table") || !strcmp(w[i], "tab");
            }
        }
        if (used[i] == 2) continue;
        append(q->target_all, w[i]);
        if (is_content(w[i])) {
            append(q->anchor, w[i]);
            append(q->all_words, w[i]);
            q->anchor_n_content++;
            q->all_n_content++;
        }
    }
    q->anchor_secondary &= ~q->anchor_primary;
    /* in a description of a picture's look, a relation to something no kind word or label
     * names ("field boxes under a numbered bit ruler") is more likely the picture's own
     * layout: weak, dropped when no region matches the anchor. Four dev sets with the page:
     * captioned right answers 40 -> 43 (answered 46 -> 50), absent 0 -> 0; manuals, R, more
     * unchanged */
    if (looks && q->rel && !q->anchor_primary && !q->anchor_label_num) q->rel_weak = 1;
}
