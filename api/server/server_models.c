/* api/server/server_models.c — the models the query routes share: the text encoder and the
 * region localizer over it (also used by /v1/locate in server_locate.c), one retriever per
 * collection, and the language model with its bounded pool of generation sessions.
 *
 * Search goes through retrieval/ (HNSW text + LSH image + BM25, fused) with one shared
 * retriever per collection (its own store handle). Without a text encoder the retriever
 * runs BM25 only. The language model is loaded on first use; each generation borrows one
 * of --gen-slots sessions and waits when all are busy. */
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
    struct mmrag_engine *eng;
    int eng_tried;
    char eng_err[512];
    struct mmrag_session **sess;   /* idle sessions */
    int n_sess, n_sess_made;
    int producers;                 /* running stream threads */
    char model_path[4096];
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
    const char *m = s->cfg.models ? s->cfg.models : getenv("MMRAG_MODELS");
    snprintf(q->model_path, sizeof q->model_path, "%s/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
             m && *m ? m : "models");
    const char *mp = getenv("MMRAG_LLM");
    if (mp && *mp) snprintf(q->model_path, sizeof q->model_path, "%s", mp);
    if (s->cfg.gen_slots <= 0) s->cfg.gen_slots = 1;
    q->sess = calloc((size_t)s->cfg.gen_slots, sizeof *q->sess);
    if (!q->sess) { free(q); snprintf(err, errlen, "out of memory"); return -1; }
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
    for (int i = 0; i < q->n_sess; i++) mmrag_session_free(q->sess[i]);
    free(q->sess);
    mmrag_engine_free(q->eng);
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
    if (store_open(coll->dir, NULL, &c->st, err, errlen) != STORE_OK) { free(c); goto out; }
    retr_config rc;
    retr_config_default(&rc);
    if (q->emb) {
        rc.text.model = embed_model_id(q->emb);
        rc.text.dim = embed_dim(q->emb);
        rc.text.encode = retr_textenc_encode;
        rc.text.user = embed_textenc(q->emb);
        rc.image.model = embed_model_id(q->emb);
        rc.image.dim = embed_dim(q->emb);
    }
    if (retr_create(c->st, &rc, &c->r, err, errlen)) { store_close(c->st); free(c); goto out; }
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

/* ---- the language model and its sessions ---------------------------------------------- */
struct mmrag_engine *srv_query_engine(srv_server *s, char *err, size_t errlen) {
    qstate *q = s->query;
    pthread_mutex_lock(&q->mu);
    if (!q->eng && !q->eng_tried) {
        q->eng_tried = 1;
        if (access(q->model_path, R_OK)) {
            snprintf(q->eng_err, sizeof q->eng_err, "language model %.300s: %.100s", q->model_path,
                     strerror(errno));
        } else {
            struct mmrag_engine_params p = mmrag_engine_default_params();
            p.n_threads = s->cfg.gen_threads;
            p.n_ctx = 4096;
            q->eng = mmrag_engine_init_from_file(q->model_path, p, q->eng_err, sizeof q->eng_err);
        }
    }
    struct mmrag_engine *e = q->eng;
    if (!e) snprintf(err, errlen, "%s", q->eng_err);
    pthread_mutex_unlock(&q->mu);
    return e;
}

struct mmrag_session *srv_query_session_acquire(srv_server *s, struct mmrag_engine *e,
                                                char *err, size_t errlen) {
    qstate *q = s->query;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        if (q->n_sess > 0) {
            struct mmrag_session *ss = q->sess[--q->n_sess];
            pthread_mutex_unlock(&q->mu);
            return ss;
        }
        if (q->n_sess_made < s->cfg.gen_slots) break;
        pthread_cond_wait(&q->cv, &q->mu);
    }
    q->n_sess_made++;
    pthread_mutex_unlock(&q->mu);
    struct mmrag_session *ss = mmrag_session_create(e, err, errlen);
    if (!ss) {
        pthread_mutex_lock(&q->mu);
        q->n_sess_made--;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
    }
    return ss;
}

void srv_query_session_release(srv_server *s, struct mmrag_session *ss) {
    qstate *q = s->query;
    pthread_mutex_lock(&q->mu);
    q->sess[q->n_sess++] = ss;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}
