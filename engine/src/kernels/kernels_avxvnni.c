/*
 * kernels_avxvnni.c - the "avxvnni" table's own entries: the AVX2 table's
 * q8_0 and q4_0 kernels (q8_avx2.h: one row, eight rows, the X8 layout) with
 * their integer products done by AVX-VNNI's 256-bit vpdpbusd.
 *
 * Built with the AVX2 flags plus -mavxvnni (this file only, see the
 * Makefile); dispatch.c hands the table out only where CPUID says AVX-VNNI
 * (leaf 7 subleaf 1, EAX bit 4) beside the AVX2 table's features, and picks
 * it by default where the CPU has AVX-VNNI but not AVX-512 VNNI (Alder Lake
 * and later client cores). It is the AVX2 table with these entries in place.
 *
 * vpdpbusd adds the four u8 x s8 products of each int32 lane's bytes into
 * the lane: one instruction where AVX2 needs maddubs (into int16 pairs) and
 * madd (into int32). The kernels never saturate maddubs's int16 pair sums,
 * so the int32 sums, hence every float after them, equal the AVX2 table's
 * bit for bit (test_kernels.c checks it).
 */
#include <immintrin.h>
#include <string.h>

#include "cortex.h"
#include "kernels.h"
#include "simd_avx2.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))
/* The per-token loops must unroll fully so their arrays become registers (see kernels_avx2.c). */
#define UNROLL4 _Pragma("GCC unroll 4")
#ifndef PREFETCH_AHEAD
#define PREFETCH_AHEAD 2048
#endif

/* acc + per int32 lane the sum of four u8 x s8 products (q8_avx2.h's primitive). */
ALWAYS_INLINE __m256i i8dot4(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }
/* The same for two pairs of operands. */
ALWAYS_INLINE __m256i i8dot4x2(__m256i acc, __m256i u1, __m256i s1, __m256i u2, __m256i s2) {
    return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(acc, u1, s1), u2, s2);
}

#include "q8_avx2.h"

const kern_ops kern_avxvnni_part = {
    .name = "avxvnni",
    .dot = {[CX_TYPE_Q8_0] = dot_q8_0, [CX_TYPE_Q4_0] = dot_q4_0},
    .gemm = {[CX_TYPE_Q8_0] = gemm_q8_0, [CX_TYPE_Q4_0] = gemm_q4_0},
    .gemm_x8 = {[CX_TYPE_Q8_0] = gemm_q8_0_x8, [CX_TYPE_Q4_0] = gemm_q4_0_x8},
};
