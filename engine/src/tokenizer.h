/*
 * tokenizer.h - SentencePiece BPE vocabulary, encoder and decoder.
 *
 * Pieces are stored with SentencePiece's U+2581 ("▁") already turned into a
 * plain space, as llama2.c's tokenizer.bin does, so both file kinds load into
 * the same form and encoding works on the user's own bytes.
 */
#ifndef CX_TOKENIZER_H
#define CX_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "cortex.h"
#include "gguf.h"

/* Token types as GGUF numbers them (tokenizer.ggml.token_type). */
enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER = 4, TOK_UNUSED = 5, TOK_BYTE = 6 };

typedef struct tok_vocab {
    int n;
    char *text;         /* all pieces back to back */
    uint32_t *off, *len;
    float *score;
    uint8_t *type;
    uint8_t *byte_val;  /* for TOK_BYTE tokens: the byte */
    int byte_id[256];   /* token of each byte, -1 if the vocab lacks it */
    int bos, eos, unk;
    int add_space_prefix;
    int32_t *ht;        /* open-addressing table: mergeable piece -> id */
    uint32_t ht_mask;
} tok_vocab;

/* Build from GGUF tokenizer.ggml.* metadata (model "llama" only). */
int tok_load_gguf(tok_vocab *v, const gguf_ctx *g, const char *label, cx_err *err);
/* Build from a llama2.c tokenizer.bin image of n_vocab tokens. */
int tok_load_llama2c(tok_vocab *v, const uint8_t *buf, uint64_t size, int n_vocab, const char *label, cx_err *err);
/* Build from pieces already in memory (synthetic vocabularies, tests, fuzzing). */
int tok_build(tok_vocab *v, int n, const char *const *pieces, const uint32_t *lens, const float *scores,
              const uint8_t *types, int bos, int eos, int unk, cx_err *err);
void tok_free(tok_vocab *v);

int tok_encode(const tok_vocab *v, const char *text, size_t len, int add_bos, int32_t *out, int cap,
               int *n_out, cx_err *err);
/* See cx_token_piece in cortex.h. */
size_t tok_piece(const tok_vocab *v, int prev, int token, char tmp[2], const char **bytes);

#endif
