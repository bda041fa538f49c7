/*
 * kv_slots.h - a fixed number of equal-size slots with O(1) get and put.
 *
 * The hot and warm KV tiers hold blocks of one size each, so they are slot
 * arrays rather than buddy blocks: a buddy rounds every block up to a power
 * of two (a 20 KiB stories260K block would take 32 KiB, a 216 KiB
 * stories15m block 256 KiB), slots waste nothing. The memory is one
 * anonymous mapping of its own made at creation: zeroed, its untouched pages
 * uncommitted whatever malloc's thresholds, and page-aligned with no page
 * touched yet, so the owner can bind a NUMA policy to it (placement.h)
 * before the first write. get and put never allocate.
 */
#ifndef CX_KV_SLOTS_H
#define CX_KV_SLOTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct kv_slots {
    uint8_t *mem;       /* n * slot_bytes, mmap'd (NULL when n is 0) */
    size_t slot_bytes;
    int32_t n, used;
    int32_t *free;      /* stack of free slot indices: free[0..n-used) */
} kv_slots;

/* n slots (n >= 0) of slot_bytes each; 0, or -1 when out of memory. */
int kv_slots_init(kv_slots *s, int32_t n, size_t slot_bytes);
void kv_slots_free(kv_slots *s);
/* A free slot's index, or -1 when all are taken. */
int32_t kv_slots_get(kv_slots *s);
/* Give slot i back. */
void kv_slots_put(kv_slots *s, int32_t i);
/* The memory of slot i. */
static inline void *kv_slots_at(const kv_slots *s, int32_t i) { return s->mem + (size_t)i * s->slot_bytes; }

#endif
