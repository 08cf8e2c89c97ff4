/* retrieval — question -> query vectors -> text HNSW + image LSH + BM25 -> weighted
 * reciprocal-rank fusion -> cited hits.
 *
 *   retr_config c; retr_config_default(&c);
 *   c.text.model = textenc_model_id(te); c.text.dim = 384;
 *   c.text.encode = retr_textenc_encode; c.text.user = te;
 *   // image space: same model as text (vectors from caption/OCR text) -> the text query
 *   // vector is reused; a CLIP space sets its own model, dim and encoder.
 *   retriever *r; retr_create(store, &c, &r, err, sizeof err);
 *   retr_opts o; retr_opts_default(&o); o.k = 5;
 *   retr_result res; retr_search(r, "the bar chart comparing revenue", &o, &res, err, n);
 *   ... res.hits[i].doc, .page, .box, .text, .rank[RETR_SRC_TEXT] ...
 *   retr_result_free(&res); retr_free(r);
 *
 * Fusion (retr_fuse_scores, the default): every candidate of the three lists gets the
 * better of its chunk cosine and its best sentence cosine (sentence vectors, stored at
 * indexing), plus BM25 scaled by the query's best BM25 score, plus the image cosine for
 * image hits: a chunk that only the dense list ranks first is not overtaken by chunks
 * both lists rank mediocrely. RETR_FUSE_RRF keeps weighted reciprocal-rank fusion,
 * fused(d) = sum over sources s of w_s / (rrf_k + rank_s(d)), rank 1-based. Chunks are
 * embedded with their section path (ingest) and BM25 searches it as a second column.
 * Image hits are mapped to their caption chunk (or the chunk anchored to the image), so a
 * figure found by its picture and by its caption fuses into one hit; an image with no
 * text gets a hit of its own (chunk_id 0, the image's box). Every hit is resolved
 * against the store at query time: deleted chunks never come back (and the vector
 * indexes tombstone them as soon as the store's generation moves).
 *
 * Threads: a retriever may be shared; searches run concurrently (index catch-up after a
 * store change is serialized inside). The store handle serializes its own calls. */
#ifndef MMRAG_RETRIEVAL_H
#define MMRAG_RETRIEVAL_H
#include <stddef.h>
#include <stdint.h>

#include "index/index.h"

enum { RETR_SRC_TEXT = 0, RETR_SRC_IMAGE = 1, RETR_SRC_BM25 = 2, RETR_NSRC = 3 };
#define RETR_USE_TEXT (1 << RETR_SRC_TEXT)
#define RETR_USE_IMAGE (1 << RETR_SRC_IMAGE)
#define RETR_USE_BM25 (1 << RETR_SRC_BM25)
#define RETR_USE_ALL (RETR_USE_TEXT | RETR_USE_IMAGE | RETR_USE_BM25)

/* Encode one query text into dim floats. Returns 0 or -1 with a message. */
typedef int (*retr_encode_fn)(void *user, const char *text, float *out, int32_t dim,
                              char *err, size_t errlen);
/* Adapter for vision/textenc.h: user = textenc *. */
int retr_textenc_encode(void *user, const char *text, float *out, int32_t dim, char *err,
                        size_t errlen);

typedef struct retr_space {
    const char *model;       /* model id of the vectors in the store (NULL = space off) */
    int32_t dim;             /* 0 = the store's */
    retr_encode_fn encode;   /* NULL for image: reuse the text vector if same model */
    void *user;
} retr_space;

/* The figure space's model id now, into buf: the collection may switch figure encoders
 * while a retriever lives (a re-embedding finished in another process or thread). Returns
 * 0, or -1 to keep the current one. */
typedef int (*retr_model_fn)(void *user, store *s, char *buf, size_t len);

typedef struct retr_config {
    retr_space text, image;
    retr_space figure;       /* images by their pixels, in the text space (model NULL = off) */
    retr_model_fn figure_now; /* NULL: figure.model for the retriever's life; else asked at
                                 creation (figure.model when it cannot tell) and at each
                                 catch-up, and a new id opens its index */
    void *figure_now_user;
    int32_t ef_search;       /* HNSW beam (0 = vindex default) */
    int32_t lsh_bits;        /* 0 = vindex default (256) */
} retr_config;
void retr_config_default(retr_config *c);

typedef struct retr_weights { float w[RETR_NSRC]; } retr_weights;

typedef struct retr_opts {
    int32_t k;               /* hits returned (10) */
    int32_t depth;           /* candidates per source (50) */
    float rrf_k;             /* 60 */
    float weight[RETR_NSRC]; /* < 0 = adaptive (default); >= 0 = fixed */
    int32_t sources;         /* RETR_USE_* mask (ablations); default all */
    const int64_t *docs;     /* only these documents (NULL/0 = all) */
    int32_t n_docs;
    int32_t page_min, page_max;  /* 0 = unbounded */
    int32_t kind;            /* store_chunk_kind, -1 = any */
    float min_image_score;   /* image hits under this cosine are no candidates (0.2): in a
                                list of few images an unrelated one would still rank first */
    int32_t fusion;          /* RETR_FUSE_SCORE (default) or RETR_FUSE_RRF */
    int32_t sentences;       /* 1 (default): a chunk's dense score is the better of its own
                                cosine and its best sentence's (store_sentvecs_best) */
    float section_weight;    /* BM25 weight of the section path (store_search_opts), 1 */
} retr_opts;
enum { RETR_FUSE_SCORE = 0, RETR_FUSE_RRF = 1 };
void retr_opts_default(retr_opts *o);

typedef struct retr_hit {
    int64_t chunk_id;        /* 0 when an image has no text to cite */
    int64_t doc;
    char *title;
    int32_t page, kind;
    store_box box;           /* normalized [x0,y0,x1,y1], top-left origin */
    int64_t image_id;        /* anchored image, 0 = none */
    char *text, *snippet;
    int32_t rank[RETR_NSRC]; /* 1-based rank per source, 0 = not found there */
    float score[RETR_NSRC];  /* cosine (text, image) or -bm25 (bm25) */
    float dense;             /* cosine of the chunk's own vector, -2 = not computed */
    float sentence;          /* best sentence cosine, -2 = none (not scored or no vectors) */
    float colour, words;     /* the parts of score[image] the query's colours and words
                                added (retr_colour_score, RETR_WORDS_WEIGHT), 0 = none */
    double fused;
} retr_hit;

typedef struct retr_result {
    retr_hit *hits;
    int32_t n;
    retr_weights weights;    /* weights actually used */
    double encode_ms, search_ms;
} retr_result;
void retr_result_free(retr_result *r);

/* Weights for a query: text 1, bm25 1, image 0 unless the query asks for something
 * visual (chart, figure, image, diagram, photo, graph, plot, ...: image 1.5). With RRF a
 * document's presence in one more list outweighs rank differences within a list, so an
 * image list that always answers (few images) would lift every caption; measured on the
 * eval set: image 0.35 always-on gave fused MRR 0.555 vs 0.784 (text alone 0.769).
 * "table" is not visual here: tables are text chunks. A "quoted phrase" doubles bm25;
 * exact tokens (digits, ids) raise bm25 by half. Then o's fixed weights and source mask
 * apply; a single source alone always gets weight 1 (ablations). */
void retr_adapt_weights(const char *query, const retr_opts *o, retr_weights *out);

/* Pure fusion over ranked id lists (best first), for tests and the engine. Writes up to
 * max fused entries sorted by fused score (ties: lower id first); returns the count. */
typedef struct retr_fused { int64_t id; double fused; int32_t rank[RETR_NSRC]; } retr_fused;
int32_t retr_fuse(const int64_t *const lists[RETR_NSRC], const int32_t n[RETR_NSRC],
                  const retr_weights *w, float rrf_k, retr_fused *out, int32_t max);

/* Score fusion over candidates (RETR_FUSE_SCORE, the default):
 *   fused = w_text * dense + w_bm25 * RETR_BM25_SCALE * bm25 / max bm25 of the query
 *           + w_image * RETR_IMAGE_SCALE * image cosine (when in the image list),
 * dense = max(chunk cosine, best sentence cosine); a candidate whose dense score is
 * unknown (-2) gets the lowest known one. Sorted like retr_fuse. */
#define RETR_BM25_SCALE 0.08f
#define RETR_IMAGE_SCALE 0.5f
/* Figure-encoder cosines run lower than caption cosines (a match ~0.1-0.2 where a caption
 * match is ~0.4-0.7); this gain puts them on the caption scale before they meet the
 * min_image_score floor (calibrated on the generated corpus). An image found either way
 * then scores caption cosine + RETR_FIGURE_WEIGHT * pixel cosine (set on the dev figures,
 * vision/train/dev_figures.json). */
#define RETR_FIGURE_GAIN 3.0f
#define RETR_FIGURE_WEIGHT 1.0f
/* The text vector of an image without a caption is its nearby paragraphs, weaker evidence
 * of what it shows: the image list weighs it by this (0.8: dev image-only R@5 0.25 -> 0.33
 * on the texlive set, 0.21 -> 0.24 on the R vignettes, in a simulation over the stored
 * vectors; 0.7 and 0.9 did worse on one of them). Locate's page narrowing compares pages,
 * not images, and takes it as is. */
#define RETR_NEARBY_TEXT 0.8f
/* An image list's score for a query that names colours adds this times the image's colour
 * match (0..1, vision_colour_match). Set on the dev figure sets (scripts/eval_figures.py
 * --dev-manuals / --dev-r / --dev), image-only R@5 0.422 -> 0.500, 0.231 -> 0.389, 0.279 ->
 * 0.307; 0.2 and 0.5 did about as well in a simulation over the stored scores. */
#define RETR_COLOUR_WEIGHT 0.3f
/* That term for one image: RETR_COLOUR_WEIGHT times how well its stored colour profile shows
 * the colours of want (vision_colour_words of the query); 0 when want is 0 or the image has no
 * profile (an index from before profiles, until embedded). */
float retr_colour_score(store *s, int64_t image_id, uint32_t want);
/* An image list's score also adds this times the share of the query's distinctive words
 * (retr_word_overlap) found in the image's own text: its caption and the chunks anchored to
 * it (the text inside a drawn figure, the paragraphs around it). Its text vector carries the
 * same words, but one vector for a caption and several paragraphs blurs a label word such as
 * "survival" or "frequency" that a description quotes. Set on the dev figure sets in a
 * simulation over the stored scores (with the colour term): image-only R@5 manuals 0.500 ->
 * 0.573, R 0.389 -> 0.426, texlive 0.307 -> 0.364; 0.2 and 0.5 did a little worse. */
#define RETR_WORDS_WEIGHT 0.3f
#define RETR_OVERLAP_WORDS 32   /* distinct query words looked at */
/* The share (0..1) of the distinct words of query (letters first, 3 characters or more, not a
 * word any figure description uses: colours, "plot", "axis", "left"...) that are whole words of
 * text, ignoring case; -1 when the query has none. Pure. */
float retr_word_overlap(const char *query, const char *text);
/* An image's score from its caption cosine and its pixel cosine (either < -1.5 = none):
 * the rule the image list and locate's page narrowing share. */
float retr_image_score(float caption_cos, float pixel_cos);
/* Cosine of q with the stored vector of a chunk (space "text") or an image (space "image":
 * caption and pixel vectors, told apart by model); -2 when there is none. buf holds dim
 * floats. */
float retr_stored_cosine(store *s, int32_t owner, int64_t id, const char *model, const float *q,
                         int32_t dim, float *buf);
typedef struct retr_scored {
    int64_t id;
    float dense;             /* -2 = unknown */
    float bm25;              /* the BM25 list's score (> 0), 0 = not in it */
    float image;             /* image cosine */
    int32_t rank[RETR_NSRC]; /* 1-based rank per list, 0 = not in it */
} retr_scored;
int32_t retr_fuse_scores(const retr_scored *c, int32_t n, const retr_weights *w,
                         retr_fused *out, int32_t max);

typedef struct retriever retriever;
int retr_create(store *s, const retr_config *c, retriever **out, char *err, size_t errlen);
void retr_free(retriever *r);
int retr_search(retriever *r, const char *query, const retr_opts *o, retr_result *res,
                char *err, size_t errlen);
/* Same, with the query vector given (skips encoding; NULL = encode). */
int retr_search_vec(retriever *r, const char *query, const float *qvec_text,
                    const float *qvec_image, const retr_opts *o, retr_result *res,
                    char *err, size_t errlen);
/* Rebuild both vector indexes without dead ids and save them (`mmrag compact`). */
int retr_compact(retriever *r, char *err, size_t errlen);
/* The store the retriever reads (borrowed). */
store *retr_store(retriever *r);
/* Index state for status/explain output. */
typedef struct retr_stats { int64_t text_vectors, text_dead, image_vectors, image_dead, generation; } retr_stats;
void retr_get_stats(retriever *r, retr_stats *st);

/* ---- evaluation (`mmrag eval retrieval QUESTIONS.json`) ---- */
typedef struct retr_eval_row { double r1, r5, r10, mrr, ndcg5, ndcg10; } retr_eval_row;
/* Runs every question under four source sets (bm25, text, image, fused), prints per-
 * question lines and the overall/ablation table to `out` (text or JSON), fills
 * overall[4] (may be NULL). File format: see retrieval/eval.c. */
int retr_eval_file(retriever *r, const char *questions_path, int json, void *out_file,
                   retr_eval_row overall[4], char *err, size_t errlen);

#endif
