/*
 * affinity.h - where a pool's threads go: the topology of the CPUs this
 * process may use (NUMA node, package, core; from sysfs) and the order in
 * which threads are placed on them (cx_pin_policy, cortex.h).
 *
 *   compact  a core's SMT siblings, then the next core of the same package
 *            and node, then the next package or node: N threads on the
 *            fewest cores, sharing their caches.
 *   spread   the (node, package) domains in turn, each time on a physical
 *            core not used yet; SMT siblings only once every core has one:
 *            N threads on the most cores and memory controllers.
 *
 * Thread i goes to order[i mod n]: more threads than CPUs wrap around. The
 * sysfs root is a parameter so tests can describe machines this one is not
 * (tests/unit/engine/test_placement.c builds fake trees). placement.c holds
 * the process's setting; this file only reads and orders.
 */
#ifndef CX_AFFINITY_H
#define CX_AFFINITY_H

#include <sched.h>
#include <stdint.h>

#include "cortex.h"

/* CPUs and NUMA nodes past these numbers are not considered (cpu_set_t's size). */
#define AFF_MAX_CPUS CPU_SETSIZE
#define AFF_MAX_NODES 1024
#define AFF_MASK_WORDS(bits) (((bits) + 63) / 64)

typedef struct aff_cpu {
    int cpu;     /* its number */
    int node;    /* NUMA node (node/nodeK/cpulist lists it); 0 when no node lists it */
    int package; /* topology/physical_package_id; 0 when unknown */
    int core;    /* topology/core_id (numbered within the package); the CPU's own number when unknown */
} aff_cpu;

typedef struct aff_topo {
    int n;                     /* CPUs found */
    aff_cpu cpu[AFF_MAX_CPUS]; /* [n] in CPU number order */
} aff_topo;

/*
 * The topology of the CPUs in `allowed`, read under `root` (the real one is
 * "/sys/devices/system"): ROOT/cpu/cpuN/topology/{physical_package_id,core_id}
 * and ROOT/node/nodeK/cpulist. Missing files are no error (VMs and
 * containers may lack them): each such CPU is then its own core in package 0,
 * node 0, so both orders become CPU number order. 0, or CX_EINVAL when
 * `allowed` holds no CPU.
 */
int aff_read(const char *root, const cpu_set_t *allowed, aff_topo *t, cx_err *err);
/* The CPU numbers of t in the order of `policy` (CX_PIN_COMPACT or
 * CX_PIN_SPREAD) into order[t->n]. 0, or CX_ENOMEM. */
int aff_order(const aff_topo *t, int policy, int *order, cx_err *err);
/* A sysfs list ("0-3,8,10-11"; "" and "\n" are empty) into mask (bit i of
 * word i / 64), numbers below max_bits. 0, or -1 when malformed or past max_bits. */
int aff_parse_list(const char *s, uint64_t *mask, int max_bits);
/* mask's bits below max_bits as a list ("0-3,8") into buf (cut to n, ending
 * in "..." then); returns the number of bits set. */
int aff_format_list(const uint64_t *mask, int max_bits, char *buf, size_t n);

#endif
