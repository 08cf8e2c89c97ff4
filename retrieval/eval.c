/* eval — `mmrag eval retrieval QUESTIONS.json`.
 *
 * File format:
 *   {"questions": [
 *     {"id": "fact-output", "type": "fact", "query": "How much power ...?",
 *      "answers": [{"doc": "corpus.pdf", "page": 1, "text": "42 megawatts"},
 *                  {"doc": "corpus.pdf", "page": 2, "box": [x0, y0, x1, y1]}]}, ...]}
 * "answers" are alternatives for the one thing that answers the question (a fact's
 * sentence, a figure's box or its caption). A hit is relevant when its document's file
 * name (or title) is `doc`, its page is `page`, and its chunk text contains `text`
 * (case and whitespace insensitive) or its box covers at least half of the smaller of
 * the two boxes. Metrics use the rank r of the first relevant hit in the top 10:
 * recall@k = [r <= k], MRR = 1/r, nDCG@k = 1/log2(r + 1) if r <= k (one relevant item,
 * so the ideal DCG is 1). Each question runs under four source sets: bm25, text, image,
 * fused (all three, adaptive weights), then fused with one step of the fusion taken away
 * (the ablation of issue 17): -sent (no sentence vectors), -sect (the section path does
 * not count in BM25; its part in the chunk vectors is fixed at indexing), rrf (weighted
 * reciprocal-rank fusion instead of score fusion). */
#include "retrieval/retrieval.h"
#include "retrieval/retrieval_internal.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NCFG 7
#define NSRC_CFG 4   /* the first four: one per source set, in retr_eval_file's overall[] */
static const char *const cfg_name[NCFG] = {"bm25", "text", "image", "fused", "-sent", "-sect", "rrf"};
static const int cfg_mask[NCFG] = {RETR_USE_BM25, RETR_USE_TEXT, RETR_USE_IMAGE, RETR_USE_ALL,
                                   RETR_USE_ALL, RETR_USE_ALL, RETR_USE_ALL};

static void cfg_opts(int c, retr_opts *o) {
    retr_opts_default(o);
    o->k = 10;
    o->sources = cfg_mask[c];
    if (c == 4) o->sentences = 0;
    if (c == 5) o->section_weight = 0;
    if (c == 6) o->fusion = RETR_FUSE_RRF;
}

/* lowercase, whitespace runs -> one space */
static char *squash(const char *s) {
    size_t n = strlen(s ? s : "");
    char *o = malloc(n + 1), *p = o;
    if (!o) return NULL;
    int sp = 0;
    for (const char *q = s ? s : ""; *q; q++) {
        if (isspace((unsigned char)*q)) { sp = 1; continue; }
        if (sp && p > o) *p++ = ' ';
        sp = 0;
        *p++ = (char)tolower((unsigned char)*q);
    }
    *p = 0;
    return o;
}

static const char *base_name(const char *p) {
    const char *s = p ? strrchr(p, '/') : NULL;
    return s ? s + 1 : (p ? p : "");
}

static double overlap(store_box a, const double b[4]) {
    double ix = fmin(a.x1, b[2]) - fmax(a.x0, b[0]), iy = fmin(a.y1, b[3]) - fmax(a.y0, b[1]);
    if (ix <= 0 || iy <= 0) return 0;
    double aa = (a.x1 - a.x0) * (a.y1 - a.y0), ab = (b[2] - b[0]) * (b[3] - b[1]);
    double m = fmin(aa, ab);
    return m > 0 ? ix * iy / m : 0;
}

static int relevant(store *s, const retr_hit *h, json_t *answers) {
    store_doc_row d;
    memset(&d, 0, sizeof d);
    if (store_doc_get_id(s, h->doc, &d) != STORE_OK) return 0;
    int rel = 0;
    char *ht = squash(h->text);
    size_t i;
    json_t *a;
    json_array_foreach(answers, i, a) {
        const char *doc = json_string_value(json_object_get(a, "doc"));
        int page = (int)json_integer_value(json_object_get(a, "page"));
        if (doc && strcmp(doc, base_name(d.path)) && strcmp(doc, d.title ? d.title : "")) continue;
        if (page && page != h->page) continue;
        const char *text = json_string_value(json_object_get(a, "text"));
        if (text && ht) {
            char *t = squash(text);
            if (t && *t && strstr(ht, t)) rel = 1;
            free(t);
        }
        json_t *box = json_object_get(a, "box");
        if (!rel && json_array_size(box) == 4) {
            double b[4];
            for (int j = 0; j < 4; j++) b[j] = json_number_value(json_array_get(box, (size_t)j));
            if (overlap(h->box, b) >= 0.5) rel = 1;
        }
        if (rel) break;
    }
    free(ht);
    store_doc_row_clear(&d);
    return rel;
}

static void add_metrics(retr_eval_row *m, int r) {
    if (r <= 0) return;
    m->r1 += r <= 1;
    m->r5 += r <= 5;
    m->r10 += r <= 10;
    m->mrr += 1.0 / r;
    if (r <= 5) m->ndcg5 += 1.0 / log2(r + 1.0);
    if (r <= 10) m->ndcg10 += 1.0 / log2(r + 1.0);
}
static void scale(retr_eval_row *m, int n) {
    if (n <= 0) return;
    m->r1 /= n; m->r5 /= n; m->r10 /= n; m->mrr /= n; m->ndcg5 /= n; m->ndcg10 /= n;
}
static json_t *row_json(const retr_eval_row *m) {
    return json_pack("{s:f,s:f,s:f,s:f,s:f,s:f}", "recall@1", m->r1, "recall@5", m->r5, "recall@10",
                     m->r10, "mrr", m->mrr, "ndcg@5", m->ndcg5, "ndcg@10", m->ndcg10);
}
static void print_table(FILE *out, const char *title, retr_eval_row rows[NCFG], int n) {
    fprintf(out, "\n%s (%d questions)\n", title, n);
    fprintf(out, "  %-6s %6s %6s %6s %6s %7s %7s\n", "source", "R@1", "R@5", "R@10", "MRR", "nDCG@5", "nDCG@10");
    for (int c = 0; c < NCFG; c++)
        fprintf(out, "  %-6s %6.3f %6.3f %6.3f %6.3f %7.3f %7.3f\n", cfg_name[c], rows[c].r1, rows[c].r5,
                rows[c].r10, rows[c].mrr, rows[c].ndcg5, rows[c].ndcg10);
}

int retr_eval_file(retriever *r, const char *path, int json, void *out_file,
                   retr_eval_row overall[4], char *err, size_t errlen) {
    FILE *out = out_file ? out_file : stdout;
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        retrieval_set_err(err, errlen, "eval: %s: %s (line %d)", path, je.text, je.line);
        return -1;
    }
    json_t *qs = json_object_get(root, "questions");
    if (!json_is_array(qs) || json_array_size(qs) == 0) {
        json_decref(root);
        retrieval_set_err(err, errlen, "eval: %s: no \"questions\" array", path);
        return -1;
    }
    retr_eval_row tot[NCFG] = {{0}};
    /* per question type too (fact, figure, table, ...) */
    char types[8][32];
    int ntypes = 0, tcount[8] = {0};
    retr_eval_row bytype[8][NCFG];
    memset(bytype, 0, sizeof bytype);
    json_t *jq = json_array();
    int nq = 0, rc = 0;
    if (!json) {
        fprintf(out, "%-24s %-52s", "question", "query");
        for (int c = 0; c < NCFG; c++) fprintf(out, " %5s", cfg_name[c]);
        fputc('\n', out);
    }
    size_t qi;
    json_t *q;
    json_array_foreach(qs, qi, q) {
        const char *id = json_string_value(json_object_get(q, "id"));
        const char *query = json_string_value(json_object_get(q, "query"));
        const char *type = json_string_value(json_object_get(q, "type"));
        json_t *answers = json_object_get(q, "answers");
        if (!query || !json_is_array(answers)) {
            retrieval_set_err(err, errlen, "eval: question %zu: needs \"query\" and \"answers\"", qi + 1);
            rc = -1;
            break;
        }
        int t = -1;
        if (type) {
            for (int i = 0; i < ntypes && t < 0; i++)
                if (!strcmp(types[i], type)) t = i;
            if (t < 0 && ntypes < 8) { snprintf(types[ntypes], 32, "%s", type); t = ntypes++; }
        }
        int ranks[NCFG];
        for (int c = 0; c < NCFG; c++) {
            retr_opts o;
            cfg_opts(c, &o);
            retr_result res;
            if (retr_search(r, query, &o, &res, err, errlen)) { rc = -1; break; }
            ranks[c] = 0;
            for (int32_t i = 0; i < res.n && !ranks[c]; i++)
                if (relevant(retr_store(r), &res.hits[i], answers)) ranks[c] = i + 1;
            retr_result_free(&res);
            add_metrics(&tot[c], ranks[c]);
            if (t >= 0) add_metrics(&bytype[t][c], ranks[c]);
        }
        if (rc) break;
        if (t >= 0) tcount[t]++;
        nq++;
        if (json) {
            json_t *o = json_pack("{s:s,s:s,s:s}", "id", id ? id : "", "query", query, "type", type ? type : "");
            json_t *rk = json_object();
            for (int c = 0; c < NCFG; c++)
                json_object_set_new(rk, cfg_name[c], ranks[c] ? json_integer(ranks[c]) : json_null());
            json_object_set_new(o, "first_relevant_rank", rk);
            json_array_append_new(jq, o);
        } else {
            char qb[53];
            snprintf(qb, sizeof qb, "%s", query);
            fprintf(out, "%-24.24s %-52s", id ? id : "", qb);
            for (int c = 0; c < NCFG; c++) {
                if (ranks[c]) fprintf(out, " %5d", ranks[c]);
                else fprintf(out, " %5s", "-");
            }
            fputc('\n', out);
        }
    }
    if (!rc) {
        for (int c = 0; c < NCFG; c++) scale(&tot[c], nq);
        for (int t = 0; t < ntypes; t++)
            for (int c = 0; c < NCFG; c++) scale(&bytype[t][c], tcount[t]);
        if (json) {
            json_t *ov = json_object(), *bt = json_object();
            for (int c = 0; c < NCFG; c++) json_object_set_new(ov, cfg_name[c], row_json(&tot[c]));
            for (int t = 0; t < ntypes; t++) {
                json_t *x = json_object();
                for (int c = 0; c < NCFG; c++) json_object_set_new(x, cfg_name[c], row_json(&bytype[t][c]));
                json_object_set_new(bt, types[t], x);
            }
            json_t *top = json_pack("{s:o,s:o,s:o}", "questions", jq, "overall", ov, "by_type", bt);
            jq = NULL;
            char *s = json_dumps(top, JSON_INDENT(2) | JSON_REAL_PRECISION(4));
            if (s) { fputs(s, out); fputc('\n', out); free(s); }
            json_decref(top);
        } else {
            fprintf(out, "(rank of the first relevant hit in the top 10; - = not found)\n");
            print_table(out, "overall: ablation by source", tot, nq);
            for (int t = 0; t < ntypes; t++) {
                char title[300];
                snprintf(title, sizeof title, "type %s", types[t]);
                print_table(out, title, bytype[t], tcount[t]);
            }
        }
        if (overall) memcpy(overall, tot, NSRC_CFG * sizeof *tot);
    }
    json_decref(jq);
    json_decref(root);
    return rc;
}
