/*
 * kv_cache.c - the KV cache's creation, its block store (allocate, reference,
 * free, drop), its statistics, and the public cx_kv_* calls. See kv_cache.h.
 */
#include "kv_cache.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cortex_tools.h"
#include "../model.h"
#include "../placement.h"
#include "../util.h"

/* See cortex.h. */
cx_kv_params cx_kv_defaults(void) {
    cx_kv_params p;
    memset(&p, 0, sizeof p);
    p.type = CX_KV_F32;
    p.warm_type = CX_KV_Q8;
    for (int t = 0; t < CX_KV_TIERS; t++) p.budget[t] = CX_KV_UNLIMITED;
    p.policy = CX_KV_LRU;
    p.zlib_level = 1;
    return p;
}

/* Names of the public KV block types, indexed by CX_KV_*, and of the policies. */
static const char *const KV_TYPE_NAMES[] = {"f32", "f16", "q8", "q4", "bf16", "e4m3", "e5m2", "q4g", "q4h"};
static const char *const KV_POLICY_NAMES[] = {"lru", "lfu", "random"};
#define KV_N_TYPES ((int)(sizeof KV_TYPE_NAMES / sizeof KV_TYPE_NAMES[0]))
#define KV_N_POLICIES ((int)(sizeof KV_POLICY_NAMES / sizeof KV_POLICY_NAMES[0]))

/* See cortex.h. */
const char *cx_kv_type_name(int type) { return type >= 0 && type < KV_N_TYPES ? KV_TYPE_NAMES[type] : NULL; }

/* See cortex.h. */
const char *cx_kv_policy_name(int policy) {
    return policy >= 0 && policy < KV_N_POLICIES ? KV_POLICY_NAMES[policy] : NULL;
}

/* See cortex.h. */
int cx_kv_type_from_name(const char *name) {
    for (int t = 0; t < KV_N_TYPES; t++)
        if (!strcasecmp(name, KV_TYPE_NAMES[t])) return t;
    return -1;
}

/* See cortex.h. */
int cx_kv_policy_from_name(const char *name) {
    for (int p = 0; p < KV_N_POLICIES; p++)
        if (!strcasecmp(name, KV_POLICY_NAMES[p])) return p;
    return -1;
}

/* See cortex.h: from the codec's own test of which types a tier stores. */
const char *cx_kv_tier_types(int tier, char *buf, size_t cap) {
    assert(cap > 0);
    size_t at = 0;
    buf[0] = 0;
    for (int t = 0; t < KV_N_TYPES; t++) {
        if ((tier == CX_KV_HOT ? kv_fmt_hot(t) : tier == CX_KV_WARM ? kv_fmt_warm(t) : -1) < 0) continue;
        int w = snprintf(buf + at, cap - at, "%s%s", at ? "|" : "", KV_TYPE_NAMES[t]);
        if (w < 0 || (size_t)w >= cap - at) { /* does not fit: keep the whole names before it */
            buf[at] = 0;
            break;
        }
        at += (size_t)w;
    }
    return buf;
}

/* A KV type for messages: its name, or its number when it has none. */
static const char *kv_type_label(int type, char *buf, size_t cap) {
    const char *n = cx_kv_type_name(type);
    if (n) return n;
    snprintf(buf, cap, "%d", type);
    return buf;
}

/* See cortex.h: a number with an optional K/M/G/T suffix (powers of 1024). */
int64_t cx_parse_bytes(const char *s) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0)) return -1;
    double unit = 1;
    switch (*end) {
    case 'k': case 'K': unit = 1024.0; end++; break;
    case 'm': case 'M': unit = 1024.0 * 1024; end++; break;
    case 'g': case 'G': unit = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': unit = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'i' && unit > 1) end++; /* "KiB" */
    if (*end == 'B' || *end == 'b') end++;
    if (*end || v * unit > 9.0e18) return -1;
    return (int64_t)(v * unit);
}

/* kv_dim of a model. */
static int model_kv_dim(const cx_model *m) { return m->info.n_head_kv * m->info.head_dim; }

/* See kv_cache.h. */
int kv_check_params(const cx_model *m, const cx_kv_params *p, cx_err *err) {
    char num[16], list[64];
    if (model_require_weights(m, err)) return CX_EUNSUP;
    if (kv_fmt_hot(p->type) < 0)
        return cx_fail(err, CX_EINVAL, "KV type %s is not one of %s", kv_type_label(p->type, num, sizeof num),
                       cx_kv_tier_types(CX_KV_HOT, list, sizeof list));
    if (kv_fmt_warm(p->warm_type) < 0)
        return cx_fail(err, CX_EINVAL, "warm KV type %s is not one of %s", kv_type_label(p->warm_type, num, sizeof num),
                       cx_kv_tier_types(CX_KV_WARM, list, sizeof list));
    for (int t = 0; t < 2; t++) { /* a rotated or grouped 4-bit group must not straddle two heads */
        int type = t ? p->warm_type : p->type, fmt = t ? kv_fmt_warm(type) : kv_fmt_hot(type);
        if ((fmt == KV_Q4G || fmt == KV_Q4H) && m->info.head_dim % KV_GROUP)
            return cx_fail(err, CX_EUNSUP, "%sKV type %s needs a head size that is a multiple of %d; this model's is %d",
                           t ? "warm " : "", cx_kv_type_name(type), KV_GROUP, m->info.head_dim);
    }
    if (!cx_kv_policy_name(p->policy))
        return cx_fail(err, CX_EINVAL, "KV policy %d is not one of lru|lfu|random (CX_KV_LRU, CX_KV_LFU, CX_KV_RANDOM)", p->policy);
    if (p->zlib_level < 1 || p->zlib_level > 9)
        return cx_fail(err, CX_EINVAL, "zlib level %d is not in 1..9", p->zlib_level);
    if (p->max_tokens < 0) return cx_fail(err, CX_EINVAL, "KV cache capacity %d tokens is negative", p->max_tokens);
    static const char *names[KV_TIERS] = {"hot", "warm", "cold"};
    for (int t = 0; t < KV_TIERS; t++)
        if (p->budget[t] < CX_KV_UNLIMITED)
            return cx_fail(err, CX_EINVAL, "%s KV budget %lld bytes is negative", names[t], (long long)p->budget[t]);
    size_t hot = (size_t)m->info.n_layer * kv_slab_bytes(kv_fmt_hot(p->type), model_kv_dim(m));
    if (p->budget[KV_HOT] != CX_KV_UNLIMITED && (uint64_t)p->budget[KV_HOT] < hot)
        return cx_fail(err, CX_EINVAL, "hot KV budget %lld bytes is less than one %s block (%zu bytes)",
                       (long long)p->budget[KV_HOT], kv_fmt_name(kv_fmt_hot(p->type)), hot);
    return 0;
}

/* Slots a tier's budget pays for, at most one per block. */
static int32_t tier_slots(int64_t budget, size_t block_bytes, int32_t max_blocks) {
    if (budget == CX_KV_UNLIMITED || (uint64_t)budget / block_bytes >= (uint64_t)max_blocks) return max_blocks;
    return (int32_t)((uint64_t)budget / block_bytes);
}

/* Storage for moving blocks below the hot tier: the cold buddy region, the
 * spill file, the compressors and their scratch. 0 or a CX_E* code. */
static int setup_tiering(kv_cache *c, cx_err *err) {
    size_t slab = kv_page_max_slab(c);
    c->page_bound = kv_zip_bound(slab);
    size_t block_pages = (size_t)c->n_layer * c->page_bound;
    int64_t cold = c->p.budget[KV_COLD];
    if (cold != 0) {
        /* Address space only (the buddy maps it MAP_NORESERVE): room beyond
         * the budget so that fragmentation, not the budget, is never what
         * turns a page away first. */
        size_t region = cold == CX_KV_UNLIMITED ? (size_t)c->max_blocks * (block_pages + block_pages / 4)
                                                : 2 * (size_t)cold;
        if (region < KV_COLD_GRANULE) region = KV_COLD_GRANULE;
        int rc = buddy_new(region, KV_COLD_GRANULE, -1, &c->cold_mem, err);
        size_t cold_bytes = 0;
        void *cold_base = rc ? NULL : buddy_base(c->cold_mem, &cold_bytes);
        if (!rc) rc = placement_bind(cold_base, cold_bytes, "the KV cache's cold tier", err); /* MAP_NORESERVE: untouched */
        if (rc) return rc;
    }
    if (c->p.spill_path) {
        c->spill_fd = open(c->p.spill_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (c->spill_fd < 0)
            return cx_fail(err, CX_EIO, "%s: cannot open the KV spill file: %s", c->p.spill_path, strerror(errno));
        c->spill_stride = block_pages;
    }
    c->zbuf = malloc((size_t)(c->n_layer > 2 ? c->n_layer : 2) * c->page_bound); /* also kv_page_read's scratch */
    c->raw = malloc(slab);
    c->planes = malloc(slab);
    c->f32 = malloc(sizeof(float) * KV_ROWS * (size_t)c->dim);
    if (!c->zbuf || !c->raw || !c->planes || !c->f32 || kv_zip_init(&c->deflater, 1, c->p.zlib_level) ||
        kv_zip_init(&c->inflater, 0, 0))
        return cx_fail(err, CX_ENOMEM, "out of memory for the KV cache's compressor");
    return 0;
}

/* Blocks the byte budgets hold whatever the data: every hot and warm slot,
 * and as many cold blocks as the cold budget holds at the worst-case size of
 * a block's pages (each page at most the zlib bound of its format's slab,
 * rounded to buddy pieces as cold_size in kv_tier.c does; the count, not the
 * bytes now held, because a promotion may swap a small cold block for a
 * large one), so any block count up to this can be placed
 * without a pass running out of room. A spill file (or no budgets: no
 * tiering) holds every block. Admission counts against this, not against
 * block ids: ids are plentiful, bytes are what runs out. */
static int32_t capacity_of(const kv_cache *c) {
    if (!c->tiering || c->spill_fd >= 0) return c->max_blocks;
    int64_t n = (int64_t)c->slots[KV_HOT].n + c->slots[KV_WARM].n;
    if (c->cold_mem) {
        int64_t cold = c->p.budget[KV_COLD];
        /* cold pages are of the warm format when there is a warm tier, else of the hot one (move_cold) */
        int fmt = c->slots[KV_WARM].n > 0 ? c->fmt[KV_WARM] : c->fmt[KV_HOT];
        size_t size[KV_PIECES], worst;
        kv_page_pieces((size_t)c->n_layer * kv_zip_bound(kv_slab_bytes(fmt, c->dim)), size, &worst);
        n += cold == CX_KV_UNLIMITED ? c->max_blocks : cold / (int64_t)worst;
    }
    return n < c->max_blocks ? (int32_t)n : c->max_blocks;
}

/* See kv_cache.h. */
int kv_cache_create(const cx_model *m, const cx_kv_params *p, int32_t max_blocks, int owned, kv_cache **out,
                    cx_err *err) {
    *out = NULL;
    assert(max_blocks > 0);
    kv_cache *c = calloc(1, sizeof *c);
    if (!c) return cx_fail(err, CX_ENOMEM, "out of memory");
    c->spill_fd = -1;
    c->p = *p;
    c->p.spill_path = NULL;
    if (p->spill_path && !(c->p.spill_path = strdup(p->spill_path))) {
        kv_cache_destroy(c);
        return cx_fail(err, CX_ENOMEM, "out of memory");
    }
    c->m = m;
    c->n_layer = m->info.n_layer;
    c->dim = model_kv_dim(m);
    c->hd = m->info.head_dim;
    c->max_blocks = max_blocks;
    c->owned = owned;
    c->fmt[KV_HOT] = kv_fmt_hot(p->type);
    c->fmt[KV_WARM] = kv_fmt_warm(p->warm_type);
    c->blocks = calloc((size_t)max_blocks, sizeof *c->blocks);
    c->tokens = calloc((size_t)max_blocks * KV_BLOCK, sizeof *c->tokens);
    c->page_off = calloc((size_t)max_blocks * (size_t)(c->n_layer + 1), sizeof *c->page_off);
    c->lock_ready = pthread_mutex_init(&c->lock, NULL) == 0;
    int ok = c->blocks && c->tokens && c->page_off && c->lock_ready;
    for (int t = KV_HOT; ok && t <= KV_WARM; t++) {
        c->block_bytes[t] = (size_t)c->n_layer * kv_slab_bytes(c->fmt[t], c->dim);
        ok = kv_slots_init(&c->slots[t], tier_slots(p->budget[t], c->block_bytes[t], max_blocks),
                           c->block_bytes[t]) == 0;
    }
    ok = ok && (!p->prefix_cache || kv_prefix_init(&c->prefix, max_blocks) == 0);
    if (!ok) {
        size_t mib = (size_t)max_blocks * c->block_bytes[KV_HOT] >> 20;
        kv_cache_destroy(c);
        return cx_fail(err, CX_ENOMEM, "out of memory for a KV cache of %d blocks (%zu MiB hot)", max_blocks, mib);
    }
    /* The process's NUMA policy (placement.h) on the slots, before any block is written. */
    for (int t = KV_HOT; t <= KV_WARM; t++) {
        int rc = placement_bind(c->slots[t].mem, (size_t)c->slots[t].n * c->slots[t].slot_bytes,
                                t == KV_HOT ? "the KV cache's hot tier" : "the KV cache's warm tier", err);
        if (rc) {
            kv_cache_destroy(c);
            return rc;
        }
    }
    c->free_head = -1;
    for (int32_t i = max_blocks - 1; i >= 0; i--) {
        c->blocks[i].tier = KV_FREE;
        c->blocks[i].slot = -1;
        c->blocks[i].next_free = c->free_head;
        c->free_head = i;
    }
    c->n_free = max_blocks;
    assert(c->slots[KV_HOT].n >= 1);
    c->tiering = c->slots[KV_HOT].n < max_blocks;
    if (c->tiering) {
        int rc = setup_tiering(c, err);
        if (rc) {
            kv_cache_destroy(c);
            return rc;
        }
    }
    c->capacity = capacity_of(c);
    *out = c;
    return 0;
}

/* See kv_cache.h. The spill file is scratch: removed with the cache. */
void kv_cache_destroy(kv_cache *c) {
    if (!c) return;
#ifndef NDEBUG
    if (c->capacity > 0) kv_check(c); /* a whole cache (capacity is set last) */
#endif
    if (c->spill_fd >= 0) {
        close(c->spill_fd);
        unlink(c->p.spill_path);
    }
    free((char *)c->p.spill_path);
    buddy_destroy(c->cold_mem);
    kv_zip_free(&c->deflater);
    kv_zip_free(&c->inflater);
    for (int t = KV_HOT; t <= KV_WARM; t++) kv_slots_free(&c->slots[t]);
    kv_prefix_free(&c->prefix);
    free(c->zbuf);
    free(c->raw);
    free(c->planes);
    free(c->f32);
    free(c->blocks);
    free(c->tokens);
    free(c->page_off);
    if (c->lock_ready) pthread_mutex_destroy(&c->lock);
    free(c);
}

/* The droppable block (an unused cached prefix) to drop first, over every tier; -1 if none. */
static int32_t drop_candidate(const kv_cache *c) {
    int32_t best = -1;
    for (int t = KV_TIERS - 1; t >= KV_HOT; t--) {
        int32_t v = kv_policy_victim(c, t, -1, 1);
        if (v >= 0 && (best < 0 || kv_policy_cmp(c, &c->blocks[v], &c->blocks[best]) < 0)) best = v;
    }
    return best;
}

/* See kv_cache.h: the capacity less the blocks in use, plus the cached
 * prefixes nobody holds (kv_block_alloc, and a full cold tier, drop those on
 * demand). capacity <= max_blocks, so this is at most the free ids plus the
 * droppable ones. */
int32_t kv_blocks_available(const kv_cache *c) {
    int32_t n = c->capacity - (c->max_blocks - c->n_free);
    for (int32_t i = 0; i < c->max_blocks; i++) n += c->blocks[i].tier != KV_FREE && kv_block_droppable(&c->blocks[i]);
    return n > 0 ? n : 0;
}

/* See kv_cache.h. The new block has one reference, no storage and no rows. */
int32_t kv_block_alloc(kv_cache *c) {
    if (c->free_head < 0) {
        int32_t v = drop_candidate(c);
        if (v < 0) return -1;
        kv_block_drop(c, v);
    }
    int32_t id = c->free_head;
    assert(id >= 0 && c->n_free > 0 && "a dropped block went to the free list");
    assert(c->blocks[id].tier == KV_FREE && c->blocks[id].refs == 0 && "a block on the free list is free");
    c->free_head = c->blocks[id].next_free;
    c->n_free--;
    kv_block *b = &c->blocks[id];
    memset(b, 0, sizeof *b);
    b->refs = 1;
    b->slot = -1;
    b->next_free = -1;
    b->tier = KV_FREE;
    b->stamp = c->clock;
    return id;
}

/* See kv_cache.h. */
void kv_block_release_storage(kv_cache *c, int32_t id) {
    kv_block *b = &c->blocks[id];
    switch (b->tier) {
    case KV_HOT:
    case KV_WARM:
        assert(b->slot >= 0 && b->slot < c->slots[b->tier].n && "a hot or warm block holds a slot of its tier");
        kv_slots_put(&c->slots[b->tier], b->slot);
        c->bytes[b->tier] -= (int64_t)c->block_bytes[b->tier];
        b->slot = -1;
        break;
    case KV_COLD:
        assert(b->cold_bytes > 0 && "a cold block has pages");
        if (b->spilled) c->spilled_bytes -= b->cold_bytes;
        else kv_page_free(c, id);
        b->cold_bytes = 0;
        b->spilled = 0;
        break;
    case KV_FREE:
        return; /* allocated, never given storage */
    }
    assert(c->nblocks[b->tier] > 0 && c->bytes[b->tier] >= 0 && c->spilled_bytes >= 0 && "tier counters underflow");
    c->nblocks[b->tier]--;
    b->tier = KV_FREE;
}

/* See kv_cache.h. */
void kv_block_unref(kv_cache *c, int32_t id) {
    assert(id >= 0 && id < c->max_blocks && "a block id of this cache");
    kv_block *b = &c->blocks[id];
    assert(b->refs > 0 && "unref of a free block (refcounts never go below 0)");
    if (--b->refs > 0) return;
    assert(!b->cached && "the prefix index holds a reference of its own: a cached block never reaches 0 here");
    kv_block_release_storage(c, id);
    assert(c->n_free < c->max_blocks && "more free blocks than blocks");
    b->next_free = c->free_head;
    c->free_head = id;
    c->n_free++;
}

/* See kv_cache.h. */
void kv_block_drop(kv_cache *c, int32_t id) {
    kv_block *b = &c->blocks[id];
    assert(kv_block_droppable(b) && "only an unused cached prefix is dropped");
    assert(kv_prefix_find(&c->prefix, b->key) == id && "a cached block is in the index under its key");
    kv_prefix_remove(&c->prefix, b->key);
    b->cached = 0;
    c->st.drops++;
    kv_block_unref(c, id);
}

/* See kv_cache.h: one scan of the blocks, and one of the free list. */
void kv_check(const kv_cache *c) {
    int64_t n[KV_TIERS] = {0}, bytes_cold = 0, spilled = 0;
    int32_t free_blocks = 0, cached = 0;
    for (int32_t i = 0; i < c->max_blocks; i++) {
        const kv_block *b = &c->blocks[i];
        assert(b->refs >= 0 && "a block's refcount is never negative");
        assert((b->refs == 0) == (b->tier == KV_FREE) && "refs 0 <=> free (an allocated block has storage between kv operations)");
        assert(b->filled >= 0 && b->filled <= KV_BLOCK && "rows filled within a block");
        assert((!b->keyed || b->filled == KV_BLOCK) && "only a full block has a prefix key");
        if (b->cached) {
            cached++;
            assert(b->refs >= 1 && b->keyed && "a cached block is keyed and holds the index's reference");
            assert(kv_prefix_find(&c->prefix, b->key) == i && "the index maps a cached block's key to it");
        }
        switch (b->tier) {
        case KV_FREE:
            free_blocks++;
            assert(!b->cached && b->slot == -1 && b->cold_bytes == 0 && "a free block holds no storage");
            break;
        case KV_HOT:
        case KV_WARM:
            n[b->tier]++;
            assert(b->slot >= 0 && b->slot < c->slots[b->tier].n && "a hot or warm block holds a slot of its tier");
            assert(b->fmt == c->fmt[b->tier] && "a hot or warm block is in its tier's format");
            break;
        case KV_COLD:
            n[KV_COLD]++;
            assert(b->cold_bytes > 0 && "a cold block has pages");
            if (b->spilled) {
                assert(c->spill_fd >= 0 && "a spilled block needs the spill file");
                spilled += b->cold_bytes;
            } else {
                size_t size[KV_PIECES], total;
                int np = kv_page_pieces(b->cold_bytes, size, &total);
                for (int k = 0; k < np; k++) assert(b->piece[k] && "a cold block in memory holds all its pieces");
                bytes_cold += (int64_t)total;
            }
            break;
        }
    }
    for (int t = KV_HOT; t <= KV_WARM; t++) {
        assert(n[t] == c->nblocks[t] && "blocks counted in a tier = blocks there");
        assert(c->slots[t].used == n[t] && "slots used = blocks in the tier");
        assert(c->bytes[t] == n[t] * (int64_t)c->block_bytes[t] && "tier bytes = blocks x block size");
    }
    assert(n[KV_COLD] == c->nblocks[KV_COLD] && "blocks counted in the cold tier = cold blocks");
    assert(c->bytes[KV_COLD] == bytes_cold && "cold bytes = the buddy pieces of the cold blocks in memory");
    assert(c->spilled_bytes == spilled && "spilled bytes = the pages of the spilled blocks");
    assert(free_blocks == c->n_free && "n_free = the free blocks");
    assert((c->p.prefix_cache ? c->prefix.n == cached : cached == 0) && "entries of the prefix index = the cached blocks");
    int32_t listed = 0;
    for (int32_t i = c->free_head; i >= 0 && listed <= c->n_free; i = c->blocks[i].next_free, listed++)
        assert(c->blocks[i].tier == KV_FREE && c->blocks[i].refs == 0 && "the free list holds free blocks");
    assert(listed == c->n_free && "the free list holds n_free blocks, once each");
    (void)n, (void)bytes_cold, (void)spilled, (void)free_blocks, (void)cached, (void)listed;
}

/* See kv_cache.h. */
void kv_stats(const kv_cache *c, cx_kv_stats *out) {
    *out = c->st;
    out->type = c->p.type;
    out->warm_type = c->p.warm_type;
    out->policy = c->p.policy;
    out->prefix_cache = c->p.prefix_cache;
    for (int t = 0; t < KV_TIERS; t++) {
        out->budget[t] = c->p.budget[t];
        out->bytes[t] = c->bytes[t];
        out->blocks[t] = c->nblocks[t];
    }
    out->spilled_bytes = c->spilled_bytes;
    out->blocks_used = c->max_blocks - c->n_free;
    out->blocks_max = c->max_blocks;
    out->blocks_capacity = c->capacity;
    out->zip_ratio = out->zip_out ? (double)out->zip_in / (double)out->zip_out : 0.0;
    out->prefix_hit_rate = out->prefix_lookups ? (double)out->prefix_hits / (double)out->prefix_lookups : 0.0;
}

/* See cortex.h. */
double cx_kv_bytes_per_pos(const cx_model *m, int kv_type) {
    int fmt = kv_fmt_hot(kv_type);
    if (fmt < 0) return -1;
    return (double)m->info.n_layer * (double)kv_slab_bytes(fmt, model_kv_dim(m)) / KV_BLOCK;
}

/* See cortex.h: capacity max_tokens positions, plus one block for a copy-on-write. */
int cx_kv_cache_new(const cx_model *m, const cx_kv_params *p, cx_kv_cache **out, cx_err *err) {
    *out = NULL;
    int rc = kv_check_params(m, p, err);
    if (rc) return rc;
    int tokens = p->max_tokens > 0 ? p->max_tokens : CX_DEFAULT_CTX;
    return kv_cache_create(m, p, (tokens + KV_BLOCK - 1) / KV_BLOCK + 1, 0, out, err);
}

/* See cortex.h. */
void cx_kv_cache_free(cx_kv_cache *c) {
    if (!c) return;
    assert(c->sessions == 0 && "free the sessions using a KV cache before the cache");
    kv_cache_destroy(c);
}

/* See cortex.h. */
void cx_kv_cache_stats(cx_kv_cache *c, cx_kv_stats *out) {
    pthread_mutex_lock(&c->lock);
    kv_stats(c, out);
    pthread_mutex_unlock(&c->lock);
}
