/* Tests for retrieval: fusion ordering on constructed lists, adaptive weights, citations
 * (image hits mapped to their caption), filters, deletion without ghost hits, compaction,
 * index files rebuilt when missing/corrupt, FTS5-hostile queries through the full path.
 *
 * The store-backed cases use a small deterministic "bag of words" encoder (feature
 * hashing, L2-normalized) instead of MiniLM, so that the expected neighbours are known
 * from the words alone and the test runs in well under a second; the real encoder is
 * exercised by test_vindex (recall) and `mmrag eval retrieval`. */
#include "index/index.h"
#include "retrieval/retrieval.h"
#include "tests/test.h"
#include "vision/colour.h"

#include <ctype.h>
#include <sys/stat.h>
#include <unistd.h>

#define BOW_DIM 64
static int bow_encode(void *user, const char *text, float *out, int32_t dim, char *err,
                      size_t errlen) {
    (void)user; (void)err; (void)errlen;
    memset(out, 0, (size_t)dim * sizeof *out);
    for (const char *p = text ? text : ""; *p;) {
        while (*p && !isalnum((unsigned char)*p)) p++;
        uint64_t h = 1469598103934665603ull;
        int n = 0;
        while (*p && isalnum((unsigned char)*p)) {
            h = (h ^ (uint64_t)tolower((unsigned char)*p++)) * 1099511628211ull;
            n++;
        }
        if (n > 2) out[h % (uint64_t)dim] += 1.0f;
    }
    out[dim - 1] += 0.05f;  /* never an all-zero vector */
    double s = 0;
    for (int32_t i = 0; i < dim; i++) s += out[i] * out[i];
    for (int32_t i = 0; i < dim; i++) out[i] /= (float)sqrt(s);
    return 0;
}

/* ---- pure fusion ---- */
TEST(fusion_ordering) {
    int64_t a[] = {1, 2, 3}, b[] = {2, 1, 4}, c[] = {5, 2};
    const int64_t *lists[3] = {a, b, c};
    int32_t n[3] = {3, 3, 2};
    retr_weights w = {{1, 1, 1}};
    retr_fused f[10];
    int32_t m = retr_fuse(lists, n, &w, 60, f, 10);
    CHECK(m == 5);
    /* 2 is in all three lists: first; 1 (ranks 1,2) next; then 5 (rank 1 once) */
    CHECK(f[0].id == 2 && f[1].id == 1 && f[2].id == 5);
    CHECK(f[0].rank[0] == 2 && f[0].rank[1] == 1 && f[0].rank[2] == 2);
    CHECK_NEAR(f[0].fused, 1.0 / 62 + 1.0 / 61 + 1.0 / 62, 1e-12);
    CHECK(f[3].id == 3 && f[4].id == 4);  /* 3: rank 3; 4: rank 3 -> tie broken by id */
    CHECK_NEAR(f[3].fused, f[4].fused, 1e-12);
    /* weights move things: bm25 heavy puts 5 first */
    retr_weights w2 = {{1, 1, 5}};
    m = retr_fuse(lists, n, &w2, 60, f, 10);
    CHECK(f[0].id == 5 || f[0].id == 2);
    CHECK(f[0].id == 2 && f[1].id == 5);  /* 2 is also bm25 rank 2 with weight 5 */
    /* a zero weight removes the source entirely */
    retr_weights w3 = {{1, 1, 0}};
    m = retr_fuse(lists, n, &w3, 60, f, 10);
    CHECK(m == 4);
    for (int i = 0; i < m; i++) CHECK(f[i].id != 5 && f[i].rank[2] == 0);
    /* small rrf_k sharpens the top ranks: 1 (ranks 1,2) beats 2 (ranks 2,1,2) only when
     * bm25 is off; with k=0 and bm25 on, 2 still wins */
    m = retr_fuse(lists, n, &w, 0, f, 2);
    CHECK(m == 2 && f[0].id == 2);
    /* duplicate within a list counts once; empty lists; max truncates */
    int64_t d[] = {7, 7, 8};
    const int64_t *l2[3] = {d, NULL, NULL};
    int32_t n2[3] = {3, 0, 0};
    m = retr_fuse(l2, n2, &w, 60, f, 10);
    CHECK(m == 2 && f[0].id == 7 && f[0].rank[0] == 1 && f[1].rank[0] == 3);
    CHECK(retr_fuse(l2, n2, &w, 60, f, 1) == 1);
    const int64_t *l3[3] = {NULL, NULL, NULL};
    CHECK(retr_fuse(l3, n2, &w, 60, f, 10) == 0);
}

/* Score fusion keeps a strong dense-only hit first (RRF put a chunk both lists rank
 * mediocrely above it), scales BM25 by the query's best, gives an unknown dense score
 * the lowest known one, and adds the image cosine only for image-list members. */
TEST(score_fusion) {
    retr_weights w = {{1, 0, 1}};
    retr_scored c[3] = {
        {1, 0.62f, 0, 0, {1, 0, 0}},          /* dense only, strong */
        {2, 0.45f, 8.0f, 0, {3, 0, 2}},        /* both, mediocre */
        {3, -2.0f, 16.0f, 0, {0, 0, 1}},       /* BM25 only, dense unknown */
    };
    retr_fused f[3];
    CHECK(retr_fuse_scores(c, 3, &w, f, 3) == 3);
    CHECK(f[0].id == 1 && f[0].rank[RETR_SRC_TEXT] == 1);
    CHECK_NEAR(f[0].fused, 0.62, 1e-6);
    CHECK_NEAR(f[1].fused, 0.45 + RETR_BM25_SCALE * 1.0, 1e-6);  /* the floor is 0.45 */
    CHECK_NEAR(f[2].fused, 0.45 + RETR_BM25_SCALE * 0.5, 1e-6);
    CHECK(f[1].id == 3 && f[2].id == 2);
    /* what RRF makes of the same ranks: the mediocre pair wins */
    const int64_t lt[2] = {1, 2}, lb[2] = {3, 2};
    const int64_t *lists[RETR_NSRC] = {lt, NULL, lb};
    int32_t n[RETR_NSRC] = {2, 0, 2};
    CHECK(retr_fuse(lists, n, &w, 60, f, 3) == 3 && f[0].id == 2);
    /* BM25 weighted up (a quoted phrase) lets the keyword hit win */
    retr_weights wq = {{1, 0, 4}};
    CHECK(retr_fuse_scores(c, 3, &wq, f, 1) == 1 && f[0].id == 3);
    /* image cosine counts for image-list members only */
    retr_weights wi = {{1, 1.5f, 1}};
    retr_scored im[2] = {{5, 0.30f, 0, 0.5f, {2, 1, 0}}, {6, 0.40f, 0, 0.9f, {1, 0, 0}}};
    CHECK(retr_fuse_scores(im, 2, &wi, f, 2) == 2 && f[0].id == 5);
    CHECK_NEAR(f[0].fused, 0.30 + 1.5 * RETR_IMAGE_SCALE * 0.5, 1e-6);
    CHECK(retr_fuse_scores(im, 0, &wi, f, 2) == 0);
}

/* an image's caption and pixel evidence add up; a missing one counts as nothing */
TEST(image_score_adds_caption_and_pixels) {
    CHECK_NEAR(retr_image_score(0.30f, 0.12f), 0.30 + RETR_FIGURE_WEIGHT * 0.12, 1e-6);
    CHECK_NEAR(retr_image_score(0.30f, -2.0f), 0.30, 1e-6);
    CHECK_NEAR(retr_image_score(-2.0f, 0.12f), RETR_FIGURE_WEIGHT * 0.12, 1e-6);
    /* a fair caption with matching pixels beats a slightly better caption without them */
    CHECK(retr_image_score(0.30f, 0.12f) > retr_image_score(0.35f, 0.0f));
    /* and a strong pixel match does not hide a much better caption (the old max rule did) */
    CHECK(retr_image_score(0.60f, 0.02f) > retr_image_score(0.05f, 0.20f));
}

TEST(adaptive_weights) {
    retr_weights w;
    retr_adapt_weights("who founded the company", NULL, &w);
    float base_img = w.w[RETR_SRC_IMAGE], base_bm = w.w[RETR_SRC_BM25];
    CHECK(base_img < w.w[RETR_SRC_TEXT]);
    const char *visual[] = {"the bar chart comparing revenue", "Figure 3 diagram", "photos of cats",
                            "a scatter PLOT", "graphs", NULL};
    for (int i = 0; visual[i]; i++) {
        retr_adapt_weights(visual[i], NULL, &w);
        CHECK_MSG(w.w[RETR_SRC_IMAGE] > base_img && w.w[RETR_SRC_IMAGE] >= w.w[RETR_SRC_TEXT],
                  "%s: image %g", visual[i], w.w[RETR_SRC_IMAGE]);
    }
    /* not fooled by substrings */
    retr_adapt_weights("charter barometer imagination", NULL, &w);
    CHECK(w.w[RETR_SRC_IMAGE] == base_img);
    retr_adapt_weights("which table lists prices", NULL, &w);  /* tables are text chunks */
    CHECK(w.w[RETR_SRC_IMAGE] == base_img);
    /* a visual word used as a verb asks how to make a picture: the text answers */
    const char *verbs[] = {"how do I plot a function", "the default when drawing level curves",
                           "how to graph data from a file", NULL};
    for (int i = 0; verbs[i]; i++) {
        retr_adapt_weights(verbs[i], NULL, &w);
        CHECK_MSG(w.w[RETR_SRC_IMAGE] == base_img, "%s: image %g", verbs[i], w.w[RETR_SRC_IMAGE]);
    }
    retr_adapt_weights("how do I draw the plot of a function", NULL, &w);  /* the noun still asks */
    CHECK(w.w[RETR_SRC_IMAGE] > base_img);
    retr_adapt_weights("the \"exact phrase\" here", NULL, &w);
    CHECK(w.w[RETR_SRC_BM25] >= 2 * base_bm);
    retr_adapt_weights("a lone \" quote", NULL, &w);
    CHECK(w.w[RETR_SRC_BM25] == base_bm);
    retr_adapt_weights("error E1234 code", NULL, &w);
    CHECK(w.w[RETR_SRC_BM25] > base_bm);
    /* overrides and source masks win */
    retr_opts o;
    retr_opts_default(&o);
    o.weight[RETR_SRC_TEXT] = 0.25f;
    o.sources = RETR_USE_TEXT | RETR_USE_BM25;
    retr_adapt_weights("bar chart", &o, &w);
    CHECK(w.w[RETR_SRC_TEXT] == 0.25f && w.w[RETR_SRC_IMAGE] == 0 && w.w[RETR_SRC_BM25] > 0);
    /* a source alone gets a weight even when the query would not use it */
    retr_opts_default(&o);
    o.sources = RETR_USE_IMAGE;
    retr_adapt_weights("who founded the company", &o, &w);
    CHECK(w.w[RETR_SRC_IMAGE] > 0 && w.w[RETR_SRC_TEXT] == 0 && w.w[RETR_SRC_BM25] == 0);
    retr_adapt_weights(NULL, NULL, &w);  /* NULL query is fine */
}

/* ---- a small store ---- */
typedef struct { const char *text; int32_t page, kind, image_idx; store_box box; } chunk_spec;

static int add_doc(store *s, const char *sha, const char *title, const chunk_spec *cs, int nc,
                   int nimages, const int32_t *caption_ord, int64_t *doc_id) {
    store_doc_meta m = {.sha256 = sha, .path = title, .title = title, .pages = 3, .bytes = 100};
    int64_t old = 0;
    if (store_doc_begin(s, &m, &old) != STORE_OK) return -1;
    for (int p = 1; p <= 3; p++) {
        store_page pg = {.number = p, .width_pt = 612, .height_pt = 792};
        if (store_page_add(s, &pg) != STORE_OK) return -1;
    }
    for (int i = 0; i < nimages; i++) {
        store_image im = {.idx = i, .page = 2, .box = {0.1f, 0.2f + 0.3f * i, 0.9f, 0.4f + 0.3f * i},
                          .width_px = 100, .height_px = 50, .caption_ord = caption_ord[i]};
        if (store_image_add(s, &im) != STORE_OK) return -1;
    }
    for (int i = 0; i < nc; i++) {
        store_chunk c = {.ord = i, .page = cs[i].page, .kind = cs[i].kind, .box = cs[i].box,
                         .image_idx = cs[i].image_idx, .text = cs[i].text};
        if (store_chunk_add(s, &c) != STORE_OK) return -1;
    }
    return store_doc_commit(s, doc_id, NULL) == STORE_OK ? 0 : -1;
}

static int embed_all(store *s, const char *model) {
    for (int space = 0; space < 2; space++) {
        int64_t after = 0;
        for (;;) {
            store_todo *t = NULL;
            int32_t n = 0;
            int rc = space ? store_images_without_vector(s, "image", model, after, 100, &t, &n)
                           : store_chunks_without_vector(s, "text", model, after, 100, &t, &n);
            if (rc != STORE_OK) return -1;
            if (!n) break;
            float *v = malloc((size_t)n * BOW_DIM * sizeof *v);
            store_vec *sv = malloc((size_t)n * sizeof *sv);
            for (int32_t i = 0; i < n; i++) {
                bow_encode(NULL, t[i].text, v + (size_t)i * BOW_DIM, BOW_DIM, NULL, 0);
                sv[i] = (store_vec){space ? STORE_OWNER_IMAGE : STORE_OWNER_CHUNK, t[i].id,
                                    v + (size_t)i * BOW_DIM};
            }
            after = t[n - 1].id;
            rc = store_vectors_put(s, space ? "image" : "text", model, BOW_DIM, sv, n, NULL);
            free(v);
            free(sv);
            store_todos_free(t, n);
            if (rc != STORE_OK) return -1;
        }
    }
    return 0;
}

static const chunk_spec doc_a[] = {
    {"Quarterly revenue grew strongly in the northern region thanks to new stores.", 1, STORE_KIND_TEXT, -1, {0.1f, 0.1f, 0.9f, 0.2f}},
    {"The penguin colony on the island counts eleven thousand birds.", 1, STORE_KIND_TEXT, -1, {0.1f, 0.3f, 0.9f, 0.4f}},
    {"Figure 1: bar chart comparing revenue of apples and oranges", 2, STORE_KIND_CAPTION, 0, {0.1f, 0.42f, 0.9f, 0.46f}},
    {"Volcanic eruptions release sulfur dioxide into the stratosphere.", 3, STORE_KIND_TEXT, -1, {0.1f, 0.1f, 0.9f, 0.2f}},
    {"Table 2: prices of copper wire per metre", 3, STORE_KIND_TABLE, -1, {0.1f, 0.5f, 0.9f, 0.7f}},
};
static const chunk_spec doc_b[] = {
    {"Penguins huddle together to survive the antarctic winter storms.", 1, STORE_KIND_TEXT, -1, {0.1f, 0.1f, 0.9f, 0.2f}},
    {"Revenue of the orange juice factory doubled last year.", 2, STORE_KIND_TEXT, -1, {0.1f, 0.1f, 0.9f, 0.2f}},
};

typedef struct { char dir[512]; store *s; int64_t da, db; } fixture;

static int fixture_open(fixture *fx, const char *name) {
    const char *t = test_env("MMRAG_TMP", "/tmp");
    mkdir(t, 0755);
    snprintf(fx->dir, sizeof fx->dir, "%s/retr-%d-%s", t, (int)getpid(), name);
    char err[512];
    if (store_open(fx->dir, NULL, &fx->s, err, sizeof err) != STORE_OK) {
        fprintf(stderr, "  %s\n", err);
        return -1;
    }
    int32_t caps_a[2] = {2, -1};  /* image 0 captioned by chunk 2; image 1 has no text */
    if (add_doc(fx->s, "aaaa000000000000000000000000000000000000000000000000000000000000", "Doc A",
                doc_a, 5, 2, caps_a, &fx->da) ||
        add_doc(fx->s, "bbbb000000000000000000000000000000000000000000000000000000000000", "Doc B",
                doc_b, 2, 0, NULL, &fx->db) ||
        embed_all(fx->s, "bow"))
        return -1;
    return 0;
}

static retriever *make_retriever(store *s, char *err, size_t errlen) {
    retr_config c;
    retr_config_default(&c);
    c.text = (retr_space){"bow", BOW_DIM, bow_encode, NULL};
    c.image = (retr_space){"bow", BOW_DIM, NULL, NULL};
    retriever *r = NULL;
    if (retr_create(s, &c, &r, err, errlen)) return NULL;
    return r;
}

static int find_text(const retr_result *res, const char *needle) {
    for (int32_t i = 0; i < res->n; i++)
        if (strstr(res->hits[i].text, needle)) return i;
    return -1;
}

TEST(search_citations_and_image_mapping) {
    fixture fx;
    CHECK(fixture_open(&fx, "cite") == 0);
    char err[512];
    retriever *r = make_retriever(fx.s, err, sizeof err);
    CHECK_MSG(r, "%s", err);
    retr_opts o;
    retr_opts_default(&o);
    o.k = 5;
    retr_result res;
    CHECK_MSG(retr_search(r, "bar chart comparing revenue", &o, &res, err, sizeof err) == 0, "%s", err);
    CHECK(res.n >= 1);
    retr_hit *h = &res.hits[0];
    /* the caption wins: found by text, BM25 and (through its image) the image space */
    CHECK_MSG(strstr(h->text, "bar chart") != NULL, "top hit: %s", h->text);
    CHECK(h->doc == fx.da && h->page == 2 && h->kind == STORE_KIND_CAPTION);
    CHECK(strcmp(h->title, "Doc A") == 0);
    CHECK(h->image_id > 0);
    CHECK(h->rank[RETR_SRC_TEXT] == 1 && h->rank[RETR_SRC_BM25] == 1 && h->rank[RETR_SRC_IMAGE] >= 1);
    CHECK_NEAR(h->box.x0, 0.1, 1e-6);
    CHECK_NEAR(h->box.y1, 0.46, 1e-6);
    CHECK(h->snippet && *h->snippet);
    CHECK(res.weights.w[RETR_SRC_IMAGE] > 1);
    for (int32_t i = 1; i < res.n; i++) CHECK(res.hits[i].fused <= res.hits[i - 1].fused);
    retr_result_free(&res);

    /* image-only search: the uncaptioned image comes back as an image citation (box of
     * the image, no chunk) and the captioned one as its caption chunk */
    o.sources = RETR_USE_IMAGE;
    o.k = 10;
    /* unrelated words: no image is similar enough to be a candidate */
    CHECK(retr_search(r, "zebra xylophone quartz", &o, &res, err, sizeof err) == 0);
    CHECK_MSG(res.n == 0, "image hits over the floor %d", res.n);
    retr_result_free(&res);
    o.min_image_score = -1.0f; /* no floor: every image, best first */
    CHECK(retr_search(r, "anything at all", &o, &res, err, sizeof err) == 0);
    CHECK_MSG(res.n == 2, "image hits %d", res.n);
    int img_only = res.hits[0].chunk_id == 0 ? 0 : 1;
    CHECK(res.hits[img_only].chunk_id == 0 && res.hits[img_only].image_id > 0);
    CHECK(res.hits[img_only].page == 2 && res.hits[img_only].kind == STORE_KIND_FIGURE);
    CHECK_NEAR(res.hits[img_only].box.y0, 0.5, 1e-6);
    CHECK(res.hits[1 - img_only].chunk_id > 0 && strstr(res.hits[1 - img_only].text, "Figure 1"));
    retr_result_free(&res);
    retr_free(r);
    store_close(fx.s);
}

/* Options of an image-only search for the k best images, with no score floor. */
static void image_only(retr_opts *o, int32_t k) {
    retr_opts_default(o);
    o->sources = RETR_USE_IMAGE;
    o->min_image_score = -1.0f;
    o->k = k;
}

/* An image without a caption or text of its own is cited as itself (its box), not through
 * the paragraph anchored next to it: that paragraph's text already counts in the text lists. */
TEST(uncaptioned_image_cited_as_itself) {
    const char *t = test_env("MMRAG_TMP", "/tmp");
    char dir[512], err[512];
    snprintf(dir, sizeof dir, "%s/retr-%d-uncap", t, (int)getpid());
    store *s = NULL;
    CHECK_MSG(store_open(dir, NULL, &s, err, sizeof err) == STORE_OK, "%s", err);
    static const chunk_spec cs[] = {
        {"The pump curve shows head falling as the flow rises.", 2, STORE_KIND_TEXT, 0, {0.1f, 0.45f, 0.9f, 0.5f}},
        {"Penguins huddle together in the winter storms.", 1, STORE_KIND_TEXT, -1, {0.1f, 0.1f, 0.9f, 0.2f}},
    };
    int32_t caps[1] = {-1};
    int64_t doc = 0;
    CHECK(add_doc(s, "cccc000000000000000000000000000000000000000000000000000000000000", "Doc C", cs, 2, 1,
                  caps, &doc) == 0 && embed_all(s, "bow") == 0);
    retriever *r = make_retriever(s, err, sizeof err);
    CHECK_MSG(r, "%s", err);
    retr_opts o;
    image_only(&o, 5);
    retr_result res;
    CHECK_MSG(retr_search(r, "pump curve head flow", &o, &res, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(res.n == 1, "image hits %d", res.n);
    if (res.n == 1) {
        CHECK_MSG(res.hits[0].chunk_id == 0 && res.hits[0].image_id > 0, "cited through chunk %lld",
                  (long long)res.hits[0].chunk_id);
        CHECK_NEAR(res.hits[0].box.y0, 0.2, 1e-6);   /* the image's box, not the paragraph's */
        CHECK(res.hits[0].kind == STORE_KIND_FIGURE);
    }
    retr_result_free(&res);
    retr_free(r);
    store_close(s);
}

/* The share of a query's distinctive words found as whole words of an image's own text. */
TEST(word_overlap) {
    CHECK_NEAR(retr_word_overlap("survival curves by treatment", "Figure 2: Survival by TREATMENT group"), 1.0, 1e-6);
    CHECK_NEAR(retr_word_overlap("survival and hazard", "Figure 2: survival rates"), 0.5, 1e-6);
    CHECK_NEAR(retr_word_overlap("survival survival hazard", "hazards of survivalists"), 0.0, 1e-6);
    CHECK_NEAR(retr_word_overlap("Survival", NULL), 0.0, 1e-6);
    /* words any figure description uses, numbers, short words: nothing to look for */
    CHECK(retr_word_overlap("a red plot with two thin lines, 2019", "plot 2019") == -1.0f);
    CHECK(retr_word_overlap(NULL, "text") == -1.0f);
}

/* The image list adds what the vectors blur: the query's words found in an image's own text
 * (its caption here), and the colours it names that the image's stored profile shows (two
 * images alike for the query's words, one red, one blue: each colour puts its own first). */
TEST(image_list_words_and_colours) {
    fixture fx;
    CHECK(fixture_open(&fx, "imlist") == 0);
    char err[512];
    retriever *r = make_retriever(fx.s, err, sizeof err);
    CHECK_MSG(r, "%s", err);
    retr_opts o;
    retr_opts_default(&o);
    o.sources = RETR_USE_IMAGE;
    o.min_image_score = -1.0f;
    retr_result res;
    CHECK_MSG(retr_search(r, "apples and zebras", &o, &res, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(res.n == 2 && strstr(res.hits[0].text, "apples"), "%d hits", res.n);
    CHECK_NEAR(res.hits[0].words, 0.5 * RETR_WORDS_WEIGHT, 1e-6);   /* apples, not zebras */
    CHECK_NEAR(res.hits[1].words, 0.0, 1e-6);
    retr_result_free(&res);

    store_image_row *im = NULL;
    int32_t ni = 0;
    CHECK(store_images_get(fx.s, fx.da, 0, &im, &ni) == STORE_OK && ni == 2);
    float prof[2][VISION_COLOUR_DIM] = {{0}};
    prof[0][VISION_COLOUR_BLUE] = prof[0][VISION_COLOUR_CHROMA] = 0.05f;
    prof[1][VISION_COLOUR_RED] = prof[1][VISION_COLOUR_CHROMA] = 0.05f;
    int64_t blue = im[0].idx == 0 ? im[0].id : im[1].id, red = im[0].idx == 0 ? im[1].id : im[0].id;
    store_vec sv[2] = {{STORE_OWNER_IMAGE, blue, prof[0]}, {STORE_OWNER_IMAGE, red, prof[1]}};
    store_images_free(im, ni);
    CHECK(store_vectors_put(fx.s, "image", VISION_COLOUR_MODEL, VISION_COLOUR_DIM, sv, 2, NULL) == STORE_OK);
    const struct { const char *q; const int64_t *want; } cases[] = {
        {"the picture in red", &red}, {"the bluish picture", &blue}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        CHECK_MSG(retr_search(r, cases[i].q, &o, &res, err, sizeof err) == 0, "%s", err);
        int64_t top = res.n == 2 ? res.hits[0].image_id : -1;
        float added = res.n == 2 ? res.hits[0].colour - res.hits[1].colour : 0;
        retr_result_free(&res);
        CHECK_MSG(top == *cases[i].want, "'%s': image %lld first, not %lld", cases[i].q,
                  (long long)top, (long long)*cases[i].want);
        CHECK_NEAR(added, RETR_COLOUR_WEIGHT, 1e-6);   /* reported for --explain */
    }
    retr_free(r);
    store_close(fx.s);
}

TEST(filters) {
    fixture fx;
    CHECK(fixture_open(&fx, "filt") == 0);
    char err[512];
    retriever *r = make_retriever(fx.s, err, sizeof err);
    CHECK_MSG(r, "%s", err);
    retr_opts o;
    retr_opts_default(&o);
    retr_result res;
    o.docs = &fx.db;
    o.n_docs = 1;
    CHECK(retr_search(r, "penguin revenue", &o, &res, err, sizeof err) == 0);
    CHECK(res.n == 2);
    for (int32_t i = 0; i < res.n; i++) CHECK(res.hits[i].doc == fx.db);
    retr_result_free(&res);
    retr_opts_default(&o);
    o.page_min = 3;
    o.page_max = 3;
    CHECK(retr_search(r, "penguin revenue copper", &o, &res, err, sizeof err) == 0);
    CHECK(res.n == 2);
    for (int32_t i = 0; i < res.n; i++) CHECK(res.hits[i].page == 3 && res.hits[i].doc == fx.da);
    retr_result_free(&res);
    retr_opts_default(&o);
    o.kind = STORE_KIND_TABLE;
    CHECK(retr_search(r, "prices", &o, &res, err, sizeof err) == 0);
    CHECK(res.n == 1 && strstr(res.hits[0].text, "copper"));
    retr_result_free(&res);
    int64_t nodoc = 999;
    retr_opts_default(&o);
    o.docs = &nodoc;
    o.n_docs = 1;
    CHECK(retr_search(r, "penguin", &o, &res, err, sizeof err) == 0 && res.n == 0);
    retr_result_free(&res);
    retr_free(r);
    store_close(fx.s);
}

/* Figure vectors of `model` for the two images of doc A: image i shows words[i]. */
static int put_figures(store *s, int64_t doc, const char *model, const char *const words[2]) {
    store_image_row *im = NULL;
    int32_t n = 0;
    if (store_images_get(s, doc, 2, &im, &n) != STORE_OK || n != 2) return -1;
    float v[2][BOW_DIM];
    store_vec sv[2];
    for (int i = 0; i < 2; i++) {
        bow_encode(NULL, words[i], v[i], BOW_DIM, NULL, 0);
        sv[i] = (store_vec){STORE_OWNER_IMAGE, im[i].id, v[i]};
    }
    store_images_free(im, n);
    return store_vectors_put(s, "image", model, BOW_DIM, sv, 2, NULL) == STORE_OK ? 0 : -1;
}

static int figure_model_now(void *user, store *s, char *buf, size_t len) {
    (void)s;
    if (!*(const char *)user) return -1;   /* cannot tell: keep the current one */
    snprintf(buf, len, "%s", (const char *)user);
    return 0;
}

/* The image an image-only search for q puts first (its id), or -1. */
static int64_t top_image(retriever *r, const char *q) {
    retr_opts o;
    image_only(&o, 1);
    retr_result res;
    char err[512];
    if (retr_search(r, q, &o, &res, err, sizeof err) || res.n < 1) return -1;
    int64_t id = res.hits[0].image_id;
    retr_result_free(&res);
    return id;
}

/* A retriever kept open follows the collection to another figure encoder's vectors when
 * figure_now names them (a re-embedding finished), and keeps its space while it cannot tell. */
TEST(figure_space_follows_the_collection) {
    fixture fx;
    CHECK(fixture_open(&fx, "figs") == 0);
    static const char *const old_w[2] = {"zebra stripes", "volcano ash"};
    static const char *const new_w[2] = {"volcano ash", "zebra stripes"};
    CHECK(put_figures(fx.s, fx.da, "enc-old", old_w) == 0 && put_figures(fx.s, fx.da, "enc-new", new_w) == 0);
    store_image_row *im = NULL;
    int32_t n = 0;
    CHECK(store_images_get(fx.s, fx.da, 2, &im, &n) == STORE_OK && n == 2);
    int64_t id0 = n == 2 ? im[0].id : 0, id1 = n == 2 ? im[1].id : 0;
    store_images_free(im, n);
    char now[64] = "enc-old", err[512];
    retr_config c;
    retr_config_default(&c);
    c.text = (retr_space){"bow", BOW_DIM, bow_encode, NULL};
    c.image = (retr_space){"bow", BOW_DIM, NULL, NULL};
    c.figure = (retr_space){"enc-old", BOW_DIM, NULL, NULL};
    c.figure_now = figure_model_now;
    c.figure_now_user = now;
    retriever *r = NULL;
    CHECK_MSG(retr_create(fx.s, &c, &r, err, sizeof err) == 0, "%s", err);
    CHECK(top_image(r, "volcano ash") == id1);
    now[0] = 0;   /* the callback cannot tell: the old space stays */
    CHECK(top_image(r, "volcano ash") == id1);
    snprintf(now, sizeof now, "enc-new");
    CHECK_MSG(top_image(r, "volcano ash") == id0, "the retriever still reads the old encoder's vectors");
    CHECK(top_image(r, "zebra stripes") == id1);
    retr_free(r);
    store_close(fx.s);
}

TEST(delete_no_ghosts_then_compact) {
    fixture fx;
    CHECK(fixture_open(&fx, "del") == 0);
    char err[512];
    retriever *r = make_retriever(fx.s, err, sizeof err);
    CHECK_MSG(r, "%s", err);
    retr_opts o;
    retr_opts_default(&o);
    retr_result res;
    CHECK(retr_search(r, "penguin colony island", &o, &res, err, sizeof err) == 0);
    CHECK(res.n > 0 && res.hits[0].doc == fx.da);
    retr_result_free(&res);
    CHECK(store_doc_delete(fx.s, fx.da) == STORE_OK);
    /* same retriever, no reload: every source must drop doc A at once */
    const char *qs[] = {"penguin colony island", "bar chart comparing revenue", "copper", "volcanic", NULL};
    for (int i = 0; qs[i]; i++) {
        CHECK(retr_search(r, qs[i], &o, &res, err, sizeof err) == 0);
        for (int32_t j = 0; j < res.n; j++)
            CHECK_MSG(res.hits[j].doc != fx.da, "ghost of doc A for '%s'", qs[i]);
        retr_result_free(&res);
    }
    retr_stats st;
    retr_get_stats(r, &st);
    /* doc A's vectors were tombstoned (or the index rebuilt without them: 5 of 7 dead
     * passes the rebuild threshold) */
    CHECK(st.text_vectors - st.text_dead == 2);
    CHECK(retr_compact(r, err, sizeof err) == 0);
    retr_get_stats(r, &st);
    CHECK(st.text_dead == 0 && st.text_vectors == 2 && st.image_vectors == 0);
    CHECK(retr_search(r, "penguin", &o, &res, err, sizeof err) == 0);
    CHECK(res.n == 2 && res.hits[0].doc == fx.db);
    retr_result_free(&res);
    retr_free(r);
    store_close(fx.s);
}

TEST(index_files_rebuilt_and_reused) {
    fixture fx;
    CHECK(fixture_open(&fx, "files") == 0);
    char err[512], path[1024];
    retriever *r = make_retriever(fx.s, err, sizeof err);
    CHECK_MSG(r, "%s", err);
    retr_free(r);
    CHECK(vindex_store_file(fx.s, "text", VINDEX_HNSW, path, sizeof path) == 0);
    struct stat st;
    CHECK(stat(path, &st) == 0);
    /* reused: loaded and in step */
    vindex_opts o;
    vindex_opts_default(&o, VINDEX_HNSW, BOW_DIM);
    vindex *v = NULL;
    vindex_sync_info info;
    CHECK(vindex_open_store(fx.s, "text", "bow", &o, &v, &info, err, sizeof err) == 0);
    CHECK(info.loaded == 1 && info.rebuilt == 0 && vindex_size(v) == 7);
    vindex_free(v);
    /* corrupt: rebuilt, and the reason says why */
    FILE *f = fopen(path, "r+b");
    CHECK(f);
    fseek(f, 200, SEEK_SET);
    fputc(0x77, f);
    fputc(0x11, f);
    fclose(f);
    CHECK(vindex_open_store(fx.s, "text", "bow", &o, &v, &info, err, sizeof err) == 0);
    CHECK_MSG(info.rebuilt == 1 && strstr(info.why, "checksum"), "why: %s", info.why);
    CHECK(vindex_size(v) == 7);
    vindex_free(v);
    /* deleted: rebuilt */
    CHECK(unlink(path) == 0);
    CHECK(vindex_open_store(fx.s, "text", "bow", &o, &v, &info, err, sizeof err) == 0);
    CHECK(info.rebuilt == 1 && vindex_size(v) == 7);
    vindex_free(v);
    /* stale: the store moved on (a new document) -> caught up by generation */
    int64_t gen0 = 0, gen1 = 0, dc = 0;
    store_generation(fx.s, &gen0);
    chunk_spec extra[] = {{"A brand new chunk about glaciers.", 1, STORE_KIND_TEXT, -1, {0, 0, 1, 1}}};
    CHECK(add_doc(fx.s, "cccc000000000000000000000000000000000000000000000000000000000000", "Doc C",
                  extra, 1, 0, NULL, &dc) == 0);
    CHECK(embed_all(fx.s, "bow") == 0);
    store_generation(fx.s, &gen1);
    CHECK(gen1 != gen0);
    CHECK(vindex_open_store(fx.s, "text", "bow", &o, &v, &info, err, sizeof err) == 0);
    CHECK(info.loaded == 1 && info.added == 1 && vindex_size(v) == 8 && info.generation == gen1);
    /* an id tombstoned in the index but present in the store (vector put back): rebuilt */
    int64_t n_ids = 0, *all = vindex_ids(v, &n_ids);
    CHECK(all && n_ids == 8);
    int64_t back = all[3];
    free(all);
    CHECK(vindex_remove(v, 1, &back) == 1 && !vindex_contains(v, back));
    vindex_set_generation(v, -1);
    CHECK(vindex_sync_store(v, fx.s, "text", "bow", &info, err, sizeof err) == 0);
    CHECK_MSG(info.rebuilt == 1 && vindex_contains(v, back) && vindex_dead(v) == 0, "why: %s", info.why);
    vindex_free(v);
    /* another model id: that file is not used for it */
    CHECK(vindex_open_store(fx.s, "text", "other-model", &o, &v, &info, err, sizeof err) == 0);
    CHECK(info.rebuilt == 1 && vindex_size(v) == 0);
    vindex_free(v);
    store_close(fx.s);
}

TEST(fts5_hostile_queries) {
    fixture fx;
    CHECK(fixture_open(&fx, "hostile") == 0);
    char err[512];
    retriever *r = make_retriever(fx.s, err, sizeof err);
    CHECK_MSG(r, "%s", err);
    static char longq[20000];
    memset(longq, 'a', sizeof longq - 1);
    for (size_t i = 50; i < sizeof longq - 1; i += 7) longq[i] = ' ';
    const char *qs[] = {"\"unbalanced", "AND", "OR OR OR", "NOT penguin", "penguin*", "*",
                        "text:penguin", "NEAR(penguin colony, 2)", "^penguin", "penguin'", "''",
                        "(((", ")", "\"\"", "", "   ", "-penguin", "+revenue", "{col1 col2}: x",
                        "\xff\xfe broken utf8 \xc3", "penguin\" OR \"1\"=\"1", ";DROP TABLE chunks;--",
                        longq, NULL};
    retr_opts o;
    retr_opts_default(&o);
    for (int i = 0; qs[i]; i++) {
        retr_result res;
        int rc = retr_search(r, qs[i], &o, &res, err, sizeof err);
        CHECK_MSG(rc == 0, "query %d failed: %s", i, err);
        retr_result_free(&res);
    }
    /* the words inside hostile syntax still match */
    retr_result res;
    o.sources = RETR_USE_BM25;
    CHECK(retr_search(r, "NEAR(penguin colony, 2)", &o, &res, err, sizeof err) == 0);
    CHECK(res.n >= 1 && find_text(&res, "penguin colony") >= 0);
    retr_result_free(&res);
    /* and the table is still there */
    store_counts c;
    CHECK(store_counts_get(fx.s, &c) == STORE_OK && c.chunks == 7);
    retr_free(r);
    store_close(fx.s);
}
