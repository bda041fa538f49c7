/*
 * arena.h - a bump allocator over caller-provided memory, for activations and
 * scratch that live for one step.
 *
 * An arena never allocates: it carves aligned pieces out of the buffer it is
 * given (for instance one buddy block) by advancing an offset, and gives them
 * all back at once with arena_reset, or back to a saved point with
 * arena_mark/arena_release (stack order). A request that does not fit returns
 * NULL and is counted; the arena is unchanged by it.
 *
 * Not thread-safe: one arena per thread, or a lock around it.
 */
#ifndef CX_ARENA_H
#define CX_ARENA_H

#include <stddef.h>
#include <stdint.h>

/* Default alignment: a cache line (and an AVX-512 vector). */
#define ARENA_ALIGN 64
/* Page alignment, for buffers that are mapped, bound or handed to the kernel. */
#define ARENA_PAGE_ALIGN 4096

typedef struct arena {
    uint8_t *base;       /* the caller's buffer */
    size_t size;         /* its length */
    size_t used;         /* offset of the first byte not handed out */
    size_t high_water;   /* largest `used` since arena_init (resets included) */
    uint64_t allocs;     /* successful arena_alloc calls */
    uint64_t failed;     /* arena_alloc calls that returned NULL */
} arena;

/* Start an arena over [mem, mem+size); mem may be NULL when size is 0. */
void arena_init(arena *a, void *mem, size_t size);
/* `bytes` aligned to `align` (a power of two; 0 means ARENA_ALIGN), measured
 * on the address, not the offset. A 0-byte request is served as 1 byte, so
 * every success is a distinct pointer. NULL if it does not fit or align is
 * not a power of two. */
void *arena_alloc(arena *a, size_t bytes, size_t align);
/* Give everything back (high_water and the counters are kept). */
void arena_reset(arena *a);
/* The current position, for arena_release. */
size_t arena_mark(const arena *a);
/* Give back everything allocated since `mark` was taken. A mark past the
 * current position (already released) is ignored. */
void arena_release(arena *a, size_t mark);
/* Bytes still free at the end (before any alignment padding). */
size_t arena_remaining(const arena *a);

#endif
