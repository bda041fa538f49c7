/*
 * test_buddy.c - the buddy allocator against an independent model of its
 * state.
 *
 * The model knows nothing of free lists. It keeps the live allocations, an
 * owner map (which allocation covers each min_block: catches any overlap),
 * and, per order k, how many live allocations of order <= k lie inside each
 * aligned order-k block. From that alone it derives what a fully coalescing
 * buddy allocator must report: with E(k) the number of empty order-k blocks,
 * the free blocks of order k are E(k) - 2 E(k+1) (an empty block is either
 * maximal or one of the two halves of an empty parent), the largest free
 * block is the top order with E(k) > 0, an allocation of order j succeeds iff
 * some order >= j has a free block and then splits exactly (that order - j)
 * times, and a free merges once per empty ancestor. Every field of
 * buddy_stats is compared with the model after every operation, and
 * buddy_check (the allocator's own full consistency check) runs throughout.
 * Every byte of every block is written with a pattern at allocation and
 * verified at free.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "buddy.h"
#include "testing.h"
#include "cortex_tools.h"

/* splitmix64: a small, good, seedable generator. */
static uint64_t rng_next(uint64_t *s) { return cx_splitmix64(s); }

/* Uniform in [0, n), n > 0 (the tiny modulo bias is irrelevant here). */
static uint64_t rng_below(uint64_t *s, uint64_t n) { return rng_next(s) % n; }

typedef struct live {
    uint8_t *p;
    size_t bytes; /* block size */
    int order;
    uint8_t pat;
} live;

typedef struct model {
    buddy *b;
    uint8_t *base;
    size_t region, min_block;
    int shift, max_order;
    uint32_t nblocks;
    live *v;                            /* live allocations, unordered */
    size_t n;
    uint32_t *owner;                    /* per min_block: index into v + 1, or 0 */
    uint32_t *occ[BUDDY_ORDERS];        /* per order-k block: live allocations of order <= k inside */
    size_t nonempty[BUDDY_ORDERS];      /* order-k blocks holding any allocated byte */
    size_t used_blocks[BUDDY_ORDERS];
    size_t in_use, high_water;
    uint64_t allocs, frees, failed, bad, splits, merges;
    uint8_t *last_freed;                /* for double-free attempts */
    uint64_t errors;
    char first[512];
} model;

/* Record a model violation; keep the first message for the report. */
static void m_fail(model *m, const char *what, long long got, long long want) {
    if (m->errors++ == 0) snprintf(m->first, sizeof m->first, "%s: allocator %lld, model %lld", what, got, want);
}

/* Build an allocator and an empty model of it. */
static int m_init(model *m, size_t bytes, size_t min_block) {
    memset(m, 0, sizeof *m);
    cx_err err = {0};
    if (buddy_new(bytes, min_block, -1, &m->b, &err) != 0) {
        fprintf(stderr, "buddy_new: %s\n", err.msg);
        return -1;
    }
    m->base = buddy_base(m->b, &m->region);
    m->min_block = min_block;
    m->shift = __builtin_ctzll(min_block);
    m->nblocks = (uint32_t)(m->region / min_block);
    m->max_order = __builtin_ctz(m->nblocks);
    m->v = calloc(m->nblocks, sizeof *m->v);
    m->owner = calloc(m->nblocks, sizeof *m->owner);
    for (int k = 0; k <= m->max_order; k++) m->occ[k] = calloc(m->nblocks >> k, sizeof *m->occ[k]);
    return 0;
}

/* Tear down allocator and model. */
static void m_done(model *m) {
    buddy_destroy(m->b);
    free(m->v);
    free(m->owner);
    for (int k = 0; k <= m->max_order; k++) free(m->occ[k]);
}

/* Empty order-k blocks according to the model. */
static size_t m_empty(const model *m, int k) { return (m->nblocks >> k) - m->nonempty[k]; }

/* Free blocks of order k that a fully coalesced allocator must have. */
static size_t m_free_blocks(const model *m, int k) {
    return k == m->max_order ? m_empty(m, k) : m_empty(m, k) - 2 * m_empty(m, k + 1);
}

/* Add (+1) or remove (-1) an allocation of order j at min_block idx in the
 * occupancy counts; returns the orders climbed by the merge a removal causes. */
static int m_occupy(model *m, uint32_t idx, int j, int delta) {
    for (int k = 0; k < j; k++) /* the allocation covers all its sub-blocks */
        m->nonempty[k] = delta > 0 ? m->nonempty[k] + ((size_t)1 << (j - k)) : m->nonempty[k] - ((size_t)1 << (j - k));
    for (int k = j; k <= m->max_order; k++) {
        uint32_t *c = &m->occ[k][idx >> k];
        if (delta > 0 && (*c)++ == 0) m->nonempty[k]++;
        if (delta < 0 && --(*c) == 0) m->nonempty[k]--;
    }
    int climbed = 0;
    if (delta < 0)
        while (j + climbed < m->max_order && m->occ[j + climbed + 1][idx >> (j + climbed + 1)] == 0) climbed++;
    return climbed;
}

/* Compare every statistic with the model. */
static void m_compare(model *m) {
    struct buddy_stats s;
    buddy_stats(m->b, &s);
    size_t largest = 0, free_bytes = m->region - m->in_use;
    for (int k = 0; k < BUDDY_ORDERS; k++) {
        size_t ub = k <= m->max_order ? m->used_blocks[k] : 0, fb = k <= m->max_order ? m_free_blocks(m, k) : 0;
        if (s.used_blocks[k] != ub) m_fail(m, "used_blocks", (long long)s.used_blocks[k], (long long)ub);
        if (s.used_bytes[k] != ub * (m->min_block << (k <= m->max_order ? k : 0)))
            m_fail(m, "used_bytes", (long long)s.used_bytes[k], (long long)(ub * (m->min_block << k)));
        if (s.free_blocks[k] != fb) m_fail(m, "free_blocks", (long long)s.free_blocks[k], (long long)fb);
        if (fb) largest = m->min_block << k;
    }
    double frag = free_bytes ? 1.0 - (double)largest / (double)free_bytes : 0.0;
    if (s.bytes_in_use != m->in_use) m_fail(m, "bytes_in_use", (long long)s.bytes_in_use, (long long)m->in_use);
    if (s.free_bytes != free_bytes) m_fail(m, "free_bytes", (long long)s.free_bytes, (long long)free_bytes);
    if (s.largest_free != largest) m_fail(m, "largest_free", (long long)s.largest_free, (long long)largest);
    if (s.fragmentation != frag)
        m_fail(m, "fragmentation x1e9", (long long)(s.fragmentation * 1e9), (long long)(frag * 1e9));
    if (s.high_water != m->high_water) m_fail(m, "high_water", (long long)s.high_water, (long long)m->high_water);
    if (s.allocs != m->allocs) m_fail(m, "allocs", (long long)s.allocs, (long long)m->allocs);
    if (s.frees != m->frees) m_fail(m, "frees", (long long)s.frees, (long long)m->frees);
    if (s.failed_allocs != m->failed) m_fail(m, "failed_allocs", (long long)s.failed_allocs, (long long)m->failed);
    if (s.bad_frees != m->bad) m_fail(m, "bad_frees", (long long)s.bad_frees, (long long)m->bad);
    if (s.splits != m->splits) m_fail(m, "splits", (long long)s.splits, (long long)m->splits);
    if (s.merges != m->merges) m_fail(m, "merges", (long long)s.merges, (long long)m->merges);
    if (s.region_bytes != m->region || s.max_order != m->max_order || s.min_block != m->min_block)
        m_fail(m, "geometry", (long long)s.region_bytes, (long long)m->region);
}

/* Run buddy_check; a failure is a model violation too. */
static void m_check(model *m) {
    cx_err err = {0};
    if (buddy_check(m->b, &err) != 0 && m->errors++ == 0) snprintf(m->first, sizeof m->first, "%s", err.msg);
}

/* Allocate `bytes` and hold the result to the model: NULL exactly when no
 * free block of a sufficient order exists; otherwise a block of the right
 * order, aligned to its size, over min_blocks no live block owns, split the
 * predicted number of times. The whole block is then filled with a pattern. */
static void m_alloc(model *m, size_t bytes, uint64_t *rng) {
    int j = -1;
    if (bytes > 0 && bytes <= m->region) {
        j = 0;
        while ((m->min_block << j) < bytes) j++;
    }
    int from = -1;
    for (int k = j < 0 ? m->max_order + 1 : j; k <= m->max_order && from < 0; k++)
        if (m_free_blocks(m, k)) from = k;
    uint8_t *p = buddy_alloc(m->b, bytes);
    if (from < 0) {
        if (p) m_fail(m, "alloc should fail, got offset", (long long)(p - m->base), -1);
        m->failed++;
        return;
    }
    if (!p) {
        m_fail(m, "alloc failed; free block of order", -1, from);
        m->failed++;
        return;
    }
    size_t size = m->min_block << j;
    size_t off = (size_t)(p - m->base);
    if (p < m->base || off >= m->region || size > m->region - off) {
        m_fail(m, "block outside the region at offset", (long long)off, 0);
        return;
    }
    if (((uintptr_t)p & (size - 1)) != 0)
        m_fail(m, "block misaligned, address mod size", (long long)((uintptr_t)p & (size - 1)), 0);
    if (buddy_block_size(m->b, p) != size)
        m_fail(m, "buddy_block_size", (long long)buddy_block_size(m->b, p), (long long)size);
    uint32_t idx = (uint32_t)(off >> m->shift);
    for (uint32_t i = idx; i < idx + (uint32_t)(size >> m->shift); i++)
        if (m->owner[i]) {
            m_fail(m, "overlap with live block at min_block", (long long)i, 0);
            return;
        }
    live *l = &m->v[m->n];
    l->p = p;
    l->bytes = size;
    l->order = j;
    l->pat = (uint8_t)(rng_next(rng) | 1);
    memset(p, l->pat, size);
    for (uint32_t i = idx; i < idx + (uint32_t)(size >> m->shift); i++) m->owner[i] = (uint32_t)m->n + 1;
    m->n++;
    m_occupy(m, idx, j, +1);
    m->used_blocks[j]++;
    m->in_use += size;
    if (m->in_use > m->high_water) m->high_water = m->in_use;
    m->allocs++;
    m->splits += (uint64_t)(from - j);
}

/* Free live allocation i: verify its pattern byte for byte, predict the
 * merges, release its min_blocks in the owner map. */
static void m_free(model *m, size_t i) {
    live l = m->v[i];
    static uint8_t want[4096];
    memset(want, l.pat, sizeof want);
    for (size_t t = 0; t < l.bytes; t += sizeof want) {
        size_t len = l.bytes - t < sizeof want ? l.bytes - t : sizeof want;
        if (memcmp(l.p + t, want, len) != 0) {
            m_fail(m, "pattern damaged in the chunk at byte", (long long)t, l.pat);
            break;
        }
    }
    uint32_t idx = (uint32_t)((size_t)(l.p - m->base) >> m->shift);
    int rc = buddy_free(m->b, l.p);
    if (rc != 0) {
        m_fail(m, buddy_last_error(m->b), rc, 0);
        return;
    }
    m->v[i] = m->v[m->n - 1];
    m->n--;
    if (i < m->n) { /* the moved entry's min_blocks now point to slot i */
        uint32_t mi = (uint32_t)((size_t)(m->v[i].p - m->base) >> m->shift);
        for (uint32_t t = mi; t < mi + (uint32_t)(m->v[i].bytes >> m->shift); t++) m->owner[t] = (uint32_t)i + 1;
    }
    for (uint32_t t = idx; t < idx + (uint32_t)(l.bytes >> m->shift); t++) m->owner[t] = 0;
    m->merges += (uint64_t)m_occupy(m, idx, l.order, -1);
    m->used_blocks[l.order]--;
    m->in_use -= l.bytes;
    m->frees++;
    m->last_freed = l.p;
}

/* Try a free that must be refused: a double free, an interior pointer, or a
 * pointer outside the region. Nothing may change but bad_frees. */
static void m_bad_free(model *m, uint64_t *rng) {
    uint8_t *p = NULL;
    switch (rng_below(rng, 4)) {
    case 0: /* double free, unless that address has been handed out again */
        p = m->last_freed;
        if (p) {
            uint32_t o = m->owner[(size_t)(p - m->base) >> m->shift];
            if (o && m->v[o - 1].p == p) p = NULL;
        }
        break;
    case 1: /* inside a live block: one min_block in, or one byte in */
        if (m->n) {
            live *l = &m->v[rng_below(rng, m->n)];
            if (l->bytes > m->min_block && (rng_next(rng) & 1)) p = l->p + m->min_block;
            else p = l->p + 1 + rng_below(rng, l->bytes - 1);
        }
        break;
    case 2: p = m->base + m->region; break;
    default: p = m->base - 4096; break;
    }
    if (!p) return;
    int rc = buddy_free(m->b, p);
    if (rc != CX_EINVAL) m_fail(m, "bad free not refused, rc", rc, CX_EINVAL);
    if (!buddy_last_error(m->b)[0]) m_fail(m, "bad free without a message", 0, 1);
    m->bad++;
}

/* The largest order whose blocks are at most `bytes` (at least 0). */
static int order_upto(const model *m, size_t bytes) {
    int k = 0;
    while (k < m->max_order && (m->min_block << (k + 1)) <= bytes) k++;
    return k;
}

/* A request size: 70% blocks up to 4 KiB, 27% up to 128 KiB, 3% anything up
 * to the whole region (the order uniform within each class); uniform within
 * the order's (half, full] range. */
static size_t pick_size(const model *m, uint64_t *rng) {
    uint64_t r = rng_below(rng, 1000);
    int k;
    if (r < 700) k = (int)rng_below(rng, (uint64_t)order_upto(m, 4096) + 1);
    else if (r < 970) k = (int)rng_below(rng, (uint64_t)order_upto(m, 128 << 10) + 1);
    else k = (int)rng_below(rng, (uint64_t)m->max_order + 1);
    size_t hi = m->min_block << k, lo = k ? hi / 2 + 1 : 1;
    return lo + (size_t)rng_below(rng, hi - lo + 1);
}

/* The randomized stress run: `ops` operations from `seed`, phases that fill
 * (70% allocs) and drain (35%), occasional invalid requests and frees, stats
 * compared after every operation, buddy_check every `check_every`. Then
 * everything is freed and the region must be one block again. */
static void stress(uint64_t seed, size_t bytes, size_t min_block, long ops, int check_every) {
    model m;
    if (m_init(&m, bytes, min_block) != 0) {
        CHECK(0, "seed %llu: buddy_new failed", (unsigned long long)seed);
        return;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t rng = seed;
    long done = 0, n_alloc = 0, n_null = 0, n_invalid = 0, n_free = 0, n_bad = 0;
    size_t peak_live = 0;
    for (long op = 0; op < ops; op++) {
        int filling = (op / 5000) % 2 == 0;
        uint64_t r = rng_below(&rng, 1000);
        if (r < 8) {
            m_bad_free(&m, &rng);
            n_bad++;
        } else if (r < 12) {
            m_alloc(&m, rng_next(&rng) & 1 ? 0 : m.region + 1 + rng_below(&rng, 1000), &rng);
            n_invalid++;
        } else if (r < (filling ? 700u : 350u) || m.n == 0) {
            uint64_t f0 = m.failed;
            m_alloc(&m, pick_size(&m, &rng), &rng);
            n_alloc++;
            n_null += m.failed > f0;
        } else {
            m_free(&m, (size_t)rng_below(&rng, m.n));
            n_free++;
        }
        if (m.n > peak_live) peak_live = m.n;
        done++;
        m_compare(&m);
        if (op % check_every == 0) m_check(&m);
        if (m.errors) {
            fprintf(stderr, "seed %llu: violation at op %ld\n", (unsigned long long)seed, op);
            break;
        }
    }
    m_check(&m);
    while (m.n && !m.errors) { /* drain in random order */
        m_free(&m, (size_t)rng_below(&rng, m.n));
        m_compare(&m);
        if (m.n % 64 == 0) m_check(&m);
    }
    struct buddy_stats s;
    buddy_stats(m.b, &s);
    CHECK(m.errors == 0, "seed %llu: %llu violations; first: %s", (unsigned long long)seed,
          (unsigned long long)m.errors, m.first);
    CHECK(s.bytes_in_use == 0 && s.free_blocks[m.max_order] == 1 && s.largest_free == m.region &&
              s.fragmentation == 0.0,
          "seed %llu: not one free block at the end (in use %zu, largest %zu)", (unsigned long long)seed,
          s.bytes_in_use, s.largest_free);
    size_t other = 0;
    for (int k = 0; k < m.max_order; k++) other += s.free_blocks[k];
    CHECK(other == 0, "seed %llu: %zu free blocks below the top order", (unsigned long long)seed, other);
    CHECK(s.merges == s.splits && s.splits > 0, "seed %llu: %llu splits, %llu merges", (unsigned long long)seed,
          (unsigned long long)s.splits, (unsigned long long)s.merges);
    CHECK(n_null > 0 && s.failed_allocs == m.failed && m.failed == (uint64_t)(n_null + n_invalid),
          "seed %llu: exhaustion never reached (%ld NULLs)", (unsigned long long)seed, n_null);
    CHECK(s.bad_frees == m.bad && m.bad > 0, "seed %llu: %llu bad frees", (unsigned long long)seed,
          (unsigned long long)s.bad_frees);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("stress seed %llu: %zu bytes / %zu: %ld ops (%ld allocs, %ld NULL, %ld 0/oversize, %ld frees, "
           "%ld bad frees), peak %zu live, %llu splits, high water %zu, %.2f s\n",
           (unsigned long long)seed, m.region, min_block, done, n_alloc, n_null, n_invalid, n_free, n_bad, peak_live,
           (unsigned long long)s.splits, s.high_water,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    m_done(&m);
}

/* Arguments buddy_new must refuse, each with its code. */
static void test_bad_args(void) {
    buddy *b = (buddy *)1;
    cx_err err = {0};
    CHECK(buddy_new(4096, 0, -1, &b, &err) == CX_EINVAL && b == NULL, "min_block 0: %s", err.msg);
    CHECK(buddy_new(4096, 24, -1, &b, &err) == CX_EINVAL, "min_block 24: %s", err.msg);
    CHECK(buddy_new(4096, 8, -1, &b, &err) == CX_EINVAL, "min_block 8: %s", err.msg);
    CHECK(buddy_new(0, 64, -1, &b, &err) == CX_EINVAL, "0 bytes: %s", err.msg);
    CHECK(buddy_new((size_t)1 << 50, 4096, -1, &b, &err) == CX_ERANGE, "2^50 bytes: %s", err.msg);
    CHECK(buddy_new((size_t)1 << 40, 16, -1, &b, &err) == CX_ERANGE, "order > 31: %s", err.msg);
    CHECK(buddy_new(4096, 64, -2, &b, &err) == CX_EINVAL, "node -2: %s", err.msg);
    buddy_destroy(NULL);
}

/* Rounding, alignment and huge-page advice of the region. */
static void test_geometry(void) {
    buddy *b;
    cx_err err = {0};
    struct buddy_stats s;
    CHECK(buddy_new(5u << 20, 4096, -1, &b, &err) == 0, "%s", err.msg);
    buddy_stats(b, &s);
    size_t bytes;
    uint8_t *base = buddy_base(b, &bytes);
    CHECK(s.region_bytes == 8u << 20 && bytes == s.region_bytes && s.max_order == 11, "5 MiB -> %zu, order %d",
          s.region_bytes, s.max_order);
    CHECK(((uintptr_t)base & ((2u << 20) - 1)) == 0, "region of 8 MiB not 2 MiB aligned: %p", (void *)base);
    if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) == 0)
        CHECK(s.hugepages == 1, "MADV_HUGEPAGE not applied to an 8 MiB region");
    CHECK(s.numa_node == -1 && s.free_blocks[11] == 1 && s.fragmentation == 0.0, "fresh allocator stats");
    uint8_t *p = buddy_alloc(b, 8u << 20);
    CHECK(p == base, "the top-order block is the region");
    memset(p, 0x5a, 8u << 20); /* every byte is writable */
    CHECK(buddy_free(b, p) == 0 && buddy_check(b, &err) == 0, "%s", err.msg);
    buddy_destroy(b);

    CHECK(buddy_new(1000, 64, -1, &b, &err) == 0, "%s", err.msg);
    buddy_stats(b, &s);
    CHECK(s.region_bytes == 1024 && s.max_order == 4 && s.hugepages == 0, "1000 B -> %zu", s.region_bytes);
    CHECK(buddy_alloc(b, 1) != NULL && buddy_alloc(b, 64) != NULL && buddy_alloc(b, 65) != NULL, "small allocs");
    buddy_stats(b, &s);
    CHECK(s.used_blocks[0] == 2 && s.used_blocks[1] == 1 && s.bytes_in_use == 256, "rounding: %zu in use",
          s.bytes_in_use);
    buddy_destroy(b);
}

/* Fill with min blocks until NULL, then with the top block; requests of 0 or
 * more than the region fail; the allocator stays consistent throughout. */
static void test_exhaustion(void) {
    buddy *b;
    cx_err err = {0};
    CHECK(buddy_new(64 << 10, 64, -1, &b, &err) == 0, "%s", err.msg);
    static void *ptrs[1024];
    int n = 0;
    while (n < 1025) {
        void *p = buddy_alloc(b, 64);
        if (!p) break;
        ptrs[n++] = p;
    }
    CHECK(n == 1024, "%d min blocks from a 1024-block region", n);
    CHECK(buddy_alloc(b, 1) == NULL && buddy_check(b, &err) == 0, "full: %s", err.msg);
    struct buddy_stats s;
    buddy_stats(b, &s);
    CHECK(s.free_bytes == 0 && s.largest_free == 0 && s.fragmentation == 0.0 && s.failed_allocs == 2,
          "full stats: free %zu, failed %llu", s.free_bytes, (unsigned long long)s.failed_allocs);
    uint64_t rng = 7;
    for (int i = n - 1; i > 0; i--) { /* free in shuffled order */
        int j = (int)rng_below(&rng, (uint64_t)i + 1);
        void *t = ptrs[i];
        ptrs[i] = ptrs[j];
        ptrs[j] = t;
    }
    int bad = 0;
    for (int i = 0; i < n; i++) bad += buddy_free(b, ptrs[i]) != 0;
    buddy_stats(b, &s);
    CHECK(bad == 0 && s.free_blocks[10] == 1 && s.merges == s.splits && s.splits == 1023,
          "after freeing all: %d bad, %llu splits, %llu merges", bad, (unsigned long long)s.splits,
          (unsigned long long)s.merges);
    void *top = buddy_alloc(b, 64 << 10);
    CHECK(top != NULL && buddy_alloc(b, 1) == NULL, "top block, then nothing");
    CHECK(buddy_alloc(b, 0) == NULL && buddy_alloc(b, (64 << 10) + 1) == NULL && buddy_alloc(b, SIZE_MAX) == NULL,
          "0 and oversize requests");
    buddy_stats(b, &s);
    CHECK(s.failed_allocs == 6 && s.high_water == 64 << 10, "failed %llu, high water %zu",
          (unsigned long long)s.failed_allocs, s.high_water);
    CHECK(buddy_free(b, top) == 0 && buddy_check(b, &err) == 0, "%s", err.msg);
    buddy_destroy(b);
}

/* Double, interior, misaligned and foreign frees are refused with a message
 * and change nothing; buddy_free(NULL) is a no-op. */
static void test_bad_frees(void) {
    buddy *b;
    cx_err err = {0};
    CHECK(buddy_new(4096, 64, -1, &b, &err) == 0, "%s", err.msg);
    uint8_t *p = buddy_alloc(b, 256), *q = buddy_alloc(b, 64);
    int local;
    struct buddy_stats before, after;
    buddy_stats(b, &before);
    CHECK(buddy_free(b, p + 64) == CX_EINVAL && strstr(buddy_last_error(b), "inside"), "interior: %s",
          buddy_last_error(b));
    CHECK(buddy_free(b, p + 1) == CX_EINVAL && strstr(buddy_last_error(b), "boundary"), "misaligned: %s",
          buddy_last_error(b));
    CHECK(buddy_free(b, &local) == CX_EINVAL && strstr(buddy_last_error(b), "not in the region"), "foreign: %s",
          buddy_last_error(b));
    CHECK(buddy_free(b, p + 4096) == CX_EINVAL, "one past the end");
    CHECK(buddy_free(b, NULL) == 0, "free(NULL)");
    CHECK(buddy_block_size(b, p) == 256 && buddy_block_size(b, p + 64) == 0 && buddy_block_size(b, &local) == 0,
          "block sizes");
    buddy_stats(b, &after);
    CHECK(after.bad_frees == 4 && after.bytes_in_use == before.bytes_in_use && after.splits == before.splits,
          "refused frees changed the state");
    CHECK(buddy_free(b, q) == 0, "free q");
    CHECK(buddy_free(b, q) == CX_EINVAL && strstr(buddy_last_error(b), "double free"), "double free: %s",
          buddy_last_error(b));
    CHECK(buddy_check(b, &err) == 0, "%s", err.msg);
    CHECK(buddy_free(b, p) == 0 && buddy_free(b, p) == CX_EINVAL, "double free after merge");
    buddy_stats(b, &after);
    CHECK(after.bytes_in_use == 0 && after.free_blocks[6] == 1 && after.bad_frees == 6, "end state");
    CHECK(buddy_check(b, &err) == 0, "%s", err.msg);
    buddy_destroy(b);
}

/* Fragmentation and high water on a hand-built layout: four min blocks, the
 * first and third freed: 128 bytes free, the largest 64, so 0.5. */
static void test_fragmentation(void) {
    buddy *b;
    cx_err err = {0};
    CHECK(buddy_new(256, 64, -1, &b, &err) == 0, "%s", err.msg);
    void *p[4];
    for (int i = 0; i < 4; i++) p[i] = buddy_alloc(b, 64);
    CHECK(buddy_free(b, p[0]) == 0 && buddy_free(b, p[2]) == 0, "frees");
    struct buddy_stats s;
    buddy_stats(b, &s);
    CHECK(s.free_bytes == 128 && s.largest_free == 64 && s.fragmentation == 0.5 && s.high_water == 256 &&
              s.free_blocks[0] == 2,
          "free %zu largest %zu frag %g hw %zu", s.free_bytes, s.largest_free, s.fragmentation, s.high_water);
    CHECK(buddy_free(b, p[1]) == 0, "free p1");
    buddy_stats(b, &s);
    CHECK(s.largest_free == 128 && s.free_blocks[1] == 1 && s.free_blocks[0] == 1 && s.merges == 1,
          "p0+p1 merged: largest %zu", s.largest_free);
    CHECK(buddy_free(b, p[3]) == 0, "free p3");
    buddy_stats(b, &s);
    CHECK(s.free_blocks[2] == 1 && s.merges == 3 && s.splits == 3 && s.high_water == 256 && s.fragmentation == 0.0,
          "all merged");
    buddy_destroy(b);
}

/* NUMA: node 0 exists on every Linux machine with sysfs; binding to it goes
 * through the real mbind syscall, and the kernel must then report MPOL_BIND
 * with node 0 for the region and place touched pages on node 0. A node that
 * does not exist is refused with a message saying so. */
static void test_numa(void) {
    int nodes = buddy_numa_nodes();
    printf("NUMA nodes: %d\n", nodes);
    if (nodes == 0) {
        printf("SKIP numa: no /sys/devices/system/node on this kernel\n");
        return;
    }
    buddy *b = NULL;
    cx_err err = {0};
    int rc = buddy_new(4u << 20, 4096, 0, &b, &err);
    if (rc == CX_EIO && (strstr(err.msg, "not permitted") || strstr(err.msg, "not implemented"))) {
        printf("SKIP numa bind: %s\n", err.msg); /* a seccomp profile without CAP_SYS_NICE */
    } else {
        CHECK(rc == 0, "bind to node 0: %s", err.msg);
    }
    if (rc == 0) {
        struct buddy_stats s;
        buddy_stats(b, &s);
        CHECK(s.numa_node == 0 && s.numa_nodes == nodes, "stats node %d of %d", s.numa_node, s.numa_nodes);
        uint8_t *p = buddy_alloc(b, 1 << 20);
        memset(p, 1, 1 << 20);
        int mode = -1;
        unsigned long mask[16] = {0};
        long r = syscall(SYS_get_mempolicy, &mode, mask, 16ul * 64 + 1, p, 2ul /* MPOL_F_ADDR */);
        CHECK(r == 0 && mode == 2 /* MPOL_BIND */ && mask[0] == 1, "policy of the region: rc %ld mode %d mask %lx", r,
              mode, mask[0]);
        int node = -1;
        r = syscall(SYS_get_mempolicy, &node, NULL, 0ul, p + 4096, 3ul /* MPOL_F_NODE | MPOL_F_ADDR */);
        CHECK(r == 0 && node == 0, "page placed on node %d (rc %ld)", node, r);
        CHECK(buddy_free(b, p) == 0 && buddy_check(b, &err) == 0, "%s", err.msg);
        buddy_destroy(b);
    }
    int missing = nodes;
    char path[64];
    for (;; missing++) { /* node numbers may be sparse: find the first absent one */
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d", missing);
        if (access(path, F_OK) != 0) break;
    }
    b = (buddy *)1;
    rc = buddy_new(1 << 20, 4096, missing, &b, &err);
    CHECK(rc == CX_EINVAL && b == NULL && strstr(err.msg, "does not exist"), "node %d: rc %d: %s", missing, rc,
          err.msg);
    printf("node %d: %s\n", missing, err.msg);
    rc = buddy_new(1 << 20, 4096, 1 << 20, &b, &err);
    CHECK(rc == CX_EINVAL && strstr(err.msg, "does not exist"), "node 2^20: %s", err.msg);
}

TEST_MAIN({
    test_bad_args();
    test_geometry();
    test_exhaustion();
    test_bad_frees();
    test_fragmentation();
    test_numa();
    stress(1, 1u << 20, 64, 200000, 50);   /* the main run: 15 orders */
    stress(2, 64u << 10, 64, 60000, 1);    /* buddy_check after every operation */
    stress(3, 100u << 10, 16, 60000, 7);   /* 16-byte blocks, region rounded up to 128 KiB */
    stress(4, 5u << 20, 4096, 100000, 25); /* 4 KiB blocks, 8 MiB: the huge-page layout */
})
