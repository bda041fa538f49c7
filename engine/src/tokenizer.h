/*
 * tokenizer.h - the vocabulary, encoder and decoder: SentencePiece BPE
 * (tokenizer.ggml.model "llama", llama2.c tokenizer.bin) and byte-level BPE
 * (tokenizer.ggml.model "gpt2": GPT-2, Llama 3, Qwen 2, StarCoder, ...).
 *
 * Pieces are stored as the bytes they stand for: SentencePiece's U+2581 ("▁")
 * becomes a plain space, as llama2.c's tokenizer.bin has it, and a byte-level
 * BPE token's GPT-2 byte-to-unicode characters become the raw bytes again
 * (tok_bpe.c). Encoding therefore works on the user's own bytes, and decoding
 * is a concatenation.
 */
#ifndef CX_TOKENIZER_H
#define CX_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "cortex.h"
#include "gguf.h"
#include "tok_pre.h"

/* Token types as GGUF numbers them (tokenizer.ggml.token_type). */
enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER = 4, TOK_UNUSED = 5, TOK_BYTE = 6 };
/* Tokenizer models. */
enum { TOK_SPM = 0, TOK_BPE = 1 };

/* Ranked BPE merges (tokenizer.ggml.merges), as raw bytes: pair (a, b) -> rank. */
typedef struct tok_merges {
    int n;
    char *text;          /* a then b of every merge, back to back */
    uint32_t *off, *len_a, *len_b;
    int32_t *ht;         /* open addressing: merge index, -1 empty */
    uint32_t ht_mask;
} tok_merges;

typedef struct tok_vocab {
    int n;
    int kind;           /* TOK_SPM or TOK_BPE */
    char *text;         /* all pieces back to back */
    uint32_t *off, *len;
    float *score;
    uint8_t *type;
    uint8_t *byte_val;  /* for TOK_BYTE tokens: the byte */
    int byte_id[256];   /* token of each byte, -1 if the vocab lacks it */
    int bos, eos, unk, eot, pad; /* -1 when absent */
    int add_bos;        /* the vocabulary wants BOS first (tokenizer.ggml.add_bos_token) */
    int add_space_prefix;
    int32_t *ht;        /* open-addressing table: piece -> id (SPM: mergeable pieces only; BPE: every token) */
    uint32_t ht_mask;
    int32_t *special;   /* tokens split out of text before encoding (USER, CONTROL, UNKNOWN), longest first */
    int n_special;
    /* byte-level BPE only */
    tok_merges merges;
    tok_pre *pre;
    int ignore_merges;  /* a word that is a whole token is taken as is (Llama 3) */
} tok_vocab;

/* Build from GGUF tokenizer.ggml.* metadata (model "llama" or "gpt2"). */
int tok_load_gguf(tok_vocab *v, const gguf_ctx *g, const char *label, cx_err *err);
/* Build from a llama2.c tokenizer.bin image of n_vocab tokens. */
int tok_load_llama2c(tok_vocab *v, const uint8_t *buf, uint64_t size, int n_vocab, const char *label, cx_err *err);
/* Build a SentencePiece vocabulary from pieces already in memory (synthetic
 * vocabularies, tests, fuzzing). */
int tok_build(tok_vocab *v, int n, const char *const *pieces, const uint32_t *lens, const float *scores,
              const uint8_t *types, int bos, int eos, int unk, cx_err *err);
/* Build a byte-level BPE vocabulary: GPT-2-mapped token strings, "a b" merge
 * strings in rank order, and the pre-tokenizer name (tokenizer.ggml.pre). */
int tok_build_bpe(tok_vocab *v, int n, const char *const *pieces, const uint32_t *lens, const uint8_t *types,
                  int n_merges, const char *const *merges, const uint32_t *merge_lens, const char *pre,
                  size_t pre_len, int bos, int eos, cx_err *err);
void tok_free(tok_vocab *v);

/* Flags of tok_encode (the values of cortex.h's CX_TOKENIZE_*). */
enum { TOK_ADD_BOS = 1, TOK_PARSE_SPECIAL = 2 };
int tok_encode(const tok_vocab *v, const char *text, size_t len, int flags, int32_t *out, int cap, int *n_out,
               cx_err *err);
/* See cx_token_piece in cortex.h. */
size_t tok_piece(const tok_vocab *v, int prev, int token, char tmp[2], const char **bytes);

/* ---- internals shared by tokenizer.c, tok_bpe.c and tok_encode.c ---- */

/* FNV-1a over n bytes. */
uint32_t tok_hash(const char *s, size_t n);
/* Id of the token whose piece is s[0..n) (see tok_vocab.ht), or -1. */
int tok_lookup(const tok_vocab *v, const char *s, size_t n);
/* Rank of the merge (s[0..na), s[na..na+nb)), or -1. */
int tok_merge_rank(const tok_merges *m, const char *s, size_t na, size_t nb);
/* Decode a GPT-2 byte-to-unicode string into the bytes it stands for; returns
 * the length written to out (at most n), or -1 if a character is not one of
 * the 256 the mapping uses. */
int64_t tok_bpe_unmap(const char *s, size_t n, char *out);
/* Parse tokenizer.ggml.merges strings into m (ranks = order). */
int tok_merges_build(tok_merges *m, int n, const char *const *merges, const uint32_t *lens, cx_err *err);
void tok_merges_free(tok_merges *m);
/* Encode one piece of text that holds no special token. */
int tok_encode_spm(const tok_vocab *v, const char *text, size_t len, int space_prefix, int32_t *out, int cap, int *n,
                   cx_err *err);
int tok_encode_bpe(const tok_vocab *v, const char *text, size_t len, int32_t *out, int cap, int *n, cx_err *err);

#endif
