/* Tokenizers built from GGUF metadata. Byte-level BPE (tokenizer.ggml.model = "gpt2"):
 * GPT-2 byte<->unicode map, ranked merges, the split rules of the GPT-2, Llama 3 and Qwen2
 * pre-tokenizers written out by hand (plus the per-digit split of smollm/starcoder-style
 * ones). SentencePiece ("llama": Gemma, Llama 2) lives in engine/tokenizer_spm.c. Control
 * tokens are matched in the raw text before either. */
#include "engine/engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/unicode_tab.h"

static uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static uint32_t hash_u64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (uint32_t)k;
}

int32_t engine_vocab_find(const engine_vocab *v, const char *s, size_t len) {
    for (uint32_t h = hash_bytes(s, len) & v->hash_mask;; h = (h + 1) & v->hash_mask) {
        int32_t id = v->hash[h];
        if (id < 0) return -1;
        const char *t = v->text[id];
        if (strlen(t) == len && memcmp(t, s, len) == 0) return id;
    }
}

/* GPT-2's reversible byte -> code point map: printable bytes keep their value, the rest
 * are moved to 256.. in order. */
static uint32_t byte_to_cp(int b) {
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        return (uint32_t)b;
    int n = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) n++;
    return 256u + (uint32_t)n;
}

static int utf8_put(uint32_t cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 63));
        o[2] = (char)(0x80 | (cp & 63)); return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 63));
    o[2] = (char)(0x80 | ((cp >> 6) & 63)); o[3] = (char)(0x80 | (cp & 63)); return 4;
}

/* Decodes one UTF-8 character; invalid input yields the byte itself with length 1 and
 * code point 0xFFFD (classified as "other"). */
static int utf8_get(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || (size_t)len > n) { *cp = 0xFFFD; return 1; }
    uint32_t v = len == 1 ? c : len == 2 ? (c & 31) : len == 3 ? (c & 15) : (c & 7);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) { *cp = 0xFFFD; return 1; }
        v = (v << 6) | (s[i] & 63);
    }
    *cp = v;
    return len;
}

static int in_ranges(uint32_t cp, const unsigned int (*r)[2], size_t n) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid][0]) hi = mid;
        else if (cp > r[mid][1]) lo = mid + 1;
        else return 1;
    }
    return 0;
}

enum { CL_OTHER, CL_LETTER, CL_NUMBER, CL_SPACE };

static int cp_class(uint32_t cp) {
    if (cp == ' ' || (cp >= 9 && cp <= 13) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
        (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
        cp == 0x205F || cp == 0x3000)
        return CL_SPACE;
    if (cp < 0x80) {
        if ((cp | 32) >= 'a' && (cp | 32) <= 'z') return CL_LETTER;
        if (cp >= '0' && cp <= '9') return CL_NUMBER;
        return CL_OTHER;
    }
    if (in_ranges(cp, uni_letter, sizeof uni_letter / sizeof uni_letter[0])) return CL_LETTER;
    if (in_ranges(cp, uni_number, sizeof uni_number / sizeof uni_number[0])) return CL_NUMBER;
    return CL_OTHER;
}

/* ---- loading ---- */
static int put_hash(engine_vocab *v, int32_t id) {
    const char *t = v->text[id];
    for (uint32_t h = hash_bytes(t, strlen(t)) & v->hash_mask;; h = (h + 1) & v->hash_mask) {
        if (v->hash[h] < 0) { v->hash[h] = id; return 0; }
        if (strcmp(v->text[v->hash[h]], t) == 0) return 0; /* duplicate: keep the first */
    }
}

static engine_merge *merge_slot(const engine_vocab *v, uint64_t key) {
    for (uint32_t h = hash_u64(key) & v->merge_mask;; h = (h + 1) & v->merge_mask)
        if (v->merges[h].id < 0 || v->merges[h].key == key) return &v->merges[h];
}

static int cmp_special(const void *a, const void *b, void *ctx) {
    const engine_vocab *v = ctx;
    size_t la = strlen(v->text[*(const int32_t *)a]), lb = strlen(v->text[*(const int32_t *)b]);
    return la < lb ? 1 : la > lb ? -1 : 0;
}

static int load_bpe(engine_vocab *v, const mf_gguf *f, size_t total, char *err, size_t errlen);
static void load_pre(engine_vocab *v, const mf_gguf *f);

int engine_vocab_load(engine_vocab *v, const mf_gguf *f, char *err, size_t errlen) {
    memset(v, 0, sizeof *v);
    const char *model = "(missing)";
    mf_gguf_get_str(f, "tokenizer.ggml.model", &model, NULL);
    if (strcmp(model, "gpt2") != 0 && strcmp(model, "llama") != 0) {
        snprintf(err, errlen, "engine: tokenizer.ggml.model \"%.40s\" not supported (supported: gpt2 = "
                 "byte-level BPE, llama = SentencePiece)", model);
        return -1;
    }
    v->spm = strcmp(model, "llama") == 0;
    int32_t et;
    uint64_t n;
    if (mf_gguf_get_arr(f, "tokenizer.ggml.tokens", &et, &n, NULL) || et != MF_GGUF_STRING ||
        n == 0 || n > (1u << 24)) {
        snprintf(err, errlen, "engine: tokenizer.ggml.tokens missing or not strings");
        return -1;
    }
    v->n_vocab = (int32_t)n;
    v->text = calloc(n, sizeof *v->text);
    v->type = calloc(n, sizeof *v->type);
    v->bytes_off = calloc(n + 1, sizeof *v->bytes_off);
    uint32_t hs = 1;
    while (hs < 2 * n) hs <<= 1;
    v->hash = malloc(hs * sizeof *v->hash);
    v->hash_mask = hs - 1;
    if (!v->text || !v->type || !v->bytes_off || !v->hash) goto nomem;
    memset(v->hash, 0xff, hs * sizeof *v->hash);
    const void *tt = NULL;
    uint64_t ntt = 0;
    int32_t ttype = -1;
    mf_gguf_get_arr(f, "tokenizer.ggml.token_type", &ttype, &ntt, &tt);
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        size_t len;
        mf_gguf_get_arr_str(f, "tokenizer.ggml.tokens", i, &v->text[i], &len);
        v->type[i] = 1;
        if (tt && ntt == n && (ttype == MF_GGUF_I32 || ttype == MF_GGUF_U32))
            memcpy(&v->type[i], (const char *)tt + 4 * i, 4);
        total += len;
        put_hash(v, (int32_t)i);
    }
    if (v->spm ? engine_spm_load(v, f, err, errlen) : load_bpe(v, f, total, err, errlen)) goto fail;
    /* control and user-defined tokens are matched literally in prompts */
    v->special = malloc((size_t)v->n_vocab * sizeof *v->special);
    if (!v->special) goto nomem;
    for (int32_t i = 0; i < v->n_vocab; i++)
        if ((v->type[i] == 3 || v->type[i] == 4) && v->text[i][0]) v->special[v->n_special++] = i;
    qsort_r(v->special, (size_t)v->n_special, sizeof *v->special, cmp_special, v);
    load_pre(v, f);
    uint32_t u;
    v->bos = mf_gguf_get_u32(f, "tokenizer.ggml.bos_token_id", &u) == 0 && u < n ? (int32_t)u : -1;
    v->eos = mf_gguf_get_u32(f, "tokenizer.ggml.eos_token_id", &u) == 0 && u < n ? (int32_t)u : -1;
    static const char *const eot[] = {"<|im_end|>", "<|eot_id|>", "<end_of_turn>"};
    v->eot = -1;
    for (size_t i = 0; i < sizeof eot / sizeof *eot && v->eot < 0; i++)
        v->eot = engine_vocab_find(v, eot[i], strlen(eot[i]));
    if (v->eot < 0) v->eot = v->eos;
    return 0;
nomem:
    snprintf(err, errlen, "engine: out of memory loading the vocabulary");
fail:
    engine_vocab_free(v);
    return -1;
}

static void load_pre(engine_vocab *v, const mf_gguf *f) {
    const char *pre = "default";
    mf_gguf_get_str(f, "tokenizer.ggml.pre", &pre, NULL);
    static const char *const digit_pre[] = {"smollm", "starcoder", "refact", "command-r",
                                            "codeshell", "exaone", "minerva"};
    for (size_t i = 0; i < sizeof digit_pre / sizeof *digit_pre; i++)
        if (strcmp(pre, digit_pre[i]) == 0) v->digits_split = 1;
    if (strcmp(pre, "llama-bpe") == 0 || strcmp(pre, "llama3") == 0 || strcmp(pre, "smaug-bpe") == 0)
        v->pre = ENGINE_PRE_LLAMA3;
    else if (strcmp(pre, "qwen2") == 0 || strcmp(pre, "deepseek-r1-qwen") == 0)
        v->pre = ENGINE_PRE_QWEN2;
}

/* gpt2 BPE: token bytes through the byte<->code point map, and the ranked merges */
static int load_bpe(engine_vocab *v, const mf_gguf *f, size_t total, char *err, size_t errlen) {
    int32_t et;
    uint64_t nm = 0;
    /* decoded bytes of each token: normal tokens map code points back to bytes */
    int cp2byte[512];
    for (int i = 0; i < 512; i++) cp2byte[i] = -1;
    for (int b = 0; b < 256; b++) cp2byte[byte_to_cp(b)] = b;
    v->bytes = malloc(total + 1);
    if (!v->bytes) goto nomem;
    int64_t pos = 0;
    for (int32_t i = 0; i < v->n_vocab; i++) {
        const unsigned char *s = (const unsigned char *)v->text[i];
        size_t len = strlen(v->text[i]);
        v->bytes_off[i] = pos;
        if (v->type[i] == 3 || v->type[i] == 4) {
            memcpy(v->bytes + pos, s, len);
            pos += (int64_t)len;
            continue;
        }
        for (size_t k = 0; k < len;) {
            uint32_t cp;
            int l = utf8_get(s + k, len - k, &cp);
            if (cp < 512 && cp2byte[cp] >= 0) v->bytes[pos++] = (char)cp2byte[cp];
            else { memcpy(v->bytes + pos, s + k, (size_t)l); pos += l; }
            k += (size_t)l;
        }
    }
    v->bytes_off[v->n_vocab] = pos;
    for (int b = 0; b < 256; b++) {
        char u[4];
        int l = utf8_put(byte_to_cp(b), u);
        v->byte_tok[b] = engine_vocab_find(v, u, (size_t)l);
    }
    /* merges: "left right" -> rank; stored by the ids of both halves */
    if (mf_gguf_get_arr(f, "tokenizer.ggml.merges", &et, &nm, NULL) == 0 && et != MF_GGUF_STRING) {
        snprintf(err, errlen, "engine: tokenizer.ggml.merges is not a string array");
        return -1;
    }
    uint32_t hs = 1;
    while (hs < 2 * nm + 2) hs <<= 1;
    v->merges = malloc(hs * sizeof *v->merges);
    v->merge_mask = hs - 1;
    if (!v->merges) goto nomem;
    for (uint32_t i = 0; i < hs; i++) v->merges[i].id = -1;
    char buf[1024];
    for (uint64_t r = 0; r < nm; r++) {
        const char *m;
        size_t len;
        mf_gguf_get_arr_str(f, "tokenizer.ggml.merges", r, &m, &len);
        const char *sp = memchr(m + (len > 0), ' ', len ? len - 1 : 0);
        if (!sp || len >= sizeof buf) continue;
        size_t la = (size_t)(sp - m), lb = len - la - 1;
        int32_t a = engine_vocab_find(v, m, la), b = engine_vocab_find(v, sp + 1, lb);
        memcpy(buf, m, la);
        memcpy(buf + la, sp + 1, lb);
        int32_t ab = engine_vocab_find(v, buf, la + lb);
        if (a < 0 || b < 0 || ab < 0) continue;
        uint64_t key = (uint64_t)a << 32 | (uint32_t)b;
        engine_merge *slot = merge_slot(v, key);
        if (slot->id >= 0) continue;
        *slot = (engine_merge){key, (int32_t)r, ab};
    }
    return 0;
nomem:
    snprintf(err, errlen, "engine: out of memory loading the vocabulary");
    return -1;
}

void engine_vocab_free(engine_vocab *v) {
    free(v->text);
    free(v->type);
    free(v->bytes);
    free(v->bytes_off);
    free(v->hash);
    free(v->merges);
    free(v->special);
    free(v->scores);
    memset(v, 0, sizeof *v);
}

/* ---- encoding ---- */
typedef struct {
    int32_t *ids;
    int32_t n, max;
} id_out;

static void emit(id_out *o, int32_t id) {
    if (o->n < o->max) o->ids[o->n] = id;
    o->n++;
}

/* BPE over one pre-token: start from byte tokens, merge the lowest-ranked pair until
 * none applies. O(len^2), fine for word-sized pieces. A byte the vocabulary has no token
 * for (SmolLM2 lacks 0xF5..0xFF, which never occur in UTF-8) becomes U+FFFD's bytes, as a
 * UTF-8 decoder would read it, never token 0 (<|endoftext|>: found by the tokenizers
 * fuzz target). sym holds 3 entries per byte. */
static void bpe_piece(const engine_vocab *v, const unsigned char *s, size_t n, id_out *o,
                      int32_t *sym) {
    static const unsigned char fffd[3] = {0xEF, 0xBF, 0xBD};
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (v->byte_tok[s[i]] >= 0) { sym[m++] = v->byte_tok[s[i]]; continue; }
        for (int k = 0; k < 3; k++)
            if (v->byte_tok[fffd[k]] >= 0) sym[m++] = v->byte_tok[fffd[k]];
    }
    while (m > 1) {
        int32_t best = INT32_MAX, at = -1, id = -1;
        for (size_t i = 0; i + 1 < m; i++) {
            if (sym[i] < 0 || sym[i + 1] < 0) continue;
            engine_merge *e = merge_slot(v, (uint64_t)sym[i] << 32 | (uint32_t)sym[i + 1]);
            if (e->id >= 0 && e->rank < best) { best = e->rank; at = (int32_t)i; id = e->id; }
        }
        if (at < 0) break;
        sym[at] = id;
        memmove(sym + at + 1, sym + at + 2, (m - (size_t)at - 2) * sizeof *sym);
        m--;
    }
    for (size_t i = 0; i < m; i++) emit(o, sym[i] >= 0 ? sym[i] : 0);
}

typedef struct {
    size_t off;   /* byte offset */
    int cl;
    uint32_t cp;
} cpinfo;

/* GPT-2 split rules over code points c[0..n): contractions, ' ?L+', ' ?N+',
 * ' ?[^sLN]+', whitespace runs (leaving one space for the next word). */
static void split_gpt2(const engine_vocab *v, const unsigned char *text, const cpinfo *c,
                       size_t n, size_t end_off, id_out *o, int32_t *sym) {
    size_t i = 0;
#define OFF(k) ((k) < n ? c[(k)].off : end_off)
    while (i < n) {
        size_t k = 0;
        if (c[i].cp == '\'' && i + 1 < n) {
            static const char *const suf[] = {"re", "ve", "ll", "s", "t", "m", "d"};
            for (int si = 0; si < 7 && !k; si++) {
                size_t L = strlen(suf[si]);
                if (i + L < n + 0 && i + 1 + L <= n) {
                    size_t q = 0;
                    while (q < L && c[i + 1 + q].cp == (unsigned char)suf[si][q]) q++;
                    if (q == L) k = i + 1 + L;
                }
            }
        }
        if (!k) {
            size_t j = (c[i].cp == ' ' && i + 1 < n) ? i + 1 : i;
            int cl = c[j].cl;
            if (cl == CL_LETTER || cl == CL_NUMBER) {
                k = j;
                while (k < n && c[k].cl == cl) k++;
            } else if (cl == CL_OTHER) {
                k = j;
                while (k < n && c[k].cl == CL_OTHER) k++;
            } else if (c[i].cl == CL_SPACE) {
                k = i;
                while (k < n && c[k].cl == CL_SPACE) k++;
                if (k < n && k - i > 1) k--;
            } else {
                k = i + 1;
            }
        }
        bpe_piece(v, text + c[i].off, OFF(k) - c[i].off, o, sym);
        i = k;
    }
#undef OFF
}

static int is_nl(uint32_t cp) { return cp == '\r' || cp == '\n'; }

/* end of the match of Llama 3's / Qwen2's split regex at c[i] (maxdig: 3 or 1):
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,maxdig}|
 *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t match_llama3(const cpinfo *c, size_t n, size_t i, int maxdig) {
    if (c[i].cp == '\'' && i + 1 < n) {
        static const char *const suf[] = {"re", "ve", "ll", "s", "t", "m", "d"};
        for (int si = 0; si < 7; si++) {
            size_t L = strlen(suf[si]), q = 0;
            while (q < L && i + 1 + q < n && (c[i + 1 + q].cp | 32) == (unsigned char)suf[si][q]) q++;
            if (q == L) return i + 1 + L;
        }
    }
    size_t k = i;
    if (c[i].cl != CL_LETTER && c[i].cl != CL_NUMBER && !is_nl(c[i].cp) && i + 1 < n &&
        c[i + 1].cl == CL_LETTER)
        k = i + 1;
    if (c[k].cl == CL_LETTER) {
        while (k < n && c[k].cl == CL_LETTER) k++;
        return k;
    }
    if (c[i].cl == CL_NUMBER) {
        for (k = i; k < n && k - i < (size_t)maxdig && c[k].cl == CL_NUMBER;) k++;
        return k;
    }
    size_t j = c[i].cp == ' ' && i + 1 < n ? i + 1 : i;
    if (c[j].cl == CL_OTHER) {
        for (k = j; k < n && c[k].cl == CL_OTHER;) k++;
        while (k < n && is_nl(c[k].cp)) k++;
        return k;
    }
    /* whitespace: up to the run's last newline, else all but the space before a word */
    for (k = i; k < n && c[k].cl == CL_SPACE;) k++;
    for (size_t q = k; q > i; q--)
        if (is_nl(c[q - 1].cp)) return q;
    if (k < n && k - i > 1) return k - 1;
    return k > i ? k : i + 1;
}

static void split_llama3(const engine_vocab *v, const unsigned char *text, const cpinfo *c,
                         size_t n, size_t end_off, id_out *o, int32_t *sym) {
    int maxdig = v->pre == ENGINE_PRE_QWEN2 ? 1 : 3;
    for (size_t i = 0; i < n;) {
        size_t k = match_llama3(c, n, i, maxdig);
        bpe_piece(v, text + c[i].off, (k < n ? c[k].off : end_off) - c[i].off, o, sym);
        i = k;
    }
}

static int encode_plain(const engine_vocab *v, const unsigned char *s, size_t len, id_out *o) {
    if (len == 0) return 0;
    if (v->spm) return engine_spm_encode(v, s, len, 1, o->ids, &o->n, o->max);
    cpinfo *c = malloc(len * sizeof *c);
    int32_t *sym = malloc(3 * len * sizeof *sym);   /* bpe_piece: 3 per byte at most */
    if (!c || !sym) { free(c); free(sym); return -1; }
    size_t n = 0;
    for (size_t k = 0; k < len;) {
        uint32_t cp;
        int l = utf8_get(s + k, len - k, &cp);
        c[n].off = k;
        c[n].cp = cp;
        c[n].cl = cp_class(cp);
        n++;
        k += (size_t)l;
    }
    if (v->pre != ENGINE_PRE_GPT2) {
        split_llama3(v, s, c, n, len, o, sym);
    } else if (!v->digits_split) {
        split_gpt2(v, s, c, n, len, o, sym);
    } else { /* every number character is its own piece; the rest split by GPT-2 rules */
        size_t a = 0;
        for (size_t i = 0; i <= n; i++) {
            if (i < n && c[i].cl != CL_NUMBER) continue;
            if (i > a) split_gpt2(v, s, c + a, i - a, i < n ? c[i].off : len, o, sym);
            if (i < n) bpe_piece(v, s + c[i].off, (i + 1 < n ? c[i + 1].off : len) - c[i].off, o, sym);
            a = i + 1;
        }
    }
    free(c);
    free(sym);
    return 0;
}

/* Length of the special token spelled at s[0..len) (longest first), or 0. */
static size_t match_special(const engine_vocab *v, const unsigned char *s, size_t len,
                            int32_t *id) {
    for (int32_t k = 0; k < v->n_special; k++) {
        const char *t = v->text[v->special[k]];
        if ((unsigned char)t[0] != s[0]) continue;
        size_t tl = strlen(t);
        if (tl <= len && memcmp(t, s, tl) == 0) {
            *id = v->special[k];
            return tl;
        }
    }
    return 0;
}

int32_t mmrag_engine_tokenize(const struct mmrag_engine *e, const char *text, size_t len,
                              int32_t *ids, int32_t max, int parse_special) {
    const engine_vocab *v = &e->vocab;
    id_out o = {ids, 0, ids ? max : 0};
    const unsigned char *s = (const unsigned char *)text;
    size_t start = 0;
    for (size_t i = 0; parse_special && i < len; i++) {
        int32_t hit;
        size_t hl = match_special(v, s + i, len - i, &hit);
        if (!hl) continue;
        if (encode_plain(v, s + start, i - start, &o)) return INT32_MIN;
        emit(&o, hit);
        i += hl - 1;
        start = i + 1;
    }
    if (encode_plain(v, s + start, len - start, &o)) return INT32_MIN;
    return o.n <= o.max ? o.n : -o.n;
}

/* Caller guarantees n < size. */
static int32_t copy_out(const char *src, size_t n, char *buf, size_t size) {
    (void)size;
    memcpy(buf, src, n);
    buf[n] = 0;
    return (int32_t)n;
}

int32_t mmrag_engine_token_piece(const struct mmrag_engine *e, int32_t id, char *buf,
                                 size_t buf_size) {
    if (id < 0 || id >= e->vocab.n_vocab) return 0;
    size_t n;
    const char *p = engine_token_bytes(&e->vocab, id, &n);
    if (n + 1 > buf_size) {
        if (buf && buf_size) buf[0] = 0;
        return -(int32_t)(n + 1);
    }
    return copy_out(p, n, buf, buf_size);
}

int32_t mmrag_engine_detokenize(const struct mmrag_engine *e, const int32_t *ids, int32_t n,
                                char *buf, size_t buf_size) {
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= e->vocab.n_vocab) continue;
        size_t l;
        const char *p = engine_token_bytes(&e->vocab, ids[i], &l);
        if (buf && total + l < buf_size) memcpy(buf + total, p, l);
        total += l;
    }
    if (total + 1 > buf_size) {
        if (buf && buf_size) buf[0] = 0;
        return -(int32_t)(total + 1);
    }
    buf[total] = 0;
    return (int32_t)total;
}

size_t engine_vocab_match_special(const engine_vocab *v, const unsigned char *s, size_t len,
                                  int32_t *id) {
    return match_special(v, s, len, id);
}
