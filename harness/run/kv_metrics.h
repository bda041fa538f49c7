/*
 * kv_metrics.h - a repetition's KV cache counters as metrics (rep_metrics,
 * then summary, so they are shown, compared, gated and trended like any
 * metric). Definitions: docs/metrics.md, "KV cache".
 */
#ifndef CB_KV_METRICS_H
#define CB_KV_METRICS_H

#include <stdint.h>

#include "cortex.h"
#include "results.h"

/* Peaks of the byte counts, sampled between requests (the counters
 * themselves are cumulative over the cache's life: one cache a repetition). */
typedef struct kv_peak {
    int64_t bytes[CX_KV_TIERS];
    int64_t spilled;
} kv_peak;

/* Fold the cache's current byte counts into the peaks. */
void kv_metrics_sample(cx_kv_cache *c, kv_peak *pk);

/* Store the counters of the repetition's cache as kv_* metrics of `out`;
 * `prompt_tokens` is the repetition's prompt tokens (the reuse fraction's
 * denominator). Call after summarize (and after a last kv_metrics_sample). */
void kv_metrics_store(cx_kv_cache *c, const kv_peak *pk, double prompt_tokens, rep_result *out);

#endif
