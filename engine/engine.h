/* engine — a GGUF decoder language model (llama, qwen2, qwen3, gemma3): tokenizer, blocked KV cache
 * (fp32 / fp16 / int4), forward pass on the shared kernels, sampling, JSON mode, stop
 * strings, streaming and latency statistics.
 *
 *   struct mmrag_engine_params p = mmrag_engine_default_params();
 *   struct mmrag_engine *e = mmrag_engine_init_from_file(path, p, err, sizeof err);
 *   struct mmrag_session *s = mmrag_session_create(e, err, sizeof err);
 *   char prompt[4096];
 *   mmrag_engine_chat_prompt(e, NULL, "What is 2+2?", prompt, sizeof prompt);
 *   struct mmrag_gen_params g = mmrag_gen_default_params();
 *   g.on_text = print_piece;                       (optional streaming)
 *   struct mmrag_gen_result r;
 *   if (mmrag_session_generate(s, prompt, &g, &r) < 0) puts(mmrag_session_errmsg(s));
 *   ... r.text, r.stop_reason, r.ttft_ms ...
 *   mmrag_gen_result_free(&r);
 *   mmrag_session_free(s);
 *   mmrag_engine_free(e);
 *
 * Threads: a struct mmrag_engine (weights, tokenizer) is read-only after init and may be
 * shared by any number of threads; a struct mmrag_session (KV cache, scratch, its own
 * kernel thread pool) is used by one thread at a time.
 * Status codes: 0 = ok, negative = error (message from mmrag_session_errmsg()). */
#ifndef MMRAG_ENGINE_H
#define MMRAG_ENGINE_H
#include <stddef.h>
#include <stdint.h>

struct mmrag_engine;
struct mmrag_session;

enum mmrag_engine_status {
    MMRAG_ENGINE_OK = 0, MMRAG_ENGINE_ERROR = -1, MMRAG_ENGINE_NOMEM = -2,
    MMRAG_ENGINE_CONTEXT_FULL = -6, MMRAG_ENGINE_ABORTED = 1,
};
enum mmrag_kv_type {
    MMRAG_KV_F32 = 0, MMRAG_KV_F16 = 1,
    MMRAG_KV_INT4 = 2,    /* one scale per KV block and head: s = max|x|/7 */
    MMRAG_KV_INT4_CH = 3, /* per block and head, refined: K per channel, V per token */
};
enum mmrag_attn_mode {
    MMRAG_ATTN_FULL = 0,     /* every earlier token */
    MMRAG_ATTN_SLIDING = 1,  /* the last `window` tokens (chunked prefill keeps the overlap) */
    MMRAG_ATTN_SPARSE = 2,   /* first `n_global` tokens + last `window` tokens
                                (+ optional random KV blocks, see sparse_random) */
};
enum mmrag_rope_scaling { MMRAG_ROPE_NONE = 0, MMRAG_ROPE_LINEAR = 1, MMRAG_ROPE_NTK = 2 };
enum mmrag_stop_reason {
    MMRAG_STOP_NONE = 0, MMRAG_STOP_END_TURN = 1, MMRAG_STOP_MAX_TOKENS = 2,
    MMRAG_STOP_SEQUENCE = 3, MMRAG_STOP_ABORTED = 4, MMRAG_STOP_REPETITION = 5,
};

struct mmrag_engine_params {
    int32_t n_threads;      /* kernel threads per session; 0 = $MMRAG_THREADS or all CPUs */
    int32_t n_ctx;          /* context tokens per session; 0 = llama.context_length (capped 8192) */
    int32_t n_batch;        /* prefill chunk in tokens; 0 = 512 */
    int32_t kv_type;        /* enum mmrag_kv_type */
    int32_t kv_block;       /* tokens per KV block; 0 = 64 */
    int32_t attn_mode;      /* enum mmrag_attn_mode */
    int32_t window;         /* sliding / local window in tokens; 0 = 1024 */
    int32_t n_global;       /* sparse mode: leading tokens every query sees; 0 = 64 */
    int32_t rope_scaling;   /* enum mmrag_rope_scaling; used only when n_ctx > trained length */
    float rope_factor;      /* scaling factor; 0 = n_ctx / trained length */
    float sparse_random;    /* sparse mode: fraction (0..1) of the other KV blocks each query
                               block also sees, picked by a hash of sparse_seed; 0 = none */
    uint32_t sparse_seed;
};
struct mmrag_engine_params mmrag_engine_default_params(void);

/* Loads and validates the GGUF: architectures llama (incl. Llama 3 rope_freqs), qwen2,
 * qwen3, gemma3; tensors F32/F16/BF16/Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/Q2_K/Q3_K/Q4_K/Q5_K/Q6_K;
 * byte-level BPE (gpt2) or SentencePiece (llama) tokenizer; chat template from
 * tokenizer.chat_template. NULL + message in err on any failure (an unsupported
 * architecture, tensor type or tokenizer is named, with the list of supported ones). */
struct mmrag_engine *mmrag_engine_init_from_file(const char *path, struct mmrag_engine_params p,
                                                 char *err, size_t errlen);
void mmrag_engine_free(struct mmrag_engine *e);

/* What a GGUF file is, for listings (`mmrag models`): read from its header and tensor
 * table, then a full load with a small context tells whether this engine runs it. */
struct mmrag_model_info {
    char arch[32];          /* general.architecture, "" when absent */
    char name[96];          /* general.name, "" when absent */
    char file_type[16];     /* general.file_type in llama.cpp's words ("Q4_K_M"), "" if none */
    char dominant[16];      /* tensor type holding most bytes of the blk.* weights ("q5_0") */
    int32_t n_ctx_train;    /* <arch>.context_length, 0 when absent */
    int32_t n_layer;        /* <arch>.block_count, 0 when absent */
    int64_t n_params;       /* elements over all tensors */
    int64_t bytes;          /* file size */
    int loads;              /* 1: mmrag_engine_init_from_file accepts it */
    char why[256];          /* !loads: the reason */
};
/* Fills *info for the file at path (loading it once to test it). Returns 0 when the file
 * is a readable GGUF (whether or not the engine supports it: see info->loads), -1 when it
 * is not (info->why says why). */
int mmrag_engine_probe(const char *path, struct mmrag_model_info *info);

int32_t mmrag_engine_n_vocab(const struct mmrag_engine *e);
int32_t mmrag_engine_n_ctx(const struct mmrag_engine *e);        /* per session */
int32_t mmrag_engine_n_ctx_train(const struct mmrag_engine *e);
int32_t mmrag_engine_eos(const struct mmrag_engine *e);
/* Bytes of KV cache per token for the configured kv_type (all layers, K and V). */
double mmrag_engine_kv_bytes_per_token(const struct mmrag_engine *e, int32_t kv_type);
/* One-line description ("llama 30L d576 9h/3kv ff1536 vocab 49152 ctx 8192"), owned by e. */
const char *mmrag_engine_desc(const struct mmrag_engine *e);

/* ---- tokenizer (thread-safe: reads only the engine) ---------------------------- */
/* Tokenizes len bytes of text. parse_special: control tokens such as <|im_start|> written
 * in the text become their ids. Returns the token count; if it exceeds max, returns
 * -(count) and writes the first max ids. */
int32_t mmrag_engine_tokenize(const struct mmrag_engine *e, const char *text, size_t len,
                              int32_t *ids, int32_t max, int parse_special);
/* Bytes of token id (control tokens as their text). Returns the length, or -(needed)
 * when buf_size is too small; NUL-terminates when there is room. */
int32_t mmrag_engine_token_piece(const struct mmrag_engine *e, int32_t id, char *buf,
                                 size_t buf_size);
int32_t mmrag_engine_detokenize(const struct mmrag_engine *e, const int32_t *ids, int32_t n,
                                char *buf, size_t buf_size);
/* Chat prompt in the model's format: system (NULL = none; ChatML models get SmolLM2's
 * default), user turn, assistant opening, with the BOS token written out where the
 * format starts with it (Llama 3, Gemma). Gemma has no system role: the system text opens
 * the user turn. Special-token spellings inside system/user text are split by a zero-width
 * space, so content cannot open or close turns. Returns length or -(needed) like
 * token_piece. */
int32_t mmrag_engine_chat_prompt(const struct mmrag_engine *e, const char *system,
                                 const char *user, char *buf, size_t buf_size);
/* The format mmrag_engine_chat_prompt uses, recognized from tokenizer.chat_template:
 * "chatml" (<|im_start|>: SmolLM2, Qwen), "llama3" (<|start_header_id|>) or "gemma"
 * (<start_of_turn>). *recognized (may be NULL) is set to 0 when the file has no template or
 * an unrecognized one, and callers should warn: an unrecognized template gets ChatML; no
 * template (a base model) gets ChatML when the vocabulary has <|im_start|>, else "plain"
 * ([BOS][system\n\n]user\nAnswer:, a completion prompt). Static text. */
const char *mmrag_engine_chat_template(const struct mmrag_engine *e, int *recognized);
/* Stop strings generation should use with this format (the plain format's "\n\n" and
 * "\nQuestion:"; none for chat formats). *n gets the count; static, may be NULL if 0. */
const char *const *mmrag_engine_chat_stops(const struct mmrag_engine *e, int32_t *n);

/* ---- sessions (one thread at a time each) ------------------------------------------ */
struct mmrag_session *mmrag_session_create(struct mmrag_engine *e, char *err, size_t errlen);
void mmrag_session_free(struct mmrag_session *s);
void mmrag_session_reset(struct mmrag_session *s);      /* empty the KV cache */
const char *mmrag_session_errmsg(const struct mmrag_session *s); /* valid until next call */
int32_t mmrag_session_n_past(const struct mmrag_session *s);
size_t mmrag_session_kv_bytes(const struct mmrag_session *s);     /* bytes held now */
/* Appends n tokens to the context (chunked prefill) and computes the logits of the last
 * one. Returns 0, or MMRAG_ENGINE_CONTEXT_FULL / MMRAG_ENGINE_ERROR with a message. */
int mmrag_session_eval(struct mmrag_session *s, const int32_t *ids, int32_t n);
/* Logits of the last evaluated token: n_vocab floats, valid until the next call on s. */
const float *mmrag_session_logits(const struct mmrag_session *s);
/* Like eval, but writes the logits of every token into all_logits[n][n_vocab]. */
int mmrag_session_eval_all(struct mmrag_session *s, const int32_t *ids, int32_t n,
                           float *all_logits);

/* ---- generation ---------------------------------------------------------------------- */
struct mmrag_sampling {
    float temperature;      /* 0 = greedy */
    int32_t top_k;          /* 0 = off */
    float top_p;            /* 1 = off */
    float repeat_penalty;   /* 1 = off; divides positive logits, multiplies negative */
    int32_t repeat_last_n;  /* tokens the penalty looks back over; 0 = 64 */
    uint64_t seed;          /* same seed and inputs => same output */
};
/* Streaming: called with each newly final piece of text (never part of a stop string,
 * never a split UTF-8 character). Return nonzero to abort (stop reason "aborted"). */
typedef int (*mmrag_text_cb)(void *user_data, const char *piece, size_t len);
/* A caller's byte grammar for constrained decoding (tool calls against their schemas):
 * each step, tokens whose bytes the grammar rejects from the current state are masked;
 * generation ends when done() says the text is complete. States are copied per candidate
 * token, so keep them small (at most MMRAG_GRAMMAR_STATE_MAX bytes). */
#define MMRAG_GRAMMAR_STATE_MAX 64
struct mmrag_grammar {
    const void *data;        /* the compiled grammar, read-only while generating */
    size_t state_size;
    void (*init)(const void *data, void *state);
    int (*feed)(const void *data, void *state, unsigned char c);   /* 0 ok, -1 rejected */
    int (*done)(const void *data, const void *state);               /* 1: complete */
};

struct mmrag_gen_params {
    struct mmrag_sampling sampling;
    int32_t max_tokens;     /* 0 = 256 */
    const char *const *stop; /* stop strings (not included in the output) */
    int32_t n_stop;
    mmrag_text_cb on_text;
    void *user_data;
    int32_t json_mode;      /* 1: output is exactly one JSON object (constrained decoding;
                               stop strings are ignored, control tokens are masked) */
    int32_t keep_context;   /* 1: do not reset the session before the prompt */
    int32_t loop_guard;     /* 1 (default): stop ("repetition") once the output ends in a
                               span of 16..128 tokens twice, or of 4..15 tokens three times,
                               back to back: small models loop instead of ending */
    const struct mmrag_grammar *grammar;   /* NULL = none; excludes json_mode; an output cut
                               by max_tokens is left as is (not done) */
};
struct mmrag_gen_params mmrag_gen_default_params(void);

struct mmrag_gen_result {
    char *text;             /* generated text, NUL-terminated; freed by mmrag_gen_result_free */
    int32_t *tokens;        /* generated token ids (n_gen) */
    int32_t n_prompt, n_gen;
    int32_t stop_reason;    /* enum mmrag_stop_reason */
    double ttft_ms;         /* request start -> first token sampled (includes prefill) */
    double prompt_ms, decode_ms;
    double *itl_ms;         /* inter-token latencies, n_gen - 1 values */
};
/* Tokenizes prompt (special tokens parsed), prefills, samples until a stop condition.
 * A prompt that does not fit the context leaves room for nothing: it is an error
 * (MMRAG_ENGINE_CONTEXT_FULL) and the message says how long it is; generation that reaches
 * the end of the context stops with MMRAG_STOP_MAX_TOKENS. In json_mode an object cut by
 * max_tokens is closed minimally so the text still parses. */
int mmrag_session_generate(struct mmrag_session *s, const char *prompt,
                           const struct mmrag_gen_params *p, struct mmrag_gen_result *r);
void mmrag_gen_result_free(struct mmrag_gen_result *r);
const char *mmrag_stop_reason_str(int32_t reason); /* "end_turn", "max_tokens", ... */

/* Picks the next token from logits (modified in place) given recent history. */
int32_t mmrag_sample(float *logits, int32_t n_vocab, const struct mmrag_sampling *p,
                     const int32_t *history, int32_t n_history, uint64_t *rng_state);

/* Percentile (0..100) of n values by linear interpolation; v is not modified. */
double mmrag_percentile(const double *v, int32_t n, double pct);

/* ---- JSON validity (for tests and callers) ------------------------------------------- */
/* 1 if text[0..len) is exactly one JSON object (whitespace around allowed), else 0. */
int mmrag_json_is_object(const char *text, size_t len);
#endif
