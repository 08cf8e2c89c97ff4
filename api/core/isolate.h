/* api/core/isolate — parse one PDF in a child process with resource limits and a
 * wall-clock timeout, and read its pages back over a pipe (format: isolate_wire.h).
 *
 * Poppler, Cairo and Tesseract run on hostile input; in a child a crash, a hang or an
 * out-of-memory costs that document only. The parent (api/core/pipeline.c) commits what
 * the child sent in one store transaction, exactly as for an in-process parse.
 *
 *   isolate_doc *d; isolate_doc_open(path, NULL, 0, NULL, &ingest_opts, &limits, &d, err, n);
 *   for (n = 1..isolate_doc_page_count(d)) isolate_doc_page(d, n, &page, err, n);
 *   isolate_doc_finish(d, err, n);   // END received, child exited 0
 *   isolate_doc_free(d);             // kills and reaps the child if it is still running
 *
 * The child: either this binary run again as `mmrag ingest-worker` (limits.worker_exe set;
 * fork + exec, nothing of the parent's state carried over), or a fork of this process
 * without exec (worker_exe NULL: for programs that embed libmmrag). Fork-only is best
 * effort: a lock some other thread of the caller held at fork() stays locked in the child
 * (libgomp's team is handled: the child runs OpenMP regions on one thread); such a child
 * hangs until the timeout ends it. Programs with many threads should set worker_exe. Its descriptors are
 * /dev/null for stdin/stdout, a pipe for stderr (the last lines explain a failure), the
 * data pipe as fd 3 and nothing else; RLIMIT_AS, RLIMIT_CPU, RLIMIT_NOFILE are set and
 * RLIMIT_CORE is 0; it dies with its parent thread (PR_SET_PDEATHSIG).
 *
 * Threads: a handle belongs to one thread; several handles may run at once. */
#ifndef MMRAG_API_ISOLATE_H
#define MMRAG_API_ISOLATE_H
#include <stddef.h>
#include <stdint.h>
#include "ingest/ingest.h"

typedef struct {
    int32_t enabled;          /* 1 (default): parse in a child; 0: in this process */
    int32_t timeout_s;        /* wall clock per document; default 600; 0 = none */
    int32_t mem_mb;           /* address-space limit of the child; default 4096; 0 = none */
    int32_t cpu_s;            /* CPU seconds of the child; default 0 = timeout_s * 1.25 + 1 */
    int32_t max_files;        /* open descriptors of the child; default 256 */
    const char *worker_exe;   /* binary with the ingest-worker command; NULL = fork only */
} isolate_limits;

/* Why a document failed in its child (pipeline_result.isolate_rc); 0 = it did not. */
typedef enum {
    ISOLATE_OK = 0,
    ISOLATE_CRASHED = -1,     /* killed by a signal (SIGSEGV, SIGABRT, ...) */
    ISOLATE_TIMEOUT = -2,     /* past timeout_s: killed by the parent */
    ISOLATE_MEMORY = -3,      /* out of memory under mem_mb */
    ISOLATE_CPU = -4,         /* past cpu_s */
    ISOLATE_PROTOCOL = -5,    /* sent bytes that do not decode, or exited without END */
    ISOLATE_SPAWN = -6,       /* the child could not be started */
    ISOLATE_ABORTED = -7,     /* the caller's abort callback asked to stop */
} isolate_status;

typedef struct isolate_doc isolate_doc;

void isolate_limits_default(isolate_limits *l);
/* "crashed", "timeout", "memory", "cpu", "protocol", "spawn", "aborted" ("" for 0). */
const char *isolate_status_name(int st);

/* Called while waiting on the child (about 4 times a second); non-zero aborts. */
typedef int (*isolate_abort_cb)(void *user);

/* Start the child on `path`, or on data[0..len) when path is NULL (`name` in messages),
 * and wait for its first answer. Returns 0; or a negative ingest_status when the child
 * reported the PDF unusable (message in err); or INGEST_ERR_ARG with *iso_rc set to the
 * isolate_status when the child failed. On error *out is NULL. */
int isolate_doc_open(const char *path, const void *data, size_t len, const char *name,
                     const ingest_options *o, const isolate_limits *l, isolate_abort_cb cb,
                     void *user, isolate_doc **out, int *iso_rc, char *err, size_t errlen);
int32_t isolate_doc_page_count(const isolate_doc *d);
const char *isolate_doc_title(const isolate_doc *d);
/* The next page, which must be page `number` (pages come in order). Same returns as
 * isolate_doc_open; *out is caller-freed with ingest_page_free. */
int isolate_doc_page(isolate_doc *d, int32_t number, ingest_page **out, int *iso_rc,
                     char *err, size_t errlen);
/* After the last page: wait for END and a clean exit. Same returns. */
int isolate_doc_finish(isolate_doc *d, int *iso_rc, char *err, size_t errlen);
void isolate_doc_free(isolate_doc *d);

/* The child's side: parse `path` (or, with name set, the file at path read into memory and
 * named `name` in messages) and write the records to fd. Returns the exit status. */
int isolate_child_run(int fd, const char *path, const char *name, const ingest_options *o);
/* `mmrag ingest-worker [--name N] [--no-ocr] [--dpi N] [--chunk N] [--overlap N]
 * [--keep-furniture] [--tessdata DIR] PATH` (hidden CLI command; writes to fd 3). */
int isolate_worker_main(int argc, char **argv);

/* Test builds only: a strong definition (tests/fault_hooks.c) makes the child crash, hang
 * or exhaust memory when the document's name carries a marker; libmmrag's is empty. */
void isolate_test_fault(const char *name);
#endif
