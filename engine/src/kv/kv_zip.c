/*
 * kv_zip.c - see kv_zip.h.
 */
#include "kv_zip.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Memory zlib asks for, with room to spare (zlib.h, "memory usage"): deflate
 * with windowBits 15 and memLevel 8 takes about 256 KiB plus its state;
 * inflate its state plus a 32 KiB window. */
#define ZIP_DEFLATE_MEM (320u << 10)
#define ZIP_INFLATE_MEM (64u << 10)
#define ZIP_WBITS (-15) /* raw deflate, 32 KiB window */

/* zlib's allocator: carve from the stream's arena (never freed one by one). */
static voidpf zip_alloc(voidpf opaque, uInt items, uInt size) {
    arena *a = opaque;
    if (size && items > SIZE_MAX / size) return Z_NULL;
    return arena_alloc(a, (size_t)items * size, 16);
}

/* zlib's free: a no-op; the arena goes away with the stream. */
static void zip_free(voidpf opaque, voidpf p) {
    (void)opaque;
    (void)p;
}

/* See kv_zip.h. A round trip of a small page at the end makes zlib allocate
 * everything it will ever need (inflate's window is allocated lazily). */
int kv_zip_init(kv_zip *z, int compress, int level) {
    memset(z, 0, sizeof *z);
    size_t bytes = compress ? ZIP_DEFLATE_MEM : ZIP_INFLATE_MEM;
    z->buf = malloc(bytes);
    if (!z->buf) return -1;
    arena_init(&z->mem, z->buf, bytes);
    z->compress = compress;
    z->level = level;
    z->z.zalloc = zip_alloc;
    z->z.zfree = zip_free;
    z->z.opaque = &z->mem;
    int rc = compress ? deflateInit2(&z->z, level, Z_DEFLATED, ZIP_WBITS, 8, Z_DEFAULT_STRATEGY)
                      : inflateInit2(&z->z, ZIP_WBITS);
    if (rc != Z_OK) {
        free(z->buf);
        z->buf = NULL;
        return -1;
    }
    z->ready = 1;
    if (!compress) {
        /* 64 'a' bytes as raw deflate (zlib level 6): exercises the window. */
        static const uint8_t page[] = {75, 76, 164, 12, 0, 0};
        uint8_t out[64];
        if (kv_zip_unpack(z, page, sizeof page, out, sizeof out) != 0) {
            kv_zip_free(z);
            return -1;
        }
    }
    return 0;
}

/* See kv_zip.h. */
void kv_zip_free(kv_zip *z) {
    if (z->ready) {
        if (z->compress) deflateEnd(&z->z);
        else inflateEnd(&z->z);
    }
    free(z->buf);
    memset(z, 0, sizeof *z);
}

/* See kv_zip.h: compressBound covers one stream with the zlib wrapper;
 * each segment's block end may add a stored-block header (5 bytes) and bits. */
size_t kv_zip_bound(size_t n) { return (size_t)compressBound((uLong)n) + 8 * KV_ZIP_MAX_SEGMENTS; }

/* Order-0 entropy of n bytes, in bits: what Huffman coding could at best
 * shrink them to when they have no repeats for LZ77 to find. */
static double entropy_bits(const uint8_t *p, size_t n) {
    uint32_t count[256] = {0};
    for (size_t i = 0; i < n; i++) count[p[i]]++;
    double bits = 0;
    for (int b = 0; b < 256; b++)
        if (count[b]) bits -= (double)count[b] * log2((double)count[b] / (double)n);
    return bits;
}

/* See kv_zip.h. A segment whose entropy promises less than KV_ZIP_MIN_GAIN
 * goes in a stored block (level 0 for that segment): inflating Huffman-coded
 * int8 codes costs several times a copy for a few percent of memory. */
size_t kv_zip_pack(kv_zip *z, const void *src, const size_t *seg, int n_seg, void *dst, size_t cap) {
    assert(z->ready && z->compress && n_seg >= 1 && n_seg <= KV_ZIP_MAX_SEGMENTS);
    /* Back to the configured level at the start, where zlib needs no flush to
     * change it (after Z_FINISH it refuses: a page ending in a stored
     * segment would fail and leave the next pages at level 0). */
    if (deflateReset(&z->z) != Z_OK || deflateParams(&z->z, z->level, Z_DEFAULT_STRATEGY) != Z_OK) return 0;
    z->z.next_in = (Bytef *)(uintptr_t)src;
    z->z.next_out = dst;
    z->z.avail_out = (uInt)cap;
    int stored = 0;
    for (int i = 0; i < n_seg; i++) {
        int store = entropy_bits(z->z.next_in, seg[i]) > (1.0 - KV_ZIP_MIN_GAIN) * 8.0 * (double)seg[i];
        if (store != stored && deflateParams(&z->z, store ? 0 : z->level, Z_DEFAULT_STRATEGY) != Z_OK) return 0;
        stored = store;
        z->z.avail_in = (uInt)seg[i];
        int last = i == n_seg - 1, rc = deflate(&z->z, last ? Z_FINISH : Z_BLOCK);
        if (last ? rc != Z_STREAM_END : (rc != Z_OK || z->z.avail_in != 0)) return 0;
    }
    return cap - z->z.avail_out;
}

/* See kv_zip.h. */
int kv_zip_unpack(kv_zip *z, const void *src, size_t n, void *dst, size_t out_n) {
    assert(z->ready && !z->compress);
    if (inflateReset(&z->z) != Z_OK) return -1;
    z->z.next_in = (Bytef *)(uintptr_t)src;
    z->z.avail_in = (uInt)n;
    z->z.next_out = dst;
    z->z.avail_out = (uInt)out_n;
    int rc = inflate(&z->z, Z_FINISH);
    return rc == Z_STREAM_END && z->z.avail_out == 0 && z->z.avail_in == 0 ? 0 : -1;
}
