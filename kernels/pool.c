/* Thread pool: persistent workers woken per job; ranges handed out dynamically in
 * chunks of >= grain so uneven work balances. The calling thread works too and never
 * waits for a worker that has not started: it claims every chunk left and only waits
 * for chunks already being run. Workers spin briefly after a job (back-to-back small
 * jobs are common in decoding), then block on a condition variable.
 *
 * Claiming: `next` packs the job's generation (high 24 bits) with the next index (low
 * 40 bits), so a worker that wakes late cannot claim a chunk of a newer job by mistake:
 * its compare-and-swap expects the old generation and fails. (Generations wrap after
 * 2^24 jobs; a worker would have to stall for that many jobs between two loads.) */
#include <cblas.h> /* openblas_set_num_threads */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "kernels/kern_internal.h"

#define POOL_MAX_THREADS 256
#define POOL_SPIN 2000 /* pause iterations: tens of microseconds */
#define IDX_BITS 40
#define IDX_MASK ((UINT64_C(1) << IDX_BITS) - 1)
#define GEN_MASK ((UINT64_C(1) << (64 - IDX_BITS)) - 1)
#define MAX_ITEMS (INT64_C(1) << (IDX_BITS - 2)) /* index + chunk never reaches the gen bits */

struct kern_pool {
    int n;                       /* threads including the caller */
    pthread_t *th;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    _Atomic uint64_t gen;        /* bumped per job; workers wait for a change */
    _Atomic int stop;
    _Atomic int busy;            /* a job is in flight: later callers run inline */
    /* the current job; atomics because a late worker may read them while the next job
     * is being written (its claims then fail, so the values are never used) */
    _Atomic(kern_range_fn) fn;
    _Atomic(void *) ctx;
    _Atomic int64_t n_items, chunk;
    _Atomic uint64_t next;       /* gen << IDX_BITS | next index */
    _Atomic int64_t done;        /* items finished in the current job */
};

struct worker_arg { kern_pool *p; int id; };
static _Thread_local const kern_pool *tl_pool; /* set inside workers: nested runs inline */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Claim and run chunks of job generation g until none is left; returns 1 if this call
 * finished the job's last item. */
static int run_chunks(kern_pool *p, uint64_t g, kern_range_fn fn, void *ctx, int64_t n,
                      int64_t chunk, int id) {
    int last = 0;
    for (;;) {
        uint64_t v = atomic_load(&p->next);
        if ((v >> IDX_BITS) != (g & GEN_MASK) || (int64_t)(v & IDX_MASK) >= n) break;
        if (!atomic_compare_exchange_weak(&p->next, &v, v + (uint64_t)chunk)) continue;
        int64_t b = (int64_t)(v & IDX_MASK), e = b + chunk < n ? b + chunk : n;
        fn(ctx, b, e, id);
        if (atomic_fetch_add(&p->done, e - b) + (e - b) == n) last = 1;
    }
    return last;
}

static void *worker_main(void *arg) {
    struct worker_arg wa = *(struct worker_arg *)arg;
    free(arg);
    kern_pool *p = wa.p;
    tl_pool = p;
    uint64_t seen = 0;
    for (;;) {
        uint64_t g;
        int spins = 0;
        while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop) && spins < POOL_SPIN) {
            cpu_relax();
            spins++;
        }
        if (g == seen && !atomic_load(&p->stop)) {
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->cv_work, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) break;
        seen = g;
        if (run_chunks(p, g, atomic_load(&p->fn), atomic_load(&p->ctx), atomic_load(&p->n_items),
                       atomic_load(&p->chunk), wa.id)) {
            pthread_mutex_lock(&p->mu); /* the caller may be waiting for this last chunk */
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

static int default_threads(void) {
    const char *e = getenv("MMRAG_THREADS");
    if (e && *e) {
        int v = atoi(e);
        if (v > 0) return v;
    }
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 ? (int)c : 1;
}

kern_pool *kern_pool_create(int n_threads) {
    if (n_threads <= 0) n_threads = default_threads();
    if (n_threads > POOL_MAX_THREADS) n_threads = POOL_MAX_THREADS;
    kern_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = 1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    p->th = calloc((size_t)n_threads, sizeof *p->th);
    if (!p->th) { kern_pool_free(p); return NULL; }
    for (int i = 1; i < n_threads; i++) {
        struct worker_arg *wa = malloc(sizeof *wa);
        if (!wa) break;
        wa->p = p;
        wa->id = i;
        if (pthread_create(&p->th[i], NULL, worker_main, wa) != 0) { free(wa); break; }
        p->n = i + 1;  /* a pool smaller than asked still works */
    }
    /* OpenBLAS runs on the calling thread: kern_gemm_f32 splits products over the pool,
     * and OpenBLAS's own threads (one per CPU by default) would otherwise run beside it,
     * yield-spinning between calls on the cores the pool works on. Process-wide. */
    openblas_set_num_threads(1);
    return p;
}

void kern_pool_free(kern_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->th[i], NULL);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    pthread_mutex_destroy(&p->mu);
    free(p->th);
    free(p);
}

int kern_pool_size(const kern_pool *p) { return p ? p->n : 1; }

void kern_pool_run(kern_pool *p, int64_t n, int64_t grain, kern_range_fn fn, void *ctx) {
    if (n <= 0 || !fn) return;
    if (grain < 1) grain = 1;
    int expect = 0;
    if (!p || p->n == 1 || n <= grain || n >= MAX_ITEMS || tl_pool == p ||
        !atomic_compare_exchange_strong(&p->busy, &expect, 1)) {
        fn(ctx, 0, n, 0);
        return;
    }
    /* about 4 chunks per thread for balance, never below grain */
    int64_t chunk = (n + (int64_t)p->n * 4 - 1) / ((int64_t)p->n * 4);
    if (chunk < grain) chunk = grain;
    pthread_mutex_lock(&p->mu);
    uint64_t g = atomic_load(&p->gen) + 1;
    /* close claiming first: a late worker of the previous job must not pair the fields
     * written below with the old generation still in `next` */
    atomic_store(&p->next, ((g & GEN_MASK) << IDX_BITS) | IDX_MASK);
    atomic_store(&p->fn, fn);
    atomic_store(&p->ctx, ctx);
    atomic_store(&p->n_items, n);
    atomic_store(&p->chunk, chunk);
    atomic_store(&p->done, 0);
    atomic_store(&p->next, (g & GEN_MASK) << IDX_BITS);
    atomic_store(&p->gen, g);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);

    run_chunks(p, g, fn, ctx, n, chunk, 0);
    for (int spins = 0; atomic_load(&p->done) < n && spins < POOL_SPIN; spins++) cpu_relax();
    if (atomic_load(&p->done) < n) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->done) < n) pthread_cond_wait(&p->cv_done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
    atomic_store(&p->busy, 0);
}
