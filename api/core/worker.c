/* api/core/worker.c — claim, ingest, embed, end (worker.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "api/core/worker.h"

void worker_opts_default(worker_opts *o, const char *db) {
    memset(o, 0, sizeof *o);
    char host[40] = "host";
    gethostname(host, sizeof host - 1);
    snprintf(o->id, sizeof o->id, "%s:%d", host, (int)getpid());
    o->db = db;
    o->lease_s = 60;
    pipeline_options_default(&o->pipeline);
}

int worker_submit_mem(store *s, const void *pdf, size_t len, const char *name, int64_t *job_id,
                      char *err, size_t errlen) {
    char sha[65];
    ingest_mem_sha256(pdf, len, sha);
    int rc = store_file_put(s, sha, pdf, len);
    if (!rc || rc == STORE_EXISTS) rc = store_job_submit(s, sha, name, job_id);
    if (rc < 0) snprintf(err, errlen, "%s: %s", name, store_errmsg(s));
    return rc;
}

int worker_submit_file(store *s, const char *path, const char *name, int64_t *job_id,
                       char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(err, errlen, "%s: cannot open", path); return STORE_ERR_IO; }
    size_t cap = 1 << 20, len = 0, n;
    uint8_t *buf = malloc(cap);
    while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb) { free(buf); buf = NULL; }
            else buf = nb;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        snprintf(err, errlen, "%s: %s", path, bad ? "read error" : "out of memory");
        return bad ? STORE_ERR_IO : STORE_ERR_NOMEM;
    }
    int rc = worker_submit_mem(s, buf, len, name ? name : path, job_id, err, errlen);
    free(buf);
    return rc;
}

/* ---- the lease heartbeat ---- */
typedef struct {
    const worker_opts *o;
    int64_t job;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, lost;
    int32_t done, pages;
} beat;

static void *beat_main(void *arg) {
    beat *b = arg;
    store *s = NULL;
    char err[256];
    int open_rc = store_open(b->o->db, NULL, &s, err, sizeof err);
    pthread_mutex_lock(&b->mu);
    while (!b->stop) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_sec += b->o->lease_s / 3 > 0 ? b->o->lease_s / 3 : 1;
        pthread_cond_timedwait(&b->cv, &b->mu, &t);
        if (b->stop) break;
        int32_t done = b->done, pages = b->pages;
        pthread_mutex_unlock(&b->mu);
        int rc = open_rc ? open_rc : store_job_renew(s, b->job, b->o->id, b->o->lease_s, done, pages);
        pthread_mutex_lock(&b->mu);
        if (rc == STORE_ERR_NOTFOUND) b->lost = 1;   /* taken over: stop working on it */
    }
    pthread_mutex_unlock(&b->mu);
    store_close(s);
    return NULL;
}

typedef struct { beat *b; const store_job *job; } page_ctx;
static int on_page(void *user, int32_t done, int32_t pages) {
    page_ctx *p = user;
    pthread_mutex_lock(&p->b->mu);
    p->b->done = done;
    p->b->pages = pages;
    int lost = p->b->lost;
    pthread_mutex_unlock(&p->b->mu);
    if (lost) return 1;
    return p->b->o->on_page ? p->b->o->on_page(p->b->o->user, p->job, done, pages) : 0;
}

/* Ingest and embed the claimed job; fills job->state/doc/error as it should end.
 * Returns 0, or -1 when the job must be left to its lease (store trouble, aborted, lost). */
static int run_claimed(store *s, const worker_opts *o, beat *b, store_job *job,
                       pipeline_result *res, int *prc, char *err, size_t errlen) {
    uint8_t *pdf = NULL;
    size_t len = 0;
    if (store_file_get(s, job->sha256, &pdf, &len) != STORE_OK) {
        snprintf(err, errlen, "job %lld: %s", (long long)job->id, store_errmsg(s));
        return -1;
    }
    page_ctx pc = {b, job};
    int rc = pipeline_index_mem(s, pdf, len, job->name, &o->pipeline, on_page, &pc, res, err, errlen);
    *prc = rc;
    free(pdf);
    if (rc == PIPELINE_ERR_INPUT) {   /* the file itself is bad: no retry */
        snprintf(job->state, sizeof job->state, "failed");
        snprintf(job->error, sizeof job->error, "%s", err);
        return 0;
    }
    if (rc != PIPELINE_OK && rc != PIPELINE_EXISTS) {
        if (rc == PIPELINE_ABORTED) snprintf(err, errlen, "job %lld: %s", (long long)job->id,
                                             b->lost ? "taken over by another worker" : "aborted");
        return -1;
    }
    job->doc = res->doc_id;
    if (o->embed && embed_pending(o->embed, s, NULL, err, errlen))
        fprintf(stderr, "mmrag worker: %s: vectors not written yet: %s\n", job->name, err);
    snprintf(job->state, sizeof job->state, "done");
    return 0;
}

int worker_run_one(store *s, const worker_opts *o, store_job *job, pipeline_result *res,
                   int *pipeline_rc, char *err, size_t errlen) {
    memset(res, 0, sizeof *res);
    int rc = store_job_claim(s, o->id, o->lease_s, 0, job);
    if (rc == STORE_ERR_NOTFOUND) return 0;
    if (rc) { snprintf(err, errlen, "%s", store_errmsg(s)); return -1; }
    return worker_run_job(s, o, job, res, pipeline_rc, err, errlen);
}

int worker_run_job(store *s, const worker_opts *o, store_job *job, pipeline_result *res,
                   int *pipeline_rc, char *err, size_t errlen) {
    memset(res, 0, sizeof *res);
    int rc, prc_dummy;
    if (!pipeline_rc) pipeline_rc = &prc_dummy;
    *pipeline_rc = PIPELINE_ABORTED;
    beat b = {.o = o, .job = job->id};
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    pthread_t th;
    int started = pthread_create(&th, NULL, beat_main, &b) == 0;
    int run = run_claimed(s, o, &b, job, res, pipeline_rc, err, errlen);
    pthread_mutex_lock(&b.mu);
    b.stop = 1;
    pthread_cond_signal(&b.cv);
    pthread_mutex_unlock(&b.mu);
    if (started) pthread_join(th, NULL);
    pthread_cond_destroy(&b.cv);
    pthread_mutex_destroy(&b.mu);
    if (run) return -1;
    int failed = !strcmp(job->state, "failed");
    job->pages = job->pages_done = res->pages;
    rc = store_job_renew(s, job->id, o->id, o->lease_s, res->pages, res->pages);   /* its size */
    if (!rc) rc = store_job_finish(s, job->id, o->id, failed ? 0 : job->doc, failed ? job->error : NULL);
    if (rc == STORE_ERR_NOTFOUND) {   /* taken over meanwhile: the other worker ends it */
        snprintf(err, errlen, "job %lld: taken over by another worker", (long long)job->id);
        return -1;
    }
    if (rc) { snprintf(err, errlen, "%s", store_errmsg(s)); return -1; }
    return 1;
}
