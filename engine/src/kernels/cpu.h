/*
 * cpu.h - what this processor and its OS run (cpu.c), for dispatch.c.
 *
 * kern_cpu_features() (the feature string for reports) is public and
 * declared in kernels.h; these two answer per instruction-set table.
 */
#ifndef CX_KERN_CPU_H
#define CX_KERN_CPU_H

#if defined(__x86_64__) || defined(__i386__)
#define CX_X86 1
#endif

/* 1 if this CPU and OS run the table of instruction set `isa` ("scalar",
 * "avx2", "avxvnni", "avx512", "avx512vnni", "avx512bf16"), else 0 (also
 * for a name that is none of those). Thread-safe; CPUID is read once. */
int kern_cpu_runs(const char *isa);
/* The first feature `isa` needs that the CPU or OS lacks, in words
 * ("AVX-512 VNNI", "OS YMM state"), or "nothing", for errors and SKIP lines. */
const char *kern_cpu_lacks(const char *isa);

#endif
