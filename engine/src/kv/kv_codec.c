/*
 * kv_codec.c - see kv_codec.h: slab formats (f32, f16, bf16, int8 per row,
 * FP8, int8 and 4-bit per block, 4-bit per group of 32 plain or rotated), how
 * the kernels read their rows (kv_src), and the byte-plane permutation the
 * cold tier compresses.
 */
#include "kv_codec.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "../util.h"

/* See kv_codec.h. */
int kv_fmt_hot(int cx_type) {
    switch (cx_type) {
    case CX_KV_F32: return KV_F32;
    case CX_KV_F16: return KV_F16;
    case CX_KV_BF16: return KV_BF16;
    case CX_KV_Q8: return KV_Q8;
    case CX_KV_E4M3: return KV_E4M3;
    case CX_KV_E5M2: return KV_E5M2;
    case CX_KV_Q4G: return KV_Q4G;
    case CX_KV_Q4H: return KV_Q4H;
    default: return -1;
    }
}

/* See kv_codec.h: q8 and q4 take the block formats, f32 is hot only, the
 * other row formats are the hot tier's. */
int kv_fmt_warm(int cx_type) {
    if (cx_type == CX_KV_Q8) return KV_Q8B;
    if (cx_type == CX_KV_Q4) return KV_Q4B;
    return cx_type == CX_KV_F32 ? -1 : kv_fmt_hot(cx_type);
}

/* Name of a format, for messages and reports. */
const char *kv_fmt_name(int fmt) {
    static const char *names[KV_NFMT] = {"f32", "f16", "q8", "q8b", "q4b", "bf16", "e4m3", "e5m2", "q4g", "q4h"};
    return fmt >= 0 && fmt < KV_NFMT ? names[fmt] : "?";
}

/* See kv_codec.h. */
int kv_fmt_rowwise(int fmt) { return fmt != KV_Q8B && fmt != KV_Q4B; }

/* The formats stored as floats of some width (no scales): 4, 2 or 1 bytes; 0 otherwise. */
static int float_width(int fmt) {
    return fmt == KV_F32 ? 4 : fmt == KV_F16 || fmt == KV_BF16 ? 2 : fmt == KV_E5M2 ? 1 : 0;
}

/* Bytes of the codes of one row (scales excluded). */
static size_t row_code_bytes(int fmt, int dim) {
    switch (fmt) {
    case KV_F32: return (size_t)dim * 4;
    case KV_F16: case KV_BF16: return (size_t)dim * 2;
    case KV_Q8: case KV_Q8B: case KV_E4M3: case KV_E5M2: return (size_t)dim;
    default: assert(fmt == KV_Q4B || fmt == KV_Q4G || fmt == KV_Q4H); return (size_t)dim / 2;
    }
}

/* 1 for the 4-bit formats with a scale per group of KV_GROUP values of a row. */
static int grouped(int fmt) { return fmt == KV_Q4G || fmt == KV_Q4H; }

/* Number of float scales after the codes: per row, or per key column plus per value row. */
static size_t n_scales(int fmt, int dim) {
    if (grouped(fmt)) return KV_ROWS * (size_t)(dim / KV_GROUP);
    return fmt == KV_Q8 || fmt == KV_E4M3 ? KV_ROWS : fmt == KV_Q8B || fmt == KV_Q4B ? (size_t)dim + KV_BLOCK : 0;
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
    if (fmt == KV_Q8 || fmt == KV_E4M3) return (size_t)r;
    if (grouped(fmt)) return (size_t)r * (size_t)(dim / KV_GROUP) + (size_t)(i / KV_GROUP);
    return r < KV_BLOCK ? (size_t)i : (size_t)dim + (size_t)(r - KV_BLOCK);
}

/* Code of x at `scale` in [-qmax, qmax]: round to nearest, so within half a step. */
static int quantize(float x, float scale, int qmax) {
    int q = scale > 0.0f ? (int)lrintf(x / scale) : 0;
    return q > qmax ? qmax : q < -qmax ? -qmax : q;
}

/* Byte offset of element i of row r among a slab's codes (for the 4-bit
 * formats, of the byte holding it): the rows of head i / hd come first
 * (kv_codec.h), each row's hd codes together. */
static size_t code_at(int fmt, int r, int i, int hd) {
    size_t e = ((size_t)(i / hd) * KV_ROWS + (size_t)r) * (size_t)hd + (size_t)(i % hd);
    return fmt == KV_Q4B || grouped(fmt) ? e / 2 : e * (row_code_bytes(fmt, 2) / 2);
}

/* Store code q of element i of row r. */
static void put_code(int fmt, void *slab, int r, int i, int q, int hd) {
    uint8_t *c = (uint8_t *)slab + code_at(fmt, r, i, hd);
    if (fmt != KV_Q4B && !grouped(fmt)) {
        *c = (uint8_t)(int8_t)q;
        return;
    }
    uint8_t nib = (uint8_t)(q + 8);
    *c = i % 2 ? (uint8_t)((*c & 0x0f) | (nib << 4)) : (uint8_t)((*c & 0xf0) | nib);
}

/* Largest |x[i * stride]| for i < n. */
static float max_abs(const float *x, int n, int stride) {
    float m = 0.0f;
    for (int i = 0; i < n; i++) m = fabsf(x[(size_t)i * (size_t)stride]) > m ? fabsf(x[(size_t)i * (size_t)stride]) : m;
    return m;
}

/*
 * FP8 code of x, rounded to nearest (ties to even), with `eb` exponent and
 * `mb` mantissa bits (E4M3: bias 7, largest 448, no infinities; E5M2: bias
 * 15, largest finite 57344). Out-of-range values saturate to the largest
 * finite code (a KV value never becomes an infinity); NaN stays NaN.
 */
static uint8_t fp8_code(float x, int eb, int mb) {
    int bias = (1 << (eb - 1)) - 1;
    uint8_t sign = signbit(x) ? 0x80 : 0;
    uint8_t top = eb == 4 ? 0x7e : 0x7b; /* largest finite: E4M3 1.75 x 2^8, E5M2 1.75 x 2^15 */
    float a = fabsf(x);
    if (a != a) return (uint8_t)(sign | (eb == 4 ? 0x7f : 0x7e));
    float min_normal = ldexpf(1.0f, 1 - bias);
    if (a < min_normal) /* subnormal steps of 2^(1 - bias - mb); the top one rounds into the smallest normal */
        return (uint8_t)(sign | (int)lrintf(ldexpf(a, bias - 1 + mb)));
    int e;
    float f = frexpf(a, &e); /* a = 2f x 2^(e-1), 2f in [1, 2) */
    int m = (int)lrintf((2.0f * f - 1.0f) * (float)(1 << mb)), E = e - 1 + bias;
    if (m == 1 << mb) {
        m = 0;
        E++;
    }
    int code = E << mb | m;
    return (uint8_t)(sign | (code > top ? top : code));
}

/* The q8 codes of n floats at `scale` (kv_q8_row's, and a head's part of a row's). */
static void q8_codes(const float *x, int n, float scale, int8_t *codes) {
    for (int i = 0; i < n; i++) codes[i] = (int8_t)quantize(x[i], scale, 127);
}

/* See kv_codec.h. A row's scale (q8, e4m3) spans all its heads; each
 * head's codes go to that head's rows. */
void kv_encode_row(int fmt, void *slab, int row, const float *x, int dim, int hd) {
    assert(kv_fmt_rowwise(fmt) && row >= 0 && row < KV_ROWS && hd > 0 && hd % 2 == 0 && dim % hd == 0);
    float scale = 0.0f; /* q8: max / 127; e4m3: the row's largest magnitude at E4M3's largest, 448 */
    if (fmt == KV_Q8 || fmt == KV_E4M3) {
        scale = max_abs(x, dim, 1) / (fmt == KV_Q8 ? 127.0f : 448.0f);
        set_scale(fmt, slab, (size_t)row, scale, dim);
    }
    for (int h0 = 0; h0 < dim; h0 += hd) {
        uint8_t *codes = (uint8_t *)slab + code_at(fmt, row, h0, hd);
        const float *xh = x + h0;
        if (fmt == KV_F32) {
            memcpy(codes, xh, (size_t)hd * sizeof(float));
        } else if (fmt == KV_F16 || fmt == KV_BF16) {
            for (int i = 0; i < hd; i++) {
                uint16_t h = fmt == KV_F16 ? cx_fp32_to_fp16(xh[i]) : cx_fp32_to_bf16(xh[i]);
                memcpy(codes + 2 * (size_t)i, &h, 2);
            }
        } else if (fmt == KV_E5M2) {
            for (int i = 0; i < hd; i++) codes[i] = fp8_code(xh[i], 5, 2);
        } else if (grouped(fmt)) { /* per group of KV_GROUP: rotated first (q4h), then max / 7, 15 levels */
            memset(codes, 0, (size_t)hd / 2); /* nibbles are or-ed in */
            for (int g = 0; g < hd; g += KV_GROUP) {
                float t[KV_GROUP];
                memcpy(t, xh + g, sizeof t);
                if (fmt == KV_Q4H) kern_hadamard32(t);
                float gs = max_abs(t, KV_GROUP, 1) / 7.0f;
                set_scale(fmt, slab, scale_index(fmt, row, h0 + g, dim), gs, dim);
                for (int i = 0; i < KV_GROUP; i++) put_code(fmt, slab, row, h0 + g + i, quantize(t[i], gs, 7), hd);
            }
        } else if (fmt == KV_E4M3) {
            for (int i = 0; i < hd; i++) codes[i] = scale > 0.0f ? fp8_code(xh[i] / scale, 4, 3) : 0;
        } else {
            assert(fmt == KV_Q8);
            q8_codes(xh, hd, scale, (int8_t *)(void *)codes);
        }
    }
}

/* See kv_codec.h. */
float kv_q8_row(const float *x, int n, int8_t *codes) {
    float scale = max_abs(x, n, 1) / 127.0f;
    q8_codes(x, n, scale, codes);
    return scale;
}

/* See kv_codec.h. Block formats: one scale per key column (over the 16
 * keys), one per value row. */
void kv_encode_slab(int fmt, void *slab, const float *x, int dim, int hd) {
    assert(hd > 0 && hd % 2 == 0 && dim % hd == 0);
    if (kv_fmt_rowwise(fmt)) {
        for (int r = 0; r < KV_ROWS; r++) kv_encode_row(fmt, slab, r, x + (size_t)r * (size_t)dim, dim, hd);
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
                     hd);
}

/* See kv_codec.h. */
float kv_step(int fmt, const void *slab, int r, int i, int dim) {
    if (float_width(fmt)) return 0.0f;
    return get_scale(fmt, slab, scale_index(fmt, r, i, dim), dim);
}

/* See kv_codec.h. */
void kv_src(int fmt, const void *slab, int dim, int hd, int r0, int c0, kern_kv_src *src) {
    static const int elem[KV_NFMT] = {KERN_KV_F32, KERN_KV_F16, KERN_KV_I8, KERN_KV_I8, KERN_KV_I4,
                                      KERN_KV_BF16, KERN_KV_E4M3, KERN_KV_E5M2, KERN_KV_I4, KERN_KV_I4};
    assert(fmt >= 0 && fmt < KV_NFMT && r0 >= 0 && r0 < KV_ROWS && c0 >= 0 && c0 < dim && c0 % 2 == 0);
    assert(hd > 0 && hd % 2 == 0 && dim % hd == 0);
    const uint8_t *base = slab;
    const float *scales = (const float *)(const void *)(base + KV_ROWS * row_code_bytes(fmt, dim)); /* 4-aligned */
    src->elem = elem[fmt];
    src->row_bytes = row_code_bytes(fmt, hd); /* a head's rows lie together */
    src->codes = base + code_at(fmt, r0, c0, hd);
    src->row_scale = src->col_scale = src->group_scale = NULL;
    src->group_stride = 0;
    src->hadamard = fmt == KV_Q4H;
    if (grouped(fmt)) {
        assert(c0 % KV_GROUP == 0 && "a group's scale and rotation start at its first column");
        src->group_stride = (size_t)(dim / KV_GROUP);
        src->group_scale = scales + (size_t)r0 * src->group_stride + (size_t)(c0 / KV_GROUP);
    } else if (fmt == KV_Q8 || fmt == KV_E4M3) src->row_scale = scales + r0;
    else if ((fmt == KV_Q8B || fmt == KV_Q4B) && r0 >= KV_BLOCK) src->row_scale = scales + dim + (r0 - KV_BLOCK);
    else if (fmt == KV_Q8B || fmt == KV_Q4B) src->col_scale = scales + c0;
}

/* See kv_codec.h: the scalar table's unpacking, the formats' definition. */
void kv_decode_rows(int fmt, const void *slab, int r0, int n, float *out, int dim, int hd) {
    assert(r0 >= 0 && n >= 0 && r0 + n <= KV_ROWS);
    const kern_ops *ref = kern_table("scalar");
    for (int r = r0; r < r0 + n; r++) /* a row at a time: keys and values of the block formats differ */
        for (int h0 = 0; h0 < dim; h0 += hd) { /* a head at a time: its columns lie together */
            kern_kv_src src;
            kv_src(fmt, slab, dim, hd, r, h0, &src);
            ref->kv_unpack(&src, 1, hd, out + (size_t)(r - r0) * (size_t)dim + (size_t)h0, (size_t)dim);
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
    if (float_width(fmt) > 1) {
        int width = float_width(fmt);
        planes(in, out, codes / (size_t)width, width, join);
        return;
    }
    memcpy(out, in, codes);
    if (n_scales(fmt, dim))
        planes((const uint8_t *)in + codes, (uint8_t *)out + codes, n_scales(fmt, dim), (int)sizeof(float), join);
}

/* See kv_codec.h. */
int kv_planes_sizes(int fmt, int dim, size_t *size) {
    size_t codes = KV_ROWS * row_code_bytes(fmt, dim);
    int n = 0;
    if (float_width(fmt) > 1) {
        int width = float_width(fmt);
        for (; n < width; n++) size[n] = codes / (size_t)width;
        return n;
    }
    size[n++] = codes;
    for (int p = 0; p < 4 && n_scales(fmt, dim); p++) size[n++] = n_scales(fmt, dim);
    return n;
}

/* See kv_codec.h. */
void kv_planes_split(int fmt, const void *slab, void *out, int dim) { planes_slab(fmt, slab, out, dim, 0); }

/* See kv_codec.h. */
void kv_planes_join(int fmt, const void *planes_in, void *slab, int dim) { planes_slab(fmt, planes_in, slab, dim, 1); }
