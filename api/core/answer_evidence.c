/* api/core/answer_evidence — retrieved chunks -> evidence sentences with their own boxes,
 * scored against the question.
 *
 * Design notes:
 * 1. A sentence's box is the union of the line boxes its bytes fall on (ingest keeps line
 *    boxes per chunk). A chunk stored before line boxes existed has none: its sentences
 *    carry the chunk's box and box_is_line = 0, and the JSON says "box_source": "chunk"
 *    until the document is indexed again.
 * 2. Overlapping chunks repeat sentences: a repeat is dropped (the higher-ranked hit keeps
 *    it).
 * 3. score = 0.7 * cosine(question, sentence) + 0.2 * share of the question's content
 *    words in the sentence + 0.1 * the same over the sentence and its neighbours (a
 *    definition often names the term one sentence earlier), - 0.1 for a heading-like
 *    sentence of under 4 words or a cross-reference ("See Section 7.31 [...], page 37"),
 *    + 0.05 when it holds the kind of token the question asks for (a number, a path, an
 *    identifier), - 0.01 per place of its chunk in the retrieval ranking (fusion weighs
 *    BM25, the chunk's vectors and its section, which one sentence's cosine cannot).
 *    Without a text encoder the cosine term is 0 and the lexical terms decide (0.7 / 0.3).
 *    Weights set on the development questions (and the rank step on the Debian answer set).
 *    The cosine reads a sentence past its admonition label ("Tip", "Note", "Caution").
 * 4. A sentence's next (quoted along with it) is the following sentence of its chunk; for
 *    a heading, the first sentences of the paragraph under it (heading_body). */
#include "api/core/answer_internal.h"
#include "vision/textenc.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define EV_MAX_PER_HIT 64
#define EV_JOIN_MAX 400     /* bytes: joining stops past this */
#define EV_SHORT_WORDS 4    /* headings and labels: informative only with more words */
#define EV_NEXT_WORDS 40    /* a following sentence longer than this is not quoted along */
#define EV_TYPE_BONUS 0.05f /* the sentence holds the kind of token the question asks for */
#define EV_RANK_STEP 0.01f  /* per place of its chunk in the retrieval ranking */

typedef struct {
    answer_evidence *ev;
    int32_t n, cap;
} ev_list;

static int ev_push(ev_list *l, answer_evidence e) {
    if (l->n == l->cap) {
        int32_t nc = l->cap ? l->cap * 2 : 64;
        answer_evidence *ne = realloc(l->ev, (size_t)nc * sizeof *ne);
        if (!ne) return -1;
        l->ev = ne;
        l->cap = nc;
    }
    l->ev[l->n++] = e;
    return 0;
}

static int ev_seen(const ev_list *l, const char *t, size_t n) {
    for (int32_t i = 0; i < l->n; i++)
        if (strlen(l->ev[i].text) == n && !memcmp(l->ev[i].text, t, n)) return 1;
    return 0;
}

void answer_box_union(store_box *b, const store_box *o) {
    if (o->x0 < b->x0) b->x0 = o->x0;
    if (o->y0 < b->y0) b->y0 = o->y0;
    if (o->x1 > b->x1) b->x1 = o->x1;
    if (o->y1 > b->y1) b->y1 = o->y1;
}

/* Union of the boxes of the lines that overlap [off, off+len); 0 when none does. */
static int span_box(const store_line *lines, int32_t nl, uint32_t off, uint32_t len,
                    store_box *out) {
    int any = 0;
    for (int32_t i = 0; i < nl; i++) {
        const store_line *L = &lines[i];
        if (L->off >= off + len || L->off + L->len <= off) continue;
        if (!any) *out = L->box;
        else answer_box_union(out, &L->box);
        any = 1;
    }
    return any;
}

/* Lexical score of sentence j of a hit: the question's words in it, and in it with its
 * neighbours. */
static void lexical(const char *qw, int32_t nq, const char *text, const ground_span *s,
                    int32_t ns, int32_t j, float *self, float *ctx) {
    char buf[2048];
    snprintf(buf, sizeof buf, "%.*s", (int)s[j].len, text + s[j].off);
    *self = ground_coverage(qw, nq, buf);
    uint32_t b = s[j > 0 ? j - 1 : j].off, e = s[j + 1 < ns ? j + 1 : j].off + s[j + 1 < ns ? j + 1 : j].len;
    snprintf(buf, sizeof buf, "%.*s", (int)(e - b), text + b);
    *ctx = ground_coverage(qw, nq, buf);
}

/* Words in a span (runs of non-space). */
static int32_t n_words(const char *t, ground_span s) {
    int32_t n = 0;
    for (uint32_t i = 0; i < s.len; i++)
        n += t[s.off + i] != ' ' && (i == 0 || t[s.off + i - 1] == ' ');
    return n;
}

/* "... we need to reset it as follows." / "... by using col(1) as the following.": a
 * sentence that announces what comes next, as a colon does. */
static int introduces(const char *t, ground_span s) {
    static const char *const ends[] = {"as follows.", "the following.", "as below."};
    for (size_t k = 0; k < sizeof ends / sizeof ends[0]; k++) {
        size_t n = strlen(ends[k]);
        if (s.len >= n && !strncasecmp(t + s.off + s.len - n, ends[k], n)) return 1;
    }
    return 0;
}

/* Manuals introduce an example and give it on the next line ("To scale the y axis:" /
 * "set logscale y"): a sentence ending in ':' or "as follows." or followed by a short
 * line with no final period (a command, a value) is joined with that line, so a quote
 * carries the example. */
static int32_t join_examples(const char *t, ground_span *s, int32_t n) {
    int32_t o = 0;
    for (int32_t i = 0; i < n; i++) {
        ground_span cur = s[i];
        while (i + 1 < n && cur.len < EV_JOIN_MAX) {
            ground_span nx = s[i + 1];
            char last = t[cur.off + cur.len - 1], nlast = t[nx.off + nx.len - 1];
            if (last != ':' && !introduces(t, cur) &&
                !(n_words(t, nx) <= 8 && nlast != '.' && nlast != ':' && n_words(t, cur) > 3))
                break;
            cur.len = nx.off + nx.len - cur.off;
            i++;
        }
        s[o++] = cur;
    }
    return o;
}

/* Newlines -> spaces: a quote is one line. */
static void one_line(char *t) {
    for (; *t; t++)
        if (*t == '\n') *t = ' ';
}

/* The bytes [off, off+len) of text as one line, for quoting along with a sentence; *box
 * (the chunk's box on entry) becomes its lines' box when lines are given (nl > 0).
 * NULL out of memory. */
static char *span_quote(const char *text, uint32_t off, uint32_t len, const store_line *lines,
                        int32_t nl, store_box *box) {
    char *q = strndup(text + off, len);
    if (!q) return NULL;
    one_line(q);
    if (nl > 0) span_box(lines, nl, off, len, box);
    return q;
}

/* A heading's answer is the text under it: FAQs and manuals title a section with the
 * question ("7.31 Why doesn't R think these numbers are equal?") and answer it in the
 * paragraph below, a chunk of its own. The chunk after heading hit h, when it is text of
 * the same section path on the same page (a quote cites one page), gives its first
 * sentences up to EV_NEXT_WORDS words as the heading's next, with their lines' box.
 * Returns 0, or -1 out of memory (no next is not an error). */
static int heading_body(store *st, const retr_hit *h, answer_evidence *e) {
    store_chunk_row hd = {0}, b = {0};
    int rc = 0;
    ground_span s[EV_MAX_PER_HIT];
    int32_t ns = 0, take = 0, words = 0;
    if (store_chunk_get(st, h->chunk_id, &hd) == STORE_OK &&
        store_chunk_get(st, h->chunk_id + 1, &b) == STORE_OK && b.doc == h->doc &&
        b.page == h->page && b.kind == STORE_KIND_TEXT && b.text && hd.section &&
        *hd.section && b.section && !strcmp(hd.section, b.section))   /* its own section */
        ns = ground_split(b.text, s, EV_MAX_PER_HIT);
    while (take < ns && words + n_words(b.text, s[take]) <= EV_NEXT_WORDS)
        words += n_words(b.text, s[take++]);
    if (take > 0) {
        store_line *lines = NULL;
        int32_t nl = 0;
        if (store_chunk_lines(st, b.id, &lines, &nl) != STORE_OK) nl = 0;
        e->next_box = b.box;
        e->next = span_quote(b.text, s[0].off, s[take - 1].off + s[take - 1].len - s[0].off,
                             lines, nl, &e->next_box);
        if (!e->next) rc = -1;
        free(lines);
    }
    store_chunk_row_clear(&hd);
    store_chunk_row_clear(&b);
    return rc;
}

/* Does a sentence refer back to the one before it? It opens with a pronoun or a
 * demonstrative ("This is ...", "It ...") or names "this"/"these" thing within its first
 * words ("The Debian Installer creates this entry ..."). */
static int refers_back(const char *t, size_t len) {
    static const char *const first[] = {"This ", "These ", "That ", "Those ", "It ", "They ", "Such "};
    for (size_t k = 0; k < sizeof first / sizeof first[0]; k++)
        if (!strncmp(t, first[k], strlen(first[k]))) return 1;
    int words = 0;
    for (size_t i = 0; i + 6 < len && words < 6; i++) {
        if (t[i] != ' ') continue;
        words++;
        if (!strncmp(t + i, " this ", 6) || !strncmp(t + i, " these ", 7)) return 1;
    }
    return 0;
}

static int add_hit(store *st, const retr_hit *h, int32_t hi, const char *qw, int32_t nq,
                   ev_list *l, float *lex) {
    if (!h->chunk_id || !h->text || !*h->text) return 0;
    store_line *lines = NULL;
    int32_t nl = 0;
    if (store_chunk_lines(st, h->chunk_id, &lines, &nl) != STORE_OK) nl = 0;
    ground_span s[EV_MAX_PER_HIT];
    int32_t ns = join_examples(h->text, s, ground_split(h->text, s, EV_MAX_PER_HIT));
    int rc = 0;
    for (int32_t j = 0; j < ns && !rc; j++) {
        const char *t = h->text + s[j].off;
        if (ev_seen(l, t, s[j].len)) continue;
        answer_evidence e = {.hit = hi, .box = h->box};
        e.box_is_line = nl > 0 && span_box(lines, nl, s[j].off, s[j].len, &e.box);
        if (!(e.text = strndup(t, s[j].len))) { rc = -1; break; }
        one_line(e.text);   /* one line per sentence: joined examples too */
        int32_t lnl = e.box_is_line ? nl : 0;   /* line boxes for the neighbours too */
        e.next_box = e.prev_box = h->box;
        if (j + 1 < ns && n_words(h->text, s[j + 1]) <= EV_NEXT_WORDS) {
            e.next = span_quote(h->text, s[j + 1].off, s[j + 1].len, lines, lnl, &e.next_box);
            if (!e.next) { free(e.text); rc = -1; break; }
        } else if (j + 1 == ns && h->kind == STORE_KIND_HEADING &&
                   heading_body(st, h, &e)) {
            free(e.text);
            rc = -1;
            break;
        }
        if (j > 0 && refers_back(t, s[j].len) && n_words(h->text, s[j - 1]) <= EV_NEXT_WORDS &&
            !(e.prev = span_quote(h->text, s[j - 1].off, s[j - 1].len, lines, lnl, &e.prev_box))) {
            free(e.text); free(e.next); rc = -1; break;
        }
        float self, ctx;
        lexical(qw, nq, h->text, s, ns, j, &self, &ctx);
        lex[2 * l->n] = self;
        lex[2 * l->n + 1] = ctx;
        if (ev_push(l, e)) { free(e.text); free(e.next); free(e.prev); rc = -1; }
    }
    free(lines);
    return rc;
}

/* What kind of token the question asks for (answer typing, as in classic QA systems): a
 * number, a path or an identifier (command, option, variable). A sentence that holds one
 * is the more likely answer of two that match the question equally. */
enum { WANT_NUMBER = GROUND_VALUE_NUMBER, WANT_PATH = GROUND_VALUE_PATH,
       WANT_IDENT = GROUND_VALUE_IDENT };

/* Is cue in q as whole words, a plural allowed ("ports", not "support" or "triangle")? */
static int has_cue(const char *q, const char *cue) {
    size_t n = strlen(cue);
    for (const char *p = q; (p = strcasestr(p, cue)); p++) {
        const char *e = p + n;
        e += *e == 's' ? 1 : (e[0] == 'e' && e[1] == 's') ? 2 : 0;   /* ports, addresses */
        if ((p == q || !isalnum((unsigned char)p[-1])) && !isalnum((unsigned char)*e)) return 1;
    }
    return 0;
}

int answer_wanted_type(const char *q) {
    static const struct { const char *cue; int type; } cues[] = {
        {"how many", WANT_NUMBER}, {"how much", WANT_NUMBER}, {"how long", WANT_NUMBER},
        {"how large", WANT_NUMBER}, {"how big", WANT_NUMBER}, {"size", WANT_NUMBER},
        {"angle", WANT_NUMBER}, {"number", WANT_NUMBER}, {"version", WANT_NUMBER},
        {"percent", WANT_NUMBER}, {"address", WANT_NUMBER}, {"port", WANT_NUMBER},
        {"year", WANT_NUMBER}, {"resolution", WANT_NUMBER}, {"limit", WANT_NUMBER},
        {"value", WANT_NUMBER | WANT_IDENT}, {"file", WANT_PATH | WANT_IDENT},
        {"directory", WANT_PATH}, {"folder", WANT_PATH}, {"path", WANT_PATH},
        {"command", WANT_IDENT}, {"option", WANT_IDENT}, {"parameter", WANT_IDENT},
        {"variable", WANT_IDENT}, {"keyword", WANT_IDENT}, {"function", WANT_IDENT},
        {"setting", WANT_IDENT}, {"flag", WANT_IDENT}, {"module", WANT_IDENT}};
    int t = 0;
    for (size_t i = 0; i < sizeof cues / sizeof cues[0]; i++)
        if (has_cue(q, cues[i].cue)) t |= cues[i].type;
    return t;
}

/* The answer types a text holds: numbers, paths, identifiers (exact tokens with a joiner). */
int answer_held_types(const char *text) {
    int32_t n = 0;
    uint8_t *ex = NULL;
    char *w = ground_words_raw(text, &n, &ex);
    int t = 0;
    const char *p = w;
    for (int32_t i = 0; w && ex && i < n; i++, p += strlen(p) + 1) {
        if (ex[i]) t |= ground_value_kinds(p);
    }
    free(w);
    free(ex);
    return t;
}

/* A pointer to another place ("See Section 7.31 [Why ...], page 37, for more details.",
 * "See set style circle (p. 147).") repeats the words of what it points to, so it matches
 * the question as well as the answer does, yet answers nothing itself. */
static int cross_reference(const char *t) {
    if (strncasecmp(t, "see ", 4)) return 0;
    return strstr(t, "page") || strstr(t, "(p.") || strstr(t, "Section") || strstr(t, "Chapter");
}

static int by_score(const void *a, const void *b) {
    float x = ((const answer_evidence *)a)->score, y = ((const answer_evidence *)b)->score;
    if (x != y) return x < y ? 1 : -1;
    const answer_evidence *p = a, *q = b;   /* ties: rank of the hit, then the text */
    if (p->hit != q->hit) return p->hit < q->hit ? -1 : 1;
    return strcmp(p->text, q->text);
}

/* A sentence after its admonition label ("Tip The actual init command ..."): the label is
 * layout, and it pulls the sentence's vector away from what it says. */
static const char *past_label(const char *t) {
    static const char *const labels[] = {"Tip ", "Note ", "Caution ", "Warning ", "Important "};
    for (size_t k = 0; k < sizeof labels / sizeof labels[0]; k++) {
        size_t n = strlen(labels[k]);
        if (!strncmp(t, labels[k], n) && t[n] >= 'A' && t[n] <= 'Z') return t + n;
    }
    return t;
}

/* Cosine of each sentence with the question into cos[n] (unit vectors: a dot product). */
static int cosines(void *te, const char *question, const answer_evidence *ev, int32_t n,
                   float *cos, char *err, size_t errlen) {
    int32_t d = textenc_dim(te);
    const char **texts = malloc((size_t)(n + 1) * sizeof *texts);
    float *v = malloc((size_t)(n + 1) * (size_t)d * sizeof *v);
    int rc = -1;
    if (!texts || !v) { snprintf(err, errlen, "out of memory"); goto out; }
    texts[0] = question;
    for (int32_t i = 0; i < n; i++) texts[i + 1] = past_label(ev[i].text);
    if (textenc_embed(te, texts, n + 1, v, err, errlen)) goto out;
    for (int32_t i = 0; i < n; i++) {
        double dot = 0;
        for (int32_t k = 0; k < d; k++) dot += (double)v[k] * v[(size_t)(i + 1) * d + k];
        cos[i] = (float)dot;
    }
    rc = 0;
out:
    free(texts);
    free(v);
    return rc;
}

int answer_evidence_collect(retriever *r, void *te, const char *question, answer_result *a,
                            char *err, size_t errlen) {
    int32_t nq = 0;
    char *qw = ground_words(question, &nq, NULL);
    float *lex = malloc((size_t)(a->hits.n + 1) * EV_MAX_PER_HIT * 2 * sizeof *lex);
    ev_list l = {0};
    int rc = -1;
    if (!qw || !lex) { snprintf(err, errlen, "out of memory"); goto out; }
    store *st = retr_store(r);
    for (int32_t i = 0; i < a->hits.n; i++)
        if (add_hit(st, &a->hits.hits[i], i, qw, nq, &l, lex)) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
    float *cos = calloc((size_t)(l.n + 1), sizeof *cos);
    if (!cos) { snprintf(err, errlen, "out of memory"); goto out; }
    if (te && l.n && cosines(te, question, l.ev, l.n, cos, err, errlen)) { free(cos); goto out; }
    int want = answer_wanted_type(question);
    for (int32_t i = 0; i < l.n; i++) {
        l.ev[i].score = te ? 0.7f * cos[i] + 0.2f * lex[2 * i] + 0.1f * lex[2 * i + 1]
                           : 0.7f * lex[2 * i] + 0.3f * lex[2 * i + 1];
        ground_span all = {0, (uint32_t)strlen(l.ev[i].text)};
        if (n_words(l.ev[i].text, all) < EV_SHORT_WORDS || cross_reference(l.ev[i].text))
            l.ev[i].score -= 0.1f;
        if (want && (answer_held_types(l.ev[i].text) & want)) l.ev[i].score += EV_TYPE_BONUS;
        l.ev[i].score -= EV_RANK_STEP * (float)l.ev[i].hit;
    }
    free(cos);
    if (l.n) qsort(l.ev, (size_t)l.n, sizeof *l.ev, by_score);   /* l.ev is NULL when empty */
    a->ev = l.ev;
    a->n_ev = l.n;
    l.ev = NULL;
    rc = 0;
out:
    for (int32_t i = 0; l.ev && i < l.n; i++) {
        free(l.ev[i].text);
        free(l.ev[i].next);
        free(l.ev[i].prev);
    }
    free(l.ev);
    free(lex);
    free(qw);
    return rc;
}
