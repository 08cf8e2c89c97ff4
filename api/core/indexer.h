/* api/core/indexer — a batch of PDFs into one collection: what `mmrag index` does, for any
 * caller with many files (the CLI; the library's mmrag_index_files).
 *
 * Documents are parsed in parallel, one store handle and one ingest handle per worker
 * thread, each committed atomically (pipeline.h). A thread beside the workers embeds what
 * they have committed so far (embed_pending), so the text encoder works on document N while
 * N+1 is parsed, and its model loads during the first parse; identical texts are encoded
 * once (embed.h). A missing model is a note, not a failure: BM25 still works and search
 * embeds later. On a shared collection (postgres://) each file goes through the ingest
 * queue (worker.h): its bytes and a job into the database, then this worker runs the job
 * unless another worker took it first (then it waits for that one's end).
 *
 * The REST server takes documents one upload at a time instead; its ingest workers (2-4)
 * parse one upload while another is embedded, on the same pipeline and embed calls. */
#ifndef MMRAG_API_INDEXER_H
#define MMRAG_API_INDEXER_H
#include <stddef.h>
#include <stdint.h>
#include "api/core/embed.h"
#include "api/core/pipeline.h"

enum {
    INDEXER_QUEUED = 98,   /* no_wait: left in the shared queue for the workers */
    INDEXER_NOT_RUN = 99,  /* not started: a database error or stop() came first */
};

typedef struct {
    const char *path;      /* in: the file */
    int32_t rc;            /* a pipeline_status, INDEXER_QUEUED or INDEXER_NOT_RUN */
    int64_t job_id;        /* its job in a shared collection's queue, or 0 */
    pipeline_result res;
    char err[1024];        /* one line naming the file when rc < 0 or INDEXER_NOT_RUN */
} indexer_doc;

typedef struct {
    int64_t pages;         /* pages parsed, over finished and running documents */
    int32_t done, total;   /* documents finished, in the batch */
} indexer_progress;

typedef struct {
    const char *db;        /* collection directory or postgres:// URL */
    const char *models;    /* NULL: embed_models_dir's lookup */
    embed_ctx *embedder;   /* borrowed: the caller's loaded encoder (NULL: load from models;
                              on a borrowed one on_embed and stop do not reach the embedding) */
    pipeline_options pipeline;
    int32_t jobs;          /* documents parsed in parallel; 0 (default): the CPUs, at most 8 */
    int32_t embed;         /* write vectors beside the parsing (default 1) */
    int32_t no_wait;       /* shared collection: only queue the files */
    /* Callbacks, all optional, each called with the indexer's lock held (one at a time,
     * from its threads): draw or print, do not block. */
    void (*on_page)(void *user, const indexer_progress *p, const char *path);
    void (*on_doc)(void *user, const indexer_doc *d, const indexer_progress *p);
    /* the embedding after the last document is parsed (while parsing, on_page reports):
     * vectors written so far of those missing when the pass began */
    void (*on_embed)(void *user, int64_t done, int64_t total);
    void (*on_note)(void *user, const char *msg);   /* one line for the user */
    int (*stop)(void *user); /* nonzero: start nothing more; committed documents stay */
    void *user;
} indexer_opts;

typedef struct {
    double seconds;        /* from the start until the last parse ended */
    embed_counts embedded;
    double embed_seconds;  /* time the encoder worked (not its waits for documents) */
} indexer_totals;

void indexer_opts_default(indexer_opts *o, const char *db);
/* Index docs[0..n) (path set; the rest is filled in). The collection is created or
 * migrated first; after a database error no further document starts. t may be NULL.
 * Returns 0, or a store_status when the collection cannot be opened (err says why). */
int indexer_run(const indexer_opts *o, indexer_doc *docs, int32_t n, indexer_totals *t,
                char *err, size_t errlen);
#endif
