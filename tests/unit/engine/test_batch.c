/*
 * test_batch.c - cx_batch_eval (continuous batching) gives what evaluating
 * each session alone gives:
 *   - prompts of different lengths prefilled in one pass, then greedy decode
 *     of every sequence one token per pass, against each sequence run alone
 *     with cx_eval: the same tokens, and logits bit for bit for f32, within
 *     1e-4 relative RMS for q8_0/q4_0 (the eight-row kernel that takes
 *     several rows sums in another order than the one-row decode kernel;
 *     repacked, only test-tiny's classifier, which is the embedding and stays
 *     row-major, does: 1e-6);
 *   - mixed passes: one session's prompt chunk next to others' decode tokens;
 *   - sessions on a shared, tiered cache with the prefix cache on (lossless
 *     cold pages: bit for bit), and sessions on different caches in one pass;
 *   - 1 and 2 threads give the same bits;
 *   - bad requests fail with one clear message and change nothing; a hot
 *     tier too small for a pass's blocks is an error, not a crash.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"

#define NSEQ 4
#define GEN 24

static const int prompt_len[NSEQ] = {5, 17, 33, 70};

/* Index of the largest logit. */
static int argmax(const float *l, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[best]) best = i;
    return best;
}

/* Prompt q of the test: distinct tokens per sequence. */
static void prompt(int q, int32_t *out, int V) {
    for (int i = 0; i < prompt_len[q]; i++) out[i] = (int32_t)((i * 7919 + 131 * q + 13) % V);
}

/* Reference: each sequence alone (cx_eval), prompt then GEN greedy tokens;
 * logits after the prompt and after every generated token, [q][GEN + 1][V]. */
static void run_alone(cx_model *m, const cx_session_params *sp, float *ref, int32_t *ref_tok) {
    int V = cx_model_get_info(m)->n_vocab;
    cx_err err = {0};
    for (int q = 0; q < NSEQ; q++) {
        cx_session *s;
        if (cx_session_new_ex(m, sp, &s, &err)) {
            CHECK(0, "session: %s", err.msg);
            return;
        }
        int32_t p[128];
        prompt(q, p, V);
        const float *l;
        int ok = cx_eval(s, p, prompt_len[q], &l, &err) == 0;
        for (int g = 0; ok && g <= GEN; g++) {
            memcpy(ref + ((size_t)q * (GEN + 1) + (size_t)g) * (size_t)V, l, sizeof(float) * (size_t)V);
            int32_t t = ref_tok[q * (GEN + 1) + g] = argmax(l, V);
            if (g < GEN) ok = cx_eval(s, &t, 1, &l, &err) == 0;
        }
        CHECK(ok, "alone: %s", err.msg);
        cx_session_free(s);
    }
}

/* The same sequences through one batch: all prompts in one pass, then one
 * token of each per pass; compares with the reference (bit for bit when
 * exact, else within tol). `split`: sequence 3's prompt goes in two chunks,
 * the second next to the others' first decode tokens (a mixed pass). */
static void run_batched(cx_model *m, const cx_session_params *sp, cx_kv_cache *cache2, int threads, int split,
                        const float *ref, const int32_t *ref_tok, int exact, double tol, const char *what) {
    int V = cx_model_get_info(m)->n_vocab;
    cx_err err = {0};
    cx_batch *b;
    cx_session *s[NSEQ] = {0};
    if (cx_batch_new(m, 128, threads, &b, &err)) {
        CHECK(0, "%s: batch: %s", what, err.msg);
        return;
    }
    int ok = 1;
    for (int q = 0; q < NSEQ && ok; q++) {
        cx_session_params p = *sp;
        if (cache2 && q % 2) p.cache = cache2; /* odd sequences on another cache */
        p.batch = 1;
        ok = cx_session_new_ex(m, &p, &s[q], &err) == 0;
    }
    CHECK(ok, "%s: sessions: %s", what, err.msg);
    int32_t prompts[NSEQ][128], tok[NSEQ];
    const int32_t *tp[NSEQ];
    int n[NSEQ];
    for (int q = 0; q < NSEQ; q++) {
        prompt(q, prompts[q], V);
        tp[q] = prompts[q];
        n[q] = prompt_len[q];
    }
    const float **l = NULL;
    int head = split ? 20 : prompt_len[3]; /* sequence 3's first chunk */
    n[3] = head;
    ok = ok && cx_batch_eval(b, s, tp, n, NSEQ, &l, &err) == 0;
    CHECK(ok, "%s: prefill pass: %s", what, err.msg);
    double worst = 0;
    int same_tokens = 1, bits = 1, step[NSEQ] = {0};
    for (int pass = 0; ok && pass < GEN + 1; pass++) {
        for (int q = 0; q < NSEQ; q++) {
            if (split && q == 3 && pass == 0) continue; /* still in its prompt */
            int g = step[q]++;
            const float *r = ref + ((size_t)q * (GEN + 1) + (size_t)g) * (size_t)V;
            double e = rel_rms(r, l[q], V);
            worst = e > worst ? e : worst;
            bits &= memcmp(r, l[q], sizeof(float) * (size_t)V) == 0;
            tok[q] = argmax(l[q], V);
            same_tokens &= tok[q] == ref_tok[q * (GEN + 1) + g];
        }
        if (pass == GEN) break;
        for (int q = 0; q < NSEQ; q++) {
            tp[q] = &tok[q];
            n[q] = 1;
        }
        if (split && pass == 0) { /* the rest of sequence 3's prompt */
            tp[3] = prompts[3] + head;
            n[3] = prompt_len[3] - head;
        }
        int nseq = NSEQ;
        if (split && step[3] > GEN) nseq = NSEQ - 1; /* sequence 3 is one pass behind: it is done */
        ok = cx_batch_eval(b, s, tp, n, nseq, &l, &err) == 0;
        CHECK(ok, "%s: pass %d: %s", what, pass, err.msg);
    }
    CHECK(same_tokens, "%s: every sequence generates its own greedy tokens", what);
    if (exact) CHECK(bits, "%s: logits bit for bit those of each sequence alone", what);
    else CHECK(worst <= tol, "%s: logits within %g relative RMS of each sequence alone (%.3g)", what, tol, worst);
    printf("%-44s tokens %s, worst relative RMS %.3g%s\n", what, same_tokens ? "equal" : "DIFFER", worst,
           bits ? " (bit for bit)" : "");
    for (int q = 0; q < NSEQ; q++)
        CHECK(cx_session_pos(s[q]) == prompt_len[q] + GEN - (split && q == 3),
              "%s: session %d at position %d", what, q, cx_session_pos(s[q]));
    for (int q = 0; q < NSEQ; q++) cx_session_free(s[q]);
    cx_batch_free(b);
}

/* A synthetic model of `shape` and `type` (copied into huge pages, so
 * repacked, when `repack`). */
static cx_model *tiny_shape(const char *shape, const char *type, int repack) {
    cx_shape sh = fx_shape(shape, 256);
    const char *path = fx_synth_once(&sh, cx_type_from_name(type), 11, fx_path("%s-%s.gguf", shape, type));
    cx_model_params mp = cx_model_defaults();
    if (repack) mp.weights = CX_WEIGHTS_HUGEPAGES;
    return path ? fx_load(path, &mp) : NULL;
}

/* test-tiny of `type`. */
static cx_model *tiny(const char *type, int repack) { return tiny_shape("test-tiny", type, repack); }

/* Batched against alone, per weight type. */
static void check_types(void) {
    /* experts (moe-tiny, gpt-oss-tiny): a pass groups all its sequences' rows by expert; each row's
     * arithmetic stays its own (mxfp4 experts with q8_0 attention: exact once repacked) */
    static const struct { const char *shape, *type; int repack, exact; double tol; } cases[] = {
        {"test-tiny", "f32", 0, 1, 0}, {"test-tiny", "q8_0", 1, 0, 1e-6}, {"test-tiny", "q8_0", 0, 0, 1e-4},
        {"test-tiny", "q4_0", 0, 0, 1e-4}, {"moe-tiny", "f32", 0, 1, 0}, {"gpt-oss-tiny", "f32", 0, 1, 0},
        {"gpt-oss-tiny", "mxfp4", 1, 1, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        cx_model *m = tiny_shape(cases[c].shape, cases[c].type, cases[c].repack);
        if (!m) continue;
        int V = cx_model_get_info(m)->n_vocab;
        float *ref = malloc(sizeof(float) * NSEQ * (GEN + 1) * (size_t)V);
        int32_t ref_tok[NSEQ * (GEN + 1)];
        cx_session_params sp = cx_session_defaults();
        run_alone(m, &sp, ref, ref_tok);
        char what[100];
        snprintf(what, sizeof what, "%s %s%s, private caches", cases[c].shape, cases[c].type,
                 cases[c].repack ? " repacked" : "");
        run_batched(m, &sp, NULL, 1, 0, ref, ref_tok, cases[c].exact, cases[c].tol, what);
        snprintf(what, sizeof what, "%s %s%s, 2 threads, mixed pass", cases[c].shape, cases[c].type,
                 cases[c].repack ? " repacked" : "");
        run_batched(m, &sp, NULL, 2, 1, ref, ref_tok, cases[c].exact, cases[c].tol, what);
        free(ref);
        cx_model_free(m);
    }
}

/* Shared caches: lossless tiering (hot tier of 5 blocks, cold f32 pages)
 * with the prefix cache on, two caches in one pass. */
static void check_shared(void) {
    cx_model *m = tiny("f32", 0);
    if (!m) return;
    int V = cx_model_get_info(m)->n_vocab;
    float *ref = malloc(sizeof(float) * NSEQ * (GEN + 1) * (size_t)V);
    int32_t ref_tok[NSEQ * (GEN + 1)];
    cx_session_params sp = cx_session_defaults();
    run_alone(m, &sp, ref, ref_tok);
    cx_kv_params kv = cx_kv_defaults();
    const cx_model_info *h = cx_model_get_info(m);
    int64_t block = (int64_t)h->n_layer * 2 * h->n_head_kv * h->head_dim * 4 * CX_KV_BLOCK;
    kv.budget[CX_KV_HOT] = 5 * block;
    kv.budget[CX_KV_WARM] = 0;
    kv.prefix_cache = 1;
    kv.max_tokens = 1024;
    cx_kv_cache *c1, *c2;
    cx_err err = {0};
    if (cx_kv_cache_new(m, &kv, &c1, &err) || cx_kv_cache_new(m, &kv, &c2, &err)) {
        CHECK(0, "caches: %s", err.msg);
        return;
    }
    sp.cache = c1;
    run_batched(m, &sp, c2, 2, 1, ref, ref_tok, 1, 0, "f32, two shared tiered caches");
    cx_kv_stats st;
    cx_kv_cache_stats(c1, &st);
    CHECK(st.demotions > 0 && st.restores > 0, "the tiny hot tier made blocks cold (%lld demotions, %lld restores)",
          (long long)st.demotions, (long long)st.restores);
    cx_kv_cache_free(c1);
    cx_kv_cache_free(c2);

    /* a hot tier of 2 blocks cannot take the 4 blocks a pass of 4 sequences writes */
    kv.budget[CX_KV_HOT] = 2 * block;
    kv.prefix_cache = 0;
    CHECK(cx_kv_cache_new(m, &kv, &c1, &err) == 0, "cache: %s", err.msg);
    cx_batch *b;
    cx_session *s[NSEQ];
    sp.cache = c1;
    CHECK(cx_batch_new(m, 8, 1, &b, &err) == 0, "batch: %s", err.msg);
    for (int q = 0; q < NSEQ; q++) CHECK(cx_session_new_ex(m, &sp, &s[q], &err) == 0, "session: %s", err.msg);
    int32_t t[NSEQ] = {1, 2, 3, 4};
    const int32_t *tp[NSEQ] = {&t[0], &t[1], &t[2], &t[3]};
    int n[NSEQ] = {1, 1, 1, 1};
    int rc = cx_batch_eval(b, s, tp, n, NSEQ, NULL, &err);
    CHECK(rc == CX_ENOMEM && strstr(err.msg, "hot KV tier"), "too small a hot tier: %s", err.msg);
    for (int q = 0; q < NSEQ; q++) cx_session_free(s[q]);
    cx_batch_free(b);
    cx_kv_cache_free(c1);
    free(ref);
    cx_model_free(m);
}

/* Bad requests: one message each, no session advanced. */
static void check_errors(void) {
    cx_model *m = tiny("f32", 0), *other = tiny("q4_0", 0);
    if (!m || !other) return;
    cx_err err = {0};
    cx_batch *b;
    CHECK(cx_batch_new(m, 0, 1, &b, &err) == CX_EINVAL && strstr(err.msg, "batch size 0"), "size 0: %s", err.msg);
    CHECK(cx_batch_new(m, 4, 1, &b, &err) == 0, "batch: %s", err.msg);
    cx_session *a = NULL, *c = NULL, *x = NULL;
    cx_session_params sp = cx_session_defaults();
    sp.n_ctx = 8;
    CHECK(cx_session_new_ex(m, &sp, &a, &err) == 0 && cx_session_new_ex(m, &sp, &c, &err) == 0 &&
          cx_session_new_ex(other, &sp, &x, &err) == 0, "sessions: %s", err.msg);
    int32_t t3[3] = {1, 2, 3}, t9[9] = {0}, bad = 1 << 20;
    struct { cx_session *s[2]; const int32_t *t[2]; int n[2], count; const char *needle; } cases[] = {
        {{a, a}, {t3, t3}, {1, 1}, 2, "appears twice"},
        {{a, c}, {t3, t3}, {3, 3}, 2, "exceed the batch size 4"},
        {{a, x}, {t3, t3}, {1, 1}, 2, "another model"},
        {{a, c}, {t3, &bad}, {1, 1}, 2, "outside the vocabulary"},
        {{a, c}, {t9, t3}, {9, 1}, 2, "exceed the context length 8"},
        {{a, c}, {t3, t3}, {0, 1}, 2, "0 tokens"},
        {{a, c}, {t3, t3}, {1, 1}, 0, "no sessions"},
        {{a, NULL}, {t3, t3}, {1, 1}, 2, "session 1 is NULL"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err.msg[0] = 0;
        int rc = cx_batch_eval(b, cases[i].s, cases[i].t, cases[i].n, cases[i].count, NULL, &err);
        CHECK(rc != 0 && strstr(err.msg, cases[i].needle), "'%s' expected, got %d '%s'", cases[i].needle, rc, err.msg);
    }
    CHECK(cx_session_pos(a) == 0 && cx_session_pos(c) == 0, "no session advanced");
    cx_session *ok2[2] = {a, c};
    const int32_t *tp[2] = {t3, t3 + 1};
    int n[2] = {3, 1};
    CHECK(cx_batch_eval(b, ok2, tp, n, 2, NULL, &err) == 0 && cx_session_pos(a) == 3 && cx_session_pos(c) == 1,
          "after the errors, a valid pass: %s", err.msg);
    cx_session_free(a);
    cx_session_free(c);
    cx_session_free(x);
    cx_batch_free(b);
    cx_model_free(m);
    cx_model_free(other);
}

static void run_all(void) {
    check_types();
    check_shared();
    check_errors();
    fx_cleanup();
}

TEST_MAIN(run_all())
