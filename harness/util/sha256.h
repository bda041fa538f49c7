/*
 * sha256.h - SHA-256 (FIPS 180-4) for provenance: every benchmark run records
 * the hash of the workload and model files it used, so a result can be tied
 * to the exact bytes that produced it.
 */
#ifndef CX_HARNESS_SHA256_H
#define CX_HARNESS_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct sha256_ctx {
    uint32_t h[8];       /* chaining state */
    uint64_t n_bytes;    /* message length so far */
    uint8_t block[64];   /* pending partial block */
    size_t n_block;      /* bytes in block */
} sha256_ctx;

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t n);
/* Finish and write the 32-byte digest; c must be re-initialised to reuse it. */
void sha256_final(sha256_ctx *c, uint8_t digest[32]);

/* Hash a buffer in one call and write 64 lowercase hex digits + NUL. */
void sha256_hex(const void *data, size_t n, char out_hex[65]);

/*
 * Hash a file of any size, read in 1 MiB chunks, into 64 hex digits + NUL.
 * Returns 0, or CX_EIO/CX_ENOMEM with "PATH: reason" in err.
 */
int sha256_hex_file(const char *path, char out_hex[65], char *err, size_t errlen);

#endif
