/*
 * threadpool.c - see threadpool.h.
 *
 * One job at a time. The caller publishes (fn, ctx) and bumps an atomic
 * generation counter; workers spin on it for a short while (a token's
 * matrix products come microseconds apart, far quicker than a futex wake-up
 * through a hypervisor), then fall asleep on a condition variable. The caller
 * runs its own share and spins until `pending` reaches zero.
 *
 * Lost wake-ups are impossible: a worker announces itself in `sleepers` and
 * re-checks the generation under the mutex before waiting; the caller bumps
 * the generation before reading `sleepers` (both sequentially consistent), so
 * one of the two always sees the other.
 */
#include "threadpool.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Spin iterations before sleeping: roughly 100-300 us of pause instructions. */
#define SPIN_LIMIT 4096

typedef struct worker_arg { struct tp_pool *p; int index; } worker_arg;

struct tp_pool {
    int n;
    pthread_t *threads;
    worker_arg *args;      /* [n] each worker's argument, owned by the pool: a worker
                            * that freed its own at start-up made an allocator call
                            * whenever it got to run, in the middle of a decode */
    tp_fn fn;
    void *ctx;
    atomic_ulong generation;
    atomic_int pending; /* workers still running the current job */
    atomic_int sleepers;
    atomic_int quit;
    pthread_mutex_t mu;
    pthread_cond_t wake;
};


static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Wait until the generation moves past `seen` (or quit); returns the new one. */
static unsigned long wait_for_job(tp_pool *p, unsigned long seen) {
    for (int i = 0; i < SPIN_LIMIT; i++) {
        unsigned long g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g != seen || atomic_load_explicit(&p->quit, memory_order_relaxed)) return g;
        cpu_relax();
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->sleepers, 1);
    unsigned long g;
    while ((g = atomic_load(&p->generation)) == seen && !atomic_load(&p->quit)) pthread_cond_wait(&p->wake, &p->mu);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void *worker_main(void *arg) {
    worker_arg *w = arg;
    tp_pool *p = w->p;
    int index = w->index;
    assert(index >= 1 && index < p->n);
    unsigned long seen = 0;
    for (;;) {
        seen = wait_for_job(p, seen);
        if (atomic_load(&p->quit)) return NULL;
        p->fn(p->ctx, index, p->n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
}

/* Pinned workers are created with their affinity in the attributes
 * (pthread_attr_setaffinity_np) rather than pinning themselves at start: a
 * worker never runs an instruction on another CPU, and a refusal comes back
 * here, from pthread_create, instead of from a thread nobody waits for. */
int tp_new(int n, const int *cpus, tp_pool **out, cx_err *err) {
    *out = NULL;
    tp_pool *p = calloc(1, sizeof *p);
    if (!p) return cx_fail(err, CX_ENOMEM, "out of memory for a pool of %d threads", n);
    p->n = n < 1 ? 1 : n;
    atomic_init(&p->generation, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->quit, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    p->threads = calloc((size_t)p->n, sizeof(pthread_t));
    p->args = calloc((size_t)p->n, sizeof(worker_arg));
    if (!p->threads || !p->args) {
        int want = p->n;
        p->n = 1; /* no worker to join */
        tp_free(p);
        return cx_fail(err, CX_ENOMEM, "out of memory for a pool of %d threads", want);
    }
    for (int i = 1; i < p->n; i++) {
        p->args[i] = (worker_arg){p, i};
        pthread_attr_t attr;
        int e = pthread_attr_init(&attr);
        if (!e && cpus) {
            assert(cpus[i] >= 0 && cpus[i] < CPU_SETSIZE && "a CPU number cpu_set_t can hold");
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpus[i], &one);
            e = pthread_attr_setaffinity_np(&attr, sizeof one, &one);
        }
        if (!e) e = pthread_create(&p->threads[i], &attr, worker_main, &p->args[i]);
        pthread_attr_destroy(&attr);
        if (e == 0) continue;
        int want = p->n;
        p->n = i; /* the workers started so far are joined by tp_free */
        if (!cpus) break; /* unpinned: run with the threads we got, as always */
        tp_free(p);
        return cx_fail(err, e == EINVAL ? CX_EINVAL : CX_ENOMEM, "thread pool: worker %d of %d pinned to CPU %d: %s%s",
                       i, want, cpus[i], strerror(e),
                       e == EINVAL ? " (the CPU is not allowed to this process: did its affinity change after"
                                     " cx_set_placement?)" : "");
    }
    *out = p;
    return 0;
}

void tp_free(tp_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    free(p->threads);
    free(p->args);
    free(p);
}

int tp_size(const tp_pool *p) { return p ? p->n : 1; }

void tp_run(tp_pool *p, tp_fn fn, void *ctx) {
    if (!p || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    /* one job at a time: the last one has finished on every worker */
    assert(fn && atomic_load_explicit(&p->pending, memory_order_relaxed) == 0);
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
    atomic_fetch_add(&p->generation, 1); /* seq_cst: publishes fn/ctx, orders against `sleepers` */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    fn(ctx, 0, p->n);
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) cpu_relax();
}
