/* api/server/server.c — daemon setup, routing, request bodies with limits, auth, replies. */
#include "api/server/server_internal.h"
#include "index/store.h"
#include "api/core/isolate.h"

#include <arpa/inet.h>
#include <math.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const route_names[R_COUNT] = {
    "none", "web", "openapi", "healthz", "metrics", "documents_upload", "documents_list",
    "documents_get", "documents_delete", "page_png", "jobs_get", "search", "ask",
    "chat_completions", "locate", "models", "models_get", "embeddings", "not_found",
};
const char *srv_route_name(int r) { return r >= 0 && r < R_COUNT ? route_names[r] : "none"; }

double srv_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void srv_config_default(srv_config *c) {
    memset(c, 0, sizeof *c);
    c->listen = "127.0.0.1:8080";
    c->db = ".mmrag";
    c->max_upload = 64ll << 20;
    c->max_body = 1ll << 20;
    c->max_inflight = 64;
    c->timeout_s = 30;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    c->ingest_workers = ncpu < 2 ? 2 : ncpu > 4 ? 4 : (int32_t)ncpu;   /* a slow PDF never blocks the queue */
    c->queue_max = 16;
    isolate_limits l;
    isolate_limits_default(&l);
    c->ingest_isolate = l.enabled;
    c->ingest_timeout_s = l.timeout_s;
    c->ingest_mem_mb = l.mem_mb;
    c->ingest_cpu_s = l.cpu_s;
    c->rate_limit = 20;
}

int srv_peer_closed(int fd) {
    char ch;
    return fd >= 0 && recv(fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

void srv_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int ms) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += (long)(ms % 1000) * 1000000;
    until.tv_sec += ms / 1000 + until.tv_nsec / 1000000000;
    until.tv_nsec %= 1000000000;
    pthread_cond_timedwait(cv, mu, &until);
}

uint16_t srv_port(const srv_server *s) { return s ? s->port : 0; }

/* ---- collections ------------------------------------------------------------------- */
/* The standby's URL of collection `name` (NULL: the one --db names). */
static int read_url(const srv_config *cfg, const char *name, char *out, size_t len) {
    out[0] = 0;
    if (!cfg->db_read) return 0;
    if (name) return store_collection_db(cfg->db_read, name, out, len);
    /* a standby URL that names its collection is taken as it is; so is one beside a bad
     * --db, whose own open at start-up says what is wrong */
    char coll[64];
    if (strstr(cfg->db_read, "collection=") || store_collection_of(cfg->db, coll, sizeof coll))
        return snprintf(out, len, "%s", cfg->db_read) >= (int)len ? -1 : 0;
    return store_collection_db(cfg->db_read, coll, out, len);
}

/* keyed: a key's collection under --db (else the collection --db names) */
static srv_coll *coll_new(const srv_config *cfg, const char *name, const char *dir, int keyed) {
    srv_coll *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    if (read_url(cfg, keyed ? name : NULL, c->read_dir, sizeof c->read_dir)) { free(c); return NULL; }
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    c->shared = store_is_url(dir);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    return c;
}

static void coll_free(srv_coll *c) {
    if (!c) return;
    for (int i = 0; i < c->n_open; i++) store_close(c->pool[i]);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

/* Hand out an idle handle, open a new one (up to SRV_POOL), or wait for one. */
struct store *srv_coll_acquire(srv_coll *c, char *err, size_t errlen) {
    pthread_mutex_lock(&c->mu);
    for (;;) {
        for (int i = 0; i < c->n_open; i++)
            if (!c->busy[i]) { c->busy[i] = 1; pthread_mutex_unlock(&c->mu); return c->pool[i]; }
        if (c->n_open < SRV_POOL) break;
        pthread_cond_wait(&c->cv, &c->mu);
    }
    int slot = c->n_open++;
    c->busy[slot] = 1;
    c->pool[slot] = NULL;
    pthread_mutex_unlock(&c->mu);
    store *s = NULL;
    int rc = store_open(c->dir, NULL, &s, err, errlen);
    pthread_mutex_lock(&c->mu);
    if (rc != STORE_OK) {
        /* give the slot back: move the last opened handle into it */
        c->n_open--;
        if (slot != c->n_open) { c->pool[slot] = c->pool[c->n_open]; c->busy[slot] = c->busy[c->n_open]; }
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        return NULL;
    }
    c->pool[slot] = s;
    pthread_mutex_unlock(&c->mu);
    return s;
}

/* A handle for searches: on the standby (read-only) with --db-read, else on dir. */
int srv_coll_open_read(const srv_coll *c, struct store **out, char *err, size_t errlen) {
    store_options o;
    store_options_default(&o);
    o.readonly = c->read_dir[0] != 0;
    return store_open(c->read_dir[0] ? c->read_dir : c->dir, &o, out, err, errlen) == STORE_OK ? 0 : -1;
}

void srv_coll_release(srv_coll *c, struct store *s) {
    if (!s) return;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->n_open; i++)
        if (c->pool[i] == s) { c->busy[i] = 0; break; }
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* ---- replies -------------------------------------------------------------------------- */
static void add_common_headers(struct MHD_Response *resp, const srv_req *r) {
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    if (r->id[0]) MHD_add_response_header(resp, "X-Request-Id", r->id);
}

enum MHD_Result srv_reply_response(struct MHD_Connection *c, srv_req *r, int status,
                                   struct MHD_Response *resp) {
    if (!resp) return MHD_NO;
    add_common_headers(resp, r);
    if (status == MHD_HTTP_SERVICE_UNAVAILABLE) MHD_add_response_header(resp, "Retry-After", "1");
    if (status == MHD_HTTP_TOO_MANY_REQUESTS) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", r->retry_after > 0 ? r->retry_after : 1);
        MHD_add_response_header(resp, "Retry-After", ra);
    }
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    if (ret == MHD_YES) { r->status = status; r->responded = 1; }
    return ret;
}

enum MHD_Result srv_reply_raw(struct MHD_Connection *c, srv_req *r, int status,
                              const char *ctype, const void *data, size_t len, int copy) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        len, (void *)data, copy ? MHD_RESPMEM_MUST_COPY : MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", ctype);
    return srv_reply_response(c, r, status, resp);
}

enum MHD_Result srv_reply_json(struct MHD_Connection *c, srv_req *r, int status, json_t *j) {
    char *txt = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
    json_decref(j);
    /* a body that could not be built (jansson refuses NaN and invalid UTF-8) is a 500 the
     * client can read, never a connection closed without a reply (found by the server
     * fuzz target) */
    if (!txt && status < 500)
        return srv_reply_error(c, r, 500, "internal", "the response could not be encoded");
    if (!txt) return MHD_NO;
    size_t n = strlen(txt);
    struct MHD_Response *resp = MHD_create_response_from_buffer(n, txt, MHD_RESPMEM_MUST_FREE);
    if (!resp) { free(txt); return MHD_NO; }
    MHD_add_response_header(resp, "Content-Type", "application/json");
    return srv_reply_response(c, r, status, resp);
}

/* OpenAI's error type for a status: its clients pick their exception class by status and
 * show type and param. */
static const char *error_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    default: return status < 500 ? "invalid_request_error" : "server_error";
    }
}

/* {"error": {message, type, param, code, status, request_id}}: OpenAI's shape plus ours.
 * param is the request field a message starts with ("\"input\" must ..."), else null. */
static json_t *error_json(int status, const char *code, const char *msg, const char *id) {
    json_t *param = json_null();
    const char *q = msg[0] == '"' ? strchr(msg + 1, '"') : NULL;
    if (q && q - msg > 1 && q - msg < 64) param = json_stringn(msg + 1, (size_t)(q - msg - 1));
    return json_pack("{s:{s:s,s:s,s:o,s:s,s:i,s:s}}", "error", "message", msg, "type",
                     error_type(status), "param", param ? param : json_null(), "code", code,
                     "status", status, "request_id", id);
}

enum MHD_Result srv_reply_error(struct MHD_Connection *c, srv_req *r, int status,
                                const char *code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *j = error_json(status, code, msg, r->id);
    if (!j) return MHD_NO;
    if (status == MHD_HTTP_UNAUTHORIZED) {
        char *txt = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        if (!txt) return MHD_NO;
        struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(txt), txt,
                                                                    MHD_RESPMEM_MUST_FREE);
        if (!resp) { free(txt); return MHD_NO; }
        MHD_add_response_header(resp, "Content-Type", "application/json");
        MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
        return srv_reply_response(c, r, status, resp);
    }
    return srv_reply_json(c, r, status, j);
}

json_t *srv_body_object(struct MHD_Connection *c, srv_req *r, enum MHD_Result *ret) {
    json_error_t e;
    if (!r->body || r->len == 0) {
        *ret = srv_reply_error(c, r, 400, "invalid_json", "request body must be a JSON object");
        return NULL;
    }
    json_t *j = json_loadb(r->body, r->len, JSON_REJECT_DUPLICATES, &e);
    if (!j) {
        *ret = srv_reply_error(c, r, 400, "invalid_json", "malformed JSON at line %d column %d: %s",
                               e.line, e.column, e.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        *ret = srv_reply_error(c, r, 400, "invalid_json", "request body must be a JSON object");
        return NULL;
    }
    return j;
}

int64_t srv_parse_id(const char *s) {
    if (!s || !*s || strlen(s) > 15) return 0;
    int64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return 0;
        v = v * 10 + (*p - '0');
    }
    return v;
}

/* ---- routing ---------------------------------------------------------------------------- */
/* Split the path into segments; returns -1 for empty segments or oversized paths. */
static int split_path(srv_req *r, const char *url) {
    size_t n = strlen(url);
    if (n == 0 || url[0] != '/' || n >= sizeof r->seg_buf) return -1;
    memcpy(r->seg_buf, url + 1, n);   /* includes NUL */
    r->n_segs = 0;
    if (!r->seg_buf[0]) return 0;
    char *p = r->seg_buf;
    for (;;) {
        char *slash = strchr(p, '/');
        if (slash) *slash = 0;
        if (!*p || r->n_segs == 8) return -1;
        r->segs[r->n_segs++] = p;
        if (!slash) return 0;
        p = slash + 1;
    }
}

static int seg_is(srv_req *r, int i, const char *s) { return i < r->n_segs && !strcmp(r->segs[i], s); }

/* Map method+path to a route. *allowed gets the Allow header value on 405. */
static int match_route(srv_req *r, const char *method, const char **allowed) {
    int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    int post = !strcmp(method, "POST");
    int del = !strcmp(method, "DELETE");
    *allowed = NULL;
    int n = r->n_segs;
    if (n == 0 || (n == 1 && seg_is(r, 0, "index.html"))) { *allowed = "GET"; return get ? R_WEB : -1; }
    if (n == 1 && seg_is(r, 0, "openapi.json")) { *allowed = "GET"; return get ? R_OPENAPI : -1; }
    if (n == 1 && seg_is(r, 0, "healthz")) { *allowed = "GET"; return get ? R_HEALTH : -1; }
    if (n == 1 && seg_is(r, 0, "metrics")) { *allowed = "GET"; return get ? R_METRICS : -1; }
    if (!seg_is(r, 0, "v1")) return R_NOTFOUND;
    if (n == 2 && seg_is(r, 1, "documents")) {
        *allowed = "GET, POST";
        return post ? R_DOC_UPLOAD : get ? R_DOC_LIST : -1;
    }
    if (n == 3 && seg_is(r, 1, "documents")) {
        *allowed = "GET, DELETE";
        return get ? R_DOC_GET : del ? R_DOC_DELETE : -1;
    }
    if (n == 5 && seg_is(r, 1, "documents") && seg_is(r, 3, "pages")) {
        *allowed = "GET";
        return get ? R_PAGE_PNG : -1;
    }
    if (n == 3 && seg_is(r, 1, "jobs")) { *allowed = "GET"; return get ? R_JOB_GET : -1; }
    if (n == 2 && seg_is(r, 1, "search")) { *allowed = "POST"; return post ? R_SEARCH : -1; }
    if (n == 2 && seg_is(r, 1, "ask")) { *allowed = "POST"; return post ? R_ASK : -1; }
    if (n == 2 && seg_is(r, 1, "locate")) { *allowed = "POST"; return post ? R_LOCATE : -1; }
    if (n == 2 && seg_is(r, 1, "models")) { *allowed = "GET"; return get ? R_MODELS : -1; }
    if (n == 3 && seg_is(r, 1, "models")) { *allowed = "GET"; return get ? R_MODEL_GET : -1; }
    if (n == 2 && seg_is(r, 1, "embeddings")) { *allowed = "POST"; return post ? R_EMBEDDINGS : -1; }
    if (n == 3 && seg_is(r, 1, "chat") && seg_is(r, 2, "completions")) {
        *allowed = "POST";
        return post ? R_CHAT : -1;
    }
    return R_NOTFOUND;
}

static int route_has_json_body(int route) {
    return route == R_SEARCH || route == R_ASK || route == R_CHAT || route == R_LOCATE ||
           route == R_EMBEDDINGS;
}

/* Constant-time comparison so response timing does not leak key prefixes: every stored
 * key is zero-padded to SRV_KEY_MAX and all SRV_KEY_MAX bytes are compared, whatever
 * matches; only the given key's own length shows in the time. */
static int key_eq(const char *given, size_t n, const char key[SRV_KEY_MAX]) {
    unsigned char d = (unsigned char)(n >= SRV_KEY_MAX);
    for (size_t i = 0; i < SRV_KEY_MAX; i++) {
        unsigned char g = i < n ? (unsigned char)given[i] : 0;
        d |= (unsigned char)(g ^ (unsigned char)key[i]);
    }
    return d == 0;
}

/* The request's key (NULL without keys or with a wrong one); every key is compared. */
static srv_key *auth_key(srv_server *s, struct MHD_Connection *c) {
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7)) return NULL;
    h += 7;
    while (*h == ' ') h++;
    size_t n = strlen(h);
    srv_key *found = NULL;
    for (int i = 0; i < s->n_keys; i++)
        if (key_eq(h, n, s->keys[i].key) && !found) found = &s->keys[i];
    return found;
}

/* Take one token from the key's bucket; 0 = allowed, else the seconds until one is due. */
static int rate_take(srv_server *s, srv_key *k) {
    double rate = s->cfg.rate_limit, burst = s->cfg.rate_burst > 0 ? s->cfg.rate_burst : 5 * rate;
    if (rate <= 0 || !k) return 0;
    double now = srv_now();
    pthread_mutex_lock(&s->mu);
    if (k->last == 0) k->tokens = burst;
    else k->tokens += (now - k->last) * rate;
    if (k->tokens > burst) k->tokens = burst;
    k->last = now;
    int wait = 0;
    if (k->tokens >= 1) k->tokens -= 1;
    else wait = (int)ceil((1 - k->tokens) / rate);
    pthread_mutex_unlock(&s->mu);
    return wait > 0 ? wait : 0;
}

/* X-Request-Id: the client's when it is 1..64 of [A-Za-z0-9._-], else a new one. */
static void request_id(srv_server *s, struct MHD_Connection *c, srv_req *r) {
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id");
    size_t n = h ? strlen(h) : 0;
    int ok = n >= 1 && n <= 64;
    for (size_t i = 0; ok && i < n; i++)
        ok = isalnum((unsigned char)h[i]) || h[i] == '.' || h[i] == '_' || h[i] == '-';
    if (ok) { memcpy(r->id, h, n + 1); return; }
    uint64_t seq = __atomic_fetch_add(&s->req_seq, 1, __ATOMIC_RELAXED);
    snprintf(r->id, sizeof r->id, "req-%016llx", (unsigned long long)seq);
}

static enum MHD_Result dispatch(struct MHD_Connection *c, srv_req *r) {
    srv_server *s = r->srv;
    size_t len;
    const char *txt;
    switch (r->route) {
    case R_WEB: {
        txt = srv_web_index(&len);
        struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)txt,
                                                                    MHD_RESPMEM_PERSISTENT);
        if (!resp) return MHD_NO;
        MHD_add_response_header(resp, "Content-Type", "text/html; charset=utf-8");
        MHD_add_response_header(resp, "Content-Security-Policy",
                                "default-src 'self'; img-src 'self' blob: data:; "
                                "style-src 'self' 'unsafe-inline'; script-src 'self' 'unsafe-inline'; "
                                "object-src 'none'; base-uri 'none'; form-action 'self'; "
                                "frame-ancestors 'none'");
        return srv_reply_response(c, r, 200, resp);
    }
    case R_OPENAPI:
        txt = srv_web_openapi(&len);
        return srv_reply_raw(c, r, 200, "application/json", txt, len, 0);
    case R_HEALTH:
        return srv_reply_json(c, r, 200, json_pack("{s:s,s:b}", "status", "ok", "stopping",
                                                   s->stopping != 0));
    case R_METRICS: {
        pthread_mutex_lock(&s->mu);
        int inflight = s->inflight;
        pthread_mutex_unlock(&s->mu);
        pthread_mutex_lock(&s->qmu);
        int queued = s->q_len;
        pthread_mutex_unlock(&s->qmu);
        char *m = srv_metrics_render(&s->metrics, inflight, queued,
                                     answer_llm_waiting(srv_query_llm(s)));
        if (!m) return MHD_NO;
        struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(m), m,
                                                                    MHD_RESPMEM_MUST_FREE);
        if (!resp) { free(m); return MHD_NO; }
        MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4");
        return srv_reply_response(c, r, 200, resp);
    }
    case R_DOC_UPLOAD: return srv_handle_upload(c, r);
    case R_DOC_LIST: return srv_handle_doc_list(c, r);
    case R_DOC_GET: return srv_handle_doc_get(c, r);
    case R_DOC_DELETE: return srv_handle_doc_delete(c, r);
    case R_PAGE_PNG: return srv_handle_page_png(c, r);
    case R_JOB_GET: return srv_handle_job(c, r);
    case R_SEARCH: return srv_handle_search(c, r);
    case R_ASK: return srv_handle_ask(c, r);
    case R_CHAT: return srv_handle_chat(c, r);
    case R_LOCATE: return srv_handle_locate(c, r);
    case R_MODELS: return srv_handle_models(c, r);
    case R_MODEL_GET: return srv_handle_model_get(c, r);
    case R_EMBEDDINGS: return srv_handle_embeddings(c, r);
    default:
        return srv_reply_error(c, r, 404, "not_found", "no such route");
    }
}

/* First call for a request: route, auth, limits, body setup. Returns 1 when a reply was
 * queued (or must close), 0 to continue reading the body. */
static int request_begin(struct MHD_Connection *c, srv_req *r, const char *url, const char *method,
                         enum MHD_Result *ret) {
    srv_server *s = r->srv;
    const char *allowed = NULL;
    if (split_path(r, url) < 0) {
        r->route = R_NOTFOUND;
        *ret = srv_reply_error(c, r, 404, "not_found", "no such route");
        return 1;
    }
    int route = match_route(r, method, &allowed);
    if (route < 0) {
        r->route = R_NOTFOUND;
        char *txt = NULL;
        json_t *j = error_json(405, "method_not_allowed", "method not allowed on this route", r->id);
        if (j) txt = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        if (!txt) { *ret = MHD_NO; return 1; }
        struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(txt), txt,
                                                                    MHD_RESPMEM_MUST_FREE);
        if (!resp) { free(txt); *ret = MHD_NO; return 1; }
        MHD_add_response_header(resp, "Content-Type", "application/json");
        MHD_add_response_header(resp, "Allow", allowed);
        *ret = srv_reply_response(c, r, 405, resp);
        return 1;
    }
    r->route = route;
    if (route == R_NOTFOUND) {
        *ret = srv_reply_error(c, r, 404, "not_found", "no such route: %s %s", method, url);
        return 1;
    }
    /* Health and metrics stay reachable when the server is saturated. */
    if (route != R_HEALTH && route != R_METRICS) {
        pthread_mutex_lock(&s->mu);
        int full = s->inflight >= s->cfg.max_inflight;
        if (!full) { s->inflight++; r->counted = 1; }
        pthread_mutex_unlock(&s->mu);
        if (full) {
            pthread_mutex_lock(&s->metrics.mu);
            s->metrics.rejected_busy++;
            pthread_mutex_unlock(&s->metrics.mu);
            *ret = srv_reply_error(c, r, 503, "overloaded",
                                   "too many concurrent requests (limit %d); retry later",
                                   s->cfg.max_inflight);
            return 1;
        }
    }
    if (s->stopping && route != R_HEALTH) {
        *ret = srv_reply_error(c, r, 503, "shutting_down", "server is shutting down");
        return 1;
    }
    if (route >= R_DOC_UPLOAD) {
        srv_key *k = s->n_keys ? auth_key(s, c) : NULL;
        r->coll = s->n_keys ? (k ? k->coll : NULL) : s->anon;
        if (!r->coll) {
            *ret = srv_reply_error(c, r, 401, "unauthorized",
                                   "missing or invalid API key (Authorization: Bearer KEY)");
            return 1;
        }
        if ((r->retry_after = rate_take(s, k))) {
            *ret = srv_reply_error(c, r, 429, "rate_limited",
                                   "more than %d requests per second for this key; retry in %d s",
                                   s->cfg.rate_limit, r->retry_after);
            return 1;
        }
    }
    /* Size caps before any body byte is read. */
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    int64_t limit = route == R_DOC_UPLOAD ? s->cfg.max_upload : s->cfg.max_body;
    if (cl) {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(cl, &end, 10);
        if (errno || end == cl || *end || v < 0) {
            *ret = srv_reply_error(c, r, 400, "bad_request", "invalid Content-Length");
            return 1;
        }
        if ((route_has_json_body(route) || route == R_DOC_UPLOAD) && v > limit) {
            pthread_mutex_lock(&s->metrics.mu);
            s->metrics.rejected_size++;
            pthread_mutex_unlock(&s->metrics.mu);
            *ret = srv_reply_error(c, r, 413, "too_large",
                                   "body of %lld bytes exceeds the limit of %lld bytes", v,
                                   (long long)limit);
            return 1;
        }
        if (!route_has_json_body(route) && route != R_DOC_UPLOAD && v > 0) {
            *ret = srv_reply_error(c, r, 400, "bad_request", "this route takes no body");
            return 1;
        }
    }
    if (route == R_DOC_UPLOAD) {
        char err[256];
        int st = srv_upload_begin(r, c, err, sizeof err);
        if (st) {
            *ret = srv_reply_error(c, r, st, st == 415 ? "unsupported_media_type" : "bad_request",
                                   "%s", err);
            return 1;
        }
    }
    return 0;
}

/* Body bytes: JSON routes buffer up to max_body; uploads stream to a file. */
static int request_data(srv_req *r, const char *data, size_t size) {
    srv_server *s = r->srv;
    if (r->too_big) return 0;
    if (r->route == R_DOC_UPLOAD) {
        if (r->up_bytes + size > (size_t)s->cfg.max_upload) { r->too_big = 1; return 0; }
        return srv_upload_data(r, data, size);
    }
    if (!route_has_json_body(r->route)) { r->too_big = 2; return 0; }
    if (r->len + size > (size_t)s->cfg.max_body) { r->too_big = 1; return 0; }
    if (r->len + size + 1 > r->cap) {
        size_t nc = r->cap ? r->cap : 4096;
        while (nc < r->len + size + 1) nc *= 2;
        char *nb = realloc(r->body, nc);
        if (!nb) return -1;
        r->body = nb;
        r->cap = nc;
    }
    memcpy(r->body + r->len, data, size);
    r->len += size;
    r->body[r->len] = 0;
    return 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    srv_server *s = cls;
    srv_req *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        r->srv = s;
        r->t0 = srv_now();
        r->up_fd = -1;
        request_id(s, c, r);
        *con_cls = r;
        enum MHD_Result ret = MHD_YES;
        if (request_begin(c, r, url, method, &ret)) return ret;
        return MHD_YES;
    }
    if (r->responded) { *upload_data_size = 0; return MHD_YES; }
    if (*upload_data_size) {
        int rc = request_data(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        if (rc < 0) return MHD_NO;
        if (r->too_big == 1) {
            /* Over the cap mid-stream (chunked or lying Content-Length): answer if MHD
             * lets us, otherwise close the connection rather than read on. */
            pthread_mutex_lock(&s->metrics.mu);
            s->metrics.rejected_size++;
            pthread_mutex_unlock(&s->metrics.mu);
            enum MHD_Result ret = srv_reply_error(c, r, 413, "too_large",
                                                  "body exceeds the limit");
            if (ret != MHD_YES) { r->status = 413; return MHD_NO; }
            return ret;
        }
        return MHD_YES;
    }
    if (r->too_big == 2)
        return srv_reply_error(c, r, 400, "bad_request", "this route takes no body");
    return dispatch(c, r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    srv_server *s = cls;
    srv_req *r = *con_cls;
    if (!r) return;
    *con_cls = NULL;
    double dt = srv_now() - r->t0;
    int status = r->status ? r->status : 499;   /* 499: client went away / closed */
    srv_metrics_request(&s->metrics, r->route, status, dt);
    if (!s->cfg.quiet) {
        const char *reason = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" :
                             toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? " (timeout)" :
                             " (aborted)";
        fprintf(stderr, "mmrag serve: %s %s %d %.1f ms%s\n", r->id, srv_route_name(r->route),
                status, dt * 1e3, reason);
    }
    if (r->counted) {
        pthread_mutex_lock(&s->mu);
        s->inflight--;
        pthread_mutex_unlock(&s->mu);
    }
    srv_upload_cleanup(r);
    free(r->body);
    free(r);
}

/* ---- startup -------------------------------------------------------------------------- */
static int parse_listen(const char *listen, struct sockaddr_in *sa, char *err, size_t errlen) {
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    const char *colon = strrchr(listen, ':');
    if (!colon || colon == listen) {
        snprintf(err, errlen, "--listen %s: expected HOST:PORT (e.g. 127.0.0.1:8080)", listen);
        return -1;
    }
    char host[64];
    size_t hl = (size_t)(colon - listen);
    if (hl >= sizeof host) { snprintf(err, errlen, "--listen %s: host too long", listen); return -1; }
    memcpy(host, listen, hl);
    host[hl] = 0;
    char *end = NULL;
    long port = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || port < 0 || port > 65535) {
        snprintf(err, errlen, "--listen %s: bad port", listen);
        return -1;
    }
    if (!strcmp(host, "localhost")) snprintf(host, sizeof host, "127.0.0.1");
    if (inet_pton(AF_INET, host, &sa->sin_addr) != 1) {
        snprintf(err, errlen, "--listen %s: HOST must be an IPv4 address or localhost", listen);
        return -1;
    }
    sa->sin_port = htons((uint16_t)port);
    return 0;
}

static int valid_coll_name(const char *n) {
    size_t l = strlen(n);
    if (l == 0 || l > 64 || n[0] == '.') return 0;
    for (const char *p = n; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-' && *p != '.') return 0;
    return 1;
}

static srv_coll *find_or_add_coll(srv_server *s, const char *name) {
    for (int i = 0; i < s->n_colls; i++)
        if (!strcmp(s->colls[i]->name, name)) return s->colls[i];
    char dir[4096];
    if (store_collection_db(s->cfg.db, name, dir, sizeof dir)) return NULL;
    srv_coll **nc = realloc(s->colls, (size_t)(s->n_colls + 1) * sizeof *nc);
    if (!nc) return NULL;
    s->colls = nc;
    srv_coll *c = coll_new(&s->cfg, name, dir, 1);
    if (!c) return NULL;
    s->colls[s->n_colls++] = c;
    return c;
}

static int load_keys(srv_server *s, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "re");
    if (!f) { snprintf(err, errlen, "--keys %s: %s", path, strerror(errno)); return -1; }
    struct stat st;
    if (fstat(fileno(f), &st) || (st.st_mode & (S_IRWXG | S_IRWXO))) {
        snprintf(err, errlen, "--keys %s: refusing a keys file that group or others may read "
                 "(mode %03o); run: chmod 600 %s", path, (unsigned)(st.st_mode & 0777), path);
        fclose(f);
        return -1;
    }
    char line[512];
    int ln = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        char *p = line;
        while (isspace((unsigned char)*p)) p++;
        if (!*p || *p == '#') continue;
        char key[256], coll[256], extra[8];
        int n = sscanf(p, "%255s %255s %7s", key, coll, extra);
        if (n != 2 || strlen(key) < 8 || strlen(key) >= sizeof s->keys[0].key ||
            !valid_coll_name(coll)) {
            snprintf(err, errlen, "--keys %s:%d: expected \"KEY COLLECTION\" (key of 8..127 "
                     "chars, collection of [A-Za-z0-9_.-])", path, ln);
            rc = -1;
            break;
        }
        srv_key *nk = realloc(s->keys, (size_t)(s->n_keys + 1) * sizeof *nk);
        if (!nk) { rc = -1; snprintf(err, errlen, "out of memory"); break; }
        s->keys = nk;
        memset(&s->keys[s->n_keys], 0, sizeof s->keys[s->n_keys]);
        memcpy(s->keys[s->n_keys].key, key, strlen(key));   /* length checked above */
        s->keys[s->n_keys].coll = find_or_add_coll(s, coll);
        if (!s->keys[s->n_keys].coll) {
            rc = -1;
            snprintf(err, errlen, store_is_url(s->cfg.db) ? "--keys %s:%d: a collection on PostgreSQL"
                     " is named with 1-48 of [a-z0-9_]" : "--keys %s:%d: out of memory", path, ln);
            break;
        }
        s->n_keys++;
    }
    fclose(f);
    if (!rc && s->n_keys == 0) {
        snprintf(err, errlen, "--keys %s: no keys in file", path);
        rc = -1;
    }
    return rc;
}

static void server_free(srv_server *s) {
    if (!s) return;
    for (int i = 0; i < s->n_colls; i++) coll_free(s->colls[i]);
    free(s->colls);
    free(s->keys);
    for (int i = 0; i < s->n_jobs; i++) free(s->jobs[i]);
    free(s->jobs);
    free(s->workers);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->qmu);
    pthread_cond_destroy(&s->qcv);
    pthread_cond_destroy(&s->qroom);
    pthread_mutex_destroy(&s->metrics.mu);
    free(s);
}

int srv_start(const srv_config *cfg, srv_server **out, char *err, size_t errlen) {
    *out = NULL;
    srv_server *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, errlen, "out of memory"); return -1; }
    s->cfg = *cfg;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->qmu, NULL);
    pthread_cond_init(&s->qcv, NULL);
    pthread_cond_init(&s->qroom, NULL);
    srv_metrics_init(&s->metrics);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);   /* ids differ across restarts: a start from the clock */
    s->req_seq = ((uint64_t)ts.tv_sec << 24) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 40);
    if (s->cfg.max_inflight <= 0) s->cfg.max_inflight = 64;
    if (s->cfg.max_upload <= 0) s->cfg.max_upload = 64ll << 20;
    if (s->cfg.max_body <= 0) s->cfg.max_body = 1ll << 20;
    if (s->cfg.timeout_s <= 0) s->cfg.timeout_s = 30;
    if (s->cfg.ingest_workers <= 0) s->cfg.ingest_workers = 1;
    if (s->cfg.queue_max <= 0) s->cfg.queue_max = 16;
    if (!s->cfg.db || !*s->cfg.db) s->cfg.db = ".mmrag";
    if (s->cfg.db_read && (!store_is_url(s->cfg.db) || !store_is_url(s->cfg.db_read))) {
        snprintf(err, errlen, "--db-read needs --db and --db-read to be postgres:// URLs");
        goto fail;
    }

    struct sockaddr_in sa;
    if (parse_listen(cfg->listen ? cfg->listen : "127.0.0.1:8080", &sa, err, errlen)) goto fail;
    if (cfg->keys_file) {
        if (load_keys(s, cfg->keys_file, err, errlen)) goto fail;
        if (!store_is_url(s->cfg.db) && mkdir(s->cfg.db, 0700) && errno != EEXIST) {
            snprintf(err, errlen, "--db %s: %s", s->cfg.db, strerror(errno));
            goto fail;
        }
    } else {
        uint32_t a = ntohl(sa.sin_addr.s_addr);
        if ((a >> 24) != 127) {
            snprintf(err, errlen, "refusing to listen on %s without API keys: without --keys "
                     "only loopback addresses (127.x.x.x) are allowed", cfg->listen);
            goto fail;
        }
        s->anon = coll_new(&s->cfg, "default", s->cfg.db, 0);
        if (!s->anon) { snprintf(err, errlen, "out of memory"); goto fail; }
        s->colls = malloc(sizeof *s->colls);
        if (!s->colls) { coll_free(s->anon); snprintf(err, errlen, "out of memory"); goto fail; }
        s->colls[s->n_colls++] = s->anon;
    }
    /* Open each collection once now so a bad --db fails at startup, not per request. */
    for (int i = 0; i < s->n_colls; i++) {
        store *st = srv_coll_acquire(s->colls[i], err, errlen);
        if (!st) goto fail;
        srv_coll_release(s->colls[i], st);
        if (s->colls[i]->read_dir[0]) {   /* and the standby, when searches go there */
            if (srv_coll_open_read(s->colls[i], &st, err, errlen)) goto fail;
            store_close(st);
        }
    }
    if (srv_query_init(s, err, errlen)) goto fail;
    if (srv_jobs_start(s)) { snprintf(err, errlen, "cannot start ingest workers"); goto fail; }

    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | MHD_USE_ITC;
    if (s->cfg.pool > 0) flags |= MHD_USE_EPOLL;
    else flags |= MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL;
    struct MHD_OptionItem opts[8];
    int no = 0;
    opts[no++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, &sa};
    opts[no++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, s->cfg.timeout_s, NULL};
    opts[no++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, s};
    opts[no++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT,
                                         s->cfg.max_inflight * 2 + 16, NULL};
    opts[no++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT, 256 * 1024, NULL};
    if (s->cfg.pool > 0)
        opts[no++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, s->cfg.pool, NULL};
    opts[no++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_ARRAY, opts,
                            MHD_OPTION_END);
    if (!s->d) {
        snprintf(err, errlen, "cannot listen on %s (address in use or not permitted)",
                 cfg->listen);
        srv_jobs_stop(s);
        srv_query_free(s);
        goto fail;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : ntohs(sa.sin_port);
    *out = s;
    return 0;
fail:
    server_free(s);
    return -1;
}

void srv_stop(srv_server *s) {
    if (!s) return;
    /* Stop accepting first, then abort ingest (a job's document is committed whole or not
     * at all), then let MHD finish in-flight responses (streams check `stopping`). */
    MHD_socket ls = MHD_quiesce_daemon(s->d);
    s->stopping = 1;
    srv_jobs_stop(s);
    MHD_stop_daemon(s->d);
    if (ls != MHD_INVALID_SOCKET) close(ls);   /* quiesce hands the socket to us */
    srv_query_free(s);
    server_free(s);
}
