/* api/core/locate.c — VPE candidate regions from the store (images with their caption and
 * nearby text, figure areas, captions, tables, headings, text blocks) and api_locate(),
 * the document lookup + candidates + vpe_locate sequence shared by the CLI, the REST
 * server and the library. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "api/core/locate.h"
#include "api/core/embed.h"
#include "retrieval/retrieval.h"
#include "vision/colour.h"
#include "vision/textenc.h"


typedef struct {
    store_image_row *img;
    int32_t n_img;
    store_chunk_row *ch;
    int32_t n_ch;
    char **strs;                 /* texts built here */
    int32_t n_strs;
    float *figvecs;              /* figure vectors r[].figure_vec points into */
    float *colours;              /* colour profiles r[].colour points into */
} cands_priv;

static float *box4(store_box b, float out[4]) {
    out[0] = b.x0; out[1] = b.y0; out[2] = b.x1; out[3] = b.y1;
    return out;
}

static float box_iou(store_box a, store_box b) {
    float fa[4], fb[4];
    return vpe_iou(box4(a, fa), box4(b, fb));
}

/* Vertical gap between two boxes on a page (0 when they overlap vertically). */
static float vgap(store_box a, store_box b) {
    if (a.y1 < b.y0) return b.y0 - a.y1;
    if (b.y1 < a.y0) return a.y0 - b.y1;
    return 0;
}

static const store_chunk_row *chunk_by_id(const cands_priv *p, int64_t id) {
    for (int32_t i = 0; i < p->n_ch; i++)
        if (p->ch[i].id == id) return &p->ch[i];
    return NULL;
}

/* Nearest chunk of `kind` on `page` within max_gap vertically of box b (excluding skip). */
static const store_chunk_row *nearest_chunk(const cands_priv *p, int32_t page, int32_t kind,
                                            store_box b, float max_gap, const store_chunk_row *skip) {
    const store_chunk_row *best = NULL;
    float bg = max_gap;
    for (int32_t i = 0; i < p->n_ch; i++) {
        const store_chunk_row *c = &p->ch[i];
        if (c == skip || c->page != page || c->kind != kind) continue;
        float g = vgap(b, c->box);
        if (g <= bg) { bg = g; best = c; }
    }
    return best;
}

/* Keep a built string alive in priv; returns it (NULL on allocation failure). */
static char *keep(cands_priv *p, const char *a, const char *b) {
    if (!a && !b) return NULL;
    size_t la = a ? strlen(a) : 0, lb = b ? strlen(b) : 0;
    if (la > 600) la = 600;   /* context beyond this only dilutes the embedding */
    if (lb > 600) lb = 600;
    char *s = malloc(la + lb + 2);
    char **ns = realloc(p->strs, sizeof *ns * (size_t)(p->n_strs + 1));
    if (!s || !ns) { free(s); if (ns) p->strs = ns; return NULL; }
    p->strs = ns;
    memcpy(s, a ? a : "", la);
    size_t k = la;
    if (la && lb) s[k++] = '\n';
    memcpy(s + k, b ? b : "", lb);
    s[k + lb] = 0;
    p->strs[p->n_strs++] = s;
    return s;
}

void locate_cands_free(locate_cands *c) {
    if (!c) return;
    cands_priv *p = c->priv;
    if (p) {
        store_images_free(p->img, p->n_img);
        store_chunks_free(p->ch, p->n_ch);
        for (int32_t i = 0; i < p->n_strs; i++) free(p->strs[i]);
        free(p->strs);
        free(p->figvecs);
        free(p->colours);
        free(p);
    }
    free(c->r);
    free(c->is_image);
    memset(c, 0, sizeof *c);
}

static int32_t vpe_kind_of_chunk(int32_t k) {
    switch (k) {
    case STORE_KIND_CAPTION: return VPE_KIND_CAPTION;
    case STORE_KIND_FIGURE: return VPE_KIND_FIGURE;
    case STORE_KIND_TABLE: return VPE_KIND_TABLE;
    case STORE_KIND_HEADING: return VPE_KIND_HEADING;
    default: return VPE_KIND_TEXT;   /* text, OCR */
    }
}

int locate_cands_build(store *s, int64_t doc, int32_t page, locate_cands *out) {
    memset(out, 0, sizeof *out);
    cands_priv *p = calloc(1, sizeof *p);
    if (!p) return STORE_ERR_NOMEM;
    out->priv = p;
    int rc = store_images_get(s, doc, page, &p->img, &p->n_img);
    if (rc == STORE_OK) rc = store_chunks_get(s, doc, page, &p->ch, &p->n_ch);
    if (rc != STORE_OK) { locate_cands_free(out); return rc; }
    int32_t cap = p->n_img + p->n_ch;
    out->r = calloc((size_t)(cap ? cap : 1), sizeof *out->r);
    out->is_image = calloc((size_t)(cap ? cap : 1), 1);
    if (!out->r || !out->is_image) { locate_cands_free(out); return STORE_ERR_NOMEM; }
    int32_t n = 0;
    for (int32_t i = 0; i < p->n_img; i++) {
        const store_image_row *im = &p->img[i];
        const store_chunk_row *cap_c = im->caption_chunk ? chunk_by_id(p, im->caption_chunk) : NULL;
        if (!cap_c) cap_c = nearest_chunk(p, im->page, STORE_KIND_CAPTION, im->box, 0.04f, NULL);
        /* nearby: the figure area's own text (labels) and the closest paragraph */
        const store_chunk_row *fig = NULL;
        for (int32_t k = 0; k < p->n_ch; k++)
            if (p->ch[k].kind == STORE_KIND_FIGURE && p->ch[k].image_id == im->id) fig = &p->ch[k];
        store_box around = im->box;
        if (cap_c) { around.y0 = fminf(around.y0, cap_c->box.y0); around.y1 = fmaxf(around.y1, cap_c->box.y1); }
        const store_chunk_row *para = nearest_chunk(p, im->page, STORE_KIND_TEXT, around, 0.06f, NULL);
        vpe_region *r = &out->r[n];
        r->page = im->page;
        r->kind = im->kind == STORE_IMAGE_RASTER ? VPE_KIND_RASTER : VPE_KIND_FIGURE;
        box4(im->box, r->box);
        r->text = cap_c ? cap_c->text : fig ? fig->text : NULL;
        r->context = keep(p, para ? para->text : NULL, fig && cap_c ? fig->text : NULL);
        r->ref_id = im->id;
        r->png = im->png;
        r->png_len = im->png_len;
        out->is_image[n++] = 1;
    }
    for (int32_t i = 0; i < p->n_ch; i++) {
        const store_chunk_row *c = &p->ch[i];
        vpe_region *r = &out->r[n];
        r->page = c->page;
        r->kind = vpe_kind_of_chunk(c->kind);
        box4(c->box, r->box);
        r->text = c->text;
        r->ref_id = c->id;
        if (c->kind == STORE_KIND_FIGURE || c->kind == STORE_KIND_TABLE) {
            int dup = 0;   /* the same area already came in as an image */
            for (int32_t k = 0; k < p->n_img; k++)
                if (p->img[k].page == c->page && box_iou(p->img[k].box, c->box) > 0.5f) dup = 1;
            if (dup) continue;
            const store_chunk_row *cap_c = nearest_chunk(p, c->page, STORE_KIND_CAPTION, c->box, 0.04f, NULL);
            if (cap_c) {
                r->text = cap_c->text;
                r->context = c->text;
            }
        } else if (c->kind == STORE_KIND_HEADING || c->kind == STORE_KIND_CAPTION) {
            r->context = NULL;
        }
        out->is_image[n++] = 0;
    }
    out->n = n;
    return STORE_OK;
}

/* ---- narrowing a large document to the pages its stored vectors propose ---------- */
#define NARROW_MIN 200       /* fewer candidates: VPE scores them all */
#define NARROW_PAGES 8       /* pages kept */

/* The stored figure vectors' model id (in buf); NULL when the user switched them off
 * (MMRAG_FIGENC=none): then neither the narrowing nor VPE reads them. */
static const char *figure_model(store *s, char *buf, size_t len) {
    return embed_figure_model_of(s, buf, len) ? buf : NULL;
}

/* Per candidate: the stored cosine with the description (text or caption vector; an image
 * adds its pixel cosine and its colour match as the image list does), 2 when it carries the
 * asked label. Returns the number of candidates that had a vector. */
static int32_t score_cands(store *s, textenc *te, const locate_cands *c, const vpe_scope *sc,
                           const float *q, uint32_t colours, float *score) {
    int32_t dim = textenc_dim(te), have = 0;
    char fbuf[64];
    const char *fm = figure_model(s, fbuf, sizeof fbuf);
    float *v = malloc((size_t)dim * sizeof *v);
    for (int32_t i = 0; v && i < c->n; i++) {
        const vpe_region *r = &c->r[i];
        int32_t owner = c->is_image[i] ? STORE_OWNER_IMAGE : STORE_OWNER_CHUNK;
        float a = retr_stored_cosine(s, owner, r->ref_id, textenc_model_id(te), q, dim, v);
        if (c->is_image[i] && fm)
            a = retr_image_score(a, retr_stored_cosine(s, owner, r->ref_id, fm, q, dim, v));
        if (c->is_image[i] && a > -1.5f) a += retr_colour_score(s, r->ref_id, colours);
        have += a > -1.5f;
        if (vpe_text_has_label(r->text, sc->label_num, sc->label_table)) a = 2;
        score[i] = a;
    }
    free(v);
    return have;
}

/* Keep the candidates of the NARROW_PAGES pages whose best candidate scores highest. A
 * description that names a page or counts regions across pages, a small document, or one
 * mostly without stored vectors is left whole. Returns 0, or -1 (encoder failure: the
 * caller goes on with every candidate). */
static int narrow_pages(store *s, vpe *v, locate_cands *c, const char *desc) {
    vpe_scope sc;
    vpe_scope_of(desc, &sc);
    textenc *te = vpe_text_encoder(v);
    if (sc.page || sc.ordinal || c->n < NARROW_MIN || !te) return 0;
    int32_t dim = textenc_dim(te), maxp = 0;
    for (int32_t i = 0; i < c->n; i++) maxp = c->r[i].page > maxp ? c->r[i].page : maxp;
    float *q = malloc((size_t)dim * sizeof *q), *score = malloc((size_t)c->n * sizeof *score);
    float *best = malloc((size_t)(maxp + 1) * sizeof *best);
    char err[256];
    const char *t[1] = {desc};
    int rc = q && score && best ? textenc_embed(te, t, 1, q, err, sizeof err) : -1;
    if (!rc && score_cands(s, te, c, &sc, q, vision_colour_words(desc), score) * 2 >= c->n) {
        for (int32_t p = 0; p <= maxp; p++) best[p] = -3;
        for (int32_t i = 0; i < c->n; i++)
            if (score[i] > best[c->r[i].page]) best[c->r[i].page] = score[i];
        /* the NARROW_PAGES best pages, ties to the earlier page: identical pages (a
         * document that repeats itself) have identical vectors and must not all pass */
        int32_t *order = malloc((size_t)(maxp + 1) * sizeof *order), np = 0;
        if (!order) { rc = -1; goto out; }
        for (int32_t p = 0; p <= maxp; p++)
            if (best[p] > -3) order[np++] = p;
        for (int32_t i = 1; i < np; i++)   /* insertion sort: stable, pages ascending */
            for (int32_t j = i; j > 0 && best[order[j]] > best[order[j - 1]]; j--) {
                int32_t t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
            }
        for (int32_t k = NARROW_PAGES; k < np; k++) best[order[k]] = -3;   /* dropped */
        free(order);
        int32_t m = 0;
        for (int32_t i = 0; i < c->n; i++)
            if (best[c->r[i].page] > -3) {
                c->r[m] = c->r[i];
                c->is_image[m++] = c->is_image[i];
            }
        c->n = m;
    }
out:
    free(q);
    free(score);
    free(best);
    return rc;
}

/* Each image candidate's stored vector of (image space, model) into a block of dim floats
 * per image, pointed to by its region's colour (colour) or figure_vec (NULL where it has none). */
static float *attach_image_vecs(store *s, locate_cands *c, const char *model, int32_t dim,
                                int colour) {
    int32_t n_img = 0;
    for (int32_t i = 0; i < c->n; i++) n_img += c->is_image[i];
    float *block = model && dim && n_img ? malloc((size_t)n_img * (size_t)dim * sizeof *block) : NULL;
    float *at = block;
    for (int32_t i = 0; block && i < c->n; i++) {
        int32_t d = 0;
        if (!c->is_image[i] ||
            store_vector_get(s, STORE_OWNER_IMAGE, c->r[i].ref_id, "image", model, at, dim, &d) !=
                STORE_OK || d != dim)
            continue;
        if (colour) c->r[i].colour = at;
        else c->r[i].figure_vec = at;
        at += dim;
    }
    return block;
}

/* VPE's pixel evidence of every image candidate: its figure vector (when the store has them
 * in the text encoder's dimension) and its colour profile. */
static void attach_pixels(store *s, vpe *v, locate_cands *c) {
    textenc *te = vpe_text_encoder(v);
    cands_priv *p = c->priv;
    char fbuf[64];
    p->figvecs = attach_image_vecs(s, c, figure_model(s, fbuf, sizeof fbuf), te ? textenc_dim(te) : 0, 0);
    p->colours = attach_image_vecs(s, c, VISION_COLOUR_MODEL, VISION_COLOUR_DIM, 1);
}

static int locate_status(int store_rc) {
    switch (store_rc) {
    case STORE_ERR_NOTFOUND: return LOCATE_ERR_NOTFOUND;
    case STORE_ERR_NOMEM: return LOCATE_ERR_NOMEM;
    default: return LOCATE_ERR_STORE;
    }
}

int api_locate(store *s, vpe *v, int64_t doc, const char *description, const vpe_options *o,
               locate_result *out, char *err, size_t errlen) {
    vpe_options def;
    if (!o) { vpe_options_default(&def); o = &def; }
    memset(out, 0, sizeof *out);
    out->r.index = -1;
    /* the same whitespace set as vpe_locate, so a blank description is always ARG */
    if (!s || !description || !description[strspn(description, " \t\r\n\f\v")]) {
        snprintf(err, errlen, "locate: %s", description ? "empty description" : "bad arguments");
        return LOCATE_ERR_ARG;
    }
    store_doc_row d = {0};
    int rc = store_doc_get_id(s, doc, &d);
    int32_t pages = d.pages;
    store_doc_row_clear(&d);
    if (rc != STORE_OK) {
        if (rc == STORE_ERR_NOTFOUND) snprintf(err, errlen, "locate: no document %lld", (long long)doc);
        else snprintf(err, errlen, "%s", store_errmsg(s));
        return locate_status(rc);
    }
    out->doc_pages = pages;
    if (o->page < 0 || o->page > pages) {
        snprintf(err, errlen, "locate: document %lld has %d pages", (long long)doc, pages);
        return LOCATE_ERR_ARG;
    }
    if (!v) {
        snprintf(err, errlen, "locate: no region localizer (the text model is not loaded)");
        return LOCATE_ERR_NOMODEL;
    }
    /* With a page, only its candidates (VPE filters to it anyway); without, every page:
     * the description may name one ("on page 3"), which VPE parses. */
    locate_cands c = {0};
    rc = locate_cands_build(s, doc, o->page, &c);
    if (rc != STORE_OK) {
        snprintf(err, errlen, "%s", store_errmsg(s));
        locate_cands_free(&c);
        return locate_status(rc);
    }
    if (!o->page) narrow_pages(s, v, &c, description);  /* a failure: all candidates stay */
    attach_pixels(s, v, &c);
    int st = LOCATE_OK;
    if (vpe_locate(v, c.r, c.n, description, o, &out->r, err, errlen)) st = LOCATE_ERR_VPE;
    else if (out->r.index >= 0 && out->r.index < c.n) out->is_image = c.is_image[out->r.index];
    locate_cands_free(&c);
    return st;
}
