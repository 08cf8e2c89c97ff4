/* Generation loop: prefill, sample, stop conditions (end of turn, max tokens, stop
 * strings), JSON-constrained decoding, streaming of final text, latency accounting. */
#include "engine/engine_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct mmrag_gen_params mmrag_gen_default_params(void) {
    struct mmrag_gen_params p;
    memset(&p, 0, sizeof p);
    p.sampling.top_p = 1.0f;
    p.sampling.repeat_penalty = 1.0f;
    p.max_tokens = 256;
    p.loop_guard = 1;
    return p;
}

const char *mmrag_stop_reason_str(int32_t r) {
    switch (r) {
    case MMRAG_STOP_END_TURN: return "end_turn";
    case MMRAG_STOP_MAX_TOKENS: return "max_tokens";
    case MMRAG_STOP_SEQUENCE: return "stop_sequence";
    case MMRAG_STOP_ABORTED: return "aborted";
    case MMRAG_STOP_REPETITION: return "repetition";
    default: return "none";
    }
}

void mmrag_gen_result_free(struct mmrag_gen_result *r) {
    if (!r) return;
    free(r->text);
    free(r->tokens);
    free(r->itl_ms);
    memset(r, 0, sizeof *r);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

typedef struct {
    char *p;
    size_t n, cap;
} sbuf;

static int sbuf_add(sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 256);
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) return -1;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

/* Length of the longest suffix of text that is a proper prefix of a stop string: that
 * much must be held back from streaming until it is resolved. */
static size_t stop_holdback(const char *text, size_t n, const char *const *stop, int32_t n_stop) {
    size_t hold = 0;
    for (int32_t k = 0; k < n_stop; k++) {
        size_t L = strlen(stop[k]);
        for (size_t m = L > 1 ? L - 1 : 0; m > hold; m--)
            if (m <= n && memcmp(text + n - m, stop[k], m) == 0) { hold = m; break; }
    }
    return hold;
}

/* Bytes at the end of s[0..n) that start an incomplete UTF-8 character. */
static size_t utf8_tail(const char *s, size_t n) {
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned char c = (unsigned char)s[n - k];
        if ((c & 0xC0) == 0x80) continue;
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > k ? k : 0;
    }
    return 0;
}

/* 1 if t[0..n) ends in a loop: the last L tokens repeated back to back, twice for
 * 16 <= L <= 128 and three times for shorter spans (L >= 4; a repeated word is not a
 * loop). Exact repeats only: table rows and list items differ from one another. */
static int ends_in_loop(const int32_t *t, int32_t n) {
    for (int32_t L = 4; L <= 128; L++) {
        int copies = L >= 16 ? 2 : 3;
        if ((int64_t)L * copies > n) break;
        int same = 1;
        for (int c = 1; c < copies && same; c++)
            same = memcmp(t + n - L, t + n - (int64_t)(c + 1) * L, (size_t)L * sizeof *t) == 0;
        if (same) return 1;
    }
    return 0;
}

static void json_mask(const struct mmrag_engine *e, const engine_json *j, float *logits) {
    const engine_vocab *v = &e->vocab;
    for (int32_t id = 0; id < v->n_vocab; id++) {
        if (!isfinite(logits[id])) continue;
        size_t len;
        const char *b = engine_token_bytes(v, id, &len);
        int ok = len > 0 && v->type[id] != 3 && v->type[id] != 4;
        engine_json c = *j;
        for (size_t i = 0; ok && i < len; i++) {
            if (c.done) ok = 0;            /* nothing after the closing brace */
            else ok = engine_json_feed(&c, (unsigned char)b[i]) == 0;
        }
        if (!ok) logits[id] = -INFINITY;
    }
}

static void grammar_mask(const struct mmrag_engine *e, const struct mmrag_grammar *g,
                         const void *state, float *logits) {
    const engine_vocab *v = &e->vocab;
    unsigned char c[MMRAG_GRAMMAR_STATE_MAX];
    for (int32_t id = 0; id < v->n_vocab; id++) {
        if (!isfinite(logits[id])) continue;
        size_t len;
        const char *b = engine_token_bytes(v, id, &len);
        int ok = len > 0 && v->type[id] != 3 && v->type[id] != 4;
        memcpy(c, state, g->state_size);
        for (size_t i = 0; ok && i < len; i++)
            ok = !g->done(g->data, c) && g->feed(g->data, c, (unsigned char)b[i]) == 0;
        if (!ok) logits[id] = -INFINITY;
    }
}

int mmrag_session_generate(struct mmrag_session *s, const char *prompt,
                           const struct mmrag_gen_params *p, struct mmrag_gen_result *r) {
    struct mmrag_engine *e = s->e;
    memset(r, 0, sizeof *r);
    double t0 = now_ms();
    size_t plen = strlen(prompt);
    int32_t n = mmrag_engine_tokenize(e, prompt, plen, NULL, 0, 1);
    if (n == INT32_MIN) return -1;
    n = n < 0 ? -n : n;
    int32_t max_tokens = p->max_tokens > 0 ? p->max_tokens : 256;
    int32_t *hist = malloc(((size_t)n + (size_t)max_tokens + 1) * sizeof *hist);
    float *work = malloc((size_t)e->n_vocab * sizeof *work);
    r->tokens = malloc(((size_t)max_tokens + 1) * sizeof *r->tokens);
    r->itl_ms = malloc(((size_t)max_tokens + 1) * sizeof *r->itl_ms);
    sbuf text = {0};
    int rc = 0;
    if (!hist || !work || !r->tokens || !r->itl_ms || sbuf_add(&text, "", 0)) {
        rc = MMRAG_ENGINE_NOMEM;
        snprintf(s->err, 256, "engine: out of memory");
        goto out;
    }
    mmrag_engine_tokenize(e, prompt, plen, hist, n, 1);
    if (!p->keep_context) mmrag_session_reset(s);
    r->n_prompt = n;
    if (n == 0) {
        rc = MMRAG_ENGINE_ERROR;
        snprintf(s->err, 256, "engine: empty prompt");
        goto out;
    }
    if ((int64_t)s->n_past + n + 1 > s->n_ctx) {
        rc = MMRAG_ENGINE_CONTEXT_FULL;
        snprintf(s->err, 256,
                 "engine: prompt of %d tokens does not fit the context (%d tokens, %d in use); "
                 "shorten it or raise n_ctx", n, s->n_ctx, s->n_past);
        goto out;
    }
    if ((rc = mmrag_session_eval(s, hist, n))) goto out;
    r->prompt_ms = now_ms() - t0;
    engine_json js;
    engine_json_init(&js);
    const struct mmrag_grammar *gr = p->grammar;
    unsigned char gst[MMRAG_GRAMMAR_STATE_MAX];
    if (gr && gr->state_size > sizeof gst) {
        rc = MMRAG_ENGINE_ERROR;
        snprintf(s->err, 256, "engine: grammar state of %zu bytes is over %d", gr->state_size,
                 MMRAG_GRAMMAR_STATE_MAX);
        goto out;
    }
    if (gr) gr->init(gr->data, gst);
    int constrained = p->json_mode || gr;
    uint64_t rng = p->sampling.seed ^ 0x6D6D726167ULL;
    size_t streamed = 0, stop_at = (size_t)-1;
    double last = 0;
    int32_t nh = n;
    int32_t n_stop = constrained || !p->stop ? 0 : p->n_stop; /* the grammar decides */
    r->stop_reason = MMRAG_STOP_MAX_TOKENS;
    for (int32_t step = 0; step < max_tokens; step++) {
        memcpy(work, s->logits, (size_t)e->n_vocab * sizeof *work);
        if (p->json_mode) json_mask(e, &js, work);
        else if (gr) grammar_mask(e, gr, gst, work);
        int32_t tok = mmrag_sample(work, e->n_vocab, &p->sampling, hist, nh, &rng);
        double t = now_ms();
        if (step == 0) r->ttft_ms = t - t0;
        else r->itl_ms[step - 1] = t - last;
        last = t;
        if (constrained && !isfinite(work[tok])) break; /* nothing allowed: close below */
        int type = e->vocab.type[tok];
        if (tok == e->vocab.eos || tok == e->vocab.eot || type == 3) {
            r->stop_reason = MMRAG_STOP_END_TURN;
            break;
        }
        r->tokens[r->n_gen++] = tok;
        hist[nh++] = tok;
        size_t len;
        const char *b = engine_token_bytes(&e->vocab, tok, &len);
        if (sbuf_add(&text, b, len)) { rc = MMRAG_ENGINE_NOMEM; goto out; }
        if (p->json_mode)
            for (size_t i = 0; i < len; i++) engine_json_feed(&js, (unsigned char)b[i]);
        else if (gr)
            for (size_t i = 0; i < len; i++) gr->feed(gr->data, gst, (unsigned char)b[i]);
        /* stop strings: search the region the new bytes could complete */
        for (int32_t k = 0; k < n_stop && stop_at == (size_t)-1; k++) {
            size_t L = strlen(p->stop[k]);
            if (!L) continue;
            size_t from = text.n >= len + L ? text.n - len - L + 1 : 0;
            char *hit = memmem(text.p + from, text.n - from, p->stop[k], L);
            if (hit) stop_at = (size_t)(hit - text.p);
        }
        if (stop_at != (size_t)-1) {
            text.n = stop_at;
            text.p[text.n] = 0;
            r->stop_reason = MMRAG_STOP_SEQUENCE;
            break;
        }
        if (p->on_text) {
            size_t safe = text.n - stop_holdback(text.p, text.n, p->stop, n_stop);
            safe -= utf8_tail(text.p, safe);
            if (safe > streamed) {
                if (p->on_text(p->user_data, text.p + streamed, safe - streamed)) {
                    streamed = safe;
                    r->stop_reason = MMRAG_STOP_ABORTED;
                    break;
                }
                streamed = safe;
            }
        }
        if (js.done || (gr && gr->done(gr->data, gst))) {
            r->stop_reason = MMRAG_STOP_END_TURN;
            break;
        }
        if (p->loop_guard && ends_in_loop(r->tokens, r->n_gen)) {
            r->stop_reason = MMRAG_STOP_REPETITION;
            break;
        }
        if (step + 1 == max_tokens) break;
        if (s->n_past + 1 > s->n_ctx) break; /* context full: reported as max_tokens */
        if ((rc = mmrag_session_eval(s, &tok, 1))) goto out;
    }
    /* max_tokens can cut a character in half: the result is always whole UTF-8
     * (in JSON mode engine_json_close completes the character instead) */
    if (!p->json_mode) {
        text.n -= utf8_tail(text.p, text.n);
        if (text.p) text.p[text.n] = 0;
    }
    if (p->json_mode && !js.done) {
        char close[128];
        size_t cl = engine_json_close(&js, close, sizeof close);
        if (sbuf_add(&text, close, cl)) { rc = MMRAG_ENGINE_NOMEM; goto out; }
    }
    if (p->on_text && text.n > streamed && r->stop_reason != MMRAG_STOP_ABORTED)
        p->on_text(p->user_data, text.p + streamed, text.n - streamed);
    r->decode_ms = now_ms() - t0 - r->ttft_ms;
out:
    free(hist);
    free(work);
    r->text = text.p;
    if (!r->text) r->text = calloc(1, 1);
    return rc;
}
