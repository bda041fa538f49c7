/*
 * kv_ops.c - what a sequence does with the cache besides preparing a pass:
 * store the rows a pass computes, commit its tokens (keying full blocks for
 * the prefix cache), take cached blocks for a prompt's prefix, fork, truncate,
 * release.
 * See kv_cache.h.
 */
#include <assert.h>
#include <string.h>

#include "kv_cache.h"

/* See kv_cache.h. Rows are encoded in the hot format (a copy for f32). */
void kv_write(kv_cache *c, const kv_seq *s, int layer, int pos, int T, const float *k, const float *v) {
    int fmt = c->fmt[KV_HOT], dim = c->dim, hd = c->hd;
    for (int t = 0; t < T; t++) {
        int p = pos + t;
        int32_t id = s->table[p / KV_BLOCK];
        assert(c->blocks[id].tier == KV_HOT && c->blocks[id].refs == 1 && c->blocks[id].pin == c->pass);
        uint8_t *slab = kv_block_slab(c, id, layer);
        kv_encode_row(fmt, slab, p % KV_BLOCK, k + (size_t)t * (size_t)dim, dim, hd);
        kv_encode_row(fmt, slab, KV_BLOCK + p % KV_BLOCK, v + (size_t)t * (size_t)dim, dim, hd);
    }
}

/* Key full block i of seq from its parent's key and its tokens, and index it
 * when the prefix cache is on and no equal block is indexed yet (the index
 * then holds a reference of its own). */
static void key_block(kv_cache *c, const kv_seq *s, int i) {
    int32_t id = s->table[i];
    kv_block *b = &c->blocks[id];
    assert(b->filled == KV_BLOCK && !b->keyed && (i == 0 || c->blocks[s->table[i - 1]].keyed));
    b->parent = i ? c->blocks[s->table[i - 1]].key : s->salt;
    b->key = kv_prefix_key(b->parent, c->tokens + (size_t)id * KV_BLOCK, KV_BLOCK);
    b->keyed = 1;
    if (c->p.prefix_cache && kv_prefix_insert(&c->prefix, b->key, id) == 0) { /* -1: already cached, or full */
        assert(!b->cached && b->refs >= 1 && "a block enters the index once, while a sequence holds it");
        b->cached = 1;
        b->refs++;
    }
}

/* See kv_cache.h. */
void kv_commit(kv_cache *c, kv_seq *s, int pos, int T, const int32_t *tokens) {
    assert(pos == s->n_tokens && pos + T <= s->n_ctx);
    memcpy(s->tokens + pos, tokens, sizeof(int32_t) * (size_t)T);
    s->n_tokens = pos + T;
    for (int p = pos; p < pos + T;) {
        int i = p / KV_BLOCK, r0 = p % KV_BLOCK;
        int r1 = pos + T - i * KV_BLOCK < KV_BLOCK ? pos + T - i * KV_BLOCK : KV_BLOCK;
        int32_t id = s->table[i];
        kv_block *b = &c->blocks[id];
        memcpy(c->tokens + (size_t)id * KV_BLOCK + r0, tokens + (p - pos), sizeof(int32_t) * (size_t)(r1 - r0));
        if (r1 > b->filled) b->filled = (int16_t)r1;
        if (b->filled == KV_BLOCK && !b->keyed) key_block(c, s, i);
        p = i * KV_BLOCK + r1;
    }
}

/* See kv_cache.h. Only from a block boundary with every block keyed; each
 * full block of tokens is one lookup, and the walk stops at the first miss. */
int kv_match(kv_cache *c, kv_seq *s, const int32_t *tokens, int n) {
    if (!c->p.prefix_cache || s->n_tokens % KV_BLOCK || s->n_blocks != s->n_tokens / KV_BLOCK) return 0;
    uint64_t parent = s->salt;
    if (s->n_blocks) {
        const kv_block *last = &c->blocks[s->table[s->n_blocks - 1]];
        if (!last->keyed) return 0;
        parent = last->key;
    }
    int full = n / KV_BLOCK, got = 0;
    assert(s->n_blocks + full <= s->max_blocks);
    c->st.prefix_lookups += full;
    for (; got < full; got++) {
        const int32_t *t = tokens + (size_t)got * KV_BLOCK;
        uint64_t key = kv_prefix_key(parent, t, KV_BLOCK);
        int32_t id = kv_prefix_find(&c->prefix, key);
        if (id < 0) break;
        kv_block *b = &c->blocks[id];
        if (b->parent != parent || memcmp(c->tokens + (size_t)id * KV_BLOCK, t, sizeof(int32_t) * KV_BLOCK)) break;
        assert(b->cached && b->refs >= 1 && b->tier != KV_FREE && "the index only holds live cached blocks");
        b->refs++;
        kv_seq_push(s, id);
        parent = key;
    }
    c->st.prefix_hits += got;
    int reused = got * KV_BLOCK;
    if (reused > 0 && reused == n) reused--; /* the last token's logits are wanted: recomputed (copy-on-write) */
    memcpy(s->tokens + s->n_tokens, tokens, sizeof(int32_t) * (size_t)reused);
    s->n_tokens += reused;
    c->st.prefix_tokens += reused;
    return reused;
}

/* See kv_cache.h. */
void kv_release(kv_cache *c, kv_seq *s) {
    for (int i = 0; i < s->n_blocks; i++) kv_block_unref(c, s->table[i]);
    s->n_blocks = 0;
    s->n_tokens = 0;
    kv_check_sometimes(c);
}

/* See kv_cache.h. Blocks wholly past n are unreferenced (freed unless another
 * sequence or the prefix index holds them). The partial last block, when the
 * sequence holds it alone, forgets its rows past n and its prefix key (its
 * tokens will change); when it is shared it stays intact for the others and
 * the next write copies it, keeping only this sequence's rows (cow in
 * kv_tier.c). */
void kv_truncate(kv_cache *c, kv_seq *s, int n) {
    int keep = (n + KV_BLOCK - 1) / KV_BLOCK;
    assert(n >= 0 && n <= s->n_tokens && keep <= s->n_blocks);
    for (int i = keep; i < s->n_blocks; i++) kv_block_unref(c, s->table[i]);
    s->n_blocks = keep;
    s->n_tokens = n;
    if (n % KV_BLOCK) {
        kv_block *b = &c->blocks[s->table[keep - 1]];
        if (b->refs == 1) {
            assert(!b->cached);
            if (b->filled > n % KV_BLOCK) b->filled = (int16_t)(n % KV_BLOCK);
            b->keyed = 0;
        }
    }
    kv_check_sometimes(c);
}

/* See kv_cache.h. */
void kv_fork(kv_cache *c, kv_seq *dst, const kv_seq *src) {
    assert(dst->max_blocks >= src->n_blocks && dst->n_ctx >= src->n_tokens);
    kv_release(c, dst);
    for (int i = 0; i < src->n_blocks; i++) {
        assert(c->blocks[src->table[i]].refs >= 1 && "a sequence's blocks are held");
        c->blocks[src->table[i]].refs++;
        kv_seq_push(dst, src->table[i]);
    }
    memcpy(dst->tokens, src->tokens, sizeof(int32_t) * (size_t)src->n_tokens);
    dst->n_tokens = src->n_tokens;
}
