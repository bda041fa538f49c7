/*
 * test_counters.c - harness/measure/counters.c and harness/measure/env.c: every counter is
 * either counted (non-negative, monotonic, growing with work) or unsupported
 * with a reason, never a silent 0; inherited counting covers threads created
 * after ctr_open; phase arithmetic; the energy (RAPL) events' sysfs parsing on
 * a fake PMU tree, and their reasons where they cannot be opened; the
 * environment fingerprint; CPU pinning; peak RSS. No timing thresholds: only
 * "grew", and counts compared with counts.
 *
 * Build: cc -std=c11 -D_GNU_SOURCE -Iharness/measure -Iharness/util tests/unit/harness/test_counters.c
 *        harness/measure/counters.c harness/measure/env.c harness/util/sha256.c -lm -pthread
 */
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "counters.h"
#include "env.h"
#include "testing.h"

/* Busy user-mode work the optimizer cannot remove. */
static uint64_t busy(long iters) {
    volatile uint64_t acc = 0;
    for (long i = 0; i < iters; i++) acc += (uint64_t)i * 2654435761u;
    return acc;
}

/* CPU time of the calling thread, ns. */
static double thread_cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* Print what this machine supports (useful in CI logs, and in the report). */
static void print_set(const ctr_set *s) {
    printf("counter read mode: %s\n", ctr_mode(s));
    for (int i = 0; i < ctr_count(s); i++)
        printf("  %-17s %-5s %-11s %s\n", ctr_name(s, i), ctr_unit(s, i),
               ctr_supported(s, i) ? ctr_scope(s, i) : "unsupported", ctr_reason(s, i));
}

/* Every event: supported and counting monotonically, or missing with a reason. */
static void test_events(void) {
    char err[256] = "";
    ctr_set *s = ctr_open(err, sizeof err);
    CHECK(s != NULL, "ctr_open: %s", err);
    if (!s) return;
    print_set(s);
    static const char *names[] = {"cycles",       "instructions", "cache-references", "cache-misses",
                                  "branch-misses", "llc-load-misses", "task-clock",     "page-faults",
                                  "context-switches", "energy-pkg",  "energy-ram"};
    const int n_names = (int)(sizeof names / sizeof names[0]);
    CHECK(ctr_count(s) == n_names && n_names <= CTR_MAX_EVENTS, "count %d", ctr_count(s));
    for (int i = 0; i < n_names && i < ctr_count(s); i++) {
        CHECK(strcmp(ctr_name(s, i), names[i]) == 0, "event %d is %s, want %s", i, ctr_name(s, i), names[i]);
        CHECK(ctr_find(s, names[i]) == i, "ctr_find(%s)", names[i]);
        const char *want_unit = strcmp(names[i], "task-clock") == 0 ? "ns"
                                : strncmp(names[i], "energy-", 7) == 0 ? "J"
                                                                       : "count";
        CHECK(strcmp(ctr_unit(s, i), want_unit) == 0, "%s unit %s", names[i], ctr_unit(s, i));
    }
    /* Energy here: counted (system-wide), or missing with the sysfs or open reason. */
    struct stat st;
    int have_pmu = stat(CTR_PMU_DIR "/power", &st) == 0;
    for (int i = ctr_find(s, "energy-pkg"); i >= 0 && i < ctr_count(s); i++) {
        if (ctr_supported(s, i)) {
            CHECK(strcmp(ctr_scope(s, i), "system") == 0, "%s scope %s", ctr_name(s, i), ctr_scope(s, i));
        } else if (!have_pmu) {
            CHECK(strcmp(ctr_reason(s, i), "ENOENT: no RAPL 'power' PMU in /sys/bus/event_source/devices (this "
                                           "kernel or VM exposes no energy counters)") == 0,
                  "%s: without a power PMU the reason is '%s'", ctr_name(s, i), ctr_reason(s, i));
        }
    }
    CHECK(ctr_find(s, "nope") == -1, "ctr_find of an unknown name");
    const char *mode = ctr_mode(s);
    CHECK(!strcmp(mode, "group") || !strcmp(mode, "per-event") || !strcmp(mode, "none") || !strcmp(mode, "papi"),
          "mode %s", mode);
    char sum[1024];
    ctr_summary(s, sum, sizeof sum);
    CHECK(strstr(sum, mode) != NULL, "summary '%s' names the mode", sum);

    int tc = ctr_find(s, "task-clock"), pf = ctr_find(s, "page-faults");
    CHECK(ctr_supported(s, tc), "task-clock must be supported here: %s", ctr_reason(s, tc));
    CHECK(ctr_supported(s, pf), "page-faults must be supported here: %s", ctr_reason(s, pf));

    ctr_snap a, b, c;
    ctr_snapshot(s, &a);
    busy(10000000);
    ctr_snapshot(s, &b);
    busy(1000000);
    ctr_snapshot(s, &c);
    CHECK(a.n == ctr_count(s) && b.n == a.n && c.n == a.n, "snapshot sizes %d %d %d", a.n, b.n, c.n);
    for (int i = 0; i < ctr_count(s); i++) {
        const char *n = ctr_name(s, i);
        if (ctr_supported(s, i)) {
            CHECK(ctr_reason(s, i)[0] == 0, "%s supported but has a reason", n);
            CHECK(a.valid[i] && b.valid[i] && c.valid[i], "%s supported but unreadable", n);
            CHECK(a.raw[i] <= b.raw[i] && b.raw[i] <= c.raw[i], "%s not monotonic: %llu %llu %llu", n,
                  (unsigned long long)a.raw[i], (unsigned long long)b.raw[i], (unsigned long long)c.raw[i]);
            CHECK(a.value[i] >= 0 && b.value[i] >= 0 && c.value[i] >= 0, "%s negative", n);
            CHECK(a.enabled[i] <= b.enabled[i] && a.running[i] <= b.running[i], "%s times go backwards", n);
            if (b.running[i] == b.enabled[i] && c.running[i] == c.enabled[i])
                CHECK(b.value[i] <= c.value[i], "%s scaled value not monotonic", n);
            if (strncmp(n, "energy-", 7) == 0)
                CHECK(b.scale[i] > 0 && b.scale[i] < 1e-3, "%s: %g J per count", n, b.scale[i]);
            else
                CHECK(b.scale[i] == 1, "%s: unit scale %g, want 1", n, b.scale[i]);
        } else {
            const char *r = ctr_reason(s, i);
            CHECK(r[0] != 0, "%s unsupported without a reason", n);
            CHECK(r[0] == 'E' || r[0] == 'Z' || r[0] == 'P', "%s reason '%s' should start with the error name", n, r);
            CHECK(!a.valid[i] && !b.valid[i], "%s unsupported but marked valid (a silent 0)", n);
        }
    }
    /* Work must show: 10^7 iterations cannot leave these unchanged. */
    CHECK(b.raw[tc] > a.raw[tc], "task-clock did not increase over a busy loop: %llu -> %llu",
          (unsigned long long)a.raw[tc], (unsigned long long)b.raw[tc]);
    int cy = ctr_find(s, "cycles"), in = ctr_find(s, "instructions");
    if (ctr_supported(s, cy)) CHECK(b.raw[cy] > a.raw[cy], "cycles supported but did not grow");
    if (ctr_supported(s, in)) CHECK(b.raw[in] >= a.raw[in] + 10000000u, "instructions grew by less than the loop");

    ctr_phase p;
    ctr_phase_init(&p, "decode");
    ctr_accumulate(&p, &a, &b);
    CHECK(strcmp(p.name, "decode") == 0, "phase name %s", p.name);
    for (int i = 0; i < ctr_count(s); i++) {
        if (ctr_supported(s, i)) {
            CHECK(ctr_phase_valid(&p, i), "%s: phase invalid (lost %u)", ctr_name(s, i), p.lost[i]);
            if (b.running[i] - a.running[i] == b.enabled[i] - a.enabled[i])
                CHECK_NEAR(p.value[i], (double)(b.raw[i] - a.raw[i]), 0.5, ctr_name(s, i));
        } else {
            CHECK(!ctr_phase_valid(&p, i), "%s unsupported yet its phase value is valid", ctr_name(s, i));
        }
    }
    ctr_close(s);
}

/* Shared state between the test and its worker thread. */
typedef struct worker {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, release;
    double cpu_ns; /* the worker's own CPU time over its loop */
} worker;

/* Worker: spin 10^7 iterations, report, then stay alive until released. */
static void *worker_main(void *arg) {
    worker *w = arg;
    double t0 = thread_cpu_ns();
    busy(10000000);
    double t1 = thread_cpu_ns();
    pthread_mutex_lock(&w->mu);
    w->cpu_ns = t1 - t0;
    w->done = 1;
    pthread_cond_broadcast(&w->cv);
    while (!w->release) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/*
 * A thread created after ctr_open, doing all the work while the caller sleeps,
 * must show up in the counts (inherit=1), both while it is alive (the engine's
 * pool threads live across snapshots) and after it exits.
 */
static void check_inherit(ctr_set *s, const char *label) {
    int tc = ctr_find(s, "task-clock"), in = ctr_find(s, "instructions");
    if (!ctr_supported(s, tc)) {
        CHECK(0, "%s: cannot test inheritance, task-clock unsupported: %s", label, ctr_reason(s, tc));
        return;
    }
    worker w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
    ctr_snap a, b, c;
    double m0 = thread_cpu_ns();
    ctr_snapshot(s, &a);
    pthread_t t;
    int rc = pthread_create(&t, NULL, worker_main, &w);
    CHECK(rc == 0, "pthread_create: %s", strerror(rc));
    if (rc) return;
    pthread_mutex_lock(&w.mu);
    while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    ctr_snapshot(s, &b); /* the worker is still alive here */
    double main_ns = thread_cpu_ns() - m0;
    pthread_mutex_lock(&w.mu);
    w.release = 1;
    pthread_cond_broadcast(&w.cv);
    pthread_mutex_unlock(&w.mu);
    pthread_join(t, NULL);
    ctr_snapshot(s, &c);

    double d = (double)(b.raw[tc] - a.raw[tc]);
    printf("%s: task-clock +%.0f ns; worker thread used %.0f ns, this thread %.0f ns\n", label, d, w.cpu_ns, main_ns);
    CHECK(d >= main_ns + 0.5 * w.cpu_ns,
          "%s: task-clock grew %.0f ns but the new thread alone used %.0f ns (this one %.0f): threads created "
          "after ctr_open are not counted; inherit=1 is not honoured by this kernel",
          label, d, w.cpu_ns, main_ns);
    CHECK(c.raw[tc] >= b.raw[tc], "%s: task-clock dropped when the thread exited", label);
    if (ctr_supported(s, in)) {
        ctr_phase p;
        ctr_phase_init(&p, "t");
        ctr_accumulate(&p, &a, &b);
        printf("%s: instructions +%.0f while only the new thread worked\n", label, p.value[in]);
        CHECK(ctr_phase_valid(&p, in) && p.value[in] >= 1e7,
              "%s: instructions grew by %.0f over a 10^7-iteration loop in a new thread: hardware events "
              "are not inherited in this read mode", label, p.value[in]);
    }
}

/* Inheritance in the mode this kernel gives, then in forced per-event mode. */
static void test_inherit(void) {
    char err[256];
    ctr_set *s = ctr_open(err, sizeof err);
    CHECK(s != NULL, "ctr_open: %s", err);
    if (!s) return;
    char label[64];
    snprintf(label, sizeof label, "inherit (%s)", ctr_mode(s));
    check_inherit(s, label);
    int had_hw = strcmp(ctr_mode(s), "none") != 0;
    ctr_close(s);

#ifndef CORTEX_PAPI
    ctr_test_inject(CTR_INJECT_GROUP_EINVAL); /* a kernel refusing GROUP with inherit */
    s = ctr_open(err, sizeof err);
    ctr_test_inject(CTR_INJECT_NONE);
    CHECK(s != NULL, "ctr_open: %s", err);
    if (!s) return;
    CHECK(strcmp(ctr_mode(s), had_hw ? "per-event" : "none") == 0, "forced fallback gave mode %s", ctr_mode(s));
    check_inherit(s, "inherit (per-event, forced)");
    ctr_close(s);
#else
    (void)had_hw;
#endif
}

/* perf_event_open refused outright: every event missing with the reason. */
static void test_refused(void) {
    static const struct {
        int mode;
        const char *prefix, *hint;
    } cases[] = {{CTR_INJECT_ENOSYS, "ENOSYS: ", "not available"}, {CTR_INJECT_EACCES, "EACCES: ", "perf_event_paranoid"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char err[256];
        ctr_test_inject(cases[k].mode);
        ctr_set *s = ctr_open(err, sizeof err);
        ctr_test_inject(CTR_INJECT_NONE);
        CHECK(s != NULL, "ctr_open must not fail when perf is refused: %s", err);
        if (!s) continue;
        int sw_only = 0;
#ifdef CORTEX_PAPI
        sw_only = 1; /* PAPI opens hardware events itself */
#endif
        for (int i = 0; i < ctr_count(s); i++) {
            if (sw_only && i < 6) continue; /* hardware events: PAPI */
            CHECK(!ctr_supported(s, i), "%s supported although perf is refused", ctr_name(s, i));
            ctr_rapl_event re;
            char why[CTR_REASON_LEN];
            if (strncmp(ctr_name(s, i), "energy-", 7) == 0 &&
                ctr_rapl_probe(CTR_PMU_DIR, ctr_name(s, i), &re, why, sizeof why) != 0) {
                /* never opened: sysfs has no such event here (a VM), and that is the reason */
                CHECK(strcmp(ctr_reason(s, i), why) == 0, "%s reason '%s', sysfs says '%s'", ctr_name(s, i),
                      ctr_reason(s, i), why);
                continue;
            }
            CHECK(strncmp(ctr_reason(s, i), cases[k].prefix, strlen(cases[k].prefix)) == 0 &&
                      strstr(ctr_reason(s, i), cases[k].hint) != NULL,
                  "%s reason '%s'", ctr_name(s, i), ctr_reason(s, i));
        }
        if (!sw_only) CHECK(strcmp(ctr_mode(s), "none") == 0, "mode %s", ctr_mode(s));
        ctr_snap a, b;
        ctr_snapshot(s, &a);
        busy(1000);
        ctr_snapshot(s, &b);
        ctr_phase p;
        ctr_phase_init(&p, "total");
        ctr_accumulate(&p, &a, &b);
        for (int i = 0; i < ctr_count(s); i++)
            if (!ctr_supported(s, i)) CHECK(!b.valid[i] && !ctr_phase_valid(&p, i), "%s valid", ctr_name(s, i));
        ctr_close(s);
    }
    /* A NULL set (counters off) reads as nothing. */
    ctr_snap z;
    ctr_snapshot(NULL, &z);
    CHECK(z.n == 0 && ctr_count(NULL) == 0 && strcmp(ctr_mode(NULL), "none") == 0, "NULL set");
    ctr_close(NULL);
}

/* Phase arithmetic on hand-made snapshots. */
static void test_phase_math(void) {
    ctr_snap s0, s1, s2;
    memset(&s0, 0, sizeof s0);
    s0.n = 5;
    s1 = s0;
    s2 = s0;
    /* event 0: never multiplexed; event 1: on a counter half the time; event
     * 2: no time information (PAPI-like); event 3: unreadable at s1; event 4:
     * energy, 2^-32 J per count (RAPL's usual scale), summed over 2 packages. */
    for (int i = 0; i < 5; i++) s0.valid[i] = s1.valid[i] = s2.valid[i] = 1;
    s0.scale[4] = s1.scale[4] = s2.scale[4] = 2.3283064365386962890625e-10;
    s0.raw[4] = 1000, s0.enabled[4] = 2000, s0.running[4] = 2000;
    s1.raw[4] = 1000 + 3 * 4294967296ull, s1.enabled[4] = 4000, s1.running[4] = 4000;
    s2.raw[4] = 1000 + 5 * 4294967296ull, s2.enabled[4] = 6000, s2.running[4] = 6000;
    s1.valid[3] = 0;
    s0.raw[0] = 100, s0.enabled[0] = 1000, s0.running[0] = 1000;
    s1.raw[0] = 250, s1.enabled[0] = 2000, s1.running[0] = 2000;
    s2.raw[0] = 300, s2.enabled[0] = 2500, s2.running[0] = 2500;
    s0.raw[1] = 0, s0.enabled[1] = 0, s0.running[1] = 0;
    s1.raw[1] = 100, s1.enabled[1] = 1000, s1.running[1] = 500;
    s2.raw[1] = 100, s2.enabled[1] = 2000, s2.running[1] = 500; /* enabled, never on a counter: lost */
    s0.raw[2] = 5, s1.raw[2] = 9, s2.raw[2] = 20;
    s0.raw[3] = 1, s2.raw[3] = 7;

    ctr_phase pre, dec, tot;
    ctr_phase_init(&pre, "prefill");
    ctr_phase_init(&dec, "decode");
    ctr_phase_init(&tot, "total-with-a-long-name");
    CHECK(strlen(tot.name) == 15, "phase name truncated to 15: %s", tot.name);
    ctr_accumulate(&pre, &s0, &s1);
    ctr_accumulate(&dec, &s1, &s2);
    CHECK(pre.n == 5 && dec.n == 5, "n %d %d", pre.n, dec.n);
    CHECK_NEAR(pre.value[4], 3.0, 1e-12, "energy: counts times the scale, in J");
    CHECK_NEAR(dec.value[4], 2.0, 1e-12, "energy, second interval");
    CHECK_NEAR(pre.value[0], 150, 1e-9, "plain delta");
    CHECK_NEAR(pre.value[1], 200, 1e-9, "delta scaled by enabled/running");
    CHECK_NEAR(pre.running_ns[1], 500, 1e-9, "running time summed");
    CHECK_NEAR(pre.enabled_ns[1], 1000, 1e-9, "enabled time summed");
    CHECK_NEAR(pre.value[2], 4, 1e-9, "delta without time information");
    CHECK(pre.lost[3] == 1 && !ctr_phase_valid(&pre, 3), "unreadable snapshot is lost, not 0");
    CHECK(ctr_phase_valid(&pre, 0) && ctr_phase_valid(&pre, 1) && ctr_phase_valid(&pre, 2), "prefill valid");
    CHECK_NEAR(dec.value[0], 50, 1e-9, "second interval");
    CHECK(dec.lost[1] == 1 && !ctr_phase_valid(&dec, 1), "never-scheduled interval is lost");
    CHECK_NEAR(dec.value[2], 11, 1e-9, "second interval, no times");

    ctr_accumulate(&dec, &s1, &s2); /* a second decode interval adds up */
    CHECK_NEAR(dec.value[0], 100, 1e-9, "two intervals");
    CHECK(dec.intervals[0] == 2, "intervals %u", dec.intervals[0]);

    ctr_phase_add(&tot, &pre);
    ctr_phase_add(&tot, &dec);
    CHECK_NEAR(tot.value[0], 250, 1e-9, "total = prefill + decode");
    CHECK_NEAR(tot.value[2], 4 + 22, 1e-9, "total of event 2");
    CHECK(tot.intervals[0] == 3 && ctr_phase_valid(&tot, 0), "total intervals");
    CHECK(!ctr_phase_valid(&tot, 1) && !ctr_phase_valid(&tot, 3), "a lost interval taints the total");
    CHECK_NEAR(tot.value[4], 3.0 + 4.0, 1e-12, "total energy");
    CHECK(!ctr_phase_valid(&tot, 5) && !ctr_phase_valid(&tot, -1), "out of range");

    /* A counter going backwards (should never happen) is lost, not negative. */
    ctr_phase back;
    ctr_phase_init(&back, "x");
    ctr_accumulate(&back, &s1, &s0);
    CHECK(back.lost[0] == 1 && back.value[0] == 0, "backwards counter");
    /* An empty phase has no value. */
    ctr_phase empty;
    ctr_phase_init(&empty, "decode");
    CHECK(!ctr_phase_valid(&empty, 0), "empty phase");
}

/* ---- Energy: the RAPL `power` PMU on a fake sysfs tree ---- */

static char fake_root[64]; /* a temp dir standing for /sys/bus/event_source/devices */

/* Write fake_root/rel (NULL text: remove it). */
static void fake_put(const char *rel, const char *text) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", fake_root, rel);
    if (!text) {
        unlink(path);
        return;
    }
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "create %s: %s", path, strerror(errno));
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* A power PMU as a RAPL machine has it, with a type no kernel has, so opening it fails. */
static void fake_pmu(void) {
    char path[256];
    static const char *dirs[] = {"power", "power/events", "power/format"};
    for (size_t k = 0; k < sizeof dirs / sizeof dirs[0]; k++) {
        snprintf(path, sizeof path, "%s/%s", fake_root, dirs[k]);
        CHECK(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", path, strerror(errno));
    }
    fake_put("power/type", "2147483000\n");
    fake_put("power/cpumask", "0\n");
    fake_put("power/format/event", "config:0-7\n");
    fake_put("power/events/energy-pkg", "event=0x02\n");
    fake_put("power/events/energy-pkg.scale", "2.3283064365386962890625e-10\n");
    fake_put("power/events/energy-pkg.unit", "Joules\n");
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* Probe energy-pkg in the fake tree: it must fail with a reason holding both
 * `prefix` (at its start) and `file` (the file named). */
static void probe_fails(const char *what, const char *prefix, const char *file) {
    ctr_rapl_event re;
    char why[CTR_REASON_LEN];
    int rc = ctr_rapl_probe(fake_root, "energy-pkg", &re, why, sizeof why);
    char want[256];
    snprintf(want, sizeof want, "%s/power/%s", fake_root, file);
    CHECK(rc == -1 && strncmp(why, prefix, strlen(prefix)) == 0 && strstr(why, want) != NULL,
          "%s: rc %d, reason '%s' (want %s... naming %s)", what, rc, why, prefix, want);
}

/* The events are missing in set s with a reason (never counted, never a valid 0). */
static void energy_missing(ctr_set *s, const char *ram_must, const char *pkg_must) {
    int ip = ctr_find(s, "energy-pkg"), ir = ctr_find(s, "energy-ram");
    CHECK(ip >= 0 && ir == ip + 1, "energy-pkg at %d, energy-ram at %d", ip, ir);
    if (ip < 0 || ir < 0) return;
    CHECK(strcmp(ctr_unit(s, ip), "J") == 0 && strcmp(ctr_unit(s, ir), "J") == 0, "energy unit");
    const char *rp = ctr_reason(s, ip), *rr = ctr_reason(s, ir);
    CHECK(!ctr_supported(s, ip) && rp[0] == 'E' && strstr(rp, pkg_must) != NULL, "energy-pkg: '%s' (want %s)", rp,
          pkg_must);
    CHECK(!ctr_supported(s, ir) && strstr(rr, ram_must) != NULL, "energy-ram: '%s' (want %s)", rr, ram_must);
    ctr_snap a, b;
    ctr_snapshot(s, &a);
    busy(100000);
    ctr_snapshot(s, &b);
    ctr_phase p;
    ctr_phase_init(&p, "total");
    ctr_accumulate(&p, &a, &b);
    CHECK(!a.valid[ip] && !b.valid[ip] && !b.valid[ir] && !ctr_phase_valid(&p, ip) && !ctr_phase_valid(&p, ir),
          "missing energy read as a valid value");
    char sum[2048];
    ctr_summary(s, sum, sizeof sum);
    CHECK(strstr(sum, "energy-pkg: ") != NULL, "summary '%s' lists energy-pkg", sum);
}

/* sysfs parsing (type, config, scale, unit, cpumask), every malformed file
 * named in its reason, the VM case, and opening in a fake tree. */
static void test_energy_sysfs(void) {
    snprintf(fake_root, sizeof fake_root, "/tmp/cortex-rapl-XXXXXX");
    CHECK(mkdtemp(fake_root) != NULL, "mkdtemp: %s", strerror(errno));

    /* No power directory: the VM reason, naming the directory. */
    ctr_rapl_event re;
    char why[CTR_REASON_LEN], want[CTR_REASON_LEN];
    int rc = ctr_rapl_probe(fake_root, "energy-pkg", &re, why, sizeof why);
    snprintf(want, sizeof want, "ENOENT: no RAPL 'power' PMU in %s (this kernel or VM exposes no energy counters)",
             fake_root);
    CHECK(rc == -1 && strcmp(why, want) == 0, "no PMU: rc %d, '%s'", rc, why);
    ctr_set *s = ctr_open_at(fake_root, why, sizeof why);
    CHECK(s != NULL, "ctr_open_at: %s", why);
    if (s) energy_missing(s, "no RAPL 'power' PMU", "this kernel or VM exposes no energy counters");
    ctr_close(s);

    /* A well-formed PMU. */
    fake_pmu();
    rc = ctr_rapl_probe(fake_root, "energy-pkg", &re, why, sizeof why);
    CHECK(rc == 0 && why[0] == 0, "probe: rc %d, '%s'", rc, why);
    CHECK(re.type == 2147483000u, "type %u", re.type);
    CHECK(re.config == 2, "config %#llx", (unsigned long long)re.config);
    CHECK(re.scale == 2.3283064365386962890625e-10, "scale %.17g", re.scale);
    CHECK(strcmp(re.unit, "Joules") == 0, "unit '%s'", re.unit);
    CHECK(re.n_cpu == 1 && re.cpu[0] == 0, "cpus %d", re.n_cpu);
    /* energy-ram is absent: that event alone is missing, saying so. */
    rc = ctr_rapl_probe(fake_root, "energy-ram", &re, why, sizeof why);
    CHECK(rc == -1 && strstr(why, "has no energy-ram event") && strstr(why, "power/events/energy-ram"), "no ram: '%s'",
          why);

    /* One CPU per package in cpumask, summed; config placed by format/. */
    fake_put("power/cpumask", "0,2-3\n");
    fake_put("power/format/event", "config:8-15\n");
    fake_put("power/events/energy-pkg", "event=0x3\n");
    rc = ctr_rapl_probe(fake_root, "energy-pkg", &re, why, sizeof why);
    CHECK(rc == 0 && re.n_cpu == 3 && re.cpu[0] == 0 && re.cpu[1] == 2 && re.cpu[2] == 3, "cpumask 0,2-3: %d '%s'",
          re.n_cpu, why);
    CHECK(re.config == 0x300, "config:8-15 event=0x3 gave %#llx", (unsigned long long)re.config);
    fake_put("power/format/event", NULL); /* no format file: "event" is the config */
    fake_put("power/events/energy-pkg", "event=0x02");
    rc = ctr_rapl_probe(fake_root, "energy-pkg", &re, why, sizeof why);
    CHECK(rc == 0 && re.config == 2, "no format file: rc %d config %#llx '%s'", rc, (unsigned long long)re.config, why);
    fake_pmu();

    /* Malformed contents: missing, with the file named. */
    static const char *bad_scale[] = {"abc", "", "-1", "0", "1e-10x", "nan", "inf", "2.3e-10 5"};
    for (size_t k = 0; k < sizeof bad_scale / sizeof bad_scale[0]; k++) {
        fake_put("power/events/energy-pkg.scale", bad_scale[k]);
        probe_fails(bad_scale[k], "EINVAL: ", "events/energy-pkg.scale");
    }
    fake_put("power/events/energy-pkg.scale", NULL);
    probe_fails("no scale file", "ENOENT: ", "events/energy-pkg.scale");
    fake_pmu();
    fake_put("power/events/energy-pkg.unit", "Watts\n");
    probe_fails("unit Watts", "EINVAL: ", "events/energy-pkg.unit");
    fake_put("power/events/energy-pkg.unit", NULL);
    probe_fails("no unit file", "ENOENT: ", "events/energy-pkg.unit");
    fake_pmu();
    static const char *bad_type[] = {"x", "", "-1", "4294967296", "12 13"};
    for (size_t k = 0; k < sizeof bad_type / sizeof bad_type[0]; k++) {
        fake_put("power/type", bad_type[k]);
        probe_fails(bad_type[k], "EINVAL: ", "type");
    }
    fake_pmu();
    static const char *bad_cfg[] = {"", "event=zz", "event=", "=2", "event=0x02,,"};
    for (size_t k = 0; k < sizeof bad_cfg / sizeof bad_cfg[0]; k++) {
        fake_put("power/events/energy-pkg", bad_cfg[k]);
        probe_fails(bad_cfg[k], "EINVAL: ", "events/energy-pkg");
    }
    fake_put("power/events/energy-pkg", "umask=0x1,event=0x2");
    probe_fails("a term without a format file", "EINVAL: ", "format/umask");
    fake_put("power/events/energy-pkg", "event=0x1ff");
    probe_fails("a value wider than its bits", "EINVAL: ", "format/event");
    fake_put("power/events/energy-pkg", "event=0x2");
    fake_put("power/format/event", "config1:0-7");
    probe_fails("config1", "EINVAL: ", "format/event");
    fake_pmu();
    static const char *bad_cpus[] = {"", "a", "0,", "3-1", "0 1"};
    for (size_t k = 0; k < sizeof bad_cpus / sizeof bad_cpus[0]; k++) {
        fake_put("power/cpumask", bad_cpus[k]);
        probe_fails(bad_cpus[k], "EINVAL: ", "cpumask");
    }
    fake_put("power/cpumask", "0-99");
    probe_fails("100 packages", "E2BIG: ", "cpumask");
    fake_pmu();
    printf("energy: a malformed scale reads: ");
    fake_put("power/events/energy-pkg.scale", "2.3e-10 J");
    ctr_rapl_probe(fake_root, "energy-pkg", &re, why, sizeof why);
    printf("%s\n", why);
    fake_pmu();

    /* Opening the fake PMU: the kernel has no such type (or refuses first):
     * missing with the errno's reason, never a 0. */
    s = ctr_open_at(fake_root, why, sizeof why);
    CHECK(s != NULL, "ctr_open_at: %s", why);
    if (s) {
        energy_missing(s, "has no energy-ram event", "");
        printf("energy: fake PMU opened as: %s\n", ctr_reason(s, ctr_find(s, "energy-pkg")));
    }
    ctr_close(s);
#ifndef CORTEX_PAPI
    /* Refused for want of privilege: the reason names the knob and its value. */
    ctr_test_inject(CTR_INJECT_EACCES);
    s = ctr_open_at(fake_root, why, sizeof why);
    ctr_test_inject(CTR_INJECT_NONE);
    CHECK(s != NULL, "ctr_open_at: %s", why);
    if (s) {
        energy_missing(s, "has no energy-ram event", "/proc/sys/kernel/perf_event_paranoid <= 0 (it is ");
        const char *r = ctr_reason(s, ctr_find(s, "energy-pkg"));
        CHECK(strncmp(r, "EACCES: ", 8) == 0 && strstr(r, "CAP_PERFMON"), "EACCES reason '%s'", r);
        printf("energy: refused: %s\n", r);
    }
    ctr_close(s);
#endif
    nftw(fake_root, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* Wall clock, seconds. */
static double wall_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/*
 * The open/read/sum/scale path, without RAPL: a fake power PMU whose type is
 * the kernel's software PMU. Its cpu-clock, opened system-wide on each CPU of
 * cpumask, advances with wall time on every CPU, so with a scale of 1e-9 "J"
 * per count a phase reads about n_cpu × its seconds. An event that never
 * counts (emulation-faults) must be ZERO, not 0 J; a package that cannot be
 * opened fails the whole event. Needs the privilege system-wide events need;
 * without it, the refusal must say so.
 */
static void test_energy_open(void) {
    snprintf(fake_root, sizeof fake_root, "/tmp/cortex-rapl-XXXXXX");
    CHECK(mkdtemp(fake_root) != NULL, "mkdtemp: %s", strerror(errno));
    fake_pmu();
    char text[64], why[CTR_REASON_LEN];
    snprintf(text, sizeof text, "%d\n", 1); /* PERF_TYPE_SOFTWARE */
    fake_put("power/type", text);
    fake_put("power/events/energy-pkg", "event=0x0"); /* PERF_COUNT_SW_CPU_CLOCK */
    fake_put("power/events/energy-pkg.scale", "1e-9");
    fake_put("power/events/energy-ram", "event=0x8"); /* PERF_COUNT_SW_EMULATION_FAULTS: never counts on x86 */
    fake_put("power/events/energy-ram.scale", "1e-9");
    fake_put("power/events/energy-ram.unit", "Joules");
    int ncpu = sysconf(_SC_NPROCESSORS_ONLN) >= 2 ? 2 : 1;
    fake_put("power/cpumask", ncpu == 2 ? "0-1" : "0");
    ctr_set *s = ctr_open_at(fake_root, why, sizeof why);
    CHECK(s != NULL, "ctr_open_at: %s", why);
    if (!s) return;
    int ip = ctr_find(s, "energy-pkg"), ir = ctr_find(s, "energy-ram");
    const char *rp = ctr_reason(s, ip);
    if (!ctr_supported(s, ip) && (strncmp(rp, "EACCES", 6) == 0 || strncmp(rp, "EPERM", 5) == 0)) {
        printf("energy: system-wide events refused here, open path not exercised: %s\n", rp);
        CHECK(strstr(rp, "perf_event_paranoid") != NULL, "refusal '%s' names perf_event_paranoid", rp);
    } else {
        CHECK(ctr_supported(s, ip), "software cpu-clock as energy-pkg: %s", rp);
        CHECK(strcmp(ctr_scope(s, ip), "system") == 0, "scope %s", ctr_scope(s, ip));
        ctr_snap a, b;
        ctr_snapshot(s, &a);
        double t0 = wall_s();
        busy(20000000);
        double t1 = wall_s();
        ctr_snapshot(s, &b);
        ctr_phase p;
        ctr_phase_init(&p, "decode");
        ctr_accumulate(&p, &a, &b);
        double want = ncpu * (t1 - t0);
        printf("energy: fake energy-pkg (cpu-clock on %d CPUs, 1e-9 per count) %.6f over %.6f s of wall time\n", ncpu,
               p.value[ip], t1 - t0);
        CHECK(a.valid[ip] && b.valid[ip] && b.scale[ip] == 1e-9, "read, scale %g", b.scale[ip]);
        CHECK_NEAR(b.value[ip], (double)b.raw[ip] * 1e-9, 1e-9 * (double)b.raw[ip] * 1e-12, "snapshot value in J");
        CHECK(ctr_phase_valid(&p, ip) && p.value[ip] >= 0.5 * want && p.value[ip] <= 2 * want + 0.01,
              "summed over %d packages and scaled: %.6f, about %.6f expected", ncpu, p.value[ip], want);
        const char *rr = ctr_reason(s, ir);
        CHECK(!ctr_supported(s, ir) && strncmp(rr, "ZERO: ", 6) == 0, "a count that never moves: '%s'", rr);
        ctr_snapshot(s, &b);
        CHECK(!b.valid[ir], "a ZERO event still read");
        ctr_close(s);
        /* A package whose CPU does not exist: the event fails (no undercount). */
        fake_put("power/cpumask", "0,4095");
        s = ctr_open_at(fake_root, why, sizeof why);
        CHECK(s != NULL, "ctr_open_at: %s", why);
        if (s) {
            rp = ctr_reason(s, ip);
            printf("energy: cpumask 0,4095: %s\n", rp);
            CHECK(!ctr_supported(s, ip) && rp[0] == 'E' && strstr(rp, "on CPU 4095"), "one package unopenable: '%s'",
                  rp);
        }
    }
    ctr_close(s);
    nftw(fake_root, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* 1 if the space-separated words of s are in strictly increasing strcmp order. */
static int words_sorted(const char *s) {
    char prev[32] = "", cur[32];
    int n;
    while (sscanf(s, "%31s%n", cur, &n) == 1) {
        if (prev[0] && strcmp(prev, cur) >= 0) return 0;
        snprintf(prev, sizeof prev, "%s", cur);
        s += n;
    }
    return 1;
}

/* env_collect fills the fields; the fingerprint is stable and sensitive. */
static void test_env(void) {
    env_info e, e2;
    int rc = env_collect(&e);
    CHECK(rc == 0, "env_collect rc %d", rc);
    printf("env: cpu '%s' | isa '%s' | %d logical / %d physical cores | %llu bytes | %s | %s | governor %s | "
           "hypervisor %d | host %s | numa %d\n",
           e.cpu_model, e.isa_flags, e.logical_cores, e.physical_cores, (unsigned long long)e.mem_bytes, e.kernel,
           e.compiler, e.governor, e.hypervisor, e.hostname, e.numa_nodes);
    CHECK(e.cpu_model[0] && strcmp(e.cpu_model, "unknown"), "cpu model '%s'", e.cpu_model);
    CHECK(e.logical_cores >= 1, "logical cores %d", e.logical_cores);
    CHECK(e.physical_cores >= 0 && e.physical_cores <= e.logical_cores, "physical cores %d", e.physical_cores);
    CHECK(e.mem_bytes >= (64ull << 20), "memory %llu", (unsigned long long)e.mem_bytes);
    CHECK(strncmp(e.kernel, "Linux ", 6) == 0 && strlen(e.kernel) > 6, "kernel '%s'", e.kernel);
    CHECK(strncmp(e.compiler, "gcc ", 4) == 0 || strncmp(e.compiler, "clang ", 6) == 0, "compiler '%s'", e.compiler);
    CHECK(e.governor[0] != 0, "governor empty");
    CHECK(e.hostname[0] != 0, "hostname empty");
    CHECK(e.numa_nodes >= 1, "numa nodes %d", e.numa_nodes);
    CHECK(words_sorted(e.isa_flags), "isa flags not sorted: '%s'", e.isa_flags);
#if defined(__x86_64__)
    CHECK(strstr(e.isa_flags, "sse4_2") != NULL, "x86-64 machines of interest all have sse4_2: '%s'", e.isa_flags);
#endif

    char f1[65], f2[65], f3[65];
    env_collect(&e2);
    env_fingerprint(&e, f1);
    env_fingerprint(&e2, f2);
    CHECK(strlen(f1) == 64 && strspn(f1, "0123456789abcdef") == 64, "fingerprint '%s'", f1);
    CHECK(strcmp(f1, f2) == 0, "fingerprint unstable: %s vs %s", f1, f2);

    /* Fields that decide comparability change it; the others do not. */
    struct {
        const char *what;
        int changes;
    } cases[] = {{"cpu_model", 1}, {"isa_flags", 1}, {"logical_cores", 1}, {"mem +1 GiB", 1}, {"kernel", 1},
                 {"compiler", 1},  {"mem +100 MiB", 0}, {"hostname", 0}, {"governor", 0}, {"hypervisor", 0},
                 {"numa_nodes", 0}, {"physical_cores", 0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        env_info x = e;
        switch (k) {
        case 0: snprintf(x.cpu_model, sizeof x.cpu_model, "Other CPU"); break;
        case 1: snprintf(x.isa_flags, sizeof x.isa_flags, "%.100s amx", e.isa_flags); break;
        case 2: x.logical_cores++; break;
        case 3: x.mem_bytes += 1ull << 30; break;
        case 4: snprintf(x.kernel, sizeof x.kernel, "Linux 0.0.1"); break;
        case 5: snprintf(x.compiler, sizeof x.compiler, "gcc 1.0"); break;
        case 6: x.mem_bytes = ((e.mem_bytes + (1ull << 29)) >> 30 << 30) + (100ull << 20); break;
        case 7: snprintf(x.hostname, sizeof x.hostname, "elsewhere"); break;
        case 8: snprintf(x.governor, sizeof x.governor, "powersave"); break;
        case 9: x.hypervisor = !x.hypervisor; break;
        case 10: x.numa_nodes += 3; break;
        case 11: x.physical_cores += 1; break;
        }
        env_fingerprint(&x, f3);
        CHECK((strcmp(f1, f3) != 0) == cases[k].changes, "changing %s %s the fingerprint", cases[k].what,
              cases[k].changes ? "did not change" : "changed");
    }
}

/* Worker for the pinning test: report its own affinity. */
static void *affinity_main(void *arg) {
    cpu_set_t *out = arg;
    sched_getaffinity(0, sizeof *out, out);
    return NULL;
}

/* Bad CPU lists are refused with a message; a good one pins new threads too. */
static void test_pin(void) {
    static const struct {
        const char *list, *must;
    } bad[] = {{"abc", "not a CPU list"}, {"99999", "does not exist"}, {"1-0", "decreasing"}, {"", "empty"},
               {"0,", "not a CPU list"},  {"-1", "not a CPU list"},   {"0-", "not a CPU list"},
               {"0 1", "not a CPU list"}, {"99999999999999999999", "does not exist"}};
    cpu_set_t saved, want, got;
    CHECK(sched_getaffinity(0, sizeof saved, &saved) == 0, "sched_getaffinity");
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char err[256] = "";
        int rc = env_pin_cpus(bad[k].list, err, sizeof err);
        CHECK(rc == -1 && strstr(err, bad[k].must) != NULL, "env_pin_cpus('%s') = %d, '%s'", bad[k].list, rc, err);
        if (k < 3) printf("pin '%s': %s\n", bad[k].list, err);
    }
    CHECK(sched_getaffinity(0, sizeof got, &got) == 0 && CPU_EQUAL(&got, &saved), "a refused list changed affinity");

    char err[256] = "";
    int rc = env_pin_cpus("0", err, sizeof err);
    CHECK(rc == 0, "env_pin_cpus(0): %s", err);
    if (rc == 0) {
        CPU_ZERO(&want);
        CPU_SET(0, &want);
        pthread_t t;
        CPU_ZERO(&got);
        if (pthread_create(&t, NULL, affinity_main, &got) == 0) {
            pthread_join(t, NULL);
            CHECK(CPU_EQUAL(&got, &want), "a thread created after pinning is not pinned (%d CPUs)", CPU_COUNT(&got));
        }
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n >= 2) {
        rc = env_pin_cpus("0-1", err, sizeof err);
        CHECK(rc == 0, "env_pin_cpus(0-1): %s", err);
        rc = env_pin_cpus("1,0", err, sizeof err);
        CHECK(rc == 0, "env_pin_cpus(1,0): %s", err);
    }
    sched_setaffinity(0, sizeof saved, &saved);
}

/* Peak RSS follows a 64 MiB touch, and the reset brings it back down. */
static void test_rss(void) {
    int rc = env_peak_rss_reset();
    CHECK(rc == 0, "env_peak_rss_reset: %s", strerror(errno));
    long before = env_peak_rss_kib();
    CHECK(before > 0, "peak rss %ld", before);
    /* mmap, not malloc: munmap really returns the pages (no allocator cache or
     * sanitizer quarantine), and volatile stores cannot be optimized away. */
    size_t n = 64u << 20;
    void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED, "mmap: %s", strerror(errno));
    if (m == MAP_FAILED) return;
    volatile char *p = m;
    for (size_t i = 0; i < n; i += 4096) p[i] = 1;
    long after = env_peak_rss_kib();
    printf("peak rss: %ld KiB -> %ld KiB after touching 64 MiB\n", before, after);
    CHECK(after - before >= 48 * 1024, "peak rss grew by %ld KiB only", after - before);
    munmap(m, n);
    if (rc == 0) {
        CHECK(env_peak_rss_reset() == 0, "second reset: %s", strerror(errno));
        long reset = env_peak_rss_kib();
        CHECK(reset < after - 32 * 1024, "peak rss after reset %ld KiB, before %ld KiB: reset ineffective", reset,
              after);
    }
}

TEST_MAIN({
    test_events();
    test_inherit();
    test_refused();
    test_phase_math();
    test_energy_sysfs();
    test_energy_open();
    test_env();
    test_pin();
    test_rss();
})
