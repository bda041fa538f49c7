/*
 * buddy.c - see buddy.h.
 *
 * Bookkeeping, all outside the region, indexed by min_block number i:
 *
 *   state[i]  0 when min_block i lies inside a block that starts earlier;
 *             otherwise ST_HEAD | (ST_ALLOC if handed out) | order of the
 *             block that starts at i. Only heads carry information, so a
 *             split writes one byte (the new upper half's head) and a merge
 *             clears one (the upper buddy's head).
 *   next[i], prev[i]
 *             links of the doubly linked free list of the block's order,
 *             meaningful only for free heads; NONE ends a list. Removing a
 *             buddy from the middle of its list is O(1).
 *
 * A block of order k starts at a min_block index that is a multiple of 2^k,
 * so its buddy is index XOR 2^k (address XOR size, since the region is
 * aligned to its size when the address space allows, and offsets are used
 * either way). The invariant kept after every call: the heads tile the
 * region, and no two free buddies of the same order coexist (they would have
 * been merged), so the free blocks are exactly the maximal aligned free
 * blocks. buddy_check verifies all of it.
 */
#include "buddy.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"

#define ST_HEAD 0x80u
#define ST_ALLOC 0x40u
#define ST_ORDER 0x3fu
#define NONE UINT32_MAX

#define HUGE_2M ((size_t)2 << 20)
/* mbind(2) policy and the largest node number our node mask can name. */
#define BUDDY_MPOL_BIND 2
#define BUDDY_MASK_LONGS 16
#define BUDDY_MAX_NODE (BUDDY_MASK_LONGS * 64)

struct buddy {
    uint8_t *base;        /* region start */
    size_t region;        /* min_block << max_order */
    size_t map_bytes;     /* mapped length: region rounded up to a page */
    size_t min_block;
    int min_shift;        /* log2(min_block) */
    int max_order;
    uint32_t nblocks;     /* region / min_block = 2^max_order */
    uint8_t *state;
    uint32_t *next, *prev;
    uint32_t head[BUDDY_ORDERS];
    size_t nfree[BUDDY_ORDERS];
    size_t nused[BUDDY_ORDERS];
    size_t in_use, high_water;
    uint64_t allocs, frees, failed_allocs, bad_frees, splits, merges;
    int hugepages, numa_node, numa_nodes;
    char last_error[200];
};

/* Number of trailing zero bits of a power of two (its log2). */
static int buddy_log2(size_t pow2) {
    assert(pow2 && !(pow2 & (pow2 - 1)));
    return __builtin_ctzll((unsigned long long)pow2);
}

/* Push free block idx of `order` onto the front of its list: LIFO reuse keeps
 * recently freed (cache-warm) blocks in play. */
static void list_push(buddy *b, int order, uint32_t idx) {
    uint32_t h = b->head[order];
    b->next[idx] = h;
    b->prev[idx] = NONE;
    if (h != NONE) b->prev[h] = idx;
    b->head[order] = idx;
    b->nfree[order]++;
}

/* Unlink free block idx from the list of `order`, wherever it is: O(1). */
static void list_remove(buddy *b, int order, uint32_t idx) {
    uint32_t n = b->next[idx], p = b->prev[idx];
    assert(b->nfree[order] > 0);
    if (p != NONE) b->next[p] = n;
    else b->head[order] = n;
    if (n != NONE) b->prev[n] = p;
    b->nfree[order]--;
}

/* Count /sys/devices/system/node/nodeN directories: the kernel's NUMA nodes.
 * Read each time rather than cached, since it is called rarely. */
int buddy_numa_nodes(void) {
    DIR *d = opendir("/sys/devices/system/node");
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *s = e->d_name;
        if (strncmp(s, "node", 4) != 0 || !s[4]) continue;
        int digits = 1;
        for (const char *c = s + 4; *c; c++) digits &= (*c >= '0' && *c <= '9');
        n += digits;
    }
    closedir(d);
    return n;
}

/* Map `len` bytes (a page multiple) at an address aligned to `align` (a power
 * of two) by over-reserving and trimming both ends; NULL if the address space
 * cannot provide it. MAP_NORESERVE: pages are committed when first touched. */
static uint8_t *buddy_reserve(size_t len, size_t align, size_t page) {
    int prot = PROT_READ | PROT_WRITE, flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    if (align <= page) {
        void *p = mmap(NULL, len, prot, flags, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    if (len > SIZE_MAX - align) return NULL;
    size_t span = len + align - page;
    void *raw = mmap(NULL, span, prot, flags, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    uintptr_t r = (uintptr_t)raw, a = (r + align - 1) & ~(uintptr_t)(align - 1);
    if (a > r) munmap(raw, a - r);
    if (r + span > a + len) munmap((void *)(a + len), r + span - (a + len));
    return (uint8_t *)a;
}

/* Bind [p, p+len) to one NUMA node with the raw mbind syscall (no libnuma):
 * MPOL_BIND, a node mask with only that bit. Untouched pages will be faulted
 * in on that node; returns 0 or -errno. */
static int buddy_bind(void *p, size_t len, int node) {
    unsigned long mask[BUDDY_MASK_LONGS] = {0};
    mask[node / 64] = 1ul << (node % 64);
    /* maxnode counts one more than the bits passed: the kernel reads maxnode-1. */
    long rc = syscall(SYS_mbind, p, len, BUDDY_MPOL_BIND, mask, (unsigned long)BUDDY_MAX_NODE + 1, 0ul);
    return rc == 0 ? 0 : -errno;
}

/* See buddy.h. Validates the geometry, reserves and binds the region, then
 * makes it one free block of the top order. */
int buddy_new(size_t bytes, size_t min_block, int numa_node, buddy **out, cx_err *err) {
    *out = NULL;
    if (min_block < BUDDY_MIN_BLOCK || (min_block & (min_block - 1)))
        return cx_fail(err, CX_EINVAL, "buddy: min_block %zu is not a power of two >= %d", min_block,
                       BUDDY_MIN_BLOCK);
    if (bytes == 0) return cx_fail(err, CX_EINVAL, "buddy: a region of 0 bytes");
    if (bytes > BUDDY_MAX_REGION || min_block > BUDDY_MAX_REGION)
        return cx_fail(err, CX_ERANGE, "buddy: region of %zu bytes exceeds the %zu-byte limit", bytes,
                       BUDDY_MAX_REGION);
    size_t want = (bytes - 1) / min_block + 1;
    int order = 0;
    while (((size_t)1 << order) < want) order++;
    if (order > BUDDY_MAX_ORDER || order + buddy_log2(min_block) > buddy_log2(BUDDY_MAX_REGION))
        return cx_fail(err, CX_ERANGE, "buddy: %zu bytes in %zu-byte blocks needs order %d (limit %d)", bytes,
                       min_block, order, BUDDY_MAX_ORDER);
    int nodes = buddy_numa_nodes();
    if (numa_node >= 0) {
        char path[64];
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d", numa_node);
        if (numa_node >= BUDDY_MAX_NODE || access(path, F_OK) != 0)
            return cx_fail(err, CX_EINVAL,
                           "buddy: NUMA node %d does not exist (%s is missing; this machine has %d node%s)",
                           numa_node, path, nodes, nodes == 1 ? "" : "s");
    } else if (numa_node != -1) {
        return cx_fail(err, CX_EINVAL, "buddy: NUMA node %d: use -1 for no binding", numa_node);
    }

    buddy *b = calloc(1, sizeof *b);
    if (!b) return cx_fail(err, CX_ENOMEM, "buddy: out of memory");
    b->min_block = min_block;
    b->min_shift = buddy_log2(min_block);
    b->max_order = order;
    b->nblocks = (uint32_t)1 << order;
    b->region = min_block << order;
    b->numa_node = numa_node;
    b->numa_nodes = nodes;
    b->state = calloc(b->nblocks, 1);
    b->next = malloc((size_t)b->nblocks * sizeof *b->next);
    b->prev = malloc((size_t)b->nblocks * sizeof *b->prev);
    if (!b->state || !b->next || !b->prev) {
        buddy_destroy(b);
        return cx_fail(err, CX_ENOMEM, "buddy: out of memory for the state of %u blocks", (unsigned)(1u << order));
    }

    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    b->map_bytes = (b->region + page - 1) & ~(page - 1);
    /* Natural alignment (the region aligned to its own size) first; failing
     * that, 2 MiB for huge pages; failing that, whatever mmap gives. */
    b->base = buddy_reserve(b->map_bytes, b->region, page);
    if (!b->base && b->region > HUGE_2M) b->base = buddy_reserve(b->map_bytes, HUGE_2M, page);
    if (!b->base) b->base = buddy_reserve(b->map_bytes, page, page);
    if (!b->base) {
        int e = errno;
        size_t len = b->map_bytes;
        buddy_destroy(b);
        return cx_fail(err, CX_ENOMEM, "buddy: cannot reserve %zu bytes: %s", len, strerror(e));
    }
    if (b->region >= HUGE_2M && ((uintptr_t)b->base & (HUGE_2M - 1)) == 0)
        b->hugepages = madvise(b->base, b->map_bytes, MADV_HUGEPAGE) == 0;
    if (numa_node >= 0) {
        int rc = buddy_bind(b->base, b->map_bytes, numa_node);
        if (rc != 0) {
            size_t len = b->map_bytes;
            buddy_destroy(b);
            return cx_fail(err, CX_EIO, "buddy: mbind of %zu bytes to NUMA node %d failed: %s", len, numa_node,
                           strerror(-rc));
        }
    }

    for (int k = 0; k < BUDDY_ORDERS; k++) b->head[k] = NONE;
    b->state[0] = (uint8_t)(ST_HEAD | (unsigned)order);
    list_push(b, order, 0);
    *out = b;
    return 0;
}

/* See buddy.h. Safe on a partly built allocator (used by buddy_new's error paths). */
void buddy_destroy(buddy *b) {
    if (!b) return;
    if (b->base) munmap(b->base, b->map_bytes);
    free(b->state);
    free(b->next);
    free(b->prev);
    free(b);
}

/* Smallest order whose block holds `bytes` (0 < bytes <= region): the number
 * of bits of (bytes-1) / min_block, rounded the way a power of two must be. */
static int buddy_order_for(const buddy *b, size_t bytes) {
    size_t units = (bytes - 1) >> b->min_shift; /* blocks needed, minus one */
    int k = units ? 64 - __builtin_clzll((unsigned long long)units) : 0;
    assert(k <= b->max_order);
    return k;
}

/* See buddy.h. Takes the first block of the smallest non-empty order >= the
 * one needed and splits it down, pushing each upper half on its free list:
 * O(max_order). */
void *buddy_alloc(buddy *b, size_t bytes) {
    if (bytes == 0 || bytes > b->region) {
        b->failed_allocs++;
        return NULL;
    }
    int k = buddy_order_for(b, bytes), j = k;
    while (j <= b->max_order && b->head[j] == NONE) j++;
    if (j > b->max_order) {
        b->failed_allocs++;
        return NULL;
    }
    uint32_t idx = b->head[j];
    assert(b->state[idx] == (ST_HEAD | (unsigned)j));
    list_remove(b, j, idx);
    while (j > k) {
        j--;
        uint32_t upper = idx + ((uint32_t)1 << j);
        assert(b->state[upper] == 0);
        b->state[upper] = (uint8_t)(ST_HEAD | (unsigned)j);
        list_push(b, j, upper);
        b->splits++;
    }
    b->state[idx] = (uint8_t)(ST_HEAD | ST_ALLOC | (unsigned)k);
    b->nused[k]++;
    b->in_use += b->min_block << k;
    if (b->in_use > b->high_water) b->high_water = b->in_use;
    b->allocs++;
    return b->base + ((size_t)idx << b->min_shift);
}

/* Classify p: the min_block index of the live block starting at p, or
 * CX_EINVAL for anything else, with the reason in err (when not NULL). */
static int64_t buddy_lookup(const buddy *b, const void *p, cx_err *err) {
    uintptr_t a = (uintptr_t)p, base = (uintptr_t)b->base;
    if (a < base || a - base >= b->region)
        return cx_fail(err, CX_EINVAL, "buddy_free(%p): not in the region [%p, %p)", p, (void *)b->base,
                       (void *)(b->base + b->region));
    size_t off = a - base;
    if (off & (b->min_block - 1))
        return cx_fail(err, CX_EINVAL, "buddy_free(%p): offset %zu is not on a %zu-byte block boundary", p, off,
                       b->min_block);
    uint32_t idx = (uint32_t)(off >> b->min_shift);
    unsigned s = b->state[idx];
    if (!(s & ST_HEAD)) return cx_fail(err, CX_EINVAL, "buddy_free(%p): points inside a block, not at its start", p);
    if (!(s & ST_ALLOC))
        return cx_fail(err, CX_EINVAL, "buddy_free(%p): double free (the %zu-byte block there is already free)", p,
                       b->min_block << (s & ST_ORDER));
    return idx;
}

/* See buddy.h. Marks the block free, then merges it with its buddy while the
 * buddy is a free block of the same order (index XOR 2^order), climbing one
 * order per merge: O(max_order). */
int buddy_free(buddy *b, void *p) {
    if (!p) return 0;
    cx_err err;
    int64_t found = buddy_lookup(b, p, &err);
    if (found < 0) {
        snprintf(b->last_error, sizeof b->last_error, "%.*s", (int)sizeof b->last_error - 1, err.msg);
        b->bad_frees++;
        return CX_EINVAL;
    }
    uint32_t idx = (uint32_t)found;
    int k = b->state[idx] & ST_ORDER;
    assert(b->nused[k] > 0 && b->in_use >= (b->min_block << k));
    b->nused[k]--;
    b->in_use -= b->min_block << k;
    b->frees++;
    while (k < b->max_order) {
        uint32_t bit = (uint32_t)1 << k, bud = idx ^ bit;
        if (b->state[bud] != (ST_HEAD | (unsigned)k)) break; /* allocated, split, or a different order */
        list_remove(b, k, bud);
        b->state[idx | bit] = 0; /* the upper half's head disappears */
        idx &= ~bit;
        k++;
        b->merges++;
    }
    b->state[idx] = (uint8_t)(ST_HEAD | (unsigned)k);
    list_push(b, k, idx);
    return 0;
}

/* See buddy.h. */
size_t buddy_block_size(const buddy *b, const void *p) {
    int64_t idx = buddy_lookup(b, p, NULL);
    return idx < 0 ? 0 : b->min_block << (b->state[idx] & ST_ORDER);
}

/* See buddy.h. The largest free block is the top non-empty free list, which
 * is exact because coalescing is complete (buddy_check proves it). */
void buddy_stats(const buddy *b, struct buddy_stats *out) {
    memset(out, 0, sizeof *out);
    out->region_bytes = b->region;
    out->min_block = b->min_block;
    out->max_order = b->max_order;
    for (int k = 0; k <= b->max_order; k++) {
        out->used_blocks[k] = b->nused[k];
        out->used_bytes[k] = b->nused[k] * (b->min_block << k);
        out->free_blocks[k] = b->nfree[k];
        if (b->nfree[k]) out->largest_free = b->min_block << k;
    }
    out->bytes_in_use = b->in_use;
    out->free_bytes = b->region - b->in_use;
    out->fragmentation = out->free_bytes ? 1.0 - (double)out->largest_free / (double)out->free_bytes : 0.0;
    out->high_water = b->high_water;
    out->allocs = b->allocs;
    out->frees = b->frees;
    out->failed_allocs = b->failed_allocs;
    out->bad_frees = b->bad_frees;
    out->splits = b->splits;
    out->merges = b->merges;
    out->hugepages = b->hugepages;
    out->numa_node = b->numa_node;
    out->numa_nodes = b->numa_nodes;
}

/* See buddy.h. Three passes: walk the blocks from index 0 by their sizes
 * (tiling, alignment, clear interiors, no mergeable buddies, tallies), walk
 * each free list (membership, links, no cycles, lengths), then compare the
 * tallies with the counters. */
int buddy_check(const buddy *b, cx_err *err) {
    size_t tally_free[BUDDY_ORDERS] = {0}, tally_used[BUDDY_ORDERS] = {0};
    size_t bytes = 0, blocks = 0;
    uint32_t i = 0;
    while (i < b->nblocks) {
        unsigned s = b->state[i];
        int k = (int)(s & ST_ORDER);
        if (!(s & ST_HEAD)) return cx_fail(err, CX_EFORMAT, "buddy_check: min block %u starts no block", i);
        if (k > b->max_order || (i & (((uint32_t)1 << k) - 1)) || (uint64_t)i + ((uint64_t)1 << k) > b->nblocks)
            return cx_fail(err, CX_EFORMAT, "buddy_check: block at %u has order %d: misaligned or past the end", i, k);
        for (uint32_t j = i + 1; j < i + ((uint32_t)1 << k); j++)
            if (b->state[j])
                return cx_fail(err, CX_EFORMAT, "buddy_check: block %u (order %d) overlaps a head at %u", i, k, j);
        if (s & ST_ALLOC) {
            tally_used[k]++;
            bytes += b->min_block << k;
        } else {
            tally_free[k]++;
            uint32_t bud = i ^ ((uint32_t)1 << k);
            if (k < b->max_order && b->state[bud] == (ST_HEAD | (unsigned)k))
                return cx_fail(err, CX_EFORMAT, "buddy_check: free buddies %u and %u (order %d) were not merged", i,
                               bud, k);
        }
        blocks++;
        i += (uint32_t)1 << k;
    }
    for (int k = 0; k < BUDDY_ORDERS; k++) {
        if (k > b->max_order) {
            if (b->head[k] != NONE || b->nfree[k] || b->nused[k])
                return cx_fail(err, CX_EFORMAT, "buddy_check: order %d above the top has blocks", k);
            continue;
        }
        size_t n = 0;
        uint32_t prev = NONE;
        for (uint32_t j = b->head[k]; j != NONE; prev = j, j = b->next[j]) {
            if (j >= b->nblocks || b->state[j] != (ST_HEAD | (unsigned)k))
                return cx_fail(err, CX_EFORMAT, "buddy_check: free list %d holds %u, not a free block of that order",
                               k, j);
            if (b->prev[j] != prev)
                return cx_fail(err, CX_EFORMAT, "buddy_check: free list %d: bad back link at %u", k, j);
            if (++n > tally_free[k])
                return cx_fail(err, CX_EFORMAT, "buddy_check: free list %d is longer than its %zu free blocks (cycle?)",
                               k, tally_free[k]);
        }
        if (n != tally_free[k] || b->nfree[k] != n)
            return cx_fail(err, CX_EFORMAT, "buddy_check: order %d: %zu free blocks, list of %zu, count %zu", k,
                           tally_free[k], n, b->nfree[k]);
        if (b->nused[k] != tally_used[k])
            return cx_fail(err, CX_EFORMAT, "buddy_check: order %d: %zu allocated blocks, count %zu", k, tally_used[k],
                           b->nused[k]);
    }
    size_t live = 0;
    for (int k = 0; k <= b->max_order; k++) live += tally_used[k];
    if (bytes != b->in_use || b->high_water < b->in_use || b->high_water > b->region)
        return cx_fail(err, CX_EFORMAT, "buddy_check: %zu bytes in allocated blocks, in_use %zu, high water %zu", bytes,
                       b->in_use, b->high_water);
    if (b->allocs - b->frees != live)
        return cx_fail(err, CX_EFORMAT, "buddy_check: %zu live blocks but %llu allocs - %llu frees", live,
                       (unsigned long long)b->allocs, (unsigned long long)b->frees);
    /* Every split adds one block and every merge removes one, from one block. */
    if (b->splits - b->merges != blocks - 1)
        return cx_fail(err, CX_EFORMAT, "buddy_check: %zu blocks but %llu splits - %llu merges", blocks,
                       (unsigned long long)b->splits, (unsigned long long)b->merges);
    return 0;
}

/* See buddy.h. */
const char *buddy_last_error(const buddy *b) { return b->last_error; }

/* See buddy.h. */
void *buddy_base(const buddy *b, size_t *bytes) {
    if (bytes) *bytes = b->region;
    return b->base;
}
