/*
 * kquant_dump.c - write Q4_K and Q6_K blocks with what the engine makes of
 * them, for tests/reference/kquant_ref.py to check against a dequantizer
 * written independently from the ggml spec.
 *
 * usage: kquant_dump OUT [SEED]
 * Output (little-endian): u32 magic 'KQDP' (0x5044514B), u32 section count;
 * then per section: u32 ggml type (12 or 14), u32 n_blocks, the blocks' bytes,
 * n = 256*n_blocks float32 dequantized weights (kq_dequantize_row_*), then one
 * activation row over all n weights: n int8 codes, n_blocks float32 scales,
 * and float32 kq_dot_*_scalar(blocks as one row, activations).
 * Blocks: random bytes with random finite fp16 scales (subnormals and
 * +-65504 included), quantized normal rows, all-zero and all-0xFF blocks.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cortex.h"
#include "kquant.h"
#include "util.h"
#include "cortex_tools.h"

#define MAGIC 0x5044514Bu
#define NB 64 /* blocks per section */

static uint64_t state;

/* splitmix64 step. */
static uint64_t next_u64(void) { return cx_splitmix64(&state); }

/* A random finite half: any sign, exponent 0..30 (so subnormals too). */
static uint16_t random_half(void) {
    uint16_t h = (uint16_t)next_u64();
    return (h & 0x7C00) == 0x7C00 ? (uint16_t)(h & 0x83FF) : h;
}

/* Fill nb blocks of `type` at p: block kinds cycle through random, quantized, zero, 0xFF/extreme. */
static void make_blocks(int type, uint8_t *p) {
    size_t bs = type == CX_TYPE_Q4_K ? sizeof(block_q4_k) : sizeof(block_q6_k);
    float x[QK_K];
    for (int b = 0; b < NB; b++, p += bs) {
        int kind = b % 8;
        if (kind < 5) { /* random bytes, random finite scales */
            for (size_t i = 0; i < bs; i++) p[i] = (uint8_t)next_u64();
            uint16_t d = random_half(), dm = random_half();
            if (type == CX_TYPE_Q4_K) {
                memcpy(p, &d, 2);
                memcpy(p + 2, &dm, 2);
            } else {
                memcpy(p + 208, &d, 2);
            }
        } else if (kind == 5) { /* what the quantizer writes */
            for (int i = 0; i < QK_K; i += 2) {
                double u1 = ((double)(next_u64() >> 11) + 1) / 9007199254740993.0;
                double u2 = (double)(next_u64() >> 11) / 9007199254740992.0;
                x[i] = (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
                x[i + 1] = (float)(sqrt(-2 * log(u1)) * sin(6.283185307179586 * u2));
            }
            if (type == CX_TYPE_Q4_K) kq_quantize_row_q4_k(x, p, QK_K);
            else kq_quantize_row_q6_k(x, p, QK_K);
        } else if (kind == 6) {
            memset(p, 0, bs);
        } else { /* every code and scale at its top, d = -65504 (and dmin 65504) */
            memset(p, 0xFF, bs);
            uint16_t d = 0xFBFF, dm = 0x7BFF;
            if (type == CX_TYPE_Q4_K) {
                memcpy(p, &d, 2);
                memcpy(p + 2, &dm, 2);
            } else {
                memcpy(p + 208, &d, 2);
            }
        }
    }
}

/* Write one section: blocks, dequantized weights, an activation row and the scalar dot. */
static int write_section(FILE *f, int type) {
    size_t bs = type == CX_TYPE_Q4_K ? sizeof(block_q4_k) : sizeof(block_q6_k);
    const int64_t n = (int64_t)NB * QK_K;
    uint8_t *blocks = malloc(bs * NB);
    float *w = malloc(sizeof(float) * (size_t)n), ad[NB];
    int8_t *qs = malloc((size_t)n);
    int16_t *bsum = malloc(sizeof(int16_t) * (size_t)(n / 16));
    if (!blocks || !w || !qs || !bsum) return -1;
    make_blocks(type, blocks);
    if (type == CX_TYPE_Q4_K) kq_dequantize_row_q4_k(blocks, w, n);
    else kq_dequantize_row_q6_k(blocks, w, n);
    /* Activations: random codes in -127..127 and small positive/negative scales. */
    for (int64_t i = 0; i < n; i++) qs[i] = (int8_t)((int)(next_u64() % 255) - 127);
    for (int b = 0; b < NB; b++) ad[b] = (float)((double)(next_u64() % 1000 + 1) * 1e-6 * (b % 2 ? -1 : 1));
    for (int64_t g = 0; g < n / 16; g++) {
        int s = 0;
        for (int i = 0; i < 16; i++) s += qs[16 * g + i];
        bsum[g] = (int16_t)s;
    }
    kern_act a = {.fmt = KERN_ACT_Q8_256, .T = 1, .n = n, .qs = qs, .d = ad, .bsum = bsum};
    float dot = type == CX_TYPE_Q4_K ? kq_dot_q4_k_scalar(blocks, &a, 0) : kq_dot_q6_k_scalar(blocks, &a, 0);
    uint32_t hdr[2] = {(uint32_t)type, NB};
    int ok = fwrite(hdr, 4, 2, f) == 2 && fwrite(blocks, bs, NB, f) == NB &&
             fwrite(w, sizeof(float), (size_t)n, f) == (size_t)n && fwrite(qs, 1, (size_t)n, f) == (size_t)n &&
             fwrite(ad, sizeof(float), NB, f) == NB && fwrite(&dot, sizeof dot, 1, f) == 1;
    free(blocks);
    free(w);
    free(qs);
    free(bsum);
    return ok ? 0 : -1;
}

/* Write both sections to OUT from SEED (default 1). */
int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: kquant_dump OUT [SEED]\n");
        return 2;
    }
    state = argc == 3 ? strtoull(argv[2], NULL, 10) : 1;
    FILE *f = fopen(argv[1], "wb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    uint32_t hdr[2] = {MAGIC, 2};
    int rc = fwrite(hdr, 4, 2, f) == 2 && !write_section(f, CX_TYPE_Q4_K) && !write_section(f, CX_TYPE_Q6_K) ? 0 : 1;
    if (fclose(f) != 0) rc = 1;
    if (rc) fprintf(stderr, "kquant_dump: writing %s failed\n", argv[1]);
    return rc;
}
