/*
 * kv_prefix.c - see kv_prefix.h.
 */
#include "kv_prefix.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "cortex_tools.h"


/* See kv_prefix.h: the parent key and each token are folded in order, so the
 * key depends on the whole prefix and on token order. */
uint64_t kv_prefix_key(uint64_t parent, const int32_t *tokens, int n) {
    uint64_t h = cx_mix64(parent ^ 0x9e3779b97f4a7c15ull);
    for (int i = 0; i < n; i++) h = cx_mix64(h ^ (uint32_t)tokens[i]) + (uint64_t)i;
    return h ? h : 1;
}

/* See kv_prefix.h. */
int kv_prefix_init(kv_prefix *t, int32_t max) {
    memset(t, 0, sizeof *t);
    uint32_t cap = 16;
    while (cap < 2u * (uint32_t)max) cap <<= 1;
    t->keys = calloc(cap, sizeof *t->keys);
    t->ids = calloc(cap, sizeof *t->ids);
    if (!t->keys || !t->ids) {
        kv_prefix_free(t);
        return -1;
    }
    t->mask = cap - 1;
    t->max = max;
    return 0;
}

/* See kv_prefix.h. */
void kv_prefix_free(kv_prefix *t) {
    free(t->keys);
    free(t->ids);
    memset(t, 0, sizeof *t);
}

/* Home slot of a key (its low bits are well mixed). */
static uint32_t home(const kv_prefix *t, uint64_t key) { return (uint32_t)key & t->mask; }

/* Slot holding key, or the empty slot where probing for it stops. */
static uint32_t probe(const kv_prefix *t, uint64_t key) {
    uint32_t i = home(t, key);
    while (t->keys[i] && t->keys[i] != key) i = (i + 1) & t->mask;
    return i;
}

/* See kv_prefix.h. */
int32_t kv_prefix_find(const kv_prefix *t, uint64_t key) {
    assert(key);
    uint32_t i = probe(t, key);
    return t->keys[i] ? t->ids[i] : -1;
}

/* See kv_prefix.h. The table is at most half full, so probes end. */
int kv_prefix_insert(kv_prefix *t, uint64_t key, int32_t id) {
    assert(key && id >= 0);
    uint32_t i = probe(t, key);
    if (t->keys[i] || t->n >= t->max) return -1;
    t->keys[i] = key;
    t->ids[i] = id;
    t->n++;
    return 0;
}

/* See kv_prefix.h. Backward-shift deletion: later entries of the probe run
 * move into the hole when their home slot does not lie between the hole and
 * themselves, so no tombstones are needed. */
void kv_prefix_remove(kv_prefix *t, uint64_t key) {
    uint32_t hole = probe(t, key);
    assert(t->keys[hole] == key);
    uint32_t j = hole;
    for (;;) {
        j = (j + 1) & t->mask;
        if (!t->keys[j]) break;
        uint32_t h = home(t, t->keys[j]);
        /* j's entry may fill the hole iff h is not cyclically in (hole, j]. */
        int in_range = hole <= j ? (h > hole && h <= j) : (h > hole || h <= j);
        if (in_range) continue;
        t->keys[hole] = t->keys[j];
        t->ids[hole] = t->ids[j];
        hole = j;
    }
    t->keys[hole] = 0;
    t->n--;
}
