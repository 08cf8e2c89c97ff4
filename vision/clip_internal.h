/* Private to vision/clip*.c: the CLIP model's in-memory layout. */
#ifndef MMRAG_VISION_CLIP_INTERNAL_H
#define MMRAG_VISION_CLIP_INTERNAL_H
#include "vision/clip.h"

enum { CLIP_ACT_QUICK_GELU = 0, CLIP_ACT_GELU = 1 };

/* One pre-norm transformer block; all weights fp32, nn.Linear layout [out][in].
 * q, k, v are fused into qkv_w [3D][D] (rows q then k then v) and qkv_b [3D]. */
typedef struct {
    float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *o_w, *o_b;
    float *ln2_w, *ln2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
} clip_layer;

typedef struct {
    int32_t width, layers, heads, mlp, act;
    float eps;
    clip_layer *L;
} clip_tower;

struct clip_model {
    clip_tower vis, txt;
    int32_t patch, grid, proj_dim;           /* image: patch px, training grid side */
    int32_t budget;     /* tokens per image at inference (config.json's mmrag.max_tokens); 0: grid*grid */
    int32_t vocab, ctx, ctx_train, has_text;  /* text */
    float *patch_w;     /* [D][3*p*p] (conv weight flattened c, ky, kx) */
    float *class_emb;   /* [D] */
    float *pos_emb;     /* [1 + grid*grid][D] */
    float *pre_ln_w, *pre_ln_b, *post_ln_w, *post_ln_b;
    float *vproj;       /* [E][D] */
    float *tok_emb;     /* [vocab][Dt] */
    float *tpos_emb;    /* [ctx_train][Dt] */
    float *final_ln_w, *final_ln_b;
    float *tproj;       /* [E][Dt] */
    kern_pool *pool;
    clip_bpe *bpe;
};
#endif
