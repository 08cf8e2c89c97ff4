/* api/server/server_jobs.c — the bounded ingest queue: its worker threads, job status
 * (GET /v1/jobs/{id}) and the startup sweep of files no document refers to.
 *
 * Jobs run on a few worker threads (each job through server_ingest.c); the store's
 * per-document transaction means an aborted or killed ingest leaves no partial document,
 * and startup removes uploads and kept files that no document refers to. */
#include "api/server/server_internal.h"
#include "index/store.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- jobs ---------------------------------------------------------------------------- */
static const char *job_state_name(int st) {
    static const char *const n[] = {"queued", "running", "done", "failed", "cancelled"};
    return st >= 0 && st <= JOB_CANCELLED ? n[st] : "unknown";
}

json_t *srv_job_json(const srv_job *j) {
    json_t *o = json_pack("{s:s,s:s,s:s,s:i,s:i,s:I}", "job_id", j->id, "status",
                          job_state_name(j->state), "name", j->name, "pages_done", j->pages_done,
                          "pages_total", j->pages_total, "created_at", (json_int_t)j->created);
    if (!o) return NULL;
    if (j->doc_id) json_object_set_new(o, "document_id", json_integer(j->doc_id));
    if (j->state == JOB_DONE) json_object_set_new(o, "already_indexed", json_boolean(j->existed));
    if (j->error[0]) json_object_set_new(o, "error", json_string(j->error));
    if (j->failure[0]) json_object_set_new(o, "failure", json_string(j->failure));
    if (j->finished) json_object_set_new(o, "finished_at", json_integer(j->finished));
    return o;
}

static void *worker_main(void *arg) {
    srv_server *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->qmu);
        while (!s->q_head && !s->stopping) pthread_cond_wait(&s->qcv, &s->qmu);
        if (s->stopping) { pthread_mutex_unlock(&s->qmu); return NULL; }
        srv_job *j = s->q_head;
        s->q_head = j->next_q;
        if (!s->q_head) s->q_tail = NULL;
        s->q_len--;
        j->state = JOB_RUNNING;
        pthread_mutex_unlock(&s->qmu);

        int rc = srv_ingest_run(s, j);

        pthread_mutex_lock(&s->qmu);
        if (rc == 0) j->state = JOB_DONE;
        else j->state = s->stopping ? JOB_CANCELLED : JOB_FAILED;
        j->finished = (int64_t)time(NULL);
        pthread_mutex_unlock(&s->qmu);
        if (rc != 0 && j->fresh_file) srv_remove_kept(j->path);
        pthread_mutex_lock(&s->metrics.mu);
        if (rc == 0) s->metrics.ingest_docs++;
        else s->metrics.ingest_failed++;
        pthread_mutex_unlock(&s->metrics.mu);
    }
}

/* Drop files that no committed document refers to (left by a crash mid-ingest). */
static void sweep_collection(srv_coll *c) {
    char dir[4200], path[8400];
    snprintf(dir, sizeof dir, "%s/uploads", c->dir);
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (!strncmp(e->d_name, "up-", 3)) {
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
                unlink(path);
            }
        closedir(d);
    }
    snprintf(dir, sizeof dir, "%s/files", c->dir);
    d = opendir(dir);
    if (!d) return;
    char err[256];
    store *st = srv_coll_acquire(c, err, sizeof err);
    if (!st) { closedir(d); return; }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strlen(e->d_name) != 64) continue;
        store_doc_row row;
        memset(&row, 0, sizeof row);
        if (store_doc_get(st, e->d_name, &row) == STORE_ERR_NOTFOUND) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            DIR *sub = opendir(path);
            if (sub) {
                struct dirent *f;
                char fp[8800];
                while ((f = readdir(sub)))
                    if (f->d_name[0] != '.') {
                        snprintf(fp, sizeof fp, "%s/%s", path, f->d_name);
                        unlink(fp);
                    }
                closedir(sub);
            }
            rmdir(path);
        }
        store_doc_row_clear(&row);
    }
    srv_coll_release(c, st);
    closedir(d);
}

int srv_jobs_start(srv_server *s) {
    pthread_mutex_init(&s->render_mu, NULL);
    for (int i = 0; i < s->n_colls; i++) sweep_collection(s->colls[i]);
    s->workers = calloc((size_t)s->cfg.ingest_workers, sizeof *s->workers);
    if (!s->workers) return -1;
    for (int i = 0; i < s->cfg.ingest_workers; i++) {
        if (pthread_create(&s->workers[i], NULL, worker_main, s)) break;
        s->n_workers++;
    }
    return s->n_workers ? 0 : -1;
}

void srv_jobs_stop(srv_server *s) {
    pthread_mutex_lock(&s->qmu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    for (int i = 0; i < s->n_workers; i++) pthread_join(s->workers[i], NULL);
    s->n_workers = 0;
    /* Jobs never started: cancelled, their fresh files removed. */
    for (srv_job *j = s->q_head; j; j = j->next_q) {
        j->state = JOB_CANCELLED;
        if (j->fresh_file) srv_remove_kept(j->path);
    }
    s->q_head = s->q_tail = NULL;
    s->q_len = 0;
    pthread_mutex_destroy(&s->render_mu);
}

/* Keep the job table bounded: forget the oldest finished jobs. Called with qmu held. */
void srv_jobs_trim(srv_server *s) {
    if (s->n_jobs < 4096) return;
    int w = 0;
    for (int i = 0; i < s->n_jobs; i++) {
        srv_job *j = s->jobs[i];
        if (i < s->n_jobs / 2 && j->state >= JOB_DONE) free(j);
        else s->jobs[w++] = j;
    }
    s->n_jobs = w;
}

enum MHD_Result srv_handle_job(struct MHD_Connection *c, srv_req *r) {
    srv_server *s = r->srv;
    const char *id = r->segs[2];
    json_t *o = NULL;
    pthread_mutex_lock(&s->qmu);
    for (int i = 0; i < s->n_jobs; i++)
        if (s->jobs[i]->coll == r->coll && !strcmp(s->jobs[i]->id, id)) {
            o = srv_job_json(s->jobs[i]);
            break;
        }
    pthread_mutex_unlock(&s->qmu);
    if (!o) return srv_reply_error(c, r, 404, "not_found", "no such job");
    return srv_reply_json(c, r, 200, o);
}
