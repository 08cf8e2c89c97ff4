/* fusion — query-adaptive weights and weighted reciprocal-rank fusion (pure functions). */
#include "retrieval/retrieval.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

void retr_opts_default(retr_opts *o) {
    memset(o, 0, sizeof *o);
    o->k = 10;
    o->depth = 50;
    o->rrf_k = 60.0f;
    for (int i = 0; i < RETR_NSRC; i++) o->weight[i] = -1.0f;
    o->sources = RETR_USE_ALL;
    o->kind = -1;
    o->min_image_score = 0.2f;
    o->fusion = RETR_FUSE_SCORE;
    o->sentences = 1;
    o->section_weight = 1.0f;
}

/* words that ask for something visual (lowercase, matched as whole words or plurals) */
static const char *const visual_words[] = {
    "chart", "figure", "fig", "image", "diagram", "photo", "photograph", "picture",
    "graph", "plot", "illustration", "drawing", "screenshot", "histogram",
    "map", "logo", "icon", "visual", "scan", "scanned", "pie", "scatter", "bar", NULL};

/* words after which a visual word is a verb ("how do I plot", "when drawing"): the
 * question asks how to make a picture, which the text answers */
static const char *const verb_cues[] = {"i", "you", "we", "to", "when", "while", "then", NULL};

static int is_cue(const char *w) {
    for (int i = 0; verb_cues[i]; i++)
        if (!strcmp(w, verb_cues[i])) return 1;
    return 0;
}

static int is_visual(const char *w, size_t n) {
    for (int i = 0; visual_words[i]; i++) {
        size_t l = strlen(visual_words[i]);
        if ((n == l || (n == l + 1 && w[l] == 's')) && strncmp(w, visual_words[i], l) == 0)
            return 1;
    }
    return 0;
}

void retr_adapt_weights(const char *query, const retr_opts *o, retr_weights *out) {
    float text = 1.0f, image = 0.0f, bm25 = 1.0f;
    int visual = 0, quoted = 0, exact = 0;
    const char *q = query ? query : "";
    int quotes = 0;
    for (const char *p = q; *p; p++) quotes += *p == '"';
    quoted = quotes >= 2;
    char w[64], prev[64] = "";
    for (const char *p = q; *p;) {
        while (*p && !isalnum((unsigned char)*p)) p++;
        size_t n = 0;
        int digits = 0;
        while (*p && (isalnum((unsigned char)*p) || *p == '-' || *p == '_')) {
            if (isdigit((unsigned char)*p)) digits = 1;
            if (n < sizeof w - 1) w[n++] = (char)tolower((unsigned char)*p);
            p++;
        }
        w[n] = 0;
        if (!n) continue;
        if (is_visual(w, n) && !is_cue(prev)) visual = 1;
        if (digits) exact = 1;
        memcpy(prev, w, n + 1);
    }
    if (visual) image = 1.5f;
    if (quoted) bm25 *= 2.0f;
    if (exact) bm25 *= 1.5f;
    out->w[RETR_SRC_TEXT] = text;
    out->w[RETR_SRC_IMAGE] = image;
    out->w[RETR_SRC_BM25] = bm25;
    if (o) {
        int nsrc = 0;
        for (int i = 0; i < RETR_NSRC; i++) {
            if (o->weight[i] >= 0) out->w[i] = o->weight[i];
            if (!(o->sources & (1 << i))) out->w[i] = 0;
            else nsrc++;
        }
        /* one source alone (an ablation): its order is the answer, whatever the query */
        for (int i = 0; i < RETR_NSRC && nsrc == 1; i++)
            if ((o->sources & (1 << i)) && o->weight[i] < 0) out->w[i] = 1.0f;
    }
}

static int cmp_fused(const void *a, const void *b) {
    const retr_fused *x = a, *y = b;
    if (x->fused != y->fused) return x->fused < y->fused ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

int32_t retr_fuse(const int64_t *const lists[RETR_NSRC], const int32_t n[RETR_NSRC],
                  const retr_weights *w, float rrf_k, retr_fused *out, int32_t max) {
    int32_t total = 0;
    for (int s = 0; s < RETR_NSRC; s++) total += lists[s] && n[s] > 0 ? n[s] : 0;
    if (total == 0 || max <= 0) return 0;
    retr_fused *acc = calloc((size_t)total, sizeof *acc);
    if (!acc) return 0;
    int32_t m = 0;
    if (rrf_k < 0) rrf_k = 0;
    for (int s = 0; s < RETR_NSRC; s++) {
        if (!lists[s] || w->w[s] <= 0) continue;
        for (int32_t r = 0; r < n[s]; r++) {
            int64_t id = lists[s][r];
            int32_t j = 0;
            while (j < m && acc[j].id != id) j++;  /* lists are short (depth <= a few 100) */
            if (j == m) { acc[m].id = id; m++; }
            if (acc[j].rank[s]) continue;  /* a duplicate within one list counts once */
            acc[j].rank[s] = r + 1;
            acc[j].fused += w->w[s] / (rrf_k + (double)(r + 1));
        }
    }
    qsort(acc, (size_t)m, sizeof *acc, cmp_fused);
    int32_t k = m < max ? m : max;
    memcpy(out, acc, (size_t)k * sizeof *out);
    free(acc);
    return k;
}

/* Score fusion (RETR_FUSE_SCORE). Reciprocal ranks throw the scores away: a chunk that
 * only the dense list ranks first (cosine 0.62) lost to chunks that both lists rank
 * mediocrely. Here the dense cosine counts as it is (MiniLM cosines of one query are
 * comparable across chunks) and BM25 is divided by the query's best BM25 score (its scale
 * depends on the query's words), then scaled into the cosine's range. */
int32_t retr_fuse_scores(const retr_scored *c, int32_t n, const retr_weights *w,
                         retr_fused *out, int32_t max) {
    if (n <= 0 || max <= 0) return 0;
    retr_fused *acc = calloc((size_t)n, sizeof *acc);
    if (!acc) return 0;
    float bmax = 0, dmin = 1;
    for (int32_t i = 0; i < n; i++) {
        if (c[i].bm25 > bmax) bmax = c[i].bm25;
        if (c[i].dense > -1.5f && c[i].dense < dmin) dmin = c[i].dense;
    }
    for (int32_t i = 0; i < n; i++) {
        double f = 0;
        if (w->w[RETR_SRC_TEXT] > 0) f += w->w[RETR_SRC_TEXT] * (c[i].dense > -1.5f ? c[i].dense : dmin);
        if (w->w[RETR_SRC_BM25] > 0 && bmax > 0 && c[i].bm25 > 0)
            f += w->w[RETR_SRC_BM25] * RETR_BM25_SCALE * c[i].bm25 / bmax;
        if (w->w[RETR_SRC_IMAGE] > 0 && c[i].rank[RETR_SRC_IMAGE])
            f += w->w[RETR_SRC_IMAGE] * RETR_IMAGE_SCALE * c[i].image;
        acc[i] = (retr_fused){c[i].id, f, {0}};
        memcpy(acc[i].rank, c[i].rank, sizeof acc[i].rank);
    }
    qsort(acc, (size_t)n, sizeof *acc, cmp_fused);
    int32_t k = n < max ? n : max;
    memcpy(out, acc, (size_t)k * sizeof *out);
    free(acc);
    return k;
}

/* Words a description of a figure uses for any figure (its look, its parts, colours) and
 * function words: they say nothing about which figure it is. */
static const char *const common_words[] = {
    "the", "and", "with", "from", "into", "over", "under", "each", "one", "two", "three", "four",
    "five", "six", "seven", "eight", "nine", "ten", "left", "right", "top", "bottom", "upper",
    "lower", "small", "large", "thin", "thick", "framed", "plot", "plots", "curve", "curves",
    "line", "lines", "axis", "axes", "black", "white", "grey", "gray", "red", "blue", "green",
    "orange", "yellow", "purple", "pink", "brown", "cyan", "dark", "light", "figure", "shows",
    "showing", "labelled", "labeled", "label", "labels", "row", "rows", "column", "columns",
    "box", "boxes", "panel", "panels", "several", "some", "for", "its", "are", NULL};

static int is_common(const char *w) {
    for (int i = 0; common_words[i]; i++)
        if (!strcmp(w, common_words[i])) return 1;
    return 0;
}

/* Is w (lowercase) a whole word of text, ignoring case? */
static int has_word(const char *text, const char *w, size_t n) {
    for (const char *p = text; (p = strcasestr(p, w)); p++)
        if ((p == text || !isalnum((unsigned char)p[-1])) && !isalnum((unsigned char)p[n])) return 1;
    return 0;
}

float retr_word_overlap(const char *query, const char *text) {
    char words[RETR_OVERLAP_WORDS][32];
    int nw = 0, hit = 0;
    for (const char *p = query ? query : ""; *p && nw < RETR_OVERLAP_WORDS;) {
        while (*p && !isalnum((unsigned char)*p)) p++;
        size_t n = 0;
        char w[32];
        int alpha = *p && isalpha((unsigned char)*p);
        while (isalnum((unsigned char)*p)) {
            if (n + 1 < sizeof w) w[n++] = (char)tolower((unsigned char)*p);
            p++;
        }
        w[n] = 0;
        if (n < 3 || !alpha || is_common(w)) continue;
        int dup = 0;
        for (int i = 0; i < nw && !dup; i++) dup = !strcmp(words[i], w);
        if (dup) continue;
        memcpy(words[nw++], w, n + 1);
        hit += text && has_word(text, w, n);
    }
    return nw ? (float)hit / (float)nw : -1.0f;
}
