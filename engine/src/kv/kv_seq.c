/*
 * kv_seq.c - see kv_seq.h.
 */
#include "kv_seq.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "kv_codec.h"

/* See kv_seq.h: room for ceil(n_ctx / KV_BLOCK) blocks. */
int kv_seq_init(kv_seq *s, int n_ctx) {
    memset(s, 0, sizeof *s);
    assert(n_ctx > 0);
    s->n_ctx = n_ctx;
    s->max_blocks = (n_ctx + KV_BLOCK - 1) / KV_BLOCK;
    s->table = malloc(sizeof(int32_t) * (size_t)s->max_blocks);
    s->tokens = malloc(sizeof(int32_t) * (size_t)n_ctx);
    if (!s->table || !s->tokens) {
        kv_seq_free(s);
        return -1;
    }
    return 0;
}

/* See kv_seq.h. */
void kv_seq_free(kv_seq *s) {
    free(s->table);
    free(s->tokens);
    memset(s, 0, sizeof *s);
}

/* See kv_seq.h. */
void kv_seq_push(kv_seq *s, int32_t id) {
    assert(s->n_blocks < s->max_blocks && id >= 0);
    s->table[s->n_blocks++] = id;
}
