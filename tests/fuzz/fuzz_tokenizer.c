/*
 * fuzz_tokenizer.c - libFuzzer target for the SentencePiece BPE encoder and
 * the piece decoder, on vocabularies built in code (no external files).
 *
 * Vocabulary A has <unk>, <s>, </s>, all 256 byte tokens <0xXX> and a few
 * hundred pieces: ASCII characters, common bigrams/trigrams/words with and
 * without a leading space, multi-byte UTF-8 ("é", "ñ", "日本"), duplicates,
 * an empty piece, a user-defined piece, and control/unused pieces that must
 * never be produced. Since every byte has a byte token, decoding any encoding
 * must give the input back exactly; that is checked with and without BOS and
 * with the dummy space prefix on and off.
 * Vocabulary B has the same pieces but no byte tokens, so unknown bytes map
 * to <unk>: there only the id range is checked.
 * For every encoding a too-small output buffer must give CX_ERANGE, the same
 * count, the same leading ids, and no write past the buffer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

/* Abort (a finding) when a property fails: libFuzzer records the input. */
static void require(int cond) {
    if (!cond) abort();
}

/* Pieces of both vocabularies after the specials (and byte tokens in A). */
static const char *const WORDS[] = {
    " ", "  ", "\n", "\t", "th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "ti", "es", "or", "te",
    "of", "ed", "is", "it", "al", "ar", "st", "to", "nt", "ng", "se", "ha", "as", "ou", "io", "le", "ve", "co",
    "me", "de", "hi", "ri", "ro", "ic", "ne", "ea", "ra", "ce", "ll", "lo", "wo", "rl", "ld", "the", "ing",
    "and", "ion", "tio", "ent", "ere", "her", "ate", "ver", "ter", "tha", "hel", "ell", "llo", "wor", "orl",
    "hello", "world", "there", "their", "The", "He", "In", "It", "\xc3\xa9", "\xc3\xb1", "\xc3\xbc", "\xc3\xa9t",
    "caf\xc3\xa9", "ma\xc3\xb1", "\xe6\x97\xa5", "\xe6\x9c\xac", "\xe6\x97\xa5\xe6\x9c\xac", "\xe8\xaa\x9e",
    "\xf0\x9f\x98\x80", "\xe2\x96\x81", "<0x41>", "th", "the", "\xc3\xa9", "", "..", "!!", "?!", ", ", ". ",
    "12", "00", "000", "2024", "\xc3", "\xa9", "a\xc3",
};

/* Single-character pieces: the printable ASCII range. */
#define FIRST_CHAR 33
#define LAST_CHAR 126

static tok_vocab g_a, g_a_noprefix, g_b;
static int g_ready;

/* Build one vocabulary; with_bytes adds the 256 <0xXX> byte tokens. */
static void build(tok_vocab *v, int with_bytes) {
    enum { CAP = 1024 };
    static char store[CAP][24];
    const char *pieces[CAP];
    uint32_t lens[CAP];
    float scores[CAP];
    uint8_t types[CAP];
    int n = 0;
#define ADD(str, len_, ty) do { \
        memcpy(store[n], (str), (len_)); pieces[n] = store[n]; lens[n] = (uint32_t)(len_); \
        types[n] = (ty); scores[n] = (float)((int)(len_) * 3 - n % 7); n++; } while (0)
    ADD("<unk>", 5, TOK_UNKNOWN);
    ADD("<s>", 3, TOK_CONTROL);
    ADD("</s>", 4, TOK_CONTROL);
    for (int b = 0; with_bytes && b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        ADD(s, 6, TOK_BYTE);
    }
    for (int c = FIRST_CHAR; c <= LAST_CHAR; c++) {
        char s[2] = {(char)c, 0};
        ADD(s, 1, TOK_NORMAL);
        s[0] = ' ';
        s[1] = (char)c;
        ADD(s, 2, TOK_NORMAL);
    }
    for (size_t i = 0; i < sizeof WORDS / sizeof WORDS[0]; i++) {
        char s[24];
        size_t len = strlen(WORDS[i]);
        ADD(WORDS[i], len, TOK_NORMAL);
        s[0] = ' ';
        memcpy(s + 1, WORDS[i], len);
        ADD(s, len + 1, TOK_NORMAL);
    }
    ADD("<user>", 6, TOK_USER);
    ADD("<ctl>", 5, TOK_CONTROL);   /* never mergeable: must not appear in encodings */
    ADD("unused", 6, TOK_UNUSED);
#undef ADD
    cx_err err;
    require(n <= CAP);
    require(tok_build(v, n, pieces, lens, scores, types, 1, 2, 0, &err) == 0);
}

/* Build the vocabularies once (libFuzzer calls the target many times). */
static void setup(void) {
    if (g_ready) return;
    build(&g_a, 1);
    g_a_noprefix = g_a; /* shares A's storage; only the prefix flag differs */
    g_a_noprefix.add_space_prefix = 0;
    build(&g_b, 0);
    g_ready = 1;
}

/*
 * Encode `text` with v; check the id range, that control/unused pieces never
 * appear, the too-small-buffer contract, and (when roundtrip) that decoding
 * gives the text back byte for byte.
 */
static void check(const tok_vocab *v, const uint8_t *text, size_t len, int add_bos, int roundtrip) {
    int cap = (int)len + 3;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(cap + 1));
    int32_t *small = malloc(sizeof(int32_t) * (size_t)(cap + 1));
    char *dec = malloc(len * 8 + 16);
    require(ids && small && dec);
    int n = -1;
    cx_err err;
    require(tok_encode(v, (const char *)text, len, add_bos, ids, cap, &n, &err) == 0);
    require(n >= 0 && n <= cap);
    for (int i = 0; i < n; i++) {
        require(ids[i] >= 0 && ids[i] < v->n);
        uint8_t t = v->type[ids[i]];
        require(t != TOK_UNUSED && (t != TOK_CONTROL || (add_bos && i == 0 && ids[i] == v->bos)));
    }
    if (n > 0) { /* a buffer half as big: ERANGE, the same count, no write past it */
        int sc = n / 2, m = -1;
        small[sc] = 0x5a5a5a5a;
        require(tok_encode(v, (const char *)text, len, add_bos, small, sc, &m, &err) == CX_ERANGE);
        require(m == n && small[sc] == 0x5a5a5a5a);
        require(memcmp(small, ids, sizeof(int32_t) * (size_t)sc) == 0);
    }
    if (roundtrip) { /* decode as cx_detokenize does: each piece sees its predecessor */
        size_t total = 0;
        for (int i = 0; i < n; i++) {
            char tmp[2];
            const char *p;
            size_t k = tok_piece(v, i ? ids[i - 1] : -1, ids[i], tmp, &p);
            require(total + k <= len * 8 + 16);
            memcpy(dec + total, p, k);
            total += k;
        }
        if (total != len || (len && memcmp(dec, text, len) != 0)) {
            fprintf(stderr, "round trip failed: %zu bytes in, %zu out\n", len, total);
            abort();
        }
    }
    free(ids);
    free(small);
    free(dec);
}

/* The libFuzzer entry point. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup();
    check(&g_a, data, size, 0, 1);
    check(&g_a, data, size, 1, 1);
    check(&g_a_noprefix, data, size, 1, 1);
    check(&g_b, data, size, 1, 0);
    return 0;
}
