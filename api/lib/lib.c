/* api/lib/lib.c — the public library (include/mmrag.h) over the modules: pipeline (ingest →
 * store), embed (text vectors), retrieval (fused search), engine (generation), locate
 * (region localization, engine/vpe).
 *
 * A handle owns one read store handle + retriever (both thread-safe), the text encoder
 * and, once mmrag_ask is first called, the language model with a list of idle sessions
 * (one per concurrent generation), and, once mmrag_locate is first called, the region
 * localizer (thread-safe; over the handle's text encoder, or one loaded for it when the
 * handle was opened with embed = 0). Indexing opens its own store handle per call so
 * several threads can index at once. Error messages are per thread and per handle
 * (a pthread key owned by the handle). */
#include "mmrag.h"
#include "api/core/pipeline.h"
#include "api/core/indexer.h"
#include "api/core/embed.h"
#include "api/core/locate.h"
#include "api/core/answer.h"
#include "engine/engine.h"
#include "index/store.h"
#include "kernels/kernels.h"
#include "retrieval/retrieval.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct errbuf { char msg[512]; struct errbuf *next; } errbuf;

struct mmrag {
    char dir[4096];
    mmrag_options o;
    char models[4096];
    store *st;
    retriever *retr;
    embed_ctx *emb;
    pthread_key_t key;
    pthread_mutex_t mu;              /* errbufs, engine, sessions, localizer setup */
    errbuf *errbufs;
    answer_llm *llm;                 /* the answer core's model, loaded on first ask */
    embed_ctx *loc_emb;              /* text encoder loaded for locate when emb is NULL */
    vpe *vpe;
};

void mmrag_options_default(mmrag_options *o) {
    memset(o, 0, sizeof *o);
    o->embed = 1;
}

const char *mmrag_blas_kernels_better(void) { return kern_blas_core_better(); }

const char *mmrag_strerror(int st) {
    switch (st) {
    case MMRAG_OK: return "ok";
    case MMRAG_ERR_ARG: return "bad argument";
    case MMRAG_ERR_IO: return "I/O error";
    case MMRAG_ERR_INPUT: return "unusable PDF";
    case MMRAG_ERR_NOTFOUND: return "not found";
    case MMRAG_ERR_STORE: return "database error";
    case MMRAG_ERR_MODEL: return "model error";
    case MMRAG_ERR_UNSUPPORTED: return "not supported in this build";
    case MMRAG_ERR_NOMEM: return "out of memory";
    case MMRAG_ERR_CANCELLED: return "cancelled";
    default: return "unknown error";
    }
}

static errbuf *thread_err(mmrag *h) {
    errbuf *b = pthread_getspecific(h->key);
    if (b) return b;
    b = calloc(1, sizeof *b);
    if (!b) return NULL;
    pthread_mutex_lock(&h->mu);
    b->next = h->errbufs;      /* the handle frees every thread's buffer at close */
    h->errbufs = b;
    pthread_mutex_unlock(&h->mu);
    pthread_setspecific(h->key, b);
    return b;
}

static int fail(mmrag *h, int st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(mmrag *h, int st, const char *fmt, ...) {
    errbuf *b = thread_err(h);
    if (b) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b->msg, sizeof b->msg, fmt, ap);
        va_end(ap);
    }
    return st;
}

static void clear_err(mmrag *h) {
    errbuf *b = pthread_getspecific(h->key);
    if (b) b->msg[0] = 0;
}

const char *mmrag_errmsg(mmrag *h) {
    if (!h) return "no handle";
    errbuf *b = pthread_getspecific(h->key);
    return b ? b->msg : "";
}

static int map_store_rc(int rc) {
    switch (rc) {
    case STORE_ERR_NOTFOUND: return MMRAG_ERR_NOTFOUND;
    case STORE_ERR_ARG: return MMRAG_ERR_ARG;
    case STORE_ERR_NOMEM: return MMRAG_ERR_NOMEM;
    case STORE_ERR_IO: return MMRAG_ERR_IO;
    default: return MMRAG_ERR_STORE;
    }
}

int mmrag_open(const char *dir, const mmrag_options *o, mmrag **out, char *err, size_t errlen) {
    char dummy[8];
    if (!err) { err = dummy; errlen = sizeof dummy; }
    if (!out) return MMRAG_ERR_ARG;
    *out = NULL;
    if (!dir || !*dir) { snprintf(err, errlen, "mmrag_open: no directory"); return MMRAG_ERR_ARG; }
    mmrag *h = calloc(1, sizeof *h);
    if (!h) { snprintf(err, errlen, "out of memory"); return MMRAG_ERR_NOMEM; }
    if (o) h->o = *o;
    else mmrag_options_default(&h->o);
    snprintf(h->dir, sizeof h->dir, "%s", dir);
    const char *m = h->o.models_dir ? h->o.models_dir : getenv("MMRAG_MODELS");
    snprintf(h->models, sizeof h->models, "%s", m && *m ? m : "models");
    char path[4200];
    answer_llm_params lp;
    answer_llm_params_default(&lp);
    lp.path = answer_llm_path(h->o.llm_path, h->models, path, sizeof path);
    lp.n_threads = h->o.threads;
    if (answer_llm_create(&lp, &h->llm, err, errlen)) { free(h); return MMRAG_ERR_NOMEM; }
    if (pthread_key_create(&h->key, NULL)) { free(h); snprintf(err, errlen, "no thread key"); return MMRAG_ERR_NOMEM; }
    pthread_mutex_init(&h->mu, NULL);
    store_options so;
    store_options_default(&so);
    so.readonly = h->o.readonly;
    so.create = !h->o.readonly;
    int rc = store_open(dir, &so, &h->st, err, errlen);
    if (rc != STORE_OK) { mmrag_close(h); return map_store_rc(rc); }
    if (h->o.embed && embed_create(h->models, &h->emb, err, errlen)) {
        mmrag_close(h);
        return MMRAG_ERR_MODEL;
    }
    if (embed_create_retriever(h->emb, h->st, &h->retr, err, errlen)) { mmrag_close(h); return MMRAG_ERR_STORE; }
    *out = h;
    return MMRAG_OK;
}

void mmrag_close(mmrag *h) {
    if (!h) return;
    retr_free(h->retr);
    store_close(h->st);
    embed_free(h->emb);
    answer_llm_free(h->llm);
    vpe_free(h->vpe);
    embed_free(h->loc_emb);
    pthread_key_delete(h->key);
    for (errbuf *b = h->errbufs, *n; b; b = n) { n = b->next; free(b); }
    pthread_mutex_destroy(&h->mu);
    free(h);
}

/* ---- indexing ------------------------------------------------------------------------ */
/* The handle's ingest limits: 0 = the pipeline's default, -1 = none. */
static void lib_pipeline_options(const mmrag_options *mo, pipeline_options *po) {
    pipeline_options_default(po);
    isolate_limits *l = &po->isolate;
    if (mo->ingest_timeout_s) l->timeout_s = mo->ingest_timeout_s < 0 ? 0 : mo->ingest_timeout_s;
    if (mo->ingest_mem_mb) l->mem_mb = mo->ingest_mem_mb < 0 ? 0 : mo->ingest_mem_mb;
    l->enabled = !mo->ingest_in_process;
    l->worker_exe = mo->ingest_worker;
}

/* a pipeline_status that is a failure as the library's code */
static int pipeline_status_code(int rc, const pipeline_result *res) {
    return rc == PIPELINE_ERR_INPUT ? (res->ingest_rc == INGEST_ERR_IO ? MMRAG_ERR_IO : MMRAG_ERR_INPUT)
         : rc == PIPELINE_ABORTED ? MMRAG_ERR_CANCELLED : MMRAG_ERR_STORE;
}

static int index_common(mmrag *h, const char *path, const void *data, size_t len,
                        const char *name, int64_t *doc_id) {
    if (!h) return MMRAG_ERR_ARG;
    clear_err(h);
    if (h->o.readonly) return fail(h, MMRAG_ERR_STORE, "collection opened read-only");
    store *st = NULL;
    char err[512];
    int rc = store_open(h->dir, NULL, &st, err, sizeof err);
    if (rc != STORE_OK) return fail(h, map_store_rc(rc), "%s", err);
    pipeline_result res;
    memset(&res, 0, sizeof res);
    pipeline_options po;
    lib_pipeline_options(&h->o, &po);
    rc = path ? pipeline_index_file(st, path, &po, NULL, NULL, &res, err, sizeof err)
              : pipeline_index_mem(st, data, len, name, &po, NULL, NULL, &res, err, sizeof err);
    int out = MMRAG_OK;
    if (rc == PIPELINE_OK || rc == PIPELINE_EXISTS) {
        if (doc_id) *doc_id = res.doc_id;
        if (h->emb && embed_pending(h->emb, st, NULL, err, sizeof err))
            out = fail(h, MMRAG_ERR_MODEL, "document indexed, vectors not written: %s", err);
    } else {
        out = fail(h, pipeline_status_code(rc, &res), "%s", err);
    }
    store_close(st);
    return out;
}

int mmrag_index_file(mmrag *h, const char *path, int64_t *doc_id) {
    if (!h || !path || !*path) return h ? fail(h, MMRAG_ERR_ARG, "no path") : MMRAG_ERR_ARG;
    return index_common(h, path, NULL, 0, NULL, doc_id);
}

int mmrag_index_memory(mmrag *h, const void *data, size_t len, const char *name, int64_t *doc_id) {
    if (!h || !data || !len) return h ? fail(h, MMRAG_ERR_ARG, "no data") : MMRAG_ERR_ARG;
    return index_common(h, NULL, data, len, name && *name ? name : "memory.pdf", doc_id);
}

/* The CLI's batch indexer (api/core/indexer.h) with the handle's limits and encoder. */
int mmrag_index_files(mmrag *h, const char *const *paths, int32_t n, int32_t jobs,
                      int32_t *status, int64_t *doc_ids) {
    if (!h) return MMRAG_ERR_ARG;
    clear_err(h);
    if (n < 0 || (n > 0 && !paths) || jobs < 0) return fail(h, MMRAG_ERR_ARG, "bad arguments");
    for (int32_t i = 0; i < n; i++)
        if (!paths[i] || !*paths[i]) return fail(h, MMRAG_ERR_ARG, "no path (file %d)", (int)i);
    if (h->o.readonly) return fail(h, MMRAG_ERR_STORE, "collection opened read-only");
    indexer_doc *docs = calloc(n ? (size_t)n : 1, sizeof *docs);
    if (!docs) return fail(h, MMRAG_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < n; i++) docs[i].path = paths[i];
    indexer_opts io;
    indexer_opts_default(&io, h->dir);
    lib_pipeline_options(&h->o, &io.pipeline);
    io.jobs = jobs;   /* 0: the indexer's default */
    io.embedder = h->emb;
    io.embed = h->emb != NULL;   /* the handle's choice: no encoder, no vectors */
    char err[512];
    int rc = indexer_run(&io, docs, n, NULL, err, sizeof err);
    int out = rc ? fail(h, map_store_rc(rc), "%s", err) : MMRAG_OK;
    for (int32_t i = 0; i < n; i++) {
        const indexer_doc *d = &docs[i];
        int ok = d->rc == PIPELINE_OK || d->rc == PIPELINE_EXISTS;
        int st = rc ? map_store_rc(rc) : ok ? MMRAG_OK
               : d->rc == INDEXER_NOT_RUN ? MMRAG_ERR_STORE : pipeline_status_code(d->rc, &d->res);
        if (status) status[i] = st;
        if (doc_ids) doc_ids[i] = ok ? d->res.doc_id : 0;
        if (st != MMRAG_OK && out == MMRAG_OK) out = fail(h, st, "%s", d->err);
    }
    free(docs);
    return out;
}

/* ---- documents ----------------------------------------------------------------------- */
int mmrag_list(mmrag *h, mmrag_doc **docs, int32_t *n) {
    if (!h || !docs || !n) return MMRAG_ERR_ARG;
    clear_err(h);
    *docs = NULL;
    *n = 0;
    store_doc_row *rows = NULL;
    int32_t nr = 0;
    int rc = store_doc_list(h->st, &rows, &nr);
    if (rc != STORE_OK) return fail(h, map_store_rc(rc), "%s", store_errmsg(h->st));
    mmrag_doc *d = calloc(nr ? (size_t)nr : 1, sizeof *d);
    if (!d) { store_docs_free(rows, nr); return fail(h, MMRAG_ERR_NOMEM, "out of memory"); }
    for (int32_t i = 0; i < nr; i++) {
        d[i].id = rows[i].id;
        memcpy(d[i].sha256, rows[i].sha256, sizeof d[i].sha256);
        d[i].title = strdup(rows[i].title ? rows[i].title : "");
        d[i].pages = rows[i].pages;
        d[i].chunks = rows[i].n_chunks;
        d[i].images = rows[i].n_images;
        d[i].bytes = rows[i].bytes;
    }
    store_docs_free(rows, nr);
    *docs = d;
    *n = nr;
    return MMRAG_OK;
}

void mmrag_docs_free(mmrag_doc *docs, int32_t n) {
    if (!docs) return;
    for (int32_t i = 0; i < n; i++) free(docs[i].title);
    free(docs);
}

int mmrag_delete(mmrag *h, int64_t doc_id) {
    if (!h || doc_id <= 0) return h ? fail(h, MMRAG_ERR_ARG, "bad document id") : MMRAG_ERR_ARG;
    clear_err(h);
    if (h->o.readonly) return fail(h, MMRAG_ERR_STORE, "collection opened read-only");
    int rc = store_doc_delete(h->st, doc_id);
    if (rc == STORE_ERR_NOTFOUND) return fail(h, MMRAG_ERR_NOTFOUND, "no document %lld", (long long)doc_id);
    if (rc != STORE_OK) return fail(h, map_store_rc(rc), "%s", store_errmsg(h->st));
    return MMRAG_OK;
}

/* ---- search ---------------------------------------------------------------------------- */
static int run_search(mmrag *h, const char *q, int32_t k, const int64_t *docs, int32_t n_docs,
                      retr_result *res) {
    retr_opts ro;
    retr_opts_default(&ro);
    ro.k = k > 0 ? k : 5;
    ro.docs = docs;
    ro.n_docs = docs ? n_docs : 0;
    char err[512];
    if (retr_search(h->retr, q, &ro, res, err, sizeof err))
        return fail(h, MMRAG_ERR_STORE, "%s", err);
    return MMRAG_OK;
}

static int copy_hits(const retr_result *res, mmrag_hit **out) {
    mmrag_hit *hs = calloc(res->n ? (size_t)res->n : 1, sizeof *hs);
    if (!hs) return -1;
    for (int32_t i = 0; i < res->n; i++) {
        const retr_hit *r = &res->hits[i];
        hs[i] = (mmrag_hit){r->chunk_id, r->doc, strdup(r->title ? r->title : ""), r->page,
                            store_chunk_kind_name(r->kind),
                            {r->box.x0, r->box.y0, r->box.x1, r->box.y1}, r->image_id,
                            strdup(r->text ? r->text : ""), r->fused};
    }
    *out = hs;
    return 0;
}

int mmrag_search(mmrag *h, const char *query, const mmrag_search_opts *o, mmrag_hit **hits,
                 int32_t *n) {
    if (!h || !hits || !n) return MMRAG_ERR_ARG;
    clear_err(h);
    *hits = NULL;
    *n = 0;
    if (!query || !*query) return fail(h, MMRAG_ERR_ARG, "empty query");
    retr_result res;
    memset(&res, 0, sizeof res);
    int rc = run_search(h, query, o ? o->k : 0, o ? o->docs : NULL, o ? o->n_docs : 0, &res);
    if (rc) return rc;
    if (copy_hits(&res, hits)) { retr_result_free(&res); return fail(h, MMRAG_ERR_NOMEM, "out of memory"); }
    *n = res.n;
    retr_result_free(&res);
    return MMRAG_OK;
}

void mmrag_hits_free(mmrag_hit *hits, int32_t n) {
    if (!hits) return;
    for (int32_t i = 0; i < n; i++) { free(hits[i].title); free(hits[i].text); }
    free(hits);
}

/* ---- ask -------------------------------------------------------------------------------- */
static int copy_citations(const answer_result *a, mmrag_hit **out) {
    mmrag_hit *hs = calloc(a->n_cites ? (size_t)a->n_cites : 1, sizeof *hs);
    if (!hs) return -1;
    for (int32_t i = 0; i < a->n_cites; i++) {
        const answer_evidence *e = &a->ev[a->cites[i]];
        const retr_hit *r = &a->hits.hits[e->hit];
        hs[i] = (mmrag_hit){r->chunk_id, r->doc, strdup(r->title ? r->title : ""), r->page,
                            store_chunk_kind_name(r->kind),
                            {e->box.x0, e->box.y0, e->box.x1, e->box.y1}, r->image_id,
                            strdup(e->text), e->score};
    }
    *out = hs;
    return 0;
}

static int map_answer_rc(int rc) {
    switch (rc) {
    case ANSWER_ERR_ARG: case ANSWER_ERR_CONTEXT: return MMRAG_ERR_ARG;
    case ANSWER_ERR_MODEL: return MMRAG_ERR_MODEL;
    case ANSWER_ERR_NOMEM: return MMRAG_ERR_NOMEM;
    case ANSWER_ABORTED: return MMRAG_ERR_CANCELLED;
    default: return MMRAG_ERR_STORE;
    }
}

int mmrag_ask(mmrag *h, const char *question, const mmrag_ask_opts *o, mmrag_answer *out) {
    if (!h || !out) return MMRAG_ERR_ARG;
    clear_err(h);
    memset(out, 0, sizeof *out);
    mmrag_ask_opts def = {0};
    if (!o) o = &def;
    answer_request rq;
    answer_request_default(&rq);
    rq.question = question;
    rq.mode = o->mode;
    if (o->k > 0) rq.k = o->k;
    if (o->max_tokens > 0) rq.max_tokens = o->max_tokens;
    rq.temperature = o->temperature;
    rq.seed = o->seed;
    rq.json_mode = o->json_mode;
    rq.show_unsupported = o->show_unsupported;
    rq.on_text = o->on_token;
    rq.user = o->user;
    answer_result a;
    char err[512];
    int rc = answer_run(h->retr, h->emb ? embed_textenc(h->emb) : NULL, h->llm, &rq, &a, err,
                        sizeof err);
    if (rc != ANSWER_OK) return fail(h, map_answer_rc(rc), "%s", err);
    if (copy_citations(&a, &out->citations) || !(out->answer = strdup(a.text ? a.text : ""))) {
        answer_result_free(&a);
        mmrag_answer_free(out);
        return fail(h, MMRAG_ERR_NOMEM, "out of memory");
    }
    out->n_citations = a.n_cites;
    out->stop_reason = answer_stop_name(&a);
    out->ttft_ms = a.ttft_ms;
    out->prompt_tokens = a.prompt_tokens;
    out->completion_tokens = a.completion_tokens;
    out->abstained = a.abstained;
    out->mode_used = answer_mode_name(a.mode_used);
    answer_result_free(&a);
    return MMRAG_OK;
}

void mmrag_answer_free(mmrag_answer *a) {
    if (!a) return;
    free(a->answer);
    mmrag_hits_free(a->citations, a->n_citations);
    memset(a, 0, sizeof *a);
}

/* ---- locate ------------------------------------------------------------------------------ */
/* The region localizer, created on first use (NULL with a message in err). */
static vpe *get_vpe(mmrag *h, char *err, size_t errlen) {
    pthread_mutex_lock(&h->mu);
    if (!h->vpe) {   /* each failure leaves its message in err and is retried next call */
        if (!h->emb && !h->loc_emb) embed_create(h->models, &h->loc_emb, err, errlen);
        embed_ctx *e = h->emb ? h->emb : h->loc_emb;
        if (e) vpe_create(embed_textenc(e), NULL, &h->vpe, err, errlen);
    }
    vpe *v = h->vpe;
    pthread_mutex_unlock(&h->mu);
    return v;
}

int mmrag_locate(mmrag *h, int64_t doc_id, int32_t page, const char *description,
                 mmrag_region *out) {
    if (!h) return MMRAG_ERR_ARG;
    clear_err(h);
    if (!out) return fail(h, MMRAG_ERR_ARG, "no output region");
    memset(out, 0, sizeof *out);
    out->doc_id = doc_id;
    if (doc_id <= 0) return fail(h, MMRAG_ERR_ARG, "bad document id");
    if (page < 0) return fail(h, MMRAG_ERR_ARG, "bad page %d", page);
    if (!description || !description[strspn(description, " \t\r\n")])
        return fail(h, MMRAG_ERR_ARG, "empty description");
    char verr[512] = "", err[512];
    vpe *v = get_vpe(h, verr, sizeof verr);   /* NULL: reported after the document checks */
    vpe_options o;
    vpe_options_default(&o);
    o.page = page;
    locate_result lr;
    switch (api_locate(h->st, v, doc_id, description, &o, &lr, err, sizeof err)) {
    case LOCATE_OK: break;
    case LOCATE_ERR_ARG: return fail(h, MMRAG_ERR_ARG, "%s", err);
    case LOCATE_ERR_NOTFOUND: return fail(h, MMRAG_ERR_NOTFOUND, "%s", err);
    case LOCATE_ERR_NOMEM: return fail(h, MMRAG_ERR_NOMEM, "%s", err);
    case LOCATE_ERR_VPE: return fail(h, MMRAG_ERR_MODEL, "%s", err);
    case LOCATE_ERR_NOMODEL:
        return fail(h, MMRAG_ERR_MODEL, "region localization needs the text model: %s", verr);
    default: return fail(h, MMRAG_ERR_STORE, "%s", err);
    }
    out->confidence = lr.r.confidence;
    if (!lr.r.found) return MMRAG_OK;   /* not found: page 0, kind "" */
    out->page = lr.r.page;
    out->box = (mmrag_box){lr.r.box[0], lr.r.box[1], lr.r.box[2], lr.r.box[3]};
    snprintf(out->kind, sizeof out->kind, "%s", vpe_kind_name(lr.r.kind));
    return MMRAG_OK;
}
