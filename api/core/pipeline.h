/* api/core/pipeline — ingest one PDF into the store: parse page by page (ingest/) and write
 * the pages, images and chunks inside ONE document transaction (index/store). Used by
 * `mmrag index` and the REST server.
 *
 * Memory stays flat: each page is freed after it is spooled (the store spools to disk).
 * An unchanged file (same sha256) is detected before parsing and is a no-op.
 * Isolation (api/core/isolate.h, on by default): the PDF is parsed in a child process with
 * resource limits and a timeout; a crash, hang or out-of-memory there fails this document
 * only (PIPELINE_ERR_INPUT, the reason in isolate_rc and the message) and stores nothing.
 * Threads: a call uses only its own store handle and its own ingest handle, so several
 * calls may run in parallel with one store handle each. */
#ifndef MMRAG_API_PIPELINE_H
#define MMRAG_API_PIPELINE_H
#include <stddef.h>
#include <stdint.h>
#include "api/core/isolate.h"
#include "index/store.h"
#include "ingest/ingest.h"

typedef enum {
    PIPELINE_OK = 0,
    PIPELINE_EXISTS = 1,         /* same content already indexed; nothing written */
    PIPELINE_ERR_INPUT = -1,     /* the file is bad (unreadable, not a PDF, encrypted, ...) */
    PIPELINE_ERR_STORE = -2,     /* the database failed (read-only, full, busy, ...) */
    PIPELINE_ABORTED = -3,       /* the progress callback asked to stop */
} pipeline_status;

typedef struct {
    ingest_options ingest;
    isolate_limits isolate;      /* default: in a forked child, 600 s, 4096 MiB, 256 files */
} pipeline_options;

typedef struct {
    int64_t doc_id;              /* new (or, for PIPELINE_EXISTS, existing) document id */
    int64_t replaced_id;         /* older document at the same path that was replaced, or 0 */
    int32_t pages, chunks, images, ocr_pages;
    int32_t store_rc;            /* the store_status behind PIPELINE_ERR_STORE */
    int32_t ingest_rc;           /* the ingest_status behind PIPELINE_ERR_INPUT */
    int32_t isolate_rc;          /* isolate_status: why the child failed, or 0 */
    double seconds;
    char title[256];
} pipeline_result;

/* Called after each page, and about 4 times a second while an isolated parse is awaited
 * (page_done then repeats); return non-zero to abort (the document is not written). */
typedef int (*pipeline_progress_cb)(void *user, int32_t page_done, int32_t pages);

void pipeline_options_default(pipeline_options *o);

/* Index the PDF at `path`. o, cb and res may be NULL. err gets one line naming the file.
 * Returns a pipeline_status. */
int pipeline_index_file(store *s, const char *path, const pipeline_options *o,
                        pipeline_progress_cb cb, void *user, pipeline_result *res,
                        char *err, size_t errlen);
/* Same for a PDF in memory (uploads); `name` is stored as the path and used in messages. */
int pipeline_index_mem(store *s, const void *data, size_t len, const char *name,
                       const pipeline_options *o, pipeline_progress_cb cb, void *user,
                       pipeline_result *res, char *err, size_t errlen);
#endif
