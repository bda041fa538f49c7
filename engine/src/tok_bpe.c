/*
 * tok_bpe.c - the parts of byte-level BPE that are not encoding: GPT-2's
 * byte-to-unicode mapping (undone once, at load, so pieces and merges hold raw
 * bytes) and the ranked merge table.
 *
 * GPT-2 maps every byte to a printable character so that vocabularies are
 * text: bytes 33-126, 161-172 and 174-255 stand for themselves, and the 68
 * others (controls, space, 127-160, 173) become U+0100 onwards, in byte
 * order. Merging over the mapped characters is merging over the bytes they
 * stand for, one character per byte, so the encoder never maps at all.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"
#include "util.h"

/* 1 if byte b stands for itself in GPT-2's mapping. */
static int bpe_printable(uint32_t b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); }

/* The byte that code point cp stands for, or -1: the 68 others are, in
 * order, 0-32, 127-160 and 173, mapped to U+0100.. U+0143. */
static int bpe_byte_of(uint32_t cp) {
    if (cp < 256) return bpe_printable(cp) ? (int)cp : -1;
    uint32_t k = cp - 256;
    return k < 33 ? (int)k : k < 67 ? (int)(127 + k - 33) : k == 67 ? 173 : -1;
}

/* See tokenizer.h. */
int64_t tok_bpe_unmap(const char *s, size_t n, char *out) {
    const unsigned char *u = (const unsigned char *)s;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        if (u[i] < 0x80) {
            cp = u[i];
            i += 1;
        } else if ((u[i] >> 5) == 6 && i + 1 < n && (u[i + 1] & 0xc0) == 0x80) {
            cp = ((uint32_t)(u[i] & 0x1f) << 6) | (u[i + 1] & 0x3f);
            i += 2;
        } else {
            return -1; /* every mapped character is below U+0800: two bytes at most */
        }
        int b = bpe_byte_of(cp);
        if (b < 0) return -1;
        out[o++] = (char)b;
    }
    return (int64_t)o;
}

/* See tokenizer.h. */
uint32_t tok_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

/* Hash of a merge: its bytes and where a ends, so "ab c" and "a bc" differ. */
static uint32_t merge_hash(const char *s, size_t na, size_t nb) { return tok_hash(s, na + nb) ^ (uint32_t)(na * 0x9e3779b1u); }

/* See tokenizer.h. */
int tok_merge_rank(const tok_merges *m, const char *s, size_t na, size_t nb) {
    if (!m->ht) return -1;
    for (uint32_t i = merge_hash(s, na, nb) & m->ht_mask;; i = (i + 1) & m->ht_mask) {
        int32_t k = m->ht[i];
        if (k < 0) return -1;
        if (m->len_a[k] == na && m->len_b[k] == nb && !memcmp(m->text + m->off[k], s, na + nb)) return k;
    }
}

/* See tokenizer.h. */
void tok_merges_free(tok_merges *m) {
    free(m->text);
    free(m->off);
    free(m->len_a);
    free(m->len_b);
    free(m->ht);
    memset(m, 0, sizeof *m);
}

/* See tokenizer.h: each merge is "A B", split at the first space after the
 * first byte (as llama.cpp does); both halves are unmapped to bytes. A merge
 * whose halves use characters outside the mapping can never apply to mapped
 * text and is an error, as is one without a space. A repeated pair keeps its
 * first (best) rank. */
int tok_merges_build(tok_merges *m, int n, const char *const *merges, const uint32_t *lens, cx_err *err) {
    memset(m, 0, sizeof *m);
    if (n < 0 || n > (1 << 24)) return cx_fail(err, CX_ERANGE, "merge count %d is out of range", n);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += lens[i];
    uint32_t cap = 2;
    while (cap < (uint32_t)n * 2) cap <<= 1;
    m->text = malloc(total ? total : 1);
    m->off = malloc(sizeof(uint32_t) * (size_t)(n ? n : 1));
    m->len_a = malloc(sizeof(uint32_t) * (size_t)(n ? n : 1));
    m->len_b = malloc(sizeof(uint32_t) * (size_t)(n ? n : 1));
    m->ht = malloc(sizeof(int32_t) * cap);
    if (!m->text || !m->off || !m->len_a || !m->len_b || !m->ht || total > UINT32_MAX) {
        tok_merges_free(m);
        return cx_fail(err, CX_ENOMEM, "out of memory for %d merges", n);
    }
    memset(m->ht, 0xff, sizeof(int32_t) * cap);
    m->ht_mask = cap - 1;
    size_t pos = 0;
    for (int i = 0; i < n; i++) {
        const char *s = merges[i];
        uint32_t len = lens[i];
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp) {
            tok_merges_free(m);
            return cx_fail(err, CX_EFORMAT, "merge %d '%.*s' is not two pieces separated by a space", i,
                           (int)(len > 32 ? 32 : len), s);
        }
        size_t la = (size_t)(sp - s), lb = len - la - 1;
        int64_t a = tok_bpe_unmap(s, la, m->text + pos);
        int64_t b = a < 0 ? -1 : tok_bpe_unmap(sp + 1, lb, m->text + pos + a);
        if (a <= 0 || b <= 0) {
            tok_merges_free(m);
            return cx_fail(err, CX_EFORMAT, "merge %d '%.*s' has a character outside GPT-2's byte mapping", i,
                           (int)(len > 32 ? 32 : len), s);
        }
        m->off[m->n] = (uint32_t)pos;
        m->len_a[m->n] = (uint32_t)a;
        m->len_b[m->n] = (uint32_t)b;
        uint32_t h = merge_hash(m->text + pos, (size_t)a, (size_t)b) & m->ht_mask;
        int dup = 0;
        for (;; h = (h + 1) & m->ht_mask) {
            int32_t k = m->ht[h];
            if (k < 0) break;
            if (m->len_a[k] == a && m->len_b[k] == b && !memcmp(m->text + m->off[k], m->text + pos, (size_t)(a + b))) {
                dup = 1;
                break;
            }
        }
        /* ranks are merge indices, so a duplicate still takes its index: it just never wins */
        m->ht[h] = dup ? m->ht[h] : m->n;
        pos += (size_t)(a + b);
        m->n++;
    }
    return 0;
}
