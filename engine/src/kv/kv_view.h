/*
 * kv_view.h - what attention reads: per block of a sequence, pointers to the
 * f32 keys and values of one layer ([KV_BLOCK][dim] each, rows dim apart).
 *
 * Hot f32 blocks are read where they are. Every other block (f16 or q8 hot,
 * warm, cold) is decoded into the session's staging area first, once per
 * layer per pass, on the worker threads (kv_view_stage: blocks dealt
 * round-robin; cold pages restored with each thread's own decompressor).
 * The cache is not changed meanwhile (moves happen in kv_prepare), so the
 * threads only read it. Everything is allocated by kv_view_init; staging
 * allocates nothing.
 */
#ifndef CX_KV_VIEW_H
#define CX_KV_VIEW_H

#include <stdint.h>

#include "kv_cache.h"

/* int64s from one thread's counters to the next: a cache line each, so
 * threads counting restores never write the same line. */
#define KV_VIEW_COUNT_STRIDE 8

typedef struct kv_view {
    int max_blocks, dim, n_threads;
    const float **k, **v;    /* [max_blocks]: the current layer's keys / values of each block */
    int32_t *todo;           /* table indices of the blocks to stage */
    int n_todo;
    float *stage;            /* [max_blocks][KV_ROWS][dim]; NULL when every block is hot f32 */
    kv_zip *zip;             /* [n_threads] decompressors (tiered caches) */
    uint8_t *scratch;        /* [n_threads][scratch_bytes] */
    size_t scratch_bytes;
    int64_t *count;          /* [n_threads][KV_VIEW_COUNT_STRIDE]: restores, restore ns, failed reads */
} kv_view;

/* A view for a sequence of n_ctx positions in cache c, read by n_threads. 0 or -1 (out of memory). */
int kv_view_init(kv_view *v, const kv_cache *c, int n_ctx, int n_threads);
void kv_view_free(kv_view *v);
/* Point k/v at `layer` of the first nb blocks of s; returns how many blocks
 * need kv_view_stage before they can be read. */
int kv_view_layer(kv_view *v, const kv_cache *c, const kv_seq *s, int layer, int nb);
/* Decode thread tid's share (of n) of the blocks kv_view_layer listed. */
void kv_view_stage(kv_view *v, const kv_cache *c, const kv_seq *s, int layer, int tid, int n);
/* Add the threads' restore counters to the cache's; returns the failed reads since the last call. */
int64_t kv_view_collect(kv_view *v, kv_cache *c);

#endif
