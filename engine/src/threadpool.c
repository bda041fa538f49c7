/*
 * threadpool.c - see threadpool.h. One job at a time: the caller publishes
 * (fn, ctx), bumps a generation counter and wakes the workers; each worker runs
 * its share and the last one to finish signals the caller.
 */
#include "threadpool.h"

#include <pthread.h>
#include <stdlib.h>

struct tp_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    tp_fn fn;
    void *ctx;
    unsigned long generation;
    int pending; /* workers still running the current job */
    int quit;
};

typedef struct worker_arg { tp_pool *p; int index; } worker_arg;

static void *worker_main(void *arg) {
    worker_arg *w = arg;
    tp_pool *p = w->p;
    int index = w->index;
    free(w);
    unsigned long seen = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (p->generation == seen && !p->quit) pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen = p->generation;
        tp_fn fn = p->fn;
        void *ctx = p->ctx;
        pthread_mutex_unlock(&p->mu);
        fn(ctx, index, p->n);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

tp_pool *tp_new(int n) {
    tp_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n < 1 ? 1 : n;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    p->threads = calloc((size_t)p->n, sizeof(pthread_t));
    if (!p->threads) {
        free(p);
        return NULL;
    }
    for (int i = 1; i < p->n; i++) {
        worker_arg *w = malloc(sizeof *w);
        if (!w) { p->n = i; break; }
        w->p = p;
        w->index = i;
        if (pthread_create(&p->threads[i], NULL, worker_main, w) != 0) {
            free(w);
            p->n = i; /* run with the threads we got */
            break;
        }
    }
    return p;
}

void tp_free(tp_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p);
}

int tp_size(const tp_pool *p) { return p ? p->n : 1; }

void tp_run(tp_pool *p, tp_fn fn, void *ctx) {
    if (!p || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->pending = p->n - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
