/*
 * kv_zip.h - zlib streams for KV pages that never call malloc after creation.
 *
 * A kv_zip is one raw-deflate compressor or decompressor whose zlib state
 * lives in a bump arena (arena.h) allocated once by kv_zip_init; every page
 * afterwards only resets the stream, so compressing or restoring a page
 * allocates nothing. Raw deflate (no zlib header or checksum): pages are
 * small and checked by their exact decompressed length instead.
 *
 * A page is compressed as segments (its byte planes), each ending a deflate
 * block (Z_BLOCK), so zlib chooses per plane between Huffman coding and
 * storing: the noise planes of f32/f16 values are stored, which makes the
 * page smaller (stories260K f32: 1.16x instead of 1.10x) and its inflate 3x
 * faster, while the result is still one ordinary raw deflate stream. A
 * segment whose byte entropy promises under KV_ZIP_MIN_GAIN is stored
 * outright (int8 codes of keys and values: Huffman would save ~4% and make
 * restoring them several times slower).
 *
 * Not thread-safe: one kv_zip per thread.
 */
#ifndef CX_KV_ZIP_H
#define CX_KV_ZIP_H

#include <stddef.h>

#define KV_ZIP_MAX_SEGMENTS 8
#define KV_ZIP_MIN_GAIN 0.10 /* segments whose entropy promises less saving are stored */

#include <zlib.h>

#include "../arena.h"

typedef struct kv_zip {
    z_stream z;
    arena mem;      /* zlib's state and window */
    void *buf;      /* the memory behind `mem` */
    int compress;   /* 1: deflate, 0: inflate */
    int level;      /* deflate: the zlib level of segments worth compressing */
    int ready;      /* 1 after a successful kv_zip_init */
} kv_zip;

/* Set up a compressor (compress = 1, zlib `level` 1..9) or a decompressor.
 * Returns 0, or -1 if memory or zlib fails. */
int kv_zip_init(kv_zip *z, int compress, int level);
/* Release it; a zeroed or failed kv_zip is fine. */
void kv_zip_free(kv_zip *z);
/* The most bytes kv_zip_pack can produce from n bytes. */
size_t kv_zip_bound(size_t n);
/* Compress the n_seg (1..KV_ZIP_MAX_SEGMENTS) consecutive segments of seg[i]
 * bytes at src into dst (cap >= kv_zip_bound of their total); returns the
 * compressed size, 0 on failure. */
size_t kv_zip_pack(kv_zip *z, const void *src, const size_t *seg, int n_seg, void *dst, size_t cap);
/* Decompress n bytes from src into exactly `out_n` bytes at dst; 0, or -1 if
 * the data is corrupt or not exactly out_n bytes long. */
int kv_zip_unpack(kv_zip *z, const void *src, size_t n, void *dst, size_t out_n);

#endif
