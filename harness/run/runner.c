/*
 * runner.c - serve a workload through the engine API, timing every token
 * (see runner.h for the loop modes, docs/metrics.md for the definitions).
 */
#include "runner.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adapters.h"
#include "cpuload.h"
#include "endpoint.h"
#include "env.h"
#include "kv_metrics.h"
#include "rng.h"
#include "spec_run.h"
#include "stats.h"
#include "validity.h"
#include "hx_err.h"

/* See runner.h. */
int runner_n_ctx(const cx_model *m, int asked) {
    int model_ctx = cx_model_get_info(m)->n_ctx, n_ctx = asked > 0 ? asked : CX_DEFAULT_CTX;
    return n_ctx < model_ctx ? n_ctx : model_ctx;
}

/* See runner.h. */
double *runner_arrivals(const wl_workload *wl, double rate) {
    double *arr = malloc(sizeof(double) * (wl->n ? wl->n : 1));
    if (!arr) return NULL;
    rng r;
    rng_seed(&r, 1, 7);
    double t = 0;
    for (size_t i = 0; i < wl->n; i++) arr[i] = rate > 0 ? (t += rng_exponential(&r, rate)) * 1e3 : wl->req[i].arrival_s * 1e3;
    return arr;
}

/* See runner.h. */
double runner_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}


int runner_parse_test(const char *name, int *np, int *ng) {
    char *end;
    long a, b = 0;
    *np = *ng = 0;
    if (!strncmp(name, "pp", 2) || !strncmp(name, "tg", 2)) {
        a = strtol(name + 2, &end, 10);
        if (end == name + 2 || *end || a < 1 || a > (1 << 20)) return -1;
        if (name[0] == 'p') *np = (int)a;
        else *ng = (int)a;
        return 0;
    }
    if (!strncmp(name, "pg", 2)) {
        a = strtol(name + 2, &end, 10);
        if (end == name + 2 || *end != ',') return -1;
        const char *p = end + 1;
        b = strtol(p, &end, 10);
        if (end == p || *end || a < 1 || b < 1 || a > (1 << 20) || b > (1 << 20)) return -1;
        *np = (int)a;
        *ng = (int)b;
        return 0;
    }
    return -1;
}

/* See runner.h. */
int runner_parse_multiseq(const char *name, int *n_seq, int *n_ctx, int *n_gen, int *batched) {
    const char *p;
    if (!strncmp(name, "multiseq:", 9)) p = name + 9, *batched = 0;
    else if (!strncmp(name, "batched:", 8)) p = name + 8, *batched = 1;
    else return -1;
    long v[3];
    for (int i = 0; i < 3; i++) {
        char *end;
        v[i] = strtol(p, &end, 10);
        if (end == p || v[i] < 1 || v[i] > (1 << 20) || *end != (i < 2 ? ',' : 0)) return -1;
        p = end + 1;
    }
    if (v[0] > 64) return -1;
    *n_seq = (int)v[0];
    *n_ctx = (int)v[1];
    *n_gen = (int)v[2];
    return 0;
}

/* FNV-1a 64 over token ids, as 16 hex digits: the correctness canary. */
typedef struct canary { uint64_t h; } canary;
static void canary_init(canary *c) { c->h = 1469598103934665603ull; }
static void canary_add(canary *c, int32_t tok) {
    for (int i = 0; i < 4; i++) c->h = (c->h ^ (uint8_t)((uint32_t)tok >> (8 * i))) * 1099511628211ull;
}

/* See runner.h. */
void runner_token_hash(const int32_t *tokens, int n, char out[17]) {
    canary c;
    canary_init(&c);
    for (int i = 0; i < n; i++) canary_add(&c, tokens[i]);
    snprintf(out, 17, "%016llx", (unsigned long long)c.h);
}

/* See runner.h: a bar over all repetitions' requests, redrawn in place. */
void runner_progress(const run_config *cfg, int done, int n) {
    int total = cfg->reps_total * n, at = cfg->rep_index * n + done, width = 30, fill = total ? at * width / total : 0;
    fprintf(stderr, "\r%s [%.*s%*s] %3d%%  rep %d/%d  request %d/%d ", cfg->label, fill, "##############################",
            width - fill, "", total ? at * 100 / total : 0, cfg->rep_index + 1, cfg->reps_total, done, n);
    fflush(stderr);
}

/* Everything one repetition needs while serving. */
typedef struct rep_state {
    const cx_model *m;
    const run_config *cfg;
    cx_session *s;
    cx_kv_cache *cache;  /* shared by the repetition's requests */
    kv_peak peak;        /* its byte counts' peaks, sampled after each request */
    cx_sampler *greedy;
    ctr_set *ctr;
    ctr_phase prefill, decode;
    int32_t *ids;
    int ids_cap;
    spec_seq sq;         /* --spec: the sequence's speculation (sq.sp NULL: none) */
    cx_pool_stats pool;  /* the engine threads of sessions and batches already freed (serve_multiseq) */
} rep_state;

/* acc += x: the thread pools of several sessions and batches, as one. */
static void pool_add(cx_pool_stats *acc, const cx_pool_stats *x) {
    if (x->n_threads > acc->n_threads) acc->n_threads = x->n_threads;
    acc->jobs += x->jobs;
    acc->chunks += x->chunks;
    acc->stolen += x->stolen;
    acc->busy_ns += x->busy_ns;
    acc->idle_ns += x->idle_ns;
    acc->stall_ns += x->stall_ns;
    acc->waits += x->waits;
    acc->sleeps += x->sleeps;
    acc->shared_waits += x->shared_waits;
    if (x->worker_wait_max > acc->worker_wait_max) acc->worker_wait_max = x->worker_wait_max;
}

/* The repetition's engine threads (metrics.md): the share of their time
 * they waited, the most any one worker waited, and the share of their waits
 * made on cores they had to share (the pool found itself waiting for a
 * core). Nothing when no pass used a pool (one thread). */
static void pool_metrics(rep_result *out, const cx_pool_stats *p) {
    double total = (double)(p->busy_ns + p->idle_ns + p->stall_ns);
    if (p->jobs <= 0 || total <= 0) return;
    rep_set_metric(out, "pool_wait_share", (double)(p->idle_ns + p->stall_ns) / total);
    rep_set_metric(out, "pool_contended_share", p->waits ? (double)p->shared_waits / (double)p->waits : 0);
    if (p->n_threads > 1) rep_set_metric(out, "pool_worker_wait_max", p->worker_wait_max);
}

/* Phase counters: snapshot before, accumulate after. */
static void phase_begin(rep_state *st, ctr_snap *snap) {
    if (st->ctr) ctr_snapshot(st->ctr, snap);
}
static void phase_end(rep_state *st, const ctr_snap *before, ctr_phase *acc) {
    if (!st->ctr) return;
    ctr_snap after;
    ctr_snapshot(st->ctr, &after);
    ctr_accumulate(acc, before, &after);
}

/* Generate up to max_gen tokens after logits `l` (the first is already due).
 * Fills the timing fields from t_first on. Returns 0 or an engine error. */
static int decode_tokens(rep_state *st, const float *l, int max_gen, req_result *q, double issue_ms, char *err,
                         size_t errlen) {
    cx_err e = {0};
    canary c;
    canary_init(&c);
    q->itl_ms = malloc(sizeof(float) * (size_t)(max_gen > 1 ? max_gen - 1 : 1));
    if (!q->itl_ms) return hx_fail(err, errlen, "out of memory");
    ctr_snap snap;
    int eos = cx_token_eos(st->m);
    int tok = cx_sampler_sample(st->greedy, l);
    double t_prev = runner_now_ms(), t_first = t_prev;
    q->ttft_ms = t_first - issue_ms;
    canary_add(&c, tok);
    int gen = 1;
    phase_begin(st, &snap);
    while (gen < max_gen && (st->cfg->ignore_eos || (tok != eos && tok != cx_token_eot(st->m)))) {
        q->kv_attended += cx_session_pos(st->s) + 1; /* this step attends positions 0..pos */
        if (cx_eval(st->s, &tok, 1, &l, &e)) {
            return hx_fail_cx(err, errlen, &e);
        }
        tok = cx_sampler_sample(st->greedy, l);
        double t = runner_now_ms();
        q->itl_ms[q->n_itl++] = (float)(t - t_prev);
        t_prev = t;
        canary_add(&c, tok);
        gen++;
    }
    phase_end(st, &snap, &st->decode);
    q->gen_tokens = gen;
    q->decode_ms = t_prev - t_first;
    q->e2e_ms = t_prev - issue_ms;
    q->tpot_ms = gen > 1 ? q->decode_ms / (gen - 1) : NAN;
    snprintf(q->token_hash, sizeof q->token_hash, "%016llx", (unsigned long long)c.h);
    return 0;
}

/* Deterministic token ids for synthetic tests: any normal id, never BOS/EOS. */
static void synthetic_tokens(int32_t *ids, int n, int n_vocab, uint64_t seed) {
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = 3 + (int32_t)((seed >> 33) % (uint64_t)(n_vocab - 3));
    }
}

/* llama-bench style: fill D tokens of KV depth (untimed), then time pp/tg/pg. */
static int serve_synthetic(rep_state *st, req_result *q, char *err, size_t errlen) {
    const run_config *c = st->cfg;
    int V = cx_model_get_info(st->m)->n_vocab, n_ctx = cx_session_n_ctx(st->s);
    int np = c->test_prompt, ng = c->test_gen, depth = c->test_depth;
    if (np > 0 && ng > 0) snprintf(q->item, sizeof q->item, "pg%d,%d", np, ng);
    else snprintf(q->item, sizeof q->item, "%s%d", np ? "pp" : "tg", np ? np : ng);
    if (depth) snprintf(q->item + strlen(q->item), sizeof q->item - strlen(q->item), "@d%d", depth);
    int first = (depth == 0 && np == 0) ? 1 : 0; /* tg from an empty cache starts after BOS */
    if (depth + first + np + ng > n_ctx) {
        snprintf(q->error, sizeof q->error, "%s needs %d positions, the context has %d", q->item, depth + first + np + ng, n_ctx);
        q->ttft_ms = q->e2e_ms = q->prefill_ms = q->decode_ms = q->tpot_ms = NAN;
        return 0;
    }
    int total = depth + np + 1;
    if (total > st->ids_cap) {
        int32_t *p = realloc(st->ids, sizeof(int32_t) * (size_t)total);
        if (!p) return hx_fail(err, errlen, "out of memory");
        st->ids = p;
        st->ids_cap = total;
    }
    cx_err e = {0};
    const float *l = NULL;
    cx_session_reset(st->s);
    synthetic_tokens(st->ids, depth + np, V, 0x5eed + (uint64_t)depth);
    if (depth && cx_eval(st->s, st->ids, depth, &l, &e)) return hx_fail_cx(err, errlen, &e);
    if (first) {
        int32_t bos = cx_token_bos(st->m);
        if (cx_eval(st->s, &bos, 1, &l, &e)) return hx_fail_cx(err, errlen, &e);
    }
    double t0 = runner_now_ms();
    q->prompt_tokens = np;
    if (np) {
        ctr_snap snap;
        uint64_t xb = cx_session_expert_bytes(st->s);
        phase_begin(st, &snap);
        if (cx_eval(st->s, st->ids + depth, np, &l, &e)) return hx_fail_cx(err, errlen, &e);
        phase_end(st, &snap, &st->prefill);
        q->expert_bytes = (double)(cx_session_expert_bytes(st->s) - xb);
    }
    q->prefill_ms = runner_now_ms() - t0;
    if (ng) {
        /* tg N times N token evaluations: sample once from the logits we have,
         * then evaluate that token, N times; decode_tokens evaluates N-1 times,
         * so start it one evaluation early. */
        int tok = cx_sampler_sample(st->greedy, l);
        ctr_snap snap;
        phase_begin(st, &snap); /* this evaluation is decode work too: count it there */
        int rc = cx_eval(st->s, &tok, 1, &l, &e);
        phase_end(st, &snap, &st->decode);
        if (rc) return hx_fail_cx(err, errlen, &e);
        if (st->sq.sp) { /* --spec: the sequence so far (what the session holds) is what lookup drafts from */
            int n_hist = first ? 1 : depth + np;
            if (spec_hist_reserve(&st->sq, n_hist + 1)) return hx_fail(err, errlen, "out of memory");
            if (first) st->sq.hist[0] = cx_token_bos(st->m);
            else memcpy(st->sq.hist, st->ids, sizeof(int32_t) * (size_t)n_hist);
            st->sq.hist[n_hist++] = tok;
            cx_spec_reset(st->sq.sp);
            if (spec_decode(&st->sq, n_hist, l, ng, !c->ignore_eos, q, t0, err, errlen)) return -1;
        } else if (decode_tokens(st, l, ng, q, t0, err, errlen)) return -1;
    } else {
        q->ttft_ms = q->e2e_ms = q->prefill_ms;
        q->decode_ms = q->tpot_ms = NAN;
    }
    q->e2e_ms = runner_now_ms() - t0;
    return 0;
}

/* One decode round of multiseq/batched: each sequence's next token, from
 * its greedy choice, evaluated in turn (cx_eval each) or in one pass
 * (cx_batch_eval). l[i] is updated to each sequence's new logits. */
static int decode_round(cx_session **ss, cx_batch *b, int32_t *tok, const int32_t **tp, int *ones, int n,
                        const float **l, cx_err *e) {
    if (!b) {
        for (int i = 0; i < n; i++)
            if (cx_eval(ss[i], &tok[i], 1, &l[i], e)) return -1;
        return 0;
    }
    const float **out;
    if (cx_batch_eval(b, ss, tp, ones, n, &out, e)) return -1;
    for (int i = 0; i < n; i++) l[i] = out[i];
    return 0;
}

/* multiseq:N,C,G and batched:N,C,G: N sessions on the repetition's cache;
 * each evaluates C synthetic tokens of its own (prefill, one sequence after
 * the other, timed as a whole), then G decode rounds give every sequence
 * one greedy token: in turn (multiseq) or in one batched pass (batched).
 * Each sequence's inter-token gaps are recorded (from the end of prefill
 * for its first): a round's length, as every sequence waits for the round.
 * One request result covers all sequences: prompt N·C, generated N·G. */
static int serve_multiseq(rep_state *st, req_result *q, char *err, size_t errlen) {
    const run_config *c = st->cfg;
    int n = c->n_seq, ctx = c->test_prompt, gen = c->test_gen, V = cx_model_get_info(st->m)->n_vocab;
    snprintf(q->item, sizeof q->item, "%s:%d,%d,%d", c->batched ? "batched" : "multiseq", n, ctx, gen);
    if (ctx + gen > cx_session_n_ctx(st->s)) {
        snprintf(q->error, sizeof q->error, "%s needs %d positions a sequence, the context has %d", q->item, ctx + gen,
                 cx_session_n_ctx(st->s));
        q->ttft_ms = q->e2e_ms = q->prefill_ms = q->decode_ms = q->tpot_ms = NAN;
        return 0;
    }
    cx_session **ss = calloc((size_t)n, sizeof *ss);
    int32_t *tok = calloc((size_t)n, sizeof *tok);
    const int32_t **tp = calloc((size_t)n, sizeof *tp);
    int *ones = calloc((size_t)n, sizeof *ones);
    const float **l = calloc((size_t)n, sizeof *l);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)ctx);
    q->itl_ms = malloc(sizeof(float) * (size_t)n * (size_t)gen);
    cx_err e = {0};
    cx_batch *b = NULL;
    int rc = ss && tok && tp && ones && l && ids && q->itl_ms ? 0 : hx_fail(err, errlen, "out of memory");
    cx_session_params sp = cx_session_defaults();
    sp.n_ctx = c->n_ctx;
    sp.n_threads = c->threads;
    sp.cache = st->cache;
    for (int i = 0; i < n && !rc; i++) {
        tp[i] = &tok[i];
        ones[i] = 1;
        if (cx_session_new_ex(st->m, &sp, &ss[i], &e)) rc = hx_fail_cx(err, errlen, &e);
    }
    if (!rc && c->batched && cx_batch_new(st->m, n, c->threads, &b, &e)) rc = hx_fail_cx(err, errlen, &e);
    /* --adapters: sequence i applies adapter i mod K + 1 (loaded before the clock starts) */
    int n_lora = c->adapters ? (c->adapters->n < n ? c->adapters->n : n) : 0;
    cx_lora **lora = n_lora ? calloc((size_t)n_lora, sizeof *lora) : NULL;
    if (n_lora && !lora) rc = hx_fail(err, errlen, "out of memory");
    cx_lora_params lp = cx_lora_defaults();
    lp.type = c->lora_type;
    for (int i = 0; i < n_lora && !rc; i++)
        if (cx_lora_load(st->m, c->adapters->path[i], &lp, &lora[i], &e)) rc = hx_fail_cx(err, errlen, &e);
    for (int i = 0; i < n && n_lora && !rc; i++) {
        cx_lora_use u = {lora[i % n_lora], 1.0f};
        if (cx_session_set_lora(ss[i], &u, 1, &e)) rc = hx_fail_cx(err, errlen, &e);
    }
    canary cn;
    canary_init(&cn);
    ctr_snap snap;
    double t0 = runner_now_ms();
    if (!rc) phase_begin(st, &snap);
    for (int i = 0; i < n && !rc; i++) { /* prefill every sequence: distinct tokens, so nothing is shared */
        synthetic_tokens(ids, ctx, V, 0x5eed + 7919 * (uint64_t)i);
        if (cx_eval(ss[i], ids, ctx, &l[i], &e)) rc = hx_fail_cx(err, errlen, &e);
    }
    if (!rc) phase_end(st, &snap, &st->prefill);
    double t1 = runner_now_ms(), t_end = t1, t_prev = t1; /* every sequence waits for the round: one clock serves all */
    q->prompt_tokens = n * ctx;
    q->prefill_ms = q->ttft_ms = t1 - t0;
    if (!rc) phase_begin(st, &snap);
    for (int g = 0; g < gen && !rc; g++) {
        for (int i = 0; i < n; i++) {
            tok[i] = cx_sampler_sample(st->greedy, l[i]);
            canary_add(&cn, tok[i]);
            q->kv_attended += cx_session_pos(ss[i]) + 1;
        }
        if (decode_round(ss, b, tok, tp, ones, n, l, &e)) {
            rc = hx_fail_cx(err, errlen, &e);
            break;
        }
        t_end = runner_now_ms();
        for (int i = 0; i < n; i++) q->itl_ms[q->n_itl++] = (float)(t_end - t_prev);
        t_prev = t_end;
    }
    if (!rc) phase_end(st, &snap, &st->decode);
    kv_metrics_sample(st->cache, &st->peak); /* every sequence still held */
    q->gen_tokens = n * gen;
    q->decode_ms = t_end - t1;
    q->e2e_ms = t_end - t0;
    q->tpot_ms = q->decode_ms / (double)(n * gen);
    snprintf(q->token_hash, sizeof q->token_hash, "%016llx", (unsigned long long)cn.h);
    cx_pool_stats ps;
    if (b) {
        cx_batch_pool_stats(b, &ps);
        pool_add(&st->pool, &ps);
    }
    for (int i = 0; ss && i < n; i++)
        if (ss[i]) {
            cx_session_pool_stats(ss[i], &ps);
            pool_add(&st->pool, &ps);
        }
    cx_batch_free(b);
    for (int i = 0; ss && i < n; i++) cx_session_free(ss[i]);
    for (int i = 0; lora && i < n_lora; i++) cx_lora_free(lora[i]); /* after the sessions that applied them */
    free(lora);
    free(ss);
    free(tok);
    free(tp);
    free(ones);
    free((void *)l);
    free(ids);
    return rc;
}

/* p50/p90/p99 of a sample into metrics "<name>_p50" etc. */
static void set_percentiles(rep_result *out, const char *name, double *v, size_t n) {
    if (!n) return;
    stats_sort(v, n);
    static const int ps[3] = {50, 90, 99};
    for (int i = 0; i < 3; i++) {
        char key[40];
        snprintf(key, sizeof key, "%s_p%d", name, ps[i]);
        rep_set_metric(out, key, stats_percentile(v, n, ps[i]));
    }
}

/* 1 if q finished and met every SLO the run set (docs/metrics.md, goodput). */
static int meets_slo(const req_result *q, const run_config *cfg) {
    if (!req_finished(q)) return 0;
    if (cfg->slo_ttft_ms > 0 && !(q->ttft_ms <= cfg->slo_ttft_ms)) return 0;
    if (cfg->slo_tpot_ms > 0 && q->gen_tokens > 1 && !(q->tpot_ms <= cfg->slo_tpot_ms)) return 0;
    if (cfg->slo_e2e_ms > 0 && !(q->e2e_ms <= cfg->slo_e2e_ms)) return 0;
    return 1;
}

/* A served run's request outcomes, request rate and goodput (vLLM's
 * definition: requests meeting every SLO, per second of the run). */
static void served_metrics(rep_result *out, double makespan_ms, const run_config *cfg) {
    run_outcomes o;
    validity_count(out, 1, cfg->ignore_eos, &o);
    int good = 0;
    for (int i = 0; i < out->n_req; i++) good += meets_slo(&out->req[i], cfg);
    rep_set_metric(out, "requests_finished", o.finished);
    rep_set_metric(out, "requests_truncated", o.truncated);
    rep_set_metric(out, "requests_rejected", o.rejected);
    rep_set_metric(out, "requests_timed_out", o.timed_out);
    rep_set_metric(out, "requests_cancelled", o.cancelled);
    rep_set_metric(out, "requests_failed", o.failed);
    rep_set_metric(out, "request_rps", o.finished / (makespan_ms / 1e3));
    if (cfg->slo_ttft_ms > 0 || cfg->slo_tpot_ms > 0 || cfg->slo_e2e_ms > 0) {
        rep_set_metric(out, "goodput_share", out->n_req ? (double)good / out->n_req : 0);
        rep_set_metric(out, "goodput_rps", good / (makespan_ms / 1e3));
    }
}

/* NAME_min, NAME_median and NAME_max of the k values v (sorted in place);
 * nothing when k is 0. */
static void set_spread(rep_result *out, const char *name, double *v, size_t k) {
    if (!k) return;
    char m[40];
    stats_sort(v, k);
    snprintf(m, sizeof m, "%s_min", name);
    rep_set_metric(out, m, v[0]);
    snprintf(m, sizeof m, "%s_median", name);
    rep_set_metric(out, m, stats_percentile(v, k, 50));
    snprintf(m, sizeof m, "%s_max", name);
    rep_set_metric(out, m, v[k - 1]);
}

/* Run-level metrics from the per-request results (docs/metrics.md). */
static void summarize(rep_result *out, double makespan_ms, int synthetic, const run_config *cfg) {
    size_t n = (size_t)out->n_req, n_itl = 0;
    for (int i = 0; i < out->n_req; i++) n_itl += (size_t)out->req[i].n_itl;
    double *v = malloc(sizeof(double) * (n + n_itl + 1));
    if (!v) return;
    double prompt = 0, gen = 0, prefill_ms = 0, decode_ms = 0, decode_tok = 0, kv = 0, xbytes = 0;
    int errors = 0;
    for (int i = 0; i < out->n_req; i++) {
        const req_result *q = &out->req[i];
        if (q->error[0]) { errors++; continue; }
        prompt += q->prompt_tokens;
        gen += q->gen_tokens;
        if (!isnan(q->prefill_ms)) prefill_ms += q->prefill_ms; /* over HTTP: not visible (NaN) */
        xbytes += q->expert_bytes;
        if (q->gen_tokens > 1) { decode_ms += q->decode_ms; decode_tok += q->n_itl; kv += q->kv_attended; }
    }
    rep_set_metric(out, "requests", (double)out->n_req);
    rep_set_metric(out, "errors", errors);
    rep_set_metric(out, "prompt_tokens", prompt);
    rep_set_metric(out, "gen_tokens", gen);
    rep_set_metric(out, "makespan_ms", makespan_ms);
    if (prefill_ms > 0 && prompt > 0) rep_set_metric(out, "prefill_tps", prompt / (prefill_ms / 1e3));
    /* mixture of experts, synthetic prompt tests: how prefill batches the experts */
    if (xbytes > 0 && prompt > 0) rep_set_metric(out, "expert_bytes_per_prompt_token", xbytes / prompt);
    if (decode_ms > 0) {
        rep_set_metric(out, "decode_tps", decode_tok / (decode_ms / 1e3));
        /* KV positions a timed decode step attends, on average: the KV part
         * of the bytes each decoded token reads (roofline.h); unknown over HTTP */
        if (kv > 0) rep_set_metric(out, "decode_ctx_mean", kv / decode_tok);
    }
    if (synthetic) {
        /* The test's one request is its whole timed work (the KV depth is
         * evaluated before the clock), so its output rate is output_tps; and
         * its ttft_ms (below) is the prefill (ppN: the first logits ready) or
         * prefill and first token (tgN, pgN,M), as for a served prompt. */
        const req_result *q = &out->req[0];
        if (!q->error[0]) rep_set_metric(out, "tps", (q->prompt_tokens + q->gen_tokens) / (q->e2e_ms / 1e3));
        if (!q->error[0] && q->gen_tokens > 0) rep_set_metric(out, "output_tps", q->gen_tokens / (q->e2e_ms / 1e3));
    } else if (makespan_ms > 0) {
        rep_set_metric(out, "output_tps", gen / (makespan_ms / 1e3));
        rep_set_metric(out, "total_tps", (prompt + gen) / (makespan_ms / 1e3));
        served_metrics(out, makespan_ms, cfg);
    }
#define COLLECT(field, cond) do { size_t k = 0; for (int i = 0; i < out->n_req; i++) { \
        const req_result *q = &out->req[i]; if (!q->error[0] && (cond)) v[k++] = q->field; } \
        set_percentiles(out, #field, v, k); } while (0)
    COLLECT(ttft_ms, 1);
    if (!synthetic) {
        COLLECT(tpot_ms, q->gen_tokens > 1 && !isnan(q->tpot_ms)); /* NaN: one chunk over HTTP */
        COLLECT(e2e_ms, 1);
        COLLECT(queue_ms, !isnan(q->queue_ms)); /* over HTTP the queue is not visible */
        /* per-request throughput: generated tokens over the request's own service time */
        size_t k = 0;
        for (int i = 0; i < out->n_req; i++) {
            const req_result *q = &out->req[i];
            double service = q->e2e_ms - (isnan(q->queue_ms) ? 0 : q->queue_ms);
            if (!q->error[0] && service > 0) v[k++] = q->gen_tokens / (service / 1e3);
        }
        set_spread(out, "req_tps", v, k);
        /* per-request decode speed: the tokens after the first over the time they took (1 / TPOT) */
        k = 0;
        for (int i = 0; i < out->n_req; i++) {
            const req_result *q = &out->req[i];
            if (!q->error[0] && q->gen_tokens > 1 && q->decode_ms > 0) v[k++] = (q->gen_tokens - 1) / (q->decode_ms / 1e3);
        }
        set_spread(out, "req_decode_tps", v, k);
    }
#undef COLLECT
    spec_metrics(out); /* speculation, when the requests report it (spec_run.c) */
    size_t k = 0;
    for (int i = 0; i < out->n_req; i++)
        for (int j = 0; j < out->req[i].n_itl; j++) v[k++] = out->req[i].itl_ms[j];
    set_percentiles(out, "itl_ms", v, k);
    free(v);
}

/* Store the counters of one phase as rows (missing ones with their reason). */
static void counter_rows(rep_result *out, ctr_set *ctr, const char *phase, const ctr_phase *acc) {
    for (int i = 0; i < ctr_count(ctr) && out->n_ctr < CB_MAX_COUNTER_ROWS; i++) {
        counter_row *r = &out->ctr[out->n_ctr++];
        snprintf(r->phase, sizeof r->phase, "%s", phase);
        snprintf(r->name, sizeof r->name, "%s", ctr_name(ctr, i));
        snprintf(r->unit, sizeof r->unit, "%s", ctr_unit(ctr, i));
        r->ok = ctr_supported(ctr, i) && ctr_phase_valid(acc, i);
        r->value = r->ok ? acc->value[i] : NAN;
        snprintf(r->reason, sizeof r->reason, "%s",
                 r->ok ? "" : ctr_supported(ctr, i) ? "no interval of this phase was counted" : ctr_reason(ctr, i));
    }
}

/* The repetition's one session on one cache, its greedy sampler and (--spec)
 * its speculation: what synthetic tests run on. */
static int rep_session_open(const cx_model *m, const run_config *cfg, rep_state *st, char *err, size_t errlen) {
    cx_err e = {0};
    cx_sampler_params gp = cx_sampler_defaults();
    gp.temperature = 0; /* greedy: deterministic tokens, so the canary means something */
    gp.repeat_penalty = 1;
    /* One cache holding a context per sequence and (prefix cache on) as much
     * again of cached prefixes, which are dropped when it runs out. */
    cx_kv_params kp = cfg->kv ? *cfg->kv : cx_kv_defaults();
    int n_ctx = runner_n_ctx(m, cfg->n_ctx);
    /* each sequence takes whole blocks: round its context up to them first */
    int ctx_blocks = (n_ctx + CX_KV_BLOCK - 1) / CX_KV_BLOCK;
    kp.max_tokens = ctx_blocks * CX_KV_BLOCK * (kp.prefix_cache ? 2 : 1) * (cfg->n_seq > 1 ? cfg->n_seq : 1);
    cx_session_params sp = cx_session_defaults();
    sp.n_ctx = cfg->n_ctx;
    sp.n_threads = cfg->threads;
    if (cx_kv_cache_new(m, &kp, &st->cache, &e) || (sp.cache = st->cache, cx_session_new_ex(m, &sp, &st->s, &e)) ||
        cx_sampler_new(cx_model_get_info(m)->n_vocab, &gp, &st->greedy, &e) ||
        (cfg->drafter && cx_spec_new(cfg->drafter, cx_session_n_ctx(st->s), &st->sq.sp, &e)))
        return hx_fail_cx(err, errlen, &e);
    st->sq.m = m;
    st->sq.s = st->s;
    st->sq.greedy = st->greedy;
    st->sq.ctr = st->ctr;
    st->sq.decode = &st->decode;
    return 0;
}

/* The synthetic tests' repetition: one session on one cache, the test timed
 * in phases (prefill, decode) with their counters. */
static int synthetic_rep(const cx_model *m, const run_config *cfg, rep_state *st, rep_result *out, double *makespan,
                         char *err, size_t errlen) {
    if (rep_session_open(m, cfg, st, err, errlen)) return -1;
    req_result *q = &out->req[0];
    q->adapter = -1;
    if (cfg->progress) runner_progress(cfg, 0, 1);
    double t0 = runner_now_ms();
    int rc = cfg->n_seq ? serve_multiseq(st, q, err, errlen) : serve_synthetic(st, q, err, errlen);
    *makespan = runner_now_ms() - t0;
    /* a test generates exactly its tokens (ignoring end of text) or does not fit the context */
    q->max_tokens = cfg->test_gen * (cfg->n_seq > 1 ? cfg->n_seq : 1);
    snprintf(q->state, sizeof q->state, "%s", q->error[0] ? "failed" : "length");
    kv_metrics_sample(st->cache, &st->peak);
    return rc;
}

/* See runner.h. */
int runner_rep(const cx_model *m, const wl_workload *wl, const run_config *cfg, ctr_set *ctr, rep_result *out,
               char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    rep_state st;
    memset(&st, 0, sizeof st);
    st.m = m;
    st.cfg = cfg;
    st.ctr = ctr;
    ctr_phase_init(&st.prefill, "prefill");
    ctr_phase_init(&st.decode, "decode");
    int synthetic = cfg->mode == RUN_SYNTHETIC;
    int n = synthetic ? 1 : (int)wl->n;
    out->req = calloc((size_t)n, sizeof(req_result));
    if (!out->req) return hx_fail(err, errlen, "out of memory");
    out->n_req = n;
    env_peak_rss_reset();
    cpuload_snap load0, load1;
    cpuload_snapshot(&load0);
    ctr_snap all0;
    if (ctr) ctr_snapshot(ctr, &all0);
    double makespan = 0;
    cx_sched *sched = NULL;
    cx_kv_cache *cache = NULL;
    int rc;
    if (synthetic) {
        rc = synthetic_rep(m, cfg, &st, out, &makespan, err, errlen);
        cache = st.cache;
    } else { /* prompt sets and traces go through the request scheduler (which speculates with --spec) */
        rc = cfg->endpoint ? endpoint_rep(cfg->endpoint, wl, cfg, out, &makespan, err, errlen)
                           : serve_rep(m, wl, cfg, out, &makespan, &st.peak, &cache, &sched, err, errlen);
    }
    cpuload_snapshot(&load1);
    if (cfg->progress) fprintf(stderr, "\r%*s\r", 100, "");
    if (!rc) {
        summarize(out, makespan, synthetic, cfg);
        double other, steal;
        cpuload_settle(&load0, &load1); /* a repetition of a few ms cannot show other work: its trailing 0.25 s */
        cpuload_between(&load0, &load1, &other, &steal);
        if (other >= 0 && !cfg->endpoint) { /* over HTTP a local server is "other work": not a measure of the machine */
            rep_set_metric(out, "other_load_cpus", other);
            rep_set_metric(out, "steal_cpus", steal);
        }
        double preempt = cpuload_preempt_rate(&load0, &load1);
        if (preempt >= 0 && !cfg->endpoint) rep_set_metric(out, "preempted_per_s", preempt);
        if (!cfg->endpoint) {
            cx_pool_stats ps;
            if (st.s) {
                cx_session_pool_stats(st.s, &ps);
                pool_add(&st.pool, &ps);
            }
            if (sched) {
                cx_sched_stats ss;
                cx_sched_get_stats(sched, &ss);
                pool_add(&st.pool, &ss.pool);
            }
            pool_metrics(out, &st.pool);
        }
        if (cache) kv_metrics_store(cache, &st.peak, rep_get_metric(out, "prompt_tokens"), out);
        long rss = cfg->endpoint ? -1 : env_peak_rss_kib(); /* over HTTP the server's memory is not ours */
        if (rss > 0) rep_set_metric(out, "peak_rss_mib", (double)rss / 1024.0);
        const cx_model_info *mi = cfg->endpoint || !m ? NULL : cx_model_get_info(m); /* over HTTP there is no model here */
        if (mi && !strncmp(mi->weights_memory, "hugepages", 9) && mi->file_bytes)
            rep_set_metric(out, "weights_hugepage_pct", /* the copy is the file rounded up to 2 MiB: at most 100 */
                           fmin(100.0, 100.0 * (double)mi->weights_hugepage_bytes / (double)mi->file_bytes));
        if (ctr) {
            ctr_snap all1;
            ctr_phase total;
            ctr_phase_init(&total, "total");
            ctr_snapshot(ctr, &all1);
            ctr_accumulate(&total, &all0, &all1);
            /* a scheduler step mixes prefill and decode rows: served runs count the total only */
            counter_rows(out, ctr, "prefill", &st.prefill);
            counter_rows(out, ctr, "decode", &st.decode);
            counter_rows(out, ctr, "total", &total);
        }
    }
    cx_sched_free(sched);
    cx_spec_free(st.sq.sp);
    free(st.sq.hist);
    free(st.ids);
    cx_sampler_free(st.greedy);
    cx_session_free(st.s);
    cx_kv_cache_free(st.cache);
    return rc;
}
