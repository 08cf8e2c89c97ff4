/* api/core/embed — write text embeddings for chunks (and caption text of images) that
 * lack them, with the MiniLM text encoder. Shared by the REST server and the library
 * facade (api/lib/lib.c). The image space uses the same text model (caption + anchored
 * chunk text), which is what retrieval/ expects when no CLIP space is configured. */
#ifndef MMRAG_API_EMBED_H
#define MMRAG_API_EMBED_H
#include <stddef.h>
#include <stdint.h>
#include "index/store.h"

typedef struct embed_ctx embed_ctx;
/* Load the encoder from models_dir/minilm (NULL = $MMRAG_MODELS or "models").
 * Returns 0 or -1 with a message (missing model files: callers run BM25-only). */
int embed_create(const char *models_dir, embed_ctx **out, char *err, size_t errlen);
void embed_free(embed_ctx *e);
const char *embed_model_id(const embed_ctx *e);
int embed_dim(const embed_ctx *e);
void *embed_textenc(embed_ctx *e);   /* the textenc * (for retr_textenc_encode) */
/* Where the model files are: `given` if set, else $MMRAG_MODELS, ./models, or models/
 * beside/above the executable. Returns given, the env value, a literal, or buf. */
const char *embed_models_dir(const char *given, char *buf, size_t len);
typedef struct { int64_t chunks, images; } embed_counts;
/* Embed every chunk/image of the store without a vector; n (may be NULL) counts the
 * vectors written. Returns 0 or -1. */
int embed_pending(embed_ctx *e, store *s, embed_counts *n, char *err, size_t errlen);
/* Called by embed_pending after each batch with the vectors written so far and the number
 * that were missing at the start; a nonzero return stops it (the rest stays pending). */
typedef int (*embed_progress_fn)(void *user, int64_t done, int64_t total);
void embed_set_progress(embed_ctx *e, embed_progress_fn fn, void *user);
/* 1 if some chunk or image still lacks a vector of this model (0 also on error). */
int embed_has_pending(embed_ctx *e, store *s);
#endif
