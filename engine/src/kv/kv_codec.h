/*
 * kv_codec.h - the formats a KV-cache block is stored in, and their byte planes.
 *
 * A block holds KV_BLOCK consecutive positions of one sequence for every
 * layer. One layer of a block is a *slab* of KV_ROWS rows of `dim` values
 * (kv_dim = n_head_kv * head_dim): the KV_BLOCK key rows, then the KV_BLOCK
 * value rows. The codes of all rows come first, then the scales (floats).
 * The codes are stored head by head: kv head 0's KV_ROWS rows of hd codes
 * (hd = head_dim; keys, then values), then head 1's, and so on, so the
 * columns one attention item reads (one kv head's keys and values of the
 * block) are one run of bytes, not hd of every dim (a slab of one layer is
 * a whole block of every layer away from the next block's, so a run is
 * what the memory system streams; issue 30). A scale stays one per row (or
 * column, or group) of the whole slab, the same numbers as without heads.
 * In row terms ([32] = KV_ROWS rows, [dim] values a row):
 *
 *   KV_F32  [32][dim] float                      exact
 *   KV_F16  [32][dim] IEEE half                  round to nearest
 *   KV_Q8   [32][dim] int8, [32] scales          one scale per row (max|row| / 127):
 *                                                rows can be written one at a time (hot q8)
 *   KV_Q8B  [32][dim] int8, [dim + 16] scales    "per block": keys scaled per column over
 *                                                the block's 16 keys, values per row (as
 *                                                KIVI: key outliers sit in fixed channels)
 *   KV_Q4B  [32][dim/2] two 4-bit codes a byte   as KV_Q8B with 15 levels (max / 7); low
 *           (code + 8, low nibble first)         nibble first
 *   KV_BF16 [32][dim] bfloat16                   round to nearest even
 *   KV_E4M3 [32][dim] FP8 E4M3, [32] scales      one scale per row (max|row| / 448, E4M3's
 *                                                largest): 3 mantissa bits at every magnitude
 *   KV_E5M2 [32][dim] FP8 E5M2                   a half rounded to 2 mantissa bits; no
 *                                                scale (E5M2 spans 2^-16 .. 57344 itself)
 *   KV_Q4G  [32][dim/2] 4-bit codes as KV_Q4B,   one scale per group of 32 values of a row
 *           [32][dim/32] scales                  (max / 7): a row format
 *   KV_Q4H  as KV_Q4G, of each group rotated     the rotation (orthonormal: H H = I) spreads
 *           by the 32-point Walsh-Hadamard        an outlier channel's energy over its group,
 *           transform (kern_hadamard32) first     so the other 31 keep their precision; unpacking
 *                                                rotates back. Needs head_dim % 32 == 0 (a group
 *                                                never straddles two heads)
 *
 * Every quantized value is within half a step of the input (step = its
 * scale); the float formats round to nearest even, FP8 saturating at its
 * largest finite value. Row formats (all but q8b, q4b) are what the forward
 * pass writes, and warm blocks may hold them too; the block formats need the
 * whole slab and are what warm blocks hold by default. Attention reads any
 * format in place: kv_src describes a slab's rows to the kernels' kv_unpack
 * (kernels.h), which widens a tile of them where attention reads it.
 *
 * Byte planes, for the compressor: raw floats compress ~1.1x because their
 * low mantissa bytes are noise; gathering byte i of every value into plane i
 * puts the sign/exponent bytes together, where zlib finds the redundancy.
 * kv_planes_split permutes a slab that way (codes stay as they are, the
 * scales are split into 4 planes) and kv_planes_join undoes it exactly.
 */
#ifndef CX_KV_CODEC_H
#define CX_KV_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/kernels.h"
#include "cortex.h"

#define KV_BLOCK CX_KV_BLOCK   /* positions per block */
#define KV_ROWS (2 * KV_BLOCK) /* rows per slab: keys then values */

enum {
    KV_F32 = 0, KV_F16 = 1, KV_Q8 = 2, KV_Q8B = 3, KV_Q4B = 4, KV_BF16 = 5, KV_E4M3 = 6, KV_E5M2 = 7, KV_Q4G = 8,
    KV_Q4H = 9, KV_NFMT = 10
};
#define KV_GROUP 32 /* values per scale (and per rotation) of KV_Q4G and KV_Q4H */

/* The format of hot blocks for a public CX_KV_* type (f32, f16, bf16, q8,
 * e4m3, e5m2, q4g, q4h: the row format of that name), and of warm blocks
 * (q8 -> KV_Q8B, q4 -> KV_Q4B, the others their row format); -1 if the type
 * is not allowed there. */
int kv_fmt_hot(int cx_type);
int kv_fmt_warm(int cx_type);
/* "f32", "f16", "q8", "q8b", "q4b", "bf16", "e4m3", "e5m2", "q4g", "q4h" ("?" otherwise). */
const char *kv_fmt_name(int fmt);
/* Bytes of one slab of `dim`-value rows (dim even). */
size_t kv_slab_bytes(int fmt, int dim);
/* 1 for the formats whose rows are encoded one at a time (all but q8b, q4b). */
int kv_fmt_rowwise(int fmt);

/* Store row `row` (0..KV_ROWS-1) of a slab of a row format from `dim`
 * floats, heads of hd values (hd even, dividing dim). */
void kv_encode_row(int fmt, void *slab, int row, const float *x, int dim, int hd);
/* The q8 row encoding: codes of n floats at one scale, max|x| / 127, each
 * x / scale rounded to nearest (ties to even) and clamped to -127..127;
 * returns the scale (0 for an all-zero row, whose codes are 0). Attention
 * quantizes its queries so to meet q8 keys in int8 (attn_scores_i8). */
float kv_q8_row(const float *x, int n, int8_t *codes);
/* Store a whole slab, any format, from KV_ROWS rows of `dim` floats. */
void kv_encode_slab(int fmt, void *slab, const float *x, int dim, int hd);
/* Rows r0.. of a slab from column c0 (even) on, up to the end of c0's
 * head (columns of one head lie together), described for the kernels'
 * kv_unpack (kernels.h): rows of one half (keys 0..KV_BLOCK-1, or values)
 * per call, as the block formats scale the halves differently. */
void kv_src(int fmt, const void *slab, int dim, int hd, int r0, int c0, kern_kv_src *src);
/* Rows r0..r0+n-1 of a slab as floats, `dim` apart in out (the scalar
 * kernels' kv_unpack, a head at a time: the formats' definition). */
void kv_decode_rows(int fmt, const void *slab, int r0, int n, float *out, int dim, int hd);
/* The quantization step (scale) of element i of row r: 0 for f32/f16. */
float kv_step(int fmt, const void *slab, int r, int i, int dim);

/* The lengths of a split slab's planes, in order (f32: 4 value planes; f16:
 * 2; int formats: the codes, then 4 scale planes); returns their count (<= 5). */
int kv_planes_sizes(int fmt, int dim, size_t *size);
/* Permute a slab's bytes into planes (out has kv_slab_bytes bytes), and back. */
void kv_planes_split(int fmt, const void *slab, void *out, int dim);
void kv_planes_join(int fmt, const void *planes, void *slab, int dim);

#endif
