/*
 * tok_encode.c - encoding one piece of text without special tokens, for both
 * tokenizer models, on one merge loop.
 *
 * Both start from small symbols (SentencePiece: UTF-8 characters; byte-level
 * BPE: bytes, as the GPT-2 mapping gives one character per byte) and
 * repeatedly merge the adjacent pair that ranks best, ties to the leftmost:
 * SentencePiece ranks a pair by the score of the piece it forms, BPE by its
 * position in tokenizer.ggml.merges. A priority queue keeps this O(n log n).
 * Symbols left that are not tokens fall back to byte tokens.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"
#include "util.h"

typedef struct sym { int prev, next; uint32_t start, n; } sym;
typedef struct bigram { float score; int left, right; uint32_t size; } bigram;

/* Append token t to out (counting it even past cap). */
static void emit(int32_t *out, int cap, int *n, int t) {
    if (*n < cap) out[*n] = t;
    (*n)++;
}

/* Max-heap order: higher score first, then leftmost. */
static int bigram_before(const bigram *a, const bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

/* Add x to the max-heap h of *n entries. */
static void heap_push(bigram *h, int *n, bigram x) {
    int i = (*n)++;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!bigram_before(&x, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

/* Remove and return the best entry of the max-heap h (*n > 0). */
static bigram heap_pop(bigram *h, int *n) {
    bigram top = h[0], x = h[--(*n)];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && bigram_before(&h[c + 1], &h[c])) c++;
        if (!bigram_before(&h[c], &x)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = x;
    return top;
}

/* Score of merging s[0..na) with s[na..na+nb), or 0 if they do not merge:
 * SentencePiece, the score of the piece they form; BPE, minus the merge's rank
 * (exact in a float: ranks stay below 2^24). */
static int pair_score(const tok_vocab *v, const char *s, uint32_t na, uint32_t nb, float *score) {
    if (v->kind == TOK_BPE) {
        int r = tok_merge_rank(&v->merges, s, na, nb);
        *score = -(float)r;
        return r >= 0;
    }
    int id = tok_lookup(v, s, na + nb);
    if (id >= 0) *score = v->score[id];
    return id >= 0;
}

/* Queue the pair (l, r) if it merges. */
static void try_pair(const tok_vocab *v, const char *s, const sym *sy, int l, int r, bigram *h, int *nh) {
    if (l < 0 || r < 0) return;
    float score;
    if (!pair_score(v, s + sy[l].start, sy[l].n, sy[r].n, &score)) return;
    bigram b = {score, l, r, sy[l].n + sy[r].n};
    heap_push(h, nh, b);
}

/* Length of the UTF-8 character starting at s (1 for an invalid or truncated one). */
static uint32_t utf8_len(const unsigned char *s, size_t left) {
    uint32_t n = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3 : (s[0] >> 3) == 30 ? 4 : 1;
    if (n > left) return 1;
    for (uint32_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 1;
    return n;
}

/* Merge s[0..m) (symbols: UTF-8 characters, or single bytes when `bytes`) and
 * emit the tokens of what is left; sy and h are scratch for m symbols. */
static void merge_emit(const tok_vocab *v, const char *s, size_t m, int bytes, sym *sy, bigram *h, int32_t *out,
                       int cap, int *n) {
    int ns = 0;
    for (size_t i = 0; i < m;) {
        uint32_t cl = bytes ? 1 : utf8_len((const unsigned char *)s + i, m - i);
        sy[ns] = (sym){ns - 1, i + cl < m ? ns + 1 : -1, (uint32_t)i, cl};
        ns++;
        i += cl;
    }
    int nh = 0;
    for (int i = 0; i + 1 < ns; i++) try_pair(v, s, sy, i, i + 1, h, &nh);
    while (nh > 0) {
        bigram b = heap_pop(h, &nh);
        sym *l = &sy[b.left], *r = &sy[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size || l->next != b.right) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sy[r->next].prev = b.left;
        try_pair(v, s, sy, l->prev, b.left, h, &nh);
        try_pair(v, s, sy, b.left, l->next, h, &nh);
    }
    for (int i = 0; i >= 0 && ns > 0; i = sy[i].next) {
        int id = tok_lookup(v, s + sy[i].start, sy[i].n);
        if (id >= 0) {
            emit(out, cap, n, id);
            continue;
        }
        for (uint32_t k = 0; k < sy[i].n; k++) {
            uint8_t c = (uint8_t)s[sy[i].start + k];
            int bid = v->kind == TOK_BPE ? tok_lookup(v, (const char *)&c, 1) : v->byte_id[c];
            if (bid < 0) bid = v->unk;
            if (bid >= 0) emit(out, cap, n, bid); /* llama.cpp drops a byte BPE has no token for */
        }
    }
}

/* See tokenizer.h. */
int tok_encode_spm(const tok_vocab *v, const char *text, size_t len, int space_prefix, int32_t *out, int cap, int *n,
                   cx_err *err) {
    size_t m = len + (space_prefix ? 1 : 0);
    if (m == 0) return 0;
    char *s = malloc(m);
    sym *sy = malloc(sizeof(sym) * m);
    bigram *h = malloc(sizeof(bigram) * 2 * m);
    if (!s || !sy || !h) {
        free(s); free(sy); free(h);
        return cx_fail(err, CX_ENOMEM, "out of memory tokenizing %zu bytes", len);
    }
    if (space_prefix) s[0] = ' ';
    memcpy(s + (space_prefix ? 1 : 0), text, len);
    merge_emit(v, s, m, 0, sy, h, out, cap, n);
    free(s);
    free(sy);
    free(h);
    return 0;
}

/* See tokenizer.h: pre-tokenize, then merge each word on its own. */
int tok_encode_bpe(const tok_vocab *v, const char *text, size_t len, int32_t *out, int cap, int *n, cx_err *err) {
    tok_span *w;
    int nw;
    int rc = tok_pre_split(v->pre, text, len, &w, &nw, err);
    if (rc) return rc;
    uint32_t longest = 0;
    for (int i = 0; i < nw; i++)
        if (w[i].len > longest) longest = w[i].len;
    sym *sy = malloc(sizeof(sym) * (longest + 1));
    bigram *h = malloc(sizeof(bigram) * 2 * (longest + 1));
    if (!sy || !h) {
        free(w); free(sy); free(h);
        return cx_fail(err, CX_ENOMEM, "out of memory tokenizing %zu bytes", len);
    }
    for (int i = 0; i < nw; i++) {
        const char *s = text + w[i].start;
        int id = v->ignore_merges ? tok_lookup(v, s, w[i].len) : -1;
        if (id >= 0) emit(out, cap, n, id);
        else merge_emit(v, s, w[i].len, 1, sy, h, out, cap, n);
    }
    free(w);
    free(sy);
    free(h);
    return 0;
}
