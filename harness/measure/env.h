/*
 * env.h - the machine a benchmark ran on, and process-level helpers the
 * harness needs around a run (peak RSS, CPU pinning).
 *
 * env_fingerprint hashes the fields that decide whether two runs may be
 * compared (CPU model, verified ISA flags, logical cores, memory in GiB,
 * kernel, compiler); hostname, governor, hypervisor and NUMA nodes are stored
 * but do not change the fingerprint.
 */
#ifndef CB_ENV_H
#define CB_ENV_H

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
} env_info;

/* Fill e (every field gets a value; unknown text fields "unknown"). Returns 0,
 * or -1 if a field the fingerprint needs could not be read (e still filled). */
int env_collect(env_info *e);

/* SHA-256 (64 hex digits + NUL) of the comparability fields of e. */
void env_fingerprint(const env_info *e, char out_hex[65]);

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
