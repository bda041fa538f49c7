/*
 * kv_cache.h - the paged, tiered KV cache shared by sessions (cx_kv_cache).
 *
 * The cache owns up to max_blocks physical blocks (kv_block); sequences
 * (kv_seq.h) refer to them through block tables, and a block referred to by
 * several sequences (a shared prefix, a fork) is counted in `refs`. Block
 * contents live in one tier:
 *
 *   KV_HOT   a slot of the hot slot array, format fmt[KV_HOT] (f32/f16/q8);
 *            the only tier the forward pass writes;
 *   KV_WARM  a slot of the warm slot array, format fmt[KV_WARM] (q8/q4);
 *   KV_COLD  n_layer zlib pages (one per layer, so attention restores one
 *            layer at a time) of the byte-plane-split slabs (the warm format
 *            when there is a warm tier, else the hot one: lossless), stored
 *            back to back in up to KV_PIECES buddy blocks (buddy.h) whose
 *            sizes are the binary digits of the pages' size in granules, so
 *            the buddy's power-of-two rounding wastes < one granule per block
 *            instead of up to half; past the cold budget, in the spill file
 *            at offset id * spill_stride.
 *
 * A block's life (each edge names the function that makes the move; kv_check
 * asserts the invariants and the counters between kv operations):
 *
 *       kv_cache_create
 *             |
 *             v             kv_block_alloc                 append_block, cow
 *   +----> [FREE] -------------------------> [allocated] --------------------> [KV_HOT]
 *   |   free list: tier KV_FREE,  off the list, refs 1, still   take_slot, pinned |     ^
 *   |   refs 0, not cached, no    KV_FREE (no storage; never     for the pass    |     |
 *   |   slot, no pages            seen between kv operations)                    |     |
 *   |                                                                            |     |
 *   |     down: kv_move (kv_make_room's victim by policy; straight               |     |
 *   |     to cold with no warm tier, or when it is weaker than                   |     |
 *   |     every block of a full warm tier)                                       v     |
 *   |   [KV_WARM] <--------------------------------------------------------------+     |
 *   |      |  ^ up (promote)                                                     |     |
 *   |      |  |                                                                  |     |
 *   |      |  |   down: kv_move -> move_cold (pages packed in the                |     |
 *   |      v  |    warm format, or the hot one with no warm tier)                |     |
 *   |   [KV_COLD in memory] <----------------------------------------------------+     |
 *   |      |   (buddy pieces)                                                          |
 *   |      | kv_page_spill (kv_make_room: cold over budget, with a                     |
 *   |      v  spill file)                                                              |
 *   |   [KV_COLD spilled] (pages in the spill file)                                    |
 *   |                                                                                  |
 *   |   up: kv_move, from any tier below: kv_prepare_batch (a block the pass ----------+
 *   |   writes goes hot), promote (a block the pass reads goes one tier up,
 *   |   cold -> warm -> hot, when that tier has room or its victim has a weaker
 *   |   claim: kv_policy_better)
 *   |
 *   +-- kv_block_unref at refs 0, from any tier (kv_block_release_storage gives the
 *       slot, pieces or spill bytes back): kv_release, kv_truncate, cow (its source),
 *       a failed append_block or cow, and kv_block_drop (an unused cached prefix, which
 *       only the index holds: kv_block_alloc with no block free, kv_make_room with the
 *       cold tier over budget and no spill file, or a victim that cannot go lower).
 *
 * Sharing, in every tier: refs = the sequences whose tables hold the block
 * (kv_match and kv_fork add one, kv_release/kv_truncate/cow take it back)
 * + 1 while it is in the prefix index (`cached`: key_block in kv_commit
 * registers a full block, kv_block_drop removes it). A block is written only
 * when refs == 1 (else cow copies it first); it is droppable when only the
 * index holds it (kv_block_droppable). Invariants (kv_check): refs >= 0;
 * refs == 0 <=> on the free list <=> tier KV_FREE (between kv operations);
 * cached => refs >= 1, keyed, and the index maps its key to it; per tier,
 * the blocks counted equal nblocks[], hot/warm bytes = blocks x block size
 * = slots used x block size, cold bytes = the buddy pieces of in-memory cold
 * blocks, spilled_bytes = the pages of spilled ones.
 *
 * All tier moves happen in kv_prepare (kv_tier.c), single-threaded, at the
 * start of a forward pass; during the pass the cache is only read
 * (kv_view.c restores cold blocks for attention on the worker threads; hot
 * and warm ones are read in place).
 * The files, one job each:
 *   kv_cache.c   creation, the block store (alloc/ref/free), statistics, public calls
 *   kv_policy.c  LRU/LFU bookkeeping and the choice of a victim
 *   kv_page.c    cold pages: packing, reading back, the spill file
 *   kv_tier.c    moves between tiers, budgets, kv_prepare, copy-on-write
 *   kv_ops.c     sequence operations: write rows, commit, prefix match, fork, release
 *   kv_view.c    per-session views of a layer for attention (slabs in place, cold ones restored)
 */
#ifndef CX_KV_CACHE_H
#define CX_KV_CACHE_H

#include <assert.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "../buddy.h"
#include "cortex.h"
#include "kv_codec.h"
#include "kv_prefix.h"
#include "kv_seq.h"
#include "kv_slots.h"
#include "kv_zip.h"

#define KV_COLD_GRANULE 256 /* buddy min_block of the cold tier */
#define KV_PIECES 8         /* buddy blocks a cold block's pages may take */

/* Where a block's content lives (see the diagram above). KV_FREE: nowhere
 * (free, or allocated and not yet given a hot slot). */
typedef enum kv_tier { KV_FREE = -1, KV_HOT = CX_KV_HOT, KV_WARM = CX_KV_WARM, KV_COLD = CX_KV_COLD } kv_tier;
enum { KV_TIERS = CX_KV_TIERS };

typedef struct kv_block {
    uint64_t key, parent;   /* prefix chain key of this full block and of the one before (0 at the start) */
    uint64_t stamp, uses;   /* policy: clock of the last pass that read it; passes that read it */
    uint64_t prev_stamp, prev_uses; /* stamp and uses before the last pass that read it (promotion) */
    uint8_t *piece[KV_PIECES]; /* cold in memory: its pages, split over buddy blocks of kv_page_pieces sizes */
    uint32_t cold_bytes;    /* cold: compressed bytes of all its pages */
    uint32_t pin;           /* == cache pass while the current pass writes it (never demoted then) */
    int32_t refs;           /* sequences holding it, + 1 while it is in the prefix index */
    int32_t slot;           /* hot or warm: its slot */
    int32_t next_free;      /* free list link */
    int32_t index;          /* its block number in the sequence that wrote it (older first on ties) */
    kv_tier tier;           /* KV_HOT, KV_WARM, KV_COLD, or KV_FREE */
    int8_t fmt;             /* format of its content (cold pages keep the format they were made from) */
    int8_t spilled;         /* cold: pages in the spill file rather than memory */
    int8_t keyed;           /* full, `key` computed */
    int8_t cached;          /* in the prefix index */
    int16_t filled;         /* rows written, 0..KV_BLOCK */
} kv_block;

struct cx_kv_cache {
    cx_kv_params p;
    const cx_model *m;
    int n_layer, dim, hd;          /* dim: kv_dim = n_head_kv * head_dim; hd: head_dim (kv_codec.h's heads) */
    int32_t max_blocks;
    int32_t capacity;              /* blocks the byte budgets always hold (kv_capacity_of), <= max_blocks */
    kv_block *blocks;
    int32_t free_head, n_free;
    int32_t *tokens;               /* [max_blocks][KV_BLOCK]: each block's tokens (prefix checks) */
    uint32_t *page_off;            /* [max_blocks][n_layer + 1]: offset of each layer's cold page */
    int fmt[2];                    /* formats of the hot and warm tiers */
    size_t block_bytes[2];         /* bytes of a hot / warm block */
    kv_slots slots[2];             /* hot, warm storage */
    int tiering;                   /* 1 when blocks can leave the hot tier */
    buddy *cold_mem;               /* cold pages in memory (NULL: none) */
    size_t page_bound;             /* most compressed bytes of one page */
    int spill_fd;                  /* -1: no spill file */
    size_t spill_stride;           /* bytes reserved per block in the spill file */
    int64_t bytes[KV_TIERS];       /* held per tier (cold: buddy bytes in memory) */
    int64_t nblocks[KV_TIERS];
    int64_t spilled_bytes;
    kv_zip deflater, inflater;     /* tier moves (single-threaded) */
    uint8_t *zbuf;                 /* compressed pages of one block: max(n_layer, 2) * page_bound */
    uint8_t *raw, *planes;         /* one slab of the largest format, twice */
    float *f32;                    /* one slab as floats */
    kv_prefix prefix;
    uint64_t clock;                /* passes prepared */
    uint32_t pass;                 /* pins of the current pass */
    uint32_t checks;               /* kv_check_sometimes calls */
    cx_kv_stats st;                /* counters (bytes/blocks filled in by kv_stats) */
    pthread_mutex_t lock;          /* held by cx_eval and every call changing the cache */
    int lock_ready;                /* lock initialized */
    int sessions;                  /* sessions attached */
    int owned;                     /* 1: private to one session */
};
typedef struct cx_kv_cache kv_cache;

/* ---- kv_cache.c: the block store ---- */

/* A cache for model m holding max_blocks blocks (params already validated
 * by kv_check_params). */
int kv_cache_create(const cx_model *m, const cx_kv_params *p, int32_t max_blocks, int owned, kv_cache **out,
                    cx_err *err);
void kv_cache_destroy(kv_cache *c);
/* Check params against the model; 0 or CX_EINVAL with a message. */
int kv_check_params(const cx_model *m, const cx_kv_params *p, cx_err *err);
/* Blocks the cache can still take on without running out of room in any
 * tier: the guaranteed capacity less the blocks in use, plus the droppable
 * cached prefixes (a scan of the block array; the scheduler's admission and
 * batch check). Never more than kv_block_alloc can hand out. */
int32_t kv_blocks_available(const kv_cache *c);
/* A free block id (dropping an unused cached prefix if none is free), or -1. */
int32_t kv_block_alloc(kv_cache *c);
/* One reference less; the block is freed at zero. */
void kv_block_unref(kv_cache *c, int32_t id);
/* Release a block's storage in its tier (slot, buddy block or spill slot). */
void kv_block_release_storage(kv_cache *c, int32_t id);
/* Drop an unused cached prefix block (refs == 1, cached). */
void kv_block_drop(kv_cache *c, int32_t id);
/* 1 if the block is only held by the prefix index (droppable). */
static inline int kv_block_droppable(const kv_block *b) { return b->cached && b->refs == 1; }
/* Slab of `layer` in a hot or warm block. */
static inline uint8_t *kv_block_slab(const kv_cache *c, int32_t id, int layer) {
    const kv_block *b = &c->blocks[id];
    kv_tier t = b->tier;
    assert((t == KV_HOT || t == KV_WARM) && "only hot and warm blocks have slabs in memory");
    return (uint8_t *)kv_slots_at(&c->slots[t], b->slot) + (size_t)layer * kv_slab_bytes(b->fmt, c->dim);
}
/* Fill out (bytes and blocks per tier included). */
void kv_stats(const kv_cache *c, cx_kv_stats *out);
/* Assert the diagram's invariants over every block and that the per-tier
 * counters equal the sums over the blocks (cache locked, or single-threaded;
 * O(max_blocks)). kv_check_sometimes runs it on every KV_CHECK_EVERY-th
 * call, at the end of kv_prepare_batch, kv_release and kv_truncate, and
 * kv_cache_destroy runs it always; nothing under NDEBUG. */
void kv_check(const kv_cache *c);
#ifndef KV_CHECK_EVERY
#define KV_CHECK_EVERY 16
#endif
#ifdef NDEBUG
#define kv_check_sometimes(c) ((void)0)
#else
#define kv_check_sometimes(c) ((++(c)->checks % KV_CHECK_EVERY) == 0 ? kv_check(c) : (void)0)
#endif

/* ---- kv_policy.c ---- */

/* Record that the current pass reads block id. */
void kv_policy_touch(kv_cache *c, int32_t id);
/* <0 when a should leave a tier before b (LRU: older stamp; LFU: fewer uses). */
int kv_policy_cmp(const kv_cache *c, const kv_block *a, const kv_block *b);
/* 1 when a had strictly more claim to a tier than b before the current pass
 * read either (no promotion on ties). */
int kv_policy_better(const kv_cache *c, const kv_block *a, const kv_block *b);
/* The block to leave `tier` first: not pinned, not `except`, and for the
 * cold tier in memory (not spilled); only droppable ones when
 * droppable_only. -1 if none. */
int32_t kv_policy_victim(const kv_cache *c, kv_tier tier, int32_t except, int droppable_only);

/* ---- kv_page.c ---- */

/* Compress every layer of hot/warm block id, converted to `fmt`, into
 * c->zbuf (page_off filled); returns the total bytes, 0 on failure. */
size_t kv_page_pack(kv_cache *c, int32_t id, int fmt);
/* Layer `layer` of cold block id, decompressed into raw (its format's slab),
 * with a caller-owned decompressor and scratch of kv_page_scratch bytes.
 * Reads only: safe from several threads at once. 0, or -1 on a read or
 * zlib failure. */
int kv_page_read(const kv_cache *c, int32_t id, int layer, kv_zip *zip, uint8_t *scratch, void *raw);
/* Bytes of scratch kv_page_read needs. */
size_t kv_page_scratch(const kv_cache *c);
/* The largest slab any tier of this cache stores. */
size_t kv_page_max_slab(const kv_cache *c);
/* The buddy block sizes (descending, each a power-of-two multiple of
 * KV_COLD_GRANULE) that hold `bytes` bytes of pages; returns their count
 * (<= KV_PIECES) and their total in *total. */
int kv_page_pieces(size_t bytes, size_t size[KV_PIECES], size_t *total);
/* Free cold block id's buddy blocks (the pages in memory). */
void kv_page_free(kv_cache *c, int32_t id);
/* Move cold block id's pages from memory to the spill file; 0 or -1. */
int kv_page_spill(kv_cache *c, int32_t id);
/* Store the packed pages in c->zbuf (bytes long) as block id's cold pages:
 * in memory when to_memory, else in the spill file. 0 or -1. */
int kv_page_store(kv_cache *c, int32_t id, size_t bytes, int to_memory);

/* ---- kv_tier.c ---- */

/* Before a pass writing positions pos..pos+T-1 of seq: allocate and pin the
 * blocks it writes (hot, copied first when shared), record the reads, move
 * blocks between tiers within the budgets. 0 or a CX_E* code. */
int kv_prepare(kv_cache *c, kv_seq *s, int pos, int T, cx_err *err);
/* The same for one pass writing T[q] positions from pos[q] of each of n
 * distinct sequences (a batch); the hot tier must hold all their written
 * blocks at once. */
int kv_prepare_batch(kv_cache *c, kv_seq *const *seqs, const int *pos, const int *T, int n, cx_err *err);
/* Make `need` bytes (hot/warm: one block) of room in `tier`, moving or
 * dropping blocks other than `except`; 0 or a CX_E* code. */
int kv_make_room(kv_cache *c, kv_tier tier, int64_t need, int32_t except, cx_err *err);
/* Move block id to tier `to`, making room there first; 0 or a CX_E* code. */
int kv_move(kv_cache *c, int32_t id, kv_tier to, cx_err *err);

/* ---- kv_ops.c ---- */

/* Store rows pos..pos+T-1 of `layer` (keys and values, [T][dim] floats). */
void kv_write(kv_cache *c, const kv_seq *s, int layer, int pos, int T, const float *k, const float *v);
/* After the pass: the tokens are in, full blocks get their prefix key. */
void kv_commit(kv_cache *c, kv_seq *s, int pos, int T, const int32_t *tokens);
/* Take the cached blocks that continue seq with tokens[0..n) (prefix cache);
 * returns the tokens reused (at most n - 1: the last one must be computed). */
int kv_match(kv_cache *c, kv_seq *s, const int32_t *tokens, int n);
/* Keep the first n (0..n_tokens) positions of seq, giving the blocks past
 * them back; shared blocks stay intact for their other holders. */
void kv_truncate(kv_cache *c, kv_seq *s, int n);
/* Drop every block of seq (it becomes empty). */
void kv_release(kv_cache *c, kv_seq *s);
/* dst becomes a copy of src sharing every block. */
void kv_fork(kv_cache *c, kv_seq *dst, const kv_seq *src);

#endif
