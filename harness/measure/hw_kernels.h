/*
 * hw_kernels.h - the inner loops `cortex-bench hw` times: memory kernels
 * (read, copy, triad over one thread's slice) and arithmetic peaks (chains of
 * independent multiply-adds). Generic versions in hw_kernels.c (plain C, any
 * x86-64 or other CPU); AVX2 versions in hw_avx2.c, compiled with -mavx2 -mfma
 * and called only when the CPU reports both (hw.c checks); AVX-512 FMA and
 * VNNI peaks in hw_avx512.c, likewise.
 *
 * Memory kernels take element counts that are multiples of HWK_BLOCK_U64 and
 * 32-byte aligned pointers. Arithmetic kernels run `iters` iterations and
 * return a value derived from every accumulator, so nothing is optimized away.
 */
#ifndef CB_HW_KERNELS_H
#define CB_HW_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Memory kernels work in blocks of 32 uint64 (256 bytes): 8 AVX2 loads. */
#define HWK_BLOCK_U64 32

/* Work per iteration of the arithmetic kernels (floating-point or integer
 * operations; a multiply-add counts 2). */
#define HWK_FP32_SCALAR_OPS 16.0   /* 8 chains x (mul + add), one float each */
#define HWK_FP32_AVX2_OPS 192.0    /* 12 chains x FMA x 8 floats x 2 */
#define HWK_INT8_AVX2_OPS 512.0    /* 8 dot steps x 32 byte products x 2 (multiply + add) */
#define HWK_FP32_AVX512_OPS 384.0  /* 12 chains x FMA x 16 floats x 2 */
#define HWK_INT8_VNNI_OPS 1536.0   /* 12 vpdpbusd x 64 byte products x 2 */

/* Sum of n uint64 words (read bandwidth). */
uint64_t hwk_read_generic(const uint64_t *p, size_t n);
/* dst[i] = src[i] for n words (copy bandwidth). */
void hwk_copy_generic(uint64_t *dst, const uint64_t *src, size_t n);
/* a[i] = b[i] + s * c[i] for n doubles (STREAM triad). */
void hwk_triad_generic(double *a, const double *b, const double *c, double s, size_t n);
/* 8 independent chains of scalar float x = x * m + k (no SIMD). */
float hwk_fp32_scalar(long iters);

uint64_t hwk_read_avx2(const uint64_t *p, size_t n);
void hwk_copy_avx2(uint64_t *dst, const uint64_t *src, size_t n);
void hwk_triad_avx2(double *a, const double *b, const double *c, double s, size_t n);
/* 12 independent chains of 8-float FMAs (covers FMA latency x 2 ports). */
float hwk_fp32_avx2(long iters);
/* 8 steps per iteration of 32-byte int8 dot products: maddubs (u8 x s8 ->
 * pairs summed to i16), madd with ones (-> i32), add into the accumulator. */
uint32_t hwk_int8_avx2(long iters);

/* hw_avx512.c (AVX-512 flags; call only when the CPU has AVX-512 F, resp. VNNI):
 * 12 chains of 16-float FMAs; 12 chains of vpdpbusd (u8 x s8, 4 products per int32 lane). */
float hwk_fp32_avx512(long iters);
uint32_t hwk_int8_vnni(long iters);

#endif
