/* api/server/server_internal.h — private declarations shared by the REST server's files
 * (not a public API).
 *
 * Layout, one concern per file; every name another file uses is declared here:
 *   server.c          daemon, routing, request bodies, limits, auth, replies
 *   server_json.c     JSON request fields (400-ready messages), the box array
 *   server_upload.c   POST /v1/documents: upload body, kept source file, queued job
 *   server_jobs.c     the bounded ingest queue, its workers, GET /v1/jobs/{id}
 *   server_ingest.c   one ingest job through the shared pipeline (api/core/)
 *   server_docs.c     document list / get / delete, page renders
 *   server_models.c   text encoder, region localizer, retrievers, language model, sessions
 *   server_query.c    /v1/search, /v1/ask, /v1/chat/completions request handling
 *   server_stream.c   a generation job: answered whole or streamed as server-sent events
 *   server_locate.c   /v1/locate (region localization)
 *   server_openai.c   the rest of the OpenAI surface: /v1/models, /v1/embeddings, model ids
 *   server_metrics.c  Prometheus text
 *   server_web.c      the embedded web page and OpenAPI document */
#ifndef MMRAG_API_SERVER_INTERNAL_H
#define MMRAG_API_SERVER_INTERNAL_H
#include <microhttpd.h>
#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "api/server/server.h"
#include "engine/engine.h"
#include "index/store.h"
#include "retrieval/retrieval.h"
#include "api/core/answer.h"
#include "api/core/tools.h"

/* ---- routes (also the metric label set) ------------------------------------------- */
typedef enum {
    R_NONE = 0, R_WEB, R_OPENAPI, R_HEALTH, R_METRICS,
    R_DOC_UPLOAD, R_DOC_LIST, R_DOC_GET, R_DOC_DELETE, R_PAGE_PNG, R_JOB_GET,
    R_SEARCH, R_ASK, R_CHAT, R_LOCATE, R_MODELS, R_MODEL_GET, R_EMBEDDINGS, R_NOTFOUND, R_COUNT
} srv_route;
const char *srv_route_name(int r);

/* ---- collections: one database directory each ------------------------------------- */
struct store;
#define SRV_POOL 8
typedef struct srv_coll {
    char name[72];
    char dir[4096];              /* a directory, or a shared collection's postgres:// URL */
    int shared;                  /* on PostgreSQL: uploads go to the store's job queue */
    char read_dir[4096];         /* --db-read: the same collection on a standby; "" = dir */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct store *pool[SRV_POOL];   /* read/write handles, opened lazily */
    int busy[SRV_POOL];
    int n_open;
} srv_coll;
struct store *srv_coll_acquire(srv_coll *c, char *err, size_t errlen);
void srv_coll_release(srv_coll *c, struct store *s);
int srv_coll_open_read(const srv_coll *c, struct store **out, char *err, size_t errlen);

/* ---- ingest jobs -------------------------------------------------------------------- */
typedef enum { JOB_QUEUED, JOB_RUNNING, JOB_DONE, JOB_FAILED, JOB_CANCELLED } srv_job_state;
typedef struct srv_job {
    char id[24];
    srv_coll *coll;
    char path[4096];          /* the kept upload (DIR/files/<sha>.pdf) */
    char name[256];           /* client file name, for display */
    int state;
    int32_t pages_done, pages_total;
    int64_t doc_id;
    int existed;              /* same content already indexed */
    int fresh_file;           /* this upload created `path` (remove it if ingest fails) */
    char error[512];
    char failure[16];         /* isolate_status_name when the ingest child failed */
    int64_t created, finished;
    struct srv_job *next_q;   /* queue link */
} srv_job;

/* ---- metrics -------------------------------------------------------------------------- */
#define SRV_NBUCKETS 14
typedef struct {
    uint64_t count[SRV_NBUCKETS + 1];  /* last = +Inf */
    double sum;
    uint64_t n;
} srv_hist;
typedef struct {
    pthread_mutex_t mu;
    uint64_t req[R_COUNT][6];          /* by status class 1xx..5xx (index 1..5) */
    srv_hist lat[R_COUNT];
    srv_hist ttft, itl;
    uint64_t ingest_pages, ingest_docs, ingest_failed, rejected_busy, rejected_size;
} srv_metrics;
void srv_metrics_init(srv_metrics *m);
void srv_metrics_request(srv_metrics *m, int route, int status, double seconds);
void srv_metrics_observe(srv_metrics *m, srv_hist *h, double seconds);
char *srv_metrics_render(srv_metrics *m, int inflight, int queued, int gen_waiting);  /* malloc'd */

/* ---- the server ----------------------------------------------------------------------- */
#define SRV_KEY_MAX 128
typedef struct srv_key {
    char key[SRV_KEY_MAX];             /* zero-padded: compared over all SRV_KEY_MAX bytes */
    srv_coll *coll;
    double tokens, last;               /* rate-limit bucket (guarded by srv_server.mu) */
} srv_key;

struct srv_server {
    srv_config cfg;
    struct MHD_Daemon *d;
    uint16_t port;
    srv_coll **colls; int n_colls;
    srv_key *keys; int n_keys;         /* 0 = no auth, single collection */
    srv_coll *anon;                     /* collection used without keys */
    int inflight;                       /* guarded by mu */
    pthread_mutex_t mu;
    srv_metrics metrics;
    /* ingest queue */
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    pthread_cond_t qroom;      /* a queued job was taken: an upload waiting for room goes on */
    srv_job *q_head, *q_tail; int q_len;
    srv_job **jobs; int n_jobs, cap_jobs;   /* every job (finished ones kept for polling) */
    uint64_t job_seq;
    uint64_t req_seq;                   /* request ids: a random start, then +1 (atomic) */
    pthread_t *workers; int n_workers;
    pthread_t *shared_workers; int n_shared_workers;   /* server_shared.c */
    pthread_mutex_t render_mu;          /* Poppler rendering is serialized */
    volatile int stopping;              /* set once on shutdown: workers abort jobs */
    void *query;                        /* server_models.c state */
};

/* A request in flight (MHD's per-connection closure). */
typedef struct srv_req {
    srv_server *srv;
    char id[72];           /* request id: X-Request-Id in every reply, the log and errors */
    int retry_after;       /* seconds, sent with a 429 */
    int route;
    double t0;
    int counted;           /* took an inflight slot */
    int status;            /* status sent (for metrics) */
    int responded;
    srv_coll *coll;
    char *segs[8]; int n_segs;   /* path segments (point into seg_buf) */
    char seg_buf[1024];
    /* JSON body */
    char *body; size_t len, cap;
    int too_big;
    /* upload */
    int upload;            /* 1 raw pdf, 2 multipart */
    int up_fd;
    char up_path[4096];
    size_t up_bytes;
    char up_name[256];
    struct MHD_PostProcessor *pp;
    int pp_err, pp_files;
    char pp_err_msg[160];
} srv_req;

double srv_now(void);
/* 1 when the client behind socket fd has closed its side (a peek reads 0 bytes; bytes of
 * a pipelined next request are not a close). */
int srv_peer_closed(int fd);
/* pthread_cond_timedwait for at most ms milliseconds (mu held). */
void srv_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int ms);
/* Replies: each queues a response on c and records the status in r. */
enum MHD_Result srv_reply_json(struct MHD_Connection *c, srv_req *r, int status, json_t *j);
enum MHD_Result srv_reply_error(struct MHD_Connection *c, srv_req *r, int status,
                                const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
enum MHD_Result srv_reply_raw(struct MHD_Connection *c, srv_req *r, int status,
                              const char *ctype, const void *data, size_t len, int copy);
enum MHD_Result srv_reply_response(struct MHD_Connection *c, srv_req *r, int status,
                                   struct MHD_Response *resp);
/* Parse r->body as a JSON object; on failure replies 400 and returns NULL. */
json_t *srv_body_object(struct MHD_Connection *c, srv_req *r, enum MHD_Result *ret);
/* Decimal id in 1..2^53; 0 if the text is not one. */
int64_t srv_parse_id(const char *s);

/* ---- JSON request fields (server_json.c) ---------------------------------------------- */
/* Fields of a JSON request object. Optional integer / number in [lo, hi] or boolean (absent
 * or null leaves *out unchanged); required string of 1..4096 bytes. Each returns 0 or -1
 * with a message for a 400 in msg. */
int srv_json_int(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out, char *msg,
                 size_t ml);
int srv_json_num(json_t *o, const char *key, double lo, double hi, double *out, char *msg,
                 size_t ml);
int srv_json_bool(json_t *o, const char *key, int *out, char *msg, size_t ml);
int srv_json_text(json_t *o, const char *key, const char **out, char *msg, size_t ml);
/* [x0, y0, x1, y1] as a JSON array. */
json_t *srv_box_json(const store_box *b);

/* ---- uploads (server_upload.c) -------------------------------------------------------- */
int srv_upload_begin(srv_req *r, struct MHD_Connection *c, char *err, size_t errlen);
int srv_upload_data(srv_req *r, const char *data, size_t size);
void srv_upload_cleanup(srv_req *r);
enum MHD_Result srv_handle_upload(struct MHD_Connection *c, srv_req *r);
/* Remove a kept source file (DIR/files/<sha>/<name>.pdf) and its per-sha folder. */
void srv_remove_kept(const char *path);

/* ---- ingest jobs (server_jobs.c) ------------------------------------------------------ */
int srv_jobs_start(srv_server *s);
/* Durable jobs (server_jobs.c): the marker next to the kept file, written before the 202
 * reply and removed when the job ends; enqueue with qmu held. */
int srv_job_mark(const struct srv_job *j, char *err, size_t errlen);
void srv_job_unmark(const struct srv_job *j);
int srv_job_enqueue(srv_server *s, struct srv_job *j);
void srv_jobs_stop(srv_server *s);
enum MHD_Result srv_handle_job(struct MHD_Connection *c, srv_req *r);
json_t *srv_job_json(const srv_job *j);
/* Keep the job table bounded: forget the oldest finished jobs. Called with qmu held. */
void srv_jobs_trim(srv_server *s);

/* server_ingest.c: run one job through the ingest pipeline (worker thread). Updates
 * j->pages_done/pages_total as it goes and aborts when s->stopping is set. Returns 0 and
 * sets j->doc_id (j->existed if unchanged content), or -1 with j->error. */
int srv_ingest_run(srv_server *s, srv_job *j);

/* ---- documents (server_docs.c) -------------------------------------------------------- */
enum MHD_Result srv_handle_doc_list(struct MHD_Connection *c, srv_req *r);
enum MHD_Result srv_handle_doc_get(struct MHD_Connection *c, srv_req *r);
enum MHD_Result srv_handle_doc_delete(struct MHD_Connection *c, srv_req *r);
enum MHD_Result srv_handle_page_png(struct MHD_Connection *c, srv_req *r);

/* ---- models shared by the query routes (server_models.c) ------------------------------ */
struct embed_ctx;
struct embed_ctx *srv_query_embedder(srv_server *s);
/* Shared collections (server_shared.c): an upload into the store's queue (202 + job),
 * a job's status from the store, and the in-process workers that take the queue's jobs. */
enum MHD_Result srv_upload_shared(struct MHD_Connection *c, srv_req *r, const char *path, size_t bytes);
enum MHD_Result srv_handle_shared_job(struct MHD_Connection *c, srv_req *r, int64_t id);
int srv_shared_workers_start(srv_server *s);
void srv_shared_workers_stop(srv_server *s);   /* NULL when no text encoder */
int srv_query_init(srv_server *s, char *err, size_t errlen);
void srv_query_free(srv_server *s);
/* The region localizer (thread-safe), or NULL with the reason in *why (no text encoder). */
struct vpe *srv_query_vpe(srv_server *s, const char **why);
/* The collection's retriever, created on first use; NULL with a message in err. */
retriever *srv_query_retriever(srv_server *s, srv_coll *coll, char *err, size_t errlen);
/* The answer core's language model (loaded by the first answer that needs it; bounded by
 * --gen-slots sessions, later answers wait). */
answer_llm *srv_query_llm(srv_server *s);
/* Count stream producer threads up (+1) or down (-1): srv_query_free waits for none. */
void srv_query_producers_add(srv_server *s, int delta);

/* ---- search, ask and chat (server_query.c) -------------------------------------------- */
typedef struct {
    const char *query;
    int64_t k;
    int64_t docs[64];
    int32_t n_docs;
    int64_t page_min, page_max;
    int32_t kind;
    double weight[RETR_NSRC];
} srv_search_req;
enum MHD_Result srv_handle_search(struct MHD_Connection *c, srv_req *r);
enum MHD_Result srv_handle_ask(struct MHD_Connection *c, srv_req *r);
enum MHD_Result srv_handle_chat(struct MHD_Connection *c, srv_req *r);
/* Fused retrieval in coll into res (caller frees with retr_result_free()); 0, or -1
 * with a message in err. */
int srv_search_run(srv_server *s, srv_coll *coll, const srv_search_req *sr, retr_result *res,
                   char *err, size_t errlen);
/* The request's retrieval options (filters, weights, k) as retr_opts. */
void srv_search_opts(const srv_search_req *sr, retr_opts *o);
/* The hits as a JSON array; numbered hits carry "n" = their [n] in the answer. */
json_t *srv_hits_json(const retr_result *res, int numbered);

/* ---- generation (server_stream.c) ----------------------------------------------------- */
/* A generation request, shared by the non-stream path and the producer thread. */
typedef struct srv_gen_job {
    srv_server *s;
    srv_coll *coll;
    int chat;                  /* OpenAI format */
    int stream;
    srv_search_req sr;
    char *question;            /* retrieval query and user question */
    char *system;              /* extra system text from chat clients, or NULL */
    char *history;             /* earlier chat turns as text, or NULL */
    int64_t max_tokens;
    double temperature, top_p;
    int64_t seed;
    int json_mode;
    int include_usage;         /* stream_options.include_usage: a last chunk with usage */
    tools_set *tools;          /* chat "tools" (NULL: none, or tool_choice "none") */
    int after_tools;           /* tool results follow the last user message: answer */
    tools_result tr;           /* the calls the model made (tr.n_calls) */
    int tools_cut;             /* the call was cut by max_tokens: finish_reason "length" */
    int32_t mode;              /* answer_mode */
    int show_unsupported;
    char model_name[64];
    char id[48];
    int64_t created;
    /* results */
    answer_request rq;
    answer_result a;
    double t_start, t_last;
    int n_pieces;
    /* stream buffer */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *buf; size_t len, cap, off;
    int done, gone, refs;
    int status;                /* HTTP status for the non-stream path */
    int peer_fd;               /* non-stream: the client's socket, watched for a hang-up
                                  while the answer waits or runs (-1: none) */
    char err[512];
} srv_gen_job;
/* Run g (filled by the ask/chat handlers; calloc'd, owned from here on): retrieval and
 * generation, answered as one JSON reply, or, when g->stream, as server-sent events from a
 * producer thread. */
enum MHD_Result srv_gen_start(struct MHD_Connection *c, srv_req *r, srv_gen_job *g);

/* ---- the OpenAI surface (server_openai.c) ---------------------------------------------- */
enum MHD_Result srv_handle_models(struct MHD_Connection *c, srv_req *r);
enum MHD_Result srv_handle_model_get(struct MHD_Connection *c, srv_req *r);
enum MHD_Result srv_handle_embeddings(struct MHD_Connection *c, srv_req *r);
/* 1 when a chat request may name this model: "mmrag" (retrieval + the language model) or
 * the language model's own id (its file name without .gguf). */
int srv_openai_chat_model_ok(srv_server *s, const char *id);

/* server_locate.c */
enum MHD_Result srv_handle_locate(struct MHD_Connection *c, srv_req *r);

/* server_web.c */
const char *srv_web_index(size_t *len);
const char *srv_web_openapi(size_t *len);
#endif
