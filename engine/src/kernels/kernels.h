/*
 * kernels.h - the numeric kernels of the forward pass.
 *
 * This file set holds the scalar reference versions, written for clarity and
 * exact agreement with the block formats in quant.h. SIMD versions (AVX2, later
 * AVX-512) will sit beside them behind a dispatch table, each tested against
 * its scalar twin here.
 */
#ifndef CX_KERNELS_H
#define CX_KERNELS_H

#include <stdint.h>

/* Dot product of one weight row of n elements stored as `type` with x. */
float kern_dot_scalar(int type, const void *row, const float *x, int64_t n);

/* out = x / rms(x) * w, rms(x) = sqrt(mean(x^2) + eps). out may alias x. */
void kern_rmsnorm(float *out, const float *x, const float *w, int n, float eps);
/* In-place numerically stable softmax. */
void kern_softmax(float *x, int n);
/* Rotate adjacent pairs (v[2i], v[2i+1]) of each head by pos * inv_freq[i].
 * Angles are formed in double: in float, pos * freq loses ~1e-4 of logit
 * accuracy by position 500 on small models. */
void kern_rope(float *v, int n_heads, int head_dim, int pos, const double *inv_freq);
/* gate[i] = silu(gate[i]) * up[i]. */
void kern_swiglu(float *gate, const float *up, int n);
/* Index of the largest value; the lowest index wins ties. */
int kern_argmax(const float *x, int n);

#endif
