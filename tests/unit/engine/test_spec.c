/*
 * test_spec.c - speculative decoding (cortex.h, engine/src/spec/):
 *   - greedy output with speculation equals greedy output without it, token
 *     for token, for every drafter (n-gram lookup, self-drafts q8_0 and
 *     q4_0, a draft model: the target's own file and a different one), on
 *     synthetic f32, q8_0 (row-major: the verify pass must sum as decode
 *     does), q4_0, mixture-of-experts and gpt-oss models and on the real
 *     stories260K, on 1 and 2 threads, fixed and adaptive draft lengths;
 *   - sampled output follows the target's distribution: from a fixed
 *     context, the first token a step chooses, and the second given the
 *     first, over 3000 seeds, against cx_sampler_dist's probabilities by a
 *     chi-square test at significance 0.001 (a false alarm once in a
 *     thousand runs of an exact implementation; seeds fixed, so the verdict
 *     repeats);
 *   - a seeded sampled run with speculation is the plain sampled run with
 *     the same seed, token for token, for every drafter, fixed and
 *     adaptive draft lengths, penalties on and off;
 *   - drafts of several sequences made together (spec_batch, the
 *     scheduler's) are each sequence's drafted alone (a p_min stopping them
 *     early too), and after the prompts cost a pass of the draft model per
 *     token;
 *   - after rollbacks the cache holds exactly the blocks of the kept
 *     positions (no leaked block);
 *   - the errors: a draft of another vocabulary, a self-draft of a
 *     quantized target, a bad speculation name, a history out of step.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "spec/spec.h"

#define NGEN 80

/* Greedy: argmax, lowest id on ties (the sampler's rule). */
static int32_t argmax(const float *l, int V) {
    int32_t b = 0;
    for (int i = 1; i < V; i++) b = l[i] > l[b] ? i : b;
    return b;
}

/* A prompt of n tokens that repeats itself, so the lookup has something to find. */
static void make_prompt(int32_t *p, int n, int V) {
    for (int i = 0; i < n; i++) p[i] = (int32_t)((i % 11) * 37 % V + 1) % V;
}

/* Tokens without speculation, one cx_eval per token: greedy (argmax), or
 * with `sampling` one cx_sampler_sample per token. */
static int plain_sampled(cx_model *m, const int32_t *prompt, int np, int threads, const cx_sampler_params *sampling,
                         int32_t *out) {
    cx_session *s = NULL;
    cx_sampler *smp = NULL;
    cx_err err = {0};
    int V = cx_model_get_info(m)->n_vocab, n = 0;
    if (cx_session_new(m, 0, threads, &s, &err) || (sampling && cx_sampler_new(V, sampling, &smp, &err))) {
        CHECK(0, "plain session: %s", err.msg);
        cx_session_free(s);
        return -1;
    }
    const float *l;
    int ok = cx_eval(s, prompt, np, &l, &err) == 0;
    for (int i = 0; smp && i < np; i++) cx_sampler_accept(smp, prompt[i]); /* the penalties see the prompt */
    for (; ok && n < NGEN; n++) {
        out[n] = smp ? (int32_t)cx_sampler_sample(smp, l) : argmax(l, V);
        if (smp) cx_sampler_accept(smp, out[n]);
        if (cx_token_is_eog(m, out[n])) { n++; break; }
        if (n + 1 < NGEN) ok = cx_eval(s, &out[n], 1, &l, &err) == 0;
    }
    CHECK(ok, "plain decode: %s", err.msg);
    cx_sampler_free(smp);
    cx_session_free(s);
    return n;
}

static int plain(cx_model *m, const int32_t *prompt, int np, int threads, int32_t *out) {
    return plain_sampled(m, prompt, np, threads, NULL, out);
}

/* Tokens with speculation (drafter d), sampled with `sampling` (NULL:
 * greedy); fills *st. */
static int speculate(cx_model *m, cx_drafter *d, const int32_t *prompt, int np, int threads,
                     const cx_sampler_params *sampling, int32_t *out, cx_spec_stats *st) {
    cx_session *s = NULL;
    cx_spec *sp = NULL;
    cx_sampler *smp = NULL;
    cx_err err = {0};
    cx_sampler_params spp = cx_sampler_defaults();
    spp.temperature = 0;
    if (sampling) spp = *sampling;
    int V = cx_model_get_info(m)->n_vocab, n = 0;
    int32_t hist[1024];
    int ok = cx_session_new(m, 0, threads, &s, &err) == 0 && cx_spec_new(d, cx_session_n_ctx(s), &sp, &err) == 0 &&
             cx_sampler_new(V, &spp, &smp, &err) == 0;
    const float *l;
    ok = ok && cx_eval(s, prompt, np, &l, &err) == 0;
    for (int i = 0; ok && i < np; i++) cx_sampler_accept(smp, prompt[i]); /* the penalties see the prompt */
    if (ok) {
        memcpy(hist, prompt, sizeof *prompt * (size_t)np);
        out[n] = (int32_t)cx_sampler_sample(smp, l);
        cx_sampler_accept(smp, out[n]);
        hist[np + n] = out[n];
        n++;
    }
    while (ok && n < NGEN && !cx_token_is_eog(m, out[n - 1])) {
        int32_t got[CX_SPEC_MAX_DRAFT + 1];
        int k = cx_spec_step(sp, s, smp, hist, np + n, NGEN - n, got, &err);
        if (k < 0) { ok = 0; break; }
        for (int i = 0; i < k; i++) out[n + i] = hist[np + n + i] = got[i];
        n += k;
        if (cx_session_pos(s) != np + n - 1) {
            CHECK(0, "the session holds all but the last chosen token (%d, want %d)", cx_session_pos(s), np + n - 1);
            ok = 0;
        }
    }
    CHECK(ok, "speculative decode: %s", err.msg);
    if (sp) cx_spec_get_stats(sp, st);
    if (ok) { /* the cache holds exactly the blocks of the kept positions */
        cx_kv_stats ks;
        cx_session_kv_stats(s, &ks);
        int64_t want = (cx_session_pos(s) + CX_KV_BLOCK - 1) / CX_KV_BLOCK;
        CHECK(ks.blocks_used == want, "after rollbacks the cache holds %lld blocks for %d positions (want %lld)",
              (long long)ks.blocks_used, cx_session_pos(s), (long long)want);
    }
    cx_sampler_free(smp);
    cx_spec_free(sp);
    cx_session_free(s);
    return n;
}

/* Every drafter spec names, against plain greedy decode of m. */
static void check_greedy(cx_model *m, const char *what, const char *draft_file, int allow_self) {
    int V = cx_model_get_info(m)->n_vocab;
    int32_t prompt[40], want[NGEN], got[NGEN];
    make_prompt(prompt, 40, V);
    struct { int kind, self_type; const char *file; int fixed, dmax; } cases[] = {
        {CX_SPEC_NGRAM, 0, NULL, 0, 8},       {CX_SPEC_NGRAM, 0, NULL, 1, 5},
        {CX_SPEC_SELF, CX_TYPE_Q8_0, NULL, 1, 4}, {CX_SPEC_SELF, CX_TYPE_Q4_0, NULL, 0, 6},
        {CX_SPEC_MODEL, 0, "other", 1, 3},    {CX_SPEC_MODEL, 0, "other", 0, 7},
    };
    for (int threads = 1; threads <= 2; threads++) {
        int nw = plain(m, prompt, 40, threads, want);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            if (cases[c].kind == CX_SPEC_SELF && !allow_self) continue;
            if (cases[c].kind == CX_SPEC_MODEL && !strcmp(cases[c].file, "other") && !draft_file) continue;
            cx_spec_params p = cx_spec_defaults();
            p.kind = cases[c].kind;
            p.self_type = cases[c].self_type;
            p.adapt = !cases[c].fixed;
            p.draft_max = cases[c].dmax;
            p.n_threads = threads;
            p.tmp_dir = fx_dir();
            p.draft_path = draft_file;
            cx_drafter *d = NULL;
            cx_err err = {0};
            if (cx_drafter_new(m, &p, &d, &err)) {
                CHECK(0, "%s: drafter %s: %s", what, cx_spec_kind_name(p.kind), err.msg);
                continue;
            }
            cx_spec_stats st = {0};
            int ng = speculate(m, d, prompt, 40, threads, NULL, got, &st);
            CHECK(ng == nw && !memcmp(got, want, sizeof *got * (size_t)nw),
                  "%s, %d thread(s), %s%s: greedy output equals decoding without speculation (%d vs %d tokens)", what,
                  threads, cx_drafter_describe(d), p.adapt ? ", adaptive" : ", fixed", ng, nw);
            CHECK(st.accepted <= st.drafted && st.tokens == ng - 1 && st.steps >= 1 &&
                      st.tokens == st.accepted + st.steps,
                  "%s: the counters add up (%lld drafted, %lld accepted, %lld tokens in %lld passes)", what,
                  (long long)st.drafted, (long long)st.accepted, (long long)st.tokens, (long long)st.steps);
            if (threads == 1)
                printf("  %-26s %-40s %3lld drafted, %3lld accepted (%5.1f%%), %.2f tokens per pass\n", what,
                       cx_drafter_describe(d), (long long)st.drafted, (long long)st.accepted, 100 * st.acceptance,
                       st.tokens_per_pass);
            cx_drafter_free(d);
        }
    }
}

/* A draft model that is the target's own file: every draft token accepted. */
static void check_same_file(cx_model *m, const char *path, const char *what) {
    int V = cx_model_get_info(m)->n_vocab;
    int32_t prompt[40], want[NGEN], got[NGEN];
    make_prompt(prompt, 40, V);
    int nw = plain(m, prompt, 40, 1, want);
    cx_spec_params p = cx_spec_defaults();
    p.kind = CX_SPEC_MODEL;
    p.draft_path = path;
    p.adapt = 0;
    p.draft_max = 6;
    cx_drafter *d = NULL;
    cx_err err = {0};
    if (cx_drafter_new(m, &p, &d, &err)) {
        CHECK(0, "%s: drafter: %s", what, err.msg);
        return;
    }
    cx_spec_stats st = {0};
    int ng = speculate(m, d, prompt, 40, 1, NULL, got, &st);
    CHECK(ng == nw && !memcmp(got, want, sizeof *got * (size_t)nw), "%s, its own file as the draft: same output", what);
    CHECK(st.drafted > 0 && st.accepted == st.drafted, "%s, its own file as the draft: every draft token accepted (%lld of %lld)",
          what, (long long)st.accepted, (long long)st.drafted);
    cx_drafter_free(d);
}

/* Chi-square statistic of counts[] against probabilities p[] over n draws,
 * bins with an expected count under 5 pooled into one; *df its degrees of freedom. */
static double chi_square(const int *counts, const float *p, int m, int n, int *df) {
    double x2 = 0, pool_e = 0, pool_o = 0;
    int bins = 0, total = 0;
    for (int i = 0; i < m; i++) {
        double e = (double)p[i] * n;
        total += counts[i];
        if (e < 5) { pool_e += e; pool_o += counts[i]; continue; }
        x2 += (counts[i] - e) * (counts[i] - e) / e;
        bins++;
    }
    pool_o += n - total; /* draws outside the support (there must be none) */
    if (pool_e > 0 || pool_o > 0) {
        if (pool_e < 1e-9) x2 += pool_o > 0 ? 1e9 : 0;
        else x2 += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
        bins++;
    }
    *df = bins - 1;
    return x2;
}

/* Upper 0.001 point of chi-square with df degrees of freedom (Wilson-Hilferty). */
static double chi_crit(int df) {
    if (df < 1) return 10.83;
    double z = 3.0902, k = df, t = 1 - 2 / (9 * k) + z * sqrt(2 / (9 * k));
    return k * t * t * t;
}

/* Sampled speculation from one context, 3000 seeds: the first chosen
 * token's histogram against the target's distribution there, and the
 * second's given the first was the most frequent one. */
static void check_sampled(cx_model *m, cx_drafter *d, const char *what) {
    enum { N = 3000, NP = 30 };
    int V = cx_model_get_info(m)->n_vocab;
    cx_sampler_params spp = cx_sampler_defaults(); /* temperature 0.8, top-k 40, top-p 0.95, min-p 0.05 */
    spp.temperature = 1.5f;                        /* flatter: more tokens in play, more rejections */
    spp.min_p = 0.0f;
    spp.top_k = 12;
    int32_t prompt[NP + 2];
    make_prompt(prompt, NP, V);
    cx_session *s = NULL;
    cx_spec *sp = NULL;
    cx_sampler *smp = NULL;
    cx_err err = {0};
    if (cx_session_new(m, 0, 1, &s, &err) || cx_spec_new(d, cx_session_n_ctx(s), &sp, &err) ||
        cx_eval(s, prompt, NP - 1, NULL, &err)) {
        CHECK(0, "%s: set-up: %s", what, err.msg);
        cx_spec_free(sp);
        cx_session_free(s);
        return;
    }
    int *c1 = calloc((size_t)V, sizeof *c1), *c2 = calloc((size_t)V, sizeof *c2), n2 = 0, ok = 1;
    int32_t first[N], second[N];
    int32_t got[CX_SPEC_MAX_DRAFT + 1];
    for (int i = 0; i < N && ok; i++) {
        spp.seed = 1000 + (uint64_t)i;
        cx_sampler_new(V, &spp, &smp, &err);
        cx_spec_reset(sp);
        int k = cx_spec_step(sp, s, smp, prompt, NP, 8, got, &err);
        ok = k >= 1;
        first[i] = ok ? got[0] : -1;
        second[i] = -1;
        if (ok && k >= 2) second[i] = got[1];
        else if (ok) { /* a second step for the second token */
            int32_t h[NP + 1];
            memcpy(h, prompt, sizeof prompt[0] * NP);
            h[NP] = got[0];
            int k2 = cx_spec_step(sp, s, smp, h, NP + 1, 8, got + 1, &err);
            ok = k2 >= 1;
            second[i] = ok ? got[1] : -1;
        }
        cx_sampler_free(smp);
        ok = ok && cx_session_truncate(s, NP - 1, &err) == 0;
    }
    CHECK(ok, "%s: sampled steps: %s", what, err.msg);
    /* the target's distributions: after the context, and after the most frequent first token */
    cx_sampler_params dp = spp;
    cx_sampler *ref = NULL;
    const float *l;
    const int32_t *ids;
    const float *p;
    cx_sampler_new(V, &dp, &ref, &err);
    for (int i = 0; i < N; i++) c1[first[i]]++;
    int top = 0;
    for (int i = 1; i < V; i++) top = c1[i] > c1[top] ? i : top;
    for (int i = 0; i < N; i++)
        if (first[i] == top) { c2[second[i]]++; n2++; }
    ok = ok && cx_session_truncate(s, NP - 1, &err) == 0 && cx_eval(s, prompt + NP - 1, 1, &l, &err) == 0;
    if (ok) {
        int mcnt = cx_sampler_dist(ref, l, &ids, &p);
        int *cc = calloc((size_t)mcnt, sizeof *cc);
        for (int j = 0; j < mcnt; j++) cc[j] = c1[ids[j]];
        int df;
        double x2 = chi_square(cc, p, mcnt, N, &df);
        CHECK(x2 < chi_crit(df), "%s: the first token follows the target's distribution (chi2 %.1f, %d df, critical %.1f at 0.001)",
              what, x2, df, chi_crit(df));
        printf("  %-26s first token:  chi2 %6.1f, %2d df (0.001 critical %.1f)\n", what, x2, df, chi_crit(df));
        free(cc);
    }
    int32_t t = top;
    ok = ok && cx_eval(s, &t, 1, &l, &err) == 0;
    if (ok && n2 >= 200) {
        int mcnt = cx_sampler_dist(ref, l, &ids, &p);
        int *cc = calloc((size_t)mcnt, sizeof *cc);
        for (int j = 0; j < mcnt; j++) cc[j] = c2[ids[j]];
        int df;
        double x2 = chi_square(cc, p, mcnt, n2, &df);
        CHECK(x2 < chi_crit(df), "%s: the second token given the first follows the target's distribution (chi2 %.1f, %d df, "
              "critical %.1f, %d draws)", what, x2, df, chi_crit(df), n2);
        printf("  %-26s second token: chi2 %6.1f, %2d df (0.001 critical %.1f), %d draws\n", what, x2, df, chi_crit(df), n2);
        free(cc);
    }
    cx_spec_stats st;
    cx_spec_get_stats(sp, &st);
    CHECK(st.drafted > 0 && st.accepted < st.drafted, "%s: drafts were both accepted and rejected (%lld of %lld)", what,
          (long long)st.accepted, (long long)st.drafted);
    cx_sampler_free(ref);
    free(c1);
    free(c2);
    cx_spec_free(sp);
    cx_session_free(s);
}

/* A seeded sampled run with speculation is the plain sampled run with the
 * same seed, token for token (spec_accept.c: each row's token is drawn as a
 * plain step draws it), whatever the drafts and their lengths: with the
 * adaptive length, whose timings differ from run to run, too. Penalties on,
 * to check they see each token before the next row. */
static void check_sampled_is_plain(cx_model *m, cx_drafter *d, const char *what) {
    int32_t prompt[20], want[NGEN], got[NGEN];
    make_prompt(prompt, 20, cx_model_get_info(m)->n_vocab);
    for (int seed = 77; seed < 80; seed++) {
        cx_sampler_params spp = cx_sampler_defaults();
        spp.seed = (uint64_t)seed;
        spp.temperature = seed == 79 ? 1.5f : 0.8f;
        spp.repeat_penalty = seed == 78 ? 1.3f : 1.0f;
        cx_spec_stats st;
        int nw = plain_sampled(m, prompt, 20, 1, &spp, want);
        int ng = speculate(m, d, prompt, 20, 1, &spp, got, &st);
        CHECK(nw == ng && nw > 0 && !memcmp(want, got, sizeof(int32_t) * (size_t)nw),
              "%s, seed %d: the sampled speculative run is the plain one (%d and %d tokens, %lld of %lld drafts kept)",
              what, seed, nw, ng, (long long)st.accepted, (long long)st.drafted);
    }
}

/* Drafts of several sequences made together (spec_batch, the scheduler's
 * drafts) against each sequence drafting alone (spec_draft): the same
 * tokens (f32: the draft's logits are the same bits), with prompts longer
 * than a pass (chunked catch-ups), a p_min that stops drafts early, and a
 * draft capped by the draft's context; after the prompts, the drafts of all
 * the sequences cost one pass of the draft model per drafted token. */
static void check_batch_drafts(cx_model *m, cx_drafter *d, float temperature, const char *what) {
    enum { NS = 5, K = 3, MAXT = 8, SHORT_CTX = 32 };
    int n[NS] = {1, 5, 23, 40, SHORT_CTX - 1}; /* 23 and 40 take several passes of MAXT tokens; the last has room
                                                 * for 2 drafted tokens in its context of SHORT_CTX */
    int V = cx_model_get_info(m)->n_vocab, full = cx_drafter_model(d) && d->p.p_min == 0; /* every draft K long */
    int32_t hist[NS][64], alone[NS][K], together[NS][K];
    int ka[NS];
    cx_spec *a[NS] = {0}, *b[NS] = {0};
    spec_batch *w = NULL;
    cx_sampler *smp = NULL; /* the target's: the drafts propose its next draws (greedy: argmaxes) */
    cx_err err = {0};
    cx_sampler_params spp = cx_sampler_defaults();
    spp.temperature = temperature;
    spp.seed = 11;
    int ok = spec_batch_new(d, NS, MAXT, &w, &err) == 0 && cx_sampler_new(V, &spp, &smp, &err) == 0;
    for (int i = 0; ok && i < NS; i++) {
        int ctx = i == NS - 1 ? SHORT_CTX : 256;
        ok = spec_new(d, ctx, 0, &a[i], &err) == 0 && spec_new(d, ctx, 0, &b[i], &err) == 0;
        make_prompt(hist[i], n[i], V);
        hist[i][0] = (int32_t)(i + 1); /* each its own sequence */
    }
    CHECK(ok, "%s: setup: %s", what, err.msg);
    for (int step = 0; ok && step < 2; step++) { /* the prompts; then, after a step, the other four again */
        int ns = step ? NS - 1 : NS;
        spec_batch_clear(w);
        for (int i = 0; i < ns; i++) {
            ka[i] = spec_draft(a[i], smp, hist[i], n[i], K, alone[i], &err);
            int want = i == NS - 1 ? 2 : K;
            CHECK(ka[i] >= 0 && (!full || ka[i] == want), "%s, step %d: sequence %d drafted %d alone, want %d (%s)",
                  what, step, i, ka[i], want, ka[i] < 0 ? err.msg : "");
            CHECK(spec_batch_add(w, b[i], smp, hist[i], n[i], K, together[i]) == i, "%s: the index of sequence %d", what,
                  i);
        }
        int64_t p0 = spec_batch_passes(w), ns_time = -1;
        ok = spec_batch_run(w, &err) == 0;
        CHECK(ok, "%s, step %d: spec_batch_run: %s", what, step, err.msg);
        int64_t passes = spec_batch_passes(w) - p0;
        for (int i = 0; ok && i < ns; i++) {
            int kb = spec_batch_got(w, i, &ns_time);
            CHECK(kb == ka[i] && ns_time >= 0 && !memcmp(alone[i], together[i], sizeof(int32_t) * (size_t)(kb > 0 ? kb : 0)),
                  "%s, step %d, sequence %d: the same draft together as alone (%d and %d tokens)", what, step, i, kb,
                  ka[i]);
        }
        if (full && step == 0) /* 40 + 31 + 23 + 5 + 1 prompt tokens in passes of at most 8, and the drafts */
            CHECK(passes >= 100 / MAXT && passes < 100, "%s: the prompts and drafts in %lld passes", what,
                  (long long)passes);
        if (full && step == 1) /* a step's catch-up is one token each: then one pass per drafted token */
            CHECK(passes == K, "%s: after a step, %d sequences drafted %d tokens each in %lld passes of the draft model",
                  what, ns, K, (long long)passes);
        /* The next step: the first draft token accepted, then a token of the target's own (not the draft's
         * second); the short-context sequence is done. */
        for (int i = 0; i < NS - 1; i++) {
            hist[i][n[i]] = ka[i] > 0 ? alone[i][0] : 7;
            hist[i][n[i] + 1] = (int32_t)(((ka[i] > 1 ? alone[i][1] : 7) + 1) % V);
            n[i] += 2;
        }
    }
    for (int i = 0; i < NS; i++) {
        cx_spec_free(a[i]);
        cx_spec_free(b[i]);
    }
    spec_batch_free(w);
    cx_sampler_free(smp);
}

static void check_errors(cx_model *f32, cx_model *q8, const char *other_vocab_file) {
    cx_err err = {0};
    cx_spec_params p = cx_spec_defaults();
    cx_drafter *d = NULL;
    CHECK(cx_spec_parse("self:q8_0", &p, &err) == 0 && p.kind == CX_SPEC_SELF && p.self_type == CX_TYPE_Q8_0,
          "self:q8_0 parses");
    CHECK(cx_spec_parse("self:zz", &p, &err) == CX_EINVAL && strstr(err.msg, "zz"), "self:zz: %s", err.msg);
    CHECK(cx_spec_parse("beam", &p, &err) == CX_EINVAL && strstr(err.msg, "beam"), "beam: %s", err.msg);
    p = cx_spec_defaults();
    p.kind = CX_SPEC_SELF;
    CHECK(cx_drafter_new(q8, &p, &d, &err) == CX_EUNSUP && strstr(err.msg, "q8_0"), "a self-draft of a q8_0 target: %s",
          err.msg);
    p.kind = CX_SPEC_MODEL;
    p.draft_path = other_vocab_file;
    CHECK(cx_drafter_new(f32, &p, &d, &err) == CX_EINVAL && strstr(err.msg, "vocabulary"),
          "a draft of another vocabulary: %s", err.msg);
    p.draft_path = NULL;
    CHECK(cx_drafter_new(f32, &p, &d, &err) == CX_EINVAL, "a draft model without a file: %s", err.msg);
    p = cx_spec_defaults();
    p.draft_max = CX_SPEC_MAX_DRAFT + 1;
    CHECK(cx_drafter_new(f32, &p, &d, &err) == CX_EINVAL, "draft-max out of range: %s", err.msg);
    p = cx_spec_defaults();
    cx_spec *sp = NULL;
    cx_session *s = NULL;
    cx_sampler *smp = NULL;
    cx_sampler_params spp = cx_sampler_defaults();
    int32_t h[4] = {1, 2, 3, 4}, out[CX_SPEC_MAX_DRAFT + 1];
    if (cx_drafter_new(f32, &p, &d, &err) == 0 && cx_session_new(f32, 0, 1, &s, &err) == 0 &&
        cx_spec_new(d, cx_session_n_ctx(s), &sp, &err) == 0 && cx_sampler_new(cx_model_get_info(f32)->n_vocab, &spp, &smp, &err) == 0) {
        CHECK(cx_spec_step(sp, s, smp, h, 4, 8, out, &err) == CX_EINVAL && strstr(err.msg, "holds 0"),
              "a history out of step with the session: %s", err.msg);
        CHECK(cx_spec_step(sp, s, smp, h, 1, 0, out, &err) == CX_EINVAL, "no room to choose a token: %s", err.msg);
    } else {
        CHECK(0, "error checks' set-up: %s", err.msg);
    }
    cx_sampler_free(smp);
    cx_spec_free(sp);
    cx_session_free(s);
    cx_drafter_free(d);
}

static void run_all(void) {
    cx_shape sh = fx_shape("test-tiny", 256);
    cx_err err = {0};
    const char *f32_path = fx_synth(&sh, CX_TYPE_F32, 5, "tiny-f32.gguf");
    const char *other = fx_synth(&sh, CX_TYPE_F32, 6, "tiny-f32-other.gguf");
    const char *q8_path = fx_synth(&sh, CX_TYPE_Q8_0, 5, "tiny-q8.gguf");
    const char *q4_path = fx_synth(&sh, CX_TYPE_Q4_0, 5, "tiny-q4.gguf");
    cx_model *f32 = fx_load(f32_path, NULL), *q8 = fx_load(q8_path, NULL), *q4 = fx_load(q4_path, NULL);
    if (f32) {
        check_greedy(f32, "test-tiny f32", other, 1);
        check_same_file(f32, f32_path, "test-tiny f32");
    }
    if (q8) {
        check_greedy(q8, "test-tiny q8_0", NULL, 0);
        check_same_file(q8, q8_path, "test-tiny q8_0 (row-major)");
    }
    if (q4) check_greedy(q4, "test-tiny q4_0", NULL, 0);
    cx_shape moe = fx_shape("moe-tiny", 256), oss = fx_shape("gpt-oss-tiny", 256);
    cx_model *mm = fx_synth_model(&moe, CX_TYPE_F32, 3, "moe-tiny.gguf", NULL);
    if (mm) check_greedy(mm, "moe-tiny f32", NULL, 1);
    cx_model *go = fx_synth_model(&oss, CX_TYPE_MXFP4, 3, "gpt-oss-tiny.gguf", NULL);
    if (go) check_greedy(go, "gpt-oss-tiny mxfp4", NULL, 0);
    char real[512];
    if (fx_real_model("stories260K.gguf", "stories260K checks", real, sizeof real)) {
        cx_model *st = fx_load(real, NULL);
        if (st) {
            check_greedy(st, "stories260K (real) f32", NULL, 1);
            check_same_file(st, real, "stories260K (real)");
            cx_model_free(st);
        }
    }
    if (f32) {
        cx_spec_params p = cx_spec_defaults();
        cx_drafter *d = NULL;
        p.kind = CX_SPEC_SELF;
        p.self_type = CX_TYPE_Q4_0;
        p.tmp_dir = fx_dir();
        p.adapt = 0;
        p.draft_max = 3;
        if (cx_drafter_new(f32, &p, &d, &err) == 0) {
            check_sampled(f32, d, "self:q4_0, sampled");
            check_sampled_is_plain(f32, d, "self:q4_0, fixed length");
            cx_drafter_free(d);
        } else {
            CHECK(0, "self-draft: %s", err.msg);
        }
        p = cx_spec_defaults();
        p.kind = CX_SPEC_NGRAM;
        p.ngram_min = 1;
        p.adapt = 0;
        p.draft_max = 3;
        if (cx_drafter_new(f32, &p, &d, &err) == 0) {
            check_sampled(f32, d, "ngram, sampled");
            cx_drafter_free(d);
        }
        p.adapt = 1;
        if (cx_drafter_new(f32, &p, &d, &err) == 0) {
            check_sampled_is_plain(f32, d, "ngram, adaptive");
            cx_drafter_free(d);
        }
        p = cx_spec_defaults();
        p.kind = CX_SPEC_MODEL;
        p.draft_path = other;
        p.adapt = 0;
        p.draft_max = 3;
        if (cx_drafter_new(f32, &p, &d, &err) == 0) {
            check_sampled(f32, d, "model (other seed), sampled");
            check_batch_drafts(f32, d, 0, "batched drafts, greedy");
            check_batch_drafts(f32, d, 0.9f, "batched drafts, sampled");
            cx_drafter_free(d);
        }
        p.p_min = 0.02f; /* the draft model stops at tokens it is unsure of */
        if (cx_drafter_new(f32, &p, &d, &err) == 0) {
            check_batch_drafts(f32, d, 0, "batched drafts, greedy, p_min 0.02");
            check_batch_drafts(f32, d, 0.9f, "batched drafts, sampled, p_min 0.02");
            cx_drafter_free(d);
        }
        p.p_min = 0;
        p.adapt = 1; /* adaptive lengths (timed: they differ from run to run) change nothing sampled either */
        if (cx_drafter_new(f32, &p, &d, &err) == 0) {
            check_sampled_is_plain(f32, d, "model (other seed), adaptive");
            cx_drafter_free(d);
        }
        cx_shape sh2 = fx_shape("gate-micro", 256); /* another vocabulary size */
        const char *ov = fx_synth(&sh2, CX_TYPE_F32, 1, "gate-micro.gguf");
        if (q8 && ov) check_errors(f32, q8, ov);
    }
    cx_model_free(go);
    cx_model_free(mm);
    cx_model_free(q4);
    cx_model_free(q8);
    cx_model_free(f32);
    fx_cleanup();
}

TEST_MAIN(run_all())
