/*
 * threadpool.h - persistent worker threads and a parallel-for over chunks
 * claimed at run time.
 *
 * Contract. A job is n_chunks independent pieces of work; tp_run returns
 * when every chunk has run exactly once. Which thread runs a chunk is
 * decided at run time: each thread starts on its own contiguous share and,
 * when that is exhausted, takes chunks from the others' shares. A thread the
 * kernel deschedules therefore holds up the job by at most the one chunk it
 * is inside, never by its whole share. A chunk must compute the same bits
 * whichever thread runs it: callers give each chunk fixed outputs and keep
 * every sum inside one chunk, so results do not depend on the thread count,
 * on contention or on who stole what.
 *
 * Waits spin briefly and then sleep on a futex, so a thread with nothing to
 * do gives its core back (to the thread that holds the last chunk, or to
 * another process).
 *
 * A whole pass (a sequence of jobs with serial code between them) may run
 * through tp_pass. While the cores are shared it runs on a stack of its own
 * that any of the pool's threads can run: out of chunks with its job not
 * finished, it parks, and the thread that finishes the job's last chunk runs
 * the serial code on. So the pass never waits for one particular thread to
 * be given a core: a descheduled caller no longer holds every other thread
 * at the end of a job.
 *
 * Workers are created once per session and may be pinned, one CPU each
 * (placement.c decides which).
 */
#ifndef CX_THREADPOOL_H
#define CX_THREADPOOL_H

#include <stdint.h>

#include "cortex.h"

typedef struct tp_pool tp_pool;

/* The most chunks one job may have (a chunk index fits 15 bits of a claim word). */
#define TP_MAX_CHUNKS 32767

/* fn(ctx, chunk, thread) runs once for every chunk in [0, n_chunks), on
 * whichever thread claimed it; thread in [0, tp_size) names that thread's
 * scratch (never two chunks at once on one thread). */
typedef void (*tp_fn)(void *ctx, int chunk, int thread);

/* A pool of n threads in all (the caller counts as one); n <= 1 runs inline.
 * cpus NULL: workers run where the kernel puts them; else worker i (1..n-1)
 * is created pinned to CPU cpus[i] (cpus[0], the caller's, is not pinned
 * here: the caller is not the pool's thread). 0 with *out, or CX_ENOMEM, or
 * CX_EINVAL when a worker cannot be pinned (the CPU is not allowed). Without
 * cpus a worker that cannot be created leaves a smaller pool, as before. */
int tp_new(int n, const int *cpus, tp_pool **out, cx_err *err);
void tp_free(tp_pool *p);
int tp_size(const tp_pool *p);

/* Run fn over chunks [0, n_chunks) (n_chunks <= TP_MAX_CHUNKS) and return
 * when all have finished. Only threads 0..max_threads-1 take part (scratch
 * made for fewer threads than the pool has); max_threads <= 0: all. */
void tp_run(tp_pool *p, tp_fn fn, void *ctx, int n_chunks, int max_threads);

/* Run body(arg) as a pass: while the pool finds its cores shared, its
 * tp_run calls (and the code between them) run on whichever pool thread
 * finished the previous job; on a quiet machine body runs on the caller.
 * tp_pass returns, on the calling thread, when body has returned. body must
 * not depend on which thread it is on (no thread-local state kept across a
 * tp_run, no lock held across one); it may not call tp_pass. Inline (body on the caller)
 * for a pool of one thread, or when the pass's stack could not be mapped. */
void tp_pass(tp_pool *p, void (*body)(void *), void *arg);

/* Chunks for `units` pieces of work (rows, tokens) on this pool: a few per
 * thread, so a thief finds work and a claim costs nothing next to a chunk;
 * at most `units`, at least 1; 1 for a pool of one thread (or none). */
int tp_chunks(const tp_pool *p, int64_t units);

/* Counters since tp_new (or the last tp_stats_reset), summed over threads
 * (cortex.h's cx_pool_stats). Safe to read while jobs run. */
void tp_stats_get(const tp_pool *p, cx_pool_stats *out);
void tp_stats_reset(tp_pool *p);

/* Test knob: thread `thread` sleeps usec microseconds inside the first chunk
 * it claims in every job (0: never), as if the kernel had descheduled it
 * there; each thread has its own. Set between jobs. */
void tp_set_stall(tp_pool *p, int thread, unsigned usec);

/* Test knob: inside tp_pass, once the pass has parked and left the calling
 * thread, that thread looks for no work until another thread has run the
 * pass on (or usec microseconds have passed), as if the kernel had
 * descheduled it between jobs (0: never). While it is set, every pass runs
 * on its own stack, quiet machine or not. Set between passes. */
void tp_set_park_stall(tp_pool *p, unsigned usec);

#endif
