/* api/cli/cli_worker.c — `mmrag worker`: ingest jobs from a shared (postgres://)
 * collection's queue until stopped (api/core/worker.h); run any number, anywhere. */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "api/cli/cli.h"
#include "api/core/worker.h"

static const char usage[] =
    "usage: mmrag worker --db postgres://USER@HOST:PORT/DB[?collection=NAME] [options]\n"
    "Take ingest jobs from the collection's queue (uploads, `mmrag index --no-wait`), parse,\n"
    "embed and commit them, until stopped. Any number of workers on any machines share a\n"
    "queue; a worker killed mid-document leaves nothing partial, and its job is taken again\n"
    "when its lease runs out.\n"
    "  --threads N     jobs at once (default 1)\n"
    "  --lease S       seconds a claimed job stays ours without a heartbeat (default 60)\n"
    "  --once          stop when the queue is empty instead of waiting for more\n"
    "  --no-embed      do not write vectors (search embeds what is missing later)\n"
    "  --no-ocr        do not OCR pages without text\n"
    "  --models DIR    model files (default $MMRAG_MODELS or ./models)\n";

static volatile sig_atomic_t stopping;
static void on_signal(int sig) { (void)sig; stopping = 1; }
static int stop_page(void *user, const store_job *job, int32_t done, int32_t pages) {
    (void)user; (void)job; (void)done; (void)pages;
    return stopping;   /* the job is left to its lease: another worker retries it */
}

typedef struct {
    worker_opts o;
    int once, failed, done;
    pthread_mutex_t *mu;
} wctx;

static void *work(void *arg) {
    wctx *w = arg;
    store *s = NULL;
    char err[1024];
    if (store_open(w->o.db, NULL, &s, err, sizeof err)) {
        cli_err("%s", err);
        w->failed = 1;
        return NULL;
    }
    while (!stopping) {
        store_job j;
        pipeline_result res;
        int prc, rc = worker_run_one(s, &w->o, &j, &res, &prc, err, sizeof err);
        if (rc < 0 && stopping) break;
        if (rc < 0) {   /* database trouble: say so, wait, try again */
            cli_err("%s", err);
            sleep(2);
            continue;
        }
        if (rc == 0) {
            if (w->once) break;
            for (int i = 0; i < 10 && !stopping; i++) usleep(100 * 1000);
            continue;
        }
        pthread_mutex_lock(w->mu);
        w->done++;
        if (!strcmp(j.state, "done"))
            printf("job %-5lld %s doc %-4lld %4d pages  %s\n", (long long)j.id,
                   prc == PIPELINE_EXISTS ? "unchanged" : "indexed  ", (long long)j.doc,
                   res.pages, j.name);
        else
            printf("job %-5lld failed    %s\n", (long long)j.id, j.error);
        fflush(stdout);
        pthread_mutex_unlock(w->mu);
    }
    store_close(s);
    return NULL;
}

int cli_worker(int argc, char **argv) {
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'}, {"threads", required_argument, 0, 't'},
        {"lease", required_argument, 0, 'l'}, {"once", no_argument, 0, '1'},
        {"no-embed", no_argument, 0, 'E'}, {"no-ocr", no_argument, 0, 'O'},
        {"models", required_argument, 0, 'm'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *db = NULL, *models = NULL;
    int threads = 1, lease = 60, once = 0, embed = 1, ocr = 1, c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "d:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': db = optarg; break;
        case 't': if (cli_parse_int("--threads", optarg, 1, 64, &threads)) return CLI_USAGE; break;
        case 'l': if (cli_parse_int("--lease", optarg, 2, 86400, &lease)) return CLI_USAGE; break;
        case '1': once = 1; break;
        case 'E': embed = 0; break;
        case 'O': ocr = 0; break;
        case 'm': models = optarg; break;
        case 'h': fputs(usage, stdout); return CLI_OK;
        default: fputs(usage, stderr); return CLI_USAGE;
        }
    }
    db = cli_db_dir(db);
    if (!store_is_url(db))
        return cli_usage_error(usage, "worker: --db must name a shared collection (postgres://...);"
                               " a directory collection is indexed by `mmrag index` or its server");
    store *s = cli_store_open(db, 1);   /* create/migrate once, and fail early when down */
    if (!s) return CLI_DBERR;
    store_close(s);
    char err[512];
    embed_ctx *e = NULL;
    if (embed && embed_create(models, &e, err, sizeof err))
        cli_err("note: %s; chunks are searchable by keywords only until embedded", err);
    setenv("OMP_THREAD_LIMIT", "1", 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    wctx w[64];
    pthread_t th[64];
    int started = 0, failed = 0, done = 0;
    for (int i = 0; i < threads; i++) {
        worker_opts_default(&w[i].o, db);
        snprintf(w[i].o.id + strlen(w[i].o.id), sizeof w[i].o.id - strlen(w[i].o.id), ":%d", i);
        w[i].o.lease_s = lease;
        w[i].o.embed = e;
        w[i].o.pipeline.ingest.ocr = ocr;
        w[i].o.pipeline.isolate.worker_exe = "/proc/self/exe";
        w[i].o.on_page = stop_page;
        w[i].once = once;
        w[i].failed = w[i].done = 0;
        w[i].mu = &mu;
        if (pthread_create(&th[i], NULL, work, &w[i]) == 0) started++;
    }
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        failed |= w[i].failed;
        done += w[i].done;
    }
    embed_free(e);
    if (once) printf("%d jobs\n", done);
    return failed || !started ? CLI_DBERR : stopping ? 130 : CLI_OK;
}
