/* api/server/server_stream.c — one generation job for /v1/ask and /v1/chat/completions:
 * the answer core (api/core/answer.h) with the request's settings, answered whole or
 * streamed (checked sentences as they complete).
 *
 * A streamed answer is produced by its own thread, which queues server-sent events
 * (event: token / citations / done, or OpenAI chunks ending in data: [DONE]); the HTTP
 * thread only copies queued bytes out, so a client that goes away aborts the generation.
 * The job is reference counted: the response and the producer each hold one. */
#include "api/server/server_internal.h"
#include "engine/engine.h"
#include "retrieval/retrieval.h"
#include "api/core/embed.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void gen_job_unref(srv_gen_job *g) {
    pthread_mutex_lock(&g->mu);
    int left = --g->refs;
    pthread_mutex_unlock(&g->mu);
    if (left) return;
    answer_result_free(&g->a);
    tools_result_free(&g->tr);
    tools_free(g->tools);
    free(g->question);
    free(g->system);
    free(g->history);
    free(g->buf);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g);
}

/* Append one SSE frame ("event: E\ndata: JSON\n\n"; OpenAI streams use data only). */
static void sse_push(srv_gen_job *g, const char *event, json_t *data) {
    char *txt = data ? json_dumps(data, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
    json_decref(data);
    const char *payload = txt ? txt : "[DONE]";
    size_t need = strlen(payload) + (event ? strlen(event) : 0) + 32;
    pthread_mutex_lock(&g->mu);
    if (g->len + need > g->cap) {
        size_t nc = g->cap ? g->cap : 4096;
        while (nc < g->len + need) nc *= 2;
        char *nb = realloc(g->buf, nc);
        if (!nb) { pthread_mutex_unlock(&g->mu); free(txt); return; }
        g->buf = nb;
        g->cap = nc;
    }
    int n = event ? snprintf(g->buf + g->len, g->cap - g->len, "event: %s\ndata: %s\n\n", event, payload)
                  : snprintf(g->buf + g->len, g->cap - g->len, "data: %s\n\n", payload);
    if (n > 0) g->len += (size_t)n;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    free(txt);
}

static json_t *chat_chunk(srv_gen_job *g, json_t *delta, const char *finish) {
    return json_pack("{s:s,s:s,s:I,s:s,s:[{s:i,s:o,s:o}]}", "id", g->id, "object",
                     "chat.completion.chunk", "created", (json_int_t)g->created, "model",
                     g->model_name, "choices", "index", 0, "delta", delta, "finish_reason",
                     finish ? json_string(finish) : json_null());
}

/* Did the client hang up? A streamed job learns it from its response being freed; a
 * plain one peeks at its socket (0 bytes = the peer closed; pipelined bytes are not). */
static int gen_cancelled(void *user) {
    srv_gen_job *g = user;
    pthread_mutex_lock(&g->mu);
    int stop = g->gone || g->s->stopping;
    pthread_mutex_unlock(&g->mu);
    return stop || srv_peer_closed(g->peer_fd);
}

static int on_piece(void *user, const char *piece, size_t len) {
    srv_gen_job *g = user;
    double now = srv_now();
    srv_metrics *m = &g->s->metrics;
    srv_metrics_observe(m, g->n_pieces == 0 ? &m->ttft : &m->itl,
                        now - (g->n_pieces == 0 ? g->t_start : g->t_last));
    g->t_last = now;
    g->n_pieces++;
    if (g->stream) {
        json_t *t = json_stringn(piece, len);
        if (!t) t = json_string("");   /* invalid UTF-8 piece: never happens by contract */
        if (g->chat) sse_push(g, NULL, chat_chunk(g, json_pack("{s:o}", "content", t), NULL));
        else sse_push(g, "token", json_pack("{s:o}", "text", t));
    }
    return gen_cancelled(g);
}

static const char *finish_reason(int32_t stop, int chat) {
    if (stop == MMRAG_STOP_MAX_TOKENS) return "length";
    if (chat) return "stop";
    return mmrag_stop_reason_str(stop);
}

static json_t *citations_json(srv_gen_job *g) { return answer_citations_json(&g->a); }

/* "Sources:" lines for chat clients that show only the content. */
static json_t *sources_text(srv_gen_job *g) {
    char buf[4096];
    size_t len = 0;
    const answer_result *a = &g->a;
    if (a->n_cites) len += (size_t)snprintf(buf, sizeof buf, "\n\nSources:");
    for (int32_t i = 0; i < a->n_cites && len < sizeof buf - 200; i++) {
        const answer_evidence *e = &a->ev[a->cites[i]];
        const retr_hit *h = &a->hits.hits[e->hit];
        len += (size_t)snprintf(buf + len, sizeof buf - len,
                                "\n[%d] %s, page %d, box [%.3f, %.3f, %.3f, %.3f]", i + 1,
                                h->title ? h->title : "", h->page, e->box.x0, e->box.y0,
                                e->box.x1, e->box.y1);
    }
    buf[len < sizeof buf ? len : sizeof buf - 1] = 0;
    return json_string(buf);
}

/* OpenAI's tool_calls array ("index" only in stream deltas). */
static json_t *tool_calls_json(srv_gen_job *g, int indexed) {
    json_t *a = json_array();
    for (int32_t i = 0; a && i < g->tr.n_calls; i++) {
        char id[80];
        snprintf(id, sizeof id, "call_%s_%d", g->id + 9, i);   /* after "chatcmpl-" */
        json_t *c = json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", id, "type", "function", "function",
                              "name", g->tr.calls[i].name, "arguments", g->tr.calls[i].arguments);
        if (c && indexed) json_object_set_new(c, "index", json_integer(i));
        json_array_append_new(a, c);
    }
    return a;
}

static const char *chat_finish(srv_gen_job *g) {
    if (g->tr.n_calls) return "tool_calls";
    if (g->tools_cut) return "length";
    return finish_reason(g->a.stop_reason, 1);
}

static json_t *chat_usage(srv_gen_job *g) {
    int32_t p = g->a.prompt_tokens + g->tr.prompt_tokens, c = g->a.completion_tokens + g->tr.completion_tokens;
    return json_pack("{s:i,s:i,s:i}", "prompt_tokens", p, "completion_tokens", c, "total_tokens", p + c);
}

/* What a chat client reads: the answer, then "Sources:" lines for clients that show only
 * the content; in JSON mode exactly the one JSON value (citations are in the extension
 * field). */
static char *chat_content(srv_gen_job *g) {
    const char *t = g->a.text ? g->a.text : "";
    if (g->json_mode || g->tr.n_calls || g->tools_cut) return strdup(t);
    json_t *src = sources_text(g);
    const char *st = json_string_value(src) ? json_string_value(src) : "";
    size_t al = strlen(t);
    char *content = malloc(al + strlen(st) + 1);
    if (content) {
        memcpy(content, t, al);
        strcpy(content + al, st);
    }
    json_decref(src);
    return content;
}

/* The non-stream chat.completion object. */
static json_t *chat_completion_json(srv_gen_job *g) {
    json_t *msg = json_pack("{s:s,s:o}", "role", "assistant", "citations", citations_json(g));
    if (!msg) return NULL;
    if (g->tr.n_calls) {
        json_object_set_new(msg, "content", json_null());
        json_object_set_new(msg, "tool_calls", tool_calls_json(g, 0));
    } else {
        char *content = chat_content(g);
        json_object_set_new(msg, "content", answer_json_str(content ? content : ""));
        free(content);
    }
    return json_pack("{s:s,s:s,s:I,s:s,s:[{s:i,s:o,s:s}],s:o,s:o,s:b}", "id", g->id, "object",
                     "chat.completion", "created", (json_int_t)g->created, "model", g->model_name,
                     "choices", "index", 0, "message", msg, "finish_reason", chat_finish(g),
                     "usage", chat_usage(g), "citations", citations_json(g), "abstained",
                     g->a.abstained);
}

/* The stream's last chunks: tool calls or sources, the finish chunk with citations, usage. */
static void chat_stream_end(srv_gen_job *g) {
    if (g->tr.n_calls)
        sse_push(g, NULL, chat_chunk(g, json_pack("{s:o}", "tool_calls", tool_calls_json(g, 1)), NULL));
    else if (!g->json_mode && !g->tools_cut)
        sse_push(g, NULL, chat_chunk(g, json_pack("{s:o}", "content", sources_text(g)), NULL));
    json_t *fin = chat_chunk(g, json_object(), chat_finish(g));
    if (fin) json_object_set_new(fin, "citations", citations_json(g));
    if (fin) json_object_set_new(fin, "abstained", json_boolean(g->a.abstained));
    sse_push(g, NULL, fin);
    if (g->include_usage) {   /* OpenAI: one more chunk, no choices, the request's usage */
        json_t *u = json_pack("{s:s,s:s,s:I,s:s,s:[],s:o}", "id", g->id, "object", "chat.completion.chunk",
                              "created", (json_int_t)g->created, "model", g->model_name, "choices",
                              "usage", chat_usage(g));
        sse_push(g, NULL, u);
    }
}

static int status_of(int rc) {
    switch (rc) {
    case ANSWER_ERR_ARG: case ANSWER_ERR_CONTEXT: return 400;
    case ANSWER_ERR_MODEL: return 503;
    case ANSWER_ABORTED: return 499;   /* the client closed the connection (nginx's code) */
    default: return 500;
    }
}

/* The answer core with this request's settings. Returns 0, or -1 with g->err and
 * g->status. */
static int gen_run(srv_gen_job *g) {
    char err[512];
    g->t_start = srv_now();
    retriever *r = srv_query_retriever(g->s, g->coll, err, sizeof err);
    if (!r) {
        snprintf(g->err, sizeof g->err, "retrieval failed: %.400s", err);
        g->status = 500;
        return -1;
    }
    answer_request *rq = &g->rq;
    answer_request_default(rq);
    rq->question = g->question;
    rq->mode = g->mode;
    rq->k = (int32_t)g->sr.k;
    rq->max_tokens = (int32_t)g->max_tokens;
    rq->temperature = (float)g->temperature;
    rq->top_p = (float)g->top_p;
    rq->seed = (uint64_t)g->seed;
    rq->json_mode = g->json_mode;
    rq->show_unsupported = g->show_unsupported;
    rq->system = g->system;
    rq->history = g->history;
    srv_search_opts(&g->sr, &rq->retrieval);
    rq->on_text = on_piece;
    rq->cancelled = gen_cancelled;
    rq->user = g;
    if (g->tools && !g->after_tools) {   /* results after the last question: answer them */
        int trc = tools_run(srv_query_llm(g->s), g->tools, rq, &g->tr, err, sizeof err);
        if (trc != ANSWER_OK) {
            snprintf(g->err, sizeof g->err, "%.500s", err);
            g->status = status_of(trc);
            return -1;
        }
        g->tools_cut = !g->tr.n_calls && !g->tr.answered;
        if (!g->tr.answered) return 0;   /* calls, or cut short: no answer to write */
    }
    struct embed_ctx *emb = srv_query_embedder(g->s);
    int rc = answer_run(r, emb ? embed_textenc(emb) : NULL, srv_query_llm(g->s), rq, &g->a, err,
                        sizeof err);
    if (rc != ANSWER_OK) {
        snprintf(g->err, sizeof g->err, "%.500s", err);
        g->status = status_of(rc);
        return -1;
    }
    return 0;
}


static void *producer_main(void *arg) {
    srv_gen_job *g = arg;
    if (g->chat)   /* OpenAI clients expect the role in the first delta */
        sse_push(g, NULL, chat_chunk(g, json_pack("{s:s,s:s}", "role", "assistant", "content", ""), NULL));
    int rc = gen_run(g);
    if (rc) {
        json_t *e = json_pack("{s:{s:s,s:s,s:i}}", "error", "code", "generation_failed",
                              "message", g->err, "status", g->status);
        sse_push(g, g->chat ? NULL : "error", e);
    } else if (g->chat) {
        chat_stream_end(g);
    } else {
        sse_push(g, "citations", json_pack("{s:o}", "citations", citations_json(g)));
        json_t *all = answer_json(&g->a, &g->rq);   /* the same object as a non-stream reply */
        json_t *t = json_object_get(all, "timings");
        sse_push(g, "done", json_pack("{s:s,s:b,s:s,s:O*,s:o}", "stop_reason", answer_stop_name(&g->a),
                                      "abstained", g->a.abstained, "mode_used",
                                      answer_mode_name(g->a.mode_used), "timings", t, "answer", all));
    }
    if (g->chat) sse_push(g, NULL, NULL);   /* data: [DONE] */
    pthread_mutex_lock(&g->mu);
    g->done = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    srv_server *s = g->s;   /* g is gone after the unref */
    gen_job_unref(g);
    srv_query_producers_add(s, -1);
    return NULL;
}

/* Waits a while for the next piece: a third of the idle timeout (--timeout), at most a
 * second. When none comes (retrieval, a long prefill on a slow machine) it sends an SSE
 * comment, ":\n\n", which clients skip: the connection stays active, so the idle timeout
 * never cuts a slow answer off before its first token. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    srv_gen_job *g = cls;
    int64_t wait_ns = (int64_t)g->s->cfg.timeout_s * 1000000000 / 3;
    if (wait_ns > 1000000000 || wait_ns <= 0) wait_ns = 1000000000;
    pthread_mutex_lock(&g->mu);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += (long)(wait_ns % 1000000000);
    until.tv_sec += (time_t)(wait_ns / 1000000000) + until.tv_nsec / 1000000000;
    until.tv_nsec %= 1000000000;
    while (g->off == g->len && !g->done && !g->s->stopping)
        if (pthread_cond_timedwait(&g->cv, &g->mu, &until) == ETIMEDOUT) break;
    ssize_t n;
    if (g->off < g->len) {
        size_t k = g->len - g->off;
        if (k > max) k = max;
        memcpy(buf, g->buf + g->off, k);
        g->off += k;
        n = (ssize_t)k;
    } else if (g->done) {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    } else if (g->s->stopping || max < 3) {
        n = MHD_CONTENT_READER_END_WITH_ERROR;
    } else {
        memcpy(buf, ":\n\n", 3);
        n = 3;
    }
    pthread_mutex_unlock(&g->mu);
    return n;
}

static void stream_free(void *cls) {
    srv_gen_job *g = cls;
    pthread_mutex_lock(&g->mu);
    g->gone = 1;               /* the producer aborts at its next piece */
    pthread_mutex_unlock(&g->mu);
    gen_job_unref(g);
}

enum MHD_Result srv_gen_start(struct MHD_Connection *c, srv_req *r, srv_gen_job *g) {
    srv_server *s = r->srv;
    g->s = s;
    g->coll = r->coll;
    g->created = (int64_t)time(NULL);
    snprintf(g->id, sizeof g->id, "chatcmpl-%llx%04x", (unsigned long long)g->created,
             (unsigned)(((uintptr_t)g >> 4) & 0xffff));
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->refs = 1;
    g->peer_fd = -1;
    if (!g->stream) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci) g->peer_fd = ci->connect_fd;
        int rc = gen_run(g);
        enum MHD_Result ret;
        if (rc) {
            ret = srv_reply_error(c, r, g->status, g->status == 503 ? "unavailable"
                                  : g->status == 499 ? "client_closed" : "generation_failed",
                                  "%s", g->err);
        } else if (g->chat) {
            json_t *o = chat_completion_json(g);
            ret = o ? srv_reply_json(c, r, 200, o)
                    : srv_reply_error(c, r, 500, "internal", "could not encode the answer");
        } else {
            json_t *o = answer_json(&g->a, &g->rq);
            ret = o ? srv_reply_json(c, r, 200, o)
                    : srv_reply_error(c, r, 500, "internal", "could not encode the answer");
        }
        gen_job_unref(g);
        return ret;
    }
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096,
                                                                  stream_read, g, stream_free);
    if (!resp) { gen_job_unref(g); return MHD_NO; }
    g->refs = 2;   /* the response and the producer */
    srv_query_producers_add(s, 1);
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &at, producer_main, g)) {
        pthread_attr_destroy(&at);
        srv_query_producers_add(s, -1);
        g->refs = 1;
        MHD_destroy_response(resp);   /* runs stream_free: drops the last reference */
        return srv_reply_error(c, r, 503, "overloaded", "cannot start a generation thread");
    }
    pthread_attr_destroy(&at);
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    return srv_reply_response(c, r, 200, resp);
}
