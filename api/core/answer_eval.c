/* api/core/answer_eval — `mmrag eval answers QUESTIONS.json`: answer quality over a
 * question file, through the same core as every front-end.
 *
 * File format (tests/data/answer_questions_debian.json):
 *   {"questions": [{"id": "gp-x", "query": "...", "answerable": true,
 *                   "keys": ["set logscale"],
 *                   "answers": [{"doc": "gnuplot.pdf", "page": 167, "text": "..."}]},
 *                  {"id": "un-y", "query": "...", "answerable": false}, ...]}
 * Metrics:
 *   key in answer      answerable, not abstained, and some key occurs in the answer text
 *                      (case and whitespace insensitive); abstaining counts as a miss
 *   cited page         of the answerable questions answered, the share with a citation
 *                      on one of the answer pages (document file name + page)
 *   grounded           of the model's sentences shown, the share passing the check, and
 *                      the share passing the stricter all-words rule (quotes are verbatim
 *                      and not counted)
 *   abstained          on unanswerable questions (should be high) and on answerable ones
 *                      (false abstention, should be low) */
#include "api/core/answer.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int answerable, answered, key, page_ok, unanswerable, abstain_un, abstain_ans;
    int shown, supported, strict, errors;
} eval_tally;

/* lowercase, whitespace runs -> one space */
static void squash(const char *s, char *o, size_t cap) {
    size_t n = 0;
    int sp = 0;
    for (; s && *s && n + 2 < cap; s++) {
        if (isspace((unsigned char)*s)) { sp = 1; continue; }
        if (sp && n) o[n++] = ' ';
        sp = 0;
        o[n++] = (char)tolower((unsigned char)*s);
    }
    o[n] = 0;
}

static int key_found(const char *answer, json_t *keys) {
    size_t cap = strlen(answer ? answer : "") + 2;
    char *a = malloc(cap), k[512];
    if (!a) return 0;
    squash(answer, a, cap);
    int hit = 0;
    for (size_t i = 0; i < json_array_size(keys) && !hit; i++) {
        squash(json_string_value(json_array_get(keys, i)), k, sizeof k);
        hit = *k && strstr(a, k);
    }
    free(a);
    return hit;
}

static const char *base_name(const char *p) {
    const char *s = p ? strrchr(p, '/') : NULL;
    return s ? s + 1 : (p ? p : "");
}

static int page_found(store *st, const answer_result *a, json_t *answers) {
    for (int32_t c = 0; c < a->n_cites; c++) {
        const retr_hit *h = &a->hits.hits[a->ev[a->cites[c]].hit];
        store_doc_row d = {0};
        if (store_doc_get_id(st, h->doc, &d) != STORE_OK) continue;
        int ok = 0;
        for (size_t i = 0; i < json_array_size(answers) && !ok; i++) {
            json_t *x = json_array_get(answers, i);
            const char *doc = json_string_value(json_object_get(x, "doc"));
            ok = doc && (int)json_integer_value(json_object_get(x, "page")) == h->page &&
                 (!strcmp(base_name(d.path), doc) || (d.title && !strcmp(d.title, doc)));
        }
        store_doc_row_clear(&d);
        if (ok) return 1;
    }
    return 0;
}

static void tally_one(eval_tally *t, store *st, json_t *q, const answer_result *a, FILE *out,
                      int json, json_t *rows) {
    int answerable = json_is_true(json_object_get(q, "answerable"));
    int key = 0, page = 0;
    for (int32_t i = 0; i < a->n_sents; i++) {
        if (!a->sents[i].shown) continue;
        t->shown++;
        t->supported += a->sents[i].check.supported;
        t->strict += a->sents[i].check.strict;
    }
    if (answerable) {
        t->answerable++;
        t->abstain_ans += a->abstained;
        if (!a->abstained) {
            t->answered++;
            key = key_found(a->text, json_object_get(q, "keys"));
            page = page_found(st, a, json_object_get(q, "answers"));
            t->key += key;
            t->page_ok += page;
        }
    } else {
        t->unanswerable++;
        t->abstain_un += a->abstained;
    }
    const char *id = json_string_value(json_object_get(q, "id"));
    if (json) {
        json_array_append_new(rows, json_pack("{s:s,s:b,s:b,s:b,s:b,s:s,s:f,s:s}", "id", id ? id : "",
                                              "answerable", answerable, "abstained", a->abstained,
                                              "key", key, "page", page, "mode_used",
                                              answer_mode_name(a->mode_used), "best_score",
                                              a->n_ev ? (double)a->ev[0].score : 0.0, "answer",
                                              a->text ? a->text : ""));
        return;
    }
    char snip[100];
    snprintf(snip, sizeof snip, "%s", a->abstained ? a->abstain_reason : a->text ? a->text : "");
    for (char *p = snip; *p; p++) if (*p == '\n') *p = ' ';
    fprintf(out, "%-22s %-5s %-10s best %.3f  key %d page %d  %s\n", id ? id : "?",
            answerable ? "ans" : "unans", a->abstained ? "ABSTAINED" : answer_mode_name(a->mode_used),
            a->n_ev ? (double)a->ev[0].score : 0.0, key, page, snip);
}

static double pct(int a, int b) { return b ? 100.0 * a / b : 0; }

static void report(const eval_tally *t, int32_t mode, FILE *out, int json, json_t *rows) {
    if (json) {
        json_t *o = json_pack("{s:s,s:i,s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:i,s:i,s:o}", "mode",
                              answer_mode_name(mode), "answerable", t->answerable,
                              "unanswerable", t->unanswerable, "key_in_answer",
                              pct(t->key, t->answerable) / 100, "cited_page",
                              pct(t->page_ok, t->answered) / 100, "grounded",
                              pct(t->supported, t->shown) / 100, "grounded_strict",
                              pct(t->strict, t->shown) / 100, "abstain_unanswerable",
                              pct(t->abstain_un, t->unanswerable) / 100, "abstain_answerable",
                              pct(t->abstain_ans, t->answerable) / 100, "sentences_shown", t->shown,
                              "errors", t->errors, "questions", rows);
        char *s = json_dumps(o, JSON_INDENT(1) | JSON_REAL_PRECISION(4));
        if (s) fprintf(out, "%s\n", s);
        free(s);
        json_decref(o);
        return;
    }
    fprintf(out, "\nanswers (mode %s): %d answerable, %d unanswerable, %d errors\n",
            answer_mode_name(mode), t->answerable, t->unanswerable, t->errors);
    fprintf(out, "  key in answer          %5.1f%%  (%d/%d)\n", pct(t->key, t->answerable), t->key, t->answerable);
    fprintf(out, "  cited page correct     %5.1f%%  (%d/%d answered)\n", pct(t->page_ok, t->answered), t->page_ok, t->answered);
    fprintf(out, "  grounded sentences     %5.1f%%  (%d/%d shown model sentences)\n", pct(t->supported, t->shown), t->supported, t->shown);
    fprintf(out, "  strict token overlap   %5.1f%%  (%d/%d)\n", pct(t->strict, t->shown), t->strict, t->shown);
    fprintf(out, "  abstained, unanswerable %5.1f%%  (%d/%d)\n", pct(t->abstain_un, t->unanswerable), t->abstain_un, t->unanswerable);
    fprintf(out, "  abstained, answerable   %5.1f%%  (%d/%d)\n", pct(t->abstain_ans, t->answerable), t->abstain_ans, t->answerable);
}

int answer_eval_file(retriever *r, void *te, answer_llm *llm, const char *path,
                     const answer_request *base, int json, FILE *out, char *err, size_t errlen) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    json_t *qs = root ? json_object_get(root, "questions") : NULL;
    if (!json_is_array(qs)) {
        snprintf(err, errlen, "%s: %s", path, root ? "no \"questions\" array" : je.text);
        json_decref(root);
        return ANSWER_ERR_ARG;
    }
    eval_tally t = {0};
    json_t *rows = json_array();
    for (size_t i = 0; i < json_array_size(qs); i++) {
        json_t *q = json_array_get(qs, i);
        answer_request rq = *base;
        rq.question = json_string_value(json_object_get(q, "query"));
        answer_result a;
        char e[512];
        int rc = answer_run(r, te, llm, &rq, &a, e, sizeof e);
        if (rc != ANSWER_OK) {
            t.errors++;
            fprintf(stderr, "eval answers: %s: %s\n",
                    json_string_value(json_object_get(q, "id")), e);
            continue;
        }
        tally_one(&t, retr_store(r), q, &a, out, json, rows);
        answer_result_free(&a);
        fflush(out);
    }
    report(&t, base->mode, out, json, rows);
    json_decref(root);
    return t.errors ? ANSWER_ERR_MODEL : ANSWER_OK;
}
