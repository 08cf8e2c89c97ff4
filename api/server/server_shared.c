/* api/server/server_shared.c — collections on the shared store (PostgreSQL): an upload
 * keeps its bytes and a job in the database (api/core/worker.h) instead of this server's
 * disk and memory, so every server and `mmrag worker` on the database sees it; job status
 * is read from there ("pg-N" ids); and this server's own workers take jobs from the
 * queues of its shared collections. Documents are searchable on every server once the
 * job's transaction commits. */
#include "api/server/server_internal.h"
#include "api/core/worker.h"
#include "index/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static json_t *shared_job_json(const store_job *j) {
    char id[32];
    snprintf(id, sizeof id, "pg-%lld", (long long)j->id);
    json_t *o = json_pack("{s:s,s:s,s:s,s:i,s:i,s:I,s:i,s:s}", "job_id", id, "status", j->state,
                          "name", j->name, "pages_done", j->pages_done, "pages_total", j->pages,
                          "created_at", (json_int_t)j->created_at, "attempts", j->attempts,
                          "worker", j->worker);
    if (!o) return NULL;
    if (j->doc) json_object_set_new(o, "document_id", json_integer(j->doc));
    if (j->error[0]) json_object_set_new(o, "error", json_string(j->error));
    if (!strcmp(j->state, "done") || !strcmp(j->state, "failed"))
        json_object_set_new(o, "finished_at", json_integer(j->updated_at));
    return o;
}

static uint8_t *read_file(const char *path, size_t n) {
    FILE *f = fopen(path, "rb");
    uint8_t *b = f ? malloc(n ? n : 1) : NULL;
    if (b && fread(b, 1, n, f) != n) { free(b); b = NULL; }
    if (f) fclose(f);
    return b;
}

enum MHD_Result srv_upload_shared(struct MHD_Connection *c, srv_req *r, const char *path,
                                  size_t bytes) {
    uint8_t *pdf = read_file(path, bytes);
    unlink(path);
    r->up_path[0] = 0;
    if (!pdf) return srv_reply_error(c, r, 500, "internal", "cannot read the upload back");
    char name[300], err[512];
    snprintf(name, sizeof name, "%s.pdf", r->up_name);
    store *st = srv_coll_acquire(r->coll, err, sizeof err);
    if (!st) {
        free(pdf);
        return srv_reply_error(c, r, 503, "store_unavailable", "%s", err);
    }
    int64_t id = 0;
    store_job j;
    int rc = worker_submit_mem(st, pdf, bytes, name, &id, err, sizeof err);
    if (rc >= 0) rc = store_job_get(st, id, &j);
    free(pdf);
    srv_coll_release(r->coll, st);
    if (rc == STORE_ERR_FULL)
        return srv_reply_error(c, r, 507, "cannot_queue", "cannot queue the upload: %s", err);
    if (rc < 0) return srv_reply_error(c, r, 503, "store_unavailable", "cannot queue the upload: %s", err);
    json_t *o = shared_job_json(&j);
    if (!o) return MHD_NO;
    json_object_set_new(o, "sha256", json_string(j.sha256));
    json_object_set_new(o, "bytes", json_integer((json_int_t)bytes));
    return srv_reply_json(c, r, 202, o);
}

enum MHD_Result srv_handle_shared_job(struct MHD_Connection *c, srv_req *r, int64_t id) {
    char err[512];
    store *st = srv_coll_acquire(r->coll, err, sizeof err);
    if (!st) return srv_reply_error(c, r, 503, "store_unavailable", "%s", err);
    store_job j;
    int rc = store_job_get(st, id, &j);
    snprintf(err, sizeof err, "%s", store_errmsg(st));
    srv_coll_release(r->coll, st);
    if (rc == STORE_ERR_NOTFOUND) return srv_reply_error(c, r, 404, "not_found", "no such job");
    if (rc) return srv_reply_error(c, r, 503, "store_unavailable", "%s", err);
    json_t *o = shared_job_json(&j);
    return o ? srv_reply_json(c, r, 200, o) : MHD_NO;
}

/* ---- this server's workers on the shared queues ---- */
typedef struct { srv_server *s; int n; } shared_arg;

static int stop_page(void *user, const store_job *job, int32_t done, int32_t pages) {
    (void)job; (void)done; (void)pages;
    return ((srv_server *)user)->stopping;   /* left to its lease: another worker retries */
}

/* Run at most one job of collection c on handle *st (opened on first use). */
static int run_one(srv_server *s, srv_coll *c, store **st, int n) {
    char err[1024];
    if (!*st && store_open(c->dir, NULL, st, err, sizeof err)) return -1;
    worker_opts o;
    worker_opts_default(&o, c->dir);
    snprintf(o.id + strlen(o.id), sizeof o.id - strlen(o.id), ":serve%d", n);
    o.embed = srv_query_embedder(s);
    o.pipeline.isolate.enabled = s->cfg.ingest_isolate;
    o.pipeline.isolate.timeout_s = s->cfg.ingest_timeout_s;
    o.pipeline.isolate.mem_mb = s->cfg.ingest_mem_mb;
    o.pipeline.isolate.cpu_s = s->cfg.ingest_cpu_s;
    o.pipeline.isolate.worker_exe = s->cfg.ingest_worker;
    o.on_page = stop_page;
    o.user = s;
    store_job j;
    pipeline_result res;
    int rc = worker_run_one(*st, &o, &j, &res, NULL, err, sizeof err);
    if (rc < 0 && !s->stopping) fprintf(stderr, "mmrag serve: worker: %s\n", err);
    if (rc == 1) {
        pthread_mutex_lock(&s->metrics.mu);
        if (!strcmp(j.state, "done")) s->metrics.ingest_docs++;
        else s->metrics.ingest_failed++;
        s->metrics.ingest_pages += (uint64_t)res.pages;
        pthread_mutex_unlock(&s->metrics.mu);
    }
    return rc;
}

static void *shared_main(void *arg) {
    shared_arg *a = arg;
    srv_server *s = a->s;
    store *st[64] = {0};
    while (!s->stopping) {
        int ran = 0;
        for (int i = 0; i < s->n_colls && i < 64 && !s->stopping; i++)
            if (s->colls[i]->shared) ran |= run_one(s, s->colls[i], &st[i], a->n) == 1;
        for (int k = 0; !ran && k < 5 && !s->stopping; k++) usleep(100 * 1000);
    }
    for (int i = 0; i < 64; i++) store_close(st[i]);
    free(a);
    return NULL;
}

int srv_shared_workers_start(srv_server *s) {
    int any = 0;
    for (int i = 0; i < s->n_colls; i++) any |= s->colls[i]->shared;
    if (!any || s->cfg.ingest_workers <= 0) return 0;
    s->shared_workers = calloc((size_t)s->cfg.ingest_workers, sizeof *s->shared_workers);
    if (!s->shared_workers) return -1;
    for (int i = 0; i < s->cfg.ingest_workers; i++) {
        shared_arg *a = malloc(sizeof *a);
        if (!a) break;
        *a = (shared_arg){s, i};
        if (pthread_create(&s->shared_workers[i], NULL, shared_main, a)) { free(a); break; }
        s->n_shared_workers++;
    }
    return s->n_shared_workers ? 0 : -1;
}

void srv_shared_workers_stop(srv_server *s) {
    for (int i = 0; i < s->n_shared_workers; i++) pthread_join(s->shared_workers[i], NULL);
    s->n_shared_workers = 0;
    free(s->shared_workers);
    s->shared_workers = NULL;
}
