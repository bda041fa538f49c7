/*
 * tok_pre.h - the pre-tokenizers of byte-level BPE vocabularies: the Unicode
 * regular expressions (PCRE2, UTF mode with Unicode properties) that cut text
 * into words before merging, chosen by the GGUF key tokenizer.ggml.pre.
 */
#ifndef CX_TOK_PRE_H
#define CX_TOK_PRE_H

#include <stddef.h>
#include <stdint.h>

#include "cortex.h"

typedef struct tok_pre tok_pre;

/* A piece of text: [start, start + len). */
typedef struct tok_span {
    uint32_t start, len;
} tok_span;

/* Compile the pre-tokenizer named `name` (tokenizer.ggml.pre; NULL or "" means
 * "default"). *ignore_merges and *add_bos get the vocabulary defaults that go
 * with the name (llama-bpe: both 1). An unknown name is CX_EUNSUP naming it. */
int tok_pre_new(const char *name, size_t name_len, tok_pre **out, int *ignore_merges, int *add_bos, cx_err *err);
void tok_pre_free(tok_pre *p);
/* The canonical name of the pre-tokenizer's regex set ("gpt-2", "llama-bpe", ...). */
const char *tok_pre_name(const tok_pre *p);
/* The k-th name tok_pre_new accepts (k from 0), NULL past the last (tests). */
const char *tok_pre_name_at(int k);

/*
 * Split text[0..len) into words: each regex of the set in turn cuts every piece
 * left by the previous one into its matches and the text between them, so the
 * words cover the text exactly, in order, none empty. *out gets a malloc'd
 * array of *n spans (the caller frees it). Bytes that are not valid UTF-8 match
 * nothing and end up in words of their own.
 */
int tok_pre_split(const tok_pre *p, const char *text, size_t len, tok_span **out, int *n, cx_err *err);

#endif
