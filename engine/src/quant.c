/*
 * quant.c - the supported weight types: scalar quantize/dequantize for their
 * block formats, the type each tensor of a file type gets, and the types'
 * names (cx_type_name, cx_type_from_name). Rounding follows ggml's
 * reference quantizers so our files and theirs agree.
 */
#include "quant.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "cortex.h"
#include "cortex_tools.h"
#include "kquant.h"
#include "mxfp4.h"
#include "util.h"

size_t quant_row_bytes(int type, int64_t n) {
    switch (type) {
    case CX_TYPE_F32: return (size_t)n * 4;
    case CX_TYPE_F16:
    case CX_TYPE_BF16: return (size_t)n * 2;
    case CX_TYPE_Q8_0: return (size_t)(n / QK) * sizeof(block_q8_0);
    case CX_TYPE_Q4_0: return (size_t)(n / QK) * sizeof(block_q4_0);
    case CX_TYPE_Q4_K: return (size_t)(n / QK_K) * sizeof(block_q4_k);
    case CX_TYPE_Q6_K: return (size_t)(n / QK_K) * sizeof(block_q6_k);
    case CX_TYPE_MXFP4: return (size_t)(n / MXFP4_QK) * sizeof(block_mxfp4);
    default: return 0;
    }
}

int quant_supported(int type) { return quant_block_size(type) != 0; }

int quant_block_size(int type) {
    switch (type) {
    case CX_TYPE_F32: case CX_TYPE_F16: case CX_TYPE_BF16: return 1;
    case CX_TYPE_Q8_0: case CX_TYPE_Q4_0: case CX_TYPE_MXFP4: return QK;
    case CX_TYPE_Q4_K: case CX_TYPE_Q6_K: return QK_K;
    default: return 0;
    }
}

void quant_dequantize_row(int type, const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    switch (type) {
    case CX_TYPE_F32:
        memcpy(dst, src, (size_t)n * 4);
        break;
    case CX_TYPE_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = cx_fp16_to_fp32(cx_rd16(p + 2 * i));
        break;
    case CX_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = cx_bf16_to_fp32(cx_rd16(p + 2 * i));
        break;
    case CX_TYPE_Q8_0:
        for (int64_t b = 0; b < n / QK; b++) {
            const uint8_t *blk = p + b * sizeof(block_q8_0);
            float d = cx_fp16_to_fp32(cx_rd16(blk));
            const int8_t *q = (const int8_t *)(blk + 2);
            for (int j = 0; j < QK; j++) dst[b * QK + j] = d * (float)q[j];
        }
        break;
    case CX_TYPE_Q4_0:
        for (int64_t b = 0; b < n / QK; b++) {
            const uint8_t *blk = p + b * sizeof(block_q4_0);
            float d = cx_fp16_to_fp32(cx_rd16(blk));
            for (int j = 0; j < QK / 2; j++) {
                dst[b * QK + j] = d * (float)((blk[2 + j] & 0x0f) - 8);
                dst[b * QK + j + QK / 2] = d * (float)((blk[2 + j] >> 4) - 8);
            }
        }
        break;
    case CX_TYPE_Q4_K: kq_dequantize_row_q4_k(src, dst, n); break;
    case CX_TYPE_Q6_K: kq_dequantize_row_q6_k(src, dst, n); break;
    case CX_TYPE_MXFP4: mxfp4_dequantize_row(src, dst, n); break;
    default:
        break;
    }
}

/* Q8_0: d = max|x|/127, q = round(x/d). */
static void quantize_q8_0(const float *x, block_q8_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / QK; b++) {
        float amax = 0;
        for (int j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(x[b * QK + j]));
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        y[b].d = cx_fp32_to_fp16(d);
        for (int j = 0; j < QK; j++) y[b].qs[j] = (int8_t)roundf(x[b * QK + j] * id);
    }
}

/* Q4_0: the value of largest magnitude (with its sign) maps to -8, d = max/-8. */
static void quantize_q4_0(const float *x, block_q4_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / QK; b++) {
        const float *xb = x + b * QK;
        float amax = 0, max = 0;
        for (int j = 0; j < QK; j++)
            if (fabsf(xb[j]) > amax) { amax = fabsf(xb[j]); max = xb[j]; }
        float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
        y[b].d = cx_fp32_to_fp16(d);
        for (int j = 0; j < QK / 2; j++) {
            float v0 = xb[j] * id + 8.5f, v1 = xb[j + QK / 2] * id + 8.5f;
            int q0 = (int)v0, q1 = (int)v1;
            if (q0 > 15) q0 = 15;
            if (q1 > 15) q1 = 15;
            y[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void quant_quantize_row(int type, const float *src, void *dst, int64_t n) {
    switch (type) {
    case CX_TYPE_F32: memcpy(dst, src, (size_t)n * 4); break;
    case CX_TYPE_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = cx_fp32_to_fp16(src[i]);
            memcpy((uint8_t *)dst + 2 * i, &h, 2);
        }
        break;
    case CX_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = cx_fp32_to_bf16(src[i]);
            memcpy((uint8_t *)dst + 2 * i, &h, 2);
        }
        break;
    case CX_TYPE_Q8_0: quantize_q8_0(src, dst, n); break;
    case CX_TYPE_Q4_0: quantize_q4_0(src, dst, n); break;
    case CX_TYPE_Q4_K: kq_quantize_row_q4_k(src, dst, n); break;
    case CX_TYPE_Q6_K: kq_quantize_row_q6_k(src, dst, n); break;
    case CX_TYPE_MXFP4: mxfp4_quantize_row(src, dst, n); break;
    default: break;
    }
}

/* 1 if `name` ends in `suffix`. */
static int ends_with(const char *name, const char *suffix) {
    size_t n = strlen(name), k = strlen(suffix);
    return n >= k && !strcmp(name + n - k, suffix);
}

/* llama.cpp's use_more_bits: the first and last eighth of the layers and every
 * third one in between get the larger type in the _M mixtures. */
static int use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* See quant.h: the mixture rule first, then the block-size fallback. */
int quant_mix_type(int ftype, const char *name, int layer, int n_layer, int64_t cols) {
    if (ends_with(name, "norm.weight")) return CX_TYPE_F32;
    int type = ftype;
    if (ftype == CX_FTYPE_Q4_K_M) {
        int more = layer >= 0 && use_more_bits(layer, n_layer);
        if (!strcmp(name, "output.weight") ||
            (more && (ends_with(name, ".attn_v.weight") || ends_with(name, ".ffn_down.weight"))))
            type = CX_TYPE_Q6_K;
        else
            type = CX_TYPE_Q4_K;
    }
    int bs = quant_block_size(type);
    if (bs == 0) return -1;
    assert(cols > 0);
    if (cols % bs == 0) return type;
    return cols % QK == 0 ? CX_TYPE_Q8_0 : CX_TYPE_F16;
}

/* See quant.h. */
int quant_tensor_type(int ftype, const char *name, int layer, int n_layer, int64_t cols, int moe) {
    if (ends_with(name, ".bias") || ends_with(name, "ffn_gate_inp.weight")) return CX_TYPE_F32;
    if (moe && ftype == CX_TYPE_MXFP4 && !ends_with(name, "_exps.weight"))
        return quant_mix_type(CX_TYPE_Q8_0, name, layer, n_layer, cols);
    return quant_mix_type(ftype, name, layer, n_layer, cols);
}

/* ---- names (cortex.h, cortex_tools.h) ---- */

/* Every type and file type with a name, in the order cx_type_from_name tries them. */
static const int NAMED_TYPES[] = {CX_TYPE_F32, CX_TYPE_F16, CX_TYPE_BF16, CX_TYPE_Q8_0, CX_TYPE_Q4_0,
                                  CX_TYPE_Q4_K, CX_TYPE_Q6_K, CX_TYPE_MXFP4, CX_FTYPE_Q4_K_M};

const char *cx_type_name(int type) {
    switch (type) {
    case CX_TYPE_F32: return "f32";
    case CX_TYPE_F16: return "f16";
    case CX_TYPE_BF16: return "bf16";
    case CX_TYPE_Q8_0: return "q8_0";
    case CX_TYPE_Q4_0: return "q4_0";
    case CX_TYPE_Q4_K: return "q4_k";
    case CX_TYPE_Q6_K: return "q6_k";
    case CX_TYPE_MXFP4: return "mxfp4";
    case CX_FTYPE_Q4_K_M: return "q4_k_m";
    default: return "?";
    }
}

int cx_type_from_name(const char *s) {
    for (size_t i = 0; i < sizeof NAMED_TYPES / sizeof NAMED_TYPES[0]; i++)
        if (!strcasecmp(s, cx_type_name(NAMED_TYPES[i]))) return NAMED_TYPES[i];
    return -1;
}
