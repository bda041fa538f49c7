/*
 * fuzz_buddy.c - libFuzzer target: the input bytes are a program of
 * alloc/free/bad-free/check operations on a small buddy allocator, run
 * against a shadow model; any divergence aborts (a finding).
 *
 * Byte 0 picks the geometry: min_block 16..128, 2..1024 min blocks (so
 * buddy_check, O(blocks), can run after every operation). Then each
 * operation is one opcode byte and its operands:
 *   op%8 0-3  alloc: two bytes v, size (v mod (region+2)) >> (op/8 mod 12),
 *             which covers 0 and region+1 (both must fail)
 *   op%8 4-5  free the live block number (next byte mod live count)
 *   op%8 6    a free that must be refused: op/8 mod 4 picks a double free,
 *             an interior or misaligned pointer, or one outside the region
 *   op%8 7    recompute the free blocks from the owner map and compare
 * The model: the live blocks, an owner per min_block (no overlap, ever),
 * a pattern over every byte of every block (checked at free), the counters
 * (used blocks per order, bytes, high water, allocs, frees, failures,
 * refused frees), splits - merges = blocks - 1, and NULL exactly when no free
 * block of a sufficient order exists. The free blocks per order are derived
 * independently: a min_block is empty when no live block owns it, an order-k
 * block is empty when both halves are, and E(k) - 2 E(k+1) of them are free
 * blocks of order k. At the end everything is freed: one block again.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buddy.h"

#define MAX_BLOCKS 1024

/* Abort (a finding) when a property fails: libFuzzer records the input. */
static void require(int cond) {
    if (!cond) abort();
}

typedef struct fz_live {
    uint8_t *p;
    size_t bytes;
    int order;
    uint8_t pat;
} fz_live;

typedef struct fz_model {
    buddy *b;
    uint8_t *base;
    size_t region, min_block;
    int max_order;
    uint32_t nblocks;
    fz_live live[MAX_BLOCKS];
    size_t n;
    uint16_t owner[MAX_BLOCKS];         /* live index + 1 per min_block, 0 if free */
    size_t used_blocks[BUDDY_ORDERS];
    size_t in_use, high_water;
    uint64_t allocs, frees, failed, bad;
    uint8_t *last_freed;
} fz_model;

/* A reading cursor over the input; past the end it yields zeros. */
typedef struct fz_in {
    const uint8_t *d;
    size_t n, i;
} fz_in;

/* Next input byte, 0 past the end. */
static uint8_t next_byte(fz_in *in) { return in->i < in->n ? in->d[in->i++] : 0; }

/* Free blocks per order from the owner map alone: E(k), the empty aligned
 * blocks of each order, built bottom-up, then E(k) - 2 E(k+1). */
static void model_free_blocks(const fz_model *m, size_t out[BUDDY_ORDERS]) {
    static uint8_t empty[MAX_BLOCKS];
    size_t e[BUDDY_ORDERS] = {0};
    uint32_t count = m->nblocks;
    for (uint32_t i = 0; i < count; i++) e[0] += empty[i] = m->owner[i] == 0;
    for (int k = 1; k <= m->max_order; k++) {
        count /= 2;
        for (uint32_t i = 0; i < count; i++) e[k] += empty[i] = empty[2 * i] && empty[2 * i + 1];
    }
    memset(out, 0, BUDDY_ORDERS * sizeof *out);
    for (int k = 0; k <= m->max_order; k++) out[k] = k < m->max_order ? e[k] - 2 * e[k + 1] : e[k];
}

/* The counters against the model, and the allocator's own check; with
 * `full`, the free blocks per order (and the largest) too. */
static void model_compare(const fz_model *m, int full) {
    struct buddy_stats s;
    buddy_stats(m->b, &s);
    size_t blocks = m->n;
    for (int k = 0; k < BUDDY_ORDERS; k++) {
        require(s.used_blocks[k] == (k <= m->max_order ? m->used_blocks[k] : 0));
        blocks += s.free_blocks[k];
    }
    require(s.bytes_in_use == m->in_use && s.free_bytes == m->region - m->in_use);
    require(s.high_water == m->high_water && s.allocs == m->allocs && s.frees == m->frees);
    require(s.failed_allocs == m->failed && s.bad_frees == m->bad);
    require(s.splits - s.merges == blocks - 1);
    require(s.fragmentation >= 0.0 && s.fragmentation < 1.0);
    require(buddy_check(m->b, NULL) == 0);
    if (full) {
        size_t fb[BUDDY_ORDERS], largest = 0;
        model_free_blocks(m, fb);
        for (int k = 0; k <= m->max_order; k++) {
            require(s.free_blocks[k] == fb[k]);
            if (fb[k]) largest = m->min_block << k;
        }
        require(s.largest_free == largest);
    }
}

/* Allocate and hold the result to the model; fill the block with a pattern. */
static void model_alloc(fz_model *m, size_t bytes, uint8_t pat) {
    int j = -1;
    if (bytes > 0 && bytes <= m->region) {
        j = 0;
        while ((m->min_block << j) < bytes) j++;
    }
    struct buddy_stats s;
    buddy_stats(m->b, &s);
    int fits = 0;
    for (int k = j; j >= 0 && k <= m->max_order; k++) fits |= s.free_blocks[k] != 0;
    uint8_t *p = buddy_alloc(m->b, bytes);
    require((p != NULL) == fits);
    if (!p) {
        m->failed++;
        return;
    }
    size_t size = m->min_block << j, off = (size_t)(p - m->base);
    require(p >= m->base && off < m->region && size <= m->region - off);
    require(off % size == 0 && buddy_block_size(m->b, p) == size);
    uint32_t first = (uint32_t)(off / m->min_block), count = (uint32_t)(size / m->min_block);
    for (uint32_t i = first; i < first + count; i++) require(m->owner[i] == 0);
    for (uint32_t i = first; i < first + count; i++) m->owner[i] = (uint16_t)(m->n + 1);
    memset(p, pat, size);
    m->live[m->n++] = (fz_live){p, size, j, pat};
    m->used_blocks[j]++;
    m->in_use += size;
    if (m->in_use > m->high_water) m->high_water = m->in_use;
    m->allocs++;
}

/* Free live block i after checking its pattern; keep the owner map exact. */
static void model_free(fz_model *m, size_t i) {
    fz_live l = m->live[i];
    for (size_t t = 0; t < l.bytes; t++) require(l.p[t] == l.pat);
    require(buddy_free(m->b, l.p) == 0);
    uint32_t first = (uint32_t)((size_t)(l.p - m->base) / m->min_block);
    for (uint32_t t = first; t < first + (uint32_t)(l.bytes / m->min_block); t++) m->owner[t] = 0;
    m->live[i] = m->live[--m->n];
    if (i < m->n) {
        fz_live *mv = &m->live[i];
        uint32_t f = (uint32_t)((size_t)(mv->p - m->base) / m->min_block);
        for (uint32_t t = f; t < f + (uint32_t)(mv->bytes / m->min_block); t++) m->owner[t] = (uint16_t)(i + 1);
    }
    m->used_blocks[l.order]--;
    m->in_use -= l.bytes;
    m->frees++;
    m->last_freed = l.p;
}

/* A free that must be refused with CX_EINVAL and change nothing else. */
static void model_bad_free(fz_model *m, int kind, uint8_t arg) {
    uint8_t *p = NULL;
    if (kind == 0 && m->last_freed) { /* double free, unless handed out again */
        uint16_t o = m->owner[(size_t)(m->last_freed - m->base) / m->min_block];
        if (!o || m->live[o - 1].p != m->last_freed) p = m->last_freed;
    } else if (kind == 1 && m->n) { /* interior: any byte after the first */
        fz_live *l = &m->live[arg % m->n];
        p = l->p + 1 + (size_t)arg * 37 % (l->bytes - 1);
    } else if (kind == 2) {
        p = m->base + m->region + (size_t)arg * m->min_block;
    } else if (kind == 3) {
        static uint8_t elsewhere[64];
        p = elsewhere + arg % 64;
    }
    if (!p) return;
    require(buddy_free(m->b, p) == CX_EINVAL && buddy_last_error(m->b)[0]);
    m->bad++;
}

/* libFuzzer entry: one allocator per input, so every finding replays alone. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static fz_model m;
    fz_in in = {data, size, 0};
    uint8_t g = next_byte(&in);
    memset(&m, 0, sizeof m);
    m.min_block = (size_t)16 << (g & 3);
    m.max_order = 1 + (g >> 2) % 10;
    m.nblocks = (uint32_t)1 << m.max_order;
    cx_err err;
    require(buddy_new(m.min_block << m.max_order, m.min_block, -1, &m.b, &err) == 0);
    m.base = buddy_base(m.b, &m.region);
    require(m.region == m.min_block << m.max_order);
    model_compare(&m, 1);
    while (in.i < in.n) {
        uint8_t op = next_byte(&in);
        switch (op % 8) {
        case 0: case 1: case 2: case 3: {
            size_t v = next_byte(&in) | (size_t)next_byte(&in) << 8;
            model_alloc(&m, (v % (m.region + 2)) >> (op / 8 % 12), (uint8_t)(op | 1));
            break;
        }
        case 4: case 5:
            if (m.n) model_free(&m, next_byte(&in) % m.n);
            break;
        case 6:
            model_bad_free(&m, op / 8 % 4, next_byte(&in));
            break;
        default:
            model_compare(&m, 1);
            break;
        }
        model_compare(&m, 0);
    }
    model_compare(&m, 1);
    while (m.n) model_free(&m, m.n - 1);
    model_compare(&m, 1);
    struct buddy_stats s;
    buddy_stats(m.b, &s);
    require(s.bytes_in_use == 0 && s.free_blocks[m.max_order] == 1 && s.largest_free == m.region);
    require(s.splits == s.merges && s.fragmentation == 0.0);
    buddy_destroy(m.b);
    return 0;
}
