/* api/server/server.h — the mmrag REST server (libmicrohttpd + jansson).
 *
 *   srv_config c; srv_config_default(&c); c.db = "./.mmrag";
 *   srv_server *s; if (srv_start(&c, &s, err, sizeof err)) ...;
 *   printf("%u\n", srv_port(s));        // the bound port (useful with port 0)
 *   ... wait for a signal ...
 *   srv_stop(s);                        // stop accepting, abort queued/running ingests
 *
 * Without a keys file the server serves one collection (the --db directory) and only
 * binds loopback addresses. With keys ("KEY COLLECTION" lines) each collection is the
 * directory DB/COLLECTION and a bearer key only ever sees its own collection. The keys file
 * must not be readable by group or others. Every reply carries X-Request-Id (the client's
 * when it sent a sane one), which the access log and JSON error bodies repeat. */
#ifndef MMRAG_API_SERVER_H
#define MMRAG_API_SERVER_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *listen;        /* "HOST:PORT" (IPv4 literal or "localhost"); default 127.0.0.1:8080 */
    const char *db;            /* database dir (or parent of collection dirs with keys) */
    const char *keys_file;     /* NULL = no auth (loopback only) */
    const char *models;        /* models dir; NULL = $MMRAG_MODELS or "models" */
    int64_t max_upload;        /* bytes per uploaded PDF; default 64 MiB */
    int64_t max_body;          /* bytes per JSON body; default 1 MiB */
    int32_t max_inflight;      /* concurrent requests before 503; default 64 */
    int32_t timeout_s;         /* idle connection timeout; default 30 */
    int32_t pool;              /* 0 = thread per connection (default); N = epoll + N threads */
    int32_t ingest_workers;    /* parallel ingest jobs; default: CPUs clamped to 2..4 */
    int32_t queue_max;         /* queued ingest jobs before 503; default 16 */
    int32_t gen_slots;         /* concurrent generations (engine sessions); default 1 */
    int32_t gen_threads;       /* kernel threads per generation; 0 = engine default */
    int32_t quiet;             /* no access log on stderr */
    /* Isolated ingest (api/core/isolate.h): each upload is parsed in a child process. */
    int32_t ingest_isolate;    /* 1 (default) = in a child; 0 = in the server process */
    int32_t ingest_timeout_s;  /* wall clock per document; default 600; 0 = none */
    int32_t ingest_mem_mb;     /* the child's address-space limit; default 4096; 0 = none */
    int32_t ingest_cpu_s;      /* the child's CPU seconds; default 0 = ingest_timeout_s */
    const char *ingest_worker; /* binary with `ingest-worker` (mmrag serve: itself);
                                * NULL = fork the server process without exec */
    int32_t rate_limit;        /* requests per second per API key (with keys only); default
                                * 20; 0 = none. Over it: 429 with Retry-After */
    int32_t rate_burst;        /* requests a key may send at once; default 5 x rate_limit */
    const char *llm;           /* language model GGUF; NULL = $MMRAG_LLM, else the models dir's SmolLM2 */
    const char *db_read;       /* PostgreSQL only: searches and answers read this standby of
                                * db's server (same collections); NULL = db */
} srv_config;

typedef struct srv_server srv_server;

void srv_config_default(srv_config *c);
/* Returns 0 or -1 with a one-line message in err. */
int srv_start(const srv_config *c, srv_server **out, char *err, size_t errlen);
uint16_t srv_port(const srv_server *s);
void srv_stop(srv_server *s);

/* `mmrag serve` (api/cli/cli_serve.c): parses argv, runs until SIGINT/SIGTERM. */
int cli_serve(int argc, char **argv);
#endif
