/*
 * quant.h - ggml block formats and their scalar reference conversions.
 *
 * Byte layouts match ggml exactly so GGUF files from other tools load unchanged:
 *   Q8_0: 32 weights per 34-byte block: fp16 scale d, then int8 q[32];   w = d*q
 *   Q4_0: 32 weights per 18-byte block: fp16 scale d, then 16 bytes; byte j holds
 *         weight j in its low nibble and weight j+16 in its high nibble; w = d*(q-8)
 * These functions are the reference every SIMD kernel is tested against.
 */
#ifndef CX_QUANT_H
#define CX_QUANT_H

#include <stddef.h>
#include <stdint.h>

#define QK 32 /* weights per Q8_0/Q4_0 block */

typedef struct { uint16_t d; int8_t qs[QK]; } block_q8_0;
typedef struct { uint16_t d; uint8_t qs[QK / 2]; } block_q4_0;

_Static_assert(sizeof(block_q8_0) == 34, "Q8_0 block must be 34 bytes");
_Static_assert(sizeof(block_q4_0) == 18, "Q4_0 block must be 18 bytes");

/* Bytes of one row of n weights of a type (n a multiple of the block size). */
size_t quant_row_bytes(int type, int64_t n);
/* 1 if the engine can compute with this type (f32, f16, q8_0, q4_0). */
int quant_supported(int type);

/* Expand n weights of a row stored as `type` into floats. */
void quant_dequantize_row(int type, const void *src, float *dst, int64_t n);
/* Store n floats as `type` (f32, f16, q8_0, q4_0), rounding as ggml does. */
void quant_quantize_row(int type, const float *src, void *dst, int64_t n);

#endif
