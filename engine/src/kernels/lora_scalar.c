/*
 * lora_scalar.c - LoRA's B panels (lora_kern.h): packing, and the scalar
 * reference of the up-projection kernel that lora_avx2.c and lora_avx512.c
 * are tested against.
 */
#include <assert.h>
#include <string.h>

#include "../quant.h"
#include "../util.h"
#include "cortex.h"
#include "lora_kern.h"

/* See lora_kern.h. */
size_t kern_lora_block_bytes(int type) {
    return type == CX_TYPE_F32 ? KERN_LORA_PANEL * sizeof(float) : type == CX_TYPE_Q8_0 ? sizeof(block_q8_0) : 0;
}

/* See lora_kern.h. */
size_t kern_lora_b_bytes(int type, int64_t n_out, int rank) {
    size_t panels = (size_t)((n_out + KERN_LORA_PANEL - 1) / KERN_LORA_PANEL);
    return panels * (size_t)rank * kern_lora_block_bytes(type);
}

/* See lora_kern.h. Each block gathers column j of 32 rows, zero past n_out,
 * then is copied (f32) or quantized like any q8_0 row of 32 values. */
void kern_lora_pack_b(int type, const float *b, int64_t n_out, int rank, uint8_t *dst) {
    size_t blk = kern_lora_block_bytes(type);
    assert(blk);
    float col[KERN_LORA_PANEL];
    for (int64_t p = 0; p * KERN_LORA_PANEL < n_out; p++)
        for (int j = 0; j < rank; j++, dst += blk) {
            for (int i = 0; i < KERN_LORA_PANEL; i++) {
                int64_t o = p * KERN_LORA_PANEL + i;
                col[i] = o < n_out ? b[o * rank + j] : 0.0f;
            }
            if (type == CX_TYPE_F32) memcpy(dst, col, sizeof col);
            else quant_quantize_row(CX_TYPE_Q8_0, col, dst, KERN_LORA_PANEL);
        }
}

/* Element (o, j) of B stored as panels. */
static float b_at(const uint8_t *bt, int type, int rank, int64_t o, int j) {
    size_t blk = kern_lora_block_bytes(type);
    const uint8_t *p = bt + ((size_t)(o / KERN_LORA_PANEL) * (size_t)rank + (size_t)j) * blk;
    int i = (int)(o % KERN_LORA_PANEL);
    if (type == CX_TYPE_F32) {
        float v;
        memcpy(&v, p + sizeof(float) * (size_t)i, sizeof v);
        return v;
    }
    return cx_fp16_to_fp32(cx_rd16(p)) * (float)((const int8_t *)(p + 2))[i];
}

/* See lora_kern.h: the definition the SIMD kernels are checked against. */
void kern_lora_up_scalar(float *y, int64_t ldy, const float *u, int64_t ldu, int T, const uint8_t *bt, int type,
                         int rank, int64_t o0, int64_t o1) {
    assert(o0 % 16 == 0 && o0 <= o1);
    for (int t = 0; t < T; t++)
        for (int64_t o = o0; o < o1; o++) {
            float acc = 0.0f;
            for (int j = 0; j < rank; j++) acc += u[t * ldu + j] * b_at(bt, type, rank, o, j);
            y[t * ldy + o] += acc;
        }
}
