/*
 * hw.c - the measurements of `cortex-bench hw` (see hw.h): a team of pinned
 * threads, each timing its own slice of a large buffer (memory) or running
 * independent multiply-add chains (arithmetic), between two barriers.
 */
#include "hw.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "env.h"
#include "hw_kernels.h"
#include "stats.h"
#include "hx_err.h"

#if defined(__x86_64__) || defined(__i386__)
#define HW_X86 1
#endif

/* Longest an arithmetic pass should take, and the most threads a team has. */
#define HW_PASS_SECONDS 0.05
#define HW_MAX_THREADS 1024

/* Seconds on the monotonic clock. */
static double hw_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 1 if the AVX-512 FMA (vnni = 0) or VNNI (vnni = 1) peak kernel may run here. */
static int hw_have_avx512(int vnni) {
#ifdef HW_X86
    return __builtin_cpu_supports("avx512f") && (!vnni || __builtin_cpu_supports("avx512vnni"));
#else
    (void)vnni;
    return 0;
#endif
}

/* 1 if the AVX2 kernels may run here: the CPU (and OS) support AVX2 and FMA. */
static int hw_have_avx2(void) {
#ifdef HW_X86
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

/* The CPUs this process may run on, in order; count (at least 1: CPU 0). */
static int hw_allowed_cpus(int *cpus, int cap) {
    cpu_set_t set;
    int n = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE && n < cap; c++)
            if (CPU_ISSET(c, &set)) cpus[n++] = c;
    if (!n) cpus[n++] = 0;
    return n;
}

/* Size of the highest-level cache cpu0 reports in sysfs (e.g. "32768K"); 0 if unknown. */
static uint64_t hw_llc_bytes(void) {
    uint64_t best = 0;
    int best_level = 0;
    for (int i = 0; i < 16; i++) {
        char path[96], buf[32];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f) break;
        int level = fgets(buf, sizeof buf, f) ? atoi(buf) : 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!(f = fopen(path, "r"))) continue;
        char *end = NULL;
        uint64_t v = fgets(buf, sizeof buf, f) ? strtoull(buf, &end, 10) : 0;
        fclose(f);
        if (end && (*end == 'K' || *end == 'k')) v <<= 10;
        else if (end && (*end == 'M' || *end == 'm')) v <<= 20;
        if (level > best_level || (level == best_level && v > best)) best_level = level, best = v;
    }
    return best;
}

/* ---------------------------------------------------------------- the team */

/* One timed job: fn(ctx, tid, n) on every thread of the team, `reps` times. */
typedef struct hw_team {
    int n;
    const int *cpus;
    void (*fn)(void *ctx, int tid, int n);
    void *ctx;
    int reps;
    double *secs;           /* per pass: first barrier released -> last thread done */
    pthread_barrier_t bar;
    pthread_mutex_t mu;     /* the start gate: members wait until every one exists */
    pthread_cond_t cv;
    int gate;               /* 0 closed, 1 go, -1 abort (a thread could not be created) */
} hw_team;

typedef struct hw_member {
    hw_team *team;
    int tid;
} hw_member;

/* A team member: pin to its CPU, wait at the gate, then per pass wait for
 * all, work, wait for all; thread 0 times the pass between the barriers. */
static void *hw_member_main(void *arg) {
    hw_member *m = arg;
    hw_team *t = m->team;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(t->cpus[m->tid], &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* best effort: a refusal only costs accuracy */
    pthread_mutex_lock(&t->mu);
    while (!t->gate) pthread_cond_wait(&t->cv, &t->mu);
    int go = t->gate > 0;
    pthread_mutex_unlock(&t->mu);
    for (int r = 0; go && r < t->reps; r++) {
        pthread_barrier_wait(&t->bar);
        double t0 = hw_now();
        t->fn(t->ctx, m->tid, t->n);
        pthread_barrier_wait(&t->bar);
        if (m->tid == 0 && t->secs) t->secs[r] = hw_now() - t0;
    }
    return NULL;
}

/* Run fn on n pinned threads, reps passes, pass times into secs (may be NULL). */
static int hw_team_run(int n, const int *cpus, void (*fn)(void *, int, int), void *ctx, int reps, double *secs,
                       char *err, size_t errlen) {
    static pthread_t th[HW_MAX_THREADS];
    static hw_member mem[HW_MAX_THREADS];
    hw_team t;
    memset(&t, 0, sizeof t);
    t.n = n;
    t.cpus = cpus;
    t.fn = fn;
    t.ctx = ctx;
    t.reps = reps;
    t.secs = secs;
    if (pthread_barrier_init(&t.bar, NULL, (unsigned)n)) return hx_fail(err, errlen, "cannot create a barrier");
    pthread_mutex_init(&t.mu, NULL);
    pthread_cond_init(&t.cv, NULL);
    int started = 0, e = 0;
    for (; started < n; started++) {
        mem[started].team = &t;
        mem[started].tid = started;
        if ((e = pthread_create(&th[started], NULL, hw_member_main, &mem[started])) != 0) break;
    }
    pthread_mutex_lock(&t.mu);
    t.gate = started == n ? 1 : -1;
    pthread_cond_broadcast(&t.cv);
    pthread_mutex_unlock(&t.mu);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    pthread_cond_destroy(&t.cv);
    pthread_mutex_destroy(&t.mu);
    pthread_barrier_destroy(&t.bar);
    if (started < n) return hx_fail(err, errlen, "cannot start thread %d of %d: %s", started + 1, n, strerror(e));
    return 0;
}

/* ---------------------------------------------------------------- memory */

enum { HW_TOUCH, HW_READ, HW_COPY, HW_TRIAD };

/* The buffer and which memory kernel the team runs over it. */
typedef struct hw_mem {
    uint64_t *buf;
    size_t words;          /* multiple of HWK_BLOCK_U64 */
    int kind, avx2;
    volatile uint64_t sink[HW_MAX_THREADS];
} hw_mem;

/* [lo, hi) of thread tid's share of `words` (whole blocks). */
static void hw_slice(size_t words, int tid, int n, size_t *lo, size_t *hi) {
    size_t blocks = words / HWK_BLOCK_U64;
    *lo = blocks * (size_t)tid / (size_t)n * HWK_BLOCK_U64;
    *hi = blocks * (size_t)(tid + 1) / (size_t)n * HWK_BLOCK_U64;
}

/* Words in one part when the buffer is split in `parts` (whole blocks). */
static size_t hw_part(size_t words, int parts) {
    return words / (size_t)parts / HWK_BLOCK_U64 * HWK_BLOCK_U64;
}

/* One memory pass over this thread's slice. Touch writes 1.0 (as doubles:
 * the triad then works on normal numbers); copy moves the first half to the
 * second; triad computes third 0 = third 1 + 3 * third 2. */
static void hw_mem_job(void *ctx, int tid, int n) {
    hw_mem *m = ctx;
    size_t lo, hi;
    if (m->kind == HW_TOUCH || m->kind == HW_READ) {
        hw_slice(m->words, tid, n, &lo, &hi);
        if (m->kind == HW_TOUCH) {
            for (size_t i = lo; i < hi; i++) m->buf[i] = 0x3ff0000000000000ull;
        } else {
            m->sink[tid] = m->avx2 ? hwk_read_avx2(m->buf + lo, hi - lo) : hwk_read_generic(m->buf + lo, hi - lo);
        }
    } else if (m->kind == HW_COPY) {
        size_t half = hw_part(m->words, 2);
        hw_slice(half, tid, n, &lo, &hi);
        if (m->avx2) hwk_copy_avx2(m->buf + half + lo, m->buf + lo, hi - lo);
        else hwk_copy_generic(m->buf + half + lo, m->buf + lo, hi - lo);
    } else {
        size_t third = hw_part(m->words, 3);
        hw_slice(third, tid, n, &lo, &hi);
        double *a = (double *)m->buf, *b = a + third, *c = b + third;
        if (m->avx2) hwk_triad_avx2(a + lo, b + lo, c + lo, 3.0, hi - lo);
        else hwk_triad_generic(a + lo, b + lo, c + lo, 3.0, hi - lo);
    }
}

/* Bytes one pass of a memory kernel moves, STREAM's way: reads + writes,
 * without the write-allocate reads of ordinary stores. */
static double hw_mem_bytes(const hw_mem *m) {
    if (m->kind == HW_COPY) return 2.0 * (double)hw_part(m->words, 2) * 8;
    if (m->kind == HW_TRIAD) return 3.0 * (double)hw_part(m->words, 3) * 8;
    return (double)m->words * 8;
}

/* Best (least time) and median of `reps` passes doing `work` units each,
 * as units per second / 1e9. */
static hw_fig hw_rate(const double *secs, int reps, double work) {
    hw_fig f = {NAN, NAN};
    double *rates = malloc(sizeof(double) * (size_t)reps);
    if (!rates) return f;
    int k = 0;
    for (int r = 0; r < reps; r++)
        if (secs[r] > 0) rates[k++] = work / secs[r] / 1e9;
    stats_summary s;
    if (k && stats_summarize(rates, (size_t)k, &s) == 0) {
        f.best = s.max;
        f.median = s.median;
    }
    free(rates);
    return f;
}

/* Read, copy and triad with 1 thread ([0]) and n threads ([1]). */
static int hw_memory(const hw_opts *o, const int *cpus, int n, hw_result *r, char *err, size_t errlen) {
    static hw_mem m; /* large (the sinks); one measurement at a time */
    memset(&m, 0, sizeof m);
    m.words = (size_t)(o->bytes / 8) / HWK_BLOCK_U64 * HWK_BLOCK_U64;
    m.avx2 = hw_have_avx2();
    size_t align = 2u << 20; /* 2 MiB: transparent huge pages keep TLB misses out of the figure */
    void *p = NULL;
    if (posix_memalign(&p, align, m.words * 8) != 0)
        return hx_fail(err, errlen, "cannot allocate a %.0f MiB buffer", (double)m.words * 8 / (1 << 20));
    m.buf = p;
#ifdef MADV_HUGEPAGE
    madvise(m.buf, m.words * 8, MADV_HUGEPAGE);
#endif
    r->buffer_bytes = (uint64_t)m.words * 8;
    snprintf(r->mem_isa, sizeof r->mem_isa, "%s", m.avx2 ? "avx2" : "generic");
    double *secs = calloc((size_t)o->reps, sizeof(double));
    int rc = secs ? 0 : hx_fail(err, errlen, "out of memory");
    /* Every page touched first, by the thread that will read it, then one
     * untimed read so the first timed pass is not special. */
    m.kind = HW_TOUCH;
    if (!rc) rc = hw_team_run(n, cpus, hw_mem_job, &m, 1, NULL, err, errlen);
    m.kind = HW_READ;
    if (!rc) rc = hw_team_run(n, cpus, hw_mem_job, &m, 1, NULL, err, errlen);
    static const int kinds[3] = {HW_READ, HW_COPY, HW_TRIAD};
    hw_fig *out[3] = {r->read, r->copy, r->triad};
    for (int t = 0; t < 2 && !rc; t++)
        for (int k = 0; k < 3 && !rc; k++) {
            m.kind = kinds[k];
            rc = hw_team_run(t ? n : 1, cpus, hw_mem_job, &m, o->reps, secs, err, errlen);
            if (!rc) out[k][t] = hw_rate(secs, o->reps, hw_mem_bytes(&m));
        }
    free(secs);
    free(m.buf);
    return rc;
}

/* ---------------------------------------------------------------- arithmetic */

enum { HW_FP32_SCALAR, HW_FP32_AVX2, HW_INT8_AVX2, HW_FP32_AVX512, HW_INT8_VNNI };

/* Which arithmetic kernel the team runs, for how long. */
typedef struct hw_alu {
    int kind;
    long iters;
    volatile double sink[HW_MAX_THREADS];
} hw_alu;

/* One arithmetic pass on this thread. */
static void hw_alu_job(void *ctx, int tid, int n) {
    hw_alu *a = ctx;
    (void)n;
    if (a->kind == HW_FP32_SCALAR) a->sink[tid] = hwk_fp32_scalar(a->iters);
    else if (a->kind == HW_FP32_AVX2) a->sink[tid] = hwk_fp32_avx2(a->iters);
#ifdef HW_X86
    else if (a->kind == HW_FP32_AVX512) a->sink[tid] = hwk_fp32_avx512(a->iters);
    else if (a->kind == HW_INT8_VNNI) a->sink[tid] = hwk_int8_vnni(a->iters);
#endif
    else a->sink[tid] = hwk_int8_avx2(a->iters);
}

/* Operations per iteration of a kernel. */
static double hw_alu_ops(int kind) {
    return kind == HW_FP32_SCALAR   ? HWK_FP32_SCALAR_OPS
           : kind == HW_FP32_AVX2   ? HWK_FP32_AVX2_OPS
           : kind == HW_FP32_AVX512 ? HWK_FP32_AVX512_OPS
           : kind == HW_INT8_VNNI   ? HWK_INT8_VNNI_OPS
                                    : HWK_INT8_AVX2_OPS;
}

/* Iterations for a pass of about HW_PASS_SECONDS on one thread. */
static long hw_alu_calibrate(hw_alu *a) {
    a->iters = 1 << 12;
    for (;;) {
        double t0 = hw_now();
        hw_alu_job(a, 0, 1);
        double dt = hw_now() - t0;
        if (dt >= HW_PASS_SECONDS / 5 || a->iters > (1L << 40)) {
            double scaled = (double)a->iters * HW_PASS_SECONDS / (dt > 0 ? dt : 1e-9);
            return scaled < 1 ? 1 : (long)scaled;
        }
        a->iters *= 2;
    }
}

/* One kernel with 1 thread ([0]) and n threads ([1]). */
static int hw_arith(int kind, const hw_opts *o, const int *cpus, int n, hw_fig out[2], char *err, size_t errlen) {
    static hw_alu a;
    memset(&a, 0, sizeof a);
    a.kind = kind;
    a.iters = hw_alu_calibrate(&a);
    double *secs = calloc((size_t)o->reps, sizeof(double));
    if (!secs) return hx_fail(err, errlen, "out of memory");
    int rc = 0;
    for (int t = 0; t < 2 && !rc; t++) {
        int threads = t ? n : 1;
        rc = hw_team_run(threads, cpus, hw_alu_job, &a, o->reps, secs, err, errlen);
        if (!rc) out[t] = hw_rate(secs, o->reps, (double)a.iters * hw_alu_ops(kind) * threads);
    }
    free(secs);
    return rc;
}

/* ---------------------------------------------------------------- together */

/* 1 if the space-separated list `flags` holds `word`. */
static int hw_has_flag(const char *flags, const char *word) {
    size_t wl = strlen(word);
    for (const char *p = flags; (p = strstr(p, word)) != NULL; p += wl)
        if ((p == flags || p[-1] == ' ') && (p[wl] == 0 || p[wl] == ' ')) return 1;
    return 0;
}

void hw_opts_init(hw_opts *o) {
    env_run_state rs; /* the CPUs this process may use, capped by its cgroup's quota (as run's -t) */
    env_run_state_collect(&rs);
    o->bytes = 1ull << 30;
    o->reps = 5;
    o->threads = env_default_threads(&rs);
    if (o->threads > HW_MAX_THREADS) o->threads = HW_MAX_THREADS;
}

int hw_measure(const hw_opts *o, hw_result *r, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    hw_fig none = {NAN, NAN};
    for (int t = 0; t < 2; t++) r->fp32_avx2[t] = r->int8_avx2[t] = r->fp32_avx512[t] = r->int8_vnni[t] = none;
    if (o->threads < 1 || o->threads > HW_MAX_THREADS || o->reps < 1)
        return hx_fail(err, errlen, "threads must be in [1, %d] and passes at least 1", HW_MAX_THREADS);
    r->threads = o->threads;
    r->reps = o->reps;
    r->llc_bytes = hw_llc_bytes();
    static int allowed[HW_MAX_THREADS], cpus[HW_MAX_THREADS];
    int n_allowed = hw_allowed_cpus(allowed, HW_MAX_THREADS);
    size_t k = 0;
    for (int i = 0; i < o->threads; i++) {
        cpus[i] = allowed[i % n_allowed];
        if (i < n_allowed && k < sizeof r->cpus)
            k += (size_t)snprintf(r->cpus + k, sizeof r->cpus - k, "%s%d", i ? "," : "", cpus[i]);
    }
    size_t nk = 0;
    if (o->threads > n_allowed)
        nk += (size_t)snprintf(r->notes + nk, sizeof r->notes - nk, "%d threads share %d CPUs; ", o->threads, n_allowed);
    if (r->llc_bytes && o->bytes < 4 * r->llc_bytes && nk < sizeof r->notes)
        nk += (size_t)snprintf(r->notes + nk, sizeof r->notes - nk,
                               "buffer (%.0f MiB) is under 4x the last-level cache (%.0f MiB): bandwidth includes cache hits; ",
                               (double)o->bytes / (1 << 20), (double)r->llc_bytes / (1 << 20));
    if (!hw_have_avx2() && nk < sizeof r->notes)
        nk += (size_t)snprintf(r->notes + nk, sizeof r->notes - nk, "no AVX2+FMA: AVX2 figures not measured; ");
    if (nk >= 2 && nk < sizeof r->notes) r->notes[nk - 2] = 0; /* drop the last "; " */

    env_info env;
    env_collect(&env);
    int avx512 = hw_has_flag(env.isa_flags, "avx512f");
    int vnni = hw_has_flag(env.isa_flags, "avx512_vnni") || hw_has_flag(env.isa_flags, "avx_vnni");
    snprintf(r->avx512, sizeof r->avx512, "%s", avx512 ? "available" : "not available on this CPU");
    snprintf(r->vnni, sizeof r->vnni, "%s", vnni ? "available" : "not available on this CPU");

    if (hw_memory(o, cpus, o->threads, r, err, errlen)) return -1;
    if (hw_arith(HW_FP32_SCALAR, o, cpus, o->threads, r->fp32_scalar, err, errlen)) return -1;
    if (hw_have_avx2() && (hw_arith(HW_FP32_AVX2, o, cpus, o->threads, r->fp32_avx2, err, errlen) ||
                           hw_arith(HW_INT8_AVX2, o, cpus, o->threads, r->int8_avx2, err, errlen)))
        return -1;
    /* the AVX-512 peaks, also written into the availability text (the stored row keeps them there) */
    if (hw_have_avx512(0)) {
        if (hw_arith(HW_FP32_AVX512, o, cpus, o->threads, r->fp32_avx512, err, errlen)) return -1;
        snprintf(r->avx512, sizeof r->avx512, "measured: FMA %.1f GFLOP/s (1 thread), %.1f (%d threads)",
                 r->fp32_avx512[0].best, r->fp32_avx512[1].best, o->threads);
    }
    if (hw_have_avx512(1)) {
        if (hw_arith(HW_INT8_VNNI, o, cpus, o->threads, r->int8_vnni, err, errlen)) return -1;
        snprintf(r->vnni, sizeof r->vnni, "measured: AVX-512 VNNI %.1f GOP/s (1 thread), %.1f (%d threads)",
                 r->int8_vnni[0].best, r->int8_vnni[1].best, o->threads);
    }
    return 0;
}
