/* api/core/embed.c — fill missing vectors: chunks and sentences (text space), images by
 * their caption text (image space), both with MiniLM; images by their pixels with mmrag's
 * own figure encoder (figure space), trained into MiniLM's space (vision/train); and each
 * image's named-colour profile (vision/colour.c). */
#include "api/core/embed.h"
#include "api/core/embed_cache.h"
#include "api/core/ground.h"
#include "vision/clip.h"
#include "vision/colour.h"
#include "vision/textenc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

struct embed_ctx {
    kern_pool *pool;          /* shared by both encoders (one caller at a time) */
    textenc *te;
    embed_cache *cache;       /* identical texts embedded once (overlaps, running heads) */
    _Atomic int64_t encoded_direct;   /* texts encoded outside the cache (chunks with sentences in
                                 context) */
    int sent_in_context;      /* sentence vectors pooled inside their chunk's pass
                                 ($MMRAG_SENTVEC=context) instead of encoded alone */
    clip_model *fig;          /* NULL: images are found by their text only (fig_notice) */
    char fig_id[40];          /* "mmrag-figenc-" + hash of the file: the figure vectors' id */
    char fig_notice[512];
    embed_progress_fn progress;
    void *progress_user;
    int64_t done, total;      /* of the current embed_pending */
};

void embed_set_progress(embed_ctx *e, embed_progress_fn fn, void *user) {
    e->progress = fn;
    e->progress_user = user;
}

/* The first of rel[] (relative to the executable's folder) that exists and is a folder
 * (want_dir) or a file; 1 with the path in buf, else 0. */
static int beside_exe(const char *const *rel, size_t n, int want_dir, char *buf, size_t len) {
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) return 0;
    exe[k] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    struct stat st;
    for (size_t i = 0; i < n; i++) {
        snprintf(buf, len, "%s%s", exe, rel[i]);
        if (stat(buf, &st) == 0 && (want_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode))) return 1;
    }
    return 0;
}

/* The model cache is found without configuration from the build tree or an install:
 * given dir, $MMRAG_MODELS, ./models, then models/ beside or above the executable. */
const char *embed_models_dir(const char *given, char *buf, size_t len) {
    const char *env = getenv("MMRAG_MODELS");
    if (given && *given) return given;
    if (env && *env) return env;
    struct stat st;
    if (stat("models", &st) == 0 && S_ISDIR(st.st_mode)) return "models";
    static const char *const rel[] = {"/models", "/../models", "/../share/mmrag/models"};
    if (beside_exe(rel, sizeof rel / sizeof *rel, 1, buf, len)) return buf;
    return "models";
}

int embed_figures_enabled(void) {
    const char *env = getenv("MMRAG_FIGENC");
    return !(env && !strcmp(env, "none"));
}

/* The figure encoder ships with mmrag (it is ours): $MMRAG_FIGENC (a file, or "none"),
 * else <models>/figenc/, the source tree or the install beside the executable, else
 * ./vision/data/figenc/. Returns 1 with a path, 0 when switched off. */
static int figenc_path(const char *models, char *buf, size_t len) {
    const char *env = getenv("MMRAG_FIGENC");
    if (!embed_figures_enabled()) return 0;
    if (env && *env) { snprintf(buf, len, "%s", env); return 1; }
    struct stat st;
    snprintf(buf, len, "%s/figenc/model.safetensors", models);
    if (stat(buf, &st) == 0) return 1;
    static const char *const rel[] = {"/../vision/data/figenc/model.safetensors",
                                      "/../share/mmrag/figenc/model.safetensors"};
    if (beside_exe(rel, sizeof rel / sizeof *rel, 0, buf, len)) return 1;
    snprintf(buf, len, "vision/data/figenc/model.safetensors");
    return 1;
}

/* "mmrag-figenc-" and an FNV-1a style hash of the file taken 8 bytes at a step (the file is
 * read at every start that loads the encoder: 13 MB in ~5 ms, byte by byte it took ~21).
 * A token budget other than the training grid's (config.json's mmrag.max_tokens) changes the
 * vectors as much as the weights do, so it seeds the hash; the trained budget leaves the id
 * as it was. Returns 0 or -1. */
static int file_id(const char *path, const clip_model *m, char *out, size_t len) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    int32_t side = clip_image_size(m) / clip_patch_size(m), budget = clip_default_max_tokens(m);
    uint64_t h = 0xcbf29ce484222325ULL, w;
    if (budget != side * side) h = (h ^ (uint64_t)(uint32_t)budget) * 0x100000001b3ULL;
    unsigned char buf[1 << 16];
    size_t n, i;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        for (i = 0; i + 8 <= n; i += 8) {
            memcpy(&w, buf + i, 8);
            h = (h ^ w) * 0x100000001b3ULL;
        }
        for (; i < n; i++) h = (h ^ buf[i]) * 0x100000001b3ULL;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) return -1;
    snprintf(out, len, "mmrag-figenc-%016llx", (unsigned long long)h);
    return 0;
}

/* A missing or broken figure encoder is a notice, never a failure: images keep their
 * text-proxied vectors. */
static void load_figenc(embed_ctx *e, const char *models) {
    char err[300] = "";
    char path[4096];
    if (!figenc_path(models, path, sizeof path)) {
        snprintf(e->fig_notice, sizeof e->fig_notice, "figure encoder off (MMRAG_FIGENC=none): "
                 "images are found by their caption and nearby text only");
        return;
    }
    if (clip_create(path, e->pool, &e->fig, err, sizeof err) == 0 &&
        clip_dim(e->fig) != textenc_dim(e->te)) {
        snprintf(err, sizeof err, "its vectors have %d dimensions, the text encoder's %d",
                 clip_dim(e->fig), textenc_dim(e->te));
        clip_free(e->fig);
        e->fig = NULL;
    }
    if (e->fig && file_id(path, e->fig, e->fig_id, sizeof e->fig_id)) {
        snprintf(err, sizeof err, "cannot read %.200s", path);
        clip_free(e->fig);
        e->fig = NULL;
    }
    if (!e->fig)
        snprintf(e->fig_notice, sizeof e->fig_notice, "figure encoder not loaded (%.200s): images "
                 "are found by their caption and nearby text only", err);
}

int embed_figure_model_of(store *s, char *buf, size_t len) {
    if (!embed_figures_enabled()) return 0;
    if (store_meta_get(s, EMBED_FIGURE_META, buf, len) != STORE_OK) snprintf(buf, len, "%s", EMBED_FIGURE_LEGACY);
    return 1;
}

int embed_create(const char *models_dir, embed_ctx **out, char *err, size_t errlen) {
    *out = NULL;
    char dir[4096], found[4096];
    snprintf(dir, sizeof dir, "%s/minilm", embed_models_dir(models_dir, found, sizeof found));
    embed_ctx *e = calloc(1, sizeof *e);
    if (!e || !(e->pool = kern_pool_create(0))) {
        free(e);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (textenc_create(dir, e->pool, &e->te, err, errlen)) {
        kern_pool_free(e->pool);
        free(e);
        return -1;
    }
    /* 4096 recent texts: ~6.5 MB, about the sentences of 30 manual pages */
    if (!(e->cache = embed_cache_create(textenc_dim(e->te), 4096))) {
        embed_free(e);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* MMRAG_SENTVEC=context: sentence vectors pooled inside the chunk's pass, 1.7x faster
     * indexing; not the default, as on the untuned Debian set R@5 fell 0.883 -> 0.844
     * while R@1 rose 0.532 -> 0.558 (issue 14, measured side by side) */
    const char *sv = getenv("MMRAG_SENTVEC");
    e->sent_in_context = sv && strcmp(sv, "context") == 0;
    load_figenc(e, embed_models_dir(models_dir, found, sizeof found));
    *out = e;
    return 0;
}

void embed_free(embed_ctx *e) {
    if (!e) return;
    textenc_free(e->te);
    embed_cache_free(e->cache);
    clip_free(e->fig);
    kern_pool_free(e->pool);
    free(e);
}

/* The figure space a search reads: this encoder's, unless the collection still holds a
 * complete set of another's (not re-embedded yet: a read-only collection, or a server that
 * has not indexed since the upgrade). */
static const char *figure_space(embed_ctx *e, store *s, char *id, size_t len) {
    int64_t n = 0;
    if (e->fig && s && embed_figure_model_of(s, id, len) && strcmp(id, e->fig_id) &&
        store_vectors_count(s, "image", id, STORE_OWNER_IMAGE, &n) == STORE_OK && n > 0)
        return id;
    return embed_figure_model_id(e);
}

/* retr_config.figure_now: the space figure_space() picks now, so that a retriever kept
 * open (the server's, the library's) follows the collection to the new encoder's vectors
 * when their re-embedding completes, instead of reading the old ones until a restart. */
static int figure_now(void *user, store *s, char *buf, size_t len) {
    char id[64];
    snprintf(buf, len, "%s", figure_space(user, s, id, sizeof id));
    return 0;
}

int embed_create_retriever(embed_ctx *e, store *s, retriever **out, char *err, size_t errlen) {
    retr_config c;
    retr_config_default(&c);
    if (e) {
        c.text.model = c.image.model = textenc_model_id(e->te);
        c.text.dim = c.image.dim = textenc_dim(e->te);
        c.text.encode = retr_textenc_encode;
        c.text.user = e->te;
        c.figure.model = embed_figure_model_id(e);   /* figure_now picks the space */
        c.figure.dim = e->fig ? clip_dim(e->fig) : 0;
        c.figure_now = e->fig ? figure_now : NULL;
        c.figure_now_user = e;
    }
    return retr_create(s, &c, out, err, errlen);
}

const char *embed_figure_model_id(const embed_ctx *e) { return e && e->fig ? e->fig_id : NULL; }
const char *embed_figure_notice(const embed_ctx *e) { return e ? e->fig_notice : ""; }

const char *embed_model_id(const embed_ctx *e) { return textenc_model_id(e->te); }
int embed_dim(const embed_ctx *e) { return textenc_dim(e->te); }
void *embed_textenc(embed_ctx *e) { return e->te; }
int32_t embed_max_tokens(const embed_ctx *e) { (void)e; return TEXTENC_MAX_TOKENS; }

static int encode_te(void *user, const char *const *texts, int32_t n, float *out, char *err,
                     size_t errlen) {
    return textenc_embed(user, texts, n, out, err, errlen);
}

/* Every text vector of a document goes through here: distinct texts are encoded once. */
static int embed_distinct(embed_ctx *e, const char *const *texts, int32_t n, float *out,
                          char *err, size_t errlen) {
    return embed_cache_run(e->cache, texts, n, out, encode_te, e->te, err, errlen);
}

static void cache_counts(embed_ctx *e, int64_t *encoded, int64_t *reused) {
    int64_t hits, dups, misses;
    embed_cache_stats(e->cache, &hits, &dups, &misses);
    *encoded = misses + e->encoded_direct;
    *reused = hits + dups;
}

int embed_texts(embed_ctx *e, const char *const *texts, int32_t n, float *out,
                int64_t *n_tokens, char *err, size_t errlen) {
    if (!e || !e->te) { snprintf(err, errlen, "embed: no text encoder"); return -1; }
    int64_t tok = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t t = textenc_tokenize(e->te, texts[i], NULL, 0);
        tok += t < 0 ? -t : t;
    }
    if (n_tokens) *n_tokens = tok;
    return embed_distinct(e, texts, n, out, err, errlen);
}

/* What a chunk's vector encodes: its section path, then its text. Questions use the
 * words of section titles ("logarithmic axis") more than those of the paragraph under
 * them (issue 17: measured in `make eval`). Images: their caption and anchored text. */
static char *embed_text_of(const store_todo *t) {
    const char *text = t->text ? t->text : "", *sec = t->section ? t->section : "";
    size_t ns = strlen(sec), nt = strlen(text);
    char *s = malloc(ns + nt + 2);
    if (!s) return NULL;
    memcpy(s, sec, ns);
    if (ns) s[ns++] = '\n';
    memcpy(s + ns, text, nt + 1);
    return s;
}

/* ---- sentence vectors: a chunk also scores by its best sentence (retrieval) ---- */
#define SENT_MAX 32          /* sentences embedded per chunk; the rest share the chunk's */
#define SENT_MIN_WORDS 4     /* shorter pieces (headings, labels) say little on their own */

static int span_words(const char *t, ground_span sp) {
    int w = 0, in = 0;
    for (uint32_t i = sp.off; i < sp.off + sp.len; i++) {
        int sp_ = t[i] == ' ' || t[i] == '\n' || t[i] == '\t';
        if (!sp_ && !in) w++;
        in = !sp_;
    }
    return w;
}

/* the sentences of one chunk worth a vector of their own: none when there is only one
 * (the chunk's vector is that sentence's) */
static int32_t chunk_sentences(const char *text, ground_span *out) {
    ground_span sp[SENT_MAX * 2];
    int32_t n = ground_split(text, sp, SENT_MAX * 2), k = 0;
    for (int32_t i = 0; i < n && k < SENT_MAX; i++)
        if (span_words(text, sp[i]) >= SENT_MIN_WORDS) out[k++] = sp[i];
    return k > 1 ? k : 0;
}

/* One sentence row per chunk: cnt[i] vectors of chunk i, laid end to end in vec. */
static int put_sentvecs(embed_ctx *e, store *s, const store_todo *items, int32_t n,
                        const int32_t *cnt, const float *vec, char *err, size_t errlen) {
    int dim = textenc_dim(e->te);
    store_sentvec *rows = calloc((size_t)n, sizeof *rows);
    if (!rows) { snprintf(err, errlen, "out of memory"); return -1; }
    for (int32_t i = 0, at = 0; i < n; i++) {
        rows[i] = (store_sentvec){items[i].id, cnt[i], cnt[i] ? vec + (size_t)at * (size_t)dim : NULL};
        at += cnt[i];
    }
    int rc = store_sentvecs_put(s, textenc_model_id(e->te), dim, rows, n, NULL) != STORE_OK ? -1 : 0;
    if (rc) snprintf(err, errlen, "%s", store_errmsg(s));
    free(rows);
    return rc;
}

/* Chunk vectors and their sentences' vectors from one forward pass: each sentence is
 * pooled in the context of its chunk (textenc_embed_spans) instead of being encoded again
 * on its own. texts[i] is items[i]'s embedded text (section path first). */
static int embed_chunks_in_context(embed_ctx *e, store *s, const store_todo *items, int32_t n,
                                   const char *const *texts, float *vec, char *err,
                                   size_t errlen) {
    int dim = textenc_dim(e->te);
    textenc_span *sp = malloc((size_t)n * SENT_MAX * sizeof *sp);
    ground_span g[SENT_MAX];
    int32_t *cnt = calloc((size_t)n, sizeof *cnt), total = 0, rc = -1;
    float *sv = malloc((size_t)n * SENT_MAX * (size_t)dim * sizeof *sv);
    if (!sp || !cnt || !sv) { snprintf(err, errlen, "out of memory"); goto out; }
    for (int32_t i = 0; i < n; i++) {
        const char *t = items[i].text ? items[i].text : "";
        uint32_t shift = (uint32_t)(strlen(texts[i]) - strlen(t));   /* the section prefix */
        cnt[i] = chunk_sentences(t, g);
        for (int32_t j = 0; j < cnt[i]; j++) sp[total++] = (textenc_span){g[j].off + shift, g[j].len};
    }
    if (textenc_embed_spans(e->te, texts, n, sp, cnt, vec, sv, err, errlen)) goto out;
    e->encoded_direct += n;
    rc = put_sentvecs(e, s, items, n, cnt, sv, err, errlen);
out:
    free(sp); free(cnt); free(sv);
    return rc;
}

/* One batch of one space: embed (chunks with their sentences in context when so set),
 * write the vectors. */
static int embed_batch(embed_ctx *e, store *s, int images, const store_todo *items, int32_t n,
                       int64_t *done, char *err, size_t errlen) {
    const char *space = images ? "image" : "text";
    int dim = textenc_dim(e->te);
    const char **texts = calloc((size_t)n, sizeof *texts);
    float *vec = malloc((size_t)n * (size_t)dim * sizeof *vec);
    store_vec *vs = calloc((size_t)n, sizeof *vs);
    int ok = texts && vec && vs;
    if (ok) {
        for (int32_t i = 0; i < n && ok; i++) ok = (texts[i] = embed_text_of(&items[i])) != NULL;
        if (!ok) snprintf(err, errlen, "out of memory");
        else if (!images && e->sent_in_context)
            ok = embed_chunks_in_context(e, s, items, n, texts, vec, err, errlen) == 0;
        else ok = embed_distinct(e, texts, n, vec, err, errlen) == 0;
    } else {
        snprintf(err, errlen, "out of memory");
    }
    if (ok) {
        for (int32_t i = 0; i < n; i++)
            vs[i] = (store_vec){images ? STORE_OWNER_IMAGE : STORE_OWNER_CHUNK, items[i].id,
                                vec + (size_t)i * (size_t)dim};
        int32_t written = 0;
        if (store_vectors_put(s, space, textenc_model_id(e->te), dim, vs, n, &written) != STORE_OK) {
            snprintf(err, errlen, "%s", store_errmsg(s));
            ok = 0;
        }
        *done += written;
        e->done += written;
        if (e->progress && e->progress(e->progress_user, e->done, e->total)) {
            snprintf(err, errlen, "stopped");
            ok = 0;
        }
    }
    for (int32_t i = 0; texts && i < n; i++) free((char *)texts[i]);
    free(texts);
    free(vec);
    free(vs);
    return ok ? 0 : -1;
}

/* One space: fetch todo batches, embed, write. */
static int embed_space(embed_ctx *e, store *s, int images, int64_t *done, char *err,
                       size_t errlen) {
    const char *model = textenc_model_id(e->te);
    int64_t after = 0;
    for (;;) {
        store_todo *items = NULL;
        int32_t n = 0;
        int rc = images ? store_images_without_vector(s, "image", model, after, 64, &items, &n)
                        : store_chunks_without_vector(s, "text", model, after, 64, &items, &n);
        if (rc != STORE_OK) { snprintf(err, errlen, "%s", store_errmsg(s)); return -1; }
        if (n == 0) { store_todos_free(items, n); return 0; }
        after = items[n - 1].id;
        rc = embed_batch(e, s, images, items, n, done, err, errlen);
        store_todos_free(items, n);
        if (rc) return -1;
    }
}

/* one batch of chunks: split, embed every sentence in one call, write one row per chunk */
static int embed_sentence_batch(embed_ctx *e, store *s, const store_todo *items, int32_t n,
                                char *err, size_t errlen) {
    int dim = textenc_dim(e->te);
    ground_span *sp = malloc((size_t)n * SENT_MAX * sizeof *sp);
    int32_t *cnt = calloc((size_t)n, sizeof *cnt);
    char **texts = calloc((size_t)n * SENT_MAX, sizeof *texts);
    float *vec = NULL;
    int32_t total = 0, rc = -1;
    if (!sp || !cnt || !texts) { snprintf(err, errlen, "out of memory"); goto out; }
    for (int32_t i = 0; i < n; i++) {
        const char *t = items[i].text ? items[i].text : "";
        cnt[i] = chunk_sentences(t, sp + (size_t)i * SENT_MAX);
        for (int32_t j = 0; j < cnt[i]; j++) {
            ground_span g = sp[(size_t)i * SENT_MAX + (size_t)j];
            /* plain sentences: a section prefix here lowered R@1 0.45 -> 0.35 on the
             * Debian set (the chunk vector carries the section already) */
            if (!(texts[total++] = strndup(t + g.off, g.len))) {
                snprintf(err, errlen, "out of memory");
                goto out;
            }
        }
    }
    if (total && !(vec = malloc((size_t)total * (size_t)dim * sizeof *vec))) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    if (total && embed_distinct(e, (const char **)texts, total, vec, err, errlen)) goto out;
    rc = put_sentvecs(e, s, items, n, cnt, vec, err, errlen);
out:
    for (int32_t i = 0; texts && i < total; i++) free(texts[i]);
    free(texts); free(sp); free(cnt); free(vec);
    return rc;
}

static int embed_sentences(embed_ctx *e, store *s, int64_t *chunks, char *err, size_t errlen) {
    int64_t after = 0;
    for (;;) {
        store_todo *items = NULL;
        int32_t n = 0;
        if (store_chunks_without_sentvecs(s, textenc_model_id(e->te), after, 64, &items, &n) != STORE_OK) {
            snprintf(err, errlen, "%s", store_errmsg(s));
            return -1;
        }
        if (n == 0) { store_todos_free(items, n); return 0; }
        after = items[n - 1].id;
        /* in context mode these are chunks committed after this pass's chunk loop (the CLI
         * embeds beside its parsers): embedded whole, chunk vector and sentences together,
         * as the next pass would, not their sentences alone */
        int rc = e->sent_in_context ? embed_batch(e, s, 0, items, n, chunks, err, errlen)
                                    : embed_sentence_batch(e, s, items, n, err, errlen);
        store_todos_free(items, n);
        if (rc) return -1;
        if (e->progress && e->progress(e->progress_user, e->done, e->total)) {
            snprintf(err, errlen, "stopped");
            return -1;
        }
    }
}

/* ---- pixel spaces: images by their stored crop -------------------------------------- */
/* One image's vector in a pixel space (the figure encoder's, or its colour profile) from
 * the decoded crop; nonzero on failure. */
typedef int (*pixel_fn)(embed_ctx *e, const vision_image *img, float *out);

static int figure_of(embed_ctx *e, const vision_image *img, float *out) {
    char err[256];
    return clip_embed_image(e->fig, img, 0, out, err, sizeof err);
}

static int colour_of(embed_ctx *e, const vision_image *img, float *out) {
    (void)e;
    vision_colour_profile(img, out);
    return 0;
}

/* An image that does not decode gets a zero vector (cosine 0 with every query, no colour:
 * never a hit) so that it is not retried forever. */
static void embed_one_pixels(embed_ctx *e, const store_todo *t, pixel_fn fn, float *out,
                             int32_t dim) {
    vision_image img = {0};
    char err[256];
    if (!t->png || !t->png_len ||
        vision_image_load_buffer(t->png, t->png_len, 0, 0, &img, err, sizeof err) || fn(e, &img, out))
        memset(out, 0, (size_t)dim * sizeof *out);
    vision_image_free(&img);
}

static int embed_pixels(embed_ctx *e, store *s, const char *model, int32_t dim, pixel_fn fn,
                        int64_t *done, char *err, size_t errlen) {
    int64_t after = 0;
    for (;;) {
        store_todo *items = NULL;
        int32_t n = 0;
        if (store_images_without_vector(s, "image", model, after, 16, &items, &n) != STORE_OK) {
            snprintf(err, errlen, "%s", store_errmsg(s));
            return -1;
        }
        if (n == 0) { store_todos_free(items, n); return 0; }
        float *vec = malloc((size_t)n * (size_t)dim * sizeof *vec);
        store_vec *vs = calloc((size_t)n, sizeof *vs);
        int rc = vec && vs ? 0 : -1;
        if (rc) snprintf(err, errlen, "out of memory");
        for (int32_t i = 0; !rc && i < n; i++) {
            embed_one_pixels(e, &items[i], fn, vec + (size_t)i * (size_t)dim, dim);
            vs[i] = (store_vec){STORE_OWNER_IMAGE, items[i].id, vec + (size_t)i * (size_t)dim};
        }
        int32_t written = 0;
        if (!rc && store_vectors_put(s, "image", model, dim, vs, n, &written) != STORE_OK) {
            snprintf(err, errlen, "%s", store_errmsg(s));
            rc = -1;
        }
        if (done) *done += written;
        e->done += written;
        after = items[n - 1].id;
        free(vec);
        free(vs);
        store_todos_free(items, n);
        if (rc) return -1;
        if (e->progress && e->progress(e->progress_user, e->done, e->total)) {
            snprintf(err, errlen, "stopped");
            return -1;
        }
    }
}

/* Every image gets a vector of this encoder; once all have one, the collection's figure
 * id becomes this encoder's. The vectors of the one before stay (a running server may still
 * search them) until `mmrag compact` (embed_figure_drop_stale). */
static int embed_figures(embed_ctx *e, store *s, int64_t *done, char *err, size_t errlen) {
    if (!e->fig) return 0;
    if (embed_pixels(e, s, e->fig_id, clip_dim(e->fig), figure_of, done, err, errlen)) return -1;
    char old[64], stale[1024] = "";
    embed_figure_model_of(s, old, sizeof old);
    if (!strcmp(old, e->fig_id)) return 0;
    int64_t had = 0;   /* a new collection has no vectors under the legacy id to list */
    store_vectors_count(s, "image", old, STORE_OWNER_IMAGE, &had);
    store_meta_get(s, EMBED_FIGURE_STALE, stale, sizeof stale);
    size_t at = strlen(stale);
    if (had && !strstr(stale, old) && at + strlen(old) + 2 < sizeof stale)
        snprintf(stale + at, sizeof stale - at, "%s%s", at ? " " : "", old);
    if (store_meta_set(s, EMBED_FIGURE_STALE, stale) != STORE_OK ||
        store_meta_set(s, EMBED_FIGURE_META, e->fig_id) != STORE_OK) {
        snprintf(err, errlen, "%s", store_errmsg(s));
        return -1;
    }
    return 0;
}

int embed_figure_drop_stale(store *s, int64_t *dropped, char *err, size_t errlen) {
    char stale[1024] = "", cur[64] = "";
    *dropped = 0;
    if (store_meta_get(s, EMBED_FIGURE_STALE, stale, sizeof stale) != STORE_OK) return 0;
    store_meta_get(s, EMBED_FIGURE_META, cur, sizeof cur);
    for (char *save = NULL, *id = strtok_r(stale, " ", &save); id; id = strtok_r(NULL, " ", &save)) {
        int64_t n = 0;
        if (strcmp(id, cur) && store_vectors_drop(s, "image", id, &n) != STORE_OK) {
            snprintf(err, errlen, "%s", store_errmsg(s));
            return -1;
        }
        *dropped += n;
    }
    if (store_meta_set(s, EMBED_FIGURE_STALE, "") != STORE_OK) {
        snprintf(err, errlen, "%s", store_errmsg(s));
        return -1;
    }
    return 0;
}

static int embed_colours(embed_ctx *e, store *s, char *err, size_t errlen) {
    return embed_pixels(e, s, VISION_COLOUR_MODEL, VISION_COLOUR_DIM, colour_of, NULL, err, errlen);
}

/* What is missing: chunks and images minus the vectors this model has for them. */
static int64_t pending_total(embed_ctx *e, store *s) {
    store_counts c;
    int64_t tv = 0, iv = 0;
    const char *model = textenc_model_id(e->te);
    if (store_counts_get(s, &c) != STORE_OK ||
        store_vectors_count(s, "text", model, STORE_OWNER_CHUNK, &tv) != STORE_OK ||
        store_vectors_count(s, "image", model, STORE_OWNER_IMAGE, &iv) != STORE_OK)
        return 0;
    int64_t t = c.chunks - tv + c.images - iv, fv = 0;
    if (e->fig && store_vectors_count(s, "image", e->fig_id, STORE_OWNER_IMAGE, &fv) == STORE_OK)
        t += c.images - fv;
    if (store_vectors_count(s, "image", VISION_COLOUR_MODEL, STORE_OWNER_IMAGE, &fv) == STORE_OK)
        t += c.images - fv;
    return t > 0 ? t : 0;
}

int embed_pending(embed_ctx *e, store *s, embed_counts *n, char *err, size_t errlen) {
    embed_counts local = {0};
    if (!n) n = &local;
    *n = local;
    e->done = 0;
    e->total = e->progress ? pending_total(e, s) : 0;
    int64_t enc0, reu0;
    cache_counts(e, &enc0, &reu0);
    int rc = embed_space(e, s, 0, &n->chunks, err, errlen) ||
             embed_space(e, s, 1, &n->images, err, errlen) ||
             embed_figures(e, s, &n->figures, err, errlen) || embed_colours(e, s, err, errlen) ||
             embed_sentences(e, s, &n->chunks, err, errlen);
    cache_counts(e, &n->encoded, &n->reused);
    n->encoded -= enc0;
    n->reused -= reu0;
    return rc ? -1 : 0;
}

int embed_has_pending(embed_ctx *e, store *s) {
    const char *model = textenc_model_id(e->te);
    int any = 0;
    for (int what = 0; what < 5 && !any; what++) {
        store_todo *items = NULL;
        int32_t n = 0;
        if (what == 3 && !e->fig) continue;
        int rc = what == 4 ? store_images_without_vector(s, "image", VISION_COLOUR_MODEL, 0, 1, &items, &n)
                 : what == 3 ? store_images_without_vector(s, "image", e->fig_id, 0, 1, &items, &n)
                 : what == 2 ? store_chunks_without_sentvecs(s, model, 0, 1, &items, &n)
                 : what   ? store_images_without_vector(s, "image", model, 0, 1, &items, &n)
                          : store_chunks_without_vector(s, "text", model, 0, 1, &items, &n);
        any = rc == STORE_OK && n > 0;
        store_todos_free(items, n);
    }
    return any;
}
