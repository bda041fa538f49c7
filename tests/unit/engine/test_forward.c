/*
 * test_forward.c - properties of the forward pass that the kernels' design
 * promises, on synthetic models of every weight type:
 *   - a prompt evaluated in one call (batched prefill, several passes when it
 *     is longer than a batch) gives the logits of the same tokens fed one at a
 *     time (decode): bit for bit for f32/f16 (every gemm value equals its dot
 *     and attention tiles start at fixed positions, and element-wise kernels
 *     give each element the same arithmetic wherever it sits: a width of 172
 *     is checked too) and for mxfp4 (one-row kernels only), within 1e-4 relative RMS
 *     for q8_0/q4_0/q4_k_m, whose AVX2 prefill kernel sums eight rows in
 *     another order than the decode kernel;
 *   - 1 and 2 threads give bit-identical logits, also when a worker is
 *     descheduled inside its chunks (the pool's stall knob) and the caller
 *     takes over the rest of its share;
 *   - a reset session reproduces its first run.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eval_logits.h"
#include "fixture.h"
#include "session.h"
#include "threadpool.h"


static void check_type(const char *type_name, int n_tokens, int n_ff) {
    cx_shape sh = fx_shape("test-tiny", 640); /* longer than one prefill batch (256) */
    if (n_ff) sh.n_ff = n_ff;
    const char *path = fx_synth(&sh, cx_type_from_name(type_name), 7, fx_path("tiny-%s.gguf", type_name));
    cx_model *m = path ? fx_load(path, NULL) : NULL;
    if (!m) return;
    /* The same file copied into huge pages, where the SIMD tables repack
     * q8_0/q4_0/mxfp4 (and under AVX-512 the K-quant) matrices into an
     * interleaved layout. */
    cx_model_params hp = cx_model_defaults();
    hp.weights = CX_WEIGHTS_HUGEPAGES;
    cx_model *mr = fx_load(path, &hp);
    int V = cx_model_get_info(m)->n_vocab;
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)n_tokens);
    for (int i = 0; i < n_tokens; i++) toks[i] = (int32_t)((i * 7919 + 13) % V);
    float *a = malloc(sizeof(float) * (size_t)V), *b = malloc(sizeof(float) * (size_t)V);
    float *c = malloc(sizeof(float) * (size_t)V), *d = malloc(sizeof(float) * (size_t)V);
    logits_after(m, toks, n_tokens, n_tokens, 1, a); /* one call: batched prefill */
    logits_after(m, toks, n_tokens, 1, 1, b);        /* one token per call */
    logits_after(m, toks, n_tokens, 37, 2, c);       /* ragged chunks, 2 threads */
    logits_after(m, toks, n_tokens, n_tokens, 2, d);
    /* Quantized types' mapped prefill (four tokens or more) runs the multi-row
     * kernels, decode the one-row ones, which sum in another order: exact
     * once repacked (below), close here. */
    int exact = !strcmp(type_name, "f32") || !strcmp(type_name, "f16") || !strcmp(type_name, "bf16");
    double rms = rel_rms(a, b, V), rms_c = rel_rms(a, c, V);
    if (exact) {
        CHECK(!memcmp(a, b, sizeof(float) * (size_t)V), "%s, %d tokens: batched prefill differs from token-by-token",
              type_name, n_tokens);
        CHECK(!memcmp(a, c, sizeof(float) * (size_t)V), "%s: chunks of 37 on 2 threads differ", type_name);
    } else {
        CHECK(rms <= 1e-4, "%s, %d tokens: batched prefill vs token-by-token relative RMS %.3g > 1e-4", type_name,
              n_tokens, rms);
        CHECK(rms_c <= 1e-4, "%s: chunks of 37 on 2 threads: relative RMS %.3g > 1e-4", type_name, rms_c);
    }
    printf("%-6s %3d tokens: prefill vs decode relative RMS %.2g\n", type_name, n_tokens, rms);
    if (mr) {
        /* repacked (or merely copied) weights: one kernel for every T, so
         * prefill equals decode bit for bit; and close to the mapped file's logits */
        float *e = malloc(sizeof(float) * (size_t)V), *f = malloc(sizeof(float) * (size_t)V);
        logits_after(mr, toks, n_tokens, n_tokens, 2, e);
        logits_after(mr, toks, n_tokens, 1, 1, f);
        const char *wm = cx_model_get_info(mr)->weights_memory;
        if (strstr(wm, "repacked") || exact)
            CHECK(!memcmp(e, f, sizeof(float) * (size_t)V), "%s (%s): prefill differs from decode", type_name, wm);
        double r = rel_rms(a, e, V);
        CHECK(exact ? r == 0 : r <= 1e-4, "%s (%s) vs mapped: relative RMS %.3g", type_name, wm, r);
        printf("%-6s %3d tokens, weights %s: vs mapped relative RMS %.2g\n", type_name, n_tokens, wm, r);
        free(e);
        free(f);
        cx_model_free(mr);
    }
    CHECK(!memcmp(a, d, sizeof(float) * (size_t)V), "%s: 2 threads differ from 1", type_name);
    int finite = 1;
    for (int i = 0; i < V; i++) finite &= a[i] == a[i] && a[i] < 1e30f && a[i] > -1e30f;
    CHECK(finite, "%s: logits are finite", type_name);
    free(toks);
    free(a);
    free(b);
    free(c);
    free(d);
    cx_model_free(m);
    unlink(path);
}

/* Logits after a 40-token prompt and 3 decode steps on 2 threads whose
 * worker sleeps `stall_us` inside the first chunk it claims in every job;
 * with park_us, the caller also sleeps stall_us/2 in its first chunk (so the
 * worker claims one and parks the pass) and, once the pass has parked, waits
 * up to park_us for the worker to run it on (tp_set_park_stall); *stolen: chunks taken from another
 * thread's share, *moves: times the pass moved to the worker. */
static int logits_stalled(cx_model *m, const int32_t *toks, unsigned stall_us, unsigned park_us, float *out,
                          int64_t *stolen, int64_t *moves) {
    cx_session *s;
    cx_err err = {0};
    if (cx_session_new(m, 0, 2, &s, &err)) {
        CHECK(0, "session: %s", err.msg);
        return -1;
    }
    tp_set_stall(s->ws.pool, 1, stall_us);
    /* with a caller that stalls too, long enough in its first chunk of a job for the worker to claim one */
    tp_set_stall(s->ws.pool, 0, park_us ? stall_us / 2 : 0);
    tp_set_park_stall(s->ws.pool, park_us);
    const float *l = NULL;
    int rc = cx_eval(s, toks, 40, &l, &err);
    for (int i = 40; !rc && i < 43; i++) rc = cx_eval(s, toks + i, 1, &l, &err);
    CHECK(rc == 0, "eval: %s", err.msg);
    if (!rc) memcpy(out, l, sizeof(float) * (size_t)cx_model_get_info(m)->n_vocab);
    cx_pool_stats st;
    tp_stats_get(s->ws.pool, &st);
    *stolen = st.stolen;
    *moves = st.pass_moves;
    cx_session_free(s);
    return rc;
}

/* A worker descheduled in the middle of its chunks (prefill and decode,
 * matrices and attention): the pass completes with the caller doing the rest
 * of the worker's share, and the logits are those of one thread, bit for bit
 * (each chunk's outputs are fixed, whoever runs it). */
static void check_stalled_worker(const char *type_name) {
    cx_shape sh = fx_shape("test-tiny", 640);
    const char *path = fx_synth(&sh, cx_type_from_name(type_name), 7, fx_path("stall-%s.gguf", type_name));
    cx_model *m = path ? fx_load(path, NULL) : NULL;
    if (!m) return;
    int V = cx_model_get_info(m)->n_vocab;
    int32_t toks[43];
    for (int i = 0; i < 43; i++) toks[i] = (int32_t)((i * 7919 + 13) % V);
    float *one = malloc(sizeof(float) * (size_t)V), *stalled = malloc(sizeof(float) * (size_t)V);
    cx_session *s;
    cx_err err = {0};
    const float *l = NULL;
    int rc = cx_session_new(m, 0, 1, &s, &err);
    if (!rc) rc = cx_eval(s, toks, 40, &l, &err);
    for (int i = 40; !rc && i < 43; i++) rc = cx_eval(s, toks + i, 1, &l, &err);
    CHECK(rc == 0, "one thread: %s", err.msg);
    if (!rc) memcpy(one, l, sizeof(float) * (size_t)V);
    if (!rc) cx_session_free(s);
    int64_t stolen = 0, moves = 0;
    if (!rc && logits_stalled(m, toks, 500, 0, stalled, &stolen, &moves) == 0) {
        CHECK(!memcmp(one, stalled, sizeof(float) * (size_t)V),
              "%s: 2 threads with a stalled worker differ from 1 thread", type_name);
        CHECK(stolen > 0, "%s: the caller took chunks of the stalled worker's share (%lld)", type_name,
              (long long)stolen);
    }
    /* the caller descheduled between jobs as well: the pass goes on on the worker (issue 31) */
    if (!rc && logits_stalled(m, toks, 500, 2000000, stalled, &stolen, &moves) == 0) {
        CHECK(!memcmp(one, stalled, sizeof(float) * (size_t)V),
              "%s: 2 threads with a stalled caller differ from 1 thread", type_name);
        CHECK(moves > 0, "%s: the pass moved to the worker while the caller stalled (%lld times)", type_name,
              (long long)moves);
    }
    free(one);
    free(stalled);
    cx_model_free(m);
    unlink(path);
}

/* Decode items take as many heads of a kv group as leave an item per
 * thread (forward.c, decode_heads): with a group of four, 2 threads give
 * items of 4 heads, 3 and 4 threads items of 2, 5 items of 1. Each (head,
 * query)'s arithmetic is its own (attn_scores scores every query of a call
 * as it would alone), so every split gives the same bits. */
static void check_decode_items(void) {
    cx_shape sh = fx_shape("test-tiny", 640);
    sh.n_head = 8; /* head_dim 8, four query heads per kv head */
    sh.n_head_kv = 2;
    const char *path = fx_synth(&sh, CX_TYPE_F32, 7, fx_path("tiny-gqa4.gguf"));
    cx_model *m = path ? fx_load(path, NULL) : NULL;
    if (!m) return;
    enum { N = 90 }; /* two tiles and part of a third */
    int V = cx_model_get_info(m)->n_vocab;
    int32_t toks[N];
    for (int i = 0; i < N; i++) toks[i] = (int32_t)((i * 7919 + 13) % V);
    float *one = malloc(sizeof(float) * (size_t)V), *many = malloc(sizeof(float) * (size_t)V);
    logits_after(m, toks, N, 1, 1, one);
    static const int threads[] = {2, 3, 5};
    for (int i = 0; i < 3; i++) {
        logits_after(m, toks, N, 1, threads[i], many);
        CHECK(!memcmp(one, many, sizeof(float) * (size_t)V), "kv groups of 4: decode on %d threads differs from 1",
              threads[i]);
    }
    free(one);
    free(many);
    cx_model_free(m);
    unlink(path);
}

static void run_all(void) {
    check_decode_items();
    check_stalled_worker("f32");
    check_stalled_worker("q8_0");
    const char *types[] = {"f32", "f16", "q8_0", "q4_0", "q4_k_m", "mxfp4", "bf16"};
    for (int i = 0; i < 7; i++) {
        check_type(types[i], 5, 0);
        check_type(types[i], 300, 0); /* two prefill passes; attention tiles of 64 */
    }
    /* A feed-forward width that is no multiple of the SIMD width (172, as the
     * 260K models): the element-wise kernels' tails must not make prefill (one
     * call over all rows) differ from decode (one call per row). */
    check_type("f32", 40, 172);
    check_type("f16", 40, 172);
    fx_cleanup();
}

TEST_MAIN(run_all())
