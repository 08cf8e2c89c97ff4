/* vision/clip.h — image decode/resize (libvips), the padding-free ViT patchifier, CLIP's
 * byte-level BPE tokenizer and the CLIP-style dual encoder (ViT image tower + causal
 * text tower, L2-normalized outputs in one space, patch tokens kept for VPE heatmaps).
 *
 * Walkthrough:
 *   clip_model *m; clip_create("models/clip/model.safetensors", pool, &m, err, sizeof err);
 *   vision_image img; vision_image_load_file("fig.png", 0, 0, &img, err, sizeof err);
 *   float v[CLIP_MAX_DIM]; clip_embed_image(m, &img, 0, v, err, sizeof err);
 *   float t[CLIP_MAX_DIM]; clip_embed_text(m, "a bar chart", t, err, sizeof err);
 *   cosine = dot(v, t) over clip_dim(m);  vision_image_free(&img); clip_free(m);
 *
 * Threads: vision_* functions are reentrant. A clip_model is read-only after clip_create:
 * several threads may call clip_embed_* on one model at once only when each uses a
 * different kern_pool or NULL (the pool given at create time is used by default and a
 * kern_pool runs one job at a time); see clip_embed_image_with_pool().
 * Errors: functions return 0 on success, a negative code on failure and write a message
 * prefixed "clip: " / "vision: " into err (errlen bytes, always NUL-terminated). */
#ifndef MMRAG_VISION_CLIP_H
#define MMRAG_VISION_CLIP_H
#include <stddef.h>
#include <stdint.h>
#include "kernels/kernels.h"

enum {
    VISION_OK = 0, VISION_ERROR = -1, VISION_NOMEM = -2, VISION_IO = -3, VISION_FORMAT = -4,
    VISION_MISUSE = -5,
};

/* ---- images (libvips) ------------------------------------------------------- */
/* An RGB image, interleaved [h][w][3], values in 0..1 (sRGB, alpha flattened on white).
 * Caller frees with vision_image_free(). */
typedef struct vision_image {
    int32_t w, h;
    float *rgb;
} vision_image;

/* Decode a file / memory buffer (PNG, JPEG, TIFF, WebP, GIF… whatever libvips loads).
 * w, h > 0: resize to exactly w×h (bicubic, aspect not kept); w, h <= 0: original size.
 * Returns VISION_OK, VISION_IO (unreadable), VISION_FORMAT (not an image), VISION_NOMEM. */
int vision_image_load_file(const char *path, int32_t w, int32_t h, vision_image *out,
                           char *err, size_t errlen);
int vision_image_load_buffer(const void *buf, size_t len, int32_t w, int32_t h,
                             vision_image *out, char *err, size_t errlen);
/* Pixel size of an image without decoding its pixels. */
int vision_image_probe_file(const char *path, int32_t *w, int32_t *h, char *err, size_t errlen);
int vision_image_probe_buffer(const void *buf, size_t len, int32_t *w, int32_t *h,
                              char *err, size_t errlen);
/* Decode so that the result already has the patchifier's target size for (max_tokens,
 * patch): the resize happens in libvips on 8-bit pixels (cheap for large photos). */
int vision_image_load_for_patches(const char *path, const void *buf, size_t len,
                                  int32_t max_tokens, int32_t patch, vision_image *out,
                                  char *err, size_t errlen);
/* Resize to exactly w×h with libvips' bicubic kernel (vips_resize, hscale/vscale). */
int vision_image_resize(const vision_image *in, int32_t w, int32_t h, vision_image *out,
                        char *err, size_t errlen);
/* Build an image from caller pixels (copied): rgb8 is [h][w][3] bytes. */
int vision_image_from_rgb8(const uint8_t *rgb8, int32_t w, int32_t h, vision_image *out,
                           char *err, size_t errlen);
void vision_image_free(vision_image *img); /* NULL-safe; resets the struct */

/* ---- padding-free patchifier ------------------------------------------------ */
/* Grid for an h×w image, budget max_tokens, patch p: s = sqrt(h*w / (max_tokens*p*p)),
 * (only shrinks unless allow_upscale), each side round(side/s/p) patches (at least 1);
 * when that rounding overflows the budget, the grid under it (and, shrink-only, under the
 * rounded sides) maximizing log(tokens/budget) - 2|log aspect error| is taken, so
 * gh*gw <= max_tokens always. The image is later
 * resized to (gh*p)×(gw*p): nothing is padded, nothing cropped.
 * Returns VISION_OK or VISION_MISUSE (bad sizes, or max_tokens < 1). */
int vision_patch_grid(int32_t h, int32_t w, int32_t max_tokens, int32_t patch,
                      int allow_upscale, int32_t *gh, int32_t *gw);

/* Patches of one image: [gh*gw][3*p*p], row-major over the grid, each patch in conv
 * weight order (c, ky, kx), normalized (x - mean[c]) / std[c]. Caller frees with
 * vision_patches_free(). */
typedef struct vision_patches {
    int32_t gh, gw, patch;
    int32_t src_h, src_w;   /* image size before resizing */
    float *data;
} vision_patches;

/* Resize img to the grid of vision_patch_grid (skipped when it already fits) and cut it
 * into patches. mean/std: per-channel (NULL = CLIP's). */
int vision_adaptive_patchify(const vision_image *img, int32_t max_tokens, int32_t patch,
                             int allow_upscale, const float mean[3], const float std[3],
                             vision_patches *out, char *err, size_t errlen);
void vision_patches_free(vision_patches *p);

/* Bicubic resampling of a position-embedding grid src [sh][sw][dim] to dst [dh][dw][dim]:
 * torch.nn.functional.interpolate(mode='bicubic', align_corners=False, size=(dh, dw))
 * — cubic A = -0.75, source x = (dst + 0.5) * in/out - 0.5, border indices clamped. */
void vision_pos_embed_interp(const float *src, int32_t sh, int32_t sw, int32_t dim,
                             float *dst, int32_t dh, int32_t dw);

extern const float vision_clip_mean[3];
extern const float vision_clip_std[3];

/* ---- CLIP BPE tokenizer ------------------------------------------------------ */
#define CLIP_CTX 77
#define CLIP_SOT 49406
#define CLIP_EOT 49407
typedef struct clip_bpe clip_bpe;
/* Load the merges (gzip text, bpe_simple_vocab_16e6.txt.gz). Read-only afterwards:
 * thread-safe. Returns VISION_OK, VISION_IO, VISION_FORMAT, VISION_NOMEM. */
int clip_bpe_create(const char *merges_gz_path, clip_bpe **out, char *err, size_t errlen);
void clip_bpe_free(clip_bpe *t);
/* Tokenize like OpenAI's clip.tokenize(text, truncate=True) minus ftfy: HTML entities
 * unescaped, whitespace collapsed, lower-cased, then <|startoftext|> … <|endoftext|>;
 * more than max_len tokens keeps the first max_len-1 and ends with <|endoftext|>.
 * Writes at most max_len ids (no zero padding) and returns their count, or < 0 on error.
 * Unicode rules (letters, digits, lowercase) are approximations, see clip_bpe.c. */
int clip_bpe_encode(const clip_bpe *t, const char *text, int32_t *ids, int32_t max_len);
/* Token string for an id (byte-mapped form, e.g. "hello</w>"), NULL if out of range.
 * Owned by t. */
const char *clip_bpe_token(const clip_bpe *t, int32_t id);
int32_t clip_bpe_vocab_size(const clip_bpe *t); /* 49408 */

/* ---- CLIP dual encoder -------------------------------------------------------- */
#define CLIP_MAX_DIM 4096
#define CLIP_MAX_BUDGET 4096 /* the largest token budget a config.json may set */
typedef struct clip_model clip_model;

/* Load a CLIP checkpoint: Hugging Face names (vision_model.*, text_model.*,
 * visual_projection, text_projection) or OpenCLIP/OpenAI names (visual.conv1, visual.
 * transformer.resblocks.N.attn.in_proj_weight, transformer.resblocks…, ln_final…), any
 * float dtype. Sizes come from the tensor shapes; heads, activation and layer-norm eps
 * from config.json beside the file (HF vision_config/text_config, or OpenCLIP
 * vision_cfg/text_cfg) when present, else heads = width/64, quick_gelu, eps 1e-5.
 * The BPE merges are looked for beside the file (bpe_simple_vocab_16e6.txt.gz), then in
 * $MMRAG_MODELS/clip-tokenizer/, then models/clip-tokenizer/; a model without them still
 * embeds images. pool may be NULL (single-threaded); it must outlive the model.
 * Returns VISION_OK, VISION_IO, VISION_FORMAT (names/shapes missing or inconsistent),
 * VISION_NOMEM. */
int clip_create(const char *path, kern_pool *pool, clip_model **out, char *err, size_t errlen);
void clip_free(clip_model *m);

int32_t clip_dim(const clip_model *m);          /* projection (embedding) size */
int32_t clip_patch_size(const clip_model *m);
int32_t clip_image_size(const clip_model *m);   /* training resolution, e.g. 224 */
/* Default token budget: config.json's mmrag.max_tokens when it gives one (1 to
 * CLIP_MAX_BUDGET: a model may be read at another budget than it was trained at), else the
 * training grid (e.g. 49 for 224/32). */
int32_t clip_default_max_tokens(const clip_model *m);
const clip_bpe *clip_tokenizer(const clip_model *m); /* NULL when no merges were found */

/* Image embedding: patchify img within max_tokens (<= 0: clip_default_max_tokens) and
 * run the image tower; out = clip_dim floats, L2-normalized. */
int clip_embed_image(const clip_model *m, const vision_image *img, int32_t max_tokens,
                     float *out, char *err, size_t errlen);
int clip_embed_image_with_pool(const clip_model *m, kern_pool *pool, const vision_image *img,
                               int32_t max_tokens, float *out, char *err, size_t errlen);
/* Same from already-cut patches (p->patch must equal the model's patch size). */
int clip_embed_patches(const clip_model *m, kern_pool *pool, const vision_patches *p,
                       float *out, char *err, size_t errlen);
/* Patch tokens for region heatmaps: like clip_embed_image, plus every patch token after
 * post-layernorm and the visual projection, L2-normalized, into *tokens ([gh*gw][dim],
 * caller frees with free()); *gh, *gw = grid. out may be NULL. */
int clip_patch_tokens(const clip_model *m, const vision_image *img, int32_t max_tokens,
                      float *out, float **tokens, int32_t *gh, int32_t *gw,
                      char *err, size_t errlen);
int clip_patch_tokens_from_patches(const clip_model *m, kern_pool *pool,
                                   const vision_patches *p, float *out, float **tokens,
                                   char *err, size_t errlen);

/* Text embedding (tokenized with the model's BPE) and from token ids (SOT … EOT; the
 * pooled token is the one with the highest id, as in CLIP). */
int clip_embed_text(const clip_model *m, const char *text, float *out, char *err,
                    size_t errlen);
int clip_embed_tokens(const clip_model *m, kern_pool *pool, const int32_t *ids, int32_t n,
                      float *out, char *err, size_t errlen);
#endif
