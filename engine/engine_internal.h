/* engine private header: shared between the engine's .c files only. */
#ifndef MMRAG_ENGINE_INTERNAL_H
#define MMRAG_ENGINE_INTERNAL_H
#include "engine/engine.h"
#include "kernels/kernels.h"

/* ---- tokenizer ---- */
typedef struct {
    uint64_t key;
    int32_t rank, id;
} engine_merge;

typedef struct {
    int32_t n_vocab;
    const char **text;       /* token strings as stored (owned by the gguf handle) */
    int32_t *type;           /* 1 normal, 3 control, 4 user-defined, ... */
    char *bytes;             /* decoded bytes of every token, concatenated */
    int64_t *bytes_off;      /* n_vocab + 1 offsets into bytes */
    int32_t *hash;           /* open addressing: token string -> id (-1 empty) */
    uint32_t hash_mask;
    engine_merge *merges;    /* open addressing on key = left << 32 | right */
    uint32_t merge_mask;
    int32_t byte_tok[256];   /* id of each single byte's token */
    int32_t *special;        /* control / user-defined ids, longest text first */
    int32_t n_special;
    int digits_split;        /* pre-tokenizer splits every digit (smollm, starcoder, ...) */
    int pre;                 /* enum engine_pre: the gpt2-BPE pre-tokenizer's split rules */
    int spm;                 /* SentencePiece (tokenizer.ggml.model "llama": Gemma, Llama 2) */
    int add_space_prefix;    /* spm: a "▁" before the text (tokenizer.ggml.add_space_prefix) */
    float *scores;           /* spm: piece scores (higher merges first) */
    int32_t bos, eos, eot;   /* eot: the end-of-turn token (<|im_end|>, <|eot_id|>,
                              * <end_of_turn>) when present, else eos */
} engine_vocab;

/* gpt2-BPE pre-tokenizers (tokenizer.ggml.pre): GPT-2's rules; Llama 3's (case-insensitive
 * contractions, a letter run may take one leading non-letter, digits in runs of at most 3,
 * punctuation takes trailing newlines); Qwen2's (the same with single digits). */
enum engine_pre { ENGINE_PRE_GPT2, ENGINE_PRE_LLAMA3, ENGINE_PRE_QWEN2 };

int engine_vocab_load(engine_vocab *v, const mf_gguf *f, char *err, size_t errlen);
/* SentencePiece side (engine/tokenizer_spm.c): byte strings of the pieces (▁ as a space,
 * <0xXX> as that byte), and the encoder: merges the best-scored adjacent pair until none
 * is in the vocabulary, unknown pieces fall back to byte tokens. */
int engine_spm_load(engine_vocab *v, const mf_gguf *f, char *err, size_t errlen);
int engine_spm_encode(const engine_vocab *v, const unsigned char *s, size_t len, int at_start,
                      int32_t *ids, int32_t *n, int32_t max);
void engine_vocab_free(engine_vocab *v);
int32_t engine_vocab_find(const engine_vocab *v, const char *s, size_t len);
/* Length of the control/user-defined token spelled at s[0..len) (longest first), or 0. */
size_t engine_vocab_match_special(const engine_vocab *v, const unsigned char *s, size_t len,
                                  int32_t *id);
static inline const char *engine_token_bytes(const engine_vocab *v, int32_t id, size_t *len) {
    *len = (size_t)(v->bytes_off[id + 1] - v->bytes_off[id]);
    return v->bytes + v->bytes_off[id];
}

/* ---- model ---- */
/* The architectures the loader knows (engine/load.c) and what sets them apart:
 *   llama   interleaved RoPE (optionally rope_freqs factors: Llama 3.1+), SwiGLU
 *   qwen2   + bias on q, k, v; rotate-half (neox) RoPE
 *   qwen3   + RMSNorm of each q and k head (no biases); neox RoPE; head_dim from key_length
 *   gemma3  embeddings × sqrt(d); q/k head norms; RMSNorm after attention and after the
 *           FFN too; GELU(tanh) FFN; neox RoPE; layers alternate 5 local (sliding window,
 *           RoPE base 10000) : 1 global (rope.freq_base). Norm weights are used as stored:
 *           llama.cpp's converter has already folded Gemma's (1 + w) into them. */
typedef enum { ENGINE_ARCH_LLAMA, ENGINE_ARCH_QWEN2, ENGINE_ARCH_QWEN3, ENGINE_ARCH_GEMMA3 } engine_arch;

typedef struct {
    const mf_tensor *attn_norm, *wq, *wk, *wv, *wo, *ffn_norm, *w_gate, *w_up, *w_down;
    float *bq, *bk, *bv;           /* qwen2: fp32 biases; else NULL */
    float *q_norm, *k_norm;        /* qwen3/gemma3: per-head RMSNorm weights [head_dim] */
    float *post_attn_norm, *post_ffn_norm; /* gemma3: [n_embd] */
    int local;                     /* gemma3: sliding-window layer (swa_window, rope_base_local) */
} engine_layer;

struct mmrag_engine {
    mf_gguf *gguf;
    struct mmrag_engine_params p;
    engine_arch arch;
    int32_t n_embd, n_layer, n_head, n_kv_head, head_dim, n_ff, n_vocab, n_ctx_train, n_rot;
    int32_t q_dim;           /* n_head · head_dim (not always n_embd: qwen3, gemma3) */
    int32_t swa_window;      /* gemma3 local layers' window; 0 = none */
    int rope_neox;           /* rotate-half pairs (qwen2, qwen3, gemma3) */
    int ffn_gelu;            /* GELU(tanh)-gated FFN instead of SwiGLU (gemma3) */
    float eps, rope_base, rope_freq_scale, rope_base_local, embd_scale; /* embd_scale 0: none */
    float attn_scale;        /* q·k multiplier: 1/sqrt(head_dim), gemma3 27B 1/sqrt(d/heads) */
    float *rope_freqs;       /* Llama 3.1+: per-pair divisors of the RoPE frequency, or NULL */
    const mf_tensor *tok_embd, *out_norm, *output;
    engine_layer *layers;
    float **norm_w;          /* fp32 copies of the norm vectors: [layer*2 + 0/1], final at end */
    engine_vocab vocab;
    int chat;                /* enum engine_chat: the prompt format (engine/chat.c) */
    int chat_recognized;     /* 0: no or unknown tokenizer.chat_template, ChatML used */
    char desc[200];
};

/* Chat prompt formats recognized from tokenizer.chat_template (engine/chat.c). */
enum engine_chat { ENGINE_CHAT_CHATML, ENGINE_CHAT_LLAMA3, ENGINE_CHAT_GEMMA, ENGINE_CHAT_PLAIN };
void engine_chat_detect(struct mmrag_engine *e);

int engine_arch_is_local(const struct mmrag_engine *e, int layer);

/* ---- KV cache ------------------------------------------------------------------
 * Positions are grouped in blocks of B tokens. The block being filled lives in fp32
 * "stage" buffers; when it is full it is converted to the cache type (int4 needs the
 * whole block to pick its per-head scale s = max|x|/7). */
typedef struct {
    void **k, **v;           /* [n_blocks] completed blocks (NULL until used) */
    float *ks, *vs;          /* int4 scales [n_blocks][n_kv_head] */
    float *kstage, *vstage;  /* [B][kv_dim] */
} kv_layer;

#define ENGINE_ATT_SPLIT 8    /* most key splits when decoding */
#define ENGINE_ATT_MAXKV 64   /* kv heads handled by the decoding schedule (more: prefill's) */

struct mmrag_session {
    struct mmrag_engine *e;
    kern_pool *pool;
    int32_t n_ctx, B, n_blocks, kv_dim, n_past, n_batch;
    int32_t n_evicted;       /* leading blocks freed: out of every future query's window */
    kv_layer *kv;
    size_t block_bytes;
    int32_t scale_stride;    /* int4 scale slots per (block, kv head) */
    float *x, *h, *q, *k, *v, *att, *gate, *up, *logits;
    float *rope;                 /* per chunk row: cos, then sin, of n_rot/2 pairs */
    float *scratch;          /* per thread: dequantized K and V of one block + accumulators */
    size_t scratch_per_thread;
    float *part;             /* decoding's key-split partial attention states:
                              * per kv head [ENGINE_ATT_SPLIT][group][hd] acc, then m, l */
    int n_threads;
    char err[256];
};

/* ---- JSON state machine (constrained decoding) ---- */
#define ENGINE_JSON_DEPTH 32
typedef struct {
    uint8_t stack[ENGINE_JSON_DEPTH]; /* '{' or '[' */
    int8_t depth;
    uint8_t st;              /* state */
    uint8_t lit_pos;         /* progress in a literal / \u escape */
    uint8_t utf8_left;       /* continuation bytes still expected in a string */
    uint8_t is_key;          /* current string is an object key */
    uint8_t ws_run;          /* consecutive whitespace bytes (limited) */
    const char *lit;         /* literal being matched ("true", ...) */
    uint8_t started, done;
} engine_json;

void engine_json_init(engine_json *j);
/* Feeds one byte: 0 ok, -1 rejected (state then undefined: feed copies). */
int engine_json_feed(engine_json *j, unsigned char c);
/* Writes the shortest suffix that closes the value (NUL-terminated); returns its length. */
size_t engine_json_close(const engine_json *j, char *buf, size_t size);

#endif
