/* api/server/server_upload.c — POST /v1/documents: a PDF upload streamed to disk, kept
 * as the document's source, and queued as an ingest job (server_jobs.c).
 *
 * An upload streams into DIR/uploads/up-XXXXXX (never fully in memory), is checked for a
 * PDF header, then moves to DIR/files/<sha256>/<name>.pdf, which stays as the document's
 * source (page renders read it). */
#include "api/server/server_internal.h"
#include "ingest/ingest.h"

#include <ctype.h>
#include <errno.h>
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
    /* a shared collection's upload is spooled in the temp folder until it is in the store */
    const char *tmp = getenv("TMPDIR");
    if (r->coll->shared) snprintf(dir, sizeof dir, "%s", tmp && *tmp ? tmp : "/tmp");
    else snprintf(dir, sizeof dir, "%s/uploads", r->coll->dir);
    if (!r->coll->shared && (mkdir_p1(r->coll->dir) || mkdir_p1(dir))) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return 500;
    }
    if (snprintf(r->up_path, sizeof r->up_path, "%s/%sup-XXXXXX", dir,
                 r->coll->shared ? "mmrag-" : "") >= (int)sizeof r->up_path) {
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

/* ---- kept files ----------------------------------------------------------------------- */
/* Remove a kept source file and its per-sha folder. */
void srv_remove_kept(const char *path) {
    if (unlink(path) == 0 || errno == ENOENT) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) { *slash = 0; rmdir(dir); }
    }
}

/* ---- the upload route ----------------------------------------------------------------- */
/* "%PDF-" within the first 1024 bytes, as PDF readers allow (and mmrag index does). */
static int is_pdf_file(int fd) {
    char head[1024];
    ssize_t n = pread(fd, head, sizeof head, 0);
    return n >= 5 && memmem(head, (size_t)n, "%PDF-", 5) != NULL;
}

/* Under s->qmu. A full queue slows the uploader down before it refuses one: the upload
 * waits up to the request timeout for a free place, so a client that uploads in a loop is
 * held to the ingest rate instead of shed. Returns 1 when there is room, 0 when the wait
 * ran out, the server stops, or the client hung up. */
static int queue_wait_room(srv_server *s, struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    double until = srv_now() + (s->cfg.timeout_s > 0 ? s->cfg.timeout_s : 30);
    while (s->q_len >= s->cfg.queue_max && !s->stopping && srv_now() < until) {
        srv_cond_wait_ms(&s->qroom, &s->qmu, 250);
        if (ci && srv_peer_closed(ci->connect_fd)) return 0;
    }
    return s->q_len < s->cfg.queue_max && !s->stopping;
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
        return srv_reply_error(c, r, 415, "not_pdf", "the upload is not a PDF (no %%PDF- header in its first 1024 bytes)");
    close(r->up_fd);
    r->up_fd = -1;
    char sha[65], err[256] = "";
    if (r->coll->shared) return srv_upload_shared(c, r, r->up_path, (size_t)r->up_bytes);
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
    if (!queue_wait_room(s, c)) {
        pthread_mutex_unlock(&s->qmu);
        if (j->fresh_file) srv_remove_kept(j->path);
        free(j);
        return srv_reply_error(c, r, 503, "queue_full",
                               "ingest queue is full (%d jobs) and stayed full for %d s; retry later",
                               s->cfg.queue_max, s->cfg.timeout_s);
    }
    snprintf(j->id, sizeof j->id, "job-%llu", (unsigned long long)++s->job_seq);
    /* The job is on disk before it is acknowledged: a crash or restart resumes it. */
    if (srv_job_mark(j, err, sizeof err) || srv_job_enqueue(s, j)) {
        pthread_mutex_unlock(&s->qmu);
        srv_job_unmark(j);
        if (j->fresh_file) srv_remove_kept(j->path);
        free(j);
        return srv_reply_error(c, r, 507, "cannot_queue", "cannot queue the upload: %s",
                               err[0] ? err : "out of memory");
    }
    json_t *o = srv_job_json(j);
    srv_jobs_trim(s);
    pthread_cond_signal(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    if (!o) return MHD_NO;
    json_object_set_new(o, "sha256", json_string(sha));
    json_object_set_new(o, "bytes", json_integer((json_int_t)r->up_bytes));
    return srv_reply_json(c, r, 202, o);
}
