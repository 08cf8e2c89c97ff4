/* engine/vpe.c — region scoring and confidence for vpe_locate (see engine/vpe.h). */
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/vpe.h"
#include "engine/vpe_internal.h"
#include "vision/clip.h"
#include "vision/colour.h"
#include "vision/textenc.h"

#define BIT(k) (1u << (k))
#define CACHE_CAP 4096          /* cached text embeddings; the cache is cleared when full */

/* Calibration (unit: cosine of MiniLM mean-pooled embeddings). Descriptions that
 * paraphrase a caption score about 0.45-0.8 against it; unrelated text about -0.1-0.3. */
#define SEM_MID 0.45f           /* cosine at which the semantic satisfaction is 0.5 */
#define SEM_SLOPE 0.08f
#define CONTEXT_SCALE 0.85f     /* nearby text counts a little less than the region's own */
#define MARGIN_SCALE 0.05f      /* score margin at which the margin factor is ~0.73 */
#define CLIP_MID 0.22f          /* CLIP image-text cosine at satisfaction 0.5 */
#define CLIP_SLOPE 0.03f
/* Figure-encoder cosine (text space) of a description with a figure: on real figures of
 * manuals the described one scores ~0-0.15, the others on its page a little less. Set on
 * the texlive dev set (vision/train/dev_figures.json, scripts/eval_figures.py --dev: with
 * the page, hit 0.39 -> 0.63 with these and a text region's term at 0), never on the
 * reserved evaluation set. */
#define FIG_MID 0.02f
#define FIG_SLOPE 0.05f
#define FIG_WEIGHT 2.0f

/* Picture evidence: with the page given, a picture whose pixels agree with the description
 * may be answered even when the description shares no words with its caption (appearance:
 * "three descending step curves"). Its confidence is the probability that its box is the
 * one described, a logistic model of what the pixels say (vouch_feats) fit by
 * scripts/vpe_calibrate.py on the four dev sets (manuals, R vignettes, more manuals,
 * captioned texlive pages: each figure's description and, as a negative, another document's
 * figure of another type described on its page; vision/train/vpe_calibration.jsonl), never
 * on the reserved set. CAL_W is in the order of cal_x(). Fit leaving each set out in turn,
 * the pictures answered at 0.7-0.8 were right 78% of the time, at 0.8-0.9 85%, above 0.9
 * 94%; at the default threshold 91% of the answers were right (168/184), 33% of the
 * descriptions found, 7 of 511 absent ones answered, where the hand-set rules it replaces
 * (a figure cosine, a lead, a type and a hub check, set on these sets) answered 90% right,
 * 38% found and 32 absent. */
#define CAL_N 9
static const float CAL_W[CAL_N] = {6.7188f, 0.4911f, 0.3453f, 7.5135f, 9.4678f, 0.1283f, 0.2576f,
                                   0.9858f, 3.6192f};
/* each feature is clamped to the range it was fit on: a cosine far above any real figure's
 * (a test's stand-in vectors) must not extrapolate to certainty */
static const float CAL_LO[CAL_N] = {-0.1064f, -0.1399f, 0.0000f, -0.2381f, -0.1530f, 0.0000f,
                                    0.0000f, 0.0000f, 0.0000f};
static const float CAL_HI[CAL_N] = {0.2095f, 1.0000f, 1.0000f, 0.0000f, 0.1938f, 1.0000f,
                                    1.0000f, 1.0000f, 0.9800f};
#define CAL_B (-2.0718f)
/* Another picture of the page about as close to the description may as well be the one
 * described: a tie halves the confidence, a lead of a few LEAD_SCALEs keeps it, and so does
 * showing alone the colours named. */
#define LEAD_SCALE 0.02f
#define NO_FIG (-9.0f)          /* the figure cosine of a region without a figure vector */
/* Colours the description names (vision_colour_words): a picture's colour match ranks it
 * like its pixels do, and a picture that shows none of them is not answered (COL_VOUCH);
 * one that alone on its page shows all of them is a feature of the calibration. The veto,
 * set on the three dev sets of the time (manuals, R, texlive) with the page: absent
 * descriptions found 26 -> 20 in all, right answers unchanged. */
#define COL_WEIGHT 1.0f
#define COL_VOUCH 0.5f          /* the best named colour's match an answered picture needs */

/* The figure types, one prompt each: the same as vision/train/figtypes.py (the figure
 * encoder's zero-shot type evaluation; test_vpe type_prompts_match_figtypes checks). */
static const char *const type_prompts[] = {
    "a bar chart", "a line plot", "a scatter plot", "a pie chart", "a histogram",
    "a 3D surface plot", "a diagram of boxes connected by arrows", "a table", "a photograph",
    "a drawing of geometric shapes", "an image of text"};
#define N_TYPES ((int32_t)(sizeof type_prompts / sizeof type_prompts[0]))

enum { C_KIND, C_LABEL, C_ORD, C_POS, C_REL, C_SEM, C_CLIP, C_FIG, C_COL, C_N };
static const char *const cname[C_N] = {"kind", "label", "ord", "pos", "rel", "sem", "clip", "fig",
                                       "col"};

typedef struct {
    char *text;
    uint64_t hash;
    float *vec;
} cache_ent;

struct vpe {
    textenc *te;
    clip_model *clip;
    int32_t dim;
    pthread_mutex_t mu;
    cache_ent *ents;            /* open addressing, CACHE_CAP * 2 slots */
    int32_t n_ents;
};

static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    int k = snprintf(err, errlen, "vpe: ");
    if (k > 0 && (size_t)k < errlen) vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
    va_end(ap);
}

void vpe_options_default(vpe_options *o) {
    memset(o, 0, sizeof *o);
    o->threshold = 0.75f;
    o->clip_weight = 1.0f;
}

const char *vpe_kind_name(int32_t kind) {
    static const char *const names[VPE_KIND_COUNT] = {"raster", "figure", "caption",
                                                      "table", "text", "heading"};
    return kind >= 0 && kind < VPE_KIND_COUNT ? names[kind] : "unknown";
}

float vpe_iou(const float a[4], const float b[4]) {
    float ix = fminf(a[2], b[2]) - fmaxf(a[0], b[0]);
    float iy = fminf(a[3], b[3]) - fmaxf(a[1], b[1]);
    if (ix <= 0 || iy <= 0) return 0;
    float inter = ix * iy;
    float ua = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    return ua > 0 ? inter / ua : 0;
}

int vpe_create(textenc *te, clip_model *clip, vpe **out, char *err, size_t errlen) {
    if (!out) { set_err(err, errlen, "NULL output"); return -1; }
    *out = NULL;
    if (!te) { set_err(err, errlen, "a text encoder is required"); return -1; }
    vpe *v = calloc(1, sizeof *v);
    if (v) v->ents = calloc(CACHE_CAP * 2, sizeof *v->ents);
    if (!v || !v->ents) {
        if (v) free(v);
        set_err(err, errlen, "out of memory");
        return -1;
    }
    v->te = te;
    v->clip = clip;
    v->dim = textenc_dim(te);
    pthread_mutex_init(&v->mu, NULL);
    *out = v;
    return 0;
}

static void cache_clear(vpe *v) {
    for (int i = 0; i < CACHE_CAP * 2; i++) {
        free(v->ents[i].text);
        free(v->ents[i].vec);
    }
    memset(v->ents, 0, CACHE_CAP * 2 * sizeof *v->ents);
    v->n_ents = 0;
}

void vpe_free(vpe *v) {
    if (!v) return;
    cache_clear(v);
    free(v->ents);
    pthread_mutex_destroy(&v->mu);
    free(v);
}

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Slot holding `s`, or the empty slot where it belongs. Caller holds the mutex. */
static cache_ent *cache_slot(vpe *v, const char *s, uint64_t h) {
    uint32_t i = (uint32_t)(h % (CACHE_CAP * 2));
    while (v->ents[i].text && (v->ents[i].hash != h || strcmp(v->ents[i].text, s)))
        i = (i + 1) % (CACHE_CAP * 2);
    return &v->ents[i];
}

/* Embeddings of n texts into out[n][dim] (NULL/empty text: zero vector), via the cache. */
static int embed_texts(vpe *v, const char *const *texts, int32_t n, float *out, char *err,
                       size_t errlen) {
    int32_t dim = v->dim, nm = 0;
    int32_t *miss = malloc(sizeof *miss * (size_t)(n ? n : 1));
    if (!miss) { set_err(err, errlen, "out of memory"); return -1; }
    pthread_mutex_lock(&v->mu);
    for (int32_t i = 0; i < n; i++) {
        float *o = out + (size_t)i * dim;
        if (!texts[i] || !texts[i][0]) { memset(o, 0, sizeof *o * dim); continue; }
        cache_ent *e = cache_slot(v, texts[i], fnv1a(texts[i]));
        if (e->text) memcpy(o, e->vec, sizeof *o * dim);
        else miss[nm++] = i;
    }
    pthread_mutex_unlock(&v->mu);
    int rc = 0;
    if (nm) {
        const char **mt = malloc(sizeof *mt * (size_t)nm);
        float *mv = malloc(sizeof *mv * (size_t)nm * dim);
        if (!mt || !mv) { set_err(err, errlen, "out of memory"); rc = -1; }
        for (int32_t k = 0; !rc && k < nm; k++) mt[k] = texts[miss[k]];
        char e2[256];
        if (!rc && textenc_embed(v->te, mt, nm, mv, e2, sizeof e2)) {
            set_err(err, errlen, "%s", e2);
            rc = -1;
        }
        if (!rc) {
            pthread_mutex_lock(&v->mu);
            for (int32_t k = 0; k < nm; k++) {
                memcpy(out + (size_t)miss[k] * dim, mv + (size_t)k * dim, sizeof *mv * dim);
                if (v->n_ents >= CACHE_CAP) cache_clear(v);
                uint64_t h = fnv1a(mt[k]);
                cache_ent *e = cache_slot(v, mt[k], h);
                if (e->text) continue;   /* another thread added it meanwhile */
                e->text = strdup(mt[k]);
                e->vec = malloc(sizeof *e->vec * dim);
                if (!e->text || !e->vec) {
                    free(e->text);
                    free(e->vec);
                    e->text = NULL;
                    e->vec = NULL;
                    continue;   /* not cached: still correct */
                }
                e->hash = h;
                memcpy(e->vec, mv + (size_t)k * dim, sizeof *mv * dim);
                v->n_ents++;
            }
            pthread_mutex_unlock(&v->mu);
        }
        free(mt);
        free(mv);
    }
    free(miss);
    return rc;
}

static float dotf(const float *a, const float *b, int32_t n) {
    float s = 0;
    for (int32_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }
static float clamp01(float x) { return x < 0 ? 0 : x > 1 ? 1 : x; }
static float cy(const vpe_region *r) { return 0.5f * (r->box[1] + r->box[3]); }
static float cx(const vpe_region *r) { return 0.5f * (r->box[0] + r->box[2]); }

/* Kind satisfaction for sets (primary, secondary); no kind word: visual regions are
 * what people usually point at, text regions get half. */
static float kind_sat(uint32_t prim, uint32_t sec, int32_t kind) {
    if (kind < 0 || kind >= VPE_KIND_COUNT) return 0;
    if (!prim) return (kind == VPE_KIND_RASTER || kind == VPE_KIND_FIGURE || kind == VPE_KIND_TABLE)
                          ? 1.0f : 0.5f;
    if (prim & BIT(kind)) return 1.0f;
    if (sec & BIT(kind)) return 0.5f;
    return 0;
}

/* Does the region text carry the label "Figure N" / "Fig. N" / "Table N"? */
static int has_label(const char *t, int32_t num, int32_t table) {
    if (!t) return 0;
    for (const char *p = t; *p; p++) {
        if (p != t && isalnum((unsigned char)p[-1])) continue;
        size_t l = 0;
        if (table) {
            if (!strncasecmp(p, "table", 5)) l = 5;
            else if (!strncasecmp(p, "tab.", 4)) l = 4;
        } else {
            if (!strncasecmp(p, "figure", 6)) l = 6;
            else if (!strncasecmp(p, "fig.", 4)) l = 4;
            else if (!strncasecmp(p, "fig", 3)) l = 3;
        }
        if (!l) continue;
        const char *s = p + l;
        while (*s == ' ' || *s == '.' || *s == '\t') s++;
        char *end;
        long v = strtol(s, &end, 10);
        if (end != s && v == num && !isdigit((unsigned char)*end)) return 1;
    }
    return 0;
}

/* Reading order: page, then rows top to bottom, regions side by side left to right. */
static int before_in_reading(const vpe_region *a, const vpe_region *b) {
    if (a->page != b->page) return a->page < b->page;
    float ov = fminf(a->box[3], b->box[3]) - fmaxf(a->box[1], b->box[1]);
    float hmin = fminf(a->box[3] - a->box[1], b->box[3] - b->box[1]);
    if (hmin > 0 && ov > 0.5f * hmin) return a->box[0] < b->box[0];
    return a->box[1] < b->box[1];
}

/* Gap from anchor a to region r in direction rel (negative = overlapping / wrong side). */
static float rel_gap(const vpe_region *r, const vpe_region *a, int32_t rel) {
    if (r->page != a->page || r == a || vpe_iou(r->box, a->box) > 0.3f) return -1;
    switch (rel) {
    case VPE_REL_BELOW: return cy(r) > a->box[3] ? fmaxf(r->box[1] - a->box[3], 0.0f) : -1;
    case VPE_REL_ABOVE: return cy(r) < a->box[1] ? fmaxf(a->box[1] - r->box[3], 0.0f) : -1;
    case VPE_REL_LEFT: return cx(r) < a->box[0] ? fmaxf(a->box[0] - r->box[2], 0.0f) : -1;
    case VPE_REL_RIGHT: return cx(r) > a->box[2] ? fmaxf(r->box[0] - a->box[2], 0.0f) : -1;
    }
    return -1;
}

typedef struct {
    const vpe_region *c;
    int32_t n;
    const vpe_query *q;
    const uint8_t *elig;        /* passes the page filter */
    float *ksat;                /* kind satisfaction */
    float *sem;                 /* semantic cosine of region text vs target */
    float *asem;                /* semantic cosine of region text vs anchor */
} ctx;

/* Relation satisfaction per candidate: max over anchors of anchor score x closeness.
 * Returns the best anchor score (0 when nothing looks like the anchor). */
static float relation_sat(const ctx *x, float *sat) {
    const vpe_query *q = x->q;
    float best_anchor = 0;
    for (int32_t i = 0; i < x->n; i++) sat[i] = 0;
    for (int32_t a = 0; a < x->n; a++) {
        const vpe_region *ra = &x->c[a];
        float as = q->anchor_primary ? kind_sat(q->anchor_primary, q->anchor_secondary, ra->kind)
                                     : 1.0f;
        if (q->anchor_label_num)
            as *= has_label(ra->text, q->anchor_label_num, q->anchor_label_table) ? 1.0f : 0.0f;
        if (q->anchor_n_content) as *= sigm((x->asem[a] - SEM_MID) / SEM_SLOPE);
        if (as < 0.05f) continue;
        if (as > best_anchor) best_anchor = as;
        /* nearest eligible region of the asked kind in that direction */
        float mingap = 1e9f;
        for (int32_t i = 0; i < x->n; i++) {
            if (!x->elig[i] || x->ksat[i] < 1.0f) continue;
            float g = rel_gap(&x->c[i], ra, q->rel);
            if (g >= 0 && g < mingap) mingap = g;
        }
        if (mingap > 1e8f) mingap = 0;
        for (int32_t i = 0; i < x->n; i++) {
            float g = rel_gap(&x->c[i], ra, q->rel);
            if (g < 0) continue;
            float s = as * expf(-fmaxf(g - mingap, 0.0f) / 0.08f);
            if (s > sat[i]) sat[i] = s;
        }
    }
    return best_anchor;
}

static void ordinal_sat(const ctx *x, float *sat) {
    int32_t m = 0, *idx = malloc(sizeof *idx * (size_t)x->n);
    for (int32_t i = 0; i < x->n; i++) sat[i] = 0;
    if (!idx) return;
    for (int32_t i = 0; i < x->n; i++)
        if (x->elig[i] && x->ksat[i] >= 1.0f) {
            /* insertion sort: the reading-order comparison is not a strict total order */
            int32_t j = m++;
            while (j > 0 && before_in_reading(&x->c[i], &x->c[idx[j - 1]])) {
                idx[j] = idx[j - 1];
                j--;
            }
            idx[j] = i;
        }
    int32_t pick = x->q->ordinal < 0 ? m - 1 : x->q->ordinal - 1;
    if (pick >= 0 && pick < m) sat[idx[pick]] = 1;
    free(idx);
}

/* Position on the page: half absolute (where on the page), half relative (the most
 * extreme of the asked kind on its page). */
static void position_sat(const ctx *x, float *sat) {
    const vpe_query *q = x->q;
    for (int32_t i = 0; i < x->n; i++) {
        const vpe_region *r = &x->c[i];
        float s = 1;
        if (q->pos_v) {
            float ab = q->pos_v < 0 ? clamp01((0.7f - cy(r)) / 0.4f) : clamp01((cy(r) - 0.3f) / 0.4f);
            int extreme = 1;
            for (int32_t k = 0; k < x->n; k++)
                if (k != i && x->elig[k] && x->ksat[k] >= 1.0f && x->c[k].page == r->page &&
                    (q->pos_v < 0 ? cy(&x->c[k]) < cy(r) - 0.01f : cy(&x->c[k]) > cy(r) + 0.01f))
                    extreme = 0;
            s *= 0.5f * ab + 0.5f * (float)extreme;
        }
        if (q->pos_h) {
            float ab = q->pos_h < 0 ? clamp01((0.65f - cx(r)) / 0.3f) : clamp01((cx(r) - 0.35f) / 0.3f);
            int extreme = 1;
            for (int32_t k = 0; k < x->n; k++)
                if (k != i && x->elig[k] && x->ksat[k] >= 1.0f && x->c[k].page == r->page &&
                    (q->pos_h < 0 ? cx(&x->c[k]) < cx(r) - 0.01f : cx(&x->c[k]) > cx(r) + 0.01f))
                    extreme = 0;
            s *= 0.5f * ab + 0.5f * (float)extreme;
        }
        sat[i] = s;
    }
}

void vpe_scope_of(const char *description, vpe_scope *out) {
    vpe_query q;
    vpe_query_parse(description ? description : "", &q);
    *out = (vpe_scope){q.page, q.ordinal, q.label_num, q.label_table};
}

int vpe_text_has_label(const char *text, int32_t num, int32_t table) {
    return num > 0 && has_label(text, num, table);
}

textenc *vpe_text_encoder(vpe *v) { return v ? v->te : NULL; }

/* CLIP term: best patch token of the region's preview against the description. */
static int clip_sat(vpe *v, const vpe_region *c, int32_t n, const uint8_t *elig,
                    const char *desc, float *sat, uint8_t *has, char *err, size_t errlen) {
    float t[CLIP_MAX_DIM];
    char e2[256];
    if (clip_embed_text(v->clip, desc, t, e2, sizeof e2)) {
        set_err(err, errlen, "%s", e2);
        return -1;
    }
    int32_t dim = clip_dim(v->clip);
    for (int32_t i = 0; i < n; i++) {
        has[i] = 0;
        if (!elig[i] || !c[i].png || !c[i].png_len) continue;
        vision_image img;
        if (vision_image_load_buffer(c[i].png, c[i].png_len, 0, 0, &img, e2, sizeof e2)) continue;
        float g[CLIP_MAX_DIM], *tok = NULL;
        int32_t gh = 0, gw = 0;
        if (!clip_patch_tokens(v->clip, &img, 0, g, &tok, &gh, &gw, e2, sizeof e2)) {
            float best = dotf(g, t, dim);
            for (int32_t p = 0; p < gh * gw; p++) best = fmaxf(best, dotf(tok + (size_t)p * dim, t, dim));
            sat[i] = sigm((best - CLIP_MID) / CLIP_SLOPE);
            has[i] = 1;
        }
        free(tok);
        vision_image_free(&img);
    }
    return 0;
}

/* Fraction of the content words (>= 3 letters) found in text as a word prefix of the
 * first 5 letters ("quarterly" matches "quarter"), 0..1; -1 when there are none. */
static float lexical(const char *words, const char *text) {
    if (!words || !text) return -1;
    int tot = 0, hit = 0;
    const char *w = words;
    while (*w) {
        size_t l = strcspn(w, " ");
        if (l >= 3) {
            size_t m = l < 5 ? l : 5;
            tot++;
            for (const char *p = text; *p; p++) {
                if (p != text && isalnum((unsigned char)p[-1])) continue;
                if (!strncasecmp(p, w, m) && (l > 5 || !isalnum((unsigned char)p[m]))) { hit++; break; }
            }
        }
        w += l;
        while (*w == ' ') w++;
    }
    return tot ? (float)hit / (float)tot : -1;
}

/* Similarity of a query (embedding + content words) to a region: the best of the
 * embedding cosine with its own text, with its nearby text (scaled down), and a lexical
 * overlap mapped onto the cosine scale (short names like "revenue" embed poorly), plus
 * a small bonus for shared words (MiniLM rates near-topics such as "quarterly output" vs
 * "efficiency over six months" almost alike). */
static float similarity(const float *qv, const char *qwords, const float *tv, const float *cv,
                        const vpe_region *r, int32_t dim) {
    float s = fmaxf(dotf(qv, tv, dim), CONTEXT_SCALE * dotf(qv, cv, dim));
    float lx = fmaxf(lexical(qwords, r->text), CONTEXT_SCALE * lexical(qwords, r->context));
    if (lx > 0) s = fmaxf(s, 0.2f + 0.6f * lx) + 0.1f * lx;
    return s;
}

/* 1 when the description names chromatic colours, the winner shows all of them and no other
 * picture of its page does (a feature of the calibration, and a tie-breaker). */
static int colour_unique(const vpe_region *c, int32_t n, const uint8_t *elig, int32_t best,
                         uint32_t colours) {
    const vpe_region *b = &c[best];
    uint32_t hues = colours & ~VISION_COLOUR_MONO;
    if (!hues || !b->colour || vision_colour_match(hues, b->colour) < 1.0f) return 0;
    for (int32_t i = 0; i < n; i++)
        if (elig[i] && i != best && c[i].colour && c[i].page == b->page &&
            vpe_iou(c[i].box, b->box) <= 0.5f && vision_colour_match(hues, c[i].colour) >= 1.0f)
            return 0;
    return 1;
}

/* What the pixels say of the winner `best`, with the page given (see CAL_W). */
typedef struct {
    float fig;          /* its figure cosine with the description */
    float lead;         /* ... minus the best other picture's of its page (1 when alone) */
    int32_t rivals;     /* other pictures of its page */
    float agree;        /* the described type's cosine with it minus its best type's */
    float hub;          /* fig minus its mean cosine with the type prompts */
    float colour;       /* its best match of the colours named (-1: none named or no colour) */
    int32_t col_unique; /* it alone on the page shows every hue named */
} vouch_feats;

/* Fills *f for the winner `best`, given the description's vector qd and every candidate's
 * figure cosine fcos. Returns 0, or -1 when the text encoder fails. */
static int vouch_features(vpe *v, const vpe_region *c, int32_t n, const uint8_t *elig,
                          int32_t best, const float *qd, const float *fcos, uint32_t colours,
                          vouch_feats *f, char *err, size_t errlen) {
    const vpe_region *b = &c[best];
    int32_t dim = v->dim;
    memset(f, 0, sizeof *f);
    f->fig = fcos[best];
    f->lead = 1.0f;
    f->colour = colours && b->colour ? vision_colour_match_any(colours, b->colour) : -1.0f;
    f->col_unique = colour_unique(c, n, elig, best, colours);
    for (int32_t i = 0; i < n; i++)
        if (elig[i] && i != best && fcos[i] > NO_FIG && c[i].page == b->page &&
            vpe_iou(c[i].box, b->box) <= 0.5f) {
            f->rivals++;
            f->lead = fminf(f->lead, f->fig - fcos[i]);
        }
    if (!b->figure_vec) return 0;
    float *tp = malloc(sizeof *tp * (size_t)N_TYPES * dim);
    if (!tp) { set_err(err, errlen, "out of memory"); return -1; }
    if (embed_texts(v, type_prompts, N_TYPES, tp, err, errlen)) { free(tp); return -1; }
    /* the type the description reads as (its nearest prompt), and the figure's best type */
    float asked_q = -2, asked_f = 0, fig_best = -2, fig_mean = 0;
    for (int32_t k = 0; k < N_TYPES; k++) {
        const float *t = tp + (size_t)k * dim;
        float q = dotf(t, qd, dim), fk = dotf(t, b->figure_vec, dim);
        if (q > asked_q) { asked_q = q; asked_f = fk; }
        fig_best = fmaxf(fig_best, fk);
        fig_mean += fk / N_TYPES;
    }
    free(tp);
    f->agree = asked_f - fig_best;
    f->hub = f->fig - fig_mean;
    return 0;
}

/* The features of the calibration model, in CAL_W's order. */
static void cal_x(const vouch_feats *f, float text, float x[CAL_N]) {
    x[0] = f->fig;
    x[1] = f->lead;
    x[2] = f->rivals == 0;
    x[3] = f->agree;
    x[4] = f->hub;
    x[5] = f->colour >= 0;
    x[6] = fmaxf(f->colour, 0);
    x[7] = (float)f->col_unique;
    x[8] = text;
}

/* The probability that the winner b, a picture, is the one described (see CAL_W), or 0 for
 * a region that is no picture or shows none of the colours asked for; text is the confidence
 * from its words alone. */
static float picture_confidence(const vpe_region *b, const vouch_feats *f, float text) {
    if (f->fig <= NO_FIG || (b->kind != VPE_KIND_RASTER && b->kind != VPE_KIND_FIGURE)) return 0;
    if (f->colour >= 0 && f->colour < COL_VOUCH) return 0;
    float x[CAL_N], z = CAL_B;
    cal_x(f, text, x);
    for (int k = 0; k < CAL_N; k++) z += CAL_W[k] * fminf(fmaxf(x[k], CAL_LO[k]), CAL_HI[k]);
    float tie = 1.0f;
    if (f->rivals && !f->col_unique) tie = 1.0f - 0.5f * expf(-fmaxf(f->lead, 0) / LEAD_SCALE);
    return sigm(z) * tie;
}

/* Bytes of s to print under a cap of max that do not split a UTF-8 sequence. */
static int u8cap(const char *s, int max) {
    int k = 0;
    while (k < max && s[k]) k++;
    if (s[k])
        while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
    return k;
}

static void explain(const vpe_query *q, int32_t page, char *buf, size_t len) {
    size_t k = 0;
#define ADD(...) do { int w_ = snprintf(buf + k, len - k, __VA_ARGS__); \
                      if (w_ > 0) k = k + (size_t)w_ < len ? k + (size_t)w_ : len - 1; } while (0)
    buf[0] = 0;
    if (q->kind_primary) {
        ADD("kind=");
        for (int i = 0; i < VPE_KIND_COUNT; i++)
            if (q->kind_primary & BIT(i)) ADD("%s,", vpe_kind_name(i));
        k--;
        buf[k] = 0;
        ADD(" ");
    }
    if (q->label_num) ADD("label=%s %d ", q->label_table ? "table" : "figure", q->label_num);
    if (page) ADD("page=%d ", page);
    if (q->ordinal) ADD("ordinal=%d ", q->ordinal);
    if (q->pos_v) ADD("%s ", q->pos_v < 0 ? "top" : "bottom");
    if (q->pos_h) ADD("%s ", q->pos_h < 0 ? "left" : "right");
    if (q->rel) ADD("rel=%s anchor='%.*s' ", q->rel == VPE_REL_ABOVE ? "above" : q->rel == VPE_REL_BELOW
                    ? "below" : q->rel == VPE_REL_LEFT ? "left-of" : "right-of", u8cap(q->anchor, 60), q->anchor);
    if (q->n_content) ADD("content='%.*s' ", u8cap(q->target, 80), q->target);
#undef ADD
}

int vpe_locate(vpe *v, const vpe_region *cands, int32_t n, const char *description,
               const vpe_options *o, vpe_result *out, char *err, size_t errlen) {
    if (!v || !out || !description || n < 0 || (n > 0 && !cands)) {
        set_err(err, errlen, "bad arguments");
        return -1;
    }
    vpe_options def;
    if (!o) { vpe_options_default(&def); o = &def; }
    memset(out, 0, sizeof *out);
    out->index = -1;
    vpe_query q;
    vpe_query_parse(description, &q);
    int32_t page = o->page > 0 ? o->page : q.page;
    explain(&q, page, out->why, sizeof out->why);
    const char *dp = description;
    while (*dp && isspace((unsigned char)*dp)) dp++;
    if (!*dp) { set_err(err, errlen, "empty description"); return -1; }
    if (n == 0) return 0;

    int32_t dim = v->dim, nt = 2 * n + 4;
    float *buf = calloc((size_t)nt * dim + (size_t)n * (7 + C_N), sizeof *buf);
    uint8_t *elig = calloc((size_t)n * 2, 1);
    const char **texts = malloc(sizeof *texts * (size_t)nt);
    int rc = -1;
    if (!buf || !elig || !texts) { set_err(err, errlen, "out of memory"); goto done; }
    float *vec = buf, *sem = buf + (size_t)nt * dim, *asem = sem + n, *ksat = asem + n;
    float *score = ksat + n, *absv = score + n, *tscore = absv + n, *fcos = tscore + n;
    float *sat[C_N];
    for (int k = 0; k < C_N; k++) sat[k] = fcos + n + (size_t)k * n;
    uint8_t *has_clip = elig + n;
    int32_t n_elig = 0;
    for (int32_t i = 0; i < n; i++) {
        const vpe_region *r = &cands[i];
        int okbox = isfinite(r->box[0]) && isfinite(r->box[1]) && isfinite(r->box[2]) &&
                    isfinite(r->box[3]) && r->box[2] >= r->box[0] && r->box[3] >= r->box[1];
        elig[i] = okbox && (page <= 0 || r->page == page);
        n_elig += elig[i];
        /* only eligible regions can win, rank second, count as ordinals or anchors: the
         * others are not embedded (a page given = that page's regions only) */
        texts[2 * i] = elig[i] ? r->text : NULL;
        texts[2 * i + 1] = elig[i] ? r->context : NULL;
    }
    texts[2 * n] = q.target;
    texts[2 * n + 1] = q.anchor;
    texts[2 * n + 2] = q.target_all;
    texts[2 * n + 3] = description;
    if (!n_elig) { rc = 0; goto done; }
    if (embed_texts(v, texts, nt, vec, err, errlen)) goto done;
    const float *qt = vec + (size_t)2 * n * dim, *qa = qt + dim, *qall = qa + dim, *qd = qall + dim;
    for (int32_t i = 0; i < n; i++) {
        const float *tv = vec + (size_t)2 * i * dim, *cv = tv + dim;
        sem[i] = similarity(qt, q.target_words, tv, cv, &cands[i], dim);
        asem[i] = similarity(qa, q.anchor, tv, cv, &cands[i], dim);
        ksat[i] = kind_sat(q.kind_primary, q.kind_secondary, cands[i].kind);
        sat[C_KIND][i] = ksat[i];
    }
    ctx x = {cands, n, &q, elig, ksat, sem, asem};
    float w[C_N] = {0};
    uint8_t in_abs[C_N] = {0};
    w[C_KIND] = 1;
    in_abs[C_KIND] = q.kind_primary != 0;
    if (q.rel) {
        float ba = relation_sat(&x, sat[C_REL]);
        if (ba < 0.35f && q.rel_weak) {
            /* "over six months" was content, not a relation */
            q.rel = 0;
            for (int32_t i = 0; i < n; i++) {
                const float *tv = vec + (size_t)2 * i * dim, *cv = tv + dim;
                sem[i] = similarity(qall, q.all_words, tv, cv, &cands[i], dim);
            }
            q.n_content = q.all_n_content;
        } else {
            w[C_REL] = 2;
            in_abs[C_REL] = 1;
        }
    }
    if (q.label_num) {
        for (int32_t i = 0; i < n; i++)
            sat[C_LABEL][i] = has_label(cands[i].text, q.label_num, q.label_table) ? 1.0f : 0.0f;
        w[C_LABEL] = 2;
        in_abs[C_LABEL] = 1;
    }
    if (q.ordinal) { ordinal_sat(&x, sat[C_ORD]); w[C_ORD] = 2; in_abs[C_ORD] = 1; }
    if (q.pos_v || q.pos_h) { position_sat(&x, sat[C_POS]); w[C_POS] = 1; in_abs[C_POS] = 1; }
    for (int32_t i = 0; i < n; i++) sat[C_SEM][i] = sigm((sem[i] - SEM_MID) / SEM_SLOPE);
    w[C_SEM] = q.n_content ? 2.0f : 0.25f;
    in_abs[C_SEM] = q.n_content > 0;
    if (v->clip && o->clip_weight > 0) {
        if (clip_sat(v, cands, n, elig, description, sat[C_CLIP], has_clip, err, errlen)) goto done;
        for (int32_t i = 0; i < n; i++)
            if (!has_clip[i]) sat[C_CLIP][i] = 0.5f;   /* no preview: neutral */
        w[C_CLIP] = o->clip_weight;
        in_abs[C_CLIP] = q.n_content > 0;
    }

    int any_fig = 0;   /* fcos: the figure cosine, or NO_FIG without a figure vector */
    for (int32_t i = 0; i < n; i++) {
        any_fig |= elig[i] && cands[i].figure_vec;
        fcos[i] = cands[i].figure_vec ? dotf(qd, cands[i].figure_vec, dim) : NO_FIG;
    }
    /* a query for text, a heading, a caption or a table asks nothing of pixels */
    uint32_t pictures = BIT(VPE_KIND_RASTER) | BIT(VPE_KIND_FIGURE);
    int textual = q.kind_primary && !(q.kind_primary & pictures);
    if (any_fig && !textual) {   /* ranking only: a region without pixels shows nothing */
        for (int32_t i = 0; i < n; i++)
            sat[C_FIG][i] = fcos[i] > NO_FIG ? sigm((fcos[i] - FIG_MID) / FIG_SLOPE) : 0.0f;
        w[C_FIG] = FIG_WEIGHT;
    }
    uint32_t colours = vision_colour_words(description);
    int any_col = 0;
    for (int32_t i = 0; i < n && colours && !textual; i++)
        any_col |= elig[i] && cands[i].colour && (BIT(cands[i].kind) & pictures);
    if (any_col) {
        for (int32_t i = 0; i < n; i++)
            sat[C_COL][i] = cands[i].colour && (BIT(cands[i].kind) & pictures)
                                ? vision_colour_match(colours, cands[i].colour) : 0.0f;
        w[C_COL] = COL_WEIGHT;
    }

    float wsum = 0, asum = 0;
    for (int k = 0; k < C_N; k++) {
        wsum += w[k];
        if (in_abs[k]) asum += w[k];
    }
    int32_t best = -1;
    float sbest = -1;
    for (int32_t i = 0; i < n; i++) {
        float s = 0, la = 0;
        for (int k = 0; k < C_N; k++) {
            s += w[k] * sat[k][i];
            if (in_abs[k]) la += w[k] * logf(fmaxf(sat[k][i], 1e-6f));
        }
        score[i] = s / wsum;
        /* the pixel terms rank but do not vouch: on real figures a description of
         * something absent scores about as high on them as a true one (dev set negatives) */
        float wp = w[C_FIG] + w[C_COL];
        tscore[i] = wsum > wp ? (s - w[C_FIG] * sat[C_FIG][i] - w[C_COL] * sat[C_COL][i]) / (wsum - wp) : 0;
        absv[i] = asum > 0 ? expf(la / asum) : 0;
        if (elig[i] && score[i] > sbest) { sbest = score[i]; best = i; }
    }
    int32_t second = -1;
    for (int32_t i = 0; i < n; i++) {
        if (!elig[i] || i == best) continue;
        if (cands[i].page == cands[best].page && vpe_iou(cands[i].box, cands[best].box) > 0.5f)
            continue;   /* the same region seen twice (image + its figure area) */
        if (second < 0 || tscore[i] > tscore[second]) second = i;
    }
    float margin = 1.0f;
    if (second >= 0) margin = 1.0f - expf(-fmaxf(tscore[best] - tscore[second], 0) / MARGIN_SCALE);
    float conf = clamp01(absv[best] * margin), vouch = 0;
    const char *vouch_why = " | its pixels match (calibrated)";
    if (page > 0 && any_fig && !textual) {
        /* the picture evidence counts only as far as the description's other constraints
         * (label, ordinal, position, relation) hold. Not the kind: a picture asked for is a
         * picture, stored as a bitmap or drawn (a plot pasted as PNG is still a plot) */
        float la = 0, ws = 0;
        for (int k = C_LABEL; k <= C_REL; k++)
            if (in_abs[k]) {
                la += w[k] * logf(fmaxf(sat[k][best], 1e-6f));
                ws += w[k];
            }
        vouch_feats vf;
        if (vouch_features(v, cands, n, elig, best, qd, fcos, colours, &vf, err, errlen))
            goto done;
        float cons = ws > 0 ? expf(la / ws) : 1.0f;
        vouch = picture_confidence(&cands[best], &vf, conf) * cons;
        if (vf.col_unique)
            vouch_why = " | it alone on the page shows the colours named (calibrated)";
        if (o->debug)
            fprintf(stderr, "vpe: feat kind %d fig %.4f lead %.4f rivals %d agree %.4f hub %.4f "
                    "colour %.3f col_unique %d cons %.4f text %.4f abs %.4f margin %.4f sem %.4f "
                    "vouch %.4f\n", cands[best].kind, vf.fig, vf.lead, vf.rivals, vf.agree,
                    vf.hub, vf.colour, vf.col_unique, cons, conf, absv[best], margin, sem[best],
                    vouch);
    }
    if (o->debug) {
        fprintf(stderr, "vpe: '%s' -> %s\n", description, out->why);
        for (int32_t i = 0; i < n; i++) {
            if (!elig[i]) continue;
            const float *bx = cands[i].box;
            fprintf(stderr, "vpe:  #%d p%d [%.4f,%.4f,%.4f,%.4f] %-7s score %.3f abs %.3f |", i,
                    cands[i].page, bx[0], bx[1], bx[2], bx[3], vpe_kind_name(cands[i].kind),
                    score[i], absv[i]);
            for (int k = 0; k < C_N; k++)
                if (w[k] > 0) fprintf(stderr, " %s %.2f", cname[k], sat[k][i]);
            const char *t = cands[i].text ? cands[i].text : "";
            fprintf(stderr, " | cos %.3f acos %.3f fcos %.3f | %.*s\n", sem[i], asem[i],
                    fcos[i],
                    u8cap(t, 40), t);
        }
    }
    const vpe_region *b = &cands[best];
    out->index = best;
    out->page = b->page;
    out->kind = b->kind;
    memcpy(out->box, b->box, sizeof out->box);
    out->ref_id = b->ref_id;
    out->confidence = fmaxf(conf, vouch);
    out->found = out->confidence >= o->threshold;
    size_t l = strlen(out->why);
    snprintf(out->why + l, sizeof out->why - l, "| score %.2f abs %.2f margin %.2f%s%s", sbest,
             absv[best], margin, second < 0 ? " (no competitor)" : "",
             vouch > conf ? vouch_why : "");
    rc = 0;
done:
    free(buf);
    free(elig);
    free(texts);
    return rc;
}
