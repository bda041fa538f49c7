/*
 * kquant.c - Q4_K and Q6_K: unpacking, dequantization and quantization (the
 * format code; the scalar dot products live in kernels/kquant_scalar.c beside
 * their AVX2 twins).
 * Layouts are described in kquant.h; everything here works on bytes, so rows
 * need no particular alignment.
 */
#include "kquant.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "util.h"

/* The inverse of kq_scale_min_k4 for all 8 sub-blocks (values 0..63). */
static void pack_scale_min_k4(const uint8_t *ls, const uint8_t *lm, uint8_t *q) {
    memset(q, 0, 12);
    for (int j = 0; j < 8; j++) {
        assert(ls[j] < 64 && lm[j] < 64);
        if (j < 4) {
            q[j] |= ls[j];
            q[j + 4] |= lm[j];
        } else {
            q[j + 4] = (uint8_t)((ls[j] & 0x0F) | ((lm[j] & 0x0F) << 4));
            q[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            q[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

/* Code q (0..15) of weight i (0..255) of a Q4_K block. */
static int q4_code(const uint8_t *blk, int i) {
    uint8_t b = blk[16 + 32 * (i / 64) + i % 32];
    return (i % 64) < 32 ? b & 0x0F : b >> 4;
}

/* Expand Q4_K rows: w = (d*sc)*q - dmin*m, in ggml's order of float operations. */
void kq_dequantize_row_q4_k(const void *src, float *dst, int64_t n) {
    assert(n % QK_K == 0);
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_K; b++, p += sizeof(block_q4_k), dst += QK_K) {
        float d = cx_fp16_to_fp32(cx_rd16(p)), dmin = cx_fp16_to_fp32(cx_rd16(p + 2));
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            kq_scale_min_k4(j, p + 4, &sc, &m);
            float d1 = d * (float)sc, m1 = dmin * (float)m;
            for (int l = 0; l < 32; l++) dst[32 * j + l] = d1 * (float)q4_code(p, 32 * j + l) - m1;
        }
    }
}

/* Expand Q6_K rows: w = (d*scale)*(q - 32). */
void kq_dequantize_row_q6_k(const void *src, float *dst, int64_t n) {
    assert(n % QK_K == 0);
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / QK_K; b++, p += sizeof(block_q6_k), dst += QK_K) {
        float d = cx_fp16_to_fp32(cx_rd16(p + Q6K_D_AT));
        const int8_t *sc = (const int8_t *)(p + 192);
        for (int i = 0; i < QK_K; i++) dst[i] = d * (float)sc[i / 16] * (float)(kq_q6_code(p, i) - 32);
    }
}

/* ---------------------------------------------------------------- quantizers
 *
 * Both quantizers search each sub-block's scale (and Q4_K's min) by trying a
 * few grid spacings around the range-filling one, refitting the scale (and
 * min) by least squares for each grid's codes, and keeping the fit with the
 * smallest squared error. Then the sub-block scales are quantized against one
 * fp16 super-block scale and the codes are recomputed with the scales as
 * stored. This is ggml's make_qkx2_quants / make_qx_quants idea, simpler:
 * unweighted (ggml weights each value by rms + |x|, trading RMS for the large
 * values), and no importance matrix. Relative RMS error measured on normal(0,1)
 * data (tests/unit/engine/test_kquant.c, 64 rows of 4096): Q4_K 0.0712, Q6_K 0.0173.
 */

/* Round to nearest, ties to even (ggml's nearest_int), for |v| < 2^22. */
static int nearest(float v) { return (int)lrintf(v); }

/* v limited to [lo, hi]. */
static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Fit x[32] ~ s*q - m with q in 0..15, s >= 0, m >= 0; returns s, sets *m. */
static float fit_q4_sub(const float *x, float *m_out) {
    float lo = 0, hi = x[0];
    for (int i = 0; i < 32; i++) {
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
    }
    *m_out = -lo;
    if (!(hi > lo)) return 0; /* all values equal lo <= 0: s = 0, min = -lo */
    float best_s = (hi - lo) / 15, best_b = lo;
    double best_err = INFINITY;
    for (int k = -10; k <= 10; k++) {
        float iscale = (15.0f + 0.1f * (float)k) / (hi - lo);
        double sq = 0, sqq = 0, sx = 0, sqx = 0;
        int q[32];
        for (int i = 0; i < 32; i++) {
            q[i] = clampi(nearest((x[i] - lo) * iscale), 0, 15);
            sq += q[i];
            sqq += (double)q[i] * q[i];
            sx += x[i];
            sqx += (double)q[i] * x[i];
        }
        /* Least squares for x ~ s*q + b, then b <= 0 (the min is subtracted). */
        double det = 32 * sqq - sq * sq, s, b;
        if (det <= 0) continue;
        s = (32 * sqx - sq * sx) / det;
        b = (sqq * sx - sq * sqx) / det;
        if (b > 0) {
            b = 0;
            s = sqx / sqq;
        }
        if (s < 0) continue;
        double err = 0;
        for (int i = 0; i < 32; i++) {
            double e = s * q[i] + b - x[i];
            err += e * e;
        }
        if (err < best_err) {
            best_err = err;
            best_s = (float)s;
            best_b = (float)b;
        }
    }
    *m_out = -best_b;
    return best_s;
}

/* Q4_K: per sub-block fit, 6-bit scales/mins against fp16 d = max s/63 and dmin = max m/63. */
void kq_quantize_row_q4_k(const float *src, void *dst, int64_t n) {
    assert(n % QK_K == 0);
    uint8_t *p = dst;
    for (int64_t b = 0; b < n / QK_K; b++, p += sizeof(block_q4_k), src += QK_K) {
        float s[8], m[8], smax = 0, mmax = 0;
        for (int j = 0; j < 8; j++) {
            s[j] = fit_q4_sub(src + 32 * j, &m[j]);
            smax = fmaxf(smax, s[j]);
            mmax = fmaxf(mmax, m[j]);
        }
        uint16_t dh = cx_fp32_to_fp16(smax / 63), mh = cx_fp32_to_fp16(mmax / 63);
        float d = cx_fp16_to_fp32(dh), dmin = cx_fp16_to_fp32(mh);
        uint8_t ls[8], lm[8];
        for (int j = 0; j < 8; j++) {
            ls[j] = (uint8_t)(d > 0 ? clampi(nearest(s[j] / d), 0, 63) : 0);
            lm[j] = (uint8_t)(dmin > 0 ? clampi(nearest(m[j] / dmin), 0, 63) : 0);
        }
        memcpy(p, &dh, 2);
        memcpy(p + 2, &mh, 2);
        pack_scale_min_k4(ls, lm, p + 4);
        uint8_t *qs = p + 16;
        memset(qs, 0, QK_K / 2);
        for (int j = 0; j < 8; j++) {
            float ds = d * (float)ls[j], dm = dmin * (float)lm[j];
            for (int l = 0; l < 32; l++) {
                int q = ds > 0 ? clampi(nearest((src[32 * j + l] + dm) / ds), 0, 15) : 0;
                qs[32 * (j / 2) + l] |= (uint8_t)(j % 2 ? q << 4 : q);
            }
        }
    }
}

/* Fit x[16] ~ s*(q-32) with q-32 in -32..31; returns the signed scale s. */
static float fit_q6_sub(const float *x) {
    float amax = 0, max = 0;
    for (int i = 0; i < 16; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < 1e-15f) return 0;
    /* The value of largest magnitude goes to the -32 end, which has no +32 twin. */
    float best_s = max / -32.0f;
    double best_score = -1;
    for (int k = -9; k <= 9; k++) {
        float iscale = -(32.0f + 0.1f * (float)k) / max;
        double sqq = 0, sqx = 0;
        for (int i = 0; i < 16; i++) {
            int q = clampi(nearest(x[i] * iscale), -32, 31);
            sqq += (double)q * q;
            sqx += (double)q * x[i];
        }
        /* Error with the least-squares scale is sum x^2 - sqx^2/sqq: maximize sqx^2/sqq. */
        if (sqq > 0 && sqx * sqx / sqq > best_score) {
            best_score = sqx * sqx / sqq;
            best_s = (float)(sqx / sqq);
        }
    }
    return best_s;
}

/* Q6_K: per 16-weight signed scale, 8-bit scales against fp16 d = (scale of largest magnitude)/-128. */
void kq_quantize_row_q6_k(const float *src, void *dst, int64_t n) {
    assert(n % QK_K == 0);
    uint8_t *p = dst;
    for (int64_t b = 0; b < n / QK_K; b++, p += sizeof(block_q6_k), src += QK_K) {
        float s[16], smax = 0, sabs = 0;
        for (int j = 0; j < 16; j++) {
            s[j] = fit_q6_sub(src + 16 * j);
            if (fabsf(s[j]) > sabs) {
                sabs = fabsf(s[j]);
                smax = s[j];
            }
        }
        memset(p, 0, sizeof(block_q6_k));
        uint16_t dh = cx_fp32_to_fp16(smax / -128.0f);
        float d = cx_fp16_to_fp32(dh);
        memcpy(p + Q6K_D_AT, &dh, 2);
        int8_t *sc = (int8_t *)(p + 192);
        for (int j = 0; j < 16; j++) sc[j] = (int8_t)(d != 0 ? clampi(nearest(s[j] / d), -128, 127) : 0);
        for (int i = 0; i < QK_K; i++) {
            float ds = d * (float)sc[i / 16];
            int q = ds != 0 ? clampi(nearest(src[i] / ds), -32, 31) + 32 : 32;
            int h = i / 128, k = (i % 128) / 32, l = i % 32;
            uint8_t *ql = p + 64 * h + (k & 1 ? 32 : 0), *qh = p + 128 + 32 * h;
            ql[l] |= (uint8_t)(k & 2 ? (q & 0x0F) << 4 : q & 0x0F);
            qh[l] |= (uint8_t)((q >> 4) << (2 * k));
        }
    }
}
