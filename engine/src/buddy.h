/*
 * buddy.h - a binary buddy allocator over one reserved, page-aligned region.
 *
 * The region holds min_block << max_order bytes. A block of order k is
 * min_block << k bytes and starts at an offset that is a multiple of its
 * size, so its buddy is at (offset XOR size). Allocation takes the smallest
 * free block of a sufficient order and splits it down; freeing merges the
 * block with its buddy for as long as the buddy is free and whole. Both are
 * O(max_order) = O(log n).
 *
 * All bookkeeping lives outside the region (one state byte and two list links
 * per min_block), so the allocator never touches the memory it hands out,
 * writes after free cannot corrupt it, and buddy_free needs no size: invalid
 * and double frees are detected and refused with an error.
 *
 * Not thread-safe: one allocator per thread, or a lock around it.
 * See docs/memory.md for the design and what the tests prove.
 */
#ifndef CX_BUDDY_H
#define CX_BUDDY_H

#include <stddef.h>
#include <stdint.h>

#include "cortex.h"

/* Orders 0..BUDDY_MAX_ORDER: min_block indices must fit in 31 bits. The
 * region is also limited to BUDDY_MAX_REGION bytes. */
#define BUDDY_MAX_ORDER 31
#define BUDDY_ORDERS (BUDDY_MAX_ORDER + 1)
#define BUDDY_MAX_REGION ((size_t)1 << 46)
/* Smallest min_block: not needed by the side-table design, but smaller
 * blocks are never useful and keep the state array small. */
#define BUDDY_MIN_BLOCK 16

typedef struct buddy buddy;

/* A snapshot of the allocator. "In use" counts whole blocks (the rounded-up
 * size), not the bytes requested. Arrays are indexed by order; entries above
 * max_order are zero. (A struct tag, not a typedef: buddy_stats is the
 * function that fills it.) */
struct buddy_stats {
    size_t region_bytes;                 /* min_block << max_order */
    size_t min_block;
    int max_order;
    size_t used_bytes[BUDDY_ORDERS];     /* bytes in allocated blocks of each order */
    size_t used_blocks[BUDDY_ORDERS];    /* allocated blocks of each order */
    size_t free_blocks[BUDDY_ORDERS];    /* free blocks of each order (the free lists' lengths) */
    size_t bytes_in_use;                 /* sum of used_bytes */
    size_t free_bytes;                   /* region_bytes - bytes_in_use */
    size_t largest_free;                 /* size of the largest free block, 0 if none */
    double fragmentation;                /* 1 - largest_free / free_bytes; 0 when nothing is free */
    size_t high_water;                   /* largest bytes_in_use ever seen */
    uint64_t allocs, frees;              /* successful calls */
    uint64_t failed_allocs;              /* buddy_alloc calls that returned NULL */
    uint64_t bad_frees;                  /* buddy_free calls refused (double, foreign, interior) */
    uint64_t splits, merges;             /* block splits on alloc, buddy merges on free */
    int hugepages;                       /* 1 if MADV_HUGEPAGE was applied to the region */
    int numa_node;                       /* node the region is bound to, -1 if none */
    int numa_nodes;                      /* buddy_numa_nodes() at creation */
};

/*
 * Reserve a region of at least `bytes` (rounded up to min_block times a power
 * of two) and make it one free block. min_block must be a power of two
 * >= BUDDY_MIN_BLOCK. The region is aligned to its own size where the address
 * space allows (at least to 2 MiB when it is >= 2 MiB, where MADV_HUGEPAGE is
 * also requested). numa_node >= 0 binds the region to that node with
 * mbind(MPOL_BIND); -1 leaves the default policy. Returns 0 or a CX_E* code
 * with a message in err.
 */
int buddy_new(size_t bytes, size_t min_block, int numa_node, buddy **out, cx_err *err);
/* Unmap the region and free the bookkeeping; live blocks become invalid.
 * NULL is a no-op. */
void buddy_destroy(buddy *b);

/* A block of at least `bytes`, aligned to its block size; NULL if bytes is 0,
 * larger than the region, or no free block is large enough. */
void *buddy_alloc(buddy *b, size_t bytes);
/* Give back a block from buddy_alloc; returns 0. NULL is a no-op. Anything
 * else that is not the start of a live block (double free, interior or
 * foreign pointer) is refused: CX_EINVAL, a message in buddy_last_error, and
 * no change but the bad_frees count. */
int buddy_free(buddy *b, void *p);
/* The usable size of the live block at p (its block size), 0 if p is not one. */
size_t buddy_block_size(const buddy *b, const void *p);

/* Fill *out; O(max_order). */
void buddy_stats(const buddy *b, struct buddy_stats *out);
/* Full consistency check, O(region / min_block): the blocks tile the region
 * exactly, every free block is on the list of its order and nothing else is,
 * list links are consistent, no two free buddies are left unmerged, and the
 * counters agree with the blocks. Returns 0, or CX_EFORMAT with the first
 * violation in err. For tests and fuzzing. */
int buddy_check(const buddy *b, cx_err *err);

/* The message of the last refused buddy_free ("" if none). */
const char *buddy_last_error(const buddy *b);
/* Start and size of the region (for tests and for binding other views). */
void *buddy_base(const buddy *b, size_t *bytes);

/* NUMA nodes the kernel reports (/sys/devices/system/node/nodeN entries);
 * 0 if that directory is absent (no NUMA support compiled into the kernel). */
int buddy_numa_nodes(void);

#endif
