/*
 * ops_avx512.h - the AVX-512 attention and elementwise operators and the
 * Q8_32 activation quantizer (ops_avx512.c), which kernels_avx512.c puts in
 * the "avx512" and "avx512vnni" tables. Each has the contract of the kern_ops
 * member of the same name (kernels.h); include only from *_avx512.c files.
 */
#ifndef CX_OPS_AVX512_H
#define CX_OPS_AVX512_H

#include <stddef.h>

#include "kernels.h"

void kern_attn_scores_avx512(float *sc, size_t ldsc, const float *q, size_t ldq, int nq, const float *K, size_t stride, int kn,
                             int hd, float scale);
void kern_attn_scores_i8_avx512(float *sc, size_t ldsc, const int8_t *q, size_t ldq, const float *qd, const int32_t *qsum,
                                int nq, const int8_t *K, size_t stride, const float *kd, int kn, int hd, float scale);
/* The avx512vnni table's attn_scores_i8 (the one function here that uses
 * AVX-512 VNNI): the same bits. */
void kern_attn_scores_i8_avx512vnni(float *sc, size_t ldsc, const int8_t *q, size_t ldq, const float *qd, const int32_t *qsum, int nq,
                                    const int8_t *K, size_t stride, const float *kd, int kn, int hd, float scale);
void kern_attn_values_avx512(double *acc, const float *p, const float *const *V, size_t stride, int kn, int hd);
double kern_exp_shift_avx512(float *x, int n, float shift);
void kern_scale_f64_avx512(double *acc, double s, int n);
void kern_rmsnorm_avx512(float *out, const float *x, const float *w, int n, float eps);
void kern_softmax_avx512(float *x, int n);
void kern_rope_avx512(float *v, int n_heads, int head_dim, const float *cs);
void kern_swiglu_avx512(float *gate, const float *up, int n);
void kern_add_avx512(float *y, const float *x, int n);
/* Row t of a (fmt KERN_ACT_Q8_32) from n floats x: the scalar reference's codes, scales and sums. */
void kern_quantize_q8_32_avx512(const float *x, kern_act *a, int t);
void kern_kv_unpack_avx512(const kern_kv_src *src, int n, int nc, float *out, size_t ld);

#endif
