/*
 * test_sched_progress.c - the scheduler's progress guarantee (docs/serving.md,
 * "Progress"): under random KV budgets (hot, warm, cold bytes, formats, a
 * spill file or none, the prefix cache on or off), 1..16 sequences, random
 * prompt lengths and token counts, priorities, cancellations, deadlines and
 * two LoRA adapters under a tight adapter budget:
 *   - every request ends exactly once (finished, cancelled, timed out, or
 *     failed with a reason) within the stated bound of steps,
 *     (max_seqs + 1) x the sum of (prompt + max_tokens) over the requests,
 *     times one more for each request of a higher class that may displace
 *     the lead;
 *   - a request fails only because the budgets can never hold it (never a
 *     pass that ran out of room: admission counts the budgets' bytes);
 *   - at the end no KV block is held (only unused cached prefixes stay, and
 *     the whole capacity is available again) and no adapter reference is
 *     left;
 *   - the same with the run thread and this thread submitting and
 *     cancelling (make tsan runs this file under ThreadSanitizer);
 *   - two trials in three speculate (the n-gram lookup, or the model as its
 *     own draft), with spec_max_batch 1..8: drafts take blocks and budget,
 *     and rollbacks leave shared partial blocks behind.
 * The case that livelocked before (two sequences, budgets below the
 * requests' needs, every pass failing and preempting) is among them; a
 * watchdog alarm turns any livelock into a failure.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"
#include "kv/kv_cache.h"
static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* xorshift64*: the trials are the same on every run. */
static uint32_t rnd(uint32_t n) {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (uint32_t)((rng * 0x2545f4914f6cdd1dull) >> 33) % n;
}

enum { MAXREQ = 40 };

typedef struct req {
    int32_t prompt[256];
    int n_prompt, max_tokens;
    atomic_int done, state;
    char error[256];
} req;
static req R[MAXREQ];

static void on_done(void *user, const cx_request_stats *st) {
    req *q = user;
    atomic_store(&q->state, st->state);
    snprintf(q->error, sizeof q->error, "%s", st->error);
    atomic_fetch_add(&q->done, 1);
}

/* Totals over every trial, so the test knows it exercised what it claims. */
static int64_t tot_preempt, tot_failed, tot_finished, tot_cancel, tot_timeout, tot_drafted;

/* Bytes of one block of the hot format of KV type `type` on model m. */
static int64_t hot_block(const cx_model *m, int type) {
    const cx_model_info *h = cx_model_get_info(m);
    return (int64_t)h->n_layer * (int64_t)kv_slab_bytes(kv_fmt_hot(type), h->n_head_kv * h->head_dim);
}

/* One trial: random parameters, requests, ends. threaded: the run thread steps while this one submits. */
static void trial(cx_model *m, const char *a1, const char *a2, cx_drafter *d, int t, int threaded) {
    cx_sched_params sp = cx_sched_defaults();
    sp.drafter = d;
    sp.spec_max_batch = 1 + t % 8;
    sp.max_seqs = 1 + (int)rnd(16);
    sp.max_batch_tokens = sp.max_seqs + (int)rnd(64);
    sp.chunk = rnd(3) ? 0 : 16 + (int)rnd(48);
    sp.kv.type = (int)rnd(3);          /* f32, f16, q8 */
    sp.kv.warm_type = rnd(2) ? CX_KV_Q8 : CX_KV_Q4;
    sp.kv.prefix_cache = (int)rnd(2);
    int64_t hb = hot_block(m, sp.kv.type);
    sp.kv.budget[CX_KV_HOT] = hb * (1 + (int64_t)rnd(12));
    sp.kv.budget[CX_KV_WARM] = rnd(3) ? 4096 * (int64_t)rnd(12) : 0;
    sp.kv.budget[CX_KV_COLD] = rnd(4) ? 4096 * (int64_t)rnd(24) : 0;
    const char *spill = fx_path("spill-%d", t);
    if (!rnd(5)) sp.kv.spill_path = spill;
    sp.lora_budget = 48000; /* one 32 KB adapter resident at a time: loads, evictions and waits */
    cx_sched *s = NULL;
    cx_err err = {0};
    if (cx_sched_new(m, &sp, &s, &err)) {
        CHECK(0, "trial %d: cx_sched_new: %s", t, err.msg);
        return;
    }
    CHECK(cx_sched_adapter_add(s, 1, "a1", a1, 0, &err) == 0 && cx_sched_adapter_add(s, 2, "a2", a2, 0, &err) == 0,
          "trial %d: adapters: %s", t, err.msg);
    const cx_model_info *h = cx_model_get_info(m);
    int n = 4 + (int)rnd(MAXREQ - 4), high = 0;
    int64_t work = 0, id[MAXREQ] = {0}, cancel_at[MAXREQ];
    cx_request rq[MAXREQ];
    for (int q = 0; q < n; q++) {
        req *r = &R[q];
        memset(r, 0, sizeof *r);
        r->n_prompt = 1 + (int)rnd(200);
        for (int i = 0; i < r->n_prompt; i++) r->prompt[i] = (int32_t)rnd((uint32_t)h->n_vocab);
        if (rnd(3) == 0 && q > 0) /* a shared beginning: the prefix cache has something to serve */
            memcpy(r->prompt, R[0].prompt, sizeof(int32_t) * (size_t)(r->n_prompt < R[0].n_prompt ? r->n_prompt : R[0].n_prompt));
        r->max_tokens = 1 + (int)rnd(48);
        cx_request x = cx_request_defaults();
        x.prompt = r->prompt;
        x.n_prompt = r->n_prompt;
        x.max_tokens = r->max_tokens;
        x.ignore_eos = 1;
        x.sampling.temperature = rnd(2) ? 0.0f : 0.8f;
        x.priority = rnd(4) ? 0 : 1 + (int)rnd(2);
        x.deadline_ms = rnd(8) ? 0 : 1 + rnd(40);
        x.adapter = (int)rnd(3);
        x.user = r;
        x.on_done = on_done;
        rq[q] = x;
        high += x.priority > 0;
        work += r->n_prompt + r->max_tokens;
        cancel_at[q] = rnd(7) ? -1 : (int64_t)rnd(60);
    }
    int64_t bound = (int64_t)(sp.max_seqs + 1) * work * (1 + high) + n + 8, steps = 0;
    if (threaded && cx_sched_start(s, &err)) {
        CHECK(0, "trial %d: start: %s", t, err.msg);
        cx_sched_free(s);
        return;
    }
    int submitted = 0;
    for (int64_t k = 0; submitted < n || (!threaded && k < bound); k++) {
        /* half at once, then one per step (threaded: one per 0..200 us) */
        while (submitted < n && (submitted < n / 2 || submitted <= k)) {
            id[submitted] = cx_sched_submit(s, &rq[submitted], &err);
            CHECK(id[submitted] > 0, "trial %d: submit %d: %s", t, submitted, err.msg);
            submitted++;
        }
        for (int q = 0; q < submitted; q++)
            if (cancel_at[q] == k && id[q] > 0) cx_sched_cancel(s, id[q]); /* CX_EINVAL once it ended: fine */
        if (threaded) {
            struct timespec ts = {0, (long)rnd(200) * 1000L};
            nanosleep(&ts, NULL);
            continue;
        }
        int live = cx_sched_step(s, &err);
        steps++;
        if (live == 0 && submitted == n) break;
        CHECK(live >= 0, "trial %d: step: %s", t, err.msg);
        if (live < 0) break;
    }
    if (threaded) cx_sched_stop(s, 1); /* drain: returns once every admitted request ended */
    else
        CHECK(steps <= bound, "trial %d: %lld requests ended within the bound (%lld steps, bound %lld)", t, (long long)n,
              (long long)steps, (long long)bound);
    cx_sched_stats st;
    cx_sched_get_stats(s, &st);
    int ended_ok = 1, failed_ok = 1;
    for (int q = 0; q < n; q++) {
        req *r = &R[q];
        int state = atomic_load(&r->state);
        ended_ok &= atomic_load(&r->done) == 1 && state >= CX_REQ_FINISHED;
        if (state == CX_REQ_FAILED && !strstr(r->error, "budgets")) {
            failed_ok = 0;
            fprintf(stderr, "trial %d request %d failed: %s\n", t, q, r->error);
        }
    }
    CHECK(ended_ok, "trial %d: every request ended exactly once in a final state", t);
    CHECK(failed_ok, "trial %d: failures are only requests the budgets can never hold", t);
    CHECK(st.running == 0 && st.waiting == 0 &&
              st.finished + st.cancelled + st.timed_out + st.failed == st.submitted && st.submitted == n,
          "trial %d: the counters add up (%lld submitted, %lld finished, %lld cancelled, %lld timed out, %lld failed)",
          t, (long long)st.submitted, (long long)st.finished, (long long)st.cancelled, (long long)st.timed_out,
          (long long)st.failed);
    kv_cache *c = (kv_cache *)cx_sched_cache(s);
    pthread_mutex_lock(&c->lock);
    int32_t avail = kv_blocks_available(c), cap = c->capacity;
    pthread_mutex_unlock(&c->lock);
    CHECK(avail == cap, "trial %d: no KV block leaked (%d of %d available; only unused cached prefixes held)", t, avail,
          cap);
    if (!sp.kv.prefix_cache) CHECK(st.kv_blocks_used == 0, "trial %d: no block in use (%lld)", t, (long long)st.kv_blocks_used);
    for (int i = 0; i < st.lora_registered; i++) {
        cx_adapter_info ai;
        CHECK(cx_sched_adapter_info(s, i, &ai) == 0 && ai.refs == 0 && ai.running == 0,
              "trial %d: adapter %d holds no reference (%d refs, %d running)", t, i, ai.refs, ai.running);
    }
    tot_preempt += st.preemptions;
    tot_failed += st.failed;
    tot_finished += st.finished;
    tot_cancel += st.cancelled;
    tot_timeout += st.timed_out;
    tot_drafted += st.spec_drafted;
    cx_sched_free(s);
}

#include "sched/sched.h" /* the scheduler's insides, for test_edges alone */

/* The request life cycle's edges (sched.h's diagram, which sched_move asserts). */
static void test_edges(void) {
    enum { Q = CX_REQ_QUEUED, P = CX_REQ_PREFILL, D = CX_REQ_DECODE, N = CX_REQ_FAILED + 1 };
    static const char *const edges[N] = {
        /* to:    Q P D F C T X   (F finished, C cancelled, T timeout, X failed) */
        [Q] = "0100111",
        [P] = "1011111",
        [D] = "1011111",
    };
    int ok = 1;
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++) {
            int want = edges[a] ? edges[a][b] == '1' : 0; /* the final states go nowhere */
            ok &= sched_edge((cx_req_state)a, (cx_req_state)b) == want;
        }
    CHECK(ok, "sched_edge: queued -> prefill or ended (not finished); running -> decode, queued or any end; final -> none");
    CHECK(!sched_is_final(CX_REQ_QUEUED) && !sched_is_final(CX_REQ_PREFILL) && !sched_is_final(CX_REQ_DECODE) &&
          sched_is_final(CX_REQ_FINISHED) &&
          sched_is_final(CX_REQ_CANCELLED) && sched_is_final(CX_REQ_TIMEOUT) && sched_is_final(CX_REQ_FAILED),
          "the last four states are final");
}

static void run_all(void) {
    alarm(600); /* a livelock is a failure, not a hung CI job */
    cx_model *m = fx_synth_model(cx_shape_find("gate-micro"), CX_TYPE_Q8_0, 5, "micro.gguf", NULL);
    if (!m) return;
    cx_lora_synth_params lp = {.rank = 4, .alpha = 8, .targets = CX_LORA_ALL, .seed = 1, .type = CX_TYPE_F32};
    const char *a1 = fx_synth_adapter(m, &lp, "a1.gguf");
    lp.seed = 2;
    const char *a2 = fx_synth_adapter(m, &lp, "a2.gguf");
    const char *env = getenv("PROGRESS_TRIALS");
    int trials = env ? atoi(env) : 40;
    test_edges();
    cx_spec_params dp = cx_spec_defaults();
    dp.adapt = 0;
    dp.draft_max = 5;
    cx_drafter *ng = NULL, *self = NULL;
    cx_err err = {0};
    CHECK(cx_drafter_new(m, &dp, &ng, &err) == 0, "n-gram drafter: %s", err.msg);
    dp.kind = CX_SPEC_MODEL;
    dp.draft_path = fx_path("micro.gguf");
    CHECK(cx_drafter_new(m, &dp, &self, &err) == 0, "draft model: %s", err.msg);
    for (int t = 0; t < trials; t++) trial(m, a1, a2, t % 3 == 1 ? ng : t % 3 == 2 ? self : NULL, t, t % 5 == 4);
    printf("%d trials: %lld finished, %lld cancelled, %lld timed out, %lld failed (too big for the budgets), "
           "%lld preemptions, %lld draft tokens\n", trials, (long long)tot_finished, (long long)tot_cancel,
           (long long)tot_timeout, (long long)tot_failed, (long long)tot_preempt, (long long)tot_drafted);
    CHECK(tot_preempt > 0 && tot_failed > 0 && tot_finished > 0 && tot_cancel > 0 && (trials < 3 || tot_drafted > 0),
          "the trials exercised preemption, failure, cancellation, completion and speculation");
    cx_drafter_free(ng);
    cx_drafter_free(self);
    cx_model_free(m);
    fx_cleanup();
}

TEST_MAIN(run_all())
