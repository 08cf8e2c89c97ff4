/* api/core/answer — one question -> retrieval -> evidence sentences -> quotes, or the
 * model's answer checked sentence by sentence -> a cited answer or an abstention.
 *
 * Design notes:
 * 1. The text the user reads is built only through answer_emit(): what is streamed is exactly
 *    what a->text ends up holding, from every front-end.
 * 2. Generative sentences are checked as soon as they are complete (the stream waits for
 *    the character after the end mark), so streaming still streams, one sentence at a time.
 * 3. The model's own [n] marks are dropped: citations come from the check (the evidence
 *    sentences that cover the sentence), so a mark can never point at evidence that does
 *    not say what the sentence says.
 * 4. Abstention needs no model: when the best evidence sentence scores under
 *    ANSWER_ABSTAIN_SCORE the documents are taken not to answer, whatever the mode. */
#include "api/core/answer_internal.h"
#include "engine/engine.h"
#include "vision/textenc.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QUOTES_MAX 3        /* sentences in an extractive answer */
#define QUOTES_WINDOW 0.15f /* quotes after the first score within this of it */
#define NEAREST_MAX 2       /* quotes shown with an abstention */

static const char *const mode_names[] = {"auto", "extractive", "generative"};

const char *answer_mode_name(int32_t m) { return m >= 0 && m < 3 ? mode_names[m] : "?"; }

int answer_mode_parse(const char *s, int32_t *mode) {
    for (int32_t i = 0; s && i < 3; i++)
        if (!strcmp(s, mode_names[i])) { *mode = i; return 0; }
    return -1;
}

void answer_request_default(answer_request *rq) {
    memset(rq, 0, sizeof *rq);
    rq->mode = ANSWER_AUTO;
    rq->k = 6;
    rq->max_tokens = 200;
    rq->top_p = 0.95f;
    rq->repeat_penalty = 1.15f;
    retr_opts_default(&rq->retrieval);
}

static int utf8_valid(const unsigned char *s) {
    while (*s) {
        int n = *s < 0x80 ? 0 : (*s & 0xe0) == 0xc0 ? 1 : (*s & 0xf0) == 0xe0 ? 2
                : (*s & 0xf8) == 0xf0 ? 3 : -1;
        if (n < 0 || (n == 1 && *s < 0xc2)) return 0;
        s++;
        for (int i = 0; i < n; i++, s++)
            if ((*s & 0xc0) != 0x80) return 0;
    }
    return 1;
}

int answer_request_check(const answer_request *rq, char *err, size_t errlen) {
    const char *q = rq ? rq->question : NULL;
    if (!q || !q[strspn(q, " \t\r\n")]) {
        snprintf(err, errlen, "empty question");
        return ANSWER_ERR_ARG;
    }
    size_t n = strlen(q);
    if (n > ANSWER_MAX_QUESTION) {
        snprintf(err, errlen, "question too long (%zu bytes; at most %d)", n, ANSWER_MAX_QUESTION);
        return ANSWER_ERR_ARG;
    }
    if (!utf8_valid((const unsigned char *)q)) {
        snprintf(err, errlen, "the question is not valid UTF-8");
        return ANSWER_ERR_ARG;
    }
    if (rq->mode < ANSWER_AUTO || rq->mode > ANSWER_GENERATIVE) {
        snprintf(err, errlen, "unknown mode (auto, extractive or generative)");
        return ANSWER_ERR_ARG;
    }
    if (rq->k < 1 || rq->k > 100 || rq->max_tokens < 1 || rq->max_tokens > 8192) {
        snprintf(err, errlen, "k must be 1..100 and max_tokens 1..8192");
        return ANSWER_ERR_ARG;
    }
    return ANSWER_OK;
}

void answer_result_free(answer_result *a) {
    if (!a) return;
    free(a->text);
    retr_result_free(&a->hits);
    for (int32_t i = 0; i < a->n_ev; i++) {
        free(a->ev[i].text);
        free(a->ev[i].next);
        free(a->ev[i].prev);
    }
    free(a->ev);
    free(a->cites);
    for (int32_t i = 0; i < a->n_sents; i++) free(a->sents[i].text);
    free(a->sents);
    memset(a, 0, sizeof *a);
}

const char *answer_stop_name(const answer_result *a) {
    if (a->mode_used != ANSWER_GENERATIVE) return "extractive";
    return a->stop_check ? a->stop_check : mmrag_stop_reason_str(a->stop_reason);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* ---- the text the user reads ------------------------------------------------------------ */
void answer_emit(answer_reader *w, const char *s) {
    size_t n = strlen(s);
    if (w->len + n + 1 > w->cap) {
        size_t nc = w->cap ? w->cap : 256;
        while (nc < w->len + n + 1) nc *= 2;
        char *nb = realloc(w->a->text, nc);
        if (!nb) { w->failed = 1; return; }
        w->a->text = nb;
        w->cap = nc;
    }
    memcpy(w->a->text + w->len, s, n + 1);
    w->len += n;
    if (w->rq->on_text && !w->stopped && w->rq->on_text(w->rq->user, s, n)) w->stopped = 1;
}

/* Citation number of evidence sentence ev (assigned in order of first use). */
int32_t answer_cite(answer_result *a, int32_t ev) {
    for (int32_t i = 0; i < a->n_cites; i++)
        if (a->cites[i] == ev) return i + 1;
    int32_t *nc = realloc(a->cites, (size_t)(a->n_cites + 1) * sizeof *nc);
    if (!nc) return 0;
    a->cites = nc;
    a->cites[a->n_cites++] = ev;
    return a->n_cites;
}

/* "sentence [n]" with the marks before a final . ! or ? */
void answer_emit_cited(answer_reader *w, const char *s, const int32_t *nums, int32_t n, const char *sep) {
    size_t l = strlen(s);
    char *buf = malloc(l + 64);
    if (!buf) { w->failed = 1; return; }
    size_t body = l > 0 && strchr(".!?", s[l - 1]) ? l - 1 : l;
    int k = snprintf(buf, l + 64, "%.*s", (int)body, s);
    for (int32_t i = 0; i < n; i++)
        if (nums[i] > 0) k += snprintf(buf + k, l + 64 - (size_t)k, " [%d]", nums[i]);
    snprintf(buf + k, l + 64 - (size_t)k, "%s%s", s + body, sep);
    answer_emit(w, buf);
    free(buf);
}

/* Is s (a whole sentence) in one of the n quotes already shown? */
static int in_shown(const char *s, const char *const *shown, int32_t n) {
    for (int32_t k = 0; s && *s && k < n; k++)
        if (strstr(shown[k], s)) return 1;
    return 0;
}

/* A quoted sentence becomes itself and the sentence after it: manuals state a thing and
 * give its value or command in the next sentence ("The doubleclick resolution is given in
 * milliseconds." / "The default is 300 ms."); and the sentence before it when it refers
 * back to it ("The IP address 127.0.1.1 ..." / "The Debian Installer creates this entry
 * ..."). The quote stays verbatim and contiguous; its citation covers all the boxes. A
 * part at either end that a quote already shown holds is left out (overlapping chunks and
 * the sentences quoted along bring the same words back: "The loader for a lazy-load
 * database ..." twice). Returns 0 when the quote would add nothing, 1 when e->text is the
 * quote, -1 out of memory. */
static int quote_with_context(answer_evidence *e, const char *const *shown, int32_t n) {
    const char *part[3] = {e->prev, e->text, e->next};
    const store_box *box[3] = {&e->prev_box, &e->box, &e->next_box};
    int s = 0, t = 2;
    while (s <= t && (!part[s] || !*part[s] || in_shown(part[s], shown, n))) s++;
    while (t >= s && (!part[t] || !*part[t] || in_shown(part[t], shown, n))) t--;
    if (s > t) return 0;
    size_t len = 1;
    for (int k = s; k <= t; k++) len += part[k] ? strlen(part[k]) + 1 : 0;
    char *q = malloc(len);
    if (!q) return -1;
    store_box b = *box[s];
    q[0] = 0;
    for (int k = s; k <= t; k++) {
        if (!part[k] || !*part[k]) continue;
        if (*q) strcat(q, " ");
        strcat(q, part[k]);
        answer_box_union(&b, box[k]);
    }
    free(e->text);
    free(e->prev);
    free(e->next);
    e->text = q;
    e->box = b;
    e->prev = e->next = NULL;
    return 1;
}

/* The best sentences verbatim, each with its citation, none repeating another. */
static void emit_quotes(answer_reader *w, int32_t max) {
    answer_result *a = w->a;
    const char *shown[QUOTES_MAX > NEAREST_MAX ? QUOTES_MAX : NEAREST_MAX];
    int32_t n_shown = 0;
    for (int32_t i = 0; i < a->n_ev && n_shown < max && n_shown < (int32_t)(sizeof shown / sizeof *shown); i++) {
        if (i > 0 && a->ev[i].score < a->ev[0].score - QUOTES_WINDOW) break;
        if (max == 1 && in_shown(a->ev[i].text, shown, n_shown)) continue;
        int rc = max > 1 ? quote_with_context(&a->ev[i], shown, n_shown) : 1;
        if (rc < 0) { w->failed = 1; return; }
        if (rc == 0) continue;
        char *q = malloc(strlen(a->ev[i].text) + 8);
        if (!q) { w->failed = 1; return; }
        sprintf(q, "\u201c%s\u201d", a->ev[i].text);
        if (n_shown) answer_emit(w, "\n");
        int32_t n = answer_cite(a, i);
        answer_emit_cited(w, q, &n, 1, "");
        free(q);
        shown[n_shown++] = a->ev[i].text;
    }
}

static void abstain(answer_reader *w, const char *why) {
    answer_result *a = w->a;
    a->abstained = 1;
    a->abstain_reason = why;
    a->mode_used = ANSWER_EXTRACTIVE;
    answer_emit(w, a->n_ev ? "The documents do not answer this question. Nearest passages:\n"
                    : "The documents do not answer this question.");
    emit_quotes(w, NEAREST_MAX);
}

/* ---- terms the documents never use ---------------------------------------------------------- */
#define RARE_CHUNKS 3   /* a name in at most this many chunks of the collection... */

/* A plain word the text encoder knows whole (one WordPiece) is common English: "night" or
 * "got" missing from a manual says nothing about the question, "firewalld" does. */
static int common_word(void *te, const char *w) {
    int32_t n = te ? textenc_tokenize(te, w, NULL, 0) : 0;   /* -count when max is 0 */
    return te && (n < 0 ? -n : n) <= 3;                         /* [CLS] word [SEP] */
}

/* Chunks that BM25 finds holding w, counted up to RARE_CHUNKS + 1 (a failed search: as many). */
static int32_t chunks_with(retriever *r, const answer_request *rq, const char *w) {
    retr_opts o = rq->retrieval;
    o.sources = RETR_USE_BM25;
    o.k = o.depth = RARE_CHUNKS + 1;
    retr_result res = {0};
    char err[256];
    if (retr_search(r, w, &o, &res, err, sizeof err)) return RARE_CHUNKS + 1;
    int32_t n = res.n;
    retr_result_free(&res);
    return n;
}

/* ...or an uncommon word in none, and in none of the retrieved chunks: the documents are
 * not about it ("How do I set up firewalld?" over a manual that never says "firewalld";
 * "Can gnuplot read Excel files?" over one that names Excel once, elsewhere). Names are
 * capitalized words and identifiers (ground.h's exact tokens); words with joiners
 * (/etc/hosts, double-click) are left to the evidence check, the index splits them. A word
 * the documents use in another spelling ("customisation", "quickest") is not absent.
 * Writes the word and returns 1. */
static int absent_term(retriever *r, void *te, const answer_request *rq,
                       const answer_result *a, char *word, size_t wl) {
    int32_t n = 0;
    uint8_t *exact = NULL;
    char *words = ground_words_raw(rq->question, &n, &exact);
    uint8_t *seen = calloc((size_t)(n > 0 ? n : 1), 1);   /* in a retrieved chunk */
    for (int32_t j = 0; words && seen && j < a->hits.n; j++)
        ground_words_in(words, n, a->hits.hits[j].text, seen);
    int found = 0;
    const char *w = words;
    for (int32_t i = 0; words && seen && i < n && !found; i++, w += strlen(w) + 1) {
        if (seen[i] || w[strcspn(w, "_/.-:@~$+#")]) continue;
        int name = exact && exact[i];
        if (!name && (!te || common_word(te, w))) continue;
        int32_t most = name ? RARE_CHUNKS : 0;
        if (chunks_with(r, rq, w) > most) continue;
        char var[8][GROUND_VARIANT_LEN];   /* "customisation": the manual says "customization" */
        int32_t nv = ground_spelling_variants(w, var, 8), used = 0;
        for (int32_t v = 0; v < nv && !used; v++) used = chunks_with(r, rq, var[v]) > most;
        if (!used) {
            snprintf(word, wl, "%s", w);
            found = 1;
        }
    }
    free(words);
    free(exact);
    free(seen);
    return found;
}

/* ---- the flow ----------------------------------------------------------------------------- */
static int status_err(answer_reader *w, int rc, char *err, size_t errlen) {
    if (w->failed) { snprintf(err, errlen, "out of memory"); return ANSWER_ERR_NOMEM; }
    if (w->stopped) { snprintf(err, errlen, "stopped by the caller"); return ANSWER_ABORTED; }
    return rc;
}

/* Do the model's shown sentences leave out every value of the best evidence? "The board
 * also approved a dividend ... paid in November" passes the check against "The board
 * approved a dividend of 0.35 euros per share, payable in November." and cites it, yet the
 * 0.35 the question asks for is gone. */
static int drops_values(const answer_result *a) {
    const char **shown = malloc((size_t)(a->n_sents > 0 ? a->n_sents : 1) * sizeof *shown);
    int32_t n = 0;
    for (int32_t i = 0; shown && i < a->n_sents; i++)
        if (a->sents[i].shown && a->sents[i].check.supported) shown[n++] = a->sents[i].text;
    int drops = shown && a->n_ev && ground_keeps_values(a->ev[0].text, shown, n) == 0;
    free(shown);
    return drops;
}

static int respond(answer_reader *w, retriever *r, void *te, answer_llm *llm, char *err, size_t errlen) {
    answer_result *a = w->a;
    const answer_request *rq = w->rq;
    if (rq->json_mode) {   /* data for a program: no quotes, no abstention text */
        if (!llm) { snprintf(err, errlen, "JSON answers need the language model"); return ANSWER_ERR_MODEL; }
        a->mode_used = ANSWER_GENERATIVE;
        return answer_generate(w, llm, err, errlen);
    }
    char absent[96];
    if (a->n_ev && absent_term(r, te, rq, a, absent, sizeof absent)) {
        snprintf(a->abstain_note, sizeof a->abstain_note,
                 "the documents barely mention \u201c%s\u201d, and not in any passage found", absent);
        abstain(w, a->abstain_note);
        return status_err(w, ANSWER_OK, err, errlen);
    }
    if (!a->n_ev || a->ev[0].score < ANSWER_ABSTAIN_SCORE) {
        abstain(w, a->n_ev ? "no evidence sentence is close enough to the question"
                           : "nothing in the collection matches the question");
        return status_err(w, ANSWER_OK, err, errlen);
    }
    if (rq->mode == ANSWER_EXTRACTIVE) {
        a->mode_used = ANSWER_EXTRACTIVE;
        emit_quotes(w, QUOTES_MAX);
        return status_err(w, ANSWER_OK, err, errlen);
    }
    if (!llm) { snprintf(err, errlen, "no language model configured"); return ANSWER_ERR_MODEL; }
    a->mode_used = ANSWER_GENERATIVE;
    int rc = answer_generate(w, llm, err, errlen);
    if (rc != ANSWER_OK) return rc;
    int shown = 0, top_cited = 0, held = 0;
    for (int32_t i = 0; i < a->n_sents; i++) {
        const answer_sentence *s = &a->sents[i];
        if (!s->shown || !s->check.supported) continue;
        shown = 1;
        held |= answer_held_types(s->text);
        for (int32_t k = 0; k < s->check.n_cite; k++) top_cited |= s->check.cite[k] == 0;
    }
    int want = answer_wanted_type(rq->question);
    if (shown && want && !(held & want) && rq->mode == ANSWER_AUTO) {
        /* asked for a number, a file or an option, the model gave none: the quotes answer */
        answer_emit(w, "\n");
        emit_quotes(w, QUOTES_MAX);
    } else if (shown && (!top_cited || drops_values(a)) && rq->mode == ANSWER_AUTO) {
        /* the model's supported sentences skip the best evidence, or cite it without its
         * value: quote it beside them */
        answer_emit(w, "\n");
        emit_quotes(w, 1);
    }
    if (shown) return status_err(w, ANSWER_OK, err, errlen);
    if (rq->mode == ANSWER_AUTO) {   /* nothing survived the check: the quotes */
        a->mode_used = ANSWER_EXTRACTIVE;
        if (w->len) answer_emit(w, "\n");
        emit_quotes(w, QUOTES_MAX);
    } else {
        if (w->len) answer_emit(w, "\n");
        abstain(w, "no sentence of the model's answer is supported by the evidence");
        a->mode_used = ANSWER_GENERATIVE;
    }
    return status_err(w, ANSWER_OK, err, errlen);
}

int answer_run(retriever *r, void *te, answer_llm *llm, const answer_request *rq,
               answer_result *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    int rc = answer_request_check(rq, err, errlen);
    if (rc) return rc;
    double t0 = now_ms();
    retr_opts o = rq->retrieval;
    o.k = rq->k;
    if (retr_search(r, rq->question, &o, &out->hits, err, errlen)) return ANSWER_ERR_RETRIEVAL;
    if (answer_evidence_collect(r, te, rq->question, out, err, errlen)) {
        answer_result_free(out);
        return ANSWER_ERR_NOMEM;
    }
    out->retrieval_ms = now_ms() - t0;
    answer_reader w = {.a = out, .rq = rq};
    rc = respond(&w, r, te, llm, err, errlen);
    if (!out->text && rc == ANSWER_OK) answer_emit(&w, "");
    out->total_ms = now_ms() - t0;
    if (rc != ANSWER_OK) answer_result_free(out);
    return rc;
}
