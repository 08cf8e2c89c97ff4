/* api/server/server_docs.c — uploads, the bounded ingest queue, document routes, page renders
 * (drawn by api/core/render.c).
 *
 * An upload streams into DIR/uploads/up-XXXXXX (never fully in memory), is checked for a
 * PDF header, then moves to DIR/files/<sha256>/<name>.pdf, which stays as the document's
 * source (page renders read it). Jobs run on a few worker threads; the store's
 * per-document transaction means an aborted or killed ingest leaves no partial document,
 * and startup removes uploads and kept files that no document refers to. */
#include "api/core/render.h"
#include "api/server/server_internal.h"
#include "index/store.h"
#include "ingest/ingest.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- upload bodies --------------------------------------------------------------------- */
static void sanitize_name(const char *in, char *out, size_t outlen) {
    /* keep the base name, [A-Za-z0-9._-] only, no leading dot, ".pdf" suffix */
    const char *base = in;
    for (const char *p = in; *p; p++)
        if (*p == '/' || *p == '\\') base = p + 1;
    size_t o = 0;
    for (const char *p = base; *p && o + 5 < outlen && o < 100; p++) {
        unsigned char ch = (unsigned char)*p;
        if (isalnum(ch) || ch == '-' || ch == '_' || (ch == '.' && o > 0)) out[o++] = (char)ch;
        else if (o > 0 && out[o - 1] != '_') out[o++] = '_';
    }
    out[o] = 0;
    size_t l = strlen(out);
    if (l >= 4 && !strcasecmp(out + l - 4, ".pdf")) out[l - 4] = 0;
    if (!out[0]) snprintf(out, outlen, "upload");
}

static enum MHD_Result post_iter(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *filename, const char *content_type,
                                 const char *transfer_encoding, const char *data, uint64_t off,
                                 size_t size) {
    srv_req *r = cls;
    if (!filename) return MHD_YES;              /* plain form fields are ignored */
    if (off == 0) {
        if (r->pp_files > 0 && r->up_bytes > 0) {
            snprintf(r->pp_err_msg, sizeof r->pp_err_msg, "send one file per request");
            return MHD_NO;
        }
        r->pp_files++;
        sanitize_name(filename, r->up_name, sizeof r->up_name);
    }
    if (!size) return MHD_YES;
    if (r->up_bytes + size > (size_t)r->srv->cfg.max_upload) { r->too_big = 1; return MHD_NO; }
    const char *p = data;
    size_t left = size;
    while (left) {
        ssize_t w = write(r->up_fd, p, left);
        if (w < 0) {
            if (errno == EINTR) continue;
            snprintf(r->pp_err_msg, sizeof r->pp_err_msg, "cannot store upload: %s", strerror(errno));
            return MHD_NO;
        }
        p += w;
        left -= (size_t)w;
    }
    r->up_bytes += size;
    return MHD_YES;
}

static int mkdir_p1(const char *path) { return mkdir(path, 0700) && errno != EEXIST ? -1 : 0; }

int srv_upload_begin(srv_req *r, struct MHD_Connection *c, char *err, size_t errlen) {
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    if (ct && !strncasecmp(ct, "multipart/form-data", 19)) {
        r->upload = 2;
        r->pp = MHD_create_post_processor(c, 64 * 1024, post_iter, r);
        if (!r->pp) { snprintf(err, errlen, "bad multipart/form-data header (boundary?)"); return 400; }
    } else if (ct && (!strncasecmp(ct, "application/pdf", 15) ||
                      !strncasecmp(ct, "application/octet-stream", 24))) {
        r->upload = 1;
        const char *name = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "name");
        if (!name) name = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Filename");
        sanitize_name(name ? name : "upload", r->up_name, sizeof r->up_name);
    } else {
        snprintf(err, errlen, "send the PDF as application/pdf or multipart/form-data "
                 "(got %s)", ct ? ct : "no Content-Type");
        return 415;
    }
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/uploads", r->coll->dir);
    if (mkdir_p1(r->coll->dir) || mkdir_p1(dir)) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return 500;
    }
    if (snprintf(r->up_path, sizeof r->up_path, "%s/up-XXXXXX", dir) >= (int)sizeof r->up_path) {
        snprintf(err, errlen, "database path too long");
        r->up_path[0] = 0;
        return 500;
    }
    r->up_fd = mkstemp(r->up_path);
    if (r->up_fd < 0) {
        snprintf(err, errlen, "cannot create upload file: %s", strerror(errno));
        r->up_path[0] = 0;
        return 500;
    }
    return 0;
}

int srv_upload_data(srv_req *r, const char *data, size_t size) {
    if (r->upload == 2) {
        if (r->pp_err) return 0;
        if (MHD_post_process(r->pp, data, size) != MHD_YES) r->pp_err = 1;
        return 0;
    }
    while (size) {
        ssize_t w = write(r->up_fd, data, size);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        data += w;
        size -= (size_t)w;
        r->up_bytes += (size_t)w;
    }
    return 0;
}

void srv_upload_cleanup(srv_req *r) {
    if (r->pp) { MHD_destroy_post_processor(r->pp); r->pp = NULL; }
    if (r->up_fd >= 0) { close(r->up_fd); r->up_fd = -1; }
    if (r->up_path[0]) { unlink(r->up_path); r->up_path[0] = 0; }
}

/* ---- jobs ---------------------------------------------------------------------------- */
static const char *job_state_name(int st) {
    static const char *const n[] = {"queued", "running", "done", "failed", "cancelled"};
    return st >= 0 && st <= JOB_CANCELLED ? n[st] : "unknown";
}

static json_t *job_json(const srv_job *j) {
    json_t *o = json_pack("{s:s,s:s,s:s,s:i,s:i,s:I}", "job_id", j->id, "status",
                          job_state_name(j->state), "name", j->name, "pages_done", j->pages_done,
                          "pages_total", j->pages_total, "created_at", (json_int_t)j->created);
    if (!o) return NULL;
    if (j->doc_id) json_object_set_new(o, "document_id", json_integer(j->doc_id));
    if (j->state == JOB_DONE) json_object_set_new(o, "already_indexed", json_boolean(j->existed));
    if (j->error[0]) json_object_set_new(o, "error", json_string(j->error));
    if (j->finished) json_object_set_new(o, "finished_at", json_integer(j->finished));
    return o;
}

/* Remove a kept source file and its per-sha folder. */
static void remove_kept(const char *path) {
    if (unlink(path) == 0 || errno == ENOENT) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) { *slash = 0; rmdir(dir); }
    }
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
        if (rc != 0 && j->fresh_file) remove_kept(j->path);
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
        if (j->fresh_file) remove_kept(j->path);
    }
    s->q_head = s->q_tail = NULL;
    s->q_len = 0;
    pthread_mutex_destroy(&s->render_mu);
}

/* Keep the job table bounded: forget the oldest finished jobs. Called with qmu held. */
static void jobs_trim(srv_server *s) {
    if (s->n_jobs < 4096) return;
    int w = 0;
    for (int i = 0; i < s->n_jobs; i++) {
        srv_job *j = s->jobs[i];
        if (i < s->n_jobs / 2 && j->state >= JOB_DONE) free(j);
        else s->jobs[w++] = j;
    }
    s->n_jobs = w;
}

static int is_pdf_file(int fd) {
    char head[5];
    return pread(fd, head, 5, 0) == 5 && !memcmp(head, "%PDF-", 5);
}

enum MHD_Result srv_handle_upload(struct MHD_Connection *c, srv_req *r) {
    srv_server *s = r->srv;
    if (r->upload == 2) {
        enum MHD_Result pr = MHD_destroy_post_processor(r->pp);
        r->pp = NULL;
        if (r->too_big)
            return srv_reply_error(c, r, 413, "too_large", "upload exceeds %lld bytes",
                                   (long long)s->cfg.max_upload);
        if (r->pp_err || pr != MHD_YES)
            return srv_reply_error(c, r, 400, "bad_multipart", "malformed multipart body%s%s",
                                   r->pp_err_msg[0] ? ": " : "", r->pp_err_msg);
        if (!r->pp_files)
            return srv_reply_error(c, r, 400, "bad_multipart",
                                   "multipart body has no file part (field with a filename)");
    }
    if (r->up_bytes == 0)
        return srv_reply_error(c, r, 400, "empty_body", "no PDF bytes received");
    if (!is_pdf_file(r->up_fd))
        return srv_reply_error(c, r, 415, "not_pdf", "the upload is not a PDF (no %%PDF- header)");
    close(r->up_fd);
    r->up_fd = -1;
    char sha[65], err[256];
    if (ingest_file_sha256(r->up_path, sha, err, sizeof err))
        return srv_reply_error(c, r, 500, "internal", "%s", err);

    srv_job *j = calloc(1, sizeof *j);
    if (!j) return MHD_NO;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/files", r->coll->dir);
    mkdir_p1(dir);
    snprintf(dir, sizeof dir, "%s/files/%s", r->coll->dir, sha);
    mkdir_p1(dir);
    if (snprintf(j->path, sizeof j->path, "%s/%s.pdf", dir, r->up_name) >= (int)sizeof j->path) {
        free(j);
        return srv_reply_error(c, r, 500, "internal", "database path too long");
    }
    struct stat st;
    if (stat(j->path, &st) == 0) {
        unlink(r->up_path);                   /* identical bytes are already kept */
    } else {
        if (rename(r->up_path, j->path)) {
            free(j);
            return srv_reply_error(c, r, 500, "internal", "cannot keep upload: %s", strerror(errno));
        }
        j->fresh_file = 1;
    }
    r->up_path[0] = 0;
    if (snprintf(j->name, sizeof j->name, "%s.pdf", r->up_name) < 0) j->name[0] = 0;
    j->coll = r->coll;
    j->created = (int64_t)time(NULL);
    j->state = JOB_QUEUED;

    pthread_mutex_lock(&s->qmu);
    if (s->q_len >= s->cfg.queue_max || s->stopping) {
        pthread_mutex_unlock(&s->qmu);
        if (j->fresh_file) remove_kept(j->path);
        free(j);
        return srv_reply_error(c, r, 503, "queue_full",
                               "ingest queue is full (%d jobs); retry later", s->cfg.queue_max);
    }
    if (s->n_jobs == s->cap_jobs) {
        int nc = s->cap_jobs ? s->cap_jobs * 2 : 64;
        srv_job **nj = realloc(s->jobs, (size_t)nc * sizeof *nj);
        if (!nj) {
            pthread_mutex_unlock(&s->qmu);
            if (j->fresh_file) remove_kept(j->path);
            free(j);
            return MHD_NO;
        }
        s->jobs = nj;
        s->cap_jobs = nc;
    }
    snprintf(j->id, sizeof j->id, "job-%llu", (unsigned long long)++s->job_seq);
    s->jobs[s->n_jobs++] = j;
    if (s->q_tail) s->q_tail->next_q = j;
    else s->q_head = j;
    s->q_tail = j;
    s->q_len++;
    json_t *o = job_json(j);
    jobs_trim(s);
    pthread_cond_signal(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    if (!o) return MHD_NO;
    json_object_set_new(o, "sha256", json_string(sha));
    json_object_set_new(o, "bytes", json_integer((json_int_t)r->up_bytes));
    return srv_reply_json(c, r, 202, o);
}

enum MHD_Result srv_handle_job(struct MHD_Connection *c, srv_req *r) {
    srv_server *s = r->srv;
    const char *id = r->segs[2];
    json_t *o = NULL;
    pthread_mutex_lock(&s->qmu);
    for (int i = 0; i < s->n_jobs; i++)
        if (s->jobs[i]->coll == r->coll && !strcmp(s->jobs[i]->id, id)) {
            o = job_json(s->jobs[i]);
            break;
        }
    pthread_mutex_unlock(&s->qmu);
    if (!o) return srv_reply_error(c, r, 404, "not_found", "no such job");
    return srv_reply_json(c, r, 200, o);
}

/* ---- documents ----------------------------------------------------------------------- */
static json_t *doc_json(const store_doc_row *d) {
    json_t *o = json_pack("{s:I,s:s,s:s,s:i,s:I,s:s,s:I,s:I,s:i,s:i}", "id", (json_int_t)d->id,
                          "sha256", d->sha256, "title", d->title ? d->title : "", "pages",
                          d->pages, "bytes", (json_int_t)d->bytes, "status",
                          d->status ? d->status : "", "added_at", (json_int_t)d->added_at,
                          "updated_at", (json_int_t)d->updated_at, "chunks", d->n_chunks,
                          "images", d->n_images);
    return o;
}

json_t *srv_box_json(const store_box *b);
json_t *srv_box_json(const store_box *b) {
    return json_pack("[f,f,f,f]", (double)b->x0, (double)b->y0, (double)b->x1, (double)b->y1);
}

#define STORE_OR_500(st, c, r)                                                           \
    char err_[256];                                                                      \
    store *st = srv_coll_acquire((r)->coll, err_, sizeof err_);                          \
    if (!st) return srv_reply_error(c, r, 500, "store_unavailable", "%s", err_)

/* The document id in /documents/{id}/...: a positive integer, else 400. */
#define DOC_ID_OR_400(id, c, r)                                                          \
    int64_t id = srv_parse_id((r)->segs[2]);                                             \
    if (!id)                                                                             \
        return srv_reply_error(c, r, 400, "invalid_id",                                  \
                               "document id must be a positive integer")

enum MHD_Result srv_handle_doc_list(struct MHD_Connection *c, srv_req *r) {
    STORE_OR_500(st, c, r);
    store_doc_row *rows = NULL;
    int32_t n = 0;
    int rc = store_doc_list(st, &rows, &n);
    if (rc != STORE_OK) {
        enum MHD_Result ret = srv_reply_error(c, r, 500, "store_error", "%s", store_errmsg(st));
        srv_coll_release(r->coll, st);
        return ret;
    }
    srv_coll_release(r->coll, st);
    json_t *arr = json_array();
    for (int32_t i = 0; i < n; i++) json_array_append_new(arr, doc_json(&rows[i]));
    store_docs_free(rows, n);
    return srv_reply_json(c, r, 200, json_pack("{s:o,s:i}", "documents", arr, "count", n));
}

static int query_flag(struct MHD_Connection *c, const char *name) {
    const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
    return v && (!strcmp(v, "1") || !strcmp(v, "true"));
}

enum MHD_Result srv_handle_doc_get(struct MHD_Connection *c, srv_req *r) {
    DOC_ID_OR_400(id, c, r);
    STORE_OR_500(st, c, r);
    store_doc_row d;
    memset(&d, 0, sizeof d);
    int rc = store_doc_get_id(st, id, &d);
    if (rc != STORE_OK) {
        srv_coll_release(r->coll, st);
        store_doc_row_clear(&d);
        if (rc == STORE_ERR_NOTFOUND) return srv_reply_error(c, r, 404, "not_found", "no such document");
        return srv_reply_error(c, r, 500, "store_error", "store error %d", rc);
    }
    json_t *o = doc_json(&d);
    store_doc_row_clear(&d);
    store_page_row *pages = NULL;
    int32_t np = 0;
    if (store_pages_get(st, id, &pages, &np) == STORE_OK) {
        json_t *pa = json_array();
        for (int32_t i = 0; i < np; i++)
            json_array_append_new(pa, json_pack("{s:i,s:f,s:f,s:b}", "number", pages[i].number,
                                                "width_pt", (double)pages[i].width_pt, "height_pt",
                                                (double)pages[i].height_pt, "ocr", pages[i].ocr));
        json_object_set_new(o, "page_list", pa);
        free(pages);
    }
    if (query_flag(c, "chunks")) {
        store_chunk_row *ch = NULL;
        int32_t nc = 0;
        if (store_chunks_get(st, id, 0, &ch, &nc) == STORE_OK) {
            json_t *ca = json_array();
            for (int32_t i = 0; i < nc; i++)
                json_array_append_new(ca, json_pack("{s:I,s:i,s:s,s:o,s:I,s:s}", "id",
                                                    (json_int_t)ch[i].id, "page", ch[i].page,
                                                    "kind", store_chunk_kind_name(ch[i].kind),
                                                    "box", srv_box_json(&ch[i].box), "image_id",
                                                    (json_int_t)ch[i].image_id, "text",
                                                    ch[i].text ? ch[i].text : ""));
            json_object_set_new(o, "chunk_list", ca);
            store_chunks_free(ch, nc);
        }
    }
    srv_coll_release(r->coll, st);
    return srv_reply_json(c, r, 200, o);
}

/* A kept upload lives under DIR/files/; anything else (a CLI-indexed path) is the user's. */
static int is_kept_file(const srv_coll *coll, const char *path) {
    char pre[4200], real_dir[4096];
    snprintf(pre, sizeof pre, "%s/files", coll->dir);
    if (!realpath(pre, real_dir)) return 0;
    size_t l = strlen(real_dir);
    return path && !strncmp(path, real_dir, l) && path[l] == '/';
}

enum MHD_Result srv_handle_doc_delete(struct MHD_Connection *c, srv_req *r) {
    DOC_ID_OR_400(id, c, r);
    STORE_OR_500(st, c, r);
    store_doc_row d;
    memset(&d, 0, sizeof d);
    int rc = store_doc_get_id(st, id, &d);
    if (rc == STORE_OK) rc = store_doc_delete(st, id);
    srv_coll_release(r->coll, st);
    if (rc == STORE_OK && is_kept_file(r->coll, d.path)) remove_kept(d.path);
    store_doc_row_clear(&d);
    if (rc == STORE_ERR_NOTFOUND) return srv_reply_error(c, r, 404, "not_found", "no such document");
    if (rc != STORE_OK) return srv_reply_error(c, r, 500, "store_error", "delete failed (%d)", rc);
    return srv_reply_json(c, r, 200, json_pack("{s:I,s:b}", "id", (json_int_t)id, "deleted", 1));
}

/* ---- page renders (api/core/render.c) ------------------------------------------------------ */
static int parse_box(const char *s, float b[4]) {
    double d[4];
    char extra;
    if (sscanf(s, "%lf,%lf,%lf,%lf%c", &d[0], &d[1], &d[2], &d[3], &extra) != 4) return -1;
    for (int i = 0; i < 4; i++) b[i] = (float)d[i];
    /* an empty box would draw nothing: refuse it here, where the caller can fix the URL */
    return render_box_valid(b) == 0 && b[0] < b[2] && b[1] < b[3] ? 0 : -1;
}

enum MHD_Result srv_handle_page_png(struct MHD_Connection *c, srv_req *r) {
    srv_server *s = r->srv;
    DOC_ID_OR_400(id, c, r);
    char num[32];
    const char *pn = r->segs[4];
    size_t pl = strlen(pn);
    if (pl < 5 || pl > 12 || strcmp(pn + pl - 4, ".png"))
        return srv_reply_error(c, r, 404, "not_found", "page path must be /pages/N.png");
    memcpy(num, pn, pl - 4);
    num[pl - 4] = 0;
    int64_t page = srv_parse_id(num);
    if (!page || page > 100000) return srv_reply_error(c, r, 400, "invalid_page", "bad page number");
    float box[4];
    const char *bs = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "box");
    if (bs && parse_box(bs, box))
        return srv_reply_error(c, r, 400, "invalid_box",
                               "box must be x0,y0,x1,y1 in 0..1 with x0<x1 and y0<y1");
    int width = 800;
    const char *ws = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "width");
    if (ws) {
        int64_t v = srv_parse_id(ws);
        if (v < 16 || v > 2400)
            return srv_reply_error(c, r, 400, "invalid_width", "width must be 16..2400 pixels");
        width = (int)v;
    }
    STORE_OR_500(st, c, r);
    store_doc_row d;
    memset(&d, 0, sizeof d);
    int rc = store_doc_get_id(st, id, &d);
    srv_coll_release(r->coll, st);
    if (rc != STORE_OK) {
        store_doc_row_clear(&d);
        return srv_reply_error(c, r, 404, "not_found", "no such document");
    }
    if (page > d.pages) {
        store_doc_row_clear(&d);
        return srv_reply_error(c, r, 404, "not_found", "document has %d pages", d.pages);
    }
    if (!d.path || d.path[0] != '/') {
        store_doc_row_clear(&d);
        return srv_reply_error(c, r, 409, "no_source", "the document's PDF is not kept on the server");
    }
    uint8_t *png = NULL;
    size_t len = 0;
    char err[512];
    pthread_mutex_lock(&s->render_mu);
    int rr = render_page_png(d.path, (int)page, bs ? box : NULL, bs ? 1 : 0, NULL, width, &png,
                             &len, err, sizeof err);
    pthread_mutex_unlock(&s->render_mu);
    store_doc_row_clear(&d);
    if (rr) return srv_reply_error(c, r, 409, "render_failed", "%s", err);
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, png, MHD_RESPMEM_MUST_FREE);
    if (!resp) { free(png); return MHD_NO; }
    MHD_add_response_header(resp, "Content-Type", "image/png");
    return srv_reply_response(c, r, 200, resp);
}
