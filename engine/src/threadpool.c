/*
 * threadpool.c - see threadpool.h.
 *
 * Why chunks claimed at run time. A pass is ~200 jobs per token, each ending
 * in a wait for its slowest thread. With shares fixed in advance, a thread
 * the kernel deschedules (another process wants its core) holds every other
 * thread at that wait for its whole time slice: on a 2-core machine with one
 * busy neighbour, two threads ran at less than half the speed of one. Here
 * each thread owns a contiguous share of the chunks (on a quiet machine the
 * split, and the memory each thread streams, is the one fixed shares gave)
 * and, when it is done, takes what is left of the others' shares. The only
 * work a descheduled thread can hold back is the chunk it is inside.
 *
 * Claim words. Each thread's share is one 64-bit word on its own cache line:
 *
 *     [63:32] job number   [31] excluded   [30:16] next chunk   [15:0] end
 *
 * A claim is a compare-and-swap that bumps `next` while the word still names
 * the claimer's job and next < end; the owner's claims touch only its own
 * line, a thief's claims the victim's. Because the job number is in the word,
 * a thread that woke late for job g can never take a chunk of job g+1 while
 * believing it runs g: its CAS fails and it goes back to waiting. The job's
 * fn, ctx and chunk count are plain fields written before the words are
 * published (release) and read only after a successful claim (acquire); the
 * job cannot finish, and the caller cannot overwrite them, while the claimer
 * holds an unfinished chunk.
 *
 * States of one job, and the function that moves it on:
 *
 *     published --tp_run: words stored, gen bumped, sleepers woken-->
 *     running   --run_chunks: claim, run, claim ... (any thread)-->
 *     drained   (every chunk claimed; some may still be running)
 *               --run_chunks: fetch_add(done, ran)-->
 *     finished  (done == n_chunks) --wait_done returns--> the next job
 *
 * Waits. A worker between jobs spins on `gen`, then sleeps on it; the
 * caller, out of chunks, spins on `done`, then sleeps on it. How long they
 * spin depends on whether the machine is shared (spin_budget): on a quiet one
 * a worker spins SPIN_QUIET_NS (a token's jobs come microseconds apart,
 * quicker than a futex wake-up through a hypervisor); on a shared one
 * everyone spins SPIN_SHARED_NS, because a spinning thread then spends the
 * machine's time waiting for a thread that cannot run, and an idle core is
 * what lets the kernel run the descheduled caller or chunk holder soonest.
 * Lost wake-ups are impossible in both: the sleeper announces itself
 * (sleepers, caller_waiting) and re-checks the word, the waker changes the
 * word and then reads the announcement (all sequentially consistent), so one
 * of the two sees the other, and FUTEX_WAIT itself re-checks the word in the
 * kernel.
 *
 * The pass. Between a pass's jobs runs serial code (norms, RoPE, the KV
 * write). Run by the caller, it needs that one thread: while the kernel has
 * the caller descheduled, a worker can finish the job but not start the
 * next. tp_pass therefore runs the pass on a context of its own (ucontext,
 * an mmap'ed stack) that any pool thread can run, and the thread that
 * finishes a job's last chunk runs it on. States of the pass (fib.state):
 *
 *     RUNNING --pass_wait: out of chunks, job unfinished after a spin:
 *               switch_to_host; run_pass stores-->                 PARKED
 *     PARKED  --run_chunks, on the thread that finished the job's last
 *               chunk, or run_pass, when the job finished meanwhile:
 *               CAS PARKED->RUNNING, run_pass (switch_to_pass)-->  RUNNING
 *     RUNNING --body returned: end_pass-->                         DONE
 *     DONE    --tp_pass returns, on the caller-->                  IDLE
 *
 * Only a CAS from PARKED takes the pass up, so exactly one thread runs it,
 * and only after its context is saved (PARKED is stored by its old host
 * after the switch). While the pass runs elsewhere the caller works like a
 * worker (caller_wait, run_chunks) and returns when it sees DONE. Only
 * while the pool finds its cores shared (spin_budget) does a pass run this
 * way; on a quiet machine no thread is descheduled for long, and tp_pass
 * runs the pass on the caller, exactly as before. Even on its own stack the
 * pass switches only when it parks.
 */
#include "threadpool.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "util.h"

/* The sanitizers must be told when the pass's stack is switched to and from
 * (see "The pass"): ASan which stack is live, TSan which fiber runs. */
#if defined(__SANITIZE_ADDRESS__)
#define TP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TP_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define TP_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TP_TSAN 1
#endif
#endif
#ifdef TP_ASAN
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old, size_t *size_old);
#endif
#ifdef TP_TSAN
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
#endif

/* Spins before a wait sleeps, on a quiet machine and on a shared one (see "Waits"). */
#define SPIN_QUIET_NS 100000       /* a worker: covers the gaps between a token's jobs */
#define SPIN_QUIET_CALLER_NS 20000 /* the caller: covers a chunk still running elsewhere */
#define SPIN_SHARED_NS 2000        /* anyone: give the core back almost at once */
#define CONTEND_CHECK_NS 25000000  /* a thread reads its run-queue delay at a wait this long after the last read ... */
#define CONTEND_SHARE 0.25         /* ... and waiting for a core this share of the time since, */
#define CONTEND_WINDOWS 2          /* ... in this many checks in a row, means a shared machine */
#define CONTEND_HOLD_NS 500000000  /* the pool then waits as on a shared machine for this long */
#define CHUNKS_PER_THREAD 8   /* tp_chunks: what a share is cut into */
#define PASS_STACK_BYTES ((size_t)8 << 20) /* the pass's own stack: a thread's default, touched pages only */

#define WORD_EXCL (1ull << 31)
#define WORD_NEXT_ONE (1ull << 16)

typedef struct worker_arg { struct tp_pool *p; int index; } worker_arg;

/* One thread's claim word, alone on its cache line. */
typedef struct tp_slot {
    alignas(64) _Atomic uint64_t word;
} tp_slot;

/* One thread's counters, written by that thread only (relaxed atomics: read
 * by tp_stats_get while a late worker may be finishing a wait), and its
 * contention detector (plain: that thread's alone). */
typedef struct tp_tstats {
    alignas(64) _Atomic int64_t chunks, stolen, busy_ns, idle_ns, stall_ns, waits, sleeps, shared_waits, parks, moves;
    int fd;                  /* its /proc/thread-self/schedstat, -1: none (or not opened yet) */
    pid_t tid;               /* whose that is (the caller's slot serves whoever calls tp_run) */
    int64_t delay, at;       /* run-queue delay and time at the last check (at 0: none yet) */
    int over;                /* checks in a row that found it waiting CONTEND_SHARE of the time */
    unsigned stall_us;       /* tp_set_stall */
} tp_tstats;

/* Where a thread goes back to when the pass it ran parks or ends (tp_pass). */
typedef struct tp_host {
    ucontext_t ctx;
    void *tsan;              /* the thread's own fiber, for TSan */
    const void *stack;       /* its stack, for ASan (learnt when it switched to the pass) */
    size_t stack_size;
} tp_host;

enum { PASS_IDLE, PASS_RUNNING, PASS_PARKED, PASS_DONE };

/* The pass of tp_pass: a context with its own stack that any thread may run. */
typedef struct tp_fiber {
    ucontext_t ctx;
    void *map;               /* mmap'ed: a guard page, then the stack; NULL: tp_pass runs inline */
    void *stack;
    size_t size;
    void *tsan;
    void *asan_fake;         /* ASan's fake stack of the pass while it is switched out */
    void (*body)(void *);
    void *arg;
    int host;                /* the thread running it (or last to run it) */
    int finished;            /* body returned: for its host to act on */
    atomic_int state;        /* PASS_*: who may run it (see "The pass") */
} tp_fiber;

struct tp_pool {
    int n;
    pthread_t *threads;
    worker_arg *args;   /* [n] each worker's argument, owned by the pool: a worker
                         * that freed its own at start-up made an allocator call
                         * whenever it got to run, in the middle of a decode */
    tp_slot *slot;      /* [n] */
    tp_tstats *st;      /* [n] */
    _Atomic int64_t jobs; /* written by the caller alone (relaxed: tp_stats_get may read it meanwhile) */
    uint32_t last_gen;  /* the last job number published, by the caller or by the pass (one publisher at a time) */
    /* the current job: written before its words are published, read after a claim */
    tp_fn fn;
    void *ctx;
    int n_chunks;
    unsigned park_stall_us; /* tp_set_park_stall */
    _Atomic int64_t shared_until; /* waits spin SPIN_SHARED_NS until this time (cx_now_ns) */
    alignas(64) _Atomic uint32_t gen;  /* futex word: the job number, workers wait on it */
    atomic_int sleepers;
    atomic_int quit;
    alignas(64) _Atomic uint32_t done; /* futex word: chunks finished in the job, the caller waits on it */
    atomic_int caller_waiting;
    alignas(64) _Atomic uint32_t events; /* futex word: bumped at every job and at the end of a pass, the
                                          * caller waits on it inside tp_pass */
    atomic_int caller_asleep;
    int in_pass;        /* tp_pass is running: the jobs are published from its fiber */
    tp_host *hosts;     /* [n] */
    tp_fiber fib;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* The futex calls on a 32-bit atomic (lock-free, the size of an int). */
static void futex_wait(_Atomic uint32_t *w, uint32_t v) {
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}
static void futex_wake(_Atomic uint32_t *w, int n) { syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0); }

static inline void stat_add(_Atomic int64_t *c, int64_t v) {
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v, memory_order_relaxed);
}

/* One step of a spin that began at t0 and may last `ns`: a pause, and every
 * 64th step a look at the clock; 1 once the time is up. */
static int spin_step(unsigned i, int64_t t0, int64_t ns) {
    cpu_relax();
    return i % 64 == 0 && cx_now_ns() - t0 > ns;
}

/* Spin until *w != v or quit (returns 1) or `ns` have passed (0). */
static int spin_while(_Atomic uint32_t *w, uint32_t v, const atomic_int *quit, int64_t t0, int64_t ns) {
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(w, memory_order_acquire) != v) return 1;
        if (atomic_load_explicit(quit, memory_order_relaxed)) return 1;
        if (spin_step(i, t0, ns)) return 0;
    }
}

/* Take the next chunk of job g from a share: its index, or -1 when the share
 * is exhausted or belongs to another job. */
static int claim(tp_slot *s, uint32_t g) {
    uint64_t w = atomic_load_explicit(&s->word, memory_order_acquire);
    for (;;) {
        if ((uint32_t)(w >> 32) != g) return -1;
        unsigned next = (unsigned)(w >> 16) & 0x7fff, end = (unsigned)w & 0xffff;
        if (next >= end) return -1;
        if (atomic_compare_exchange_weak_explicit(&s->word, &w, w + WORD_NEXT_ONE, memory_order_acquire,
                                                  memory_order_acquire))
            return (int)next;
    }
}

static uint32_t run_pass(tp_pool *p, int self);

static void stall_here(unsigned usec) {
    struct timespec ts = {(time_t)(usec / 1000000), (long)(usec % 1000000) * 1000};
    while (nanosleep(&ts, &ts) && errno == EINTR) {}
}

/* Thread `self`'s part of job g: its own share, then the others' in turn. */
static void run_chunks(tp_pool *p, uint32_t g, int self) {
    uint64_t own = atomic_load_explicit(&p->slot[self].word, memory_order_acquire);
    if ((uint32_t)(own >> 32) != g || (own & WORD_EXCL)) return; /* a later job, or not this thread's */
    tp_fn fn = NULL;
    void *ctx = NULL;
    int n_chunks = 0, ran = 0, stolen = 0;
    int64_t t0 = 0;
    for (int k = 0; k < p->n; k++) {
        tp_slot *s = &p->slot[(self + k) % p->n];
        for (int c; (c = claim(s, g)) >= 0;) {
            if (!ran) { /* the job is pinned now: it cannot finish without this chunk */
                fn = p->fn;
                ctx = p->ctx;
                n_chunks = p->n_chunks;
                t0 = cx_now_ns();
                if (p->st[self].stall_us) stall_here(p->st[self].stall_us);
            }
            fn(ctx, c, self);
            ran++;
            stolen += k > 0;
        }
    }
    if (!ran) return;
    tp_tstats *st = &p->st[self];
    stat_add(&st->busy_ns, cx_now_ns() - t0);
    stat_add(&st->chunks, ran);
    stat_add(&st->stolen, stolen);
    /* the last use of the job: once done reaches n_chunks the caller may publish the next one */
    uint32_t d = atomic_fetch_add(&p->done, (uint32_t)ran) + (uint32_t)ran;
    if (d != (uint32_t)n_chunks) return;
    if (atomic_load(&p->caller_waiting)) futex_wake(&p->done, 1);
    /* the pass waits for this job, parked: this thread, running now, takes it up */
    int parked = PASS_PARKED;
    if (atomic_load(&p->fib.state) == PASS_PARKED && atomic_compare_exchange_strong(&p->fib.state, &parked, PASS_RUNNING))
        run_pass(p, self);
}

/* Nanoseconds thread `self` has waited on a run queue (schedstat's second
 * field), or -1 where the kernel does not say. */
static int64_t run_delay(tp_tstats *st) {
    pid_t tid = (pid_t)syscall(SYS_gettid);
    if (st->fd < 0 || st->tid != tid) {
        if (st->fd >= 0) close(st->fd);
        st->fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
        st->tid = tid;
        st->at = 0;
        if (st->fd < 0) return -1;
    }
    char buf[96], *at, *end;
    ssize_t n = pread(st->fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return -1;
    buf[n] = 0;
    strtoull(buf, &at, 10); /* time on a CPU */
    unsigned long long delay = strtoull(at, &end, 10);
    return end > at ? (int64_t)delay : -1;
}

/*
 * How long thread `self` spins before this wait sleeps. Every
 * CONTEND_CHECK_NS it reads how long it has been runnable but waiting for a
 * core (its run-queue delay); a share of CONTEND_SHARE of the time, in
 * CONTEND_WINDOWS checks in a row (a kernel thread's burst on a quiet machine
 * fills one window, a busy neighbour every one), means another thread wants
 * this core, and the whole pool then spins only SPIN_SHARED_NS for
 * CONTEND_HOLD_NS. On a shared core a
 * spinning thread spends the machine's time waiting for a thread that cannot
 * run (the descheduled caller, or the holder of the last chunk); on a quiet
 * machine a sleeping one pays a wake-up (tens of microseconds in a VM) for
 * every gap between a token's jobs. The delay is the signal because it shows
 * in both modes: a thread woken onto a busy machine waits for a core. Without
 * schedstat the pool always waits as on a quiet machine.
 */
static int64_t spin_budget(tp_pool *p, int self, int64_t quiet_ns, int64_t now) {
    tp_tstats *st = &p->st[self];
    if (now - st->at >= CONTEND_CHECK_NS) {
        int64_t d = run_delay(st), prev_at = st->at;
        if (d >= 0) {
            int over = prev_at && (double)(d - st->delay) > CONTEND_SHARE * (double)(now - prev_at);
            st->over = over ? st->over + 1 : 0;
            if (st->over >= CONTEND_WINDOWS)
                atomic_store_explicit(&p->shared_until, now + CONTEND_HOLD_NS, memory_order_relaxed);
            st->delay = d;
        }
        st->at = now; /* also when the kernel does not say: no reads but one every CONTEND_CHECK_NS */
    }
    stat_add(&st->waits, 1);
    if (now >= atomic_load_explicit(&p->shared_until, memory_order_relaxed)) return quiet_ns;
    stat_add(&st->shared_waits, 1);
    return SPIN_SHARED_NS;
}

/* A worker's wait for a job after `seen`: the new job number. */
static uint32_t wait_for_job(tp_pool *p, int self, uint32_t seen) {
    tp_tstats *st = &p->st[self];
    int64_t t0 = cx_now_ns();
    if (!spin_while(&p->gen, seen, &p->quit, t0, spin_budget(p, self, SPIN_QUIET_NS, t0))) {
        while (atomic_load(&p->gen) == seen && !atomic_load(&p->quit)) {
            atomic_fetch_add(&p->sleepers, 1);
            if (atomic_load(&p->gen) == seen && !atomic_load(&p->quit)) {
                futex_wait(&p->gen, seen);
                stat_add(&st->sleeps, 1);
            }
            atomic_fetch_sub(&p->sleepers, 1);
        }
    }
    stat_add(&st->idle_ns, cx_now_ns() - t0);
    return atomic_load_explicit(&p->gen, memory_order_acquire);
}

/* The caller's wait, out of chunks, for the ones other threads still run. */
static void wait_done(tp_pool *p, uint32_t n_chunks) {
    if (atomic_load_explicit(&p->done, memory_order_acquire) == n_chunks) return;
    tp_tstats *st = &p->st[0];
    int64_t t0 = cx_now_ns(), spin_ns = spin_budget(p, 0, SPIN_QUIET_CALLER_NS, t0);
    for (unsigned i = 1; atomic_load_explicit(&p->done, memory_order_acquire) != n_chunks; i++)
        if (spin_step(i, t0, spin_ns)) break;
    for (uint32_t d; (d = atomic_load_explicit(&p->done, memory_order_acquire)) != n_chunks;) {
        atomic_store(&p->caller_waiting, 1);
        if ((d = atomic_load(&p->done)) != n_chunks) {
            futex_wait(&p->done, d);
            stat_add(&st->sleeps, 1);
        }
        atomic_store(&p->caller_waiting, 0);
    }
    stat_add(&st->stall_ns, cx_now_ns() - t0);
}

/*
 * Switching between a thread's own stack and the pass's. switch_to_pass
 * (thread `self` runs the pass) returns when the pass parks or ends on this
 * thread; switch_to_host (the pass gives its thread back) returns when some
 * thread runs the pass again, perhaps another one: f->host says which.
 */
static void pass_arrived(tp_pool *p) {
#ifdef TP_ASAN
    tp_fiber *f = &p->fib;
    tp_host *h = &p->hosts[f->host];
    __sanitizer_finish_switch_fiber(f->asan_fake, &h->stack, &h->stack_size);
#else
    (void)p;
#endif
}

/* Save the running context in `save` and go to `to`; returns when something
 * goes to `save`. getcontext + setcontext rather than swapcontext, which
 * AddressSanitizer intercepts with a warning on stderr; the switches are
 * annotated for it instead. */
static void switch_ctx(ucontext_t *save, const ucontext_t *to) {
    volatile int back = 0;
    getcontext(save);
    if (back) return;
    back = 1;
    setcontext(to);
}

static void switch_to_pass(tp_pool *p, int self) {
    tp_fiber *f = &p->fib;
    tp_host *h = &p->hosts[self];
    f->host = self;
#ifdef TP_TSAN
    h->tsan = __tsan_get_current_fiber();
    __tsan_switch_to_fiber(f->tsan, 0);
#endif
#ifdef TP_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, f->stack, f->size);
#endif
    switch_ctx(&h->ctx, &f->ctx);
#ifdef TP_ASAN
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

static void switch_to_host(tp_pool *p, int final) {
    tp_fiber *f = &p->fib;
    tp_host *h = &p->hosts[f->host];
#ifdef TP_TSAN
    __tsan_switch_to_fiber(h->tsan, 0);
#endif
#ifdef TP_ASAN
    __sanitizer_start_switch_fiber(final ? NULL : &f->asan_fake, h->stack, h->stack_size);
#else
    (void)final;
#endif
    switch_ctx(&f->ctx, &h->ctx);
    pass_arrived(p);
}

/* The pass's first frame (makecontext passes the pool as two halves). */
static void pass_main(unsigned lo, unsigned hi) {
    tp_pool *p = (tp_pool *)(uintptr_t)(((uint64_t)hi << 32) | lo);
    pass_arrived(p);
    p->fib.body(p->fib.arg);
    p->fib.finished = 1;
    switch_to_host(p, 1);
    assert(0 && "an ended pass is never run again");
}

/* A new event for the caller waiting inside tp_pass (a job, or the end). */
static void caller_event(tp_pool *p) {
    atomic_fetch_add(&p->events, 1);
    if (atomic_load(&p->caller_asleep)) futex_wake(&p->events, 1);
}

/* Thread `self`, running the pass that just ended: done. The caller is told
 * last, after which nothing here touches the pass: tp_pass may return and
 * the next one begin. */
static void end_pass(tp_pool *p, int self) {
    p->in_pass = 0;
    atomic_store(&p->fib.state, PASS_DONE);
    if (self != 0) caller_event(p);
}

/* Thread `self` runs the pass (state PASS_RUNNING, taken by this thread)
 * until it parks on a job other threads still run, or ends. Returns the job
 * it parked on. A pass that parks after its job finished (the last chunk's
 * thread found it still running) is taken up again here. */
static uint32_t run_pass(tp_pool *p, int self) {
    tp_fiber *f = &p->fib;
    for (;;) {
        switch_to_pass(p, self);
        if (f->finished) {
            end_pass(p, self);
            return 0;
        }
        uint32_t g = p->last_gen, n = (uint32_t)p->n_chunks; /* read while it is still ours */
        atomic_store(&f->state, PASS_PARKED);
        if (atomic_load(&p->done) != n) return g;
        int parked = PASS_PARKED;
        if (!atomic_compare_exchange_strong(&f->state, &parked, PASS_RUNNING)) return g; /* another thread took it */
    }
}

/* The pass's wait, out of chunks, for the ones other threads still run: a
 * spin as wait_done's, then the pass parks and its thread goes back to its
 * loop; the thread that finishes the job's last chunk runs the pass on. */
static void pass_wait(tp_pool *p, uint32_t n_chunks) {
    if (atomic_load_explicit(&p->done, memory_order_acquire) == n_chunks) return;
    tp_fiber *f = &p->fib;
    int self = f->host;
    tp_tstats *st = &p->st[self];
    int64_t t0 = cx_now_ns(), spin_ns = spin_budget(p, self, SPIN_QUIET_CALLER_NS, t0);
    for (unsigned i = 1; atomic_load_explicit(&p->done, memory_order_acquire) != n_chunks; i++)
        if (spin_step(i, t0, spin_ns)) {
            stat_add(&st->stall_ns, cx_now_ns() - t0);
            stat_add(&st->parks, 1);
            switch_to_host(p, 0);
            if (f->host != self) stat_add(&p->st[f->host].moves, 1);
            assert(atomic_load(&p->done) == n_chunks && "a pass is run on only once its job has finished");
            return;
        }
    stat_add(&st->stall_ns, cx_now_ns() - t0);
}

/* The caller's wait inside tp_pass, off the pass: until a job after `seen`
 * is published or the pass has ended. An event count: the word is read
 * before the conditions, so an event between the two makes FUTEX_WAIT
 * return at once. */
static int caller_news(tp_pool *p, uint32_t seen) {
    return atomic_load_explicit(&p->gen, memory_order_acquire) != seen || atomic_load(&p->fib.state) == PASS_DONE;
}

static uint32_t caller_wait(tp_pool *p, uint32_t seen) {
    tp_tstats *st = &p->st[0];
    int64_t t0 = cx_now_ns(), spin_ns = spin_budget(p, 0, SPIN_QUIET_NS, t0);
    for (unsigned i = 1; !caller_news(p, seen); i++)
        if (spin_step(i, t0, spin_ns)) break;
    while (!caller_news(p, seen)) {
        uint32_t e = atomic_load(&p->events);
        atomic_store(&p->caller_asleep, 1);
        if (!caller_news(p, seen)) {
            futex_wait(&p->events, e);
            stat_add(&st->sleeps, 1);
        }
        atomic_store(&p->caller_asleep, 0);
    }
    stat_add(&st->idle_ns, cx_now_ns() - t0);
    return atomic_load_explicit(&p->gen, memory_order_acquire);
}

static void *worker_main(void *arg) {
    worker_arg *w = arg;
    tp_pool *p = w->p;
    int index = w->index;
    assert(index >= 1 && index < p->n);
    uint32_t seen = 0;
    for (;;) {
        seen = wait_for_job(p, index, seen);
        if (atomic_load(&p->quit)) return NULL;
        run_chunks(p, seen, index);
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
    atomic_init(&p->gen, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->quit, 0);
    atomic_init(&p->caller_waiting, 0);
    atomic_init(&p->events, 0);
    atomic_init(&p->caller_asleep, 0);
    atomic_init(&p->fib.state, PASS_IDLE);
    p->threads = calloc((size_t)p->n, sizeof(pthread_t));
    p->args = calloc((size_t)p->n, sizeof(worker_arg));
    p->slot = aligned_alloc(64, sizeof(tp_slot) * (size_t)p->n);
    p->st = aligned_alloc(64, sizeof(tp_tstats) * (size_t)p->n);
    atomic_init(&p->shared_until, 0);
#ifdef CORTEX_TEST_KNOBS
    /* Test knob (make KNOBS=1): CORTEX_POOL_SHARED=1 makes the pool wait as on a shared machine from the start,
     * so what the harness records and says about a contended run can be checked without contention. */
    const char *knob = getenv("CORTEX_POOL_SHARED");
    if (knob && !strcmp(knob, "1")) atomic_init(&p->shared_until, INT64_MAX);
#endif
    for (int i = 0; p->st && i < p->n; i++) {
        memset(&p->st[i], 0, sizeof p->st[i]);
        p->st[i].fd = -1;
    }
    p->hosts = calloc((size_t)p->n, sizeof(tp_host));
    if (p->n > 1) { /* the pass's stack; without it tp_pass runs the pass on the caller, as tp_run alone would */
        long page = sysconf(_SC_PAGESIZE);
        size_t guard = page > 0 ? (size_t)page : 4096;
        void *map = mmap(NULL, guard + PASS_STACK_BYTES, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
        if (map != MAP_FAILED && mprotect(map, guard, PROT_NONE) == 0) {
            p->fib.map = map;
            p->fib.stack = (char *)map + guard;
            p->fib.size = PASS_STACK_BYTES;
#ifdef TP_TSAN
            p->fib.tsan = __tsan_create_fiber(0);
#endif
        } else if (map != MAP_FAILED) {
            munmap(map, guard + PASS_STACK_BYTES);
        }
    }
    if (!p->threads || !p->args || !p->slot || !p->st || !p->hosts) {
        int want = p->n;
        p->n = 1; /* no worker to join */
        tp_free(p);
        return cx_fail(err, CX_ENOMEM, "out of memory for a pool of %d threads", want);
    }
    for (int i = 0; i < p->n; i++) atomic_init(&p->slot[i].word, 0); /* job 0: nothing to claim */

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
    atomic_store(&p->quit, 1);
    atomic_fetch_add(&p->gen, 1); /* a new word: no worker goes back to sleep on the old one */
    futex_wake(&p->gen, INT_MAX);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    for (int i = 0; p->st && i < p->n; i++)
        if (p->st[i].fd >= 0) close(p->st[i].fd);
    if (p->fib.map) {
        munmap(p->fib.map, (size_t)((char *)p->fib.stack - (char *)p->fib.map) + p->fib.size); /* guard + stack */
#ifdef TP_TSAN
        __tsan_destroy_fiber(p->fib.tsan);
#endif
    }
    free(p->hosts);
    free(p->threads);
    free(p->args);
    free(p->slot);
    free(p->st);
    free(p);
}

int tp_size(const tp_pool *p) { return p ? p->n : 1; }

int tp_chunks(const tp_pool *p, int64_t units) {
    if (tp_size(p) == 1) return 1; /* inline: one call does it all, as with no pool */
    int64_t c = (int64_t)tp_size(p) * CHUNKS_PER_THREAD;
    if (c > units) c = units;
    return c < 1 ? 1 : (int)c;
}

void tp_run(tp_pool *p, tp_fn fn, void *ctx, int n_chunks, int max_threads) {
    assert(fn && n_chunks >= 0 && n_chunks <= TP_MAX_CHUNKS && "a chunk index fits the claim word");
    int n = tp_size(p);
    if (max_threads <= 0 || max_threads > n) max_threads = n;
    if (max_threads == 1 || n_chunks <= 1) {
        for (int c = 0; c < n_chunks; c++) fn(ctx, c, 0);
        return;
    }
    /* one job at a time: the last one has finished on every thread (wait_done) */
    assert(atomic_load_explicit(&p->done, memory_order_relaxed) == (uint32_t)p->n_chunks || !p->last_gen);
    uint32_t g = ++p->last_gen;
    if (!g) g = p->last_gen = 1; /* 0 is the words' initial job: never a real one */
    p->fn = fn;
    p->ctx = ctx;
    p->n_chunks = n_chunks;
    stat_add(&p->jobs, 1);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    for (int i = 0; i < n; i++) {
        uint64_t w = (uint64_t)g << 32;
        if (i < max_threads) {
            uint64_t s = (uint64_t)n_chunks * (uint64_t)i / (uint64_t)max_threads;
            uint64_t e = (uint64_t)n_chunks * (uint64_t)(i + 1) / (uint64_t)max_threads;
            w |= s << 16 | e;
        } else {
            w |= WORD_EXCL;
        }
        atomic_store_explicit(&p->slot[i].word, w, memory_order_release);
    }
    atomic_store(&p->gen, g); /* seq_cst: after the words, ordered against `sleepers` */
    if (atomic_load(&p->sleepers) > 0) futex_wake(&p->gen, INT_MAX);
    if (!p->in_pass) {
        run_chunks(p, g, 0);
        wait_done(p, (uint32_t)n_chunks);
        return;
    }
    if (p->fib.host != 0) caller_event(p); /* the caller, off the pass, helps too */
    run_chunks(p, g, p->fib.host);
    pass_wait(p, (uint32_t)n_chunks);
}

/* tp_set_park_stall: the caller, off a parked pass, does nothing until
 * another thread has taken the pass up (or park_stall_us have passed). */
static void park_stall(tp_pool *p) {
    int64_t until = cx_now_ns() + (int64_t)p->park_stall_us * 1000;
    while (atomic_load(&p->fib.state) == PASS_PARKED && cx_now_ns() < until) stall_here(100);
}

/* See threadpool.h and "The pass". */
void tp_pass(tp_pool *p, void (*body)(void *), void *arg) {
    /* on the caller as tp_run alone would be, unless the cores are shared (spin_budget): on a quiet machine no
     * thread is descheduled for long, and the pass has nothing to gain from moving */
    if (tp_size(p) == 1 || !p->fib.map ||
        (!p->park_stall_us && cx_now_ns() >= atomic_load_explicit(&p->shared_until, memory_order_relaxed))) {
        body(arg);
        return;
    }
    assert(!p->in_pass && atomic_load(&p->fib.state) == PASS_IDLE && "one pass at a time, not nested");
    tp_fiber *f = &p->fib;
    f->body = body;
    f->arg = arg;
    f->finished = 0;
    f->asan_fake = NULL;
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = f->stack;
    f->ctx.uc_stack.ss_size = f->size;
    f->ctx.uc_link = NULL;
    uint64_t self = (uint64_t)(uintptr_t)p;
    makecontext(&f->ctx, (void (*)(void))pass_main, 2, (unsigned)self, (unsigned)(self >> 32));
    p->in_pass = 1;
    atomic_store(&f->state, PASS_RUNNING);
    uint32_t seen = run_pass(p, 0);
    while (atomic_load(&f->state) != PASS_DONE) {
        if (p->park_stall_us) park_stall(p);
        uint32_t g = caller_wait(p, seen);
        if (atomic_load(&f->state) == PASS_DONE) break;
        run_chunks(p, g, 0);
        seen = g;
    }
    atomic_store(&f->state, PASS_IDLE);
}

void tp_stats_get(const tp_pool *p, cx_pool_stats *out) {
    memset(out, 0, sizeof *out);
    out->n_threads = tp_size(p);
    if (!p) return;
    out->jobs = atomic_load_explicit(&p->jobs, memory_order_relaxed);
    for (int i = 0; i < p->n; i++) {
        const tp_tstats *s = &p->st[i];
        out->chunks += atomic_load_explicit(&s->chunks, memory_order_relaxed);
        out->stolen += atomic_load_explicit(&s->stolen, memory_order_relaxed);
        out->busy_ns += atomic_load_explicit(&s->busy_ns, memory_order_relaxed);
        out->idle_ns += atomic_load_explicit(&s->idle_ns, memory_order_relaxed);
        out->stall_ns += atomic_load_explicit(&s->stall_ns, memory_order_relaxed);
        out->waits += atomic_load_explicit(&s->waits, memory_order_relaxed);
        out->sleeps += atomic_load_explicit(&s->sleeps, memory_order_relaxed);
        out->shared_waits += atomic_load_explicit(&s->shared_waits, memory_order_relaxed);
        out->pass_parks += atomic_load_explicit(&s->parks, memory_order_relaxed);
        out->pass_moves += atomic_load_explicit(&s->moves, memory_order_relaxed);
        double busy = (double)atomic_load_explicit(&s->busy_ns, memory_order_relaxed);
        double idle = (double)atomic_load_explicit(&s->idle_ns, memory_order_relaxed);
        if (i > 0 && busy + idle > 0 && idle / (busy + idle) > out->worker_wait_max)
            out->worker_wait_max = idle / (busy + idle);
    }
}

void tp_stats_reset(tp_pool *p) {
    if (!p) return;
    atomic_store_explicit(&p->jobs, 0, memory_order_relaxed);
    for (int i = 0; i < p->n; i++) {
        tp_tstats *s = &p->st[i];
        _Atomic int64_t *c[] = {&s->chunks, &s->stolen, &s->busy_ns, &s->idle_ns, &s->stall_ns, &s->waits, &s->sleeps,
                                &s->shared_waits, &s->parks, &s->moves};
        for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) atomic_store_explicit(c[k], 0, memory_order_relaxed);
    }
}

void tp_set_stall(tp_pool *p, int thread, unsigned usec) {
    if (!p) return;
    if (thread >= 0 && thread < p->n) p->st[thread].stall_us = usec;
}

void tp_set_park_stall(tp_pool *p, unsigned usec) {
    if (p) p->park_stall_us = usec;
}
