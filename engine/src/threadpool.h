/*
 * threadpool.h - persistent worker threads and a blocking parallel-for.
 *
 * Workers are created once per session and sleep on a condition variable
 * between jobs, so dispatching a job costs a wake-up, not a thread creation.
 * They may be pinned, one CPU each (placement.c decides which).
 */
#ifndef CX_THREADPOOL_H
#define CX_THREADPOOL_H

#include "cortex.h"

typedef struct tp_pool tp_pool;

/* fn(ctx, i, n) runs once for every thread index i in [0, n). */
typedef void (*tp_fn)(void *ctx, int i, int n);

/* A pool of n threads in all (the caller counts as one); n <= 1 runs inline.
 * cpus NULL: workers run where the kernel puts them; else worker i (1..n-1)
 * is created pinned to CPU cpus[i] (cpus[0], the caller's, is not pinned
 * here: the caller is not the pool's thread). 0 with *out, or CX_ENOMEM, or
 * CX_EINVAL when a worker cannot be pinned (the CPU is not allowed). Without
 * cpus a worker that cannot be created leaves a smaller pool, as before. */
int tp_new(int n, const int *cpus, tp_pool **out, cx_err *err);
void tp_free(tp_pool *p);
int tp_size(const tp_pool *p);
/* Run fn on every thread and return when all have finished. */
void tp_run(tp_pool *p, tp_fn fn, void *ctx);

#endif
