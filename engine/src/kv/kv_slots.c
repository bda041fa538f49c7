/*
 * kv_slots.c - see kv_slots.h.
 */
#include "kv_slots.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* See kv_slots.h. Slots are handed out lowest index first. */
int kv_slots_init(kv_slots *s, int32_t n, size_t slot_bytes) {
    memset(s, 0, sizeof *s);
    assert(n >= 0 && slot_bytes > 0);
    s->slot_bytes = slot_bytes;
    s->n = n;
    if (n == 0) return 0;
    if (slot_bytes > SIZE_MAX / (size_t)n) return -1;
    void *mem = mmap(NULL, (size_t)n * slot_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    s->mem = mem == MAP_FAILED ? NULL : mem;
    s->free = malloc(sizeof(int32_t) * (size_t)n);
    if (!s->mem || !s->free) {
        kv_slots_free(s);
        return -1;
    }
    for (int32_t i = 0; i < n; i++) s->free[i] = n - 1 - i;
    return 0;
}

/* See kv_slots.h. */
void kv_slots_free(kv_slots *s) {
    if (s->mem) munmap(s->mem, (size_t)s->n * s->slot_bytes);
    free(s->free);
    memset(s, 0, sizeof *s);
}

/* See kv_slots.h. */
int32_t kv_slots_get(kv_slots *s) {
    if (s->used == s->n) return -1;
    int32_t i = s->free[s->n - 1 - s->used];
    s->used++;
    return i;
}

/* See kv_slots.h. */
void kv_slots_put(kv_slots *s, int32_t i) {
    assert(i >= 0 && i < s->n && s->used > 0);
    s->used--;
    s->free[s->n - 1 - s->used] = i;
}
