/*
 * sha256.c - SHA-256 as specified in FIPS 180-4, section 6.2: message padded
 * with 0x80, zeros and the 64-bit big-endian bit length to a multiple of 64
 * bytes, each block expanded to 64 words and compressed in 64 rounds.
 */
#include "sha256.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cortex.h"
#include "hx_err.h"

/* First 32 bits of the fractional parts of the cube roots of the first 64 primes. */
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

/* Rotate a 32-bit word right by k (0 < k < 32). */
static uint32_t rotr(uint32_t x, int k) { return (x >> k) | (x << (32 - k)); }

/* Compress one 64-byte block into the state (FIPS 180-4, 6.2.2). */
static void compress(uint32_t h[8], const uint8_t *b) {
    uint32_t w[64];
    for (int t = 0; t < 16; t++)
        w[t] = (uint32_t)b[4 * t] << 24 | (uint32_t)b[4 * t + 1] << 16 | (uint32_t)b[4 * t + 2] << 8 | b[4 * t + 3];
    for (int t = 16; t < 64; t++) {
        uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
        uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
        w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int t = 0; t < 64; t++) {
        uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[t] + w[t];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & bb) ^ (a & c) ^ (bb & c));
        hh = g; g = f; f = e; e = d + t1;
        d = c; c = bb; bb = a; a = t1 + t2;
    }
    h[0] += a; h[1] += bb; h[2] += c; h[3] += d;
    h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

/* Start a new hash with the initial values of FIPS 180-4, 5.3.3. */
void sha256_init(sha256_ctx *c) {
    static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, H0, sizeof H0);
    c->n_bytes = 0;
    c->n_block = 0;
}

/* Absorb n bytes: fill the pending block, then compress whole blocks in place. */
void sha256_update(sha256_ctx *c, const void *data, size_t n) {
    const uint8_t *p = data;
    assert(c->n_block < 64);
    c->n_bytes += n;
    if (c->n_block) {
        size_t take = 64 - c->n_block < n ? 64 - c->n_block : n;
        memcpy(c->block + c->n_block, p, take);
        c->n_block += take;
        p += take;
        n -= take;
        if (c->n_block < 64) return;
        compress(c->h, c->block);
        c->n_block = 0;
    }
    for (; n >= 64; p += 64, n -= 64) compress(c->h, p);
    if (n) memcpy(c->block, p, n);
    c->n_block = n;
}

/* Pad (0x80, zeros, 64-bit big-endian bit count) and emit the digest. */
void sha256_final(sha256_ctx *c, uint8_t digest[32]) {
    uint64_t bits = c->n_bytes * 8;
    c->block[c->n_block++] = 0x80;
    if (c->n_block > 56) {
        memset(c->block + c->n_block, 0, 64 - c->n_block);
        compress(c->h, c->block);
        c->n_block = 0;
    }
    memset(c->block + c->n_block, 0, 56 - c->n_block);
    for (int i = 0; i < 8; i++) c->block[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
    compress(c->h, c->block);
    for (int i = 0; i < 8; i++) {
        digest[4 * i] = (uint8_t)(c->h[i] >> 24);
        digest[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
        digest[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
        digest[4 * i + 3] = (uint8_t)c->h[i];
    }
}

/* Lowercase hex of a 32-byte digest. */
static void to_hex(const uint8_t d[32], char out[65]) {
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[64] = 0;
}

/* One-shot hash of a buffer, as hex. */
void sha256_hex(const void *data, size_t n, char out_hex[65]) {
    sha256_ctx c;
    uint8_t d[32];
    sha256_init(&c);
    sha256_update(&c, data, n);
    sha256_final(&c, d);
    to_hex(d, out_hex);
}

/* Stream a file through the hash 1 MiB at a time (models are gigabytes). */
int sha256_hex_file(const char *path, char out_hex[65], char *err, size_t errlen) {
    enum { CHUNK = 1 << 20 };
    out_hex[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        hx_fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return CX_EIO;
    }
    uint8_t *buf = malloc(CHUNK);
    if (!buf) {
        fclose(f);
        hx_fail(err, errlen, "%s: out of memory for a read buffer", path);
        return CX_ENOMEM;
    }
    sha256_ctx c;
    sha256_init(&c);
    size_t got;
    while ((got = fread(buf, 1, CHUNK, f)) > 0) sha256_update(&c, buf, got);
    int bad = ferror(f);
    int saved = errno;
    free(buf);
    fclose(f);
    if (bad) {
        hx_fail(err, errlen, "%s: read error: %s", path, strerror(saved));
        return CX_EIO;
    }
    uint8_t d[32];
    sha256_final(&c, d);
    to_hex(d, out_hex);
    return 0;
}
