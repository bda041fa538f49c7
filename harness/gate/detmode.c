/*
 * detmode.c - see detmode.h: run the micro workload in a child process under
 * callgrind or with a perf instructions counter, and read the count back.
 *
 * The child's stdout and stderr go to temporary files (no pipes to drain, no
 * deadlock whatever it prints); callgrind writes its profile to a third one.
 * All three are removed before returning.
 */
#include "detmode.h"
#include "hx_err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef __linux__
#include <linux/perf_event.h>
#endif

/* ---- perf: one user-mode instructions counter ---- */

int det_perf_open(char *err, size_t errlen) {
#ifdef __linux__
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_HARDWARE;
    a.config = PERF_COUNT_HW_INSTRUCTIONS;
    a.disabled = 1;
    a.exclude_kernel = 1; /* user mode only: allowed at perf_event_paranoid 2, and what the code executes */
    a.exclude_hv = 1;
    a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
    if (fd < 0) {
        /* Whatever errno the kernel picks (ENOENT, ENODEV, EOPNOTSUPP on a VM
         * without a PMU, EACCES/EPERM under perf_event_paranoid, ENOSYS...),
         * the caller only learns that the counter cannot be had, and why. */
        int e = errno;
        return hx_fail(err, errlen, "perf_event_open(instructions): %s%s", strerror(e),
                       e == EACCES || e == EPERM ? " (see /proc/sys/kernel/perf_event_paranoid)"
                       : e == ENOSYS             ? " (kernel without perf events)"
                                                 : " (no hardware counter for it on this CPU/VM)");
    }
    return fd;
#else
    return hx_fail(err, errlen, "perf_event_open exists only on Linux");
#endif
}

void det_perf_start(int fd) {
#ifdef __linux__
    ioctl(fd, PERF_EVENT_IOC_RESET, 0);
    ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
#else
    (void)fd;
#endif
}

long long det_perf_stop(int fd) {
#ifdef __linux__
    ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
    uint64_t v[3]; /* value, time enabled, time running */
    if (read(fd, v, sizeof v) != (ssize_t)sizeof v) return -1;
    if (v[2] != v[1]) return -1; /* multiplexed: the count would be an estimate */
    return (long long)v[0];
#else
    (void)fd;
    return -1;
#endif
}

int det_perf_supported(char *err, size_t errlen) {
    int fd = det_perf_open(err, errlen);
    if (fd < 0) return 0;
    det_perf_start(fd);
    volatile unsigned x = 0; /* some work to count */
    for (unsigned i = 0; i < 100000; i++) x = x + i;
    (void)x;
    long long n = det_perf_stop(fd);
    close(fd);
    if (n <= 0) { /* a virtual PMU can accept the event and never count */
        hx_fail(err, errlen, "the instructions counter opens but %s", n < 0 ? "cannot be read" : "counts nothing");
        return 0;
    }
    return 1;
}

int det_have_valgrind(void) {
    const char *path = getenv("PATH");
    if (!path) return 0;
    char dir[4096];
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        snprintf(dir, sizeof dir, "%.*s/valgrind", (int)n, n ? p : ".");
        if (access(dir, X_OK) == 0) return 1;
        p += n;
        if (*p == ':') p++;
    }
    return 0;
}

/* ---- the child process ---- */

/* A temporary file "<TMPDIR>/cortex-det-<what>-XXXXXX"; its path in `path`. */
static int temp_file(const char *what, char *path, size_t n) {
    const char *dir = getenv("TMPDIR");
    snprintf(path, n, "%s/cortex-det-%s-XXXXXX", dir && *dir ? dir : "/tmp", what);
    return mkstemp(path);
}

/* Read a whole (small) file into a NUL-terminated buffer; NULL on failure. */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (len < cap - 1) break;
        char *nb = realloc(buf, cap *= 2);
        if (!nb) { free(buf); buf = NULL; }
        else buf = nb;
    }
    fclose(f);
    if (buf) buf[len] = 0;
    return buf;
}

/* The last non-empty line of `text` (for error messages), into out. */
static void last_line(const char *text, char *out, size_t n) {
    out[0] = 0;
    if (!text) return;
    const char *end = text + strlen(text);
    while (end > text && (end[-1] == '\n' || end[-1] == '\r')) end--;
    const char *start = end;
    while (start > text && start[-1] != '\n') start--;
    snprintf(out, n, "%.*s", (int)(end - start), start);
}

extern char **environ;

/* Run argv with stdout/stderr into files and this environment plus
 * LD_BIND_NOW=1: every dynamic symbol is bound at start-up, not on its first
 * call, which would otherwise land inside the measured region and cost more
 * or less depending on what else the binary links (two builds of the same
 * engine differed by 171 instructions that way). Returns the exit status
 * (0..255), 128+signal, or -1 if it could not be started (message in err). */
static int run_child(char *const argv[], const char *out_path, const char *err_path, char *err, size_t errlen) {
    size_t n = 0;
    while (environ && environ[n]) n++;
    char **envp = malloc(sizeof(char *) * (n + 2)); /* built before fork: the child only execs */
    if (!envp) return hx_fail(err, errlen, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "LD_BIND_NOW=", 12)) envp[k++] = environ[i];
    envp[k++] = "LD_BIND_NOW=1";
    envp[k] = NULL;
    pid_t pid = fork();
    if (pid < 0) {
        free(envp);
        return hx_fail(err, errlen, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        int o = open(out_path, O_WRONLY | O_TRUNC), e = open(err_path, O_WRONLY | O_TRUNC);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0) _exit(126);
        close(o);
        close(e);
        execvpe(argv[0], argv, envp);
        static const char msg[] = "cannot run the measured command (exec failed)\n";
        if (write(2, msg, sizeof msg - 1) < 0) _exit(127);
        _exit(127);
    }
    free(envp);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return hx_fail(err, errlen, "waitpid: %s", strerror(errno));
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* Total Ir of a callgrind output file: its "totals:" line, or "summary:" in
 * older formats. -1 if neither is there. */
static double callgrind_total(const char *text) {
    double summary = -1;
    for (const char *p = text; p && *p;) {
        if (!strncmp(p, "totals:", 7)) return strtod(p + 7, NULL);
        if (!strncmp(p, "summary:", 8)) summary = strtod(p + 8, NULL);
        p = strchr(p, '\n');
        if (p) p++;
    }
    return summary;
}

int det_measure(const char *bench_bin, const char *model, const char *mode, int test_prompt, int test_gen,
                double *instructions, char *mode_used, size_t mode_len, char *isa_used, size_t isa_len, char *err,
                size_t errlen) {
    *instructions = 0;
    if (mode_len) mode_used[0] = 0;
    char why[256] = "";
    int use_callgrind;
    if (!strcasecmp(mode, "callgrind")) {
        if (!det_have_valgrind())
            return hx_fail_code(err, errlen, DET_EUNAVAIL,
                                "callgrind mode: valgrind is not on PATH (apt-get install valgrind)");
        use_callgrind = 1;
    } else if (!strcasecmp(mode, "perf")) {
        if (!det_perf_supported(why, sizeof why))
            return hx_fail_code(err, errlen, DET_EUNAVAIL, "perf mode: %s", why);
        use_callgrind = 0;
    } else if (!strcasecmp(mode, "auto")) {
        if (det_have_valgrind()) use_callgrind = 1;
        else if (det_perf_supported(why, sizeof why)) use_callgrind = 0;
        else
            return hx_fail_code(err, errlen, DET_EUNAVAIL,
                                "no deterministic mode available: valgrind is not on PATH and the perf instructions "
                                "counter is unusable (%s)", why);
    } else {
        return hx_fail_code(err, errlen, DET_EFAIL, "unknown deterministic mode '%s' (callgrind, perf, auto)", mode);
    }
    if (test_prompt < 1 || test_gen < 0)
        return hx_fail_code(err, errlen, DET_EFAIL, "micro workload needs >= 1 prompt token and >= 0 steps");

    char out_path[512], err_path[512], cg_path[512] = "", np[16], ng[16], toggle[64], cgfile[600];
    int fo = temp_file("out", out_path, sizeof out_path), fe = temp_file("err", err_path, sizeof err_path);
    int fc = use_callgrind ? temp_file("callgrind", cg_path, sizeof cg_path) : -2;
    int rc = DET_EFAIL;
    char *out = NULL, *errtext = NULL, *cg = NULL;
    if (fo < 0 || fe < 0 || fc == -1) {
        hx_fail(err, errlen, "cannot create a temporary file: %s", strerror(errno));
        goto done;
    }
    snprintf(np, sizeof np, "%d", test_prompt);
    snprintf(ng, sizeof ng, "%d", test_gen);
    snprintf(toggle, sizeof toggle, "--toggle-collect=%s", DET_MICRO_FN);
    snprintf(cgfile, sizeof cgfile, "--callgrind-out-file=%s", cg_path);
    const char *argv[20];
    int k = 0;
    if (use_callgrind) {
        argv[k++] = "valgrind";
        argv[k++] = "--tool=callgrind";
        argv[k++] = "--quiet";
        argv[k++] = cgfile;
        argv[k++] = "--collect-atstart=no"; /* only inside the workload function */
        argv[k++] = toggle;
    }
    argv[k++] = bench_bin;
    argv[k++] = "micro";
    argv[k++] = "--model";
    argv[k++] = model;
    argv[k++] = "--prompt";
    argv[k++] = np;
    argv[k++] = "--gen";
    argv[k++] = ng;
    if (!use_callgrind) argv[k++] = "--count";
    argv[k] = NULL;

    int st = run_child((char *const *)argv, out_path, err_path, err, errlen);
    if (st < 0) goto done;
    out = slurp(out_path);
    errtext = slurp(err_path);
    if (st != 0) {
        char line[400];
        last_line(errtext, line, sizeof line);
        if (st == 127 && errtext && strstr(errtext, "exec failed")) {
            hx_fail(err, errlen, "cannot run %s", argv[0]);
        } else if (errtext && strstr(errtext, "unknown command 'micro'")) {
            hx_fail(err, errlen, "%s has no micro subcommand (it predates the deterministic gate mode)", bench_bin);
            rc = DET_ENOMICRO;
        } else {
            hx_fail(err, errlen, "%s%s micro exited with status %d: %s", use_callgrind ? "valgrind " : "", bench_bin,
                    st, line[0] ? line : "(no message)");
        }
        goto done;
    }
    /* The child names its workload version; counts of different versions measure different work. */
    const char *ver = out ? strstr(out, "micro_version=") : NULL;
    if (!ver || atoi(ver + 14) != DET_MICRO_VERSION) {
        hx_fail(err, errlen, "%s runs micro workload version %d, this cortex-bench measures version %d: not comparable",
                bench_bin, ver ? atoi(ver + 14) : 0, DET_MICRO_VERSION);
        goto done;
    }
    if (use_callgrind) {
        cg = slurp(cg_path);
        double ir = cg ? callgrind_total(cg) : -1;
        if (ir < 0) {
            hx_fail(err, errlen, "%s: no totals: or summary: line in the callgrind output", cg_path);
            goto done;
        }
        if (ir <= 0) { /* the toggle never matched: no symbol of that name in the binary */
            hx_fail(err, errlen, "callgrind counted 0 instructions: %s has no function %s", bench_bin, DET_MICRO_FN);
            goto done;
        }
        *instructions = ir;
    } else {
        const char *p = out ? strstr(out, "instructions=") : NULL;
        double n = p ? strtod(p + 13, NULL) : 0;
        if (n <= 0) {
            char line[400];
            last_line(out, line, sizeof line);
            hx_fail(err, errlen, "%s micro --count printed no instruction count (%s)", bench_bin, line);
            goto done;
        }
        *instructions = n;
    }
    snprintf(mode_used, mode_len, "%s", use_callgrind ? "callgrind" : "perf");
    const char *isa = out ? strstr(out, " isa=") : NULL;
    size_t il = isa ? strcspn(isa + 5, " \r\n") : 0;
    snprintf(isa_used, isa_len, "%.*s", il ? (int)il : 7, il ? isa + 5 : "unknown");
    rc = 0;
done:
    free(out);
    free(errtext);
    free(cg);
    if (fo >= 0) close(fo), unlink(out_path);
    if (fe >= 0) close(fe), unlink(err_path);
    if (fc >= 0) close(fc), unlink(cg_path);
    return rc;
}
