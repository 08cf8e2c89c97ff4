/* api/core/embed — write the vectors chunks and images lack. Shared by the CLI, the REST
 * server and the library facade (api/lib/lib.c). Spaces, all in MiniLM's 384-d space:
 *   text    chunks (section path + text) and their sentences, MiniLM;
 *   image   images by their caption and anchored chunk text, MiniLM;
 *   figure  images by their pixels, mmrag's own figure encoder (vision/data/figenc,
 *           trained LiT-style against the locked MiniLM), so one query vector searches all.
 * Beside them each image's colour profile (VISION_COLOUR_MODEL, vision/colour.h), read by
 * colour matching, not searched as a direction.
 * Without a usable figure encoder the figure space is simply off (embed_figure_notice). */
#ifndef MMRAG_API_EMBED_H
#define MMRAG_API_EMBED_H
#include <stddef.h>
#include <stdint.h>
#include "index/store.h"
#include "retrieval/retrieval.h"

/* The figure vectors' model id in the store (image space) is "mmrag-figenc-" and a hash of
 * the encoder file, so a new encoder re-embeds every image at the next indexing; collections
 * made before that carry this fixed id. */
#define EMBED_FIGURE_LEGACY "mmrag-figenc-v1"
#define EMBED_FIGURE_META "figure_model"   /* store meta: the id the figure vectors have */
#define EMBED_FIGURE_STALE "figure_model_stale"   /* ids replaced since the last compact */

typedef struct embed_ctx embed_ctx;
/* Load the encoder from models_dir/minilm (NULL = $MMRAG_MODELS or "models").
 * Returns 0 or -1 with a message (missing model files: callers run BM25-only). */
int embed_create(const char *models_dir, embed_ctx **out, char *err, size_t errlen);
void embed_free(embed_ctx *e);
const char *embed_model_id(const embed_ctx *e);
int embed_dim(const embed_ctx *e);
/* The figure space's model id, or NULL when the figure encoder is off or did not load;
 * then embed_figure_notice() says why (a line for the user, "" when it loaded). The file:
 * $MMRAG_FIGENC ("none" = off), <models>/figenc/model.safetensors, the source tree's or
 * the install's copy beside the executable, ./vision/data/figenc/model.safetensors. */
const char *embed_figure_model_id(const embed_ctx *e);
/* 0 when the user switched figure vectors off (MMRAG_FIGENC=none): search and locate
 * then ignore stored ones too. */
int embed_figures_enabled(void);
/* The id of the figure vectors stored in s (for readers without the encoder: locate):
 * 1 with it in buf, 0 when figure vectors are switched off. */
int embed_figure_model_of(store *s, char *buf, size_t len);
/* Delete the figure vectors of encoders replaced since (`mmrag compact`); *dropped gets how
 * many. Returns 0 or -1 with a message. */
int embed_figure_drop_stale(store *s, int64_t *dropped, char *err, size_t errlen);
const char *embed_figure_notice(const embed_ctx *e);
/* A retriever over s with this encoder's spaces (text with its query encoder, image, figure
 * when loaded); e NULL: BM25 only. One place for the CLI, server, library. Free with
 * retr_free(). Returns 0 or -1 with a message (retr_create's). */
int embed_create_retriever(embed_ctx *e, store *s, retriever **out, char *err, size_t errlen);
void *embed_textenc(embed_ctx *e);   /* the textenc * (for retr_textenc_encode) */
/* Text vectors for callers (POST /v1/embeddings, the library): n texts into
 * out[n][embed_dim(e)], L2-normalized, the same vectors chunks and queries get; *n_tokens
 * (may be NULL) gets the encoder tokens read, [CLS]/[SEP] included, each text truncated to
 * embed_max_tokens(). Returns 0 or -1 with a message. */
int embed_texts(embed_ctx *e, const char *const *texts, int32_t n, float *out,
                int64_t *n_tokens, char *err, size_t errlen);
int32_t embed_max_tokens(const embed_ctx *e);

/* Where the model files are: `given` if set, else $MMRAG_MODELS, ./models, or models/
 * beside/above the executable. Returns given, the env value, a literal, or buf. */
const char *embed_models_dir(const char *given, char *buf, size_t len);
typedef struct {
    int64_t chunks, images, figures;   /* vectors written */
    int64_t encoded, reused;           /* texts the encoder ran on / texts that shared a vector */
} embed_counts;
/* Embed every chunk/image of the store without a vector (and the sentences of chunks);
 * n (may be NULL) counts them. Returns 0 or -1. */
int embed_pending(embed_ctx *e, store *s, embed_counts *n, char *err, size_t errlen);
/* Called by embed_pending after each batch with the vectors written so far and the number
 * that were missing at the start; a nonzero return stops it (the rest stays pending). */
typedef int (*embed_progress_fn)(void *user, int64_t done, int64_t total);
void embed_set_progress(embed_ctx *e, embed_progress_fn fn, void *user);
/* 1 if some chunk or image still lacks a vector of this model (0 also on error). */
int embed_has_pending(embed_ctx *e, store *s);
#endif
