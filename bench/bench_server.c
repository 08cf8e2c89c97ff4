/* bench_server — loopback load on the REST server: 64 concurrent keep-alive clients on
 * POST /v1/search, for the two daemon modes side by side (thread per connection vs epoll
 * + thread pool), then a small concurrent /v1/ask run. Prints throughput, p50/p99
 * latency and the error count (must be 0). Env: MMRAG_BUILD, MMRAG_MODELS, MMRAG_TMP,
 * BENCH_CLIENTS (64), BENCH_SECONDS (5), BENCH_ASK_CLIENTS (4, 0 = skip ask). */
#include "api/server/server.h"
#include "bench/bench_http.h"
#include "mmrag.h"

#include <signal.h>

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
