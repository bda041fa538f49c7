/*
 * show_kv.c - the "KV cache" section of `cortex-bench run`, `show` and
 * `report`: the run's KV configuration and its kv_* metrics (medians over
 * repetitions) with their meaning and unit. Definitions: docs/metrics.md.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "show.h"
#include "store_read.h"

/* The kv_* metrics in display order. */
static const struct { const char *name, *label, *unit; } KV_ROWS[] = {
    {"kv_prefix_hit_rate", "prefix hit rate (blocks found / full prompt blocks looked up)", "fraction"},
    {"kv_prefix_token_frac", "prompt tokens reused from the prefix cache / prompt tokens", "fraction"},
    {"kv_prefix_tokens", "prompt tokens reused", "tokens"},
    {"kv_prefix_hits", "prefix blocks found", "blocks"},
    {"kv_prefix_lookups", "prefix blocks looked up", "blocks"},
    {"kv_cow_copies", "copy-on-write copies", ""},
    {"kv_hits_hot", "block reads served from hot", "reads"},
    {"kv_hits_warm", "block reads served from warm", "reads"},
    {"kv_hits_cold", "block reads served from cold", "reads"},
    {"kv_peak_bytes_hot", "peak hot bytes", "B"},
    {"kv_peak_bytes_warm", "peak warm bytes", "B"},
    {"kv_peak_bytes_cold", "peak cold bytes (in memory)", "B"},
    {"kv_peak_spilled_bytes", "peak spilled bytes", "B"},
    {"kv_zip_ratio", "zlib ratio (bytes in / out)", ""},
    {"kv_restores", "cold pages restored", "pages"},
    {"kv_restore_us_mean", "restore latency, mean", "us"},
    {"kv_demotions", "demotions", "blocks"},
    {"kv_promotions", "promotions", "blocks"},
    {"kv_spills", "spills", "pages"},
    {"kv_drops", "cached prefixes dropped", "blocks"},
};

/* See show.h. */
void show_kv(store *s, int64_t id, FILE *out) {
    store_run r;
    if (store_run_load(s, id, &r) != 1 || r.endpoint[0]) return; /* over HTTP the cache is the server's */
    const char *config = *r.kv_config ? r.kv_config : "default (recorded before schema v6)";
    fprintf(out, "### KV cache\n\n`%s`\n\n| metric | median | unit |\n| --- | ---: | --- |\n", config);
    for (size_t i = 0; i < sizeof KV_ROWS / sizeof KV_ROWS[0]; i++) {
        double v = store_metric_median(s, id, KV_ROWS[i].name);
        if (isnan(v)) continue;
        if (!strcmp(KV_ROWS[i].unit, "fraction")) fprintf(out, "| %s | %.3f (%.1f%%) | |\n", KV_ROWS[i].label, v, v * 100);
        else if (v == (double)(long long)v) fprintf(out, "| %s | %lld | %s |\n", KV_ROWS[i].label, (long long)v, KV_ROWS[i].unit);
        else fprintf(out, "| %s | %.3f | %s |\n", KV_ROWS[i].label, v, KV_ROWS[i].unit);
    }
    fprintf(out, "\n");
}
