/*
 * counters.h - hardware and software performance counters for cortex-bench,
 * read at phase boundaries (start/end of prefill, start/end of decode).
 *
 * Backend: perf_event_open(2) called directly. With `-DCORTEX_PAPI` the
 * hardware events come from PAPI instead (counters_papi.c) and the software
 * events still from perf_event; the API is the same either way.
 *
 * Scope: the calling process's threads, user space only for hardware events.
 * Every event is opened with inherit=1, so ctr_open must be called BEFORE the
 * engine creates its worker threads (cx_session_new): threads that already
 * exist when ctr_open runs, other than the caller, are not counted. The
 * energy events are the exception: they are system-wide (see below).
 *
 * The event list is fixed (ctr_count() entries, always the same names in the
 * same order). An event the kernel or CPU cannot count is "unsupported" with a
 * reason, never a stored 0:
 *   name               unit   kind
 *   cycles             count  hardware
 *   instructions       count  hardware
 *   cache-references   count  hardware
 *   cache-misses       count  hardware
 *   branch-misses      count  hardware
 *   llc-load-misses    count  hardware cache (LL, read, miss)
 *   task-clock         ns     software
 *   page-faults        count  software
 *   context-switches   count  software
 *   energy-pkg         J      RAPL `power` PMU: energy of the whole package(s)
 *   energy-ram         J      RAPL `power` PMU: DRAM energy (where it has the event)
 *
 * Energy: the RAPL `power` PMU is dynamic, so its type, each event's config,
 * scale (joules per count) and unit are read from sysfs
 * (/sys/bus/event_source/devices/power/...). Its events count every process
 * on the package, so they are opened system-wide (pid=-1) on one CPU per
 * package (the PMU's `cpumask`), summed over packages, and scaled to joules.
 * Opening them needs CAP_PERFMON or perf_event_paranoid <= 0. A machine
 * without the PMU (most VMs) records them as unsupported with that reason.
 *
 * Hardware events are read as one group (PERF_FORMAT_GROUP, mode "group")
 * when the kernel accepts a group together with inherit, otherwise one read
 * per event (mode "per-event"); ctr_mode() says which, "none" when no hardware
 * event could be opened, "papi" with the PAPI backend. Values are scaled for
 * multiplexing per interval (raw delta * enabled delta / running delta).
 *
 * Snapshots and accumulation never allocate: they run between tokens.
 */
#ifndef CB_COUNTERS_H
#define CB_COUNTERS_H

#include <stddef.h>
#include <stdint.h>

#define CTR_MAX_EVENTS 16
#define CTR_NAME_LEN 24   /* same sizes as counter_row in results.h */
#define CTR_UNIT_LEN 8
#define CTR_REASON_LEN 160
#define CTR_MAX_PKGS 16   /* RAPL packages (dies) summed; more: energy unsupported */
#define CTR_PMU_DIR "/sys/bus/event_source/devices"

typedef struct ctr_set ctr_set;

/* Cumulative values of every event at one instant. */
typedef struct ctr_snap {
    int n;                               /* events in the set (0 for a NULL set) */
    int valid[CTR_MAX_EVENTS];           /* 1: supported and read successfully */
    double value[CTR_MAX_EVENTS];        /* cumulative count scaled for multiplexing: raw * enabled / running */
    uint64_t raw[CTR_MAX_EVENTS];        /* cumulative count as the kernel reported it (energy: summed over packages) */
    uint64_t enabled[CTR_MAX_EVENTS];    /* ns the event was enabled (summed over threads/packages); 0 if unknown */
    uint64_t running[CTR_MAX_EVENTS];    /* ns it was actually on a counter; 0 if unknown */
    double scale[CTR_MAX_EVENTS];        /* unit per raw count: joules per count for energy, 1 otherwise;
                                          * 0 (a snapshot built by hand) counts as 1 */
} ctr_snap;

/* Sums of per-interval deltas for one phase ("prefill", "decode", "total"). */
typedef struct ctr_phase {
    char name[16];
    int n;                               /* events seen (set by the first ctr_accumulate) */
    double value[CTR_MAX_EVENTS];        /* sum of scaled deltas, in the event's unit (J for energy) */
    double enabled_ns[CTR_MAX_EVENTS];   /* sum of enabled-time deltas (0 when the backend has none) */
    double running_ns[CTR_MAX_EVENTS];   /* sum of running-time deltas; running < enabled: multiplexed */
    unsigned intervals[CTR_MAX_EVENTS];  /* intervals that contributed a value */
    unsigned lost[CTR_MAX_EVENTS];       /* intervals with no value: unreadable, or never on a counter */
} ctr_phase;

/*
 * Open every event for the calling process (inherit=1). Returns NULL only if
 * memory runs out (message in err); an event that cannot be opened, or a
 * kernel without perf_event_open at all, gives a set whose events are
 * unsupported with reasons, and the caller goes on.
 */
ctr_set *ctr_open(char *err, size_t errlen);
/* Close every descriptor and free the set; NULL is fine. */
void ctr_close(ctr_set *s);

/* Number of events (fixed list above); 0 for NULL. */
int ctr_count(const ctr_set *s);
/* Stored name ("cycles", ...) and unit ("count", "ns", "J") of event i. */
const char *ctr_name(const ctr_set *s, int i);
const char *ctr_unit(const ctr_set *s, int i);
/* 1 if event i is being counted, 0 if not (then ctr_reason says why). */
int ctr_supported(const ctr_set *s, int i);
/* Why event i is unsupported, e.g. "ENOENT: hardware event not supported by
 * this CPU/VM (No such file or directory)"; "" when supported. */
const char *ctr_reason(const ctr_set *s, int i);
/* What event i counts: "user" (exclude_kernel=1), "user+kernel", or
 * "system" (energy: the whole package, every process). */
const char *ctr_scope(const ctr_set *s, int i);
/* Hardware read mode: "group", "per-event", "papi" or "none". */
const char *ctr_mode(const ctr_set *s);
/* Index of the event called `name`, or -1. */
int ctr_find(const ctr_set *s, const char *name);
/* One line for logs: mode, supported count, and each unsupported event's reason. */
void ctr_summary(const ctr_set *s, char *buf, size_t len);

/* Read every event's current cumulative value; a NULL set gives n = 0. */
void ctr_snapshot(ctr_set *s, ctr_snap *out);

/* Empty accumulator for a phase called `name` (truncated to 15 bytes). */
void ctr_phase_init(ctr_phase *p, const char *name);
/* Add the interval before -> after into acc (deltas scaled for multiplexing). */
void ctr_accumulate(ctr_phase *acc, const ctr_snap *before, const ctr_snap *after);
/* Add every interval of src into dst (e.g. prefill + decode into a total). */
void ctr_phase_add(ctr_phase *dst, const ctr_phase *src);
/* 1 if event i of the phase has a trustworthy value: at least one interval
 * and none lost. Otherwise the harness stores it as missing. */
int ctr_phase_valid(const ctr_phase *p, int i);

/* Tests only: make ctr_open behave as if the kernel refused in a given way,
 * to exercise paths this machine cannot reach. Reset with CTR_INJECT_NONE. */
enum {
    CTR_INJECT_NONE = 0,
    CTR_INJECT_ENOSYS = 1,      /* every perf_event_open fails with ENOSYS */
    CTR_INJECT_EACCES = 2,      /* every perf_event_open fails with EACCES */
    CTR_INJECT_GROUP_EINVAL = 3 /* PERF_FORMAT_GROUP with inherit fails with EINVAL */
};
void ctr_test_inject(int mode);

/* Tests only: the RAPL `power` PMU as described under a PMU directory
 * (CTR_PMU_DIR in production, a fake tree in tests). */
typedef struct ctr_rapl_event {
    uint32_t type;           /* pmu_dir/power/type */
    uint64_t config;         /* pmu_dir/power/events/EVENT ("event=0x02"), placed by power/format/ */
    double scale;            /* pmu_dir/power/events/EVENT.scale: joules per count */
    char unit[16];           /* pmu_dir/power/events/EVENT.unit: "Joules" */
    int n_cpu;               /* packages: CPUs listed in pmu_dir/power/cpumask */
    int cpu[CTR_MAX_PKGS];   /* one CPU per package */
} ctr_rapl_event;
/* Read and check what opening EVENT ("energy-pkg") needs. 0, or -1 with the
 * reason ("ENOENT: no RAPL 'power' PMU in DIR (...)", or "EINVAL: FILE: ..."
 * naming the file with bad contents) in reason. */
int ctr_rapl_probe(const char *pmu_dir, const char *event, ctr_rapl_event *out, char *reason, size_t len);
/* ctr_open with the energy events read from pmu_dir instead of CTR_PMU_DIR. */
ctr_set *ctr_open_at(const char *pmu_dir, char *err, size_t errlen);

#ifdef CORTEX_PAPI
/* Internal interface between counters.c and counters_papi.c (PAPI builds only). */
typedef struct ctr_papi ctr_papi;
/* Open the hardware events names[0..n) through PAPI with inheritance; for each,
 * ok[i] = 1 or a reason in reasons[i]. NULL (message in err) if PAPI itself
 * cannot start; then every name gets that reason too. */
ctr_papi *ctr_papi_open(const char *const *names, int n, int *ok, char (*reasons)[CTR_REASON_LEN],
                        char *err, size_t errlen);
/* Cumulative values for the names opened ok (others untouched); 0 on success. */
int ctr_papi_read(ctr_papi *p, uint64_t *values);
void ctr_papi_close(ctr_papi *p);
#endif

#endif
