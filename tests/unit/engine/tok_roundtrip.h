/*
 * tok_roundtrip.h - the round-trip property shared by the tokenizer tests:
 * random byte strings (mostly invalid UTF-8), ASCII words and random valid
 * UTF-8 must decode back to exactly themselves, on any vocabulary.
 */
#ifndef CX_TOK_ROUNDTRIP_H
#define CX_TOK_ROUNDTRIP_H

#include <stdio.h>
#include <string.h>

#include "testing.h"
#include "tokenizer.h"

/* Decode ids the way cx_detokenize does, into buf; returns the length. */
static size_t decode(const tok_vocab *v, const int32_t *ids, int n, char *buf) {
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        char tmp[2];
        const char *p;
        size_t m = tok_piece(v, i ? ids[i - 1] : -1, ids[i], tmp, &p);
        memcpy(buf + k, p, m);
        k += m;
    }
    return k;
}

/* Random byte strings (mostly invalid UTF-8; ASCII words instead when
 * `valid_only`: vocabularies such as StarCoder's have no token for bytes that
 * never occur in UTF-8, like 0xC0 or 0xFF) and random valid UTF-8 round-trip;
 * `flags` are tok_encode's. */
static void roundtrip_random(const tok_vocab *v, const char *what, int flags, int valid_only) {
    uint64_t st = 0x1234567;
    int bad = 0;
    static int32_t ids[8192];
    static char text[2048], out[16384];
    for (int iter = 0; iter < 3000; iter++) {
        int len = 0, max = 1 + iter % 300;
        while (len < max) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            uint32_t r = (uint32_t)(st >> 33);
            if (iter % 3 == 0 && !valid_only) { /* raw bytes */
                text[len++] = (char)(r & 0xff);
            } else if (iter % 3 <= 1) { /* ASCII words */
                text[len++] = (r % 7 == 0) ? ' ' : (char)('a' + r % 26);
            } else { /* valid UTF-8 code points of 1-4 bytes */
                uint32_t cp = r % 5 == 0 ? 0x10000 + r % 0xFFFF : r % 3 == 0 ? 0x800 + r % 0xF000 : 0x20 + r % 0x700;
                if (cp >= 0xD800 && cp < 0xE000) cp = 'x';
                if (len + 4 > max) cp = 'y';
                if (cp < 0x80) text[len++] = (char)cp;
                else if (cp < 0x800) { text[len++] = (char)(0xC0 | cp >> 6); text[len++] = (char)(0x80 | (cp & 63)); }
                else if (cp < 0x10000) {
                    text[len++] = (char)(0xE0 | cp >> 12); text[len++] = (char)(0x80 | ((cp >> 6) & 63));
                    text[len++] = (char)(0x80 | (cp & 63));
                } else {
                    text[len++] = (char)(0xF0 | cp >> 18); text[len++] = (char)(0x80 | ((cp >> 12) & 63));
                    text[len++] = (char)(0x80 | ((cp >> 6) & 63)); text[len++] = (char)(0x80 | (cp & 63));
                }
            }
        }
        int n = 0;
        cx_err err = {0};
        if (tok_encode(v, text, (size_t)len, flags, ids, 8192, &n, &err)) { bad++; continue; }
        for (int i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= v->n) bad++;
        size_t k = decode(v, ids, n, out);
        if (k != (size_t)len || memcmp(out, text, k)) {
            if (bad < 3) fprintf(stderr, "%s: round trip failed at iteration %d (len %d -> %zu)\n", what, iter, len, k);
            bad++;
        }
    }
    CHECK(bad == 0, "%s: %d of 3000 random strings failed to round-trip", what, bad);
}

#endif
