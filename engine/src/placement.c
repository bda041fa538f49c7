/*
 * placement.c - the process's placement setting (cortex.h: cx_set_placement,
 * cx_pin_caller, cx_placement_get): which CPU each pool thread runs on, and
 * the NUMA policy of the memory holding weights and the KV cache.
 *
 * One setting per process, not a parameter of sessions, batches and
 * schedulers: a machine's CPUs and nodes are the process's to divide, and a
 * run records one placement. It is read when a pool starts, a model loads or
 * a KV cache is made, under one mutex; never on the per-token path.
 *
 * Threads. A pool pins its workers when it creates them (threadpool.c,
 * pthread_attr_setaffinity_np: a worker never runs a single instruction
 * elsewhere, and a refusal is an error of tp_new, not of a thread nobody
 * waits for). Thread 0 of a pass is whoever called cx_eval: the library does
 * not pin it, since changing for good the affinity of a thread it does not own
 * (a server's, Python's main thread, an application's UI thread) would outlive
 * the session in a surprising way, and pinning it for each call would cost two
 * system calls per matrix product. No worker is put on its CPU, cpus[0]; a
 * program that owns its thread pins it there with cx_pin_caller (`cortex
 * generate`, `cortex-bench run` do). The scheduler's stepping thread is the
 * engine's own, and cx_sched_start pins it to cpus[0].
 *
 * The CPU order is computed once, from the calling thread's affinity mask
 * (taskset, cpusets) at cx_set_placement; a later taskset is not followed.
 * Call it before cx_pin_caller: a pinned caller may use one CPU only.
 *
 * Memory. mbind(2) through syscall(2), no libnuma: interleave spreads pages
 * round-robin over the nodes this process may allocate from (Mems_allowed in
 * /proc/self/status, those with memory); local (MPOL_LOCAL) puts a page on
 * the node of the CPU that first touches it, overriding a policy inherited
 * from numactl. A policy only decides where pages not yet touched go, so it
 * is bound right after the memory is mapped: the weights' huge-page copy
 * before the file is read into it (model_map.c), the KV cache's tiers
 * (kv_cache.c; the hot and warm slots are mappings of their own for this).
 * A model mapped from its file is page cache, placed by whoever read it first
 * and not by mbind: that is recorded, not pretended. On one node nothing is
 * bound, and the description says the policy had no effect.
 */
#include "placement.h"

#include <errno.h>
#include <linux/mempolicy.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "affinity.h"
#include "util.h"

#define NODE_WORDS AFF_MASK_WORDS(AFF_MAX_NODES)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int pin, numa;
    int n_cpus;
    int *order;                 /* [n_cpus], malloc'd; NULL under CX_PIN_NONE */
    int nodes_read;             /* nodes and n_nodes are known */
    uint64_t nodes[NODE_WORDS]; /* the nodes this process may allocate from */
    int n_nodes;
    int mapped;                 /* placement_note_mapped came while the policy bound memory */
} g; /* guarded by mu */

static const char *const PIN_NAMES[] = {"none", "compact", "spread"};
static const char *const NUMA_NAMES[] = {"default", "local", "interleave"};
#define N_PIN ((int)(sizeof PIN_NAMES / sizeof *PIN_NAMES))
#define N_NUMA ((int)(sizeof NUMA_NAMES / sizeof *NUMA_NAMES))

/* See cortex.h. */
const char *cx_pin_policy_name(int policy) { return policy >= 0 && policy < N_PIN ? PIN_NAMES[policy] : NULL; }
const char *cx_numa_policy_name(int policy) { return policy >= 0 && policy < N_NUMA ? NUMA_NAMES[policy] : NULL; }
int cx_pin_policy_from_name(const char *name) {
    for (int i = 0; name && i < N_PIN; i++)
        if (!strcasecmp(name, PIN_NAMES[i])) return i;
    return -1;
}
int cx_numa_policy_from_name(const char *name) {
    for (int i = 0; name && i < N_NUMA; i++)
        if (!strcasecmp(name, NUMA_NAMES[i])) return i;
    return -1;
}

/* The value after `key` in /proc/self/status into buf; 0, or -1 when absent. */
static int status_field(const char *key, char *buf, size_t n) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[4096];
    size_t k = strlen(key);
    int rc = -1;
    while (rc && fgets(line, sizeof line, f))
        if (!strncmp(line, key, k)) {
            const char *v = line + k;
            while (*v == ' ' || *v == '\t') v++;
            snprintf(buf, n, "%s", v);
            buf[strcspn(buf, "\n")] = 0;
            rc = 0;
        }
    fclose(f);
    return rc;
}

/* The nodes this process may allocate from: Mems_allowed_list (cpusets,
 * numactl --membind), less the nodes without memory (CPU-only nodes);
 * node 0 alone when the kernel tells neither (no NUMA support). Their count. */
static int read_nodes(uint64_t *mask) {
    char line[4096];
    uint64_t mem[NODE_WORDS];
    int have_allowed = status_field("Mems_allowed_list:", line, sizeof line) == 0 &&
                       aff_parse_list(line, mask, AFF_MAX_NODES) == 0;
    FILE *f = fopen("/sys/devices/system/node/has_memory", "r");
    int have_mem = 0;
    if (f) {
        have_mem = fgets(line, sizeof line, f) && aff_parse_list(line, mem, AFF_MAX_NODES) == 0;
        fclose(f);
    }
    if (!have_allowed) {
        if (have_mem) memcpy(mask, mem, sizeof mem);
        else memset(mask, 0, sizeof(uint64_t) * NODE_WORDS), mask[0] = 1;
    } else if (have_mem) {
        uint64_t both = 0;
        for (int w = 0; w < NODE_WORDS; w++) both |= mask[w] & mem[w];
        if (both) /* an empty intersection would be a misread: keep what the process is allowed */
            for (int w = 0; w < NODE_WORDS; w++) mask[w] &= mem[w];
    }
    int n = 0;
    for (int w = 0; w < NODE_WORDS; w++) n += __builtin_popcountll(mask[w]);
    return n;
}

/* g.nodes known (mu held). */
static void ensure_nodes(void) {
    if (g.nodes_read) return;
    g.n_nodes = read_nodes(g.nodes);
    g.nodes_read = 1;
}

/* See cortex.h. */
int cx_set_placement(cx_pin_policy pin, cx_numa_policy numa, cx_err *err) {
    if (!cx_pin_policy_name((int)pin))
        return cx_fail(err, CX_EINVAL, "placement: pin policy %d is not one of none|compact|spread", (int)pin);
    if (!cx_numa_policy_name((int)numa))
        return cx_fail(err, CX_EINVAL, "placement: NUMA policy %d is not one of default|local|interleave", (int)numa);
    int *order = NULL, n = 0;
    if (pin != CX_PIN_NONE) {
        cpu_set_t allowed;
        if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
            return cx_fail(err, CX_EIO, "placement: sched_getaffinity: %s", strerror(errno));
        aff_topo *t = malloc(sizeof *t);
        if (!t) return cx_fail(err, CX_ENOMEM, "placement: out of memory");
        int rc = aff_read("/sys/devices/system", &allowed, t, err);
        if (!rc && !(order = malloc(sizeof *order * (size_t)t->n))) rc = cx_fail(err, CX_ENOMEM, "placement: out of memory");
        if (!rc) rc = aff_order(t, (int)pin, order, err);
        n = t->n;
        free(t);
        if (rc) {
            free(order);
            return rc;
        }
    }
    uint64_t nodes[NODE_WORDS];
    int n_nodes = read_nodes(nodes); /* read again: a cpuset may have changed since the last call */
    pthread_mutex_lock(&mu);
    free(g.order);
    g.pin = (int)pin;
    g.numa = (int)numa;
    g.order = order;
    g.n_cpus = n;
    memcpy(g.nodes, nodes, sizeof nodes);
    g.n_nodes = n_nodes;
    g.nodes_read = 1;
    g.mapped = 0;
    pthread_mutex_unlock(&mu);
    return 0;
}

/* See placement.h. */
int placement_cpus(int n, int *cpus) {
    pthread_mutex_lock(&mu);
    int on = g.order != NULL;
    for (int i = 0; on && i < n; i++) cpus[i] = g.order[i % g.n_cpus];
    pthread_mutex_unlock(&mu);
    return on;
}

/* See cortex.h. */
int cx_pin_caller(cx_err *err) {
    int cpu;
    if (!placement_cpus(1, &cpu)) return 0;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    int e = pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    if (e)
        return cx_fail(err, CX_EINVAL, "placement: pinning the calling thread to CPU %d: %s (is it still allowed to"
                       " this process?)", cpu, strerror(e));
    return 0;
}

/* See cortex.h. */
void cx_placement_get(cx_placement_info *out) {
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&mu);
    ensure_nodes();
    out->pin = g.pin;
    out->numa = g.numa;
    out->n_cpus = g.n_cpus;
    size_t at = 0, cap = sizeof out->cpus;
    for (int i = 0; i < g.n_cpus; i++) { /* the order as it is (not sorted), so a plain list */
        char item[16];
        int len = snprintf(item, sizeof item, "%s%d", i ? "," : "", g.order[i]);
        if (at + (size_t)len + 4 > cap) { /* keep room for "..." */
            snprintf(out->cpus + at, cap - at, "...");
            break;
        }
        memcpy(out->cpus + at, item, (size_t)len + 1);
        at += (size_t)len;
    }
    out->numa_nodes = g.n_nodes;
    aff_format_list(g.nodes, AFF_MAX_NODES, out->nodes, sizeof out->nodes);
    out->numa_effect = g.numa != CX_NUMA_DEFAULT && g.n_nodes > 1;
    out->mapped_unplaced = out->numa_effect && g.mapped;
    pthread_mutex_unlock(&mu);
}

/* See cortex.h. */
size_t cx_placement_describe(char *buf, size_t n) {
    cx_placement_info pi;
    cx_placement_get(&pi);
    const char *note = pi.numa_nodes > 1 ? (pi.mapped_unplaced ? " (a model mapped from its file: page cache, not placed)" : "")
                     : pi.numa == CX_NUMA_DEFAULT ? " (one NUMA node)" : " (one NUMA node: no effect)";
    int len = snprintf(buf, n, "pin=%s%s%s numa=%s nodes=%s%s", cx_pin_policy_name(pi.pin), pi.n_cpus ? " cpus=" : "",
                       pi.cpus, cx_numa_policy_name(pi.numa), pi.nodes, note);
    return len > 0 ? (size_t)len : 0;
}

/* See placement.h. */
int placement_mbind(void *p, size_t len, int numa, const uint64_t *nodes) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1), hi = ((uintptr_t)p + len) & ~(page - 1);
    if (!p || hi <= lo) return 0; /* no whole page: nothing to bind */
    long rc;
    if (numa == CX_NUMA_INTERLEAVE) {
        unsigned long mask[AFF_MAX_NODES / (8 * sizeof(unsigned long))] = {0};
        for (int b = 0; b < AFF_MAX_NODES; b++)
            if (nodes[b / 64] >> (b % 64) & 1) mask[b / (8 * sizeof(unsigned long))] |= 1ul << (b % (8 * sizeof(unsigned long)));
        /* maxnode counts one more than the bits passed: the kernel reads maxnode - 1 of them */
        rc = syscall(SYS_mbind, (void *)lo, (unsigned long)(hi - lo), MPOL_INTERLEAVE, mask,
                     (unsigned long)AFF_MAX_NODES + 1, 0ul);
    } else if (numa == CX_NUMA_LOCAL) {
        rc = syscall(SYS_mbind, (void *)lo, (unsigned long)(hi - lo), MPOL_LOCAL, NULL, 0ul, 0ul);
        if (rc != 0 && errno == EINVAL) /* before Linux 3.8: MPOL_PREFERRED with no node is local allocation */
            rc = syscall(SYS_mbind, (void *)lo, (unsigned long)(hi - lo), MPOL_PREFERRED, NULL, 0ul, 0ul);
    } else {
        return -EINVAL;
    }
    return rc == 0 ? 0 : -errno;
}

/* See placement.h. */
int placement_bind(void *p, size_t len, const char *what, cx_err *err) {
    uint64_t nodes[NODE_WORDS];
    pthread_mutex_lock(&mu);
    ensure_nodes();
    int numa = g.numa, n_nodes = g.n_nodes;
    memcpy(nodes, g.nodes, sizeof nodes);
    pthread_mutex_unlock(&mu);
    if (numa == CX_NUMA_DEFAULT || n_nodes <= 1 || !p || !len) return 0; /* one node: nothing to choose */
    int rc = placement_mbind(p, len, numa, nodes);
    if (rc == 0) return 0;
    char list[128];
    aff_format_list(nodes, AFF_MAX_NODES, list, sizeof list);
    return cx_fail(err, CX_EIO, "%s: NUMA policy %s over nodes %s: mbind of %zu bytes failed: %s%s", what,
                   cx_numa_policy_name(numa), list, len, strerror(-rc),
                   rc == -EPERM ? " (a container's seccomp profile refuses mbind without CAP_SYS_NICE; NUMA policy"
                                  " default leaves placement to the kernel)" : "");
}

/* See placement.h. */
void placement_note_mapped(void) {
    pthread_mutex_lock(&mu);
    ensure_nodes();
    if (g.numa != CX_NUMA_DEFAULT && g.n_nodes > 1) g.mapped = 1;
    pthread_mutex_unlock(&mu);
}
