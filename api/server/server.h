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
 * directory DB/COLLECTION and a bearer key only ever sees its own collection. */
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
    int32_t ingest_workers;    /* default 1 */
    int32_t queue_max;         /* queued ingest jobs before 503; default 16 */
    int32_t gen_slots;         /* concurrent generations (engine sessions); default 1 */
    int32_t gen_threads;       /* kernel threads per generation; 0 = engine default */
    int32_t quiet;             /* no access log on stderr */
    const char *llm;           /* language model GGUF; NULL = $MMRAG_LLM, else the models dir's SmolLM2 */
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
