/*
 * threadpool.h - persistent worker threads and a blocking parallel-for.
 *
 * Workers are created once per session and sleep on a condition variable
 * between jobs, so dispatching a job costs a wake-up, not a thread creation.
 */
#ifndef CX_THREADPOOL_H
#define CX_THREADPOOL_H

typedef struct tp_pool tp_pool;

/* fn(ctx, i, n) runs once for every thread index i in [0, n). */
typedef void (*tp_fn)(void *ctx, int i, int n);

/* A pool of n threads in all (the caller counts as one); n <= 1 runs inline. */
tp_pool *tp_new(int n);
void tp_free(tp_pool *p);
int tp_size(const tp_pool *p);
/* Run fn on every thread and return when all have finished. */
void tp_run(tp_pool *p, tp_fn fn, void *ctx);

#endif
