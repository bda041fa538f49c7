/*
 * env.c - see env.h. Everything is read from /proc, /sys, uname, sysconf,
 * sched_getaffinity and CPUID; nothing is spawned, so collecting the
 * environment cannot disturb the run it describes.
 */
#include "env.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "sha256.h"
#include "hx_err.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define ENV_X86 1
#endif

/* ISA extensions the kernels care about: the name reported, and the
 * /proc/cpuinfo flag that stands for it. Kept sorted by name. */
typedef struct env_isa {
    const char *name, *cpuinfo;
} env_isa;
static const env_isa env_isas[] = {
    {"amx", "amx_tile"},       {"avx", "avx"},           {"avx2", "avx2"},         {"avx512_vnni", "avx512_vnni"},
    {"avx512bw", "avx512bw"},  {"avx512f", "avx512f"},   {"avx512vl", "avx512vl"}, {"avx_vnni", "avx_vnni"},
    {"f16c", "f16c"},          {"fma", "fma"},           {"sse4_2", "sse4_2"},
};
#define ENV_NISA ((int)(sizeof env_isas / sizeof env_isas[0]))

/* Copy src into dst (size n), dropping leading/trailing whitespace. */
static void env_copy_trim(char *dst, size_t n, const char *src) {
    while (*src && isspace((unsigned char)*src)) src++;
    size_t len = strlen(src);
    while (len && isspace((unsigned char)src[len - 1])) len--;
    if (len >= n) len = n - 1;
    memcpy(dst, src, len);
    dst[len] = 0;
}

/* First line of a small file, trimmed, into buf; 0, or -1 if unreadable. */
static int env_read_line(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512];
    int rc = fgets(line, sizeof line, f) ? 0 : -1;
    fclose(f);
    if (rc == 0) env_copy_trim(buf, n, line);
    return rc;
}

/* 1 if the space-separated word list `flags` contains `word`. */
static int env_has_word(const char *flags, const char *word) {
    size_t wl = strlen(word);
    for (const char *p = flags; (p = strstr(p, word)) != NULL; p += wl) {
        int start = p == flags || isspace((unsigned char)p[-1]);
        int end = p[wl] == 0 || isspace((unsigned char)p[wl]);
        if (start && end) return 1;
    }
    return 0;
}

#ifdef ENV_X86
/* XCR0 (which register states the OS saves); only call when OSXSAVE is set. */
static uint64_t env_xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* Bitmask over env_isas of the extensions CPUID reports AND the OS enables
 * (XCR0 state bits for YMM, ZMM/opmask, AMX tiles). */
static unsigned env_cpuid_isa(void) {
    unsigned a, b, c, d, c1 = 0, b7 = 0, c7 = 0, d7 = 0, a71 = 0;
    if (!__get_cpuid(1, &a, &b, &c1, &d)) return 0;
    unsigned max = (unsigned)__get_cpuid_max(0, NULL);
    if (max >= 7) {
        __cpuid_count(7, 0, a, b7, c7, d7);
        if (a >= 1) __cpuid_count(7, 1, a71, b, c, d);
    }
    uint64_t xcr0 = (c1 >> 27) & 1 ? env_xgetbv0() : 0;
    int avx_os = (xcr0 & 0x6) == 0x6;
    int avx512_os = avx_os && (xcr0 & 0xe0) == 0xe0;
    int amx_os = (xcr0 & 0x60000) == 0x60000;
    unsigned m = 0;
    for (int i = 0; i < ENV_NISA; i++) {
        const char *n = env_isas[i].name;
        int ok = 0;
        if (!strcmp(n, "sse4_2")) ok = (c1 >> 20) & 1;
        else if (!strcmp(n, "avx")) ok = avx_os && ((c1 >> 28) & 1);
        else if (!strcmp(n, "fma")) ok = avx_os && ((c1 >> 12) & 1);
        else if (!strcmp(n, "f16c")) ok = avx_os && ((c1 >> 29) & 1);
        else if (!strcmp(n, "avx2")) ok = avx_os && ((b7 >> 5) & 1);
        else if (!strcmp(n, "avx512f")) ok = avx512_os && ((b7 >> 16) & 1);
        else if (!strcmp(n, "avx512bw")) ok = avx512_os && ((b7 >> 30) & 1);
        else if (!strcmp(n, "avx512vl")) ok = avx512_os && ((b7 >> 31) & 1);
        else if (!strcmp(n, "avx512_vnni")) ok = avx512_os && ((c7 >> 11) & 1);
        else if (!strcmp(n, "avx_vnni")) ok = avx_os && ((a71 >> 4) & 1);
        else if (!strcmp(n, "amx")) ok = amx_os && ((d7 >> 24) & 1);
        if (ok) m |= 1u << i;
    }
    return m;
}

/* CPUID brand string (leaves 0x80000002..4), trimmed; "" if absent. */
static void env_cpuid_brand(char *out, size_t n) {
    unsigned r[12];
    out[0] = 0;
    if ((unsigned)__get_cpuid_max(0x80000000, NULL) < 0x80000004u) return;
    for (unsigned i = 0; i < 3; i++) __get_cpuid(0x80000002 + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
    char s[49];
    memcpy(s, r, 48);
    s[48] = 0;
    env_copy_trim(out, n, s);
}

/* CPUID leaf 0's vendor string ("GenuineIntel") into out (>= 13 bytes); "" if absent. */
static void env_cpuid_vendor(char *out, size_t n) {
    unsigned a, r[3];
    out[0] = 0;
    if (n < 13 || !__get_cpuid(0, &a, &r[0], &r[2], &r[1])) return; /* EBX, EDX, ECX spell it in that order */
    memcpy(out, r, 12);
    out[12] = 0;
}
#endif

/* See env.h. */
void env_cpuid_signature(uint32_t eax, int *family, int *model, int *stepping) {
    int base_family = (int)((eax >> 8) & 0xf), base_model = (int)((eax >> 4) & 0xf);
    *stepping = (int)(eax & 0xf);
    *family = base_family == 0xf ? base_family + (int)((eax >> 20) & 0xff) : base_family;
    *model = base_family == 0x6 || base_family == 0xf ? (int)((eax >> 16) & 0xf) << 4 | base_model : base_model;
}

/* A cpuinfo number field ("26"), or -1 when it is not one. */
static int env_cpuinfo_int(const char *v) {
    char *end;
    while (isspace((unsigned char)*v)) v++;
    if (!isdigit((unsigned char)*v)) return -1;
    errno = 0;
    long x = strtol(v, &end, 10);
    while (isspace((unsigned char)*end)) end++;
    return errno || *end || x > INT_MAX ? -1 : (int)x;
}

/* One identity field from two sources (-1: the source has none): the value
 * both give or the only one given; -1 (unknown) when they disagree. */
static int env_agree(int cpuid, int cpuinfo) {
    if (cpuid < 0) return cpuinfo;
    if (cpuinfo < 0) return cpuid;
    return cpuid == cpuinfo ? cpuid : -1;
}

/* Distinct (package, core) pairs over the online CPUs from sysfs; 0 if unknown. */
static int env_physical_cores(void) {
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    if (ncpu <= 0) return 0;
    if (ncpu > 8192) ncpu = 8192;
    long *keys = calloc((size_t)ncpu, sizeof *keys);
    if (!keys) return 0;
    int n = 0;
    for (long c = 0; c < ncpu; c++) {
        char path[128], v[32];
        long pkg, core;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%ld/topology/physical_package_id", c);
        if (env_read_line(path, v, sizeof v)) continue;
        pkg = atol(v);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%ld/topology/core_id", c);
        if (env_read_line(path, v, sizeof v)) continue;
        core = atol(v);
        long key = pkg * 1000000L + core;
        int seen = 0;
        for (int k = 0; k < n && !seen; k++) seen = keys[k] == key;
        if (!seen) keys[n++] = key;
    }
    free(keys);
    return n;
}

/* Number of /sys/devices/system/node/nodeN directories; 1 if the directory
 * is absent (a kernel without NUMA has exactly one node). */
static int env_numa_nodes(void) {
    DIR *d = opendir("/sys/devices/system/node");
    if (!d) return 1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (!strncmp(de->d_name, "node", 4) && isdigit((unsigned char)de->d_name[4])) n++;
    closedir(d);
    return n ? n : 1;
}

/* The harness's own compiler, from the predefined macros. */
static void env_compiler(char *out, size_t n) {
#if defined(__clang__)
    snprintf(out, n, "clang %s", __VERSION__);
#elif defined(__GNUC__)
    snprintf(out, n, "gcc %s", __VERSION__);
#else
    snprintf(out, n, "unknown");
#endif
}

/* Collect every field; see env.h. */
int env_collect(env_info *e) {
    int rc = 0;
    memset(e, 0, sizeof *e);

    /* /proc/cpuinfo: model name, flags (x86) or Features (arm), hypervisor. */
    char flags[4096] = "", ci_vendor[16] = "";
    int have_cpuinfo_flags = 0, ci_family = -1, ci_model = -1, ci_stepping = -1, block = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char *line = NULL;
        size_t cap = 0;
        while (getline(&line, &cap, f) > 0) {
            char *colon = strchr(line, ':');
            if (!colon) continue;
            size_t klen = (size_t)(colon - line);
            while (klen && isspace((unsigned char)line[klen - 1])) klen--;
            if (klen == 9 && !strncmp(line, "processor", 9)) block++;
            int first = block <= 1; /* the identity fields of the first processor's block */
            if (!e->cpu_model[0] && klen == 10 && !strncmp(line, "model name", 10))
                env_copy_trim(e->cpu_model, sizeof e->cpu_model, colon + 1);
            else if (first && klen == 9 && !strncmp(line, "vendor_id", 9))
                env_copy_trim(ci_vendor, sizeof ci_vendor, colon + 1);
            else if (first && klen == 10 && !strncmp(line, "cpu family", 10))
                ci_family = env_cpuinfo_int(colon + 1);
            else if (first && klen == 5 && !strncmp(line, "model", 5))
                ci_model = env_cpuinfo_int(colon + 1);
            else if (first && klen == 8 && !strncmp(line, "stepping", 8))
                ci_stepping = env_cpuinfo_int(colon + 1);
            else if (first && klen == 9 && !strncmp(line, "microcode", 9))
                env_copy_trim(e->microcode, sizeof e->microcode, colon + 1);
            else if (!have_cpuinfo_flags && ((klen == 5 && !strncmp(line, "flags", 5)) ||
                                             (klen == 8 && !strncmp(line, "Features", 8)))) {
                env_copy_trim(flags, sizeof flags, colon + 1);
                have_cpuinfo_flags = 1;
            }
        }
        free(line);
        fclose(f);
    }
    e->hypervisor = have_cpuinfo_flags && env_has_word(flags, "hypervisor");

    unsigned cpuid_mask = 0;
    int have_cpuid = 0, id_family = -1, id_model = -1, id_stepping = -1;
    char id_vendor[16] = "";
#ifdef ENV_X86
    have_cpuid = 1;
    cpuid_mask = env_cpuid_isa();
    env_cpuid_vendor(id_vendor, sizeof id_vendor);
    {
        unsigned a, b, c, d;
        if (__get_cpuid(1, &a, &b, &c, &d)) env_cpuid_signature(a, &id_family, &id_model, &id_stepping);
    }
    if (!e->cpu_model[0]) env_cpuid_brand(e->cpu_model, sizeof e->cpu_model);
    if (!have_cpuinfo_flags) {
        unsigned a, b, c = 0, d;
        if (__get_cpuid(1, &a, &b, &c, &d)) e->hypervisor = (c >> 31) & 1;
    }
#endif
    if (!e->cpu_model[0]) {
        snprintf(e->cpu_model, sizeof e->cpu_model, "unknown");
        rc = -1;
    }
    /* Identity: CPUID and the kernel's account of it must agree (they read
     * the same registers; a disagreement means one of them is not to be
     * trusted, so the field is unknown rather than either value). */
    e->cpu_family = env_agree(id_family, ci_family);
    e->cpu_model_id = env_agree(id_model, ci_model);
    e->cpu_stepping = env_agree(id_stepping, ci_stepping);
    if (id_vendor[0] && ci_vendor[0] && strcmp(id_vendor, ci_vendor)) snprintf(e->cpu_vendor, sizeof e->cpu_vendor, "unknown");
    else snprintf(e->cpu_vendor, sizeof e->cpu_vendor, "%s", id_vendor[0] ? id_vendor : ci_vendor[0] ? ci_vendor : "unknown");
    if (!e->microcode[0]) snprintf(e->microcode, sizeof e->microcode, "unknown");
    /* ISA: the intersection of what each available source reports. */
    size_t used = 0;
    for (int i = 0; i < ENV_NISA; i++) {
        int ok = (have_cpuinfo_flags || have_cpuid) &&
                 (!have_cpuinfo_flags || env_has_word(flags, env_isas[i].cpuinfo)) &&
                 (!have_cpuid || ((cpuid_mask >> i) & 1));
        if (!ok) continue;
        used += (size_t)snprintf(e->isa_flags + used, sizeof e->isa_flags - used, "%s%s", used ? " " : "",
                                 env_isas[i].name);
        if (used >= sizeof e->isa_flags) break; /* cannot happen: the list is short */
    }

    long onln = sysconf(_SC_NPROCESSORS_ONLN);
    e->logical_cores = onln > 0 ? (int)onln : 0;
    if (e->logical_cores <= 0) rc = -1;
    e->physical_cores = env_physical_cores();

    f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemTotal: %llu kB", &kb) == 1) {
                e->mem_bytes = (uint64_t)kb * 1024u;
                break;
            }
        fclose(f);
    }
    if (!e->mem_bytes) {
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        if (pages > 0 && psz > 0) e->mem_bytes = (uint64_t)pages * (uint64_t)psz;
    }
    if (!e->mem_bytes) rc = -1;

    struct utsname u;
    if (uname(&u) == 0)
        snprintf(e->kernel, sizeof e->kernel, "%.60s %.60s", u.sysname, u.release);
    else {
        snprintf(e->kernel, sizeof e->kernel, "unknown");
        rc = -1;
    }
    env_compiler(e->compiler, sizeof e->compiler);
    if (env_read_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", e->governor, sizeof e->governor) ||
        !e->governor[0])
        snprintf(e->governor, sizeof e->governor, "unavailable");
    if (gethostname(e->hostname, sizeof e->hostname) != 0) snprintf(e->hostname, sizeof e->hostname, "unknown");
    e->hostname[sizeof e->hostname - 1] = 0;
    e->numa_nodes = env_numa_nodes();
    return rc;
}

/* See env.h. */
void env_testbed(const env_info *e, char *out, size_t n) {
    char brand[64];
    size_t k = 0;
    int dash = 0;
    for (const char *p = e->cpu_model; *p && k + 1 < sizeof brand; p++) {
        char c = *p;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
            if (dash && k) brand[k++] = '-';
            brand[k++] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
            dash = 0;
        } else {
            dash = 1;
        }
    }
    brand[k] = 0;
    unsigned long long gib = (unsigned long long)((e->mem_bytes + (1ull << 29)) >> 30);
    if (e->cpu_family >= 0 && e->cpu_model_id >= 0)
        snprintf(out, n, "%s-f%dm%d-%dc-%llug", k ? brand : "cpu", e->cpu_family, e->cpu_model_id, e->logical_cores, gib);
    else
        snprintf(out, n, "%s-%dc-%llug", k ? brand : "cpu", e->logical_cores, gib);
}

/* SHA-256 over "key=value\n" lines of the comparability fields; memory is
 * rounded to the nearest GiB so small firmware reservations do not matter. */
void env_fingerprint(const env_info *e, char out_hex[65]) {
    char buf[1024];
    unsigned long long gib = (unsigned long long)((e->mem_bytes + (1ull << 29)) >> 30);
    int n = snprintf(buf, sizeof buf,
                     "cpu_model=%s\nisa_flags=%s\nlogical_cores=%d\nmem_gib=%llu\nkernel=%s\ncompiler=%s\n"
                     "cpu_vendor=%s\ncpu_family=%d\ncpu_model_id=%d\ncpu_stepping=%d\nmicrocode=%s\n",
                     e->cpu_model, e->isa_flags, e->logical_cores, gib, e->kernel, e->compiler, e->cpu_vendor,
                     e->cpu_family, e->cpu_model_id, e->cpu_stepping, e->microcode);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof buf) n = (int)sizeof buf - 1;
    sha256_ctx c;
    uint8_t d[32];
    sha256_init(&c);
    sha256_update(&c, buf, (size_t)n);
    sha256_final(&c, d);
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out_hex[2 * i] = hex[d[i] >> 4];
        out_hex[2 * i + 1] = hex[d[i] & 15];
    }
    out_hex[64] = 0;
}

/* Reset VmHWM to the current RSS (Linux >= 4.0: clear_refs value 5). */
int env_peak_rss_reset(void) {
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t w = write(fd, "5", 1);
    int saved = errno;
    close(fd);
    if (w != 1) {
        errno = w < 0 ? saved : EIO;
        return -1;
    }
    return 0;
}

/* Peak RSS in KiB: VmHWM, else ru_maxrss (KiB on Linux). */
long env_peak_rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        long kib = -1;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
        fclose(f);
        if (kib >= 0) return kib;
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) return ru.ru_maxrss;
    return -1;
}

/*
 * Parse a CPU list ("0", "0,1", "0-3,6") into set (max CPUs 0..max-1). For a
 * malformed list or a CPU >= max, -1 with a message (if err); quiet otherwise.
 */
static int env_parse_cpulist(const char *list, cpu_set_t *set, int max, char *err, size_t errlen) {
    CPU_ZERO(set);
    const char *p = list;
    if (!*p) {
        return hx_fail(err, errlen, "empty CPU list (expected e.g. 0, 0,1 or 0-3)");
    }
    while (*p) {
        long lo, hi;
        char *end;
        if (!isdigit((unsigned char)*p)) goto bad;
        errno = 0;
        lo = strtol(p, &end, 10);
        if (errno) lo = LONG_MAX;
        hi = lo;
        p = end;
        if (*p == '-') {
            p++;
            if (!isdigit((unsigned char)*p)) goto bad;
            errno = 0;
            hi = strtol(p, &end, 10);
            if (errno) hi = LONG_MAX;
            p = end;
            if (hi < lo) {
                return hx_fail(err, errlen, "CPU list '%s': range %ld-%ld is decreasing", list, lo, hi);
            }
        }
        if (*p == ',' && p[1]) p++;
        else if (*p) goto bad;
        if (hi >= max) {
            return hx_fail(err, errlen, "CPU list '%s': CPU %ld does not exist (this machine has CPUs 0-%d)", list,
                           hi, max - 1);
        }
        for (long c = lo; c <= hi; c++) CPU_SET((int)c, set);
    }
    return 0;
bad:
    return hx_fail(err, errlen, "'%s' is not a CPU list (expected e.g. 0, 0,1 or 0-3)", list);
}

/* Pin every current thread of the process to `list`; see env.h. */
int env_pin_cpus(const char *list, char *err, size_t errlen) {
    if (!list) list = "";
    long conf = sysconf(_SC_NPROCESSORS_CONF);
    int max = conf > 0 && conf < CPU_SETSIZE ? (int)conf : CPU_SETSIZE;
    cpu_set_t want, online;
    if (env_parse_cpulist(list, &want, max, err, errlen)) return -1;

    char on[256];
    if (env_read_line("/sys/devices/system/cpu/online", on, sizeof on) == 0 &&
        env_parse_cpulist(on, &online, CPU_SETSIZE, NULL, 0) == 0) {
        for (int c = 0; c < max; c++)
            if (CPU_ISSET(c, &want) && !CPU_ISSET(c, &online)) {
                return hx_fail(err, errlen, "CPU list '%s': CPU %d is offline (online: %s)", list, c, on);
            }
    }
    if (sched_setaffinity(0, sizeof want, &want) != 0) {
        int e = errno;
        if (e == EINVAL)
            hx_fail(err, errlen, "CPU list '%s': none of these CPUs is allowed to this process (cpuset?): %s", list,
                    strerror(e));
        else
            hx_fail(err, errlen, "CPU list '%s': sched_setaffinity: %s", list, strerror(e));
        return -1;
    }
    /* The kernel may intersect the mask with a cpuset silently: check. */
    cpu_set_t got;
    if (sched_getaffinity(0, sizeof got, &got) == 0 && !CPU_EQUAL(&got, &want)) {
        return hx_fail(err, errlen, "CPU list '%s': only part of it is allowed to this process (cpuset restriction)", list);
    }
    /* Threads that already exist (the caller's, if any); new ones inherit. */
    DIR *d = opendir("/proc/self/task");
    if (d) {
        pid_t self = (pid_t)syscall(SYS_gettid);
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (!isdigit((unsigned char)de->d_name[0])) continue;
            pid_t tid = (pid_t)atol(de->d_name);
            if (tid == self) continue;
            if (sched_setaffinity(tid, sizeof want, &want) != 0 && errno != ESRCH) {
                int e = errno;
                closedir(d);
                return hx_fail(err, errlen, "CPU list '%s': pinning thread %ld: %s", list, (long)tid, strerror(e));
            }
        }
        closedir(d);
    }
    return 0;
}

/* ---------------------------------------------------------------- one run */

/* See env.h. */
int env_cpulist_format(const cpu_set_t *set, char *out, size_t n) {
    size_t k = 0;
    int count = 0;
    if (n) out[0] = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, set)) continue;
        int hi = c;
        while (hi + 1 < CPU_SETSIZE && CPU_ISSET(hi + 1, set)) hi++;
        count += hi - c + 1;
        if (k < n) {
            int w = hi == c ? snprintf(out + k, n - k, "%s%d", k ? "," : "", c)
                            : snprintf(out + k, n - k, "%s%d-%d", k ? "," : "", c, hi);
            k += w > 0 ? (size_t)w : 0;
        }
        c = hi;
    }
    return count;
}

/* A non-negative decimal integer at *p (no sign), advancing *p; -1 if none or too large. */
static long long env_parse_count(const char **p) {
    if (!isdigit((unsigned char)**p)) return -1;
    char *end;
    errno = 0;
    long long x = strtoll(*p, &end, 10);
    if (errno) return -1;
    *p = end;
    return x;
}

/* See env.h. */
int env_parse_cpu_max(const char *text, double *cpus) {
    const char *p = text;
    long long quota = -1, period = -1;
    *cpus = 0;
    while (*p == ' ' || *p == '\t') p++;
    if (!strncmp(p, "max", 3)) p += 3;
    else if ((quota = env_parse_count(&p)) <= 0) return -1;
    if (*p == ' ' || *p == '\t') {
        while (*p == ' ' || *p == '\t') p++;
        if ((period = env_parse_count(&p)) <= 0) return -1;
    }
    while (isspace((unsigned char)*p)) p++;
    if (*p || (quota > 0 && period <= 0)) return -1; /* a quota needs its period to mean anything */
    if (quota > 0) *cpus = (double)quota / (double)period;
    return 0;
}

/* The smaller of two quotas where 0 means none. */
static double env_min_quota(double a, double b) { return a <= 0 ? b : b <= 0 ? a : a < b ? a : b; }

/*
 * Quota over `dir`/`path` and each ancestor up to `dir` itself: cgroup v2
 * (v1_period NULL: `file` is cpu.max) or v1 (`file` is cpu.cfs_quota_us,
 * `v1_period` cpu.cfs_period_us). Returns how many directories had the file.
 */
static int env_quota_walk(const char *dir, const char *path, const char *file, const char *v1_period, double *quota) {
    char p[PATH_MAX], f[PATH_MAX + 64], line[128];
    int found = 0;
    /* a path the namespace cannot show (it climbs out with ..) is read at the mount's root only */
    snprintf(p, sizeof p, "%s", strstr(path, "/..") || path[0] != '/' ? "/" : path);
    for (;;) {
        size_t len = strlen(p);
        while (len > 1 && p[len - 1] == '/') p[--len] = 0;
        snprintf(f, sizeof f, "%s%s/%s", dir, len > 1 ? p : "", file);
        if (env_read_line(f, line, sizeof line) == 0) {
            double q = 0;
            if (!v1_period) { /* v2: "max 100000" or "QUOTA PERIOD" */
                if (env_parse_cpu_max(line, &q) == 0) found++, *quota = env_min_quota(*quota, q);
            } else if (!strcmp(line, "-1")) { /* v1: no quota here */
                found++;
            } else { /* v1: QUOTA in cpu.cfs_quota_us, PERIOD in cpu.cfs_period_us */
                char per[64];
                const char *a = line, *b = per;
                long long us = env_parse_count(&a), period;
                snprintf(f, sizeof f, "%s%s/%s", dir, len > 1 ? p : "", v1_period);
                if (us > 0 && !*a && env_read_line(f, per, sizeof per) == 0 && (period = env_parse_count(&b)) > 0 && !*b)
                    found++, *quota = env_min_quota(*quota, (double)us / (double)period);
            }
        }
        if (len <= 1) break;
        char *slash = strrchr(p, '/');
        if (slash == p) p[1] = 0;
        else *slash = 0;
    }
    return found;
}

/* See env.h. */
int env_read_cgroup_cpus(const char *self_cgroup, const char *mount, double *cpus) {
    *cpus = 0;
    FILE *f = fopen(self_cgroup, "r");
    if (!f) return -1;
    char *line = NULL, v2[PATH_MAX] = "", v1[PATH_MAX] = "";
    size_t cap = 0;
    int have_v2 = 0, have_v1 = 0;
    while (getline(&line, &cap, f) > 0) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c1 = *c2 = 0;
        const char *ctrl = c1 + 1, *path = c2 + 1;
        if (!strcmp(line, "0") && !*ctrl) {
            snprintf(v2, sizeof v2, "%s", path);
            have_v2 = 1;
            continue;
        }
        /* v1: the controllers are a comma list; "cpu" alone, not "cpuset" or "cpuacct" */
        char list[256];
        snprintf(list, sizeof list, "%s", ctrl);
        for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
            if (!strcmp(tok, "cpu")) {
                snprintf(v1, sizeof v1, "%s", path);
                have_v1 = 1;
            }
    }
    free(line);
    fclose(f);
    double q = 0;
    int found = have_v2 ? env_quota_walk(mount, v2, "cpu.max", NULL, &q) : 0;
    if (!found && have_v1) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s/cpu", mount);
        found = env_quota_walk(dir, v1, "cpu.cfs_quota_us", "cpu.cfs_period_us", &q);
        if (!found) {
            snprintf(dir, sizeof dir, "%s/cpu,cpuacct", mount);
            found = env_quota_walk(dir, v1, "cpu.cfs_quota_us", "cpu.cfs_period_us", &q);
        }
    }
    *cpus = q;
    return found ? 0 : -1;
}

/* See env.h. */
int env_parse_thp(const char *text, char *out, size_t n) {
    const char *a = strchr(text, '['), *b = a ? strchr(a + 1, ']') : NULL;
    size_t len = b ? (size_t)(b - a - 1) : 0;
    int ok = len > 0 && len < n;
    for (size_t i = 0; ok && i < len; i++) ok = islower((unsigned char)a[1 + i]) || a[1 + i] == '_';
    if (!ok) {
        snprintf(out, n, "unknown");
        return -1;
    }
    memcpy(out, a + 1, len);
    out[len] = 0;
    return 0;
}

/* See env.h. */
int env_parse_loadavg(const char *text, double out[3]) {
    const char *p = text;
    for (int i = 0; i < 3; i++) {
        while (*p == ' ' || *p == '\t') p++;
        char *end;
        double x = isdigit((unsigned char)*p) ? strtod(p, &end) : -1;
        if (!(x >= 0) || !isfinite(x) || (*end && !isspace((unsigned char)*end))) {
            out[0] = out[1] = out[2] = NAN;
            return -1;
        }
        out[i] = x;
        p = end;
    }
    return 0;
}

/* See env.h. */
int env_read_loadavg(const char *path, double out[3]) {
    char line[256];
    if (env_read_line(path, line, sizeof line)) {
        out[0] = out[1] = out[2] = NAN;
        return -1;
    }
    return env_parse_loadavg(line, out);
}

/* See env.h. */
int env_loadavg(double out[3]) { return env_read_loadavg("/proc/loadavg", out); }

/* See env.h. */
void env_run_state_collect(env_run_state *r) {
    memset(r, 0, sizeof *r);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) r->cpus_allowed = env_cpulist_format(&set, r->affinity, sizeof r->affinity);
    env_read_cgroup_cpus("/proc/self/cgroup", "/sys/fs/cgroup", &r->cgroup_cpus);
    char line[256];
    if (env_read_line("/sys/kernel/mm/transparent_hugepage/enabled", line, sizeof line) ||
        env_parse_thp(line, r->thp, sizeof r->thp))
        snprintf(r->thp, sizeof r->thp, "unknown");
}

/* See env.h. */
int env_default_threads(const env_run_state *r) {
    long n = r->cpus_allowed;
    if (n <= 0) n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n <= 0) n = 1;
    if (r->cgroup_cpus > 0) {
        double cap = ceil(r->cgroup_cpus);
        if (cap < (double)n) n = (long)cap;
    }
    return n < 1 ? 1 : n > INT_MAX ? INT_MAX : (int)n;
}
