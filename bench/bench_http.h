/* Loopback HTTP load for the benches (header-only, static helpers): keep-alive clients
 * on one or several server ports; throughput, p50/p99 latency, error count. */
#ifndef MMRAG_BENCH_HTTP_H
#define MMRAG_BENCH_HTTP_H
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_stats.h"

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

typedef struct { double rps, p50, p99; int n, errors; } result;

/* `clients` threads for `seconds` (or max_requests each), client i on ports[i % nports] */
static result run_load_on(const uint16_t *ports, int nports, int clients, double seconds,
                          const char *path, const char *body, int max_requests, int keepalive) {
    client *cs = calloc((size_t)clients, sizeof *cs);
    pthread_t *th = calloc((size_t)clients, sizeof *th);
    double t0 = now_s();
    for (int i = 0; i < clients; i++) {
        cs[i] = (client){.port = ports[i % nports], .until = t0 + seconds, .path = path, .body = body,
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

static inline result run_load(uint16_t port, int clients, double seconds, const char *path,
                       const char *body, int max_requests, int keepalive) {
    return run_load_on(&port, 1, clients, seconds, path, body, max_requests, keepalive);
}

#endif
