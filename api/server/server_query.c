/* api/server/server_query.c — the question routes: /v1/search answers with the fused
 * hits, /v1/ask and /v1/chat/completions validate their request into a generation job
 * (server_stream.c). Each route reads the retrieval options the same way. */
#include "api/server/server_internal.h"
#include "index/store.h"
#include "retrieval/retrieval.h"
#include "api/core/answer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- search --------------------------------------------------------------------------- */
static int parse_search_opts(json_t *o, srv_search_req *sr, char *msg, size_t ml) {
    sr->k = sr->k ? sr->k : 5;
    sr->kind = -1;
    for (int i = 0; i < RETR_NSRC; i++) sr->weight[i] = -1;
    if (srv_json_int(o, "k", 1, 50, &sr->k, msg, ml) || srv_json_int(o, "page_min", 1, 1000000, &sr->page_min, msg, ml) ||
        srv_json_int(o, "page_max", 1, 1000000, &sr->page_max, msg, ml))
        return -1;
    json_t *d = json_object_get(o, "documents");
    if (d && !json_is_null(d)) {
        if (!json_is_array(d) || json_array_size(d) > 64) {
            snprintf(msg, ml, "\"documents\" must be an array of at most 64 document ids");
            return -1;
        }
        size_t i;
        json_t *v;
        json_array_foreach(d, i, v) {
            if (!json_is_integer(v) || json_integer_value(v) < 1) {
                snprintf(msg, ml, "\"documents\" must hold positive integer ids");
                return -1;
            }
            sr->docs[sr->n_docs++] = json_integer_value(v);
        }
    }
    json_t *kind = json_object_get(o, "kind");
    if (kind && !json_is_null(kind)) {
        if (!json_is_string(kind) || (sr->kind = store_chunk_kind_parse(json_string_value(kind))) < 0) {
            snprintf(msg, ml, "\"kind\" must be one of text, caption, figure, table, ocr, heading");
            return -1;
        }
    }
    json_t *w = json_object_get(o, "weights");
    if (w && !json_is_null(w)) {
        if (!json_is_object(w)) { snprintf(msg, ml, "\"weights\" must be an object"); return -1; }
        if (srv_json_num(w, "text", 0, 100, &sr->weight[RETR_SRC_TEXT], msg, ml) ||
            srv_json_num(w, "image", 0, 100, &sr->weight[RETR_SRC_IMAGE], msg, ml) ||
            srv_json_num(w, "bm25", 0, 100, &sr->weight[RETR_SRC_BM25], msg, ml))
            return -1;
    }
    return 0;
}

void srv_search_opts(const srv_search_req *sr, retr_opts *o) {
    retr_opts_default(o);
    o->k = (int32_t)sr->k;
    o->docs = sr->n_docs ? sr->docs : NULL;
    o->n_docs = sr->n_docs;
    o->page_min = (int32_t)sr->page_min;
    o->page_max = (int32_t)sr->page_max;
    o->kind = sr->kind;
    for (int i = 0; i < RETR_NSRC; i++) o->weight[i] = (float)sr->weight[i];
}

int srv_search_run(srv_server *s, srv_coll *coll, const srv_search_req *sr, retr_result *res,
                   char *err, size_t errlen) {
    memset(res, 0, sizeof *res);
    retriever *r = srv_query_retriever(s, coll, err, errlen);
    if (!r) return -1;
    retr_opts o;
    srv_search_opts(sr, &o);
    return retr_search(r, sr->query, &o, res, err, errlen);
}

json_t *srv_hits_json(const retr_result *res, int numbered) {
    json_t *a = json_array();
    for (int32_t i = 0; i < res->n; i++) json_array_append_new(a, answer_hit_json(&res->hits[i], numbered ? i + 1 : 0));
    return a;
}

enum MHD_Result srv_handle_search(struct MHD_Connection *c, srv_req *r) {
    enum MHD_Result ret;
    json_t *body = srv_body_object(c, r, &ret);
    if (!body) return ret;
    srv_search_req sr = {0};
    char msg[256];
    if (srv_json_text(body, "query", &sr.query, msg, sizeof msg) || parse_search_opts(body, &sr, msg, sizeof msg)) {
        json_decref(body);
        return srv_reply_error(c, r, 400, "invalid_request", "%s", msg);
    }
    retr_result res;
    char err[512];
    double t0 = srv_now();
    int rc = srv_search_run(r->srv, r->coll, &sr, &res, err, sizeof err);
    json_decref(body);
    if (rc) return srv_reply_error(c, r, 500, "search_failed", "%s", err);
    json_t *o = json_pack("{s:o,s:{s:f,s:f,s:f},s:{s:f,s:f,s:f}}", "hits", srv_hits_json(&res, 0),
                          "weights", "text", (double)res.weights.w[RETR_SRC_TEXT], "image",
                          (double)res.weights.w[RETR_SRC_IMAGE], "bm25",
                          (double)res.weights.w[RETR_SRC_BM25], "timings", "encode_ms",
                          res.encode_ms, "search_ms", res.search_ms, "total_ms",
                          (srv_now() - t0) * 1e3);
    retr_result_free(&res);
    return srv_reply_json(c, r, 200, o);
}

/* ---- ask and chat --------------------------------------------------------------------- */
/* "mode" and "show_unsupported" (also inside a chat request's "mmrag" object). */
static int parse_gen_opts_mode(json_t *o, srv_gen_job *g, char *msg, size_t ml) {
    json_t *mode = json_object_get(o, "mode");
    if (mode && !json_is_null(mode) &&
        (!json_is_string(mode) || answer_mode_parse(json_string_value(mode), &g->mode))) {
        snprintf(msg, ml, "\"mode\" must be \"auto\", \"extractive\" or \"generative\"");
        return -1;
    }
    return srv_json_bool(o, "show_unsupported", &g->show_unsupported, msg, ml);
}

static int parse_gen_opts(json_t *o, srv_gen_job *g, char *msg, size_t ml) {
    answer_request d;
    answer_request_default(&d);   /* the core's defaults, as in `mmrag ask` and mmrag_ask() */
    g->max_tokens = d.max_tokens;
    g->temperature = d.temperature;
    g->top_p = d.top_p;
    g->mode = d.mode;
    if (parse_gen_opts_mode(o, g, msg, ml) ||
        srv_json_int(o, "max_tokens", 1, 2048, &g->max_tokens, msg, ml) ||
        srv_json_num(o, "temperature", 0, 2, &g->temperature, msg, ml) ||
        srv_json_num(o, "top_p", 0.01, 1, &g->top_p, msg, ml) ||
        srv_json_int(o, "seed", 0, (int64_t)1 << 53, &g->seed, msg, ml) ||
        srv_json_bool(o, "stream", &g->stream, msg, ml))
        return -1;
    json_t *rf = json_object_get(o, "response_format");
    if (rf && !json_is_null(rf)) {
        json_t *t = json_is_object(rf) ? json_object_get(rf, "type") : NULL;
        const char *ts = json_is_string(t) ? json_string_value(t) : NULL;
        if (!ts || (strcmp(ts, "json_object") && strcmp(ts, "text"))) {
            snprintf(msg, ml, "\"response_format\" must be {\"type\": \"json_object\" | \"text\"}");
            return -1;
        }
        g->json_mode = !strcmp(ts, "json_object");
    }
    json_t *so = json_object_get(o, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) { snprintf(msg, ml, "\"stream_options\" must be an object"); return -1; }
        if (srv_json_bool(so, "include_usage", &g->include_usage, msg, ml)) return -1;
    }
    return 0;
}

/* A generation job with the answer core's defaults (k) under the request's fields. */
static srv_gen_job *gen_job_new(void) {
    srv_gen_job *g = calloc(1, sizeof *g);
    answer_request d;
    answer_request_default(&d);
    if (g) g->sr.k = d.k;
    return g;
}

enum MHD_Result srv_handle_ask(struct MHD_Connection *c, srv_req *r) {
    enum MHD_Result ret;
    json_t *body = srv_body_object(c, r, &ret);
    if (!body) return ret;
    srv_gen_job *g = gen_job_new();
    if (!g) { json_decref(body); return MHD_NO; }
    char msg[256];
    const char *q = NULL;
    if (srv_json_text(body, "question", &q, msg, sizeof msg) ||
        parse_search_opts(body, &g->sr, msg, sizeof msg) || parse_gen_opts(body, g, msg, sizeof msg)) {
        json_decref(body);
        free(g);
        return srv_reply_error(c, r, 400, "invalid_request", "%s", msg);
    }
    g->question = strdup(q);
    snprintf(g->model_name, sizeof g->model_name, "mmrag");
    json_decref(body);
    if (!g->question) { free(g); return MHD_NO; }
    return srv_gen_start(c, r, g);
}

/* One message's text for the history: its content, or for an assistant's tool calls
 * "called NAME(ARGS)" per call. NULL when the message is malformed (msg says why). */
static char *message_text(json_t *m, size_t i, const char *role, char *msg, size_t ml) {
    json_t *content = json_object_get(m, "content");
    json_t *calls = json_object_get(m, "tool_calls");
    if (json_is_string(content)) return strdup(json_string_value(content));
    if (strcmp(role, "assistant") || !json_is_array(calls) || (content && !json_is_null(content))) {
        snprintf(msg, ml, "messages[%zu] must have a string \"content\"%s", i,
                 !strcmp(role, "assistant") ? " or \"tool_calls\"" : "");
        return NULL;
    }
    size_t cap = 16, len = 0, k;
    json_t *c;
    json_array_foreach(calls, k, c) cap += 32 + json_string_length(json_object_get(json_object_get(c, "function"), "name")) +
                                          json_string_length(json_object_get(json_object_get(c, "function"), "arguments"));
    char *t = malloc(cap);
    if (!t) { snprintf(msg, ml, "out of memory"); return NULL; }
    t[0] = 0;
    json_array_foreach(calls, k, c) {
        json_t *f = json_object_get(c, "function");
        const char *nm = json_string_value(json_object_get(f, "name")), *args = json_string_value(json_object_get(f, "arguments"));
        if (!nm || !args) { free(t); snprintf(msg, ml, "messages[%zu].tool_calls[%zu] needs function.name and function.arguments strings", i, k); return NULL; }
        len += (size_t)snprintf(t + len, cap - len, "%scalled %s(%s)", k ? "; " : "", nm, args);
    }
    return t;
}

/* Chat messages: the last user message is the question; earlier turns (and tool results,
 * as "tool: ...") become history. */
static int parse_messages(json_t *msgs, srv_gen_job *g, char *msg, size_t ml) {
    if (!json_is_array(msgs) || json_array_size(msgs) == 0 || json_array_size(msgs) > 256) {
        snprintf(msg, ml, "\"messages\" must be a non-empty array (at most 256)");
        return -1;
    }
    size_t n = json_array_size(msgs), last_user = (size_t)-1;
    char **text = calloc(n, sizeof *text);
    if (!text) { snprintf(msg, ml, "out of memory"); return -1; }
    int rc = 0;
    size_t hcap = 1;
    for (size_t i = 0; i < n && !rc; i++) {
        json_t *m = json_array_get(msgs, i);
        json_t *role = json_is_object(m) ? json_object_get(m, "role") : NULL;
        const char *rs = json_is_string(role) ? json_string_value(role) : "";
        if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant") && strcmp(rs, "tool")) {
            snprintf(msg, ml, "messages[%zu].role must be system, user, assistant or tool", i);
            rc = -1;
        } else if (!(text[i] = message_text(m, i, rs, msg, ml))) {
            rc = -1;
        } else {
            if (!strcmp(rs, "user")) last_user = i, g->after_tools = 0;
            if (!strcmp(rs, "tool")) g->after_tools = 1;
            hcap += strlen(text[i]) + 16;
        }
    }
    if (!rc && last_user == (size_t)-1) { snprintf(msg, ml, "\"messages\" needs a user message"); rc = -1; }
    if (!rc && (!*text[last_user] || strlen(text[last_user]) > 4096)) {
        snprintf(msg, ml, "the user message must be 1..4096 characters");
        rc = -1;
    }
    char *hist = rc ? NULL : malloc(hcap), *sys = NULL;
    size_t hlen = 0;
    if (!rc && !hist) { snprintf(msg, ml, "out of memory"); rc = -1; }
    for (size_t i = 0; !rc && i < n; i++) {
        if (i == last_user) continue;
        const char *rs = json_string_value(json_object_get(json_array_get(msgs, i), "role"));
        if (!strcmp(rs, "system")) { if (!sys) sys = strdup(text[i]); continue; }
        hlen += (size_t)snprintf(hist + hlen, hcap - hlen, "%s: %s\n", rs, text[i]);
    }
    if (!rc) {
        g->question = strdup(text[last_user]);
        if (hlen) g->history = hist, hist = NULL;
        g->system = sys;
        if (!g->question) { snprintf(msg, ml, "out of memory"); rc = -1; }
    }
    free(hist);
    for (size_t i = 0; i < n; i++) free(text[i]);
    free(text);
    return rc;
}

enum MHD_Result srv_handle_chat(struct MHD_Connection *c, srv_req *r) {
    enum MHD_Result ret;
    json_t *body = srv_body_object(c, r, &ret);
    if (!body) return ret;
    srv_gen_job *g = gen_job_new();
    if (!g) { json_decref(body); return MHD_NO; }
    g->chat = 1;
    char msg[256];
    json_t *model = json_object_get(body, "model");
    if (model && !json_is_string(model) && !json_is_null(model)) {
        snprintf(msg, sizeof msg, "\"model\" must be a string");
        goto bad;
    }
    snprintf(g->model_name, sizeof g->model_name, "%s",
             json_is_string(model) ? json_string_value(model) : "mmrag");
    if (json_is_string(model) && !srv_openai_chat_model_ok(r->srv, json_string_value(model))) {
        json_decref(body);
        free(g);
        return srv_reply_error(c, r, 404, "model_not_found",
                               "\"model\" must be \"mmrag\" or the language model's id (GET /v1/models)");
    }
    if (parse_messages(json_object_get(body, "messages"), g, msg, sizeof msg) ||
        parse_gen_opts(body, g, msg, sizeof msg))
        goto bad;
    if (tools_parse(json_object_get(body, "tools"), json_object_get(body, "tool_choice"), &g->tools,
                    msg, sizeof msg))
        goto bad;
    json_t *mm = json_object_get(body, "mmrag");   /* retrieval options, our extension */
    if (mm && !json_is_null(mm)) {
        if (!json_is_object(mm)) { snprintf(msg, sizeof msg, "\"mmrag\" must be an object"); goto bad; }
        if (parse_search_opts(mm, &g->sr, msg, sizeof msg) || parse_gen_opts_mode(mm, g, msg, sizeof msg)) goto bad;
    } else {
        g->sr.kind = -1;
        for (int i = 0; i < RETR_NSRC; i++) g->sr.weight[i] = -1;
    }
    json_decref(body);
    return srv_gen_start(c, r, g);
bad:
    json_decref(body);
    tools_free(g->tools);
    free(g->question);
    free(g->system);
    free(g->history);
    free(g);
    return srv_reply_error(c, r, 400, "invalid_request", "%s", msg);
}
