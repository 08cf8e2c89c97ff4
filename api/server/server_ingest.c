/* api/server/server_ingest.c — one ingest job: the shared pipeline (api/core/pipeline.h)
 * into the job's collection, then text embeddings for the new chunks when an encoder is
 * loaded. */
#include "api/server/server_internal.h"
#include "api/core/embed.h"
#include "api/core/pipeline.h"
#include "index/store.h"

#include <stdio.h>
#include <string.h>

typedef struct { srv_server *s; srv_job *j; int32_t last; } progress_ctx;

static int on_progress(void *user, int32_t done, int32_t pages) {
    progress_ctx *p = user;
    pthread_mutex_lock(&p->s->qmu);
    p->j->pages_done = done;
    p->j->pages_total = pages;
    pthread_mutex_unlock(&p->s->qmu);
    if (done > p->last) {
        pthread_mutex_lock(&p->s->metrics.mu);
        p->s->metrics.ingest_pages += (uint64_t)(done - p->last);
        pthread_mutex_unlock(&p->s->metrics.mu);
        p->last = done;
    }
    return p->s->stopping ? 1 : 0;   /* shutdown: abort, nothing is written */
}

int srv_ingest_run(srv_server *s, srv_job *j) {
    /* A worker's own handle: pipeline runs a long document transaction on it. */
    store *st = NULL;
    char err[512];
    if (store_open(j->coll->dir, NULL, &st, err, sizeof err) != STORE_OK) {
        snprintf(j->error, sizeof j->error, "%s", err);
        return -1;
    }
    pipeline_options o;
    pipeline_options_default(&o);
    o.isolate.enabled = s->cfg.ingest_isolate;
    o.isolate.timeout_s = s->cfg.ingest_timeout_s;
    o.isolate.mem_mb = s->cfg.ingest_mem_mb;
    o.isolate.cpu_s = s->cfg.ingest_cpu_s;
    o.isolate.worker_exe = s->cfg.ingest_worker;
    pipeline_result res;
    memset(&res, 0, sizeof res);
    progress_ctx pc = {s, j, 0};
    int rc = pipeline_index_file(st, j->path, &o, on_progress, &pc, &res, err, sizeof err);
    if (rc == PIPELINE_OK || rc == PIPELINE_EXISTS) {
        pthread_mutex_lock(&s->qmu);
        j->doc_id = res.doc_id;
        j->existed = rc == PIPELINE_EXISTS;
        if (j->pages_total == 0) j->pages_total = j->pages_done = res.pages;
        pthread_mutex_unlock(&s->qmu);
        embed_ctx *ec = srv_query_embedder(s);
        if (ec && !s->stopping && embed_pending(ec, st, NULL, err, sizeof err))
            fprintf(stderr, "mmrag serve: %s: embeddings not written: %s\n", j->name, err);
        store_close(st);
        return 0;
    }
    const char *msg = err;
    /* messages name the kept path; show the client's file name instead */
    const char *colon = strstr(err, ".pdf: ");
    if (colon) msg = colon + 6;
    pthread_mutex_lock(&s->qmu);
    if (res.isolate_rc && rc != PIPELINE_ABORTED)
        snprintf(j->failure, sizeof j->failure, "%s", isolate_status_name(res.isolate_rc));
    snprintf(j->error, sizeof j->error, "%s%s%s", rc == PIPELINE_ABORTED ? "aborted: " : "",
             rc == PIPELINE_ABORTED ? "server shutting down" : j->name,
             rc == PIPELINE_ABORTED ? "" : ": ");
    if (rc != PIPELINE_ABORTED)
        snprintf(j->error + strlen(j->error), sizeof j->error - strlen(j->error), "%s", msg);
    pthread_mutex_unlock(&s->qmu);
    store_close(st);
    return -1;
}
