/*
 * test_sha256.c - SHA-256 (harness/util/sha256.c): the FIPS 180 test vectors,
 * the million-'a' message fed in one piece and in uneven pieces, from a file
 * (one longer than the 1 MiB read chunk too) and a missing file's message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cortex.h"
#include "fixture.h"
#include "sha256.h"

/* ---- SHA-256 --------------------------------------------------------------- */

static void test_sha256(void) {
    char hex[65];
    sha256_hex("", 0, hex);
    CHECK(strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0, "sha256('') = %s", hex);
    sha256_hex("abc", 3, hex);
    CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0, "sha256(abc) = %s", hex);
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256_hex(m448, strlen(m448), hex);
    CHECK(strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0, "sha256(448 bits) = %s", hex);
    const char *million_a = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    sha256_hex(a, 1000000, hex);
    CHECK(strcmp(hex, million_a) == 0, "sha256(10^6 'a') = %s", hex);
    /* Fed in uneven pieces (crossing block boundaries every way). */
    sha256_ctx c;
    uint8_t d[32];
    sha256_init(&c);
    for (size_t off = 0, step = 1; off < 1000000; off += step, step = step % 131 + 1)
        sha256_update(&c, a + off, off + step <= 1000000 ? step : 1000000 - off);
    sha256_final(&c, d);
    char hex2[65];
    for (int i = 0; i < 32; i++) snprintf(hex2 + 2 * i, 3, "%02x", d[i]);
    CHECK(strcmp(hex2, million_a) == 0, "incremental sha256 = %s", hex2);
    /* From a file, and from a file longer than the 1 MiB read chunk. */
    char err[256];
    const char *path = fx_write("million_a", a, 1000000);
    CHECK(sha256_hex_file(path, hex, err, sizeof err) == 0 && strcmp(hex, million_a) == 0, "file: %s %s", hex, err);
    size_t big_n = 3 * (1 << 20) + 17;
    char *big = malloc(big_n);
    for (size_t i = 0; i < big_n; i++) big[i] = (char)(i * 2654435761u >> 13);
    path = fx_write("big.bin", big, big_n);
    sha256_hex(big, big_n, hex2);
    CHECK(sha256_hex_file(path, hex, err, sizeof err) == 0 && strcmp(hex, hex2) == 0, "3 MiB file streamed = one shot");
    int rc = sha256_hex_file("/nonexistent/x.bin", hex, err, sizeof err);
    CHECK(rc == CX_EIO && strstr(err, "/nonexistent/x.bin: cannot open") != NULL, "missing file: %s", err);
    free(a);
    free(big);
}

TEST_MAIN({
    test_sha256();
    fx_cleanup();
})
