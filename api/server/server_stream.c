/* api/server/server_stream.c — one generation job for /v1/ask and /v1/chat/completions:
 * retrieval, the numbered-evidence prompt and the engine, answered whole or streamed.
 *
 * A streamed answer is produced by its own thread, which queues server-sent events
 * (event: token / citations / done, or OpenAI chunks ending in data: [DONE]); the HTTP
 * thread only copies queued bytes out, so a client that goes away aborts the generation.
 * The job is reference counted: the response and the producer each hold one. */
#include "api/server/server_internal.h"
#include "engine/engine.h"
#include "retrieval/retrieval.h"

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
    retr_result_free(&g->res);
    mmrag_gen_result_free(&g->gen);
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
    pthread_mutex_lock(&g->mu);
    int stop = g->gone || g->s->stopping;
    pthread_mutex_unlock(&g->mu);
    return stop;
}

/* Evidence block, numbered like the citations; bounded so the prompt stays small. */
static char *build_user_prompt(srv_gen_job *g) {
    size_t cap = 16384, len = 0;
    char *p = malloc(cap);
    if (!p) return NULL;
    len += (size_t)snprintf(p + len, cap - len, "Evidence:\n");
    for (int32_t i = 0; i < g->res.n && len + 1200 < cap - 6000; i++) {
        const retr_hit *h = &g->res.hits[i];
        int tl = h->text ? (int)strlen(h->text) : 0;
        if (tl > 900) tl = 900;
        len += (size_t)snprintf(p + len, cap - len, "[%d] (%s, page %d) %.*s\n", i + 1,
                                h->title ? h->title : "", h->page, tl, h->text ? h->text : "");
    }
    if (g->history) {
        int hl = (int)strlen(g->history);
        if (hl > 2000) hl = 2000;
        len += (size_t)snprintf(p + len, cap - len, "\nConversation so far:\n%.*s\n", hl, g->history);
    }
    snprintf(p + len, cap - len, "\nQuestion: %s\nAnswer using the evidence and cite it as [n].",
             g->question);
    return p;
}

static const char *finish_reason(int32_t stop, int chat) {
    if (stop == MMRAG_STOP_MAX_TOKENS) return "length";
    if (chat) return "stop";
    return mmrag_stop_reason_str(stop);
}

static json_t *citations_json(srv_gen_job *g) { return srv_hits_json(&g->res, 1); }

static json_t *sources_text(srv_gen_job *g) {
    char buf[4096];
    size_t len = 0;
    if (g->res.n) len += (size_t)snprintf(buf, sizeof buf, "\n\nSources:");
    for (int32_t i = 0; i < g->res.n && len < sizeof buf - 200; i++) {
        const retr_hit *h = &g->res.hits[i];
        len += (size_t)snprintf(buf + len, sizeof buf - len,
                                "\n[%d] %s, page %d, box [%.3f, %.3f, %.3f, %.3f]", i + 1,
                                h->title ? h->title : "", h->page, h->box.x0, h->box.y0,
                                h->box.x1, h->box.y1);
    }
    buf[len < sizeof buf ? len : sizeof buf - 1] = 0;
    return json_string(buf);
}

/* Retrieval + generation. Returns 0, or -1 with g->err and g->status. */
static int gen_run(srv_gen_job *g) {
    char err[512];
    g->t_start = srv_now();
    g->sr.query = g->question;
    if (srv_search_run(g->s, g->coll, &g->sr, &g->res, err, sizeof err)) {
        snprintf(g->err, sizeof g->err, "retrieval failed: %.400s", err);
        g->status = 500;
        return -1;
    }
    g->retrieval_ms = (srv_now() - g->t_start) * 1e3;
    struct mmrag_engine *e = srv_query_engine(g->s, err, sizeof err);
    if (!e) {
        snprintf(g->err, sizeof g->err, "generation unavailable: %.400s", err);
        g->status = 503;
        return -1;
    }
    char *user = build_user_prompt(g);
    char sys[1024];
    snprintf(sys, sizeof sys, "You are a helpful assistant. Answer briefly from the numbered "
             "evidence and cite sources as [n].%s%s", g->system ? " " : "", g->system ? g->system : "");
    int32_t need = user ? mmrag_engine_chat_prompt(e, sys, user, NULL, 0) : 0;
    if (need < 0) need = -need;
    char *prompt = user ? malloc((size_t)need + 1) : NULL;
    if (!prompt || mmrag_engine_chat_prompt(e, sys, user, prompt, (size_t)need + 1) < 0) {
        free(user);
        free(prompt);
        snprintf(g->err, sizeof g->err, "out of memory building the prompt");
        g->status = 500;
        return -1;
    }
    free(user);
    struct mmrag_session *ss = srv_query_session_acquire(g->s, e, err, sizeof err);
    if (!ss) {
        free(prompt);
        snprintf(g->err, sizeof g->err, "cannot create a generation session: %.400s", err);
        g->status = 503;
        return -1;
    }
    struct mmrag_gen_params p = mmrag_gen_default_params();
    p.max_tokens = (int32_t)g->max_tokens;
    p.sampling.temperature = (float)g->temperature;
    p.sampling.top_p = (float)g->top_p;
    p.sampling.seed = (uint64_t)g->seed;
    p.json_mode = g->json_mode;
    p.on_text = on_piece;
    p.user_data = g;
    g->t_start = srv_now();
    int rc = mmrag_session_generate(ss, prompt, &p, &g->gen);
    if (rc < 0) {
        snprintf(g->err, sizeof g->err, "generation failed: %.400s", mmrag_session_errmsg(ss));
        g->status = rc == MMRAG_ENGINE_CONTEXT_FULL ? 400 : 500;
    }
    srv_query_session_release(g->s, ss);
    free(prompt);
    return rc < 0 ? -1 : 0;
}

static json_t *timings_json(srv_gen_job *g) {
    return json_pack("{s:f,s:f,s:f,s:f,s:i,s:i}", "retrieval_ms", g->retrieval_ms, "ttft_ms",
                     g->gen.ttft_ms, "prompt_ms", g->gen.prompt_ms, "decode_ms", g->gen.decode_ms,
                     "prompt_tokens", g->gen.n_prompt, "completion_tokens", g->gen.n_gen);
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
        sse_push(g, NULL, chat_chunk(g, json_pack("{s:o}", "content", sources_text(g)), NULL));
        json_t *fin = chat_chunk(g, json_object(), finish_reason(g->gen.stop_reason, 1));
        if (fin) json_object_set_new(fin, "citations", citations_json(g));
        sse_push(g, NULL, fin);
    } else {
        sse_push(g, "citations", json_pack("{s:o}", "citations", citations_json(g)));
        sse_push(g, "done", json_pack("{s:s,s:o}", "stop_reason",
                                      mmrag_stop_reason_str(g->gen.stop_reason), "timings",
                                      timings_json(g)));
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
    if (!g->stream) {
        int rc = gen_run(g);
        enum MHD_Result ret;
        if (rc) {
            ret = srv_reply_error(c, r, g->status, g->status == 503 ? "unavailable" : "generation_failed",
                                  "%s", g->err);
        } else if (g->chat) {
            char *content = NULL;
            json_t *src = sources_text(g);
            size_t al = strlen(g->gen.text ? g->gen.text : "");
            const char *st = json_string_value(src);
            content = malloc(al + strlen(st) + 1);
            if (content) {
                memcpy(content, g->gen.text ? g->gen.text : "", al);
                strcpy(content + al, st);
            }
            json_decref(src);
            json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:[{s:i,s:{s:s,s:s},s:s}],s:{s:i,s:i,s:i},s:o}",
                                  "id", g->id, "object", "chat.completion", "created",
                                  (json_int_t)g->created, "model", g->model_name, "choices", "index",
                                  0, "message", "role", "assistant", "content",
                                  content ? content : "", "finish_reason",
                                  finish_reason(g->gen.stop_reason, 1), "usage", "prompt_tokens",
                                  g->gen.n_prompt, "completion_tokens", g->gen.n_gen,
                                  "total_tokens", g->gen.n_prompt + g->gen.n_gen, "citations",
                                  citations_json(g));
            free(content);
            ret = o ? srv_reply_json(c, r, 200, o)
                    : srv_reply_error(c, r, 500, "internal", "could not encode the answer");
        } else {
            json_t *o = json_pack("{s:s,s:o,s:s,s:o}", "answer", g->gen.text ? g->gen.text : "",
                                  "citations", citations_json(g), "stop_reason",
                                  mmrag_stop_reason_str(g->gen.stop_reason), "timings",
                                  timings_json(g));
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
