/* bench_server — loopback load on the REST server: 64 concurrent keep-alive clients on
 * POST /v1/search, for the two daemon modes side by side (thread per connection vs epoll
 * + thread pool), then a small concurrent /v1/ask run. Prints throughput, p50/p99
 * latency and the error count (must be 0). Env: MMRAG_BUILD, MMRAG_MODELS, MMRAG_TMP,
 * BENCH_CLIENTS (64), BENCH_SECONDS (5), BENCH_ASK_CLIENTS (4, 0 = skip ask). */
#include "api/server/server.h"
#include "mmrag.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int connect_port(uint16_t port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa)) { if (fd >= 0) close(fd); return -1; }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* One request on a keep-alive connection; returns the status or -1. Reads the whole
 * body (Content-Length, or until close for streams). */
static int http_post(int *fd, uint16_t port, const char *path, const char *body, int keepalive) {
    if (*fd < 0 && (*fd = connect_port(port)) < 0) return -1;
    char req[2048];
    int n = body ? snprintf(req, sizeof req, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                            "Content-Length: %zu\r\n%s\r\n%s", path, strlen(body),
                            keepalive ? "" : "Connection: close\r\n", body)
                 : snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n", path,
                            keepalive ? "" : "Connection: close\r\n");
    if (write(*fd, req, (size_t)n) != n) { close(*fd); *fd = -1; return -1; }
    static __thread char buf[1 << 16];
    size_t have = 0;
    char *hend = NULL;
    while (!hend) {
        ssize_t r = read(*fd, buf + have, sizeof buf - 1 - have);
        if (r <= 0) { close(*fd); *fd = -1; return -1; }
        have += (size_t)r;
        buf[have] = 0;
        hend = strstr(buf, "\r\n\r\n");
        if (!hend && have >= sizeof buf - 1) { close(*fd); *fd = -1; return -1; }
    }
    int status = atoi(buf + 9);
    char *cl = strcasestr(buf, "Content-Length:");
    size_t body_have = have - (size_t)(hend + 4 - buf);
    if (cl && cl < hend) {
        size_t want = (size_t)strtoull(cl + 15, NULL, 10);
        while (body_have < want) {
            ssize_t r = read(*fd, buf, sizeof buf);
            if (r <= 0) { close(*fd); *fd = -1; return -1; }
            body_have += (size_t)r;
        }
    } else {
        while (read(*fd, buf, sizeof buf) > 0) {}
        close(*fd);
        *fd = -1;
    }
    if (!keepalive && *fd >= 0) { close(*fd); *fd = -1; }
    return status;
}

typedef struct {
    uint16_t port;
    double until;
    const char *path, *body;
    int max_requests, keepalive;
    double *lat; int n_lat, cap_lat;
    int errors;
} client;

static void *client_main(void *p) {
    client *c = p;
    int fd = -1;
    while (now_s() < c->until && (c->max_requests == 0 || c->n_lat < c->max_requests)) {
        double t0 = now_s();
        int st = http_post(&fd, c->port, c->path, c->body, c->keepalive);
        double dt = now_s() - t0;
        if (st != 200) c->errors++;
        if (c->n_lat == c->cap_lat) {
            c->cap_lat = c->cap_lat ? c->cap_lat * 2 : 1024;
            c->lat = realloc(c->lat, (size_t)c->cap_lat * sizeof *c->lat);
        }
        c->lat[c->n_lat++] = dt;
    }
    if (fd >= 0) close(fd);
    return NULL;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct { double rps, p50, p99; int n, errors; } result;

static result run_load(uint16_t port, int clients, double seconds, const char *path,
                       const char *body, int max_requests, int keepalive) {
    client *cs = calloc((size_t)clients, sizeof *cs);
    pthread_t *th = calloc((size_t)clients, sizeof *th);
    double t0 = now_s();
    for (int i = 0; i < clients; i++) {
        cs[i] = (client){.port = port, .until = t0 + seconds, .path = path, .body = body,
                         .max_requests = max_requests, .keepalive = keepalive};
        pthread_create(&th[i], NULL, client_main, &cs[i]);
    }
    int total = 0, errors = 0;
    for (int i = 0; i < clients; i++) { pthread_join(th[i], NULL); total += cs[i].n_lat; errors += cs[i].errors; }
    double wall = now_s() - t0;
    double *all = malloc((size_t)(total ? total : 1) * sizeof *all);
    int k = 0;
    for (int i = 0; i < clients; i++) {
        memcpy(all + k, cs[i].lat, (size_t)cs[i].n_lat * sizeof *all);
        k += cs[i].n_lat;
        free(cs[i].lat);
    }
    qsort(all, (size_t)total, sizeof *all, cmp_d);
    result r = {total / wall, total ? all[total / 2] * 1e3 : 0,
                total ? all[(int)(total * 0.99) < total ? (int)(total * 0.99) : total - 1] * 1e3 : 0,
                total, errors};
    free(all);
    free(cs);
    free(th);
    return r;
}

static int env_int(const char *n, int d) { const char *v = getenv(n); return v && *v ? atoi(v) : d; }

int main(void) {
    const char *tmp = getenv("MMRAG_TMP") ? getenv("MMRAG_TMP") : "/tmp";
    const char *b = getenv("MMRAG_BUILD") ? getenv("MMRAG_BUILD") : "build";
    signal(SIGPIPE, SIG_IGN);
    int clients = env_int("BENCH_CLIENTS", 64), secs = env_int("BENCH_SECONDS", 5);
    int ask_clients = env_int("BENCH_ASK_CLIENTS", 4);
    char samples[1024], db[1024], cmd[4096];
    snprintf(samples, sizeof samples, "%s/bench-srv-samples", tmp);
    snprintf(db, sizeof db, "%s/bench-srv-db", tmp);
    snprintf(cmd, sizeof cmd, "rm -rf %s %s && %s/tests/tool_gencorpus samples %s >/dev/null 2>&1",
             samples, db, b, samples);
    if (system(cmd)) { fprintf(stderr, "bench_server: tool_gencorpus failed\n"); return 1; }
    mmrag *h;
    char err[512];
    if (mmrag_open(db, NULL, &h, err, sizeof err)) { fprintf(stderr, "bench_server: %s\n", err); return 1; }
    const char *names[] = {"helios-inverter-manual.pdf", "northwind-q3-report.pdf", "sparse-attention-paper.pdf"};
    for (int i = 0; i < 3; i++) {
        char p[2048];
        snprintf(p, sizeof p, "%s/%s", samples, names[i]);
        if (mmrag_index_file(h, p, NULL)) fprintf(stderr, "bench_server: %s\n", mmrag_errmsg(h));
    }
    mmrag_close(h);

    const char *q = "{\"query\":\"maximum efficiency of the inverter\",\"k\":5}";
    printf("search: %d concurrent keep-alive clients, %d s per mode, loopback\n", clients, secs);
    printf("%-34s %10s %9s %9s %8s %7s\n", "mode", "req/s", "p50 ms", "p99 ms", "requests", "errors");
    double rps[2] = {0, 0};
    for (int mode = 0; mode < 2; mode++) {
        srv_config c;
        srv_config_default(&c);
        c.listen = "127.0.0.1:0";
        c.db = db;
        c.quiet = 1;
        c.max_inflight = clients * 2;
        c.pool = mode ? 4 : 0;
        srv_server *s;
        if (srv_start(&c, &s, err, sizeof err)) { fprintf(stderr, "bench_server: %s\n", err); return 1; }
        run_load(srv_port(s), 2, 0.5, "/v1/search", q, 5, 1);   /* warm: load indexes */
        result r = run_load(srv_port(s), clients, secs, "/v1/search", q, 0, 1);
        rps[mode] = r.rps;
        result hz = run_load(srv_port(s), clients, secs / 2.0, "/healthz", NULL, 0, 1);
        printf("%-34s %10.1f %9.2f %9.2f %8d %7d\n",
               mode ? "healthz, epoll + pool of 4" : "healthz, thread per connection", hz.rps,
               hz.p50, hz.p99, hz.n, hz.errors);
        printf("%-34s %10.1f %9.2f %9.2f %8d %7d\n",
               mode ? "epoll + pool of 4 threads" : "thread per connection", r.rps, r.p50, r.p99,
               r.n, r.errors);
        if (mode == 0 && ask_clients > 0) {
            char llm[2048];
            const char *m = getenv("MMRAG_MODELS") ? getenv("MMRAG_MODELS") : "models";
            snprintf(llm, sizeof llm, "%s/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", m);
            if (access(llm, R_OK) == 0) {
                const char *aq = "{\"question\":\"What is the maximum efficiency?\",\"k\":2,\"max_tokens\":8}";
                run_load(srv_port(s), 1, 60, "/v1/ask", aq, 1, 1);   /* warm: load the model */
                result a = run_load(srv_port(s), ask_clients, 300, "/v1/ask", aq, 1, 1);
                printf("%-34s %10.2f %9.1f %9.1f %8d %7d\n", "ask (8 tokens, 1 generation slot)",
                       a.rps, a.p50, a.p99, a.n, a.errors);
            }
        }
        srv_stop(s);
    }
    printf("search ratio epoll-pool / thread-per-connection: %.2fx\n", rps[0] > 0 ? rps[1] / rps[0] : 0);
    return 0;
}
