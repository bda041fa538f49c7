/*
 * kquant_scalar.c - the scalar reference dot products of Q4_K and Q6_K weight
 * rows against KERN_ACT_Q8_256 activations (kern_dot_fn). kquant_avx2.c holds
 * their AVX2 twins; kquant.c the format code (conversions). Layouts: kquant.h.
 */
#include "../kquant.h"

#include <assert.h>

#include "../util.h"

/* ---------------------------------------------------------------- dot products */

/* Q4_K . Q8_256 row t: per super-block isum = sum_j sc_j*(q.a)_j and
 * imin = sum_j m_j*(sum of the codes of sub-block j, from two bsums), both
 * exact in int32 (|isum| <= 8*63*32*15*127 < 2^25); then
 * sum += (d*da)*isum - (dmin*da)*imin in float. */
float kq_dot_q4_k_scalar(const void *row, const kern_act *a, int t) {
    assert(a->fmt == KERN_ACT_Q8_256 && a->n % QK_K == 0 && t >= 0 && t < a->T);
    const int64_t n = a->n, nb = n / QK_K;
    const uint8_t *p = row;
    const int8_t *q8 = a->qs + (int64_t)t * n;
    const float *ad = a->d + (int64_t)t * nb;
    const int16_t *bs = a->bsum + (int64_t)t * (n / 16);
    float sum = 0;
    for (int64_t b = 0; b < nb; b++, p += sizeof(block_q4_k), q8 += QK_K, bs += QK_K / 16) {
        int32_t isum = 0, imin = 0;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            kq_scale_min_k4(j, p + 4, &sc, &m);
            const uint8_t *qs = p + 16 + 32 * (j / 2);
            int shift = 4 * (j % 2);
            int32_t dot = 0;
            for (int l = 0; l < 32; l++) dot += ((qs[l] >> shift) & 0x0F) * q8[32 * j + l];
            isum += sc * dot;
            imin += m * (bs[2 * j] + bs[2 * j + 1]);
        }
        float d = cx_fp16_to_fp32(cx_rd16(p)) * ad[b], dm = cx_fp16_to_fp32(cx_rd16(p + 2)) * ad[b];
        sum += d * (float)isum - dm * (float)imin;
    }
    return sum;
}

/* Q6_K . Q8_256 row t: per super-block isum = sum_j scale_j*((q-32).a)_j over the
 * 16 sub-blocks, exact in int32 (|isum| <= 16*128*16*32*127 < 2^28); then
 * sum += (d*da)*isum in float. */
float kq_dot_q6_k_scalar(const void *row, const kern_act *a, int t) {
    assert(a->fmt == KERN_ACT_Q8_256 && a->n % QK_K == 0 && t >= 0 && t < a->T);
    const int64_t n = a->n, nb = n / QK_K;
    const uint8_t *p = row;
    const int8_t *q8 = a->qs + (int64_t)t * n;
    const float *ad = a->d + (int64_t)t * nb;
    float sum = 0;
    for (int64_t b = 0; b < nb; b++, p += sizeof(block_q6_k), q8 += QK_K) {
        const int8_t *sc = (const int8_t *)(p + 192);
        int32_t isum = 0;
        for (int j = 0; j < 16; j++) {
            int32_t dot = 0;
            for (int l = 0; l < 16; l++) dot += (kq_q6_code(p, 16 * j + l) - 32) * q8[16 * j + l];
            isum += sc[j] * dot;
        }
        sum += (cx_fp16_to_fp32(cx_rd16(p + Q6K_D_AT)) * ad[b]) * (float)isum;
    }
    return sum;
}
