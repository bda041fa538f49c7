/*
 * test_spec_sched.c - speculative decoding inside the request scheduler
 * (cx_sched_params.drafter, cx_request.speculate; docs/serving.md,
 * "Speculative decoding"):
 *   - greedy output of concurrent requests (staggered arrivals, mixed prompt
 *     lengths, chunked prefill beside the verify segments) equals each
 *     request alone without speculation, token for token, and with f32
 *     weights the logits each token was chosen from bit for bit: with the
 *     n-gram lookup, with the model itself as its draft (every draft token
 *     accepted), with a different model of the same vocabulary as the draft
 *     (most rejected: the rollback path), with q8_0 weights (tokens), under
 *     preemption (a small KV cache), and on stories260K when present;
 *   - a draft model drafts the step's sequences together (fewer passes of
 *     it than draft tokens with 3 or 4 sequences: alone, each token costs
 *     one);
 *   - the counters add up: accepted <= drafted, the tokens of the
 *     speculative steps are n_gen - 1 and accepted + one per step, the
 *     scheduler's totals are the requests' sums; speculate = N caps each
 *     draft at N, speculate = 0 turns a request's speculation off;
 *   - spec_max_batch: in a step where more sequences decode, nothing is
 *     drafted; once fewer do, it speculates again;
 *   - cancelling a speculating request mid-generation gives every KV block
 *     back, and the next request in its slot is exact again;
 *   - sampled requests with a drafter are the plain sampled requests with
 *     their seeds, token for token, with sane counters; threads submitting and cancelling against the run thread
 *     (under ThreadSanitizer in make tsan);
 *   - requests with LoRA adapters (two and none in one batch, and under
 *     lora_split) are the plain scheduler's token for token and, f32, logit
 *     for logit (the draft runs without the adapter);
 *   - bad parameters: a drafter of another model, a negative
 *     spec_max_batch, speculate below -1.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"

static int V; /* vocabulary of the current model */

/* Prompt q of length n: distinct tokens per request, with a repeated stretch
 * so the lookup finds something to draft. */
static void make_prompt(int q, int n, int32_t *out) {
    for (int i = 0; i < n; i++) out[i] = (int32_t)(((i % 12) * 7919 + 131 * q + 13) % V);
}

/* Reference: the request alone, its prompt in one cx_eval then greedy tokens
 * one per call; the logits each token was chosen from into lg[k][V] if not NULL. */
static int alone(cx_model *m, const int32_t *p, int n, int gen, int32_t *out, float *lg) {
    cx_session *s;
    cx_err err = {0};
    if (cx_session_new(m, 0, 1, &s, &err)) {
        CHECK(0, "session: %s", err.msg);
        return 0;
    }
    const float *l;
    int k = 0, ok = cx_eval(s, p, n, &l, &err) == 0;
    while (ok && k < gen) {
        int best = 0;
        for (int i = 1; i < V; i++)
            if (l[i] > l[best]) best = i;
        if (lg) memcpy(lg + (size_t)k * (size_t)V, l, sizeof(float) * (size_t)V);
        out[k++] = best;
        if (k < gen) ok = cx_eval(s, out + k - 1, 1, &l, &err) == 0;
    }
    CHECK(ok, "alone: %s", err.msg);
    cx_session_free(s);
    return k;
}

enum { MAXG = 128 };

/* What a test request collects through its callbacks. */
typedef struct got {
    int32_t tok[MAXG];
    float *logits;     /* if set: [MAXG][V], each token's logits */
    int n, done, state, reason, index_ok;
    cx_request_stats st; /* at on_done (pointers not kept) */
} got;

static void on_token(void *user, const cx_token_event *ev) {
    got *g = user;
    g->index_ok += ev->index == g->n;
    if (g->logits && g->n < MAXG) memcpy(g->logits + (size_t)g->n * (size_t)V, ev->logits, sizeof(float) * (size_t)V);
    if (g->n < MAXG) g->tok[g->n++] = ev->token;
}

static void on_done(void *user, const cx_request_stats *st) {
    got *g = user;
    g->done++;
    g->state = st->state;
    g->reason = st->reason;
    g->st = *st;
    g->st.itl_ns = NULL;
    g->st.tokens = NULL;
    g->st.text = NULL;
}

/* A greedy request for prompt p[0..n), gen tokens, collecting into g. */
static cx_request greedy(const int32_t *p, int n, int gen, got *g) {
    cx_request r = cx_request_defaults();
    r.prompt = p;
    r.n_prompt = n;
    r.sampling.temperature = 0;
    r.sampling.repeat_penalty = 1; /* plain argmax, as the reference */
    r.max_tokens = gen;
    r.ignore_eos = 1;
    r.user = g;
    r.on_token = on_token;
    r.on_done = on_done;
    float *keep = g->logits;
    memset(g, 0, sizeof *g);
    g->logits = keep;
    return r;
}

/* Step until idle (bounded). */
static void drain(cx_sched *s) {
    cx_err err = {0};
    for (int i = 0; i < 100000 && cx_sched_step(s, &err) > 0; i++) {}
}

/* A drafter of `kind` for m (draft: the draft model's file for CX_SPEC_MODEL), or NULL after a failed check. */
static cx_drafter *drafter(const cx_model *m, int kind, const char *draft, int fixed) {
    cx_spec_params p = cx_spec_defaults();
    p.kind = kind;
    p.draft_path = draft;
    p.adapt = !fixed;
    p.draft_max = 6;
    cx_drafter *d = NULL;
    cx_err err = {0};
    if (cx_drafter_new(m, &p, &d, &err)) CHECK(0, "drafter %s: %s", cx_spec_kind_name(kind), err.msg);
    return d;
}

/* The scheduler's spec totals equal the requests' sums, and each request's add up. */
typedef struct sums {
    int64_t steps, verified, drafted, accepted, tokens;
} sums;

static void add_request(sums *t, const cx_request_stats *st) {
    t->steps += st->spec_steps;
    t->verified += st->spec_verified;
    t->drafted += st->spec_drafted;
    t->accepted += st->spec_accepted;
    t->tokens += st->spec_tokens;
}

/* The request's own counters: accepted <= drafted, tokens = accepted + one per step; with
 * every decode step speculative (all_spec), tokens = n_gen - 1. */
static void check_request_counts(const char *what, int q, const cx_request_stats *st, int all_spec) {
    CHECK(st->spec_accepted <= st->spec_drafted && st->spec_verified <= st->spec_steps &&
              st->spec_drafted >= st->spec_verified,
          "%s: request %d: accepted %d <= drafted %d, verified %d <= steps %d", what, q, st->spec_accepted,
          st->spec_drafted, st->spec_verified, st->spec_steps);
    CHECK(st->spec_tokens == st->spec_accepted + st->spec_steps,
          "%s: request %d: tokens %d = accepted %d + steps %d", what, q, st->spec_tokens, st->spec_accepted,
          st->spec_steps);
    if (all_spec)
        CHECK(st->spec_tokens == st->n_gen - 1, "%s: request %d: every token but the first from a speculative step "
              "(%d of %d)", what, q, st->spec_tokens, st->n_gen);
    CHECK(st->spec_draft_ns >= 0 && st->spec_verify_ns >= 0 && (st->spec_steps == 0 || st->spec_verify_ns > 0),
          "%s: request %d: times recorded", what, q);
}

#define NREQ 5
static const int plen[NREQ] = {3, 40, 17, 70, 9};
/* Prompts of real text (stories260K) instead, when text_len[0] > 0. */
static int32_t text_tok[NREQ][128];
static int text_len[NREQ];

/* Requests of mixed lengths, arriving two per step, on max_seqs sequences
 * with a small chunk, against each alone; every step speculates
 * (spec_max_batch >= max_seqs). preempt_kv > 0 caps the cache (preemption).
 * all_accepted: the draft is the model itself (greedy f32: every draft token
 * is the model's own). Returns the drafted count. */
static int64_t check_equal_alone(cx_model *m, cx_drafter *d, const char *what, int max_seqs, int chunk, int preempt_kv,
                                 int all_accepted, int64_t *rejected) {
    enum { GEN = 40 };
    int32_t p[NREQ][128], ref[NREQ][GEN];
    int len[NREQ];
    int f32 = cx_model_get_info(m)->main_type == CX_TYPE_F32;
    float *ref_lg = malloc(sizeof(float) * (size_t)NREQ * GEN * (size_t)V);
    static got g[NREQ];
    for (int q = 0; q < NREQ; q++) {
        len[q] = text_len[0] ? text_len[q] : plen[q];
        if (text_len[0]) memcpy(p[q], text_tok[q], sizeof(int32_t) * (size_t)len[q]);
        else make_prompt(q, plen[q], p[q]);
        alone(m, p[q], len[q], GEN, ref[q], ref_lg + (size_t)q * GEN * (size_t)V);
        g[q].logits = malloc(sizeof(float) * MAXG * (size_t)V);
    }
    cx_sched_params sp = cx_sched_defaults();
    sp.max_seqs = max_seqs;
    sp.max_batch_tokens = 48;
    sp.chunk = chunk;
    sp.kv.prefix_cache = 0;
    sp.drafter = d;
    sp.spec_max_batch = max_seqs;
    if (preempt_kv) sp.kv.max_tokens = preempt_kv;
    cx_sched *s = NULL;
    cx_err err = {0};
    int64_t drafted = 0;
    if (cx_sched_new(m, &sp, &s, &err)) {
        CHECK(0, "%s: cx_sched_new: %s", what, err.msg);
        goto out;
    }
    int64_t id[NREQ];
    for (int q = 0; q < NREQ; q++) {
        cx_request r = greedy(p[q], len[q], GEN, &g[q]);
        id[q] = cx_sched_submit(s, &r, &err);
        CHECK(id[q] > 0, "%s: submit %d: %s", what, q, err.msg);
        if (q % 2) cx_sched_step(s, &err); /* staggered arrivals */
    }
    drain(s);
    cx_sched_stats st;
    cx_sched_get_stats(s, &st);
    sums t = {0};
    for (int q = 0; q < NREQ; q++) {
        CHECK(g[q].done == 1 && g[q].state == CX_REQ_FINISHED && g[q].reason == CX_STOP_LENGTH,
              "%s: request %d ended once as finished/length (done %d state %d reason %d)", what, q, g[q].done,
              g[q].state, g[q].reason);
        CHECK(g[q].n == GEN && !memcmp(g[q].tok, ref[q], sizeof ref[q]), "%s: request %d's tokens equal it alone", what, q);
        CHECK(g[q].index_ok == GEN, "%s: request %d's token events are numbered in order", what, q);
        if (f32) {
            int same = 0;
            while (same < GEN && !memcmp(g[q].logits + (size_t)same * (size_t)V,
                                         ref_lg + ((size_t)q * GEN + (size_t)same) * (size_t)V, sizeof(float) * (size_t)V))
                same++;
            CHECK(same == GEN, "%s: request %d's logits equal it alone bit for bit (first difference at token %d)", what,
                  q, same);
        }
        cx_request_stats rs;
        CHECK(cx_sched_request_stats(s, id[q], &rs) == 0 && rs.n_gen == GEN, "%s: request %d's record", what, q);
        check_request_counts(what, q, &rs, !preempt_kv);
        if (all_accepted)
            CHECK(rs.spec_accepted == rs.spec_drafted, "%s: request %d: the model drafting for itself is always right "
                  "(%d of %d)", what, q, rs.spec_accepted, rs.spec_drafted);
        add_request(&t, &rs);
    }
    CHECK(st.spec_steps == t.steps && st.spec_verified == t.verified && st.spec_drafted == t.drafted &&
              st.spec_accepted == t.accepted && st.spec_tokens == t.tokens,
          "%s: the scheduler's totals are the requests' sums (steps %lld/%lld, drafted %lld/%lld, accepted %lld/%lld, "
          "tokens %lld/%lld)", what, (long long)st.spec_steps, (long long)t.steps, (long long)st.spec_drafted,
          (long long)t.drafted, (long long)st.spec_accepted, (long long)t.accepted, (long long)st.spec_tokens,
          (long long)t.tokens);
    CHECK(st.spec_passes <= st.steps && (st.spec_passes > 0) == (st.spec_verified > 0) &&
              (st.spec_passes == 0 || st.spec_verify_ns > 0),
          "%s: passes that checked drafts: %lld of %lld steps", what, (long long)st.spec_passes, (long long)st.steps);
    if (cx_drafter_model(d)) /* a draft model drafts the step's sequences together: drafting alone, each draft token
                              * costs a pass of the draft model (its catch-up's or its predecessor's) */
        CHECK(st.spec_draft_passes > 0 && (max_seqs < 3 || st.spec_draft_passes < st.spec_drafted),
              "%s: %lld draft tokens in %lld passes of the draft model", what, (long long)st.spec_drafted,
              (long long)st.spec_draft_passes);
    else
        CHECK(st.spec_draft_passes == 0, "%s: the lookup runs no draft model", what);
    CHECK(st.finished == NREQ && st.running == 0 && st.waiting == 0, "%s: all finished, none left", what);
    CHECK(st.kv_blocks_used == 0, "%s: every KV block returned (%lld in use)", what, (long long)st.kv_blocks_used);
    if (preempt_kv) CHECK(st.preemptions > 0, "%s: the small cache forced preemptions", what);
    printf("%-40s steps %3lld (%3lld verifying), drafted %4lld in %4lld draft passes, accepted %4lld, %lld tokens from "
           "%lld spec steps, preemptions %lld\n", what, (long long)st.steps, (long long)st.spec_passes,
           (long long)st.spec_drafted, (long long)st.spec_draft_passes, (long long)st.spec_accepted,
           (long long)st.spec_tokens, (long long)st.spec_steps, (long long)st.preemptions);
    drafted = st.spec_drafted;
    if (rejected) *rejected = st.spec_drafted - st.spec_accepted;
    cx_sched_free(s);
out:
    for (int q = 0; q < NREQ; q++) {
        free(g[q].logits);
        g[q].logits = NULL;
    }
    free(ref_lg);
    return drafted;
}

/* speculate = N caps each draft at N; speculate = 0 is no speculation; both exact. */
static void check_per_request(cx_model *m, cx_drafter *d) {
    enum { GEN = 30 };
    int32_t p[3][32], ref[3][GEN];
    static got g[3];
    for (int q = 0; q < 3; q++) {
        make_prompt(q + 7, 24, p[q]);
        alone(m, p[q], 24, GEN, ref[q], NULL);
    }
    cx_sched_params sp = cx_sched_defaults();
    sp.max_seqs = 3;
    sp.max_batch_tokens = 48;
    sp.kv.prefix_cache = 0;
    sp.drafter = d;
    sp.spec_max_batch = 3;
    cx_sched *s = NULL;
    cx_err err = {0};
    if (cx_sched_new(m, &sp, &s, &err)) {
        CHECK(0, "per request: %s", err.msg);
        return;
    }
    static const int spec[3] = {0, 2, -1};
    for (int q = 0; q < 3; q++) {
        cx_request r = greedy(p[q], 24, GEN, &g[q]);
        r.speculate = spec[q];
        CHECK(cx_sched_submit(s, &r, &err) > 0, "per request: submit %d: %s", q, err.msg);
    }
    drain(s);
    for (int q = 0; q < 3; q++)
        CHECK(g[q].n == GEN && !memcmp(g[q].tok, ref[q], sizeof ref[q]), "speculate %d: tokens equal it alone", spec[q]);
    CHECK(g[0].st.spec_steps == 0 && g[0].st.spec_drafted == 0 && g[0].st.spec_tokens == 0,
          "speculate 0: no speculative step (%d)", g[0].st.spec_steps);
    CHECK(g[1].st.spec_tokens == GEN - 1 && g[1].st.spec_drafted <= 2 * g[1].st.spec_verified && g[1].st.spec_verified > 0,
          "speculate 2: drafts of at most 2 tokens (%d in %d verifying steps)", g[1].st.spec_drafted,
          g[1].st.spec_verified);
    CHECK(g[2].st.spec_steps > 0 && g[2].st.spec_verified > 0, "speculate -1: speculates (%d verifying steps)",
          g[2].st.spec_verified);
    for (int q = 0; q < 3; q++) check_request_counts("per request", q, &g[q].st, spec[q] != 0);
    cx_sched_free(s);
}

/* spec_max_batch 2 with 3 decoding sequences: nothing drafted while 3 decode; with 2, drafts again. */
static void check_max_batch(cx_model *m, cx_drafter *d) {
    cx_sched_params sp = cx_sched_defaults();
    sp.max_seqs = 3;
    sp.max_batch_tokens = 48;
    sp.kv.prefix_cache = 0;
    sp.drafter = d;
    sp.spec_max_batch = 2;
    cx_sched *s = NULL;
    cx_err err = {0};
    if (cx_sched_new(m, &sp, &s, &err)) {
        CHECK(0, "max batch: %s", err.msg);
        return;
    }
    int32_t p[3][16];
    static got g[3];
    static const int gen[3] = {8, 40, 40};
    int64_t id[3];
    for (int q = 0; q < 3; q++) {
        make_prompt(q + 3, 12, p[q]);
        cx_request r = greedy(p[q], 12, gen[q], &g[q]);
        r.speculate = 4;
        id[q] = cx_sched_submit(s, &r, &err);
    }
    int three = 0, two = 0, bad = 0;
    for (int i = 0; i < 200; i++) {
        int decoding = 0;
        for (int q = 0; q < 3; q++) {
            cx_request_stats rs;
            if (cx_sched_request_stats(s, id[q], &rs) == 0 && rs.state == CX_REQ_DECODE) decoding++;
        }
        cx_sched_stats a, b;
        cx_sched_get_stats(s, &a);
        if (cx_sched_step(s, &err) <= 0) break;
        cx_sched_get_stats(s, &b);
        if (decoding == 3) { /* every one decodes: past spec_max_batch */
            three++;
            bad += b.spec_steps != a.spec_steps || b.spec_drafted != a.spec_drafted;
        } else if (decoding == 2 && b.spec_steps == a.spec_steps + 2) {
            two++;
        }
    }
    CHECK(three > 0 && bad == 0, "3 sequences decoding past spec_max_batch 2: no speculative step in %d steps (%d with one)",
          three, bad);
    CHECK(two > 0, "2 sequences decoding: both speculate (%d steps)", two);
    CHECK(g[0].done && g[1].done && g[2].done && g[1].n == 40 && g[2].n == 40, "all three ended");
    cx_sched_free(s);
}

/* Cancel a speculating request mid-generation: every KV block back; the next request in its slot is exact. */
static void check_cancel(cx_model *m, cx_drafter *d) {
    cx_sched_params sp = cx_sched_defaults();
    sp.max_seqs = 1;
    sp.max_batch_tokens = 16;
    sp.chunk = 16;
    sp.kv.prefix_cache = 0;
    sp.drafter = d;
    cx_sched *s = NULL;
    cx_err err = {0};
    if (cx_sched_new(m, &sp, &s, &err)) {
        CHECK(0, "cancel: %s", err.msg);
        return;
    }
    cx_kv_stats kv0, kv1;
    cx_kv_cache_stats(cx_sched_cache(s), &kv0);
    int32_t p[40], ref[50];
    make_prompt(2, 40, p);
    static got a, b;
    cx_request ra = greedy(p, 40, 100, &a);
    int64_t ia = cx_sched_submit(s, &ra, &err);
    for (int i = 0; i < 8; i++) cx_sched_step(s, &err);
    cx_request_stats st;
    cx_sched_request_stats(s, ia, &st);
    CHECK(st.state == CX_REQ_DECODE && st.spec_steps > 0 && a.n > 0, "speculating after 8 steps (state %d, %d steps, %d "
          "tokens)", st.state, st.spec_steps, a.n);
    CHECK(cx_sched_cancel(s, ia) == 0, "cancel accepted");
    cx_sched_step(s, &err);
    cx_kv_cache_stats(cx_sched_cache(s), &kv1);
    CHECK(a.done == 1 && a.state == CX_REQ_CANCELLED && a.n == a.st.n_gen, "cancelled while speculating keeps its %d tokens",
          a.n);
    CHECK(kv1.blocks_used == kv0.blocks_used && kv1.blocks_used == 0, "every KV block back after the cancellation (%lld, "
          "before %lld)", (long long)kv1.blocks_used, (long long)kv0.blocks_used);
    alone(m, p, 40, 50, ref, NULL);
    cx_request rb = greedy(p, 40, 50, &b);
    cx_sched_submit(s, &rb, &err);
    drain(s);
    CHECK(b.n == 50 && !memcmp(b.tok, ref, sizeof ref), "the next request in the slot equals it alone");
    cx_kv_cache_stats(cx_sched_cache(s), &kv1);
    CHECK(kv1.blocks_used == 0, "blocks back at the end (%lld)", (long long)kv1.blocks_used);
    cx_sched_free(s);
}

/* Three sampled requests (seeds, a repeat penalty on one) through a
 * scheduler with drafter d (NULL: none); their tokens into tok. */
static void run_sampled(cx_model *m, cx_drafter *d, const char *what, int32_t tok[3][30]) {
    cx_sched_params sp = cx_sched_defaults();
    sp.max_seqs = 3;
    sp.max_batch_tokens = 48;
    sp.kv.prefix_cache = 0;
    sp.drafter = d;
    cx_sched *s = NULL;
    cx_err err = {0};
    if (cx_sched_new(m, &sp, &s, &err)) {
        CHECK(0, "%s: %s", what, err.msg);
        return;
    }
    int32_t p[3][20];
    static got g[3];
    for (int q = 0; q < 3; q++) {
        make_prompt(q + 11, 20, p[q]);
        cx_request r = greedy(p[q], 20, 30, &g[q]);
        r.sampling.temperature = 0.8f;
        r.sampling.top_k = 20;
        r.sampling.repeat_penalty = q == 2 ? 1.3f : 1.0f;
        r.sampling.seed = 42 + (uint64_t)q;
        CHECK(cx_sched_submit(s, &r, &err) > 0, "%s: submit: %s", what, err.msg);
    }
    drain(s);
    for (int q = 0; q < 3; q++) {
        CHECK(g[q].done == 1 && g[q].state == CX_REQ_FINISHED && g[q].n == 30, "%s: request %d finished (%d tokens)",
              what, q, g[q].n);
        if (d) check_request_counts(what, q, &g[q].st, 1);
        memcpy(tok[q], g[q].tok, sizeof tok[q]);
    }
    cx_sched_stats st;
    cx_sched_get_stats(s, &st);
    CHECK(st.kv_blocks_used == 0 && (st.spec_steps > 0) == (d != NULL), "%s: blocks back, speculated iff drafting",
          what);
    cx_sched_free(s);
}

/* Sampled requests with speculation: their counters add up, and each is the
 * plain sampled request with its seed, token for token (spec_accept.c). */
static void check_sampled(cx_model *m, cx_drafter *d, const char *what) {
    int32_t plain[3][30], spec[3][30];
    run_sampled(m, NULL, what, plain);
    run_sampled(m, d, what, spec);
    for (int q = 0; q < 3; q++)
        CHECK(!memcmp(plain[q], spec[q], sizeof plain[q]), "%s: request %d's sampled tokens are the plain run's", what, q);
}

/* Requests with LoRA adapters (two, and none, mixed in one batch; and one
 * adapter a step under lora_split): with a drafter, each request's greedy
 * tokens, and with f32 weights its logits, are the same scheduler's without
 * one. The draft knows no adapter (a draft model runs its own weights), so
 * under an adapter its drafts are checked, and rejected, like any other's. */
enum { AD_GEN = 30 }; /* tokens each adapter request generates */

static void run_adapters(cx_model *m, cx_drafter *d, const char *a1, const char *a2, int split,
                         int32_t tok[4][AD_GEN], float *lg, int64_t *drafted, int64_t *accepted) {
    static const int use[4] = {1, 0, 2, 1};
    cx_sched_params sp = cx_sched_defaults();
    sp.max_seqs = 4;
    sp.max_batch_tokens = 48;
    sp.chunk = 16;
    sp.kv.prefix_cache = 0;
    sp.lora_split = split;
    sp.drafter = d;
    cx_sched *s = NULL;
    cx_err err = {0};
    if (cx_sched_new(m, &sp, &s, &err) || cx_sched_adapter_add(s, 1, "a1", a1, 0, &err) ||
        cx_sched_adapter_add(s, 2, "a2", a2, 0, &err)) {
        CHECK(0, "adapters: %s", err.msg);
        cx_sched_free(s);
        return;
    }
    int32_t p[4][40];
    static got g[4];
    for (int q = 0; q < 4; q++) {
        make_prompt(q + 21, 24 + 5 * q, p[q]);
        g[q].logits = lg + (size_t)q * MAXG * (size_t)V;
        cx_request r = greedy(p[q], 24 + 5 * q, AD_GEN, &g[q]);
        r.adapter = use[q];
        CHECK(cx_sched_submit(s, &r, &err) > 0, "adapters: submit %d: %s", q, err.msg);
        if (q == 1) cx_sched_step(s, &err);
    }
    drain(s);
    for (int q = 0; q < 4; q++) {
        CHECK(g[q].done == 1 && g[q].state == CX_REQ_FINISHED && g[q].n == AD_GEN,
              "adapters%s: request %d (adapter %d) finished with %d tokens", split ? ", split" : "", q, use[q], g[q].n);
        if (d) check_request_counts("adapters", q, &g[q].st, 1);
        memcpy(tok[q], g[q].tok, sizeof tok[q]);
        g[q].logits = NULL;
    }
    cx_sched_stats st;
    cx_sched_get_stats(s, &st);
    CHECK(st.kv_blocks_used == 0 && (st.spec_steps > 0) == (d != NULL) && st.lora_loads >= 2,
          "adapters: blocks back, speculated iff drafting, both adapters loaded (%lld loads)",
          (long long)st.lora_loads);
    *drafted = st.spec_drafted;
    *accepted = st.spec_accepted;
    cx_sched_free(s);
}

static void check_adapters(cx_model *m, cx_drafter *d, const char *what) {
    /* strong enough to change gate-micro's greedy text (checked below) */
    cx_lora_synth_params lp = {.rank = 4, .alpha = 8, .targets = CX_LORA_ALL, .seed = 1, .type = CX_TYPE_F32,
                               .strength = 1.0f};
    const char *a1 = fx_synth_adapter(m, &lp, "spec-a1.gguf");
    lp.seed = 2;
    const char *a2 = a1 ? fx_synth_adapter(m, &lp, "spec-a2.gguf") : NULL;
    if (!a2) {
        CHECK(0, "%s: adapters written", what);
        return;
    }
    size_t n = (size_t)4 * MAXG * (size_t)V;
    float *lp0 = malloc(sizeof(float) * n), *lp1 = malloc(sizeof(float) * n);
    int f32 = cx_model_get_info(m)->main_type == CX_TYPE_F32;
    for (int split = 0; split < 2 && lp0 && lp1; split++) {
        int32_t plain[4][AD_GEN], spec[4][AD_GEN];
        int64_t none, drafted, accepted;
        run_adapters(m, NULL, a1, a2, split, plain, lp0, &none, &none);
        run_adapters(m, d, a1, a2, split, spec, lp1, &drafted, &accepted);
        for (int q = 0; q < 4; q++) {
            CHECK(!memcmp(plain[q], spec[q], sizeof plain[q]), "%s%s: request %d's tokens are the plain run's", what,
                  split ? ", lora_split" : "", q);
            if (f32)
                CHECK(!memcmp(lp0 + (size_t)q * MAXG * (size_t)V, lp1 + (size_t)q * MAXG * (size_t)V,
                              sizeof(float) * AD_GEN * (size_t)V),
                      "%s%s: request %d's logits are the plain run's bit for bit", what, split ? ", lora_split" : "", q);
        }
        CHECK(drafted > 0, "%s%s: it drafted (%lld tokens)", what, split ? ", lora_split" : "", (long long)drafted);
        if (!split) { /* the adapters are in force: request 0 (adapter 1) is not the base model's */
            int32_t p0[40], base[AD_GEN];
            make_prompt(21, 24, p0); /* run_adapters' request 0 */
            alone(m, p0, 24, AD_GEN, base, NULL);
            CHECK(memcmp(base, plain[0], sizeof base) != 0, "%s: adapter 1 changes request 0's tokens", what);
        }
        printf("%-40s lora_split %d: drafted %lld, accepted %lld, tokens and logits equal\n", what, split,
               (long long)drafted, (long long)accepted);
    }
    free(lp0);
    free(lp1);
}

/* Threads submitting (and cancelling every third) against the run thread, speculating. */
typedef struct thr_arg {
    cx_sched *s;
    int t;
    atomic_int *done;
} thr_arg;

static void on_done_count(void *user, const cx_request_stats *st) {
    (void)st;
    atomic_fetch_add((atomic_int *)user, 1);
}

static void *submitter(void *arg) {
    thr_arg *a = arg;
    int32_t p[24];
    for (int i = 0; i < 24; i++) p[i] = (int32_t)((i % 6 * 31 + a->t * 7 + 1) % V);
    for (int i = 0; i < 8; i++) {
        cx_request r = cx_request_defaults();
        r.prompt = p;
        r.n_prompt = 8 + i;
        r.max_tokens = 12 + i;
        r.sampling.temperature = i % 2 ? 0.7f : 0;
        r.user = a->done;
        r.on_done = on_done_count;
        cx_err err = {0};
        int64_t id = cx_sched_submit(a->s, &r, &err);
        if (id <= 0) atomic_fetch_add(a->done, 1);
        else if (i % 3 == 2) cx_sched_cancel(a->s, id);
    }
    return NULL;
}

static void check_threads(cx_model *m, cx_drafter *d) {
    cx_sched_params sp = cx_sched_defaults();
    sp.max_seqs = 3;
    sp.max_batch_tokens = 32;
    sp.n_threads = 2;
    sp.kv.prefix_cache = 0;
    sp.drafter = d;
    cx_sched *s = NULL;
    cx_err err = {0};
    if (cx_sched_new(m, &sp, &s, &err) || cx_sched_start(s, &err)) {
        CHECK(0, "threads: %s", err.msg);
        cx_sched_free(s);
        return;
    }
    atomic_int done = 0;
    pthread_t th[3];
    thr_arg args[3];
    for (int t = 0; t < 3; t++) {
        args[t] = (thr_arg){s, t, &done};
        pthread_create(&th[t], NULL, submitter, &args[t]);
    }
    for (int t = 0; t < 3; t++) pthread_join(th[t], NULL);
    cx_sched_stop(s, 1);
    cx_sched_stats st;
    cx_sched_get_stats(s, &st);
    CHECK(atomic_load(&done) == 24, "threads: every one of 24 requests accounted for (%d)", atomic_load(&done));
    CHECK(st.running == 0 && st.waiting == 0 && st.kv_blocks_used == 0 && st.spec_steps > 0,
          "threads: drained, blocks back, speculated (%lld steps)", (long long)st.spec_steps);
    cx_sched_free(s);
}

/* Bad parameters: one clear error each. */
static void check_bad(cx_model *m, cx_model *other, cx_drafter *d) {
    cx_err err = {0};
    cx_sched *s = NULL;
    cx_sched_params sp = cx_sched_defaults();
    sp.drafter = d;
    CHECK(cx_sched_new(other, &sp, &s, &err) == CX_EINVAL && strstr(err.msg, "drafter"), "a drafter of another model: %s",
          err.msg);
    sp.spec_max_batch = -1;
    CHECK(cx_sched_new(m, &sp, &s, &err) == CX_EINVAL && strstr(err.msg, "spec_max_batch"), "spec_max_batch -1: %s",
          err.msg);
    sp.spec_max_batch = 0;
    if (cx_sched_new(m, &sp, &s, &err)) {
        CHECK(0, "sched: %s", err.msg);
        return;
    }
    int32_t p[4] = {1, 2, 3, 4};
    cx_request r = cx_request_defaults();
    CHECK(r.speculate == -1, "cx_request_defaults: speculate -1 (on with a drafter)");
    r.prompt = p;
    r.n_prompt = 4;
    r.speculate = -2;
    CHECK(cx_sched_submit(s, &r, &err) == CX_EINVAL && strstr(err.msg, "speculate"), "speculate -2: %s", err.msg);
    cx_sched_free(s);
}

/* stories260K (real text: the lookup drafts from the story so far; a
 * self-draft quantized to q4_0 disagrees now and then): greedy equals it alone. */
static void check_stories(void) {
    char path[512];
    if (!fx_real_model("stories260K.gguf", "stories260K checks", path, sizeof path)) return;
    cx_model *m = fx_load(path, NULL);
    if (!m) return;
    V = cx_model_get_info(m)->n_vocab;
    static const char *texts[NREQ] = {"Once upon a time", "Lily and Tom went to the park. They saw a big dog. The dog",
                                      "One day, a little girl named Sue", "The sun was hot. The cat was sad because",
                                      "Tim had a red ball. He liked to play with his ball every day. One day"};
    for (int q = 0; q < NREQ; q++) {
        cx_err err = {0};
        CHECK(cx_tokenize(m, texts[q], strlen(texts[q]), CX_TOKENIZE_BOS, text_tok[q], 128, &text_len[q], &err) == 0,
              "tokenize: %s", err.msg);
    }
    cx_drafter *ng = drafter(m, CX_SPEC_NGRAM, NULL, 0), *self = drafter(m, CX_SPEC_MODEL, path, 1);
    cx_spec_params sp = cx_spec_defaults();
    sp.kind = CX_SPEC_SELF;
    sp.self_type = CX_TYPE_Q4_0;
    sp.adapt = 0;
    sp.draft_max = 5;
    sp.tmp_dir = fx_dir();
    cx_drafter *q4 = NULL;
    cx_err err = {0};
    CHECK(cx_drafter_new(m, &sp, &q4, &err) == 0, "self-draft q4_0: %s", err.msg);
    if (ng) {
        int64_t n = check_equal_alone(m, ng, "stories260K, ngram", 3, 16, 0, 0, NULL);
        CHECK(n > 0, "stories260K: the lookup drafted (%lld tokens)", (long long)n);
    }
    if (self) check_equal_alone(m, self, "stories260K, itself as draft", 3, 16, 0, 1, NULL);
    if (q4) {
        int64_t rejected = 0;
        check_equal_alone(m, q4, "stories260K, self:q4_0, 4 seqs", 4, 16, 0, 0, &rejected);
        CHECK(rejected > 0, "stories260K: the q4_0 self-draft was rejected at times (%lld): the rollback ran",
              (long long)rejected);
        check_equal_alone(m, q4, "stories260K, self:q4_0, 128-position cache", 4, 16, 128, 0, NULL);
        check_sampled(m, q4, "stories260K sampled, self:q4_0");
    }
    cx_drafter_free(ng);
    cx_drafter_free(self);
    cx_drafter_free(q4);
    cx_model_free(m);
    memset(text_len, 0, sizeof text_len);
}

/* The adapter checks on gate-micro, whose greedy text an adapter changes
 * (test-tiny's does not: it repeats one token whatever the adapter). */
static void check_adapters_all(void) {
    const char *path = fx_synth(cx_shape_find("gate-micro"), CX_TYPE_F32, 5, "micro.gguf");
    const char *q8path = fx_synth(cx_shape_find("gate-micro"), CX_TYPE_Q8_0, 5, "micro-q8.gguf");
    cx_model *f32 = path ? fx_load(path, NULL) : NULL, *q8 = q8path ? fx_load(q8path, NULL) : NULL;
    if (f32 && q8) {
        int keep = V;
        V = cx_model_get_info(f32)->n_vocab;
        cx_drafter *ng = drafter(f32, CX_SPEC_NGRAM, NULL, 1), *self = drafter(f32, CX_SPEC_MODEL, path, 1);
        cx_drafter *q8ng = drafter(q8, CX_SPEC_NGRAM, NULL, 1);
        if (ng && self && q8ng) {
            check_adapters(f32, ng, "adapters, ngram");
            check_adapters(f32, self, "adapters, the base model as draft");
            check_adapters(q8, q8ng, "adapters, q8_0, ngram");
        }
        cx_drafter_free(ng);
        cx_drafter_free(self);
        cx_drafter_free(q8ng);
        V = keep;
    }
    cx_model_free(f32);
    cx_model_free(q8);
}

static void run_all(void) {
    cx_shape sh = fx_shape("test-tiny", 512);
    const char *path = fx_synth(&sh, CX_TYPE_F32, 11, "tiny.gguf");
    const char *other = fx_synth(&sh, CX_TYPE_F32, 12, "tiny-other.gguf");
    const char *q8path = fx_synth(&sh, CX_TYPE_Q8_0, 11, "tiny-q8.gguf");
    cx_model *f32 = path ? fx_load(path, NULL) : NULL, *q8 = q8path ? fx_load(q8path, NULL) : NULL;
    cx_model *f32b = other ? fx_load(other, NULL) : NULL;
    if (f32 && q8 && f32b) {
        V = cx_model_get_info(f32)->n_vocab;
        cx_drafter *ng = drafter(f32, CX_SPEC_NGRAM, NULL, 1), *self = drafter(f32, CX_SPEC_MODEL, path, 1);
        cx_drafter *diff = drafter(f32, CX_SPEC_MODEL, other, 1), *adapt = drafter(f32, CX_SPEC_MODEL, path, 0);
        cx_drafter *q8ng = drafter(q8, CX_SPEC_NGRAM, NULL, 1), *q8self = drafter(q8, CX_SPEC_MODEL, q8path, 1);
        if (ng && self && diff && adapt && q8ng && q8self) {
            check_equal_alone(f32, ng, "f32, ngram, 4 seqs, chunk 16", 4, 16, 0, 0, NULL);
            check_equal_alone(f32, self, "f32, itself as draft, 4 seqs", 4, 16, 0, 1, NULL);
            int64_t n = check_equal_alone(f32, diff, "f32, another model as draft, 3 seqs", 3, 0, 0, 0, NULL);
            CHECK(n > 0, "the other model drafted (%lld tokens)", (long long)n);
            check_equal_alone(f32, adapt, "f32, itself, adaptive length", 4, 16, 0, 1, NULL);
            check_equal_alone(f32, self, "f32, itself, 112-position cache", 4, 16, 112, 1, NULL);
            check_equal_alone(f32, diff, "f32, other, 112-position cache", 3, 16, 112, 0, NULL);
            check_equal_alone(q8, q8ng, "q8_0, ngram, 4 seqs", 4, 16, 0, 0, NULL);
            check_equal_alone(q8, q8self, "q8_0, itself as draft, 4 seqs", 4, 16, 0, 1, NULL);
            check_per_request(f32, self);
            check_max_batch(f32, self);
            check_cancel(f32, self);
            check_cancel(f32, ng);
            check_sampled(f32, diff, "sampled, another model as draft");
            check_sampled(f32, ng, "sampled, ngram");
            check_threads(f32, diff);
            check_bad(f32, f32b, ng);
        }
        cx_drafter_free(ng);
        cx_drafter_free(self);
        cx_drafter_free(diff);
        cx_drafter_free(adapt);
        cx_drafter_free(q8ng);
        cx_drafter_free(q8self);
    }
    cx_model_free(f32);
    cx_model_free(f32b);
    cx_model_free(q8);
    check_adapters_all();
    check_stories();
    fx_cleanup();
}

TEST_MAIN(run_all())
