/*
 * kv_policy.c - which KV block leaves a tier first, and which may come back.
 *
 * LRU orders blocks by the clock of the last pass that read them, LFU by the
 * number of passes that read them (then by recency). Ties go to the older
 * position (the lower block number in the sequence that wrote it), so one
 * long sequence under either policy demotes in a stable order, and a
 * promotion needs a strictly better claim than its victim: blocks read by the
 * same passes never trade places, which would only churn the compressor.
 *
 * Promotion compares claims as they were before the current pass. Every
 * block a pass reads has just been touched, so by its current stamp it
 * would beat any block of another sequence, and sequences decoded in turn
 * would swap their blocks between tiers on every pass (each swap restoring
 * and recompressing whole blocks: the classic LRU thrash of a cyclic scan
 * larger than the cache). Judged by its previous read, a block of the
 * sequence whose turn it is has waited longest, so it stays where it is and
 * is read from its tier; it moves up when its reads are really more recent
 * or frequent than the victim's (another sequence went idle).
 *
 * RANDOM orders the blocks of a tier by a hash of (block, pass clock): a
 * fresh uniform permutation each pass, so the victims one pass takes are a
 * uniform sample without replacement, reproducible run to run, and the
 * cache keeps no generator state (the victim search stays a const read). A
 * random policy has no claim to compare, so it promotes only into room
 * (kv_policy_better never prefers a block to a victim): the baseline the
 * other two are measured against (cortex-bench's tier hit rates).
 *
 * Partial blocks, the tails sequences write next, leave last (kv_policy_cmp).
 *
 * A victim is found by scanning the blocks (O(max_blocks)); it is needed
 * about once per KV_BLOCK tokens a sequence writes, next to attention's
 * O(positions) work per token.
 */
#include <assert.h>

#include "kv_cache.h"

/* See kv_cache.h. */
void kv_policy_touch(kv_cache *c, int32_t id) {
    kv_block *b = &c->blocks[id];
    assert(b->refs > 0);
    if (b->stamp == c->clock && b->uses) return; /* once per pass */
    b->prev_stamp = b->stamp;
    b->prev_uses = b->uses;
    b->stamp = c->clock;
    b->uses++;
}

/* Three-way comparison of two unsigned keys. */
static int cmp_u64(uint64_t a, uint64_t b) { return (a > b) - (a < b); }

/* RANDOM's rank of a block this pass: splitmix64 of its number and the clock. */
static uint64_t random_rank(const kv_cache *c, const kv_block *b) {
    uint64_t z = (uint64_t)(b - c->blocks) + c->clock * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* See kv_cache.h. A partial block (the tail a live sequence writes next)
 * leaves a tier after every full one: demoting it means moving it back up
 * for the next write, and a tail that goes through int8 and is written
 * again is quantized twice. */
int kv_policy_cmp(const kv_cache *c, const kv_block *a, const kv_block *b) {
    int r = (a->filled < KV_BLOCK) - (b->filled < KV_BLOCK);
    if (r) return r;
    if (c->p.policy == CX_KV_RANDOM) r = cmp_u64(random_rank(c, a), random_rank(c, b));
    if (c->p.policy == CX_KV_LFU) r = cmp_u64(a->uses, b->uses);
    if (!r) r = cmp_u64(a->stamp, b->stamp);
    if (!r) r = (a->index > b->index) - (a->index < b->index);
    if (!r) r = (a > b) - (a < b);
    return r;
}

/* A block's claim before the current pass: its previous read if this pass read it. */
static uint64_t stamp_before(const kv_cache *c, const kv_block *b) {
    return b->stamp == c->clock ? b->prev_stamp : b->stamp;
}
static uint64_t uses_before(const kv_cache *c, const kv_block *b) {
    return b->stamp == c->clock ? b->prev_uses : b->uses;
}

/* See kv_cache.h. */
int kv_policy_better(const kv_cache *c, const kv_block *a, const kv_block *b) {
    int tail = (a->filled < KV_BLOCK) - (b->filled < KV_BLOCK);
    if (tail) return tail > 0;
    if (c->p.policy == CX_KV_RANDOM) return 0;
    if (c->p.policy == CX_KV_LFU) return uses_before(c, a) > uses_before(c, b);
    return stamp_before(c, a) > stamp_before(c, b);
}

/* See kv_cache.h. */
int32_t kv_policy_victim(const kv_cache *c, kv_tier tier, int32_t except, int droppable_only) {
    assert(tier != KV_FREE && "a victim leaves a tier");
    int32_t best = -1;
    for (int32_t i = 0; i < c->max_blocks; i++) {
        const kv_block *b = &c->blocks[i];
        if (b->tier != tier || i == except || b->pin == c->pass) continue;
        if (tier == KV_COLD && b->spilled && !droppable_only) continue;
        if (droppable_only && !kv_block_droppable(b)) continue;
        if (best < 0 || kv_policy_cmp(c, b, &c->blocks[best]) < 0) best = i;
    }
    return best;
}
