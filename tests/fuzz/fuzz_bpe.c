/*
 * fuzz_bpe.c - libFuzzer target for the byte-level BPE parser and encoder:
 * the input is a pre-tokenizer name (first line), merge strings (following
 * lines, up to a line "---") and a text (the rest). A vocabulary of the 256
 * GPT-2 byte characters, every merge's concatenation and one control token
 * is built with those merges; malformed merges and unknown names must fail
 * with an error message, never crash. When it builds, the text (any bytes)
 * is encoded with and without special-token parsing: ids stay in range, and
 * since every byte has a token, decoding gives the text back exactly.
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

/* GPT-2's mapped character of byte b, as UTF-8 (out[3]). */
static void map_byte(int b, char out[3]) {
    int cp = b;
    if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
        cp = 256;
        for (int x = 0; x < b; x++)
            if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) cp++;
    }
    if (cp < 0x80) { out[0] = (char)cp; out[1] = 0; }
    else { out[0] = (char)(0xC0 | cp >> 6); out[1] = (char)(0x80 | (cp & 63)); out[2] = 0; }
}

/* Encode text with flags and check range and round trip. */
static void check_encode(const tok_vocab *v, const char *text, size_t len, int flags) {
    int32_t *ids = malloc(sizeof(int32_t) * (len + 4));
    int n = 0;
    cx_err err;
    require(ids != NULL);
    require(tok_encode(v, text, len, flags, ids, (int)len + 4, &n, &err) == 0);
    char *out = malloc(len + 1);
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        require(ids[i] >= 0 && ids[i] < v->n);
        char tmp[2];
        const char *p;
        size_t m = tok_piece(v, i ? ids[i - 1] : -1, ids[i], tmp, &p);
        if (v->type[ids[i]] == TOK_CONTROL) continue; /* decodes to nothing: the text had its name */
        require(k + m <= len);
        memcpy(out + k, p, m);
        k += m;
    }
    if (!(flags & TOK_PARSE_SPECIAL)) require(k == len && !memcmp(out, text, len));
    free(out);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *s = (const char *)data, *end = s + size;
    const char *nl = memchr(s, '\n', size);
    if (!nl) return 0;
    const char *pre = s;
    size_t pre_len = (size_t)(nl - s);
    enum { MAX_MERGES = 64 };
    const char *merges[MAX_MERGES];
    uint32_t mlens[MAX_MERGES];
    int nm = 0;
    const char *p = nl + 1;
    while (p < end && nm < MAX_MERGES) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (!e) e = end;
        if (e - p == 3 && !memcmp(p, "---", 3)) { p = e + 1; break; }
        merges[nm] = p;
        mlens[nm++] = (uint32_t)(e - p);
        p = e + 1;
    }
    const char *text = p < end ? p : end;
    size_t tlen = (size_t)(end - text);
    /* vocabulary: bytes, each merge's two halves joined, a control token */
    enum { N = 256 + MAX_MERGES + 1 };
    static char bytes[256][3];
    static char joined[MAX_MERGES][256];
    const char *pieces[N];
    uint32_t lens[N];
    uint8_t types[N];
    int n = 0;
    for (int b = 0; b < 256; b++, n++) {
        map_byte(b, bytes[b]);
        pieces[n] = bytes[b];
        lens[n] = (uint32_t)strlen(bytes[b]);
        types[n] = TOK_NORMAL;
    }
    for (int i = 0; i < nm; i++) {
        uint32_t k = 0;
        for (uint32_t j = 0; j < mlens[i] && k < sizeof joined[i]; j++)
            if (merges[i][j] != ' ') joined[i][k++] = merges[i][j];
        if (k == 0) continue;
        pieces[n] = joined[i];
        lens[n] = k;
        types[n++] = TOK_NORMAL;
    }
    pieces[n] = "<|ctl|>";
    lens[n] = 7;
    types[n++] = TOK_CONTROL;
    tok_vocab v;
    cx_err err;
    err.msg[0] = 0;
    if (tok_build_bpe(&v, n, pieces, lens, types, nm, merges, mlens, pre, pre_len, -1, n - 1, &err)) {
        require(err.msg[0] != 0);
        return 0;
    }
    check_encode(&v, text, tlen, 0);
    check_encode(&v, text, tlen, TOK_PARSE_SPECIAL | TOK_ADD_BOS);
    tok_free(&v);
    return 0;
}
