/*
 * arena.c - see arena.h.
 *
 * The whole state is one offset into the buffer; alignment is computed on
 * the absolute address, so a buffer that is itself misaligned still yields
 * aligned pieces (at the cost of some padding).
 */
#include "arena.h"

#include <assert.h>

/* See arena.h. */
void arena_init(arena *a, void *mem, size_t size) {
    assert(mem || size == 0);
    a->base = mem;
    a->size = mem ? size : 0;
    a->used = 0;
    a->high_water = 0;
    a->allocs = 0;
    a->failed = 0;
}

/* See arena.h. Rounds the cursor's address up to `align`, then checks the
 * padded request against what is left without any arithmetic that can wrap. */
void *arena_alloc(arena *a, size_t bytes, size_t align) {
    assert(a->used <= a->size);
    if (align == 0) align = ARENA_ALIGN;
    if (align & (align - 1)) {
        a->failed++;
        return NULL;
    }
    if (bytes == 0) bytes = 1;
    uintptr_t cur = (uintptr_t)a->base + a->used;
    uintptr_t pad = (uintptr_t)(-cur) & (uintptr_t)(align - 1); /* bytes to the next multiple of align */
    size_t left = a->size - a->used;
    if (!a->base || pad > left || bytes > left - pad) {
        a->failed++;
        return NULL;
    }
    uint8_t *p = a->base + a->used + pad;
    a->used += pad + bytes;
    if (a->used > a->high_water) a->high_water = a->used;
    a->allocs++;
    assert(((uintptr_t)p & (align - 1)) == 0 && a->used <= a->size);
    return p;
}

/* See arena.h. */
void arena_reset(arena *a) { a->used = 0; }

/* See arena.h. */
size_t arena_mark(const arena *a) { return a->used; }

/* See arena.h. A mark past the current position was already released (or a
 * reset came in between); moving the cursor forward to it would only leave
 * an unused gap, so such a mark is ignored rather than obeyed. */
void arena_release(arena *a, size_t mark) {
    if (mark <= a->used) a->used = mark;
}

/* See arena.h. */
size_t arena_remaining(const arena *a) { return a->size - a->used; }
