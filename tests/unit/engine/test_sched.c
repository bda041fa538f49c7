/*
 * test_sched.c - the request scheduler (cx_sched_*, docs/serving.md):
 *   - every request's tokens equal the same request served alone (greedy,
 *     prompt then one token per cx_eval): f32 bit for bit in the logits that
 *     chose them, so the tokens are equal; q8_0 token for token; with
 *     staggered arrivals, mixed prompt lengths and chunked prefill;
 *   - preemption under a KV cache too small for every sequence gives the
 *     same tokens as no preemption, and the blocks return to idle;
 *   - cancellation while queued, prefilling and decoding; deadlines while
 *     queued and decoding (partial output kept); a full queue refuses with
 *     CX_EBUSY and counts; priority order, FIFO within a class, aging;
 *   - stop strings (held back across tokens, never emitted), stop ids,
 *     max_tokens; the prefix cache serves a shared system prompt once, and
 *     nothing to a request with no_prefix_cache (its tokens unchanged);
 *   - four threads submitting and cancelling against the run thread
 *     (run under ThreadSanitizer by make tsan), then a drain;
 *   - bad parameters and bad requests: one clear error each.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"

static int V; /* vocabulary of the current model */

/* Sleep ms milliseconds. */
static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Prompt q of length n: distinct tokens per request. */
static void make_prompt(int q, int n, int32_t *out) {
    for (int i = 0; i < n; i++) out[i] = (int32_t)((i * 7919 + 131 * q + 13) % V);
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

/* What a test request collects through its callbacks. */
typedef struct got {
    int32_t tok[256];
    float *logits;     /* if set: [256][V], each token's logits */
    int n, done, state, reason, index_ok;
    char text[2048];
    size_t text_len;
    char final_text[2048];
} got;

static void on_token(void *user, const cx_token_event *ev) {
    got *g = user;
    g->index_ok += ev->index == g->n;
    if (g->logits && g->n < 256) memcpy(g->logits + (size_t)g->n * (size_t)V, ev->logits, sizeof(float) * (size_t)V);
    if (g->n < 256) g->tok[g->n++] = ev->token;
    if (g->text_len + ev->len < sizeof g->text) {
        memcpy(g->text + g->text_len, ev->text, ev->len);
        g->text_len += ev->len;
        g->text[g->text_len] = 0;
    }
}

static void on_done(void *user, const cx_request_stats *st) {
    got *g = user;
    g->done++;
    g->state = st->state;
    g->reason = st->reason;
    snprintf(g->final_text, sizeof g->final_text, "%s", st->text);
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

/* A scheduler with sp, or NULL after a failed check. */
static cx_sched *open_sched(cx_model *m, const cx_sched_params *sp, const char *what) {
    cx_sched *s = NULL;
    cx_err err = {0};
    if (cx_sched_new(m, sp, &s, &err)) CHECK(0, "%s: cx_sched_new: %s", what, err.msg);
    return s;
}

/* Step until idle (bounded). */
static void drain(cx_sched *s) {
    cx_err err = {0};
    for (int i = 0; i < 100000 && cx_sched_step(s, &err) > 0; i++) {}
}

/* A synthetic model of test-tiny's shape with a 512-token context. */
static cx_model *model(const char *type) {
    cx_shape sh = fx_shape("test-tiny", 512);
    const char *path = fx_synth(&sh, cx_type_from_name(type), 11, "tiny.gguf");
    cx_model *m = path ? fx_load(path, NULL) : NULL;
    if (path) unlink(path);
    if (m) V = cx_model_get_info(m)->n_vocab;
    return m;
}

#define NREQ 6
static const int plen[NREQ] = {3, 40, 17, 90, 64, 5};

/* Requests of mixed lengths, arriving two per step, on max_seqs sequences
 * with a small chunk, against each alone. preempt_kv > 0 caps the cache at
 * that many positions (preemption), and the test asks that it happened. */
static void check_equal_alone(cx_model *m, const char *what, int max_seqs, int chunk, int preempt_kv, int threads) {
    enum { GEN = 20 };
    int32_t p[NREQ][128], ref[NREQ][GEN];
    int f32 = cx_model_get_info(m)->main_type == CX_TYPE_F32;
    float *ref_lg = malloc(sizeof(float) * (size_t)NREQ * GEN * (size_t)V);
    static got g[NREQ];
    for (int q = 0; q < NREQ; q++) {
        make_prompt(q, plen[q], p[q]);
        alone(m, p[q], plen[q], GEN, ref[q], ref_lg + (size_t)q * GEN * (size_t)V);
        g[q].logits = malloc(sizeof(float) * 256 * (size_t)V);
    }
    cx_sched_params sp = cx_sched_defaults();
    sp.max_seqs = max_seqs;
    sp.max_batch_tokens = 32;
    sp.chunk = chunk;
    sp.n_threads = threads;
    sp.kv.prefix_cache = 0;
    if (preempt_kv) sp.kv.max_tokens = preempt_kv;
    cx_sched *s = open_sched(m, &sp, __func__);
    cx_err err = {0};
    if (!s) return;
    int64_t id[NREQ];
    for (int q = 0; q < NREQ; q++) {
        cx_request r = greedy(p[q], plen[q], GEN, &g[q]);
        id[q] = cx_sched_submit(s, &r, &err);
        CHECK(id[q] > 0, "%s: submit %d: %s", what, q, err.msg);
        if (q % 2) cx_sched_step(s, &err); /* staggered arrivals */
    }
    drain(s);
    cx_sched_stats st;
    cx_sched_get_stats(s, &st);
    for (int q = 0; q < NREQ; q++) {
        CHECK(g[q].done == 1 && g[q].state == CX_REQ_FINISHED && g[q].reason == CX_STOP_LENGTH,
              "%s: request %d ended once as finished/length (done %d state %d reason %d)", what, q, g[q].done,
              g[q].state, g[q].reason);
        CHECK(g[q].n == GEN && !memcmp(g[q].tok, ref[q], sizeof ref[q]), "%s: request %d's tokens equal it alone", what, q);
        CHECK(g[q].index_ok == GEN, "%s: request %d's token events are numbered in order", what, q);
        if (f32) /* bit for bit, preempted and recomputed ones included */
            CHECK(!memcmp(g[q].logits, ref_lg + (size_t)q * GEN * (size_t)V, sizeof(float) * GEN * (size_t)V),
                  "%s: request %d's logits equal it alone bit for bit", what, q);
        cx_request_stats rs;
        CHECK(cx_sched_request_stats(s, id[q], &rs) == 0 && rs.n_gen == GEN && rs.n_prompt == plen[q] &&
                  rs.t_submit <= rs.t_start && rs.t_start <= rs.t_first && rs.t_first <= rs.t_end,
              "%s: request %d's statistics are ordered", what, q);
        CHECK(!strcmp(rs.text, g[q].text), "%s: request %d: streamed text equals the final text", what, q);
    }
    CHECK(st.finished == NREQ && st.running == 0 && st.waiting == 0, "%s: all finished, none left", what);
    CHECK(st.kv_blocks_used == 0, "%s: every KV block returned (%lld in use)", what, (long long)st.kv_blocks_used);
    if (preempt_kv) CHECK(st.preemptions > 0, "%s: the small cache forced preemptions", what);
    else CHECK(st.preemptions == 0, "%s: no preemption with room", what);
    CHECK(st.steps > 0 && st.eval_ns > 0 && st.step_ns >= st.eval_ns, "%s: step timings recorded", what);
    printf("%-34s steps %lld, preemptions %lld, decode tokens %lld, prefill tokens %lld\n", what, (long long)st.steps,
           (long long)st.preemptions, (long long)st.decode_tokens, (long long)st.prefill_tokens);
    cx_sched_free(s);
    for (int q = 0; q < NREQ; q++) {
        free(g[q].logits);
        g[q].logits = NULL;
    }
    free(ref_lg);
}

/* Cancel while queued, while prefilling, while decoding; blocks back to idle. */
static void check_cancel(cx_model *m) {
    cx_sched_params sp = cx_sched_defaults();
    sp.max_seqs = 1;
    sp.max_batch_tokens = 16;
    sp.chunk = 16;
    sp.kv.prefix_cache = 0;
    cx_sched *s = open_sched(m, &sp, __func__);
    cx_err err = {0};
    if (!s) return;
    int32_t p[100];
    make_prompt(1, 100, p);
    static got a, b;
    cx_request ra = greedy(p, 100, 50, &a), rb = greedy(p, 10, 50, &b);
    int64_t ia = cx_sched_submit(s, &ra, &err), ib = cx_sched_submit(s, &rb, &err);
    cx_sched_step(s, &err); /* a admitted, first 16-token chunk; b queued */
    cx_request_stats st;
    cx_sched_request_stats(s, ia, &st);
    CHECK(st.state == CX_REQ_PREFILL, "a is prefilling after one step (state %d)", st.state);
    cx_sched_request_stats(s, ib, &st);
    CHECK(st.state == CX_REQ_QUEUED, "b is queued (state %d)", st.state);
    CHECK(cx_sched_cancel(s, ib) == 0 && cx_sched_cancel(s, ia) == 0, "cancel accepted");
    cx_sched_step(s, &err);
    CHECK(a.done == 1 && a.state == CX_REQ_CANCELLED && a.n == 0, "cancelled while prefilling: no token");
    CHECK(b.done == 1 && b.state == CX_REQ_CANCELLED, "cancelled while queued");
    CHECK(cx_sched_cancel(s, ia) == CX_EINVAL, "cancelling an ended request is refused");
    cx_sched_stats ss;
    cx_sched_get_stats(s, &ss);
    CHECK(ss.kv_blocks_used == 0 && ss.cancelled == 2, "blocks back to idle after cancellations (%lld)",
          (long long)ss.kv_blocks_used);
    static got c;
    cx_request rc = greedy(p, 8, 50, &c);
    int64_t ic = cx_sched_submit(s, &rc, &err);
    for (int i = 0; i < 5; i++) cx_sched_step(s, &err);
    cx_sched_request_stats(s, ic, &st);
    CHECK(st.state == CX_REQ_DECODE && c.n == 5, "decoding after 5 steps (state %d, %d tokens)", st.state, c.n);
    cx_sched_cancel(s, ic);
    cx_sched_step(s, &err);
    CHECK(c.state == CX_REQ_CANCELLED && c.n == 5, "cancelled while decoding keeps its 5 tokens");
    cx_sched_get_stats(s, &ss);
    CHECK(ss.kv_blocks_used == 0, "blocks back to idle after a decode cancellation");
    CHECK(cx_sched_release(s, ia) == 0 && cx_sched_request_stats(s, ia, &st) == CX_EINVAL, "released records are gone");
    cx_sched_free(s);
}

/* Deadlines while queued and while decoding; queue full. */
static void check_deadline_queue(cx_model *m) {
    cx_sched_params sp = cx_sched_defaults();
    sp.max_seqs = 1;
    sp.max_batch_tokens = 16;
    sp.max_queue = 3;
    sp.kv.prefix_cache = 0;
    cx_sched *s = open_sched(m, &sp, __func__);
    cx_err err = {0};
    if (!s) return;
    int32_t p[8];
    make_prompt(2, 8, p);
    static got a, b, c, d;
    cx_request ra = greedy(p, 8, 400, &a), rb = greedy(p, 8, 10, &b);
    ra.deadline_ms = 40;
    rb.deadline_ms = 5;
    cx_sched_submit(s, &ra, &err);
    cx_sched_submit(s, &rb, &err);
    for (int i = 0; i < 3; i++) cx_sched_step(s, &err);
    sleep_ms(10);
    cx_sched_step(s, &err);
    CHECK(b.done == 1 && b.state == CX_REQ_TIMEOUT && b.n == 0, "deadline while queued: timed out, no token");
    sleep_ms(40);
    cx_sched_step(s, &err);
    CHECK(a.done == 1 && a.state == CX_REQ_TIMEOUT && a.n >= 3 && a.n < 400,
          "deadline while decoding: timed out with its partial output (%d tokens)", a.n);
    /* queue full: max_queue 3 */
    cx_request rc = greedy(p, 8, 5, &c), rd = greedy(p, 8, 5, &d);
    int ok = 0, busy = 0;
    for (int i = 0; i < 5; i++) {
        int64_t id = cx_sched_submit(s, i < 4 ? &rc : &rd, &err);
        ok += id > 0;
        busy += id == CX_EBUSY;
    }
    CHECK(ok == 3 && busy == 2, "a queue of 3 takes 3 of 5 and refuses 2 with CX_EBUSY (%d, %d)", ok, busy);
    CHECK(strstr(err.msg, "queue is full") != NULL, "the refusal says the queue is full: %s", err.msg);
    drain(s);
    cx_sched_stats st;
    cx_sched_get_stats(s, &st);
    CHECK(st.rejected == 2 && st.timed_out == 2 && st.kv_blocks_used == 0, "counters: 2 rejected, 2 timed out, idle");
    cx_sched_free(s);
}

/* Admission order: priority classes, FIFO within a class, and aging. */
static void check_priority(cx_model *m, int aging_ms, int expect_low_first) {
    cx_sched_params sp = cx_sched_defaults();
    sp.max_seqs = 1;
    sp.max_batch_tokens = 16;
    sp.aging_ms = aging_ms;
    sp.kv.prefix_cache = 0;
    cx_sched *s = open_sched(m, &sp, __func__);
    cx_err err = {0};
    if (!s) return;
    int32_t p[4];
    make_prompt(3, 4, p);
    static got g[5];
    int prio[5] = {0, 5, 5, 2, 5};
    int64_t id[5];
    for (int i = 0; i < 5; i++) {
        cx_request r = greedy(p, 4, 2, &g[i]);
        r.priority = prio[i];
        id[i] = cx_sched_submit(s, &r, &err);
        if (i == 0) sleep_ms(aging_ms ? 8 * aging_ms : 1); /* the low one has waited long before the others come */
    }
    drain(s);
    int64_t start[5];
    for (int i = 0; i < 5; i++) {
        cx_request_stats st;
        cx_sched_request_stats(s, id[i], &st);
        start[i] = st.t_start;
    }
    if (expect_low_first) {
        CHECK(start[0] < start[1], "aging %d ms: the class-0 request that waited 8 agings starts before class 5",
              aging_ms);
    } else {
        CHECK(start[1] < start[2] && start[2] < start[4] && start[4] < start[3] && start[3] < start[0],
              "no aging: class 5 in arrival order, then 2, then 0");
    }
    cx_sched_free(s);
}

/* Stop strings, stop ids, text held back; a shared system prompt served from the prefix cache. */
static void check_stops_prefix(cx_model *m) {
    cx_sched_params sp = cx_sched_defaults();
    sp.max_seqs = 2;
    sp.max_batch_tokens = 64;
    cx_sched *s = open_sched(m, &sp, __func__);
    cx_err err = {0};
    if (!s) return;
    int32_t p[40];
    make_prompt(4, 40, p);
    static got free_run, stopped, by_id;
    cx_request r = greedy(p, 40, 30, &free_run);
    cx_sched_submit(s, &r, &err);
    drain(s);
    /* A stop string made of the free run's text from byte 3 to 9 (crosses tokens, likely). */
    if (free_run.text_len > 10) {
        char stop[8];
        memcpy(stop, free_run.text + 3, 6);
        stop[6] = 0;
        const char *stops[1] = {stop};
        cx_request r2 = greedy(p, 40, 30, &stopped);
        r2.stop = stops;
        r2.n_stop = 1;
        cx_sched_submit(s, &r2, &err);
        drain(s);
        char *first = strstr(free_run.text, stop);
        size_t want = first ? (size_t)(first - free_run.text) : 0;
        CHECK(stopped.reason == CX_STOP_STRING && stopped.text_len == want && !memcmp(stopped.text, free_run.text, want),
              "stop string: the text ends where it starts (%zu bytes, want %zu), never streamed", stopped.text_len,
              want);
        CHECK(!strcmp(stopped.text, stopped.final_text), "stop string: streamed text equals the final text");
    } else {
        CHECK(0, "the free run produced too little text (%zu bytes)", free_run.text_len);
    }
    int32_t stop_id = free_run.tok[4];
    cx_request r3 = greedy(p, 40, 30, &by_id);
    r3.stop_ids = &stop_id;
    r3.n_stop_ids = 1;
    cx_sched_submit(s, &r3, &err);
    drain(s);
    int first = 0;
    while (free_run.tok[first] != stop_id) first++;
    CHECK(by_id.reason == CX_STOP_TOKEN && by_id.n == first + 1, "stop id: ends at its first occurrence");
    /* prefix cache: the same 40-token prompt again: whole blocks (32 tokens) reused */
    static got again;
    cx_request r4 = greedy(p, 40, 4, &again);
    int64_t id = cx_sched_submit(s, &r4, &err);
    drain(s);
    cx_request_stats st;
    cx_sched_request_stats(s, id, &st);
    CHECK(st.n_cached == 32, "a repeated prompt takes its 2 full blocks from the prefix cache (%d tokens)", st.n_cached);
    CHECK(!memcmp(again.tok, free_run.tok, sizeof(int32_t) * 4), "tokens after a prefix hit are unchanged");
    /* no_prefix_cache (cache_prompt false): the same prompt computed whole, the same tokens; the cache still serves others */
    static got uncached, after;
    cx_request r5 = greedy(p, 40, 4, &uncached);
    r5.no_prefix_cache = 1;
    id = cx_sched_submit(s, &r5, &err);
    drain(s);
    cx_sched_request_stats(s, id, &st);
    CHECK(st.n_cached == 0, "no_prefix_cache: nothing taken from the prefix cache (%d tokens)", st.n_cached);
    CHECK(uncached.n == 4 && !memcmp(uncached.tok, free_run.tok, sizeof(int32_t) * 4), "no_prefix_cache: the same tokens");
    cx_request r6 = greedy(p, 40, 4, &after);
    id = cx_sched_submit(s, &r6, &err);
    drain(s);
    cx_sched_request_stats(s, id, &st);
    CHECK(st.n_cached == 32, "the next request (cache allowed) takes the 2 blocks again (%d tokens)", st.n_cached);
    cx_sched_free(s);
}

/* Four threads submit and cancel against the run thread; then drain. */
typedef struct thr_arg { cx_sched *s; int t; atomic_int *done; } thr_arg;
static atomic_int n_done;
static void count_done(void *user, const cx_request_stats *st) { (void)user; (void)st; atomic_fetch_add(&n_done, 1); }

static void *submitter(void *arg) {
    thr_arg *a = arg;
    int32_t p[24];
    make_prompt(a->t, 24, p);
    cx_err err;
    for (int i = 0; i < 12; i++) {
        cx_request r = cx_request_defaults();
        r.prompt = p;
        r.n_prompt = 8 + (i % 3) * 8;
        r.max_tokens = 6;
        r.on_done = count_done;
        r.sampling.seed = (uint64_t)(a->t * 100 + i);
        int64_t id = cx_sched_submit(a->s, &r, &err);
        if (id > 0 && i % 3 == 1) cx_sched_cancel(a->s, id);
        if (id <= 0) atomic_fetch_add(&n_done, 1); /* refused: counts as accounted for */
    }
    return NULL;
}

static void check_threads(cx_model *m) {
    cx_sched_params sp = cx_sched_defaults();
    sp.max_seqs = 4;
    sp.max_batch_tokens = 32;
    sp.max_queue = 64;
    sp.n_threads = 2;
    sp.kv.prefix_cache = 0;
    cx_sched *s;
    cx_err err = {0};
    if (cx_sched_new(m, &sp, &s, &err) || cx_sched_start(s, &err)) {
        CHECK(0, "sched: %s", err.msg);
        return;
    }
    atomic_store(&n_done, 0);
    pthread_t th[4];
    thr_arg args[4];
    for (int t = 0; t < 4; t++) {
        args[t] = (thr_arg){s, t, &n_done};
        pthread_create(&th[t], NULL, submitter, &args[t]);
    }
    for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
    cx_sched_stop(s, 1);
    cx_sched_stats st;
    cx_sched_get_stats(s, &st);
    CHECK(atomic_load(&n_done) == 48, "every one of 48 requests accounted for (%d)", atomic_load(&n_done));
    CHECK(st.finished + st.cancelled == st.submitted && st.submitted + st.rejected == 48,
          "finished + cancelled = submitted (%lld + %lld of %lld)", (long long)st.finished, (long long)st.cancelled,
          (long long)st.submitted);
    CHECK(st.running == 0 && st.waiting == 0 && st.kv_blocks_used == 0, "drained: idle, blocks back");
    static got late;
    int32_t p[4] = {1, 2, 3, 4};
    cx_request r = greedy(p, 4, 2, &late);
    CHECK(cx_sched_start(s, &err) == 0, "restart: %s", err.msg);
    CHECK(cx_sched_submit(s, &r, &err) > 0, "submit after restart");
    cx_sched_stop(s, 1);
    CHECK(late.done == 1 && late.state == CX_REQ_FINISHED, "drain finishes the last request");
    cx_sched_free(s);
}

/* Bad parameters and requests: one clear error each. */
static void check_bad(cx_model *m) {
    cx_err err = {0};
    cx_sched *s;
    cx_sched_params sp = cx_sched_defaults();
    sp.max_seqs = 0;
    CHECK(cx_sched_new(m, &sp, &s, &err) == CX_EINVAL && strstr(err.msg, "max_seqs"), "max_seqs 0: %s", err.msg);
    sp = cx_sched_defaults();
    sp.max_batch_tokens = -4;
    CHECK(cx_sched_new(m, &sp, &s, &err) == CX_EINVAL && strstr(err.msg, "max_batch_tokens"), "budget -4: %s", err.msg);
    sp = cx_sched_defaults();
    sp.max_queue = 0;
    CHECK(cx_sched_new(m, &sp, &s, &err) == CX_EINVAL && strstr(err.msg, "max_queue"), "queue 0: %s", err.msg);
    sp = cx_sched_defaults();
    sp.kv.budget[CX_KV_HOT] = -5;
    CHECK(cx_sched_new(m, &sp, &s, &err) == CX_EINVAL && strstr(err.msg, "budget"), "negative KV budget: %s", err.msg);
    sp = cx_sched_defaults();
    if (cx_sched_new(m, &sp, &s, &err)) {
        CHECK(0, "sched: %s", err.msg);
        return;
    }
    int32_t p[600] = {0};
    cx_request r = cx_request_defaults();
    r.prompt = p;
    r.n_prompt = 512;
    CHECK(cx_sched_submit(s, &r, &err) == CX_ECTX && strstr(err.msg, "context"), "prompt filling the context: %s",
          err.msg);
    r.n_prompt = 4;
    r.max_tokens = 0;
    CHECK(cx_sched_submit(s, &r, &err) == CX_EINVAL && strstr(err.msg, "max_tokens"), "max_tokens 0: %s", err.msg);
    r.max_tokens = 4;
    p[2] = V;
    CHECK(cx_sched_submit(s, &r, &err) == CX_EINVAL && strstr(err.msg, "vocabulary"), "bad token id: %s", err.msg);
    p[2] = 0;
    r.adapter = 3;
    CHECK(cx_sched_submit(s, &r, &err) == CX_EINVAL && strstr(err.msg, "adapter 3 is not registered"), "adapter: %s",
          err.msg);
    r.adapter = 0;
    const char *empty[1] = {""};
    r.stop = empty;
    r.n_stop = 1;
    CHECK(cx_sched_submit(s, &r, &err) == CX_EINVAL && strstr(err.msg, "stop string"), "empty stop: %s", err.msg);
    r.n_stop = 0;
    r.prompt = NULL;
    r.text = "hello world";
    int64_t id = cx_sched_submit(s, &r, &err);
    CHECK(id > 0, "a text prompt is tokenized: %s", err.msg);
    drain(s);
    cx_request_stats st;
    CHECK(cx_sched_request_stats(s, id, &st) == 0 && st.n_prompt > 1 && st.n_gen >= 1, "the text request ran");
    CHECK(cx_sched_start(s, &err) == 0 && cx_sched_step(s, &err) == CX_EINVAL, "stepping a threaded scheduler refused");
    cx_sched_stop(s, 0);
    cx_sched_stats ss;
    cx_sched_get_stats(s, &ss);
    CHECK(ss.rejected == 5, "5 refusals counted (%lld)", (long long)ss.rejected);
    cx_sched_free(s);
}

static void run_all(void) {
    cx_model *f32 = model("f32"), *q8 = model("q8_0");
    if (f32 && q8) {
        V = cx_model_get_info(f32)->n_vocab;
        check_equal_alone(f32, "f32, 4 seqs, chunk 16", 4, 16, 0, 1);
        check_equal_alone(f32, "f32, 2 seqs, no chunk cap, 2 threads", 2, 0, 0, 2);
        check_equal_alone(f32, "f32, 4 seqs, 160-position cache", 4, 16, 160, 1);
        check_equal_alone(q8, "q8_0, 4 seqs, chunk 16", 4, 16, 0, 1);
        check_equal_alone(q8, "q8_0, 3 seqs, 160-position cache", 3, 0, 160, 1);
        check_cancel(f32);
        check_deadline_queue(f32);
        check_priority(f32, 0, 0);
        check_priority(f32, 2, 1);
        check_stops_prefix(f32);
        check_threads(f32);
        check_bad(f32);
    }
    cx_model_free(f32);
    cx_model_free(q8);
    fx_cleanup();
}

TEST_MAIN(run_all())
