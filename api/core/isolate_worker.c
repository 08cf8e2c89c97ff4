/* api/core/isolate_worker.c — the child side of isolated ingest: parse one PDF with the
 * ingest module and write HELLO, DOC, PAGE... END (or FAIL) records to a pipe.
 *
 * Runs either as `mmrag ingest-worker` (exec'd by isolate.c) or straight after fork().
 * It never touches the store: the parent owns every write. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "api/core/isolate.h"
#include "api/core/isolate_wire.h"

/* libgomp (Tesseract's OpenMP) is not fork-safe: a forked child whose parent has used
 * OpenMP waits forever at its first barrier for threads that do not exist. No active
 * parallel level means every region runs on this one thread (Tesseract asks for teams with
 * num_threads(), which a thread count alone would not override); documents run in
 * parallel across children anyway. */
extern void omp_set_max_active_levels(int levels);

/* The library's hook does nothing; tests/fault_hooks.c replaces it in the test binary. */
__attribute__((weak)) void isolate_test_fault(const char *name) { (void)name; }

static int write_all(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Send b as it is and empty it; an allocation failure while encoding becomes a FAIL. */
static int flush(int fd, wire_buf *b) {
    if (b->oom) {
        wire_buf_free(b);
        size_t at = wire_begin_record(b, WIRE_FAIL);
        wire_put_i32(b, INGEST_ERR_NOMEM);
        wire_put_str(b, "out of memory while sending a page", 34);
        wire_end_record(b, at);
        if (b->oom) return -1;
    }
    int rc = write_all(fd, b->p, b->len);
    b->len = 0;
    return rc;
}

static int send_fail(int fd, wire_buf *b, int status, const char *msg) {
    size_t at = wire_begin_record(b, WIRE_FAIL);
    wire_put_i32(b, status);
    wire_put_str(b, msg, strlen(msg));
    wire_end_record(b, at);
    flush(fd, b);
    return 1;
}

/* A file read whole into memory (for --name: parse bytes under a display name). */
static void *read_file(const char *path, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) || st.st_size <= 0) { if (fd >= 0) close(fd); return NULL; }
    uint8_t *p = malloc((size_t)st.st_size);
    size_t got = 0;
    while (p && got < (size_t)st.st_size) {
        ssize_t r = read(fd, p + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (!p || got != (size_t)st.st_size) { free(p); return NULL; }
    *len = got;
    return p;
}

static int send_pages(int fd, wire_buf *b, ingest_doc *d) {
    int32_t pages = ingest_doc_page_count(d);
    for (int32_t n = 1; n <= pages; n++) {
        ingest_page *p = NULL;
        char err[512] = "";
        int rc = ingest_doc_page(d, n, &p, err, sizeof err);
        if (rc != INGEST_OK && !(rc == INGEST_ERR_OCR && p)) {
            ingest_page_free(p);
            return send_fail(fd, b, rc, err[0] ? err : "parse failed");
        }
        wire_page_encode(b, p);
        ingest_page_free(p);
        if (flush(fd, b)) return 1;
    }
    size_t at = wire_begin_record(b, WIRE_END);
    wire_end_record(b, at);
    return flush(fd, b) ? 1 : 0;
}

int isolate_child_run(int fd, const char *path, const char *name, const ingest_options *o) {
    omp_set_max_active_levels(0);
    wire_buf b = {0};
    size_t at = wire_begin_record(&b, WIRE_HELLO);
    wire_put_u32(&b, WIRE_MAGIC);
    wire_put_u32(&b, WIRE_VERSION);
    wire_end_record(&b, at);
    if (flush(fd, &b)) { wire_buf_free(&b); return 1; }
    isolate_test_fault(name ? name : path);
    ingest_doc *d = NULL;
    char err[512] = "";
    void *mem = NULL;
    size_t len = 0;
    int rc;
    if (name) {
        mem = read_file(path, &len);
        rc = mem ? ingest_doc_open_mem(mem, len, name, o, &d, err, sizeof err) : INGEST_ERR_IO;
        if (!mem) snprintf(err, sizeof err, "%s: cannot read the spooled copy", name);
    } else {
        rc = ingest_doc_open(path, o, &d, err, sizeof err);
    }
    int out;
    if (rc != INGEST_OK || !d) {
        out = send_fail(fd, &b, rc ? rc : INGEST_ERR_ARG, err[0] ? err : "cannot open");
    } else {
        const char *title = ingest_doc_title(d) ? ingest_doc_title(d) : "";
        size_t tl = strlen(title);
        while (tl > WIRE_MAX_TITLE) tl--;
        while (tl > 0 && ((unsigned char)title[tl] & 0xc0) == 0x80) tl--;   /* whole characters */
        at = wire_begin_record(&b, WIRE_DOC);
        wire_put_i32(&b, ingest_doc_page_count(d));
        wire_put_str(&b, title, tl);
        wire_end_record(&b, at);
        out = flush(fd, &b) ? 1 : send_pages(fd, &b, d);
    }
    ingest_doc_free(d);
    free(mem);
    wire_buf_free(&b);
    return out;
}

int isolate_worker_main(int argc, char **argv) {
    static const struct option opts[] = {
        {"name", required_argument, 0, 'n'}, {"no-ocr", no_argument, 0, 'O'},
        {"dpi", required_argument, 0, 'd'}, {"chunk", required_argument, 0, 'c'},
        {"overlap", required_argument, 0, 'v'}, {"keep-furniture", no_argument, 0, 'F'},
        {"tessdata", required_argument, 0, 't'}, {0, 0, 0, 0}};
    ingest_options o;
    ingest_options_default(&o);
    const char *name = NULL;
    int c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'n': name = optarg; break;
        case 'O': o.ocr = 0; break;
        case 'd': o.render_dpi = atoi(optarg); break;
        case 'c': o.chunk_tokens = atoi(optarg); break;
        case 'v': o.overlap_tokens = atoi(optarg); break;
        case 'F': o.strip_furniture = 0; break;
        case 't': o.tessdata = optarg; break;
        default: return 2;
        }
    }
    if (optind != argc - 1 || fcntl(3, F_GETFD) < 0) {
        fputs("mmrag ingest-worker: internal command, started by mmrag itself\n", stderr);
        return 2;
    }
    return isolate_child_run(3, argv[optind], name, &o);
}
