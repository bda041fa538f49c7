/*
 * kv_codec.c - see kv_codec.h: slab formats (f32, f16, int8 per row, int8
 * and 4-bit per block) and the byte-plane permutation the cold tier compresses.
 */
#include "kv_codec.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "../util.h"

/* See kv_codec.h. */
int kv_fmt_hot(int cx_type) {
    return cx_type == CX_KV_F32 ? KV_F32 : cx_type == CX_KV_F16 ? KV_F16 : cx_type == CX_KV_Q8 ? KV_Q8 : -1;
}

/* See kv_codec.h. */
int kv_fmt_warm(int cx_type) { return cx_type == CX_KV_Q8 ? KV_Q8B : cx_type == CX_KV_Q4 ? KV_Q4B : -1; }

/* Name of a format, for messages and reports. */
const char *kv_fmt_name(int fmt) {
    static const char *names[KV_NFMT] = {"f32", "f16", "q8", "q8b", "q4b"};
    return fmt >= 0 && fmt < KV_NFMT ? names[fmt] : "?";
}

/* See kv_codec.h. */
int kv_fmt_rowwise(int fmt) { return fmt == KV_F32 || fmt == KV_F16 || fmt == KV_Q8; }

/* Bytes of the codes of one row (scales excluded). */
static size_t row_code_bytes(int fmt, int dim) {
    switch (fmt) {
    case KV_F32: return (size_t)dim * 4;
    case KV_F16: return (size_t)dim * 2;
    case KV_Q8: case KV_Q8B: return (size_t)dim;
    default: assert(fmt == KV_Q4B); return (size_t)dim / 2;
    }
}

/* Number of float scales after the codes: per row, or per key column plus per value row. */
static size_t n_scales(int fmt, int dim) {
    return fmt == KV_Q8 ? KV_ROWS : fmt == KV_Q8B || fmt == KV_Q4B ? (size_t)dim + KV_BLOCK : 0;
}

/* See kv_codec.h. */
size_t kv_slab_bytes(int fmt, int dim) {
    assert(dim > 0 && dim % 2 == 0 && fmt >= 0 && fmt < KV_NFMT);
    return KV_ROWS * row_code_bytes(fmt, dim) + n_scales(fmt, dim) * sizeof(float);
}

/* Scale j of a slab (after the codes; memcpy: no alignment assumed). */
static float get_scale(int fmt, const void *slab, size_t j, int dim) {
    float s;
    memcpy(&s, (const uint8_t *)slab + KV_ROWS * row_code_bytes(fmt, dim) + j * sizeof(float), sizeof s);
    return s;
}

/* Set scale j of a slab. */
static void set_scale(int fmt, void *slab, size_t j, float s, int dim) {
    memcpy((uint8_t *)slab + KV_ROWS * row_code_bytes(fmt, dim) + j * sizeof(float), &s, sizeof s);
}

/* Index of the scale of element i of row r. */
static size_t scale_index(int fmt, int r, int i, int dim) {
    if (fmt == KV_Q8) return (size_t)r;
    return r < KV_BLOCK ? (size_t)i : (size_t)dim + (size_t)(r - KV_BLOCK);
}

/* Code of x at `scale` in [-qmax, qmax]: round to nearest, so within half a step. */
static int quantize(float x, float scale, int qmax) {
    int q = scale > 0.0f ? (int)lrintf(x / scale) : 0;
    return q > qmax ? qmax : q < -qmax ? -qmax : q;
}

/* Store code q of element i of row r. */
static void put_code(int fmt, void *slab, int r, int i, int q, int dim) {
    uint8_t *c = (uint8_t *)slab + (size_t)r * row_code_bytes(fmt, dim);
    if (fmt != KV_Q4B) {
        c[i] = (uint8_t)(int8_t)q;
        return;
    }
    uint8_t nib = (uint8_t)(q + 8), *byte = c + i / 2;
    *byte = i % 2 ? (uint8_t)((*byte & 0x0f) | (nib << 4)) : (uint8_t)((*byte & 0xf0) | nib);
}

/* Code of element i of row r. */
static int get_code(int fmt, const void *slab, int r, int i, int dim) {
    const uint8_t *c = (const uint8_t *)slab + (size_t)r * row_code_bytes(fmt, dim);
    if (fmt != KV_Q4B) return (int8_t)c[i];
    return ((i % 2 ? c[i / 2] >> 4 : c[i / 2]) & 15) - 8;
}

/* Largest |x[i * stride]| for i < n. */
static float max_abs(const float *x, int n, int stride) {
    float m = 0.0f;
    for (int i = 0; i < n; i++) m = fabsf(x[(size_t)i * (size_t)stride]) > m ? fabsf(x[(size_t)i * (size_t)stride]) : m;
    return m;
}

/* See kv_codec.h. */
void kv_encode_row(int fmt, void *slab, int row, const float *x, int dim) {
    assert(kv_fmt_rowwise(fmt) && row >= 0 && row < KV_ROWS);
    uint8_t *codes = (uint8_t *)slab + (size_t)row * row_code_bytes(fmt, dim);
    if (fmt == KV_F32) {
        memcpy(codes, x, (size_t)dim * sizeof(float));
    } else if (fmt == KV_F16) {
        for (int i = 0; i < dim; i++) {
            uint16_t h = cx_fp32_to_fp16(x[i]);
            memcpy(codes + 2 * (size_t)i, &h, 2);
        }
    } else {
        float scale = max_abs(x, dim, 1) / 127.0f;
        for (int i = 0; i < dim; i++) codes[i] = (uint8_t)(int8_t)quantize(x[i], scale, 127);
        set_scale(fmt, slab, (size_t)row, scale, dim);
    }
}

/* See kv_codec.h. Block formats: one scale per key column (over the 16
 * keys), one per value row. */
void kv_encode_slab(int fmt, void *slab, const float *x, int dim) {
    if (kv_fmt_rowwise(fmt)) {
        for (int r = 0; r < KV_ROWS; r++) kv_encode_row(fmt, slab, r, x + (size_t)r * (size_t)dim, dim);
        return;
    }
    int qmax = fmt == KV_Q8B ? 127 : 7;
    if (fmt == KV_Q4B) memset(slab, 0, KV_ROWS * row_code_bytes(fmt, dim)); /* nibbles are or-ed in */
    for (int i = 0; i < dim; i++) set_scale(fmt, slab, (size_t)i, max_abs(x + i, KV_BLOCK, dim) / (float)qmax, dim);
    for (int r = KV_BLOCK; r < KV_ROWS; r++)
        set_scale(fmt, slab, (size_t)dim + (size_t)(r - KV_BLOCK), max_abs(x + (size_t)r * (size_t)dim, dim, 1) / (float)qmax,
                  dim);
    for (int r = 0; r < KV_ROWS; r++)
        for (int i = 0; i < dim; i++)
            put_code(fmt, slab, r, i, quantize(x[(size_t)r * (size_t)dim + (size_t)i], kv_step(fmt, slab, r, i, dim), qmax),
                     dim);
}

/* See kv_codec.h. */
float kv_step(int fmt, const void *slab, int r, int i, int dim) {
    if (fmt == KV_F32 || fmt == KV_F16) return 0.0f;
    return get_scale(fmt, slab, scale_index(fmt, r, i, dim), dim);
}

/* IEEE half -> single, exact for every half (test_kv compares all 65536 with
 * cx_fp16_to_fp32), branch-free so the row loop vectorizes: the exponent and
 * mantissa bits moved into place read as the value times 2^-112 (normal and
 * subnormal halves alike), which one multiply by 2^112 corrects; infinities
 * and NaNs get the all-ones exponent. Staging f16 blocks converts every
 * cached value each pass; with util.c's scalar converter, stories260K
 * decoded 2.6x slower with f16 blocks than with f32, with this 1.8x. */
static inline float half_to_float(uint16_t h) {
    uint32_t em = (uint32_t)h & 0x7fffu, bits = em << 13, sign = ((uint32_t)h & 0x8000u) << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    f *= 0x1p112f;
    memcpy(&bits, &f, sizeof f);
    bits = em >= 0x7c00u ? 0x7f800000u | (em & 0x3ffu) << 13 : bits;
    bits |= sign;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* See kv_codec.h. */
void kv_decode_rows(int fmt, const void *slab, int r0, int n, float *out, int dim) {
    assert(r0 >= 0 && n >= 0 && r0 + n <= KV_ROWS);
    size_t rb = row_code_bytes(fmt, dim);
    for (int r = r0; r < r0 + n; r++) {
        const uint8_t *c = (const uint8_t *)slab + (size_t)r * rb;
        float *o = out + (size_t)(r - r0) * (size_t)dim;
        if (fmt == KV_F32) {
            memcpy(o, c, rb);
        } else if (fmt == KV_F16) {
            for (int i = 0; i < dim; i++) o[i] = half_to_float(cx_rd16(c + 2 * (size_t)i));
        } else if (fmt == KV_Q8 || (fmt == KV_Q8B && r >= KV_BLOCK)) {
            float s = get_scale(fmt, slab, scale_index(fmt, r, 0, dim), dim);
            for (int i = 0; i < dim; i++) o[i] = (float)(int8_t)c[i] * s;
        } else {
            for (int i = 0; i < dim; i++) o[i] = (float)get_code(fmt, slab, r, i, dim) * kv_step(fmt, slab, r, i, dim);
        }
    }
}

/* Split n values of `width` (2 or 4) bytes at src into `width` planes at dst
 * (or join them back when `join`): plane p holds byte p of every value.
 * Written per width with restrict pointers so the compiler vectorizes it
 * (a restore joins every page it inflates). */
static void planes(const uint8_t *restrict src, uint8_t *restrict dst, size_t n, int width, int join) {
    assert(width == 2 || width == 4);
    if (join && width == 4)
        for (size_t i = 0; i < n; i++) {
            dst[4 * i] = src[i];
            dst[4 * i + 1] = src[n + i];
            dst[4 * i + 2] = src[2 * n + i];
            dst[4 * i + 3] = src[3 * n + i];
        }
    else if (join)
        for (size_t i = 0; i < n; i++) {
            dst[2 * i] = src[i];
            dst[2 * i + 1] = src[n + i];
        }
    else if (width == 4)
        for (size_t i = 0; i < n; i++) {
            dst[i] = src[4 * i];
            dst[n + i] = src[4 * i + 1];
            dst[2 * n + i] = src[4 * i + 2];
            dst[3 * n + i] = src[4 * i + 3];
        }
    else
        for (size_t i = 0; i < n; i++) {
            dst[i] = src[2 * i];
            dst[n + i] = src[2 * i + 1];
        }
}

/* The layout both directions share: f32/f16 values split into 4 or 2
 * planes; for the int formats the codes stay in place and the scales become
 * 4 planes. */
static void planes_slab(int fmt, const void *in, void *out, int dim, int join) {
    size_t codes = KV_ROWS * row_code_bytes(fmt, dim);
    if (fmt == KV_F32 || fmt == KV_F16) {
        int width = fmt == KV_F32 ? 4 : 2;
        planes(in, out, codes / (size_t)width, width, join);
        return;
    }
    memcpy(out, in, codes);
    planes((const uint8_t *)in + codes, (uint8_t *)out + codes, n_scales(fmt, dim), (int)sizeof(float), join);
}

/* See kv_codec.h. */
int kv_planes_sizes(int fmt, int dim, size_t *size) {
    size_t codes = KV_ROWS * row_code_bytes(fmt, dim);
    int n = 0;
    if (fmt == KV_F32 || fmt == KV_F16) {
        int width = fmt == KV_F32 ? 4 : 2;
        for (; n < width; n++) size[n] = codes / (size_t)width;
        return n;
    }
    size[n++] = codes;
    for (int p = 0; p < 4; p++) size[n++] = n_scales(fmt, dim);
    return n;
}

/* See kv_codec.h. */
void kv_planes_split(int fmt, const void *slab, void *out, int dim) { planes_slab(fmt, slab, out, dim, 0); }

/* See kv_codec.h. */
void kv_planes_join(int fmt, const void *planes_in, void *slab, int dim) { planes_slab(fmt, planes_in, slab, dim, 1); }
