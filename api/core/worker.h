/* api/core/worker — one ingest worker on the shared store's queue (index/store.h,
 * store_job_*): claim a job, ingest its kept PDF with the shared pipeline, write its
 * vectors, end the job. `mmrag worker`, `mmrag index` on a postgres:// collection and
 * `mmrag serve` there all run this loop, on any number of machines at once.
 *
 * While a job runs a heartbeat thread renews its lease on a connection of its own, so
 * parsing and embedding a large document never lose it; a worker that dies stops
 * renewing and another takes the job over when the lease runs out (the document
 * transaction left nothing partial; a document committed just before the death is found
 * by its sha256 and the job ends "done"). A job that is no longer this worker's (its
 * lease was taken over) is abandoned at the next page.
 * Threads: each worker uses its own store handles. */
#ifndef MMRAG_API_WORKER_H
#define MMRAG_API_WORKER_H
#include <stddef.h>
#include <stdint.h>
#include "api/core/embed.h"
#include "api/core/pipeline.h"
#include "index/store.h"

typedef struct {
    char id[64];                 /* the worker's name in jobs.worker ("host:pid:n") */
    const char *db;              /* the collection (for the heartbeat's own connection) */
    int32_t lease_s;             /* lease length; renewed every third of it (default 60) */
    pipeline_options pipeline;
    embed_ctx *embed;            /* NULL: no vectors (BM25 only; search embeds later) */
    /* Called after each page with the job; nonzero aborts it (the lease then runs out
     * and another worker retries it). NULL: never. */
    int (*on_page)(void *user, const store_job *job, int32_t done, int32_t pages);
    void *user;
} worker_opts;

void worker_opts_default(worker_opts *o, const char *db);

/* Submit the PDF at `path` (bytes kept in the store, job under `name`, NULL = path).
 * Returns a store_status (STORE_EXISTS: a job for this file is already pending; *job_id
 * is that job). */
int worker_submit_file(store *s, const char *path, const char *name, int64_t *job_id,
                       char *err, size_t errlen);
/* The same for bytes in memory (uploads). */
int worker_submit_mem(store *s, const void *pdf, size_t len, const char *name, int64_t *job_id,
                      char *err, size_t errlen);

/* Run a job this worker claimed (store_job_claim with o->id and o->lease_s) and end it;
 * same returns as worker_run_one (1 = it ran). */
int worker_run_job(store *s, const worker_opts *o, store_job *job, pipeline_result *res,
                   int *pipeline_rc, char *err, size_t errlen);
/* Claim and run one job on s. Returns 1 when a job ran (*job holds how it ended: state
 * "done" with doc, or "failed" with error; *res the pipeline's counts and *pipeline_rc
 * its pipeline_status, may be NULL), 0 when none was waiting, -1 on a store error or an
 * abort (message in err; a claimed job is left to its lease). */
int worker_run_one(store *s, const worker_opts *o, store_job *job, pipeline_result *res,
                   int *pipeline_rc, char *err, size_t errlen);
#endif
