/*
 * test_env.c - the machine and the run's state as env.c reads them: CPU
 * lists formatted compactly, cgroup v2 cpu.max and v1 cfs quota/period
 * (from files written into a temp directory, ancestors and fallbacks
 * included), the THP mode's bracketed word, /proc/loadavg, the CPUID
 * signature decoded as the manuals display it, the default thread count,
 * and, on this machine, the identity cross-checked against /proc/cpuinfo
 * and taking part in the fingerprint.
 */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "env.h"
#include "fixture.h"


/* Write text to rel in the scratch directory, creating its directories. */
static void put(const char *rel, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s", fx_path("%s", rel));
    for (char *p = path + strlen(fx_dir()) + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(path, 0755);
            *p = '/';
        }
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "create %s: %s", path, strerror(errno));
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* The path of rel in the scratch directory. */
static const char *at(const char *rel) { return fx_path("%s", rel); }

/* A set of the listed CPUs (-1 ends the list). */
static cpu_set_t set_of(const int *cpus) {
    cpu_set_t s;
    CPU_ZERO(&s);
    for (; *cpus >= 0; cpus++) CPU_SET(*cpus, &s);
    return s;
}

static void test_cpulist(void) {
    static const struct { int cpus[12]; const char *want; int n; } cases[] = {
        {{-1}, "", 0},
        {{0, -1}, "0", 1},
        {{0, 1, -1}, "0-1", 2},
        {{0, 2, 3, 4, 6, -1}, "0,2-4,6", 5},
        {{1, 3, 5, -1}, "1,3,5", 3},
        {{0, 1, 2, 3, 8, 9, 63, -1}, "0-3,8-9,63", 7},
        {{CPU_SETSIZE - 1, -1}, "1023", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cpu_set_t s = set_of(cases[i].cpus);
        char out[64] = "junk";
        int n = env_cpulist_format(&s, out, sizeof out);
        CHECK(n == cases[i].n && !strcmp(out, cases[i].want), "case %zu: '%s' (%d CPUs), want '%s' (%d)", i, out, n,
              cases[i].want, cases[i].n);
    }
    /* A buffer too small: cut, terminated, the count still whole. */
    cpu_set_t s = set_of((const int[]){0, 2, 4, 6, 8, 10, -1});
    char small[6];
    memset(small, 'x', sizeof small);
    int n = env_cpulist_format(&s, small, sizeof small);
    CHECK(n == 6 && memchr(small, 0, sizeof small) != NULL && !strncmp(small, "0,2,4", 5),
          "a short buffer is cut and terminated ('%.6s', %d)", small, n);
}

static void test_cpu_max(void) {
    static const struct { const char *text; int rc; double cpus; } cases[] = {
        {"max 100000", 0, 0},     {"max 100000\n", 0, 0}, {"max", 0, 0},
        {"200000 100000", 0, 2},  {"150000 100000\n", 0, 1.5}, {"50000 100000", 0, 0.5},
        {"", -1, 0},              {"abc 100000", -1, 0},  {"-1 100000", -1, 0},
        {"200000", -1, 0},        {"200000 0", -1, 0},    {"0 100000", -1, 0},
        {"200000 100000 x", -1, 0}, {"max x", -1, 0},     {"maxi 100000", -1, 0},
        {"99999999999999999999999 1", -1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double c = 42;
        int rc = env_parse_cpu_max(cases[i].text, &c);
        CHECK(rc == cases[i].rc && c == cases[i].cpus, "'%s': rc %d, %g CPUs (want %d, %g)", cases[i].text, rc, c,
              cases[i].rc, cases[i].cpus);
    }
}

static void test_cgroup(void) {
    double c = 42;
    /* v2: the process's cgroup has no quota, its parent 1.5 CPUs, the grandparent 4: the tightest wins */
    put("v2/self", "0::/a/b\n");
    put("v2/fs/a/b/cpu.max", "max 100000\n");
    put("v2/fs/a/cpu.max", "150000 100000\n");
    put("v2/fs/cpu.max", "400000 100000\n");
    CHECK(env_read_cgroup_cpus(at("v2/self"), at("v2/fs"), &c) == 0 && c == 1.5, "v2 with ancestors: %g", c);
    /* v2 without a quota anywhere: read, and none */
    put("v2n/self", "0::/x\n");
    put("v2n/fs/x/cpu.max", "max 100000\n");
    CHECK(env_read_cgroup_cpus(at("v2n/self"), at("v2n/fs"), &c) == 0 && c == 0, "v2 without a quota: %g", c);
    /* v1 (cpu and cpuacct mounted together), no v2 cpu.max: 2 CPUs; cpuset's line must not count as cpu */
    put("v1/self", "5:cpuset:/other\n4:cpu,cpuacct:/docker/abc\n0::/\n");
    put("v1/fs/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "200000\n");
    put("v1/fs/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
    CHECK(env_read_cgroup_cpus(at("v1/self"), at("v1/fs"), &c) == 0 && c == 2, "v1 cfs quota: %g", c);
    /* v1 at the root with -1: read, no quota (this VM's own layout) */
    put("v1n/self", "1:cpu:/\n0::/\n");
    put("v1n/fs/cpu/cpu.cfs_quota_us", "-1\n");
    put("v1n/fs/cpu/cpu.cfs_period_us", "100000\n");
    CHECK(env_read_cgroup_cpus(at("v1n/self"), at("v1n/fs"), &c) == 0 && c == 0, "v1 quota -1: %g", c);
    /* a path that climbs out of the namespace: only the mount's root is read */
    put("up/self", "0::/../../elsewhere\n");
    put("up/fs/cpu.max", "300000 100000\n");
    CHECK(env_read_cgroup_cpus(at("up/self"), at("up/fs"), &c) == 0 && c == 3, "a path with ..: %g", c);
    /* a malformed cpu.max is skipped (the parent's still counts) */
    put("bad/self", "0::/k\n");
    put("bad/fs/k/cpu.max", "lots\n");
    put("bad/fs/cpu.max", "100000 100000\n");
    CHECK(env_read_cgroup_cpus(at("bad/self"), at("bad/fs"), &c) == 0 && c == 1, "malformed child skipped: %g", c);
    /* nothing to read: -1 and no quota */
    c = 42;
    CHECK(env_read_cgroup_cpus(at("none/self"), at("none/fs"), &c) == -1 && c == 0, "no /proc/self/cgroup: %g", c);
    put("nocpu/self", "5:cpuset:/a\n3:memory:/a\n");
    c = 42;
    CHECK(env_read_cgroup_cpus(at("nocpu/self"), at("nocpu/fs"), &c) == -1 && c == 0, "no cpu controller: %g", c);
}

static void test_thp(void) {
    static const struct { const char *text; int rc; const char *want; } cases[] = {
        {"always [madvise] never", 0, "madvise"}, {"[always] madvise never\n", 0, "always"},
        {"always madvise [never]", 0, "never"},   {"always defer defer+madvise [madvise] never", 0, "madvise"},
        {"always madvise never", -1, "unknown"},  {"[]", -1, "unknown"}, {"[madvise", -1, "unknown"},
        {"[MADVISE]", -1, "unknown"},             {"[mad vise]", -1, "unknown"}, {"", -1, "unknown"},
        {"[averyveryverylongmodename]", -1, "unknown"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[16] = "junk";
        int rc = env_parse_thp(cases[i].text, out, sizeof out);
        CHECK(rc == cases[i].rc && !strcmp(out, cases[i].want), "'%s': rc %d '%s' (want %d '%s')", cases[i].text, rc, out,
              cases[i].rc, cases[i].want);
    }
}

static void test_loadavg(void) {
    double l[3];
    CHECK(env_parse_loadavg("0.52 0.31 0.20 1/97 123", l) == 0 && l[0] == 0.52 && l[1] == 0.31 && l[2] == 0.20,
          "three averages: %g %g %g", l[0], l[1], l[2]);
    CHECK(env_parse_loadavg("12 3.5 0\n", l) == 0 && l[0] == 12 && l[1] == 3.5 && l[2] == 0, "integers: %g %g %g", l[0],
          l[1], l[2]);
    static const char *bad[] = {"", "1.00 2.00", "nan 1 1", "-1 0 0", "1.5x 2 3", "inf 1 1", "a b c", "1,5 2 3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(env_parse_loadavg(bad[i], l) == -1 && isnan(l[0]) && isnan(l[1]) && isnan(l[2]), "'%s' refused", bad[i]);
    put("loadavg", "1.36 1.11 0.75 3/97 28281\n");
    CHECK(env_read_loadavg(at("loadavg"), l) == 0 && l[0] == 1.36 && l[2] == 0.75, "from a file: %g %g %g", l[0], l[1],
          l[2]);
    CHECK(env_read_loadavg(at("no-such-file"), l) == -1 && isnan(l[0]), "no file: -1, NAN");
    if (access("/proc/loadavg", R_OK) == 0)
        CHECK(env_loadavg(l) == 0 && l[0] >= 0 && l[1] >= 0 && l[2] >= 0, "this machine's: %g %g %g", l[0], l[1], l[2]);
}

static void test_signature(void) {
    static const struct { uint32_t eax; int family, model, stepping; } cases[] = {
        {0x00B00F21, 26, 2, 1},    /* this VM's AMD (family 1Ah) */
        {0x00A10F11, 25, 17, 1},   /* AMD Zen 4 (family 19h, model 11h) */
        {0x00830F10, 23, 49, 0},   /* AMD Zen 2 (family 17h, model 31h) */
        {0x00050654, 6, 85, 4},    /* Intel Skylake-SP (family 6, model 55h) */
        {0x000806F8, 6, 143, 8},   /* Intel Sapphire Rapids (model 8Fh) */
        {0x00000F29, 15, 2, 9},    /* Pentium 4: family 15, extended family 0 */
        {0x00010543, 5, 4, 3},     /* family 5: the extended model is not part of the model */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int f, m, s;
        env_cpuid_signature(cases[i].eax, &f, &m, &s);
        CHECK(f == cases[i].family && m == cases[i].model && s == cases[i].stepping,
              "0x%08x: family %d model %d stepping %d (want %d %d %d)", (unsigned)cases[i].eax, f, m, s,
              cases[i].family, cases[i].model, cases[i].stepping);
    }
}

static void test_default_threads(void) {
    env_run_state r;
    memset(&r, 0, sizeof r);
    r.cpus_allowed = 4;
    CHECK(env_default_threads(&r) == 4, "4 CPUs, no quota: 4");
    r.cgroup_cpus = 1.5;
    CHECK(env_default_threads(&r) == 2, "4 CPUs, quota 1.5: 2 (rounded up)");
    r.cgroup_cpus = 8;
    CHECK(env_default_threads(&r) == 4, "4 CPUs, quota 8: 4");
    r.cpus_allowed = 2;
    r.cgroup_cpus = 0.2;
    CHECK(env_default_threads(&r) == 1, "quota 0.2: 1, never 0");
    r.cpus_allowed = 0;
    r.cgroup_cpus = 0;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK(env_default_threads(&r) == (online > 0 ? online : 1), "affinity unknown: the online CPUs");
}

/* The first value of `key` in /proc/cpuinfo (exact key), or "". */
static void cpuinfo_value(const char *key, char *out, size_t n) {
    out[0] = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[4096];
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl + strspn(line + kl, " \t")] == ':') { /* "model", not "model name" */
            char *v = strchr(line, ':');
            for (v++; *v == ' '; v++) {}
            v[strcspn(v, "\n")] = 0;
            snprintf(out, n, "%s", v);
            break;
        }
    fclose(f);
}

static void test_this_machine(void) {
    env_info e;
    env_collect(&e);
    char v[256];
    cpuinfo_value("vendor_id", v, sizeof v);
    if (v[0]) CHECK(!strcmp(e.cpu_vendor, v), "vendor %s, cpuinfo %s", e.cpu_vendor, v);
    cpuinfo_value("cpu family", v, sizeof v);
    if (v[0]) CHECK(e.cpu_family == atoi(v), "family %d, cpuinfo %s", e.cpu_family, v);
    cpuinfo_value("model", v, sizeof v);
    if (v[0]) CHECK(e.cpu_model_id == atoi(v), "model %d, cpuinfo %s", e.cpu_model_id, v);
    cpuinfo_value("stepping", v, sizeof v);
    if (v[0]) CHECK(e.cpu_stepping == atoi(v), "stepping %d, cpuinfo %s", e.cpu_stepping, v);
    cpuinfo_value("microcode", v, sizeof v);
    CHECK(!strcmp(e.microcode, v[0] ? v : "unknown"), "microcode '%s', cpuinfo '%s'", e.microcode, v);
#if defined(__x86_64__) || defined(__i386__)
    CHECK(strcmp(e.cpu_vendor, "unknown") && e.cpu_family > 0 && e.cpu_model_id >= 0 && e.cpu_stepping >= 0,
          "x86: the identity is known (%s %d %d %d)", e.cpu_vendor, e.cpu_family, e.cpu_model_id, e.cpu_stepping);
#endif
    /* The identity is part of the fingerprint: each field changes it. */
    char fp0[65], fp1[65];
    env_fingerprint(&e, fp0);
    env_info x = e;
    snprintf(x.microcode, sizeof x.microcode, "0xdeadbeef");
    env_fingerprint(&x, fp1);
    CHECK(strcmp(fp0, fp1), "microcode changes the fingerprint");
    x = e;
    x.cpu_stepping = e.cpu_stepping + 1;
    env_fingerprint(&x, fp1);
    CHECK(strcmp(fp0, fp1), "stepping changes the fingerprint");
    x = e;
    x.cpu_model_id = e.cpu_model_id + 1;
    env_fingerprint(&x, fp1);
    CHECK(strcmp(fp0, fp1), "model number changes the fingerprint");
    x = e;
    snprintf(x.hostname, sizeof x.hostname, "elsewhere");
    env_fingerprint(&x, fp1);
    CHECK(!strcmp(fp0, fp1), "the hostname does not");

    /* The run state agrees with sched_getaffinity. */
    env_run_state r;
    env_run_state_collect(&r);
    cpu_set_t s;
    CHECK(sched_getaffinity(0, sizeof s, &s) == 0 && r.cpus_allowed == CPU_COUNT(&s) && r.affinity[0],
          "affinity %s: %d CPUs", r.affinity, r.cpus_allowed);
    CHECK(!strcmp(r.thp, "always") || !strcmp(r.thp, "madvise") || !strcmp(r.thp, "never") || !strcmp(r.thp, "unknown"),
          "THP mode '%s'", r.thp);
    CHECK(r.cgroup_cpus >= 0, "quota %g", r.cgroup_cpus);
    /* Pinned to one CPU, it says so and the default is one thread. */
    cpu_set_t one;
    CPU_ZERO(&one);
    int first = -1;
    for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
        if (CPU_ISSET(c, &s)) first = c;
    CPU_SET(first, &one);
    if (sched_setaffinity(0, sizeof one, &one) == 0) {
        env_run_state_collect(&r);
        char want[16];
        snprintf(want, sizeof want, "%d", first);
        CHECK(r.cpus_allowed == 1 && !strcmp(r.affinity, want) && env_default_threads(&r) == 1,
              "pinned to CPU %d: '%s', %d allowed, default %d threads", first, r.affinity, r.cpus_allowed,
              env_default_threads(&r));
        sched_setaffinity(0, sizeof s, &s);
    }
}

TEST_MAIN({
    CHECK(access(fx_dir(), W_OK) == 0, "scratch directory %s", fx_dir());
    test_cpulist();
    test_cpu_max();
    test_cgroup();
    test_thp();
    test_loadavg();
    test_signature();
    test_default_threads();
    test_this_machine();
    fx_cleanup();
})
