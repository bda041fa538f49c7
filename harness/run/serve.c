/*
 * serve.c - a prompt set or a trace replayed through the engine's request
 * scheduler (cx_sched, docs/serving.md), as a server would serve it: many
 * requests in flight, each step one batched pass. The harness drives the
 * scheduler step by step on its own thread and issues requests between
 * steps:
 *   - closed loop: `concurrency` clients; whenever fewer are in flight, the
 *     next request (in file order) is issued;
 *   - open loop: each request at its arrival time (the trace's, or Poisson
 *     arrivals at cfg->rate requests/s); the runner sleeps while nothing is
 *     in flight and the next arrival is ahead.
 * Every time is measured from the request's issue: the request's own
 * scheduler timestamps (admission, first token, each gap) are on the same
 * monotonic clock. A request the queue refuses is recorded as rejected.
 * With cfg->harmony (the challenge on a gpt-oss model) each prompt is
 * submitted as a harmony user turn rather than as plain text. With
 * cfg->drafter (--spec) the scheduler speculates: a decoding sequence's
 * segment of a step is its last token and a draft, checked in the same pass
 * as the others' (while at most spec_max_batch sequences decode), and each
 * request's drafts, acceptances and times are recorded with it.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adapters.h"
#include "cortex_tools.h"
#include "kv_metrics.h"
#include "runner.h"
#include "hx_err.h"

#define SERVE_HARMONY_DATE "2025-08-05" /* harmony's "Current date:" in replayed prompts (serve_harmony_turn) */

/* One request of the replay: its prompt ids and where it stands. */
typedef struct serve_req {
    int32_t *ids;
    int n_ids;
    double issue_ms;     /* absolute, CLOCK_MONOTONIC */
    struct serve_state *ss;
    int idx;
} serve_req;

typedef struct serve_state {
    const run_config *cfg;
    const wl_workload *wl;
    rep_result *out;
    serve_req *rq;
    int n, next, done, in_flight;
    int n_ctx;           /* each sequence's context */
    double t0, last_ms;  /* start; the last final state */
} serve_state;

/* Sleep until the monotonic clock reads t_ms. */
static void sleep_until_ms(double t_ms) {
    struct timespec ts;
    ts.tv_sec = (time_t)(t_ms / 1e3);
    ts.tv_nsec = (long)((t_ms - (double)ts.tv_sec * 1e3) * 1e6);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

/* The final state's name, as stored per request (validity.h): a finished
 * request says whether it stopped by length or at a stop. */
static const char *state_name(int state, int reason) {
    switch (state) {
    case CX_REQ_FINISHED: return reason == CX_STOP_LENGTH ? "length" : "stop";
    case CX_REQ_CANCELLED: return "cancelled";
    case CX_REQ_TIMEOUT: return "timeout";
    default: return "failed";
    }
}

/* on_done: the request's statistics into its req_result (times from its issue). */
static void on_done(void *user, const cx_request_stats *st) {
    serve_req *sr = user;
    serve_state *ss = sr->ss;
    req_result *q = &ss->out->req[sr->idx];
    double issue = sr->issue_ms, ns = 1e-6;
    int64_t t_last = st->t_first;
    for (int k = 0; k + 1 < st->n_gen; k++) t_last += st->itl_ns[k];
    q->prompt_tokens = st->n_prompt;
    q->gen_tokens = st->n_gen;
    q->queue_ms = st->t_start ? (double)st->t_start * ns - issue : NAN;
    q->ttft_ms = st->t_first ? (double)st->t_first * ns - issue : NAN;
    q->prefill_ms = st->t_first ? (double)(st->t_first - st->t_start) * ns : NAN;
    q->decode_ms = st->t_first ? (double)(t_last - st->t_first) * ns : NAN;
    q->e2e_ms = (double)(st->n_gen ? t_last : st->t_end) * ns - issue;
    q->tpot_ms = st->n_gen > 1 ? q->decode_ms / (st->n_gen - 1) : NAN;
    q->preempted = st->n_preempted;
    q->cached_tokens = st->n_cached;
    /* the KV positions the decode steps attended: position n_prompt + k at step k */
    q->kv_attended = (double)(st->n_gen - 1 > 0 ? st->n_gen - 1 : 0) * st->n_prompt +
                     (double)(st->n_gen - 1 > 0 ? st->n_gen - 1 : 0) * st->n_gen / 2.0;
    q->itl_ms = st->n_gen > 1 ? malloc(sizeof(float) * (size_t)(st->n_gen - 1)) : NULL;
    for (int k = 0; q->itl_ms && k + 1 < st->n_gen; k++) q->itl_ms[q->n_itl++] = (float)((double)st->itl_ns[k] * ns);
    runner_token_hash(st->tokens, st->n_gen, q->token_hash);
    if (ss->cfg->drafter && st->n_gen > 0) { /* --spec: what its decode drafted and kept (docs/metrics.md);
                                                * a request that never decoded has nothing to say (NULL) */
        q->spec = 1;
        /* every decode pass it had: its speculative steps, and one a token for the rest (steps while more
         * sequences decoded than spec_max_batch, or the pass that recomputed it after a preemption) */
        int plain = st->n_gen - 1 - st->spec_tokens;
        q->spec_passes = st->spec_steps + (plain > 0 ? plain : 0);
        q->spec_verified = st->spec_verified;
        q->draft_tokens = st->spec_drafted;
        q->accepted_tokens = st->spec_accepted;
        q->draft_ms = (double)st->spec_draft_ns * ns;
        q->verify_ms = (double)st->spec_verify_ns * ns;
    }
    snprintf(q->state, sizeof q->state, "%s", state_name(st->state, st->reason));
    if (st->state == CX_REQ_FAILED) snprintf(q->error, sizeof q->error, "%.*s", (int)sizeof q->error - 1, st->error);
    else if (st->state == CX_REQ_TIMEOUT)
        snprintf(q->error, sizeof q->error, "timed out after %.0f ms with %d tokens", q->e2e_ms, st->n_gen);
    ss->in_flight--;
    ss->done++;
    ss->last_ms = runner_now_ms();
}

/* Issue request i now: submit it, or record why it was refused. */
static void issue(serve_state *ss, cx_sched *s, int i, double t_issue) {
    const wl_request *w = &ss->wl->req[i];
    serve_req *sr = &ss->rq[i];
    req_result *q = &ss->out->req[i];
    sr->issue_ms = t_issue;
    q->arrival_ms = t_issue - ss->t0;
    q->priority = w->priority;
    q->max_tokens = w->max_tokens;
    cx_request r = cx_request_defaults();
    r.prompt = sr->ids;
    r.n_prompt = sr->n_ids;
    r.sampling.temperature = 0; /* greedy: the canary means something */
    r.sampling.repeat_penalty = 1;
    r.max_tokens = w->max_tokens;
    r.ignore_eos = ss->cfg->ignore_eos;
    r.priority = w->priority;
    r.adapter = ss->cfg->adapters ? w->adapter : 0; /* without --adapters a trace's ids are labels */
    /* the deadline counts from the issue; the scheduler's clock starts at submission */
    r.deadline_ms = w->deadline_ms > 0 ? (int64_t)ceil(w->deadline_ms - (runner_now_ms() - t_issue)) : 0;
    if (w->deadline_ms > 0 && r.deadline_ms < 1) r.deadline_ms = 1;
    r.user = sr;
    r.on_done = on_done;
    cx_err e = {0};
    int64_t id = cx_sched_submit(s, &r, &e);
    if (id > 0) {
        ss->in_flight++;
        return;
    }
    /* refused at once: the queue is full (a server's 429), or the request cannot run */
    snprintf(q->state, sizeof q->state, "%s", id == CX_EBUSY ? "rejected" : "failed");
    if (id == CX_ECTX) /* the user's error, not the engine's: recorded, the run goes on */
        snprintf(q->error, sizeof q->error, "prompt of %d tokens does not fit the context of %d tokens", sr->n_ids,
                 ss->n_ctx);
    else snprintf(q->error, sizeof q->error, "%s%.180s", id == CX_EBUSY ? "rejected: " : "", e.msg);
    q->prompt_tokens = sr->n_ids;
    q->ttft_ms = q->e2e_ms = q->prefill_ms = q->decode_ms = q->tpot_ms = q->queue_ms = NAN;
    ss->done++;
}

/* The issue time of request i in open loop: its offset arr[i] (runner_arrivals) after the start. */
static double arrival_ms(const serve_state *ss, const double *arr, int i) { return ss->t0 + arr[i]; }

/* Scheduler counters of the repetition as metrics. */
static void sched_metrics(cx_sched *s, rep_result *out) {
    cx_sched_stats st;
    cx_sched_get_stats(s, &st);
    rep_set_metric(out, "steps", (double)st.steps);
    rep_set_metric(out, "preemptions", (double)st.preemptions);
    if (st.steps) rep_set_metric(out, "batch_tokens_mean", (double)(st.prefill_tokens + st.decode_tokens) / st.steps);
    if (st.step_ns > 0) /* forming batches, sampling, callbacks: the scheduler's own share of its steps */
        rep_set_metric(out, "sched_overhead_pct", 100.0 * (double)(st.step_ns - st.eval_ns) / (double)st.step_ns);
    if (st.lora_registered) { /* adapters: loads (first uses and reloads), unloads to make room, load latency */
        rep_set_metric(out, "lora_loads", (double)st.lora_loads);
        rep_set_metric(out, "lora_evictions", (double)st.lora_evictions);
        if (st.lora_loads) {
            rep_set_metric(out, "lora_load_ms_mean", (double)st.lora_load_ns / 1e6 / (double)st.lora_loads);
            rep_set_metric(out, "lora_load_ms_max", (double)st.lora_load_ns_max / 1e6);
        }
        rep_set_metric(out, "lora_resident_mib", (double)st.lora_bytes / (1 << 20));
    }
}

/* Request w's prompt as one harmony user turn (cx_harmony_prompt), malloc'd;
 * NULL with err filled ("request ID: ..."). The system message's date is
 * gpt-oss's release date, fixed so every run submits the same tokens (a
 * run's date would change them). */
static char *serve_harmony_turn(const wl_request *w, char *err, size_t errlen) {
    char *text = malloc(w->text_len + 1), *out = NULL;
    if (!text) {
        hx_fail(err, errlen, "request %s: out of memory", w->id);
        return NULL;
    }
    memcpy(text, w->text, w->text_len);
    text[w->text_len] = 0;
    cx_chat_msg turn = {"user", text};
    cx_err e = {0};
    if (cx_harmony_prompt(&turn, 1, SERVE_HARMONY_DATE, &out, &e)) hx_fail(err, errlen, "request %s: %s", w->id, e.msg);
    free(text);
    return out;
}

/* See runner.h. */
int serve_prompt_ids(const cx_model *m, const wl_request *w, int harmony, int32_t **ids, int *n, char *err,
                     size_t errlen) {
    *ids = NULL;
    *n = 0;
    char *chat = NULL;
    if (harmony && !(chat = serve_harmony_turn(w, err, errlen))) return -1;
    const char *text = chat ? chat : w->text;
    size_t len = chat ? strlen(chat) : w->text_len;
    int cap = (int)len + 2, rc = 0;
    cx_err e = {0};
    if (!(*ids = malloc(sizeof(int32_t) * (size_t)cap))) rc = hx_fail(err, errlen, "out of memory");
    else if (cx_tokenize(m, text, len, CX_TOKENIZE_BOS | (chat ? CX_TOKENIZE_SPECIAL : 0), *ids, cap, n, &e))
        rc = hx_fail(err, errlen, "request %s: %s", w->id, e.msg);
    free(chat);
    return rc;
}

/* See runner.h. */
int serve_rep(const cx_model *m, const wl_workload *wl, const run_config *cfg, rep_result *out, double *makespan_ms,
              kv_peak *peak, cx_kv_cache **cache_stats_out, cx_sched **sched_out, char *err, size_t errlen) {
    serve_state ss;
    memset(&ss, 0, sizeof ss);
    ss.cfg = cfg;
    ss.wl = wl;
    ss.out = out;
    ss.n = (int)wl->n;
    ss.n_ctx = runner_n_ctx(m, cfg->n_ctx);
    ss.rq = calloc((size_t)ss.n, sizeof *ss.rq);
    double *arr = runner_arrivals(wl, cfg->rate);
    if (!ss.rq || !arr) {
        free(ss.rq);
        free(arr);
        return hx_fail(err, errlen, "out of memory");
    }
    cx_err e = {0};
    int rc = 0;
    /* Tokenize before the clock starts: a server tokenizes too, but that is not what is measured here. */
    for (int i = 0; i < ss.n && !rc; i++) {
        const wl_request *w = &wl->req[i];
        ss.rq[i].ss = &ss;
        ss.rq[i].idx = i;
        rc = serve_prompt_ids(m, w, cfg->harmony, &ss.rq[i].ids, &ss.rq[i].n_ids, err, errlen);
        snprintf(out->req[i].item, sizeof out->req[i].item, "%s", w->id);
        out->req[i].idx = i;
        out->req[i].adapter = w->adapter;
    }
    cx_sched_params sp = cx_sched_defaults();
    sp.max_seqs = cfg->max_seqs;
    sp.max_batch_tokens = cfg->max_batch_tokens;
    sp.max_queue = cfg->max_queue;
    sp.n_ctx = cfg->n_ctx;
    sp.n_threads = cfg->threads;
    sp.kv = cfg->kv ? *cfg->kv : cx_kv_defaults();
    sp.lora_budget = cfg->lora_budget;
    sp.lora_split = cfg->lora_split;
    sp.lora_type = cfg->adapters ? cfg->lora_type : -1;
    sp.drafter = cfg->drafter; /* --spec: each sequence slot speculates (cx_spec), while few decode */
    sp.spec_max_batch = cfg->spec_max_batch;
    cx_sched *s = NULL;
    if (!rc && cx_sched_new(m, &sp, &s, &e)) rc = hx_fail_cx(err, errlen, &e);
    for (int i = 0; !rc && cfg->adapters && i < cfg->adapters->n; i++) /* loaded on first use, as a server does */
        if (cx_sched_adapter_add(s, i + 1, cfg->adapters->name[i], cfg->adapters->path[i], 0, &e))
            rc = hx_fail_cx(err, errlen, &e);
    int open = cfg->mode == RUN_OPEN || cfg->rate > 0;
    ss.t0 = ss.last_ms = runner_now_ms();
    while (!rc && ss.done < ss.n) {
        double now = runner_now_ms();
        if (open) {
            while (ss.next < ss.n && arrival_ms(&ss, arr, ss.next) <= now) {
                issue(&ss, s, ss.next, arrival_ms(&ss, arr, ss.next));
                ss.next++;
            }
        } else {
            while (ss.next < ss.n && ss.in_flight < cfg->concurrency) issue(&ss, s, ss.next++, now);
        }
        if (ss.in_flight == 0) {
            if (ss.next < ss.n && open) sleep_until_ms(arrival_ms(&ss, arr, ss.next)); /* idle until it arrives */
            continue;
        }
        int live = cx_sched_step(s, &e);
        if (live < 0) rc = hx_fail_cx(err, errlen, &e);
        kv_metrics_sample(cx_sched_cache(s), peak);
        if (cfg->progress) runner_progress(cfg, ss.done, ss.n);
    }
    *makespan_ms = ss.last_ms - ss.t0;
    if (!rc) sched_metrics(s, out);
    for (int i = 0; i < ss.n; i++) free(ss.rq[i].ids);
    free(ss.rq);
    free(arr);
    *sched_out = s; /* the caller reads the cache's counters, then frees it */
    *cache_stats_out = s ? cx_sched_cache(s) : NULL;
    return rc;
}
