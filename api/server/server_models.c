/* api/server/server_models.c — the models the query routes share: the text encoder and the
 * region localizer over it (also used by /v1/locate in server_locate.c), one retriever per
 * collection, and the answer core's language model (api/core/answer.h).
 *
 * Search goes through retrieval/ (HNSW text + LSH image + BM25, fused) with one shared
 * retriever per collection (its own store handle). Without a text encoder the retriever
 * runs BM25 only. The language model is loaded by the first answer that needs it; each
 * generation borrows one of --gen-slots sessions and waits when all are busy. */
#include "api/server/server_internal.h"
#include "api/core/embed.h"
#include "engine/engine.h"
#include "engine/vpe.h"
#include "index/store.h"
#include "retrieval/retrieval.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct coll_retr {
    srv_coll *coll;
    store *st;
    retriever *r;
    struct coll_retr *next;
} coll_retr;

typedef struct {
    embed_ctx *emb;
    char emb_err[256];
    vpe *vpe;                      /* over emb's text encoder; NULL without it */
    pthread_mutex_t mu;            /* retrievers list, engine load, sessions */
    pthread_cond_t cv;
    coll_retr *retrs;
    answer_llm *llm;               /* the answer core's model and session pool */
    int producers;                 /* running stream threads */
} qstate;

struct embed_ctx *srv_query_embedder(srv_server *s) { return ((qstate *)s->query)->emb; }

struct vpe *srv_query_vpe(srv_server *s, const char **why) {
    qstate *q = s->query;
    if (!q->vpe && why) *why = q->emb_err[0] ? q->emb_err : "no text encoder";
    return q->vpe;
}

int srv_query_init(srv_server *s, char *err, size_t errlen) {
    qstate *q = calloc(1, sizeof *q);
    if (!q) { snprintf(err, errlen, "out of memory"); return -1; }
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    if (embed_create(s->cfg.models, &q->emb, q->emb_err, sizeof q->emb_err))
        fprintf(stderr, "mmrag serve: no text encoder (%s): search runs BM25 only\n", q->emb_err);
    else if (vpe_create(embed_textenc(q->emb), NULL, &q->vpe, q->emb_err, sizeof q->emb_err))
        fprintf(stderr, "mmrag serve: %s: /v1/locate is unavailable\n", q->emb_err);
    if (q->emb && *embed_figure_notice(q->emb))
        fprintf(stderr, "mmrag serve: note: %s\n", embed_figure_notice(q->emb));
    const char *m = s->cfg.models ? s->cfg.models : getenv("MMRAG_MODELS");
    char path[4200];
    if (s->cfg.gen_slots <= 0) s->cfg.gen_slots = 1;
    answer_llm_params lp;
    answer_llm_params_default(&lp);
    lp.path = answer_llm_path(s->cfg.llm, m && *m ? m : "models", path, sizeof path);
    lp.n_threads = s->cfg.gen_threads;
    lp.max_sessions = s->cfg.gen_slots;
    if (answer_llm_create(&lp, &q->llm, err, errlen)) {
        vpe_free(q->vpe);
        embed_free(q->emb);
        free(q);
        return -1;
    }
    s->query = q;
    return 0;
}

void srv_query_free(srv_server *s) {
    qstate *q = s->query;
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    while (q->producers > 0) pthread_cond_wait(&q->cv, &q->mu);
    pthread_mutex_unlock(&q->mu);
    for (coll_retr *c = q->retrs, *n; c; c = n) {
        n = c->next;
        retr_free(c->r);
        store_close(c->st);
        free(c);
    }
    answer_llm_free(q->llm);
    vpe_free(q->vpe);
    embed_free(q->emb);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q);
    s->query = NULL;
}

/* The collection's retriever, created on first use. */
retriever *srv_query_retriever(srv_server *s, srv_coll *coll, char *err, size_t errlen) {
    qstate *q = s->query;
    pthread_mutex_lock(&q->mu);
    for (coll_retr *c = q->retrs; c; c = c->next)
        if (c->coll == coll) { pthread_mutex_unlock(&q->mu); return c->r; }
    coll_retr *c = calloc(1, sizeof *c);
    retriever *r = NULL;
    if (!c) { snprintf(err, errlen, "out of memory"); goto out; }
    if (srv_coll_open_read(coll, &c->st, err, errlen)) { free(c); goto out; }
    if (embed_create_retriever(q->emb, c->st, &c->r, err, errlen)) { store_close(c->st); free(c); goto out; }
    c->coll = coll;
    c->next = q->retrs;
    q->retrs = c;
    r = c->r;
out:
    pthread_mutex_unlock(&q->mu);
    return r;
}

/* Stream producers use the engine and sessions: srv_query_free waits until none is left. */
void srv_query_producers_add(srv_server *s, int delta) {
    qstate *q = s->query;
    pthread_mutex_lock(&q->mu);
    q->producers += delta;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

/* ---- the language model ---------------------------------------------------------------- */
answer_llm *srv_query_llm(srv_server *s) { return ((qstate *)s->query)->llm; }
