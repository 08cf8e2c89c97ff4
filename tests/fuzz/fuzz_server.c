/* Fuzz target: the REST server's request handling, end to end over loopback: libmicrohttpd,
 * the JSON body parsers of search/ask/chat/locate, the multipart and raw upload paths, ids
 * and page numbers in paths. The first byte picks a route; the rest is the body (or, for
 * GET/DELETE, the tail of the path). The server runs in this process on port 0 with an
 * empty collection and the text encoder only (no language model: generation routes must
 * answer with a clear error, not crash or hang).
 * Property: every request gets an HTTP reply, and no reply is a 5xx other than 501/503
 * (not built / busy) or 507 (the disk cannot take the upload). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include "tests/fuzz/fuzz.h"
#include "api/server/server.h"

static srv_server *srv;
static uint16_t port;
static char dir[512];

/* The server's threads must be gone before the process tears down its globals. */
static void stop_server(void) {
    srv_stop(srv);
    srv = NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    char models[700], link[800], target[1024], err[512];
    snprintf(dir, sizeof dir, "%s/mmrag-fuzz-srv-%ld", fuzz_env("TMPDIR", "/tmp"), (long)getpid());
    snprintf(models, sizeof models, "%s/models", dir);
    if (mkdir(dir, 0700) && errno != EEXIST) abort();
    if (mkdir(models, 0700) && errno != EEXIST) abort();
    const char *real = fuzz_env("MMRAG_MODELS", "models");
    char *abs_real = realpath(real, NULL);
    if (!abs_real) { fprintf(stderr, "no models dir %s\n", real); abort(); }
    snprintf(target, sizeof target, "%s/minilm", abs_real);
    snprintf(link, sizeof link, "%s/minilm", models);
    free(abs_real);
    if (symlink(target, link) && errno != EEXIST) abort();
    srv_config c;
    srv_config_default(&c);
    c.listen = "127.0.0.1:0";
    char db[800];
    snprintf(db, sizeof db, "%s/db", dir);
    c.db = db;
    c.models = models;
    c.max_upload = 1 << 20;
    c.max_body = 1 << 16;
    c.quiet = getenv("FUZZ_SERVER_LOG") ? 0 : 1;
    c.rate_limit = 0;
    c.ingest_workers = 1;
    c.ingest_timeout_s = 20;
    if (srv_start(&c, &srv, err, sizeof err)) { fprintf(stderr, "%s\n", err); abort(); }
    port = srv_port(srv);
    atexit(stop_server);
    return 0;
}

typedef struct { const char *method, *path, *ctype; } route;
static const route routes[] = {
    {"POST", "/v1/search", "application/json"},
    {"POST", "/v1/ask", "application/json"},
    {"POST", "/v1/chat/completions", "application/json"},
    {"POST", "/v1/locate", "application/json"},
    {"POST", "/v1/documents?name=f.pdf", "application/pdf"},
    {"POST", "/v1/documents", "multipart/form-data; boundary=XyZ"},
    {"GET", "/v1/documents/", NULL},
    {"DELETE", "/v1/documents/", NULL},
    {"GET", "/v1/jobs/", NULL},
    {"GET", "/v1/documents/1/pages/", NULL},
    {"GET", "/v1/documents?", NULL},
};
#define N_ROUTES (sizeof routes / sizeof routes[0])

/* Path bytes a client could send: unreserved and percent signs; the rest becomes '_'. */
static size_t path_tail(const uint8_t *d, size_t n, char *out, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < cap; i++) {
        char ch = (char)d[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 strchr("-._~%=&.", ch);
        out[k++] = ok && ch ? ch : '_';
    }
    out[k] = 0;
    return k;
}

/* libFuzzer's -timeout timer (SIGALRM) interrupts blocking calls: EINTR is not an answer
 * (a slow request that met the tick read as "no reply"). */
static ssize_t recv_retry(int fd, void *buf, size_t n) {
    ssize_t r;
    do r = recv(fd, buf, n, 0); while (r < 0 && errno == EINTR);
    return r;
}

static int send_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!srv) LLVMFuzzerInitialize(NULL, NULL);
    if (size < 1 || size > (1 << 18)) return 0;
    const route *r = &routes[data[0] % N_ROUTES];
    const uint8_t *body = data + 1;
    size_t blen = size - 1;
    char head[1024], tail[128] = "";
    if (!r->ctype) {
        path_tail(body, blen < 100 ? blen : 100, tail, sizeof tail);
        blen = 0;
    }
    int hl = r->ctype
        ? snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: fuzz\r\nContent-Type: %s\r\n"
                   "Content-Length: %zu\r\nConnection: close\r\n\r\n", r->method, r->path, r->ctype, blen)
        : snprintf(head, sizeof head, "%s %s%s HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n\r\n",
                   r->method, r->path, tail);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    FUZZ_ASSERT(fd >= 0, "socket");
    struct timeval tv = {60, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    FUZZ_ASSERT(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "the server stopped accepting");
    /* a server may answer (e.g. 413) before it has read the whole body: a failed send is
     * fine as long as a reply comes */
    if (send_all(fd, head, (size_t)hl) == 0 && blen) (void)send_all(fd, body, blen);
    char reply[64] = "";
    size_t got = 0;
    ssize_t n;
    while (got + 1 < sizeof reply && (n = recv_retry(fd, reply + got, sizeof reply - 1 - got)) > 0)
        got += (size_t)n;
    reply[got] = 0;
    char drain[4096];
    while (recv_retry(fd, drain, sizeof drain) > 0) {}
    close(fd);
    int status = 0;
    FUZZ_ASSERT(sscanf(reply, "HTTP/1.%*d %d", &status) == 1,
                "no HTTP reply to %s %s (got %zu bytes)", r->method, r->path, got);
    FUZZ_ASSERT(status < 500 || status == 501 || status == 503 || status == 507, "%s %s%s answered %d",
                r->method, r->path, tail, status);
    return 0;
}
