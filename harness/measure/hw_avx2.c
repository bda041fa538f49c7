/*
 * hw_avx2.c - the AVX2/FMA kernels of `cortex-bench hw` (see hw_kernels.h).
 * Compiled with -mavx2 -mfma (the Makefile's harness *_avx2.c rule); hw.c
 * calls them only when __builtin_cpu_supports says "avx2" and "fma".
 */
#include "hw_kernels.h"

#include <immintrin.h>

/* Read 256 bytes per step with eight 256-bit loads into four integer
 * accumulators (1-cycle adds: the loads are the only limit). */
uint64_t hwk_read_avx2(const uint64_t *p, size_t n) {
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i < n; i += HWK_BLOCK_U64) {
        const __m256i *v = (const __m256i *)(p + i);
        s0 = _mm256_add_epi64(s0, _mm256_load_si256(v + 0));
        s1 = _mm256_add_epi64(s1, _mm256_load_si256(v + 1));
        s2 = _mm256_add_epi64(s2, _mm256_load_si256(v + 2));
        s3 = _mm256_add_epi64(s3, _mm256_load_si256(v + 3));
        s0 = _mm256_add_epi64(s0, _mm256_load_si256(v + 4));
        s1 = _mm256_add_epi64(s1, _mm256_load_si256(v + 5));
        s2 = _mm256_add_epi64(s2, _mm256_load_si256(v + 6));
        s3 = _mm256_add_epi64(s3, _mm256_load_si256(v + 7));
    }
    __m256i s = _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3));
    uint64_t out[4];
    _mm256_storeu_si256((__m256i *)out, s);
    return out[0] + out[1] + out[2] + out[3];
}

/* 256-bit loads and ordinary (cached) stores, as STREAM's copy. */
void hwk_copy_avx2(uint64_t *dst, const uint64_t *src, size_t n) {
    for (size_t i = 0; i < n; i += HWK_BLOCK_U64) {
        const __m256i *s = (const __m256i *)(src + i);
        __m256i *d = (__m256i *)(dst + i);
        for (int k = 0; k < 8; k++) _mm256_store_si256(d + k, _mm256_load_si256(s + k));
    }
}

/* a = b + s * c, four doubles per FMA. */
void hwk_triad_avx2(double *a, const double *b, const double *c, double s, size_t n) {
    __m256d vs = _mm256_set1_pd(s);
    for (size_t i = 0; i < n; i += 4)
        _mm256_store_pd(a + i, _mm256_fmadd_pd(vs, _mm256_load_pd(c + i), _mm256_load_pd(b + i)));
}

/* Twelve independent chains x = x * m + k of 8 floats each: enough in flight
 * to cover a 4-5 cycle FMA latency on two FMA ports. */
float hwk_fp32_avx2(long iters) {
    __m256 x[12];
    for (int j = 0; j < 12; j++) x[j] = _mm256_set1_ps(1.0f + 0.01f * (float)j);
    __m256 m = _mm256_set1_ps(0.999999f), k = _mm256_set1_ps(1e-6f);
    for (long i = 0; i < iters; i++) {
        __asm__ volatile("" : "+x"(m)); /* not loop-invariant as far as the compiler knows */
        x[0] = _mm256_fmadd_ps(x[0], m, k);
        x[1] = _mm256_fmadd_ps(x[1], m, k);
        x[2] = _mm256_fmadd_ps(x[2], m, k);
        x[3] = _mm256_fmadd_ps(x[3], m, k);
        x[4] = _mm256_fmadd_ps(x[4], m, k);
        x[5] = _mm256_fmadd_ps(x[5], m, k);
        x[6] = _mm256_fmadd_ps(x[6], m, k);
        x[7] = _mm256_fmadd_ps(x[7], m, k);
        x[8] = _mm256_fmadd_ps(x[8], m, k);
        x[9] = _mm256_fmadd_ps(x[9], m, k);
        x[10] = _mm256_fmadd_ps(x[10], m, k);
        x[11] = _mm256_fmadd_ps(x[11], m, k);
    }
    __m256 s = x[0];
    for (int j = 1; j < 12; j++) s = _mm256_add_ps(s, x[j]);
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

/* acc += madd(maddubs(u, s), 1), eight times per iteration: 32 unsigned x
 * signed byte products per step, summed into int32 lanes, the way a q8
 * dot-product kernel does it. Only the 1-cycle add is loop-carried, so four
 * accumulators suffice; each multiplies a different operand pair (2 u x 2 s)
 * and the operands pass through an empty asm before every group of four, so
 * no product is shared or hoisted, and nothing spills to the stack. */
uint32_t hwk_int8_avx2(long iters) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    __m256i u0 = _mm256_set1_epi8(1), u1 = _mm256_set1_epi8(3);
    __m256i s0 = _mm256_set1_epi8(-1), s1 = _mm256_set1_epi8(2), ones = _mm256_set1_epi16(1);
#define HWK_DOT(acc, u, s) acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), ones))
    for (long i = 0; i < iters; i++) {
        for (int half = 0; half < 2; half++) {
            __asm__ volatile("" : "+x"(u0), "+x"(u1), "+x"(s0), "+x"(s1));
            HWK_DOT(a0, u0, s0); HWK_DOT(a1, u1, s0); HWK_DOT(a2, u0, s1); HWK_DOT(a3, u1, s1);
        }
    }
#undef HWK_DOT
    __m256i t = _mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3));
    uint32_t out[8]; /* the lanes wrapped long ago: sum them the same way */
    _mm256_storeu_si256((__m256i *)out, t);
    return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}
