/*
 * mxfp4.c - MXFP4 conversions (the format code; the dot kernels live in
 * kernels/mxfp4_*.c). Layout and rounding rules: mxfp4.h.
 */
#include "mxfp4.h"

#include <assert.h>
#include <math.h>

/* E2M1 codes 0..7 are +0, 0.5, 1, 1.5, 2, 3, 4, 6; 8..15 the same negated. */
const int8_t MXFP4_KV[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* See mxfp4.h: ggml's int8 table times the halved scale, block by block. */
void mxfp4_dequantize_row(const void *src, float *dst, int64_t n) {
    assert(n % MXFP4_QK == 0);
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / MXFP4_QK; b++, p += sizeof(block_mxfp4), dst += MXFP4_QK) {
        float d = mxfp4_half_scale(p[0]);
        for (int j = 0; j < MXFP4_QK / 2; j++) {
            dst[j] = (float)MXFP4_KV[p[1 + j] & 0x0F] * d;
            dst[j + MXFP4_QK / 2] = (float)MXFP4_KV[p[1 + j] >> 4] * d;
        }
    }
}

/* The code whose value MXFP4_KV[code] * d is nearest to x; the lowest code
 * wins a tie (so +0 over -0, and the smaller magnitude between two steps). */
static uint8_t nearest_code(float x, float d) {
    uint8_t best = 0;
    float best_err = fabsf((float)MXFP4_KV[0] * d - x);
    for (uint8_t c = 1; c < 16; c++) {
        float err = fabsf((float)MXFP4_KV[c] * d - x);
        if (err < best_err) {
            best = c;
            best_err = err;
        }
    }
    return best;
}

/* Shared exponent of a block from its largest magnitude: floor(log2(amax)) - 2
 * + 127, through log2f as ggml computes it (so the two agree bit for bit). */
static uint8_t block_exponent(float amax) {
    if (!(amax > 0.0f)) return 0;
    float e = floorf(log2f(amax)) + 125.0f;
    return e < 0.0f ? 0 : e > 254.0f ? 254 : (uint8_t)e;
}

/* See mxfp4.h: ggml's reference quantizer, block by block. */
void mxfp4_quantize_row(const float *src, void *dst, int64_t n) {
    assert(n % MXFP4_QK == 0);
    block_mxfp4 *y = dst;
    for (int64_t b = 0; b < n / MXFP4_QK; b++, src += MXFP4_QK) {
        float amax = 0.0f;
        for (int j = 0; j < MXFP4_QK; j++)
            if (fabsf(src[j]) > amax) amax = fabsf(src[j]); /* NaNs never compare greater: skipped */
        y[b].e = block_exponent(amax);
        float d = mxfp4_half_scale(y[b].e);
        for (int j = 0; j < MXFP4_QK / 2; j++)
            y[b].qs[j] = (uint8_t)(nearest_code(src[j], d) | nearest_code(src[j + MXFP4_QK / 2], d) << 4);
    }
}
