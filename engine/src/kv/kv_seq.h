/*
 * kv_seq.h - one sequence's view of the paged KV cache: its block table.
 *
 * Position p of the sequence lives in row p % KV_BLOCK of block
 * table[p / KV_BLOCK]. The table and the token history are sized for the
 * session's context when it is created, so appending a block is a store,
 * O(1), with no allocation. The blocks themselves belong to the cache
 * (kv_cache.h), which counts the sequences referring to each.
 */
#ifndef CX_KV_SEQ_H
#define CX_KV_SEQ_H

#include <stdint.h>

#include "kv_codec.h"

typedef struct kv_seq {
    int32_t *table;    /* block ids, [max_blocks] */
    int32_t *tokens;   /* token at each position, [n_ctx] (prefix keys are made from them) */
    int n_ctx, max_blocks;
    int n_blocks;      /* entries of table in use */
    int n_tokens;      /* positions filled */
    uint64_t salt;     /* root of its prefix keys: 0, or a hash of the adapters its KV was computed with */
} kv_seq;

/* A sequence of up to n_ctx positions; 0, or -1 when out of memory. */
int kv_seq_init(kv_seq *s, int n_ctx);
void kv_seq_free(kv_seq *s);
/* Append block id (there must be room). */
void kv_seq_push(kv_seq *s, int32_t id);

#endif
