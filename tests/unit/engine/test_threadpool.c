/*
 * test_threadpool.c - the pool's contract (threadpool.h): every chunk of a
 * job runs exactly once, with the job's own function and context, on a
 * thread allowed to run it; a descheduled worker (the stall knob) holds back
 * only the chunk it is inside while the other threads take the rest of its
 * share; back-to-back jobs of different sizes and functions never mix, with
 * more threads than cores; a pass (tp_pass) runs its serial code once, in
 * order, on whichever thread, and goes on while its caller is descheduled;
 * the counters add up. Run under ThreadSanitizer too
 * (make tsan).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "testing.h"
#include "threadpool.h"

#define MAX_CHUNKS 4096
#define MAX_THREADS 8

typedef struct job {
    int id;                           /* which job of a run this context is */
    atomic_int runs[MAX_CHUNKS];      /* times each chunk ran */
    atomic_int by[MAX_THREADS];       /* chunks each thread ran */
    atomic_int wrong;                 /* chunks that saw another job's id or a thread out of range */
    int expect_id, max_threads;
} job;

static void count_chunk(void *ctx, int c, int thread) {
    job *j = ctx;
    if (j->id != j->expect_id || thread < 0 || thread >= j->max_threads || c < 0 || c >= MAX_CHUNKS)
        atomic_fetch_add(&j->wrong, 1);
    else {
        atomic_fetch_add(&j->runs[c], 1);
        atomic_fetch_add(&j->by[thread], 1);
    }
}

/* The same, marking the chunk's slot of a second array: another function. */
static void count_chunk_b(void *ctx, int c, int thread) {
    job *j = ctx;
    count_chunk(ctx, c, thread);
    atomic_fetch_add(&j->runs[c], 1000);
}

static void job_reset(job *j, int id, int max_threads) {
    memset(j, 0, sizeof *j);
    j->id = j->expect_id = id;
    j->max_threads = max_threads;
}

/* n chunks ran once each (b: with count_chunk_b's mark), nothing wrong. */
static int job_ok(job *j, int n, int b) {
    if (atomic_load(&j->wrong)) return 0;
    for (int c = 0; c < MAX_CHUNKS; c++)
        if (atomic_load(&j->runs[c]) != (c < n ? (b ? 1001 : 1) : 0)) return 0;
    return 1;
}

/* A pool of n threads, checked made (NULL, counted as a failure, if not). */
static tp_pool *new_pool(int n) {
    tp_pool *p = NULL;
    cx_err err = {0};
    CHECK(tp_new(n, NULL, &p, &err) == 0 && tp_size(p) == n, "pool of %d: %s", n, err.msg);
    return p;
}

/* Every chunk exactly once, for pools of 1..4 threads and chunk counts from 0
 * to TP_MAX_CHUNKS's neighbourhood, and the counters add up. */
static void test_each_chunk_once(void) {
    static job j;
    static const int counts[] = {0, 1, 2, 3, 7, 16, 100, 1000, MAX_CHUNKS};
    for (int n = 1; n <= 4; n++) {
        tp_pool *p = new_pool(n);
        if (!p) continue;
        int ok = 1, pooled = 0;
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
            for (int rep = 0; rep < 20; rep++) {
                job_reset(&j, rep, n);
                tp_run(p, count_chunk, &j, counts[k], 0);
                ok &= job_ok(&j, counts[k], 0);
                pooled += n > 1 && counts[k] > 1;
            }
        CHECK(ok, "%d threads: every chunk ran once, with its job, on a thread of the pool", n);
        cx_pool_stats st;
        tp_stats_get(p, &st);
        /* a job of one chunk, or a pool of one thread, runs inline and is not counted */
        int64_t want = 0;
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) want += n > 1 && counts[k] > 1 ? 20 * counts[k] : 0;
        CHECK(st.jobs == pooled && st.chunks == want, "%d threads: counters: %lld jobs (want %d), %lld chunks (want %lld)",
              n, (long long)st.jobs, pooled, (long long)st.chunks, (long long)want);
        CHECK(st.stolen <= st.chunks && st.busy_ns >= 0 && st.idle_ns >= 0 && st.stall_ns >= 0,
              "%d threads: stolen %lld of %lld chunks", n, (long long)st.stolen, (long long)st.chunks);
        tp_stats_reset(p);
        tp_stats_get(p, &st);
        CHECK(st.jobs == 0 && st.chunks == 0 && st.busy_ns == 0, "%d threads: counters reset", n);
        tp_free(p);
    }
}

/* max_threads: only threads below it run chunks (scratch made for fewer). */
static void test_max_threads(void) {
    static job j;
    tp_pool *p = new_pool(4);
    if (!p) return;
    int ok = 1;
    for (int m = 1; m <= 4; m++)
        for (int rep = 0; rep < 50; rep++) {
            job_reset(&j, rep, m);
            tp_run(p, count_chunk, &j, 64, m);
            ok &= job_ok(&j, 64, 0);
        }
    CHECK(ok, "chunks only on threads below max_threads, each once");
    tp_free(p);
}

/*
 * A descheduled worker: the knob makes worker 1 sleep 30 ms inside the first
 * chunk it claims in every job. It can hold back only that chunk: thread 0
 * runs all the others, including the rest of worker 1's share (the second
 * half of the chunks), so it ran at least n-1 chunks and stole at least
 * n/2-1 of them. Results are the same whoever ran what.
 */
static void test_stalled_worker(void) {
    static job j;
    tp_pool *p = new_pool(2);
    if (!p) return;
    tp_set_stall(p, 1, 30000);
    int ok = 1, held = 0;
    const int n = 64;
    for (int rep = 0; rep < 5; rep++) {
        job_reset(&j, rep, 2);
        tp_run(p, count_chunk, &j, n, 0);
        ok &= job_ok(&j, n, 0);
        held += atomic_load(&j.by[1]);
        CHECK(atomic_load(&j.by[0]) >= n - 1 && atomic_load(&j.by[1]) <= 1,
              "job %d: thread 0 ran %d chunks, the stalled worker %d (at most its one)", rep, atomic_load(&j.by[0]),
              atomic_load(&j.by[1]));
    }
    CHECK(ok, "a stalled worker: every chunk ran once");
    cx_pool_stats st;
    tp_stats_get(p, &st);
    CHECK(st.stolen >= 5 * (n / 2 - 1), "thread 0 took the stalled worker's share: %lld chunks stolen",
          (long long)st.stolen);
    /* the worker's stalled chunks were waited for, asleep */
    CHECK(held == 0 || (st.stall_ns > 0 && st.sleeps > 0), "%d held chunks: the caller waited %lld ns, %lld sleeps",
          held, (long long)st.stall_ns, (long long)st.sleeps);
    tp_set_stall(p, 1, 0);
    job_reset(&j, 99, 2);
    tp_run(p, count_chunk, &j, n, 0);
    CHECK(job_ok(&j, n, 0), "the knob cleared: the pool runs on");
    tp_free(p);
}

/*
 * Back to back: many small jobs alternating two functions, two contexts and
 * sizes, on more threads than this machine has cores, so workers wake late,
 * miss jobs and arrive while the next one is published. A chunk that ran
 * with another job's function or context would show in the counts.
 */
static void test_back_to_back(void) {
    static job a, b;
    tp_pool *p = new_pool(MAX_THREADS);
    if (!p) return;
    int ok = 1, pooled = 0;
    for (int rep = 0; rep < 3000 && ok; rep++) {
        int n = 1 + rep % 37;
        pooled += n > 1; /* one chunk runs inline */
        job *j = rep % 2 ? &a : &b;
        job_reset(j, rep, MAX_THREADS);
        tp_run(p, rep % 3 ? count_chunk : count_chunk_b, j, n, 0);
        ok &= job_ok(j, n, rep % 3 == 0);
    }
    CHECK(ok, "3000 jobs back to back: each chunk once, with its own job's function and context");
    cx_pool_stats st;
    tp_stats_get(p, &st);
    CHECK(st.jobs == pooled, "%lld jobs counted, %d ran on the pool", (long long)st.jobs, pooled);
    tp_free(p);
}

/*
 * A pass (tp_pass): jobs with serial code between them, each job's input the
 * serial code's result from the one before, so a serial step run out of
 * order, twice, or before its job finished shows in the final value.
 */
#define PASS_JOBS 120
#define PASS_CHUNKS 24

typedef struct pass_ctx {
    tp_pool *p;
    uint64_t in, acc;
    int work;               /* a chunk's steps: long enough that a woken worker finds chunks to claim */
    uint64_t out[PASS_CHUNKS];
    int chunks[PASS_JOBS];  /* each job's chunk count (some 1: inline, on the pass's thread) */
    int max_threads[PASS_JOBS];
} pass_ctx;

static void pass_chunk(void *ctx, int c, int thread) {
    pass_ctx *x = ctx;
    (void)thread;
    uint64_t v = x->in * 6364136223846793005ull + (uint64_t)c;
    for (int i = 0; i < x->work; i++) v = v * 2862933555777941757ull + 3037000493ull;
    x->out[c] = v;
}

static void pass_body(void *arg) {
    pass_ctx *x = arg;
    for (int k = 0; k < PASS_JOBS; k++) {
        memset(x->out, 0, sizeof x->out);
        tp_run(x->p, pass_chunk, x, x->chunks[k], x->max_threads[k]);
        for (int c = 0; c < x->chunks[k]; c++) x->acc = x->acc * 31 + x->out[c]; /* the serial step */
        x->in = x->acc ^ (uint64_t)k;
    }
}

static uint64_t run_pass_on(tp_pool *p, int seed, int work) {
    static pass_ctx x;
    memset(&x, 0, sizeof x);
    x.p = p;
    x.work = work;
    x.in = (uint64_t)seed;
    for (int k = 0; k < PASS_JOBS; k++) {
        x.chunks[k] = k % 11 == 0 ? 1 : 2 + (k * 7 + seed) % (PASS_CHUNKS - 1);
        x.max_threads[k] = k % 5 == 0 ? 1 + k % 3 : 0;
    }
    if (p) tp_pass(p, pass_body, &x);
    else pass_body(&x);
    return x.acc;
}

/* The same final value as the pass run inline, on pools of 2, 4 and 8
 * threads (more than this machine's cores: the pass moves between threads as
 * they are descheduled), the pass on its own stack as on a shared machine,
 * and tp_run still works between passes. */
static void test_pass_exact(void) {
    int ok = 1;
    for (int n = 2; n <= MAX_THREADS; n *= 2) {
        tp_pool *p = new_pool(n);
        if (!p) return;
        tp_set_park_stall(p, 1); /* on the pass's own stack, as on a shared machine (a 1 us stall) */
        for (int rep = 0; rep < 20; rep++) ok &= run_pass_on(p, rep, 200) == run_pass_on(NULL, rep, 200);
        static job j;
        job_reset(&j, 7, n);
        tp_run(p, count_chunk, &j, 64, 0);
        ok &= job_ok(&j, 64, 0);
        tp_free(p);
    }
    CHECK(ok, "passes on 2, 4 and 8 threads: every serial step once, in order, after its job");
}

/*
 * A caller descheduled between jobs (issue 31): worker 1 sleeps 2 ms in the
 * first chunk of every job, so the pass, out of chunks on the caller, parks;
 * the caller then looks for no work until another thread has run the pass on
 * (tp_set_park_stall, up to 5 s). The pass goes on without it, on the worker
 * that finished the job, and ends with the same value; before tp_pass the
 * serial code could run only on the caller.
 */
static void test_pass_moves(void) {
    tp_pool *p = new_pool(2);
    if (!p) return;
    tp_set_stall(p, 1, 2000);
    tp_set_park_stall(p, 5000000);
    tp_stats_reset(p);
    uint64_t got = run_pass_on(p, 3, 20000);
    cx_pool_stats st;
    tp_stats_get(p, &st);
    CHECK(got == run_pass_on(NULL, 3, 20000), "a pass whose caller stalls: the inline value");
    CHECK(st.pass_parks >= 1 && st.pass_moves >= 1, "the pass parked %lld times and moved to the worker %lld times",
          (long long)st.pass_parks, (long long)st.pass_moves);
    tp_set_stall(p, 1, 0);
    tp_set_park_stall(p, 0);
    CHECK(run_pass_on(p, 4, 200) == run_pass_on(NULL, 4, 200), "the knobs cleared: passes run on");
    tp_free(p);
}

/* tp_chunks: a few per thread, never more than the units, at least one. */
static void test_chunk_count(void) {
    tp_pool *p = new_pool(2);
    CHECK(tp_chunks(p, 0) == 1 && tp_chunks(p, 3) == 3 && tp_chunks(p, 1000) == 16 && tp_chunks(NULL, 1000) == 1,
          "tp_chunks: %d %d %d %d", tp_chunks(p, 0), tp_chunks(p, 3), tp_chunks(p, 1000), tp_chunks(NULL, 1000));
    tp_free(p);
}

TEST_MAIN({
    test_each_chunk_once();
    test_max_threads();
    test_stalled_worker();
    test_back_to_back();
    test_pass_exact();
    test_pass_moves();
    test_chunk_count();
})
