/*
 * test_pass.c - the pass driver's multi-token segments and rollback
 * (pass.h), the primitives speculative decoding verifies drafts with:
 *   - one pass over two sessions' segments of several tokens each, every
 *     position's logits asked for (n_out = T), gives each position's logits
 *     bit for bit as a fresh session fed one token per cx_eval (f32);
 *   - pass_rollback keeps a prefix of the draft (inside a block, on a block
 *     boundary, none of it, all of it); evaluating on from there gives what
 *     a fresh session gives for the kept tokens followed by the new ones;
 *   - on a shared cache with the prefix cache on, a rolled-back block is not
 *     taken as the prefix of the tokens it no longer holds;
 *   - pass_chunk: the hot tier's room from a position inside a block.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "pass.h"

/* Token i of sequence q's stream (prompt, then draft, then what follows). */
static int32_t tok(int q, int i, int V) { return (int32_t)((i * 7919 + 131 * q + 13) % V); }

/* Logits of every position of `n` tokens toks[] in a fresh session, one
 * cx_eval per token (each pass's one logits row: a path apart from the
 * multi-token segments under test): [n][V]. */
static float *fresh_all(cx_model *m, const int32_t *toks, int n) {
    int V = cx_model_get_info(m)->n_vocab;
    float *all = malloc(sizeof(float) * (size_t)n * (size_t)V);
    cx_session *s = NULL;
    cx_err err = {0};
    cx_session_params sp = cx_session_defaults();
    int ok = all && cx_session_new_ex(m, &sp, &s, &err) == 0;
    for (int i = 0; ok && i < n; i++) {
        const float *l = NULL;
        ok = cx_eval(s, toks + i, 1, &l, &err) == 0;
        if (ok) memcpy(all + (size_t)i * (size_t)V, l, sizeof(float) * (size_t)V);
    }
    CHECK(ok, "fresh session: %s", err.msg);
    cx_session_free(s);
    if (!ok) free(all), all = NULL;
    return all;
}

/* Sessions a and b prefilled with plen[q] tokens, then one pass of draft[q]
 * tokens each with every position's logits; checked against fresh sessions.
 * Then each keeps keep[q] of its draft (pass_rollback) and evaluates `more`
 * new tokens, checked against a fresh session of the kept stream. */
static void check_draft(cx_model *m, cx_kv_cache *shared, const int plen[2], const int draft[2], const int keep[2],
                        const char *what) {
    int V = cx_model_get_info(m)->n_vocab, more = 5;
    cx_err err = {0};
    cx_session *s[2] = {0};
    cx_session_params sp = cx_session_defaults();
    sp.cache = shared;
    int32_t stream[2][128], tokens[64];
    for (int q = 0; q < 2; q++) {
        for (int i = 0; i < 128; i++) stream[q][i] = tok(q, i, V);
        CHECK(cx_session_new_ex(m, &sp, &s[q], &err) == 0 && cx_eval(s[q], stream[q], plen[q], NULL, &err) == 0,
              "%s: prefill %d: %s", what, q, err.msg);
    }
    fwd_ws ws;
    CHECK(fwd_ws_init(&ws, m, 64, 64, 2, &err) == 0, "%s: workspace: %s", what, err.msg);
    float *logits = malloc(sizeof(float) * 64 * (size_t)V);
    fwd_seg seg[2];
    cx_session *owner[2];
    kv_seq *seqs[2];
    int pos[2], T[2], rows = 0;
    pass_scratch sc = {seqs, pos, T};
    int first = (uintptr_t)s[0]->cache <= (uintptr_t)s[1]->cache ? 0 : 1; /* segments sorted by cache */
    for (int g = 0; g < 2; g++) {
        int q = g == 0 ? first : 1 - first;
        cx_session *x = s[q];
        owner[g] = x;
        seg[g] = (fwd_seg){x->cache, &x->seq, &x->view, x->pos, draft[q], rows, rows, draft[q], x->lora, x->n_lora};
        memcpy(tokens + rows, stream[q] + plen[q], sizeof(int32_t) * (size_t)draft[q]);
        rows += draft[q];
    }
    pthread_mutex_lock(&s[0]->cache->lock);
    if (s[1]->cache != s[0]->cache) pthread_mutex_lock(&s[1]->cache->lock);
    int rc = pass_run(&ws, seg, 2, owner, tokens, rows, logits, &sc, &err);
    if (s[1]->cache != s[0]->cache) pthread_mutex_unlock(&s[1]->cache->lock);
    pthread_mutex_unlock(&s[0]->cache->lock);
    CHECK(rc == 0, "%s: the draft pass: %s", what, err.msg);
    for (int g = 0; g < 2 && rc == 0; g++) {
        int q = owner[g] == s[0] ? 0 : 1, n = plen[q] + draft[q];
        float *ref = fresh_all(m, stream[q], n);
        int same = ref != NULL;
        for (int j = 0; same && j < draft[q]; j++)
            same = !memcmp(logits + (size_t)(seg[g].out + j) * (size_t)V,
                           ref + (size_t)(plen[q] + j) * (size_t)V, sizeof(float) * (size_t)V);
        CHECK(same, "%s: sequence %d's %d draft positions' logits equal a fresh session's", what, q, draft[q]);
        CHECK(cx_session_pos(s[q]) == n, "%s: sequence %d at %d after the pass (want %d)", what, q,
              cx_session_pos(s[q]), n);
        free(ref);
    }
    for (int q = 0; q < 2 && rc == 0; q++) { /* keep a prefix of the draft, then go on */
        int n = plen[q] + keep[q];
        pthread_mutex_lock(&s[q]->cache->lock);
        pass_rollback(s[q], n);
        pthread_mutex_unlock(&s[q]->cache->lock);
        CHECK(cx_session_pos(s[q]) == n, "%s: sequence %d rolled back to %d", what, q, n);
        for (int i = 0; i < more; i++) stream[q][n + i] = tok(q + 7, i, V); /* new tokens, not the draft's */
        float *got = malloc(sizeof(float) * (size_t)more * (size_t)V), *ref = fresh_all(m, stream[q], n + more);
        int ok = got && cx_eval_all(s[q], stream[q] + n, more, got, &err) == 0;
        CHECK(ok, "%s: evaluating on after the rollback: %s", what, err.msg);
        CHECK(ok && ref && !memcmp(got, ref + (size_t)n * (size_t)V, sizeof(float) * (size_t)more * (size_t)V),
              "%s: sequence %d kept %d of %d draft tokens: the logits after it equal a fresh session's", what, q,
              keep[q], draft[q]);
        free(got);
        free(ref);
    }
    if (shared && rc == 0) { /* the rolled-back blocks are not the old draft's prefix any more */
        cx_session *c = NULL;
        int q = 0, n = plen[q] + draft[q];
        float *got = malloc(sizeof(float) * (size_t)V), *ref = NULL;
        int32_t old[128];
        for (int i = 0; i < n + 1; i++) old[i] = tok(q, i, V);
        ref = fresh_all(m, old, n + 1);
        const float *l = NULL;
        int ok = cx_session_new_ex(m, &sp, &c, &err) == 0 && cx_eval(c, old, n + 1, &l, &err) == 0;
        CHECK(ok && ref && !memcmp(l, ref + (size_t)n * (size_t)V, sizeof(float) * (size_t)V),
              "%s: the original stream through the prefix cache equals a fresh session: %s", what, err.msg);
        cx_session_free(c);
        free(got);
        free(ref);
    }
    free(logits);
    fwd_ws_free(&ws);
    for (int q = 0; q < 2; q++) cx_session_free(s[q]);
}

static void check_chunk(void) {
    CHECK(pass_chunk(0, 100, 256, 4) == 4 * KV_BLOCK, "4 hot blocks from a block's start");
    CHECK(pass_chunk(5, 100, 256, 4) == 4 * KV_BLOCK - 5, "the first block is written from row 5");
    CHECK(pass_chunk(5, 100, 30, 4) == 30, "the caller's cap");
    CHECK(pass_chunk(5, 7, 30, 4) == 7, "what is left");
    CHECK(pass_chunk(5, 7, 30, 0) == 0, "no hot block left: nothing fits");
}

static void run_all(void) {
    check_chunk();
    cx_shape sh = fx_shape("test-tiny", 256);
    cx_model *m = fx_synth_model(&sh, CX_TYPE_F32, 11, "tiny-f32.gguf", NULL);
    cx_err err = {0};
    if (m) {
        /* keep: inside a block, on a block boundary (13 + 3 = 16), none, all */
        check_draft(m, NULL, (int[]){13, 30}, (int[]){7, 9}, (int[]){3, 2}, "own caches, keep 3 and 2");
        check_draft(m, NULL, (int[]){16, 5}, (int[]){8, 11}, (int[]){0, 11}, "own caches, keep none and all");
        cx_kv_params kv = cx_kv_defaults();
        kv.prefix_cache = 1;
        cx_kv_cache *c = NULL;
        CHECK(cx_kv_cache_new(m, &kv, &c, &err) == 0, "shared cache: %s", err.msg);
        if (c) {
            /* sequence 0's draft fills a block (16..31), then only 1 of it is kept */
            check_draft(m, c, (int[]){16, 20}, (int[]){17, 6}, (int[]){1, 4}, "shared cache, prefix on");
            cx_kv_cache_free(c);
        }
        cx_model_free(m);
    }
    fx_cleanup();
}

TEST_MAIN(run_all())
