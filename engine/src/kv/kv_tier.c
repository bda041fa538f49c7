/*
 * kv_tier.c - moving KV blocks between tiers within their byte budgets, and
 * kv_prepare, the one place (single-threaded, before each forward pass) where
 * blocks move, so the attention that follows only reads.
 *
 * Down: a tier over budget gives up its policy victim (kv_policy.c) to the
 * next tier: hot -> warm (quantized) -> cold (compressed pages), or hot ->
 * cold directly when there is no warm tier (then pages hold the hot format
 * and the round trip is lossless). Past the cold budget, pages spill to the
 * file, or unused cached prefixes are dropped. Up: a block the pass reads
 * moves one tier up when that tier has room or holds a block with a strictly
 * weaker claim. See kv_cache.h.
 */
#include <assert.h>
#include <string.h>

#include "kv_cache.h"
#include "../util.h"

static const char *tier_name[KV_TIERS] = {"hot", "warm", "cold"};

/* Bytes of buddy blocks n bytes of pages take. */
static int64_t cold_size(size_t n) {
    size_t size[KV_PIECES], total;
    kv_page_pieces(n, size, &total);
    return (int64_t)total;
}

/* Does `tier` have room for `need` more bytes (hot/warm: one more block)? */
static int fits(const kv_cache *c, kv_tier tier, int64_t need) {
    if (tier != KV_COLD) return c->slots[tier].used < c->slots[tier].n;
    if (!c->cold_mem) return 0;
    return c->p.budget[KV_COLD] == CX_KV_UNLIMITED || c->bytes[KV_COLD] + need <= c->p.budget[KV_COLD];
}

/* Where blocks leaving `tier` go. */
static kv_tier lower_tier(const kv_cache *c, kv_tier tier) {
    return tier == KV_HOT && c->slots[KV_WARM].n > 0 ? KV_WARM : KV_COLD;
}

/* See kv_cache.h. A cold tier over budget spills its victim when there is a
 * spill file, else drops an unused cached prefix; hot and warm demote theirs
 * (dropping it instead if it cannot go lower but is an unused cached prefix). */
int kv_make_room(kv_cache *c, kv_tier tier, int64_t need, int32_t except, cx_err *err) {
    assert(tier != KV_FREE && "room is made in a tier");
    if (tier == KV_COLD && (!c->cold_mem || (c->p.budget[KV_COLD] != CX_KV_UNLIMITED && need > c->p.budget[KV_COLD])))
        return cx_fail(err, CX_ENOMEM, "a %lld-byte cold KV block does not fit the cold budget (%lld bytes)",
                       (long long)need, (long long)c->p.budget[KV_COLD]);
    while (!fits(c, tier, need)) {
        if (tier == KV_COLD) {
            int spill = c->spill_fd >= 0;
            int32_t v = kv_policy_victim(c, KV_COLD, except, !spill);
            if (v < 0)
                return cx_fail(err, CX_ENOMEM,
                               "the cold KV budget (%lld bytes) is full and no page can be spilled or dropped",
                               (long long)c->p.budget[KV_COLD]);
            if (!spill) kv_block_drop(c, v);
            else if (kv_page_spill(c, v))
                return cx_fail(err, CX_EIO, "%s: cannot write a KV page", c->p.spill_path);
            continue;
        }
        int32_t v = kv_policy_victim(c, tier, except, 0);
        if (v < 0)
            return cx_fail(err, CX_ENOMEM, "the %s KV tier (%d blocks) cannot hold the blocks one pass writes",
                           tier_name[tier], c->slots[tier].n);
        int rc = kv_move(c, v, lower_tier(c, tier), err);
        if (rc && !kv_block_droppable(&c->blocks[v])) return rc;
        if (rc) kv_block_drop(c, v);
    }
    return 0;
}

/* Layer `layer` of block id in its own format: the slab itself for hot and
 * warm blocks, restored into c->raw for cold ones (counted as a restore). */
static const void *read_slab(kv_cache *c, int32_t id, int layer) {
    if (c->blocks[id].tier != KV_COLD) return kv_block_slab(c, id, layer);
    int64_t t0 = cx_now_ns();
    if (kv_page_read(c, id, layer, &c->inflater, c->zbuf, c->raw)) return NULL;
    c->st.restores++;
    c->st.restore_ns += cx_now_ns() - t0;
    return c->raw;
}

/* Convert one slab from format sf to df (a copy when they are equal). */
static void convert_slab(kv_cache *c, int sf, const void *src, int df, void *dst) {
    if (sf == df) {
        memcpy(dst, src, kv_slab_bytes(sf, c->dim));
        return;
    }
    kv_decode_rows(sf, src, 0, KV_ROWS, c->f32, c->dim, c->hd);
    kv_encode_slab(df, dst, c->f32, c->dim, c->hd);
}

/* Copy every layer of block src into `slot` of tier `to` (format fmt[to]); 0 or -1. */
static int fill_slot(kv_cache *c, int32_t src, kv_tier to, int32_t slot) {
    int df = c->fmt[to];
    size_t dslab = kv_slab_bytes(df, c->dim);
    uint8_t *dst = kv_slots_at(&c->slots[to], slot);
    for (int l = 0; l < c->n_layer; l++) {
        const void *s = read_slab(c, src, l);
        if (!s) return -1;
        convert_slab(c, c->blocks[src].fmt, s, df, dst + (size_t)l * dslab);
    }
    return 0;
}

/* Put block id (no storage yet) in `slot` of tier `to`. */
static void take_slot(kv_cache *c, int32_t id, kv_tier to, int32_t slot) {
    kv_block *b = &c->blocks[id];
    assert((to == KV_HOT || to == KV_WARM) && b->tier == KV_FREE && b->refs > 0 && "only an allocated block without storage takes a slot");
    b->tier = to;
    b->slot = slot;
    b->fmt = (int8_t)c->fmt[to];
    c->bytes[to] += (int64_t)c->block_bytes[to];
    c->nblocks[to]++;
}

/* Move to the cold tier: pack the pages (in the warm format when there is
 * a warm tier, else as they are: lossless), then store them in memory
 * (making room by spilling or dropping others) or in the spill file. The
 * block stays where it was if this fails. */
static int move_cold(kv_cache *c, int32_t id, cx_err *err) {
    if (!c->cold_mem && c->spill_fd < 0)
        return cx_fail(err, CX_ENOMEM, "KV blocks cannot leave the %s tier: the cold budget is 0 and no spill file "
                       "is set", tier_name[c->blocks[id].tier]);
    int fmt = c->slots[KV_WARM].n > 0 ? c->fmt[KV_WARM] : c->blocks[id].fmt;
    size_t n = kv_page_pack(c, id, fmt);
    if (!n) return cx_fail(err, CX_ENOMEM, "zlib could not compress a KV page");
    int mem = 0;
    if (c->cold_mem) {
        int64_t need = cold_size(n);
        if (c->spill_fd < 0) {
            int rc = kv_make_room(c, KV_COLD, need, id, err);
            if (rc) return rc;
            mem = 1;
        } else {
            mem = kv_make_room(c, KV_COLD, need, id, err) == 0;
        }
    }
    if (kv_page_store(c, id, n, mem) && !(mem && c->spill_fd >= 0 && kv_page_store(c, id, n, 0) == 0))
        return cx_fail(err, mem ? CX_ENOMEM : CX_EIO, "no room for a %zu-byte cold KV page%s", n,
                       mem ? " (the cold region is fragmented)" : " in the spill file");
    int8_t spilled = c->blocks[id].spilled;
    kv_block_release_storage(c, id);
    kv_block *b = &c->blocks[id];
    b->spilled = spilled;
    b->cold_bytes = (uint32_t)n;
    b->fmt = (int8_t)fmt;
    b->tier = KV_COLD;
    c->nblocks[KV_COLD]++;
    return 0;
}

/* See kv_cache.h. */
int kv_move(kv_cache *c, int32_t id, kv_tier to, cx_err *err) {
    kv_block *b = &c->blocks[id];
    kv_tier from = b->tier;
    assert(from != KV_FREE && to != KV_FREE && from != to && b->refs > 0 && "a move is between two tiers of a held block");
    int rc;
    if (to == KV_WARM && from == KV_HOT && !fits(c, KV_WARM, 1)) {
        /* a block weaker than every warm one goes on to cold at once, rather
         * than displacing one that the next pass would promote back */
        int32_t w = kv_policy_victim(c, KV_WARM, id, 0);
        if (w >= 0 && kv_policy_cmp(c, b, &c->blocks[w]) < 0) to = KV_COLD;
    }
    if (to == KV_COLD) {
        rc = move_cold(c, id, err);
    } else {
        rc = kv_make_room(c, to, 1, id, err);
        if (rc) return rc;
        int32_t slot = kv_slots_get(&c->slots[to]);
        assert(slot >= 0);
        if (fill_slot(c, id, to, slot)) {
            kv_slots_put(&c->slots[to], slot);
            return cx_fail(err, CX_EIO, "cannot restore a cold KV page%s", b->spilled ? " from the spill file" : "");
        }
        kv_block_release_storage(c, id);
        take_slot(c, id, to, slot);
    }
    if (rc) return rc;
    if (to > from) c->st.demotions++;
    else c->st.promotions++;
    return 0;
}

/* Give seq a fresh hot block at the end of its table, pinned for this pass. */
static int append_block(kv_cache *c, kv_seq *s, cx_err *err) {
    int32_t id = kv_block_alloc(c);
    if (id < 0) return cx_fail(err, CX_ENOMEM, "all %d KV cache blocks are in use", c->max_blocks);
    c->blocks[id].pin = c->pass;
    c->blocks[id].index = s->n_blocks;
    int rc = kv_make_room(c, KV_HOT, 1, -1, err);
    if (rc) {
        kv_block_unref(c, id);
        return rc;
    }
    int32_t slot = kv_slots_get(&c->slots[KV_HOT]);
    assert(slot >= 0);
    memset(kv_slots_at(&c->slots[KV_HOT], slot), 0, c->block_bytes[KV_HOT]);
    take_slot(c, id, KV_HOT, slot);
    kv_seq_push(s, id);
    kv_policy_touch(c, id);
    return 0;
}

/* Copy-on-write: seq's block i is shared; give seq a private hot copy. */
static int cow(kv_cache *c, kv_seq *s, int i, cx_err *err) {
    int32_t src = s->table[i];
    int32_t id = kv_block_alloc(c);
    if (id < 0) return cx_fail(err, CX_ENOMEM, "all %d KV cache blocks are in use", c->max_blocks);
    kv_block *b = &c->blocks[id];
    b->pin = c->pass;
    int rc = kv_make_room(c, KV_HOT, 1, src, err);
    if (rc) {
        kv_block_unref(c, id);
        return rc;
    }
    int32_t slot = kv_slots_get(&c->slots[KV_HOT]);
    assert(slot >= 0);
    if (fill_slot(c, src, KV_HOT, slot)) {
        kv_slots_put(&c->slots[KV_HOT], slot);
        kv_block_unref(c, id);
        return cx_fail(err, CX_EIO, "cannot restore a cold KV page to copy it");
    }
    take_slot(c, id, KV_HOT, slot);
    const kv_block *sb = &c->blocks[src];
    /* The rows seq owns: all the source's, or fewer when seq was truncated
     * inside the block (kv_truncate) while another holder kept it whole. */
    int own = s->n_tokens - i * KV_BLOCK;
    b->filled = (int16_t)(own < 0 ? 0 : own < sb->filled ? own : sb->filled);
    b->index = i;
    b->stamp = sb->stamp;
    b->uses = sb->uses;
    b->prev_stamp = sb->prev_stamp;
    b->prev_uses = sb->prev_uses;
    memcpy(c->tokens + (size_t)id * KV_BLOCK, c->tokens + (size_t)src * KV_BLOCK, sizeof(int32_t) * KV_BLOCK);
    s->table[i] = id;
    kv_block_unref(c, src);
    c->st.cow_copies++;
    return 0;
}

/* Move blocks of seq below index `below` up a tier where the policy says
 * they have the better claim, newest first. A failed move leaves the block
 * readable where it is. The victim of each tier is remembered until a move
 * happens, so a pass with nothing to promote costs O(blocks + max_blocks). */
static void promote(kv_cache *c, kv_seq *s, int below) {
    int32_t victim[2] = {-2, -2}; /* -2: not computed */
    for (int i = below - 1; i >= 0; i--) {
        int32_t id = s->table[i];
        kv_block *b = &c->blocks[id];
        if (b->tier == KV_HOT) continue;
        kv_tier to = b->tier == KV_WARM || c->slots[KV_WARM].n == 0 ? KV_HOT : KV_WARM;
        if (!fits(c, to, 1)) {
            if (victim[to] == -2) victim[to] = kv_policy_victim(c, to, -1, 0);
            if (victim[to] < 0 || !kv_policy_better(c, b, &c->blocks[victim[to]])) continue;
        }
        cx_err e;
        if (kv_move(c, id, to, &e) == 0) victim[0] = victim[1] = -2;
    }
}

/* See kv_cache.h. All touches and pins come first, so no sequence's moves
 * demote a block another sequence of the pass writes; hits are counted in
 * the tier each block is in when the pass asks for it (a cold block
 * promoted by this pass was still read from the cold tier). */
static int prepare_batch(kv_cache *c, kv_seq *const *seqs, const int *pos, const int *T, int n, cx_err *err) {
    c->pass++;
    c->clock++;
    int written = 0;
    for (int q = 0; q < n; q++) {
        kv_seq *s = seqs[q];
        assert(T[q] >= 1 && pos[q] + T[q] <= s->n_ctx && pos[q] == s->n_tokens);
        int b0 = pos[q] / KV_BLOCK, b1 = (pos[q] + T[q] - 1) / KV_BLOCK;
        assert(s->n_blocks >= b0 && s->n_blocks <= b1 + 1);
        written += b1 - b0 + 1;
        for (int i = 0; i < s->n_blocks; i++) kv_policy_touch(c, s->table[i]);
        for (int i = b0; i < s->n_blocks; i++) /* written in place; a shared one is copied below */
            if (c->blocks[s->table[i]].refs == 1) c->blocks[s->table[i]].pin = c->pass;
        for (int i = 0; i < b0; i++) c->st.hits[c->blocks[s->table[i]].tier]++;
    }
    if (written > c->slots[KV_HOT].n)
        return cx_fail(err, CX_ENOMEM, "the hot KV tier (%d blocks) cannot hold the %d blocks one pass writes",
                       c->slots[KV_HOT].n, written);
    for (int q = 0; q < n; q++) {
        kv_seq *s = seqs[q];
        int b0 = pos[q] / KV_BLOCK, b1 = (pos[q] + T[q] - 1) / KV_BLOCK;
        for (int i = b0; i <= b1; i++) {
            int rc = 0;
            if (i == s->n_blocks) rc = append_block(c, s, err);
            else if (c->blocks[s->table[i]].refs > 1) rc = cow(c, s, i, err);
            else if (c->blocks[s->table[i]].tier != KV_HOT) rc = kv_move(c, s->table[i], KV_HOT, err);
            if (rc) return rc;
            c->st.hits[KV_HOT]++;
        }
    }
    if (c->tiering)
        for (int q = 0; q < n; q++) promote(c, seqs[q], pos[q] / KV_BLOCK);
    return 0;
}

/* See kv_cache.h. Whether it succeeds or not, the cache is consistent after it (kv_check). */
int kv_prepare_batch(kv_cache *c, kv_seq *const *seqs, const int *pos, const int *T, int n, cx_err *err) {
    int rc = prepare_batch(c, seqs, pos, T, n, err);
    kv_check_sometimes(c);
    return rc;
}

/* See kv_cache.h. */
int kv_prepare(kv_cache *c, kv_seq *s, int pos, int T, cx_err *err) {
    return kv_prepare_batch(c, &s, &pos, &T, 1, err);
}
