/* engine/vpe — visual phrase localization: find the region of a page that a natural-
 * language description points at ("the bar chart below the revenue heading", "the second
 * figure on page 3", "the table of maintenance tasks").
 *
 *   vpe *v; vpe_create(te, NULL, &v, err, sizeof err);     // te: a loaded textenc
 *   vpe_options o; vpe_options_default(&o);                 // threshold 0.75
 *   vpe_region c[] = {{.page = 2, .kind = VPE_KIND_FIGURE, .box = {.1f,.2f,.6f,.4f},
 *                      .text = "Figure 2: Quarterly revenue"}, ...};
 *   vpe_result r;
 *   vpe_locate(v, c, n, "the revenue chart", &o, &r, err, sizeof err);
 *   if (r.found) ... r.page, r.box, r.confidence, r.kind, r.index ...
 *   vpe_free(v);
 *
 * The engine knows nothing about the store: the caller (api/) gathers candidate regions of
 * a document (images, figure areas, captions, tables, text blocks, headings) with their
 * text and passes them in.
 *
 * Scoring: the description is parsed into constraints — region kind words (chart/graph/
 * plot/figure/diagram → figures, photo/picture/image → raster images, table, heading/
 * title, paragraph/text, caption), an explicit label ("figure 2", "table 1"), a page
 * ("on page 3"), an ordinal among regions of the asked kind in reading order (first,
 * second, ..., last), a position on the page (top/bottom/left/right), a relation to an
 * anchor region found by its text (above/below/under/over/left of/right of "the ...
 * heading") — and the remaining content words, compared with the region's text through
 * the text encoder (cosine of MiniLM embeddings). With a CLIP model, the region's image
 * preview is also compared with the description (best patch token vs. text embedding).
 * A region with a figure vector (its pixels in the text encoder's space) is also ranked by
 * that vector's cosine with the description (a ranking term; it does not lower the
 * absolute confidence).
 * Each constraint gives a satisfaction in 0..1 per candidate; candidates are ranked by
 * their weighted mean. The confidence is the weighted geometric mean of the winner's
 * satisfactions (an absolute term: any unmet constraint drives it to 0) times a logistic
 * of the margin over the best competing candidate that is a different region (boxes
 * with IoU > 0.5 count as the same region). With the page given (o.page, or "on page N"),
 * a picture whose figure vector agrees with the description, that no other picture of the
 * page rivals and whose look does not contradict the described type is vouched for
 * (0.8-0.95, times the other constraints' satisfaction): an appearance description rarely
 * shares words with a caption. Below the threshold the result is "not found".
 *
 * Threads: a vpe is thread-safe (the text encoder is; the embedding cache has a mutex).
 * Status: 0 on success, -1 with a message prefixed "vpe: " in err (bad arguments,
 * encoder failure). "Not found" is not an error: it is r.found == 0. */
#ifndef MMRAG_ENGINE_VPE_H
#define MMRAG_ENGINE_VPE_H
#include <stddef.h>
#include <stdint.h>

typedef struct textenc textenc;       /* vision/textenc.h */
typedef struct clip_model clip_model; /* vision/clip.h */

typedef enum {
    VPE_KIND_RASTER = 0,    /* embedded raster image (photo) */
    VPE_KIND_FIGURE = 1,    /* vector figure: chart, plot, diagram */
    VPE_KIND_CAPTION = 2,
    VPE_KIND_TABLE = 3,
    VPE_KIND_TEXT = 4,      /* paragraph / text block (OCR text too) */
    VPE_KIND_HEADING = 5,
} vpe_kind;
#define VPE_KIND_COUNT 6

typedef struct vpe_region {
    int32_t page;            /* 1-based */
    int32_t kind;            /* vpe_kind */
    float box[4];            /* x0, y0, x1, y1 normalized to the page, origin top-left */
    const char *text;        /* primary text: caption of an image/table, or contained text */
    const char *context;     /* nearby text (weighted lower); may be NULL */
    int64_t ref_id;          /* caller's id (image or chunk), copied to the result */
    const uint8_t *png;      /* image preview for the CLIP term; may be NULL */
    size_t png_len;
    const float *figure_vec; /* the region's pixels in the text encoder's space (mmrag's
                                figure encoder, L2-normalized, the encoder's dim); may be NULL */
    const float *colour;     /* its named-colour profile (vision_colour_profile,
                                VISION_COLOUR_DIM floats); may be NULL */
} vpe_region;

typedef struct vpe_options {
    float threshold;         /* found when confidence >= threshold; default 0.75 */
    int32_t page;            /* only this page; 0 = all pages (or the page named in the text) */
    float clip_weight;       /* weight of the CLIP term when a model is set; default 1.0 */
    int32_t debug;           /* 1 = print per-candidate scores to stderr */
} vpe_options;

typedef struct vpe_result {
    int32_t found;           /* 1 when confidence >= threshold */
    float confidence;        /* 0..1 */
    /* The best candidate (also filled when found == 0, as "best guess"; index -1 when
     * no candidate satisfied the hard constraints such as the page): */
    int32_t index;           /* into the candidate array */
    int32_t page, kind;
    float box[4];
    int64_t ref_id;
    char why[256];           /* short explanation: constraints parsed, runner-up */
} vpe_result;

void vpe_options_default(vpe_options *o);
const char *vpe_kind_name(int32_t kind);     /* "raster", "figure", ... ; static text */

typedef struct vpe vpe;
/* te: borrowed, must outlive v (required). clip: borrowed, may be NULL (no CLIP term).
 * On success *out is set; caller frees with vpe_free(). Returns 0 or -1. */
int vpe_create(textenc *te, clip_model *clip, vpe **out, char *err, size_t errlen);
void vpe_free(vpe *v);   /* NULL is a no-op */

/* Locate `description` among n candidates (n may be 0: not found). o may be NULL
 * (defaults). Region texts are embedded once and cached in v (bounded cache), so
 * repeated calls over the same document are cheap. Returns 0 or -1. */
int vpe_locate(vpe *v, const vpe_region *cands, int32_t n, const char *description,
               const vpe_options *o, vpe_result *out, char *err, size_t errlen);

/* What a description pins down before any scoring, for callers that narrow a large
 * document to a few pages before vpe_locate: the page it names ("on page 3"), whether it
 * counts regions across pages (an ordinal: "the second figure" needs every page), and
 * the label it asks for ("figure 2": num 2, table 0). */
typedef struct vpe_scope {
    int32_t page;            /* 0 = none named */
    int32_t ordinal;         /* 0 = none */
    int32_t label_num;       /* 0 = none */
    int32_t label_table;     /* the label is "table N" (else "figure N") */
} vpe_scope;
void vpe_scope_of(const char *description, vpe_scope *out);
/* Does text carry the label "Figure N" / "Fig. N" (table 0) or "Table N" (table 1)? */
int vpe_text_has_label(const char *text, int32_t num, int32_t table);
/* The text encoder v was created with (its vectors are comparable with the store's text
 * space of the same model). */
textenc *vpe_text_encoder(vpe *v);

/* Intersection over union of two normalized boxes (0 when either is empty). */
float vpe_iou(const float a[4], const float b[4]);
#endif
