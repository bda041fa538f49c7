/*
 * kv_metrics.c - turn cx_kv_stats into per-repetition metrics (see kv_metrics.h).
 */
#include "kv_metrics.h"

#include <stdio.h>

static const char *const TIER[CX_KV_TIERS] = {"hot", "warm", "cold"};

/* See kv_metrics.h. */
void kv_metrics_sample(cx_kv_cache *c, kv_peak *pk) {
    cx_kv_stats s;
    cx_kv_cache_stats(c, &s);
    for (int t = 0; t < CX_KV_TIERS; t++)
        if (s.bytes[t] > pk->bytes[t]) pk->bytes[t] = s.bytes[t];
    if (s.spilled_bytes > pk->spilled) pk->spilled = s.spilled_bytes;
}

/* See kv_metrics.h. Prefix figures only with the prefix cache on, zlib and
 * restore figures only when something was compressed or restored, so a
 * missing metric means "does not apply", never a made-up 0. */
void kv_metrics_store(cx_kv_cache *c, const kv_peak *pk, double prompt_tokens, rep_result *out) {
    cx_kv_stats s;
    cx_kv_cache_stats(c, &s);
    char key[40];
    for (int t = 0; t < CX_KV_TIERS; t++) {
        snprintf(key, sizeof key, "kv_hits_%s", TIER[t]);
        rep_set_metric(out, key, (double)s.hits[t]);
        snprintf(key, sizeof key, "kv_peak_bytes_%s", TIER[t]);
        rep_set_metric(out, key, (double)pk->bytes[t]);
    }
    rep_set_metric(out, "kv_peak_spilled_bytes", (double)pk->spilled);
    rep_set_metric(out, "kv_demotions", (double)s.demotions);
    rep_set_metric(out, "kv_promotions", (double)s.promotions);
    rep_set_metric(out, "kv_spills", (double)s.spills);
    rep_set_metric(out, "kv_drops", (double)s.drops);
    rep_set_metric(out, "kv_restores", (double)s.restores);
    if (s.restores > 0) rep_set_metric(out, "kv_restore_us_mean", (double)s.restore_ns / 1e3 / (double)s.restores);
    if (s.zip_out > 0) rep_set_metric(out, "kv_zip_ratio", (double)s.zip_in / (double)s.zip_out);
    if (s.prefix_cache) {
        rep_set_metric(out, "kv_prefix_lookups", (double)s.prefix_lookups);
        rep_set_metric(out, "kv_prefix_hits", (double)s.prefix_hits);
        rep_set_metric(out, "kv_prefix_hit_rate", s.prefix_lookups ? (double)s.prefix_hits / (double)s.prefix_lookups : 0.0);
        rep_set_metric(out, "kv_prefix_tokens", (double)s.prefix_tokens);
        if (prompt_tokens > 0) rep_set_metric(out, "kv_prefix_token_frac", (double)s.prefix_tokens / prompt_tokens);
        rep_set_metric(out, "kv_cow_copies", (double)s.cow_copies);
    }
}
