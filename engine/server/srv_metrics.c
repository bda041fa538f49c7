/*
 * srv_metrics.c - GET /metrics: the Prometheus text exposition (version
 * 0.0.4) of the server. Gauges and counters come from the scheduler and its
 * KV cache when scraped (cx_sched_get_stats, cx_kv_cache_stats); the latency
 * histograms and token counters are kept here, fed by each request's
 * statistics when it ends (srv_job.c's on_done). Names: docs/server.md.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

/* Bucket bounds in seconds: TTFT and end-to-end latency span ms to minutes,
 * inter-token gaps sub-ms to a second. */
static const double LAT_BOUNDS[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
static const double ITL_BOUNDS[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1};
#define NB(a) ((int)(sizeof a / sizeof a[0]))

/* An empty histogram over `bounds`. */
static void hist_init(srv_hist *h, const double *bounds, int n) {
    assert(n <= SRV_HIST_MAX && "the buckets fit the histogram");
    memset(h, 0, sizeof *h);
    h->bounds = bounds;
    h->n = n;
}

/* Count one observation of v seconds. */
static void hist_add(srv_hist *h, double v) {
    int i = 0;
    while (i < h->n && v > h->bounds[i]) i++;
    assert(i <= h->n && "the +Inf bucket is the last");
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

/* See srv.h. */
void srv_metrics_init(srv_metrics *mt) {
    memset(mt, 0, sizeof *mt);
    pthread_mutex_init(&mt->mu, NULL);
    hist_init(&mt->ttft, LAT_BOUNDS, NB(LAT_BOUNDS));
    hist_init(&mt->e2e, LAT_BOUNDS, NB(LAT_BOUNDS));
    hist_init(&mt->itl, ITL_BOUNDS, NB(ITL_BOUNDS));
}

/* See srv.h. */
void srv_metrics_free(srv_metrics *mt) { pthread_mutex_destroy(&mt->mu); }

/* See srv.h. A request that never produced a token adds no TTFT. */
void srv_metrics_record(srv_metrics *mt, const cx_request_stats *st) {
    pthread_mutex_lock(&mt->mu);
    mt->prompt_tokens += st->n_prompt;
    mt->generation_tokens += st->n_gen;
    if (st->t_first) hist_add(&mt->ttft, (double)(st->t_first - st->t_submit) * 1e-9);
    for (int i = 0; i + 1 < st->n_gen; i++) hist_add(&mt->itl, (double)st->itl_ns[i] * 1e-9);
    if (st->t_end) hist_add(&mt->e2e, (double)(st->t_end - st->t_submit) * 1e-9);
    pthread_mutex_unlock(&mt->mu);
}

/* See srv.h. */
void srv_metrics_http(srv_metrics *mt, int status) {
    if (status < 100 || status >= SRV_STATUS_MAX) return;
    pthread_mutex_lock(&mt->mu);
    mt->http[status]++;
    pthread_mutex_unlock(&mt->mu);
}

/* See srv.h. */
void srv_metrics_refused(srv_metrics *mt, int status) {
    if (status < 400 || status > 499) return;
    pthread_mutex_lock(&mt->mu);
    if (status == 429) mt->queue_full++;
    else mt->invalid++;
    pthread_mutex_unlock(&mt->mu);
}

/* See srv.h. */
void srv_metrics_conn(srv_metrics *mt, int d_open, int d_busy, int d_timeouts) {
    pthread_mutex_lock(&mt->mu);
    mt->conn_open += d_open;
    mt->conn_busy += d_busy;
    mt->conn_timeouts += d_timeouts;
    pthread_mutex_unlock(&mt->mu);
}

/* Write one metric's HELP and TYPE lines. */
static void head(FILE *f, const char *name, const char *type, const char *help) {
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Write histogram h as `name` (cumulative buckets, sum, count). */
static void hist_write(FILE *f, const char *name, const char *help, const srv_hist *h) {
    head(f, name, "histogram", help);
    uint64_t cum = 0;
    for (int i = 0; i < h->n; i++) {
        cum += h->counts[i];
        fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[i], (unsigned long long)cum);
    }
    cum += h->counts[h->n];
    fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9f\n%s_count %llu\n", name, (unsigned long long)cum, name, h->sum,
            name, (unsigned long long)h->count);
}

/* See srv.h. */
char *srv_metrics_text(srv_metrics *mt, cx_sched *s, size_t *len) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) return NULL;
    cx_sched_stats ss;
    cx_kv_stats kv;
    cx_sched_get_stats(s, &ss);
    cx_kv_cache_stats(cx_sched_cache(s), &kv);
    head(f, "cortex_requests_running", "gauge", "Requests holding a sequence slot (prefill or decode).");
    fprintf(f, "cortex_requests_running %d\n", ss.running);
    head(f, "cortex_requests_waiting", "gauge", "Requests in the scheduler's waiting queue.");
    fprintf(f, "cortex_requests_waiting %d\n", ss.waiting);
    pthread_mutex_lock(&mt->mu);
    int64_t invalid = mt->invalid, queue_full = mt->queue_full;
    pthread_mutex_unlock(&mt->mu);
    /* The scheduler's own count of refused submissions mixes a full queue with a prompt too long; the server
     * knows each answer's status, so it counts them apart (a client's fault, and the server's capacity). */
    head(f, "cortex_requests_total", "counter", "Completion requests by outcome (invalid: refused with a 4xx other than "
         "429 before running; queue_full: refused with 429).");
    const struct { const char *k; int64_t v; } out[] = {{"finished", ss.finished}, {"cancelled", ss.cancelled},
        {"timeout", ss.timed_out}, {"failed", ss.failed}, {"invalid", invalid}, {"queue_full", queue_full}};
    for (int i = 0; i < 6; i++) fprintf(f, "cortex_requests_total{outcome=\"%s\"} %lld\n", out[i].k, (long long)out[i].v);
    head(f, "cortex_preemptions_total", "counter", "Running sequences whose KV blocks were dropped to make room.");
    fprintf(f, "cortex_preemptions_total %lld\n", (long long)ss.preemptions);
    head(f, "cortex_prefill_tokens_total", "counter", "Prompt tokens computed by forward passes (recomputation included).");
    fprintf(f, "cortex_prefill_tokens_total %lld\n", (long long)ss.prefill_tokens);
    head(f, "cortex_decode_tokens_total", "counter", "Decode tokens computed by forward passes.");
    fprintf(f, "cortex_decode_tokens_total %lld\n", (long long)ss.decode_tokens);
    /* speculative decoding (cortex serve --spec): zero without a drafter */
    const struct { const char *name, *help; int64_t v; } spec[] = {
        {"cortex_spec_steps_total", "Sequence-steps decoded speculatively (a draft checked or not).", ss.spec_steps},
        {"cortex_spec_verify_steps_total", "Of them, those whose pass checked a draft.", ss.spec_verified},
        {"cortex_spec_verify_passes_total", "Forward passes that checked at least one draft.", ss.spec_passes},
        {"cortex_spec_drafted_tokens_total", "Draft tokens checked.", ss.spec_drafted},
        {"cortex_spec_accepted_tokens_total", "Draft tokens accepted.", ss.spec_accepted},
        {"cortex_spec_draft_passes_total", "Passes of the draft model (each drafts for every sequence drafting).",
         ss.spec_draft_passes},
        {"cortex_spec_tokens_total", "Tokens the speculative steps generated (accepted, plus one per step).", ss.spec_tokens},
    };
    for (int i = 0; i < NB(spec); i++) {
        head(f, spec[i].name, "counter", spec[i].help);
        fprintf(f, "%s %lld\n", spec[i].name, (long long)spec[i].v);
    }
    head(f, "cortex_spec_draft_seconds_total", "counter", "Time drafting.");
    fprintf(f, "cortex_spec_draft_seconds_total %.6f\n", (double)ss.spec_draft_ns / 1e9);
    head(f, "cortex_spec_verify_seconds_total", "counter", "Time in the forward passes that checked drafts.");
    fprintf(f, "cortex_spec_verify_seconds_total %.6f\n", (double)ss.spec_verify_ns / 1e9);
    /* the passes' threads: where their time went, and whether they found their cores shared (cx_pool_stats) */
    head(f, "cortex_pool_seconds_total", "counter", "Engine threads' time, summed over threads: running chunks (busy), "
         "workers waiting for work (idle), the stepping thread waiting for chunks others still ran (stall).");
    fprintf(f, "cortex_pool_seconds_total{state=\"busy\"} %.6f\ncortex_pool_seconds_total{state=\"idle\"} %.6f\n"
               "cortex_pool_seconds_total{state=\"stall\"} %.6f\n", (double)ss.pool.busy_ns / 1e9,
            (double)ss.pool.idle_ns / 1e9, (double)ss.pool.stall_ns / 1e9);
    head(f, "cortex_pool_waits_total", "counter", "Engine threads' waits, and those made as on a shared machine (the "
         "threads had been waiting for a core, so they spun briefly before sleeping).");
    fprintf(f, "cortex_pool_waits_total{kind=\"all\"} %lld\ncortex_pool_waits_total{kind=\"shared\"} %lld\n",
            (long long)ss.pool.waits, (long long)ss.pool.shared_waits);
    head(f, "cortex_kv_blocks", "gauge", "KV cache blocks held now, per tier.");
    static const char *tier[CX_KV_TIERS] = {"hot", "warm", "cold"};
    for (int t = 0; t < CX_KV_TIERS; t++) fprintf(f, "cortex_kv_blocks{tier=\"%s\"} %lld\n", tier[t], (long long)kv.blocks[t]);
    head(f, "cortex_kv_blocks_used", "gauge", "KV cache blocks in use (by sequences and cached prefixes).");
    fprintf(f, "cortex_kv_blocks_used %lld\n", (long long)kv.blocks_used);
    head(f, "cortex_kv_blocks_max", "gauge", "KV cache block ids (positions / 16, plus one).");
    fprintf(f, "cortex_kv_blocks_max %lld\n", (long long)kv.blocks_max);
    head(f, "cortex_kv_blocks_capacity", "gauge", "KV cache blocks the byte budgets always hold (what admission counts).");
    fprintf(f, "cortex_kv_blocks_capacity %lld\n", (long long)kv.blocks_capacity);
    head(f, "cortex_prefix_cache_hit_rate", "gauge", "Prompt blocks found in the prefix cache / looked up (0: none).");
    fprintf(f, "cortex_prefix_cache_hit_rate %.6f\n", kv.prefix_hit_rate);
    head(f, "cortex_adapters_registered", "gauge", "LoRA adapters the server knows by name.");
    fprintf(f, "cortex_adapters_registered %d\n", ss.lora_registered);
    head(f, "cortex_adapters_resident", "gauge", "LoRA adapters loaded.");
    fprintf(f, "cortex_adapters_resident %d\n", ss.lora_resident);
    head(f, "cortex_adapters_resident_bytes", "gauge", "Memory of the loaded adapters.");
    fprintf(f, "cortex_adapters_resident_bytes %lld\n", (long long)ss.lora_bytes);
    head(f, "cortex_adapter_loads_total", "counter", "Adapter loads (first uses and reloads).");
    fprintf(f, "cortex_adapter_loads_total %lld\n", (long long)ss.lora_loads);
    head(f, "cortex_adapter_evictions_total", "counter", "Idle adapters unloaded to stay within the budget.");
    fprintf(f, "cortex_adapter_evictions_total %lld\n", (long long)ss.lora_evictions);
    head(f, "cortex_adapter_load_seconds_total", "counter", "Time spent loading adapters.");
    fprintf(f, "cortex_adapter_load_seconds_total %.6f\n", (double)ss.lora_load_ns / 1e9);
    pthread_mutex_lock(&mt->mu);
    head(f, "cortex_prompt_tokens_total", "counter", "Prompt tokens of ended requests.");
    fprintf(f, "cortex_prompt_tokens_total %lld\n", (long long)mt->prompt_tokens);
    head(f, "cortex_generation_tokens_total", "counter", "Tokens generated by ended requests.");
    fprintf(f, "cortex_generation_tokens_total %lld\n", (long long)mt->generation_tokens);
    head(f, "cortex_http_responses_total", "counter", "HTTP responses by status code.");
    static const int ALWAYS[] = {200, 400, 401, 403, 404, 409, 413, 429, 500, 503, 504}; /* the codes the server sends */
    for (int c = 100; c < SRV_STATUS_MAX; c++) {
        int shown = mt->http[c] != 0;
        for (int i = 0; !shown && i < NB(ALWAYS); i++) shown = c == ALWAYS[i];
        if (shown) fprintf(f, "cortex_http_responses_total{code=\"%d\"} %lld\n", c, (long long)mt->http[c]);
    }
    head(f, "cortex_http_connections_open", "gauge", "HTTP connections open (served and busy).");
    fprintf(f, "cortex_http_connections_open %lld\n", (long long)mt->conn_open);
    head(f, "cortex_http_connections_busy_total", "counter", "Connections past --max-conns or --max-conns-per-ip (answered 503).");
    fprintf(f, "cortex_http_connections_busy_total %lld\n", (long long)mt->conn_busy);
    head(f, "cortex_http_connections_timed_out_total", "counter", "Connections closed because a request did not arrive in time.");
    fprintf(f, "cortex_http_connections_timed_out_total %lld\n", (long long)mt->conn_timeouts);
    hist_write(f, "cortex_time_to_first_token_seconds", "Submission to first token.", &mt->ttft);
    hist_write(f, "cortex_inter_token_latency_seconds", "Gaps between consecutive tokens of a request.", &mt->itl);
    hist_write(f, "cortex_e2e_request_latency_seconds", "Submission to the request's end.", &mt->e2e);
    pthread_mutex_unlock(&mt->mu);
    if (fclose(f)) {
        free(buf);
        return NULL;
    }
    return buf;
}
