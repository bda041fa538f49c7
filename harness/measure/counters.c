/*
 * counters.c - see counters.h. perf_event_open(2) through syscall(2), no
 * libpfm/libperf: the raw interface is small, and going through it directly
 * lets every refusal be recorded with its exact errno.
 *
 * Choices worth knowing:
 *  - inherit=1 everywhere, pid=0 (this process), cpu=-1: the counts follow
 *    every thread created after ctr_open, and reading the parent descriptor
 *    sums the live and the exited threads.
 *  - Hardware events: exclude_kernel=1, exclude_hv=1 (work at
 *    perf_event_paranoid=2 and mean the same thing whatever the privilege).
 *  - Software events: task-clock and page-faults with exclude_kernel=1 too;
 *    context-switches needs exclude_kernel=0, because the kernel raises it
 *    with kernel registers, so a user-only counter reads 0 forever. Where
 *    that is refused it is recorded as unsupported, never counted as 0.
 *  - A group read is tried first; the kernel answers EINVAL to
 *    PERF_FORMAT_GROUP with inherit on many versions, and then (or when the
 *    group never gets onto the PMU) every hardware event is read on its own.
 *  - cycles and instructions are checked over a short calibration loop: a
 *    virtual PMU that accepts the event but never counts is marked
 *    unsupported instead of producing zeros.
 *  - Energy (energy-pkg, energy-ram): the RAPL `power` PMU has a dynamic type
 *    and per-event config/scale/unit in sysfs, parsed here (anything
 *    unexpected makes the event unsupported with a reason naming the file).
 *    RAPL counts are per package, not per task: each is opened with pid=-1
 *    on one CPU of each package (the PMU's cpumask), inherit=0 and no
 *    exclude_* bits (the PMU refuses them), and the packages' raw counts are
 *    summed and multiplied by the scale into joules. They too are checked
 *    over a few ms of work: a count that never moves is unsupported, not 0 J.
 */
#include "counters.h"
#include "hx_err.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef __linux__
#include <linux/perf_event.h>
#endif

enum { CTR_KIND_HW, CTR_KIND_SW, CTR_KIND_RAPL };

/* One entry of the fixed event list. */
typedef struct ctr_def {
    const char *name, *unit;
    int kind;
    uint32_t type;   /* CTR_KIND_RAPL: from sysfs, see ctr_rapl_probe */
    uint64_t config;
    int need_kernel; /* count kernel mode too (exclude_kernel=0) */
    int calibrate;   /* must count > 0 over the calibration loop */
} ctr_def;

#ifdef __linux__
#define CTR_LLC_READ_MISS                                                                                   \
    ((uint64_t)PERF_COUNT_HW_CACHE_LL | ((uint64_t)PERF_COUNT_HW_CACHE_OP_READ << 8) |                     \
     ((uint64_t)PERF_COUNT_HW_CACHE_RESULT_MISS << 16))
static const ctr_def ctr_defs[] = {
    {"cycles", "count", CTR_KIND_HW, PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, 0, 1},
    {"instructions", "count", CTR_KIND_HW, PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, 0, 1},
    {"cache-references", "count", CTR_KIND_HW, PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES, 0, 0},
    {"cache-misses", "count", CTR_KIND_HW, PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES, 0, 0},
    {"branch-misses", "count", CTR_KIND_HW, PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES, 0, 0},
    {"llc-load-misses", "count", CTR_KIND_HW, PERF_TYPE_HW_CACHE, CTR_LLC_READ_MISS, 0, 0},
    {"task-clock", "ns", CTR_KIND_SW, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, 0, 0},
    {"page-faults", "count", CTR_KIND_SW, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS, 0, 0},
    {"context-switches", "count", CTR_KIND_SW, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, 1, 0},
    {"energy-pkg", "J", CTR_KIND_RAPL, 0, 0, 1, 0},
    {"energy-ram", "J", CTR_KIND_RAPL, 0, 0, 1, 0},
};
#else
static const ctr_def ctr_defs[] = {
    {"cycles", "count", CTR_KIND_HW, 0, 0, 0, 1},           {"instructions", "count", CTR_KIND_HW, 0, 0, 0, 1},
    {"cache-references", "count", CTR_KIND_HW, 0, 0, 0, 0}, {"cache-misses", "count", CTR_KIND_HW, 0, 0, 0, 0},
    {"branch-misses", "count", CTR_KIND_HW, 0, 0, 0, 0},    {"llc-load-misses", "count", CTR_KIND_HW, 0, 0, 0, 0},
    {"task-clock", "ns", CTR_KIND_SW, 0, 0, 0, 0},          {"page-faults", "count", CTR_KIND_SW, 0, 0, 0, 0},
    {"context-switches", "count", CTR_KIND_SW, 0, 0, 1, 0}, {"energy-pkg", "J", CTR_KIND_RAPL, 0, 0, 1, 0},
    {"energy-ram", "J", CTR_KIND_RAPL, 0, 0, 1, 0},
};
#endif
#define CTR_NDEFS ((int)(sizeof ctr_defs / sizeof ctr_defs[0]))
_Static_assert(sizeof ctr_defs / sizeof ctr_defs[0] <= CTR_MAX_EVENTS, "event list longer than CTR_MAX_EVENTS");

typedef struct ctr_event {
    const ctr_def *def;
    int supported;
    int fd;          /* own descriptor (group member or alone); -1 if none */
    int group_slot;  /* position in the group read, -1 if read on its own */
    int papi_slot;   /* 1 if PAPI provides it */
    int exclude_kernel;
    int n_pkg;                 /* CTR_KIND_RAPL: descriptors in pkg_fd, one per package */
    int pkg_fd[CTR_MAX_PKGS];
    double scale;              /* unit per raw count: the RAPL scale (J), else 1 */
    char reason[CTR_REASON_LEN];
} ctr_event;

struct ctr_set {
    int n;
    ctr_event ev[CTR_MAX_EVENTS];
    int group_fd; /* leader of the hardware group, -1 when not in group mode */
    int group_n;  /* members in the group read */
    char mode[16];
#ifdef CORTEX_PAPI
    ctr_papi *papi;
#endif
};

static int ctr_inject_mode = CTR_INJECT_NONE;

/* Tests only: simulate a refusing kernel (see counters.h). */
void ctr_test_inject(int mode) {
    ctr_inject_mode = mode;
}

/* Symbolic name of an errno value perf_event_open can return, for reasons. */
static const char *ctr_errno_name(int e) {
    switch (e) {
    case ENOENT: return "ENOENT";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case ENODEV: return "ENODEV";
    case EINVAL: return "EINVAL";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ENOSYS: return "ENOSYS";
    case EMFILE: return "EMFILE";
    case ENFILE: return "ENFILE";
    case EBUSY: return "EBUSY";
    case ENOSPC: return "ENOSPC";
    case E2BIG: return "E2BIG";
    case EFAULT: return "EFAULT";
    case ESRCH: return "ESRCH";
    case EOVERFLOW: return "EOVERFLOW";
    case ENOMEM: return "ENOMEM";
    case EIO: return "EIO";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    default: return "errno";
    }
}

/* /proc/sys/kernel/perf_event_paranoid, or -99 when unreadable (quoted in
 * permission errors, because it is the knob the user has to turn). */
static int ctr_paranoid(void) {
    FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
    int v = -99;
    if (f) {
        if (fscanf(f, "%d", &v) != 1) v = -99;
        fclose(f);
    }
    return v;
}

/* Write "ENAME: explanation (strerror)" for an open failure of `def`. */
static void ctr_set_reason(ctr_event *ev, int e) {
    const char *why;
    char perm[120];
    switch (e) {
    case ENOENT:
        why = ev->def->kind == CTR_KIND_HW     ? "hardware event not supported by this CPU/VM"
              : ev->def->kind == CTR_KIND_RAPL ? "the kernel has no PMU of the type sysfs gave"
                                               : "event not known to this kernel";
        break;
    case EOPNOTSUPP: why = "event or its user-only setting not supported by this PMU"; break;
    case ENODEV: why = "no PMU for this event on this CPU/VM"; break;
    case EINVAL: why = "the kernel rejected the event configuration"; break;
    case EACCES:
    case EPERM: {
        int p = ctr_paranoid();
        if (ev->def->kind == CTR_KIND_RAPL)
            snprintf(perm, sizeof perm,
                     "not permitted: system-wide energy needs CAP_PERFMON or "
                     "/proc/sys/kernel/perf_event_paranoid <= 0 (it is %d)", p);
        else if (ev->def->need_kernel)
            snprintf(perm, sizeof perm,
                     "not permitted: counting it needs kernel mode (exclude_kernel=0), perf_event_paranoid=%d", p);
        else if (p == -99)
            snprintf(perm, sizeof perm, "not permitted (perf_event_paranoid unreadable; seccomp or container?)");
        else
            snprintf(perm, sizeof perm, "not permitted: perf_event_paranoid=%d, or a seccomp/container policy", p);
        why = perm;
        break;
    }
    case ENOSYS: why = "perf_event_open is not available (kernel without perf events, or blocked)"; break;
    case EMFILE:
    case ENFILE: why = "out of file descriptors"; break;
    case EBUSY: why = "the PMU is in exclusive use by someone else"; break;
    default: why = "perf_event_open failed"; break;
    }
    ev->supported = 0;
    snprintf(ev->reason, sizeof ev->reason, "%s: %s (%s)", ctr_errno_name(e), why, strerror(e));
}

/* ---- The RAPL `power` PMU, described in sysfs ---- */

/* Read a small text file into buf with trailing whitespace removed; 0, or
 * -errno (-EFBIG when it does not fit in len - 1 bytes). */
static int ctr_read_text(const char *path, char *buf, size_t len) {
    FILE *f = fopen(path, "r");
    if (!f) return -errno;
    size_t n = fread(buf, 1, len - 1, f);
    int big = n == len - 1 && fgetc(f) != EOF;
    int bad = ferror(f);
    fclose(f);
    if (bad) return -EIO;
    if (big) return -EFBIG;
    buf[n] = 0;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\t' || buf[n - 1] == '\r')) buf[--n] = 0;
    return 0;
}

/* Reason for a file that could not be read: "ENAME: PATH: strerror". */
static int ctr_file_fail(char *reason, size_t len, const char *path, int e) {
    snprintf(reason, len, "%s: %s: %s", e == EFBIG ? "EFBIG" : ctr_errno_name(e), path,
             e == EFBIG ? "longer than expected" : strerror(e));
    return -1;
}

/* Unsigned decimal or 0x-hex number filling all of s; 0 or -1. */
static int ctr_parse_u64(const char *s, uint64_t *out) {
    if (!*s || *s == '-' || *s == '+' || *s == ' ') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end) return -1;
    *out = (uint64_t)v;
    return 0;
}

/* A CPU list ("0", "0,24", "0-3,8") into cpu[0..max); the number of CPUs it
 * names (more than max: only max stored), or -1 when it is not a list. */
static int ctr_parse_cpus(const char *s, int *cpu, int max) {
    int n = 0;
    if (!*s) return -1;
    for (;;) {
        char *end;
        if (*s < '0' || *s > '9') return -1;
        long lo = strtol(s, &end, 10), hi = lo;
        s = end;
        if (*s == '-') {
            if (s[1] < '0' || s[1] > '9') return -1;
            hi = strtol(s + 1, &end, 10);
            s = end;
        }
        if (lo > hi || hi > 1 << 20) return -1;
        for (long c = lo; c <= hi; c++, n++)
            if (n < max) cpu[n] = (int)c;
        if (!*s) return n;
        if (*s++ != ',') return -1;
    }
}

/* Place `value` of the term `name` into *config as PMU/format/NAME says
 * ("config:0-7", "config:7", "config:0-7,32-35"); a PMU without that file
 * takes "event" as the whole config. 0, or -1 with a reason. */
static int ctr_place_term(const char *pmu, const char *evpath, const char *name, uint64_t value, uint64_t *config,
                          char *reason, size_t len) {
    char path[320], fmt[128];
    snprintf(path, sizeof path, "%s/format/%.32s", pmu, name);
    int rc = ctr_read_text(path, fmt, sizeof fmt);
    if (rc == -ENOENT && !strcmp(name, "event")) {
        *config |= value;
        return 0;
    }
    if (rc == -ENOENT) {
        snprintf(reason, len, "EINVAL: %s: term '%s' has no %s", evpath, name, path);
        return -1;
    }
    if (rc) return ctr_file_fail(reason, len, path, -rc);
    if (strncmp(fmt, "config:", 7) != 0) {
        snprintf(reason, len, "EINVAL: %s: '%.40s' is not a config bit range (config1/2 unsupported)", path, fmt);
        return -1;
    }
    const char *r = fmt + 7;
    uint64_t rest = value;
    for (;;) {
        char *end;
        if (*r < '0' || *r > '9') break;
        long lo = strtol(r, &end, 10), hi = lo;
        r = end;
        if (*r == '-') {
            if (r[1] < '0' || r[1] > '9') break;
            hi = strtol(r + 1, &end, 10);
            r = end;
        }
        if (lo > hi || hi > 63) break;
        int width = (int)(hi - lo + 1);
        uint64_t mask = width == 64 ? ~(uint64_t)0 : (((uint64_t)1 << width) - 1);
        *config |= (rest & mask) << lo;
        rest = width == 64 ? 0 : rest >> width;
        if (!*r) {
            if (rest) {
                snprintf(reason, len, "EINVAL: %s: %s=%#llx does not fit %s", evpath, name, (unsigned long long)value,
                         path);
                return -1;
            }
            return 0;
        }
        if (*r++ != ',') break;
    }
    snprintf(reason, len, "EINVAL: %s: '%.40s' is not a config bit range", path, fmt);
    return -1;
}

/* See counters.h. */
int ctr_rapl_probe(const char *pmu_dir, const char *event, ctr_rapl_event *out, char *reason, size_t len) {
    char pmu[256], path[384], text[256]; /* a longer pmu_dir is cut (tests only) */
    struct stat st;
    memset(out, 0, sizeof *out);
    if (len) reason[0] = 0;
    snprintf(pmu, sizeof pmu, "%.240s/power", pmu_dir);
    if (stat(pmu, &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) {
            snprintf(reason, len, "ENOENT: no RAPL 'power' PMU in %s (this kernel or VM exposes no energy counters)",
                     pmu_dir);
            return -1;
        }
        return ctr_file_fail(reason, len, pmu, errno);
    }

    uint64_t v;
    snprintf(path, sizeof path, "%s/type", pmu);
    int rc = ctr_read_text(path, text, sizeof text);
    if (rc) return ctr_file_fail(reason, len, path, -rc);
    if (ctr_parse_u64(text, &v) || v > UINT32_MAX) {
        snprintf(reason, len, "EINVAL: %s: '%.32s' is not a PMU type number", path, text);
        return -1;
    }
    out->type = (uint32_t)v;

    char evpath[320];
    snprintf(evpath, sizeof evpath, "%s/events/%.40s", pmu, event);
    rc = ctr_read_text(evpath, text, sizeof text);
    if (rc == -ENOENT) {
        snprintf(reason, len, "ENOENT: the RAPL 'power' PMU has no %s event (no %s: this CPU does not meter it)", event,
                 evpath);
        return -1;
    }
    if (rc) return ctr_file_fail(reason, len, evpath, -rc);
    /* "event=0x02" or terms "a=1,b=0x2" (a term alone means =1, as perf reads it) */
    if (!text[0]) {
        snprintf(reason, len, "EINVAL: %s: empty, no config", evpath);
        return -1;
    }
    for (char *t = text, *next; t; t = next) {
        next = strchr(t, ',');
        if (next) *next++ = 0;
        char *eq = strchr(t, '=');
        uint64_t tv = 1;
        if (eq) *eq = 0;
        if (!*t || strlen(t) > 32 || strcspn(t, "/. ") != strlen(t) || (eq && ctr_parse_u64(eq + 1, &tv))) {
            snprintf(reason, len, "EINVAL: %s: '%.32s%s%.24s' is not a term=value config", evpath, t, eq ? "=" : "",
                     eq ? eq + 1 : "");
            return -1;
        }
        if (ctr_place_term(pmu, evpath, t, tv, &out->config, reason, len)) return -1;
    }

    snprintf(path, sizeof path, "%s.scale", evpath);
    rc = ctr_read_text(path, text, sizeof text);
    if (rc) return ctr_file_fail(reason, len, path, -rc);
    char *end;
    errno = 0;
    double sc = strtod(text, &end);
    if (!text[0] || *end || errno || !isfinite(sc) || sc <= 0) {
        snprintf(reason, len, "EINVAL: %s: '%.32s' is not a positive number of joules per count", path, text);
        return -1;
    }
    out->scale = sc;

    snprintf(path, sizeof path, "%s.unit", evpath);
    rc = ctr_read_text(path, text, sizeof text);
    if (rc) return ctr_file_fail(reason, len, path, -rc);
    if (strcasecmp(text, "Joules") != 0) {
        snprintf(reason, len, "EINVAL: %s: unit '%.32s', expected Joules", path, text);
        return -1;
    }
    snprintf(out->unit, sizeof out->unit, "%.15s", text);

    snprintf(path, sizeof path, "%s/cpumask", pmu);
    rc = ctr_read_text(path, text, sizeof text);
    if (rc) return ctr_file_fail(reason, len, path, -rc);
    int n = ctr_parse_cpus(text, out->cpu, CTR_MAX_PKGS);
    if (n < 0) {
        snprintf(reason, len, "EINVAL: %s: '%.32s' is not a CPU list", path, text);
        return -1;
    }
    if (n > CTR_MAX_PKGS) {
        snprintf(reason, len, "E2BIG: %s lists %d packages, more than the %d summed here", path, n, CTR_MAX_PKGS);
        return -1;
    }
    out->n_cpu = n;
    return 0;
}

#ifdef __linux__
/* perf_event_open for pid (0: this process, -1: every process) on cpu (-1:
 * any); the fd, or -errno. */
static int ctr_sys_open_on(struct perf_event_attr *attr, int pid, int cpu, int group_fd) {
    if (ctr_inject_mode == CTR_INJECT_ENOSYS) return -ENOSYS;
    if (ctr_inject_mode == CTR_INJECT_EACCES) return -EACCES;
    if (ctr_inject_mode == CTR_INJECT_GROUP_EINVAL && attr->inherit && (attr->read_format & PERF_FORMAT_GROUP))
        return -EINVAL;
#ifdef SYS_perf_event_open
    long fd = syscall(SYS_perf_event_open, attr, pid, cpu, group_fd, (unsigned long)PERF_FLAG_FD_CLOEXEC);
    return fd < 0 ? -errno : (int)fd;
#else
    (void)pid, (void)cpu, (void)group_fd;
    return -ENOSYS;
#endif
}

/* perf_event_open for this process on any CPU; the fd, or -errno. */
static int ctr_sys_open(struct perf_event_attr *attr, int group_fd) {
    return ctr_sys_open_on(attr, 0, -1, group_fd);
}

/* Fill attr for def: counting (not sampling), inherited, enabled at once. */
static void ctr_attr(struct perf_event_attr *a, const ctr_def *def, int group) {
    memset(a, 0, sizeof *a);
    a->size = sizeof *a;
    a->type = def->type;
    a->config = def->config;
    a->inherit = 1;
    a->exclude_kernel = def->need_kernel ? 0 : 1;
    a->exclude_hv = 1;
    a->read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    if (group) a->read_format |= PERF_FORMAT_GROUP;
}
#endif

#ifdef __linux__
/* Some user-mode work for the calibration reads; the sum defeats the optimizer. */
static uint64_t ctr_spin(long iters) {
    volatile uint64_t acc = 0;
    for (long i = 0; i < iters; i++) acc += (uint64_t)i ^ (acc >> 3);
    return acc;
}

#ifndef CORTEX_PAPI
/* Close every hardware descriptor and forget group slots (before reopening). */
static void ctr_close_hw(ctr_set *s) {
    for (int i = 0; i < s->n; i++) {
        ctr_event *ev = &s->ev[i];
        if (ev->def->kind != CTR_KIND_HW) continue;
        if (ev->fd >= 0) close(ev->fd);
        ev->fd = -1;
        ev->group_slot = -1;
        ev->supported = 0;
        ev->reason[0] = 0;
    }
    s->group_fd = -1;
    s->group_n = 0;
}

/*
 * Open the hardware events as one group. Returns 1 on success, 0 if the
 * caller must fall back to per-event mode (group+inherit refused, or a member
 * that fits alone but not in the group); individual unsupported events are
 * recorded either way.
 */
static int ctr_open_group(ctr_set *s) {
    struct perf_event_attr a;
    for (int i = 0; i < s->n; i++) {
        ctr_event *ev = &s->ev[i];
        if (ev->def->kind != CTR_KIND_HW) continue;
        ctr_attr(&a, ev->def, 1);
        int fd = ctr_sys_open(&a, s->group_fd);
        if (fd == -EINVAL) {
            /* Group+inherit refused, or this member does not fit the group:
             * if it opens alone, per-event mode is the answer. */
            ctr_attr(&a, ev->def, 0);
            int alone = ctr_sys_open(&a, -1);
            if (alone >= 0) {
                close(alone);
                return 0;
            }
            fd = alone;
        }
        if (fd < 0) {
            ctr_set_reason(ev, -fd);
            continue;
        }
        ev->fd = fd;
        ev->supported = 1;
        ev->exclude_kernel = 1;
        ev->group_slot = s->group_n++;
        if (s->group_fd < 0) s->group_fd = fd;
    }
    return 1;
}

#endif /* !CORTEX_PAPI */

/* Open every event of `kind` (CTR_KIND_HW: per-event mode; CTR_KIND_SW:
 * always) on its own descriptor; a refusal becomes that event's reason. */
static void ctr_open_alone(ctr_set *s, int kind) {
    struct perf_event_attr a;
    for (int i = 0; i < s->n; i++) {
        ctr_event *ev = &s->ev[i];
        if (ev->def->kind != kind) continue;
        ctr_attr(&a, ev->def, 0);
        int fd = ctr_sys_open(&a, -1);
        if (fd < 0) {
            ctr_set_reason(ev, -fd);
            continue;
        }
        ev->fd = fd;
        ev->supported = 1;
        ev->exclude_kernel = (int)a.exclude_kernel;
    }
}

/*
 * Calibrate the hardware events: over a short loop in this thread, a group
 * that never gets onto the PMU means per-event mode (returns 0), and cycles or
 * instructions that stay at 0 while on a counter are a PMU that accepts events
 * but does not count (marked unsupported).
 */
static int ctr_calibrate(ctr_set *s) {
    ctr_snap a, b;
    ctr_snapshot(s, &a);
    ctr_spin(200000);
    ctr_snapshot(s, &b);
    if (s->group_fd >= 0) {
        for (int i = 0; i < s->n; i++) {
            ctr_event *ev = &s->ev[i];
            if (ev->group_slot < 0 || !ev->supported || !b.valid[i]) continue;
            if (b.enabled[i] > a.enabled[i] && b.running[i] == a.running[i]) return 0;
            break; /* one member answers for the whole group */
        }
    }
    for (int i = 0; i < s->n; i++) {
        ctr_event *ev = &s->ev[i];
        if (ev->def->kind != CTR_KIND_HW || !ev->supported || !ev->def->calibrate) continue;
        if (!a.valid[i] || !b.valid[i]) {
            ev->supported = 0;
            snprintf(ev->reason, sizeof ev->reason, "EIO: opened but could not be read");
        } else if ((b.running[i] > a.running[i] || b.enabled[i] == 0) && b.raw[i] == a.raw[i]) {
            /* on a counter (or no time information: PAPI) and still 0 */
            ev->supported = 0;
            snprintf(ev->reason, sizeof ev->reason,
                     "ZERO: opened and scheduled but counted 0 over a calibration loop (virtual PMU not counting)");
        }
    }
    return 1;
}

/* Close an energy event's package descriptors. */
static void ctr_close_pkgs(ctr_event *ev) {
    for (int k = 0; k < ev->n_pkg; k++)
        if (ev->pkg_fd[k] >= 0) close(ev->pkg_fd[k]);
    ev->n_pkg = 0;
}

/* Open the energy events: for each, read the PMU's description under pmu_dir
 * and open it system-wide on one CPU per package; any failure leaves it
 * unsupported with the reason (a package that cannot be opened would make
 * the sum an undercount, so it fails the event). */
static void ctr_open_rapl(ctr_set *s, const char *pmu_dir) {
    for (int i = 0; i < s->n; i++) {
        ctr_event *ev = &s->ev[i];
        if (ev->def->kind != CTR_KIND_RAPL) continue;
        ctr_rapl_event re;
        if (ctr_rapl_probe(pmu_dir, ev->def->name, &re, ev->reason, sizeof ev->reason)) {
            ev->supported = 0;
            continue;
        }
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = re.type;
        a.config = re.config;
        a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
        int fail = 0;
        for (int k = 0; k < re.n_cpu && !fail; k++) {
            int fd = ctr_sys_open_on(&a, -1, re.cpu[k], -1);
            if (fd < 0) {
                ctr_set_reason(ev, -fd);
                size_t l = strlen(ev->reason); /* which package: a partial sum would undercount */
                if (re.n_cpu > 1) snprintf(ev->reason + l, sizeof ev->reason - l, " on CPU %d", re.cpu[k]);
                fail = 1;
            } else {
                ev->pkg_fd[ev->n_pkg++] = fd;
            }
        }
        if (fail) {
            ctr_close_pkgs(ev);
            continue;
        }
        ev->supported = 1;
        ev->exclude_kernel = 0;
        ev->scale = re.scale;
    }
}

/* Monotonic clock, ns. */
static double ctr_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* The energy events over 5 ms of work in this thread (RAPL updates about
 * every millisecond): unreadable, or a count that never moves (a VM that
 * exposes the PMU but not the energy), is unsupported rather than 0 J. */
static void ctr_calibrate_energy(ctr_set *s) {
    int any = 0;
    for (int i = 0; i < s->n; i++) any |= s->ev[i].def->kind == CTR_KIND_RAPL && s->ev[i].supported;
    if (!any) return;
    ctr_snap a, b;
    ctr_snapshot(s, &a);
    double t0 = ctr_now_ns();
    while (ctr_now_ns() - t0 < 5e6) ctr_spin(20000);
    ctr_snapshot(s, &b);
    for (int i = 0; i < s->n; i++) {
        ctr_event *ev = &s->ev[i];
        if (ev->def->kind != CTR_KIND_RAPL || !ev->supported) continue;
        if (!a.valid[i] || !b.valid[i]) {
            snprintf(ev->reason, sizeof ev->reason, "EIO: opened but could not be read");
        } else if (b.raw[i] == a.raw[i]) {
            snprintf(ev->reason, sizeof ev->reason,
                     "ZERO: opened but the energy count did not change over 5 ms of work (RAPL not updated here)");
        } else {
            continue;
        }
        ev->supported = 0;
        ctr_close_pkgs(ev);
    }
}
#endif /* __linux__ */

/* Open every event for the calling process; see counters.h. */
ctr_set *ctr_open(char *err, size_t errlen) {
    return ctr_open_at(CTR_PMU_DIR, err, errlen);
}

/* ctr_open with the energy PMU looked up under pmu_dir; see counters.h. */
ctr_set *ctr_open_at(const char *pmu_dir, char *err, size_t errlen) {
    ctr_set *s = calloc(1, sizeof *s);
    if (!s) {
        hx_fail(err, errlen, "counters: out of memory");
        return NULL;
    }
    if (errlen) err[0] = 0;
    s->n = CTR_NDEFS;
    s->group_fd = -1;
    for (int i = 0; i < s->n; i++) {
        s->ev[i].def = &ctr_defs[i];
        s->ev[i].fd = -1;
        s->ev[i].group_slot = -1;
        s->ev[i].exclude_kernel = 1;
        s->ev[i].scale = 1;
        for (int k = 0; k < CTR_MAX_PKGS; k++) s->ev[i].pkg_fd[k] = -1;
    }
#ifdef __linux__
    ctr_open_alone(s, CTR_KIND_SW);
    ctr_open_rapl(s, pmu_dir ? pmu_dir : CTR_PMU_DIR);
#ifdef CORTEX_PAPI
    {
        const char *names[CTR_MAX_EVENTS];
        int ok[CTR_MAX_EVENTS] = {0}, idx[CTR_MAX_EVENTS], nh = 0;
        char reasons[CTR_MAX_EVENTS][CTR_REASON_LEN];
        char perr[CTR_REASON_LEN] = "PAPI: not opened";
        for (int i = 0; i < s->n; i++)
            if (s->ev[i].def->kind == CTR_KIND_HW) {
                idx[nh] = i;
                names[nh++] = s->ev[i].def->name;
            }
        memset(reasons, 0, sizeof reasons);
        s->papi = ctr_papi_open(names, nh, ok, reasons, perr, sizeof perr);
        int any = 0;
        for (int k = 0; k < nh; k++) {
            ctr_event *ev = &s->ev[idx[k]];
            ev->supported = s->papi && ok[k];
            ev->papi_slot = ev->supported;
            ev->exclude_kernel = 1;
            if (!ev->supported) snprintf(ev->reason, sizeof ev->reason, "%.159s", reasons[k][0] ? reasons[k] : perr);
            any |= ev->supported;
        }
        snprintf(s->mode, sizeof s->mode, "%s", any ? "papi" : "none");
        if (any) ctr_calibrate(s);
    }
#else
    if (ctr_open_group(s) && ctr_calibrate(s)) {
        snprintf(s->mode, sizeof s->mode, "%s", s->group_fd >= 0 ? "group" : "none");
    } else {
        ctr_close_hw(s);
        ctr_open_alone(s, CTR_KIND_HW);
        ctr_calibrate(s);
        snprintf(s->mode, sizeof s->mode, "per-event");
    }
    int any_hw = 0;
    for (int i = 0; i < s->n; i++) any_hw |= s->ev[i].def->kind == CTR_KIND_HW && s->ev[i].supported;
    if (!any_hw) snprintf(s->mode, sizeof s->mode, "none");
#endif
    ctr_calibrate_energy(s);
#else
    (void)pmu_dir;
    for (int i = 0; i < s->n; i++) {
        s->ev[i].supported = 0;
        snprintf(s->ev[i].reason, sizeof s->ev[i].reason, "ENOSYS: perf_event_open exists only on Linux");
    }
    snprintf(s->mode, sizeof s->mode, "none");
#endif
    return s;
}

/* Close every descriptor (the group leader last) and free the set. */
void ctr_close(ctr_set *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) {
        if (s->ev[i].fd >= 0 && s->ev[i].fd != s->group_fd) close(s->ev[i].fd);
#ifdef __linux__
        ctr_close_pkgs(&s->ev[i]);
#endif
    }
    if (s->group_fd >= 0) close(s->group_fd);
#ifdef CORTEX_PAPI
    if (s->papi) ctr_papi_close(s->papi);
#endif
    free(s);
}

/* Number of events in the set. */
int ctr_count(const ctr_set *s) {
    return s ? s->n : 0;
}

/* Stored name of event i ("" when out of range). */
const char *ctr_name(const ctr_set *s, int i) {
    return s && i >= 0 && i < s->n ? s->ev[i].def->name : "";
}

/* Unit of event i: "count", "ns" or "J". */
const char *ctr_unit(const ctr_set *s, int i) {
    return s && i >= 0 && i < s->n ? s->ev[i].def->unit : "";
}

/* 1 if event i is counted. */
int ctr_supported(const ctr_set *s, int i) {
    return s && i >= 0 && i < s->n && s->ev[i].supported;
}

/* Why event i is not counted; "" when it is. */
const char *ctr_reason(const ctr_set *s, int i) {
    if (!s || i < 0 || i >= s->n) return "no such event";
    return s->ev[i].supported ? "" : s->ev[i].reason;
}

/* Privilege scope of event i's count ("system" for energy). */
const char *ctr_scope(const ctr_set *s, int i) {
    if (!s || i < 0 || i >= s->n) return "";
    if (s->ev[i].def->kind == CTR_KIND_RAPL) return "system";
    return s->ev[i].exclude_kernel ? "user" : "user+kernel";
}

/* Hardware read mode. */
const char *ctr_mode(const ctr_set *s) {
    return s ? s->mode : "none";
}

/* Index of the event with this stored name, or -1. */
int ctr_find(const ctr_set *s, const char *name) {
    for (int i = 0; s && i < s->n; i++)
        if (strcmp(s->ev[i].def->name, name) == 0) return i;
    return -1;
}

/* Log line: "mode group, 8/9 events; llc-load-misses: ENOENT: ...". */
void ctr_summary(const ctr_set *s, char *buf, size_t len) {
    if (!len) return;
    if (!s) {
        snprintf(buf, len, "counters off");
        return;
    }
    int ok = 0;
    for (int i = 0; i < s->n; i++) ok += s->ev[i].supported;
    size_t used = (size_t)snprintf(buf, len, "mode %s, %d/%d events", s->mode, ok, s->n);
    for (int i = 0; i < s->n && used < len; i++) {
        if (s->ev[i].supported) continue;
        used += (size_t)snprintf(buf + used, len - used, "; %s: %s", s->ev[i].def->name, s->ev[i].reason);
    }
}

/* Cumulative value of a read scaled for multiplexing: raw * enabled / running,
 * raw if no times (in raw counts: the caller applies the unit scale). */
static double ctr_scale(uint64_t raw, uint64_t en, uint64_t run) {
    if (run == 0 || run >= en) return (double)raw;
    return (double)raw * ((double)en / (double)run);
}

/* Read every event's cumulative value (no allocation; between tokens). */
void ctr_snapshot(ctr_set *s, ctr_snap *out) {
    memset(out, 0, sizeof *out);
    if (!s) return;
    out->n = s->n;
    if (s->group_fd >= 0) {
        uint64_t buf[3 + CTR_MAX_EVENTS];
        ssize_t want = (ssize_t)((3 + (size_t)s->group_n) * sizeof(uint64_t));
        ssize_t got = read(s->group_fd, buf, sizeof buf);
        if (got == want && buf[0] == (uint64_t)s->group_n) {
            for (int i = 0; i < s->n; i++) {
                ctr_event *ev = &s->ev[i];
                if (ev->group_slot < 0 || !ev->supported) continue;
                out->raw[i] = buf[3 + ev->group_slot];
                out->enabled[i] = buf[1];
                out->running[i] = buf[2];
                out->valid[i] = 1;
            }
        }
    }
#ifdef CORTEX_PAPI
    if (s->papi) {
        uint64_t vals[CTR_MAX_EVENTS] = {0};
        if (ctr_papi_read(s->papi, vals) == 0) {
            int k = 0;
            for (int i = 0; i < s->n; i++) {
                ctr_event *ev = &s->ev[i];
                if (ev->def->kind != CTR_KIND_HW) continue;
                if (ev->papi_slot && ev->supported) {
                    out->raw[i] = vals[k];
                    out->valid[i] = 1;
                }
                k++;
            }
        }
    }
#endif
    for (int i = 0; i < s->n; i++) {
        ctr_event *ev = &s->ev[i];
        if (ev->supported && ev->fd >= 0 && ev->group_slot < 0) {
            uint64_t v[3];
            if (read(ev->fd, v, sizeof v) == (ssize_t)sizeof v) {
                out->raw[i] = v[0];
                out->enabled[i] = v[1];
                out->running[i] = v[2];
                out->valid[i] = 1;
            }
        }
        if (ev->supported && ev->n_pkg > 0) {
            /* energy: the sum over packages, valid only if every one was read */
            int ok = 1;
            for (int k = 0; k < ev->n_pkg; k++) {
                uint64_t v[3];
                if (read(ev->pkg_fd[k], v, sizeof v) != (ssize_t)sizeof v) {
                    ok = 0;
                    break;
                }
                out->raw[i] += v[0];
                out->enabled[i] += v[1];
                out->running[i] += v[2];
            }
            out->valid[i] = ok;
            if (!ok) out->raw[i] = out->enabled[i] = out->running[i] = 0;
        }
        out->scale[i] = ev->scale;
        if (out->valid[i]) out->value[i] = ctr_scale(out->raw[i], out->enabled[i], out->running[i]) * ev->scale;
    }
}

/* Empty accumulator named `name`. */
void ctr_phase_init(ctr_phase *p, const char *name) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name ? name : "");
}

/*
 * Add one interval. The delta is scaled by the interval's own enabled/running
 * ratio (more faithful than differencing two cumulative scaled values); an
 * interval where the event was enabled but never on a counter, or unreadable,
 * is counted as lost rather than as 0.
 */
void ctr_accumulate(ctr_phase *acc, const ctr_snap *before, const ctr_snap *after) {
    int n = before->n < after->n ? before->n : after->n;
    if (n > CTR_MAX_EVENTS) n = CTR_MAX_EVENTS;
    if (acc->n < n) acc->n = n;
    for (int i = 0; i < n; i++) {
        if (!before->valid[i] || !after->valid[i] || after->raw[i] < before->raw[i] ||
            after->enabled[i] < before->enabled[i] || after->running[i] < before->running[i]) {
            acc->lost[i]++;
            continue;
        }
        uint64_t draw = after->raw[i] - before->raw[i];
        uint64_t den = after->enabled[i] - before->enabled[i];
        uint64_t drun = after->running[i] - before->running[i];
        double delta;
        if (drun > 0)
            delta = drun >= den ? (double)draw : (double)draw * ((double)den / (double)drun);
        else if (den == 0)
            delta = (double)draw; /* no time information (PAPI), or nothing ran */
        else {
            acc->lost[i]++;
            continue;
        }
        acc->value[i] += delta * (after->scale[i] > 0 ? after->scale[i] : 1.0);
        acc->enabled_ns[i] += (double)den;
        acc->running_ns[i] += (double)drun;
        acc->intervals[i]++;
    }
}

/* dst += src, event by event. */
void ctr_phase_add(ctr_phase *dst, const ctr_phase *src) {
    if (dst->n < src->n) dst->n = src->n;
    for (int i = 0; i < src->n && i < CTR_MAX_EVENTS; i++) {
        dst->value[i] += src->value[i];
        dst->enabled_ns[i] += src->enabled_ns[i];
        dst->running_ns[i] += src->running_ns[i];
        dst->intervals[i] += src->intervals[i];
        dst->lost[i] += src->lost[i];
    }
}

/* A value to store: some interval measured it and none was lost. */
int ctr_phase_valid(const ctr_phase *p, int i) {
    return i >= 0 && i < p->n && i < CTR_MAX_EVENTS && p->intervals[i] > 0 && p->lost[i] == 0;
}
