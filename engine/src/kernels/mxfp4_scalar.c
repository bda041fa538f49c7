/*
 * mxfp4_scalar.c - the scalar reference dot product of an MXFP4 weight row
 * against KERN_ACT_Q8_32 activations (kern_dot_fn); mxfp4_avx2.c and
 * mxfp4_avx512.c hold its SIMD twins, mxfp4.c the conversions. Layout: mxfp4.h.
 */
#include "../mxfp4.h"

#include <assert.h>

/* See mxfp4.h: an exact int32 sum per block, then both scales in float. */
float mxfp4_dot_scalar(const void *row, const kern_act *a, int t) {
    assert(a->fmt == KERN_ACT_Q8_32 && a->n % MXFP4_QK == 0 && t >= 0 && t < a->T);
    const int64_t nb = a->n / MXFP4_QK;
    const uint8_t *p = row;
    const int8_t *x = a->qs + (size_t)t * (size_t)a->n;
    const float *dx = a->d + (size_t)t * (size_t)nb;
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++, p += sizeof(block_mxfp4), x += MXFP4_QK) {
        int32_t isum = 0;
        for (int j = 0; j < MXFP4_QK / 2; j++)
            isum += MXFP4_KV[p[1 + j] & 0x0F] * x[j] + MXFP4_KV[p[1 + j] >> 4] * x[j + MXFP4_QK / 2];
        sum += (float)isum * (mxfp4_half_scale(p[0]) * dx[b]);
    }
    return sum;
}
