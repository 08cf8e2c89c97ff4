/* The language model's session pool (api/core/answer_llm.c) with the real SmolLM2 file:
 * with one session, waiting answers are served in arrival order, and one whose caller gives
 * up (its client went away) leaves the line without ever running. Arrival order is made
 * certain by waiting until answer_llm_waiting() counts each newcomer. */
#include "test.h"
#include "api/core/answer.h"
#include "api/core/answer_internal.h"
#include "engine/engine.h"

#include <pthread.h>
#include <unistd.h>


typedef struct waiter {
    answer_llm *l;
    int id;
    volatile int give_up;
    int got;                     /* 1: had a session */
    int *order, *n_order;
    pthread_mutex_t *mu;
} waiter;

static int gave_up(void *user) { return ((waiter *)user)->give_up; }

static void *wait_turn(void *arg) {
    waiter *w = arg;
    struct mmrag_engine *e = NULL;
    char err[256];
    struct mmrag_session *s = answer_llm_acquire(w->l, &e, gave_up, w, err, sizeof err);
    if (!s) return NULL;
    w->got = 1;
    pthread_mutex_lock(w->mu);
    w->order[(*w->n_order)++] = w->id;
    pthread_mutex_unlock(w->mu);
    answer_llm_release(w->l, s);
    return NULL;
}

static int wait_count(answer_llm *l, int n) {
    for (int i = 0; i < 2000; i++) {   /* 20 s: a thread that never queues is a failure */
        if (answer_llm_waiting(l) == n) return 1;
        usleep(10000);
    }
    return 0;
}

TEST(sessions_in_arrival_order_and_give_up) {
    char model_path[4200];
    snprintf(model_path, sizeof model_path, "%s/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
             test_env("MMRAG_MODELS", "models"));
    if (access(model_path, R_OK)) SKIP("no SmolLM2 file (make models)");
    answer_llm_params p;
    answer_llm_params_default(&p);
    p.path = model_path;
    p.max_sessions = 1;
    p.n_threads = 1;
    answer_llm *l = NULL;
    char err[256];
    CHECK_MSG(answer_llm_create(&p, &l, err, sizeof err) == 0, "%s", err);
    struct mmrag_engine *e = NULL;
    struct mmrag_session *held = answer_llm_acquire(l, &e, NULL, NULL, err, sizeof err);
    CHECK_MSG(held != NULL, "%s", err);

    enum { N = 4 };
    waiter w[N];
    pthread_t th[N];
    int order[N], n_order = 0;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    for (int i = 0; i < N; i++) {
        w[i] = (waiter){.l = l, .id = i, .order = order, .n_order = &n_order, .mu = &mu};
        CHECK(pthread_create(&th[i], NULL, wait_turn, &w[i]) == 0);
        CHECK_MSG(wait_count(l, i + 1), "waiter %d never joined the line", i);
    }
    w[1].give_up = 1;   /* second in line: its client went away */
    CHECK_MSG(wait_count(l, N - 1), "the waiter that gave up is still in line");
    answer_llm_release(l, held);
    for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
    CHECK(w[1].got == 0);
    CHECK_MSG(n_order == 3 && order[0] == 0 && order[1] == 2 && order[2] == 3,
              "order %d: %d %d %d", n_order, order[0], order[1], order[2]);
    CHECK(answer_llm_waiting(l) == 0);
    answer_llm_free(l);
}
