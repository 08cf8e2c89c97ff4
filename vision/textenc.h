/* Text encoder for chunk text: all-MiniLM-L6-v2 (BERT, 6 layers, 384-d), real weights.
 *
 *   kern_pool *pool = kern_pool_create(0);
 *   textenc *te;
 *   char err[512];
 *   if (textenc_create(NULL, pool, &te, err, sizeof err) != 0) { puts(err); ... }
 *   const char *texts[2] = {"first chunk", "second chunk"};
 *   float vec[2 * 384];                       // textenc_dim(te) floats per text
 *   textenc_embed(te, texts, 2, vec, err, sizeof err);
 *   textenc_free(te);
 *   kern_pool_free(pool);
 *
 * Model directory: model.safetensors (F32/F16/BF16 weights, HF BertModel names with or
 * without a "bert." prefix), vocab.txt (one WordPiece per line, id = line number),
 * config.json (read for hidden size, heads, layers, eps; MiniLM defaults otherwise).
 * Tokenizer: BERT uncased (clean text, split CJK ideographs, lowercase, strip accents
 * by NFD + dropping Mn marks, split on punctuation, greedy longest-match WordPiece with
 * "##"), [CLS] ... [SEP], at most 256 tokens (longer text is truncated).
 * Unicode properties cover all planes (vision/wordpiece_tables.h, generated from Python's
 * unicodedata 14.0). Invalid UTF-8 bytes are dropped like U+FFFD.
 * Output: mean of the last hidden states over all tokens, L2-normalized.
 *
 * Threads: a textenc is read-only after textenc_create; textenc_embed and
 * textenc_tokenize may be called from any number of threads at once (embed calls that
 * share the handle take turns on its pool; each uses all of the pool's threads and
 * OpenBLAS's). Status: 0 on success, -1 with a message in err (prefix "textenc:"). */
#ifndef MMRAG_VISION_TEXTENC_H
#define MMRAG_VISION_TEXTENC_H
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

#define TEXTENC_MAX_TOKENS 256

typedef struct textenc textenc;

/* Arithmetic of the encoder's linear layers (the rest stays fp32: embeddings, layer norm,
 * attention, GELU, pooling).
 * TEXTENC_INT8: weights int8 per output channel, activations int8 per token (dynamic),
 *   int32 sums; ~2x the GEMM speed; embeddings within cosine 0.995 of fp32 on every one
 *   of 23,445 real texts (README "Text encoder precision"; tests/test_textenc.c checks
 *   every README line and eval question).
 * TEXTENC_FP32: OpenBLAS sgemm, matches the PyTorch reference to cosine 0.9999. */
typedef enum { TEXTENC_PRECISION_DEFAULT = 0, TEXTENC_FP32 = 1, TEXTENC_INT8 = 2 } textenc_precision;

typedef struct {
    textenc_precision precision; /* DEFAULT: $MMRAG_PRECISION ("fp32"/"int8") if set, else
                                    textenc_precision_auto() */
} textenc_opts;
/* What DEFAULT means on this CPU without $MMRAG_PRECISION: int8 where the int8 kernels have
 * VNNI (AVX512-VNNI or AVX-VNNI: int8 is the faster one), else fp32. */
textenc_precision textenc_precision_auto(void);

/* {TEXTENC_PRECISION_DEFAULT} */
textenc_opts textenc_default_opts(void);
/* "fp32" / "int8" to the enum; -1 for anything else (then *out is untouched). */
int textenc_precision_parse(const char *s, textenc_precision *out);
const char *textenc_precision_name(textenc_precision p); /* "fp32", "int8"; static text */

/* Load the model. model_dir NULL: $MMRAG_MODELS/minilm, else models/minilm.
 * pool: borrowed (must outlive te); NULL: te creates and owns a pool sized to the
 * machine. A missing or invalid file gives -1 and a message naming its path.
 * On success *out is set; caller frees with textenc_free(). Returns 0 or -1. */
int textenc_create(const char *model_dir, kern_pool *pool, textenc **out, char *err,
                   size_t errlen);
/* textenc_create with options (opts NULL = textenc_default_opts()). A bad
 * $MMRAG_PRECISION is an error naming it. */
int textenc_create_opts(const char *model_dir, kern_pool *pool, const textenc_opts *opts,
                        textenc **out, char *err, size_t errlen);
/* The precision in use (never DEFAULT). */
textenc_precision textenc_precision_of(const textenc *te);
void textenc_free(textenc *te); /* NULL is a no-op */

int32_t textenc_dim(const textenc *te);            /* 384 */
/* "all-MiniLM-L6-v2" at either precision (see vision/textenc.c); static text */
const char *textenc_model_id(const textenc *te);

/* Token ids of `text` (UTF-8; NULL = ""), with [CLS] and [SEP], truncated to
 * TEXTENC_MAX_TOKENS. Returns the count n; when n > max, writes the first max ids and
 * returns -n (so a first call with max = 0 sizes the buffer). */
int32_t textenc_tokenize(const textenc *te, const char *text, int32_t *ids, int32_t max);

/* Embed n texts into out[n][textenc_dim(te)] (L2-normalized rows). Texts are processed
 * at their own length (no padding) in token-budgeted batches; linear layers run over all
 * tokens of a batch at once. NULL texts count as "". Returns 0 or -1 (allocation failure,
 * bad arguments). */
int textenc_embed(textenc *te, const char *const *texts, int32_t n, float *out, char *err,
                  size_t errlen);

/* A byte range of a text: a sentence to pool in the context of its text. */
typedef struct textenc_span { uint32_t off, len; } textenc_span;

/* textenc_embed, and also a vector for each span of each text computed in the context of
 * the whole text ("late chunking"): the mean of the span's final token states, L2-normalized.
 * One forward pass gives a chunk's vector and its sentences' vectors, where encoding the
 * sentences alone would run the encoder over their tokens a second time. Text i has
 * n_spans[i] spans at spans + (sum of the earlier n_spans), sorted and not overlapping,
 * each starting and ending at a word boundary (the text is tokenized piece by piece at
 * the span edges, which equals the whole text's tokens at such boundaries). span_out gets
 * one row per span in the same order; a span outside the 256-token window (or empty)
 * gets a zero row. Returns 0 or -1. */
int textenc_embed_spans(textenc *te, const char *const *texts, int32_t n,
                        const textenc_span *spans, const int32_t *n_spans, float *out,
                        float *span_out, char *err, size_t errlen);
#endif
