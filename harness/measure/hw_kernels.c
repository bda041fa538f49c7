/*
 * hw_kernels.c - the generic (no ISA extension) kernels of `cortex-bench hw`
 * (see hw_kernels.h). The compiler may vectorize the memory loops with the
 * baseline instruction set (SSE2 on x86-64); the scalar arithmetic loop is
 * kept scalar on purpose, as the engine's scalar kernels would run.
 */
#include "hw_kernels.h"

/* Sum with four independent accumulators, so the loads, not the adds, limit it. */
uint64_t hwk_read_generic(const uint64_t *p, size_t n) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i < n; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
    }
    return s0 + s1 + s2 + s3;
}

/* Plain element copy (ordinary stores, as STREAM's copy). */
void hwk_copy_generic(uint64_t *dst, const uint64_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = src[i];
}

/* STREAM triad. */
void hwk_triad_generic(double *a, const double *b, const double *c, double s, size_t n) {
    for (size_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}

/* Keep a float in its own register: the compiler can neither fold the chain
 * nor pack several chains into one SIMD register. */
#if defined(__x86_64__) || defined(__i386__)
#define HWK_OPAQUE(x) __asm__ volatile("" : "+x"(x))
#else
#define HWK_OPAQUE(x) __asm__ volatile("" : "+g"(x))
#endif

/* Eight independent chains x = x * m + k: the scalar FP peak (mul + add, 2
 * operations per step) as code without SIMD or FMA reaches it. */
float hwk_fp32_scalar(long iters) {
    float x0 = 1.0f, x1 = 1.1f, x2 = 1.2f, x3 = 1.3f, x4 = 1.4f, x5 = 1.5f, x6 = 1.6f, x7 = 1.7f;
    float m = 0.999999f, k = 1e-6f;
    for (long i = 0; i < iters; i++) {
        HWK_OPAQUE(m);
        x0 = x0 * m + k; x1 = x1 * m + k; x2 = x2 * m + k; x3 = x3 * m + k;
        x4 = x4 * m + k; x5 = x5 * m + k; x6 = x6 * m + k; x7 = x7 * m + k;
        HWK_OPAQUE(x0); HWK_OPAQUE(x1); HWK_OPAQUE(x2); HWK_OPAQUE(x3);
        HWK_OPAQUE(x4); HWK_OPAQUE(x5); HWK_OPAQUE(x6); HWK_OPAQUE(x7);
    }
    return x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
}
