/*
 * test_arena.c - the bump arena: alignment on absolute addresses (also over
 * a misaligned buffer), exhaustion without side effects, reset,
 * mark/release in stack order, high-water mark and failure counts, and an
 * arena carved out of one buddy block.
 */
#include <stdint.h>
#include <string.h>

#include "arena.h"
#include "buddy.h"
#include "testing.h"

/* 64 KiB, page aligned, so offsets and addresses can both be reasoned about. */
static _Alignas(4096) uint8_t g_buf[64 << 10];

/* Alignment: default 64, explicit 4096 and every power of two up to 4096, all
 * measured on the address, including over a buffer that starts at an odd
 * address. A non-power-of-two alignment is refused. */
static void test_alignment(void) {
    arena a;
    arena_init(&a, g_buf, sizeof g_buf);
    uint8_t *p = arena_alloc(&a, 1, 0);
    uint8_t *q = arena_alloc(&a, 1, 0);
    CHECK(p == g_buf && q == g_buf + 64, "default alignment 64: %p %p", (void *)p, (void *)q);
    uint8_t *r = arena_alloc(&a, 100, ARENA_PAGE_ALIGN);
    CHECK(r == g_buf + 4096 && arena_mark(&a) == 4196, "page alignment: offset %td", r - g_buf);
    int ok = 1;
    for (size_t al = 1; al <= 4096; al *= 2) {
        uint8_t *s = arena_alloc(&a, 3, al);
        ok &= s && ((uintptr_t)s & (al - 1)) == 0;
    }
    CHECK(ok, "every power-of-two alignment");
    CHECK(arena_alloc(&a, 8, 48) == NULL && a.failed == 1, "alignment 48 refused");

    arena odd; /* a buffer starting 3 bytes past a page boundary */
    arena_init(&odd, g_buf + 3, 8192);
    uint8_t *t = arena_alloc(&odd, 10, 0);
    CHECK(t == g_buf + 64 && arena_mark(&odd) == 61 + 10, "misaligned base: %td, used %zu", t - g_buf,
          arena_mark(&odd));
    t = arena_alloc(&odd, 1, 4096);
    CHECK(t == g_buf + 4096, "misaligned base, page alignment: %td", t - g_buf);
    uint8_t *z1 = arena_alloc(&odd, 0, 1), *z2 = arena_alloc(&odd, 0, 1);
    CHECK(z1 && z2 && z1 != z2, "0-byte requests get distinct pointers");
}

/* Exhaustion: the exact fit succeeds, one byte more fails, the failure
 * changes nothing; padding counts against the space. */
static void test_exhaustion(void) {
    arena a;
    arena_init(&a, g_buf, 4096);
    CHECK(arena_alloc(&a, 4000, 0) == g_buf, "first");
    CHECK(arena_alloc(&a, 65, 0) == NULL && arena_mark(&a) == 4000 && a.failed == 1, "65 at 4032 needs 4097");
    CHECK(arena_alloc(&a, 64, 0) == g_buf + 4032 && arena_remaining(&a) == 0, "exact fit at 4032");
    CHECK(arena_alloc(&a, 1, 1) == NULL && a.failed == 2 && a.allocs == 2, "full");
    CHECK(arena_alloc(&a, SIZE_MAX, 0) == NULL && arena_alloc(&a, SIZE_MAX - 100, 4096) == NULL && a.failed == 4,
          "huge requests do not wrap");
    arena e;
    arena_init(&e, NULL, 0);
    CHECK(arena_alloc(&e, 1, 0) == NULL && e.failed == 1, "empty arena");
}

/* Reset gives everything back and the same addresses come out again; the
 * high-water mark survives resets. */
static void test_reset_high_water(void) {
    arena a;
    arena_init(&a, g_buf, sizeof g_buf);
    uint8_t *first = NULL;
    for (int step = 0; step < 5; step++) {
        uint8_t *p = arena_alloc(&a, 1000 * (size_t)(step + 1), 0);
        arena_alloc(&a, 10, 0);
        if (step == 0) first = p;
        CHECK(p == first, "step %d starts at the base", step);
        arena_reset(&a);
        CHECK(arena_mark(&a) == 0, "reset");
    }
    CHECK(a.high_water == 5056 + 10, "high water %zu (step 4: 5000, padded to 5056, then 10)", a.high_water);
    CHECK(a.allocs == 10 && a.failed == 0, "counts");
}

/* mark/release nest like a stack: releasing to a mark frees what came after
 * it, keeps what came before, and the next allocation reuses the space. A
 * stale mark (past the cursor) is ignored. */
static void test_mark_release(void) {
    arena a;
    arena_init(&a, g_buf, sizeof g_buf);
    uint8_t *keep = arena_alloc(&a, 100, 0);
    memset(keep, 0xaa, 100);
    size_t m1 = arena_mark(&a);
    uint8_t *x = arena_alloc(&a, 500, 0);
    size_t m2 = arena_mark(&a);
    arena_alloc(&a, 700, 4096);
    arena_release(&a, m2);
    CHECK(arena_mark(&a) == m2, "inner release");
    arena_release(&a, m1);
    CHECK(arena_mark(&a) == m1, "outer release");
    uint8_t *y = arena_alloc(&a, 500, 0);
    CHECK(y == x, "space reused after release");
    arena_release(&a, m1);
    arena_release(&a, m2); /* stale: past the cursor */
    CHECK(arena_mark(&a) == m1, "stale mark ignored: %zu", arena_mark(&a));
    int intact = 1;
    for (int i = 0; i < 100; i++) intact &= keep[i] == 0xaa;
    CHECK(intact, "data before the mark untouched");
    CHECK(a.high_water == 4096 + 700, "high water across releases: %zu", a.high_water);
}

/* An arena over one buddy block, as the engine will use it per step. */
static void test_over_buddy(void) {
    buddy *b;
    cx_err err = {0};
    CHECK(buddy_new(1 << 20, 4096, -1, &b, &err) == 0, "%s", err.msg);
    size_t size = 256 << 10;
    void *blk = buddy_alloc(b, size);
    arena a;
    arena_init(&a, blk, size);
    int n = 0;
    while (arena_alloc(&a, 1000, 0)) n++;
    CHECK(n == (int)(size / 1024), "%d 1000-byte pieces at 64-byte alignment in 256 KiB", n);
    arena_reset(&a);
    CHECK(arena_alloc(&a, size, ARENA_PAGE_ALIGN) == blk, "whole block, page aligned");
    CHECK(buddy_free(b, blk) == 0 && buddy_check(b, &err) == 0, "%s", err.msg);
    buddy_destroy(b);
}

TEST_MAIN({
    test_alignment();
    test_exhaustion();
    test_reset_high_water();
    test_mark_release();
    test_over_buddy();
})
