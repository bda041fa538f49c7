/*
 * hw.h - measure this machine's ceilings for `cortex-bench hw`: memory read
 * bandwidth (STREAM-like: read, copy, triad) and peak arithmetic per
 * instruction set (fp32 scalar and AVX2 FMA, int8 AVX2 dot products), with
 * one thread and with N threads pinned one per CPU, each working on its own
 * slice. Decoding a token reads every weight once, so the read bandwidth is
 * the roofline decode speed is judged against (roofline.h, docs/metrics.md).
 *
 * Units: GB/s are 1e9 bytes per second; GFLOP/s and GOP/s count a
 * multiply-add as 2 operations. A figure the CPU cannot produce (no AVX2) is
 * NAN, never a made-up number.
 */
#ifndef CB_HW_H
#define CB_HW_H

#include <stddef.h>
#include <stdint.h>

/* What to measure. */
typedef struct hw_opts {
    uint64_t bytes;  /* buffer size; far larger than the last-level cache (default 1 GiB) */
    int reps;        /* timed passes per figure (best and median reported) */
    int threads;     /* N of the N-thread figures */
} hw_opts;

/* Best and median of the timed passes. */
typedef struct hw_fig {
    double best, median;
} hw_fig;

/* One measurement: index [0] with 1 thread, [1] with `threads` threads. */
typedef struct hw_result {
    int threads, reps;
    uint64_t buffer_bytes, llc_bytes; /* llc_bytes: 0 if sysfs does not say */
    char cpus[128];                   /* CPUs the threads were pinned to, "0,1" */
    char mem_isa[16];                 /* memory kernels: "avx2" (256-bit loads) or "generic" */
    hw_fig read[2], copy[2], triad[2];          /* GB/s */
    hw_fig fp32_scalar[2], fp32_avx2[2];        /* GFLOP/s; avx2 NAN without AVX2+FMA */
    hw_fig int8_avx2[2];                        /* GOP/s; NAN without AVX2 */
    hw_fig fp32_avx512[2], int8_vnni[2];        /* GFLOP/s, GOP/s; NAN without AVX-512 F, resp. AVX-512 VNNI */
    char avx512[80], vnni[80];                  /* availability, in words, with the peak when measured */
    char notes[256];                            /* caveats (buffer near the cache size, ...) */
} hw_result;

/* Defaults: 1 GiB, 5 passes, the CPUs this process may use capped by its cgroup CPU quota (env_default_threads). */
void hw_opts_init(hw_opts *o);

/* Measure everything. 0, or -1 with a message (allocation, thread creation). */
int hw_measure(const hw_opts *o, hw_result *r, char *err, size_t errlen);

#endif
