/*
 * lora_kern.h - the low-rank half of a LoRA adapter's product: the layout of
 * its up-projection B and the kernel that adds B·u into a matrix's output.
 *
 * An adapted matrix computes y = W·x + s·B·(A·x). A·x (rank r outputs per
 * token) runs on the ordinary gemm kernels with A stored as weight rows.
 * B is [n_out][r]: each output o needs B's row o against the token's r
 * values u. Stored row-major, that is a length-r dot per output (r = 16:
 * two vectors and a horizontal sum each). Stored as "panels" instead, for
 * each 32 consecutive outputs their r columns one after another (element
 * (o, j) in panel o/32, block j, lane o%32), each step is a broadcast of
 * u[j] times a vector of outputs: no horizontal sums, and a thread's range
 * of outputs (the rows it computed of W·x) is a contiguous run of panels.
 * A block is 32 f32 values, one q8_0 block (an fp16 scale and 32 int8
 * codes: 34 bytes, 1.06 bytes a value, like the q8_0 base weights) or one
 * q4_0 block (18 bytes, 0.56 bytes a value: half the memory traffic);
 * outputs past n_out in the last panel are zero.
 */
#ifndef CX_LORA_KERN_H
#define CX_LORA_KERN_H

#include <stddef.h>
#include <math.h>
#include <stdint.h>

#include "../quant.h"
#include "cortex.h"

#define KERN_LORA_PANEL 32 /* outputs per panel (one q8_0 block) */

/*
 * KERN_LORA_I8, the layout of q8_0 adapters' B: integer dot products. B's
 * rows are quantized to int8 codes with one f32 scale each (s_o = max|B[o]|
 * / 127) and stored offset by 128 as bytes in [1, 255], in groups of 16
 * outputs: for each 4 ranks j..j+3, 64 bytes, output i's four codes at
 * 4i (what one vpdpbusd reads: four bytes per 32-bit lane), then the
 * group's 16 scales. The rank is padded to a multiple of 4 with code 0. A
 * token's u is quantized to codes in [-63, 63] with one scale d (so
 * maddubs, whose pairs of u8 x s8 products must fit int16, never
 * saturates), and each output gets
 *   y[o] += (s_o * d) * (sum_j (B_u8[o][j]) * u_q[j] - 128 * sum_j u_q[j])
 * The sums are exact integers, the same on every instruction set, and the
 * float steps are the same multiply and add: every table gives the same
 * bits. One q8_0-sized read per value, and an int8 product in place of a
 * dequantize-and-FMA per value per token, which is what a token per
 * adapter (many distinct adapters in a batch) costs most.
 */
#define KERN_LORA_I8 64 /* a layout id beside the ggml type ids (F32, Q8_0 and Q4_0 panels) */
/*
 * KERN_LORA_I4, the layout of q4_0 adapters' B: the same with 4-bit codes
 * (s_o = max|B[o]| / 7, codes offset by 8 into [1, 15]) and half the bytes:
 * each 64 bytes hold two chunks of 4 ranks, the even chunk in the low
 * nibbles and the odd one in the high nibbles (one mask, or one shift and
 * mask, gives a vpdpbusd operand); the rank is padded to a multiple of 8.
 *   y[o] += (s_o * d) * (sum_j code[o][j] * u_q[j] - 8 * sum_j u_q[j])
 */
#define KERN_LORA_I4 65

/* Bytes of one group of 16 outputs of an integer layout (KERN_LORA_I8 or
 * KERN_LORA_I4): the codes (64 bytes per 4 ranks, or per 8 for I4), then
 * the 16 f32 scales, which start at kern_lora_group_bytes - 64. */
static inline size_t kern_lora_group_bytes(int type, int rank) {
    size_t per = type == KERN_LORA_I4 ? 8 : 4;
    return ((size_t)rank + per - 1) / per * 64 + 16 * sizeof(float);
}

/* Quantize u[0..rank) to codes in [-63, 63] (q, padded with zeros to a
 * multiple of 4), their sum and scale; the shared first step of every
 * table's KERN_LORA_I8 kernel, so all quantize alike. *d = 0 for u all zero. */
static inline void kern_lora_quant_u(const float *u, int rank, int8_t *q, int32_t *sum, float *d) {
    float m = 0.0f;
    for (int j = 0; j < rank; j++) m = u[j] > m ? u[j] : -u[j] > m ? -u[j] : m;
    float id = m > 0 ? 63.0f / m : 0.0f;
    if (!isfinite(id)) id = 0.0f, m = 0.0f; /* too small to scale (or not finite): adds nothing */
    *d = m / 63.0f;
    int32_t s = 0;
    int j = 0;
    for (; j < rank; j++) {
        float v = fminf(fmaxf(u[j] * id, -63.0f), 63.0f); /* clamped first: id may be huge (subnormal max) */
        int c = (int)(v + (v >= 0 ? 0.5f : -0.5f)); /* round half away from zero */
        q[j] = (int8_t)c;
        s += c;
    }
    for (; j % 8; j++) q[j] = 0; /* whole chunks (I8) and chunk pairs (I4) */
    *sum = s;
}

/* Bytes of one panel block of `type` (CX_TYPE_F32: 128, CX_TYPE_Q8_0: 34, CX_TYPE_Q4_0: 18); 0 for other
 * types (the integer layouts have groups, not panels). Inline: the kernels ask per block. */
static inline size_t kern_lora_block_bytes(int type) {
    return type == CX_TYPE_F32    ? KERN_LORA_PANEL * sizeof(float)
           : type == CX_TYPE_Q8_0 ? sizeof(block_q8_0)
           : type == CX_TYPE_Q4_0 ? sizeof(block_q4_0) : 0;
}

/* The panel block holding outputs o..o+KERN_LORA_PANEL-1's column j (lora_kern.h's panel layout). */
static inline const uint8_t *kern_lora_panel_block(const uint8_t *bt, int type, int rank, int64_t o, int j) {
    return bt + ((size_t)(o / KERN_LORA_PANEL) * (size_t)rank + (size_t)j) * kern_lora_block_bytes(type);
}
/* Bytes of B [n_out][rank] stored as panels of `type`. */
size_t kern_lora_b_bytes(int type, int64_t n_out, int rank);
struct kern_ops;
/* Store B (f32, [n_out][rank] row-major) as panels of `type` in dst
 * (kern_lora_b_bytes bytes). q8_0 blocks are quantized with k's activation
 * quantizer (kern_q8_0_from_f32) when k is given, else the scalar one. */
void kern_lora_pack_b(int type, const float *b, int64_t n_out, int rank, uint8_t *dst, const struct kern_ops *k);
/* n floats (n % 32 == 0) as q8_0 blocks, with table k's activation quantizer
 * (SIMD: d = max|x|/127, codes round-half-even(x/d)) and d stored as fp16;
 * `scratch` holds kern_act_bytes(KERN_ACT_Q8_32, 1, n). */
void kern_q8_0_from_f32(const struct kern_ops *k, const float *x, int64_t n, uint8_t *dst, void *scratch);

/*
 * y[t*ldy + o] += sum_{j<rank} u[t*ldu + j] * B[o][j] for t in [0, T) and o in
 * [o0, o1), B in panels of `type` at bt. o0 is a multiple of 16 (threads
 * split outputs at multiples of 16); o1 need not be. Each output sums its
 * rank terms in order j = 0, 1, ... into a zeroed accumulator and adds it to
 * y once, whatever T and the token's place in it: a token's result does not
 * depend on what else is in the pass.
 */
typedef void (*kern_lora_up_fn)(float *y, int64_t ldy, const float *u, int64_t ldu, int T, const uint8_t *bt,
                                int type, int rank, int64_t o0, int64_t o1);

void kern_lora_up_scalar(float *y, int64_t ldy, const float *u, int64_t ldu, int T, const uint8_t *bt, int type,
                         int rank, int64_t o0, int64_t o1);
#if defined(__x86_64__) || defined(_M_X64)
void kern_lora_up_avx512vnni(float *y, int64_t ldy, const float *u, int64_t ldu, int T, const uint8_t *bt, int type,
                             int rank, int64_t o0, int64_t o1);
void kern_lora_up_avx2(float *y, int64_t ldy, const float *u, int64_t ldu, int T, const uint8_t *bt, int type,
                       int rank, int64_t o0, int64_t o1);
void kern_lora_up_avx512(float *y, int64_t ldy, const float *u, int64_t ldu, int T, const uint8_t *bt, int type,
                         int rank, int64_t o0, int64_t o1);
#endif

#endif
