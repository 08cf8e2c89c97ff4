/* retrieval — the retriever: query encoding, the three candidate lists (resolved and
 * filtered against the store), fusion and citations. See retrieval.h. */
#include "retrieval/retrieval.h"
#include "vision/vision.h"
#include "retrieval/retrieval_internal.h"

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The figure vectors of one encoder. A retriever moves to a new one when the collection's
 * figure encoder changes; the old stays allocated until retr_free, as a search that began
 * before the move may still read it (it happens once per encoder upgrade). */
typedef struct fig_space {
    vindex *v;
    char model[64];
    struct fig_space *older;
} fig_space;

struct retriever {
    store *s;
    retr_config c;
    char text_model[64], image_model[64];
    vindex *vt, *vi;
    _Atomic(fig_space *) fig;   /* NULL: no figure space */
    pthread_mutex_t sync_mu;
};

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

void retr_config_default(retr_config *c) { memset(c, 0, sizeof *c); }

int retr_textenc_encode(void *user, const char *text, float *out, int32_t dim, char *err,
                        size_t errlen) {
    textenc *te = user;
    if (!te || textenc_dim(te) != dim) {
        retrieval_set_err(err, errlen, "retrieval: text encoder missing or dim %d != %d",
                          te ? textenc_dim(te) : 0, (int)dim);
        return -1;
    }
    const char *t[1] = {text ? text : ""};
    return textenc_embed(te, t, 1, out, err, errlen);
}

/* Open the figure vectors of `model` as the current figure space (under sync_mu, or
 * before the retriever is shared). */
static int open_figures(retriever *r, const char *model, char *err, size_t errlen) {
    fig_space *f = calloc(1, sizeof *f);
    if (!f) { retrieval_set_err(err, errlen, "retrieval: out of memory"); return -1; }
    snprintf(f->model, sizeof f->model, "%s", model);
    vindex_opts o;
    vindex_opts_default(&o, VINDEX_LSH, r->c.figure.dim);
    if (r->c.lsh_bits > 0) o.lsh_bits = r->c.lsh_bits;
    if (vindex_open_store(r->s, "figure", f->model, &o, &f->v, NULL, err, errlen)) {
        free(f);
        return -1;
    }
    f->older = atomic_load(&r->fig);
    atomic_store(&r->fig, f);
    return 0;
}

/* Follow the collection to another figure encoder's vectors when figure_now names one.
 * When they cannot be opened (out of memory), the search goes on with the old ones and the
 * next catch-up tries again. */
static void follow_figures(retriever *r) {
    fig_space *f = atomic_load(&r->fig);
    char id[64], err[256];
    if (f && r->c.figure_now && !r->c.figure_now(r->c.figure_now_user, r->s, id, sizeof id) &&
        strcmp(id, f->model))
        open_figures(r, id, err, sizeof err);
}

int retr_create(store *s, const retr_config *c, retriever **out, char *err, size_t errlen) {
    *out = NULL;
    if (!s || !c) { retrieval_set_err(err, errlen, "retrieval: no store or config"); return -1; }
    retriever *r = calloc(1, sizeof *r);
    if (!r) { retrieval_set_err(err, errlen, "retrieval: out of memory"); return -1; }
    r->s = s;
    r->c = *c;
    pthread_mutex_init(&r->sync_mu, NULL);
    if (c->text.model) snprintf(r->text_model, sizeof r->text_model, "%s", c->text.model);
    if (c->image.model) snprintf(r->image_model, sizeof r->image_model, "%s", c->image.model);
    r->c.text.model = c->text.model ? r->text_model : NULL;
    r->c.image.model = c->image.model ? r->image_model : NULL;
    r->c.figure.model = NULL;   /* the current one is r->fig's */
    vindex_opts o;
    if (r->c.text.model) {
        vindex_opts_default(&o, VINDEX_HNSW, c->text.dim);
        if (c->ef_search > 0) o.ef_search = c->ef_search;
        if (vindex_open_store(s, "text", r->text_model, &o, &r->vt, NULL, err, errlen)) goto fail;
    }
    if (r->c.image.model) {
        vindex_opts_default(&o, VINDEX_LSH, c->image.dim);
        if (c->lsh_bits > 0) o.lsh_bits = c->lsh_bits;
        if (vindex_open_store(s, "image", r->image_model, &o, &r->vi, NULL, err, errlen)) goto fail;
    }
    const char *fm = c->figure.model;   /* figure_now's answer, when it has one */
    char now[64];
    if (fm && c->figure_now && !c->figure_now(c->figure_now_user, s, now, sizeof now)) fm = now;
    if (fm && open_figures(r, fm, err, errlen)) goto fail;
    *out = r;
    return 0;
fail:
    retr_free(r);
    return -1;
}

void retr_free(retriever *r) {
    if (!r) return;
    vindex_free(r->vt);
    vindex_free(r->vi);
    for (fig_space *f = atomic_load(&r->fig), *o; f; f = o) {
        o = f->older;
        vindex_free(f->v);
        free(f);
    }
    pthread_mutex_destroy(&r->sync_mu);
    free(r);
}

/* Bring the text index, then the image index, up to date with the store through `update`
 * (vindex_sync_store: catch up; vindex_rebuild_store: compact), one caller at a time. */
static int update_indexes(retriever *r,
                          int (*update)(vindex *, store *, const char *, const char *,
                                        vindex_sync_info *, char *, size_t),
                          char *err, size_t errlen) {
    int rc = 0;
    pthread_mutex_lock(&r->sync_mu);
    fig_space *f = atomic_load(&r->fig);
    if (r->vt) rc = update(r->vt, r->s, "text", r->text_model, NULL, err, errlen);
    if (!rc && r->vi) rc = update(r->vi, r->s, "image", r->image_model, NULL, err, errlen);
    if (!rc) follow_figures(r);
    if (!rc && f && f == atomic_load(&r->fig))   /* a space opened just now is up to date */
        rc = update(f->v, r->s, "figure", f->model, NULL, err, errlen);
    pthread_mutex_unlock(&r->sync_mu);
    return rc;
}

int retr_compact(retriever *r, char *err, size_t errlen) {
    if (!r) return -1;
    return update_indexes(r, vindex_rebuild_store, err, errlen);
}

store *retr_store(retriever *r) { return r ? r->s : NULL; }

void retr_get_stats(retriever *r, retr_stats *st) {
    memset(st, 0, sizeof *st);
    if (!r) return;
    st->text_vectors = vindex_size(r->vt);
    st->text_dead = vindex_dead(r->vt);
    st->image_vectors = vindex_size(r->vi);
    st->image_dead = vindex_dead(r->vi);
    st->generation = r->vt ? vindex_generation(r->vt) : vindex_generation(r->vi);
}

/* ---- candidates resolved against the store ---- */
typedef struct cand {
    int64_t key;            /* chunk id, or -image id for an image without text */
    store_chunk_row row;    /* valid when key > 0 */
    int64_t image_id, doc;
    int32_t page;
    store_box box;          /* image box for key < 0 */
    char *snippet;          /* from BM25 */
    float score[RETR_NSRC];
    float dense;            /* cosine of the chunk's vector with the query, -2 = unknown */
    float sent;             /* best sentence cosine, -2 = none */
    float colour, words;    /* what image_rerank added to score[RETR_SRC_IMAGE] */
} cand;

typedef struct cands { cand *c; int32_t n, cap; } cands;

static cand *cands_find(cands *cs, int64_t key) {
    for (int32_t i = 0; i < cs->n; i++)
        if (cs->c[i].key == key) return &cs->c[i];
    return NULL;
}
static cand *cands_add(cands *cs, int64_t key) {
    cand *c = cands_find(cs, key);
    if (c) return c;
    if (cs->n == cs->cap) {
        int32_t cap = cs->cap ? cs->cap * 2 : 64;
        cand *n = realloc(cs->c, (size_t)cap * sizeof *n);
        if (!n) return NULL;
        cs->c = n;
        cs->cap = cap;
    }
    c = &cs->c[cs->n++];
    memset(c, 0, sizeof *c);
    c->key = key;
    c->dense = c->sent = -2.0f;
    return c;
}
static void cands_free(cands *cs) {
    for (int32_t i = 0; i < cs->n; i++) {
        store_chunk_row_clear(&cs->c[i].row);
        free(cs->c[i].snippet);
    }
    free(cs->c);
}

static int passes(const retr_opts *o, int64_t doc, int32_t page, int32_t kind) {
    if (o->n_docs > 0 && o->docs) {
        int hit = 0;
        for (int32_t i = 0; i < o->n_docs && !hit; i++) hit = o->docs[i] == doc;
        if (!hit) return 0;
    }
    if (o->page_min > 0 && page < o->page_min) return 0;
    if (o->page_max > 0 && page > o->page_max) return 0;
    if (o->kind >= 0 && kind != o->kind) return 0;
    return 1;
}
static int filtering(const retr_opts *o) {
    return (o->n_docs > 0 && o->docs) || o->page_min > 0 || o->page_max > 0 || o->kind >= 0;
}

/* chunk id -> candidate with its row; NULL when the chunk is gone (deleted) */
static cand *resolve_chunk(retriever *r, cands *cs, int64_t id) {
    cand *c = cands_find(cs, id);
    if (c) return c;
    store_chunk_row row;
    memset(&row, 0, sizeof row);
    if (store_chunk_get(r->s, id, &row) != STORE_OK) return NULL;
    c = cands_add(cs, id);
    if (!c) { store_chunk_row_clear(&row); return NULL; }
    c->row = row;
    c->doc = row.doc;
    c->page = row.page;
    c->box = row.box;
    c->image_id = row.image_id;
    return c;
}

/* the chunk that cites an image: its caption, else its own text (a figure chunk), else
 * the image itself. A paragraph anchored near a figure does not stand for it: its text
 * already counts in the text lists, and its box is not the figure's. */
static cand *resolve_image(retriever *r, cands *cs, int64_t image_id) {
    store_image_row img;
    memset(&img, 0, sizeof img);
    if (store_image_get(r->s, image_id, &img) != STORE_OK) return NULL;
    cand *c = NULL;
    if (img.caption_chunk > 0) c = resolve_chunk(r, cs, img.caption_chunk);
    if (!c) {
        store_chunk_row *rows = NULL;
        int32_t n = 0;
        if (store_chunks_get(r->s, img.doc, img.page, &rows, &n) == STORE_OK) {
            int64_t best = 0;
            for (int32_t i = 0; i < n; i++)
                if (rows[i].image_id == image_id &&
                    (rows[i].kind == STORE_KIND_CAPTION || rows[i].kind == STORE_KIND_FIGURE)) {
                    best = rows[i].id;
                    if (rows[i].kind == STORE_KIND_CAPTION) break;
                }
            store_chunks_free(rows, n);
            if (best) c = resolve_chunk(r, cs, best);
        }
    }
    if (!c) {
        c = cands_find(cs, -image_id);
        if (!c && (c = cands_add(cs, -image_id))) {
            c->doc = img.doc;
            c->page = img.page;
            c->box = img.box;
            c->row.kind = STORE_KIND_FIGURE;
        }
    }
    if (c) c->image_id = image_id;
    store_image_row_clear(&img);
    return c;
}

static int32_t cand_kind(const cand *c) { return c->key > 0 ? c->row.kind : STORE_KIND_FIGURE; }

/* one vector source: search with growing over-fetch until `depth` hits pass the filters */
static int vector_list(retriever *r, vindex *v, int src, float gain, const float *q,
                       const retr_opts *o, cands *cs, int64_t *list, int32_t *nlist, char *err,
                       size_t errlen) {
    *nlist = 0;
    int64_t size = vindex_size(v) - vindex_dead(v);
    if (size <= 0) return 0;
    int64_t fetch = filtering(o) ? (int64_t)o->depth * 4 : o->depth;
    for (;;) {
        if (fetch > size) fetch = size;
        vindex_hit *h = malloc((size_t)fetch * sizeof *h);
        if (!h) { retrieval_set_err(err, errlen, "retrieval: out of memory"); return -1; }
        int32_t nh = 0;
        if (vindex_search(v, q, (int32_t)fetch, h, &nh, err, errlen)) { free(h); return -1; }
        *nlist = 0;
        int floor_hit = 0;
        for (int32_t i = 0; i < nh && *nlist < o->depth; i++) {
            h[i].score *= gain;
            if (!isfinite(h[i].score)) continue;
            if (src == RETR_SRC_IMAGE && h[i].score < o->min_image_score) { /* sorted */
                floor_hit = 1;
                break;
            }
            cand *c = src == RETR_SRC_IMAGE ? resolve_image(r, cs, h[i].id)
                                            : resolve_chunk(r, cs, h[i].id);
            if (!c || !passes(o, c->doc, c->page, cand_kind(c))) continue;
            int dup = 0;
            for (int32_t j = 0; j < *nlist && !dup; j++) dup = list[j] == c->key;
            if (dup) continue;  /* two images citing one caption: first (best) wins */
            if (c->score[src] < h[i].score || !c->score[src]) c->score[src] = h[i].score;
            if (src == RETR_SRC_TEXT) c->dense = h[i].score;
            list[(*nlist)++] = c->key;
        }
        free(h);
        if (*nlist >= o->depth || fetch >= size || floor_hit) return 0;
        fetch *= 4;
    }
}

static int by_image_score(const void *a, const void *b) {
    const cand *x = *(const cand *const *)a, *y = *(const cand *const *)b;
    float sx = x->score[RETR_SRC_IMAGE], sy = y->score[RETR_SRC_IMAGE];
    return sx < sy ? 1 : sx > sy ? -1 : 0;
}

float retr_image_score(float caption_cos, float pixel_cos) {
    if (pixel_cos < -1.5f) return caption_cos;
    return (caption_cos < -1.5f ? 0.0f : caption_cos) + RETR_FIGURE_WEIGHT * pixel_cos;
}

float retr_stored_cosine(store *s, int32_t owner, int64_t id, const char *model, const float *q,
                         int32_t dim, float *buf) {
    int32_t d = 0;
    const char *space = owner == STORE_OWNER_CHUNK ? "text" : "image";
    if (!q || store_vector_get(s, owner, id, space, model, buf, dim, &d) != STORE_OK || d != dim)
        return -2.0f;
    float c = 0;
    for (int32_t k = 0; k < dim; k++) c += q[k] * buf[k];
    return c;
}

/* The figure index joins the image list. Its hits enter on the caption scale
 * (RETR_FIGURE_GAIN, for the min_image_score floor); then every image of the merged list
 * scores its caption cosine plus RETR_FIGURE_WEIGHT times its pixel cosine, so the two
 * kinds of evidence add up instead of the louder one hiding the other. An image without a
 * caption has only nearby paragraphs for text: its text cosine counts RETR_NEARBY_TEXT.
 * Re-sorted and cut to depth. */
static int figure_list(retriever *r, const fig_space *fs, const float *qt, const float *qi,
                       const retr_opts *o, cands *cs, int64_t *list, int32_t *nlist, char *err,
                       size_t errlen) {
    int32_t df = vindex_get_opts(fs->v)->dim, di = r->vi ? vindex_get_opts(r->vi)->dim : 0;
    int64_t *mine = malloc((size_t)o->depth * sizeof *mine);
    cand **all = malloc((size_t)(o->depth * 2) * sizeof *all);
    float *buf = malloc((size_t)(df > di ? df : di) * sizeof *buf);
    int32_t nm = 0, na = 0, rc = 0;
    if (!mine || !all || !buf) { retrieval_set_err(err, errlen, "retrieval: out of memory"); rc = -1; }
    if (!rc) rc = vector_list(r, fs->v, RETR_SRC_IMAGE, RETR_FIGURE_GAIN, qt, o, cs, mine, &nm,
                              err, errlen);
    for (int32_t i = 0; !rc && i < *nlist + nm; i++) {
        cand *c = cands_find(cs, i < *nlist ? list[i] : mine[i - *nlist]);
        int dup = !c;
        for (int32_t j = 0; j < na && !dup; j++) dup = all[j] == c;
        if (dup) continue;
        all[na++] = c;
        if (!c->image_id) continue;
        float cap = r->vi ? retr_stored_cosine(r->s, STORE_OWNER_IMAGE, c->image_id, r->image_model,
                                               qi, di, buf) : -2;
        float pix = retr_stored_cosine(r->s, STORE_OWNER_IMAGE, c->image_id, fs->model, qt, df,
                                       buf);
        if (cap > -1.5f && c->row.kind != STORE_KIND_CAPTION) cap *= RETR_NEARBY_TEXT;
        if (cap > -1.5f || pix > -1.5f) c->score[RETR_SRC_IMAGE] = retr_image_score(cap, pix);
    }
    if (!rc) {
        qsort(all, (size_t)na, sizeof *all, by_image_score);
        *nlist = na < o->depth ? na : o->depth;
        for (int32_t i = 0; i < *nlist; i++) list[i] = all[i]->key;
    }
    free(mine);
    free(all);
    free(buf);
    return rc;
}

float retr_colour_score(store *s, int64_t image_id, uint32_t want) {
    float prof[VISION_COLOUR_DIM];
    int32_t d = 0;
    if (!want || store_vector_get(s, STORE_OWNER_IMAGE, image_id, "image", VISION_COLOUR_MODEL, prof,
                                  VISION_COLOUR_DIM, &d) != STORE_OK || d != VISION_COLOUR_DIM)
        return 0;
    return RETR_COLOUR_WEIGHT * vision_colour_match(want, prof);
}

/* The chunks of the pages an image list touches, each page read once. */
typedef struct { int64_t doc; int32_t page, n; store_chunk_row *rows; } page_rows;
typedef struct { page_rows *p; int32_t n, cap; } page_cache;

static const page_rows *page_get(retriever *r, page_cache *pc, int64_t doc, int32_t page) {
    for (int32_t i = 0; i < pc->n; i++)
        if (pc->p[i].doc == doc && pc->p[i].page == page) return &pc->p[i];
    if (pc->n == pc->cap) {
        int32_t cap = pc->cap ? 2 * pc->cap : 16;
        page_rows *np = realloc(pc->p, (size_t)cap * sizeof *np);
        if (!np) return NULL;
        pc->p = np;
        pc->cap = cap;
    }
    page_rows *pr = &pc->p[pc->n];
    *pr = (page_rows){doc, page, 0, NULL};
    if (store_chunks_get(r->s, doc, page, &pr->rows, &pr->n) != STORE_OK) return NULL;
    pc->n++;
    return pr;
}

static void page_cache_free(page_cache *pc) {
    for (int32_t i = 0; i < pc->n; i++) store_chunks_free(pc->p[i].rows, pc->p[i].n);
    free(pc->p);
}

/* The share of the query's words in an image's own text: the chunks anchored to it (its
 * caption among them, on its page); -1 when the page cannot be read. */
static float image_words(retriever *r, page_cache *pc, const cand *c, const char *query) {
    const page_rows *pr = page_get(r, pc, c->doc, c->page);
    if (!pr) return -1;
    size_t len = 1;
    for (int32_t i = 0; i < pr->n; i++)
        if (pr->rows[i].image_id == c->image_id && pr->rows[i].text) len += strlen(pr->rows[i].text) + 1;
    char *text = malloc(len);
    if (!text) return -1;
    size_t at = 0;
    for (int32_t i = 0; i < pr->n; i++)
        if (pr->rows[i].image_id == c->image_id && pr->rows[i].text)
            at += (size_t)sprintf(text + at, "%s\n", pr->rows[i].text);
    text[at] = 0;
    float f = retr_word_overlap(query, text);
    free(text);
    return f;
}

/* Evidence the vectors blur, added to every image of the list before it is re-sorted: the
 * colours the query names that the image shows (retr_colour_score) and the query's words
 * found in its own text (RETR_WORDS_WEIGHT). */
static void image_rerank(retriever *r, const char *query, cands *cs, int64_t *list, int32_t n) {
    uint32_t want = vision_colour_words(query);
    int words = retr_word_overlap(query, NULL) >= 0;
    cand **all = (want || words) && n ? malloc((size_t)n * sizeof *all) : NULL;
    if (!all) return;
    int ok = 1;
    page_cache pc = {0};
    for (int32_t i = 0; i < n; i++) {
        cand *c = all[i] = cands_find(cs, list[i]);
        ok &= c != NULL;
        if (!c || !c->image_id) continue;
        c->colour = retr_colour_score(r->s, c->image_id, want);
        c->words = words ? RETR_WORDS_WEIGHT * fmaxf(0, image_words(r, &pc, c, query)) : 0;
        c->score[RETR_SRC_IMAGE] += c->colour + c->words;
    }
    page_cache_free(&pc);
    if (ok) {
        qsort(all, (size_t)n, sizeof *all, by_image_score);
        for (int32_t i = 0; i < n; i++) list[i] = all[i]->key;
    }
    free(all);
}

static int bm25_list(retriever *r, const char *query, const retr_opts *o, cands *cs,
                     int64_t *list, int32_t *nlist, char *err, size_t errlen) {
    *nlist = 0;
    store_search_opts so;
    store_search_opts_default(&so);
    so.k = o->depth;
    so.docs = o->docs;
    so.n_docs = o->docs ? o->n_docs : 0;
    so.page_min = o->page_min;
    so.page_max = o->page_max;
    so.kind = o->kind;
    so.section_weight = o->section_weight;
    store_hit *h = NULL;
    int32_t n = 0;
    if (store_search_bm25(r->s, query, &so, &h, &n) != STORE_OK) {
        retrieval_set_err(err, errlen, "retrieval: %s", store_errmsg(r->s));
        return -1;
    }
    for (int32_t i = 0; i < n; i++) {
        cand *c = resolve_chunk(r, cs, h[i].chunk_id);
        if (!c) continue;
        c->score[RETR_SRC_BM25] = (float)h[i].score;
        if (!c->snippet && h[i].snippet) c->snippet = strdup(h[i].snippet);
        list[(*nlist)++] = c->key;
    }
    store_hits_free(h, n);
    return 0;
}

/* Dense scores for score fusion: the cosine of every chunk candidate the text list did
 * not rank (a BM25 or image candidate), from its stored vector, and each chunk's best
 * sentence cosine. A candidate without a vector keeps -2 (unknown). */
static int score_dense(retriever *r, cands *cs, const float *q, int32_t dim, int sentences,
                       char *err, size_t errlen) {
    float *v = malloc((size_t)dim * sizeof *v);
    int64_t *ids = malloc((size_t)(cs->n ? cs->n : 1) * sizeof *ids);
    float *best = malloc((size_t)(cs->n ? cs->n : 1) * sizeof *best);
    int32_t n = 0, rc = 0;
    if (!v || !ids || !best) { retrieval_set_err(err, errlen, "retrieval: out of memory"); rc = -1; goto out; }
    for (int32_t i = 0; i < cs->n; i++) {
        cand *c = &cs->c[i];
        if (c->key <= 0) continue;
        ids[n++] = c->key;
        if (c->dense > -1.5f) continue;
        float s = retr_stored_cosine(r->s, STORE_OWNER_CHUNK, c->key, r->text_model, q, dim, v);
        if (s > -1.5f) c->dense = s;
    }
    if (sentences && n &&
        store_sentvecs_best(r->s, r->text_model, q, dim, ids, n, best) != STORE_OK) {
        retrieval_set_err(err, errlen, "retrieval: %s", store_errmsg(r->s));
        rc = -1;
        goto out;
    }
    for (int32_t i = 0, j = 0; sentences && i < cs->n; i++)
        if (cs->c[i].key > 0) cs->c[i].sent = best[j++];
out:
    free(v); free(ids); free(best);
    return rc;
}

/* score fusion over every candidate of the lists (retr_fuse_scores) */
static int32_t fuse_candidates(cands *cs, int64_t *const lists[RETR_NSRC], const int32_t nl[RETR_NSRC],
                               const retr_weights *w, retr_fused *out, int32_t max) {
    retr_scored *sc = calloc((size_t)(cs->n ? cs->n : 1), sizeof *sc);
    if (!sc) return -1;
    for (int32_t i = 0; i < cs->n; i++) {
        const cand *c = &cs->c[i];
        float d = c->sent > c->dense ? c->sent : c->dense, im = c->score[RETR_SRC_IMAGE];
        /* a non-finite score (a vector read while it was being written, a degenerate
         * one) counts as unknown: it must not poison the order or the JSON */
        if (!isfinite(d)) d = -2;
        if (!isfinite(im)) im = 0;
        sc[i] = (retr_scored){c->key, d, 0, im, {0}};
    }
    for (int s = 0; s < RETR_NSRC; s++)
        for (int32_t r = 0; r < nl[s]; r++)
            for (int32_t i = 0; i < cs->n; i++)
                if (sc[i].id == lists[s][r] && !sc[i].rank[s]) {
                    sc[i].rank[s] = r + 1;
                    if (s == RETR_SRC_BM25) sc[i].bm25 = cs->c[i].score[RETR_SRC_BM25];
                }
    /* only what some weighted list found is a candidate */
    int32_t m = 0;
    for (int32_t i = 0; i < cs->n; i++) {
        int in = 0;
        for (int s = 0; s < RETR_NSRC; s++) in |= sc[i].rank[s] && w->w[s] > 0;
        if (in) sc[m++] = sc[i];
    }
    int32_t k = retr_fuse_scores(sc, m, w, out, max);
    free(sc);
    return k;
}

/* a short passage of text around the first query word found in it */
static char *make_snippet(const char *text, const char *query) {
    if (!text) return strdup("");
    size_t len = strlen(text), at = 0;
    const char *p = query ? query : "";
    while (*p) {
        while (*p && !isalnum((unsigned char)*p)) p++;
        const char *w = p;
        while (*p && isalnum((unsigned char)*p)) p++;
        size_t wl = (size_t)(p - w);
        if (wl < 3) continue;
        for (size_t i = 0; i + wl <= len; i++)
            if (strncasecmp(text + i, w, wl) == 0) { at = i; goto found; }
    }
found:;
    size_t from = at > 60 ? at - 60 : 0, to = from + 200 < len ? from + 200 : len;
    while (from > 0 && ((unsigned char)text[from] & 0xC0) == 0x80) from--;  /* UTF-8 start */
    while (to < len && ((unsigned char)text[to] & 0xC0) == 0x80) to++;
    char *s = malloc(to - from + 8);
    if (!s) return NULL;
    size_t n = 0;
    if (from > 0) { memcpy(s, "\xE2\x80\xA6", 3); n = 3; }
    for (size_t i = from; i < to; i++) s[n++] = text[i] == '\n' ? ' ' : text[i];
    if (to < len) { memcpy(s + n, "\xE2\x80\xA6", 3); n += 3; }
    s[n] = 0;
    return s;
}

void retr_result_free(retr_result *res) {
    if (!res) return;
    for (int32_t i = 0; i < res->n; i++) {
        free(res->hits[i].title);
        free(res->hits[i].text);
        free(res->hits[i].snippet);
    }
    free(res->hits);
    memset(res, 0, sizeof *res);
}

static char *doc_title(retriever *r, int64_t doc) {
    store_doc_row d;
    memset(&d, 0, sizeof d);
    char *t = NULL;
    if (store_doc_get_id(r->s, doc, &d) == STORE_OK)
        t = strdup(d.title && *d.title ? d.title : (d.path ? d.path : ""));
    store_doc_row_clear(&d);
    return t ? t : strdup("");
}

int retr_search_vec(retriever *r, const char *query, const float *qvec_text,
                    const float *qvec_image, const retr_opts *o_in, retr_result *res,
                    char *err, size_t errlen) {
    memset(res, 0, sizeof *res);
    if (!r) { retrieval_set_err(err, errlen, "retrieval: no retriever"); return -1; }
    retr_opts o;
    if (o_in) o = *o_in; else retr_opts_default(&o);
    if (o.k <= 0) o.k = 10;
    if (o.depth < o.k) o.depth = o.k;
    if (o.depth > 1000) o.depth = 1000;
    if (!query) query = "";
    retr_adapt_weights(query, &o, &res->weights);
    const float *w = res->weights.w;
    if (update_indexes(r, vindex_sync_store, err, errlen)) return -1;

    double t0 = now_ms();
    float *qt = NULL, *qi = NULL;
    int rc = 0;
    int want_text = r->vt && w[RETR_SRC_TEXT] > 0;
    int same_space = r->c.image.model && r->c.text.model && !r->c.image.encode &&
                     strcmp(r->image_model, r->text_model) == 0;
    const fig_space *fs = atomic_load(&r->fig);   /* one space for the whole search */
    int want_image = (r->vi || fs) && w[RETR_SRC_IMAGE] > 0;
    int32_t dt = r->vt ? vindex_get_opts(r->vt)->dim : 0;
    int32_t di = r->vi ? vindex_get_opts(r->vi)->dim : 0;
    if ((want_text || (want_image && same_space)) && !qvec_text && r->c.text.encode && dt) {
        qt = malloc((size_t)dt * sizeof *qt);
        if (!qt || r->c.text.encode(r->c.text.user, query, qt, dt, err, errlen)) { rc = -1; goto out; }
        qvec_text = qt;
    }
    if (want_image && !qvec_image) {
        if (same_space && di == dt) qvec_image = qvec_text;
        else if (r->c.image.encode && di) {
            qi = malloc((size_t)di * sizeof *qi);
            if (!qi || r->c.image.encode(r->c.image.user, query, qi, di, err, errlen)) { rc = -1; goto out; }
            qvec_image = qi;
        }
    }
    /* figure vectors live in the text encoder's space (LiT): the text query searches them */
    int want_figure = want_image && fs && qvec_text && vindex_get_opts(fs->v)->dim == dt;
    res->encode_ms = now_ms() - t0;

    double t1 = now_ms();
    cands cs = {0};
    int64_t *lists[RETR_NSRC];
    int32_t nl[RETR_NSRC] = {0};
    for (int s = 0; s < RETR_NSRC; s++) lists[s] = malloc((size_t)o.depth * sizeof(int64_t));
    if (!lists[0] || !lists[1] || !lists[2]) {
        retrieval_set_err(err, errlen, "retrieval: out of memory");
        rc = -1;
    }
    if (!rc && want_text && qvec_text)
        rc = vector_list(r, r->vt, RETR_SRC_TEXT, 1, qvec_text, &o, &cs, lists[0], &nl[0], err, errlen);
    if (!rc && want_image && qvec_image)
        rc = vector_list(r, r->vi, RETR_SRC_IMAGE, 1, qvec_image, &o, &cs, lists[1], &nl[1], err, errlen);
    if (!rc && want_figure)
        rc = figure_list(r, fs, qvec_text, qvec_image, &o, &cs, lists[1], &nl[1], err, errlen);
    if (!rc && want_image) image_rerank(r, query, &cs, lists[1], nl[1]);
    if (!rc && w[RETR_SRC_BM25] > 0)
        rc = bm25_list(r, query, &o, &cs, lists[2], &nl[2], err, errlen);
    retr_fused *f = rc ? NULL : malloc((size_t)o.k * sizeof *f);
    int32_t nf = 0;
    if (!rc && !f) { retrieval_set_err(err, errlen, "retrieval: out of memory"); rc = -1; }
    int score_fusion = o.fusion == RETR_FUSE_SCORE && w[RETR_SRC_TEXT] > 0 && qvec_text && r->vt;
    if (!rc && score_fusion) rc = score_dense(r, &cs, qvec_text, dt, o.sentences, err, errlen);
    if (!rc && score_fusion) {
        nf = fuse_candidates(&cs, lists, nl, &res->weights, f, o.k);
        if (nf < 0) { retrieval_set_err(err, errlen, "retrieval: out of memory"); rc = -1; }
    } else if (!rc) {
        nf = retr_fuse((const int64_t *const *)lists, nl, &res->weights, o.rrf_k, f, o.k);
    }
    if (!rc && nf > 0) {
        res->hits = calloc((size_t)nf, sizeof *res->hits);
        if (!res->hits) { retrieval_set_err(err, errlen, "retrieval: out of memory"); rc = -1; }
    }
    for (int32_t i = 0; !rc && i < nf; i++) {
        cand *c = cands_find(&cs, f[i].id);
        retr_hit *h = &res->hits[res->n++];
        h->chunk_id = c->key > 0 ? c->key : 0;
        h->doc = c->doc;
        h->title = doc_title(r, c->doc);
        h->page = c->page;
        h->kind = cand_kind(c);
        h->box = c->box;
        h->image_id = c->image_id;
        h->text = strdup(c->key > 0 && c->row.text ? c->row.text : "");
        h->snippet = c->snippet ? strdup(c->snippet) : make_snippet(h->text, query);
        memcpy(h->rank, f[i].rank, sizeof h->rank);
        memcpy(h->score, c->score, sizeof h->score);
        h->dense = c->dense;
        h->sentence = c->sent;
        h->colour = c->colour;
        h->words = c->words;
        h->fused = f[i].fused;
    }
    free(f);
    for (int s = 0; s < RETR_NSRC; s++) free(lists[s]);
    cands_free(&cs);
    res->search_ms = now_ms() - t1;
out:
    free(qt);
    free(qi);
    if (rc) retr_result_free(res);
    return rc;
}

int retr_search(retriever *r, const char *query, const retr_opts *o, retr_result *res,
                char *err, size_t errlen) {
    return retr_search_vec(r, query, NULL, NULL, o, res, err, errlen);
}
