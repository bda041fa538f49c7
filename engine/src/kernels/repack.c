/*
 * repack.c - the interleaved weight layouts (kernels.h: KERN_LAYOUT_X8,
 * KERN_LAYOUT_X16): one group of eight or sixteen rows rewritten in place
 * into the order the tables' gemm_x8 / gemm_x16 kernels read.
 *
 * Each group keeps its bytes (nothing grows, a group stays where its rows
 * were); the caller gives a scratch of the group's size. Which matrices are
 * repacked, and into which layout, is the loader's decision (model.c's
 * model_repack, from the model's table); this file only moves bytes.
 */
#include <assert.h>
#include <string.h>

#include "cortex.h"
#include "../kquant.h"
#include "kernels.h"

int kern_layout_group(kern_layout layout) {
    switch (layout) {
    case KERN_LAYOUT_ROWS:
        return 1;
    case KERN_LAYOUT_X8:
        return 8;
    case KERN_LAYOUT_X16:
        return 16;
    }
    assert(0 && "a layout of the enum");
    return 1;
}

/* Block size of a type with the q8_0-style interleaved layouts (q8_0 34,
 * q4_0 18, mxfp4 17), 0 for others; *scale_bytes: the block's leading scale
 * (an fp16, or MXFP4's E8M0 byte), the rest are codes. */
static size_t repack_block_bytes(int type, size_t *scale_bytes) {
    *scale_bytes = type == CX_TYPE_MXFP4 ? 1 : 2;
    return type == CX_TYPE_Q8_0 ? 34 : type == CX_TYPE_Q4_0 ? 18 : type == CX_TYPE_MXFP4 ? 17 : 0;
}

int kern_repack_x8(int type, uint8_t *group, size_t row_bytes, int64_t n, uint8_t *scratch) {
    size_t sb, bs = repack_block_bytes(type, &sb), qb = bs - sb;
    if (!bs) return -1;
    int64_t nb = n / 32;
    assert(row_bytes == (size_t)nb * bs);
    memcpy(scratch, group, 8 * row_bytes);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *dst = group + (size_t)b * 8 * bs;
        for (int r = 0; r < 8; r++) {
            const uint8_t *src = scratch + (size_t)r * row_bytes + (size_t)b * bs;
            memcpy(dst + sb * (size_t)r, src, sb);
            memcpy(dst + 8 * sb + (size_t)r * qb, src + sb, qb);
        }
    }
    return 0;
}

int kern_repack_x16(int type, uint8_t *group, size_t row_bytes, int64_t n, uint8_t *scratch) {
    if (type == CX_TYPE_F16 || type == CX_TYPE_BF16) { /* column k of row r at (16 k + r) * 2 */
        assert(row_bytes == (size_t)n * 2);
        memcpy(scratch, group, 16 * row_bytes);
        uint16_t *dst = (uint16_t *)(void *)group;
        for (int r = 0; r < 16; r++) {
            const uint16_t *src = (const uint16_t *)(const void *)(scratch + (size_t)r * row_bytes);
            for (int64_t k = 0; k < n; k++) dst[16 * k + r] = src[k];
        }
        return 0;
    }
    if (type == CX_TYPE_Q4_K || type == CX_TYPE_Q6_K) { /* word i of row r's block at 64 i + 4 r */
        size_t bs = type == CX_TYPE_Q4_K ? Q4K_BYTES : Q6K_BYTES, words = bs / 4; /* Q6_K: 52 words, then d */
        int64_t nb = n / 256;
        assert(row_bytes == (size_t)nb * bs);
        memcpy(scratch, group, 16 * row_bytes);
        for (int64_t b = 0; b < nb; b++)
            for (int r = 0; r < 16; r++) {
                const uint8_t *src = scratch + (size_t)r * row_bytes + (size_t)b * bs;
                uint8_t *dst = group + (size_t)b * 16 * bs;
                for (size_t i = 0; i < words; i++) memcpy(dst + (16 * i + (size_t)r) * 4, src + 4 * i, 4);
                if (type == CX_TYPE_Q6_K) memcpy(dst + 16 * Q6K_D_AT + 2 * (size_t)r, src + Q6K_D_AT, 2);
            }
        return 0;
    }
    size_t sb, bs = repack_block_bytes(type, &sb), qb = bs - sb;
    if (!bs) return -1;
    int64_t nb = n / 32;
    assert(row_bytes == (size_t)nb * bs && qb % 4 == 0);
    memcpy(scratch, group, 16 * row_bytes);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *dst = group + (size_t)b * 16 * bs;
        for (int r = 0; r < 16; r++) {
            const uint8_t *src = scratch + (size_t)r * row_bytes + (size_t)b * bs;
            memcpy(dst + sb * (size_t)r, src, sb);
            for (size_t c = 0; c < qb / 4; c++)
                memcpy(dst + 16 * sb + (16 * c + (size_t)r) * 4, src + sb + 4 * c, 4);
        }
    }
    return 0;
}
