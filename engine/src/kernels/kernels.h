/*
 * kernels.h - the numeric kernels of the forward pass and their dispatch:
 * the kernel-table contract. Defined in: the kernels_*.c, kquant_*.c,
 * mxfp4_*.c, ops_avx512.c and bf16_avx512bf16.c tables (kernels_scalar.c also
 * kern_rope_table, the rope entry's input); dispatch.c (table
 * composition and choice: kern_select, kern_table, kern_missing); cpu.c
 * (CPUID: kern_cpu_features); act.c (activation buffers, kern_gemm_generic);
 * repack.c (the X8 and X16 weight layouts).
 *
 * Every kernel exists once per instruction set: a scalar reference
 * (kernels_scalar.c, written for clarity and exact agreement with the block
 * formats in quant.h / kquant.h / mxfp4.h) and SIMD versions (kernels_avx2.c,
 * kquant_avx2.c, mxfp4_avx2.c; kernels_avxvnni.c for the "avxvnni" table,
 * AVX2's with q8_0/q4_0's integer products by 256-bit vpdpbusd; kernels_avx512.c, kquant_avx512.c,
 * mxfp4_avx512.c and ops_avx512.c (attention, elementwise, Q8_32) for the "avx512" and
 * "avx512vnni" tables, which take the AVX2 table's entries for what they do not override; bf16_avx512bf16.c for
 * the "avx512bf16" table, avx512vnni's with BF16 weights met by bf16-rounded
 * activations through vdpbf16ps: faster, rounded differently, never the default).
 * kern_select() picks a table (cpu.c reads CPUID once per process); a model
 * keeps the one it was loaded with and its passes call through it
 * (cx_model_params.isa may force "scalar", "avx2", "avxvnni", "avx512",
 * "avx512vnni", "avx512bf16").
 *
 * Matrix products consume activations prepared once per matrix product
 * (kern_act): for quantized weights the activations are quantized to 8-bit
 * blocks, so the inner loops are integer dot products, as in ggml:
 *   weight type      activation format
 *   f32, f16, bf16   KERN_ACT_F32    (the floats themselves; the avx512bf16
 *                                    table's BF16 kernels round them to bf16 as they load them)
 *   q8_0, q4_0,      KERN_ACT_Q8_32  (int8 codes, one float scale per 32, code sums per 32)
 *   mxfp4
 *   q4_k, q6_k       KERN_ACT_Q8_256 (int8 codes, one float scale per 256, code sums per 16)
 * The SIMD kernels must reproduce the scalar result up to float rounding
 * order; tests/unit/engine/test_kernels.c states and checks each tolerance.
 */
#ifndef CX_KERNELS_H
#define CX_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "lora_kern.h"

struct cx_err;

/* Tables are indexed by ggml type id, sparsely: ids 0..39 cover f32..mxfp4;
 * every entry of a type without kernels is NULL. */
#define KERN_NTYPES 40

enum { KERN_ACT_F32 = 0, KERN_ACT_Q8_32 = 1, KERN_ACT_Q8_256 = 2 };

/* Keys per block of attn_values' V (the KV cache's positions per block). */
#define KERN_VBLOCK 16
/* Blocks per group of attn_values' sums (an attention tile's). */
#define KERN_VGROUP 4
_Static_assert(KERN_VGROUP == 4, "attn_values' group sums, (f0 + f1) + (f2 + f3), are written for four blocks");

/* attn_values' definition for one dimension d of the group of blocks b0 ..
 * b0 + KERN_VGROUP - 1 (those holding keys below kn): each block's keys in
 * order into a float by fmaf, the floats added pairs first. The scalar
 * table computes every dimension so; the SIMD tables their tail dimensions
 * (head_dim past their width). */
static inline float kern_values_group_dim(const float *p, const float *const *V, size_t stride, int kn, int b0, size_t d) {
    float f[KERN_VGROUP];
    int nb = 0;
    for (int b = b0; b < b0 + KERN_VGROUP && b * KERN_VBLOCK < kn; b++, nb++) {
        int n = kn - b * KERN_VBLOCK < KERN_VBLOCK ? kn - b * KERN_VBLOCK : KERN_VBLOCK;
        float x = 0.0f;
        for (int j = 0; j < n; j++) x = fmaf(p[b * KERN_VBLOCK + j], V[b][(size_t)j * stride + d], x);
        f[nb] = x;
    }
    float g = nb > 1 ? f[0] + f[1] : f[0];
    if (nb > 2) g += nb > 3 ? f[2] + f[3] : f[2];
    return g;
}

/*
 * T activation rows of n values, prepared for one weight type. Row t lives at
 *   f    + t*n        (KERN_ACT_F32)
 *   qs   + t*n        (Q8 formats: codes, row start 32-byte aligned when n % 32 == 0)
 *   d    + t*(n/B)    (B = 32 or 256: scale of each block)
 *   bsum + t*(n/16)   (Q8_256: sum of the codes of each 16) or t*(n/32) (Q8_32)
 */
typedef struct kern_act {
    int fmt, T;
    int decode_order;  /* 1: every token summed in the order a one-token product sums it, whatever T
                          (speculative verification: its rows must equal token-by-token decode) */
    int64_t n;
    const float *f;
    int8_t *qs;
    float *d;
    int16_t *bsum;
} kern_act;

/* Dot product of one weight row (n weights stored as the table's type) with activation row t. */
typedef float (*kern_dot_fn)(const void *row, const kern_act *a, int t);

/*
 * Rows of a KV-cache slab as attention reads them (kv_codec.h defines the
 * formats; kv_unpack_src describes a slab's rows in these terms). Element
 * kinds, and the float each code stands for:
 *   KERN_KV_F32   the float                   KERN_KV_I8    int8 code x scale
 *   KERN_KV_F16   the half, widened (exact)   KERN_KV_I4    nibble - 8 x scale (low nibble first)
 *   KERN_KV_BF16  the bfloat16, widened       KERN_KV_E4M3  FP8 E4M3 (bias 7, no infinities) x scale
 *   KERN_KV_E5M2  FP8 E5M2 (a half's high byte), widened
 * The scale of element (r, c) is row_scale[r] when row_scale is set, else
 * col_scale[c] when that is set, else group_scale[r * group_stride + c / 32]
 * when that is set, else 1; a scaled value is the code's exact float times
 * the scale, one float multiply (one rounding). With `hadamard`, each 32
 * scaled values of a row (from column 0 of the call, which must then take
 * whole groups) are then rotated back by kern_hadamard32. Every table gives
 * the scalar reference's bits (the transform's butterflies are elementwise,
 * stage by stage, in one order), so a model's attention does not change with
 * the table or with where a block is read from.
 */
enum { KERN_KV_F32, KERN_KV_F16, KERN_KV_BF16, KERN_KV_I8, KERN_KV_I4, KERN_KV_E4M3, KERN_KV_E5M2 };
typedef struct kern_kv_src {
    int elem;                /* KERN_KV_* */
    const uint8_t *codes;    /* element (0, 0): for I4, an even column's byte */
    size_t row_bytes;        /* from one row's codes to the next */
    const float *row_scale;  /* [n] one per row, or NULL */
    const float *col_scale;  /* [nc] one per column, or NULL (used when row_scale is NULL) */
    const float *group_scale;/* one per 32 columns of each row, rows group_stride apart, or NULL */
    size_t group_stride;
    int hadamard;            /* 1: rotate each 32 unpacked values by kern_hadamard32 */
} kern_kv_src;
/* x = H x / sqrt(32) in place, H the 32-point Walsh-Hadamard matrix:
 * butterflies (x[i], x[i + h]) -> (x[i] + x[i + h], x[i] - x[i + h]) for
 * h = 1, 2, 4, 8, 16, then each value times 1/sqrt(32). Orthonormal and
 * its own inverse (up to rounding). */
void kern_hadamard32(float *x);
/* acc += H r / sqrt(32) for 32 doubles, r overwritten: the same transform
 * in double (attention rotates a sum of rotated values back with it). */
void kern_hadamard32_add_f64(double *acc, double *r);
#define KERN_RSQRT32 0.17677669529663687f /* 1/sqrt(32), rounded to float */
/* The exact float of FP8 code b (E4M3: sign, 4 exponent bits biased by 7,
 * 3 mantissa bits, subnormals below 2^-6, no infinities: 0x7f/0xff are NaN;
 * E5M2: the half whose high byte is b). */
float kern_e4m3_value(uint8_t b);
float kern_e5m2_value(uint8_t b);
/* The exact float of code c of a row of `elem` codes (no scale). */
float kern_kv_value(int elem, const uint8_t *row, int c);
/* Element (r, c) of src with its scale (no rotation), `row` its row's codes:
 * the SIMD tables' tails (elem passed apart so they can give a constant). */
float kern_kv_scaled(const kern_kv_src *src, int elem, const uint8_t *row, int r, int c);
/*
 * y[t*ldy + r] = dot(row r, activation t) for r in [r0, r1), t in [0, a->T).
 * Rows are `row_bytes` apart from `w`. A gemm must give, for every (r, t),
 * exactly the value the same table's dot gives: batched prefill and
 * token-by-token decode then agree bit for bit.
 */
typedef void (*kern_gemm_fn)(const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1, const kern_act *a,
                             float *y, int64_t ldy);

typedef struct kern_ops {
    const char *name;                /* "scalar", "avx2", "avxvnni", "avx512", "avx512vnni", "avx512bf16" */
    /* How attention's decode item (one query position) reads a tile of f32
     * KV blocks: KERN_TILE_IN_PLACE, where the blocks are, or KERN_TILE_COPY,
     * copied into scratch first (one sequential read); the same floats and
     * bits either way, a question of speed only, which was measured per
     * table (docs/performance.md, "A decode item's f32 tile, per table"). 0 in a part: the base's. */
    int decode_tile;
    kern_dot_fn dot[KERN_NTYPES];    /* NULL: type not computable */
    kern_gemm_fn gemm[KERN_NTYPES];  /* NULL: kern_gemm_generic over dot */
    /* gemm over weights in the interleaved layout of kern_repack_x8 (NULL: the
     * table does not use it, so weights are not repacked for it). */
    kern_gemm_fn gemm_x8[KERN_NTYPES];
    /* gemm over the sixteen-row layout of kern_repack_x16 (NULL: not used);
     * a model is repacked to X16 where the table has it, else to X8. */
    kern_gemm_fn gemm_x16[KERN_NTYPES];
    /* Quantize activation row t of a (fmt Q8_32 or Q8_256) from n floats x. */
    void (*quantize_act)(const float *x, kern_act *a, int t);
    /* Attention scores of nq queries (rows ldq floats apart; scores of
     * query i at sc + i * ldsc) against kn keys (rows `stride` floats
     * apart), head_dim hd: sc[i][j] = s_ij * scale, s_ij one fused
     * multiply-add chain over the dimensions in order from zero (s = 0; s =
     * fmaf(q_i[d], K[j][d], s) for d = 0 .. hd-1). Every table gives these
     * bits, and a score does not depend on the other queries and keys of
     * the call: the SIMD tables put keys across the lanes (one chain per
     * lane, nothing reduced across lanes) and transpose each group of keys
     * once for all the call's queries, so the forward pass scores a block
     * for every (head, query) of an item at once. */
    void (*attn_scores)(float *sc, size_t ldsc, const float *q, size_t ldq, int nq, const float *K, size_t stride, int kn,
                        int hd, float scale);
    /* The same from int8 codes, for keys of the q8 KV format read where they
     * are stored, for nq queries at once (rows ldq bytes apart, scales
     * qd[i]; scores of query i at sc + i * ldsc): sc[i][j] = (float)isum_ij *
     * (qd[i] * kd[j]) * scale, in that order, isum_ij = sum_d q_i[d] * K[j][d]
     * exact in int32; codes in -127..127, key rows `stride` bytes apart,
     * kd[j] key j's scale; qsum[i] = sum_d q_i[d], the caller's (once per
     * query, where a table shifts codes to unsigned and takes 128 * qsum
     * back off). Integer sums are exact and the three float products fixed,
     * so every table gives the same bits. */
    void (*attn_scores_i8)(float *sc, size_t ldsc, const int8_t *q, size_t ldq, const float *qd, const int32_t *qsum, int nq,
                           const int8_t *K, size_t stride, const float *kd, int kn, int hd, float scale);
    /* acc[d] += sum_j p[j] * V(j)[d] over kn keys in blocks of KERN_VBLOCK:
     * key j is row j % KERN_VBLOCK of block V[j / KERN_VBLOCK], rows `stride`
     * floats apart. Per dimension, each block's keys go in order into a float
     * f_b by one fused multiply-add each; the call's blocks, in groups of
     * KERN_VGROUP from its first, add their floats in float as (f0 + f1) +
     * (f2 + f3) (fewer blocks: f0, f0 + f1, (f0 + f1) + f2), and each
     * group's float is added to acc in double, group after group. Every
     * table keeps this order, so they give the same bits; the double
     * accumulator spans the whole context (float sums over hundreds of
     * positions drift past 1e-4 of the logits), a float one a group (64
     * keys: one widening per tile instead of one per block). Blocks are
     * independent chains, so a call over a tile's blocks keeps several FMAs
     * in flight. */
    void (*attn_values)(double *acc, const float *p, const float *const *V, size_t stride, int kn, int hd);
    /* x[i] = exp(x[i] - shift); returns the sum of the new x (online softmax). */
    double (*exp_shift)(float *x, int n, float shift);
    /* acc[i] *= s (online softmax rescale). */
    void (*scale_f64)(double *acc, double s, int n);
    /* out = x / rms(x) * w, rms(x) = sqrt(mean(x^2) + eps). out may alias x. */
    void (*rmsnorm)(float *out, const float *x, const float *w, int n, float eps);
    /* In-place numerically stable softmax. */
    void (*softmax)(float *x, int n);
    /* Rotate adjacent pairs (v[2i], v[2i+1]) of each head by the angle whose
     * cosine/sine are cs[2i], cs[2i+1] (from kern_rope_table). */
    void (*rope)(float *v, int n_heads, int head_dim, const float *cs);
    /* gate[i] = silu(gate[i]) * up[i]. */
    void (*swiglu)(float *gate, const float *up, int n);
    /* Index of the largest value; the lowest index wins ties. */
    int (*argmax)(const float *x, int n);
    /* y[i] += x[i] (residual connections). */
    void (*add)(float *y, const float *x, int n);
    /* LoRA's up-projection: y += B·u over a range of outputs (lora_kern.h). */
    kern_lora_up_fn lora_up;
    /* out[r * ld + c] = value of element (r, c) of src (kern_kv_src) for r < n,
     * c < nc (nc even): a tile of KV rows unpacked where attention reads it. */
    void (*kv_unpack)(const kern_kv_src *src, int n, int nc, float *out, size_t ld);
} kern_ops;

enum { KERN_TILE_IN_PLACE = 1, KERN_TILE_COPY = 2 };

/* Every single function of kern_ops (after the per-type arrays), once: the
 * composition of the AVX-512 tables (dispatch.c) takes each from the part
 * that overrides it. The asserts fail when a field is added to kern_ops but
 * not here, so no table silently keeps the base's function. */
#define KERN_OPS_SINGLE(X) \
    X(quantize_act) X(attn_scores) X(attn_scores_i8) X(attn_values) X(exp_shift) X(scale_f64) X(rmsnorm) X(softmax) X(rope) \
    X(swiglu) X(argmax) X(add) X(lora_up) X(kv_unpack)
#define KERN_OPS_COUNT_(f) +1
_Static_assert(offsetof(kern_ops, quantize_act) == offsetof(kern_ops, gemm_x16) + sizeof(kern_gemm_fn) * KERN_NTYPES,
               "kern_ops: the single functions follow the per-type arrays directly");
_Static_assert(sizeof(kern_ops) == offsetof(kern_ops, quantize_act) + sizeof(void (*)(void)) * (0 KERN_OPS_SINGLE(KERN_OPS_COUNT_)),
               "kern_ops: a function added to the table must be listed in KERN_OPS_SINGLE");

/* The table for instruction set `isa` ("scalar", "avx2", "avxvnni", "avx512", "avx512vnni", "avx512bf16"; NULL,
 * "" or "auto": the best this CPU supports, never avx512bf16, which rounds activations) in *out. Returns 0, or -1 with a message in msg
 * when isa is unknown or unavailable here. Thread-safe. A model keeps the
 * table it was loaded with (cx_model_params.isa); its passes call through it. */
int kern_select(const char *isa, const kern_ops **out, struct cx_err *err);
/* The tables themselves, for tests that compare them. NULL if not compiled in
 * or not supported by this CPU. */
const kern_ops *kern_table(const char *isa);
/* What the CPU offers, as "avx2 fma f16c" etc. (CPUID, cpu.c), for reports. */
const char *kern_cpu_features(void);
/* NULL if table `isa` runs here, else the first feature it needs that the CPU
 * or OS lacks, in words ("AVX-512 VNNI"), for SKIP lines and errors. */
const char *kern_missing(const char *isa);

/* ---- activation buffers (act.c) ---- */

/* Activation format a weight type's kernels consume (KERN_ACT_*), -1 if none. */
int kern_act_format(int type);
/* Bytes kern_act_init needs for T rows of n values of a format. */
size_t kern_act_bytes(int fmt, int T, int64_t n);
/* Lay out a kern_act over caller-provided, 32-byte-aligned memory of kern_act_bytes(). */
void kern_act_init(kern_act *a, int fmt, int T, int64_t n, void *mem);
/* A view of rows t0..t0+T-1 of a (for tiling a gemm over tokens). */
void kern_act_slice(const kern_act *a, int t0, int T, kern_act *out);
/* Fill activation row t from floats with the table's quantizer (or point at them for F32). */
void kern_act_set(const kern_ops *k, kern_act *a, int t, const float *x);

/* Default gemm: dot for every (row, token). */
void kern_gemm_generic(const kern_ops *k, int type, const uint8_t *w, size_t row_bytes, int64_t r0, int64_t r1,
                       const kern_act *a, float *y, int64_t ldy);

/*
 * Weight layouts (repack.c). KERN_LAYOUT_ROWS is the file's: row after row of ggml
 * blocks. KERN_LAYOUT_X8 interleaves groups of eight rows block by block:
 * for block b of rows 8g..8g+7, their eight scales (fp16: 16 bytes; MXFP4's
 * E8M0 bytes: 8), then their eight code arrays (q8_0: 8 x 32 bytes; q4_0 and
 * mxfp4: 8 x 16). Same bytes per group as before, so a group stays where its
 * rows were and nothing grows; an eight-row kernel then reads the scales with
 * one load instead of eight.
 */
typedef enum kern_layout { KERN_LAYOUT_ROWS = 0, KERN_LAYOUT_X8 = 1, KERN_LAYOUT_X16 = 2 } kern_layout;
/* Rows per interleaved group of a layout: 1 (ROWS), 8 or 16. */
int kern_layout_group(kern_layout layout);
/* The gemm of table k for `type` in `layout` (NULL: none; for ROWS, kern_gemm_generic then). */
static inline kern_gemm_fn kern_gemm_of(const kern_ops *k, int type, kern_layout layout) {
    switch (layout) {
    case KERN_LAYOUT_ROWS:
        return k->gemm[type];
    case KERN_LAYOUT_X8:
        return k->gemm_x8[type];
    case KERN_LAYOUT_X16:
        return k->gemm_x16[type];
    }
    return NULL;
}
/* Repack one group of eight rows (8 * row_bytes bytes at `group`) of a q8_0,
 * q4_0 or mxfp4 matrix with n columns into the X8 layout, in place; `scratch` holds
 * 8 * row_bytes bytes. Returns 0, or -1 for a type without an X8 layout. */
int kern_repack_x8(int type, uint8_t *group, size_t row_bytes, int64_t n, uint8_t *scratch);
/*
 * KERN_LAYOUT_X16, for 512-bit integer dot products (vpdpbusd): sixteen rows
 * interleaved block by block; for block b of rows 16g..16g+15 their sixteen
 * fp16 scales (32 bytes), then the code bytes in 4-byte chunks, chunk c of
 * row r at 32 + (16c + r) * 4 (q8_0: 8 chunks, q4_0: 4 chunks of ggml's
 * packed nibbles); mxfp4 the same with its sixteen E8M0 bytes (16 bytes) in
 * front, chunk c of row r at 16 + (16c + r) * 4. One 64-byte load is then chunk c of all sixteen rows, one
 * int32 lane per row, against four activation codes broadcast to every lane:
 * each lane accumulates its row's block product with no horizontal sums.
 * f16 and bf16: column k of row r at (16 k + r) * 2, so one 32-byte load is column
 * k of all sixteen rows (one FMA per column advances them all).
 * Q4_K: 4-byte word i of row r's 144-byte super-block at 64 i + 4 r (d and
 * dmin, the packed scales, then the codes in 4-byte chunks); Q6_K: the same
 * for the first 208 bytes of its 210 (ql, qh, scales), then the 16 fp16 d.
 * Same bytes per group, in place; scratch holds 16 * row_bytes bytes.
 * Returns 0, or -1 for a type without an X16 layout.
 */
int kern_repack_x16(int type, uint8_t *group, size_t row_bytes, int64_t n, uint8_t *scratch);

/* The rope entry's input, the same for every table (kernels_scalar.c, next to
 * the reference rope): cs[2i] = cos(pos*inv_freq[i]), cs[2i+1] = sin(...),
 * angles in double. */
void kern_rope_table(float *cs, int head_dim, int pos, const double *inv_freq);

/* ---- the scalar table's kernels, exported as references for SIMD tests ---- */
extern const kern_ops kern_scalar_ops;
#if defined(__x86_64__) || defined(_M_X64)
extern const kern_ops kern_avx2_ops;
/* What kernels_avxvnni.c overrides of the AVX2 table (the "avxvnni" table). */
extern const kern_ops kern_avxvnni_part;
/* What kernels_avx512.c overrides (entries left NULL come from the AVX2
 * table when dispatch.c composes the "avx512" and "avx512vnni" tables), and
 * what bf16_avx512bf16.c overrides of the composed avx512vnni table (the
 * "avx512bf16" table: BF16 weights against bf16-rounded activations). */
extern const kern_ops kern_avx512_part, kern_avx512vnni_part, kern_avx512bf16_part;
#endif

/* Float-activation reference: dot of a row of n weights stored as `type` with
 * float x, no activation quantization (bounds what quantizing activations costs). */
float kern_dot_scalar(int type, const void *row, const float *x, int64_t n);

/* Scalar reference quantizer of activations (both Q8 formats), used by every table
 * unless it has a faster one that gives identical codes and scales. */
void kern_quantize_act_scalar(const float *x, kern_act *a, int t);

#endif
