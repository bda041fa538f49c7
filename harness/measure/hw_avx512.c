/*
 * hw_avx512.c - the AVX-512 arithmetic peaks of `cortex-bench hw` (see
 * hw_kernels.h): 512-bit FMA, and int8 dot products with AVX-512 VNNI's
 * vpdpbusd, the instruction the engine's avx512vnni q8_0/q4_0 kernels are
 * built on. Compiled with the Makefile's harness *_avx512.c rule; hw.c calls
 * each only when __builtin_cpu_supports says the CPU (and OS) have it.
 */
#include "hw_kernels.h"

#include <immintrin.h>

/* Twelve independent chains x = x * m + k of 16 floats each (12 in flight
 * cover a 4-cycle FMA latency on up to three 512-bit FMA pipes). */
float hwk_fp32_avx512(long iters) {
    __m512 x[12];
    for (int j = 0; j < 12; j++) x[j] = _mm512_set1_ps(1.0f + 0.01f * (float)j);
    __m512 m = _mm512_set1_ps(0.999999f), k = _mm512_set1_ps(1e-6f);
    for (long i = 0; i < iters; i++) {
        __asm__ volatile("" : "+v"(m)); /* not loop-invariant as far as the compiler knows */
        _Pragma("GCC unroll 12") for (int j = 0; j < 12; j++) x[j] = _mm512_fmadd_ps(x[j], m, k);
    }
    __m512 s = x[0];
    for (int j = 1; j < 12; j++) s = _mm512_add_ps(s, x[j]);
    return _mm512_reduce_add_ps(s);
}

/* Twelve independent accumulators, acc = vpdpbusd(acc, u, s): 64 unsigned x
 * signed byte products per instruction, summed four at a time into each
 * int32 lane (the accumulator is the loop-carried operand, so twelve cover
 * its latency). The operands pass through an empty asm every iteration, so
 * nothing is hoisted. */
uint32_t hwk_int8_vnni(long iters) {
    __m512i a[12];
    for (int j = 0; j < 12; j++) a[j] = _mm512_setzero_si512();
    __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
    for (long i = 0; i < iters; i++) {
        __asm__ volatile("" : "+v"(u), "+v"(s));
        _Pragma("GCC unroll 12") for (int j = 0; j < 12; j++) a[j] = _mm512_dpbusd_epi32(a[j], u, s);
    }
    __m512i t = a[0];
    for (int j = 1; j < 12; j++) t = _mm512_add_epi32(t, a[j]);
    return (uint32_t)_mm512_reduce_add_epi32(t); /* the lanes wrap: summed the same way */
}
