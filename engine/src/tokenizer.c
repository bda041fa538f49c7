/*
 * tokenizer.c - SentencePiece BPE as Llama uses it.
 *
 * Encoding: prepend the dummy-prefix space, split the text into UTF-8
 * characters (an invalid byte stands alone), then repeatedly merge the adjacent
 * pair whose concatenation is a vocabulary piece with the highest score (ties go
 * to the leftmost pair). Spans left that are not pieces fall back to byte
 * tokens <0xXX>. A priority queue keeps this O(n log n), as in SentencePiece.
 * Decoding concatenates pieces; byte tokens give raw bytes, so any byte string
 * round-trips exactly.
 */
#include "tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

/* FNV-1a: fast, good enough for short pieces. */
static uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static int mergeable(uint8_t type) { return type == TOK_NORMAL || type == TOK_USER; }

/* Id of the mergeable piece equal to s[0..n), or -1. */
static int lookup(const tok_vocab *v, const char *s, size_t n) {
    for (uint32_t i = hash_bytes(s, n) & v->ht_mask;; i = (i + 1) & v->ht_mask) {
        int32_t id = v->ht[i];
        if (id < 0) return -1;
        if (v->len[id] == n && memcmp(v->text + v->off[id], s, n) == 0) return id;
    }
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Parse "<0xXX>" into its byte value; -1 if the piece is not of that form. */
static int parse_byte_piece(const char *s, uint32_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int hi = hex_digit(s[3]), lo = hex_digit(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

int tok_build(tok_vocab *v, int n, const char *const *pieces, const uint32_t *lens, const float *scores,
              const uint8_t *types, int bos, int eos, int unk, cx_err *err) {
    memset(v, 0, sizeof *v);
    if (n <= 0 || n > (1 << 24)) return cx_fail(err, CX_ERANGE, "vocabulary size %d is out of range", n);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += lens[i];
    uint32_t cap = 1;
    while (cap < (uint32_t)n * 2) cap <<= 1;
    v->n = n;
    v->text = malloc(total ? total : 1);
    v->off = malloc(sizeof(uint32_t) * n);
    v->len = malloc(sizeof(uint32_t) * n);
    v->score = malloc(sizeof(float) * n);
    v->type = malloc(n);
    v->byte_val = calloc(n, 1);
    v->ht = malloc(sizeof(int32_t) * cap);
    if (!v->text || !v->off || !v->len || !v->score || !v->type || !v->byte_val || !v->ht || total > UINT32_MAX) {
        tok_free(v);
        return cx_fail(err, CX_ENOMEM, "out of memory for a vocabulary of %d pieces", n);
    }
    v->ht_mask = cap - 1;
    memset(v->ht, 0xff, sizeof(int32_t) * cap);
    for (int b = 0; b < 256; b++) v->byte_id[b] = -1;
    v->bos = bos;
    v->eos = eos;
    v->unk = unk;
    v->add_space_prefix = 1;
    size_t pos = 0;
    for (int i = 0; i < n; i++) {
        v->off[i] = (uint32_t)pos;
        v->len[i] = lens[i];
        memcpy(v->text + pos, pieces[i], lens[i]);
        pos += lens[i];
        v->score[i] = scores ? scores[i] : 0.0f;
        v->type[i] = types ? types[i] : TOK_NORMAL;
        if (v->type[i] == TOK_BYTE) {
            int b = parse_byte_piece(pieces[i], lens[i]);
            if (b < 0) {
                tok_free(v);
                return cx_fail(err, CX_EFORMAT, "byte token %d has piece '%.*s', expected <0xXX>", i,
                               (int)(lens[i] > 16 ? 16 : lens[i]), pieces[i]);
            }
            v->byte_val[i] = (uint8_t)b;
            if (v->byte_id[b] < 0) v->byte_id[b] = i;
        } else if (mergeable(v->type[i]) && lens[i] > 0) {
            /* Insert, letting a later duplicate piece win (as llama.cpp's map does). */
            uint32_t h = hash_bytes(pieces[i], lens[i]) & v->ht_mask;
            for (;; h = (h + 1) & v->ht_mask) {
                int32_t id = v->ht[h];
                if (id < 0 || (v->len[id] == lens[i] && !memcmp(v->text + v->off[id], pieces[i], lens[i]))) break;
            }
            v->ht[h] = i;
        }
    }
    for (int id = 0; id < 3; id++) {
        int t = id == 0 ? bos : id == 1 ? eos : unk;
        if (t < -1 || t >= n) {
            tok_free(v);
            return cx_fail(err, CX_ERANGE, "special token id %d is outside the vocabulary of %d", t, n);
        }
    }
    return 0;
}

void tok_free(tok_vocab *v) {
    free(v->text);
    free(v->off);
    free(v->len);
    free(v->score);
    free(v->type);
    free(v->byte_val);
    free(v->ht);
    memset(v, 0, sizeof *v);
}

/* Copy s replacing every U+2581 with a space; returns the new length. */
static uint32_t unescape_spaces(const char *s, uint64_t n, char *out) {
    uint32_t j = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (i + 2 < n && (uint8_t)s[i] == 0xE2 && (uint8_t)s[i + 1] == 0x96 && (uint8_t)s[i + 2] == 0x81) {
            out[j++] = ' ';
            i += 2;
        } else {
            out[j++] = s[i];
        }
    }
    return j;
}

int tok_load_gguf(tok_vocab *v, const gguf_ctx *g, const char *label, cx_err *err) {
    gguf_str model;
    if (gguf_get_str(g, "tokenizer.ggml.model", &model) != 1)
        return cx_fail(err, CX_EFORMAT, "%s: no tokenizer.ggml.model in the metadata", label);
    if (!gguf_str_eq(model, "llama"))
        return cx_fail(err, CX_EUNSUP, "%s: tokenizer model '%.*s' is not supported (only SentencePiece 'llama')",
                       label, (int)(model.len > 32 ? 32 : model.len), model.ptr);
    const gguf_kv *tk = gguf_find(g, "tokenizer.ggml.tokens");
    const gguf_kv *sc = gguf_find(g, "tokenizer.ggml.scores");
    const gguf_kv *ty = gguf_find(g, "tokenizer.ggml.token_type");
    if (!tk || tk->type != GGUF_ARR || tk->arr_type != GGUF_STR)
        return cx_fail(err, CX_EFORMAT, "%s: tokenizer.ggml.tokens is missing or not a string array", label);
    uint64_t n = tk->arr_n;
    if (n == 0 || n > (1 << 24)) return cx_fail(err, CX_ERANGE, "%s: vocabulary size %llu is out of range", label, (unsigned long long)n);
    if (sc && (sc->type != GGUF_ARR || sc->arr_n != n || (sc->arr_type != GGUF_F32 && sc->arr_type != GGUF_F64)))
        return cx_fail(err, CX_EFORMAT, "%s: tokenizer.ggml.scores must be %llu floats", label, (unsigned long long)n);
    if (ty && (ty->type != GGUF_ARR || ty->arr_n != n || ty->arr_type == GGUF_STR || ty->arr_type == GGUF_ARR ||
               ty->arr_type == GGUF_F32 || ty->arr_type == GGUF_F64))
        return cx_fail(err, CX_EFORMAT, "%s: tokenizer.ggml.token_type must be %llu integers", label, (unsigned long long)n);
    uint32_t bos = 1, eos = 2, unk = 0;
    if (gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &bos) < 0 || gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &eos) < 0 ||
        gguf_get_u32(g, "tokenizer.ggml.unknown_token_id", &unk) < 0)
        return cx_fail(err, CX_EFORMAT, "%s: a tokenizer special token id is not an integer", label);

    const char **pieces = malloc(sizeof(char *) * n);
    uint32_t *lens = malloc(sizeof(uint32_t) * n);
    float *scores = malloc(sizeof(float) * n);
    uint8_t *types = malloc(n);
    char *buf = malloc(g->size ? g->size : 1); /* pieces only shrink when unescaped */
    int rc = 0;
    if (!pieces || !lens || !scores || !types || !buf) {
        rc = cx_fail(err, CX_ENOMEM, "%s: out of memory loading the vocabulary", label);
        goto done;
    }
    const uint8_t *p = tk->arr_data;
    size_t pos = 0;
    for (uint64_t i = 0; i < n; i++) {
        gguf_str s = gguf_arr_next_str(&p);
        pieces[i] = buf + pos;
        lens[i] = unescape_spaces(s.ptr, s.len, buf + pos);
        pos += lens[i];
        scores[i] = sc ? (float)gguf_arr_num(sc, i) : 0.0f;
        double t = ty ? gguf_arr_num(ty, i) : TOK_NORMAL;
        types[i] = (t >= 1 && t <= 6) ? (uint8_t)t : TOK_NORMAL;
    }
    rc = tok_build(v, (int)n, pieces, lens, scores, types, (int)(bos > n ? n : bos), (int)(eos > n ? n : eos),
                   (int)(unk > n ? n : unk), err);
    if (rc) {
        char msg[sizeof err->msg];
        if (err) {
            memcpy(msg, err->msg, sizeof msg);
            cx_fail(err, rc, "%s: %s", label, msg);
        }
        goto done;
    }
    uint8_t asp;
    const gguf_kv *a = gguf_find(g, "tokenizer.ggml.add_space_prefix");
    if (a && a->type == GGUF_BOOL) {
        asp = (uint8_t)a->num.u;
        v->add_space_prefix = asp;
    }
done:
    free(pieces);
    free(lens);
    free(scores);
    free(types);
    free(buf);
    return rc;
}

int tok_load_llama2c(tok_vocab *v, const uint8_t *buf, uint64_t size, int n_vocab, const char *label, cx_err *err) {
    if (size < 4) return cx_fail(err, CX_EFORMAT, "%s: truncated tokenizer file (%llu bytes)", label, (unsigned long long)size);
    const char **pieces = malloc(sizeof(char *) * (size_t)n_vocab);
    uint32_t *lens = malloc(sizeof(uint32_t) * (size_t)n_vocab);
    float *scores = malloc(sizeof(float) * (size_t)n_vocab);
    uint8_t *types = malloc((size_t)n_vocab);
    int rc = 0;
    if (!pieces || !lens || !scores || !types) {
        rc = cx_fail(err, CX_ENOMEM, "%s: out of memory", label);
        goto done;
    }
    uint64_t pos = 4; /* skip max_token_length: we do not need it */
    for (int i = 0; i < n_vocab; i++) {
        if (size - pos < 8) {
            rc = cx_fail(err, CX_EFORMAT, "%s: truncated: token %d of %d is missing (vocab/model mismatch?)", label, i, n_vocab);
            goto done;
        }
        memcpy(&scores[i], buf + pos, 4);
        int32_t len = (int32_t)cx_rd32(buf + pos + 4);
        pos += 8;
        if (len < 0 || (uint64_t)len > size - pos) {
            rc = cx_fail(err, CX_EFORMAT, "%s: token %d has length %d beyond the end of the file", label, i, len);
            goto done;
        }
        pieces[i] = (const char *)buf + pos;
        lens[i] = (uint32_t)len;
        pos += (uint64_t)len;
        types[i] = i == 0 ? TOK_UNKNOWN : (i == 1 || i == 2) ? TOK_CONTROL
                 : parse_byte_piece(pieces[i], lens[i]) >= 0 ? TOK_BYTE : TOK_NORMAL;
    }
    if (pos != size) {
        rc = cx_fail(err, CX_EFORMAT, "%s: %llu bytes left after %d tokens: the tokenizer does not match the model's vocabulary",
                     label, (unsigned long long)(size - pos), n_vocab);
        goto done;
    }
    rc = tok_build(v, n_vocab, pieces, lens, scores, types, 1, 2, 0, err);
done:
    free(pieces);
    free(lens);
    free(scores);
    free(types);
    return rc;
}

/* ---------------------------------------------------------------- encode */

typedef struct sym { int prev, next; uint32_t start, n; } sym;
typedef struct bigram { float score; int left, right; uint32_t size; } bigram;

/* Max-heap order: higher score first, then leftmost. */
static int bigram_before(const bigram *a, const bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

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

/* Queue the pair (l, r) if their concatenation is a piece. */
static void try_pair(const tok_vocab *v, const char *s, const sym *sy, int l, int r, bigram *h, int *nh) {
    if (l < 0 || r < 0) return;
    uint32_t size = sy[l].n + sy[r].n;
    int id = lookup(v, s + sy[l].start, size);
    if (id < 0) return;
    bigram b = {v->score[id], l, r, size};
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

int tok_encode(const tok_vocab *v, const char *text, size_t len, int add_bos, int32_t *out, int cap, int *n_out,
               cx_err *err) {
    int n = 0;
    *n_out = 0;
    if (len > (1u << 28)) return cx_fail(err, CX_ERANGE, "text of %zu bytes is too long to tokenize", len);
#define EMIT(t) do { if (n < cap) out[n] = (t); n++; } while (0)
    if (add_bos && v->bos >= 0) EMIT(v->bos);
    if (len == 0) {
        *n_out = n;
        return n > cap ? cx_fail(err, CX_ERANGE, "token buffer of %d is too small (%d needed)", cap, n) : 0;
    }
    size_t m = len + (v->add_space_prefix ? 1 : 0);
    char *s = malloc(m);
    sym *sy = malloc(sizeof(sym) * m);
    bigram *h = malloc(sizeof(bigram) * 2 * m);
    if (!s || !sy || !h) {
        free(s); free(sy); free(h);
        return cx_fail(err, CX_ENOMEM, "out of memory tokenizing %zu bytes", len);
    }
    size_t o = 0;
    if (v->add_space_prefix) s[o++] = ' ';
    memcpy(s + o, text, len);
    int ns = 0;
    for (size_t i = 0; i < m;) {
        uint32_t cl = utf8_len((const unsigned char *)s + i, m - i);
        sy[ns].start = (uint32_t)i;
        sy[ns].n = cl;
        sy[ns].prev = ns - 1;
        sy[ns].next = i + cl < m ? ns + 1 : -1;
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
        int id = lookup(v, s + sy[i].start, sy[i].n);
        if (id >= 0) {
            EMIT(id);
        } else {
            for (uint32_t k = 0; k < sy[i].n; k++) {
                int bid = v->byte_id[(uint8_t)s[sy[i].start + k]];
                EMIT(bid >= 0 ? bid : v->unk);
            }
        }
    }
#undef EMIT
    free(s);
    free(sy);
    free(h);
    *n_out = n;
    if (n > cap) return cx_fail(err, CX_ERANGE, "token buffer of %d is too small (%d needed)", cap, n);
    return 0;
}

size_t tok_piece(const tok_vocab *v, int prev, int token, char tmp[2], const char **bytes) {
    *bytes = "";
    if (token < 0 || token >= v->n) return 0;
    uint8_t t = v->type[token];
    if (t == TOK_CONTROL || t == TOK_UNUSED) return 0;
    int at_start = v->add_space_prefix && (prev < 0 || prev == v->bos);
    if (t == TOK_BYTE) {
        if (at_start && v->byte_val[token] == ' ') return 0; /* the dummy prefix, byte-encoded */
        tmp[0] = (char)v->byte_val[token];
        tmp[1] = 0;
        *bytes = tmp;
        return 1;
    }
    const char *p = v->text + v->off[token];
    size_t n = v->len[token];
    /* The dummy prefix added at encode time is removed at the start of text. */
    if (at_start && n > 0 && p[0] == ' ') { p++; n--; }
    *bytes = p;
    return n;
}
