/* api/server/server_query.c — /v1/search, /v1/ask, /v1/chat/completions; the shared text encoder
 * and region localizer (used by /v1/locate in server_locate.c).
 *
 * Search goes through retrieval/ (HNSW text + LSH image + BM25, fused) with one shared
 * retriever per collection (its own store handle). Without a text encoder the retriever
 * runs BM25 only. Ask/chat number the hits as evidence, generate with the engine and
 * stream pieces as server-sent events from a producer thread; the HTTP thread only
 * copies queued bytes out, so a client that goes away aborts the generation. */
#include "api/server/server_internal.h"
#include "api/core/embed.h"
#include "engine/engine.h"
#include "engine/vpe.h"
#include "index/store.h"
#include "retrieval/retrieval.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

json_t *srv_box_json(const store_box *b);

typedef struct coll_retr {
    srv_coll *coll;
    store *st;
    retriever *r;
    struct coll_retr *next;
} coll_retr;

typedef struct {
    embed_ctx *emb;
    char emb_err[256];
    vpe *vpe;                      /* over emb's text encoder; NULL without it */
    pthread_mutex_t mu;            /* retrievers list, engine load, sessions */
    pthread_cond_t cv;
    coll_retr *retrs;
    struct mmrag_engine *eng;
    int eng_tried;
    char eng_err[512];
    struct mmrag_session **sess;   /* idle sessions */
    int n_sess, n_sess_made;
    int producers;                 /* running stream threads */
    char model_path[4096];
} qstate;

struct embed_ctx *srv_query_embedder(srv_server *s) { return ((qstate *)s->query)->emb; }

struct vpe *srv_query_vpe(srv_server *s, const char **why) {
    qstate *q = s->query;
    if (!q->vpe && why) *why = q->emb_err[0] ? q->emb_err : "no text encoder";
    return q->vpe;
}

int srv_query_init(srv_server *s, char *err, size_t errlen) {
    qstate *q = calloc(1, sizeof *q);
    if (!q) { snprintf(err, errlen, "out of memory"); return -1; }
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    if (embed_create(s->cfg.models, &q->emb, q->emb_err, sizeof q->emb_err))
        fprintf(stderr, "mmrag serve: no text encoder (%s): search runs BM25 only\n", q->emb_err);
    else if (vpe_create(embed_textenc(q->emb), NULL, &q->vpe, q->emb_err, sizeof q->emb_err))
        fprintf(stderr, "mmrag serve: %s: /v1/locate is unavailable\n", q->emb_err);
    const char *m = s->cfg.models ? s->cfg.models : getenv("MMRAG_MODELS");
    snprintf(q->model_path, sizeof q->model_path, "%s/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
             m && *m ? m : "models");
    const char *mp = getenv("MMRAG_LLM");
    if (mp && *mp) snprintf(q->model_path, sizeof q->model_path, "%s", mp);
    if (s->cfg.gen_slots <= 0) s->cfg.gen_slots = 1;
    q->sess = calloc((size_t)s->cfg.gen_slots, sizeof *q->sess);
    if (!q->sess) { free(q); snprintf(err, errlen, "out of memory"); return -1; }
    s->query = q;
    return 0;
}

void srv_query_free(srv_server *s) {
    qstate *q = s->query;
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    while (q->producers > 0) pthread_cond_wait(&q->cv, &q->mu);
    pthread_mutex_unlock(&q->mu);
    for (coll_retr *c = q->retrs, *n; c; c = n) {
        n = c->next;
        retr_free(c->r);
        store_close(c->st);
        free(c);
    }
    for (int i = 0; i < q->n_sess; i++) mmrag_session_free(q->sess[i]);
    free(q->sess);
    mmrag_engine_free(q->eng);
    vpe_free(q->vpe);
    embed_free(q->emb);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q);
    s->query = NULL;
}

/* The collection's retriever, created on first use. */
static retriever *get_retriever(srv_server *s, srv_coll *coll, char *err, size_t errlen) {
    qstate *q = s->query;
    pthread_mutex_lock(&q->mu);
    for (coll_retr *c = q->retrs; c; c = c->next)
        if (c->coll == coll) { pthread_mutex_unlock(&q->mu); return c->r; }
    coll_retr *c = calloc(1, sizeof *c);
    retriever *r = NULL;
    if (!c) { snprintf(err, errlen, "out of memory"); goto out; }
    if (store_open(coll->dir, NULL, &c->st, err, errlen) != STORE_OK) { free(c); goto out; }
    retr_config rc;
    retr_config_default(&rc);
    if (q->emb) {
        rc.text.model = embed_model_id(q->emb);
        rc.text.dim = embed_dim(q->emb);
        rc.text.encode = retr_textenc_encode;
        rc.text.user = embed_textenc(q->emb);
        rc.image.model = embed_model_id(q->emb);
        rc.image.dim = embed_dim(q->emb);
    }
    if (retr_create(c->st, &rc, &c->r, err, errlen)) { store_close(c->st); free(c); goto out; }
    c->coll = coll;
    c->next = q->retrs;
    q->retrs = c;
    r = c->r;
out:
    pthread_mutex_unlock(&q->mu);
    return r;
}

/* ---- request validation ------------------------------------------------------------ */
typedef struct {
    const char *query;
    int64_t k;
    int64_t docs[64];
    int32_t n_docs;
    int64_t page_min, page_max;
    int32_t kind;
    double weight[RETR_NSRC];
} search_req;

/* Request field helpers: see server_internal.h. */
int srv_json_int(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out, char *msg,
                 size_t ml) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v)) { snprintf(msg, ml, "\"%s\" must be an integer", key); return -1; }
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) {
        snprintf(msg, ml, "\"%s\" must be in %lld..%lld", key, (long long)lo, (long long)hi);
        return -1;
    }
    *out = x;
    return 0;
}

int srv_json_num(json_t *o, const char *key, double lo, double hi, double *out, char *msg,
                 size_t ml) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) { snprintf(msg, ml, "\"%s\" must be a number", key); return -1; }
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi)) { snprintf(msg, ml, "\"%s\" must be in %g..%g", key, lo, hi); return -1; }
    *out = x;
    return 0;
}

static int opt_bool(json_t *o, const char *key, int *out, char *msg, size_t ml) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) { snprintf(msg, ml, "\"%s\" must be true or false", key); return -1; }
    *out = json_is_true(v);
    return 0;
}

static int parse_search_opts(json_t *o, search_req *sr, char *msg, size_t ml) {
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

int srv_json_text(json_t *o, const char *key, const char **out, char *msg, size_t ml) {
    json_t *q = json_object_get(o, key);
    if (!q || !json_is_string(q)) { snprintf(msg, ml, "\"%s\" (a string) is required", key); return -1; }
    size_t n = json_string_length(q);
    if (n == 0 || n > 4096) { snprintf(msg, ml, "\"%s\" must be 1..4096 characters", key); return -1; }
    *out = json_string_value(q);
    return 0;
}

static int run_search(srv_server *s, srv_coll *coll, const search_req *sr, retr_result *res,
                      char *err, size_t errlen) {
    memset(res, 0, sizeof *res);
    retriever *r = get_retriever(s, coll, err, errlen);
    if (!r) return -1;
    retr_opts o;
    retr_opts_default(&o);
    o.k = (int32_t)sr->k;
    o.docs = sr->n_docs ? sr->docs : NULL;
    o.n_docs = sr->n_docs;
    o.page_min = (int32_t)sr->page_min;
    o.page_max = (int32_t)sr->page_max;
    o.kind = sr->kind;
    for (int i = 0; i < RETR_NSRC; i++) o.weight[i] = (float)sr->weight[i];
    return retr_search(r, sr->query, &o, res, err, errlen);
}

static json_t *hit_json(const retr_hit *h, int n) {
    static const char *const src[RETR_NSRC] = {"text", "image", "bm25"};
    json_t *scores = json_object(), *ranks = json_object();
    for (int i = 0; i < RETR_NSRC; i++) {
        if (!h->rank[i]) continue;
        json_object_set_new(scores, src[i], json_real(h->score[i]));
        json_object_set_new(ranks, src[i], json_integer(h->rank[i]));
    }
    json_t *o = json_pack("{s:I,s:I,s:s,s:i,s:s,s:o,s:I,s:s,s:s,s:o,s:o,s:f}", "chunk_id",
                          (json_int_t)h->chunk_id, "document_id", (json_int_t)h->doc, "title",
                          h->title ? h->title : "", "page", h->page, "kind",
                          store_chunk_kind_name(h->kind), "box", srv_box_json(&h->box), "image_id",
                          (json_int_t)h->image_id, "text", h->text ? h->text : "", "snippet",
                          h->snippet ? h->snippet : "", "scores", scores, "ranks", ranks, "fused",
                          h->fused);
    if (o && n > 0) json_object_set_new(o, "n", json_integer(n));
    return o;
}

static json_t *hits_json(const retr_result *res, int numbered) {
    json_t *a = json_array();
    for (int32_t i = 0; i < res->n; i++) json_array_append_new(a, hit_json(&res->hits[i], numbered ? i + 1 : 0));
    return a;
}

enum MHD_Result srv_handle_search(struct MHD_Connection *c, srv_req *r) {
    enum MHD_Result ret;
    json_t *body = srv_body_object(c, r, &ret);
    if (!body) return ret;
    search_req sr = {0};
    char msg[256];
    if (srv_json_text(body, "query", &sr.query, msg, sizeof msg) || parse_search_opts(body, &sr, msg, sizeof msg)) {
        json_decref(body);
        return srv_reply_error(c, r, 400, "invalid_request", "%s", msg);
    }
    retr_result res;
    char err[512];
    double t0 = srv_now();
    int rc = run_search(r->srv, r->coll, &sr, &res, err, sizeof err);
    json_decref(body);
    if (rc) return srv_reply_error(c, r, 500, "search_failed", "%s", err);
    json_t *o = json_pack("{s:o,s:{s:f,s:f,s:f},s:{s:f,s:f,s:f}}", "hits", hits_json(&res, 0),
                          "weights", "text", (double)res.weights.w[RETR_SRC_TEXT], "image",
                          (double)res.weights.w[RETR_SRC_IMAGE], "bm25",
                          (double)res.weights.w[RETR_SRC_BM25], "timings", "encode_ms",
                          res.encode_ms, "search_ms", res.search_ms, "total_ms",
                          (srv_now() - t0) * 1e3);
    retr_result_free(&res);
    return srv_reply_json(c, r, 200, o);
}

/* ---- generation ----------------------------------------------------------------------- */
static struct mmrag_engine *get_engine(srv_server *s, char *err, size_t errlen) {
    qstate *q = s->query;
    pthread_mutex_lock(&q->mu);
    if (!q->eng && !q->eng_tried) {
        q->eng_tried = 1;
        if (access(q->model_path, R_OK)) {
            snprintf(q->eng_err, sizeof q->eng_err, "language model %.300s: %.100s", q->model_path,
                     strerror(errno));
        } else {
            struct mmrag_engine_params p = mmrag_engine_default_params();
            p.n_threads = s->cfg.gen_threads;
            p.n_ctx = 4096;
            q->eng = mmrag_engine_init_from_file(q->model_path, p, q->eng_err, sizeof q->eng_err);
        }
    }
    struct mmrag_engine *e = q->eng;
    if (!e) snprintf(err, errlen, "%s", q->eng_err);
    pthread_mutex_unlock(&q->mu);
    return e;
}

static struct mmrag_session *session_acquire(srv_server *s, struct mmrag_engine *e, char *err,
                                             size_t errlen) {
    qstate *q = s->query;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        if (q->n_sess > 0) {
            struct mmrag_session *ss = q->sess[--q->n_sess];
            pthread_mutex_unlock(&q->mu);
            return ss;
        }
        if (q->n_sess_made < s->cfg.gen_slots) break;
        pthread_cond_wait(&q->cv, &q->mu);
    }
    q->n_sess_made++;
    pthread_mutex_unlock(&q->mu);
    struct mmrag_session *ss = mmrag_session_create(e, err, errlen);
    if (!ss) {
        pthread_mutex_lock(&q->mu);
        q->n_sess_made--;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
    }
    return ss;
}

static void session_release(srv_server *s, struct mmrag_session *ss) {
    qstate *q = s->query;
    pthread_mutex_lock(&q->mu);
    q->sess[q->n_sess++] = ss;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

/* A generation request, shared by the non-stream path and the producer thread. */
typedef struct gen_job {
    srv_server *s;
    srv_coll *coll;
    int chat;                  /* OpenAI format */
    int stream;
    search_req sr;
    char *question;            /* retrieval query and user question */
    char *system;              /* extra system text from chat clients, or NULL */
    char *history;             /* earlier chat turns as text, or NULL */
    int64_t max_tokens;
    double temperature, top_p;
    int64_t seed;
    int json_mode;
    char model_name[64];
    char id[48];
    int64_t created;
    /* results */
    retr_result res;
    struct mmrag_gen_result gen;
    double retrieval_ms, t_start, t_last;
    int n_pieces;
    /* stream buffer */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *buf; size_t len, cap, off;
    int done, gone, refs;
    int status;                /* HTTP status for the non-stream path */
    char err[512];
} gen_job;

static void gen_job_unref(gen_job *g) {
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
static void sse_push(gen_job *g, const char *event, json_t *data) {
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

static json_t *chat_chunk(gen_job *g, json_t *delta, const char *finish) {
    return json_pack("{s:s,s:s,s:I,s:s,s:[{s:i,s:o,s:o}]}", "id", g->id, "object",
                     "chat.completion.chunk", "created", (json_int_t)g->created, "model",
                     g->model_name, "choices", "index", 0, "delta", delta, "finish_reason",
                     finish ? json_string(finish) : json_null());
}

static int on_piece(void *user, const char *piece, size_t len) {
    gen_job *g = user;
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
static char *build_user_prompt(gen_job *g) {
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

static json_t *citations_json(gen_job *g) { return hits_json(&g->res, 1); }

static json_t *sources_text(gen_job *g) {
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
static int gen_run(gen_job *g) {
    char err[512];
    g->t_start = srv_now();
    g->sr.query = g->question;
    if (run_search(g->s, g->coll, &g->sr, &g->res, err, sizeof err)) {
        snprintf(g->err, sizeof g->err, "retrieval failed: %.400s", err);
        g->status = 500;
        return -1;
    }
    g->retrieval_ms = (srv_now() - g->t_start) * 1e3;
    struct mmrag_engine *e = get_engine(g->s, err, sizeof err);
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
    struct mmrag_session *ss = session_acquire(g->s, e, err, sizeof err);
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
    session_release(g->s, ss);
    free(prompt);
    return rc < 0 ? -1 : 0;
}

static json_t *timings_json(gen_job *g) {
    return json_pack("{s:f,s:f,s:f,s:f,s:i,s:i}", "retrieval_ms", g->retrieval_ms, "ttft_ms",
                     g->gen.ttft_ms, "prompt_ms", g->gen.prompt_ms, "decode_ms", g->gen.decode_ms,
                     "prompt_tokens", g->gen.n_prompt, "completion_tokens", g->gen.n_gen);
}

static void *producer_main(void *arg) {
    gen_job *g = arg;
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
    qstate *q = g->s->query;
    gen_job_unref(g);
    pthread_mutex_lock(&q->mu);
    q->producers--;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* Waits a while for the next piece: a third of the idle timeout (--timeout), at most a
 * second. When none comes (retrieval, a long prefill on a slow machine) it sends an SSE
 * comment, ":\n\n", which clients skip: the connection stays active, so the idle timeout
 * never cuts a slow answer off before its first token. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    gen_job *g = cls;
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
    gen_job *g = cls;
    pthread_mutex_lock(&g->mu);
    g->gone = 1;               /* the producer aborts at its next piece */
    pthread_mutex_unlock(&g->mu);
    gen_job_unref(g);
}

static enum MHD_Result start_generation(struct MHD_Connection *c, srv_req *r, gen_job *g) {
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
    qstate *q = s->query;
    pthread_mutex_lock(&q->mu);
    q->producers++;
    pthread_mutex_unlock(&q->mu);
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &at, producer_main, g)) {
        pthread_attr_destroy(&at);
        pthread_mutex_lock(&q->mu);
        q->producers--;
        pthread_mutex_unlock(&q->mu);
        g->refs = 1;
        MHD_destroy_response(resp);   /* runs stream_free: drops the last reference */
        return srv_reply_error(c, r, 503, "overloaded", "cannot start a generation thread");
    }
    pthread_attr_destroy(&at);
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    return srv_reply_response(c, r, 200, resp);
}

static int parse_gen_opts(json_t *o, gen_job *g, char *msg, size_t ml) {
    g->max_tokens = 200;
    g->temperature = 0;
    g->top_p = 1;
    if (srv_json_int(o, "max_tokens", 1, 2048, &g->max_tokens, msg, ml) ||
        srv_json_num(o, "temperature", 0, 2, &g->temperature, msg, ml) ||
        srv_json_num(o, "top_p", 0.01, 1, &g->top_p, msg, ml) ||
        srv_json_int(o, "seed", 0, (int64_t)1 << 53, &g->seed, msg, ml) ||
        opt_bool(o, "stream", &g->stream, msg, ml))
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
    return 0;
}

enum MHD_Result srv_handle_ask(struct MHD_Connection *c, srv_req *r) {
    enum MHD_Result ret;
    json_t *body = srv_body_object(c, r, &ret);
    if (!body) return ret;
    gen_job *g = calloc(1, sizeof *g);
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
    return start_generation(c, r, g);
}

/* Chat messages: the last user message is the question; earlier turns become history. */
static int parse_messages(json_t *msgs, gen_job *g, char *msg, size_t ml) {
    if (!json_is_array(msgs) || json_array_size(msgs) == 0 || json_array_size(msgs) > 256) {
        snprintf(msg, ml, "\"messages\" must be a non-empty array (at most 256)");
        return -1;
    }
    size_t n = json_array_size(msgs), last_user = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(msgs, i);
        json_t *role = json_is_object(m) ? json_object_get(m, "role") : NULL;
        json_t *content = json_is_object(m) ? json_object_get(m, "content") : NULL;
        if (!json_is_string(role) || !json_is_string(content)) {
            snprintf(msg, ml, "messages[%zu] must have string \"role\" and \"content\"", i);
            return -1;
        }
        const char *rs = json_string_value(role);
        if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant")) {
            snprintf(msg, ml, "messages[%zu].role must be system, user or assistant", i);
            return -1;
        }
        if (!strcmp(rs, "user")) last_user = i;
    }
    if (last_user == (size_t)-1) { snprintf(msg, ml, "\"messages\" needs a user message"); return -1; }
    const char *qs = json_string_value(json_object_get(json_array_get(msgs, last_user), "content"));
    if (!*qs || strlen(qs) > 4096) { snprintf(msg, ml, "the user message must be 1..4096 characters"); return -1; }
    g->question = strdup(qs);
    size_t hcap = 1, hlen = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == last_user) continue;
        hcap += json_string_length(json_object_get(json_array_get(msgs, i), "content")) + 16;
    }
    char *hist = malloc(hcap), *sys = NULL;
    if (!hist || !g->question) { free(hist); snprintf(msg, ml, "out of memory"); return -1; }
    hist[0] = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == last_user) continue;
        json_t *m = json_array_get(msgs, i);
        const char *rs = json_string_value(json_object_get(m, "role"));
        const char *cs = json_string_value(json_object_get(m, "content"));
        if (!strcmp(rs, "system")) { if (!sys) sys = strdup(cs); continue; }
        hlen += (size_t)snprintf(hist + hlen, hcap - hlen, "%s: %s\n", rs, cs);
    }
    if (hlen) g->history = hist;
    else free(hist);
    g->system = sys;
    return 0;
}

enum MHD_Result srv_handle_chat(struct MHD_Connection *c, srv_req *r) {
    enum MHD_Result ret;
    json_t *body = srv_body_object(c, r, &ret);
    if (!body) return ret;
    gen_job *g = calloc(1, sizeof *g);
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
    if (parse_messages(json_object_get(body, "messages"), g, msg, sizeof msg) ||
        parse_gen_opts(body, g, msg, sizeof msg))
        goto bad;
    json_t *mm = json_object_get(body, "mmrag");   /* retrieval options, our extension */
    if (mm && !json_is_null(mm)) {
        if (!json_is_object(mm)) { snprintf(msg, sizeof msg, "\"mmrag\" must be an object"); goto bad; }
        if (parse_search_opts(mm, &g->sr, msg, sizeof msg)) goto bad;
    } else {
        g->sr.k = 5;
        g->sr.kind = -1;
        for (int i = 0; i < RETR_NSRC; i++) g->sr.weight[i] = -1;
    }
    json_decref(body);
    return start_generation(c, r, g);
bad:
    json_decref(body);
    free(g->question);
    free(g->system);
    free(g->history);
    free(g);
    return srv_reply_error(c, r, 400, "invalid_request", "%s", msg);
}
