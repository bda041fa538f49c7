/*
 * kv_view.h - what attention reads: per block of a sequence, the slab of one
 * layer (KV_BLOCK key rows, then KV_BLOCK value rows, kv_codec.h) and its
 * format.
 *
 * Hot and warm blocks are read where they are, in their own format: attention
 * unpacks the rows and columns a tile needs (one kv head's, kv_view_rows,
 * through the kernels' kv_unpack) into its thread's scratch, where its
 * queries read them, so no dequantized copy of the cache is made and a
 * compressed format is read at its own size. Cold blocks are restored first,
 * once per layer per pass, on the worker threads (kv_view_stage: one block a
 * chunk, claimed at run time, each thread with its own decompressor), into the view's
 * staging slabs, still in their format. The cache is not changed meanwhile
 * (moves happen in kv_prepare), so the threads only read it. Everything is
 * allocated by kv_view_init; nothing is allocated per pass.
 */
#ifndef CX_KV_VIEW_H
#define CX_KV_VIEW_H

#include <stdint.h>

#include "kv_cache.h"

/* int64s from one thread's counters to the next: a cache line each, so
 * threads counting restores never write the same line. */
#define KV_VIEW_COUNT_STRIDE 8

typedef struct kv_view {
    int max_blocks, dim, hd, n_threads; /* hd: head_dim (a slab's codes lie head by head) */
    const uint8_t **slab;    /* [max_blocks]: the current layer's slab of each block */
    int8_t *fmt;             /* [max_blocks]: its format (KV_F32..) */
    int32_t *todo;           /* table indices of the blocks to stage */
    int n_todo;
    uint8_t *stage;          /* [max_blocks][stage_stride] restored cold slabs; NULL without tiers */
    size_t stage_stride;
    kv_zip *zip;             /* [n_threads] decompressors (tiered caches) */
    uint8_t *scratch;        /* [n_threads][scratch_bytes] */
    size_t scratch_bytes;
    int64_t *count;          /* [n_threads][KV_VIEW_COUNT_STRIDE]: restores, restore ns, failed reads */
} kv_view;

/* A view for a sequence of n_ctx positions in cache c, read by n_threads. 0 or -1 (out of memory). */
int kv_view_init(kv_view *v, const kv_cache *c, int n_ctx, int n_threads);
void kv_view_free(kv_view *v);
/* Point the view at `layer` of the first nb blocks of s; returns how many
 * (cold) blocks need kv_view_stage before they can be read. */
int kv_view_layer(kv_view *v, const kv_cache *c, const kv_seq *s, int layer, int nb);
/* Restore block j (0 <= j < the count kv_view_layer returned) of the ones
 * kv_view_layer listed, with thread tid's scratch (tid < n_threads). */
void kv_view_stage(kv_view *v, const kv_cache *c, const kv_seq *s, int layer, int j, int tid);
/* Rows r0..r0+n-1 of block i's slab (within its keys, 0..KV_BLOCK-1, or its
 * values, KV_BLOCK..KV_ROWS-1), columns c0..c0+nc-1 (c0, nc even; within one
 * kv head, whose columns lie together: kv_codec.h), as floats
 * at out, rows ld apart, unpacked by table k. With keep_rotation, a rotated
 * format's rows (q4h: H x for each 32 columns) come out as stored, not
 * rotated back, and the call returns 1: attention then rotates its query
 * once (q . x = Hq . Hx, H orthonormal and symmetric) and the sum of the
 * values once, instead of every row. Otherwise it returns 0. */
int kv_view_rows(const kv_view *v, const kern_ops *k, int i, int r0, int n, int c0, int nc, float *out, size_t ld,
                 int keep_rotation);
/* Ask the memory system for block i's rows (keys and values), columns
 * c0..c0+nc-1 (as kv_view_rows takes them), and their scales, into L2
 * without waiting: attention calls it a tile ahead. A block's slab of one
 * layer lies a whole block of every layer away from the next block's, so
 * the hardware's stream prefetchers stop at each block: without this a
 * decode waits on memory once per block. A hint only; nothing is read. */
void kv_view_prefetch(const kv_view *v, int i, int c0, int nc);
/* Block i's keys (kv = 0) or values (1) of kv head kvh as floats, rows hd
 * apart, where the block is stored as f32 in place; NULL for any other
 * format. */
const float *kv_view_f32(const kv_view *v, int i, int kv, int kvh);
/* Add the threads' restore counters to the cache's; returns the failed reads since the last call. */
int64_t kv_view_collect(kv_view *v, kv_cache *c);

#endif
