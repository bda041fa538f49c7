/*
 * tokenizer.c - vocabularies: building them (from GGUF metadata, a llama2.c
 * tokenizer.bin, or memory), splitting special tokens out of text before
 * encoding, and decoding.
 *
 * SentencePiece (tokenizer.ggml.model "llama"): a dummy-prefix space, then
 * score-ranked merges over UTF-8 characters with <0xXX> byte fallback.
 * Byte-level BPE ("gpt2"): the pre-tokenizer named by tokenizer.ggml.pre cuts
 * the text into words (tok_pre.c), each merged by rank (tok_encode.c). Either
 * way, special tokens (user-defined ones always, control ones when asked) are
 * matched in the text first, longest first, as llama.cpp does; decoding
 * concatenates pieces (control tokens give nothing), so any byte string
 * round-trips exactly.
 */
#include "tokenizer.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Tokens SentencePiece may form by merging (BPE looks every token up). */
static int mergeable(uint8_t type) { return type == TOK_NORMAL || type == TOK_USER; }

/* Tokens matched in the text before encoding. */
static int is_special(uint8_t type) { return type == TOK_CONTROL || type == TOK_USER || type == TOK_UNKNOWN; }

/* See tokenizer.h. */
int tok_lookup(const tok_vocab *v, const char *s, size_t n) {
    for (uint32_t i = tok_hash(s, n) & v->ht_mask;; i = (i + 1) & v->ht_mask) {
        int32_t id = v->ht[i];
        if (id < 0) return -1;
        if (v->len[id] == n && memcmp(v->text + v->off[id], s, n) == 0) return id;
    }
}

/* Value of a hexadecimal digit, or -1. */
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

/* A special token and its length, for sorting. */
typedef struct special_key { uint32_t len; int32_t id; } special_key;

/* Order of the special-token list: longer first, then lower id. */
static int special_cmp(const void *a, const void *b) {
    const special_key *x = a, *y = b;
    return x->len != y->len ? (x->len > y->len ? -1 : 1) : (x->id > y->id) - (x->id < y->id);
}

/* Sort v->special longest first; 0, or CX_ENOMEM. */
static int sort_specials(tok_vocab *v) {
    special_key *k = malloc(sizeof *k * (size_t)(v->n_special ? v->n_special : 1));
    if (!k) return CX_ENOMEM;
    for (int i = 0; i < v->n_special; i++) k[i] = (special_key){v->len[v->special[i]], v->special[i]};
    qsort(k, (size_t)v->n_special, sizeof *k, special_cmp);
    for (int i = 0; i < v->n_special; i++) v->special[i] = k[i].id;
    free(k);
    return 0;
}

/* Build v of `kind` from pieces already in their stored form (see
 * tokenizer.h): copies, the piece index, byte tokens and the special list. */
static int vocab_build(tok_vocab *v, int kind, int n, const char *const *pieces, const uint32_t *lens,
                       const float *scores, const uint8_t *types, int bos, int eos, int unk, cx_err *err) {
    memset(v, 0, sizeof *v);
    if (n <= 0 || n > (1 << 24)) return cx_fail(err, CX_ERANGE, "vocabulary size %d is out of range", n);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += lens[i];
    uint32_t cap = 1;
    while (cap < (uint32_t)n * 2) cap <<= 1;
    v->n = n;
    v->kind = kind;
    v->text = malloc(total ? total : 1);
    v->off = malloc(sizeof(uint32_t) * n);
    v->len = malloc(sizeof(uint32_t) * n);
    v->score = malloc(sizeof(float) * n);
    v->type = malloc(n);
    v->byte_val = calloc(n, 1);
    v->ht = malloc(sizeof(int32_t) * cap);
    v->special = malloc(sizeof(int32_t) * n);
    if (!v->text || !v->off || !v->len || !v->score || !v->type || !v->byte_val || !v->ht || !v->special ||
        total > UINT32_MAX) {
        tok_free(v);
        return cx_fail(err, CX_ENOMEM, "out of memory for a vocabulary of %d pieces", n);
    }
    v->ht_mask = cap - 1;
    memset(v->ht, 0xff, sizeof(int32_t) * cap);
    for (int b = 0; b < 256; b++) v->byte_id[b] = -1;
    v->bos = bos;
    v->eos = eos;
    v->unk = unk;
    v->eot = v->pad = -1;
    v->add_bos = 1;
    v->add_space_prefix = kind == TOK_SPM;
    size_t pos = 0;
    for (int i = 0; i < n; i++) {
        v->off[i] = (uint32_t)pos;
        v->len[i] = lens[i];
        memcpy(v->text + pos, pieces[i], lens[i]);
        pos += lens[i];
        v->score[i] = scores ? scores[i] : 0.0f;
        v->type[i] = types ? types[i] : TOK_NORMAL;
        if (is_special(v->type[i]) && lens[i] > 0) v->special[v->n_special++] = i;
        if (v->type[i] == TOK_BYTE) {
            int b = parse_byte_piece(pieces[i], lens[i]);
            if (b < 0) {
                tok_free(v);
                return cx_fail(err, CX_EFORMAT, "byte token %d has piece '%.*s', expected <0xXX>", i,
                               (int)(lens[i] > 16 ? 16 : lens[i]), pieces[i]);
            }
            v->byte_val[i] = (uint8_t)b;
            if (v->byte_id[b] < 0) v->byte_id[b] = i;
        } else if ((kind == TOK_BPE || mergeable(v->type[i])) && lens[i] > 0) {
            /* Insert, letting a later duplicate piece win (as llama.cpp's map does). */
            uint32_t h = tok_hash(pieces[i], lens[i]) & v->ht_mask;
            for (;; h = (h + 1) & v->ht_mask) {
                int32_t id = v->ht[h];
                if (id < 0 || (v->len[id] == lens[i] && !memcmp(v->text + v->off[id], pieces[i], lens[i]))) break;
            }
            v->ht[h] = i;
        }
    }
    if (sort_specials(v)) {
        tok_free(v);
        return cx_fail(err, CX_ENOMEM, "out of memory for a vocabulary of %d pieces", n);
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

/* See tokenizer.h. */
int tok_build(tok_vocab *v, int n, const char *const *pieces, const uint32_t *lens, const float *scores,
              const uint8_t *types, int bos, int eos, int unk, cx_err *err) {
    return vocab_build(v, TOK_SPM, n, pieces, lens, scores, types, bos, eos, unk, err);
}

/* See tokenizer.h: normal tokens are unmapped to their bytes (a token using
 * characters outside the mapping keeps its text: it can only be produced as a
 * whole); user-defined and control tokens keep their text, as written. */
int tok_build_bpe(tok_vocab *v, int n, const char *const *pieces, const uint32_t *lens, const uint8_t *types,
                  int n_merges, const char *const *merges, const uint32_t *merge_lens, const char *pre,
                  size_t pre_len, int bos, int eos, cx_err *err) {
    memset(v, 0, sizeof *v);
    if (n <= 0 || n > (1 << 24)) return cx_fail(err, CX_ERANGE, "vocabulary size %d is out of range", n);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += lens[i];
    char *buf = malloc(total ? total : 1);
    const char **p = malloc(sizeof(char *) * (size_t)n);
    uint32_t *l = malloc(sizeof(uint32_t) * (size_t)n);
    int rc = 0;
    if (!buf || !p || !l) {
        rc = cx_fail(err, CX_ENOMEM, "out of memory for a vocabulary of %d pieces", n);
        goto done;
    }
    size_t pos = 0;
    for (int i = 0; i < n; i++) {
        uint8_t t = types ? types[i] : TOK_NORMAL;
        int64_t k = t == TOK_NORMAL ? tok_bpe_unmap(pieces[i], lens[i], buf + pos) : -1;
        if (k < 0) {
            memcpy(buf + pos, pieces[i], lens[i]);
            k = lens[i];
        }
        p[i] = buf + pos;
        l[i] = (uint32_t)k;
        pos += (size_t)k;
    }
    int ignore_merges = 0, add_bos = 0;
    tok_pre *tp = NULL;
    if ((rc = tok_pre_new(pre, pre_len, &tp, &ignore_merges, &add_bos, err))) goto done;
    if ((rc = vocab_build(v, TOK_BPE, n, p, l, NULL, types, bos, eos, -1, err))) {
        tok_pre_free(tp);
        goto done;
    }
    v->pre = tp;
    v->ignore_merges = ignore_merges;
    v->add_bos = add_bos;
    if ((rc = tok_merges_build(&v->merges, n_merges, merges, merge_lens, err))) tok_free(v);
done:
    free(buf);
    free(p);
    free(l);
    return rc;
}

/* See tokenizer.h. */
void tok_free(tok_vocab *v) {
    free(v->text);
    free(v->off);
    free(v->len);
    free(v->score);
    free(v->type);
    free(v->byte_val);
    free(v->ht);
    free(v->special);
    tok_merges_free(&v->merges);
    tok_pre_free(v->pre);
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

/* A special token id key: absent leaves *id alone; out of range disables it
 * (-1), as llama.cpp does with a bad id. */
static int special_id(const gguf_ctx *g, const char *key, int n, int *id, const char *label, cx_err *err) {
    uint32_t u;
    int r = gguf_get_u32(g, key, &u);
    if (r < 0) return cx_fail(err, CX_EFORMAT, "%s: %s is not an integer", label, key);
    if (r == 1) *id = u < (uint32_t)n ? (int)u : -1;
    return 0;
}

/* The id of the token whose stored piece is z, or -1. */
static int find_piece(const tok_vocab *v, const char *z) {
    size_t n = strlen(z);
    for (int i = 0; i < v->n; i++)
        if (v->len[i] == n && !memcmp(v->text + v->off[i], z, n)) return i;
    return -1;
}

/* See tokenizer.h. */
int tok_load_gguf(tok_vocab *v, const gguf_ctx *g, const char *label, cx_err *err) {
    gguf_str model;
    if (gguf_get_str(g, "tokenizer.ggml.model", &model) != 1)
        return cx_fail(err, CX_EFORMAT, "%s: no tokenizer.ggml.model in the metadata", label);
    int bpe = gguf_str_eq(model, "gpt2");
    if (!bpe && !gguf_str_eq(model, "llama"))
        return cx_fail(err, CX_EUNSUP,
                       "%s: tokenizer model '%.*s' is not supported (SentencePiece 'llama' and byte-level BPE 'gpt2' are)",
                       label, (int)(model.len > 32 ? 32 : model.len), model.ptr);
    const gguf_kv *tk = gguf_find(g, "tokenizer.ggml.tokens");
    const gguf_kv *sc = gguf_find(g, "tokenizer.ggml.scores");
    const gguf_kv *ty = gguf_find(g, "tokenizer.ggml.token_type");
    const gguf_kv *mg = gguf_find(g, "tokenizer.ggml.merges");
    if (!tk || tk->type != GGUF_ARR || tk->arr_type != GGUF_STR)
        return cx_fail(err, CX_EFORMAT, "%s: tokenizer.ggml.tokens is missing or not a string array", label);
    uint64_t n = tk->arr_n;
    if (n == 0 || n > (1 << 24)) return cx_fail(err, CX_ERANGE, "%s: vocabulary size %llu is out of range", label, (unsigned long long)n);
    if (sc && (sc->type != GGUF_ARR || sc->arr_n != n || (sc->arr_type != GGUF_F32 && sc->arr_type != GGUF_F64)))
        return cx_fail(err, CX_EFORMAT, "%s: tokenizer.ggml.scores must be %llu floats", label, (unsigned long long)n);
    if (ty && (ty->type != GGUF_ARR || ty->arr_n != n || ty->arr_type == GGUF_STR || ty->arr_type == GGUF_ARR ||
               ty->arr_type == GGUF_F32 || ty->arr_type == GGUF_F64))
        return cx_fail(err, CX_EFORMAT, "%s: tokenizer.ggml.token_type must be %llu integers", label, (unsigned long long)n);
    if (bpe && (!mg || mg->type != GGUF_ARR || mg->arr_type != GGUF_STR || mg->arr_n > (1 << 24)))
        return cx_fail(err, CX_EFORMAT, "%s: tokenizer.ggml.merges is missing or not a string array (byte-level BPE needs it)",
                       label);
    gguf_str pre = {"", 0};
    if (bpe && gguf_get_str(g, "tokenizer.ggml.pre", &pre) < 0)
        return cx_fail(err, CX_EFORMAT, "%s: tokenizer.ggml.pre is not a string", label);

    uint64_t nm = bpe ? mg->arr_n : 0;
    const char **pieces = malloc(sizeof(char *) * n);
    uint32_t *lens = malloc(sizeof(uint32_t) * n);
    float *scores = malloc(sizeof(float) * n);
    uint8_t *types = malloc(n);
    const char **mpieces = malloc(sizeof(char *) * (nm + 1));
    uint32_t *mlens = malloc(sizeof(uint32_t) * (nm + 1));
    uint64_t text_bytes = 0; /* SentencePiece pieces only shrink when unescaped */
    const uint8_t *p = tk->arr_data;
    for (uint64_t i = 0; i < n && !bpe; i++) text_bytes += gguf_arr_next_str(&p).len;
    char *buf = malloc(text_bytes ? text_bytes : 1);
    int rc = 0;
    if (!pieces || !lens || !scores || !types || !mpieces || !mlens || !buf) {
        rc = cx_fail(err, CX_ENOMEM, "%s: out of memory loading the vocabulary", label);
        goto done;
    }
    p = tk->arr_data;
    size_t pos = 0;
    for (uint64_t i = 0; i < n; i++) {
        gguf_str s = gguf_arr_next_str(&p);
        pieces[i] = bpe ? s.ptr : buf + pos;
        lens[i] = bpe ? (uint32_t)s.len : unescape_spaces(s.ptr, s.len, buf + pos);
        pos += bpe ? 0 : lens[i];
        scores[i] = sc ? (float)gguf_arr_num(sc, i) : 0.0f;
        double t = ty ? gguf_arr_num(ty, i) : TOK_NORMAL;
        types[i] = (t >= 1 && t <= 6) ? (uint8_t)t : TOK_NORMAL;
    }
    p = bpe ? mg->arr_data : NULL;
    for (uint64_t i = 0; i < nm; i++) {
        gguf_str s = gguf_arr_next_str(&p);
        mpieces[i] = s.ptr;
        mlens[i] = (uint32_t)s.len;
    }
    int bos = bpe ? -1 : 1, eos = bpe ? -1 : 2, unk = bpe ? -1 : 0;
    if ((rc = special_id(g, "tokenizer.ggml.bos_token_id", (int)n, &bos, label, err)) ||
        (rc = special_id(g, "tokenizer.ggml.eos_token_id", (int)n, &eos, label, err)) ||
        (rc = special_id(g, "tokenizer.ggml.unknown_token_id", (int)n, &unk, label, err)))
        goto done;
    rc = bpe ? tok_build_bpe(v, (int)n, pieces, lens, types, (int)nm, mpieces, mlens, pre.ptr, pre.len, bos, eos, err)
             : tok_build(v, (int)n, pieces, lens, scores, types, bos, eos, unk, err);
    if (rc) {
        char msg[sizeof err->msg];
        if (err) {
            memcpy(msg, err->msg, sizeof msg);
            cx_fail(err, rc, "%s: %s", label, msg);
        }
        goto done;
    }
    if ((rc = special_id(g, "tokenizer.ggml.eot_token_id", (int)n, &v->eot, label, err)) ||
        (rc = special_id(g, "tokenizer.ggml.padding_token_id", (int)n, &v->pad, label, err))) {
        tok_free(v);
        goto done;
    }
    if (v->eot < 0) { /* as llama.cpp: the end-of-turn token by its text when the file does not say */
        static const char *eot_names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>"};
        for (size_t i = 0; i < sizeof eot_names / sizeof *eot_names && v->eot < 0; i++) v->eot = find_piece(v, eot_names[i]);
    }
    /* Harmony (gpt-oss): an assistant turn ends with <|return|> (EOS) or
     * <|call|> (a tool call); <|end|> only ends a message within it (analysis,
     * then final), so it must not end generation. As llama.cpp does for a
     * vocabulary with both: EOT is <|call|> where EOS is <|return|>, else
     * <|return|>; never <|end|>. */
    int ret = find_piece(v, "<|return|>"), call = find_piece(v, "<|call|>");
    if (ret >= 0 && call >= 0) v->eot = v->eos == ret ? call : ret;
    const gguf_kv *a = gguf_find(g, "tokenizer.ggml.add_space_prefix");
    if (a && a->type == GGUF_BOOL) v->add_space_prefix = (int)a->num.u;
    a = gguf_find(g, "tokenizer.ggml.add_bos_token");
    if (a && a->type == GGUF_BOOL) v->add_bos = (int)a->num.u;
done:
    free(pieces);
    free(lens);
    free(scores);
    free(types);
    free(mpieces);
    free(mlens);
    free(buf);
    return rc;
}

/* See tokenizer.h. */
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

/* A piece of the text: a special token, or raw text to encode. */
typedef struct frag { int token; uint32_t start, len; } frag;

/* Cut raw fragments around every occurrence of the special tokens allowed by
 * `flags`, longest token first (llama.cpp's order); the array *f of *nf
 * fragments grows as needed (*cap). 0, or -1 when out of memory. */
static int split_specials(const tok_vocab *v, const char *text, int flags, frag **fp, int *nf, int *cap) {
    for (int k = 0; k < v->n_special; k++) {
        int id = v->special[k];
        if (v->type[id] != TOK_USER && !(flags & TOK_PARSE_SPECIAL)) continue;
        const char *piece = v->text + v->off[id];
        uint32_t pl = v->len[id];
        for (int i = 0; i < *nf; i++) {
            frag *f = *fp;
            if (f[i].token >= 0 || f[i].len < pl) continue;
            const char *hit = memmem(text + f[i].start, f[i].len, piece, pl);
            if (!hit) continue;
            if (*nf + 2 > *cap) { /* each cut adds at most two fragments */
                frag *g = realloc(f, sizeof(frag) * (size_t)*cap * 2);
                if (!g) return -1;
                *fp = f = g;
                *cap *= 2;
            }
            uint32_t at = (uint32_t)(hit - text), end = f[i].start + f[i].len;
            frag before = {-1, f[i].start, at - f[i].start}, tok = {id, at, pl}, after = {-1, at + pl, end - at - pl};
            int add = (before.len > 0) + 1 + (after.len > 0);
            memmove(&f[i + add], &f[i + 1], sizeof(frag) * (size_t)(*nf - i - 1));
            int j = i;
            if (before.len) f[j++] = before;
            f[j++] = tok;
            if (after.len) f[j++] = after; /* examined next: more hits of the same token */
            *nf += add - 1;
            i = j - 2; /* the loop's i++ lands on `after` */
        }
    }
    return 0;
}

/* See tokenizer.h. */
int tok_encode(const tok_vocab *v, const char *text, size_t len, int flags, int32_t *out, int cap, int *n_out,
               cx_err *err) {
    int n = 0;
    *n_out = 0;
    if (len > (1u << 28)) return cx_fail(err, CX_ERANGE, "text of %zu bytes is too long to tokenize", len);
    if ((flags & TOK_ADD_BOS) && v->add_bos && v->bos >= 0) {
        if (n < cap) out[n] = v->bos;
        n++;
    }
    int rc = 0;
    if (len > 0) {
        int nf = 1, fcap = 16;
        frag *f = malloc(sizeof(frag) * (size_t)fcap);
        if (f) f[0] = (frag){-1, 0, (uint32_t)len};
        if (!f || split_specials(v, text, flags, &f, &nf, &fcap)) {
            free(f);
            return cx_fail(err, CX_ENOMEM, "out of memory tokenizing %zu bytes", len);
        }
        int prev_special = 1; /* SentencePiece's dummy prefix: at the start and after a special token */
        for (int i = 0; i < nf && !rc; i++) {
            if (f[i].token >= 0) {
                if (n < cap) out[n] = f[i].token;
                n++;
                prev_special = 1;
                continue;
            }
            if (v->kind == TOK_BPE)
                rc = tok_encode_bpe(v, text + f[i].start, f[i].len, out, cap, &n, err);
            else
                rc = tok_encode_spm(v, text + f[i].start, f[i].len, v->add_space_prefix && prev_special, out, cap, &n, err);
            prev_special = 0;
        }
        free(f);
    }
    if (rc) return rc;
    *n_out = n;
    if (n > cap) return cx_fail(err, CX_ERANGE, "token buffer of %d is too small (%d needed)", cap, n);
    return 0;
}

/* See cx_token_piece in cortex.h. */
size_t tok_piece(const tok_vocab *v, int prev, int token, char tmp[2], const char **bytes) {
    *bytes = "";
    if (token < 0 || token >= v->n) return 0;
    uint8_t t = v->type[token];
    if (t == TOK_CONTROL || t == TOK_UNUSED) return 0;
    /* where encoding put the dummy prefix: before the first piece of raw text
     * at the start and after a special token (never before a special token) */
    int at_start = v->add_space_prefix && !is_special(t) &&
                   (prev < 0 || prev == v->bos || (prev < v->n && is_special(v->type[prev])));
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
