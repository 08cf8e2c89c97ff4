/* api/core/answer_json — the one JSON shape of a hit, a citation and an answer, printed by
 * `mmrag ask --json` and `mmrag search --json`, sent by the REST server and mirrored by
 * the library's structs. */
#include "api/core/answer_internal.h"
#include "engine/engine.h"

#include <stdlib.h>
#include <string.h>

json_t *answer_json_str(const char *s) {
    json_t *j = json_string(s ? s : "");
    if (j) return j;
    size_t n = strlen(s), o = 0;   /* invalid UTF-8: replace non-ASCII bytes by U+FFFD */
    char *b = malloc(3 * n + 1);
    if (!b) return json_string("");
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)s[i] < 0x80) b[o++] = s[i];
        else { memcpy(b + o, "\xef\xbf\xbd", 3); o += 3; }
    }
    b[o] = 0;
    j = json_string(b);
    free(b);
    return j ? j : json_string("");
}

json_t *answer_json_box(store_box b) {
    return json_pack("[f,f,f,f]", (double)b.x0, (double)b.y0, (double)b.x1, (double)b.y1);
}

json_t *answer_hit_json(const retr_hit *h, int32_t n) {
    static const char *const src[RETR_NSRC] = {"text", "image", "bm25"};
    json_t *scores = json_object(), *ranks = json_object();
    for (int i = 0; i < RETR_NSRC; i++) {
        if (!h->rank[i]) continue;
        json_object_set_new(scores, src[i], json_real(h->score[i]));
        json_object_set_new(ranks, src[i], json_integer(h->rank[i]));
    }
    json_t *o = json_pack("{s:I,s:I,s:o,s:i,s:s,s:o,s:I,s:o,s:o,s:o,s:o,s:f}", "chunk_id",
                          (json_int_t)h->chunk_id, "document_id", (json_int_t)h->doc, "title",
                          answer_json_str(h->title), "page", h->page, "kind",
                          store_chunk_kind_name(h->kind), "box", answer_json_box(h->box), "image_id",
                          (json_int_t)h->image_id, "text", answer_json_str(h->text), "snippet",
                          answer_json_str(h->snippet), "scores", scores, "ranks", ranks, "fused",
                          h->fused);
    if (o && n > 0) json_object_set_new(o, "n", json_integer(n));
    return o;
}

static json_t *citation_json(const answer_result *a, int32_t i) {
    const answer_evidence *e = &a->ev[a->cites[i]];
    const retr_hit *h = &a->hits.hits[e->hit];
    return json_pack("{s:i,s:I,s:o,s:i,s:s,s:o,s:s,s:I,s:I,s:o,s:f,s:f}", "n", i + 1,
                     "document_id", (json_int_t)h->doc, "title", answer_json_str(h->title),
                     "page", h->page, "kind", store_chunk_kind_name(h->kind), "box",
                     answer_json_box(e->box), "box_source", e->box_is_line ? "sentence" : "chunk",
                     "chunk_id", (json_int_t)h->chunk_id, "image_id", (json_int_t)h->image_id,
                     "text", answer_json_str(e->text), "score", (double)e->score, "fused",
                     h->fused);
}

json_t *answer_citations_json(const answer_result *a) {
    json_t *c = json_array();
    for (int32_t i = 0; c && i < a->n_cites; i++) json_array_append_new(c, citation_json(a, i));
    return c;
}

static json_t *sentences_json(const answer_result *a) {
    json_t *arr = json_array();
    for (int32_t i = 0; arr && i < a->n_sents; i++) {
        const answer_sentence *s = &a->sents[i];
        json_t *cites = json_array();
        for (int32_t k = 0; k < 2; k++)
            if (s->cite_n[k] > 0) json_array_append_new(cites, json_integer(s->cite_n[k]));
        json_t *o = json_pack("{s:o,s:b,s:b,s:b,s:f,s:o,s:s}", "text", answer_json_str(s->text),
                              "shown", s->shown, "supported", s->check.supported, "strict",
                              s->check.strict, "coverage", (double)s->check.coverage,
                              "citations", cites, "check", s->check.why);
        if (o && s->check.missing[0])
            json_object_set_new(o, "missing", answer_json_str(s->check.missing));
        json_array_append_new(arr, o);
    }
    return arr;
}

json_t *answer_json(const answer_result *a, const answer_request *rq) {
    json_t *evj = json_array();
    for (int32_t i = 0; evj && i < a->hits.n; i++)
        json_array_append_new(evj, answer_hit_json(&a->hits.hits[i], i + 1));
    json_t *o = json_pack(
        "{s:o,s:s,s:s,s:o,s:b,s:o,s:o,s:o,s:o,s:s,s:{s:f,s:f,s:f,s:i,s:i}}", "question",
        answer_json_str(rq->question), "mode", answer_mode_name(rq->mode), "mode_used",
        answer_mode_name(a->mode_used), "answer", answer_json_str(a->text), "abstained",
        a->abstained, "abstain_reason",
        a->abstain_reason ? json_string(a->abstain_reason) : json_null(), "sentences",
        sentences_json(a), "citations", answer_citations_json(a), "evidence", evj,
        "stop_reason", answer_stop_name(a),
        "timings", "retrieval_ms", a->retrieval_ms, "ttft_ms", a->ttft_ms, "total_ms",
        a->total_ms, "prompt_tokens", a->prompt_tokens, "completion_tokens",
        a->completion_tokens);
    return o;
}
