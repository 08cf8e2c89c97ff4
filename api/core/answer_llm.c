/* api/core/answer_llm — the language model of answers: which file (one rule for every
 * front-end) and a pool of sessions over one loaded engine.
 *
 * Design notes:
 * 1. The engine loads on first use, under the pool's lock; a failure is kept as that
 *    call's error and the next call tries again (a model file copied in later works).
 * 2. Sessions are reused (their KV buffers are the expensive part); max_sessions bounds
 *    concurrent generations, later callers wait for a free one in arrival order (a
 *    condition variable alone wakes an arbitrary waiter: under load some asks starved
 *    for minutes while later ones went first). A waiter whose caller gave up (the
 *    client went away) leaves the line. */
#include "api/core/answer.h"
#include "api/core/answer_internal.h"
#include "engine/engine.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct answer_llm {
    answer_llm_params p;
    char path[4096];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct mmrag_engine *eng;
    struct mmrag_session **idle;
    int32_t n_idle, n_made;
    struct llm_waiter *head, *tail;   /* callers waiting for a session, first come first */
};

typedef struct llm_waiter { struct llm_waiter *next; } llm_waiter;

const char *answer_llm_path(const char *given, const char *models_dir, char *buf, size_t len) {
    if (given && *given) return given;
    const char *env = getenv("MMRAG_LLM");
    if (env && *env) return env;
    snprintf(buf, len, "%s/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
             models_dir && *models_dir ? models_dir : "models");
    return buf;
}

void answer_llm_params_default(answer_llm_params *p) {
    memset(p, 0, sizeof *p);
    p->n_ctx = 2048;
    p->kv_type = MMRAG_KV_F32;
}

int answer_llm_create(const answer_llm_params *p, answer_llm **out, char *err, size_t errlen) {
    *out = NULL;
    if (!p || !p->path || !*p->path) {
        snprintf(err, errlen, "no language model path");
        return -1;
    }
    answer_llm *l = calloc(1, sizeof *l);
    if (!l) { snprintf(err, errlen, "out of memory"); return -1; }
    l->p = *p;
    snprintf(l->path, sizeof l->path, "%s", p->path);
    l->p.path = l->path;
    if (l->p.n_ctx <= 0) l->p.n_ctx = 2048;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    *out = l;
    return 0;
}

void answer_llm_free(answer_llm *l) {
    if (!l) return;
    for (int32_t i = 0; i < l->n_idle; i++) mmrag_session_free(l->idle[i]);
    free(l->idle);
    mmrag_engine_free(l->eng);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l);
}

const char *answer_llm_file(const answer_llm *l) { return l ? l->path : ""; }

/* Under l->mu. */
static int load_locked(answer_llm *l, char *err, size_t errlen) {
    if (l->eng) return 0;
    if (access(l->path, R_OK)) {
        snprintf(err, errlen, "language model %.3000s: %s", l->path, strerror(errno));
        return -1;
    }
    struct mmrag_engine_params ep = mmrag_engine_default_params();
    ep.n_ctx = l->p.n_ctx;
    ep.n_threads = l->p.n_threads;
    ep.kv_type = l->p.kv_type;
    l->eng = mmrag_engine_init_from_file(l->path, ep, err, errlen);
    if (!l->eng) return -1;
    int recognized;
    const char *tmpl = mmrag_engine_chat_template(l->eng, &recognized);
    if (!recognized) /* a diagnostic, not an error: answers still come, maybe worse */
        fprintf(stderr, "mmrag: warning: %s: tokenizer.chat_template %s, using the %s format\n",
                l->path, strcmp(tmpl, "plain") == 0 ? "absent (a base model?)" : "not recognized", tmpl);
    return 0;
}

int answer_llm_load(answer_llm *l, char *err, size_t errlen) {
    pthread_mutex_lock(&l->mu);
    int rc = load_locked(l, err, errlen);
    pthread_mutex_unlock(&l->mu);
    return rc;
}

static void line_leave(answer_llm *l, llm_waiter *me) {
    llm_waiter **pp = &l->head;
    while (*pp && *pp != me) pp = &(*pp)->next;
    if (!*pp) return;
    *pp = me->next;
    if (l->tail == me) {
        l->tail = NULL;
        for (llm_waiter *w = l->head; w; w = w->next) l->tail = w;
    }
    pthread_cond_broadcast(&l->cv);   /* the next in line may be first now */
}

static int session_free_now(const answer_llm *l) {
    return l->n_idle || l->p.max_sessions <= 0 || l->n_made < l->p.max_sessions;
}

/* Under l->mu: waits until this caller is first in line and a session is free. Returns 0,
 * or -1 when cancelled() said the caller gave up (it is polled every 200 ms). */
static int line_wait(answer_llm *l, int (*cancelled)(void *), void *user) {
    if (!l->head && session_free_now(l)) return 0;
    llm_waiter me = {0};
    if (l->tail) l->tail->next = &me;
    else l->head = &me;
    l->tail = &me;
    while (l->head != &me || !session_free_now(l)) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 200000000;
        until.tv_sec += until.tv_nsec / 1000000000;
        until.tv_nsec %= 1000000000;
        pthread_cond_timedwait(&l->cv, &l->mu, &until);
        if (cancelled && cancelled(user)) { line_leave(l, &me); return -1; }
    }
    line_leave(l, &me);
    return 0;
}

struct mmrag_session *answer_llm_acquire(answer_llm *l, struct mmrag_engine **eng,
                                         int (*cancelled)(void *), void *user, char *err,
                                         size_t errlen) {
    pthread_mutex_lock(&l->mu);
    if (load_locked(l, err, errlen)) { pthread_mutex_unlock(&l->mu); return NULL; }
    *eng = l->eng;
    if (line_wait(l, cancelled, user)) {
        pthread_mutex_unlock(&l->mu);
        snprintf(err, errlen, "stopped by the caller");
        return NULL;
    }
    if (l->n_idle) {
        struct mmrag_session *s = l->idle[--l->n_idle];
        pthread_mutex_unlock(&l->mu);
        return s;
    }
    struct mmrag_session **ni = realloc(l->idle, (size_t)(l->n_made + 1) * sizeof *ni);
    if (!ni) { pthread_mutex_unlock(&l->mu); snprintf(err, errlen, "out of memory"); return NULL; }
    l->idle = ni;   /* room to give every session back without allocating */
    l->n_made++;
    pthread_mutex_unlock(&l->mu);
    struct mmrag_session *s = mmrag_session_create(*eng, err, errlen);
    if (!s) {
        pthread_mutex_lock(&l->mu);
        l->n_made--;
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
    }
    return s;
}

int32_t answer_llm_waiting(answer_llm *l) {
    if (!l) return 0;
    pthread_mutex_lock(&l->mu);
    int32_t n = 0;
    for (llm_waiter *w = l->head; w; w = w->next) n++;
    pthread_mutex_unlock(&l->mu);
    return n;
}

int answer_llm_session(answer_llm *l, const answer_request *rq, struct mmrag_engine **eng,
                       struct mmrag_session **ss, char *err, size_t errlen) {
    *ss = answer_llm_acquire(l, eng, rq->cancelled, rq->user, err, errlen);
    if (*ss) return ANSWER_OK;
    return rq->cancelled && rq->cancelled(rq->user) ? ANSWER_ABORTED : ANSWER_ERR_MODEL;
}

int answer_llm_gen_failed(struct mmrag_session *ss, int grc, char *err, size_t errlen) {
    snprintf(err, errlen, "generation failed: %s", mmrag_session_errmsg(ss));
    return grc == MMRAG_ENGINE_CONTEXT_FULL ? ANSWER_ERR_CONTEXT : ANSWER_ERR_MODEL;
}

void answer_llm_release(answer_llm *l, struct mmrag_session *s) {
    if (!s) return;
    pthread_mutex_lock(&l->mu);
    l->idle[l->n_idle++] = s;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

int32_t answer_llm_ctx(const answer_llm *l) { return l->p.n_ctx; }
