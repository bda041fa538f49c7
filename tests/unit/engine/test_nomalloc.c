/*
 * test_nomalloc.c - decoding a token allocates nothing, with the KV cache's
 * tiers at work: this file wraps malloc, calloc, realloc, free and the
 * aligned allocators (forwarding to glibc's __libc_* entry points) and
 * counts the calls made, by any thread, while tokens are decoded after a
 * warm-up. Configurations: the default cache; f16 and q8 hot blocks; lossless
 * tiering with a tiny hot tier, a tiny cold budget and a spill file (pages
 * compressed, spilled and restored every token, on 2 threads); int8 warm
 * pages with the prefix cache on; 4-bit warm pages under LFU.
 *
 * Scope: single-sequence decode; three sequences on one shared cache (with
 * tiering and the prefix cache) decoding in turn, as cortex-bench's
 * multiseq workload does; and the same three decoded in one batched pass
 * (cx_batch_eval, 2 threads), joined midway by a fourth sequence on its own
 * cache whose prompt shares a pass with their decode tokens, as the batched
 * workload and a continuous-batching server do; and the request
 * scheduler's steps (admission, chunked prefill, sampling, preemption), also
 * with two resident LoRA adapters mixed in its passes, and speculating (the
 * n-gram lookup, and a draft model: drafting, verify passes, rollback).
 *
 * Skipped under AddressSanitizer, which owns malloc itself.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"

#if defined(__SANITIZE_ADDRESS__)
#define NOMALLOC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NOMALLOC_ASAN 1
#endif
#endif

#ifndef NOMALLOC_ASAN
static atomic_int counting;
static atomic_long n_calls;

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t n);

/* Count a call when counting is on. */
static void count(void) {
    if (atomic_load_explicit(&counting, memory_order_relaxed)) atomic_fetch_add(&n_calls, 1);
}

/* The wrappers, each: count, then forward to glibc's allocator. */
void *malloc(size_t n) {
    count();
    return __libc_malloc(n);
}

/* calloc: counted, then glibc's. */
void *calloc(size_t n, size_t size) {
    count();
    return __libc_calloc(n, size);
}

/* realloc: counted, then glibc's. */
void *realloc(void *p, size_t n) {
    count();
    return __libc_realloc(p, n);
}

/* free: counted, then glibc's. */
void free(void *p) {
    if (p) count();
    __libc_free(p);
}

/* posix_memalign: counted, then glibc's. */
int posix_memalign(void **out, size_t align, size_t n) {
    count();
    void *p = __libc_memalign(align, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

/* aligned_alloc: counted, then glibc's. */
void *aligned_alloc(size_t align, size_t n) {
    count();
    return __libc_memalign(align, n);
}

/* memalign: counted, then glibc's. */
void *memalign(size_t align, size_t n) {
    count();
    return __libc_memalign(align, n);
}


/* Greedy decode `n` tokens from the logits l; returns the calls counted during them. */
static long decode(cx_session *s, const float *l, int V, int n, int count_them) {
    cx_err err = {0};
    long before = atomic_load(&n_calls);
    atomic_store(&counting, count_them);
    for (int i = 0; i < n; i++) {
        int32_t best = 0;
        for (int j = 1; j < V; j++) best = l[j] > l[best] ? j : best;
        if (cx_eval(s, &best, 1, &l, &err)) break;
    }
    atomic_store(&counting, 0);
    CHECK(err.code == 0, "decode: %s", err.msg);
    return atomic_load(&n_calls) - before;
}

/* One configuration: prompt, 40 warm-up tokens, then 120 counted ones. */
static void check_config(cx_model *m, const char *name, const cx_kv_params *kv, int threads) {
    cx_session_params sp = cx_session_defaults();
    sp.kv = *kv;
    sp.n_threads = threads;
    cx_session *s;
    cx_err err = {0};
    if (cx_session_new_ex(m, &sp, &s, &err)) {
        CHECK(0, "%s: session: %s", name, err.msg);
        return;
    }
    int V = cx_model_get_info(m)->n_vocab;
    int32_t prompt[24];
    for (int i = 0; i < 24; i++) prompt[i] = (int32_t)((i * 37 + 11) % V);
    const float *l;
    if (cx_eval(s, prompt, 24, &l, &err)) {
        CHECK(0, "%s: prompt: %s", name, err.msg);
        cx_session_free(s);
        return;
    }
    decode(s, l, V, 40, 0);
    cx_kv_stats a, b;
    cx_session_kv_stats(s, &a);
    long calls = decode(s, l, V, 120, 1);
    cx_session_kv_stats(s, &b);
    CHECK(calls == 0, "%s: %ld allocator calls while decoding 120 tokens", name, calls);
    printf("%-28s %ld allocator calls in 120 tokens; demotions %lld, restores %lld, spills %lld\n", name, calls,
           (long long)(b.demotions - a.demotions), (long long)(b.restores - a.restores), (long long)(b.spills - a.spills));
    if (kv->budget[CX_KV_HOT] != CX_KV_UNLIMITED)
        CHECK(b.demotions > a.demotions && b.restores > a.restores, "%s: tiering was at work while counting", name);
    cx_session_free(s);
}
/* Three sessions on one shared, tiered cache with the prefix cache on, each
 * prefilled with the same prompt (so they share its blocks), then decoding
 * one token each: in turn with cx_eval, or (batched) all three in one
 * cx_batch_eval pass on 2 threads, where at round 40 a fourth session with
 * its own cache joins with its 16-token prompt in the same pass as the
 * others' decode tokens (continuous batching). 20 warm-up rounds, 60
 * counted. */
static void check_shared(cx_model *m, const cx_kv_params *kv, int batched) {
    enum { NS = 3 };
    const char *name = batched ? "batched decode, 3+1 seqs" : "shared cache, 3 sequences";
    cx_kv_cache *cache;
    cx_err err = {0};
    if (cx_kv_cache_new(m, kv, &cache, &err)) {
        CHECK(0, "shared cache: %s", err.msg);
        return;
    }
    cx_session *s[NS + 1] = {0};
    cx_batch *b = NULL;
    const float *l[NS];
    int32_t next[NS + 1];
    int V = cx_model_get_info(m)->n_vocab, ok = 1;
    int32_t prompt[40];
    for (int i = 0; i < 40; i++) prompt[i] = (int32_t)((i * 37 + 11) % V);
    for (int k = 0; k < NS && ok; k++) {
        cx_session_params sp = cx_session_defaults();
        sp.cache = cache;
        ok = cx_session_new_ex(m, &sp, &s[k], &err) == 0 && cx_eval(s[k], prompt, 40, &l[k], &err) == 0;
    }
    if (batched && ok) {
        cx_session_params sp = cx_session_defaults();
        sp.kv = *kv;
        sp.n_threads = 2;
        ok = cx_session_new_ex(m, &sp, &s[NS], &err) == 0 && cx_batch_new(m, 32, 2, &b, &err) == 0;
    }
    CHECK(ok, "%s: sessions: %s", name, err.msg);
    long calls = 0;
    int joined = 0;
    for (int round = 0; round < 80 && ok; round++) {
        if (round == 20) atomic_store(&counting, 1);
        long before = atomic_load(&n_calls);
        for (int k = 0; k < NS; k++) {
            next[k] = 0;
            for (int j = 1; j < V; j++) next[k] = l[k][j] > l[k][next[k]] ? j : next[k];
        }
        if (batched) {
            const int32_t *tp[NS + 1] = {&next[0], &next[1], &next[2], prompt + 3};
            int n[NS + 1] = {1, 1, 1, joined ? 1 : 16}, count = round >= 40 ? NS + 1 : NS;
            if (joined) tp[NS] = &next[NS];
            const float **out;
            ok = cx_batch_eval(b, s, tp, n, count, &out, &err) == 0;
            for (int k = 0; ok && k < count; k++) {
                if (k < NS) l[k] = out[k];
                else next[NS] = (int32_t)(out[k][0] > out[k][1]); /* any valid next token */
            }
            joined = count > NS;
        } else {
            for (int k = 0; k < NS && ok; k++) ok = cx_eval(s[k], &next[k], 1, &l[k], &err) == 0;
        }
        if (round >= 20) calls += atomic_load(&n_calls) - before;
    }
    atomic_store(&counting, 0);
    CHECK(ok, "%s: decode: %s", name, err.msg);
    CHECK(calls == 0, "%s: %ld allocator calls in 60 rounds", name, calls);
    if (batched) CHECK(cx_session_pos(s[NS]) == 16 + 39, "the fourth session joined at round 40 (position %d)",
                       cx_session_pos(s[NS]));
    printf("%-28s %ld allocator calls in 60 rounds\n", name, calls);
    for (int k = 0; k < NS + 1; k++) cx_session_free(s[k]);
    cx_batch_free(b);
    cx_kv_cache_free(cache);
}

/* The request scheduler: every step (admission, prefill chunks beside
 * decode tokens, sampling with stop strings, ends) counted; requests are
 * submitted between steps (a submission allocates its record) and one joins
 * midway. The cache is small enough that sequences get preempted. With
 * `adapters` (a file name prefix in the scratch directory): two resident adapters, the requests using
 * adapter 1, adapter 2 and none in turn, so passes mix them. With `spec` (CX_SPEC_NGRAM, or CX_SPEC_MODEL
 * drafting with the model's own file `draft`): speculative steps, every step (spec_max_batch 3). */
static void check_sched(cx_model *m, const char *adapters, int spec, const char *draft) {
    cx_sched_params sp = cx_sched_defaults();
    sp.max_seqs = 3;
    sp.max_batch_tokens = 24;
    sp.chunk = 16;
    sp.n_threads = 2;
    sp.kv.max_tokens = 160;
    cx_sched *s;
    cx_err err = {0};
    cx_drafter *d = NULL;
    if (spec) {
        cx_spec_params dp = cx_spec_defaults();
        dp.kind = spec;
        dp.draft_path = draft;
        dp.adapt = 0;
        dp.draft_max = 4;
        dp.ngram_min = 1; /* the lookup finds a draft in any text that repeats a token */
        if (cx_drafter_new(m, &dp, &d, &err)) {
            CHECK(0, "drafter: %s", err.msg);
            return;
        }
        sp.drafter = d;
        sp.spec_max_batch = 3;
    }
    if (cx_sched_new(m, &sp, &s, &err)) {
        CHECK(0, "scheduler: %s", err.msg);
        cx_drafter_free(d);
        return;
    }
    for (int a = 1; adapters && a <= 2; a++) {
        const char *path = fx_path("%s-%d.gguf", adapters, a);
        cx_lora_synth_params lp = {.rank = 4 * a, .alpha = 8, .targets = CX_LORA_ALL, .seed = (uint64_t)a,
                                   .type = CX_TYPE_Q8_0};
        CHECK(cx_lora_synth_write(m, &lp, path, &err) == 0 && cx_sched_adapter_add(s, a, NULL, path, 1, &err) == 0,
              "adapter %d: %s", a, err.msg);
    }
    int V = cx_model_get_info(m)->n_vocab;
    int32_t prompt[4][40];
    for (int q = 0; q < 4; q++)
        for (int i = 0; i < 40; i++) prompt[q][i] = (int32_t)((i * 37 + 11 * q + 5) % V);
    const char *stops[1] = {"never appears \x01"};
    long calls = 0, steps = 0;
    for (int q = 0; q < 4; q++) {
        cx_request r = cx_request_defaults();
        r.prompt = prompt[q];
        r.n_prompt = 20 + 5 * q;
        r.max_tokens = 50;
        r.ignore_eos = 1;
        r.stop = stops;
        r.n_stop = 1;
        r.adapter = adapters ? (q + 1) % 3 : 0;
        if (q < 3) CHECK(cx_sched_submit(s, &r, &err) > 0, "submit: %s", err.msg);
        int rounds = q < 3 ? 1 : 1000;
        for (int i = 0; i < rounds; i++) {
            long before = atomic_load(&n_calls);
            atomic_store(&counting, 1);
            int live = cx_sched_step(s, &err);
            atomic_store(&counting, 0);
            calls += atomic_load(&n_calls) - before;
            steps++;
            if (i == 10) CHECK(cx_sched_submit(s, &r, &err) > 0, "submit midway: %s", err.msg);
            if (live <= 0 && i > 10) break;
        }
    }
    cx_sched_stats st;
    cx_sched_get_stats(s, &st);
    CHECK(st.finished == 4 && st.preemptions > 0, "scheduler: 4 finished, with preemptions (%lld, %lld)",
          (long long)st.finished, (long long)st.preemptions);
    const char *what = adapters ? "scheduler, 2 adapters" : spec == CX_SPEC_NGRAM ? "scheduler, ngram"
                       : spec ? "scheduler, draft model" : "scheduler";
    CHECK(calls == 0, "%s: %ld allocator calls in %ld steps", what, calls, steps);
    if (spec) CHECK(st.spec_passes > 0, "%s: verify passes ran (%lld)", what, (long long)st.spec_passes);
    printf("%-28s %ld allocator calls in %ld steps (%lld preemptions, %lld drafted)\n", what, calls, steps,
           (long long)st.preemptions, (long long)st.spec_drafted);
    cx_sched_free(s);
    cx_drafter_free(d);
}

/* Speculative steps (cx_spec_step: draft, one verify pass, accept, roll
 * back), with the lookup or a draft model (its own session kept in step):
 * 10 warm-up steps, then 40 counted, tiered cache on the target. */
static void check_spec(cx_model *m, const char *draft_path, const cx_kv_params *kv) {
    const char *name = draft_path ? "speculation, draft model" : "speculation, n-gram lookup";
    cx_spec_params p = cx_spec_defaults();
    p.kind = draft_path ? CX_SPEC_MODEL : CX_SPEC_NGRAM;
    p.draft_path = draft_path;
    p.ngram_min = 1;
    p.draft_max = 4;
    cx_drafter *d = NULL;
    cx_spec *sp = NULL;
    cx_session *s = NULL;
    cx_sampler *smp = NULL;
    cx_err err = {0};
    cx_session_params ssp = cx_session_defaults();
    ssp.kv = *kv;
    cx_sampler_params spp = cx_sampler_defaults(); /* sampled: the rule draws as plain decoding does */
    int V = cx_model_get_info(m)->n_vocab;
    int ok = cx_drafter_new(m, &p, &d, &err) == 0 && cx_session_new_ex(m, &ssp, &s, &err) == 0 &&
             cx_spec_new(d, cx_session_n_ctx(s), &sp, &err) == 0 && cx_sampler_new(V, &spp, &smp, &err) == 0;
    static int32_t hist[256];
    int n = 24;
    for (int i = 0; i < n; i++) hist[i] = (int32_t)((i % 5) * 37 % V);
    const float *l;
    ok = ok && cx_eval(s, hist, n - 1, &l, &err) == 0;
    long calls = 0;
    for (int step = 0; ok && step < 50 && n < 200; step++) {
        if (step == 10) atomic_store(&counting, 1);
        long before = atomic_load(&n_calls);
        int32_t got[CX_SPEC_MAX_DRAFT + 1];
        int k = cx_spec_step(sp, s, smp, hist, n, 8, got, &err);
        ok = k > 0;
        for (int i = 0; ok && i < k; i++) hist[n++] = got[i];
        if (step >= 10) calls += atomic_load(&n_calls) - before;
    }
    atomic_store(&counting, 0);
    CHECK(ok, "%s: %s", name, err.msg);
    CHECK(calls == 0, "%s: %ld allocator calls in 40 steps", name, calls);
    printf("%-28s %ld allocator calls in 40 steps\n", name, calls);
    cx_sampler_free(smp);
    cx_spec_free(sp);
    cx_session_free(s);
    cx_drafter_free(d);
}
#endif

/* Check the wrappers count, then every configuration on a synthetic q8_0 model. */
static void run_all(void) {
#ifdef NOMALLOC_ASAN
    TEST_SKIP_ALL("AddressSanitizer replaces malloc; the count needs glibc's");
    return;
#else
    atomic_store(&counting, 1);
    void *volatile probe = malloc(32);
    free(probe);
    atomic_store(&counting, 0);
    CHECK(atomic_load(&n_calls) == 2, "the wrappers see malloc and free (%ld calls)", atomic_load(&n_calls));
    const char *spill = fx_path("spill.kv");
    cx_shape sh = fx_shape("test-tiny", 256);
    cx_model *m = fx_synth_model(&sh, CX_TYPE_Q8_0, 5, "tiny.gguf", NULL);
    if (!m) return;
    /* test-tiny: 2 layers, kv_dim 32: an f32 block is 8 KiB */
    const int64_t blk = 2 * 32 * 32 * 4;
    cx_kv_params kv = cx_kv_defaults();
    check_config(m, "default (f32, unlimited)", &kv, 1);
    kv.type = CX_KV_F16;
    check_config(m, "f16 hot", &kv, 1);
    kv.type = CX_KV_Q8;
    check_config(m, "q8 hot", &kv, 1);
    kv = cx_kv_defaults();
    kv.budget[CX_KV_HOT] = 2 * blk;
    kv.budget[CX_KV_WARM] = 0;
    kv.budget[CX_KV_COLD] = 16384;
    kv.spill_path = spill;
    check_config(m, "lossless cold + spill, 2 thr", &kv, 2);
    kv = cx_kv_defaults();
    kv.budget[CX_KV_HOT] = blk;
    kv.budget[CX_KV_WARM] = 2 * blk / 3;
    kv.prefix_cache = 1;
    check_config(m, "q8 warm, cold, prefix cache", &kv, 1);
    kv.warm_type = CX_KV_Q4;
    kv.policy = CX_KV_LFU;
    check_config(m, "q4 warm, cold, LFU", &kv, 1);
    kv = cx_kv_defaults(); /* FP8 blocks: 2 x (32 x 32 codes + 32 scales) = 2304 bytes */
    kv.type = CX_KV_E4M3;
    kv.warm_type = CX_KV_E5M2;
    kv.policy = CX_KV_RANDOM;
    kv.budget[CX_KV_HOT] = 2 * 2304;
    kv.budget[CX_KV_WARM] = 2 * 2304;
    check_config(m, "e4m3 hot, e5m2 warm, cold, random", &kv, 1);
    kv = cx_kv_defaults();
    kv.budget[CX_KV_HOT] = 4 * blk;
    kv.budget[CX_KV_WARM] = 3 * blk;
    kv.prefix_cache = 1;
    kv.max_tokens = 3 * 256;
    check_shared(m, &kv, 0);
    check_shared(m, &kv, 1);
    check_sched(m, NULL, 0, NULL);
    check_sched(m, "lora", 0, NULL);
    check_sched(m, NULL, CX_SPEC_NGRAM, NULL);
    check_sched(m, NULL, CX_SPEC_MODEL, fx_path("tiny.gguf"));
    kv = cx_kv_defaults();
    kv.budget[CX_KV_HOT] = 2 * blk;
    kv.budget[CX_KV_WARM] = 2 * blk;
    check_spec(m, NULL, &kv);
    check_spec(m, fx_synth(&sh, CX_TYPE_Q8_0, 6, "tiny-draft.gguf"), &kv);
    cx_model_free(m);
    /* the Hadamard-rotated and grouped 4-bit formats need 32-wide heads: test-headdim's */
    sh = fx_shape("test-headdim", 256);
    if ((m = fx_synth_model(&sh, CX_TYPE_Q8_0, 5, "headdim.gguf", NULL))) {
        kv = cx_kv_defaults(); /* kv_dim 64: 2 layers x (32 x 32 code bytes + 32 x 2 scales) = 2560 bytes a block */
        kv.type = CX_KV_Q4H;
        kv.warm_type = CX_KV_Q4G;
        kv.budget[CX_KV_HOT] = 2 * 2560;
        kv.budget[CX_KV_WARM] = 2 * 2560;
        check_config(m, "q4h hot, q4g warm, cold, 2 thr", &kv, 2);
        cx_model_free(m);
    }
    /* mixture of experts: the expert stage's buffers are the workspace's too */
    static const char *moe_shapes[2] = {"moe-tiny", "gpt-oss-tiny"};
    for (int i = 0; i < 2; i++) {
        sh = fx_shape(moe_shapes[i], 256);
        if (!(m = fx_synth_model(&sh, CX_TYPE_MXFP4, 5, "tiny.gguf", NULL))) continue;
        kv = cx_kv_defaults();
        check_config(m, moe_shapes[i], &kv, 2);
        kv.prefix_cache = 1;
        kv.max_tokens = 3 * 256;
        check_shared(m, &kv, 1);
        cx_model_free(m);
    }
    fx_cleanup();
#endif
}

TEST_MAIN(run_all())
