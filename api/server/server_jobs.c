/* api/server/server_jobs.c — the bounded ingest queue: its worker threads, job status
 * (GET /v1/jobs/{id}), and at startup the resumption of queued uploads and the sweep of
 * files no document or job refers to.
 *
 * Jobs run on a few worker threads (each job through server_ingest.c); the store's
 * per-document transaction means an aborted or killed ingest leaves no partial document.
 * An accepted upload is durable: next to its kept file DIR/files/<sha>/ a marker
 * "<job id>.queued" (holding the client's file name) exists from before the 202 reply
 * until the job ends (committed, or failed for a reason of its own). A server killed,
 * or stopped with jobs queued or running, finds the markers at its next start and queues
 * those jobs again under their ids; kept files with neither a document nor a marker (a
 * crash mid-delete, an upload never acknowledged) are removed. */
#include "api/server/server_internal.h"
#include "index/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
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

/* ---- durable jobs ---------------------------------------------------------------------- */
static int marker_path(const srv_job *j, char *out, size_t n) {
    const char *slash = strrchr(j->path, '/');
    if (!slash) return -1;
    int w = snprintf(out, n, "%.*s/%s.queued", (int)(slash - j->path), j->path, j->id);
    return w > 0 && (size_t)w < n ? 0 : -1;
}

int srv_job_mark(const srv_job *j, char *err, size_t errlen) {
    char p[4200];
    if (marker_path(j, p, sizeof p)) { snprintf(err, errlen, "path too long"); return -1; }
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    size_t n = strlen(j->name);
    int bad = fd < 0 || write(fd, j->name, n) != (ssize_t)n || fsync(fd);
    int e = errno;
    if (fd >= 0 && close(fd)) bad = 1;
    if (bad) {
        unlink(p);
        snprintf(err, errlen, "cannot write %s: %s", p, strerror(e));
        return -1;
    }
    return 0;
}

void srv_job_unmark(const srv_job *j) {
    char p[4200];
    if (!marker_path(j, p, sizeof p)) unlink(p);
}

/* Append j to the job table and the queue. Called with qmu held. */
int srv_job_enqueue(srv_server *s, srv_job *j) {
    if (s->n_jobs == s->cap_jobs) {
        int nc = s->cap_jobs ? s->cap_jobs * 2 : 64;
        srv_job **nj = realloc(s->jobs, (size_t)nc * sizeof *nj);
        if (!nj) return -1;
        s->jobs = nj;
        s->cap_jobs = nc;
    }
    s->jobs[s->n_jobs++] = j;
    if (s->q_tail) s->q_tail->next_q = j;
    else s->q_head = j;
    s->q_tail = j;
    s->q_len++;
    return 0;
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
        pthread_cond_broadcast(&s->qroom);
        j->state = JOB_RUNNING;
        pthread_mutex_unlock(&s->qmu);

        int rc = srv_ingest_run(s, j);
#ifdef __GLIBC__
        malloc_trim(0);   /* a document's parse and embedding buffers go back to the kernel */
#endif

        pthread_mutex_lock(&s->qmu);
        if (rc == 0) j->state = JOB_DONE;
        else j->state = s->stopping ? JOB_CANCELLED : JOB_FAILED;
        j->finished = (int64_t)time(NULL);
        int ended = j->state != JOB_CANCELLED;   /* cancelled by a stop: resumed at start */
        pthread_mutex_unlock(&s->qmu);
        if (ended) srv_job_unmark(j);
        if (rc != 0 && ended && j->fresh_file) srv_remove_kept(j->path);
        pthread_mutex_lock(&s->metrics.mu);
        if (rc == 0) s->metrics.ingest_docs++;
        else s->metrics.ingest_failed++;
        pthread_mutex_unlock(&s->metrics.mu);
    }
}

static void remove_dir(const char *path) {
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

/* Queue again the job whose marker is `marker` in kept-file dir `dir`; 0 when it was. */
static int resume_job(srv_server *s, srv_coll *c, const char *dir, const char *marker,
                      const char *pdf) {
    srv_job *j = calloc(1, sizeof *j);
    if (!j) return -1;
    snprintf(j->id, sizeof j->id, "%.*s", (int)(strlen(marker) - 7), marker);
    char mp[8800];
    if (snprintf(j->path, sizeof j->path, "%s/%s", dir, pdf) >= (int)sizeof j->path ||
        snprintf(mp, sizeof mp, "%s/%s", dir, marker) >= (int)sizeof mp) {
        free(j);
        return -1;
    }
    FILE *f = fopen(mp, "r");
    size_t n = f ? fread(j->name, 1, sizeof j->name - 1, f) : 0;
    if (f) fclose(f);
    j->name[n] = 0;
    if (!j->name[0]) snprintf(j->name, sizeof j->name, "%s", pdf);
    j->coll = c;
    j->created = (int64_t)time(NULL);
    j->state = JOB_QUEUED;
    j->fresh_file = 1;
    unsigned long long seq = 0;
    if (sscanf(j->id, "job-%llu", &seq) == 1 && seq > s->job_seq) s->job_seq = seq;
    pthread_mutex_lock(&s->qmu);
    int rc = srv_job_enqueue(s, j);
    pthread_mutex_unlock(&s->qmu);
    if (rc) free(j);
    return rc;
}

/* A kept-file dir: resume the jobs marked in it (unless its document is committed: then
 * the markers are stale). Returns how many jobs were resumed. */
static int resume_dir(srv_server *s, srv_coll *c, const char *path, int indexed) {
    DIR *sub = opendir(path);
    if (!sub) return 0;
    char pdf[256] = "", markers[8][64];
    int nm = 0, resumed = 0;
    struct dirent *f;
    while ((f = readdir(sub))) {
        size_t l = strlen(f->d_name);
        if (l > 7 && !strcmp(f->d_name + l - 7, ".queued") && !strncmp(f->d_name, "job-", 4) &&
            l < sizeof markers[0] && nm < 8)
            memcpy(markers[nm++], f->d_name, l + 1);   /* l checked: the name fits */
        else if (l > 4 && l < sizeof pdf && !strcmp(f->d_name + l - 4, ".pdf"))
            memcpy(pdf, f->d_name, l + 1);
    }
    closedir(sub);
    for (int i = 0; i < nm; i++) {
        char mp[8800];
        if (snprintf(mp, sizeof mp, "%s/%s", path, markers[i]) >= (int)sizeof mp) continue;
        if (!indexed && pdf[0] && resume_job(s, c, path, markers[i], pdf) == 0) resumed++;
        else unlink(mp);
    }
    return resumed;
}

/* Resume marked jobs; drop files no committed document or job refers to (left by a crash
 * mid-ingest or mid-delete, or an upload never acknowledged). */
static void sweep_collection(srv_server *s, srv_coll *c) {
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
        int indexed = store_doc_get(st, e->d_name, &row) != STORE_ERR_NOTFOUND;
        store_doc_row_clear(&row);
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (resume_dir(s, c, path, indexed) == 0 && !indexed) remove_dir(path);
    }
    srv_coll_release(c, st);
    closedir(d);
}

int srv_jobs_start(srv_server *s) {
    pthread_mutex_init(&s->render_mu, NULL);
    for (int i = 0; i < s->n_colls; i++)
        if (!s->colls[i]->shared) sweep_collection(s, s->colls[i]);
    if (srv_shared_workers_start(s)) return -1;
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
    pthread_cond_broadcast(&s->qroom);
    pthread_mutex_unlock(&s->qmu);
    for (int i = 0; i < s->n_workers; i++) pthread_join(s->workers[i], NULL);
    s->n_workers = 0;
    srv_shared_workers_stop(s);
    /* Jobs never started: cancelled here, kept with their markers for the next start. */
    for (srv_job *j = s->q_head; j; j = j->next_q) j->state = JOB_CANCELLED;
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
    if (r->coll->shared) {   /* "pg-N": a job of the store's queue */
        char *end;
        long long n = !strncmp(id, "pg-", 3) ? strtoll(id + 3, &end, 10) : 0;
        if (n <= 0 || *end) return srv_reply_error(c, r, 404, "not_found", "no such job");
        return srv_handle_shared_job(c, r, n);
    }
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
