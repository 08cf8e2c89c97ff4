/* api/core/indexer.c — parse workers and the embedding thread beside them (indexer.h). */
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "api/core/indexer.h"
#include "api/core/worker.h"

typedef struct {
    const indexer_opts *o;
    indexer_doc *docs;
    pthread_mutex_t mu;
    indexer_progress prog;
    int32_t next;
    int stop;                /* a database error: start no more */
    /* the embedding thread waits on cv for docs_gen (documents ended) or workers_done */
    pthread_cond_t cv;
    int64_t docs_gen;
    int workers_done;
    indexer_totals tot;
} ctx;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void indexer_opts_default(indexer_opts *o, const char *db) {
    memset(o, 0, sizeof *o);
    o->db = db;
    o->embed = 1;
    pipeline_options_default(&o->pipeline);
}

/* o->stop(); the caller holds the lock, like for every callback */
static int stop_locked(const ctx *c) {
    return c->o->stop && c->o->stop(c->o->user);
}

static int stopping(ctx *c) {
    pthread_mutex_lock(&c->mu);
    int s = stop_locked(c);
    pthread_mutex_unlock(&c->mu);
    return s;
}

__attribute__((format(printf, 2, 3))) static void note(ctx *c, const char *fmt, ...) {
    if (!c->o->on_note) return;
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&c->mu);
    c->o->on_note(c->o->user, msg);
    pthread_mutex_unlock(&c->mu);
}

/* ---- parse workers ------------------------------------------------------------------ */
typedef struct { ctx *c; const char *path; int32_t last; } page_ctx;

static int on_page(void *user, int32_t page, int32_t pages) {
    page_ctx *p = user;
    ctx *c = p->c;
    (void)pages;
    pthread_mutex_lock(&c->mu);
    c->prog.pages += page - p->last;
    p->last = page;
    if (c->o->on_page) c->o->on_page(c->o->user, &c->prog, p->path);
    int stop = stop_locked(c);
    pthread_mutex_unlock(&c->mu);
    return stop;
}

static int queue_page(void *user, const store_job *job, int32_t done, int32_t pages) {
    (void)job;
    return on_page(user, done, pages);
}

/* Runs the job of a file put in the shared queue; returns a pipeline_status. */
static int run_queued(ctx *c, store *s, indexer_doc *d, page_ctx *p, int thread, int64_t id) {
    worker_opts o;
    worker_opts_default(&o, c->o->db);
    snprintf(o.id + strlen(o.id), sizeof o.id - strlen(o.id), ":index%d", thread);
    o.pipeline = c->o->pipeline;
    o.on_page = queue_page;
    o.user = p;
    store_job jb;
    int prc = PIPELINE_ABORTED;
    int rc = store_job_claim(s, o.id, o.lease_s, id, &jb);
    if (rc == STORE_OK) {
        if (worker_run_job(s, &o, &jb, &d->res, &prc, d->err, sizeof d->err) < 0)
            return stopping(c) ? PIPELINE_ABORTED : PIPELINE_ERR_STORE;
        if (!strcmp(jb.state, "failed")) snprintf(d->err, sizeof d->err, "%s", jb.error);
        return prc;
    }
    if (rc != STORE_ERR_NOTFOUND) {
        snprintf(d->err, sizeof d->err, "%s: %s", d->path, store_errmsg(s));
        return PIPELINE_ERR_STORE;
    }
    /* another worker has it: wait for its end */
    while (!stopping(c) && (rc = store_job_get(s, id, &jb)) == STORE_OK &&
           strcmp(jb.state, "done") && strcmp(jb.state, "failed"))
        usleep(200 * 1000);
    if (stopping(c)) return PIPELINE_ABORTED;
    if (rc) {
        snprintf(d->err, sizeof d->err, "%s: %s", d->path, store_errmsg(s));
        return PIPELINE_ERR_STORE;
    }
    if (!strcmp(jb.state, "failed")) {
        snprintf(d->err, sizeof d->err, "%s", jb.error);
        return PIPELINE_ERR_INPUT;
    }
    d->res.doc_id = jb.doc;
    d->res.pages = jb.pages;
    return PIPELINE_EXISTS;   /* indexed by another worker */
}

/* On the shared store: the file's bytes and a job into the database, then run it. */
static int queue_index(ctx *c, store *s, indexer_doc *d, page_ctx *p, int thread) {
    char abs[PATH_MAX];
    const char *name = realpath(d->path, abs) ? abs : d->path;
    int rc = worker_submit_file(s, d->path, name, &d->job_id, d->err, sizeof d->err);
    if (rc < 0) {
        d->res.store_rc = rc;
        return rc == STORE_ERR_IO ? PIPELINE_ERR_INPUT : PIPELINE_ERR_STORE;
    }
    return c->o->no_wait ? INDEXER_QUEUED : run_queued(c, s, d, p, thread, d->job_id);
}

typedef struct { ctx *c; int thread; } worker_arg;

static void *parse_main(void *arg) {
    worker_arg *w = arg;
    ctx *c = w->c;
    store *s = NULL;
    char err[512] = "";
    store_options so;
    store_options_default(&so);
    int orc = store_open(c->o->db, &so, &s, err, sizeof err);
    for (;;) {
        pthread_mutex_lock(&c->mu);
        int stop = c->stop || stop_locked(c) || c->next >= c->prog.total;
        indexer_doc *d = stop ? NULL : &c->docs[c->next++];
        pthread_mutex_unlock(&c->mu);
        if (!d) break;
        page_ctx p = {c, d->path, 0};
        if (orc != STORE_OK) {
            d->rc = PIPELINE_ERR_STORE;
            d->res.store_rc = orc;
            snprintf(d->err, sizeof d->err, "%s: %s", d->path, err);
        } else if (store_is_shared(s)) {
            d->rc = queue_index(c, s, d, &p, w->thread);
        } else {
            d->rc = pipeline_index_file(s, d->path, &c->o->pipeline, on_page, &p, &d->res,
                                        d->err, sizeof d->err);
        }
        pthread_mutex_lock(&c->mu);
        c->prog.pages += d->res.pages - p.last;   /* settle: failed docs count what was parsed */
        c->prog.done++;
        if (d->rc == PIPELINE_ERR_STORE) c->stop = 1;
        if (c->o->on_doc) c->o->on_doc(c->o->user, d, &c->prog);
        c->docs_gen++;
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->mu);
    }
    store_close(s);
    return NULL;
}

/* ---- the embedding thread ----------------------------------------------------------- */
static int on_embed(void *user, int64_t done, int64_t total) {
    ctx *c = user;
    pthread_mutex_lock(&c->mu);
    if (c->workers_done && c->o->on_embed) c->o->on_embed(c->o->user, done, total);
    int stop = stop_locked(c);
    pthread_mutex_unlock(&c->mu);
    return stop;
}

/* Each pass embeds what the workers have committed so far; the last runs once they are
 * done. */
static void *embed_main(void *arg) {
    ctx *c = arg;
    char err[512];
    embed_ctx *e = c->o->embedder;
    if (!e && embed_create(c->o->models, &e, err, sizeof err)) {
        note(c, "%s; chunks are searchable by keywords only", err);
        return NULL;
    }
    store *s = NULL;
    store_options so;
    store_options_default(&so);
    if (store_open(c->o->db, &so, &s, err, sizeof err) != STORE_OK) {
        note(c, "embedding skipped: %s (search embeds later)", err);
        if (e != c->o->embedder) embed_free(e);
        return NULL;
    }
    if (*embed_figure_notice(e)) note(c, "%s", embed_figure_notice(e));
    /* a borrowed encoder's progress hook is its owner's (other threads may embed on it) */
    if (e != c->o->embedder) embed_set_progress(e, on_embed, c);
    int rc = 0;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        int last = c->workers_done;
        int64_t gen = c->docs_gen;
        pthread_mutex_unlock(&c->mu);
        if (stopping(c)) break;
        embed_counts part = {0};
        double t = now_s();
        rc = embed_pending(e, s, &part, err, sizeof err);
        c->tot.embed_seconds += now_s() - t;
        embed_counts *n = &c->tot.embedded;
        n->chunks += part.chunks, n->images += part.images, n->figures += part.figures;
        n->encoded += part.encoded, n->reused += part.reused;
        if (rc || last || stopping(c)) break;
        pthread_mutex_lock(&c->mu);
        while (!c->workers_done && c->docs_gen == gen) pthread_cond_wait(&c->cv, &c->mu);
        pthread_mutex_unlock(&c->mu);
    }
    if (rc && stopping(c))
        note(c, "embedding interrupted after %lld chunks (search embeds the rest later)",
             (long long)(c->tot.embedded.chunks + c->tot.embedded.images));
    else if (rc)
        note(c, "embedding stopped: %s (search embeds the rest later)", err);
    store_close(s);
    if (e != c->o->embedder) embed_free(e);
    return NULL;
}

int indexer_run(const indexer_opts *o, indexer_doc *docs, int32_t n, indexer_totals *t,
                char *err, size_t errlen) {
    /* create or migrate the collection once, before the workers race to do it */
    store *s = NULL;
    store_options so;
    store_options_default(&so);
    so.create = 1;
    int rc = store_open(o->db, &so, &s, err, errlen);
    if (rc != STORE_OK) return rc;
    store_close(s);
    ctx c = {.o = o, .docs = docs, .prog = {.total = n}};
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    for (int32_t i = 0; i < n; i++) {
        docs[i].rc = INDEXER_NOT_RUN;
        docs[i].job_id = 0;
        memset(&docs[i].res, 0, sizeof docs[i].res);
        snprintf(docs[i].err, sizeof docs[i].err, "not indexed: stopped after a database error");
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int jobs = o->jobs > 0 ? (o->jobs > 64 ? 64 : o->jobs) : ncpu > 8 ? 8 : ncpu < 1 ? 1 : (int)ncpu;
    if (jobs > n) jobs = n ? n : 1;
    double t0 = now_s();
    pthread_t th[64], emb_th;
    worker_arg args[64];
    int started = 0, embedding = o->embed && !o->no_wait;
    if (embedding && pthread_create(&emb_th, NULL, embed_main, &c) != 0) embedding = -1; /* after */
    for (int i = 0; i < jobs; i++) {
        args[i] = (worker_arg){&c, i};
        if (pthread_create(&th[i], NULL, parse_main, &args[i]) == 0) started++;
    }
    if (!started) parse_main(&args[0]);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    pthread_mutex_lock(&c.mu);
    c.tot.seconds = now_s() - t0;
    c.workers_done = 1;
    pthread_cond_broadcast(&c.cv);
    pthread_mutex_unlock(&c.mu);
    if (embedding == 1) pthread_join(emb_th, NULL);
    else if (embedding == -1 && !stopping(&c)) embed_main(&c);
    if (t) *t = c.tot;
    pthread_mutex_destroy(&c.mu);
    pthread_cond_destroy(&c.cv);
    return 0;
}
