/*
 * kv_page.c - the cold tier's pages: a block's slabs, one per layer, each
 * byte-plane split (kv_codec.h) and deflated on its own, so attention can
 * restore one layer of a block without the others. The pages of a block are
 * stored back to back (page_off gives each one's offset): in up to
 * KV_PIECES buddy blocks while the cold budget allows (kv_page_pieces), else
 * in the spill file at id * spill_stride, a sparse file with a fixed place
 * per block, so spilling needs no file allocator. See kv_cache.h.
 */
#include <assert.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "kv_cache.h"

/* See kv_cache.h. */
size_t kv_page_max_slab(const kv_cache *c) {
    size_t a = kv_slab_bytes(c->fmt[KV_HOT], c->dim), b = kv_slab_bytes(c->fmt[KV_WARM], c->dim);
    return a > b ? a : b;
}

/* See kv_cache.h: a compressed page, then its byte planes. */
size_t kv_page_scratch(const kv_cache *c) { return c->page_bound + kv_page_max_slab(c); }

/* Offsets of block id's pages: n_layer + 1 entries. */
static uint32_t *offsets(const kv_cache *c, int32_t id) { return c->page_off + (size_t)id * (size_t)(c->n_layer + 1); }

/* See kv_cache.h. */
size_t kv_page_pack(kv_cache *c, int32_t id, int fmt) {
    const kv_block *b = &c->blocks[id];
    assert(b->tier == KV_HOT || b->tier == KV_WARM);
    size_t slab = kv_slab_bytes(fmt, c->dim), at = 0;
    uint32_t *off = offsets(c, id);
    for (int l = 0; l < c->n_layer; l++) {
        off[l] = (uint32_t)at;
        const void *src = kv_block_slab(c, id, l);
        if (fmt != b->fmt) { /* a hot block going straight to cold pages of the warm format */
            kv_decode_rows(b->fmt, src, 0, KV_ROWS, c->f32, c->dim, c->hd);
            kv_encode_slab(fmt, c->raw, c->f32, c->dim, c->hd);
            src = c->raw;
        }
        kv_planes_split(fmt, src, c->planes, c->dim);
        size_t seg[KV_ZIP_MAX_SEGMENTS];
        int n_seg = kv_planes_sizes(fmt, c->dim, seg);
        size_t n = kv_zip_pack(&c->deflater, c->planes, seg, n_seg, c->zbuf + at, c->page_bound);
        if (!n) return 0;
        at += n;
        c->st.zip_in += (int64_t)slab;
        c->st.zip_out += (int64_t)n;
    }
    off[c->n_layer] = (uint32_t)at;
    return at;
}

/* pread all of n bytes at off; 0 or -1. */
static int read_full(int fd, void *dst, size_t n, off_t off) {
    for (size_t got = 0; got < n;) {
        ssize_t r = pread(fd, (uint8_t *)dst + got, n - got, off + (off_t)got);
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

/* pwrite all of n bytes at off; 0 or -1. */
static int write_full(int fd, const void *src, size_t n, off_t off) {
    for (size_t put = 0; put < n;) {
        ssize_t r = pwrite(fd, (const uint8_t *)src + put, n - put, off + (off_t)put);
        if (r <= 0) return -1;
        put += (size_t)r;
    }
    return 0;
}

/* See kv_cache.h. The granule count's binary digits, high first; when it
 * has more than KV_PIECES one bits, it is rounded up (at a cost below
 * 2^(bits - KV_PIECES) granules) until it has no more. */
int kv_page_pieces(size_t bytes, size_t size[KV_PIECES], size_t *total) {
    size_t g = (bytes + KV_COLD_GRANULE - 1) / KV_COLD_GRANULE;
    if (g == 0) g = 1;
    while (__builtin_popcountll((unsigned long long)g) > KV_PIECES) g += g & (~g + 1); /* carry out the lowest one */
    int n = 0;
    for (int bit = 63; bit >= 0; bit--)
        if (g >> bit & 1) size[n++] = ((size_t)1 << bit) * KV_COLD_GRANULE;
    *total = g * KV_COLD_GRANULE;
    assert(n >= 1 && n <= KV_PIECES && *total >= bytes);
    return n;
}

/* Number of pieces block b's pages are in (from its byte count). */
static int n_pieces(const kv_block *b, size_t size[KV_PIECES]) {
    size_t total;
    return kv_page_pieces(b->cold_bytes, size, &total);
}

/* See kv_cache.h. */
void kv_page_free(kv_cache *c, int32_t id) {
    kv_block *b = &c->blocks[id];
    size_t size[KV_PIECES];
    int n = n_pieces(b, size);
    for (int i = 0; i < n; i++) {
        assert(b->piece[i]);
        c->bytes[KV_COLD] -= (int64_t)size[i];
        buddy_free(c->cold_mem, b->piece[i]);
        b->piece[i] = NULL;
    }
}

/* Copy bytes [at, at + n) of block b's in-memory pages to dst, or return a
 * pointer to them when they lie in one piece (dst unused). */
static const uint8_t *gather(const kv_block *b, size_t at, size_t n, uint8_t *dst) {
    size_t size[KV_PIECES], start = 0;
    int np = n_pieces(b, size);
    for (int i = 0; i < np; start += size[i], i++) {
        if (at >= start + size[i]) continue;
        if (at + n <= start + size[i]) return b->piece[i] + (at - start); /* within piece i */
        size_t done = 0;
        for (int j = i; j < np && done < n; start += size[j], j++) {
            size_t from = at + done - start, k = size[j] - from < n - done ? size[j] - from : n - done;
            memcpy(dst + done, b->piece[j] + from, k);
            done += k;
        }
        assert(done == n);
        return dst;
    }
    assert(0 && "page beyond the block's pieces");
    return dst;
}

/* See kv_cache.h. */
int kv_page_read(const kv_cache *c, int32_t id, int layer, kv_zip *zip, uint8_t *scratch, void *raw) {
    const kv_block *b = &c->blocks[id];
    assert(b->tier == KV_COLD && layer >= 0 && layer < c->n_layer);
    const uint32_t *off = offsets(c, id);
    size_t n = off[layer + 1] - off[layer];
    if (n > c->page_bound) return -1;
    const uint8_t *page = scratch;
    if (!b->spilled) page = gather(b, off[layer], n, scratch);
    else if (read_full(c->spill_fd, scratch, n, (off_t)((size_t)id * c->spill_stride + off[layer])))
        return -1;
    uint8_t *planes = scratch + c->page_bound;
    if (kv_zip_unpack(zip, page, n, planes, kv_slab_bytes(b->fmt, c->dim))) return -1;
    kv_planes_join(b->fmt, planes, raw, c->dim);
    return 0;
}

/* See kv_cache.h. In memory: every piece or none. */
int kv_page_store(kv_cache *c, int32_t id, size_t bytes, int to_memory) {
    kv_block *b = &c->blocks[id];
    if (to_memory) {
        size_t size[KV_PIECES], total, at = 0;
        int n = kv_page_pieces(bytes, size, &total);
        for (int i = 0; i < n; i++) {
            b->piece[i] = buddy_alloc(c->cold_mem, size[i]);
            if (!b->piece[i]) {
                while (i-- > 0) {
                    buddy_free(c->cold_mem, b->piece[i]);
                    b->piece[i] = NULL;
                }
                return -1;
            }
        }
        for (int i = 0; i < n && at < bytes; at += size[i], i++)
            memcpy(b->piece[i], c->zbuf + at, bytes - at < size[i] ? bytes - at : size[i]);
        c->bytes[KV_COLD] += (int64_t)total;
    } else {
        assert(c->spill_fd >= 0 && bytes <= c->spill_stride);
        if (write_full(c->spill_fd, c->zbuf, bytes, (off_t)((size_t)id * c->spill_stride))) return -1;
        c->spilled_bytes += (int64_t)bytes;
        c->st.spills++;
    }
    b->spilled = !to_memory;
    b->cold_bytes = (uint32_t)bytes;
    return 0;
}

/* See kv_cache.h. */
int kv_page_spill(kv_cache *c, int32_t id) {
    kv_block *b = &c->blocks[id];
    assert(b->tier == KV_COLD && !b->spilled && c->spill_fd >= 0);
    size_t size[KV_PIECES], at = 0;
    int n = n_pieces(b, size);
    for (int i = 0; i < n && at < b->cold_bytes; at += size[i], i++) {
        size_t k = b->cold_bytes - at < size[i] ? b->cold_bytes - at : size[i];
        if (write_full(c->spill_fd, b->piece[i], k, (off_t)((size_t)id * c->spill_stride + at))) return -1;
    }
    kv_page_free(c, id);
    b->spilled = 1;
    c->spilled_bytes += b->cold_bytes;
    c->st.spills++;
    return 0;
}
