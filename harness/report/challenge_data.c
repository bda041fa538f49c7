/*
 * challenge_data.c - the challenge report's figures (see challenge.h): the
 * runs of one configuration at each thread count, every prompt's medians
 * over repetitions, their spread over the set, and the projection to the
 * challenge machine. Reads the store only; writes nothing.
 */
#include "challenge.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"
#include "hx_err.h"

/* See challenge.h. */
chal_spread chal_spread_of(double *v, int n) {
    chal_spread s = {NAN, NAN, NAN, n};
    if (n <= 0) return s;
    stats_sort(v, (size_t)n);
    s.min = v[0];
    s.median = stats_percentile(v, (size_t)n, 50);
    s.max = v[n - 1];
    return s;
}

/* See challenge.h. A roof that cannot be computed (no bandwidth, no flops
 * count) is infinite: it does not bound the other. */
void chal_project(chal_proj *p) {
    double inf = INFINITY;
    int flops = p->flops_per_token > 0 && p->core_gops > 0;
    p->here_bw_roof = p->bytes_per_token > 0 && p->here_gbs > 0 ? p->here_gbs * 1e9 / p->bytes_per_token : inf;
    p->here_cpu_roof = flops ? p->here_threads * p->core_gops * 1e9 / p->flops_per_token : inf;
    p->here_roof = fmin(p->here_bw_roof, p->here_cpu_roof);
    p->efficiency = isinf(p->here_roof) ? NAN : p->here_decode_tps / p->here_roof;
    p->eff_used = isnan(p->efficiency) ? NAN : fmin(1.0, p->efficiency);
    p->target_bw_roof = p->bytes_per_token > 0 ? p->target_gbs * 1e9 / p->bytes_per_token : inf;
    p->target_cpu_roof = flops ? p->target_cores * p->core_gops * 1e9 / p->flops_per_token : inf;
    p->target_roof = fmin(p->target_bw_roof, p->target_cpu_roof);
    p->target_compute_bound = p->target_cpu_roof < p->target_bw_roof;
    p->projected_tps = isinf(p->target_roof) ? NAN : p->target_roof * p->eff_used;
}

/* The median of the n values (sorted in place); NAN when none. */
static double median_of(double *v, int n) {
    if (n <= 0) return NAN;
    stats_sort(v, (size_t)n);
    return stats_percentile(v, (size_t)n, 50);
}

/* Fill one prompt from its requests q[0..n) (one per repetition). */
static void prompt_of(const store_request_time *const *q, int n, chal_prompt *p, double *tmp) {
    memset(p, 0, sizeof *p);
    snprintf(p->item, sizeof p->item, "%s", q[0]->item);
    p->prompt_tokens = q[0]->prompt_tokens;
    p->reps = n;
    p->stable = 1;
    double *gen = tmp, *dec = tmp + n, *e2e = tmp + 2 * n, *ttft = tmp + 3 * n;
    int nd = 0;
    for (int i = 0; i < n; i++) {
        const store_request_time *r = q[i];
        if (r->failed) {
            snprintf(p->error, sizeof p->error, "%s", *r->error ? r->error : "no latency recorded");
            continue;
        }
        if (!p->served++) snprintf(p->hash, sizeof p->hash, "%s", r->token_hash);
        else if (strcmp(p->hash, r->token_hash)) p->stable = 0;
        gen[p->served - 1] = r->gen_tokens;
        double service = r->e2e_ms - (isnan(r->queue_ms) ? 0 : r->queue_ms);
        e2e[p->served - 1] = service > 0 ? r->gen_tokens / (service / 1e3) : NAN;
        ttft[p->served - 1] = r->ttft_ms;
        if (r->gen_tokens > 1 && r->decode_ms > 0) dec[nd++] = (r->gen_tokens - 1) / (r->decode_ms / 1e3);
    }
    p->gen_tokens = median_of(gen, p->served);
    p->e2e_tps = median_of(e2e, p->served);
    p->ttft_ms = median_of(ttft, p->served);
    p->decode_tps = median_of(dec, nd);
}

/* Load one run: its prompts (grouped by position over repetitions), spreads,
 * peak RSS and per-token figures. 0 or -1 (database, memory). */
static int run_of(store *s, int64_t id, chal_run *r) {
    store_request_time *q = NULL;
    int nq = 0;
    if (store_run_load(s, id, &r->info) != 1 || store_request_times(s, id, &q, &nq)) {
        free(q);
        return -1;
    }
    int n_idx = 0;
    for (int i = 0; i < nq; i++)
        if (q[i].idx + 1 > n_idx) n_idx = q[i].idx + 1;
    const store_request_time **by = malloc(sizeof *by * (size_t)(nq + 1));
    double *tmp = malloc(sizeof *tmp * (size_t)(4 * nq + 4)), *dec = malloc(sizeof *dec * (size_t)(3 * n_idx + 3));
    r->p = calloc((size_t)(n_idx + 1), sizeof *r->p);
    int rc = by && tmp && dec && r->p ? 0 : -1;
    for (int k = 0; k < n_idx && !rc; k++) {
        int m = 0;
        for (int i = 0; i < nq; i++)
            if (q[i].idx == k) by[m++] = &q[i];
        if (m) prompt_of(by, m, &r->p[r->n++], tmp);
    }
    if (!rc) { /* the set: over the prompts' medians */
        double *e2e = dec + n_idx, *ttft = dec + 2 * n_idx;
        int nd = 0, ne = 0, nt = 0;
        for (int i = 0; i < r->n; i++) {
            if (!isnan(r->p[i].decode_tps)) dec[nd++] = r->p[i].decode_tps;
            if (!isnan(r->p[i].e2e_tps)) e2e[ne++] = r->p[i].e2e_tps;
            if (!isnan(r->p[i].ttft_ms)) ttft[nt++] = r->p[i].ttft_ms;
        }
        r->decode = chal_spread_of(dec, nd);
        r->e2e = chal_spread_of(e2e, ne);
        r->ttft = chal_spread_of(ttft, nt);
        double rss[1024];
        size_t nr = store_metric_values(s, id, "peak_rss_mib", rss, 1024);
        r->peak_rss_mib = NAN;
        for (size_t i = 0; i < nr; i++) r->peak_rss_mib = isnan(r->peak_rss_mib) ? rss[i] : fmax(r->peak_rss_mib, rss[i]);
        r->bytes_per_token = store_metric_median(s, id, "bytes_per_token");
        r->flops_per_token = store_metric_median(s, id, "flops_per_token");
        r->decode_tps = store_metric_median(s, id, "decode_tps");
    }
    free(by);
    free(tmp);
    free(dec);
    free(q);
    return rc;
}

/* See challenge.h. */
int chal_best_run(const chal_run *runs, int n) {
    int best = -1;
    for (int k = 0; k < n; k++) {
        double v = runs[k].decode_tps;
        if (isnan(v)) continue;
        if (best < 0 || v > runs[best].decode_tps ||
            (v == runs[best].decode_tps && runs[k].info.threads < runs[best].info.threads))
            best = k;
    }
    return best;
}

/* See challenge.h. */
double chal_core_peak(const hw_peaks *hw, const char *isa, const char *type, char *fig, size_t n) {
    char base[32];
    snprintf(base, sizeof base, "%.*s", (int)strcspn(isa, "+"), isa);
    int fp = !strcmp(type, "f32") || !strcmp(type, "f16") || !strcmp(type, "bf16");
    int avx512 = !strncmp(base, "avx512", 6), vnni512 = !strcmp(base, "avx512vnni") || !strcmp(base, "avx512bf16");
    double v;
    if (!strcmp(base, "scalar")) {
        snprintf(fig, n, "fp32 scalar mul+add (the run forced scalar kernels)");
        return hw->fp32_scalar_1t;
    }
    if (fp && avx512 && !isnan(hw->fp32_avx512_1t)) {
        snprintf(fig, n, "fp32 AVX-512 FMA (the run's %s kernels)", base);
        return hw->fp32_avx512_1t;
    }
    if (!fp && vnni512 && !isnan(hw->int8_vnni_1t)) {
        snprintf(fig, n, "int8 AVX-512 VNNI dot (vpdpbusd; the run's %s kernels)", base);
        return hw->int8_vnni_1t;
    }
    v = fp ? hw->fp32_avx2_1t : hw->int8_avx2_1t;
    const char *what = fp ? "fp32 AVX2 FMA" : "int8 AVX2 dot (maddubs+madd)";
    if (!*base) snprintf(fig, n, "%s (the run's kernels were not recorded: assumed AVX2)", what);
    else if (avx512 && (fp || vnni512))
        snprintf(fig, n, "%s standing in for the run's %s kernels: hw row %lld has no AVX-512 %s figure", what, base,
                 (long long)hw->id, fp ? "FMA" : "VNNI");
    else if (avx512)
        snprintf(fig, n, "%s standing in for the run's %s kernels (512-bit maddubs+madd), whose peak `cortex-bench hw`"
                 " does not measure", what, base);
    else if (!fp && !strcmp(base, "avxvnni"))
        snprintf(fig, n, "%s standing in for the run's avxvnni kernels (VEX vpdpbusd), whose peak `cortex-bench hw`"
                 " does not measure", what);
    else snprintf(fig, n, "%s (the run's %s kernels)", what, base);
    if (isnan(v)) { /* no AVX2 here: the scalar figure is what the kernels get */
        snprintf(fig, n, "fp32 scalar mul+add (no AVX2 figure measured)");
        v = hw->fp32_scalar_1t;
    }
    return v;
}

/* The projection from the run that decoded fastest (chal_best_run), its hw
 * row and the options; d->have_proj, or the reason in d->no_proj. */
static void proj_of(store *s, const chal_opts *o, chal_data *d) {
    if (d->invalid) {
        snprintf(d->no_proj, sizeof d->no_proj, "run %lld is INVALID: no measurement to project from",
                 (long long)d->run[d->asked].info.id);
        return;
    }
    d->best = chal_best_run(d->run, d->n_runs);
    const chal_run *r = &d->run[d->best < 0 ? d->n_runs - 1 : d->best];
    hw_ref ref;
    if (r->info.endpoint[0]) {
        snprintf(d->no_proj, sizeof d->no_proj, "run %lld was measured over HTTP: the server's model and machine are"
                 " not known here", (long long)r->info.id);
        return;
    }
    if (d->best < 0) {
        snprintf(d->no_proj, sizeof d->no_proj, "no run recorded a decode speed (decode_tps)");
        return;
    }
    if (hw_store_lookup(s, NULL, r->info.env_id, r->info.threads, &ref) != 1 || hw_store_peaks(s, ref.id, &d->hw) != 1) {
        snprintf(d->no_proj, sizeof d->no_proj, "this machine has no `cortex-bench hw` row (its bandwidth and compute"
                 " roofs): run `cortex-bench hw` on it, then this report again");
        return;
    }
    d->have_hw = 1;
    if (isnan(r->bytes_per_token)) {
        snprintf(d->no_proj, sizeof d->no_proj, "run %lld recorded no bytes per decoded token (see the run's stderr:"
                 " the model's tensors could not be accounted for)", (long long)r->info.id);
        return;
    }
    chal_proj *p = &d->proj;
    memset(p, 0, sizeof *p);
    p->core_gops = chal_core_peak(&d->hw, r->info.isa, r->info.type, d->core_fig, sizeof d->core_fig);
    p->bytes_per_token = r->bytes_per_token;
    p->flops_per_token = r->flops_per_token;
    p->here_gbs = ref.read_gbs;
    p->here_threads = r->info.threads;
    p->here_decode_tps = r->decode_tps;
    p->target_gbs = o->gbs;
    p->target_cores = o->cores;
    chal_project(p);
    d->have_proj = 1;
}

/* See challenge.h. */
int chal_load(store *s, int64_t run_id, const chal_opts *opts, chal_data *d, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    store_run r;
    int found = store_run_load(s, run_id, &r);
    if (found < 0) return hx_fail(err, errlen, "report: runs: %s", store_errmsg(s));
    if (!found) return hx_fail(err, errlen, "no run %lld in the database", (long long)run_id);
    if (strcmp(r.kind, "prompts"))
        return hx_fail(err, errlen, "run %lld is '%s' (%s), not a prompt set: the challenge report needs a run of"
                       " --workload challenge (or another prompt set)", (long long)run_id, r.workload,
                       *r.kind ? r.kind : "unknown kind");
    if (strcmp(r.status, "complete"))
        return hx_fail(err, errlen, "run %lld is %s: the challenge report needs a complete run", (long long)run_id,
                       r.status);
    int64_t ids[CHAL_MAX_RUNS] = {run_id};
    /* An INVALID run is no measurement: reported alone, never beside (or against) its VALID siblings. */
    d->invalid = !strcmp(r.validity, "invalid");
    d->best = -1;
    int n = d->invalid ? 1 : store_run_siblings(s, run_id, ids, CHAL_MAX_RUNS);
    if (n <= 0) return hx_fail(err, errlen, "report: runs: %s", store_errmsg(s));
    for (int i = 0; i < n; i++) {
        if (run_of(s, ids[i], &d->run[d->n_runs])) {
            chal_free(d);
            return hx_fail(err, errlen, "report: requests of run %lld: %s", (long long)ids[i], store_errmsg(s));
        }
        if (ids[i] == run_id) d->asked = d->n_runs;
        d->n_runs++;
    }
    proj_of(s, opts, d);
    return 0;
}

/* See challenge.h. */
void chal_free(chal_data *d) {
    for (int i = 0; i < d->n_runs; i++) free(d->run[i].p);
    d->n_runs = 0;
}
