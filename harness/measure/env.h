/*
 * env.h - the machine a benchmark ran on (env_info), the state the machine
 * was in for one run (env_run_state, env_loadavg), and process-level helpers
 * the harness needs around a run (peak RSS, CPU pinning).
 *
 * env_fingerprint hashes the fields that decide whether two runs may be
 * compared (CPU model, verified ISA flags, logical cores, memory in GiB,
 * kernel, compiler, and the CPU's identity: vendor, family, model number,
 * stepping, microcode revision); hostname, governor, hypervisor and NUMA
 * nodes are stored but do not change the fingerprint. The identity is in it
 * because the brand string does not pin the silicon down: one "model name"
 * covers several steppings, a VM may report a generic one ("AMD EPYC"), and
 * a microcode update changes speed on the same stepping (mitigations such as
 * Downfall's gather fix or SRSO cost whole percents of the kernels' time).
 * A changed fingerprint is a new environments row, so the hw ceilings and
 * baselines of the old one no longer apply, as they should not.
 *
 * env_run_state is per process and per run, not per machine: taskset, a
 * cgroup's CPU quota or a sysfs switch change it between two runs on one
 * machine, so it lives in the run's row and compare key, not here.
 */
#ifndef CB_ENV_H
#define CB_ENV_H

#include <sched.h> /* cpu_set_t (_GNU_SOURCE, which the build defines) */
#include <stddef.h>
#include <stdint.h>

typedef struct env_info {
    char cpu_model[128];  /* /proc/cpuinfo "model name" (or "unknown") */
    char isa_flags[160];  /* kernel-relevant ISA extensions both /proc/cpuinfo and CPUID (with OS
                             support, XGETBV) agree on, sorted, space-separated, e.g. "avx avx2 f16c fma sse4_2" */
    int logical_cores;    /* sysconf(_SC_NPROCESSORS_ONLN) */
    int physical_cores;   /* distinct (physical id, core id) pairs; 0 if unknown */
    uint64_t mem_bytes;   /* MemTotal */
    char kernel[128];     /* uname -sr */
    char compiler[128];   /* of the harness build: "gcc 12.2.0", "clang Debian Clang 14.0.6" */
    char governor[32];    /* cpu0 scaling_governor, or "unavailable" */
    int hypervisor;       /* 1 if the cpuinfo "hypervisor" flag is set */
    char hostname[128];
    int numa_nodes;       /* /sys/devices/system/node/node*; 1 without NUMA support in the kernel */
    /* The CPU's identity: from CPUID on x86 (leaf 0 vendor, leaf 1 signature),
     * cross-checked with /proc/cpuinfo (vendor_id, cpu family, model,
     * stepping: a field the two disagree on is unknown); elsewhere from
     * /proc/cpuinfo alone where it has them. */
    char cpu_vendor[16];  /* "GenuineIntel", "AuthenticAMD", ...; "unknown" */
    int cpu_family;       /* displayed family (base + extended when base is 15); -1 unknown */
    int cpu_model_id;     /* displayed model number (extended model << 4 | model for families 6 and 15); -1 unknown */
    int cpu_stepping;     /* -1 unknown */
    char microcode[24];   /* /proc/cpuinfo "microcode" ("0xa0011d1"); "unknown" where the kernel does not say
                           * (VMs often do not) */
} env_info;

/* Fill e (every field gets a value; unknown text fields "unknown", unknown
 * identity numbers -1). Returns 0, or -1 if the CPU model, logical cores,
 * memory or kernel could not be read (e still filled); an unknown identity
 * field is no error (off x86, or in a VM that hides it, it is what there is). */
int env_collect(env_info *e);

/* SHA-256 (64 hex digits + NUL) of the comparability fields of e. */
void env_fingerprint(const env_info *e, char out_hex[65]);
/* The machine class a run's baselines are kept for when none is named
 * (--testbed, CORTEX_TESTBED): the CPU's brand, family and model, its
 * logical cores and memory in GiB, as one lowercase word
 * ("amd-epyc-f26m2-2c-24g"). Two runners of one kind share it; a kernel or
 * compiler update does not change it (those are compared separately). */
void env_testbed(const env_info *e, char *out, size_t n);

/* CPUID leaf 1 EAX (the processor signature) decoded as the kernel and the
 * vendors' manuals display it: stepping bits 3:0; family bits 11:8, plus the
 * extended family (27:20) when that is 15; model bits 7:4, with the extended
 * model (19:16) as its high nibble when the family is 6 or 15. */
void env_cpuid_signature(uint32_t eax, int *family, int *model, int *stepping);

/* ---------------------------------------------------------------- one run */

/* The machine as this process finds it now (call it after pinning). */
typedef struct env_run_state {
    char affinity[256];  /* the CPUs this process may run on (sched_getaffinity), as a list ("0-1", "0,2-3"); "" unknown */
    int cpus_allowed;    /* how many; 0 unknown */
    double cgroup_cpus;  /* the CPU quota of this process's cgroup and its ancestors (the smallest), in CPUs
                          * (quota / period: 1.5 = 150 ms per 100 ms); 0 = none, or no cgroup to read */
    char thp[16];        /* transparent huge pages (/sys/kernel/mm/transparent_hugepage/enabled):
                          * "always", "madvise", "never", or "unknown" */
} env_run_state;

/* Fill r from sched_getaffinity, /proc/self/cgroup + /sys/fs/cgroup and sysfs.
 * Every field gets a value (unknown: "", 0, "unknown" as above). */
void env_run_state_collect(env_run_state *r);

/* The thread count a run uses when none is given: the CPUs this process may
 * use (r->cpus_allowed; the online CPUs if unknown), capped by the cgroup
 * quota rounded up (1.5 CPUs: 2 threads), never below 1. */
int env_default_threads(const env_run_state *r);

/*
 * The system's load averages over 1, 5 and 15 minutes from /proc/loadavg
 * into out[0..2]: 0, or -1 (out[] set to NAN) when it cannot be read or
 * parsed. They are system-wide (every process, this one's own runnable
 * threads included), count runnable and uninterruptible tasks, are not
 * divided by the CPUs (compare them with env_run_state.cpus_allowed), and
 * lag: the 1-minute figure is an exponential average (about a minute to
 * follow a change), so a load that started seconds ago shows only in part.
 */
int env_loadavg(double out[3]);

/* The readers and parsers behind env_run_state_collect and env_loadavg,
 * taking paths and text so tests can feed them files of their own. */

/* The set's CPUs as a compact list ("0-3,6"; two neighbours "0-1"), ""
 * when empty; returns how many CPUs the set holds. */
int env_cpulist_format(const cpu_set_t *set, char *out, size_t n);
/* cgroup v2 cpu.max ("max 100000": 0 = no quota; "200000 100000": 2 CPUs;
 * "max" alone: none). 0, or -1 for anything else (a period or quota <= 0). */
int env_parse_cpu_max(const char *text, double *cpus);
/*
 * The CPU quota of the cgroup `self_cgroup` (a /proc/self/cgroup) names, with
 * the cgroup hierarchies mounted under `mount` (/sys/fs/cgroup): v2 (the
 * "0::PATH" line) reads cpu.max of PATH and each ancestor up to the root of
 * the mount, keeping the smallest quota; without v2 (or when no cpu.max is
 * found), v1 (the line whose controllers include "cpu") reads
 * cpu.cfs_quota_us / cpu.cfs_period_us the same way under mount/cpu or
 * mount/cpu,cpuacct (quota -1 = none). *cpus = the quota in CPUs, 0 = none.
 * 0, or -1 (*cpus = 0) when self_cgroup cannot be read or names no cgroup
 * with a CPU controller under mount.
 */
int env_read_cgroup_cpus(const char *self_cgroup, const char *mount, double *cpus);
/* The bracketed word of a THP mode line ("always [madvise] never" ->
 * "madvise"); 0, or -1 (out "unknown") when there is none. */
int env_parse_thp(const char *text, char *out, size_t n);
/* Three load averages from /proc/loadavg's text ("0.52 0.31 0.20 1/97 123");
 * 0, or -1 (out[] NAN) unless it starts with three non-negative numbers. */
int env_parse_loadavg(const char *text, double out[3]);
/* env_loadavg from another file (tests). */
int env_read_loadavg(const char *path, double out[3]);

/* Reset the peak RSS (VmHWM) to the current RSS by writing "5" to
 * /proc/self/clear_refs. 0, or -1 with errno set (e.g. EACCES, ENOENT). */
int env_peak_rss_reset(void);

/* Peak resident set in KiB since start or the last reset: VmHWM from
 * /proc/self/status, else getrusage ru_maxrss (never reset); -1 if neither. */
long env_peak_rss_kib(void);

/*
 * Pin this process to a CPU list ("0", "0,1", "0-1", "0-3,6"): every thread
 * that exists now, and (by inheritance) every thread created later, so call
 * it before the engine starts its workers. 0, or -1 with a message in err for
 * a malformed list, a CPU that does not exist or is offline, or a refusal.
 */
int env_pin_cpus(const char *list, char *err, size_t errlen);

#endif
