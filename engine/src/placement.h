/*
 * placement.h - the process's placement setting (cortex.h: cx_set_placement)
 * as the engine reads it: the CPU of each pool thread, and the NUMA policy
 * bound to weight and KV memory. affinity.c computes the CPU order; this
 * file keeps it and makes the system calls.
 */
#ifndef CX_PLACEMENT_H
#define CX_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

#include "cortex.h"

/* The CPUs of threads 0..n-1 of a pool under the process's pin policy into
 * cpus[n] (thread i: the order's entry i mod its length): 1; 0 under
 * CX_PIN_NONE (cpus untouched). */
int placement_cpus(int n, int *cpus);
/* Bind the process's NUMA policy to the whole pages inside [p, p + len),
 * memory no thread has touched yet (its pages are placed when first
 * touched). Nothing under CX_NUMA_DEFAULT, on one node, or for len 0.
 * `what` names the memory in the message ("model.gguf: weights"). 0, or
 * CX_EIO: on several nodes a policy that cannot be applied is an error. */
int placement_bind(void *p, size_t len, const char *what, cx_err *err);
/* A model's file was mapped rather than copied: its pages are the page
 * cache's, which mbind does not place. Recorded (cx_placement_info.
 * mapped_unplaced) when the policy binds anything. */
void placement_note_mapped(void);
/* The system call alone, whatever the setting (tests): mbind `numa`
 * (CX_NUMA_LOCAL, or CX_NUMA_INTERLEAVE over `nodes`, a mask of
 * AFF_MAX_NODES bits) on the whole pages inside [p, p + len). 0 or -errno. */
int placement_mbind(void *p, size_t len, int numa, const uint64_t *nodes);

#endif
