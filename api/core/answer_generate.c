/* api/core/answer_generate — the generative path: the best evidence sentences in a prompt
 * budgeted in tokens, the model's answer checked sentence by sentence as it streams.
 *
 * Design notes:
 * 1. Budget: context - max_tokens - (system + question + history + template) tokens; the
 *    evidence goes in score order and stops at the first sentence that does not fit.
 * 2. The check sees the evidence the model saw, plus the documents' titles for exact
 *    tokens only (the prompt names them); citations are always evidence sentences. */
#include "api/core/answer_internal.h"
#include "engine/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROMPT_EV_MAX 8
#define TEMPLATE_TOKENS 48

static const char system_text[] =
    "You answer questions about documents using only the numbered evidence. Answer in one or "
    "two short sentences. Copy names, commands, options and numbers exactly as the evidence "
    "writes them. If the evidence does not answer the question, say that the documents do "
    "not say.";

static int32_t n_tokens(struct mmrag_engine *e, const char *s) {
    int32_t n = mmrag_engine_tokenize(e, s, strlen(s), NULL, 0, 0);
    return n < 0 ? -n : n;
}

/* "Evidence:\n[1] (title, page p) sentence\n...\nQuestion: q": the user turn. */
static char *user_turn(struct mmrag_engine *e, answer_result *a, const answer_request *rq,
                       int32_t budget) {
    size_t cap = 4096 + strlen(rq->question) + (rq->history ? strlen(rq->history) : 0), len = 0;
    char *u = malloc(cap), line[2300];
    if (!u) return NULL;
    len += (size_t)snprintf(u, cap, "Evidence:\n");
    a->n_prompt_ev = 0;
    for (int32_t i = 0; i < a->n_ev && i < PROMPT_EV_MAX; i++) {
        const retr_hit *h = &a->hits.hits[a->ev[i].hit];
        int n = snprintf(line, sizeof line, "[%d] (%.200s, page %d) %.2000s\n", i + 1,
                         h->title ? h->title : "untitled", h->page, a->ev[i].text);
        int32_t t = n_tokens(e, line);
        if (t > budget || len + (size_t)n + 1 > cap - 2200) break;
        budget -= t;
        memcpy(u + len, line, (size_t)n + 1);
        len += (size_t)n;
        a->n_prompt_ev++;
    }
    if (!a->n_prompt_ev) len += (size_t)snprintf(u + len, cap - len, "(none)\n");
    if (rq->history && *rq->history)
        len += (size_t)snprintf(u + len, cap - len, "\nConversation so far:\n%s\n", rq->history);
    snprintf(u + len, cap - len, "\nQuestion: %s", rq->question);
    return u;
}

static char *build_prompt(struct mmrag_engine *e, answer_result *a, const answer_request *rq,
                          int32_t n_ctx, char *err, size_t errlen) {
    char sys[sizeof system_text + 2100];
    snprintf(sys, sizeof sys, "%s%s%.2000s", system_text, rq->system ? " " : "",
             rq->system ? rq->system : "");
    int32_t fixed = n_tokens(e, sys) + n_tokens(e, rq->question) + TEMPLATE_TOKENS +
                    (rq->history ? n_tokens(e, rq->history) : 0);
    int32_t budget = n_ctx - rq->max_tokens - fixed;
    if (budget < 0) {
        snprintf(err, errlen, "the question and history (%d tokens) and max_tokens %d leave no "
                 "room in a context of %d tokens", fixed, rq->max_tokens, n_ctx);
        return NULL;
    }
    char *user = user_turn(e, a, rq, budget);
    if (!user) { snprintf(err, errlen, "out of memory"); return NULL; }
    int32_t need = mmrag_engine_chat_prompt(e, sys, user, NULL, 0);
    need = need < 0 ? -need : need;
    char *p = malloc((size_t)need + 1);
    if (p) mmrag_engine_chat_prompt(e, sys, user, p, (size_t)need + 1);
    else snprintf(err, errlen, "out of memory");
    free(user);
    return p;
}

/* ---- the checked stream --------------------------------------------------------------------- */
typedef struct {
    answer_reader *w;
    int32_t kept, rejected_in_row;
    const char *enough;        /* set: stop generating (answer_result.stop_check) */
    const char **evidence;     /* n_prompt_ev sentences, then the titles */
    int32_t n_evidence;
    char *buf;
    size_t len, cap;
} checked_stream;

static void record(answer_result *a, answer_sentence s, int *failed) {
    answer_sentence *ns = realloc(a->sents, (size_t)(a->n_sents + 1) * sizeof *ns);
    if (!ns) { free(s.text); *failed = 1; return; }
    a->sents = ns;
    a->sents[a->n_sents++] = s;
}

/* Checks one finished sentence and shows it when supported (or marked, on request). */
static void sentence_done(checked_stream *c, const char *p, size_t n) {
    answer_reader *w = c->w;
    answer_result *a = w->a;
    answer_sentence s = {0};
    if (!(s.text = strndup(p, n))) { w->failed = 1; return; }
    ground_strip_marks(s.text);
    char *t = s.text + strspn(s.text, " \t\r\n");
    memmove(s.text, t, strlen(t) + 1);
    size_t l = strlen(s.text);
    while (l && strchr(" \t\r\n", s.text[l - 1])) s.text[--l] = 0;
    if (!l) { free(s.text); return; }
    if (ground_check_sentence(s.text, c->evidence, c->n_evidence, &s.check)) {
        free(s.text);
        w->failed = 1;
        return;
    }
    int32_t nc = 0;
    for (int32_t i = 0; i < s.check.n_cite; i++)   /* titles support names, never cite */
        if (s.check.cite[i] < a->n_prompt_ev) s.check.cite[nc++] = s.check.cite[i];
    s.check.n_cite = nc;
    if (!nc && s.check.supported) { s.check.supported = 0; s.check.why = "low coverage"; }
    float best = 0;   /* backed only by sentences that are off the question: not an answer */
    for (int32_t i = 0; i < nc; i++) best = a->ev[s.check.cite[i]].score > best ? a->ev[s.check.cite[i]].score : best;
    if (s.check.supported && best < ANSWER_ABSTAIN_SCORE) { s.check.supported = 0; s.check.why = "off-topic evidence"; }
    c->rejected_in_row = s.check.supported ? 0 : c->rejected_in_row + 1;
    c->kept += s.check.supported;
    if (c->kept >= ANSWER_MAX_SENTENCES) c->enough = "enough";
    else if (c->rejected_in_row >= ANSWER_MAX_REJECTED) c->enough = "unsupported";
    if (s.check.supported) {
        for (int32_t i = 0; i < nc; i++) s.cite_n[i] = answer_cite(a, s.check.cite[i]);
        s.shown = 1;
        answer_emit_cited(w, s.text, s.cite_n, nc, " ");
    } else if (w->rq->show_unsupported) {
        s.shown = 1;
        size_t m = strlen(s.text) + 48;
        char *marked = malloc(m);
        if (marked) {
            snprintf(marked, m, "[unsupported: %s] ", s.text);
            answer_emit(w, marked);
            free(marked);
        }
    }
    record(a, s, &w->failed);
}

static void drain(checked_stream *c, int final) {
    size_t end;
    while (c->len && !c->enough && (end = ground_sentence_end(c->buf, c->len, final)) > 0) {
        sentence_done(c, c->buf, end);
        memmove(c->buf, c->buf + end, c->len - end + 1);
        c->len -= end;
    }
}

static int on_piece(void *user, const char *piece, size_t n) {
    checked_stream *c = user;
    if (c->len + n + 1 > c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 512;
        while (nc < c->len + n + 1) nc *= 2;
        char *nb = realloc(c->buf, nc);
        if (!nb) { c->w->failed = 1; return 1; }
        c->buf = nb;
        c->cap = nc;
    }
    memcpy(c->buf + c->len, piece, n);
    c->len += n;
    c->buf[c->len] = 0;
    if (!c->w->rq->json_mode) drain(c, 0);
    return c->w->stopped || c->w->failed || c->enough;
}

/* The evidence the check reads: the prompt's sentences, then each hit's title. */
static const char **check_evidence(answer_result *a, int32_t *n) {
    const char **ev = malloc((size_t)(a->n_prompt_ev + a->hits.n + 1) * sizeof *ev);
    if (!ev) return NULL;
    *n = 0;
    for (int32_t i = 0; i < a->n_prompt_ev; i++) ev[(*n)++] = a->ev[i].text;
    for (int32_t i = 0; i < a->hits.n; i++)
        if (a->hits.hits[i].title) ev[(*n)++] = a->hits.hits[i].title;
    return ev;
}

/* JSON mode: the object is data for a program; it is passed through and the evidence the
 * model saw is cited as a whole. */
static void emit_json(checked_stream *c) {
    answer_emit(c->w, c->buf ? c->buf : "{}");
    for (int32_t i = 0; i < c->w->a->n_prompt_ev; i++) answer_cite(c->w->a, i);
}

int answer_generate(answer_reader *w, answer_llm *llm, char *err, size_t errlen) {
    answer_result *a = w->a;
    const answer_request *rq = w->rq;
    struct mmrag_engine *e = NULL;
    struct mmrag_session *ss = NULL;
    int rc = answer_llm_session(llm, rq, &e, &ss, err, errlen);
    if (rc != ANSWER_OK) return rc;
    checked_stream c = {.w = w};
    struct mmrag_gen_result gr = {0};
    char *prompt = build_prompt(e, a, rq, answer_llm_ctx(llm), err, errlen);
    if (!prompt) { rc = ANSWER_ERR_CONTEXT; goto out; }
    if (!(c.evidence = check_evidence(a, &c.n_evidence))) { rc = ANSWER_ERR_NOMEM; goto out; }
    struct mmrag_gen_params g = mmrag_gen_default_params();
    g.max_tokens = rq->max_tokens;
    g.sampling.temperature = rq->temperature;
    g.sampling.top_p = rq->temperature > 0 ? rq->top_p : 1.0f;
    g.sampling.repeat_penalty = rq->repeat_penalty;
    g.sampling.seed = rq->seed;
    g.json_mode = rq->json_mode;
    g.stop = mmrag_engine_chat_stops(e, &g.n_stop);   /* a base model's plain prompt */
    g.on_text = on_piece;
    g.user_data = &c;
    int grc = mmrag_session_generate(ss, prompt, &g, &gr);
    if (grc < 0) { rc = answer_llm_gen_failed(ss, grc, err, errlen); goto out; }
    if (rq->json_mode) emit_json(&c);
    else drain(&c, 1);
    a->stop_reason = gr.stop_reason;
    a->stop_check = c.enough;
    a->prompt_tokens = gr.n_prompt;
    a->completion_tokens = gr.n_gen;
    a->ttft_ms = gr.ttft_ms;
    if (w->failed) { rc = ANSWER_ERR_NOMEM; snprintf(err, errlen, "out of memory"); }
    else if (w->stopped) { rc = ANSWER_ABORTED; snprintf(err, errlen, "stopped by the caller"); }
out:
    answer_llm_release(llm, ss);
    mmrag_gen_result_free(&gr);
    free(prompt);
    free(c.evidence);
    free(c.buf);
    return rc;
}
