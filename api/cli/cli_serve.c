/* api/cli/cli_serve.c — `mmrag serve`: parse options, start the server, print the bound
 * port, wait for SIGINT/SIGTERM, then shut down gracefully. */
#include "api/server/server.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: mmrag serve [--listen HOST:PORT] [--db DIR] [--keys FILE] [options]\n"
    "  --listen HOST:PORT   address to bind (default 127.0.0.1:8080; port 0 = any free port)\n"
    "  --db DIR             database directory (with --keys: one subdirectory per collection),\n"
    "                       or postgres://USER@HOST:PORT/DB[?collection=NAME], a collection\n"
    "                       shared by any number of servers and `mmrag worker`s (with --keys:\n"
    "                       one collection per key's name); uploads queue there\n"
    "  --db-read URL        with a postgres --db: searches and answers read this streaming-\n"
    "                       replication standby (postgres://...; same collections); writes,\n"
    "                       jobs and page renders stay on --db\n"
    "  --keys FILE          API keys, lines \"KEY COLLECTION\"; required for non-loopback binds\n"
    "  --models DIR         model directory (default $MMRAG_MODELS or models)\n"
    "  --model GGUF         language model for /v1/ask and /v1/chat/completions (default\n"
    "                       $MMRAG_LLM, else DIR/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf)\n"
    "  --max-upload BYTES   largest PDF upload (default 64 MiB)\n"
    "  --max-body BYTES     largest JSON body (default 1 MiB)\n"
    "  --max-inflight N     concurrent requests before 503 (default 64)\n"
    "  --timeout SECONDS    idle connection timeout (default 30)\n"
    "  --pool N             epoll with N threads instead of a thread per connection\n"
    "  --ingest-workers N   parallel ingest jobs (default: CPUs, 2..4)\n"
    "  --ingest-timeout S   wall-clock limit per uploaded PDF (default 600; 0 = none)\n"
    "  --ingest-mem-limit MB  address-space limit of the parser process (default 4096; 0 = none)\n"
    "  --ingest-cpu-limit S CPU seconds of the parser process (default: 1.25 x the ingest timeout + 1)\n"
    "  --no-isolate         parse uploads in the server process (no limits; not advised)\n"
    "  --queue N            queued ingest jobs before 503 (default 16)\n"
    "  --rate-limit N       requests per second per API key (with --keys; default 20; 0 = none)\n"
    "  --rate-burst N       requests a key may send at once (default 5 x the rate)\n"
    "  --gen-slots N        concurrent generations (default 1)\n"
    "  --gen-threads N      kernel threads per generation (default: all CPUs)\n"
    "  --quiet              no access log\n"
    "The bound port is printed on stdout as \"listening on HOST:PORT\".\n";

static int parse_num(const char *opt, const char *v, long long lo, long long hi, long long *out) {
    char *end = NULL;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || errno || !*v || *end || x < lo || x > hi) {
        fprintf(stderr, "mmrag serve: %s needs a number in %lld..%lld\n", opt, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

int cli_serve(int argc, char **argv) {
    srv_config c;
    srv_config_default(&c);
    c.ingest_worker = "/proc/self/exe";   /* this binary's ingest-worker command */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long x = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage, stdout); return 0; }
        if (!strcmp(a, "--quiet")) { c.quiet = 1; continue; }
        if (!strcmp(a, "--no-isolate")) { c.ingest_isolate = 0; continue; }
        if (!v) { fprintf(stderr, "mmrag serve: unknown option or missing value: %s\n%s", a, usage); return 2; }
        i++;
        if (!strcmp(a, "--listen")) c.listen = v;
        else if (!strcmp(a, "--db")) c.db = v;
        else if (!strcmp(a, "--db-read")) c.db_read = v;
        else if (!strcmp(a, "--keys")) c.keys_file = v;
        else if (!strcmp(a, "--models")) c.models = v;
        else if (!strcmp(a, "--model")) c.llm = v;
        else if (!strcmp(a, "--max-upload")) { if (parse_num(a, v, 1, 1ll << 40, &x)) return 2; c.max_upload = x; }
        else if (!strcmp(a, "--max-body")) { if (parse_num(a, v, 64, 1ll << 30, &x)) return 2; c.max_body = x; }
        else if (!strcmp(a, "--max-inflight")) { if (parse_num(a, v, 1, 100000, &x)) return 2; c.max_inflight = (int32_t)x; }
        else if (!strcmp(a, "--timeout")) { if (parse_num(a, v, 1, 86400, &x)) return 2; c.timeout_s = (int32_t)x; }
        else if (!strcmp(a, "--pool")) { if (parse_num(a, v, 0, 1024, &x)) return 2; c.pool = (int32_t)x; }
        else if (!strcmp(a, "--ingest-workers")) { if (parse_num(a, v, 1, 64, &x)) return 2; c.ingest_workers = (int32_t)x; }
        else if (!strcmp(a, "--ingest-timeout")) { if (parse_num(a, v, 0, 86400 * 7, &x)) return 2; c.ingest_timeout_s = (int32_t)x; }
        else if (!strcmp(a, "--ingest-mem-limit")) { if (parse_num(a, v, 0, 1 << 24, &x)) return 2; c.ingest_mem_mb = (int32_t)x; }
        else if (!strcmp(a, "--ingest-cpu-limit")) { if (parse_num(a, v, 0, 86400 * 7, &x)) return 2; c.ingest_cpu_s = (int32_t)x; }
        else if (!strcmp(a, "--rate-limit")) { if (parse_num(a, v, 0, 1000000, &x)) return 2; c.rate_limit = (int32_t)x; }
        else if (!strcmp(a, "--rate-burst")) { if (parse_num(a, v, 1, 10000000, &x)) return 2; c.rate_burst = (int32_t)x; }
        else if (!strcmp(a, "--queue")) { if (parse_num(a, v, 1, 100000, &x)) return 2; c.queue_max = (int32_t)x; }
        else if (!strcmp(a, "--gen-slots")) { if (parse_num(a, v, 1, 64, &x)) return 2; c.gen_slots = (int32_t)x; }
        else if (!strcmp(a, "--gen-threads")) { if (parse_num(a, v, 0, 256, &x)) return 2; c.gen_threads = (int32_t)x; }
        else { fprintf(stderr, "mmrag serve: unknown option %s\n%s", a, usage); return 2; }
    }
    /* Block the signals in every thread; this thread waits for them with sigwait. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    srv_server *s = NULL;
    char err[512];
    if (srv_start(&c, &s, err, sizeof err)) {
        fprintf(stderr, "mmrag serve: %s\n", err);
        return 1;
    }
    char host[64];
    const char *colon = strrchr(c.listen, ':');
    snprintf(host, sizeof host, "%.*s", colon ? (int)(colon - c.listen) : 0, c.listen);
    printf("listening on %s:%u\n", host, srv_port(s));
    fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "mmrag serve: %s, shutting down\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    srv_stop(s);
    return 0;
}
