/*
 * kv_prefix.h - the prefix cache's index: chain hash of a full block -> block id.
 *
 * A full block's key is hash(key of the block before it, its KV_BLOCK token
 * ids), so equal keys mean equal token prefixes from position 0 (up to a
 * 64-bit collision, which the cache rules out by comparing the tokens).
 * Open addressing with linear probing and backward-shift deletion in a
 * table of a power-of-two size at least twice the number of blocks, sized
 * once at creation: insert, find and remove never allocate.
 */
#ifndef CX_KV_PREFIX_H
#define CX_KV_PREFIX_H

#include <stdint.h>

typedef struct kv_prefix {
    uint64_t *keys;   /* 0: empty */
    int32_t *ids;
    uint32_t mask;    /* capacity - 1 */
    int32_t n, max;   /* entries, the most ever allowed */
} kv_prefix;

/* The key of a block of n tokens following the block keyed `parent` (at the
 * start of a sequence: its salt, 0 without adapters). Never 0. */
uint64_t kv_prefix_key(uint64_t parent, const int32_t *tokens, int n);

/* A table for up to max entries; 0, or -1 when out of memory. */
int kv_prefix_init(kv_prefix *t, int32_t max);
void kv_prefix_free(kv_prefix *t);
/* The id stored under key, or -1. */
int32_t kv_prefix_find(const kv_prefix *t, uint64_t key);
/* Store key -> id; returns 0, or -1 if the key is already present (the
 * table is unchanged) or the table holds max entries. */
int kv_prefix_insert(kv_prefix *t, uint64_t key, int32_t id);
/* Remove key (it must be present). */
void kv_prefix_remove(kv_prefix *t, uint64_t key);

#endif
