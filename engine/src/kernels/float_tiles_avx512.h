/*
 * float_tiles_avx512.h - the tiling of float-activation matrix products for
 * the AVX-512 kernel files (include only from files built with the AVX-512
 * flags): float_dot (one row, one token) and float_gemm (rows in fours,
 * tokens in threes, remainders with smaller tiles) over a tile kernel the
 * including file defines first:
 *   float_rows(const uint8_t *const row[4], int NR, int kind, const kern_act *a,
 *              int t0, int NT, float out[4][3])
 * which must give each (row, token) pair the same arithmetic whatever NR and
 * NT, so that the gemm equals the dot bit for bit. kernels_avx512.c (f32
 * weights; its f16 and bf16 have the X16 tile) and bf16_avx512bf16.c (bf16 weights and
 * activations, vdpbf16ps) each instantiate it: one tiling, two tile kernels.
 */
#ifndef CX_FLOAT_TILES_AVX512_H
#define CX_FLOAT_TILES_AVX512_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

/* One row, one token: the tile kernel at its smallest. */
static inline __attribute__((always_inline)) float float_dot(const uint8_t *row, int kind, const kern_act *a,
                                                             int t) {
    const uint8_t *rows[4] = {row, row, row, row};
    float o[4][3];
    float_rows(rows, 1, kind, a, t, 1, o);
    return o[0][0];
}

/* Rows in fours, tokens in threes; remainders with smaller tiles of the same kernel. */
static inline __attribute__((always_inline)) void float_gemm(int kind, const uint8_t *w, size_t rb, int64_t r0,
                                                             int64_t r1, const kern_act *a, float *y, int64_t ldy) {
    float o[4][3];
    int64_t r = r0;
#define FLOAT_TILE(NR_, NT_)                                                                              \
    do {                                                                                                  \
        float_rows(rows, NR_, kind, a, t, NT_, o);                                                        \
        for (int rr = 0; rr < NR_; rr++)                                                                  \
            for (int k = 0; k < NT_; k++) y[(size_t)(t + k) * (size_t)ldy + (size_t)(r + rr)] = o[rr][k]; \
    } while (0)
    for (; r + 4 <= r1; r += 4) {
        const uint8_t *rows[4] = {w + (size_t)r * rb, w + (size_t)(r + 1) * rb, w + (size_t)(r + 2) * rb,
                                  w + (size_t)(r + 3) * rb};
        int t = 0;
        for (; t + 3 <= a->T; t += 3) FLOAT_TILE(4, 3);
        for (; t < a->T; t++) FLOAT_TILE(4, 1);
    }
    for (; r < r1; r++) {
        const uint8_t *rows[4] = {w + (size_t)r * rb, w + (size_t)r * rb, w + (size_t)r * rb, w + (size_t)r * rb};
        int t = 0;
        for (; t + 3 <= a->T; t += 3) FLOAT_TILE(1, 3);
        for (; t < a->T; t++) FLOAT_TILE(1, 1);
    }
#undef FLOAT_TILE
}

#endif
